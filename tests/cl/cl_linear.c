/* OpenCL: the linear layers with integer or fp8 weights (W8A8-INT8,
 * W8A8-FP8, QQQ W4A8, fp8 per-block) and W4A16, one runner each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_tests.h"

typedef enum { J_EXACT, J_FP8, J_W4A16, J_FP8_BLOCK } judge;

/* T_k of the fp8 per-block bound: the dequantized fp8 activation, from the
 * group-128 amax (a NaN becomes 448 codes) plus half a code step */
static double fp8_block_t(qp_dtype dt, const uint16_t *xr, int k0, int k) {
    double amax = 0;
    for (int i = k0; i < k0 + 128; i++) {
        double v = fabs((double)bh_dec(dt, xr[i]));
        if (v > amax) amax = v;
    }
    double sg = 2.0 * fmax(1e-10, amax) / 448.0, v = fabs((double)bh_dec(dt, xr[k]));
    return (isnan(v) ? 448.0 * sg : v * 1.0625) + ldexp(sg, -10);
}

/* W8A8-FP8 per-tensor / per-token: |sum fp32 - sum exact| <= K 2^-23
 * sum |x_q w| (each partial sum rounds once; products are exact), bounded
 * through |x_q s_a| <= |x| 1.07 + half a code step, plus two output ulps
 * either side of the rounding */
static void judge_fp8(const bh_layer *L, const uint16_t *x, const uint16_t *y, const uint16_t *yr, int M,
                      const char *what) {
    int K = L->K, N = L->N, bad = 0;
    qp_dtype dt = L->dt;
    for (int m = 0; m < M; m++) {
        double amax = 0;
        for (int k = 0; k < K; k++) amax = fmax(amax, fabs((double)bh_dec(dt, x[(size_t)m * K + k])));
        for (int n = 0; n < N; n++) {
            double sabs = 0;
            for (int k = 0; k < K; k++)
                sabs += (fabs((double)bh_dec(dt, x[(size_t)m * K + k])) * 1.07 + amax / 448.0 * 0.01 + 1e-3) *
                        fabs(L->wd[(size_t)n * K + k]);
            double r = bh_dec(dt, yr[(size_t)m * N + n]), g = bh_dec(dt, y[(size_t)m * N + n]);
            double acc_err = (double)K * ldexp(1.0, -23) * sabs;
            double tol = acc_err + 2.0 * bh_ulp(dt, fabs(r) + acc_err);
            if (!(fabs(g - r) <= tol) && bad++ < 3)
                fprintf(stderr, "  %s: y[%d][%d] = %g, reference %g, bound %g\n", what, m, n, g, r, tol);
        }
    }
    CHECK(!bad, "%s: %d outputs outside the bound", what, bad);
}

/* The layer on every path and M; x rows with a NaN and a constant row
 * (special) where the judge allows them. */
static void run_layer(const bh_layer *L, const char *what, judge j, bool special, const int *ms, int nms,
                      unsigned extra_path) {
    int N = L->N, K = L->K;
    qp_dtype dt = L->dt;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        qp_status st = bh_ops->linear_prepare(bh_dev, &L->d, cl_paths[p] | extra_path, &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, cl_path_name[p], bh_err);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        double *ts = j == J_W4A16 || j == J_FP8_BLOCK ? calloc((size_t)M * N, sizeof(double)) : NULL;
        bh_x_rows(dt, x, M, K, special);
        qp_status st = bh_layer_ref(L, x, M, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        for (int m = 0; ts && m < M; m++)
            for (int k = 0; k < K; k++) {
                const uint16_t *xr = x + (size_t)m * K;
                double t = j == J_W4A16 ? fabs((double)bh_dec(dt, xr[k])) : fp8_block_t(dt, xr, k / 128 * 128, k);
                if (isnan(t)) continue;
                for (int n = 0; n < N; n++) ts[(size_t)m * N + n] += t * fabs(L->wd[(size_t)n * K + k]);
            }
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[280];
            snprintf(w2, sizeof w2, "%s [%s] M=%d", what, cl_path_name[p], M);
            bh_case("%s", w2);
            bh_outputs += (long)M * N;
            if (!bh_forward(lins[p], x, M, K, N, y, w2)) continue;
            if (j == J_EXACT) bh_compare_exact(y, yr, M, N, dt, w2);
            else if (j == J_FP8) judge_fp8(L, x, y, yr, M, w2);
            else bh_check_bound(y, yr, ts, j == J_W4A16 ? K + 2.0 : 132.0 + K / 128.0, NULL, M, N, dt, w2);
        }
        free(x); free(yr); free(y); free(ts);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) bh_ops->linear_destroy(bh_dev, lins[p]);
}

void cl_int8(qp_dtype dt, int is_static, int sym, int per_channel, int has_bias, int N, int K, const int *ms, int nms,
             unsigned extra_path) {
    bh_layer L;
    bh_int8_layer(&L, dt, is_static, sym, per_channel, has_bias, N, K);
    char what[160];
    snprintf(what, sizeof what, "int8 %s %s %s%s%s N=%d K=%d", bh_dt_name(dt), is_static ? "static" : "dynamic",
             sym ? "sym" : "asym", per_channel ? " per-channel" : " per-tensor", has_bias ? " bias" : "", N, K);
    run_layer(&L, what, J_EXACT, true, ms, nms, extra_path);
    bh_layer_free(&L);
}

void cl_fp8(qp_dtype dt, int act, int per_channel, int has_bias, int identity, int N, int K, const int *ms, int nms) {
    static const char *an[] = {"static", "dyn-tensor", "dyn-token"};
    bh_layer L;
    bh_fp8_layer(&L, dt, (qp_fp8_act)act, per_channel, has_bias, identity, N, K);
    char what[160];
    snprintf(what, sizeof what, "fp8 %s %s%s%s%s N=%d K=%d", bh_dt_name(dt), an[act],
             per_channel ? " per-channel" : " per-tensor", has_bias ? " bias" : "", identity ? " identity" : "", L.N, K);
    /* NaN rows only where outputs are compared bit for bit */
    run_layer(&L, what, identity ? J_EXACT : J_FP8, identity, ms, nms, 0);
    bh_layer_free(&L);
}

void cl_qqq(int group, int has_bias, int N, int K, const int *ms, int nms, unsigned extra_path) {
    bh_layer L;
    bh_qqq_layer(&L, group, has_bias, N, K);
    char what[160];
    snprintf(what, sizeof what, "qqq g%d%s N=%d K=%d", group, has_bias ? " bias" : "", N, K);
    run_layer(&L, what, J_EXACT, true, ms, nms, extra_path);
    bh_layer_free(&L);
}

void cl_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, int has_bias, int padded, int N, int K,
              const int *ms, int nms) {
    bh_layer L;
    bh_w4a16_layer(&L, dt, pack, sym, group, has_bias, N, K);
    char what[200];
    snprintf(what, sizeof what, "w4a16 %s %s %s g%d%s%s N=%d K=%d", bh_dt_name(dt), sym ? "int4" : "uint4",
             pack == QP_PACK_ORDER ? "order" : "reorder", group, has_bias ? " bias" : "", padded ? " (padded)" : "", N,
             K);
    run_layer(&L, what, J_W4A16, true, ms, nms, 0);
    if (N >= 4096) { /* timings of the large layer, for the log */
        cl_time_forward(&L.d, 0, 1, "w4a16");
        cl_time_forward(&L.d, 0, 16, "w4a16");
        cl_time_forward(&L.d, 0, 64, "w4a16");
    }
    bh_layer_free(&L);
}

/* identity: N = K, unit weights and scales, no bias: y = q s_x exactly, so
 * the activation quantizer's codes and scales are compared bit for bit */
void cl_fp8_block(qp_dtype dt, int ue8m0, int has_bias, int identity, int N, int K, const int *ms, int nms) {
    if (identity) {
        N = K;
        has_bias = 0;
    }
    bh_layer L;
    bh_fp8_block_layer(&L, dt, ue8m0, has_bias, identity ? BH_SEL_DIAG : BH_SEL_NONE, N, K);
    char what[200];
    snprintf(what, sizeof what, "fp8-block %s%s%s%s N=%d K=%d", bh_dt_name(dt), ue8m0 ? " ue8m0" : "",
             has_bias ? " bias" : "", identity ? " identity" : "", N, K);
    run_layer(&L, what, identity ? J_EXACT : J_FP8_BLOCK, true, ms, nms, 0);
    if (N >= 4096) {
        cl_time_forward(&L.d, 0, 1, "fp8-block");
        cl_time_forward(&L.d, 0, 16, "fp8-block");
        cl_time_forward(&L.d, 0, 64, "fp8-block");
    }
    bh_layer_free(&L);
}

/* the cl-linear cases: W8A8-INT8 (static / dynamic, symmetric / asymmetric,
 * per-tensor / per-channel, bias) and QQQ W4A8 (group -1 / 128, wrapping
 * group weights) bit-exact with the reference; W8A8-FP8 (static, dynamic
 * tensor, dynamic token) within the fp32-accumulation bound and bit-exact
 * on identity weights. N, K = 33x100 (odd tails) and 64x160 (exact tiles),
 * fp16 and bf16, every M, auto / GEMV / tiled. */
void cl_linear_cases(void) {
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
}
