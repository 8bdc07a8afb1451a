/*
 * UCX-Aptus: many small unexpected messages. Rank 0 sends N 4-byte
 * messages to rank 1 before rank 1 posts any receive; both then meet in
 * MPI_Barrier, and only then does rank 1 receive them all and check their
 * order. UCP keeps the descriptor of every unexpected message meanwhile: a
 * transport whose receive buffers they pin wedges in the barrier.
 *
 * Usage: unexpected [-n COUNT] (default 20000)
 * Each rank prints "unexpected rank R/N pid P: OK|FAIL ..." and rank 0 the
 * verdict "unexpected: PASS|FAIL ...".
 */
#include "mpi_test.h"

#include <mpi.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long count = 20000, errors = 0, total = 0, i;
    int rank, size, value, opt;
    double t0, secs;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt == 'n') {
            count = (long)mpi_test_parse_size("unexpected", optarg);
        } else {
            fprintf(stderr, "usage: unexpected [-n COUNT]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (size < 2) {
        fprintf(stderr, "unexpected: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    t0 = MPI_Wtime();
    if (rank == 0) {
        for (i = 0; i < count; ++i) {
            value = (int)i;
            MPI_Send(&value, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (i = 0; i < count; ++i) {
            MPI_Recv(&value, 1, MPI_INT, 0, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            errors += (value != (int)i);
        }
    }
    secs = MPI_Wtime() - t0;
    printf("unexpected rank %d/%d pid %d: %s count=%ld errors=%ld secs=%.3f\n",
           rank, size, (int)getpid(), errors ? "FAIL" : "OK", count, errors,
           secs);
    fflush(stdout);
    MPI_Reduce(&errors, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("unexpected: %s (%ld messages held unexpected, %ld out of "
               "order)\n",
               total ? "FAIL" : "PASS", count, total);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}
