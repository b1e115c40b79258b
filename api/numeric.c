/* The numeric helpers the core's binder and checks use, and the reference
 * kernels share: activation-dtype loads, stores and rounding, Quark's e8m0
 * hmul scale, QQQ's per-group int8 weight (the wrap rule), the static
 * asymmetric int8 rebuild and the OCP MX pair check. They live in the core,
 * not in cpu/, so what every backend is handed does not depend on the
 * reference it is compared against. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

qp_status qp_num_check_act_dtype(qp_context *ctx, qp_dtype d) {
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

size_t qp_num_elem_size(qp_dtype d) { return d == QP_DTYPE_F32 ? 4 : 2; }

float qp_num_load(qp_dtype d, const void *p, size_t i) {
    if (d == QP_DTYPE_F32) {
        float v;
        memcpy(&v, (const char *)p + 4 * i, 4);
        return v;
    }
    return qp_format_decode(d, ((const uint16_t *)p)[i]);
}

void qp_num_store(qp_dtype d, void *p, size_t i, float v) {
    if (d == QP_DTYPE_F32) memcpy((char *)p + 4 * i, &v, 4);
    else ((uint16_t *)p)[i] = (uint16_t)qp_format_encode(d, v);
}

float qp_num_round(qp_dtype d, float v) { return d == QP_DTYPE_F32 ? v : qp_format_decode(d, qp_format_encode(d, v)); }

/* e8m0 -> fp16 as Quark's dq_mxfp4 kernel converts it (docs/semantics.md §6):
 * saturating to 2^15 above, flushing below 2^-24; bf16 holds every power of
 * two of e8m0 but 2^-127's neighbours, which it rounds like any float; fp32
 * holds them all (2^-127 as a subnormal). */
float qp_num_e8m0_hmul_scale(qp_dtype d, uint8_t e) {
    if (e == 255) return NAN;
    int p = (int)e - 127;
    if (d == QP_DTYPE_F16) {
        if (p > 15) p = 15;
        if (p < -24) return 0.0f;
    }
    return qp_num_round(d, ldexpf(1.0f, p));
}

/* Round a double to the nearest fp16 value (ties to even) in one step: the
 * fp16 fma of the kernel rounds once, so going through float first could
 * round twice. Returns the fp16 bits. */
uint16_t qp_num_f16_bits_from_double(double v) {
    if (isnan(v)) return 0x7FFF;
    double a = fabs(v);
    if (a == 0.0) return signbit(v) ? 0x8000 : 0;
    int e;
    frexp(a, &e);             /* a = f * 2^e, f in [0.5, 1) */
    int ulp_exp = e - 11;     /* 11 significant bits */
    if (ulp_exp < -24) ulp_exp = -24; /* subnormals */
    double r = ldexp(nearbyint(ldexp(a, -ulp_exp)), ulp_exp);
    float f = r >= 65520.0 ? INFINITY : (float)r; /* exact: r has <= 11 bits */
    return (uint16_t)qp_format_encode(QP_DTYPE_F16, signbit(v) ? -f : f);
}

/* docs/semantics.md §11 step 2, per group: h = fp16_fma(t, s_group, 1152); the int8
 * weight is the low byte of h's bits XOR 0x80 — a wrap above 127.5, and the
 * docs/semantics.md §11 value below -128 (e.g. -130 → 124). */
QP_API int8_t qp_ref_qqq_group_weight(int t, uint16_t s_group_bits) {
    double s = qp_format_decode(QP_DTYPE_F16, s_group_bits);
    uint16_t hb = qp_num_f16_bits_from_double((double)t * s + 1152.0);
    return (int8_t)(uint8_t)((hb & 0xFF) ^ 0x80);
}

/* docs/semantics.md §15 step 4: fused static asymmetric shards share one
 * rebuilt scale and a zero point truncated toward zero. */
QP_API qp_status qp_int8_static_asym_rebuild(qp_context *ctx, const float *scales, const int32_t *zps, size_t n,
                                             float *scale_out, int32_t *azp_out) {
    if (!scales || !zps || !n || !scale_out || !azp_out)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_scale", NULL, "NULL or empty tensor");
    float rmax = -INFINITY, rmin = INFINITY;
    for (size_t i = 0; i < n; i++) {
        rmax = fmaxf(rmax, scales[i] * (float)(127 - zps[i]));
        rmin = fminf(rmin, scales[i] * (float)(-128 - zps[i]));
    }
    float s = (rmax - rmin) * (1.0f / 255.0f);
    float z = -128.0f - rmin / s;
    *scale_out = s;
    /* torch .to(int32): truncation; out-of-range and NaN saturate as on GPU */
    *azp_out = isnan(z) ? 0 : z >= 2147483648.0f ? INT32_MAX : z < -2147483648.0f ? INT32_MIN : (int32_t)z;
    return QP_OK;
}

/* The element format of an OCP MX activation mode (NONE for the others). */
qp_dtype qp_ocp_mx_act_elem(qp_ocp_mx_act a) {
    switch (a) {
    case QP_OCP_MX_ACT_MXFP4: return QP_DTYPE_F4_E2M1;
    case QP_OCP_MX_ACT_MXFP6_E3M2: return QP_DTYPE_F6_E3M2;
    case QP_OCP_MX_ACT_MXFP6_E2M3: return QP_DTYPE_F6_E2M3;
    case QP_OCP_MX_ACT_MXFP8: return QP_DTYPE_F8_E4M3FN;
    default: return QP_DTYPE_NONE;
    }
}

/* The (weight, activation) pairs of OCP_MX_Scheme (docs/semantics.md §5) plus MXFP8
 * activations, which the predicate gives any MX weight; fp6 weights take
 * only their own fp6 type. */
qp_status qp_ocp_mx_check_pair(qp_context *ctx, qp_dtype w, qp_ocp_mx_act act) {
    if (w != QP_DTYPE_F4_E2M1 && w != QP_DTYPE_F6_E2M3 && w != QP_DTYPE_F6_E3M2 && w != QP_DTYPE_F8_E4M3FN)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL,
                            "OCP MX weights must be fp4_e2m1, fp6_e2m3, fp6_e3m2 or fp8_e4m3fn, got %s",
                            qp_dtype_name(w));
    if (act == QP_OCP_MX_ACT_FP8_DYNAMIC || act == QP_OCP_MX_ACT_FP8_STATIC)
        /* QuarkOCP_MX's key check (docs/semantics.md §7, §4), the resolver's message */
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "input_tensors", NULL, "Unsupported activation quant key: %s",
                            qp_quant_key_repr(act == QP_OCP_MX_ACT_FP8_DYNAMIC ? "kFp8DynamicTensorSym" : "kFp8StaticTensorSym"));
    if ((int)act < 0 || act > QP_OCP_MX_ACT_FP8_STATIC)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_tensors", NULL, "unknown activation mode %d",
                            (int)act);
    qp_dtype a = qp_ocp_mx_act_elem(act);
    bool ok = a == QP_DTYPE_NONE || a == QP_DTYPE_F8_E4M3FN || w == QP_DTYPE_F4_E2M1 || a == w;
    if (!ok || (w == QP_DTYPE_F8_E4M3FN && a != QP_DTYPE_NONE && a != QP_DTYPE_F8_E4M3FN))
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "input_tensors", NULL,
                            "OCP MX weights %s with %s activations are not an OCP_MX_Scheme", qp_dtype_name(w),
                            qp_dtype_name(a));
    return QP_OK;
}
