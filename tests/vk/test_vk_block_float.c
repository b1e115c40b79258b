/* vk-block-float: the issue-9 layers on auto / GEMV / tiled, M in {1, 3,
 * 16, 17, 64}: OCP-MX (fp4 / fp6 e3m2 / fp6 e2m3 / fp8 weights x none /
 * MXFP4 / MXFP6 / MXFP8 activations), W4A8-MXFP4-FP8, NVFP4 (bias after
 * rounding), unquantized and fp8 per-block (fp32 and UE8M0 activation
 * scales): 14 selection-weight layers compared bit for bit (fp16 and bf16)
 * and 15 random layers within the bound, K not a multiple of 32 (NVFP4,
 * unquantized), rows with NaN (both signs), +-inf, huge, tiny, zero,
 * negative-zero and constant blocks, bias; then the layers that cannot
 * run (MX K not whole blocks, no code table, NVFP4 global scale 0, fp8
 * per-block K not a multiple of 128) and the device_supports answers. */
#include <string.h>

#include "vk_tests.h"

static void fl_faults(void) {
    vk_fl_case c = {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 64, 16, false, false, 0};
    bh_layer L;
    if (!vk_fl_layer(&c, c.N, BH_SEL_NONE, &L)) {
        bh_layer_free(&L);
        return;
    }
    qp_lin_desc d = L.d;
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(bh_err, "int-dot"), "mx forced int-dot: %d '%s'", (int)st, bh_err);
    d.K = 48; /* not whole MX blocks */
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && !lin && strstr(bh_err, "block size"), "mx K=48: %d '%s'", (int)st, bh_err);
    d.K = 64;
    d.w_lut = NULL;
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(bh_err, "w_lut"), "mx no lut: %d '%s'", (int)st, bh_err);
    d.w_lut = L.d.w_lut;
    d.kind = d.scheme.kind = QP_SCHEME_NVFP4;
    d.act = QP_ACT_NVFP4_QDQ;
    d.w_blk = 16;
    d.input_global_scale = 0.0f;
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(bh_err, "input_global_scale"), "nvfp4 g=0: %d '%s'", (int)st,
          bh_err);
    d.kind = d.scheme.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    d.w_u8 = L.d.w_codes;
    d.w_scale = L.d.w_blk_scale;
    d.act = QP_ACT_FP8_GROUP128;
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && !lin && strstr(bh_err, "multiple of 128"), "fp8-block K=64: %d '%s'", (int)st, bh_err);
    static const qp_scheme_kind em[] = {QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8, QP_SCHEME_NVFP4};
    for (int i = 0; i < 3; i++) {
        qp_scheme s = {.struct_size = sizeof s, .kind = em[i]};
        qp_support_info si = {0};
        CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED &&
                  strstr(si.reason, "no native"),
              "supports kind %d: %d '%s'", (int)em[i], (int)si.level, si.reason);
    }
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_NVFP4};
    qp_support_info si = {0};
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 40, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED &&
              strstr(si.reason, "block size"),
          "nvfp4 K=40 support: %s", si.reason);
    s.kind = QP_SCHEME_UNQUANTIZED;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE,
          "supports unquantized");
    s.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 256, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED,
          "supports fp8-block");
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 200, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "fp8-block K=200 support: %s", si.reason);
    bh_layer_free(&L);
}

int main(void) {
    int rc = vk_open("vk-block-float");
    if (rc) return rc == 77 ? 77 : bh_finish();
    const qp_dtype F = QP_DTYPE_F16, B = QP_DTYPE_BF16, F4 = QP_DTYPE_F4_E2M1, E3 = QP_DTYPE_F6_E3M2,
                   E2 = QP_DTYPE_F6_E2M3, F8 = QP_DTYPE_F8_E4M3FN;
    const vk_fl_case cases[] = {
        /* bit-exact qdq through selection weights, fp16 and bf16 */
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 96, 0, true, false, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 0, true, false, 0},
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_MX, B, F8, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_W4A8, F, F4, 0, 96, 0, true, false, 0},
        {FL_W4A8, B, F4, 0, 96, 0, true, false, 0},
        {FL_NVFP4, F, F4, 0, 144, 0, true, false, 0},
        {FL_NVFP4, B, F4, 0, 144, 0, true, true, 0},
        {FL_UNQ, F, 0, 0, 96, 0, true, false, 0},
        {FL_FP8B, F, 0, 0, 128, 0, true, false, 0},
        {FL_FP8B, B, 0, 0, 128, 0, true, false, 1},
        {FL_FP8B, F, 0, 0, 256, 0, true, false, 1}, /* two groups: an inf group scale meets a zero part */
        /* random layers within the bound (K not a multiple of the 32-chunk
         * for NVFP4, N around the tiles) */
        {FL_MX, F, F4, QP_OCP_MX_ACT_NONE, 160, 67, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 192, 65, false, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 128, 33, false, true, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 70, false, false, 0},
        {FL_MX, F, F8, QP_OCP_MX_ACT_MXFP8, 128, 64, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP8, 64, 129, false, true, 0},
        {FL_W4A8, F, F4, 0, 160, 66, false, true, 0},
        {FL_W4A8, B, F4, 0, 96, 31, false, false, 0},
        {FL_NVFP4, F, F4, 0, 208, 65, false, true, 0},
        {FL_NVFP4, B, F4, 0, 48, 40, false, false, 0},
        {FL_UNQ, F, 0, 0, 100, 67, false, true, 0},
        {FL_UNQ, B, 0, 0, 257, 130, false, false, 0},
        {FL_FP8B, F, 0, 0, 256, 130, false, true, 0},
        {FL_FP8B, B, 0, 0, 384, 64, false, false, 1},
        {FL_FP8B, F, 0, 0, 128, 257, false, true, 1},
    };
    if (bh_group("layers"))
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) vk_fl(&cases[i]);
    if (bh_group("faults")) fl_faults();
    return vk_close();
}
