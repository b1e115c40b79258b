/* int8 activation quantizers, bit-exact with vLLM's scaled_int8_quant CUDA
 * kernel (docs/semantics.md §12). Float math is plain IEEE fp32:
 * the build never enables -ffast-math or FP contraction. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "host_device.h" /* the int8 conversions, shared with the CUDA kernels */
#include "internal.h"

QP_API qp_status qp_quant_int8_static(qp_context *ctx, const float *x, size_t m, size_t k, float scale, int32_t azp,
                                      int symmetric, int8_t *q) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !q) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_scale", NULL, "NULL tensor");
    size_t n = m * k;
    if (symmetric) {
        /* static symmetric: true division x / s (docs/semantics.md §12) */
        for (size_t i = 0; i < n; i++) q[i] = qp_rni_sat8(x[i] / scale);
        return QP_OK;
    }
    /* static asymmetric: multiply by the fp32 reciprocal (docs/semantics.md §12) */
    float inv = 1.0f / scale;
    for (size_t i = 0; i < n; i++) q[i] = qp_sat8(qp_add_wrap(qp_rni_sat32(x[i] * inv), azp));
    return QP_OK;
}

QP_API qp_status qp_quant_int8_dynamic(qp_context *ctx, const float *x, size_t m, size_t k, int symmetric, int8_t *q,
                                       float *scales, int32_t *azp) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !q || !scales || (!symmetric && !azp))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    for (size_t r = 0; r < m; r++) {
        const float *xr = x + r * k;
        int8_t *qr = q + r * k;
        if (symmetric) {
            /* absmax starts at 0 and fmaxf skips NaN, as the block reduce does */
            float amax = 0.0f;
            for (size_t i = 0; i < k; i++) amax = fmaxf(amax, fabsf(xr[i]));
            scales[r] = amax / 127.0f;
            float inv = amax == 0.0f ? 0.0f : 127.0f / amax;
            for (size_t i = 0; i < k; i++) qr[i] = qp_rni_sat8(xr[i] * inv);
        } else {
            float mn = FLT_MAX, mx = -FLT_MAX;
            for (size_t i = 0; i < k; i++) { mn = fminf(mn, xr[i]); mx = fmaxf(mx, xr[i]); }
            float s = (mx - mn) / 255.0f;
            /* no guard for s == 0: a constant row gives q = -1 (docs/semantics.md §12) */
            int32_t zp = qp_rni_sat32(-128.0f - mn / s);
            float inv = 1.0f / s;
            scales[r] = s;
            azp[r] = zp;
            for (size_t i = 0; i < k; i++) qr[i] = qp_sat8(qp_add_wrap(qp_rni_sat32(xr[i] * inv), zp));
        }
    }
    return QP_OK;
}
