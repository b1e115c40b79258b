/* The communicator object and the fixed-order sum (comm.c), shared with the
 * parallel layers (parallel.c). Internal. */
#ifndef QP_COMM_INTERNAL_H
#define QP_COMM_INTERNAL_H

#include "comm.h"

struct qp_comm {
    qp_context *ctx;
    const qp_comm_ops *ops;      /* MPI: rank, size, agreement, host data    */
    void *state;
    const qp_comm_ops *dev_ops;  /* NCCL when it is the communicator, or NULL */
    void *dev_state;
    qp_comm_host host, host_dev;
    const char *backend_path;    /* QPORT_BACKEND_PATH (env.c) or NULL      */
    double timeout_s;            /* QPORT_COMM_TIMEOUT (env.c)              */
    char name[160];
};

/* out[i] = rnd_dt(fp32 sum over r = 0..n_ranks-1, in order, of
 * gathered[r][i]); gathered is [n_ranks][n] elements of dt. */
qp_status qp_comm_sum_gathered(qp_dtype dt, const void *gathered, int n_ranks, size_t n, void *out);

#endif
