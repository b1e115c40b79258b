/* Process-after-loading on the host (docs/semantics.md §15, §16, §18): what vLLM does to
 * the checkpoint tensors before the first forward. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "internal.h"

/* requantize_with_max_scale (docs/semantics.md §16): shards of a fused fp8 weight share
 * the largest scale. Dequantization goes through fp16 as vLLM's does; a
 * last scale still at its init value (-FLT_MAX) marks a checkpoint fused on
 * disk, which vLLM leaves as it is. */
QP_API qp_status qp_fp8_requantize_max_scale(qp_context *ctx, uint8_t *w, int K, const int *shard_rows, size_t n_shards,
                                             const float *scales, float *s_max_out) {
    if (!w || !shard_rows || !scales || !s_max_out || !n_shards || K <= 0)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL, "NULL or empty tensor");
    for (size_t i = 0; i < n_shards; i++) /* before any row is touched */
        if (shard_rows[i] < 0)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "shard_rows", NULL, "shard %zu has %d rows", i, shard_rows[i]);
    float s_max = -FLT_MAX;
    for (size_t i = 0; i < n_shards; i++) s_max = fmaxf(s_max, scales[i]);
    *s_max_out = s_max;
    if (!(scales[n_shards - 1] > -FLT_MAX)) return QP_OK;
    size_t row = 0;
    float inv = 1.0f / s_max;
    for (size_t i = 0; i < n_shards; i++) {
        for (size_t r = 0; r < (size_t)shard_rows[i]; r++, row++)
            for (int k = 0; k < K; k++) {
                uint8_t *c = &w[row * (size_t)K + (size_t)k];
                float dq = qp_fp16_round(qp_format_decode(QP_DTYPE_F8_E4M3FN, *c) * scales[i]);
                float v = fmaxf(-448.0f, fminf(dq * inv, 448.0f));
                *c = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, v);
            }
    }
    return QP_OK;
}

/* normalize_e4m3fn_to_e4m3fnuz (docs/semantics.md §18): the same bits mean half the value,
 * so scales double; fn's -0 (0x80) is fnuz's NaN and becomes 0. */
QP_API qp_status qp_fp8_normalize_fnuz(qp_context *ctx, uint8_t *w, size_t n, float *w_scale, size_t n_scale,
                                       float *input_scale, size_t n_input) {
    if (!w || (!w_scale && n_scale)) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "NULL tensor");
    for (size_t i = 0; i < n; i++)
        if (w[i] == 0x80) w[i] = 0;
    for (size_t i = 0; i < n_scale; i++) w_scale[i] *= 2.0f;
    for (size_t i = 0; input_scale && i < n_input; i++) input_scale[i] *= 2.0f;
    return QP_OK;
}

/* convert_to_channelwise (docs/semantics.md §15 step 3): per-shard scalars repeated over
 * each shard's output rows. */
QP_API qp_status qp_scale_to_channelwise(qp_context *ctx, const float *shard_scales, const int *shard_rows, size_t n_shards,
                                         float *out, size_t out_len) {
    if (!shard_scales || !shard_rows || !out) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL, "NULL tensor");
    size_t row = 0;
    for (size_t i = 0; i < n_shards; i++)
        for (int r = 0; r < shard_rows[i]; r++) {
            if (row >= out_len)
                return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL,
                                    "shards hold more rows than the %zu-entry output", out_len);
            out[row++] = shard_scales[i];
        }
    if (row != out_len)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL,
                            "shards hold %zu rows, the output %zu", row, out_len);
    return QP_OK;
}
