/*
 * UCX-Aptus: many unexpected messages held by the MPI library.
 *
 * Rank 0 sends N small messages (default 20,000 x 4 bytes) to rank 1 before
 * rank 1 posts any receive; both enter MPI_Barrier; then rank 1 receives
 * them all and checks them. UCP keeps the transport's receive descriptor of
 * every unexpected message, so a transport whose receive pool cannot grow
 * stops receiving (ACKs included) and its peers time out.
 *
 * Prints "unexpected: PASS ..." or "unexpected: FAIL ..." from rank 1, and
 * "unexpected rank R/N pid P: OK|FAIL" from every rank.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, n = 20000, i, bad = 0;
    double t0, t1;
    int v;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1) {
        n = atoi(argv[1]);
    }
    if (size < 2) {
        fprintf(stderr, "unexpected: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    t0 = MPI_Wtime();
    if (rank == 0) {
        for (i = 0; i < n; ++i) {
            v = i;
            MPI_Send(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (i = 0; i < n; ++i) {
            MPI_Recv(&v, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            bad += (v != i);
        }
        t1 = MPI_Wtime();
        if (bad) {
            printf("unexpected: FAIL %d of %d messages wrong\n", bad, n);
        } else {
            printf("unexpected: PASS %d messages held, then received, in "
                   "%.3f s\n",
                   n, t1 - t0);
        }
        fflush(stdout);
    }
    printf("unexpected rank %d/%d pid %d: %s\n", rank, size, (int)getpid(),
           bad ? "FAIL" : "OK");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return bad != 0;
}
