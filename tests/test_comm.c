/* The communicator API under `mpirun -n 2` (suite mpi): rank and
 * size, the byte collectives, the fixed-order all-reduce (the same bits on
 * every rank, equal to the fp32 rank-order sum rounded once), the status
 * agreement (one rank's failure becomes every rank's, with its message),
 * argument errors, and NCCL's reason where there is no GPU. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    qp_comm *c = NULL;
    CHECK(qp_comm_create(ctx, "bogus", &c) == QP_ERR_INVALID_ARGUMENT && !c, "kind");
    CHECK(strstr(qp_last_error(ctx), "expected mpi, nccl or auto"), "%s", qp_last_error(ctx));
    /* no plugin: no communicator, and the reason */
    const char *bp = getenv("QPORT_BACKEND_PATH");
    char *saved = bp ? strdup(bp) : NULL;
    setenv("QPORT_BACKEND_PATH", "/nonexistent-qport-plugins", 1);
    CHECK(qp_comm_create(ctx, "mpi", &c) == QP_ERR_UNSUPPORTED && !c, "no plugin");
    CHECK(strstr(qp_last_error(ctx), "communicator mpi: libqport-mpi.so not found in QPORT_BACKEND_PATH"), "%s",
          qp_last_error(ctx));
    if (saved) setenv("QPORT_BACKEND_PATH", saved, 1);
    else unsetenv("QPORT_BACKEND_PATH");
    free(saved);
    qp_status st = qp_comm_create(ctx, "mpi", &c);
    CHECK(st == QP_OK, "mpi: %s", qp_last_error(ctx));
    if (st) return tu_finish("comm");
    int rank = qp_comm_rank(c), size = qp_comm_size(c);
    CHECK(size == 2 && rank >= 0 && rank < 2, "rank %d of %d (run under mpirun -n 2)", rank, size);
    CHECK(!strncmp(qp_comm_name(c), "mpi (", 5), "%s", qp_comm_name(c));
    CHECK(qp_comm_barrier(c) == QP_OK, "barrier");

    /* allgather: rank order */
    int32_t mine[3] = {rank, 10 * rank, -rank}, all[6];
    CHECK(qp_comm_allgather(c, mine, sizeof mine, all) == QP_OK, "allgather");
    for (int r = 0; r < 2; r++) CHECK(all[3 * r] == r && all[3 * r + 1] == 10 * r && all[3 * r + 2] == -r, "allgather rank %d", r);
    /* broadcast from rank 1 */
    char msg[16] = "";
    if (rank == 1) strcpy(msg, "from rank 1");
    CHECK(qp_comm_broadcast(c, msg, sizeof msg, 1) == QP_OK && !strcmp(msg, "from rank 1"), "broadcast: '%s'", msg);
    CHECK(qp_comm_broadcast(c, msg, sizeof msg, 2) == QP_ERR_INVALID_ARGUMENT, "root out of range");

    /* the ordered all-reduce: fp32 sum in rank order, one rounding */
    enum { N = 4096 };
    uint16_t x[N], y[N], ys[2 * N];
    float part[2][N];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) {
            /* values of very different sizes, so that roundings matter */
            float v = (float)((i * 2654435761u + (unsigned)r * 40503u) % 20011u) / 20011.0f - 0.5f;
            part[r][i] = qp_fp16_round(v * (float)(1 << ((i + r) % 13)));
        }
    for (int i = 0; i < N; i++) x[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, part[rank][i]);
    CHECK(qp_comm_allreduce_sum_ordered(c, QP_DTYPE_F16, x, y, N) == QP_OK, "ordered allreduce");
    int bad = 0;
    for (int i = 0; i < N; i++) bad += y[i] != (uint16_t)qp_format_encode(QP_DTYPE_F16, 0.0f + part[0][i] + part[1][i]);
    CHECK(!bad, "%d sums differ from rnd(fp32 rank-order sum)", bad);
    CHECK(qp_comm_allgather(c, y, sizeof y, ys) == QP_OK && !memcmp(ys, ys + N, sizeof y), "ranks got different bits");
    float f = (float)rank + 0.25f, fs = 0;
    CHECK(qp_comm_allreduce_sum_ordered(c, QP_DTYPE_F32, &f, &fs, 1) == QP_OK && fs == 1.5f, "f32 sum %g", (double)fs);
    CHECK(qp_comm_allreduce_sum_ordered(c, QP_DTYPE_I8, x, y, 1) == QP_ERR_INVALID_ARGUMENT, "i8");

    /* agreement: all OK; then rank 1 fails and both see rank 1's message */
    CHECK(qp_comm_agree(c, QP_OK) == QP_OK, "agree ok");
    qp_status local = QP_OK;
    if (rank == 1) {
        qp_comm *dummy = NULL;
        local = qp_comm_create(ctx, "bogus-on-rank-1", &dummy); /* fails with a message */
    }
    st = qp_comm_agree(c, local);
    CHECK(st == QP_ERR_INVALID_ARGUMENT, "a failing rank must fail every rank: %s", qp_status_str(st));
    CHECK(!strncmp(qp_last_error(ctx), "rank 1: ", 8) && strstr(qp_last_error(ctx), "bogus-on-rank-1"), "message: %s",
          qp_last_error(ctx));
    /* a parallel layer with no model on rank 0 only: both fail, both name rank 0 */
    qp_device *dev = NULL;
    CHECK(qp_device_find(ctx, "cpu", &dev) == QP_OK, "cpu");
    qp_par_linear *pl = NULL;
    st = qp_par_linear_create(c, dev, NULL, "model.layers.0.mlp.down_proj", NULL, NULL, &pl);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !pl, "NULL model: %s", qp_status_str(st));
    CHECK(strstr(qp_last_error(ctx), "rank 0: "), "%s", qp_last_error(ctx));
    CHECK(qp_layer_is_row_parallel("model.layers.3.mlp.down_proj") && !qp_layer_is_row_parallel("x.qkv_proj"), "row");

    /* NCCL without a GPU: every rank refuses it with the reason */
    qp_comm *n = NULL;
    st = qp_comm_create(ctx, "nccl", &n);
    if (st == QP_OK) {
        printf("rank %d: nccl available: %s\n", rank, qp_comm_name(n));
        qp_comm_destroy(n);
    } else {
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(ctx), "nccl"), "%s: %s", qp_status_str(st), qp_last_error(ctx));
        printf("rank %d: nccl: %s\n", rank, qp_last_error(ctx));
    }
    /* auto: NCCL where every rank has it, else MPI */
    qp_comm *a = NULL;
    CHECK(qp_comm_create(ctx, "auto", &a) == QP_OK, "auto: %s", qp_last_error(ctx));
    if (a) printf("rank %d: auto: %s\n", rank, qp_comm_name(a));
    qp_comm_destroy(a);
    qp_comm_destroy(c);
    qp_context_destroy(ctx);
    return tu_finish("comm");
}
