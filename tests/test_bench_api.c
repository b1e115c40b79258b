/* The benchmark API (api/bench.c): qp_linear_time,
 * qp_buffer_copy, qp_buffer_copy_time, qp_vendor_gemm_time on the cpu
 * backend (host timers) and on the fake GPUs of tests/bench_plugins (one
 * with synthetic timers and vendor GEMMs, one without any optional op):
 * argument checks, QP_ERR_UNSUPPORTED naming the backend, the timed runs
 * computing the layer (rotation included), the copy moving the bytes.
 * Timing values are never asserted beyond being numbers >= 0.
 *   test_bench_api FAKE_TIMED_DIR FAKE_NOTIMER_DIR */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cases.h"
#include "testutil.h"

static qp_context *open_ctx(const char *plugin_dir) {
    setenv("QPORT_BACKEND_PATH", plugin_dir, 1);
    qp_context *ctx = NULL;
    CHECK(!qp_context_create(&ctx), "context");
    return ctx;
}

static qp_linear *layer(qp_context *ctx, qp_device *dev, const char *scheme, int N, int K, case_layer *l) {
    char err[256];
    qp_linear *lin = NULL;
    if (case_layer_make(ctx, case_scheme_find(scheme), N, K, QP_DTYPE_F16, 7, NULL, 0, l, err, sizeof err)) {
        CHECK(0, "%s: %s", scheme, err);
        return NULL;
    }
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.layer = scheme;
    CHECK(!qp_linear_create(dev, &l->scheme, N, K, l->tensors, l->n_tensors, &o, &lin), "%s: %s", scheme,
          qp_last_error(ctx));
    return lin;
}

static int has(qp_context *ctx, const char *s) { return strstr(qp_last_error(ctx), s) != NULL; }

/* The cpu backend: host timers, a copy, no vendor library. */
static void cpu_checks(qp_context *ctx) {
    qp_device *cpu;
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu");
    int N = 64, K = 128, M = 3;
    for (int rot = 0; rot < 2; rot++) {
        case_layer l;
        qp_linear *lin = layer(ctx, cpu, rot ? "mxfp4-rotated" : "int8-dyn-sym", N, K, &l);
        if (!lin) continue;
        qp_buffer *x = NULL, *y = NULL, *small = NULL;
        uint16_t xh[3 * 128], y1[3 * 64], y2[3 * 64];
        case_activations(DIST_UNIFORM, QP_DTYPE_F16, M, K, 3, xh);
        CHECK(!qp_buffer_create(cpu, sizeof xh, &x) && !qp_buffer_create(cpu, sizeof y1, &y) &&
                  !qp_buffer_create(cpu, 16, &small) && !qp_buffer_upload(x, 0, xh, sizeof xh),
              "buffers");
        double t[4] = {-7, -7, -7, -7}, g[4] = {7, 7, 7, 7};
        CHECK(!qp_linear_time(lin, x, M, y, 4, t, g), "%s", qp_last_error(ctx));
        for (int i = 0; i < 4; i++) {
            CHECK(isfinite(t[i]) && t[i] >= 0, "time %d = %g", i, t[i]);
            CHECK(g[i] < 0, "the reference fuses its activation step: gemm_ms %g", g[i]);
        }
        /* the timed runs computed the layer (rotation included) */
        CHECK(!qp_buffer_download(y, 0, y1, sizeof y1) && !qp_linear_forward(lin, xh, M, y2), "%s", qp_last_error(ctx));
        CHECK(!memcmp(y1, y2, sizeof y1), "%s: timed output != forward output", rot ? "rotated" : "int8");
        CHECK(!qp_linear_time(lin, x, M, y, 1, t, NULL), "gemm_ms may be NULL: %s", qp_last_error(ctx));
        /* argument checks */
        CHECK(qp_linear_time(lin, x, 0, y, 1, t, g) == QP_ERR_INVALID_ARGUMENT && has(ctx, "bad row count M = 0"), "M 0");
        CHECK(qp_linear_time(lin, x, M, y, 0, t, g) == QP_ERR_INVALID_ARGUMENT && has(ctx, "reps must be 1..100000"),
              "reps 0: %s", qp_last_error(ctx));
        CHECK(qp_linear_time(lin, x, M, y, 100001, t, g) == QP_ERR_INVALID_ARGUMENT, "reps too many");
        CHECK(qp_linear_time(lin, x, M, small, 1, t, g) == QP_ERR_INVALID_ARGUMENT && has(ctx, "buffers too small"),
              "small y: %s", qp_last_error(ctx));
        CHECK(qp_linear_time(lin, NULL, M, y, 1, t, g) == QP_ERR_INVALID_ARGUMENT, "NULL x");
        CHECK(qp_linear_time(lin, x, M, y, 1, NULL, g) == QP_ERR_INVALID_ARGUMENT, "NULL total_ms");
        CHECK(qp_linear_time(NULL, x, M, y, 1, t, g) == QP_ERR_INVALID_ARGUMENT, "NULL layer");
        qp_buffer_destroy(x);
        qp_buffer_destroy(y);
        qp_buffer_destroy(small);
        qp_linear_destroy(lin);
        case_layer_free(&l);
    }
    /* copies */
    qp_buffer *a = NULL, *b = NULL;
    unsigned char h[4096], o[4096];
    for (int i = 0; i < 4096; i++) h[i] = (unsigned char)(i * 7 + 1);
    CHECK(!qp_buffer_create(cpu, 4096, &a) && !qp_buffer_create(cpu, 2048, &b) && !qp_buffer_upload(a, 0, h, 4096),
          "buffers");
    CHECK(!qp_buffer_copy(a, 100, b, 10, 1000) && !qp_buffer_download(b, 10, o, 1000) && !memcmp(o, h + 100, 1000),
          "copy moved the bytes: %s", qp_last_error(ctx));
    CHECK(!qp_buffer_copy(a, 0, a, 2048, 2048) && !qp_buffer_download(a, 2048, o, 2048) && !memcmp(o, h, 2048),
          "disjoint ranges of one buffer");
    CHECK(qp_buffer_copy(a, 0, a, 100, 200) == QP_ERR_INVALID_ARGUMENT && has(ctx, "overlapping ranges"), "overlap");
    CHECK(qp_buffer_copy(a, 0, b, 1, 2048) == QP_ERR_INVALID_ARGUMENT && has(ctx, "do not fit"), "past the end");
    CHECK(qp_buffer_copy(a, SIZE_MAX, b, 0, 2) == QP_ERR_INVALID_ARGUMENT, "offset overflow");
    CHECK(!qp_buffer_copy(a, 0, b, 0, 0), "zero bytes");
    double ms[3] = {-1, -1, -1};
    CHECK(!qp_buffer_copy_time(a, b, 2048, 3, ms) && ms[0] >= 0 && ms[2] >= 0, "copy time: %s", qp_last_error(ctx));
    CHECK(qp_buffer_copy_time(a, a, 16, 1, ms) == QP_ERR_INVALID_ARGUMENT && has(ctx, "two buffers"), "same buffer");
    CHECK(qp_buffer_copy_time(a, b, 4096, 1, ms) == QP_ERR_INVALID_ARGUMENT, "larger than dst");
    CHECK(qp_buffer_copy_time(a, b, 0, 1, ms) == QP_ERR_INVALID_ARGUMENT, "zero bytes timed");
    CHECK(qp_buffer_copy_time(a, b, 16, 0, ms) == QP_ERR_INVALID_ARGUMENT, "reps 0");
    CHECK(qp_buffer_copy_time(a, b, 16, 1, NULL) == QP_ERR_INVALID_ARGUMENT, "NULL ms");
    /* no vendor library on the cpu */
    char name[64] = "x";
    CHECK(qp_vendor_gemm_time(cpu, QP_DTYPE_F16, 4, 64, 64, 2, ms, name, sizeof name) == QP_ERR_UNSUPPORTED &&
              has(ctx, "the cpu backend has no vendor GEMM"),
          "vendor on cpu: %s", qp_last_error(ctx));
    CHECK(qp_vendor_gemm_time(cpu, QP_DTYPE_BF16, 4, 64, 64, 2, ms, name, sizeof name) == QP_ERR_INVALID_ARGUMENT &&
              has(ctx, "I8, F8_E4M3FN or F16"),
          "vendor dtype: %s", qp_last_error(ctx));
    CHECK(qp_vendor_gemm_time(cpu, QP_DTYPE_I8, 0, 64, 64, 2, ms, name, sizeof name) == QP_ERR_INVALID_ARGUMENT, "M 0");
    CHECK(qp_vendor_gemm_time(cpu, QP_DTYPE_I8, 4, 64, 64, 2, ms, NULL, 8) == QP_ERR_INVALID_ARGUMENT, "NULL name");
    qp_buffer_destroy(a);
    qp_buffer_destroy(b);
}

/* The fake timed GPU: its timers, vendor baselines; buffers of two devices. */
static void fake_timed_checks(qp_context *ctx) {
    qp_device *gpu, *cpu;
    if (qp_device_find(ctx, "cuda:0", &gpu)) { CHECK(0, "fake timed GPU not found: %s", qp_last_error(ctx)); return; }
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu");
    case_layer l;
    qp_linear *lin = layer(ctx, gpu, "int8-dyn-sym", 64, 128, &l);
    qp_buffer *x = NULL, *y = NULL, *xc = NULL;
    CHECK(!qp_buffer_create(gpu, 32 * 128 * 2, &x) && !qp_buffer_create(gpu, 32 * 64 * 2, &y) &&
              !qp_buffer_create(cpu, 32 * 128 * 2, &xc),
          "buffers");
    double t[3], g[3];
    CHECK(lin && !qp_linear_time(lin, x, 32, y, 3, t, g) && t[0] > 0 && g[0] > 0, "fake GPU times (%s)", qp_last_error(ctx));
    CHECK(lin && !qp_linear_time(lin, x, 4, y, 3, t, g) && g[0] < 0, "fused path for small M");
    CHECK(lin && qp_linear_time(lin, xc, 4, y, 1, t, g) == QP_ERR_INVALID_ARGUMENT && has(ctx, "another device"),
          "buffer of another device: %s", qp_last_error(ctx));
    CHECK(qp_buffer_copy(xc, 0, x, 0, 16) == QP_ERR_INVALID_ARGUMENT && has(ctx, "different devices"), "copy across devices");
    CHECK(qp_buffer_copy_time(x, xc, 16, 1, t) == QP_ERR_INVALID_ARGUMENT, "timed copy across devices");
    char name[64];
    double ms[2];
    CHECK(!qp_vendor_gemm_time(gpu, QP_DTYPE_I8, 16, 64, 128, 2, ms, name, sizeof name) &&
              !strcmp(name, "fake BLAS int8 TN") && ms[1] > 0,
          "vendor int8: %s / %s", name, qp_last_error(ctx));
    CHECK(!qp_vendor_gemm_time(gpu, QP_DTYPE_F16, 16, 64, 128, 2, ms, NULL, 0), "vendor without a name buffer");
    CHECK(qp_vendor_gemm_time(gpu, QP_DTYPE_F8_E4M3FN, 16, 64, 128, 2, ms, name, sizeof name) == QP_ERR_UNSUPPORTED &&
              has(ctx, "no fp8 GEMM"),
          "the backend's own refusal passes through: %s", qp_last_error(ctx));
    qp_buffer_destroy(x);
    qp_buffer_destroy(y);
    qp_buffer_destroy(xc);
    qp_linear_destroy(lin);
    case_layer_free(&l);
}

/* A GPU without the optional ops: each call says which backend lacks what. */
static void fake_notimer_checks(qp_context *ctx) {
    qp_device *gpu;
    if (qp_device_find(ctx, "cuda:0", &gpu)) { CHECK(0, "fake GPU not found: %s", qp_last_error(ctx)); return; }
    case_layer l;
    qp_linear *lin = layer(ctx, gpu, "int8-dyn-sym", 64, 128, &l);
    qp_buffer *x = NULL, *y = NULL;
    CHECK(!qp_buffer_create(gpu, 128 * 2, &x) && !qp_buffer_create(gpu, 64 * 2, &y), "buffers");
    double t[1], g[1];
    CHECK(lin && qp_linear_time(lin, x, 1, y, 1, t, g) == QP_ERR_UNSUPPORTED &&
              has(ctx, "the cuda backend has no device timer for linear layers (linear_time)"),
          "linear_time: %s", qp_last_error(ctx));
    CHECK(qp_buffer_copy(x, 0, y, 0, 16) == QP_ERR_UNSUPPORTED && has(ctx, "the cuda backend has no device-to-device copy"),
          "copy: %s", qp_last_error(ctx));
    CHECK(qp_buffer_copy_time(x, y, 16, 1, t) == QP_ERR_UNSUPPORTED && has(ctx, "buffer_copy_time"), "copy time");
    char name[8];
    CHECK(qp_vendor_gemm_time(gpu, QP_DTYPE_F16, 1, 64, 128, 1, t, name, sizeof name) == QP_ERR_UNSUPPORTED &&
              has(ctx, "the cuda backend has no vendor GEMM"),
          "vendor: %s", qp_last_error(ctx));
    qp_buffer_destroy(x);
    qp_buffer_destroy(y);
    qp_linear_destroy(lin);
    case_layer_free(&l);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: test_bench_api FAKE_TIMED_DIR FAKE_NOTIMER_DIR\n"); return 2; }
    qp_context *ctx = open_ctx(argv[1]);
    if (ctx) { cpu_checks(ctx); fake_timed_checks(ctx); qp_context_destroy(ctx); }
    ctx = open_ctx(argv[2]);
    if (ctx) { fake_notimer_checks(ctx); qp_context_destroy(ctx); }
    return tu_finish("bench-api");
}
