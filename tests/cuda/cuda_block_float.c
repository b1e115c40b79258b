/* cuda-block-float: OCP-MX (fp4 weights with every activation format;
 * fp6 e3m2 / e2m3 and fp8 weights with the activations OCP_MX_Scheme
 * allows), W4A8-MXFP4-FP8 and NVFP4, fp16 and bf16, K = N = 128, M up to
 * 17, on auto / GEMV / tiled: each first on selection weights (W = I:
 * y = x', the activation qdq bit for bit, on rows with zero blocks, huge /
 * tiny mixes, ties, NaN and inf), then on random weights within the bound,
 * judged with that very x' and the same x. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_tests.h"

/* one layer; sel: selection weights (N == K); xq: x' out of the selection
 * run, into the random one's bound */
static void mx_case(bh_fw_kind kind, qp_dtype we, qp_ocp_mx_act act, qp_dtype dt, int N, int K, int MM, int sel,
                    int has_bias, float *xq) {
    bh_fw_spec s;
    bh_fw_spec_init(&s, kind, dt, we, act, N, K, sel ? BH_SEL_DIAG : BH_SEL_NONE, has_bias);
    s.e8m0_lo = 122; /* 2^-5 .. 2^3: exact in fp16 */
    s.e8m0_hi = 130;
    s.e4m3_lo = 0x28; /* e4m3 2^-2 .. 2^2 */
    s.e4m3_hi = 0x47;
    s.in_scale = 0.0173f;
    s.in_gscale = 1.0f / 2.5f;
    bh_layer L;
    bool built = bh_fw_layer(&L, &s);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    float *xs = malloc(4 * (size_t)MM * K);
    uint64_t save = bh_rng; /* the same x for the selection and the random layer */
    bh_rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)kind << 8) ^ ((uint64_t)act << 4) ^ (uint64_t)dt;
    bh_x_blocks(dt, x, MM, K, BH_X_SPECIALS);
    bh_rng = save;
    static const char *nm[] = {"none", "mxfp4", "mxfp6-e3m2", "mxfp6-e2m3", "mxfp8"};
    const char *an = kind == BH_FW_W4A8 ? "fp8-static" : kind == BH_FW_NVFP4 ? "nvfp4" : nm[act];
    char name[160];
    snprintf(name, sizeof name, "%s %s act %s %s %dx%d%s%s",
             kind == BH_FW_MX ? "ocp-mx" : kind == BH_FW_W4A8 ? "w4a8-mxfp4-fp8" : "nvfp4", qp_dtype_name(L.fw.w_elem), an,
             dt == QP_DTYPE_BF16 ? "bf16" : "f16", N, K, has_bias ? " bias" : "", sel ? " selection" : "");
    if (built) {
        CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "mx reference");
        L.d.layer = name;
        if (sel) {
            cuda_f_run(&L.d, MM, x, ref, NULL, NULL, true);
            for (int i = 0; i < MM * K; i++) xq[i] = bh_dec(dt, ref[i]); /* x' (N == K) */
        } else {
            for (int i = 0; i < MM * K; i++) xs[i] = xq[i];
            cuda_f_run(&L.d, MM, x, ref, xs, L.wd, false);
        }
    }
    free(x); free(ref); free(xs);
    bh_layer_free(&L);
}

void cuda_block_float_cases(void) {
    cuda_f_worst = 0;
    int before = tu_failures;
    long c0 = cuda_f_cases, e0 = cuda_f_exact;
    const int K = 128, MM = 17;
    const qp_dtype F4 = QP_DTYPE_F4_E2M1;
    float *xq = malloc(4 * (size_t)MM * K);
    for (int dt = 0; dt < 2; dt++) {
        qp_dtype dtype = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
        for (int a = 0; a <= (int)QP_OCP_MX_ACT_MXFP8 && bh_group("mx"); a++) {
            uint64_t seed = bh_rng;
            mx_case(BH_FW_MX, F4, (qp_ocp_mx_act)a, dtype, K, K, MM, 1, 0, xq);
            bh_rng = seed; /* the same x again */
            mx_case(BH_FW_MX, F4, (qp_ocp_mx_act)a, dtype, K, K, MM, 0, (a + dt) % 2, xq);
        }
        if (bh_group("w4a8")) {
            uint64_t seed = bh_rng;
            mx_case(BH_FW_W4A8, F4, 0, dtype, K, K, MM, 1, 0, xq);
            bh_rng = seed;
            mx_case(BH_FW_W4A8, F4, 0, dtype, K, K, MM, 0, 1, xq);
        }
        if (bh_group("nvfp4")) {
            uint64_t seed = bh_rng;
            mx_case(BH_FW_NVFP4, F4, 0, dtype, K, K, MM, 1, 0, xq);
            bh_rng = seed;
            mx_case(BH_FW_NVFP4, F4, 0, dtype, K, K, MM, 0, 1, xq);
        }
    }
    /* MXFP6 and MXFP8 weights (the pairs OCP_MX_Scheme allows) */
    const struct { qp_dtype we; qp_ocp_mx_act act; qp_dtype dt; } wp[] = {
        {QP_DTYPE_F6_E3M2, QP_OCP_MX_ACT_MXFP6_E3M2, QP_DTYPE_F16},
        {QP_DTYPE_F6_E2M3, QP_OCP_MX_ACT_MXFP6_E2M3, QP_DTYPE_BF16},
        {QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_MXFP8, QP_DTYPE_BF16},
        {QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_NONE, QP_DTYPE_F16},
    };
    for (int i = 0; i < 4 && bh_group("mx"); i++) {
        mx_case(BH_FW_MX, wp[i].we, wp[i].act, wp[i].dt, K, K, MM, 1, 0, xq);
        mx_case(BH_FW_MX, wp[i].we, wp[i].act, wp[i].dt, K, K, MM, 0, i % 2, xq);
    }
    free(xq);
    printf("mx/w4a8/nvfp4: %ld cases (%ld selection cases bit-exact), %s (worst error / bound %.3f)\n",
           cuda_f_cases - c0 + cuda_f_exact - e0, cuda_f_exact - e0, tu_failures == before ? "ok" : "FAILURES",
           cuda_f_worst);
}
