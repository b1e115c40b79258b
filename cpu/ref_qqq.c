/* Reference QQQ W4A8 forward (docs/semantics.md §11), straight
 * from the checkpoint tensors: simple loops, exact int32 accumulation with
 * an int64 overflow check, vLLM's float order in the epilogue. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
            w8[i] = group_size == 128 ? qp_ref_qqq_group_weight(q[i] - 8, sg[(size_t)(k / 128) * N + n]) : (int8_t)(16 * q[i]);
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
                out = qp_num_f16_bits_from_double((double)qp_format_decode(QP_DTYPE_F16, out) +
                                            (double)qp_format_decode(QP_DTYPE_F16, bias[n]));
            y[(size_t)m * N + n] = out;
        }
    }
done:
    free(q); free(w8); free(sc); free(xf); free(stok); free(xq); free(sg);
    return st;
}

