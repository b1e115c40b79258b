/* QQQ weight quantization (docs/semantics.md §9): vLLM runs it on
 * fp16 tensors, so every op is computed in fp32 and rounded to fp16, and a
 * division by a Python scalar is a multiply by its fp32 reciprocal. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

static float h(float x) { return qp_fp16_round(x); }

/* torch.round: half to even. */
static float rne(float x) { return nearbyintf(x); }

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

QP_API qp_status qp_qqq_quantize_weight(qp_context *ctx, const float *w, int K, int N, int group_size, int8_t *q,
                                        float *s_channel, uint16_t *s_group) {
    if (!w || !q || !s_channel || (group_size == 128 && !s_group))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "NULL tensor");
    if (K <= 0 || N <= 0)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "K=%d and N=%d must be positive", K, N);
    if (group_size != -1 && group_size != 128)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "QQQ does not support group_size = %d. Only group_sizes = [-1, 128] are supported.", group_size);
    if (group_size == 128 && K % 128)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "Weight input_size_per_partition = %d is not divisible by group_size = 128.", K);
    if (group_size == -1) {
        for (int n = 0; n < N; n++) {
            float amax = 0.0f;
            for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(h(w[(size_t)k * N + n])));
            float s = h(amax * (1.0f / 7.0f));
            for (int k = 0; k < K; k++) {
                /* an all-zero column: vLLM divides 0/0 into NaN scales; qport
                 * keeps codes and scale at 0 so the column stays exactly 0 */
                float v = s == 0.0f ? 0.0f : clampf(rne(h(h(w[(size_t)k * N + n]) / s)), -7.0f, 7.0f);
                q[(size_t)k * N + n] = (int8_t)v;
            }
            s_channel[n] = h(s * (1.0f / 16.0f));
        }
        return QP_OK;
    }
    int G = K / 128;
    float *sg = malloc(sizeof(float) * (size_t)G * (size_t)N);
    if (!sg) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
    for (int n = 0; n < N; n++) {
        float ref_max = 0.0f;
        for (int g = 0; g < G; g++) {
            float amax = 0.0f;
            for (int k = g * 128; k < (g + 1) * 128; k++) amax = fmaxf(amax, fabsf(h(w[(size_t)k * N + n])));
            float s = h(amax * (2.0f / 15.0f));
            sg[(size_t)g * N + n] = s;
            for (int k = g * 128; k < (g + 1) * 128; k++) {
                float v = s == 0.0f ? 8.0f : clampf(rne(h(h(w[(size_t)k * N + n]) / s)) + 8.0f, 0.0f, 15.0f);
                q[(size_t)k * N + n] = (int8_t)v;
                float ref = h((v - 8.0f) * s); /* w_ref1 in fp16 */
                ref_max = fmaxf(ref_max, fabsf(ref));
            }
        }
        float s_ch = h(ref_max * (1.0f / 127.0f));
        s_channel[n] = s_ch;
        for (int g = 0; g < G; g++) {
            /* tensor / tensor is a true division, rounded to fp16 */
            float v = s_ch == 0.0f ? 0.0f : h(sg[(size_t)g * N + n] / s_ch);
            s_group[(size_t)g * N + n] = (uint16_t)qp_format_encode(QP_DTYPE_F16, v);
        }
    }
    free(sg);
    return QP_OK;
}
