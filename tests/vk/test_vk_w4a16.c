/* vk-w4a16: W4A16 from the canonical fields -- order and reorder packing,
 * int4 / uint4, group 32 / 64 / 128 / per-channel, fp16 / bf16, K not a
 * multiple of 32 (per-channel), padded scales -- within the bound, a
 * forced int-dot path refused; group 16 and uint4 without zero points
 * refused, with the device_supports answers. */
#include <string.h>

#include "vk_tests.h"

static void w4a16_faults(void) {
    int K = 96, N = 16;
    int8_t q4[96 * 16] = {0};
    float sc[6 * 16] = {0};
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W4A16_INT4;
    d.scheme.weight.group_size = 16;
    d.scheme.weight.symmetric = 1;
    d.scheme.pack_method = QP_PACK_ORDER;
    d.act_dtype = QP_DTYPE_F16;
    d.N = N;
    d.K = K;
    d.layer = "w4a16-bad";
    d.group_size = 16;
    d.q4 = q4;
    d.w4_signed = 1;
    d.w4_scale = sc;
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_AUTO, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(bh_err, "group size 16"), "w4a16 g16: %d '%s'", (int)st, bh_err);
    qp_support_info si = {0};
    CHECK(bh_ops->device_supports(bh_dev, &d.scheme, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "w4a16 g16 support level %d '%s'", (int)si.level, si.reason);
    d.scheme.weight.group_size = d.group_size = 32;
    d.scheme.weight.symmetric = d.w4_signed = 0; /* uint4 without zero points */
    st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_AUTO, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(bh_err, "w4_zero"), "w4a16 no zp: %d '%s'", (int)st, bh_err);
    CHECK(bh_ops->device_supports(bh_dev, &d.scheme, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE,
          "w4a16 g32 support level %d '%s'", (int)si.level, si.reason);
}

int main(void) {
    int rc = vk_open("vk-w4a16");
    if (rc) return rc == 77 ? 77 : bh_finish();
    const qp_dtype H = QP_DTYPE_F16, B = QP_DTYPE_BF16;
    const qp_pack_method O = QP_PACK_ORDER, R = QP_PACK_REORDER;
    vk_w4a16(H, R, 1, 128, true, false, 65, 256);
    vk_w4a16(B, O, 0, 128, false, false, 33, 384);
    vk_w4a16(H, O, 1, 32, true, true, 67, 96);
    vk_w4a16(B, R, 0, 64, true, false, 50, 192);
    vk_w4a16(H, R, 0, -1, false, false, 31, 100);
    vk_w4a16(B, O, 1, -1, true, true, 64, 160);
    w4a16_faults();
    return vk_close();
}
