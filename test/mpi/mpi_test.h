/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: what the MPI test programs share.
 */
#ifndef APTUS_MPI_TEST_H_
#define APTUS_MPI_TEST_H_

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* A byte count with an optional k or m suffix; prog's usage error (exit
 * status 2) for anything else. */
static inline size_t mpi_test_parse_size(const char *prog, const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);

    switch (tolower((unsigned char)*end)) {
    case 'k':
        v <<= 10;
        break;
    case 'm':
        v <<= 20;
        break;
    case '\0':
        break;
    default:
        fprintf(stderr, "%s: bad size '%s'\n", prog, s);
        exit(2);
    }
    return (size_t)v;
}

#endif
