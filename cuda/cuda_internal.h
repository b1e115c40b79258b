/*
 * The CUDA plugin's host-side objects, shared by cuda_backend.c (devices,
 * buffers, linear layers) and cuda_moe.c (the fused MoE ops).
 */
#ifndef QPCU_INTERNAL_H
#define QPCU_INTERNAL_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cuda_caps.h"

typedef struct cu_state cu_state;

typedef struct cu_dev {
    cu_state *st;
    int index;
    struct cudaDeviceProp prop;
    int cc;
    qpcu_arch_fit fit;
    char fit_why[256];
    int probed;       /* qpcu_kernel_probe done: 1 ok, -1 failed */
    cudaStream_t stream;
    int has_stream;
    void *ws;         /* workspace: xq, xs, xzp, amax, partial */
    size_t ws_bytes;
} cu_dev;

struct cu_state {
    const qp_host *host;
    int n;
    cu_dev *devs;
    int runtime_version, driver_version;
};

typedef struct cu_buf {
    void *p;
    size_t size;
} cu_buf;

/* cuda_backend.c: a failed CUDA call as a recorded error (out of memory or
 * QP_ERR_DEVICE); the kernels' image / stream check before first use. */
qp_status qpcu_call_failed(cu_dev *d, const char *layer, const char *call, cudaError_t e);
qp_status qpcu_runnable(cu_dev *d, const char *layer);

/* cuda_moe.c: the fused MoE ops (backend.h) */
qp_status qpcu_moe_prepare(void *dev, const qp_moe_desc *desc, void **moe);
void qpcu_moe_destroy(void *dev, void *moe);
qp_status qpcu_moe_forward_op(void *dev, void *moe, void *x, int M, int k, void *ids, void *w, void *y);
void qpcu_moe_describe(void *dev, void *moe, int M, int k, char *out, size_t cap);

#endif
