/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * UCX-Aptus: the broadcast's progress thread.
 *
 * One thread per process serves every communicator's engine while the
 * application is not inside MPI_Bcast: it answers repairs and polls, sends
 * the lazy ACKs when they fall due and repairs what a rank lacks. It
 * sleeps in poll() on the engines' sockets, with a timeout of ack_delay
 * while a timer may be due and of 50 ms otherwise, and never calls MPI.
 */
#ifndef APTUS_BCAST_PROGRESS_H_
#define APTUS_BCAST_PROGRESS_H_

#include "bcast_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Serve e from now on (starts the thread on first use). 0 or -errno. */
int aptus_bc_progress_add(aptus_bc_engine_t *e);

/* Stop serving e; on return the thread no longer touches it. */
void aptus_bc_progress_remove(aptus_bc_engine_t *e);

/* Stop the thread (MPI_Finalize); engines must have been removed. */
void aptus_bc_progress_stop(void);

#ifdef __cplusplus
}
#endif

#endif
