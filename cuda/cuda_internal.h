/*
 * The CUDA plugin's host-side objects, shared by cuda_backend.c (devices,
 * buffers, linear layers) and cuda_moe.c (the fused MoE ops).
 */
#ifndef QP_CU_INTERNAL_H
#define QP_CU_INTERNAL_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_caps.h"

typedef struct qp_cu_state qp_cu_state;

typedef struct qp_cu_dev {
    qp_cu_state *st;
    int index;
    struct cudaDeviceProp prop;
    int cc;
    qp_cu_arch_fit fit;
    char fit_why[256];
    int probed;       /* qp_cu_kernel_probe done: 1 ok, -1 failed */
    cudaStream_t stream;
    int has_stream;   /* stream is set (imported: the application's, maybe NULL) */
    int imported;     /* device_import made it: the stream is not ours */
    /* Workspace of the linear layers (xq, xs, xzp, amax, partial) and of the
     * in-place rotation / KV chunks: one per device, used in stream order;
     * grown by linear_reserve only (never inside a forward). A grown-out
     * one is retired, not freed, so graphs captured before stay valid;
     * retired blocks (and MoE scratch) are freed with the device. */
    void *ws;
    size_t ws_bytes;
    void **retired;
    int n_retired, cap_retired;
    /* device_stats */
    qp_device_stats stats; /* host waits, submissions, allocations */
    /* the layers enqueued since the last synchronize, for fault messages */
    char pend[4][64], pend_last[64];
    int n_pend;
    unsigned long long enq_seq; /* enqueues so far (an event's wait clears pend) */
} qp_cu_dev;

/* An error of device d: "cuda:<i>: [layer '<layer>': ]" and the message */
qp_status qp_cu_error(const qp_cu_dev *d, qp_status st, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

struct qp_cu_state {
    const qp_host *host;
    int n;
    qp_cu_dev *devs;
    int runtime_version, driver_version;
};

typedef struct qp_cu_buf {
    void *p;
    size_t size;
    int imported;     /* the application's memory: never freed here */
} qp_cu_buf;

/* cuda_backend.c: a failed CUDA call as a recorded error (out of memory or
 * QP_ERR_DEVICE); the kernels' image / stream check before first use. */
qp_status qp_cu_call_failed(qp_cu_dev *d, const char *layer, const char *call, cudaError_t e);
qp_status qp_cu_runnable(qp_cu_dev *d, const char *layer);
/* cudaMalloc counted in device_stats (an error naming layer and what). */
qp_status qp_cu_malloc(qp_cu_dev *d, void **p, size_t bytes, const char *layer, const char *what);
/* Device memory allocated now and filled from host memory (ordered on the
 * device's stream, waited for: prepare time only). */
qp_status qp_cu_upload_new(qp_cu_dev *d, void **dst, const void *src, size_t bytes, const char *layer, const char *what);
/* Keeps p until the device goes (work or a captured graph may use it). */
qp_status qp_cu_retire(qp_cu_dev *d, void *p);
/* Notes an enqueued layer (named in a fault's message at the next wait). */
void qp_cu_enqueued(qp_cu_dev *d, const char *layer);

/* cuda_moe.c: the fused MoE ops (backend.h) */
qp_status qp_cu_moe_prepare_impl(void *dev, const qp_moe_desc *desc, void **moe);
void qp_cu_moe_destroy_impl(void *dev, void *moe);
qp_status qp_cu_moe_forward_impl(void *dev, void *moe, void *x, int M, int k, void *ids, void *w, void *y);
qp_status qp_cu_moe_route_impl(void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids,
                            void *w);
qp_status qp_cu_moe_reserve_impl(void *dev, void *moe, int max_m, int k);
/* the ops of api/backend.h (QP_BACKEND_GPU_OPS), as qp_cu_<op> */
QP_BACKEND_OPS_DECLARE(qp_cu)

#endif
