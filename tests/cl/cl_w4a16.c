/* cl-w4a16: the float-weight paths with integer or fp8 codes, against the
 * reference within the float-path bound of tools/cases.c (NaN rows stay
 * NaN):
 *   W4A16 (docs/semantics.md §17): every group size (32, 64, 128, per-channel with K =
 *     100 off the 32-weight chunks), order and reorder packing, int4 and
 *     uint4, fp16 and bf16, odd N, negative and tiny scales, the core's
 *     canonical fields;
 *   fp8 per-block (docs/semantics.md §16): fp32 and power-of-two (e8m0) scales, UE8M0
 *     activation scales, a partial 128-row block, and identity layers
 *     comparing the group quantizer's codes and scales bit for bit. */
#include "cl_tests.h"

void cl_w4a16_cases(void) {
    static const int mw[] = {1, 2, 3, 5, 8, 16, 17, 64};
    const qp_pack_method O = QP_PACK_ORDER, R = QP_PACK_REORDER;
    const qp_dtype H = QP_DTYPE_F16, B = QP_DTYPE_BF16;
    if (bh_group("w4a16")) {
        cl_w4a16(H, R, 1, 128, 1, 0, 65, 256, cl_Ms, CL_NM);
        cl_w4a16(B, O, 0, 128, 0, 0, 33, 384, mw, 8);
        cl_w4a16(H, O, 1, 32, 1, 1, 67, 96, mw, 8);
        cl_w4a16(B, R, 0, 64, 1, 0, 50, 192, mw, 8);
        cl_w4a16(H, R, 0, -1, 0, 0, 31, 100, mw, 8);
        cl_w4a16(B, O, 1, -1, 1, 0, 64, 160, mw, 8);
        cl_w4a16(B, R, 1, 32, 0, 1, 130, 64, mw, 8);
        cl_w4a16(H, O, 0, 64, 1, 1, 9, 128, mw, 8);
    }
    if (bh_group("fp8-block")) {
        cl_fp8_block(H, 0, 1, 0, 65, 256, cl_Ms, CL_NM);
        cl_fp8_block(B, 1, 0, 0, 200, 384, mw, 8);
        cl_fp8_block(H, 1, 1, 0, 33, 128, mw, 8);
        cl_fp8_block(B, 0, 1, 0, 130, 128, mw, 8);
        cl_fp8_block(H, 0, 0, 1, 0, 256, mw, 8);
        cl_fp8_block(B, 1, 0, 1, 0, 128, mw, 8);
    }
}
