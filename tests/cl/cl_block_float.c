/* OpenCL: OCP-MX, W4A8-MXFP4-FP8, NVFP4 and unquantized layers,
 * built from checkpoint tensors by the core's own binder (backend_layers.c),
 * so the canonical fields are exactly the core's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_tests.h"

/* x' as the reference computes it (cpu/ref_*.c), for the bound */
static void host_xq(const bh_layer *L, const uint16_t *x, int M, float *xq) {
    static const qp_dtype aes[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3,
                                   QP_DTYPE_F8_E4M3FN};
    qp_dtype dt = L->dt, ae = aes[L->fw.act];
    int K = L->K;
    const qp_lin_desc *d = &L->d;
    float *xr = malloc(sizeof(float) * (size_t)K);
    uint8_t *codes = malloc((size_t)K), *sc = malloc((size_t)K / 16 + 1);
    for (int m = 0; m < M; m++) {
        float *o = xq + (size_t)m * K;
        for (int k = 0; k < K; k++) xr[k] = bh_dec(dt, x[(size_t)m * K + k]);
        if (L->fw.kind == BH_FW_MX && ae != QP_DTYPE_NONE) {
            qp_quant_mx(NULL, ae, xr, 1, (size_t)K, codes, sc);
            qp_dequant_mx(NULL, ae, codes, sc, 1, (size_t)K, o);
            for (int k = 0; k < K; k++) o[k] = bh_dec(dt, bh_enc(dt, o[k]));
        } else if (L->fw.kind == BH_FW_W4A8) {
            for (int k = 0; k < K; k++) {
                float t = fmaxf(-448.0f, fminf(bh_dec(dt, bh_enc(dt, xr[k] / d->input_scale)), 448.0f));
                float q = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, t));
                o[k] = bh_dec(dt, bh_enc(dt, bh_dec(dt, bh_enc(dt, q)) * d->input_scale));
            }
        } else if (L->fw.kind == BH_FW_NVFP4) {
            float g = d->input_global_scale_inv;
            qp_quant_nvfp4(NULL, xr, 1, (size_t)K, g, codes, sc);
            for (int k = 0; k < K; k++) {
                float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, sc[k / 16]) / g;
                o[k] = bh_dec(dt, bh_enc(dt, qp_format_decode(QP_DTYPE_F4_E2M1, codes[k]) * s));
            }
        } else {
            memcpy(o, xr, sizeof(float) * (size_t)K);
        }
    }
    free(xr); free(codes); free(sc);
}

void cl_fw(bh_fw_kind kind, qp_dtype dt, qp_dtype we, qp_ocp_mx_act act, int sel, int has_bias, int stress, int N,
           int K, const int *ms, int nms) {
    static const char *kn[] = {"ocp-mx", "w4a8-mxfp4", "nvfp4", "unquantized"};
    bh_fw_spec s;
    bh_fw_spec_init(&s, kind, dt, we, act, N, K, sel ? BH_SEL_DIAG : BH_SEL_NONE, has_bias);
    s.e8m0_lo = 121;
    s.e8m0_hi = 130;
    s.e8m0_far = true; /* 2^23 and 2^-27 blocks: fp16 saturation and flush */
    s.e4m3_lo = 0x20;
    s.e4m3_hi = 0x50;
    s.in_scale = sel ? 0.0625f : 0.013f;
    s.in_gscale = sel ? 2.0f : 37.5f;
    bh_layer L;
    bool built = bh_fw_layer(&L, &s);
    const bh_fw_spec *f = &L.fw;
    static const qp_dtype aes[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3,
                                   QP_DTYPE_F8_E4M3FN};
    qp_dtype ae = aes[f->act];
    char what[200];
    snprintf(what, sizeof what, "%s %s w=%s a=%s%s%s%s N=%d K=%d", kn[kind], bh_dt_name(dt),
             kind == BH_FW_UNQ ? "-" : qp_dtype_name(f->w_elem),
             kind == BH_FW_W4A8 ? "fp8-static" : kind == BH_FW_NVFP4 ? "nvfp4" : ae == QP_DTYPE_NONE ? "none" : qp_dtype_name(ae),
             sel ? " selection" : "", has_bias ? " bias" : "", stress ? " stress" : "", N, K);
    void *lins[2] = {0};
    for (int p = 0; p < 2 && built; p++) {
        qp_status s2 = bh_ops->linear_prepare(bh_dev, &L.d, cl_paths[p + 1], &lins[p]);
        CHECK(s2 == QP_OK, "%s: prepare %s: %s", what, cl_path_name[p + 1], bh_err);
    }
    for (int mi = 0; mi < nms && built; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        float *xq = malloc(sizeof(float) * (size_t)M * K);
        double *ts = calloc((size_t)M * N, sizeof(double)), *extra = calloc((size_t)M * N, sizeof(double));
        bh_x_blocks(dt, x, M, K, stress ? BH_X_EXTREMES : BH_X_PLAIN);
        CHECK(bh_layer_ref(&L, x, M, yr) == QP_OK, "%s: reference failed", what);
        if (!sel) {
            host_xq(&L, x, M, xq);
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    double t = 0.0;
                    for (int k = 0; k < K; k++) {
                        double v = fabs((double)xq[(size_t)m * K + k] * L.wd[(size_t)n * K + k]);
                        if (!isnan(v)) t += v;
                    }
                    ts[(size_t)m * N + n] = t;
                    /* NVFP4 rounds the sum, then adds the bias: one more rounding */
                    if (kind == BH_FW_NVFP4 && has_bias) {
                        double r = bh_dec(dt, yr[(size_t)m * N + n]), b = bh_dec(dt, L.bias[n]);
                        extra[(size_t)m * N + n] = 2.0 * bh_ulp(dt, fabs(r - b) + t * ldexp(1.0, -20));
                    }
                }
        }
        for (int p = 0; p < 2; p++) {
            if (!lins[p]) continue;
            char w2[280];
            snprintf(w2, sizeof w2, "%s [%s] M=%d", what, cl_path_name[p + 1], M);
            bh_case("%s", w2);
            bh_outputs += (long)M * N;
            if (!bh_forward(lins[p], x, M, K, N, y, w2)) continue;
            if (sel) {
                bh_compare_exact(y, yr, M, N, dt, w2);
                cl_fw_exact += (long)M * N;
            } else {
                bh_check_bound(y, yr, ts, K + 2.0, extra, M, N, dt, w2);
            }
        }
        free(x); free(yr); free(y); free(xq); free(ts); free(extra);
    }
    for (int p = 0; p < 2; p++)
        if (lins[p]) bh_ops->linear_destroy(bh_dev, lins[p]);
    if (N >= 4096 && built) {
        cl_time_forward(&L.d, 0, 1, kn[kind]);
        cl_time_forward(&L.d, 0, 16, kn[kind]);
    }
    bh_layer_free(&L);
}

/* cl-block-float: OCP-MX, W4A8-MXFP4-FP8, NVFP4 and unquantized layers
 * on GEMV and tiled, M in 1, 3, 16, 17, 64, fp16 and bf16:
 *   every OCP_MX_Scheme pair (fp4 weights with none / mxfp4 / mxfp6_e3m2 /
 *   mxfp6_e2m3 / mxfp8 activations, fp6 with none / their own fp6 / mxfp8,
 *   fp8 with none / mxfp8), W4A8, NVFP4 (K = 48, 64, 80, 144: half a 32-code
 *   chunk at the end) and unquantized (K = 100, 256):
 *   selection weights on rows with NaN, inf and huge blocks, compared bit
 *   for bit; random codes and scales within the bound. */

void cl_block_float_cases(void) {
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
}
