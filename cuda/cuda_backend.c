/*
 * The CUDA backend plugin (docs/backends.md): libqport-cuda.so.
 *
 * Host side in C against the CUDA runtime API (linked statically, so the
 * plugin loads without a driver; then cudaGetDeviceCount fails with 35 and
 * the backend reports zero devices with the reason). Kernels live in
 * cuda_kernels.cu; layouts:
 *   W8A8-INT8: int8 [Np][Kp], W8A8-FP8: e4m3 codes [Np][Kp], QQQ: int4
 *   codes packed 8 per word [Np][Kp/2] (cuda_kernels.cu: expand_*), with
 *   K padded to 64 and N to 64 by zeros.
 * Paths: GEMV (M <= 16 by default; dp4a or plain int multiply-add; fp32
 * decode for fp8) and TILED (mma.sync tensor cores with split-K).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "cu_math.h"
#include "cuda_blaslt.h"
#include "cuda_caps.h"
#include "cuda_internal.h"
#include "cuda_kernels.h"
#include "cuda_moe.h"

#ifndef QP_CU_SASS_TARGETS
#define QP_CU_SASS_TARGETS "75,80,86,89,90"
#endif
#ifndef QP_CU_PTX_TARGETS
#define QP_CU_PTX_TARGETS "90"
#endif

#define EXPORT __attribute__((visibility("default")))

typedef struct qp_cu_lin {
    char layer[96];
    int N, K, Np, Kp;
    int wkind, qqq, act, bf16;
    unsigned path;
    float in_scale;
    int32_t in_zp;
    void *w;
    uint16_t *s_group;
    float *w_scale;
    int32_t *azp_adj;
    uint16_t *bias;
    /* float kinds */
    uint8_t *w_zero;
    float *lut;
    int group, blk, bias_after_round;
    int act_mbits, act_emin, act_emax, act_e4m3;
    float act_maxv, nv_g;
    int ue8m0;
    const char *kname; /* "w4a16", "unquantized", "mx", ... for messages */
} qp_cu_lin;

static int round_up(int v, int m) { return (v + m - 1) / m * m; }

static qp_status cuda_fail(qp_cu_dev *d, const char *layer, const char *call, cudaError_t e) {
    return qp_cu_error(d, e == cudaErrorMemoryAllocation ? QP_ERR_OUT_OF_MEMORY : QP_ERR_DEVICE, layer,
                       "%s failed: %s (%d)", call, cudaGetErrorString(e), (int)e);
}

/* ---- init / devices ------------------------------------------------------ */

qp_status qp_cu_init(const qp_host *host, void **state) {
    qp_cu_state *st = calloc(1, sizeof *st);
    if (!st) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of memory in init");
    st->host = host;
    *state = st;
    cudaRuntimeGetVersion(&st->runtime_version);
    cudaDriverGetVersion(&st->driver_version); /* 0 without a driver */
    int n = 0; /* left untouched when the call fails (no driver: 35) */
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        host->log(host->ctx, QP_LOG_INFO, "cuda: 0 devices: cudaGetDeviceCount failed: %s (%d)%s",
                  cudaGetErrorString(e), (int)e,
                  e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ? " (no NVIDIA driver or GPU)" : "");
        cudaGetLastError();
        return QP_OK;
    }
    if (n <= 0) {
        host->log(host->ctx, QP_LOG_INFO, "cuda: 0 devices: the driver reports no CUDA device");
        return QP_OK;
    }
    st->devs = calloc((size_t)n, sizeof *st->devs);
    if (!st->devs) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of memory in init");
    for (int i = 0; i < n; i++) {
        qp_cu_dev *d = &st->devs[st->n];
        d->st = st;
        d->index = st->n;
        e = cudaGetDeviceProperties(&d->prop, i);
        if (e != cudaSuccess) {
            host->log(host->ctx, QP_LOG_WARN, "cuda: device %d skipped: cudaGetDeviceProperties failed: %s (%d)", i,
                      cudaGetErrorString(e), (int)e);
            continue;
        }
        d->cc = d->prop.major * 10 + d->prop.minor;
        d->fit = qp_cu_arch_check(d->cc, QP_CU_SASS_TARGETS, QP_CU_PTX_TARGETS, d->fit_why, sizeof d->fit_why);
        if (d->fit == QP_CU_ARCH_NONE)
            host->log(host->ctx, QP_LOG_WARN, "cuda:%d %s: %s", d->index, d->prop.name, d->fit_why);
        else
            host->log(host->ctx, QP_LOG_INFO, "cuda:%d %s, compute capability %d.%d, %s", d->index, d->prop.name,
                      d->prop.major, d->prop.minor,
                      d->fit == QP_CU_ARCH_SASS ? "native code" : "PTX JIT (no SASS for this GPU in the plugin)");
        /* device index in the runtime equals ours unless one was skipped */
        d->index = i;
        st->n++;
    }
    return QP_OK;
}

/* Frees what the backend made on d (workspace, retired blocks; the stream
 * when it is ours), after its work. */
static void dev_teardown(qp_cu_dev *d) {
    if (!d->has_stream && !d->ws && !d->n_retired) return;
    cudaSetDevice(d->index);
    if (d->has_stream) {
        d->stats.host_waits++;
        cudaStreamSynchronize(d->stream);
    }
    if (d->ws) cudaFree(d->ws);
    for (int i = 0; i < d->n_retired; i++) cudaFree(d->retired[i]);
    free(d->retired);
    d->retired = NULL;
    d->n_retired = d->cap_retired = 0;
    d->ws = NULL;
    d->ws_bytes = 0;
    if (d->has_stream && !d->imported) cudaStreamDestroy(d->stream);
    d->has_stream = 0;
    cudaGetLastError();
}

void qp_cu_shutdown(void *state) {
    qp_cu_state *st = state;
    if (!st) return;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    for (int i = 0; i < st->n; i++) dev_teardown(&st->devs[i]);
    if (prev >= 0) cudaSetDevice(prev);
    cudaGetLastError();
    free(st->devs);
    free(st);
}

int qp_cu_device_count(void *state) { return ((qp_cu_state *)state)->n; }

void *qp_cu_device_get(void *state, int i) {
    qp_cu_state *st = state;
    return i >= 0 && i < st->n ? &st->devs[i] : NULL;
}

qp_status qp_cu_device_info(void *dev, qp_device_info *out) {
    qp_cu_dev *d = dev;
    size_t sz = out->struct_size;
    memset(out, 0, sz < sizeof *out ? sz : sizeof *out);
    out->struct_size = sz;
    snprintf(out->backend, sizeof out->backend, "cuda");
    out->index = d->index;
    snprintf(out->name, sizeof out->name, "%.127s", d->prop.name);
    snprintf(out->vendor, sizeof out->vendor, "NVIDIA");
    snprintf(out->driver, sizeof out->driver, "CUDA driver %d.%d", d->st->driver_version / 1000,
             (d->st->driver_version % 1000) / 10);
    snprintf(out->api_version, sizeof out->api_version, "%d.%d", d->st->runtime_version / 1000,
             (d->st->runtime_version % 1000) / 10);
    out->kind = d->prop.integrated ? QP_DEVICE_INTEGRATED_GPU : QP_DEVICE_DISCRETE_GPU;
    out->memory_bytes = (uint64_t)d->prop.totalGlobalMem;
    memcpy(out->uuid, d->prop.uuid.bytes, 16);
    out->has_uuid = 1;
    out->cuda_cc = d->cc;
    out->same_as[0] = 0;
    qp_device_caps *c = &out->caps;
    c->int8_storage = 1;
    c->int8_arith = 1;
    c->fp16_arith = d->cc >= 53;
    c->bf16 = d->cc >= 80;
    c->int_dot = qp_cu_cap_int_dot(d->cc);
    c->int_dot_accelerated = qp_cu_cap_int_dot(d->cc);
    c->tensor_core_int8 = qp_cu_cap_tensor_core_int8(d->cc);
    c->tensor_core_fp8 = qp_cu_cap_tensor_core_fp8(d->cc);
    c->subgroup_min = 32;
    c->subgroup_max = 32;
    c->shared_mem_bytes = (int64_t)d->prop.sharedMemPerBlock;
    c->max_buffer_bytes = (int64_t)d->prop.totalGlobalMem;
    c->max_alloc_bytes = (int64_t)d->prop.totalGlobalMem;
    return QP_OK;
}

qp_status qp_cu_device_supports(void *dev, const qp_scheme *scheme, int M, int N, int K, qp_support_info *out) {
    (void)M; (void)N; (void)K;
    qp_cu_dev *d = dev;
    qp_cu_scheme_support(scheme, d->cc, QP_CU_SASS_TARGETS, QP_CU_PTX_TARGETS, out);
    return QP_OK;
}

/* ---- buffers -------------------------------------------------------------- */

/* The layers' names since the last synchronize, for a fault's message. */
static void pend_text(const qp_cu_dev *d, char *out, size_t cap) {
    out[0] = 0;
    if (!d->n_pend) { snprintf(out, cap, "no layer enqueued since the last synchronize"); return; }
    size_t o = (size_t)snprintf(out, cap, "in the work enqueued since the last synchronize: ");
    int shown = d->n_pend < 4 ? d->n_pend : 4;
    for (int i = 0; i < shown && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s'%s'", i ? ", " : "", d->pend[i]);
    if (d->n_pend > shown && o < cap)
        snprintf(out + o, cap - o, " and %d more, the last '%s'", d->n_pend - shown, d->pend_last);
}

void qp_cu_enqueued(qp_cu_dev *d, const char *layer) {
    if (!layer || !*layer) layer = "(unnamed)";
    snprintf(d->pend_last, sizeof d->pend_last, "%s", layer);
    d->enq_seq++;
    int shown = d->n_pend < 4 ? d->n_pend : 4;
    for (int i = 0; i < shown; i++)
        if (!strncmp(d->pend[i], layer, sizeof d->pend[i] - 1)) return; /* listed once */
    if (d->n_pend < 4) snprintf(d->pend[d->n_pend], sizeof d->pend[0], "%s", layer);
    d->n_pend++;
}

/* cudaStreamSynchronize of the device's stream (a host wait); a failure
 * names the layers enqueued since the last one (`call` says who waited). */
static qp_status stream_wait(qp_cu_dev *d, const char *call) {
    if (!d->has_stream) return QP_OK;
    d->stats.host_waits++;
    cudaError_t e = cudaStreamSynchronize(d->stream);
    if (e == cudaSuccess) {
        d->n_pend = 0;
        return QP_OK;
    }
    cudaGetLastError();
    char pend[400];
    pend_text(d, pend, sizeof pend);
    d->n_pend = 0;
    return qp_cu_error(d, e == cudaErrorMemoryAllocation ? QP_ERR_OUT_OF_MEMORY : QP_ERR_DEVICE, NULL,
                    "%s failed %s: %s (%d)", call, pend, cudaGetErrorString(e), (int)e);
}

qp_status qp_cu_malloc(qp_cu_dev *d, void **p, size_t bytes, const char *layer, const char *what) {
    d->stats.allocations++;
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess) return QP_OK;
    cudaGetLastError();
    *p = NULL;
    char call[160];
    snprintf(call, sizeof call, "cudaMalloc(%s, %zu bytes)", what, bytes);
    return cuda_fail(d, layer, call, e);
}

qp_status qp_cu_retire(qp_cu_dev *d, void *p) {
    if (!p) return QP_OK;
    if (d->n_retired == d->cap_retired) {
        int cap = d->cap_retired ? 2 * d->cap_retired : 8;
        void **r = realloc(d->retired, (size_t)cap * sizeof *r);
        if (!r) {
            /* cannot keep it: free it after the device's work instead */
            (void)stream_wait(d, "cudaStreamSynchronize before freeing a grown-out scratch");
            cudaFree(p);
            return QP_OK;
        }
        d->retired = r;
        d->cap_retired = cap;
    }
    d->retired[d->n_retired++] = p;
    return QP_OK;
}

static qp_status qp_cu_buffer_alloc_impl(void *dev, size_t bytes, void **buf) {
    qp_cu_dev *d = dev;
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess) return cuda_fail(d, NULL, "cudaSetDevice", e);
    qp_cu_buf *b = calloc(1, sizeof *b);
    if (!b) return d->st->host->error(d->st->host->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    d->stats.allocations++;
    e = cudaMalloc(&b->p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(b);
        return qp_cu_error(d, e == cudaErrorMemoryAllocation ? QP_ERR_OUT_OF_MEMORY : QP_ERR_DEVICE, NULL,
                        "cudaMalloc(%zu bytes) failed: %s (%d)", bytes, cudaGetErrorString(e),
                        (int)e);
    }
    b->size = bytes;
    *buf = b;
    return QP_OK;
}

/* Frees a host record h (NULL: nothing to do) and the device memory p it
 * owns (NULL: none), on d's device. */
static void free_with_device(qp_cu_dev *d, void *h, void *p) {
    if (!h) return;
    cudaSetDevice(d->index);
    if (p) cudaFree(p);
    free(h);
}

static void qp_cu_buffer_free_impl(void *dev, void *buf) {
    qp_cu_buf *b = buf;
    free_with_device(dev, b, b && !b->imported ? b->p : NULL); /* an imported buffer's memory is the caller's */
}

static qp_status buf_range(qp_cu_dev *d, qp_cu_buf *b, size_t off, size_t bytes, const char *what) {
    if (off > b->size || bytes > b->size - off)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL,
                                  "%s of %zu bytes at offset %zu exceeds the buffer (%zu bytes)",
                                  what, bytes, off, b->size);
    return QP_OK;
}

/* A blocking copy of bytes between b at offset and the host's dst or src
 * (kind: which way), after the work enqueued before it: on the device's
 * stream, then waited for (the host memory may be pageable and reused). */
static qp_status buf_copy(qp_cu_dev *d, qp_cu_buf *b, size_t offset, size_t bytes, enum cudaMemcpyKind kind, void *dst,
                          const void *src) {
    const bool up = kind == cudaMemcpyHostToDevice;
    qp_status s = buf_range(d, b, offset, bytes, up ? "upload" : "download");
    if (s != QP_OK || !bytes) return s;
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess) return cuda_fail(d, NULL, "cudaSetDevice", e);
    char *at = (char *)b->p + offset;
    if (up) dst = at;
    else src = at;
    if (!d->has_stream) e = cudaMemcpy(dst, src, bytes, kind);
    else e = cudaMemcpyAsync(dst, src, bytes, kind, d->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return cuda_fail(d, NULL, up ? "cudaMemcpyAsync(host to device)" : "cudaMemcpyAsync(device to host)", e);
    }
    d->stats.submissions++;
    return stream_wait(d, up ? "buffer upload (cudaStreamSynchronize)" : "buffer download (cudaStreamSynchronize)");
}

static qp_status qp_cu_buffer_upload_impl(void *dev, void *buf, size_t offset, const void *src, size_t bytes) {
    return buf_copy(dev, buf, offset, bytes, cudaMemcpyHostToDevice, NULL, src);
}

static qp_status qp_cu_buffer_download_impl(void *dev, void *buf, size_t offset, void *dst, size_t bytes) {
    return buf_copy(dev, buf, offset, bytes, cudaMemcpyDeviceToHost, dst, NULL);
}

/* ---- layers ---------------------------------------------------------------- */

static void lin_free(qp_cu_lin *l) {
    if (!l) return;
    void *p[] = {l->w, l->s_group, l->w_scale, l->azp_adj, l->bias, l->w_zero, l->lut};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    free(l);
}

qp_status qp_cu_upload_new(qp_cu_dev *d, void **dst, const void *src, size_t bytes, const char *layer, const char *what) {
    qp_status s = qp_cu_malloc(d, dst, bytes, layer, what);
    if (s != QP_OK || !bytes) return s;
    /* on the device's stream (ordered before the forwards on an imported
     * non-blocking stream, which a legacy-stream cudaMemcpy from pageable
     * memory is not), then waited for: the host copy is freed after */
    cudaError_t e = d->has_stream ? cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, d->stream)
                                  : cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaGetLastError();
        char call[96];
        snprintf(call, sizeof call, "upload of %s (%zu bytes)", what, bytes);
        return cuda_fail(d, layer, call, e);
    }
    d->stats.submissions++;
    return stream_wait(d, "upload (cudaStreamSynchronize)");
}

static qp_status upload_new(qp_cu_dev *d, qp_cu_lin *l, void **dst, const void *src, size_t bytes, const char *tensor) {
    return qp_cu_upload_new(d, dst, src, bytes, l->layer, tensor);
}

QP_BACKEND_DEFINE_ERROR(qp_cu_error, qp_cu_dev, d->st->host, "cuda")

static qp_status lin_error(qp_cu_dev *d, qp_status s, const char *layer, const char *msg) {
    return qp_cu_error(d, s, layer, "%s", msg);
}

/* qport's own stream of a device it created (imported ones have the
 * application's): blocking, so ordered with legacy-stream work. */
static qp_status make_stream(qp_cu_dev *d, const char *layer) {
    if (d->has_stream) return QP_OK;
    cudaError_t e = cudaStreamCreateWithFlags(&d->stream, cudaStreamDefault);
    if (e != cudaSuccess) { cudaGetLastError(); return cuda_fail(d, layer, "cudaStreamCreate", e); }
    d->has_stream = 1;
    return QP_OK;
}

#define QP_CU_WS_MIN ((size_t)256 << 10)

/* A workspace of at least `bytes` (reserve time only: the old one is
 * retired, so work and graphs that use it stay valid). */
static qp_status ws_grow(qp_cu_dev *d, const char *layer, size_t bytes) {
    if (d->ws_bytes >= bytes) return QP_OK;
    void *p = NULL;
    qp_status s = qp_cu_malloc(d, &p, bytes, layer, "workspace");
    if (s != QP_OK) return s;
    if (d->ws) qp_cu_retire(d, d->ws);
    d->ws = p;
    d->ws_bytes = bytes;
    return QP_OK;
}

/* Ensures the kernels can run on the device (no image: a GPU newer than
 * every compiled target and no PTX, or a driver too old for the PTX). */
static qp_status ensure_runnable(qp_cu_dev *d, const char *layer) {
    if (d->fit == QP_CU_ARCH_NONE) return lin_error(d, QP_ERR_UNSUPPORTED, layer, d->fit_why);
    if (!d->probed) {
        cudaError_t e = cudaSetDevice(d->index);
        if (e != cudaSuccess) return cuda_fail(d, layer, "cudaSetDevice", e);
        int pe = qp_cu_kernel_probe();
        d->probed = pe == 0 ? 1 : -1;
        if (pe) {
            cudaGetLastError();
            char msg[256];
            snprintf(msg, sizeof msg,
                     "unsupported: no kernel image for compute capability %d.%d (cudaFuncGetAttributes: %s (%d)); "
                     "the plugin has sm %s and PTX %s",
                     d->prop.major, d->prop.minor, cudaGetErrorString((cudaError_t)pe), pe, QP_CU_SASS_TARGETS,
                     QP_CU_PTX_TARGETS);
            snprintf(d->fit_why, sizeof d->fit_why, "%s", msg);
            d->fit = QP_CU_ARCH_NONE;
            return lin_error(d, QP_ERR_UNSUPPORTED, layer, msg);
        }
        qp_status s = make_stream(d, layer);
        if (s != QP_OK) return s;
        /* the smallest workspace: the in-place rotation / KV chunks */
        if (d->ws_bytes < QP_CU_WS_MIN && (s = ws_grow(d, layer, QP_CU_WS_MIN)) != QP_OK) return s;
    }
    return d->probed == 1 ? QP_OK : lin_error(d, QP_ERR_UNSUPPORTED, layer, d->fit_why);
}

/* fp16 mma.sync from sm_75 (m16n8k8), bf16 from sm_80 (m16n8k16) */
static int tiled_h_ok(const qp_cu_dev *d, const qp_cu_lin *l) { return l->bf16 ? d->cc >= 80 : d->cc >= 75; }

/* Validates the forced path against the scheme and the device. */
static qp_status check_path(qp_cu_dev *d, const qp_cu_lin *l, unsigned path) {
    if ((path & QP_PATH_GEMV) && (path & QP_PATH_TILED))
        return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "QP_PATH_GEMV and QP_PATH_TILED are exclusive");
    if ((path & QP_PATH_INT_DOT) && (path & QP_PATH_NO_INT_DOT))
        return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "QP_PATH_INT_DOT and QP_PATH_NO_INT_DOT are exclusive");
    if (QP_CU_IS_FLOAT_KIND(l->wkind)) {
        if (path & QP_PATH_INT_DOT)
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer,
                             l->wkind == QP_CU_W_Q4F ? "unsupported path: w4a16 is a float GEMM (fp32 accumulation); "
                                                      "cuda has no int-dot path for it"
                                                    : "unsupported path: this scheme is a float GEMM (fp32 "
                                                      "accumulation); cuda has no int-dot path for it");
        if ((path & QP_PATH_TILED) && !tiled_h_ok(d, l))
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer,
                             "unsupported path: the tiled float kernel needs fp16 tensor cores (compute capability "
                             ">= 7.5) and, for bf16, compute capability >= 8.0; this device runs the GEMV path");
    } else if (l->wkind == QP_CU_W_F8 || l->wkind == QP_CU_W_F8B) {
        if (path & QP_PATH_INT_DOT)
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer,
                             "unsupported path: W8A8-FP8 has no integer dot-product path on cuda");
        if ((path & QP_PATH_TILED) && !qp_cu_cap_tensor_core_fp8(d->cc))
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer,
                             "unsupported path: the tiled fp8 kernel needs e4m3 tensor cores (compute capability "
                             ">= 8.9); this device runs the fp32 decode GEMV path");
    } else {
        if ((path & QP_PATH_TILED) && (path & QP_PATH_NO_INT_DOT))
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer,
                             "unsupported path: the tiled kernel uses int8 tensor cores (mma.sync); the plain "
                             "multiply-add kernel is the GEMV path");
        if ((path & QP_PATH_INT_DOT) && !qp_cu_cap_int_dot(d->cc))
            return lin_error(d, QP_ERR_UNSUPPORTED, l->layer, "unsupported path: no dp4a below compute capability 6.1");
    }
    return QP_OK;
}

/* Float kinds: repack and upload (layouts in cuda_kernels.h). */
static qp_status upload_float(qp_cu_dev *d, qp_cu_lin *l, const qp_lin_desc *desc) {
    size_t Np = (size_t)l->Np, Kp = (size_t)l->Kp, N = (size_t)l->N, K = (size_t)l->K;
    qp_status s = QP_OK;
    if (l->wkind == QP_CU_W_Q4F) {
        int g = desc->group_size > 0 ? desc->group_size : l->Kp;
        size_t G = desc->group_size > 0 ? K / (size_t)g : 1, Gp = (Kp + (size_t)g - 1) / (size_t)g;
        l->group = g;
        uint32_t *hw = calloc(Np * Kp / 8, 4);
        uint8_t *hz = calloc(Gp * Np, 1);
        float *hs = calloc(Gp * Np, sizeof(float));
        if (!hw || !hz || !hs) { free(hw); free(hz); free(hs); return lin_error(d, QP_ERR_OUT_OF_MEMORY, l->layer, "out of host memory while repacking"); }
        /* int4: c ^ 8 with zero 8 gives v = c - 16 (c >= 8); uint4: c - zero */
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) {
                uint32_t c = (uint32_t)desc->q4[n * K + k] & 0xFu;
                if (desc->w4_signed) c ^= 8u;
                hw[(n * Kp + k) / 8] |= c << (4 * (k % 8));
            }
        for (size_t gi = 0; gi < G; gi++)
            for (size_t n = 0; n < N; n++) {
                hz[gi * Np + n] = desc->w4_signed ? 8 : desc->w4_zero[gi * N + n];
                hs[gi * Np + n] = desc->w4_scale[gi * N + n];
            }
        s = upload_new(d, l, &l->w, hw, Np * Kp / 2, "q4 (packed int4)");
        if (s == QP_OK) s = upload_new(d, l, (void **)&l->w_zero, hz, Gp * Np, "w4 zero points");
        if (s == QP_OK) s = upload_new(d, l, (void **)&l->w_scale, hs, Gp * Np * sizeof(float), "w4 scales");
        free(hw); free(hz); free(hs);
        return s;
    }
    if (l->wkind == QP_CU_W_H) {
        uint16_t *hw = calloc(Np * Kp, 2);
        if (!hw) return lin_error(d, QP_ERR_OUT_OF_MEMORY, l->layer, "out of host memory while repacking");
        for (size_t n = 0; n < N; n++) memcpy(hw + n * Kp, desc->w_act + n * K, K * 2);
        s = upload_new(d, l, &l->w, hw, Np * Kp * 2, "weight (w_act)");
        free(hw);
        return s;
    }
    size_t B = (size_t)l->blk;
    /* fp4 codes two per byte (half the weight bytes of the GEMV) */
    int packed = desc->w_elem == QP_DTYPE_F4_E2M1;
    for (size_t i = 0; packed && i < N * K; i++)
        if (desc->w_codes[i] > 15) packed = 0;
    if (packed) l->wkind = QP_CU_W_LUT4;
    size_t wbytes = packed ? Np * Kp / 2 : Np * Kp;
    uint8_t *hc = calloc(wbytes, 1);
    float *hb = calloc(Np * (Kp / B), sizeof(float));
    if (!hc || !hb) { free(hc); free(hb); return lin_error(d, QP_ERR_OUT_OF_MEMORY, l->layer, "out of host memory while repacking"); }
    for (size_t n = 0; n < N; n++) {
        if (packed)
            for (size_t k = 0; k < K; k++) hc[(n * Kp + k) / 2] |= (uint8_t)(desc->w_codes[n * K + k] << (4 * (k % 2)));
        else
            memcpy(hc + n * Kp, desc->w_codes + n * K, K);
        memcpy(hb + n * (Kp / B), desc->w_blk_scale + n * (K / B), (K / B) * sizeof(float));
    }
    s = upload_new(d, l, &l->w, hc, wbytes, packed ? "w_codes (fp4 pairs)" : "w_codes");
    if (s == QP_OK) s = upload_new(d, l, (void **)&l->w_scale, hb, Np * (Kp / B) * sizeof(float), "w_blk_scale");
    if (s == QP_OK) s = upload_new(d, l, (void **)&l->lut, desc->w_lut, 256 * sizeof(float), "w_lut");
    free(hc); free(hb);
    return s;
}

static int env_flag(const qp_host *h, const char *name) {
    const char *v = qp_host_setting(h, name);
    return v && *v && strcmp(v, "0") != 0;
}

static qp_status qp_cu_linear_prepare_impl(void *dev, const qp_lin_desc *desc, unsigned path, void **out) {
    qp_cu_dev *d = dev;
    const qp_host *h = d->st->host;
    if (!desc || !out || desc->N <= 0 || desc->K <= 0)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "cuda: linear_prepare: NULL descriptor or bad shape");
    const char *layer = desc->layer ? desc->layer : "";
    qp_cu_lin *l = QP_BACKEND_LAYER_NEW(qp_cu_lin, layer);
    if (!l) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    l->N = desc->N;
    l->K = desc->K;
    l->Np = round_up(desc->N, QP_CU_BN);
    l->Kp = round_up(desc->K, QP_CU_BK);
    l->path = path;
    l->in_scale = desc->input_scale;
    l->in_zp = desc->input_zp;
    qp_status s = QP_OK;
    void *host = NULL;
    float *hs = NULL;

    if (desc->act_dtype != QP_DTYPE_F16 && desc->act_dtype != QP_DTYPE_BF16) {
        s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "activations must be fp16 or bf16");
        goto fail;
    }
    l->bf16 = desc->act_dtype == QP_DTYPE_BF16;
    switch (desc->kind) {
    case QP_SCHEME_W8A8_INT8:
        if (!desc->w_i8 || !desc->w_scale) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "missing w_i8 / w_scale"); goto fail; }
        l->wkind = QP_CU_W_I8;
        if (desc->act == QP_ACT_INT8_STATIC) l->act = desc->act_symmetric ? QP_CU_ACT_I8_STATIC_SYM : QP_CU_ACT_I8_STATIC_ASYM;
        else if (desc->act == QP_ACT_INT8_DYNAMIC_TOKEN) l->act = desc->act_symmetric ? QP_CU_ACT_I8_DYN_SYM : QP_CU_ACT_I8_DYN_ASYM;
        else { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: W8A8-INT8 activation mode not implemented on cuda"); goto fail; }
        if (!desc->act_symmetric && !desc->azp_adj) {
            s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "asymmetric activations need azp_adj");
            goto fail;
        }
        break;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
        if (!desc->w_u8 || !desc->w_scale) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "missing w_u8 / w_scale"); goto fail; }
        l->wkind = QP_CU_W_F8;
        if (desc->act == QP_ACT_FP8_STATIC) l->act = QP_CU_ACT_F8_STATIC;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TENSOR) l->act = QP_CU_ACT_F8_DYN_TENSOR;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TOKEN) l->act = QP_CU_ACT_F8_DYN_TOKEN;
        else { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: not yet implemented on cuda (fp8 activation mode)"); goto fail; }
        break;
    case QP_SCHEME_W8A8_FP8_BLOCK:
        if (!desc->w_u8 || !desc->w_scale) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "missing w_u8 / w_scale"); goto fail; }
        if (desc->act != QP_ACT_FP8_GROUP128) {
            s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: per-block fp8 weights need per-token-group-128 activations");
            goto fail;
        }
        if (desc->K % 128) { s = lin_error(d, QP_ERR_VALUE, layer, "per-block fp8 needs K % 128 == 0"); goto fail; }
        l->wkind = QP_CU_W_F8B;
        l->act = QP_CU_ACT_F8_GROUP128;
        l->ue8m0 = desc->ue8m0 != 0;
        break;
    case QP_SCHEME_QQQ_W4A8:
        if (desc->act_dtype != QP_DTYPE_F16) { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "QQQ takes fp16 activations only"); goto fail; }
        if (desc->group_size != -1 && desc->group_size != 128) { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "QQQ group size must be -1 or 128"); goto fail; }
        if (desc->group_size == 128 && (desc->K % 128 || !desc->s_group)) {
            s = lin_error(d, QP_ERR_VALUE, layer, "QQQ group 128 needs K % 128 == 0 and s_group");
            goto fail;
        }
        if (!desc->q4 || !desc->s_channel || !desc->w8) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "missing q4 / w8 / s_channel"); goto fail; }
        l->qqq = 1;
        l->act = QP_CU_ACT_I8_DYN_SYM;
        /* QPORT_CUDA_QQQ_W8=1: run the exact int8 weights of docs/semantics.md §11 step 2
         * (desc->w8) through the int8 kernels instead of expanding nibbles */
        l->wkind = env_flag(h, "QPORT_CUDA_QQQ_W8") ? QP_CU_W_I8 : desc->group_size == 128 ? QP_CU_W_Q4G : QP_CU_W_Q4CH;
        break;
    case QP_SCHEME_W4A16_INT4: {
        l->kname = "w4a16";
        int g = desc->group_size;
        if (g != -1 && (g < 32 || g % 32)) {
            char msg[128];
            snprintf(msg, sizeof msg, "unsupported: w4a16 group size %d on cuda (the kernels take -1 or multiples of 32)", g);
            s = lin_error(d, QP_ERR_UNSUPPORTED, layer, msg);
            goto fail;
        }
        if (g > 0 && desc->K % g) { s = lin_error(d, QP_ERR_VALUE, layer, "w4a16: K is not a multiple of the group size"); goto fail; }
        if (!desc->q4 || !desc->w4_scale || (!desc->w4_signed && !desc->w4_zero)) {
            s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "w4a16: missing q4 / w4_scale / w4_zero (weight_zero_point)");
            goto fail;
        }
        if (desc->act != QP_ACT_NONE) { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "w4a16 takes no activation quantization"); goto fail; }
        char why[160];
        if (qp_lin_w4_range_error(desc, why, sizeof why)) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, why); goto fail; }
        l->wkind = QP_CU_W_Q4F;
        l->act = QP_CU_ACT_NONE;
        break;
    }
    case QP_SCHEME_UNQUANTIZED:
        l->kname = "unquantized";
        if (!desc->w_act) { s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "unquantized: missing w_act"); goto fail; }
        if (desc->act != QP_ACT_NONE) { s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unquantized layers take no activation quantization"); goto fail; }
        l->wkind = QP_CU_W_H;
        l->act = QP_CU_ACT_NONE;
        break;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
        l->kname = desc->kind == QP_SCHEME_NVFP4 ? "nvfp4" : desc->kind == QP_SCHEME_OCP_MX ? "ocp-mx" : "w4a8-mxfp4-fp8";
        if (!desc->w_codes || !desc->w_lut || !desc->w_blk_scale || (desc->w_blk != 16 && desc->w_blk != 32)) {
            s = lin_error(d, QP_ERR_INVALID_ARGUMENT, layer, "missing w_codes / w_lut / w_blk_scale or w_blk not 16/32");
            goto fail;
        }
        if (desc->K % desc->w_blk) { s = lin_error(d, QP_ERR_VALUE, layer, "K is not a multiple of the weight block"); goto fail; }
        l->wkind = QP_CU_W_LUT;
        l->blk = desc->w_blk;
        l->bias_after_round = desc->bias_after_round;
        switch (desc->act) {
        case QP_ACT_NONE: l->act = QP_CU_ACT_NONE; break;
        case QP_ACT_FP8_STATIC_QDQ:
            if (!(desc->input_scale > 0.0f)) { s = lin_error(d, QP_ERR_VALUE, layer, "fp8 static qdq needs input_scale > 0"); goto fail; }
            l->act = QP_CU_ACT_F8S_QDQ;
            break;
        case QP_ACT_NVFP4_QDQ:
            if (!(desc->input_global_scale_inv > 0.0f) || isinf(desc->input_global_scale_inv) || desc->K % 16) {
                s = lin_error(d, QP_ERR_VALUE, layer, "nvfp4 qdq needs a finite input_global_scale_inv > 0 and K % 16 == 0");
                goto fail;
            }
            l->act = QP_CU_ACT_NVFP4_QDQ;
            l->nv_g = desc->input_global_scale_inv;
            break;
        case QP_ACT_MX_QDQ:
            l->act = QP_CU_ACT_MX_QDQ;
            switch (desc->act_elem) {
            case QP_DTYPE_F4_E2M1: l->act_emin = 0; l->act_maxv = 6.0f; break;
            case QP_DTYPE_F6_E3M2: l->act_emin = -2; l->act_maxv = 28.0f; break;
            case QP_DTYPE_F6_E2M3: l->act_emin = 0; l->act_maxv = 7.5f; break;
            case QP_DTYPE_F8_E4M3FN: l->act_emin = -6; l->act_maxv = 448.0f; l->act_e4m3 = 1; break;
            default: s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "MX qdq: act_elem is not an MX element format"); goto fail;
            }
            l->act_mbits = desc->act_mbits;
            l->act_emax = desc->act_emax;
            if (desc->K % 32) { s = lin_error(d, QP_ERR_VALUE, layer, "MX qdq needs K % 32 == 0"); goto fail; }
            break;
        default:
            s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: activation mode not implemented on cuda for this scheme");
            goto fail;
        }
        break;
    default:
        s = lin_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: not yet implemented on cuda");
        goto fail;
    }
    if ((s = check_path(d, l, path)) != QP_OK) goto fail;
    if ((s = ensure_runnable(d, layer)) != QP_OK) goto fail;

    if (QP_CU_IS_FLOAT_KIND(l->wkind)) {
        if ((s = upload_float(d, l, desc)) != QP_OK) goto fail;
        if (desc->bias && (s = upload_new(d, l, (void **)&l->bias, desc->bias, (size_t)l->N * 2, "bias")) != QP_OK) goto fail;
        *out = l;
        return QP_OK;
    }

    size_t Np = (size_t)l->Np, Kp = (size_t)l->Kp, N = (size_t)l->N, K = (size_t)l->K;
    /* weights */
    if (l->wkind == QP_CU_W_I8 || l->wkind == QP_CU_W_F8 || l->wkind == QP_CU_W_F8B) {
        const uint8_t *src = l->wkind != QP_CU_W_I8 ? desc->w_u8 : (const uint8_t *)(l->qqq ? desc->w8 : desc->w_i8);
        uint8_t *hw = calloc(Np * Kp, 1);
        if (!(host = hw)) goto oom;
        for (size_t n = 0; n < N; n++) memcpy(hw + n * Kp, src + n * K, K);
        if ((s = upload_new(d, l, &l->w, hw, Np * Kp, "weight")) != QP_OK) goto fail;
    } else {
        uint32_t *hw = calloc(Np * Kp / 8, 4);
        if (!(host = hw)) goto oom;
        qp_cu_pack_q4(desc->q4, l->N, l->K, l->Np, l->Kp, hw);
        if ((s = upload_new(d, l, &l->w, hw, Np * Kp / 2, "q4 (packed)")) != QP_OK) goto fail;
        if (l->wkind == QP_CU_W_Q4G) {
            size_t G = K / 128;
            uint16_t *sg = calloc(G * Np, 2);
            if (!sg) goto oom;
            for (size_t g = 0; g < G; g++) memcpy(sg + g * Np, desc->s_group + g * N, N * 2);
            s = upload_new(d, l, (void **)&l->s_group, sg, G * Np * 2, "s_group");
            free(sg);
            if (s != QP_OK) goto fail;
        }
    }
    free(host);
    host = NULL;
    if (l->wkind == QP_CU_W_F8B) { /* block scales [ceil(N/128)][K/128] as they are */
        size_t nsb = (N + 127) / 128 * (K / 128);
        if ((s = upload_new(d, l, (void **)&l->w_scale, desc->w_scale, nsb * sizeof(float), "weight_scale (blocks)")) != QP_OK) goto fail;
        if (desc->bias && (s = upload_new(d, l, (void **)&l->bias, desc->bias, N * 2, "bias")) != QP_OK) goto fail;
        *out = l;
        return QP_OK;
    }
    /* scales, azp, bias */
    hs = calloc(Np, sizeof(float));
    if (!hs) goto oom;
    memcpy(hs, l->qqq ? desc->s_channel : desc->w_scale, N * sizeof(float));
    if ((s = upload_new(d, l, (void **)&l->w_scale, hs, Np * sizeof(float), l->qqq ? "s_channel" : "weight_scale")) != QP_OK) goto fail;
    if (l->wkind == QP_CU_W_I8 && !l->qqq && !desc->act_symmetric) {
        int32_t *adj = calloc(Np, sizeof(int32_t));
        if (!adj) goto oom;
        memcpy(adj, desc->azp_adj, N * sizeof(int32_t));
        s = upload_new(d, l, (void **)&l->azp_adj, adj, Np * sizeof(int32_t), "azp_adj");
        free(adj);
        if (s != QP_OK) goto fail;
    }
    if (desc->bias && (s = upload_new(d, l, (void **)&l->bias, desc->bias, N * 2, "bias")) != QP_OK) goto fail;
    free(hs);
    *out = l;
    return QP_OK;
oom:
    s = lin_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory while repacking");
fail:
    free(host);
    free(hs);
    cudaSetDevice(d->index);
    lin_free(l);
    return s;
}

static void qp_cu_linear_destroy_impl(void *dev, void *lin) {
    qp_cu_dev *d = dev;
    cudaSetDevice(d->index);
    lin_free(lin);
}

/* The kernel path for M rows. */
static int pick_kpath(const qp_cu_dev *d, const qp_cu_lin *l, int M) {
    unsigned p = l->path;
    if (QP_CU_IS_FLOAT_KIND(l->wkind)) {
        if (p & QP_PATH_TILED) return QP_CU_KP_TILED;
        if (p & QP_PATH_GEMV) return QP_CU_KP_GEMV_PLAIN;
        return M > QP_CU_GEMV_MAX_ROWS && tiled_h_ok(d, l) ? QP_CU_KP_TILED : QP_CU_KP_GEMV_PLAIN;
    }
    if (l->wkind == QP_CU_W_F8 || l->wkind == QP_CU_W_F8B) {
        if (p & QP_PATH_TILED) return QP_CU_KP_TILED;
        if (p & QP_PATH_GEMV) return QP_CU_KP_GEMV_DP4A;
        return M > QP_CU_GEMV_MAX_ROWS && qp_cu_cap_tensor_core_fp8(d->cc) ? QP_CU_KP_TILED : QP_CU_KP_GEMV_DP4A;
    }
    if (p & QP_PATH_NO_INT_DOT) return QP_CU_KP_GEMV_PLAIN;
    if (p & QP_PATH_TILED) return QP_CU_KP_TILED;
    if (p & QP_PATH_GEMV) return QP_CU_KP_GEMV_DP4A;
    return M > QP_CU_GEMV_MAX_ROWS ? QP_CU_KP_TILED : QP_CU_KP_GEMV_DP4A;
}

static int pick_splits(const qp_cu_dev *d, const qp_cu_lin *l, int Mp) {
    int blocks = (l->Np / QP_CU_BN) * (Mp / QP_CU_BM), kt = l->Kp / (QP_CU_IS_FLOAT_KIND(l->wkind) ? QP_CU_BKH : QP_CU_BK);
    int target = 2 * (d->prop.multiProcessorCount > 0 ? d->prop.multiProcessorCount : 1);
    int s = 1;
    if (blocks < target) s = (target + blocks - 1) / blocks;
    if (s > kt / 2) s = kt / 2; /* at least two k-tiles per split */
    if (s > 16) s = 16;
    return s < 1 ? 1 : s;
}

static size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }

void qp_cu_linear_describe(void *dev, void *lin, int M, char *out, size_t cap) {
    qp_cu_dev *d = dev;
    qp_cu_lin *l = lin;
    int kp = pick_kpath(d, l, M);
    if (QP_CU_IS_FLOAT_KIND(l->wkind)) {
        const char *act = l->wkind == QP_CU_W_LUT4 ? (l->act == QP_CU_ACT_MX_QDQ ? " fp4x2 mx-qdq" : l->act == QP_CU_ACT_F8S_QDQ
                        ? " fp4x2 fp8-static-qdq" : l->act == QP_CU_ACT_NVFP4_QDQ ? " fp4x2 nvfp4-qdq" : " fp4x2")
                        : l->act == QP_CU_ACT_MX_QDQ ? " mx-qdq" : l->act == QP_CU_ACT_F8S_QDQ ? " fp8-static-qdq"
                        : l->act == QP_CU_ACT_NVFP4_QDQ ? " nvfp4-qdq" : "";
        if (kp == QP_CU_KP_TILED)
            snprintf(out, cap, "tiled %dx%dx%d mma.sync %s %s%s split-k %d %s%s", QP_CU_BM, QP_CU_BN, QP_CU_BKH,
                     l->bf16 ? "bf16" : "f16", d->cc >= 80 ? "m16n8k16" : "m16n8k8", d->cc >= 80 ? " cp.async" : "",
                     pick_splits(d, l, round_up(M > 0 ? M : 1, QP_CU_BM)), l->kname, act);
        else
            snprintf(out, cap, "gemv fp32 %s%s", l->kname, act);
        return;
    }
    const char *w = l->wkind == QP_CU_W_F8B ? (l->ue8m0 ? "fp8-block ue8m0" : "fp8-block") : l->wkind == QP_CU_W_F8 ? "fp8" : l->wkind == QP_CU_W_I8 ? (l->qqq ? "qqq-w8" : "int8")
                  : l->wkind == QP_CU_W_Q4G ? "qqq-g128 int4->int8" : "qqq-ch int4->int8";
    if (kp == QP_CU_KP_TILED)
        snprintf(out, cap, "tiled %dx%dx%d mma.sync %s%s split-k %d %s", QP_CU_BM, QP_CU_BN, QP_CU_BK,
                 l->wkind == QP_CU_W_F8 || l->wkind == QP_CU_W_F8B ? "e4m3" : d->cc >= 80 ? "s8 m16n8k32" : "s8 m8n8k16",
                 d->cc >= 80 ? " cp.async" : "", pick_splits(d, l, round_up(M > 0 ? M : 1, QP_CU_BM)), w);
    else
        snprintf(out, cap, "gemv %s %s", l->wkind == QP_CU_W_F8 || l->wkind == QP_CU_W_F8B ? "fp32-decode" : kp == QP_CU_KP_GEMV_DP4A ? "int-dot dp4a" : "plain int32 mad", w);
}

/* The workspace layout of a forward of M rows (byte offsets). */
typedef struct ws_layout { int Mp, kpath, splits; size_t o_xq, o_xs, o_zp, o_am, o_p, total; } ws_layout;

static void ws_plan(const qp_cu_dev *d, const qp_cu_lin *l, int M, ws_layout *w) {
    w->Mp = round_up(M > 0 ? M : 1, QP_CU_BM);
    w->kpath = pick_kpath(d, l, M);
    w->splits = w->kpath == QP_CU_KP_TILED ? pick_splits(d, l, w->Mp) : 1;
    size_t xs_per_row = l->wkind == QP_CU_W_F8B ? (size_t)l->K / 128 : 1;
    size_t xq_elem = QP_CU_IS_FLOAT_KIND(l->wkind) ? 2 : 1;
    w->o_xq = 0;
    w->o_xs = al256(w->o_xq + (size_t)w->Mp * (size_t)l->Kp * xq_elem);
    w->o_zp = al256(w->o_xs + (size_t)w->Mp * 4 * xs_per_row);
    w->o_am = al256(w->o_zp + (size_t)w->Mp * 4);
    w->o_p = al256(w->o_am + 4);
    w->total = al256(w->o_p + (size_t)w->splits * (size_t)w->Mp * (size_t)l->Np * 4);
}

/* Scratch for every M in 1..max_m: the largest layout over the row blocks
 * (each block's first and last M, which bracket the path switch). */
static qp_status qp_cu_linear_reserve_impl(void *dev, void *lin, int max_m) {
    qp_cu_dev *d = dev;
    qp_cu_lin *l = lin;
    if (max_m < 0 || max_m > (1 << 24)) return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "linear_reserve: bad max_m");
    qp_status s = ensure_runnable(d, l->layer);
    if (s != QP_OK) return s;
    size_t need = 0;
    for (int hi = QP_CU_BM; hi - QP_CU_BM < max_m; hi += QP_CU_BM) {
        int ms[2] = {hi - QP_CU_BM + 1, hi < max_m ? hi : max_m};
        for (int i = 0; i < 2; i++) {
            ws_layout w;
            ws_plan(d, l, ms[i], &w);
            if (w.total > need) need = w.total;
        }
    }
    return ws_grow(d, l->layer, need);
}

/* Validates and launches the forward kernels on d->stream (no sync). */
static qp_status forward_launch(qp_cu_dev *d, qp_cu_lin *l, void *xb, int M, void *yb, cudaEvent_t g0, cudaEvent_t g1) {
    qp_cu_buf *x = xb, *y = yb;
    if (M < 0 || !x || !y) return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "negative M or NULL buffer");
    if (M == 0) return QP_OK;
    size_t xbytes = (size_t)M * (size_t)l->K * 2, ybytes = (size_t)M * (size_t)l->N * 2;
    if (x->size < xbytes || y->size < ybytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "buffers too small for M=%d: x %zu < %zu or y %zu < %zu bytes", M, x->size, xbytes,
                 y->size, ybytes);
        return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, msg);
    }
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess) return cuda_fail(d, l->layer, "cudaSetDevice", e);
    ws_layout w;
    ws_plan(d, l, M, &w);
    if (d->ws_bytes < w.total || !d->has_stream) {
        char msg[200];
        snprintf(msg, sizeof msg, "M = %d needs %zu bytes of scratch, %zu reserved: reserve it first (linear_reserve; "
                 "qp_linear_options.max_m)", M, w.total, d->ws_bytes);
        return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, msg);
    }
    qp_cu_fwd f;
    memset(&f, 0, sizeof f);
    f.M = M; f.N = l->N; f.K = l->K; f.Kp = l->Kp; f.Np = l->Np;
    f.Mp = w.Mp;
    f.wkind = l->wkind; f.qqq = l->qqq; f.act = l->act; f.bf16 = l->bf16;
    f.kpath = w.kpath;
    f.splits = w.splits;
    f.sm = d->cc;
    f.x = x->p; f.y = y->p;
    f.w = l->w; f.s_group = l->s_group; f.w_scale = l->w_scale; f.azp_adj = l->azp_adj; f.bias = l->bias;
    f.in_scale = l->in_scale; f.in_zp = l->in_zp;
    f.w_zero = l->w_zero; f.lut = l->lut; f.group = l->group; f.blk = l->blk;
    f.act_mbits = l->act_mbits; f.act_emin = l->act_emin; f.act_emax = l->act_emax; f.act_e4m3 = l->act_e4m3;
    f.act_maxv = l->act_maxv; f.nv_g = l->nv_g; f.bias_after_round = l->bias_after_round; f.ue8m0 = l->ue8m0;
    char *ws = d->ws;
    f.xq = ws + w.o_xq; f.xs = (float *)(ws + w.o_xs); f.xzp = (int32_t *)(ws + w.o_zp);
    f.amax = (uint32_t *)(ws + w.o_am); f.partial = ws + w.o_p;
    f.stream = d->stream;
    f.ev_g0 = g0;
    f.ev_g1 = g1;
    const char *what = "";
    int ke = qp_cu_forward(&f, &what);
    if (ke) {
        cudaGetLastError();
        char call[96];
        snprintf(call, sizeof call, "launch of %s (M=%d)", what, M);
        return cuda_fail(d, l->layer, call, (cudaError_t)ke);
    }
    return QP_OK;
}

/* Enqueued on the device's stream; completed by synchronize. */
static qp_status qp_cu_linear_forward_impl(void *dev, void *lin, void *xb, int M, void *yb) {
    qp_cu_dev *d = dev;
    qp_cu_lin *l = lin;
    qp_status s = forward_launch(d, l, xb, M, yb, NULL, NULL);
    if (s == QP_OK && M > 0) qp_cu_enqueued(d, l->layer);
    return s;
}

static qp_status qp_cu_synchronize_impl(void *dev) {
    qp_cu_dev *d = dev;
    if (!d->has_stream) return QP_OK;
    cudaError_t e = cudaSetDevice(d->index);
    if (e != cudaSuccess) return cuda_fail(d, NULL, "cudaSetDevice", e);
    return stream_wait(d, "cudaStreamSynchronize");
}

/* ---- optional ops ---------------------------------------------------------- */

typedef struct qp_cu_rot {
    int8_t *H;
    int r;
    float c;
} qp_cu_rot;

static qp_status op_fail(qp_cu_dev *d, qp_status st, const char *fmt, const char *a) {
    return qp_cu_error(d, st, NULL, fmt, a);
}

static qp_status ensure_stream(qp_cu_dev *d) { return ensure_runnable(d, "(no layer)"); }

static qp_status qp_cu_rotation_prepare_impl(void *dev, const int8_t *H, int r, float c, void **out) {
    qp_cu_dev *d = dev;
    if (!H || r <= 0 || !out) return op_fail(d, QP_ERR_INVALID_ARGUMENT, "rotation_prepare: %s", "NULL H or r <= 0");
    for (size_t i = 0; i < (size_t)r * r; i++)
        if (H[i] != 1 && H[i] != -1) return op_fail(d, QP_ERR_INVALID_ARGUMENT, "rotation_prepare: %s", "entries must be +1 or -1");
    qp_status s = ensure_stream(d);
    if (s != QP_OK) return s;
    qp_cu_rot *R = calloc(1, sizeof *R);
    if (!R) return op_fail(d, QP_ERR_OUT_OF_MEMORY, "%s", "out of host memory");
    R->r = r;
    R->c = c;
    s = qp_cu_upload_new(d, (void **)&R->H, H, (size_t)r * r, "input_rotation", "the rotation matrix");
    if (s != QP_OK) {
        cudaFree(R->H);
        free(R);
        return s;
    }
    *out = R;
    return QP_OK;
}

static void qp_cu_rotation_destroy_impl(void *dev, void *rot) {
    qp_cu_rot *R = rot;
    free_with_device(dev, R, R ? R->H : NULL);
}

static qp_status dt_check(qp_cu_dev *d, qp_dtype dt, const char *op) {
    if (dt == QP_DTYPE_F16 || dt == QP_DTYPE_BF16) return QP_OK;
    return op_fail(d, QP_ERR_UNSUPPORTED, "%s: dtype must be fp16 or bf16", op);
}

/* A launch's status at enqueue (the kernel's own faults come at the next
 * wait, naming `what`). */
static qp_status launched(qp_cu_dev *d, const char *what, int ke) {
    if (ke != 0) {
        cudaGetLastError();
        return cuda_fail(d, NULL, what, (cudaError_t)ke);
    }
    qp_cu_enqueued(d, what);
    return QP_OK;
}

static qp_status d2d(qp_cu_dev *d, void *dst, const void *src, size_t bytes, const char *what) {
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream);
    if (e != cudaSuccess) { cudaGetLastError(); return cuda_fail(d, NULL, what, e); }
    d->stats.submissions++;
    return QP_OK;
}

/* In-place calls (src and dst one buffer) go through the device's
 * workspace in chunks, in stream order, so they allocate nothing: the
 * kernels read what other threads overwrite otherwise. */
static qp_status qp_cu_rotation_forward_impl(void *dev, void *rot, qp_dtype dt, void *xb, int M, int K, void *yb) {
    qp_cu_dev *d = dev;
    qp_cu_rot *R = rot;
    qp_cu_buf *x = xb, *y = yb;
    qp_status s = dt_check(d, dt, "rotation_forward");
    if (s != QP_OK) return s;
    if (!R || !x || !y || M < 0 || K <= 0 || K % R->r)
        return op_fail(d, QP_ERR_INVALID_ARGUMENT, "rotation_forward: %s", "bad arguments (K % r != 0 or NULL)");
    size_t bytes = (size_t)M * (size_t)K * 2;
    if ((s = buf_range(d, x, 0, bytes, "rotation input")) != QP_OK || (s = buf_range(d, y, 0, bytes, "rotation output")) != QP_OK) return s;
    if ((s = ensure_stream(d)) != QP_OK) return s;
    if (!M) return QP_OK;
    cudaSetDevice(d->index);
    int bf = dt == QP_DTYPE_BF16;
    if (x != y)
        return launched(d, "input_rotation", qp_cu_rotate(x->p, y->p, M, K, R->H, R->r, R->c, bf, d->stream));
    /* in place: groups of r elements are independent; G of them at a time */
    size_t gb = (size_t)R->r * 2, groups = (size_t)M * (size_t)K / (size_t)R->r, G = d->ws_bytes / gb;
    if (G == 0) return op_fail(d, QP_ERR_UNSUPPORTED, "rotation_forward: %s", "in-place rotation: r too large for the workspace");
    if (G > (size_t)1 << 20) G = (size_t)1 << 20;
    for (size_t g0 = 0; g0 < groups && s == QP_OK; g0 += G) {
        size_t n = groups - g0 < G ? groups - g0 : G;
        s = d2d(d, d->ws, (char *)x->p + g0 * gb, n * gb, "in-place rotation: copy of x");
        if (s == QP_OK)
            s = launched(d, "input_rotation", qp_cu_rotate(d->ws, (char *)y->p + g0 * gb, (int)n, R->r, R->H, R->r, R->c, bf, d->stream));
    }
    return s;
}

/* kv_quantize's and kv_dequantize's checks (OP names the call): source a
 * of a_bytes, destination b of b_bytes, the stream ready */
static qp_status kv_check(qp_cu_dev *d, const char *op, qp_dtype dt, float scale, qp_cu_buf *a, size_t a_bytes,
                          qp_cu_buf *b, size_t b_bytes) {
    char src[32], dst[32];
    qp_status s = dt_check(d, dt, op);
    if (s != QP_OK) return s;
    if (!(scale > 0.0f) || scale > 3.402823466e38f) return op_fail(d, QP_ERR_INVALID_ARGUMENT, "%s: scale must be finite and > 0", op);
    snprintf(src, sizeof src, "%s source", op);
    snprintf(dst, sizeof dst, "%s destination", op);
    if ((s = buf_range(d, a, 0, a_bytes, src)) != QP_OK || (s = buf_range(d, b, 0, b_bytes, dst)) != QP_OK) return s;
    return ensure_stream(d);
}

static qp_status qp_cu_kv_quantize_impl(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    qp_cu_dev *d = dev;
    qp_cu_buf *a = src, *b = dst;
    qp_status s = kv_check(d, "kv_quantize", dt, scale, a, n * 2, b, n);
    if (s != QP_OK || !n) return s;
    cudaSetDevice(d->index);
    int bf = dt == QP_DTYPE_BF16;
    char *sp = a->p;
    uint8_t *dp = b->p;
    if (a != b) return launched(d, "kv_quantize", qp_cu_kv_quant(sp, dp, n, scale, bf, d->stream));
    /* in place, element i reads bytes 2i, 2i+1 and writes byte i: the first
     * C elements from a copy, then [a, 2a) directly (reads [2a, 4a)) */
    size_t C = d->ws_bytes / 2 < n ? d->ws_bytes / 2 : n;
    s = d2d(d, d->ws, sp, C * 2, "in-place kv_quantize: copy of the source");
    if (s == QP_OK) s = launched(d, "kv_quantize", qp_cu_kv_quant(d->ws, dp, C, scale, bf, d->stream));
    for (size_t lo = C; lo < n && s == QP_OK; lo *= 2) {
        size_t hi = 2 * lo < n ? 2 * lo : n;
        s = launched(d, "kv_quantize", qp_cu_kv_quant(sp + 2 * lo, dp + lo, hi - lo, scale, bf, d->stream));
    }
    return s;
}

static qp_status qp_cu_kv_dequantize_impl(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    qp_cu_dev *d = dev;
    qp_cu_buf *a = src, *b = dst;
    qp_status s = kv_check(d, "kv_dequantize", dt, scale, a, n, b, n * 2);
    if (s != QP_OK || !n) return s;
    cudaSetDevice(d->index);
    int bf = dt == QP_DTYPE_BF16;
    const uint8_t *sp = a->p;
    char *dp = b->p;
    if (a != b) return launched(d, "kv_dequantize", qp_cu_kv_dequant(sp, dp, n, scale, bf, d->stream));
    /* in place, element i reads byte i and writes bytes 2i, 2i+1: from the
     * top, [lo, hi) with 2 lo >= hi directly, the first C from a copy */
    size_t C = d->ws_bytes < n ? d->ws_bytes : n, hi = n;
    while (hi > C && s == QP_OK) {
        size_t lo = (hi + 1) / 2 > C ? (hi + 1) / 2 : C;
        s = launched(d, "kv_dequantize", qp_cu_kv_dequant(sp + lo, dp + 2 * lo, hi - lo, scale, bf, d->stream));
        hi = lo;
    }
    if (s == QP_OK) s = d2d(d, d->ws, sp, hi, "in-place kv_dequantize: copy of the codes");
    if (s == QP_OK) s = launched(d, "kv_dequantize", qp_cu_kv_dequant((const uint8_t *)d->ws, dp, hi, scale, bf, d->stream));
    return s;
}

static qp_status qp_cu_buffer_copy_impl(void *dev, void *src, size_t so, void *dst, size_t dof, size_t bytes) {
    qp_cu_dev *d = dev;
    qp_cu_buf *a = src, *b = dst;
    qp_status s;
    if ((s = buf_range(d, a, so, bytes, "copy source")) != QP_OK || (s = buf_range(d, b, dof, bytes, "copy destination")) != QP_OK) return s;
    if (!bytes) return QP_OK;
    if (a == b && so < dof + bytes && dof < so + bytes)
        return op_fail(d, QP_ERR_INVALID_ARGUMENT, "%s", "buffer_copy: overlapping ranges in one buffer");
    if ((s = ensure_stream(d)) != QP_OK) return s;
    cudaSetDevice(d->index);
    s = d2d(d, (char *)b->p + dof, (const char *)a->p + so, bytes, "cudaMemcpyAsync(device to device)");
    if (s == QP_OK) qp_cu_enqueued(d, "buffer_copy");
    return s;
}

/* Times `reps` runs of fn between two events each. */
typedef struct ev_pair { cudaEvent_t a, b, g0, g1; } ev_pair;

static qp_status ev_create(qp_cu_dev *d, ev_pair *p, int gemm) {
    memset(p, 0, sizeof *p);
    cudaError_t e = cudaEventCreate(&p->a);
    if (e == cudaSuccess) e = cudaEventCreate(&p->b);
    if (e == cudaSuccess && gemm) e = cudaEventCreate(&p->g0);
    if (e == cudaSuccess && gemm) e = cudaEventCreate(&p->g1);
    return e == cudaSuccess ? QP_OK : cuda_fail(d, NULL, "cudaEventCreate", e);
}

static void ev_destroy(ev_pair *p) {
    if (p->a) cudaEventDestroy(p->a);
    if (p->b) cudaEventDestroy(p->b);
    if (p->g0) cudaEventDestroy(p->g0);
    if (p->g1) cudaEventDestroy(p->g1);
}

static qp_status ev_ms(qp_cu_dev *d, cudaEvent_t a, cudaEvent_t b, double *out) {
    float ms = 0;
    d->stats.host_waits++;
    cudaError_t e = cudaEventSynchronize(b);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
    if (e != cudaSuccess) return cuda_fail(d, NULL, "cudaEventElapsedTime", e);
    *out = ms;
    return QP_OK;
}

static qp_status qp_cu_linear_time_impl(void *dev, void *lin, void *x, int M, void *y, int reps, double *total_ms, double *gemm_ms) {
    qp_cu_dev *d = dev;
    qp_cu_lin *l = lin;
    if (reps < 0 || (reps > 0 && !total_ms)) return lin_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "linear_time: bad reps or NULL output");
    /* a timing call waits anyway: it may grow the scratch for its M */
    qp_status s = qp_cu_linear_reserve_impl(d, l, M);
    if (s != QP_OK) return s;
    ev_pair p;
    s = ev_create(d, &p, 1);
    for (int i = 0; s == QP_OK && i < reps; i++) {
        cudaError_t e = cudaEventRecord(p.a, d->stream);
        if (e != cudaSuccess) { s = cuda_fail(d, l->layer, "cudaEventRecord", e); break; }
        if ((s = forward_launch(d, l, x, M, y, p.g0, p.g1)) != QP_OK) break;
        if ((e = cudaEventRecord(p.b, d->stream)) != cudaSuccess) { s = cuda_fail(d, l->layer, "cudaEventRecord", e); break; }
        if ((s = ev_ms(d, p.a, p.b, &total_ms[i])) != QP_OK) break;
        if (gemm_ms) s = M > 0 ? ev_ms(d, p.g0, p.g1, &gemm_ms[i]) : QP_OK;
        if (gemm_ms && M == 0) gemm_ms[i] = 0;
    }
    ev_destroy(&p);
    return s;
}

static qp_status qp_cu_buffer_copy_time_impl(void *dev, void *src, void *dst, size_t bytes, int reps, double *ms) {
    qp_cu_dev *d = dev;
    qp_cu_buf *a = src, *b = dst;
    qp_status s;
    if ((s = buf_range(d, a, 0, bytes, "copy source")) != QP_OK || (s = buf_range(d, b, 0, bytes, "copy destination")) != QP_OK) return s;
    if (reps < 0 || (reps > 0 && !ms)) return op_fail(d, QP_ERR_INVALID_ARGUMENT, "%s", "buffer_copy_time: bad reps");
    if ((s = ensure_stream(d)) != QP_OK) return s;
    cudaSetDevice(d->index);
    ev_pair p;
    if ((s = ev_create(d, &p, 0)) != QP_OK) { ev_destroy(&p); return s; }
    for (int i = 0; s == QP_OK && i < reps; i++) {
        cudaError_t e = cudaEventRecord(p.a, d->stream);
        if (e == cudaSuccess) e = cudaMemcpyAsync(b->p, a->p, bytes, cudaMemcpyDeviceToDevice, d->stream);
        if (e == cudaSuccess) e = cudaEventRecord(p.b, d->stream);
        if (e != cudaSuccess) { cudaGetLastError(); s = cuda_fail(d, NULL, "timed cudaMemcpyAsync", e); break; }
        s = ev_ms(d, p.a, p.b, &ms[i]);
    }
    ev_destroy(&p);
    return s;
}

/* cuBLASLt baseline (cuda_blaslt.c, dlopen at first use). */
static qp_status qp_cu_vendor_gemm_time_impl(void *dev, qp_dtype in, int M, int N, int K, int reps, double *ms, char *name,
                                     size_t cap) {
    qp_cu_dev *d = dev;
    if (M <= 0 || N <= 0 || K <= 0 || reps < 0 || (reps > 0 && !ms) || !name)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "vendor_gemm_time: bad shape or NULL output");
    int kind = in == QP_DTYPE_I8 ? QP_CU_BLAS_I8 : in == QP_DTYPE_F8_E4M3FN ? QP_CU_BLAS_F8 : in == QP_DTYPE_F16 ? QP_CU_BLAS_F16 : -1;
    if (kind < 0)
        return qp_cu_error(d, QP_ERR_UNSUPPORTED, NULL, "vendor_gemm_time: unsupported: input dtype %d (I8, F8_E4M3FN or F16)", (int)in);
    if (kind == QP_CU_BLAS_F8 && !qp_cu_cap_tensor_core_fp8(d->cc))
        return qp_cu_error(d, QP_ERR_UNSUPPORTED, NULL, "vendor_gemm_time: unsupported: cuBLASLt fp8 needs compute capability >= 8.9");
#if defined(QP_CU_EMULATE)
    (void)reps; (void)cap;
    return qp_cu_error(d, QP_ERR_UNSUPPORTED, NULL, "vendor_gemm_time: unsupported: cuBLASLt is not available in the CPU emulator");
#else
    char why[200];
    if (!qp_cu_blaslt_available(why, sizeof why))
        return qp_cu_error(d, QP_ERR_UNSUPPORTED, NULL, "vendor_gemm_time: unsupported: %s", why);
    qp_status s = ensure_stream(d);
    if (s != QP_OK) return s;
    cudaSetDevice(d->index);
    size_t eab = kind == QP_CU_BLAS_F16 ? 2 : 1, ed = kind == QP_CU_BLAS_I8 ? 4 : 2, wsb = (size_t)32 << 20;
    void *X = NULL, *W = NULL, *D = NULL, *ws = NULL;
    cudaError_t e = cudaMalloc(&X, (size_t)M * K * eab);
    if (e == cudaSuccess) e = cudaMalloc(&W, (size_t)N * K * eab);
    if (e == cudaSuccess) e = cudaMalloc(&D, (size_t)M * N * ed);
    if (e == cudaSuccess) e = cudaMalloc(&ws, wsb);
    if (e == cudaSuccess) e = cudaMemset(X, 0x11, (size_t)M * K * eab); /* small finite values */
    if (e == cudaSuccess) e = cudaMemset(W, 0x11, (size_t)N * K * eab);
    if (e != cudaSuccess) {
        cudaGetLastError();
        s = cuda_fail(d, NULL, "vendor_gemm_time buffers (cudaMalloc/cudaMemset)", e);
    } else {
        char err[256];
        if (qp_cu_blaslt_time(kind, M, N, K, reps, ms, X, W, D, ws, wsb, d->stream, name, cap, err, sizeof err))
            s = qp_cu_error(d, QP_ERR_UNSUPPORTED, NULL, "vendor_gemm_time %dx%dx%d: unsupported: %s", M, N, K, err);
    }
    cudaFree(X); cudaFree(W); cudaFree(D); cudaFree(ws);
    return s;
#endif
}

/* ---- asynchronous execution and embedding (ABI 3) ------------------------ */

typedef struct qp_cu_event {
    cudaEvent_t e;
    unsigned long long seq; /* d->enq_seq when recorded */
    char pend[400]; /* the layers before it, for a fault's message */
} qp_cu_event;

static qp_status qp_cu_event_record_impl(void *dev, void **out) {
    qp_cu_dev *d = dev;
    *out = NULL;
    qp_status s = make_stream(d, NULL);
    if (s != QP_OK) return s;
    qp_cu_event *ev = calloc(1, sizeof *ev);
    if (!ev) return op_fail(d, QP_ERR_OUT_OF_MEMORY, "%s", "out of host memory");
    cudaError_t e = cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        e = cudaEventRecord(ev->e, d->stream);
        if (e != cudaSuccess) cudaEventDestroy(ev->e);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        free(ev);
        return cuda_fail(d, NULL, "cudaEventRecord", e);
    }
    pend_text(d, ev->pend, sizeof ev->pend);
    ev->seq = d->enq_seq;
    *out = ev;
    return QP_OK;
}

static qp_status qp_cu_event_wait_impl(void *dev, void *evp) {
    qp_cu_dev *d = dev;
    qp_cu_event *ev = evp;
    d->stats.host_waits++;
    cudaError_t e = cudaEventSynchronize(ev->e);
    if (e == cudaSuccess) {
        if (ev->seq == d->enq_seq) d->n_pend = 0; /* nothing enqueued after it */
        return QP_OK;
    }
    cudaGetLastError();
    return qp_cu_error(d, QP_ERR_DEVICE, NULL, "cudaEventSynchronize failed %s: %s (%d)", ev->pend,
                    cudaGetErrorString(e), (int)e);
}

static qp_status qp_cu_event_query_impl(void *dev, void *evp, int *done) {
    qp_cu_dev *d = dev;
    qp_cu_event *ev = evp;
    cudaError_t e = cudaEventQuery(ev->e);
    *done = e == cudaSuccess;
    if (e == cudaSuccess || e == cudaErrorNotReady) {
        if (e == cudaErrorNotReady) cudaGetLastError();
        return QP_OK;
    }
    cudaGetLastError();
    *done = 1;
    return qp_cu_error(d, QP_ERR_DEVICE, NULL, "cudaEventQuery failed %s: %s (%d)", ev->pend,
                    cudaGetErrorString(e), (int)e);
}

static void qp_cu_event_destroy_impl(void *dev, void *evp) {
    (void)dev;
    qp_cu_event *ev = evp;
    if (!ev) return;
    cudaEventDestroy(ev->e);
    free(ev);
}

/* cuda_wait_event: the stream waits for it first; cuda_record_event:
 * recorded after the work (when it was enqueued). */
static qp_status qp_cu_sync_begin_impl(void *dev, const qp_enqueue_sync *sy) {
    qp_cu_dev *d = dev;
    if (sy->vk_wait_semaphore || sy->vk_signal_semaphore || sy->vk_command_buffer || sy->cl_wait_list || sy->cl_out_event)
        return op_fail(d, QP_ERR_INVALID_ARGUMENT, "%s", "qp_enqueue_sync: Vulkan or OpenCL fields for a CUDA device");
    qp_status s = make_stream(d, NULL);
    if (s != QP_OK || !sy->cuda_wait_event) return s;
    cudaError_t e = cudaStreamWaitEvent(d->stream, (cudaEvent_t)sy->cuda_wait_event, 0);
    if (e != cudaSuccess) { cudaGetLastError(); return cuda_fail(d, NULL, "cudaStreamWaitEvent(cuda_wait_event)", e); }
    return QP_OK;
}

static qp_status qp_cu_sync_end_impl(void *dev, const qp_enqueue_sync *sy, qp_status st) {
    qp_cu_dev *d = dev;
    if (st != QP_OK || !sy->cuda_record_event) return QP_OK;
    cudaError_t e = cudaEventRecord((cudaEvent_t)sy->cuda_record_event, d->stream);
    if (e != cudaSuccess) { cudaGetLastError(); return cuda_fail(d, NULL, "cudaEventRecord(cuda_record_event)", e); }
    return QP_OK;
}

/* A device over the application's ordinal and stream (NULL: the legacy
 * stream): the stream is never destroyed here. */
qp_status qp_cu_device_import(void *state, const qp_device_import_desc *desc, void **out) {
    qp_cu_state *st = state;
    const qp_host *h = st->host;
    *out = NULL;
    const qp_cu_dev *src = NULL;
    for (int i = 0; i < st->n; i++)
        if (st->devs[i].index == desc->cuda_device) src = &st->devs[i];
    if (!src)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT,
                        "cuda: qp_device_import: cuda_device %d is not a usable device (the runtime lists %d)",
                        desc->cuda_device, st->n);
    if (desc->vk_device || desc->vk_queue || desc->cl_context || desc->cl_queue)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "cuda: qp_device_import: Vulkan or OpenCL handles for a CUDA device");
    qp_cu_dev *d = calloc(1, sizeof *d);
    if (!d) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    d->st = st;
    d->index = src->index;
    d->prop = src->prop;
    d->cc = src->cc;
    d->fit = src->fit;
    snprintf(d->fit_why, sizeof d->fit_why, "%s", src->fit_why);
    d->imported = 1;
    d->stream = (cudaStream_t)desc->cuda_stream;
    d->has_stream = 1;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    cudaError_t e = cudaSetDevice(d->index);
    qp_status s = e == cudaSuccess ? ensure_runnable(d, "(imported device)") : cuda_fail(d, NULL, "cudaSetDevice", e);
    if (prev >= 0) cudaSetDevice(prev);
    if (s != QP_OK) {
        dev_teardown(d);
        free(d);
        return s;
    }
    *out = d;
    return QP_OK;
}

void qp_cu_device_release(void *state, void *dev) {
    (void)state;
    qp_cu_dev *d = dev;
    if (!d || !d->imported) return;
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    dev_teardown(d); /* waits for its work; frees workspace and retired blocks */
    if (prev >= 0) cudaSetDevice(prev);
    free(d);
}

static qp_status qp_cu_device_native_impl(void *dev, qp_device_native *out) {
    qp_cu_dev *d = dev;
    qp_status s = make_stream(d, NULL);
    if (s != QP_OK) return s;
    out->api = QP_NATIVE_CUDA;
    out->cuda_device = d->index;
    out->cuda_stream = (void *)d->stream;
    return QP_OK;
}

qp_status qp_cu_buffer_import(void *dev, const qp_buffer_import_desc *desc, void **out) {
    qp_cu_dev *d = dev;
    const qp_host *h = d->st->host;
    *out = NULL;
    if (!desc->cuda_ptr || desc->vk_buffer || desc->cl_mem || desc->host_ptr)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: a CUDA device takes cuda_ptr only");
    if (desc->offset)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL,
                        "qp_buffer_import: offset %zu: CUDA buffers take offset 0 (pass cuda_ptr + offset "
                        "as cuda_ptr)", desc->offset);
    if ((uintptr_t)desc->cuda_ptr % 16)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL,
                        "qp_buffer_import: cuda_ptr %p is not 16-byte aligned (the kernels load 16 bytes at "
                        "a time)", desc->cuda_ptr);
    if (!desc->size) return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: size 0");
    qp_cu_buf *b = calloc(1, sizeof *b);
    if (!b) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    b->p = desc->cuda_ptr;
    b->size = desc->size;
    b->imported = 1;
    *out = b;
    return QP_OK;
}

void qp_cu_buffer_unimport(void *dev, void *buf) {
    (void)dev;
    free(buf);
}

qp_status qp_cu_buffer_native(void *dev, void *buf, qp_buffer_native *out) {
    (void)dev;
    qp_cu_buf *b = buf;
    out->api = QP_NATIVE_CUDA;
    out->ptr = b->p;
    out->offset = 0;
    out->size = b->size;
    return QP_OK;
}

qp_status qp_cu_device_stats(void *dev, qp_device_stats *out) {
    return qp_backend_stats_copy(&((const qp_cu_dev *)dev)->stats, out);
}

/* ---- the ops table: each op runs with the device current and gives the
 * caller's current device back; kernel launches counted per device ---- */

typedef struct qp_cu_enter { int prev; unsigned long launches; } qp_cu_enter;

static qp_cu_enter enter(void *dev) {
    qp_cu_dev *d = dev;
    qp_cu_enter c = {-1, qp_cu_launch_count()};
    if (cudaGetDevice(&c.prev) != cudaSuccess) { cudaGetLastError(); c.prev = -1; }
    if (c.prev != d->index) cudaSetDevice(d->index);
    return c;
}

static void leave(void *dev, qp_cu_enter c) {
    qp_cu_dev *d = dev;
    d->stats.submissions += qp_cu_launch_count() - c.launches;
    if (c.prev >= 0) {
        int cur = -1;
        if (cudaGetDevice(&cur) != cudaSuccess || cur != c.prev) cudaSetDevice(c.prev);
    }
}

/* Each op qp_cu_NAME runs qp_cu_NAME_impl on the op's device (enter/leave
 * make it current and count the launches). */
#define QP_CU_WRAP(name, params, args)                                                                                 \
    qp_status qp_cu_##name params {                                                                                    \
        qp_cu_enter c_ = enter(dev);                                                                                   \
        qp_status r_ = qp_cu_##name##_impl args;                                                                       \
        leave(dev, c_);                                                                                                \
        return r_;                                                                                                     \
    }
#define QP_CU_WRAPV(name, params, args)                                                                                \
    void qp_cu_##name params {                                                                                         \
        qp_cu_enter c_ = enter(dev);                                                                                   \
        qp_cu_##name##_impl args;                                                                                      \
        leave(dev, c_);                                                                                                \
    }

QP_CU_WRAP(buffer_alloc, (void *dev, size_t bytes, void **buf), (dev, bytes, buf))
QP_CU_WRAPV(buffer_free, (void *dev, void *buf), (dev, buf))
QP_CU_WRAP(buffer_upload, (void *dev, void *buf, size_t off, const void *src, size_t n), (dev, buf, off, src, n))
QP_CU_WRAP(buffer_download, (void *dev, void *buf, size_t off, void *dst, size_t n), (dev, buf, off, dst, n))
QP_CU_WRAP(linear_prepare, (void *dev, const qp_lin_desc *desc, unsigned path, void **lin), (dev, desc, path, lin))
QP_CU_WRAPV(linear_destroy, (void *dev, void *lin), (dev, lin))
QP_CU_WRAP(linear_forward, (void *dev, void *lin, void *x, int M, void *y), (dev, lin, x, M, y))
QP_CU_WRAP(linear_reserve, (void *dev, void *lin, int max_m), (dev, lin, max_m))
QP_CU_WRAP(synchronize, (void *dev), (dev))
QP_CU_WRAP(rotation_prepare, (void *dev, const int8_t *H, int r, float c, void **rot), (dev, H, r, c, rot))
QP_CU_WRAPV(rotation_destroy, (void *dev, void *rot), (dev, rot))
QP_CU_WRAP(rotation_forward, (void *dev, void *rot, qp_dtype dt, void *x, int M, int K, void *y), (dev, rot, dt, x, M, K, y))
QP_CU_WRAP(kv_quantize, (void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst), (dev, dt, src, n, scale, dst))
QP_CU_WRAP(kv_dequantize, (void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst), (dev, dt, src, n, scale, dst))
QP_CU_WRAP(linear_time, (void *dev, void *lin, void *x, int M, void *y, int reps, double *t, double *g),
          (dev, lin, x, M, y, reps, t, g))
QP_CU_WRAP(buffer_copy, (void *dev, void *src, size_t so, void *dst, size_t dof, size_t n), (dev, src, so, dst, dof, n))
QP_CU_WRAP(buffer_copy_time, (void *dev, void *src, void *dst, size_t n, int reps, double *ms), (dev, src, dst, n, reps, ms))
QP_CU_WRAP(vendor_gemm_time, (void *dev, qp_dtype in, int M, int N, int K, int reps, double *ms, char *name, size_t cap),
          (dev, in, M, N, K, reps, ms, name, cap))
QP_CU_WRAP(moe_prepare, (void *dev, const qp_moe_desc *desc, void **moe), (dev, desc, moe))
QP_CU_WRAPV(moe_destroy, (void *dev, void *moe), (dev, moe))
QP_CU_WRAP(moe_forward, (void *dev, void *moe, void *x, int M, int k, void *ids, void *w, void *y), (dev, moe, x, M, k, ids, w, y))
QP_CU_WRAP(moe_reserve, (void *dev, void *moe, int max_m, int k), (dev, moe, max_m, k))
QP_CU_WRAP(moe_route, (void *dev, const qp_route_params *p, void *lg, int M, void *sc, void *ids, void *w),
          (dev, p, lg, M, sc, ids, w))
QP_CU_WRAP(event_record, (void *dev, void **ev), (dev, ev))
QP_CU_WRAP(event_wait, (void *dev, void *ev), (dev, ev))
QP_CU_WRAP(event_query, (void *dev, void *ev, int *done), (dev, ev, done))
QP_CU_WRAPV(event_destroy, (void *dev, void *ev), (dev, ev))
QP_CU_WRAP(sync_begin, (void *dev, const qp_enqueue_sync *s), (dev, s))
QP_CU_WRAP(sync_end, (void *dev, const qp_enqueue_sync *s, qp_status st), (dev, s, st))
QP_CU_WRAP(device_native, (void *dev, qp_device_native *out), (dev, out))

qp_status qp_cu_call_failed(qp_cu_dev *d, const char *layer, const char *call, cudaError_t e) {
    return cuda_fail(d, layer, call, e);
}

qp_status qp_cu_runnable(qp_cu_dev *d, const char *layer) { return ensure_runnable(d, layer); }

/* The scheme kinds linear_prepare runs (the registry checks that the table
 * names every linear kind; capability and shape limits are device_supports's answers). */
static const qp_backend_kind qp_cu_kinds[] = {QP_BACKEND_KINDS_ABI5_RUN};

static const qp_backend_ops qp_cu_ops = {
    QP_BACKEND_OPS_INIT(qp_cu, "cuda", qp_cu_kinds),
    .vendor_gemm_time = qp_cu_vendor_gemm_time_impl,
    /* flush: none, launches are submitted as they are made; no moe_takes_act:
     * the MoE kernels take every activation mode the core builds, per-token-
     * group fp8 (fp8 per-block experts) included */
};

EXPORT const qp_backend_ops *qp_backend_entry(void) { return &qp_cu_ops; }
