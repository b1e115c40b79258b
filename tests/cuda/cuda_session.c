/* The CUDA test programs' session and the runners their cases go through. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_tests.h"

int cuda_is_cuda;
const int cuda_Ms[] = {1, 2, 3, 5, 8, 16, 17, 64, 256};
long cuda_exact, cuda_exact_bad, cuda_f_cases, cuda_f_exact;
double cuda_f_worst;
static double t0;

bool cuda_load(const char *program) {
    bh_setup(program);
    const char *lib = getenv("QPORT_TEST_CUDA_PLUGIN"); /* test the test: run it on another plugin */
    if (!bh_load(lib ? lib : "libqport-cuda.so", lib ? NULL : "cuda")) {
        tu_failures++;
        return false;
    }
    cuda_is_cuda = strcmp(bh_ops->name, "cuda") == 0;
    bh_cache_dir[0] = 0;
    bh_host.validation = 0;
    bh_init(&bh_state);
    return bh_state != NULL;
}

int cuda_open(const char *program) {
    if (!cuda_load(program)) return 1;
    if (bh_ops->device_count(bh_state) == 0) {
        printf("SKIP: no CUDA device (%s)\n", bh_log);
        bh_ops->shutdown(bh_state);
        bh_state = NULL;
        return 77;
    }
    bh_use_device(0);
    printf("cuda:0 %s, compute capability %d.%d\n", bh_info.name, bh_info.cuda_cc / 10, bh_info.cuda_cc % 10);
    t0 = bh_now();
    return 0;
}

int cuda_close(void) {
    printf("cuda: %ld exact comparisons, %ld mismatching, %.1f s\n", cuda_exact, cuda_exact_bad, bh_now() - t0);
    return bh_finish();
}

bool cuda_skip_m(int M, int N, int K) {
    const char *v = getenv("QPORT_TEST_CUDA_SMALL");
    if (!v) return false;
    if (atoi(v) >= 2) return M != 3 && M != 17; /* 2: two row counts (gemv, tiled) */
    if (M != 1 && M != 17 && M != 64) return true; /* 1: gemv, 17 and 64: tiled */
    return (long)N * K > 100000 && M > 17;
}

bool cuda_f_skip_m(int M) {
    const char *v = getenv("QPORT_TEST_CUDA_SMALL");
    if (v && atoi(v) >= 2) return M != 3 && M != 17;
    if (v) return M != 1 && M != 17 && M != 64;
    return false;
}

bool cuda_run_layer(const qp_lin_desc *d, unsigned path, int M, const uint16_t *x, uint16_t *y, char *desc_out) {
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, d, path, &lin);
    if (st == QP_ERR_UNSUPPORTED && !cuda_is_cuda) return false;
    CHECK(st == QP_OK, "prepare %s path %u: %s", d->layer, path, bh_err);
    if (st != QP_OK) return false;
    char what[300];
    snprintf(what, sizeof what, "%s M=%d path %u", d->layer, M, path);
    bool ok = bh_forward(lin, x, M, d->K, d->N, y, what);
    if (desc_out && bh_ops->linear_describe) bh_ops->linear_describe(bh_dev, lin, M, desc_out, 128);
    bh_ops->linear_destroy(bh_dev, lin);
    return ok;
}

void cuda_compare_exact(const char *what, qp_dtype dt, const uint16_t *ref, const uint16_t *got, int M, int N) {
    cuda_exact++;
    bh_case("exact %s", what);
    if (bh_compare_exact(got, ref, M, N, dt, what)) cuda_exact_bad++;
}

/* one float-path case within the bound */
static void f_check(const char *what, qp_dtype dt, const uint16_t *ref, const uint16_t *got, int M, int N, int K,
                    const float *xs, const double *wd, const uint16_t *bias) {
    cuda_f_cases++;
    bh_case("bound %s", what);
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double sum = 0;
            for (int k = 0; k < K; k++) {
                double t = fabs((double)xs[(size_t)m * K + k] * wd[(size_t)n * K + k]);
                if (!isnan(t)) sum += t;
            }
            double r = bh_dec(dt, ref[(size_t)m * N + n]), g = bh_dec(dt, got[(size_t)m * N + n]);
            double b = bias ? fabs((double)bh_dec(dt, bias[n])) : 0.0;
            double tol = (K + 2.0) * ldexp(1.0, -24) * 1.01 * sum + ldexp(1.0, -24) * b +
                         2.0 * bh_ulp(dt, fmax(fabs(r), fabs(g)) + b);
            bool ok = isnan(r) ? isnan(g) : isinf(r) ? r == g : fabs(g - r) <= tol;
            if (!isnan(r) && !isinf(r) && tol > 0 && fabs(g - r) / tol > cuda_f_worst) cuda_f_worst = fabs(g - r) / tol;
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s: y[%d][%d] = %.9g, reference %.9g, bound %.3g\n", what, m, n, g, r, tol);
        }
    CHECK(!bad, "%s: %d outputs outside the bound", what, bad);
}

void cuda_f_run(const qp_lin_desc *d, int MM, const uint16_t *x, const uint16_t *ref, const float *xs,
                const double *wd, bool exact) {
    static const unsigned paths[] = {0, QP_PATH_GEMV, QP_PATH_TILED};
    static const int ms[] = {1, 3, 16, 17, 64};
    int N = d->N, K = d->K;
    uint16_t *y = malloc(2 * (size_t)MM * N);
    for (int mi = 0; mi < 5; mi++) {
        int M = ms[mi];
        if (M > MM || cuda_f_skip_m(M)) continue;
        for (int p = 0; p < 3; p++) {
            char dsc[128] = "", what[300];
            if ((paths[p] & QP_PATH_TILED) &&
                (bh_info.cuda_cc < 75 || (d->act_dtype == QP_DTYPE_BF16 && bh_info.cuda_cc < 80))) {
                void *lin = NULL;
                qp_status st = bh_ops->linear_prepare(bh_dev, d, paths[p], &lin);
                CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "tiled"), "%s: forced tiled below sm_80: %s", d->layer,
                      bh_err);
                if (lin) bh_ops->linear_destroy(bh_dev, lin);
                continue;
            }
            if (!cuda_run_layer(d, paths[p], M, x, y, dsc)) continue;
            snprintf(what, sizeof what, "%s M=%d [%s]", d->layer, M, dsc);
            if (exact) {
                cuda_f_exact++;
                cuda_compare_exact(what, d->act_dtype, ref, y, M, N);
            } else {
                f_check(what, d->act_dtype, ref, y, M, N, K, xs, wd, d->bias);
            }
        }
    }
    free(y);
}
