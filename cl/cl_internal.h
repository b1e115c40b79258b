/* Shared state of the OpenCL backend (one file per job, see docs/backends.md). */
#ifndef QP_CL_INTERNAL_H
#define QP_CL_INTERNAL_H

#include <stdint.h>

#include "backend.h"
#include "cl_loader.h"

#define QP_CL_MAX_DEVICES 32

/* Division strategy of the kernels (QP_DIV_MODE): the reference divides
 * with IEEE correctly rounded fp32 divisions (docs/semantics.md §12, §13). */
typedef enum qp_cl_div_mode {
    QP_CL_DIV_NATIVE = 0, /* the device rounds divisions correctly (build option) */
    QP_CL_DIV_FP64 = 1,   /* (float)((double)a / b): exact, double rounding is innocuous */
    QP_CL_DIV_FMA = 2,    /* quotient corrected with fma remainders           */
    QP_CL_DIV_FMA_TEST = 3 /* as FMA from a quotient 2 ulp off (tests only)   */
} qp_cl_div_mode;

/* The kernels of the program: X(ID, kernel function name, fp64 only), the
 * one list behind the QP_CL_K_* enum and the names cl_program.c hands to
 * clCreateKernel, so the two cannot drift apart. An fp64-only kernel is
 * compiled (cl_moe.cl) and created only where the device has cl_khr_fp64. */
#define QP_CL_KERNELS(X) \
    X(QUANT_I8, qp_quant_i8, 0)          \
    X(QUANT_F8, qp_quant_f8, 0)          \
    X(ROWMAX, qp_rowmax, 0)              \
    X(GEMV_I8, qp_gemv_i8, 0)            \
    X(GEMV_I8_DOT, qp_gemv_i8_dot, 0)    \
    X(TILED_I8, qp_tiled_i8, 0)          \
    X(TILED_I8_DOT, qp_tiled_i8_dot, 0)  \
    X(GEMV_Q4, qp_gemv_q4, 0)            \
    X(GEMV_Q4_DOT, qp_gemv_q4_dot, 0)    \
    X(TILED_Q4, qp_tiled_q4, 0)          \
    X(TILED_Q4_DOT, qp_tiled_q4_dot, 0)  \
    X(GEMV_F8, qp_gemv_f8, 0)            \
    X(TILED_F8, qp_tiled_f8, 0)          \
    X(ACT_F32, qp_act_f32, 0)            \
    X(GEMV_W4, qp_gemv_w4, 0)            \
    X(TILED_W4, qp_tiled_w4, 0)          \
    X(QUANT_F8G, qp_quant_f8_group, 0)   \
    X(GEMV_F8B, qp_gemv_f8b, 0)          \
    X(TILED_F8B, qp_tiled_f8b, 0)        \
    X(ACT_QDQ, qp_act_qdq, 0)            \
    X(GEMV_FW, qp_gemv_fw, 0)            \
    X(TILED_FW, qp_tiled_fw, 0)          \
    X(ROTATE, qp_rotate, 0)              \
    X(KV_QUANT, qp_kv_quant, 0)          \
    X(KV_DEQUANT, qp_kv_dequant, 0)      \
    X(MOE_ALIGN, qp_moe_align, 0)        \
    X(MOE_GEMV_F, qp_moe_gemv_f, 0)      \
    X(MOE_TILED_F, qp_moe_tiled_f, 0)    \
    X(MOE_GEMV_I, qp_moe_gemv_i, 0)      \
    X(MOE_TILED_I, qp_moe_tiled_i, 0)    \
    X(MOE_GEMV_F8B, qp_moe_gemv_f8b, 0)  \
    X(MOE_SUM, qp_moe_sum, 0)            \
    X(MOE_ROUTE, qp_moe_route, 1)

enum {
#define QP_CL_K_ENUM(id, name, fp64) QP_CL_K_##id,
    QP_CL_KERNELS(QP_CL_K_ENUM)
#undef QP_CL_K_ENUM
    QP_CL_K_COUNT
};

typedef struct qp_cl_backend qp_cl_backend;

/* The per-device tuning row (cl_tuning.c). */
#define QP_CL_GEMV_MAX_M 16 /* rows per GEMV launch (the kernels' limit) */
typedef struct qp_cl_tuning {
    int gemv_max_m; /* the largest M the GEMV path takes */
    const char *row;
} qp_cl_tuning;

typedef struct qp_cl_device {
    qp_cl_backend *be;
    int index;
    cl_platform_id platform;
    cl_device_id id;
    qp_device_info info;        /* filled once at init                     */
    char platform_name[128];
    char driver_version[64];
    char cl_c_version[64];      /* "OpenCL C 1.2 PoCL"                     */
    int cl_c_major, cl_c_minor;
    int has_fp16, has_fp64, has_int_dot, has_cr_div, has_subgroups;
    int int_dot_ext;            /* cl_khr_integer_dot_product with 4x8-bit input */
    int int_dot_emulated;       /* QPORT_CL_FAKE_INT_DOT: *_dot kernels with a plain dot (tests) */
    qp_cl_tuning tuning;        /* cl_tuning.c's row for this device      */
    size_t max_wg;
    uint64_t max_alloc;
    uint64_t weight_chunk_max;  /* largest weight buffer: max_alloc, or QPORT_CL_WEIGHT_CHUNK (tests) */
    /* created at first use */
    cl_context context;
    cl_command_queue queue;
    cl_mem dummy;               /* bound where a kernel's optional tensor is absent */
    cl_program program;
    cl_kernel kernels[QP_CL_K_COUNT];
    qp_cl_div_mode div_mode;    /* a kernel argument: one program for every mode */
    char build_note[96];        /* "cached" / "built" ...                  */
    int profiling;              /* the queue has CL_QUEUE_PROFILING_ENABLE  */
    /* linear_time: while rec_on, the forward's kernels leave their events:
     * the first launch, the first GEMM launch, the last launch */
    int rec_on;
    cl_event rec_first, rec_gemm, rec_last;
    /* enqueued since the last synchronize, for device-fault messages */
    char pending_first[64], pending_last[64];
    int imported;               /* the application's context and queue     */
    qp_device_stats stats;
} qp_cl_device;

struct qp_cl_backend {
    const qp_host *host;
    qp_cl_api api;
    int loaded;
    int n_devices;
    qp_cl_device devices[QP_CL_MAX_DEVICES];
    int n_imported;
};

typedef struct qp_cl_buffer {
    cl_mem mem;
    size_t bytes;
    cl_mem parent;              /* imported: the application's cl_mem      */
    size_t offset;              /* ... and the offset of `mem` in it        */
} qp_cl_buffer;

/* cl_device.c */
void qp_cl_devices_enumerate(qp_cl_backend *be);
/* the ops of api/backend.h (QP_BACKEND_GPU_OPS), as qp_cl_<op> */
QP_BACKEND_OPS_DECLARE(qp_cl)
/* Context and queue (lazy). */
qp_status qp_cl_device_open(qp_cl_device *d);
void qp_cl_device_close(qp_cl_device *d);

/* cl_program.c: builds (or loads from the cache) the device's program. */
qp_status qp_cl_program_ensure(qp_cl_device *d);
void qp_cl_program_release(qp_cl_device *d);

/* A kernel argument: QP_CL_ARG(v) passes variable v by value. */
typedef struct {
    size_t size;
    const void *ptr;
} qp_cl_karg;
#define QP_CL_ARG(v) {sizeof(v), &(v)}
/* Sets kernel `which`'s n arguments and enqueues it on d's queue (ev: its
 * event, or NULL). Failures name the call: "PREFIXclSetKernelArg(NAME, i)
 * failed: ..." (an internal error) or "PREFIXclEnqueueNDRangeKernel(NAME)
 * failed: ..." (out of memory for CL_OUT_OF_RESOURCES and
 * CL_MEM_OBJECT_ALLOCATION_FAILURE where oom, else a device error), reported
 * for layer `layer` (NULL: none). */
qp_status qp_cl_launch(qp_cl_device *d, int which, const char *name, const qp_cl_karg *args, int n, cl_uint dims,
                       const size_t *global, const size_t *local, cl_event *ev, const char *layer, const char *prefix,
                       int oom);

/* cl_memory.c */
/* A device buffer holding a copy of `src` (what=tensor name for messages). */
qp_status qp_cl_buffer_from_host(qp_cl_device *d, const void *src, size_t bytes, const char *what, const char *layer,
                                 cl_mem *out);

/* cl_embed.c: enqueue bookkeeping, events, imports (ABI 3) */
/* Notes an op enqueued (for synchronize's messages and the counters). */
void qp_cl_enqueued(qp_cl_device *d, const char *what);
qp_status qp_cl_flush(void *dev);
/* cl_device.c: the description of one device (enumeration and import). */
void qp_cl_fill_device(qp_cl_backend *be, qp_cl_device *d);

/* cl_ops.c: rotation, fp8 KV cache, copies */
/* ms between the start of `a` and the end of `b` (profiling queue) */
qp_status qp_cl_event_ms(qp_cl_device *d, cl_event a, cl_event b, double *ms);

/* Helpers */
#define QP_CL_ERR(d, st, ...) ((d)->be->host->error((d)->be->host->ctx, (st), __VA_ARGS__))
/* An error of device d: "opencl:<i>: [layer '<layer>': ]" and the message */
qp_status qp_cl_error(const qp_cl_device *d, qp_status st, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define QP_CL_LOG(be, lvl, ...) ((be)->host->log((be)->host->ctx, (lvl), __VA_ARGS__))
/* Releases *m if set and clears it (a second release is a no-op). */
static inline void qp_cl_release_mem(qp_cl_device *d, cl_mem *m) {
    if (*m) d->be->api.clReleaseMemObject(*m);
    *m = NULL;
}

/* The tuning row of a device, QPORT_CL_GEMV_MAX_M applied. */
void qp_cl_tuning_pick(const qp_host *h, cl_device_type type, cl_uint vendor, qp_cl_tuning *out);
#endif
