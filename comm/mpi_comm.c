/*
 * libqport-mpi.so (issue 21): the MPI communicator, over the host buffers
 * of any device. Linked against the MPI of the build machine (Open MPI or
 * MPICH from Debian); where that library is missing at run time the plugin
 * does not load and the core says so. MPI is initialised here unless the
 * application already did (then it is left to the application), and
 * finalised at exit; each communicator is a duplicate of MPI_COMM_WORLD
 * with errors returned, never fatal, so a failed call is a status.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

typedef struct mpi_state {
    const qp_comm_host *host;
    MPI_Comm comm;
    int rank, size;
} mpi_state;

static int we_initialized;

static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
}

static qp_status fail(const mpi_state *s, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "mpi: %s failed: %s", what, msg);
}

static qp_status mpi_init(const qp_comm_host *host, void **out) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (fin) return host->error(host->ctx, QP_ERR_UNSUPPORTED, "mpi: MPI was already finalized in this process");
    if (!inited) {
        int provided = 0;
        /* MPI_THREAD_SERIALIZED: calls come from one thread at a time
         * (the core never issues two collectives on one communicator at once) */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
            return host->error(host->ctx, QP_ERR_UNSUPPORTED, "mpi: MPI_Init_thread failed (no launcher or runtime?)");
        if (!we_initialized) atexit(finalize_at_exit);
        we_initialized = 1;
    }
    mpi_state *s = calloc(1, sizeof *s);
    if (!s) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    s->host = host;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    if (rc != MPI_SUCCESS) { qp_status st = fail(s, rc, "MPI_Comm_dup"); free(s); return st; }
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
    *out = s;
    return QP_OK;
}

static void mpi_shutdown(void *st) {
    mpi_state *s = st;
    if (!s) return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&s->comm);
    free(s);
}

static int mpi_rank(void *st) { return ((mpi_state *)st)->rank; }
static int mpi_size(void *st) { return ((mpi_state *)st)->size; }

static void mpi_describe(void *st, char *out, size_t cap) {
    (void)st;
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    /* "Open MPI v4.1.4, package: ..." -> up to the first comma or newline */
    size_t n = strcspn(v, ",\n");
    snprintf(out, cap, "%.*s", (int)n, v);
}

static qp_status mpi_barrier(void *st) {
    mpi_state *s = st;
    int rc = MPI_Barrier(s->comm);
    return rc == MPI_SUCCESS ? QP_OK : fail(s, rc, "MPI_Barrier");
}

/* MPI counts are int: large messages go as MPI_BYTE in chunks of a
 * contiguous type. Our messages stay far below 2 GiB; refuse beyond. */
static int count_of(size_t bytes) { return bytes > (size_t)0x7fffffff ? -1 : (int)bytes; }

static qp_status too_big(mpi_state *s, size_t bytes) {
    return s->host->error(s->host->ctx, QP_ERR_INVALID_ARGUMENT, "mpi: message of %zu bytes (at most 2 GiB)", bytes);
}

static qp_status mpi_broadcast(void *st, void *buf, size_t bytes, int root) {
    mpi_state *s = st;
    int n = count_of(bytes);
    if (n < 0) return too_big(s, bytes);
    int rc = MPI_Bcast(buf, n, MPI_BYTE, root, s->comm);
    return rc == MPI_SUCCESS ? QP_OK : fail(s, rc, "MPI_Bcast");
}

static qp_status mpi_allgather(void *st, const void *send, size_t bytes, void *recv) {
    mpi_state *s = st;
    int n = count_of(bytes);
    if (n < 0 || bytes * (size_t)s->size > (size_t)0x7fffffff) return too_big(s, bytes * (size_t)s->size);
    int rc = MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, s->comm);
    return rc == MPI_SUCCESS ? QP_OK : fail(s, rc, "MPI_Allgather");
}

static qp_status mpi_allreduce(void *st, qp_dtype dt, const void *send, void *recv, size_t n) {
    mpi_state *s = st;
    /* MPI has no fp16/bf16 type in the standard (Open MPI 4): F32 only */
    if (dt != QP_DTYPE_F32)
        return s->host->error(s->host->ctx, QP_ERR_UNSUPPORTED, "mpi: allreduce_sum of dtype %d (MPI has F32 only)",
                              (int)dt);
    int c = count_of(n);
    if (c < 0) return too_big(s, n * 4);
    int rc = MPI_Allreduce(send, recv, c, MPI_FLOAT, MPI_SUM, s->comm);
    return rc == MPI_SUCCESS ? QP_OK : fail(s, rc, "MPI_Allreduce");
}

static const qp_comm_ops ops = {
    .abi_version = QP_COMM_ABI_VERSION,
    .struct_size = sizeof(qp_comm_ops),
    .name = "mpi",
    .init = mpi_init,
    .shutdown = mpi_shutdown,
    .rank = mpi_rank,
    .size = mpi_size,
    .describe = mpi_describe,
    .barrier = mpi_barrier,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .allreduce_sum = mpi_allreduce,
};

__attribute__((visibility("default"))) const qp_comm_ops *qp_comm_entry(void) { return &ops; }
