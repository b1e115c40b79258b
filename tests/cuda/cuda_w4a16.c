/* cuda-w4a16's cases: the float paths with integer or fp8 codes and the fp16 /
 * bf16 baseline, against the cpu reference within their bounds:
 *   W4A16 (docs/semantics.md §17; int4 / uint4, order / reorder, groups 32 / 64 / 128 /
 *     per-channel, one 4096x4096 layer on a GPU), a forced int-dot path
 *     refused (group sizes: the probes of tests/backend/test_w4a16.c);
 *   unquantized (3 shapes x fp16 / bf16);
 *   W8A8-FP8 per-block (128x128 weight blocks, activations per
 *     token-group of 128 with fp32 or UE8M0 scales, a zero group and a big
 *     one) within tools/cases.c's bound (132 + K/128) u 1.01 sum_k T_k |w_k|
 *     + 2 ulp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_tests.h"

static void w4a16_case(qp_dtype dt, qp_pack_method pack, int sym, int group, int has_bias, int N, int K, int MM) {
    bh_layer L;
    bh_w4a16_layer(&L, dt, pack, sym, group, has_bias, N, K);
    float *xs = malloc(4 * (size_t)MM * K);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    bh_x_rows(dt, x, MM, K, false);
    for (int i = 0; i < MM * K; i++) xs[i] = bh_dec(dt, x[i]);
    CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "w4a16 reference");
    char name[160];
    snprintf(name, sizeof name, "w4a16 %s %s %s g%d%s %dx%d", dt == QP_DTYPE_BF16 ? "bf16" : "f16", sym ? "int4" : "uint4",
             pack == QP_PACK_ORDER ? "order" : "reorder", group, has_bias ? " bias" : "", N, K);
    L.d.layer = name;
    cuda_f_run(&L.d, MM, x, ref, xs, L.wd, false);
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, &L.d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "int-dot"), "%s: forced int-dot: %s", name, bh_err);
    free(xs); free(x); free(ref);
    bh_layer_free(&L);
}

static void w4a16(void) {
    cuda_f_worst = 0;
    int before = tu_failures;
    long c0 = cuda_f_cases;
    w4a16_case(QP_DTYPE_F16, QP_PACK_REORDER, 1, 128, 1, 72, 256, 64);
    w4a16_case(QP_DTYPE_BF16, QP_PACK_ORDER, 0, 128, 0, 33, 384, 17);
    w4a16_case(QP_DTYPE_F16, QP_PACK_ORDER, 1, 32, 1, 67, 96, 64);
    w4a16_case(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, 1, 50, 192, 17);
    w4a16_case(QP_DTYPE_F16, QP_PACK_REORDER, 0, -1, 0, 31, 160, 17);
    w4a16_case(QP_DTYPE_BF16, QP_PACK_ORDER, 1, -1, 1, 64, 160, 17);
    if (!getenv("QPORT_TEST_CUDA_SMALL")) w4a16_case(QP_DTYPE_F16, QP_PACK_REORDER, 0, 128, 1, 4096, 4096, 64);
    printf("w4a16: %ld cases, %s (worst error / bound %.3f)\n", cuda_f_cases - c0,
           tu_failures == before ? "within bounds" : "FAILURES", cuda_f_worst);
}

static void unquantized(void) {
    cuda_f_worst = 0;
    int before = tu_failures;
    long c0 = cuda_f_cases;
    const int shapes[][3] = {{72, 200, 64}, {64, 64, 17}, {130, 96, 17}};
    for (int sh = 0; sh < 3; sh++)
        for (int dt = 0; dt < 2; dt++) {
            int N = shapes[sh][0], K = shapes[sh][1], MM = shapes[sh][2], has_bias = (sh + dt) % 2;
            qp_dtype dtype = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
            bh_fw_spec s;
            bh_fw_spec_init(&s, BH_FW_UNQ, dtype, QP_DTYPE_NONE, QP_OCP_MX_ACT_NONE, N, K, BH_SEL_NONE, has_bias);
            s.wact_amp = 1.0f;
            bh_layer L;
            if (!bh_fw_layer(&L, &s)) {
                bh_layer_free(&L);
                continue;
            }
            uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
            float *xs = malloc(4 * (size_t)MM * K);
            bh_x_rows(dtype, x, MM, K, false);
            for (int i = 0; i < MM * K; i++) xs[i] = bh_dec(dtype, x[i]);
            CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "ref");
            char name[96];
            snprintf(name, sizeof name, "unquantized %s %dx%d%s", dt ? "bf16" : "f16", N, K, has_bias ? " bias" : "");
            L.d.layer = name;
            cuda_f_run(&L.d, MM, x, ref, xs, L.wd, false);
            free(x); free(ref); free(xs);
            bh_layer_free(&L);
        }
    printf("unquantized: %ld cases, %s (worst error / bound %.3f)\n", cuda_f_cases - c0,
           tu_failures == before ? "within bounds" : "FAILURES", cuda_f_worst);
}

static void fp8_block_case(qp_dtype dt, int N, int K, int ue8m0, int has_bias, int MM) {
    static const unsigned paths[] = {0, QP_PATH_GEMV, QP_PATH_TILED};
    static const int ms[] = {1, 3, 16, 17, 64};
    bh_layer L;
    bh_fp8_block_layer(&L, dt, ue8m0, has_bias, BH_SEL_NONE, N, K);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N), *y = malloc(2 * (size_t)MM * N);
    bh_x_rows(dt, x, MM, K, false);
    for (int k = 0; k < K; k++) x[k] = bh_enc(dt, k < 128 ? 0.0f : 1000.0f * bh_frand()); /* a zero group, a big one */
    CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "ref fp8 block");
    char name[128];
    snprintf(name, sizeof name, "fp8-block %s %dx%d%s%s", dt == QP_DTYPE_BF16 ? "bf16" : "f16", N, K, ue8m0 ? " ue8m0" : "",
             has_bias ? " bias" : "");
    L.d.layer = name;
    for (int mi = 0; mi < 5; mi++) {
        int M = ms[mi];
        if (M > MM || cuda_f_skip_m(M)) continue;
        for (int p = 0; p < 3; p++) {
            char dsc[128] = "", what[300];
            if ((paths[p] & QP_PATH_TILED) && bh_info.cuda_cc < 89) continue;
            if (!cuda_run_layer(&L.d, paths[p], M, x, y, dsc)) continue;
            snprintf(what, sizeof what, "%s M=%d [%s]", name, M, dsc);
            cuda_f_cases++;
            bh_case("bound %s", what);
            int bad = 0;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    double sum = 0;
                    for (int g0 = 0; g0 < K; g0 += 128) {
                        double amax = 0;
                        for (int k = g0; k < g0 + 128; k++) amax = fmax(amax, fabs((double)bh_dec(dt, x[(size_t)m * K + k])));
                        double sg = 2.0 * fmax(1e-10, amax) / 448.0;
                        for (int k = g0; k < g0 + 128; k++)
                            sum += (fabs((double)bh_dec(dt, x[(size_t)m * K + k])) * 1.0625 + 0x1p-10 * sg) *
                                   fabs(L.wd[(size_t)n * K + k]);
                    }
                    double r = bh_dec(dt, ref[(size_t)m * N + n]), g = bh_dec(dt, y[(size_t)m * N + n]);
                    double tol = (132.0 + K / 128.0) * 0x1p-24 * 1.01 * sum + 2.0 * bh_ulp(dt, fmax(fabs(r), fabs(g)));
                    if (tol > 0 && fabs(r - g) / tol > cuda_f_worst) cuda_f_worst = fabs(r - g) / tol;
                    if (!(fabs(r - g) <= tol) && bad++ < 3)
                        fprintf(stderr, "  %s: y[%d][%d] = %.9g, reference %.9g, bound %.3g\n", what, m, n, g, r, tol);
                }
            CHECK(!bad, "%s: %d outputs outside the bound", what, bad);
        }
    }
    free(x); free(ref); free(y);
    bh_layer_free(&L);
}

static void fp8_block(void) {
    cuda_f_worst = 0;
    int before = tu_failures;
    long c0 = cuda_f_cases;
    fp8_block_case(QP_DTYPE_F16, 200, 256, 0, 1, 64);
    fp8_block_case(QP_DTYPE_BF16, 130, 384, 1, 0, 17);
    fp8_block_case(QP_DTYPE_F16, 64, 128, 1, 1, 17);
    fp8_block_case(QP_DTYPE_BF16, 72, 512, 0, 1, 17);
    if (!getenv("QPORT_TEST_CUDA_SMALL")) fp8_block_case(QP_DTYPE_BF16, 4096, 4096, 1, 1, 64);
    printf("fp8-block: %ld cases, %s (worst error / bound %.3f)\n", cuda_f_cases - c0,
           tu_failures == before ? "within bounds" : "FAILURES", cuda_f_worst);
}

void cuda_w4a16_cases(void) {
    if (bh_group("fp8-block")) fp8_block();
    if (bh_group("w4a16")) w4a16();
    if (bh_group("unquantized")) unquantized();
}
