/* Optional ops (api/backend.h): Quark's online input
 * rotation, the fp8 e4m3 KV cache, device-to-device copies and their device
 * timers. Kernels in shaders/cl_gemm_fw.cl; every op is enqueued on the
 * device's in-order queue, as linear_forward is (the timed copies wait). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

#define WG 64
#define CHUNK ((size_t)1 << 30) /* elements per launch (int indices in the kernels) */

typedef struct qp_cl_rotation {
    cl_mem H; /* char [r][r] */
    int r;
    float c;
} qp_cl_rotation;

static qp_status launch(qp_cl_device *d, int which, const char *name, const qp_cl_karg *args, int nargs, size_t items,
                        const char *what) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: ", what);
    size_t g[1] = {(items + WG - 1) / WG * WG}, l[1] = {WG};
    return qp_cl_launch(d, which, name, args, nargs, 1, g, l, NULL, NULL, prefix, 1);
}

/* Enqueued only (ABI 3): errors of the kernel surface at synchronize. */
static qp_status finish(qp_cl_device *d, const char *what) {
    qp_cl_enqueued(d, what);
    return QP_OK;
}

static qp_status ready(qp_cl_device *d) {
    qp_status st = qp_cl_device_open(d);
    return st == QP_OK ? qp_cl_program_ensure(d) : st;
}

static qp_status check_dt(qp_cl_device *d, qp_dtype dt, const char *what) {
    if (dt == QP_DTYPE_F16 || dt == QP_DTYPE_BF16) return QP_OK;
    return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "%s: unsupported: values must be fp16 or bf16 (the kernels "
                     "read and write 16-bit elements)", what);
}

/* A device copy of the first `bytes` of `src`, for ops whose x and y are one
 * buffer (every output reads inputs other lanes overwrite). */
static qp_status alias_copy(qp_cl_device *d, cl_mem src, size_t bytes, const char *what, cl_mem *out) {
    cl_int err = CL_INVALID_BUFFER_SIZE;
    *out = (uint64_t)bytes <= d->max_alloc
               ? d->be->api.clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err)
               : NULL;
    if (!*out)
        return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "%s: in-place copy of %zu bytes: %s (%d)", what,
                         bytes, qp_cl_strerror(err), (int)err);
    err = d->be->api.clEnqueueCopyBuffer(d->queue, src, *out, 0, 0, bytes, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        qp_cl_release_mem(d, out);
        return qp_cl_error(d, QP_ERR_DEVICE, NULL, "%s: clEnqueueCopyBuffer failed: %s (%d)", what,
                         qp_cl_strerror(err), (int)err);
    }
    return QP_OK;
}

static void alias_release(qp_cl_device *d, cl_mem tmp, qp_status st) {
    if (!tmp) return;
    if (st != QP_OK) d->be->api.clFinish(d->queue);
    d->be->api.clReleaseMemObject(tmp);
}

/* ---- input rotation --------------------------------------------------------- */
qp_status qp_cl_rotation_prepare(void *dev, const int8_t *H, int r, float c, void **rot) {
    qp_cl_device *d = dev;
    if (!H || !rot || r <= 0 || r > 65536)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: NULL matrix or output, or size %d "
                         "outside 1..65536", r);
    for (size_t i = 0; i < (size_t)r * (size_t)r; i++)
        if (H[i] != 1 && H[i] != -1)
            return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: entries must be +1 or -1 "
                             "(entry %zu is %d)", i, H[i]);
    qp_status st = ready(d);
    if (st != QP_OK) return st;
    qp_cl_rotation *R = calloc(1, sizeof *R);
    if (!R) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "input_rotation: out of host memory");
    R->r = r;
    R->c = c;
    st = qp_cl_buffer_from_host(d, H, (size_t)r * (size_t)r, "input_rotation", "(rotation)", &R->H);
    if (st != QP_OK) {
        free(R);
        return st;
    }
    *rot = R;
    return QP_OK;
}

void qp_cl_rotation_destroy(void *dev, void *rot) {
    qp_cl_rotation *R = rot;
    if (!R) return;
    qp_cl_release_mem(dev, &R->H);
    free(R);
}

qp_status qp_cl_rotation_forward(void *dev, void *rot, qp_dtype dt, void *x, int M, int K, void *y) {
    qp_cl_device *d = dev;
    qp_cl_rotation *R = rot;
    qp_cl_buffer *xb = x, *yb = y;
    if (!R || !xb || !yb || M < 0 || K <= 0)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: NULL rotation or buffer, or bad shape "
                         "M = %d, K = %d", M, K);
    qp_status st = check_dt(d, dt, "input_rotation");
    if (st != QP_OK) return st;
    if (K % R->r)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: K = %d is not a multiple of the "
                         "rotation size %d", K, R->r);
    size_t total = (size_t)M * (size_t)K;
    if (xb->bytes / 2 < total || yb->bytes / 2 < total)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: x (%zu bytes) or y (%zu bytes) "
                         "smaller than M=%d x K=%d 16-bit values", xb->bytes, yb->bytes, M, K);
    if (total > (size_t)INT_MAX - WG)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation: M*K = %zu too large for one launch", total);
    if (!total) return QP_OK;
    int n = (int)total, bf16 = dt == QP_DTYPE_BF16;
    cl_mem src = xb->mem, tmp = NULL;
    if (xb->mem == yb->mem) { /* in place: every output reads r inputs, so rotate from a copy */
        st = alias_copy(d, xb->mem, 2 * total, "input_rotation", &tmp);
        if (st != QP_OK) return st;
        src = tmp;
    }
    const qp_cl_karg a[] = {QP_CL_ARG(src), QP_CL_ARG(R->H), QP_CL_ARG(R->r), QP_CL_ARG(R->c),
                            QP_CL_ARG(n),   QP_CL_ARG(bf16), QP_CL_ARG(yb->mem)};
    st = launch(d, QP_CL_K_ROTATE, "qp_rotate", a, 7, total, "input_rotation");
    if (st == QP_OK) st = finish(d, "input_rotation");
    alias_release(d, tmp, st);
    return st;
}

/* ---- fp8 KV cache ----------------------------------------------------------- */
static qp_status kv_run(qp_cl_device *d, int quant, qp_dtype dt, qp_cl_buffer *src, size_t n, float scale,
                        qp_cl_buffer *dst) {
    const char *what = quant ? "kv_quantize" : "kv_dequantize";
    if ((n && (!src || !dst)) || !(scale > 0.0f) || scale > 3.4028235e38f)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s: NULL buffer, or scale %g not finite and > 0", what, (double)scale);
    qp_status st = check_dt(d, dt, what);
    if (st != QP_OK || !n) return st;
    size_t wide = quant ? src->bytes : dst->bytes, narrow = quant ? dst->bytes : src->bytes;
    if (wide / 2 < n || narrow < n)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s: buffers of %zu and %zu bytes too small for %zu "
                         "elements", what, src->bytes, dst->bytes, n);
    st = ready(d);
    if (st != QP_OK) return st;
    int bf16 = dt == QP_DTYPE_BF16, dm = (int)d->div_mode;
    cl_mem in = src->mem, tmp = NULL;
    if (src->mem == dst->mem) { /* in place: 2-byte and 1-byte elements overlap */
        st = alias_copy(d, src->mem, quant ? 2 * n : n, what, &tmp);
        if (st != QP_OK) return st;
        in = tmp;
    }
    for (size_t base = 0; base < n && st == QP_OK; base += CHUNK) {
        int cnt = (int)(n - base < CHUNK ? n - base : CHUNK);
        cl_ulong b = base;
        if (quant) {
            const qp_cl_karg a[] = {QP_CL_ARG(in),   QP_CL_ARG(b),  QP_CL_ARG(cnt),     QP_CL_ARG(scale),
                                    QP_CL_ARG(bf16), QP_CL_ARG(dm), QP_CL_ARG(dst->mem)};
            st = launch(d, QP_CL_K_KV_QUANT, "qp_kv_quant", a, 7, (size_t)cnt, what);
        } else {
            const qp_cl_karg a[] = {QP_CL_ARG(in),    QP_CL_ARG(b),   QP_CL_ARG(cnt),
                                    QP_CL_ARG(scale), QP_CL_ARG(bf16), QP_CL_ARG(dst->mem)};
            st = launch(d, QP_CL_K_KV_DEQUANT, "qp_kv_dequant", a, 6, (size_t)cnt, what);
        }
    }
    if (st == QP_OK) st = finish(d, what);
    alias_release(d, tmp, st);
    return st;
}

qp_status qp_cl_kv_quantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return kv_run(dev, 1, dt, src, n, scale, dst);
}

qp_status qp_cl_kv_dequantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return kv_run(dev, 0, dt, src, n, scale, dst);
}

/* ---- copies ---------------------------------------------------------------- */
static qp_status copy_range(qp_cl_device *d, const qp_cl_buffer *b, size_t off, size_t bytes, const char *which) {
    if (!b || off > b->bytes || bytes > b->bytes - off)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy: %zu bytes at %s offset %zu outside a "
                         "%zu-byte buffer", bytes, which, off, b ? b->bytes : 0);
    return QP_OK;
}

static qp_status enqueue_copy(qp_cl_device *d, qp_cl_buffer *s, size_t so, qp_cl_buffer *t, size_t to, size_t bytes,
                              cl_event *ev) {
    if (s == t && (so < to ? to - so < bytes : so - to < bytes))
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy: overlapping ranges in one buffer "
                         "(clEnqueueCopyBuffer forbids them)");
    cl_int err = d->be->api.clEnqueueCopyBuffer(d->queue, s->mem, t->mem, so, to, bytes, 0, NULL, ev);
    if (err != CL_SUCCESS)
        return qp_cl_error(d, err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ? QP_ERR_OUT_OF_MEMORY
                                                                                                 : QP_ERR_DEVICE, NULL,
                         "buffer_copy: clEnqueueCopyBuffer of %zu bytes failed: %s (%d)", bytes,
                         qp_cl_strerror(err), (int)err);
    return QP_OK;
}

qp_status qp_cl_buffer_copy(void *dev, void *src, size_t src_off, void *dst, size_t dst_off, size_t bytes) {
    qp_cl_device *d = dev;
    qp_status st = copy_range(d, src, src_off, bytes, "source");
    if (st == QP_OK) st = copy_range(d, dst, dst_off, bytes, "destination");
    if (st != QP_OK || !bytes) return st;
    st = enqueue_copy(d, src, src_off, dst, dst_off, bytes, NULL);
    return st == QP_OK ? finish(d, "buffer_copy") : st;
}

qp_status qp_cl_event_ms(qp_cl_device *d, cl_event a, cl_event b, double *ms) {
    qp_cl_api *api = &d->be->api;
    cl_ulong t0 = 0, t1 = 0;
    cl_int err = api->clWaitForEvents(1, &b);
    if (err == CL_SUCCESS) err = api->clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (err == CL_SUCCESS) err = api->clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (err != CL_SUCCESS)
        return qp_cl_error(d, QP_ERR_DEVICE, NULL, "clGetEventProfilingInfo failed: %s (%d)",
                         qp_cl_strerror(err), (int)err);
    *ms = t1 >= t0 ? (double)(t1 - t0) * 1e-6 : 0.0;
    return QP_OK;
}

qp_status qp_cl_buffer_copy_time(void *dev, void *src, void *dst, size_t bytes, int reps, double *ms) {
    qp_cl_device *d = dev;
    if (reps < 0 || (reps > 0 && !ms))
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy_time: reps < 0 or NULL output");
    qp_status st = copy_range(d, src, 0, bytes, "source");
    if (st == QP_OK) st = copy_range(d, dst, 0, bytes, "destination");
    if (st != QP_OK) return st;
    if (!d->profiling)
        return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "buffer_copy_time: the driver refused a profiling queue "
                         "(CL_QUEUE_PROFILING_ENABLE)");
    for (int i = 0; i < reps && st == QP_OK; i++) {
        cl_event ev = NULL;
        ms[i] = 0.0;
        if (!bytes) continue;
        st = enqueue_copy(d, src, 0, dst, 0, bytes, &ev);
        if (st == QP_OK) st = qp_cl_event_ms(d, ev, ev, &ms[i]);
        if (ev) d->be->api.clReleaseEvent(ev);
    }
    return st == QP_OK ? finish(d, "buffer_copy_time") : st;
}
