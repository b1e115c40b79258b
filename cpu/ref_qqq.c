/* Reference QQQ W4A8 forward (docs/semantics.md §11), straight
 * from the checkpoint tensors: simple loops, exact int32 accumulation with
 * an int64 overflow check, vLLM's float order in the epilogue. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Round a double to the nearest fp16 value (ties to even) in one step: the
 * fp16 fma of the kernel rounds once, so going through float first could
 * round twice. Returns the fp16 bits. */
static uint16_t fp16_bits_from_double(double v) {
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
static int8_t qqq_group_weight(int t, uint16_t s_group_bits) {
    double s = qp_format_decode(QP_DTYPE_F16, s_group_bits);
    uint16_t hb = fp16_bits_from_double((double)t * s + 1152.0);
    return (int8_t)(uint8_t)((hb & 0xFF) ^ 0x80);
}

QP_API qp_status qp_ref_qqq_forward(qp_context *ctx, const uint16_t *x, int M, int K, int N, int group_size,
                                    const int32_t *B, const float *s_channel, const uint16_t *s_group,
                                    const uint16_t *bias, uint16_t *y) {
    if (qp_check_mnk(ctx, "qp_ref_qqq_forward", M, K, N)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !B || !s_channel || !y || (group_size == 128 && !s_group))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "B", NULL, "NULL tensor or negative M");
    size_t kn = (size_t)K * (size_t)N;
    int8_t *q = malloc(kn), *w8 = malloc(kn);
    float *sc = malloc(sizeof(float) * (size_t)N), *xf = malloc(sizeof(float) * (size_t)K), *stok = malloc(sizeof(float));
    int8_t *xq = malloc((size_t)K);
    uint16_t *sg = group_size == 128 ? malloc(sizeof(uint16_t) * (size_t)(K / 128) * (size_t)N) : NULL;
    qp_status st = QP_OK;
    if (!q || !w8 || !sc || !xf || !stok || !xq || (group_size == 128 && !sg)) {
        st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "B", NULL, "out of memory");
        goto done;
    }
    st = qp_qqq_unpack_weight(ctx, B, K, N, group_size, q);
    if (st == QP_OK) st = qp_qqq_unpermute_scales(ctx, s_channel, s_group, K, N, group_size, sc, sg);
    if (st != QP_OK) goto done;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)k * N + n;
            /* per-channel: the nibble sits in the high half of an int8: 16*q4 */
            w8[i] = group_size == 128 ? qqq_group_weight(q[i] - 8, sg[(size_t)(k / 128) * N + n]) : (int8_t)(16 * q[i]);
        }
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) xf[k] = qp_format_decode(QP_DTYPE_F16, x[(size_t)m * K + k]);
        /* step 1: vLLM's scaled_int8_quant, dynamic per token (docs/semantics.md §11) */
        st = qp_quant_int8_dynamic(ctx, xf, 1, (size_t)K, 1, xq, stok, NULL);
        if (st != QP_OK) goto done;
        for (int n = 0; n < N; n++) {
            int64_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int64_t)xq[k] * w8[(size_t)k * N + n];
            if (acc > INT32_MAX || acc < INT32_MIN) {
                st = qp_error_set(ctx, QP_ERR_VALUE, NULL, "B", NULL,
                                  "int32 accumulator overflow at row %d, column %d (sum %lld)", m, n, (long long)acc);
                goto done;
            }
            /* step 4: fp16( (float(acc) * s_channel) * s_tok ), fp32 multiplies */
            float v = ((float)(int32_t)acc * sc[n]) * stok[0];
            uint16_t out = (uint16_t)qp_format_encode(QP_DTYPE_F16, v);
            if (bias) /* step 5: y += bias in fp16 */
                out = fp16_bits_from_double((double)qp_format_decode(QP_DTYPE_F16, out) +
                                            (double)qp_format_decode(QP_DTYPE_F16, bias[n]));
            y[(size_t)m * N + n] = out;
        }
    }
done:
    free(q); free(w8); free(sc); free(xf); free(stok); free(xq); free(sg);
    return st;
}

/* Exposed for tests of the wrap rule. */
QP_API int8_t qp_ref_qqq_group_weight(int t, uint16_t s_group_bits) { return qqq_group_weight(t, s_group_bits); }
