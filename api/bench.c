/* Benchmark entry points: argument checks here, the timers in the
 * backend's optional ops (api/backend.h). A backend without the op is
 * QP_ERR_UNSUPPORTED naming the backend: never a host-timed fallback, which
 * would measure launch overhead and synchronisation instead of the kernel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

#define QP_BENCH_MAX_REPS 100000

static qp_status check_reps(const qp_context *ctx, const char *what, int reps) {
    if (reps < 1 || reps > QP_BENCH_MAX_REPS)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, "%s: reps must be 1..%d, got %d", what,
                            QP_BENCH_MAX_REPS, reps);
    return QP_OK;
}

/* Every time a backend reports must be a finite, non-negative number. */
static qp_status check_times(const qp_device *dev, const char *op, const double *ms, int reps, int allow_negative) {
    for (int i = 0; i < reps; i++)
        if (!isfinite(ms[i]) || (ms[i] < 0 && !allow_negative))
            return qp_error_set(dev->ctx, QP_ERR_INTERNAL, NULL, NULL, NULL,
                                "the %s backend's %s reported an invalid time %g ms for run %d",
                                dev->backend->ops->name, op, ms[i], i);
    return QP_OK;
}

/* The last checks of a timed op: the repetitions, then whether this
 * backend has the op at all (`has`; `what` names it in the message). */
static qp_status check_timer(const qp_device *dev, const char *fn, int reps, bool has, const char *what) {
    qp_status st = check_reps(dev->ctx, fn, reps);
    if (st) return st;
    if (!has)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "the %s backend has no %s",
                            dev->backend->ops->name, what);
    return QP_OK;
}

static size_t act_size(qp_dtype d) { return d == QP_DTYPE_F32 ? 4 : 2; }

QP_API qp_status qp_linear_time(qp_linear *l, qp_buffer *x, int M, qp_buffer *y, int reps, double *total_ms,
                                double *gemm_ms) {
    if (!l) return QP_ERR_INVALID_ARGUMENT;
    qp_device *dev = l->dev;
    const qp_backend_ops *ops = dev->backend->ops;
    if (!x || !y || !total_ms)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_linear_time: x, y and total_ms must not be NULL");
    qp_status st = check_reps(dev->ctx, "qp_linear_time", reps);
    if (st) return st;
    size_t big = (size_t)(l->N > l->K ? l->N : l->K);
    if (M < 1 || (size_t)M > SIZE_MAX / 4 / big)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL,
                            "qp_linear_time: bad row count M = %d (1 or more)", M);
    if (x->dev != dev || y->dev != dev)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL,
                            "qp_linear_time: buffers belong to another device");
    size_t xb = (size_t)M * (size_t)l->K * act_size(l->act_dtype), yb = (size_t)M * (size_t)l->N * act_size(l->out_dtype);
    if (x->size < xb || y->size < yb)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL,
                            "qp_linear_time: buffers too small for M = %d (need %zu and %zu bytes)", M, xb, yb);
    if (!ops->linear_time)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL,
                            "the %s backend has no device timer for linear layers (linear_time)", ops->name);
    double *g = gemm_ms ? gemm_ms : malloc(sizeof *g * (size_t)reps);
    if (!g) return qp_error_set(dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    pthread_mutex_lock(&l->lock);
    if (l->rot && (!l->rbuf || l->rbuf->size < xb)) {
        qp_buffer_destroy(l->rbuf);
        l->rbuf = NULL;
        st = qp_buffer_create(dev, xb, &l->rbuf);
    }
    if (!st) {
        pthread_mutex_lock(&dev->lock);
        void *xh = x->handle;
        if (l->rot) { /* rotated once, untimed: the layer's own input */
            st = ops->rotation_forward(dev->handle, l->rot, l->act_dtype, x->handle, M, l->K, l->rbuf->handle);
            xh = l->rbuf->handle;
        }
        for (int i = 0; i < reps; i++) total_ms[i] = g[i] = NAN;
        if (!st) st = ops->linear_time(dev->handle, l->handle, xh, M, y->handle, reps, total_ms, g);
        pthread_mutex_unlock(&dev->lock);
    }
    pthread_mutex_unlock(&l->lock);
    if (!st) st = check_times(dev, "linear_time", total_ms, reps, 0);
    if (!st) st = check_times(dev, "linear_time (GEMM only)", g, reps, 1);
    if (g != gemm_ms) free(g);
    return st;
}

QP_API qp_status qp_buffer_copy(qp_buffer *src, size_t so, qp_buffer *dst, size_t dof, size_t bytes) {
    if (!src || !dst) return QP_ERR_INVALID_ARGUMENT;
    qp_device *dev = src->dev;
    if (dst->dev != dev)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy: the buffers belong to different devices");
    if (so > src->size || bytes > src->size - so || dof > dst->size || bytes > dst->size - dof)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy: %zu bytes from offset %zu of a %zu-byte buffer to offset %zu of a "
                            "%zu-byte buffer do not fit", bytes, so, src->size, dof, dst->size);
    if (src == dst && bytes && so < dof + bytes && dof < so + bytes)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy: overlapping ranges [%zu, %zu) and [%zu, %zu) of one buffer", so,
                            so + bytes, dof, dof + bytes);
    const qp_backend_ops *ops = dev->backend->ops;
    if (!ops->buffer_copy)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL,
                            "the %s backend has no device-to-device copy (buffer_copy)", ops->name);
    if (!bytes) return QP_OK;
    pthread_mutex_lock(&dev->lock);
    qp_status st = ops->buffer_copy(dev->handle, src->handle, so, dst->handle, dof, bytes);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

QP_API qp_status qp_buffer_copy_time(qp_buffer *src, qp_buffer *dst, size_t bytes, int reps, double *ms) {
    if (!src || !dst) return QP_ERR_INVALID_ARGUMENT;
    qp_device *dev = src->dev;
    if (!ms)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, "qp_buffer_copy_time: ms must not be NULL");
    if (dst->dev != dev)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy_time: the buffers belong to different devices");
    if (src == dst)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy_time: source and destination must be two buffers");
    if (!bytes || bytes > src->size || bytes > dst->size)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_buffer_copy_time: %zu bytes: must be 1 or more and fit buffers of %zu and %zu bytes",
                            bytes, src->size, dst->size);
    const qp_backend_ops *ops = dev->backend->ops;
    qp_status st = check_timer(dev, "qp_buffer_copy_time", reps, ops->buffer_copy_time != NULL,
                               "timed device-to-device copy (buffer_copy_time)");
    if (st) return st;
    for (int i = 0; i < reps; i++) ms[i] = NAN;
    pthread_mutex_lock(&dev->lock);
    st = ops->buffer_copy_time(dev->handle, src->handle, dst->handle, bytes, reps, ms);
    pthread_mutex_unlock(&dev->lock);
    return st ? st : check_times(dev, "buffer_copy_time", ms, reps, 0);
}

QP_API qp_status qp_vendor_gemm_time(qp_device *dev, qp_dtype in, int M, int N, int K, int reps, double *ms,
                                     char *name, size_t cap) {
    if (!dev) return QP_ERR_INVALID_ARGUMENT;
    if (!ms || (!name && cap))
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_vendor_gemm_time: ms must not be NULL, nor name when cap > 0");
    if (in != QP_DTYPE_I8 && in != QP_DTYPE_F8_E4M3FN && in != QP_DTYPE_F16)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_vendor_gemm_time: operands must be I8, F8_E4M3FN or F16, got %s", qp_dtype_name(in));
    /* each operand must be addressable in bytes with room for fp32 */
    if (M < 1 || N < 1 || K < 1 || (size_t)M > SIZE_MAX / 4 / (size_t)K || (size_t)N > SIZE_MAX / 4 / (size_t)K ||
        (size_t)M > SIZE_MAX / 4 / (size_t)N)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_vendor_gemm_time: bad shape M = %d, N = %d, K = %d", M, N, K);
    const qp_backend_ops *ops = dev->backend->ops;
    qp_status st = check_timer(dev, "qp_vendor_gemm_time", reps, ops->vendor_gemm_time != NULL,
                               "vendor GEMM library baseline (vendor_gemm_time)");
    if (st) return st;
    char local[128];
    if (!name || !cap) { name = local; cap = sizeof local; }
    name[0] = 0;
    for (int i = 0; i < reps; i++) ms[i] = NAN;
    pthread_mutex_lock(&dev->lock);
    st = ops->vendor_gemm_time(dev->handle, in, M, N, K, reps, ms, name, cap);
    pthread_mutex_unlock(&dev->lock);
    name[cap - 1] = 0;
    return st ? st : check_times(dev, "vendor_gemm_time", ms, reps, 0);
}
