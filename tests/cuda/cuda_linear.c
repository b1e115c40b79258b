/* The cuda-linear cases (tests/backend/test_linear.c runs them):
 * W8A8-INT8 (static / dynamic, symmetric / asymmetric, per-tensor / per-channel, bias; N x K 64x64, 72x200, 200x136,
 * 128x1024) and QQQ W4A8 (group -1 / 128, wrapping group weights; also
 * through the int8 weights, QPORT_CUDA_QQQ_W8=1) bit for bit on auto /
 * GEMV / tiled / no-int-dot / GEMV+int-dot; W8A8-FP8 (static, dynamic
 * tensor, dynamic token) within the bound of fp32 accumulation, each run
 * twice with the same bits (tiled from sm_89). fp16 and bf16, every M. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_tests.h"

static const unsigned int_paths[] = {0, QP_PATH_GEMV, QP_PATH_TILED, QP_PATH_NO_INT_DOT, QP_PATH_GEMV | QP_PATH_INT_DOT};
#define NIP 5

/* M rows of layer L on every integer path, bit for bit */
static void exact_rows(const bh_layer *L, const char *name) {
    int N = L->N, K = L->K;
    for (int mi = 0; mi < CUDA_NM; mi++) {
        int M = cuda_Ms[mi];
        if (cuda_skip_m(M, N, K)) continue;
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *yg = malloc(2 * (size_t)M * N);
        bh_x_rows(L->dt, x, M, K, false);
        CHECK(bh_layer_ref(L, x, M, yr) == QP_OK, "reference");
        for (int p = 0; p < NIP; p++) {
            char what[300], dsc[128] = "";
            if (cuda_run_layer(&L->d, int_paths[p], M, x, yg, dsc)) {
                snprintf(what, sizeof what, "%s M=%d [%s]", name, M, dsc);
                cuda_compare_exact(what, L->dt, yr, yg, M, N);
            }
        }
        free(x); free(yr); free(yg);
    }
}

static void int8(void) {
    const int shapes[][2] = {{64, 64}, {72, 200}, {200, 136}, {128, 1024}}; /* N, K */
    int before = tu_failures;
    long c0 = cuda_exact;
    for (int sh = 0; sh < 4; sh++)
        for (int dt = 0; dt < 2; dt++)
            for (int act = 0; act < 4; act++) {
                int N = shapes[sh][0], K = shapes[sh][1];
                int is_static = act < 2, sym = act % 2 == 0, per_ch = (sh + act) % 2, has_bias = (sh + dt) % 2;
                bh_layer L;
                bh_int8_layer(&L, dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, is_static, sym, per_ch, has_bias, N, K);
                char name[96];
                snprintf(name, sizeof name, "int8 %dx%d %s %s%s%s%s", N, K, dt ? "bf16" : "f16",
                         is_static ? "static" : "dynamic", sym ? " sym" : " asym", per_ch ? " per-channel" : " per-tensor",
                         has_bias ? " bias" : "");
                L.d.layer = name;
                exact_rows(&L, name);
                bh_layer_free(&L);
            }
    printf("int8: %ld cases, %s\n", cuda_exact - c0, tu_failures == before ? "all bit-exact" : "FAILURES");
}

static void qqq(void) {
    const int shapes[][2] = {{64, 128}, {128, 256}, {192, 1024}};
    int before = tu_failures;
    long c0 = cuda_exact;
    for (int sh = 0; sh < 3; sh++)
        for (int gi = 0; gi < 2; gi++)
            for (int w8mode = 0; w8mode < 2; w8mode++) {
                int N = shapes[sh][0], K = shapes[sh][1], gs = gi ? 128 : -1, has_bias = (sh + gi) % 2;
                bh_layer L;
                bh_qqq_layer(&L, gs, has_bias, N, K);
                char name[96];
                snprintf(name, sizeof name, "qqq %dx%d group %d%s%s", N, K, gs, has_bias ? " bias" : "",
                         w8mode ? " (QPORT_CUDA_QQQ_W8)" : "");
                L.d.layer = name;
                if (w8mode) setenv("QPORT_CUDA_QQQ_W8", "1", 1);
                else unsetenv("QPORT_CUDA_QQQ_W8");
                exact_rows(&L, name);
                unsetenv("QPORT_CUDA_QQQ_W8");
                bh_layer_free(&L);
            }
    printf("qqq: %ld cases, %s\n", cuda_exact - c0, tu_failures == before ? "all bit-exact" : "FAILURES");
}

static void fp8(void) {
    const int shapes[][2] = {{64, 64}, {72, 200}, {128, 1024}};
    int before = tu_failures, cases = 0;
    double worst = 0;
    static const unsigned paths[] = {0, QP_PATH_GEMV, QP_PATH_TILED, QP_PATH_NO_INT_DOT};
    for (int sh = 0; sh < 3; sh++)
        for (int dt = 0; dt < 2; dt++)
            for (int act = 0; act < 3; act++) {
                int N = shapes[sh][0], K = shapes[sh][1], per_ch = (sh + act) % 2, has_bias = (act + dt) % 2;
                qp_dtype dtype = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
                bh_layer L;
                bh_fp8_layer(&L, dtype, (qp_fp8_act)act, per_ch, has_bias, false, N, K);
                char name[96];
                snprintf(name, sizeof name, "fp8 %dx%d %s %s%s%s", N, K, dt ? "bf16" : "f16",
                         act == 0 ? "static" : act == 1 ? "dynamic-tensor" : "dynamic-token",
                         per_ch ? " per-channel" : " per-tensor", has_bias ? " bias" : "");
                L.d.layer = name;
                const qp_lin_desc *d = &L.d;
                for (int mi = 0; mi < CUDA_NM; mi++) {
                    int M = cuda_Ms[mi];
                    if (cuda_skip_m(M, N, K)) continue;
                    uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N),
                             *yg = malloc(2 * (size_t)M * N), *y2 = malloc(2 * (size_t)M * N);
                    float *xf = malloc(4 * (size_t)M * K), *sx = malloc(4 * (size_t)M);
                    uint8_t *xq = malloc((size_t)M * K);
                    bh_x_rows(dtype, x, M, K, false);
                    for (int i = 0; i < M * K; i++) xf[i] = bh_dec(dtype, x[i]);
                    CHECK(bh_layer_ref(&L, x, M, yr) == QP_OK, "ref fp8");
                    if (act == 0) {
                        qp_quant_fp8_static(NULL, xf, (size_t)M * K, d->input_scale, xq);
                        for (int m = 0; m < M; m++) sx[m] = d->input_scale;
                    } else if (act == 1) {
                        qp_quant_fp8_dynamic_tensor(NULL, xf, (size_t)M * K, xq, sx);
                        for (int m = 1; m < M; m++) sx[m] = sx[0];
                    } else {
                        qp_quant_fp8_dynamic_token(NULL, xf, M, K, 0.0f, xq, sx);
                    }
                    double *sabs = calloc((size_t)M * N, sizeof(double));
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++)
                            for (int k = 0; k < K; k++)
                                sabs[m * N + n] += fabs((double)qp_format_decode(QP_DTYPE_F8_E4M3FN, xq[m * K + k]) *
                                                        qp_format_decode(QP_DTYPE_F8_E4M3FN, d->w_u8[n * K + k]));
                    for (int p = 0; p < 4; p++) {
                        char dsc[128] = "";
                        if ((paths[p] & QP_PATH_TILED) && bh_info.cuda_cc < 89) continue;
                        if (!cuda_run_layer(d, paths[p], M, x, yg, dsc)) continue;
                        cases++;
                        bh_case("fp8 %s M=%d [%s]", name, M, dsc);
                        /* determinism: a second run gives the same bits */
                        cuda_run_layer(d, paths[p], M, x, y2, NULL);
                        CHECK(memcmp(yg, y2, 2 * (size_t)M * N) == 0, "%s M=%d [%s]: two runs differ", name, M, dsc);
                        int bad = 0;
                        for (int m = 0; m < M; m++)
                            for (int n = 0; n < N; n++) {
                                double r = bh_dec(dtype, yr[m * N + n]), g = bh_dec(dtype, yg[m * N + n]);
                                double tol = (double)sx[m] * d->w_scale[n] * sabs[m * N + n] * K * ldexp(1.0, -23) * 1.01 +
                                             bh_ulp(dtype, fmax(fabs(r), fabs(g))) * 1.01 + fabs(r) * ldexp(1.0, -20);
                                double err = fabs(r - g);
                                if (err / tol > worst) worst = err / tol;
                                if (!(err <= tol) && bad++ < 3)
                                    fprintf(stderr, "  %s M=%d [%s]: y[%d][%d] = %g, reference %g, bound %g\n", name, M,
                                            dsc, m, n, g, r, tol);
                            }
                        CHECK(!bad, "%s M=%d [%s]: %d outputs outside the bound", name, M, dsc, bad);
                    }
                    free(x); free(yr); free(yg); free(y2); free(xf); free(sx); free(xq); free(sabs);
                }
                bh_layer_free(&L);
            }
    printf("fp8: %d cases, %s (worst error / bound = %.3f)\n", cases,
           tu_failures == before ? "within bounds, deterministic" : "FAILURES", worst);
}

void cuda_linear_cases(void) {
    if (bh_group("int8")) int8();
    if (bh_group("qqq")) qqq();
    if (bh_group("fp8")) fp8();
}
