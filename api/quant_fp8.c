/* fp8 e4m3fn activation quantizers, bit-exact with vLLM's CUDA kernels
 * (docs/semantics.md §13, §18). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define FP8_MAX 448.0f

/* scaled_fp8_conversion: clamp with fminf/fmaxf first (NaN → +max, as those
 * return the non-NaN operand), then RNE with saturation. */
static uint8_t conv(float x) {
    float r = fmaxf(-FP8_MAX, fminf(x, FP8_MAX));
    return (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, r);
}

static float row_absmax(const float *x, size_t k) {
    float a = 0.0f;
    for (size_t i = 0; i < k; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

QP_API qp_status qp_quant_fp8_static(qp_context *ctx, const float *x, size_t n, float scale, uint8_t *q) {
    if (!x || !q) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_scale", NULL, "NULL tensor");
    float inv = 1.0f / scale; /* static per-tensor: x * (1/s) */
    for (size_t i = 0; i < n; i++) q[i] = conv(x[i] * inv);
    return QP_OK;
}

QP_API qp_status qp_quant_fp8_dynamic_tensor(qp_context *ctx, const float *x, size_t n, uint8_t *q, float *scale) {
    if (!x || !q || !scale) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    /* no minimum scale here: an all-zero tensor gives s = 0 and 0x7E bytes */
    float s = row_absmax(x, n) / FP8_MAX;
    *scale = s;
    float inv = 1.0f / s;
    for (size_t i = 0; i < n; i++) q[i] = conv(x[i] * inv);
    return QP_OK;
}

QP_API qp_status qp_quant_fp8_dynamic_token(qp_context *ctx, const float *x, size_t m, size_t k, float scale_ub,
                                            uint8_t *q, float *scales) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !q || !scales) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    const float min_s = 1.0f / (FP8_MAX * 512.0f);
    for (size_t r = 0; r < m; r++) {
        float a = row_absmax(x + r * k, k);
        if (scale_ub > 0.0f) a = fminf(a, scale_ub);
        float s = fmaxf(a / FP8_MAX, min_s);
        scales[r] = s;
        for (size_t i = 0; i < k; i++) q[r * k + i] = conv(x[r * k + i] / s); /* division (docs/semantics.md §12) */
    }
    return QP_OK;
}

/* 2^ceil(log2(s)) on the bit pattern: bump the exponent when any mantissa
 * bit is set, then clear the mantissa. */
static float ue8m0(float s) {
    float a = fmaxf(fabsf(s), 1e-10f);
    uint32_t b;
    memcpy(&b, &a, 4);
    if (b & 0x7FFFFFu) b += 0x800000u;
    b &= 0xFF800000u;
    memcpy(&a, &b, 4);
    return a;
}

QP_API qp_status qp_quant_fp8_group(qp_context *ctx, const float *x, size_t m, size_t k, size_t group, int ue8m0_scales,
                                    uint8_t *q, float *scales) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !q || !scales) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    if (group == 0 || k % group)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL,
                            "the last dimension %zu is not divisible by the group size %zu", k, group);
    size_t ng = k / group;
    for (size_t r = 0; r < m; r++)
        for (size_t g = 0; g < ng; g++) {
            const float *xg = x + r * k + g * group;
            float a = fmaxf(1e-10f, row_absmax(xg, group));
            float s = a / FP8_MAX;
            if (ue8m0_scales) s = ue8m0(s);
            scales[r * ng + g] = s;
            float inv = 1.0f / s;
            for (size_t i = 0; i < group; i++)
                q[r * k + g * group + i] = conv(ue8m0_scales ? xg[i] * inv : xg[i] / s);
        }
    return QP_OK;
}
