/* Process-after-loading: fp8 max-scale requantization through fp16, fnuz
 * normalisation, per-tensor → per-channel scales. */
#include <math.h>
#include <string.h>

#include "testutil.h"

int main(void) {
    /* two shards of one row each; scales 1 and 2: shard 0 halves its codes */
    uint8_t w[4] = {0x40 /*2.0*/, 0x48 /*4.0*/, 0x40, 0x38 /*1.0*/};
    int rows[2] = {1, 1};
    float s[2] = {1.0f, 2.0f}, smax;
    CHECK(qp_fp8_requantize_max_scale(NULL, w, 2, rows, 2, s, &smax) == QP_OK && smax == 2.0f, "requant");
    CHECK(w[0] == 0x38 && w[1] == 0x40 && w[2] == 0x40 && w[3] == 0x38, "codes %02x %02x %02x %02x", w[0], w[1], w[2], w[3]);
    /* every code of shard 0 dequantizes within one fp8 step of its old value */
    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    int r1[2] = {1, 1};
    float s3[2] = {0.3f, 0.7f};
    uint8_t before[256];
    memcpy(before, all, 256);
    CHECK(qp_fp8_requantize_max_scale(NULL, all, 128, r1, 2, s3, &smax) == QP_OK && smax == 0.7f, "requant all");
    int bad = 0;
    for (int i = 0; i < 256; i++) {
        float old = qp_format_decode(QP_DTYPE_F8_E4M3FN, before[i]) * (i < 128 ? 0.3f : 0.7f);
        float now = qp_format_decode(QP_DTYPE_F8_E4M3FN, all[i]) * 0.7f;
        if (isnan(old)) continue; /* 0x7F is NaN: clamps to +448 */
        if (fabsf(now - old) > fabsf(old) * 0.0626f + ldexpf(0.7f, -10)) bad++;
    }
    CHECK(bad == 0, "%d codes moved by more than half an fp8 step", bad);
    /* the max-scale shard goes through fp16 too (as in vLLM), so it may move by rounding only */
    /* a fused-on-disk checkpoint (last scale never loaded) is left alone */
    float s_unloaded[2] = {1.0f, -3.4028234663852886e38f};
    uint8_t w2[2] = {0x40, 0x48};
    CHECK(qp_fp8_requantize_max_scale(NULL, w2, 1, rows, 2, s_unloaded, &smax) == QP_OK && w2[0] == 0x40 && w2[1] == 0x48, "skip");
    /* fnuz */
    uint8_t f[3] = {0x80, 0x38, 0xB8};
    float ws[1] = {0.5f}, is[1] = {3.0f};
    CHECK(qp_fp8_normalize_fnuz(NULL, f, 3, ws, 1, is, 1) == QP_OK && f[0] == 0 && f[1] == 0x38 && ws[0] == 1.0f && is[0] == 6.0f, "fnuz");
    CHECK(qp_format_decode(QP_DTYPE_F8_E4M3FNUZ, f[1]) * ws[0] == qp_format_decode(QP_DTYPE_F8_E4M3FN, 0x38) * 0.5f, "same value");
    /* channelwise */
    float sh[2] = {0.1f, 0.2f}, out[5];
    int rr[2] = {2, 3};
    CHECK(qp_scale_to_channelwise(NULL, sh, rr, 2, out, 5) == QP_OK && out[1] == 0.1f && out[2] == 0.2f && out[4] == 0.2f, "cw");
    CHECK(qp_scale_to_channelwise(NULL, sh, rr, 2, out, 4) == QP_ERR_INVALID_ARGUMENT, "cw overflow");
    return tu_finish("test_prepare");
}
