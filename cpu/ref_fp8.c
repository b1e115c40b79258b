/* Reference W8A8-FP8 linear (QuarkW8A8Fp8 and PerBlock, docs/semantics.md §13, §14,
 * §16): vLLM's activation quantizers, products of decoded e4m3 values summed
 * in double (GPU fp32 accumulation order is implementation-defined, so only
 * bounds apply to float paths), then the scaled-mm epilogue. */
#include <math.h>
#include <stdlib.h>

#include "ref_args.h"

static float f8(uint8_t c) { return qp_format_decode(QP_DTYPE_F8_E4M3FN, c); }

QP_API qp_status qp_ref_w8a8_fp8_forward(qp_context *ctx, const qp_ref_fp8_args *a, void *y) {
    qp_status dst = QP_REF_CHECK_ARGS(ctx, "qp_ref_w8a8_fp8_forward", a, y, a->w && a->w_scale);
    if (dst != QP_OK) return dst;
    int M = a->M, K = a->K, N = a->N;
    bool block = a->act == QP_FP8_ACT_GROUP128;
    if (block && (K % 128))
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight_scale", NULL,
                            "Weight input_size_per_partition = %d is not divisible by weight quantization block_k = 128.", K);
    size_t mk = (size_t)M * K;
    float *xf = malloc(sizeof(float) * (mk ? mk : 1));
    uint8_t *xq = malloc(mk ? mk : 1);
    float *sx = malloc(sizeof(float) * (size_t)(M ? M : 1) * (size_t)(K / 128 + 1));
    qp_status st = QP_OK;
    if (!xf || !xq || !sx) { st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "x", NULL, "out of memory"); goto done; }
    for (size_t i = 0; i < mk; i++) xf[i] = qp_num_load(a->dtype, a->x, i);
    switch (a->act) {
    case QP_FP8_ACT_STATIC: st = qp_quant_fp8_static(ctx, xf, mk, a->input_scale, xq); sx[0] = a->input_scale; break;
    case QP_FP8_ACT_DYNAMIC_TENSOR: st = qp_quant_fp8_dynamic_tensor(ctx, xf, mk, xq, sx); break;
    case QP_FP8_ACT_DYNAMIC_TOKEN: st = qp_quant_fp8_dynamic_token(ctx, xf, (size_t)M, (size_t)K, 0.0f, xq, sx); break;
    case QP_FP8_ACT_GROUP128: st = qp_quant_fp8_group(ctx, xf, (size_t)M, (size_t)K, 128, a->ue8m0, xq, sx); break;
    default: st = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "unknown activation mode %d", (int)a->act);
    }
    if (st != QP_OK) goto done;
    int kb = K / 128;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float v;
            float b = a->bias ? qp_num_load(a->dtype, a->bias, (size_t)n) : 0.0f;
            if (block) {
                /* y = sum_kb (sum_k xq*wq) * s_x[m,kb] * s_w[n/128,kb] */
                double sum = 0;
                for (int g = 0; g < kb; g++) {
                    double part = 0;
                    for (int k = g * 128; k < (g + 1) * 128; k++)
                        part += (double)f8(xq[(size_t)m * K + k]) * f8(a->w[(size_t)n * K + k]);
                    sum += (double)(float)part * sx[m * kb + g] * a->w_scale[(size_t)(n / 128) * kb + g];
                }
                v = (float)(sum + b);
            } else {
                double acc = 0;
                for (int k = 0; k < K; k++) acc += (double)f8(xq[(size_t)m * K + k]) * f8(a->w[(size_t)n * K + k]);
                float s_a = a->act == QP_FP8_ACT_DYNAMIC_TOKEN ? sx[m] : sx[0];
                float s_b = a->w_per_channel ? a->w_scale[n] : a->w_scale[0];
                v = a->bias ? fmaf(s_a, s_b * (float)acc, b) : s_a * (s_b * (float)acc);
            }
            qp_num_store(a->dtype, y, (size_t)m * N + n, v);
        }
done:
    free(xf); free(xq); free(sx);
    return st;
}
