/*
 * libqport-mpi.so: the MPI communicator, over the host buffers
 * of any device. Linked against the MPI of the build machine (Open MPI or
 * MPICH from Debian); where that library is missing at run time the plugin
 * does not load and the core says so. MPI is initialised here unless the
 * application already did (then it is left to the application), and
 * finalised at exit; each communicator is a duplicate of MPI_COMM_WORLD
 * with errors returned, never fatal, so a failed call is a status.
 *
 * Every collective is non-blocking under a deadline (QPORT_COMM_TIMEOUT,
 * host->timeout_s): a frozen rank would otherwise leave the
 * others spinning forever. Each rank also sends every other a small
 * "arrived" note with the collective; at the deadline the notes that did
 * not come name the ranks that did not answer, the call fails with them,
 * and the communicator is broken: later calls fail at once, and MPI is not
 * finalized at exit (MPI_Finalize would wait for the frozen rank too), so
 * the process ends, the launcher sees it and ends the job.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"

#define TAG_ARRIVED 29301 /* the "arrived" notes (any tag below MPI_TAG_UB's minimum 32767) */

typedef struct mpi_state {
    const qp_comm_host *host;
    MPI_Comm comm;
    int rank, size;
    double timeout_s;
    unsigned seq, *seq_in;  /* the collective's number; the notes received */
    MPI_Request *req;       /* 2 (size - 1) notes + the collective          */
    int broken;             /* a collective timed out                      */
} mpi_state;

static int we_initialized, any_broken;

static void finalize_at_exit(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !any_broken) MPI_Finalize();
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static qp_status fail(const mpi_state *s, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "mpi: %s failed: %s", what, msg);
}

/* Waits for the collective `coll` (already started) under the deadline,
 * with every rank's "arrived" note; polls with a growing sleep (at most
 * 1 ms) rather than spinning a core. */
static qp_status wait_coll(mpi_state *s, MPI_Request coll, const char *what) {
    int k = 0;
    s->seq++;
    for (int p = 0; p < s->size; p++) {
        if (p == s->rank) continue;
        MPI_Isend(&s->seq, 1, MPI_UNSIGNED, p, TAG_ARRIVED, s->comm, &s->req[k++]);
        MPI_Irecv(&s->seq_in[p], 1, MPI_UNSIGNED, p, TAG_ARRIVED, s->comm, &s->req[k++]);
    }
    s->req[k++] = coll;
    double deadline = now_s() + s->timeout_s;
    long nap_ns = 0;
    for (;;) {
        int done = 0, rc = MPI_Testall(k, s->req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return fail(s, rc, what);
        if (done) return QP_OK;
        if (now_s() > deadline) break;
        if (nap_ns) nanosleep(&(struct timespec){0, nap_ns}, NULL);
        nap_ns = nap_ns ? (nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2) : 1000;
    }
    /* which notes did not come: those ranks never reached the collective */
    char who[512] = "";
    size_t o = 0;
    int missing = 0;
    for (int p = 0, i = 0; p < s->size; p++) {
        if (p == s->rank) continue;
        int got = 0;
        MPI_Test(&s->req[2 * i + 1], &got, MPI_STATUS_IGNORE);
        i++;
        if (!got && o < sizeof who - 16) {
            o += (size_t)snprintf(who + o, sizeof who - o, "%s%d", missing ? ", " : "", p);
            missing++;
        }
    }
    s->broken = any_broken = 1; /* its requests stay posted: never freed, never finalized */
    if (missing)
        return s->host->error(s->host->ctx, QP_ERR_DEVICE,
                              "mpi: %s timed out after %g s (QPORT_COMM_TIMEOUT) on rank %d of %d: rank%s %s did not "
                              "answer",
                              what, s->timeout_s, s->rank, s->size, missing > 1 ? "s" : "", who);
    return s->host->error(s->host->ctx, QP_ERR_DEVICE,
                          "mpi: %s timed out after %g s (QPORT_COMM_TIMEOUT) on rank %d of %d: every rank arrived but "
                          "the collective did not complete",
                          what, s->timeout_s, s->rank, s->size);
}

static qp_status broken(const mpi_state *s, const char *what) {
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "mpi: %s: the communicator is broken (an earlier collective timed out)",
                          what);
}

static qp_status qp_mpi_init(const qp_comm_host *host, void **out) {
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
    s->timeout_s = host->struct_size >= offsetof(qp_comm_host, timeout_s) + sizeof(double) && host->timeout_s > 0
                       ? host->timeout_s : 300;
    s->seq_in = calloc((size_t)s->size, sizeof *s->seq_in);
    s->req = calloc(2 * (size_t)s->size + 1, sizeof *s->req);
    if (!s->seq_in || !s->req) {
        MPI_Comm_free(&s->comm);
        free(s->seq_in); free(s->req); free(s);
        return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *out = s;
    return QP_OK;
}

static void qp_mpi_shutdown(void *st) {
    mpi_state *s = st;
    if (!s || s->broken) return; /* posted requests point into it: kept */
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Comm_free(&s->comm);
    free(s->seq_in);
    free(s->req);
    free(s);
}

static int qp_mpi_rank(void *st) { return ((mpi_state *)st)->rank; }
static int qp_mpi_size(void *st) { return ((mpi_state *)st)->size; }

static void qp_mpi_describe(void *st, char *out, size_t cap) {
    (void)st;
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(v, &len);
    /* "Open MPI v4.1.4, package: ..." -> up to the first comma or newline */
    size_t n = strcspn(v, ",\n");
    snprintf(out, cap, "%.*s", (int)n, v);
}

static qp_status qp_mpi_barrier(void *st) {
    mpi_state *s = st;
    if (s->broken) return broken(s, "MPI_Barrier");
    MPI_Request r;
    int rc = MPI_Ibarrier(s->comm, &r);
    return rc == MPI_SUCCESS ? wait_coll(s, r, "MPI_Barrier") : fail(s, rc, "MPI_Barrier");
}

/* MPI counts are int: large messages go as MPI_BYTE in chunks of a
 * contiguous type. Our messages stay far below 2 GiB; refuse beyond. */
static int count_of(size_t bytes) { return bytes > (size_t)0x7fffffff ? -1 : (int)bytes; }

static qp_status too_big(mpi_state *s, size_t bytes) {
    return s->host->error(s->host->ctx, QP_ERR_INVALID_ARGUMENT, "mpi: message of %zu bytes (at most 2 GiB)", bytes);
}

static qp_status qp_mpi_broadcast(void *st, void *buf, size_t bytes, int root) {
    mpi_state *s = st;
    int n = count_of(bytes);
    if (n < 0) return too_big(s, bytes);
    if (s->broken) return broken(s, "MPI_Bcast");
    MPI_Request r;
    int rc = MPI_Ibcast(buf, n, MPI_BYTE, root, s->comm, &r);
    return rc == MPI_SUCCESS ? wait_coll(s, r, "MPI_Bcast") : fail(s, rc, "MPI_Bcast");
}

static qp_status qp_mpi_allgather(void *st, const void *send, size_t bytes, void *recv) {
    mpi_state *s = st;
    int n = count_of(bytes);
    if (n < 0 || bytes * (size_t)s->size > (size_t)0x7fffffff) return too_big(s, bytes * (size_t)s->size);
    if (s->broken) return broken(s, "MPI_Allgather");
    MPI_Request r;
    int rc = MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, s->comm, &r);
    return rc == MPI_SUCCESS ? wait_coll(s, r, "MPI_Allgather") : fail(s, rc, "MPI_Allgather");
}

static qp_status qp_mpi_allreduce_sum(void *st, qp_dtype dt, const void *send, void *recv, size_t n) {
    mpi_state *s = st;
    /* MPI has no fp16/bf16 type in the standard (Open MPI 4): F32 only */
    if (dt != QP_DTYPE_F32)
        return s->host->error(s->host->ctx, QP_ERR_UNSUPPORTED, "mpi: allreduce_sum of dtype %d (MPI has F32 only)",
                              (int)dt);
    int c = count_of(n);
    if (c < 0) return too_big(s, n * 4);
    if (s->broken) return broken(s, "MPI_Allreduce");
    MPI_Request r;
    int rc = MPI_Iallreduce(send, recv, c, MPI_FLOAT, MPI_SUM, s->comm, &r);
    return rc == MPI_SUCCESS ? wait_coll(s, r, "MPI_Allreduce") : fail(s, rc, "MPI_Allreduce");
}

static const qp_comm_ops ops = {
    QP_COMM_OPS_INIT(qp_mpi, "mpi"),
};

QP_COMM_PLUGIN_ENTRY(ops)
