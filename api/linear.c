/* qp_linear: one quantized linear layer on one device (docs/backends.md). */
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "scheme_table.h"

QP_API void qp_linear_options_init(qp_linear_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->act_dtype = QP_DTYPE_F16;
}

static qp_status reserve(qp_linear *l, int M);

QP_API qp_status qp_linear_create(qp_device *dev, const qp_scheme *scheme, int N, int K, const qp_tensor *tensors,
                                  size_t n_tensors, const qp_linear_options *opts, qp_linear **out) {
    if (!dev || !scheme || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_linear_options o;
    qp_linear_options_init(&o);
    if (opts) {
        if (opts->struct_size < sizeof o)
            return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                                "qp_linear_options.struct_size %zu: call qp_linear_options_init", opts->struct_size);
        o = *opts;
    }
    qp_lin_desc d;
    qp_lin_desc_store *store;
    qp_status st = qp_lin_desc_build(dev->ctx, scheme, N, K, tensors, n_tensors, &o, &d, &store);
    if (st) return st;
    /* fp32 activations run on the cpu reference only: the GPU backends'
     * kernels read and write 16-bit elements (and refuse F32 with differing
     * statuses), so the core refuses for them, one status and message */
    if (d.act_dtype == QP_DTYPE_F32 && strcmp(dev->backend->ops->name, "cpu")) {
        qp_lin_desc_free(store);
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, "x", d.layer,
                            "fp32 activations run on the cpu reference only; %s devices take fp16 or bf16",
                            dev->backend->ops->name);
    }
    const qp_backend_ops *ops = dev->backend->ops;
    const qp_backend_kind *bk = qp_backend_kind_of(ops, d.kind);
    if (bk && !bk->runs) {
        qp_lin_desc_free(store);
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, d.layer, "%s: %s", ops->name, bk->reason);
    }
    if (d.rotation && (!ops->rotation_prepare || !ops->rotation_forward || !ops->rotation_destroy)) {
        qp_lin_desc_free(store);
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, "input_rotation", d.layer,
                            "the %s backend has no input-rotation kernel", ops->name);
    }
    qp_linear *l = calloc(1, sizeof *l);
    if (!l) { qp_lin_desc_free(store); return qp_error_set(dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, d.layer, "out of memory"); }
    pthread_mutex_lock(&dev->lock);
    st = ops->linear_prepare(dev->handle, &d, o.path, &l->handle);
    if (!st && d.rotation) {
        st = ops->rotation_prepare(dev->handle, d.rotation, d.rotation_size, qp_rotation_norm(d.rotation_size), &l->rot);
        if (st) ops->linear_destroy(dev->handle, l->handle);
    }
    pthread_mutex_unlock(&dev->lock);
    qp_lin_desc_free(store);
    if (st) { free(l); return st; }
    pthread_mutex_init(&l->lock, NULL);
    l->dev = dev;
    l->N = N;
    l->K = K;
    l->act_dtype = o.act_dtype;
    l->out_dtype = d.kind == QP_SCHEME_QQQ_W4A8 ? QP_DTYPE_F16 : o.act_dtype;
    if (o.max_m < 0 || o.max_m > (1 << 24)) {
        qp_linear_destroy(l);
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "max_m", o.layer,
                            "qp_linear_options.max_m %d: must be 0 (16) .. 16777216", o.max_m);
    }
    l->max_m = o.max_m ? o.max_m : 16;
    if ((st = reserve(l, l->max_m))) { qp_linear_destroy(l); return st; }
    *out = l;
    return QP_OK;
}

QP_API void qp_linear_destroy(qp_linear *l) {
    if (!l) return;
    qp_buffer_destroy(l->xbuf);
    qp_buffer_destroy(l->ybuf);
    qp_buffer_destroy(l->rbuf);
    pthread_mutex_lock(&l->dev->lock);
    (void)qp_device_sync_locked(l->dev); /* enqueued forwards may still read it */
    if (l->rot) l->dev->backend->ops->rotation_destroy(l->dev->handle, l->rot);
    l->dev->backend->ops->linear_destroy(l->dev->handle, l->handle);
    pthread_mutex_unlock(&l->dev->lock);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

QP_API qp_dtype qp_linear_out_dtype(const qp_linear *l) { return l ? l->out_dtype : QP_DTYPE_NONE; }

/* Bytes of one x / y element: 4 for F32, 2 for F16/BF16. */
static size_t esize(qp_dtype d) { return d == QP_DTYPE_F32 ? 4 : 2; }

static qp_status check_m(const qp_linear *l, int M) {
    if (M < 0 || (size_t)M > SIZE_MAX / 4 / (size_t)(l->N > l->K ? l->N : l->K))
        return qp_error_set(l->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "bad row count M = %d", M);
    return QP_OK;
}

/* A staging or rotation buffer of at least `bytes`. Growing one that
 * enqueued work may still use waits for the device first (the destroy does). */
static qp_status ensure(qp_linear *l, qp_buffer **b, size_t bytes) {
    if (*b && (*b)->size >= bytes) return QP_OK;
    qp_buffer_destroy(*b);
    *b = NULL;
    return qp_buffer_create(l->dev, bytes, b);
}

/* Scratch for M rows: the backend's (quantized activations, statistics) and
 * the rotated input. Called at creation for max_m and when a larger M comes. */
static qp_status reserve(qp_linear *l, int M) {
    size_t xb = (size_t)M * l->K * esize(l->act_dtype);
    qp_status st = QP_OK;
    if (l->rot) st = ensure(l, &l->rbuf, xb);
    const qp_backend_ops *ops = l->dev->backend->ops;
    if (!st && ops->linear_reserve) {
        pthread_mutex_lock(&l->dev->lock);
        st = ops->linear_reserve(l->dev->handle, l->handle, M);
        pthread_mutex_unlock(&l->dev->lock);
    }
    if (!st && M > l->max_m) l->max_m = M;
    return st;
}

/* Enqueues the backend's forward (after the input rotation, into l->rbuf,
 * when the layer has one); the test hook flips one output bit (conform must
 * fail), which needs the result and so waits. */
static qp_status forward_locked(qp_linear *l, qp_buffer *x, int M, qp_buffer *y, const qp_enqueue_sync *sync) {
    const qp_backend_ops *ops = l->dev->backend->ops;
    qp_status st = qp_device_enqueue_begin(l->dev, sync);
    if (st) return st;
    if (l->rot && M > 0) {
        st = ops->rotation_forward(l->dev->handle, l->rot, l->act_dtype, x->handle, M, l->K, l->rbuf->handle);
        if (!st) x = l->rbuf;
    }
    if (!st) st = ops->linear_forward(l->dev->handle, l->handle, x->handle, M, y->handle);
    st = qp_device_enqueue_end(l->dev, sync, st);
    if (!st && M > 0 && l->dev->flip_bit >= 0) {
        uint16_t v;
        st = l->dev->backend->ops->buffer_download(l->dev->handle, y->handle, 0, &v, 2);
        v ^= (uint16_t)(1u << l->dev->flip_bit);
        if (!st) st = l->dev->backend->ops->buffer_upload(l->dev->handle, y->handle, 0, &v, 2);
    }
    return st;
}

static qp_status check_buffers(const qp_linear *l, const qp_buffer *x, int M, const qp_buffer *y) {
    qp_status st = check_m(l, M);
    if (st) return st;
    if (x->dev != l->dev || y->dev != l->dev)
        return qp_error_set(l->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, x->dev != l->dev ? "x" : "y", NULL,
                            "buffers belong to another device");
    size_t xb = (size_t)M * l->K * esize(l->act_dtype), yb = (size_t)M * l->N * esize(l->out_dtype);
    if (x->size < xb || y->size < yb)
        return qp_error_set(l->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, x->size < xb ? "x" : "y", NULL,
                            "buffers too small for M = %d (need %zu and %zu bytes, have %zu and %zu)", M, xb, yb,
                            x->size, y->size);
    return QP_OK;
}

QP_API qp_status qp_linear_enqueue(qp_linear *l, qp_buffer *x, int M, qp_buffer *y, const qp_enqueue_sync *sync) {
    if (!l || !x || !y) return QP_ERR_INVALID_ARGUMENT;
    qp_status st = check_buffers(l, x, M, y);
    if (st) return st;
    pthread_mutex_lock(&l->lock);
    if (M > l->max_m) st = reserve(l, M);
    if (!st) {
        pthread_mutex_lock(&l->dev->lock);
        st = forward_locked(l, x, M, y, sync);
        pthread_mutex_unlock(&l->dev->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return st;
}

QP_API qp_status qp_linear_forward_buffers(qp_linear *l, qp_buffer *x, int M, qp_buffer *y) {
    qp_status st = qp_linear_enqueue(l, x, M, y, NULL);
    return st ? st : qp_device_synchronize(l->dev);
}

QP_API qp_status qp_linear_forward(qp_linear *l, const void *x, int M, void *y) {
    if (!l || (M > 0 && (!x || !y))) return QP_ERR_INVALID_ARGUMENT;
    qp_status st = check_m(l, M);
    if (st || M == 0) return st;
    size_t xb = (size_t)M * l->K * esize(l->act_dtype), yb = (size_t)M * l->N * esize(l->out_dtype);
    /* staging buffers belong to the layer: its own lock makes concurrent
     * host forwards of one layer safe; the device lock orders the work */
    pthread_mutex_lock(&l->lock);
    if ((st = ensure(l, &l->xbuf, xb)) || (st = ensure(l, &l->ybuf, yb)) || (M > l->max_m && (st = reserve(l, M)))) {
        pthread_mutex_unlock(&l->lock);
        return st;
    }
    const qp_backend_ops *ops = l->dev->backend->ops;
    pthread_mutex_lock(&l->dev->lock);
    st = ops->buffer_upload(l->dev->handle, l->xbuf->handle, 0, x, xb);
    if (!st) st = forward_locked(l, l->xbuf, M, l->ybuf, NULL);
    /* the download is ordered after the forward and waits for it */
    if (!st) st = ops->buffer_download(l->dev->handle, l->ybuf->handle, 0, y, yb);
    if (st) (void)qp_device_sync_locked(l->dev); /* nothing left in flight on an error */
    pthread_mutex_unlock(&l->dev->lock);
    pthread_mutex_unlock(&l->lock);
    return st;
}

QP_API qp_status qp_linear_describe(const qp_linear *l, int M, char *out, size_t cap) {
    if (!l || !out || !cap) return QP_ERR_INVALID_ARGUMENT;
    out[0] = 0;
    if (l->dev->backend->ops->linear_describe) {
        pthread_mutex_lock(&l->dev->lock);
        l->dev->backend->ops->linear_describe(l->dev->handle, l->handle, M, out, cap);
        pthread_mutex_unlock(&l->dev->lock);
    }
    return QP_OK;
}

/* fp8 KV cache on a device: argument checks here, the kernel in the backend. */
static qp_status kv_run(qp_device *dev, int quantize, qp_dtype dt, qp_buffer *src, size_t n, float scale, qp_buffer *dst) {
    if (!dev || !src || !dst) return QP_ERR_INVALID_ARGUMENT;
    if (src->dev != dev || dst->dev != dev)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "kv_cache", NULL, "buffers belong to another device");
    if (dt != QP_DTYPE_F16 && dt != QP_DTYPE_BF16 && dt != QP_DTYPE_F32)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "kv_cache", NULL,
                            "the KV cache holds fp16, bf16 or fp32 values, got %s", qp_dtype_name(dt));
    if (dt == QP_DTYPE_F32 && strcmp(dev->backend->ops->name, "cpu"))
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, "kv_cache", NULL,
                            "fp32 KV values run on the cpu reference only; %s devices take fp16 or bf16",
                            dev->backend->ops->name);
    if (!(scale > 0.0f) || scale > 3.4028235e38f)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "k_scale", NULL,
                            "the KV-cache scale must be finite and > 0 (got %g)", (double)scale);
    size_t es = dt == QP_DTYPE_F32 ? 4 : 2, wide = quantize ? src->size : dst->size, narrow = quantize ? dst->size : src->size;
    if (n > SIZE_MAX / 4 || wide < n * es || narrow < n)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "kv_cache", NULL,
                            "buffers too small for %zu elements (%zu and %zu bytes needed)", n, n * es, n);
    const qp_backend_ops *ops = dev->backend->ops;
    qp_status (*fn)(void *, qp_dtype, void *, size_t, float, void *) = quantize ? ops->kv_quantize : ops->kv_dequantize;
    if (!fn)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, "kv_cache", NULL, "the %s backend has no fp8 KV-cache kernel",
                            ops->name);
    if (!n) return QP_OK;
    pthread_mutex_lock(&dev->lock);
    qp_status st = fn(dev->handle, dt, src->handle, n, scale, dst->handle);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

QP_API qp_status qp_kv_quantize(qp_device *dev, qp_dtype dt, qp_buffer *src, size_t n, float scale, qp_buffer *dst) {
    return kv_run(dev, 1, dt, src, n, scale, dst);
}

QP_API qp_status qp_kv_dequantize(qp_device *dev, qp_dtype dt, qp_buffer *src, size_t n, float scale, qp_buffer *dst) {
    return kv_run(dev, 0, dt, src, n, scale, dst);
}
