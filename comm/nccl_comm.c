/*
 * libqport-nccl.so: the NCCL communicator (RCCL has the same
 * API on AMD). NCCL and the CUDA runtime are loaded with dlopen at first
 * use, never linked, so the plugin builds and loads without them, as the
 * CUDA backend loads cuBLASLt; the few entry points are declared here with
 * nccl.h's ABI (NCCL 2.x: ncclUniqueId of 128 bytes, enums as int, opaque
 * comm and stream pointers). Building with -DQP_NCCL_REAL_HEADER includes
 * the real nccl.h and checks every declaration below against it at
 * compile time (meson option nccl_include; docs/parallel.md).
 *
 * The ranks bootstrap over the MPI communicator the core hands in
 * (host->boot): they first agree that every rank found NCCL and a GPU --
 * ncclCommInitRank is collective and would wait forever for a rank that
 * never calls it -- then rank 0's ncclUniqueId is broadcast. Each rank
 * takes GPU (local rank % device count), the local rank from Open MPI's,
 * MPICH's or Slurm's environment.
 *
 * Host-buffer collectives are staged through device memory on one stream;
 * the device variants take CUDA device pointers.
 *
 * Every collective waits under a deadline (QPORT_COMM_TIMEOUT,
 * host->timeout_s): the stream is polled (cudaStreamQuery, with
 * a growing sleep) along with ncclCommGetAsyncError, and at the deadline
 * the communicator is aborted (ncclCommAbort: NCCL's way out of a peer
 * that never arrives) and the call fails; later calls fail at once.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"

#ifdef QP_NCCL_REAL_HEADER
#include <nccl.h>
#endif

/* Our declarations of nccl.h's and cuda_runtime.h's types: enums are int,
 * handles are pointers. With the real headers the same names become the
 * real types, and every function type below is checked against the real
 * declaration (plus the sizes and enum values the plain build assumes). */
#ifdef QP_NCCL_REAL_HEADER
typedef ncclResult_t nccl_result;
typedef ncclComm_t nccl_comm;
typedef cudaStream_t cuda_stream;
typedef ncclUniqueId nccl_id;
typedef ncclDataType_t nccl_dtype;
typedef ncclRedOp_t nccl_op;
typedef cudaError_t cuda_err;
typedef enum cudaMemcpyKind cuda_kind;
#else
typedef int nccl_result;             /* ncclResult_t: ncclSuccess = 0      */
typedef void *nccl_comm;             /* ncclComm_t                          */
typedef void *cuda_stream;           /* cudaStream_t                        */
typedef struct { char internal[128]; } nccl_id; /* ncclUniqueId            */
typedef int nccl_dtype, nccl_op, cuda_err, cuda_kind;
#endif
#define NCCL_INT8 ((nccl_dtype)0)
#define NCCL_FLOAT16 ((nccl_dtype)6)
#define NCCL_FLOAT32 ((nccl_dtype)7)
#define NCCL_BFLOAT16 ((nccl_dtype)9)
#define NCCL_SUM ((nccl_op)0)
#define CUDA_MEMCPY_H2D ((cuda_kind)1)
#define CUDA_MEMCPY_D2H ((cuda_kind)2)

typedef nccl_result (*fn_get_version)(int *);
typedef nccl_result (*fn_get_unique_id)(nccl_id *);
typedef nccl_result (*fn_comm_init_rank)(nccl_comm *, int, nccl_id, int);
typedef nccl_result (*fn_comm_destroy)(nccl_comm);
typedef const char *(*fn_error_string)(nccl_result);
typedef nccl_result (*fn_all_reduce)(const void *, void *, size_t, nccl_dtype, nccl_op, nccl_comm, cuda_stream);
typedef nccl_result (*fn_all_gather)(const void *, void *, size_t, nccl_dtype, nccl_comm, cuda_stream);
typedef nccl_result (*fn_broadcast)(const void *, void *, size_t, nccl_dtype, int, nccl_comm, cuda_stream);
typedef cuda_err (*fn_device_count)(int *);
typedef cuda_err (*fn_set_device)(int);
typedef cuda_err (*fn_malloc)(void **, size_t);
typedef cuda_err (*fn_free)(void *);
typedef cuda_err (*fn_memcpy)(void *, const void *, size_t, cuda_kind);
typedef cuda_err (*fn_stream_create)(cuda_stream *);
typedef cuda_err (*fn_stream_sync)(cuda_stream);
typedef const char *(*fn_cuda_error)(cuda_err);
typedef cuda_err (*fn_stream_query)(cuda_stream);
typedef nccl_result (*fn_comm_abort)(nccl_comm);
typedef nccl_result (*fn_comm_async_error)(nccl_comm, nccl_result *);

#ifdef QP_NCCL_REAL_HEADER
/* The static check (meson -Dnccl_include=DIR): the plain build's
 * assumptions hold for this nccl.h and cuda_runtime.h. */
#define SAME(fn, t) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), t), #fn " differs from the header")
_Static_assert(sizeof(ncclUniqueId) == 128 && NCCL_UNIQUE_ID_BYTES == 128, "ncclUniqueId is 128 bytes");
_Static_assert(sizeof(ncclResult_t) == sizeof(int) && (int)ncclSuccess == 0, "ncclResult_t is an int, success 0");
_Static_assert(sizeof(ncclDataType_t) == sizeof(int) && sizeof(ncclRedOp_t) == sizeof(int), "NCCL enums are ints");
_Static_assert(sizeof(cudaError_t) == sizeof(int) && sizeof(enum cudaMemcpyKind) == sizeof(int), "CUDA enums are ints");
_Static_assert((int)ncclInt8 == 0 && (int)ncclFloat16 == 6 && (int)ncclFloat32 == 7 && (int)ncclBfloat16 == 9 &&
               (int)ncclSum == 0, "ncclDataType_t / ncclRedOp_t values");
_Static_assert((int)cudaMemcpyHostToDevice == 1 && (int)cudaMemcpyDeviceToHost == 2, "cudaMemcpyKind values");
_Static_assert(sizeof(ncclComm_t) == sizeof(void *) && sizeof(cudaStream_t) == sizeof(void *), "handles are pointers");
SAME(ncclGetVersion, fn_get_version);
SAME(ncclGetUniqueId, fn_get_unique_id);
SAME(ncclCommInitRank, fn_comm_init_rank);
SAME(ncclCommDestroy, fn_comm_destroy);
SAME(ncclGetErrorString, fn_error_string);
SAME(ncclAllReduce, fn_all_reduce);
SAME(ncclAllGather, fn_all_gather);
SAME(ncclBroadcast, fn_broadcast);
SAME(cudaGetDeviceCount, fn_device_count);
SAME(cudaSetDevice, fn_set_device);
SAME(cudaMalloc, fn_malloc);
SAME(cudaFree, fn_free);
SAME(cudaMemcpy, fn_memcpy);
SAME(cudaStreamCreate, fn_stream_create);
SAME(cudaStreamSynchronize, fn_stream_sync);
SAME(cudaStreamDestroy, fn_stream_sync);
SAME(cudaGetErrorString, fn_cuda_error);
SAME(cudaStreamQuery, fn_stream_query);
SAME(ncclCommAbort, fn_comm_abort);
SAME(ncclCommGetAsyncError, fn_comm_async_error);
#endif

static struct {
    void *nccl, *cudart;
    char why[300];
    fn_get_version get_version;
    fn_get_unique_id get_unique_id;
    fn_comm_init_rank comm_init_rank;
    fn_comm_destroy comm_destroy;
    fn_error_string error_string;
    fn_all_reduce all_reduce;
    fn_all_gather all_gather;
    fn_broadcast broadcast;
    fn_device_count device_count;
    fn_set_device set_device;
    fn_malloc malloc_;
    fn_free free_;
    fn_memcpy memcpy_;
    fn_stream_create stream_create;
    fn_stream_sync stream_sync, stream_destroy;
    fn_cuda_error cuda_error;
    fn_stream_query stream_query;
    fn_comm_abort comm_abort;
    fn_comm_async_error comm_async_error;
    int loaded;
} L;

static void *open_first(const char *const *names, size_t n) {
    void *h = NULL;
    for (size_t i = 0; i < n && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return h;
}

/* 1 when NCCL and cudart load with every entry point, else L.why. */
static int load(void) {
    if (L.loaded) return L.loaded > 0;
    L.loaded = -1;
    static const char *const cudart[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                         "/usr/local/cuda/lib64/libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.12"};
    static const char *const nccl[] = {"libnccl.so.2", "libnccl.so", "librccl.so.1"};
    L.cudart = open_first(cudart, sizeof cudart / sizeof *cudart);
    if (!L.cudart) {
        const char *e = dlerror();
        snprintf(L.why, sizeof L.why, "CUDA runtime not found (dlopen libcudart.so.13/.12: %s)", e ? e : "?");
        return 0;
    }
    L.nccl = open_first(nccl, sizeof nccl / sizeof *nccl);
    if (!L.nccl) {
        const char *e = dlerror();
        snprintf(L.why, sizeof L.why, "NCCL not found (dlopen libnccl.so.2: %s)", e ? e : "?");
        return 0;
    }
#define SYM(lib, field, name)                                                                  \
    do {                                                                                       \
        *(void **)&L.field = dlsym(L.lib, name);                                               \
        if (!L.field) { snprintf(L.why, sizeof L.why, "%s lacks %s", #lib, name); return 0; } \
    } while (0)
    SYM(nccl, get_version, "ncclGetVersion");
    SYM(nccl, get_unique_id, "ncclGetUniqueId");
    SYM(nccl, comm_init_rank, "ncclCommInitRank");
    SYM(nccl, comm_destroy, "ncclCommDestroy");
    SYM(nccl, error_string, "ncclGetErrorString");
    SYM(nccl, all_reduce, "ncclAllReduce");
    SYM(nccl, all_gather, "ncclAllGather");
    SYM(nccl, broadcast, "ncclBroadcast");
    SYM(cudart, device_count, "cudaGetDeviceCount");
    SYM(cudart, set_device, "cudaSetDevice");
    SYM(cudart, malloc_, "cudaMalloc");
    SYM(cudart, free_, "cudaFree");
    SYM(cudart, memcpy_, "cudaMemcpy");
    SYM(cudart, stream_create, "cudaStreamCreate");
    SYM(cudart, stream_sync, "cudaStreamSynchronize");
    SYM(cudart, stream_destroy, "cudaStreamDestroy");
    SYM(cudart, cuda_error, "cudaGetErrorString");
    SYM(cudart, stream_query, "cudaStreamQuery");
    SYM(nccl, comm_abort, "ncclCommAbort");
    SYM(nccl, comm_async_error, "ncclCommGetAsyncError");
#undef SYM
    L.loaded = 1;
    return 1;
}

typedef struct nccl_state {
    const qp_comm_host *host;
    nccl_comm comm;
    cuda_stream stream;
    int rank, size, device, version;
    void *dbuf;          /* staging for host-buffer collectives */
    size_t dbuf_bytes;
    double timeout_s;    /* QPORT_COMM_TIMEOUT                  */
    int aborted;         /* a collective timed out: comm aborted */
} nccl_state;

static int local_rank(int rank) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return rank;
}

static qp_status nccl_fail(const nccl_state *s, nccl_result r, const char *what) {
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "nccl: %s failed: %s", what, L.error_string(r));
}

static qp_status cuda_fail(const nccl_state *s, int r, const char *what) {
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "nccl: %s failed: %s", what, L.cuda_error(r));
}

static qp_status qp_nccl_init(const qp_comm_host *host, void **out) {
    const qp_comm_ops *boot = host->boot;
    void *bs = host->boot_state;
    if (!boot) return host->error(host->ctx, QP_ERR_UNSUPPORTED, "nccl: needs an MPI communicator to bootstrap");
    int rank = boot->rank(bs), size = boot->size(bs), ndev = 0, device = -1, cr = 0;
    char why[300] = "";
    if (!load()) snprintf(why, sizeof why, "%s", L.why);
    else if (L.device_count(&ndev) || ndev < 1) {
        ndev = 0; /* cudaGetDeviceCount leaves it untouched without a driver */
        snprintf(why, sizeof why, "no CUDA device (cudaGetDeviceCount)");
    } else if ((cr = L.set_device(device = local_rank(rank) % ndev))) {
        snprintf(why, sizeof why, "cudaSetDevice(%d): %s", device, L.cuda_error(cr));
    }
    nccl_state *s = calloc(1, sizeof *s);
    if (!s) snprintf(why, sizeof why, "out of memory");
    /* every rank must be able to join before any calls ncclCommInitRank */
    int ok = !why[0], *oks = calloc((size_t)size, sizeof *oks);
    if (!oks) { free(s); return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory"); }
    qp_status st = boot->allgather(bs, &ok, sizeof ok, oks);
    int bad = -1;
    for (int r = 0; !st && r < size && bad < 0; r++)
        if (!oks[r]) bad = r;
    free(oks);
    if (st || bad >= 0) free(s);
    if (st) return st;
    if (bad >= 0) {
        if (why[0]) return host->error(host->ctx, QP_ERR_UNSUPPORTED, "nccl: %s", why);
        return host->error(host->ctx, QP_ERR_UNSUPPORTED, "nccl: rank %d has no NCCL or no CUDA device", bad);
    }
    s->host = host;
    s->rank = rank;
    s->size = size;
    s->device = device;
    s->timeout_s = host->struct_size >= offsetof(qp_comm_host, timeout_s) + sizeof(double) && host->timeout_s > 0
                       ? host->timeout_s : 300;
    L.get_version(&s->version);
    nccl_id id;
    memset(&id, 0, sizeof id);
    nccl_result nr = rank == 0 ? L.get_unique_id(&id) : 0;
    /* rank 0's failure must reach the others before they wait in init */
    int32_t flag = nr == 0;
    if ((st = boot->broadcast(bs, &flag, sizeof flag, 0))) { free(s); return st; }
    if (flag && (st = boot->broadcast(bs, &id, sizeof id, 0))) { free(s); return st; }
    if (!flag) {
        st = nr ? nccl_fail(s, nr, "ncclGetUniqueId")
                : host->error(host->ctx, QP_ERR_DEVICE, "nccl: rank 0 could not make an ncclUniqueId");
        free(s);
        return st;
    }
    if ((nr = L.comm_init_rank(&s->comm, size, id, rank))) { st = nccl_fail(s, nr, "ncclCommInitRank"); free(s); return st; }
    if ((cr = L.stream_create(&s->stream))) {
        st = cuda_fail(s, cr, "cudaStreamCreate");
        L.comm_destroy(s->comm);
        free(s);
        return st;
    }
    *out = s;
    return QP_OK;
}

static void qp_nccl_shutdown(void *st) {
    nccl_state *s = st;
    if (!s) return;
    if (s->dbuf) L.free_(s->dbuf);
    if (s->stream) L.stream_destroy(s->stream);
    if (s->comm && !s->aborted) L.comm_destroy(s->comm);
    free(s);
}

static int qp_nccl_rank(void *st) { return ((nccl_state *)st)->rank; }
static int qp_nccl_size(void *st) { return ((nccl_state *)st)->size; }

static void qp_nccl_describe(void *st, char *out, size_t cap) {
    nccl_state *s = st;
    int v = s->version; /* 22803 = 2.28.3 (NCCL_VERSION_CODE since 2.9) */
    snprintf(out, cap, "NCCL %d.%d.%d, cuda:%d", v / 10000, v / 100 % 100, v % 100, s->device);
}

static qp_status stage(nccl_state *s, size_t bytes) {
    if (s->dbuf_bytes >= bytes) return QP_OK;
    if (s->dbuf) L.free_(s->dbuf);
    s->dbuf = NULL;
    s->dbuf_bytes = 0;
    int cr = L.malloc_(&s->dbuf, bytes);
    if (cr) return cuda_fail(s, cr, "cudaMalloc");
    s->dbuf_bytes = bytes;
    return QP_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define CUDA_ERROR_NOT_READY 600 /* cudaErrorNotReady */

static qp_status aborted(const nccl_state *s) {
    return s->host->error(s->host->ctx, QP_ERR_DEVICE, "nccl: the communicator was aborted (an earlier collective timed out)");
}

/* The stream's work done, or the deadline: ncclCommAbort and an error. */
static qp_status finish(nccl_state *s, nccl_result nr, const char *what) {
    if (nr) return nccl_fail(s, nr, what);
    double deadline = now_s() + s->timeout_s;
    long nap_ns = 0;
    for (;;) {
        int cr = L.stream_query(s->stream);
        if (cr == 0) return QP_OK;
        if (cr != CUDA_ERROR_NOT_READY) return cuda_fail(s, cr, "cudaStreamQuery");
        nccl_result ae = 0;
        if (!L.comm_async_error(s->comm, &ae) && ae) {
            L.comm_abort(s->comm);
            s->aborted = 1;
            return nccl_fail(s, ae, what);
        }
        if (now_s() > deadline) break;
        if (nap_ns) nanosleep(&(struct timespec){0, nap_ns}, NULL);
        nap_ns = nap_ns ? (nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2) : 1000;
    }
    L.comm_abort(s->comm);
    s->aborted = 1;
    return s->host->error(s->host->ctx, QP_ERR_DEVICE,
                          "nccl: %s timed out after %g s (QPORT_COMM_TIMEOUT) on rank %d of %d: a rank did not answer; "
                          "the communicator was aborted (ncclCommAbort)",
                          what, s->timeout_s, s->rank, s->size);
}

static qp_status qp_nccl_allgather_device(void *st, const void *send, size_t bytes, void *recv) {
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    return finish(s, L.all_gather(send, recv, bytes, NCCL_INT8, s->comm, s->stream), "ncclAllGather");
}

static int nccl_type(qp_dtype dt) {
    return dt == QP_DTYPE_F32 ? 7 : dt == QP_DTYPE_F16 ? 6 : dt == QP_DTYPE_BF16 ? 9 : -1; /* ncclFloat32, 16, Bfloat16 */
}

static qp_status qp_nccl_allreduce_sum_device(void *st, qp_dtype dt, const void *send, void *recv, size_t n) {
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    int t = nccl_type(dt);
    if (t < 0) return s->host->error(s->host->ctx, QP_ERR_UNSUPPORTED, "nccl: allreduce of dtype %d", (int)dt);
    return finish(s, L.all_reduce(send, recv, n, (nccl_dtype)t, NCCL_SUM, s->comm, s->stream), "ncclAllReduce");
}

/* Host buffers: [send | recv] in one device allocation. */
static qp_status qp_nccl_allgather(void *st, const void *send, size_t bytes, void *recv) {
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    size_t total = bytes * (size_t)(s->size + 1);
    qp_status q = stage(s, total ? total : 1);
    if (q) return q;
    char *d = s->dbuf;
    int cr = L.memcpy_(d, send, bytes, CUDA_MEMCPY_H2D);
    if (cr) return cuda_fail(s, cr, "cudaMemcpy");
    if ((q = qp_nccl_allgather_device(s, d, bytes, d + bytes))) return q;
    cr = L.memcpy_(recv, d + bytes, bytes * (size_t)s->size, CUDA_MEMCPY_D2H);
    return cr ? cuda_fail(s, cr, "cudaMemcpy") : QP_OK;
}

static qp_status qp_nccl_broadcast(void *st, void *buf, size_t bytes, int root) {
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    qp_status q = stage(s, bytes ? bytes : 1);
    if (q) return q;
    int cr = L.memcpy_(s->dbuf, buf, bytes, CUDA_MEMCPY_H2D);
    if (cr) return cuda_fail(s, cr, "cudaMemcpy");
    if ((q = finish(s, L.broadcast(s->dbuf, s->dbuf, bytes, NCCL_INT8, root, s->comm, s->stream), "ncclBroadcast")))
        return q;
    cr = L.memcpy_(buf, s->dbuf, bytes, CUDA_MEMCPY_D2H);
    return cr ? cuda_fail(s, cr, "cudaMemcpy") : QP_OK;
}

static qp_status qp_nccl_barrier(void *st) {
    /* NCCL has no barrier: a one-element all-reduce orders the ranks */
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    float one = 1, out = 0;
    size_t es = sizeof one;
    qp_status q = stage(s, 2 * es);
    if (q) return q;
    char *d = s->dbuf;
    int cr = L.memcpy_(d, &one, es, CUDA_MEMCPY_H2D);
    if (cr) return cuda_fail(s, cr, "cudaMemcpy");
    if ((q = qp_nccl_allreduce_sum_device(s, QP_DTYPE_F32, d, d + es, 1))) return q;
    cr = L.memcpy_(&out, d + es, es, CUDA_MEMCPY_D2H);
    return cr ? cuda_fail(s, cr, "cudaMemcpy") : QP_OK;
}

static qp_status qp_nccl_allreduce_sum(void *st, qp_dtype dt, const void *send, void *recv, size_t n) {
    nccl_state *s = st;
    if (s->aborted) return aborted(s);
    size_t es = dt == QP_DTYPE_F32 ? 4 : 2, bytes = n * es;
    qp_status q = stage(s, 2 * bytes + 1);
    if (q) return q;
    char *d = s->dbuf;
    int cr = L.memcpy_(d, send, bytes, CUDA_MEMCPY_H2D);
    if (cr) return cuda_fail(s, cr, "cudaMemcpy");
    if ((q = qp_nccl_allreduce_sum_device(s, dt, d, d + bytes, n))) return q;
    cr = L.memcpy_(recv, d + bytes, bytes, CUDA_MEMCPY_D2H);
    return cr ? cuda_fail(s, cr, "cudaMemcpy") : QP_OK;
}

static const qp_comm_ops ops = {
    QP_COMM_OPS_INIT(qp_nccl, "nccl"),
    .needs_boot = 1,
    .allgather_device = qp_nccl_allgather_device,
    .allreduce_sum_device = qp_nccl_allreduce_sum_device,
};

QP_COMM_PLUGIN_ENTRY(ops)
