/* cl-block-float: OCP-MX, W4A8-MXFP4-FP8, NVFP4 and unquantized layers
 * on GEMV and tiled, M in 1, 3, 16, 17, 64, fp16 and bf16:
 *   every OCP_MX_Scheme pair (fp4 weights with none / mxfp4 / mxfp6_e3m2 /
 *   mxfp6_e2m3 / mxfp8 activations, fp6 with none / their own fp6 / mxfp8,
 *   fp8 with none / mxfp8), W4A8, NVFP4 (K = 48, 64, 80, 144: half a 32-code
 *   chunk at the end) and unquantized (K = 100, 256):
 *   selection weights on rows with NaN, inf and huge blocks, compared bit
 *   for bit; random codes and scales within the bound. */
#include "cl_tests.h"

int main(void) {
    int rc = cl_open("cl-block-float");
    if (rc) return rc == 77 ? 77 : bh_finish();
    static const int ms[] = {1, 3, 16, 17, 64};
    const qp_dtype H = QP_DTYPE_F16, B = QP_DTYPE_BF16;
    const qp_dtype F4 = QP_DTYPE_F4_E2M1, E23 = QP_DTYPE_F6_E2M3, E32 = QP_DTYPE_F6_E3M2, F8 = QP_DTYPE_F8_E4M3FN;
    static const struct { qp_dtype w; qp_ocp_mx_act a; } pairs[] = {
        {F4, QP_OCP_MX_ACT_NONE}, {F4, QP_OCP_MX_ACT_MXFP4}, {F4, QP_OCP_MX_ACT_MXFP6_E3M2},
        {F4, QP_OCP_MX_ACT_MXFP6_E2M3}, {F4, QP_OCP_MX_ACT_MXFP8}, {E23, QP_OCP_MX_ACT_NONE},
        {E23, QP_OCP_MX_ACT_MXFP6_E2M3}, {E23, QP_OCP_MX_ACT_MXFP8}, {E32, QP_OCP_MX_ACT_NONE},
        {E32, QP_OCP_MX_ACT_MXFP6_E3M2}, {E32, QP_OCP_MX_ACT_MXFP8}, {F8, QP_OCP_MX_ACT_NONE}, {F8, QP_OCP_MX_ACT_MXFP8}};
    if (bh_group("mx"))
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            cl_fw(BH_FW_MX, i % 2 ? B : H, pairs[i].w, pairs[i].a, 1, (int)(i % 3 == 0), 1, 96, 96, ms, 5);
            cl_fw(BH_FW_MX, i % 2 ? H : B, pairs[i].w, pairs[i].a, 1, 0, 1, 64, 64, ms, 5);
            cl_fw(BH_FW_MX, i % 2 ? H : B, pairs[i].w, pairs[i].a, 0, (int)(i % 2), 0, 40, 160, ms, 5);
        }
    for (int t = 0; t < 2; t++) {
        qp_dtype dt = t ? B : H;
        if (bh_group("w4a8")) {
            cl_fw(BH_FW_W4A8, dt, F4, 0, 1, t, 1, 96, 96, ms, 5);
            cl_fw(BH_FW_W4A8, dt, F4, 0, 0, !t, 0, 37, 224, ms, 5);
        }
        if (bh_group("nvfp4")) {
            cl_fw(BH_FW_NVFP4, dt, F4, 0, 1, t, 1, 80, 80, ms, 5);
            cl_fw(BH_FW_NVFP4, dt, F4, 0, 1, !t, 1, 48, 48, ms, 5);
            cl_fw(BH_FW_NVFP4, dt, F4, 0, 0, 1, 0, 41, 144, ms, 5);
            cl_fw(BH_FW_NVFP4, dt, F4, 0, 0, 0, 0, 33, 64, ms, 5);
        }
        if (bh_group("unquantized")) {
            cl_fw(BH_FW_UNQ, dt, 0, 0, 1, t, 1, 100, 100, ms, 5);
            cl_fw(BH_FW_UNQ, dt, 0, 0, 0, 1, 0, 33, 100, ms, 5);
            cl_fw(BH_FW_UNQ, dt, 0, 0, 0, 0, 0, 70, 256, ms, 5);
        }
    }
    return cl_close();
}
