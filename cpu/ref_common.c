/* What the reference kernels share. */
#include <math.h>
#include <string.h>

#include "internal.h"

qp_status qp_ref_check_act_dtype(qp_context *ctx, qp_dtype d) {
    if (d == QP_DTYPE_F16 || d == QP_DTYPE_BF16 || d == QP_DTYPE_F32) return QP_OK;
    return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "activations must be fp16, bf16 or fp32, got %s",
                        qp_dtype_name(d));
}

qp_status qp_check_mnk(qp_context *ctx, const char *what, int M, int K, int N) {
    const char *bad = M < 0 || M > QP_DIM_MAX ? "M" : K <= 0 || K > QP_DIM_MAX ? "K" : N <= 0 || N > QP_DIM_MAX ? "N" : NULL;
    if (!bad) return QP_OK;
    return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, bad, NULL,
                        "%s: bad shape M = %d, K = %d, N = %d (%s out of range: M in 0 .. %d, K and N in 1 .. %d)", what, M,
                        K, N, bad, QP_DIM_MAX, QP_DIM_MAX);
}

qp_status qp_check_mk(qp_context *ctx, size_t m, size_t k) {
    if (!k || m <= SIZE_MAX / 4 / k) return QP_OK;
    return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "m * k overflows (m = %zu, k = %zu)", m, k);
}

size_t qp_ref_elem_size(qp_dtype d) { return d == QP_DTYPE_F32 ? 4 : 2; }

float qp_ref_load(qp_dtype d, const void *p, size_t i) {
    if (d == QP_DTYPE_F32) {
        float v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        return v;
    }
    return qp_format_decode(d, ((const uint16_t *)p)[i]);
}

void qp_ref_store(qp_dtype d, void *p, size_t i, float v) {
    if (d == QP_DTYPE_F32) memcpy((char *)p + 4 * i, &v, 4);
    else ((uint16_t *)p)[i] = (uint16_t)qp_format_encode(d, v);
}

float qp_ref_round(qp_dtype d, float v) { return d == QP_DTYPE_F32 ? v : qp_format_decode(d, qp_format_encode(d, v)); }

/* e8m0 -> fp16 as Quark's dq_mxfp4 kernel converts it (docs/semantics.md §6):
 * saturating to 2^15 above, flushing below 2^-24; bf16 holds every power of
 * two of e8m0 but 2^-127's neighbours, which it rounds like any float; fp32
 * holds them all (2^-127 as a subnormal). */
float qp_ref_e8m0_hmul_scale(qp_dtype d, uint8_t e) {
    if (e == 255) return NAN;
    int p = (int)e - 127;
    if (d == QP_DTYPE_F16) {
        if (p > 15) p = 15;
        if (p < -24) return 0.0f;
    }
    return qp_ref_round(d, ldexpf(1.0f, p));
}
