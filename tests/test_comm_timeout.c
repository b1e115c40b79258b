/* A frozen rank under `mpirun -n 2` (suite mpi): rank 1 stops
 * itself (SIGSTOP) before a collective; rank 0's barrier must fail after
 * QPORT_COMM_TIMEOUT naming rank 1, and rank 0 then ends with a non-zero
 * status, which ends the job (tests/test_comm_timeout.sh checks that
 * mpirun returns, long before its own timeout). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    qp_comm *c = NULL;
    if (qp_comm_create(ctx, "mpi", &c)) { fprintf(stderr, "%s\n", qp_last_error(ctx)); return 1; }
    int rank = qp_comm_rank(c);
    CHECK(qp_comm_barrier(c) == QP_OK, "first barrier: %s", qp_last_error(ctx));
    if (rank == 1) {
        raise(SIGSTOP); /* frozen: never reaches the next collective */
        return 0;       /* woken by the launcher as it ends the job */
    }
    float x = 1, y[2];
    qp_status st = qp_comm_allgather(c, &x, sizeof x, y);
    CHECK(st == QP_ERR_DEVICE && strstr(qp_last_error(ctx), "timed out after 2 s (QPORT_COMM_TIMEOUT) on rank 0 of 2: rank 1 did not answer"),
          "allgather with a frozen rank: %s: %s", qp_status_str(st), qp_last_error(ctx));
    printf("rank %d: %s\n", rank, qp_last_error(ctx));
    st = qp_comm_barrier(c);
    CHECK(st == QP_ERR_DEVICE && strstr(qp_last_error(ctx), "broken"), "after a timeout: %s", qp_last_error(ctx));
    fflush(stdout);
    /* failures end the job; success is this rank's non-zero exit too */
    return tu_finish("comm-timeout") ? 1 : 3;
}
