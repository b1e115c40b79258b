/* cl-linear: W8A8-INT8 (static / dynamic, symmetric / asymmetric,
 * per-tensor / per-channel, bias) and QQQ W4A8 (group -1 / 128, wrapping
 * group weights) bit-exact with the reference; W8A8-FP8 (static, dynamic
 * tensor, dynamic token) within the fp32-accumulation bound and bit-exact
 * on identity weights. N, K = 33x100 (odd tails) and 64x160 (exact tiles),
 * fp16 and bf16, every M, auto / GEMV / tiled. */
#include "cl_tests.h"

int main(void) {
    int rc = cl_open("cl-linear");
    if (rc) return rc == 77 ? 77 : bh_finish();
    static const int shapes[][2] = {{33, 100}, {64, 160}}; /* N, K */
    const qp_dtype dts[] = {QP_DTYPE_F16, QP_DTYPE_BF16};
    if (bh_group("int8"))
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 2; t++)
                for (int st = 0; st < 2; st++)
                    for (int sym = 0; sym < 2; sym++) {
                        /* alternate per-channel / bias so every combination appears */
                        int pc = (s + sym) & 1, bias = (st + t + s) & 1;
                        cl_int8(dts[t], st, sym, pc, bias, shapes[s][0], shapes[s][1], cl_Ms, CL_NM, 0);
                    }
    if (bh_group("fp8")) {
        for (int s = 0; s < 2; s++)
            for (int t = 0; t < 2; t++)
                for (int act = 0; act < 3; act++)
                    cl_fp8(dts[t], act, (act + s) & 1, (act + t) & 1, 0, shapes[s][0], shapes[s][1], cl_Ms, CL_NM);
        static const int msid[] = {1, 5, 17, 64};
        for (int t = 0; t < 2; t++)
            for (int act = 0; act < 3; act++) cl_fp8(dts[t], act, 0, t, 1, 0, 96, msid, 4);
    }
    if (bh_group("qqq")) {
        cl_qqq(-1, 0, 64, 128, cl_Ms, CL_NM, 0);
        cl_qqq(-1, 1, 128, 256, cl_Ms, CL_NM, 0);
        cl_qqq(128, 1, 64, 256, cl_Ms, CL_NM, 0);
        cl_qqq(128, 0, 192, 384, cl_Ms, CL_NM, 0);
    }
    return cl_close();
}
