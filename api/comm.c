/* Communicators: loading the communicator plugins
 * (libqport-mpi.so, libqport-nccl.so) as registry.c loads the backends --
 * QPORT_BACKEND_PATH alone when set, else beside libqport or the program
 * (<dir>/qport, <dir>, the build tree's comm/), else the configured plugin
 * folder -- and the collectives every rank agrees through. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "internal.h"
#include "qp_comm_internal.h"
#include "registry.h"

/* dir/file: the handle, or NULL with a note when the file exists but does
 * not load (its library is missing: libmpi.so.40, say). */
static void *try_file(const char *dir, size_t dlen, const char *file, char *path, size_t cap, char *note, size_t ncap) {
    if (dlen + strlen(file) + 2 > cap) return NULL;
    snprintf(path, cap, "%.*s/%s", (int)dlen, dir, file);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        if (e && !strstr(e, "No such file") && !strstr(e, "Not a directory")) snprintf(note, ncap, "%s", e);
    }
    return h;
}

static void *try_beside(const char *image, const char *file, char *path, size_t cap, char *note, size_t ncap) {
    char *abs = image && strchr(image, '/') ? realpath(image, NULL) : NULL;
    const char *slash = abs ? strrchr(abs, '/') : NULL;
    void *h = NULL;
    if (slash) {
        size_t n = (size_t)(slash - abs), up = n;
        while (up && abs[up - 1] != '/') up--;
        char dir[1024];
        snprintf(dir, sizeof dir, "%.*s/qport", (int)n, abs);
        h = try_file(dir, strlen(dir), file, path, cap, note, ncap);
        if (!h && n) h = try_file(abs, n, file, path, cap, note, ncap);
        if (!h) {
            snprintf(dir, sizeof dir, "%.*s/comm", (int)n, abs);
            h = try_file(dir, strlen(dir), file, path, cap, note, ncap);
        }
        if (!h && up) {
            snprintf(dir, sizeof dir, "%.*scomm", (int)up, abs);
            h = try_file(dir, strlen(dir), file, path, cap, note, ncap);
        }
    }
    free(abs);
    return h;
}

static void *find_plugin(const char *bp, const char *file, char *path, size_t cap, char *note, size_t ncap) {
    if (bp) {
        for (const char *p = bp; *p;) {
            const char *e = strchr(p, ':');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            void *h = n ? try_file(p, n, file, path, cap, note, ncap) : NULL;
            if (h) return h;
            p = e ? e + 1 : p + n;
        }
        if (!note[0]) snprintf(note, ncap, "%s not found in QPORT_BACKEND_PATH", file);
        return NULL;
    }
    Dl_info info;
    void *h = NULL;
    if (dladdr((void *)&qp_comm_create, &info)) h = try_beside(info.dli_fname, file, path, cap, note, ncap);
    if (!h) h = try_beside("/proc/self/exe", file, path, cap, note, ncap);
    if (!h) h = try_file(QP_PLUGIN_DIR, strlen(QP_PLUGIN_DIR), file, path, cap, note, ncap);
    if (!h && !note[0]) snprintf(note, ncap, "%s not installed (not built, or its library was missing at build time)", file);
    return h;
}

/* Finds and opens one plugin: its ops, or QP_ERR_UNSUPPORTED with the
 * reason when it is absent or not a communicator of this ABI. */
static qp_status open_one(qp_comm *c, const char *kind, const qp_comm_ops **ops_out) {
    char file[64], path[1024] = "", note[512] = "";
    snprintf(file, sizeof file, "libqport-%s.so", kind);
    void *h = find_plugin(c->backend_path, file, path, sizeof path, note, sizeof note);
    if (!h) return qp_error_set(c->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "communicator %s: %s", kind, note);
    qp_comm_entry_fn entry;
    *(void **)&entry = dlsym(h, QP_COMM_ENTRY_SYMBOL);
    const qp_comm_ops *ops = entry ? entry() : NULL;
    if (!ops || ops->abi_version != QP_COMM_ABI_VERSION || ops->struct_size < sizeof(qp_comm_ops) ||
        strcmp(ops->name, kind)) {
        dlclose(h);
        return qp_error_set(c->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "%s: not a qport %s communicator of ABI %u",
                            path, kind, QP_COMM_ABI_VERSION);
    }
    *ops_out = ops;
    return QP_OK;
}

/* Initialises an opened plugin into (ops, state); the plugin says why not. */
static qp_status init_one(qp_comm *c, const qp_comm_ops *ops, const qp_comm_ops *boot, void *boot_state, void **state_out) {
    qp_comm_host *host = ops->needs_boot ? &c->host_dev : &c->host;
    *host = (qp_comm_host){QP_COMM_ABI_VERSION, sizeof(qp_comm_host), c->ctx, qp_host_error, qp_host_log, boot, boot_state,
                           c->timeout_s};
    return ops->init(host, state_out);
}

QP_API qp_status qp_comm_create(qp_context *ctx, const char *kind, qp_comm **out) {
    if (!ctx || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_settings set; /* QPORT_COMM and QPORT_BACKEND_PATH, validated by env.c */
    qp_status st = qp_settings_read(ctx, &set);
    if (st) return st;
    if (!kind || !strcmp(kind, "auto")) kind = set.comm ? set.comm : "auto";
    if (strcmp(kind, "auto") && strcmp(kind, "mpi") && strcmp(kind, "nccl"))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "communicator '%s': expected mpi, nccl or auto", kind);
    qp_comm *c = calloc(1, sizeof *c);
    if (!c) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    c->ctx = ctx;
    c->backend_path = set.backend_path;
    c->timeout_s = set.comm_timeout;
    /* MPI first: it is the launcher's transport and NCCL's bootstrap */
    const qp_comm_ops *mpi = NULL;
    st = open_one(c, "mpi", &mpi);
    if (!st) st = init_one(c, mpi, NULL, NULL, &c->state);
    if (st) { free(c); return st; }
    c->ops = mpi;
    char d[96] = "";
    c->ops->describe(c->state, d, sizeof d);
    snprintf(c->name, sizeof c->name, "mpi (%s)", d);
    if (strcmp(kind, "mpi")) {
        /* first every rank must have the plugin (its init is collective),
         * then the ranks agree on whether NCCL is usable everywhere: one
         * rank without a GPU makes "auto" fall back to MPI on all of them */
        const qp_comm_ops *nccl = NULL;
        qp_status all = qp_comm_agree(c, open_one(c, "nccl", &nccl));
        if (!all) {
            st = init_one(c, nccl, c->ops, c->state, &c->dev_state);
            if (!st) c->dev_ops = nccl;
            all = qp_comm_agree(c, st);
        }
        if (all == QP_OK) {
            c->dev_ops->describe(c->dev_state, d, sizeof d);
            snprintf(c->name, sizeof c->name, "nccl (%s, bootstrapped over MPI)", d);
        } else {
            if (c->dev_ops) c->dev_ops->shutdown(c->dev_state);
            c->dev_ops = NULL;
            c->dev_state = NULL;
            if (!strcmp(kind, "nccl")) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", qp_last_error(ctx));
                qp_comm_destroy(c);
                return qp_error_set(ctx, all, NULL, NULL, NULL, "%s", msg);
            }
            qp_log(ctx, QP_LOG_INFO, "communicator auto: NCCL not usable on every rank (%s); using MPI",
                   qp_last_error(ctx));
        }
    }
    *out = c;
    return QP_OK;
}

QP_API void qp_comm_destroy(qp_comm *c) {
    if (!c) return;
    if (c->dev_ops) c->dev_ops->shutdown(c->dev_state);
    if (c->ops) c->ops->shutdown(c->state);
    free(c);
}

QP_API int qp_comm_rank(const qp_comm *c) { return c ? c->ops->rank(c->state) : 0; }
QP_API int qp_comm_size(const qp_comm *c) { return c ? c->ops->size(c->state) : 1; }
QP_API const char *qp_comm_name(const qp_comm *c) { return c ? c->name : ""; }

/* Host collectives go to NCCL when it is the communicator (staged through
 * device memory there), else to MPI. */
#define OPS(c) ((c)->dev_ops ? (c)->dev_ops : (c)->ops)
#define STATE(c) ((c)->dev_ops ? (c)->dev_state : (c)->state)

QP_API qp_status qp_comm_barrier(qp_comm *c) {
    if (!c) return QP_ERR_INVALID_ARGUMENT;
    return OPS(c)->barrier(STATE(c));
}

QP_API qp_status qp_comm_broadcast(qp_comm *c, void *buf, size_t bytes, int root) {
    if (!c || (!buf && bytes)) return QP_ERR_INVALID_ARGUMENT;
    if (root < 0 || root >= qp_comm_size(c))
        return qp_error_set(c->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, "broadcast root %d of %d ranks", root,
                            qp_comm_size(c));
    return OPS(c)->broadcast(STATE(c), buf, bytes, root);
}

QP_API qp_status qp_comm_allgather(qp_comm *c, const void *send, size_t bytes, void *recv) {
    if (!c || ((!send || !recv) && bytes)) return QP_ERR_INVALID_ARGUMENT;
    return OPS(c)->allgather(STATE(c), send, bytes, recv);
}

/* The agreement travels over MPI even under NCCL: it is small, and it
 * must work when the device side is what failed. */
typedef struct agree_msg {
    int32_t status;
    char msg[508];
} agree_msg;

QP_API qp_status qp_comm_agree(qp_comm *c, qp_status local) {
    if (!c) return QP_ERR_INVALID_ARGUMENT;
    int n = c->ops->size(c->state);
    agree_msg mine = {(int32_t)local, ""}, *all = calloc((size_t)n, sizeof *all);
    if (local) snprintf(mine.msg, sizeof mine.msg, "%s", qp_last_error(c->ctx));
    if (!all) return qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    qp_status st = c->ops->allgather(c->state, &mine, sizeof mine, all);
    if (!st)
        for (int r = 0; r < n; r++)
            if (all[r].status) {
                all[r].msg[sizeof all[r].msg - 1] = 0;
                qp_status s = all[r].status > 0 && all[r].status < QP_STATUS_COUNT_ ? (qp_status)all[r].status : QP_ERR_INTERNAL;
                st = qp_error_set(c->ctx, s, NULL, NULL, NULL, "rank %d: %s", r, all[r].msg);
                break;
            }
    free(all);
    return st;
}

static float load_elem(qp_dtype dt, const void *p, size_t i) {
    if (dt == QP_DTYPE_F32) {
        float v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        return v;
    }
    return qp_format_decode(dt, ((const uint16_t *)p)[i]);
}

qp_status qp_comm_sum_gathered(qp_dtype dt, const void *gathered, int n_ranks, size_t n, void *out) {
    size_t es = dt == QP_DTYPE_F32 ? 4 : 2;
    for (size_t i = 0; i < n; i++) {
        float acc = 0.0f; /* fp32, rank 0 first: the order is the contract */
        for (int r = 0; r < n_ranks; r++) acc += load_elem(dt, (const char *)gathered + (size_t)r * n * es, i);
        if (dt == QP_DTYPE_F32) memcpy((char *)out + 4 * i, &acc, 4);
        else ((uint16_t *)out)[i] = (uint16_t)qp_format_encode(dt, acc);
    }
    return QP_OK;
}

QP_API qp_status qp_comm_allreduce_sum_ordered(qp_comm *c, qp_dtype dt, const void *send, void *recv, size_t n) {
    if (!c || ((!send || !recv) && n)) return QP_ERR_INVALID_ARGUMENT;
    if (dt != QP_DTYPE_F16 && dt != QP_DTYPE_BF16 && dt != QP_DTYPE_F32)
        return qp_error_set(c->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, "ordered all-reduce of %s: F16, BF16 or F32",
                            qp_dtype_name(dt));
    size_t es = dt == QP_DTYPE_F32 ? 4 : 2;
    int size = qp_comm_size(c);
    void *g = malloc((size_t)size * n * es + 1);
    if (!g) return qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    qp_status st = qp_comm_allgather(c, send, n * es, g);
    if (!st) qp_comm_sum_gathered(dt, g, size, n, recv);
    free(g);
    return st;
}
