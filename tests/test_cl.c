/* OpenCL backend (libqport-cl.so) against the cpu reference (issue 6).
 *
 * The plugin is dlopen'ed from QPORT_BACKEND_PATH and driven through its
 * qp_backend_ops with a qp_host of the test's own, with qp_lin_desc filled
 * here exactly as the core builds it (api/backend.h). Every op runs over a
 * shape matrix (M in 1,2,3,5,8,16,17,64,256; K and N off the tile and
 * vector edges; one 4096x4096 layer) on the GEMV, tiled and automatic paths,
 * fp16 and bf16, with a guard band after every output:
 *   W8A8-INT8 and QQQ W4A8: bit-exact with qp_ref_w8a8_int8_forward /
 *     qp_ref_qqq_forward;
 *   W8A8-FP8: within the fp32-accumulation bound of the reference, and
 *     bit-exact on identity weights (which makes the GEMM exact, so the fp8
 *     activation quantization itself is compared code for code);
 * plus the division modes (native / fp64 / fma) on a subset, and the faults:
 * no loader, no platform (--no-platform, run with OCL_ICD_VENDORS pointing
 * at an empty folder), a kernel compile failure with the driver's build log,
 * an allocation past the device limit, forced paths the device lacks, and
 * corrupt program-cache entries being rebuilt.
 *
 * Seed: QP_TEST_SEED (default 20261202), printed on failure. No device: exit
 * 77 (skip). */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin_host.h"
#include "backend.h"
#include "qport.h"
#include "registry.h"

static int failures;
static unsigned long long seed = 20261202ull, rng;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d (seed %llu): ", __FILE__, __LINE__, seed);                                     \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

/* ---- host table -------------------------------------------------------- */
static char last_error[16384];
static char logbuf[65536];
static int verbose;

static qp_status h_error(const qp_context *ctx, qp_status st, const char *fmt, ...) {
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

static void h_log(const qp_context *ctx, qp_log_level lvl, const char *fmt, ...) {
    (void)ctx;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t n = strlen(logbuf);
    snprintf(logbuf + n, sizeof logbuf - n, "[%d] %s\n", (int)lvl, line);
    if (verbose) fprintf(stderr, "log[%d]: %s\n", (int)lvl, line);
}

static char cache_dir[1024] = "";
static qp_host host = {QP_BACKEND_ABI_VERSION, sizeof(qp_host), NULL, h_error, h_log, cache_dir, "test-0.1.0", 0,
                       tu_host_setting};

static const qp_backend_ops *ops;
static void *state;
static void *dev;

static const qp_backend_ops *load_plugin(void) {
    const char *path = getenv("QPORT_BACKEND_PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : ".");
    for (char *tok = strtok(buf, ":"); tok; tok = strtok(NULL, ":")) {
        char file[4200];
        snprintf(file, sizeof file, "%s/libqport-cl.so", tok);
        void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        qp_backend_entry_fn fn;
        *(void **)&fn = dlsym(h, QP_BACKEND_ENTRY_SYMBOL);
        if (fn) return fn();
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- data helpers ------------------------------------------------------ */
static unsigned long long next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float frand(void) { return (float)((next() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }
static int irand(int lo, int hi) { return lo + (int)(next() % (unsigned long long)(hi - lo + 1)); }
static uint16_t enc(qp_dtype dt, float v) { return (uint16_t)qp_format_encode(dt, v); }
static float dec(qp_dtype dt, uint16_t b) { return qp_format_decode(dt, b); }

/* activations: rows with different magnitudes, a zero row at m == 3;
 * `special`: a NaN in row 2 and a constant row 6 (reductions that skip NaN,
 * NaN -> 0 / +448 conversions, errata 11.2's s = 0 row) */
static int special;
static void make_x(uint16_t *x, int M, int K, qp_dtype dt) {
    for (int m = 0; m < M; m++) {
        float mag = (m == 3) ? 0.0f : 0.05f + 4.0f * (float)((m * 7) % 11) / 11.0f;
        float off = (m % 4 == 1) ? 0.5f * mag : 0.0f; /* asymmetric rows */
        for (int k = 0; k < K; k++) x[(size_t)m * K + k] = enc(dt, frand() * mag + off);
        if (special && m == 2) x[(size_t)m * K + K / 2] = 0x7FFF; /* NaN in fp16 and bf16 */
        if (special && m == 6)
            for (int k = 0; k < K; k++) x[(size_t)m * K + k] = enc(dt, 1.5f);
    }
}

static void *dalloc(size_t bytes) {
    void *b = NULL;
    qp_status st = ops->buffer_alloc(dev, bytes, &b);
    CHECK(st == QP_OK, "buffer_alloc(%zu): %s", bytes, last_error);
    return st == QP_OK ? b : NULL;
}

#define GUARD 256
/* Runs lin on x [M][K] (16-bit) -> y [M][N] through device buffers with a
 * guard band after y; returns 0 on failure. */
static int run(void *lin, const uint16_t *x, int M, int K, int N, uint16_t *y, const char *what) {
    size_t xb = (size_t)M * K * 2 + 2, yb = (size_t)M * N * 2;
    void *dx = dalloc(xb), *dy = dalloc(yb + GUARD);
    int ok = 0;
    unsigned char *tmp = malloc(yb + GUARD);
    if (!dx || !dy || !tmp) goto out;
    memset(tmp, 0xA5, yb + GUARD);
    if (ops->buffer_upload(dev, dy, 0, tmp, yb + GUARD) != QP_OK || ops->buffer_upload(dev, dx, 0, x, xb - 2) != QP_OK) {
        CHECK(0, "%s: upload: %s", what, last_error);
        goto out;
    }
    qp_status st = ops->linear_forward(dev, lin, dx, M, dy);
    CHECK(st == QP_OK, "%s: forward M=%d: %s", what, M, last_error);
    if (st != QP_OK) goto out;
    if (ops->buffer_download(dev, dy, 0, tmp, yb + GUARD) != QP_OK) {
        CHECK(0, "%s: download: %s", what, last_error);
        goto out;
    }
    int guard_bad = 0;
    for (size_t i = yb; i < yb + GUARD; i++) guard_bad += tmp[i] != 0xA5;
    CHECK(!guard_bad, "%s M=%d: %d guard bytes after y overwritten", what, M, guard_bad);
    memcpy(y, tmp, yb);
    ok = !guard_bad;
out:
    free(tmp);
    if (dx) ops->buffer_free(dev, dx);
    if (dy) ops->buffer_free(dev, dy);
    return ok;
}

static int compare_exact(const uint16_t *got, const uint16_t *want, int M, int N, const char *what, int Mrow) {
    int bad = 0;
    for (int i = 0; i < M * N; i++)
        if (got[i] != want[i]) {
            if (bad < 3)
                fprintf(stderr, "  %s M=%d: y[%d][%d] = 0x%04x, reference 0x%04x\n", what, Mrow, i / N, i % N, got[i],
                        want[i]);
            bad++;
        }
    CHECK(!bad, "%s M=%d: %d of %d outputs differ from the reference", what, Mrow, bad, M * N);
    return bad;
}

static const int Ms[] = {1, 2, 3, 5, 8, 16, 17, 64, 256};
#define NM (int)(sizeof Ms / sizeof Ms[0])
static const unsigned paths[] = {QP_PATH_AUTO, QP_PATH_GEMV, QP_PATH_TILED};
static const char *path_name[] = {"auto", "gemv", "tiled"};
static long n_cases, n_outputs;

/* ---- W8A8-INT8 ---------------------------------------------------------- */
static void test_int8(qp_dtype dt, int is_static, int sym, int per_channel, int has_bias, int N, int K, const int *ms,
                      int nms, unsigned extra_path) {
    special = 1;
    size_t nk = (size_t)N * K;
    int8_t *w = malloc(nk);
    float *ws = malloc(sizeof(float) * N);
    int32_t *adj = malloc(sizeof(int32_t) * N);
    uint16_t *bias = malloc(2 * (size_t)N);
    for (size_t i = 0; i < nk; i++) w[i] = (int8_t)irand(-128, 127);
    float ws0 = 0.002f + 0.001f * fabsf(frand());
    for (int n = 0; n < N; n++) ws[n] = per_channel ? 0.001f + 0.01f * fabsf(frand()) : ws0;
    for (int n = 0; n < N; n++) bias[n] = enc(dt, frand() * 2.0f);
    float in_scale = 0.011f + 0.02f * fabsf(frand());
    int32_t in_zp = is_static && !sym ? irand(-20, 20) : 0;
    for (int n = 0; n < N; n++) {
        int64_t s = 0;
        for (int k = 0; k < K; k++) s += w[(size_t)n * K + k];
        adj[n] = (int32_t)s;
        if (is_static) adj[n] = (int32_t)((uint32_t)adj[n] * (uint32_t)in_zp);
    }
    char what[160];
    snprintf(what, sizeof what, "int8 %s %s %s%s%s N=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             is_static ? "static" : "dynamic", sym ? "sym" : "asym", per_channel ? " per-channel" : " per-tensor",
             has_bias ? " bias" : "", N, K);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_INT8;
    d.act_dtype = dt;
    d.N = N;
    d.K = K;
    d.layer = "test.int8";
    d.act = is_static ? QP_ACT_INT8_STATIC : QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = sym;
    d.input_scale = in_scale;
    d.input_zp = in_zp;
    d.bias = has_bias ? bias : NULL;
    d.w_i8 = w;
    d.w_scale = ws;
    d.w_per_channel = per_channel;
    d.azp_adj = sym ? NULL : adj;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        qp_status st = ops->linear_prepare(dev, &d, paths[p] | extra_path, &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, path_name[p], last_error);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        make_x(x, M, K, dt);
        qp_ref_int8_args a = {dt, x, M, K, N, w, ws, per_channel, is_static, sym, in_scale, in_zp,
                              has_bias ? bias : NULL};
        qp_status st = qp_ref_w8a8_int8_forward(NULL, &a, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[200];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p]);
            if (run(lins[p], x, M, K, N, y, w2)) compare_exact(y, yr, M, N, w2, M);
            n_cases++;
            n_outputs += (long)M * N;
        }
        free(x); free(yr); free(y);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    free(w); free(ws); free(adj); free(bias);
}

/* ---- W8A8-FP8 ----------------------------------------------------------- */
static double ulp_of(qp_dtype dt, double v) {
    int e;
    frexp(fabs(v) + 1e-30, &e);
    int mb = dt == QP_DTYPE_BF16 ? 8 : 11;
    int emin = dt == QP_DTYPE_BF16 ? -125 : -13;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mb);
}

static void test_fp8(qp_dtype dt, int act, int per_channel, int has_bias, int identity, int N, int K, const int *ms,
                     int nms) {
    if (identity) N = K;
    special = identity; /* NaN rows only where outputs are compared bit for bit */
    size_t nk = (size_t)N * K;
    uint8_t *w = malloc(nk);
    float *ws = malloc(sizeof(float) * N), *wv = malloc(sizeof(float) * nk);
    uint16_t *bias = malloc(2 * (size_t)N);
    for (size_t i = 0; i < nk; i++) {
        uint8_t c;
        if (identity) c = (i / K == i % K) ? 0x38 : 0x00; /* 1.0 on the diagonal */
        else do c = (uint8_t)irand(0, 255); while ((c & 0x7F) == 0x7F);
        w[i] = c;
        wv[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, c);
    }
    float ws0 = identity ? 1.0f : 0.001f + 0.002f * fabsf(frand());
    for (int n = 0; n < N; n++) ws[n] = per_channel && !identity ? 0.0005f + 0.003f * fabsf(frand()) : ws0;
    for (int n = 0; n < N; n++) bias[n] = enc(dt, frand() * 2.0f);
    float in_scale = 0.01f + 0.01f * fabsf(frand());
    static const char *an[] = {"static", "dyn-tensor", "dyn-token"};
    char what[160];
    snprintf(what, sizeof what, "fp8 %s %s%s%s%s N=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", an[act],
             per_channel ? " per-channel" : " per-tensor", has_bias ? " bias" : "", identity ? " identity" : "", N, K);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_FP8;
    d.act_dtype = dt;
    d.N = N;
    d.K = K;
    d.layer = "test.fp8";
    d.act = act == 0 ? QP_ACT_FP8_STATIC : act == 1 ? QP_ACT_FP8_DYNAMIC_TENSOR : QP_ACT_FP8_DYNAMIC_TOKEN;
    d.input_scale = in_scale;
    d.bias = has_bias ? bias : NULL;
    d.w_u8 = w;
    d.w_scale = ws;
    d.w_per_channel = per_channel;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        qp_status st = ops->linear_prepare(dev, &d, paths[p], &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, path_name[p], last_error);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        make_x(x, M, K, dt);
        qp_ref_fp8_args a = {dt, x, M, K, N, w, ws, per_channel, (qp_fp8_act)act, in_scale, 0, has_bias ? bias : NULL};
        qp_status st = qp_ref_w8a8_fp8_forward(NULL, &a, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        /* bound: |sum fp32 - sum exact| <= K * 2^-24 * sum |x_q w| (each
         * partial sum rounds once; products are exact), scaled, plus one
         * output ulp either side of the rounding */
        float *xd = malloc(sizeof(float) * (size_t)M * K);
        for (int i = 0; i < M * K; i++) xd[i] = dec(dt, x[i]);
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[200];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p]);
            if (!run(lins[p], x, M, K, N, y, w2)) continue;
            n_cases++;
            n_outputs += (long)M * N;
            if (identity) { compare_exact(y, yr, M, N, w2, M); continue; }
            int bad = 0;
            for (int m = 0; m < M; m++) {
                /* |x_q| <= 448 and |x_q * s_a| <= |x| + half a code step: bound
                 * sum|x_q w| * s_a by sum (|x| * 1.07 + s_a*2^-9) |w| */
                double amax = 0;
                for (int k = 0; k < K; k++) amax = fmax(amax, fabs(xd[(size_t)m * K + k]));
                for (int n = 0; n < N; n++) {
                    double sabs = 0;
                    for (int k = 0; k < K; k++)
                        sabs += (fabs(xd[(size_t)m * K + k]) * 1.07 + amax / 448.0 * 0.01 + 1e-3) * fabs(wv[(size_t)n * K + k]);
                    double r = dec(dt, yr[(size_t)m * N + n]), g = dec(dt, y[(size_t)m * N + n]);
                    double acc_err = (double)K * ldexp(1.0, -23) * sabs * ws[n] * (act == 0 ? 1.0 : 1.0);
                    double tol = acc_err + 2.0 * ulp_of(dt, fabs(r) + acc_err);
                    if (!(fabs(g - r) <= tol)) {
                        if (bad < 3)
                            fprintf(stderr, "  %s M=%d: y[%d][%d] = %g, reference %g, bound %g\n", w2, M, m, n, g, r, tol);
                        bad++;
                    }
                }
            }
            CHECK(!bad, "%s M=%d: %d outputs outside the bound", w2, M, bad);
        }
        free(xd); free(x); free(yr); free(y);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    free(w); free(ws); free(wv); free(bias);
}

/* ---- QQQ W4A8 ----------------------------------------------------------- */
static void test_qqq(int group, int has_bias, int N, int K, const int *ms, int nms, unsigned extra_path) {
    special = 1;
    size_t kn = (size_t)K * N;
    float *wf = malloc(sizeof(float) * kn), *sc = malloc(sizeof(float) * N), *scp = malloc(sizeof(float) * N);
    int8_t *q = malloc(kn), *q4 = malloc(kn), *w8 = malloc(kn);
    size_t ng = (size_t)(K / 128 + 1) * N;
    uint16_t *sg = malloc(2 * ng), *sgp = malloc(2 * ng), *bias = malloc(2 * (size_t)N);
    int32_t *B = malloc(sizeof(int32_t) * (size_t)(K / 16) * 2 * N);
    for (size_t i = 0; i < kn; i++) wf[i] = frand() * 0.05f * (float)(1 + (i % 5));
    for (int n = 0; n < N; n++) bias[n] = enc(QP_DTYPE_F16, frand());
    qp_status st = qp_qqq_quantize_weight(NULL, wf, K, N, group, q, sc, sg);
    if (group == 128) /* large group scales in some columns: the wrap of spec 5.5 step 2 / errata 11.7 */
        for (int g = 0; g < K / 128; g++)
            for (int n = 0; n < N; n += 5) sg[(size_t)g * N + n] = enc(QP_DTYPE_F16, 16.0f + 0.25f * (float)(n % 11));
    if (st == QP_OK) st = qp_qqq_pack_weight(NULL, q, K, N, group, B);
    if (st == QP_OK)
        st = qp_qqq_permute_scales(NULL, sc, group == 128 ? sg : NULL, K, N, group, scp, group == 128 ? sgp : NULL);
    CHECK(st == QP_OK, "qqq: quantize/pack failed");
    int wraps = 0;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = q[(size_t)k * N + n];
            q4[(size_t)n * K + k] = (int8_t)c;
            int8_t v = group == 128 ? qp_ref_qqq_group_weight(c - 8, sg[(size_t)(k / 128) * N + n]) : (int8_t)(16 * c);
            if (group == 128) {
                double exact = (c - 8) * (double)dec(QP_DTYPE_F16, sg[(size_t)(k / 128) * N + n]);
                wraps += fabs(exact) > 127.5;
            }
            w8[(size_t)n * K + k] = v;
        }
    CHECK(group != 128 || wraps > 0, "qqq: the test data has no wrapping weights");
    char what[160];
    snprintf(what, sizeof what, "qqq g%d%s N=%d K=%d", group, has_bias ? " bias" : "", N, K);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_QQQ_W4A8;
    d.act_dtype = QP_DTYPE_F16;
    d.N = N;
    d.K = K;
    d.layer = "test.qqq";
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = 1;
    d.bias = has_bias ? bias : NULL;
    d.group_size = group;
    d.q4 = q4;
    d.w8 = w8;
    d.s_channel = sc;
    d.s_group = group == 128 ? sg : NULL;
    d.marlin_B = B;
    d.marlin_s_channel = scp;
    d.marlin_s_group = group == 128 ? sgp : NULL;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        st = ops->linear_prepare(dev, &d, paths[p] | extra_path, &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, path_name[p], last_error);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        make_x(x, M, K, QP_DTYPE_F16);
        st = qp_ref_qqq_forward(NULL, x, M, K, N, group, B, scp, group == 128 ? sgp : NULL, has_bias ? bias : NULL, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[200];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p]);
            if (run(lins[p], x, M, K, N, y, w2)) compare_exact(y, yr, M, N, w2, M);
            n_cases++;
            n_outputs += (long)M * N;
        }
        free(x); free(yr); free(y);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    free(wf); free(sc); free(scp); free(q); free(q4); free(w8); free(sg); free(sgp); free(bias); free(B);
}

static void time_forward(const qp_lin_desc *d, unsigned path, int M, const char *what);

/* ---- float-path bound (tools/cases.c derives it) -------------------------
 * |y - ref| <= c u sum_k T_k |w_k| + 2 ulp(ref); T_k = |x_k| for W4A16, the
 * bound on the dequantized fp8 activation for fp8 per-block. A NaN in the
 * reference must be a NaN on the device. */
static int check_bound(const uint16_t *y, const uint16_t *yr, const double *tsum, double c, int M, int N, qp_dtype dt,
                       const char *what) {
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double r = dec(dt, yr[(size_t)m * N + n]), g = dec(dt, y[(size_t)m * N + n]);
            double tol = c * ldexp(1.0, -24) * 1.01 * tsum[(size_t)m * N + n] + 2.0 * ulp_of(dt, fabs(r));
            int ok = isnan(r) ? isnan(g) : fabs(g - r) <= tol;
            if (!ok) {
                if (bad < 3) fprintf(stderr, "  %s M=%d: y[%d][%d] = %g, reference %g, bound %g\n", what, M, m, n, g, r, tol);
                bad++;
            }
        }
    CHECK(!bad, "%s M=%d: %d outputs outside the bound", what, M, bad);
    return bad;
}

/* ---- W4A16 (spec 6.7) ------------------------------------------------------
 * Quark checkpoint tensors made here: random codes packed with
 * qp_pack_int4_quark (order / reorder), act-dtype scales [K/g][N] (or the
 * padded [K/g][8*ceil(N/8)] when `padded`), uint4 zero points. */
static void test_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, int has_bias, int padded, int N, int K,
                       const int *ms, int nms) {
    special = 1;
    int g = group > 0 ? group : K, G = K / g, nc = (N + 7) / 8;
    uint8_t *codes = malloc((size_t)K * N), *zc = malloc((size_t)G * N);
    int32_t *W = calloc((size_t)K * nc, 4), *Z = calloc((size_t)G * nc, 4);
    uint16_t *sc = calloc((size_t)G * 8 * nc, 2), *bias = malloc(2 * (size_t)N);
    float *wd = malloc(sizeof(float) * (size_t)K * N);
    for (size_t i = 0; i < (size_t)K * N; i++) codes[i] = (uint8_t)irand(0, 15);
    for (size_t i = 0; i < (size_t)G * N; i++) zc[i] = (uint8_t)irand(0, 15);
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) /* a few negative and tiny scales too */
            sc[(size_t)gi * 8 * nc + n] = enc(dt, (n % 13 == 5 ? -1.0f : 1.0f) * (n % 17 == 3 ? 1e-6f : 0.002f + 0.02f * fabsf(frand())));
    for (int n = 0; n < N; n++) bias[n] = enc(dt, frand() * 2.0f);
    qp_status st = qp_pack_int4_quark(codes, K, N, pack, W);
    if (st == QP_OK && !sym) st = qp_pack_int4_quark(zc, G, N, pack, Z);
    CHECK(st == QP_OK, "w4a16: pack failed");
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = codes[(size_t)k * N + n], v = sym ? c - 16 * (c >= 8) : c - zc[(size_t)(k / g) * N + n];
            wd[(size_t)n * K + k] = (float)v * dec(dt, sc[(size_t)(k / g) * 8 * nc + n]);
        }
    /* the canonical fields the core binds (api/linear_desc.c) */
    uint8_t *q4 = malloc((size_t)N * K);
    float *w4s = malloc(sizeof(float) * (size_t)G * N);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) q4[(size_t)n * K + k] = codes[(size_t)k * N + n];
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) w4s[(size_t)gi * N + n] = dec(dt, sc[(size_t)gi * 8 * nc + n]);
    char what[200];
    snprintf(what, sizeof what, "w4a16 %s %s %s g%d%s%s N=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             sym ? "int4" : "uint4", pack == QP_PACK_ORDER ? "order" : "reorder", group, has_bias ? " bias" : "",
             padded ? " (padded)" : "", N, K);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W4A16_INT4;
    d.scheme.weight.group_size = group;
    d.scheme.weight.symmetric = sym;
    d.scheme.pack_method = pack;
    d.act_dtype = dt;
    d.N = N;
    d.K = K;
    d.layer = "test.w4a16";
    d.bias = has_bias ? bias : NULL;
    d.group_size = group;
    d.q4 = (const int8_t *)q4;
    d.w4_signed = sym;
    d.w4_zero = sym ? NULL : zc;
    d.w4_scale = w4s;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        st = ops->linear_prepare(dev, &d, paths[p], &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, path_name[p], last_error);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        double *ts = calloc((size_t)M * N, sizeof(double));
        make_x(x, M, K, dt);
        qp_ref_w4a16_args a = {dt, x, M, K, N, W, sym ? NULL : Z, sc, group, sym, pack, has_bias ? bias : NULL};
        st = qp_ref_w4a16_forward(NULL, &a, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++) {
                    double xv = fabs((double)dec(dt, x[(size_t)m * K + k]));
                    if (!isnan(xv)) ts[(size_t)m * N + n] += xv * fabs((double)wd[(size_t)n * K + k]);
                }
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[240];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p]);
            if (run(lins[p], x, M, K, N, y, w2)) check_bound(y, yr, ts, K + 2.0, M, N, dt, w2);
            n_cases++;
            n_outputs += (long)M * N;
        }
        free(x); free(yr); free(y); free(ts);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    if (N >= 4096) { /* timings of the large layer, for the log */
        time_forward(&d, 0, 1, "w4a16");
        time_forward(&d, 0, 16, "w4a16");
        time_forward(&d, 0, 64, "w4a16");
    }
    free(codes); free(zc); free(W); free(Z); free(sc); free(bias); free(wd); free(q4); free(w4s);
}

/* ---- W8A8-FP8 per-block (spec 6.6) -----------------------------------------
 * Random e4m3 weights with fp32 scales per 128x128 block (power-of-two ones
 * when `ue8m0`, as e8m0 checkpoints decode), per-token-group-128 activations
 * (ue8m0: power-of-two activation scales and x * (1/s)). `identity`: N = K,
 * unit weights and scales, no bias: y = q * s_x exactly, so the activation
 * quantizer's codes and scales are compared bit for bit. */
static void test_fp8_block(qp_dtype dt, int ue8m0, int has_bias, int identity, int N, int K, const int *ms, int nms) {
    if (identity) { N = K; has_bias = 0; }
    special = 1;
    int kb = K / 128, nbr = (N + 127) / 128;
    size_t nk = (size_t)N * K;
    uint8_t *w = malloc(nk);
    float *ws = malloc(sizeof(float) * (size_t)nbr * kb);
    uint16_t *bias = malloc(2 * (size_t)N);
    for (size_t i = 0; i < nk; i++) {
        uint8_t c;
        if (identity) c = (i / K == i % K) ? 0x38 : 0x00;
        else do c = (uint8_t)irand(0, 255); while ((c & 0x7F) == 0x7F);
        w[i] = c;
    }
    for (int i = 0; i < nbr * kb; i++)
        ws[i] = identity ? 1.0f : ue8m0 ? ldexpf(1.0f, irand(-12, -6)) : 0.0005f + 0.003f * fabsf(frand());
    for (int n = 0; n < N; n++) bias[n] = enc(dt, frand() * 2.0f);
    char what[200];
    snprintf(what, sizeof what, "fp8-block %s%s%s%s N=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             ue8m0 ? " ue8m0" : "", has_bias ? " bias" : "", identity ? " identity" : "", N, K);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    d.act_dtype = dt;
    d.N = N;
    d.K = K;
    d.layer = "test.fp8block";
    d.act = QP_ACT_FP8_GROUP128;
    d.ue8m0 = ue8m0;
    d.bias = has_bias ? bias : NULL;
    d.w_u8 = w;
    d.w_scale = ws;
    d.w_per_channel = 1;
    void *lins[3] = {0};
    for (int p = 0; p < 3; p++) {
        qp_status st = ops->linear_prepare(dev, &d, paths[p], &lins[p]);
        CHECK(st == QP_OK, "%s: prepare %s: %s", what, path_name[p], last_error);
    }
    for (int mi = 0; mi < nms; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        double *ts = calloc((size_t)M * N, sizeof(double));
        make_x(x, M, K, dt);
        qp_ref_fp8_args a = {dt, x, M, K, N, w, ws, 1, QP_FP8_ACT_GROUP128, 0.0f, ue8m0, has_bias ? bias : NULL};
        qp_status st = qp_ref_w8a8_fp8_forward(NULL, &a, yr);
        CHECK(st == QP_OK, "%s: reference failed", what);
        for (int m = 0; m < M && !identity; m++)
            for (int g0 = 0; g0 < K; g0 += 128) {
                double amax = 0;
                for (int k = g0; k < g0 + 128; k++) {
                    double v = fabs((double)dec(dt, x[(size_t)m * K + k]));
                    if (v > amax) amax = v;
                }
                double sg = 2.0 * fmax(1e-10, amax) / 448.0;
                for (int k = g0; k < g0 + 128; k++) {
                    double v = fabs((double)dec(dt, x[(size_t)m * K + k]));
                    double tk = (isnan(v) ? 448.0 * sg : v * 1.0625) + ldexp(sg, -10);
                    for (int n = 0; n < N; n++)
                        ts[(size_t)m * N + n] += tk * fabs((double)qp_format_decode(QP_DTYPE_F8_E4M3FN, w[(size_t)n * K + k]) *
                                                           ws[(size_t)(n / 128) * kb + g0 / 128]);
                }
            }
        for (int p = 0; p < 3 && st == QP_OK; p++) {
            if (!lins[p]) continue;
            char w2[240];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p]);
            if (run(lins[p], x, M, K, N, y, w2)) {
                if (identity) compare_exact(y, yr, M, N, w2, M);
                else check_bound(y, yr, ts, 132.0 + K / 128.0, M, N, dt, w2);
            }
            n_cases++;
            n_outputs += (long)M * N;
        }
        free(x); free(yr); free(y); free(ts);
    }
    for (int p = 0; p < 3; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    if (N >= 4096) {
        time_forward(&d, 0, 1, "fp8-block");
        time_forward(&d, 0, 16, "fp8-block");
        time_forward(&d, 0, 64, "fp8-block");
    }
    free(w); free(ws); free(bias);
}

/* ---- OCP-MX / W4A8-MXFP4-FP8 / NVFP4 / unquantized (issue 9) ---------------
 * Layers built from checkpoint tensors by the core's own binder
 * (qp_lin_desc_build), so the canonical fields are exactly the core's.
 * `sel`: "selection" weights -- one weight 1.0 (block multiplier 1) per
 * output row at k = n % K, zero elsewhere -- so y[m][n] = x'[m][n % K] (+
 * bias) exactly: the activation qdq is compared bit for bit with the
 * reference. Otherwise random codes and scales, judged within
 * K 2^-24 sum_k |x'_k||W_k| + 2 ulp (+ 1 ulp of the pre-bias sum for NVFP4's
 * rounded-then-biased output). */
typedef enum { FW_MX, FW_W4A8, FW_NVFP4, FW_UNQ } fw_kind;

/* rows of x for the block-float cases: m % 8 picks a pattern (`stress`:
 * NaN, huge and inf rows) */
static void make_x_fw(uint16_t *x, int M, int K, qp_dtype dt, int stress) {
    int bf = dt == QP_DTYPE_BF16;
    for (int m = 0; m < M; m++) {
        uint16_t *r = x + (size_t)m * K;
        int pat = m % 8;
        if (!stress && (pat == 2 || pat == 5 || pat == 7)) pat = 0;
        for (int k = 0; k < K; k++) {
            float v = frand() * (0.05f + 4.0f * (float)((m * 7) % 11) / 11.0f);
            if (pat == 1) v = frand() * ldexpf(1.0f, (k / 32) % 16 - 8);   /* blocks of mixed magnitudes */
            if (pat == 3) v = 0.0f;                                         /* a zero row */
            if (pat == 4) v = frand() * (bf ? 0x1p-128f : 0x1p-18f);       /* subnormal territory */
            if (pat == 6) v = 1.5f;
            if (pat == 5 && k / 16 == 1) v = (k % 2 ? -1.0f : 1.0f) * (bf ? 3.0e38f : 65504.0f); /* huge block */
            r[k] = enc(dt, v);
        }
        if (pat == 2) r[K > 40 ? 40 : K - 1] = 0x7FFF;         /* NaN */
        if (pat == 7) r[K > 3 ? 3 : 0] = bf ? 0x7F80 : 0x7C00;  /* +inf */
    }
}

/* x' as the reference computes it (cpu/ref_*.c), for the bound */
static void host_xq(fw_kind kind, qp_dtype ae, const qp_lin_desc *d, const uint16_t *x, int M, int K, float *xq) {
    qp_dtype dt = d->act_dtype;
    float *xr = malloc(sizeof(float) * (size_t)K);
    uint8_t *codes = malloc((size_t)K), *sc = malloc((size_t)K / 16 + 1);
    for (int m = 0; m < M; m++) {
        float *o = xq + (size_t)m * K;
        for (int k = 0; k < K; k++) xr[k] = dec(dt, x[(size_t)m * K + k]);
        if (kind == FW_MX && ae != QP_DTYPE_NONE) {
            qp_quant_mx(NULL, ae, xr, 1, (size_t)K, codes, sc);
            qp_dequant_mx(NULL, ae, codes, sc, 1, (size_t)K, o);
            for (int k = 0; k < K; k++) o[k] = dec(dt, enc(dt, o[k]));
        } else if (kind == FW_W4A8) {
            for (int k = 0; k < K; k++) {
                float t = fmaxf(-448.0f, fminf(dec(dt, enc(dt, xr[k] / d->input_scale)), 448.0f));
                float q = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, t));
                o[k] = dec(dt, enc(dt, dec(dt, enc(dt, q)) * d->input_scale));
            }
        } else if (kind == FW_NVFP4) {
            float g = 1.0f / d->input_global_scale;
            qp_quant_nvfp4(NULL, xr, 1, (size_t)K, g, codes, sc);
            for (int k = 0; k < K; k++) {
                float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, sc[k / 16]) / g;
                o[k] = dec(dt, enc(dt, qp_format_decode(QP_DTYPE_F4_E2M1, codes[k]) * s));
            }
        } else {
            memcpy(o, xr, sizeof(float) * (size_t)K);
        }
    }
    free(xr); free(codes); free(sc);
}

static double fw_weight(const qp_lin_desc *d, int n, int k) {
    size_t i = (size_t)n * d->K + k;
    if (d->kind == QP_SCHEME_UNQUANTIZED) return dec(d->act_dtype, d->w_act[i]);
    return dec(d->act_dtype, enc(d->act_dtype, d->w_lut[d->w_codes[i]] * d->w_blk_scale[(size_t)n * (d->K / d->w_blk) + k / d->w_blk]));
}

static long n_fw_exact;

static void test_fw(fw_kind kind, qp_dtype dt, qp_dtype we, qp_ocp_mx_act act, int sel, int has_bias, int stress, int N,
                    int K, const int *ms, int nms) {
    static const qp_dtype aes[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3, QP_DTYPE_F8_E4M3FN};
    if (kind != FW_MX) act = QP_OCP_MX_ACT_NONE;
    if (kind == FW_W4A8 || kind == FW_NVFP4) we = QP_DTYPE_F4_E2M1;
    qp_dtype ae = aes[act];
    int blk = kind == FW_NVFP4 ? 16 : 32, nb = K / blk;
    size_t nk = (size_t)N * K;
    /* checkpoint tensors */
    uint8_t *codes = calloc(nk, 1), *packed = calloc(nk, 1), *bsc = malloc((size_t)N * nb);
    uint16_t *wact = malloc(2 * nk), *bias = malloc(2 * (size_t)N);
    float one_code = 0;
    if (kind != FW_UNQ) one_code = (float)qp_format_encode(we, 1.0f);
    int bits = kind == FW_UNQ ? 16 : qp_format_bits(we);
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            if (sel) {
                codes[i] = k == n % K ? (uint8_t)one_code : 0;
                wact[i] = enc(dt, k == n % K ? 1.0f : 0.0f);
            } else {
                unsigned c = (unsigned)irand(0, (1 << (bits > 8 ? 8 : bits)) - 1);
                if (we == QP_DTYPE_F8_E4M3FN && (c & 0x7F) == 0x7F) c = 0x38; /* no NaN weights */
                codes[i] = (uint8_t)c;
                wact[i] = enc(dt, frand() * 0.5f);
            }
        }
        for (int j = 0; j < nb; j++) {
            if (kind == FW_NVFP4) /* e4m3 block scales; selection: 1.0 */
                bsc[(size_t)n * nb + j] = sel ? 0x38 : (uint8_t)irand(0x20, 0x50);
            else /* e8m0: 2^0 for selection, else 2^-6 .. 2^3, a few far ones (fp16 saturation / flush) */
                bsc[(size_t)n * nb + j] = sel ? 127 : (n % 11 == 4 && j < 2) ? (uint8_t)(j ? 100 : 150)
                                                                               : (uint8_t)irand(121, 130);
        }
        bias[n] = enc(dt, frand() * 2.0f);
    }
    if (kind != FW_UNQ) {
        for (int n = 0; n < N; n++) {
            if (we == QP_DTYPE_F4_E2M1) qp_pack_fp4(codes + (size_t)n * K, (size_t)K, packed + (size_t)n * (K / 2));
            else if (we == QP_DTYPE_F8_E4M3FN) memcpy(packed + (size_t)n * K, codes + (size_t)n * K, (size_t)K);
            else qp_pack_fp6(codes + (size_t)n * K, (size_t)K, packed + (size_t)n * (K * 3 / 4));
        }
    }
    int64_t wcols = we == QP_DTYPE_F4_E2M1 ? K / 2 : we == QP_DTYPE_F8_E4M3FN ? K : K * 3 / 4;
    float in_scale = sel ? 0.0625f : 0.013f, igs = sel ? 2.0f : 37.5f, ws2 = sel ? 1.0f : 0.75f;
    qp_tensor t[6];
    int nt = 0;
    qp_scheme sch = {0};
    if (kind == FW_UNQ) {
        sch.kind = QP_SCHEME_UNQUANTIZED;
        t[nt++] = (qp_tensor){"weight", dt, 2, {N, K}, wact};
    } else {
        sch.kind = kind == FW_MX ? QP_SCHEME_OCP_MX : kind == FW_W4A8 ? QP_SCHEME_W4A8_MXFP4_FP8 : QP_SCHEME_NVFP4;
        sch.weight.dtype = we;
        sch.activation.dtype = ae;
        if (ae == QP_DTYPE_F8_E4M3FN) { sch.activation.granularity = QP_GRAN_GROUP; sch.activation.group_size = 32; sch.activation.dynamic = 1; }
        t[nt++] = (qp_tensor){"weight", we == QP_DTYPE_F8_E4M3FN ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8, 2, {N, wcols}, packed};
        t[nt++] = (qp_tensor){"weight_scale", kind == FW_NVFP4 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8, 2, {N, nb}, bsc};
        if (kind == FW_W4A8) t[nt++] = (qp_tensor){"input_scale", QP_DTYPE_F32, 0, {0}, &in_scale};
        if (kind == FW_NVFP4) {
            t[nt++] = (qp_tensor){"weight_scale_2", QP_DTYPE_F32, 0, {0}, &ws2};
            t[nt++] = (qp_tensor){"input_scale_2", QP_DTYPE_F32, 0, {0}, &igs};
        }
    }
    if (has_bias) t[nt++] = (qp_tensor){"bias", dt, 1, {N}, bias};
    char what[200];
    static const char *kn[] = {"ocp-mx", "w4a8-mxfp4", "nvfp4", "unquantized"};
    snprintf(what, sizeof what, "%s %s w=%s a=%s%s%s%s N=%d K=%d", kn[kind], dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             kind == FW_UNQ ? "-" : qp_dtype_name(we), kind == FW_W4A8 ? "fp8-static" : kind == FW_NVFP4 ? "nvfp4" : ae == QP_DTYPE_NONE ? "none" : qp_dtype_name(ae),
             sel ? " selection" : "", has_bias ? " bias" : "", stress ? " stress" : "", N, K);
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = dt;
    o.layer = "test.fw";
    qp_lin_desc d;
    qp_lin_desc_store *store = NULL;
    qp_status st = qp_lin_desc_build(NULL, &sch, N, K, t, (size_t)nt, &o, &d, &store);
    CHECK(st == QP_OK, "%s: qp_lin_desc_build: %s", what, qp_last_error(NULL));
    void *lins[2] = {0};
    for (int p = 0; p < 2 && st == QP_OK; p++) {
        qp_status s2 = ops->linear_prepare(dev, &d, paths[p + 1], &lins[p]);
        CHECK(s2 == QP_OK, "%s: prepare %s: %s", what, path_name[p + 1], last_error);
    }
    for (int mi = 0; mi < nms && st == QP_OK; mi++) {
        int M = ms[mi];
        uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *y = malloc(2 * (size_t)M * N);
        float *xq = malloc(sizeof(float) * (size_t)M * K);
        double *tol = calloc((size_t)M * N, sizeof(double));
        make_x_fw(x, M, K, dt, stress);
        qp_status rs;
        if (kind == FW_MX) {
            qp_ref_ocp_mx_args a = {dt, x, M, K, N, we, packed, bsc, 1, act, has_bias ? bias : NULL};
            rs = qp_ref_ocp_mx_forward(NULL, &a, yr);
        } else if (kind == FW_W4A8) {
            qp_ref_w4a8_mxfp4_args a = {dt, x, M, K, N, packed, bsc, in_scale, has_bias ? bias : NULL};
            rs = qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, yr);
        } else if (kind == FW_NVFP4) {
            qp_ref_nvfp4_args a = {dt, x, M, K, N, packed, bsc, ws2, igs, has_bias ? bias : NULL};
            rs = qp_ref_nvfp4_forward(NULL, &a, yr);
        } else {
            rs = qp_ref_unquantized_forward(NULL, dt, x, M, K, N, wact, has_bias ? bias : NULL, yr);
        }
        CHECK(rs == QP_OK, "%s: reference failed", what);
        if (!sel) {
            host_xq(kind, ae, &d, x, M, K, xq);
            for (int n = 0; n < N; n++) {
                for (int m = 0; m < M; m++) {
                    double ts = 0.0;
                    for (int k = 0; k < K; k++) {
                        double v = fabs((double)xq[(size_t)m * K + k] * fw_weight(&d, n, k));
                        if (!isnan(v)) ts += v;
                    }
                    double r = dec(dt, yr[(size_t)m * N + n]), b = has_bias ? dec(dt, bias[n]) : 0.0;
                    double t2 = (K + 2.0) * ldexp(1.0, -24) * 1.01 * ts + 2.0 * ulp_of(dt, fabs(r));
                    if (kind == FW_NVFP4 && has_bias) t2 += 2.0 * ulp_of(dt, fabs(r - b) + ts * ldexp(1.0, -20));
                    tol[(size_t)m * N + n] = t2;
                }
            }
        }
        for (int p = 0; p < 2; p++) {
            if (!lins[p]) continue;
            char w2[260];
            snprintf(w2, sizeof w2, "%s [%s]", what, path_name[p + 1]);
            if (!run(lins[p], x, M, K, N, y, w2)) continue;
            n_cases++;
            n_outputs += (long)M * N;
            if (sel) {
                compare_exact(y, yr, M, N, w2, M);
                n_fw_exact += (long)M * N;
                continue;
            }
            int bad = 0;
            for (size_t i = 0; i < (size_t)M * N; i++) {
                double r = dec(dt, yr[i]), g = dec(dt, y[i]);
                int ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : fabs(g - r) <= tol[i];
                if (!ok && bad++ < 3)
                    fprintf(stderr, "  %s M=%d: y[%zu][%zu] = %g, reference %g, bound %g\n", w2, M, i / N, i % N, g, r,
                            tol[i]);
            }
            CHECK(!bad, "%s M=%d: %d outputs outside the bound", w2, M, bad);
        }
        free(x); free(yr); free(y); free(xq); free(tol);
    }
    for (int p = 0; p < 2; p++)
        if (lins[p]) ops->linear_destroy(dev, lins[p]);
    if (N >= 4096 && st == QP_OK) {
        time_forward(&d, 0, 1, kn[kind]);
        time_forward(&d, 0, 16, kn[kind]);
    }
    if (store) qp_lin_desc_free(store);
    free(codes); free(packed); free(bsc); free(wact); free(bias);
}

static void fw_matrix(void) {
    static const int ms[] = {1, 3, 16, 17, 64};
    const qp_dtype H = QP_DTYPE_F16, B = QP_DTYPE_BF16;
    const qp_dtype F4 = QP_DTYPE_F4_E2M1, E23 = QP_DTYPE_F6_E2M3, E32 = QP_DTYPE_F6_E3M2, F8 = QP_DTYPE_F8_E4M3FN;
    /* every OCP_MX_Scheme pair (spec 3.1), selection weights (bit-exact qdq)
     * in fp16 and bf16 with the NaN / inf / huge rows, then random layers */
    static const struct { qp_dtype w; qp_ocp_mx_act a; } pairs[] = {
        {F4, QP_OCP_MX_ACT_NONE}, {F4, QP_OCP_MX_ACT_MXFP4}, {F4, QP_OCP_MX_ACT_MXFP6_E3M2},
        {F4, QP_OCP_MX_ACT_MXFP6_E2M3}, {F4, QP_OCP_MX_ACT_MXFP8}, {E23, QP_OCP_MX_ACT_NONE},
        {E23, QP_OCP_MX_ACT_MXFP6_E2M3}, {E23, QP_OCP_MX_ACT_MXFP8}, {E32, QP_OCP_MX_ACT_NONE},
        {E32, QP_OCP_MX_ACT_MXFP6_E3M2}, {E32, QP_OCP_MX_ACT_MXFP8}, {F8, QP_OCP_MX_ACT_NONE}, {F8, QP_OCP_MX_ACT_MXFP8}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        test_fw(FW_MX, i % 2 ? B : H, pairs[i].w, pairs[i].a, 1, (int)(i % 3 == 0), 1, 96, 96, ms, 5);
        test_fw(FW_MX, i % 2 ? H : B, pairs[i].w, pairs[i].a, 1, 0, 1, 64, 64, ms, 5);
        test_fw(FW_MX, i % 2 ? H : B, pairs[i].w, pairs[i].a, 0, (int)(i % 2), 0, 40, 160, ms, 5);
    }
    for (int t = 0; t < 2; t++) {
        qp_dtype dt = t ? B : H;
        test_fw(FW_W4A8, dt, F4, 0, 1, t, 1, 96, 96, ms, 5);
        test_fw(FW_W4A8, dt, F4, 0, 0, !t, 0, 37, 224, ms, 5);
        test_fw(FW_NVFP4, dt, F4, 0, 1, t, 1, 80, 80, ms, 5);   /* K = 80: half a 32-code chunk at the end */
        test_fw(FW_NVFP4, dt, F4, 0, 1, !t, 1, 48, 48, ms, 5);
        test_fw(FW_NVFP4, dt, F4, 0, 0, 1, 0, 41, 144, ms, 5);
        test_fw(FW_NVFP4, dt, F4, 0, 0, 0, 0, 33, 64, ms, 5);
        test_fw(FW_UNQ, dt, 0, 0, 1, t, 1, 100, 100, ms, 5);
        test_fw(FW_UNQ, dt, 0, 0, 0, 1, 0, 33, 100, ms, 5);
        test_fw(FW_UNQ, dt, 0, 0, 0, 0, 0, 70, 256, ms, 5);
    }
}

/* ---- optional ops: rotation, fp8 KV cache, copies, device timers --------- */
static void test_rotation(qp_dtype dt, int r, int hadamard, const int *ms, int nms) {
    int K = 3 * r;
    int8_t *H = malloc((size_t)r * r);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) /* Sylvester's Hadamard (r a power of two), or random signs */
            H[(size_t)i * r + j] = hadamard ? (int8_t)(__builtin_popcount((unsigned)(i & j)) % 2 ? -1 : 1)
                                            : (int8_t)(next() & 1 ? 1 : -1);
    void *rot = NULL;
    qp_status st = ops->rotation_prepare(dev, H, r, qp_rotation_norm(r), &rot);
    CHECK(st == QP_OK, "rotation_prepare r=%d: %s", r, last_error);
    for (int mi = 0; mi < nms && rot; mi++) {
        int M = ms[mi];
        size_t n = (size_t)M * K;
        uint16_t *x = malloc(2 * n), *yr = malloc(2 * n), *y = malloc(2 * n + GUARD);
        special = 1;
        make_x(x, M, K, dt);
        if (M > 5) x[5 * K + 1] = enc(dt, dt == QP_DTYPE_BF16 ? 3.0e38f : 65504.0f); /* overflow after the sum */
        if (M > 4) x[4 * K + 2] = dt == QP_DTYPE_BF16 ? 0xFF80 : 0xFC00;             /* -inf */
        st = qp_ref_rotation_forward(NULL, dt, x, M, K, H, r, yr);
        CHECK(st == QP_OK, "rotation reference failed");
        void *dx = dalloc(2 * n), *dy = dalloc(2 * n + GUARD);
        memset(y, 0xA5, 2 * n + GUARD);
        if (dx && dy && ops->buffer_upload(dev, dx, 0, x, 2 * n) == QP_OK &&
            ops->buffer_upload(dev, dy, 0, y, 2 * n + GUARD) == QP_OK) {
            st = ops->rotation_forward(dev, rot, dt, dx, M, K, dy);
            CHECK(st == QP_OK, "rotation_forward r=%d M=%d: %s", r, M, last_error);
            ops->buffer_download(dev, dy, 0, y, 2 * n + GUARD);
            int gb = 0;
            for (size_t i = 2 * n; i < 2 * n + GUARD; i++) gb += ((uint8_t *)y)[i] != 0xA5;
            CHECK(!gb, "rotation r=%d M=%d: guard band overwritten", r, M);
            char what[96];
            snprintf(what, sizeof what, "rotation %s r=%d%s", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", r,
                     hadamard ? " hadamard" : " random signs");
            compare_exact(y, yr, M, K, what, M);
            n_cases++;
            n_outputs += (long)n;
            /* in place (x and y one buffer): rotated from a copy */
            if (ops->buffer_upload(dev, dx, 0, x, 2 * n) == QP_OK) {
                st = ops->rotation_forward(dev, rot, dt, dx, M, K, dx);
                CHECK(st == QP_OK, "in-place rotation r=%d M=%d: %s", r, M, last_error);
                ops->buffer_download(dev, dx, 0, y, 2 * n);
                strcat(what, " in place");
                compare_exact(y, yr, M, K, what, M);
            }
        }
        if (dx) ops->buffer_free(dev, dx);
        if (dy) ops->buffer_free(dev, dy);
        free(x); free(yr); free(y);
    }
    if (rot) ops->rotation_destroy(dev, rot);
    free(H);
}

/* every fp16 / bf16 pattern through kv_quantize, every code through
 * kv_dequantize, bit-exact with the reference */
static void test_kv(qp_dtype dt, float scale) {
    size_t n = 65536;
    uint16_t *x = malloc(2 * n), *back = malloc(2 * 256), *backr = malloc(2 * 256);
    uint8_t *q = malloc(n + GUARD), *qr = malloc(n), codes[256];
    for (size_t i = 0; i < n; i++) x[i] = (uint16_t)i;
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    void *dx = dalloc(2 * n), *dq = dalloc(n + GUARD), *dc = dalloc(256), *db = dalloc(2 * 256);
    const char *dn = dt == QP_DTYPE_BF16 ? "bf16" : "fp16";
    if (dx && dq && dc && db) {
        memset(q, 0xA5, n + GUARD);
        ops->buffer_upload(dev, dx, 0, x, 2 * n);
        ops->buffer_upload(dev, dq, 0, q, n + GUARD);
        qp_status st = ops->kv_quantize(dev, dt, dx, n, scale, dq);
        CHECK(st == QP_OK, "kv_quantize %s: %s", dn, last_error);
        ops->buffer_download(dev, dq, 0, q, n + GUARD);
        qp_ref_kv_quantize(NULL, dt, x, n, scale, qr);
        int bad = 0, gb = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                fprintf(stderr, "  kv_quantize %s scale %g: x=0x%04zx -> 0x%02x, reference 0x%02x\n", dn, (double)scale,
                        i, q[i], qr[i]);
        for (size_t i = n; i < n + GUARD; i++) gb += q[i] != 0xA5;
        CHECK(!bad && !gb, "kv_quantize %s scale %g: %d of 65536 codes differ, %d guard bytes", dn, (double)scale, bad, gb);
        ops->buffer_upload(dev, dc, 0, codes, 256);
        st = ops->kv_dequantize(dev, dt, dc, 256, scale, db);
        CHECK(st == QP_OK, "kv_dequantize %s: %s", dn, last_error);
        ops->buffer_download(dev, db, 0, back, 2 * 256);
        qp_ref_kv_dequantize(NULL, dt, codes, 256, scale, backr);
        compare_exact(back, backr, 1, 256, dt == QP_DTYPE_BF16 ? "kv_dequantize bf16" : "kv_dequantize fp16", 1);
        /* in place (src and dst one buffer) both ways */
        ops->buffer_upload(dev, dx, 0, x, 2 * n);
        st = ops->kv_quantize(dev, dt, dx, n, scale, dx);
        CHECK(st == QP_OK, "in-place kv_quantize %s: %s", dn, last_error);
        ops->buffer_download(dev, dx, 0, q, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += q[i] != qr[i];
        CHECK(!bad, "in-place kv_quantize %s scale %g: %d codes differ", dn, (double)scale, bad);
        ops->buffer_upload(dev, db, 0, codes, 256);
        st = ops->kv_dequantize(dev, dt, db, 256, scale, db);
        CHECK(st == QP_OK, "in-place kv_dequantize %s: %s", dn, last_error);
        ops->buffer_download(dev, db, 0, back, 2 * 256);
        compare_exact(back, backr, 1, 256, "in-place kv_dequantize", 1);
        n_cases += 2;
        n_outputs += (long)n + 256;
    }
    void *bufs[] = {dx, dq, dc, db};
    for (int i = 0; i < 4; i++)
        if (bufs[i]) ops->buffer_free(dev, bufs[i]);
    free(x); free(back); free(backr); free(q); free(qr);
}

static void ops_matrix(void) {
    static const int ms[] = {1, 3, 17};
    test_rotation(QP_DTYPE_F16, 64, 1, ms, 3);
    test_rotation(QP_DTYPE_BF16, 64, 1, ms, 3);
    test_rotation(QP_DTYPE_F16, 32, 0, ms, 3);
    test_rotation(QP_DTYPE_BF16, 128, 0, ms, 3);
    test_rotation(QP_DTYPE_F16, 1, 1, ms, 3);
    static const float scales[] = {1.0f, 0.0173f, 3.7e-3f, 240.5f};
    for (int i = 0; i < 4; i++) {
        test_kv(QP_DTYPE_F16, scales[i]);
        test_kv(QP_DTYPE_BF16, scales[i]);
    }
    /* faults: dtypes, shapes, scales, short buffers */
    int8_t H[4] = {1, 1, 1, -1}, Hb[4] = {1, 2, 1, -1};
    void *rot = NULL;
    qp_status st = ops->rotation_prepare(dev, Hb, 2, 0.70710677f, &rot);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "+1 or -1"), "rotation entry 2: %d '%s'", (int)st, last_error);
    st = ops->rotation_prepare(dev, H, 2, 0.70710677f, &rot);
    void *b1 = dalloc(64), *b2 = dalloc(64 + 16);
    if (st == QP_OK && b1 && b2) {
        st = ops->rotation_forward(dev, rot, QP_DTYPE_F16, b1, 1, 3, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "multiple of the rotation size"), "rotation K=3: %d '%s'",
              (int)st, last_error);
        st = ops->rotation_forward(dev, rot, QP_DTYPE_F32, b1, 1, 4, b2);
        CHECK(st == QP_ERR_UNSUPPORTED, "rotation f32: %d '%s'", (int)st, last_error);
        st = ops->rotation_forward(dev, rot, QP_DTYPE_F16, b1, 2, 32, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "smaller"), "rotation short x: %d '%s'", (int)st, last_error);
        st = ops->kv_quantize(dev, QP_DTYPE_F16, b1, 32, 0.0f, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT, "kv scale 0: %d '%s'", (int)st, last_error);
        st = ops->kv_quantize(dev, QP_DTYPE_F16, b1, 33, 1.0f, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "too small"), "kv short: %d '%s'", (int)st, last_error);
        st = ops->kv_dequantize(dev, QP_DTYPE_F32, b1, 8, 1.0f, b2);
        CHECK(st == QP_ERR_UNSUPPORTED, "kv f32: %d '%s'", (int)st, last_error);
        /* copies: offsets, bounds, overlap */
        uint8_t src[64], got[80];
        for (int i = 0; i < 64; i++) src[i] = (uint8_t)(i * 7 + 1);
        memset(got, 0xA5, sizeof got);
        ops->buffer_upload(dev, b1, 0, src, 64);
        ops->buffer_upload(dev, b2, 0, got, 80);
        st = ops->buffer_copy(dev, b1, 8, b2, 3, 50);
        CHECK(st == QP_OK, "buffer_copy: %s", last_error);
        ops->buffer_download(dev, b2, 0, got, 80);
        int bad = 0;
        for (int i = 0; i < 80; i++) bad += got[i] != (i >= 3 && i < 53 ? src[i + 5] : 0xA5);
        CHECK(!bad, "buffer_copy: %d bytes wrong", bad);
        st = ops->buffer_copy(dev, b1, 20, b2, 0, 45);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "source"), "copy past the source: %d '%s'", (int)st, last_error);
        st = ops->buffer_copy(dev, b1, 0, b1, 8, 16);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "overlapping"), "overlapping copy: %d '%s'", (int)st, last_error);
        double ms[3] = {-1, -1, -1};
        st = ops->buffer_copy_time(dev, b1, b2, 64, 3, ms);
        CHECK(st == QP_OK && ms[0] >= 0 && ms[1] >= 0 && ms[2] >= 0, "buffer_copy_time: %d %g '%s'", (int)st, ms[0], last_error);
        n_cases += 3;
    }
    if (rot) ops->rotation_destroy(dev, rot);
    if (b1) ops->buffer_free(dev, b1);
    if (b2) ops->buffer_free(dev, b2);
    /* device timers: total >= gemm-only >= 0 on an MX layer (a qdq step) and
     * an unquantized one; the layer still computes the right thing */
    for (int kind = 0; kind < 2; kind++) {
        int N = 64, K = 128, M = 5;
        static uint8_t codes[64 * 128];
        static float bs[64 * 4], lut[256];
        static uint16_t wact[64 * 128];
        for (int i = 0; i < 64 * 4; i++) bs[i] = 1.0f;
        for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
        for (int i = 0; i < N * K; i++) { codes[i] = (uint8_t)(i % 16); wact[i] = enc(QP_DTYPE_F16, 0.25f); }
        qp_lin_desc d = {0};
        d.struct_size = sizeof d;
        d.kind = kind ? QP_SCHEME_UNQUANTIZED : QP_SCHEME_OCP_MX;
        d.act_dtype = QP_DTYPE_F16;
        d.N = N;
        d.K = K;
        d.layer = "timed";
        d.w_elem = QP_DTYPE_F4_E2M1;
        d.w_codes = codes;
        d.w_lut = lut;
        d.w_blk = 32;
        d.w_blk_scale = bs;
        d.w_act = wact;
        d.act = kind ? QP_ACT_NONE : QP_ACT_MX_QDQ;
        d.act_elem = QP_DTYPE_F4_E2M1;
        d.act_mbits = 1;
        d.act_emax = 2;
        void *lin = NULL;
        st = ops->linear_prepare(dev, &d, 0, &lin);
        CHECK(st == QP_OK, "timed layer: %s", last_error);
        void *dx = dalloc((size_t)M * K * 2), *dy = dalloc((size_t)M * N * 2);
        if (lin && dx && dy) {
            double tot[3] = {-1, -1, -1}, gm[3] = {-1, -1, -1};
            st = ops->linear_time(dev, lin, dx, M, dy, 3, tot, gm);
            CHECK(st == QP_OK, "linear_time: %s", last_error);
            for (int i = 0; i < 3; i++)
                CHECK(tot[i] > 0 && gm[i] > 0 && gm[i] <= tot[i], "linear_time rep %d: total %g gemm %g", i, tot[i], gm[i]);
            printf("linear_time %s M=%d %dx%d: total %.3f ms, gemm %.3f ms\n", kind ? "unquantized" : "mxfp4", M, N, K,
                   tot[2], gm[2]);
        }
        if (dx) ops->buffer_free(dev, dx);
        if (dy) ops->buffer_free(dev, dy);
        if (lin) ops->linear_destroy(dev, lin);
    }
}

/* ---- matrices ----------------------------------------------------------- */
static void full_matrix(void) {
    static const int shapes[][2] = {{33, 100}, {64, 160}}; /* N, K: odd tails / exact tiles */
    qp_dtype dts[] = {QP_DTYPE_F16, QP_DTYPE_BF16};
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++)
            for (int st = 0; st < 2; st++)
                for (int sym = 0; sym < 2; sym++) {
                    /* alternate per-channel / bias so every combination appears */
                    int pc = (s + sym) & 1, bias = (st + t + s) & 1;
                    test_int8(dts[t], st, sym, pc, bias, shapes[s][0], shapes[s][1], Ms, NM, 0);
                }
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 2; t++)
            for (int act = 0; act < 3; act++) test_fp8(dts[t], act, (act + s) & 1, (act + t) & 1, 0, shapes[s][0], shapes[s][1], Ms, NM);
    static const int msid[] = {1, 5, 17, 64};
    for (int t = 0; t < 2; t++)
        for (int act = 0; act < 3; act++) test_fp8(dts[t], act, 0, t, 1, 0, 96, msid, 4);
    test_qqq(-1, 0, 64, 128, Ms, NM, 0);
    test_qqq(-1, 1, 128, 256, Ms, NM, 0);
    test_qqq(128, 1, 64, 256, Ms, NM, 0);
    test_qqq(128, 0, 192, 384, Ms, NM, 0);
    /* W4A16: every group size (32/64/128/per-channel), both packings,
     * int4 / uint4, fp16 / bf16, odd N, K off the 32-weight chunks
     * (per-channel K = 100), padded scales */
    static const int mw[] = {1, 2, 3, 5, 8, 16, 17, 64};
    const qp_pack_method O = QP_PACK_ORDER, R = QP_PACK_REORDER;
    test_w4a16(QP_DTYPE_F16, R, 1, 128, 1, 0, 65, 256, Ms, NM);
    test_w4a16(QP_DTYPE_BF16, O, 0, 128, 0, 0, 33, 384, mw, 8);
    test_w4a16(QP_DTYPE_F16, O, 1, 32, 1, 1, 67, 96, mw, 8);
    test_w4a16(QP_DTYPE_BF16, R, 0, 64, 1, 0, 50, 192, mw, 8);
    test_w4a16(QP_DTYPE_F16, R, 0, -1, 0, 0, 31, 100, mw, 8);
    test_w4a16(QP_DTYPE_BF16, O, 1, -1, 1, 0, 64, 160, mw, 8);
    test_w4a16(QP_DTYPE_BF16, R, 1, 32, 0, 1, 130, 64, mw, 8);
    test_w4a16(QP_DTYPE_F16, O, 0, 64, 1, 1, 9, 128, mw, 8);
    /* fp8 per-block: fp32 and power-of-two (e8m0) scales, a partial
     * 128-row block, identity layers comparing the quantizer bit for bit */
    test_fp8_block(QP_DTYPE_F16, 0, 1, 0, 65, 256, Ms, NM);
    test_fp8_block(QP_DTYPE_BF16, 1, 0, 0, 200, 384, mw, 8);
    test_fp8_block(QP_DTYPE_F16, 1, 1, 0, 33, 128, mw, 8);
    test_fp8_block(QP_DTYPE_BF16, 0, 1, 0, 130, 128, mw, 8);
    test_fp8_block(QP_DTYPE_F16, 0, 0, 1, 0, 256, mw, 8);
    test_fp8_block(QP_DTYPE_BF16, 1, 0, 1, 0, 128, mw, 8);
}

/* forward time of a layer on the device (buffers resident), for the log */
static void time_forward(const qp_lin_desc *d, unsigned path, int M, const char *what) {
    void *lin = NULL;
    if (ops->linear_prepare(dev, d, path, &lin) != QP_OK) return;
    void *dx = dalloc((size_t)M * d->K * 2), *dy = dalloc((size_t)M * d->N * 2);
    uint16_t *x = calloc((size_t)M * d->K, 2);
    if (dx && dy && x) {
        make_x(x, M, d->K, d->act_dtype);
        ops->buffer_upload(dev, dx, 0, x, (size_t)M * d->K * 2);
        ops->linear_forward(dev, lin, dx, M, dy); /* warm-up: PoCL compiles per launch shape */
        double t0 = now();
        int reps = 1;
        for (int i = 0; i < reps; i++) ops->linear_forward(dev, lin, dx, M, dy);
        double dt = (now() - t0) / reps;
        char desc[160];
        ops->linear_describe(dev, lin, M, desc, sizeof desc);
        printf("  %s M=%d %dx%d: %.2f ms (%.2f GOP/s) [%s]\n", what, M, d->N, d->K, dt * 1e3,
               2.0 * M * d->N * (double)d->K / dt * 1e-9, desc);
    }
    free(x);
    if (dx) ops->buffer_free(dev, dx);
    if (dy) ops->buffer_free(dev, dy);
    ops->linear_destroy(dev, lin);
}

static void large_layer(void) {
    static const int m1[] = {1}, m2[] = {1, 17};
    test_int8(QP_DTYPE_F16, 0, 1, 1, 1, 4096, 4096, m2, 2, 0);
    test_fp8(QP_DTYPE_BF16, 2, 1, 1, 0, 4096, 4096, m1, 1);
    test_w4a16(QP_DTYPE_F16, QP_PACK_REORDER, 0, 128, 1, 0, 4096, 4096, m1, 1);
    test_fp8_block(QP_DTYPE_BF16, 0, 1, 0, 4096, 4096, m1, 1);
    test_fw(FW_MX, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 0, 1, 0, 4096, 4096, m1, 1);
    /* timings on this device (PoCL: CPU threads, for the record only) */
    int N = 4096, K = 4096;
    int8_t *w = malloc((size_t)N * K);
    float *ws = malloc(sizeof(float) * N);
    uint8_t *wf = malloc((size_t)N * K);
    int8_t *q4 = malloc((size_t)N * K), *w8 = malloc((size_t)N * K);
    if (w && ws && wf && q4 && w8) {
        for (size_t i = 0; i < (size_t)N * K; i++) {
            w[i] = (int8_t)irand(-127, 127);
            wf[i] = (uint8_t)irand(0, 0x7E);
            q4[i] = (int8_t)irand(-8, 7);
            w8[i] = (int8_t)(16 * q4[i]);
        }
        for (int n = 0; n < N; n++) ws[n] = 0.01f;
        qp_lin_desc d = {0};
        d.struct_size = sizeof d;
        d.act_dtype = QP_DTYPE_F16;
        d.N = N;
        d.K = K;
        d.layer = "timing";
        d.kind = QP_SCHEME_W8A8_INT8;
        d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
        d.act_symmetric = 1;
        d.w_i8 = w;
        d.w_scale = ws;
        d.w_per_channel = 1;
        time_forward(&d, 0, 1, "int8");
        time_forward(&d, 0, 16, "int8");
        d.kind = QP_SCHEME_W8A8_FP8;
        d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
        d.w_u8 = wf;
        time_forward(&d, 0, 1, "fp8");
        time_forward(&d, 0, 16, "fp8");
        d.kind = QP_SCHEME_QQQ_W4A8;
        d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
        d.group_size = -1;
        d.q4 = q4;
        d.w8 = w8;
        d.s_channel = ws;
        time_forward(&d, 0, 1, "qqq");
        time_forward(&d, 0, 16, "qqq");
        /* the fp16 baseline of qport bench and NVFP4 (fp4 codes, blocks of 16) */
        uint16_t *wa = malloc(2 * (size_t)N * K);
        float *bs = malloc(sizeof(float) * (size_t)N * (K / 16)), lut[256] = {0};
        if (wa && bs) {
            for (size_t i = 0; i < (size_t)N * K; i++) wa[i] = enc(QP_DTYPE_F16, frand() * 0.05f);
            for (size_t i = 0; i < (size_t)N * (K / 16); i++) bs[i] = 0.01f;
            for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
            qp_lin_desc u = {0};
            u.struct_size = sizeof u;
            u.act_dtype = QP_DTYPE_F16;
            u.N = N;
            u.K = K;
            u.layer = "timing";
            u.kind = QP_SCHEME_UNQUANTIZED;
            u.w_act = wa;
            time_forward(&u, 0, 1, "unquantized");
            time_forward(&u, 0, 16, "unquantized");
            u.kind = QP_SCHEME_NVFP4;
            u.w_elem = QP_DTYPE_F4_E2M1;
            u.w_codes = (const uint8_t *)wf;
            u.w_lut = lut;
            u.w_blk = 16;
            u.w_blk_scale = bs;
            u.act = QP_ACT_NVFP4_QDQ;
            u.input_global_scale = 100.0f;
            u.bias_after_round = 1;
            time_forward(&u, 0, 1, "nvfp4");
            time_forward(&u, 0, 16, "nvfp4");
        }
        free(wa); free(bs);
    }
    free(w); free(ws); free(wf); free(q4); free(w8);
}

/* The division strategies of devices without correctly rounded '/'
 * ("fma-test" starts 2 ulp off, so the fma correction really works). */
static void div_subset(void) {
    static const int ms[] = {1, 17};
    test_int8(QP_DTYPE_F16, 1, 1, 1, 0, 64, 160, ms, 2, 0);  /* x / s */
    test_int8(QP_DTYPE_BF16, 0, 0, 1, 1, 33, 100, ms, 2, 0); /* (mx-mn)/255, mn/s, 1/s */
    test_int8(QP_DTYPE_F16, 0, 1, 0, 0, 33, 100, ms, 2, 0);  /* amax/127, 127/amax */
    test_fp8(QP_DTYPE_F16, 2, 0, 0, 1, 0, 96, ms, 2);        /* x / s, exact via identity */
    test_fp8(QP_DTYPE_BF16, 0, 0, 1, 1, 0, 96, ms, 2);       /* 1/s */
    test_fp8_block(QP_DTYPE_F16, 0, 0, 1, 0, 128, ms, 2);    /* amax/448, x / s, exact via identity */
    test_fp8_block(QP_DTYPE_BF16, 1, 0, 1, 0, 128, ms, 2);   /* ue8m0: 1/s */
    /* block-float qdq on selection weights: NVFP4 1/(sf/g), sf/g; W4A8 x / s */
    test_fw(FW_NVFP4, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, 0, 1, 0, 1, 48, 48, ms, 2);
    test_fw(FW_W4A8, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 1, 1, 1, 64, 64, ms, 2);
    test_kv(QP_DTYPE_F16, 0.0173f); /* x / scale */
}

/* The *_dot kernels (QPORT_CL_FAKE_INT_DOT on a device without the
 * extension: the same kernels with a plain dot), forced and automatic. */
static void int_dot_subset(void) {
    static const int ms[] = {1, 5, 17, 64};
    test_int8(QP_DTYPE_F16, 0, 0, 1, 1, 33, 100, ms, 4, QP_PATH_INT_DOT);
    test_int8(QP_DTYPE_BF16, 1, 0, 0, 0, 64, 160, ms, 4, QP_PATH_INT_DOT);
    test_qqq(128, 1, 64, 256, ms, 4, QP_PATH_INT_DOT);
    test_qqq(-1, 0, 64, 128, ms, 4, 0);
}

/* ---- faults ------------------------------------------------------------- */
static int init_backend(void **st_out) {
    logbuf[0] = 0;
    qp_status st = ops->init(&host, st_out);
    CHECK(st == QP_OK, "init: %s", last_error);
    return st == QP_OK ? ops->device_count(*st_out) : 0;
}

static qp_lin_desc small_int8_desc(int8_t *w, float *ws) {
    for (int i = 0; i < 64 * 64; i++) w[i] = (int8_t)((i * 37) % 255 - 127);
    for (int i = 0; i < 64; i++) ws[i] = 0.01f;
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_INT8;
    d.act_dtype = QP_DTYPE_F16;
    d.N = d.K = 64;
    d.layer = "fault.layer";
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = 1;
    d.w_i8 = w;
    d.w_scale = ws;
    d.w_per_channel = 1;
    return d;
}

/* Weights split in column chunks (QPORT_CL_WEIGHT_CHUNK=4096: 32-column
 * chunks here), every scheme, both kernels, a partial last chunk. */
static void chunk_subset(void) {
    static const int ms[] = {1, 17, 64};
    test_int8(QP_DTYPE_F16, 0, 0, 1, 1, 200, 100, ms, 3, 0);
    test_fp8(QP_DTYPE_BF16, 2, 1, 1, 0, 200, 100, ms, 3);
    test_qqq(128, 1, 192, 256, ms, 3, 0);
    test_w4a16(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, 1, 0, 200, 256, ms, 3); /* 32 columns of 128 bytes a chunk */
    test_fp8_block(QP_DTYPE_F16, 0, 1, 0, 200, 128, ms, 3);                     /* 32 columns of 128 bytes a chunk */
    test_fw(FW_NVFP4, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 0, 1, 0, 200, 256, ms, 3); /* fp4: 128 bytes a row */
    test_fw(FW_MX, QP_DTYPE_F16, QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_MXFP8, 0, 0, 0, 100, 128, ms, 3);
    test_fw(FW_UNQ, QP_DTYPE_F16, 0, 0, 0, 1, 0, 100, 64, ms, 3);
    int8_t w[96 * 64] = {0};
    float ws[96];
    qp_lin_desc d = small_int8_desc(w, ws);
    for (int n = 64; n < 96; n++) ws[n] = 0.01f;
    d.N = 96; /* 64 columns of 64 bytes per 4096-byte chunk: 2 chunks */
    void *lin = NULL;
    char desc[160] = "";
    if (ops->linear_prepare(dev, &d, 0, &lin) == QP_OK) {
        ops->linear_describe(dev, lin, 1, desc, sizeof desc);
        ops->linear_destroy(dev, lin);
    }
    CHECK(strstr(desc, "2 weight chunks") != NULL, "96x64 with 4096-byte chunks: '%s'", desc);
    printf("weight chunks: %s\n", desc);
}

static int count_cache_files(char *first, size_t cap) {
    DIR *dir = opendir(cache_dir);
    int n = 0;
    if (!dir) return 0;
    for (struct dirent *e; (e = readdir(dir));)
        if (!strncmp(e->d_name, "opencl-", 7) && strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
            if (!n && first) snprintf(first, cap, "%s/%s", cache_dir, e->d_name);
            n++;
        }
    closedir(dir);
    return n;
}

static void clear_cache(void) {
    DIR *dir = opendir(cache_dir);
    if (!dir) return;
    for (struct dirent *e; (e = readdir(dir));)
        if (!strncmp(e->d_name, "opencl-", 7)) {
            char p[2200];
            snprintf(p, sizeof p, "%s/%s", cache_dir, e->d_name);
            remove(p);
        }
    closedir(dir);
}

/* prepare + one forward on a fresh backend state; returns the status */
static qp_status fresh_prepare_and_run(int check_output) {
    void *s2 = NULL;
    int n = init_backend(&s2);
    qp_status st = QP_ERR_NOT_FOUND;
    if (n > 0) {
        void *save = dev;
        dev = ops->device_get(s2, 0);
        int8_t w[64 * 64];
        float ws[64];
        qp_lin_desc d = small_int8_desc(w, ws);
        void *lin = NULL;
        st = ops->linear_prepare(dev, &d, 0, &lin);
        if (st == QP_OK && check_output) {
            uint16_t x[3 * 64], y[3 * 64], yr[3 * 64];
            make_x(x, 3, 64, QP_DTYPE_F16);
            qp_ref_int8_args a = {QP_DTYPE_F16, x, 3, 64, 64, w, ws, 1, 0, 1, 0, 0, NULL};
            qp_ref_w8a8_int8_forward(NULL, &a, yr);
            if (run(lin, x, 3, 64, 64, y, "cache fault")) compare_exact(y, yr, 3, 64, "cache fault", 3);
        }
        if (lin) ops->linear_destroy(dev, lin);
        dev = save;
    }
    ops->shutdown(s2);
    return st;
}

/* W4A16 / fp8 per-block: refused tensors, shapes and paths */
static void w4a16_fp8b_faults(void) {
    static uint8_t q4[64 * 64], Z[2 * 64];
    static float sc[2 * 64];
    for (int i = 0; i < 2 * 64; i++) sc[i] = 0.01f;
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W4A16_INT4;
    d.scheme.weight.group_size = 32;
    d.scheme.weight.symmetric = 0;
    d.scheme.pack_method = QP_PACK_REORDER;
    d.act_dtype = QP_DTYPE_F16;
    d.N = 64;
    d.K = 64;
    d.layer = "fault.w4a16";
    d.group_size = 32;
    d.q4 = (const int8_t *)q4;
    d.w4_scale = sc;
    d.w4_signed = 0; /* uint4 without its zero points */
    void *lin = NULL;
    qp_status st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "w4_zero") && strstr(last_error, "fault.w4a16"),
          "w4a16 without zero points: %d '%s'", (int)st, last_error);
    d.w4_zero = Z;
    Z[70] = 16; /* a zero point outside 0..15 */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "w4_zero") && strstr(last_error, "[1][6]"),
          "w4a16 zp range: %d '%s'", (int)st, last_error);
    Z[70] = 0;
    q4[5] = 0xF0; /* a code outside 0..15 */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "q4") && strstr(last_error, "[0][5]"),
          "w4a16 code range: %d '%s'", (int)st, last_error);
    q4[5] = 0;
    d.group_size = 48; /* K = 64 is not a multiple */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && strstr(last_error, "not divisible by the group size 48"), "w4a16 g48: %d '%s'", (int)st,
          last_error);
    d.group_size = 16; d.K = 32; /* divides K, not a multiple of 32 */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "multiple of 32"), "w4a16 g16: %d '%s'", (int)st, last_error);
    d.group_size = 32; d.K = 64;
    st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "no integer dot product path"), "w4a16 int-dot: %d '%s'",
          (int)st, last_error);
    lin = NULL;
    st = ops->linear_prepare(dev, &d, QP_PATH_NO_INT_DOT, &lin);
    CHECK(st == QP_OK, "w4a16 no-int-dot: %s", last_error);
    if (lin) {
        char desc[160];
        ops->linear_describe(dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "gemv") && strstr(desc, "int4->fp32"), "describe w4a16: '%s'", desc);
        ops->linear_destroy(dev, lin);
    }
    /* fp8 per-block: K % 128, a non-group activation mode, forced int-dot;
     * per-token-group activations on per-channel weights */
    uint8_t w8[64 * 192] = {0};
    float ws[2] = {1.0f, 1.0f};
    qp_lin_desc f = {0};
    f.struct_size = sizeof f;
    f.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    f.act_dtype = QP_DTYPE_BF16;
    f.N = 64;
    f.K = 192;
    f.layer = "fault.fp8block";
    f.act = QP_ACT_FP8_GROUP128;
    f.w_u8 = w8;
    f.w_scale = ws;
    lin = NULL;
    st = ops->linear_prepare(dev, &f, 0, &lin);
    CHECK(st == QP_ERR_VALUE && strstr(last_error, "multiple of 128"), "fp8-block K=192: %d '%s'", (int)st, last_error);
    f.K = 128;
    f.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    st = ops->linear_prepare(dev, &f, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "fp8-block per-token: %d '%s'", (int)st, last_error);
    f.act = QP_ACT_FP8_GROUP128;
    st = ops->linear_prepare(dev, &f, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "no integer dot product path"), "fp8-block int-dot: %d '%s'",
          (int)st, last_error);
    f.kind = QP_SCHEME_W8A8_FP8;
    st = ops->linear_prepare(dev, &f, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "per-block weights"), "fp8 group act: %d '%s'", (int)st,
          last_error);
    f.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    lin = NULL;
    st = ops->linear_prepare(dev, &f, QP_PATH_TILED, &lin);
    CHECK(st == QP_OK, "fp8-block tiled: %s", last_error);
    if (lin) {
        char desc[160];
        ops->linear_describe(dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "tiled") && strstr(desc, "128x128"), "describe fp8-block: '%s'", desc);
        ops->linear_destroy(dev, lin);
    }
    /* device_supports: what runs and how (PoCL: no fp8 arithmetic) */
    qp_device_info info = {0};
    info.struct_size = sizeof info;
    ops->device_info(dev, &info);
    qp_scheme sch = {0};
    qp_support_info si;
    sch.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    sch.weight.granularity = QP_GRAN_BLOCK;
    ops->device_supports(dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no fp8 arithmetic") && strstr(si.reason, "128x128"),
          "supports fp8-block: %d %s", (int)si.level, si.reason);
    sch.kind = QP_SCHEME_HF_FP8;
    ops->device_supports(dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "128x128"), "supports hf-fp8 block: %s", si.reason);
    memset(&sch, 0, sizeof sch);
    sch.kind = QP_SCHEME_W4A16_INT4;
    sch.weight.group_size = 128;
    ops->device_supports(dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == (info.caps.fp16_arith ? QP_SUPPORT_NATIVE : QP_SUPPORT_EMULATED) && strstr(si.reason, "int4"),
          "supports w4a16: %d %s", (int)si.level, si.reason);
    printf("supports: w4a16 %s (%s)\n", si.level == QP_SUPPORT_NATIVE ? "native" : "emulated", si.reason);
    sch.weight.group_size = 16;
    ops->device_supports(dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_UNSUPPORTED, "supports w4a16 g16: %d %s", (int)si.level, si.reason);
}

/* block-float / unquantized: refused descs, paths, describe, device_supports */
static void fw_faults(void) {
    static uint8_t codes[64 * 64];
    static float bs[64 * 4], lut[256];
    for (int i = 0; i < 64 * 4; i++) bs[i] = 1.0f;
    for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_OCP_MX;
    d.act_dtype = QP_DTYPE_BF16;
    d.N = 64;
    d.K = 64;
    d.layer = "fault.mx";
    d.w_elem = QP_DTYPE_F4_E2M1;
    d.w_codes = codes;
    d.w_blk = 32;
    d.w_blk_scale = bs;
    d.act = QP_ACT_MX_QDQ;
    d.act_elem = QP_DTYPE_F6_E3M2;
    d.act_mbits = 2;
    d.act_emax = 4;
    void *lin = NULL;
    qp_status st = ops->linear_prepare(dev, &d, 0, &lin); /* no w_lut */
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "w_lut") && strstr(last_error, "fault.mx"),
          "mx without w_lut: %d '%s'", (int)st, last_error);
    d.w_lut = lut;
    lut[3] = 1.25f; /* not the e2m1 table */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "e2m1 table"), "mx bad w_lut: %d '%s'", (int)st, last_error);
    lut[3] = 1.5f;
    d.act_emax = 2; /* not e3m2's */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "act_emax"), "mx emax: %d '%s'", (int)st, last_error);
    d.act_emax = 4;
    d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "mx with dynamic fp8 activations: %d '%s'", (int)st, last_error);
    d.act = QP_ACT_MX_QDQ;
    d.K = 48; /* not a multiple of the block */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && strstr(last_error, "multiple"), "mx K=48: %d '%s'", (int)st, last_error);
    d.K = 64;
    st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "no integer dot product path"), "mx int-dot: %d '%s'", (int)st,
          last_error);
    const char *want[] = {"gemv", "tiled"};
    for (int p = 0; p < 2; p++) {
        lin = NULL;
        st = ops->linear_prepare(dev, &d, paths[p + 1], &lin);
        CHECK(st == QP_OK, "mx %s: %s", want[p], last_error);
        if (lin) {
            char desc[160];
            ops->linear_describe(dev, lin, 1, desc, sizeof desc);
            CHECK(strstr(desc, want[p]) && strstr(desc, "fp4->fp32") && strstr(desc, "mx-qdq"), "describe mx: '%s'", desc);
            ops->linear_destroy(dev, lin);
        }
    }
    d.kind = QP_SCHEME_NVFP4;
    d.w_blk = 16;
    d.act = QP_ACT_NVFP4_QDQ;
    d.input_global_scale = 0.0f;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "input_global_scale"), "nvfp4 igs 0: %d '%s'", (int)st,
          last_error);
    d.kind = QP_SCHEME_W4A8_MXFP4_FP8;
    d.w_blk = 32;
    d.act = QP_ACT_FP8_STATIC_QDQ;
    d.input_scale = -1.0f;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "input_scale"), "w4a8 scale: %d '%s'", (int)st, last_error);
    d.kind = QP_SCHEME_UNQUANTIZED;
    d.act = QP_ACT_NONE;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "w_act"), "unquantized without w_act: %d '%s'", (int)st,
          last_error);
    qp_scheme sch = {0};
    qp_support_info si;
    static const qp_scheme_kind kinds[] = {QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8, QP_SCHEME_NVFP4};
    for (int i = 0; i < 3; i++) {
        sch.kind = kinds[i];
        ops->device_supports(dev, &sch, 1, 64, 64, &si);
        CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no native"), "supports %d: %d %s", (int)kinds[i],
              (int)si.level, si.reason);
        if (i == 0) printf("supports: ocp-mx emulated (%s)\n", si.reason);
        ops->device_supports(dev, &sch, 1, 64, 40, &si);
        CHECK(si.level == QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "multiple of"), "supports %d K=40: %d %s",
              (int)kinds[i], (int)si.level, si.reason);
    }
    sch.kind = QP_SCHEME_UNQUANTIZED;
    ops->device_supports(dev, &sch, 1, 64, 40, &si);
    CHECK(si.level != QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "fp32 multiply-adds"), "supports unquantized: %s",
          si.reason);
}

static void faults(void) {
    qp_device_info info = {0};
    info.struct_size = sizeof info;
    ops->device_info(dev, &info);
    /* an allocation past the device limit: a clear error, nothing leaked */
    void *b = NULL;
    qp_status st = ops->buffer_alloc(dev, (size_t)info.caps.max_alloc_bytes + 1, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY && strstr(last_error, "CL_DEVICE_MAX_MEM_ALLOC_SIZE"),
          "huge alloc: status %d, '%s'", (int)st, last_error);
    st = ops->buffer_alloc(dev, (size_t)1 << 62, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY, "2^62-byte alloc: status %d", (int)st);
    /* a layer whose weights cannot be allocated names the layer and tensor */
    /* forced paths the device lacks */
    int8_t w[64 * 64];
    float ws[64];
    qp_lin_desc d = small_int8_desc(w, ws);
    void *lin = NULL;
    if (!info.caps.int_dot) {
        st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "cl_khr_integer_dot_product"),
              "forced int-dot without the extension: status %d, '%s'", (int)st, last_error);
    }
    st = ops->linear_prepare(dev, &d, QP_PATH_GEMV | QP_PATH_TILED, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT, "GEMV|TILED: status %d", (int)st);
    lin = NULL;
    st = ops->linear_prepare(dev, &d, QP_PATH_NO_INT_DOT, &lin);
    CHECK(st == QP_OK, "NO_INT_DOT: %s", last_error);
    if (lin) {
        char desc[128];
        ops->linear_describe(dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "gemv") && strstr(desc, "plain"), "describe M=1: '%s'", desc);
        ops->linear_describe(dev, lin, 64, desc, sizeof desc);
        CHECK(strstr(desc, "tiled"), "describe M=64: '%s'", desc);
        ops->linear_destroy(dev, lin);
    }
    /* forward argument checks: M = 0 is a no-op, short buffers are refused */
    lin = NULL;
    if (ops->linear_prepare(dev, &d, 0, &lin) == QP_OK) {
        void *bx = dalloc(10), *by = dalloc(64 * 64 * 2);
        if (bx && by) {
            CHECK(ops->linear_forward(dev, lin, bx, 0, by) == QP_OK, "M = 0: %s", last_error);
            st = ops->linear_forward(dev, lin, bx, 2, by);
            CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "fault.layer"), "short x: %d '%s'", (int)st,
                  last_error);
            st = ops->linear_forward(dev, lin, by, 64, bx);
            CHECK(st == QP_ERR_INVALID_ARGUMENT, "short y: %d", (int)st);
            st = ops->buffer_upload(dev, bx, 8, w, 4);
            CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "outside"), "upload past the end: %d", (int)st);
        }
        if (bx) ops->buffer_free(dev, bx);
        if (by) ops->buffer_free(dev, by);
        ops->linear_destroy(dev, lin);
    }
    /* unsupported schemes say so */
    qp_lin_desc u = d;
    u.kind = QP_SCHEME_KV_CACHE;
    lin = NULL;
    st = ops->linear_prepare(dev, &u, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "not yet implemented on opencl"), "kv-cache linear: %d '%s'",
          (int)st, last_error);
    w4a16_fp8b_faults();
    fw_faults();
    qp_scheme sch = {0};
    sch.kind = QP_SCHEME_KV_CACHE;
    qp_support_info si;
    ops->device_supports(dev, &sch, 1, 64, 64, &si);
    CHECK(si.level == QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "not yet implemented on opencl"), "supports kv-cache");
    sch.kind = QP_SCHEME_QQQ_W4A8;
    ops->device_supports(dev, &sch, 1, 64, 64, &si);
    /* PoCL has no cl_khr_integer_dot_product: int8 arithmetic is emulated
     * with int32 multiply-adds, and says so (issue 9) */
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "cl_khr_integer_dot_product"), "supports qqq: %s", si.reason);
    sch.kind = QP_SCHEME_W8A8_FP8;
    ops->device_supports(dev, &sch, 1, 64, 64, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no fp8 arithmetic"), "supports fp8: %s", si.reason);

    /* QQQ: a K the 4-bit layout cannot pack, and q4 / w8 that disagree */
    {
        int8_t q4[64 * 96], w8[64 * 96];
        float sc[64];
        for (int i = 0; i < 64 * 96; i++) { q4[i] = (int8_t)(i % 15 - 7); w8[i] = (int8_t)(16 * q4[i]); }
        for (int i = 0; i < 64; i++) sc[i] = 0.01f;
        qp_lin_desc qd = {0};
        qd.struct_size = sizeof qd;
        qd.kind = QP_SCHEME_QQQ_W4A8;
        qd.act_dtype = QP_DTYPE_F16;
        qd.N = 64;
        qd.K = 80;
        qd.layer = "fault.qqq";
        qd.act = QP_ACT_INT8_DYNAMIC_TOKEN;
        qd.act_symmetric = 1;
        qd.group_size = -1;
        qd.q4 = q4;
        qd.w8 = w8;
        qd.s_channel = sc;
        lin = NULL;
        st = ops->linear_prepare(dev, &qd, 0, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(last_error, "multiple of 32"), "qqq K=80: %d '%s'", (int)st, last_error);
        qd.K = 96;
        w8[5 * 96 + 40] ^= 1; /* column 5: one weight off its code's value */
        st = ops->linear_prepare(dev, &qd, 0, &lin);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_error, "q4 and w8 disagree") && strstr(last_error, "fault.qqq"),
              "qqq q4/w8: %d '%s'", (int)st, last_error);
        w8[5 * 96 + 40] ^= 1;
        lin = NULL;
        st = ops->linear_prepare(dev, &qd, 0, &lin);
        CHECK(st == QP_OK, "qqq K=96: %s", last_error);
        if (lin) ops->linear_destroy(dev, lin);
    }

    /* a kernel compile failure carries the driver's build log */
    setenv("QPORT_CL_BREAK_SOURCE", "1", 1);
    st = fresh_prepare_and_run(0);
    unsetenv("QPORT_CL_BREAK_SOURCE");
    CHECK(st == QP_ERR_DEVICE && strstr(last_error, "clBuildProgram failed") && strstr(last_error, "build log") &&
              strstr(last_error, "qp_injected_syntax_error"),
          "compile failure: status %d, message '%.600s'", (int)st, last_error);

    /* program cache: written, reused, and corrupt entries rebuilt */
    clear_cache();
    st = fresh_prepare_and_run(1);
    char path[2200] = "";
    CHECK(st == QP_OK && count_cache_files(path, sizeof path) == 1, "cache not written (%s)", last_error);
    if (path[0]) {
        host.validation = 0;
        st = fresh_prepare_and_run(1);
        CHECK(st == QP_OK && !strstr(logbuf, "rejected"), "cached load: %s", logbuf);
        /* 1: flip a payload byte -> checksum mismatch */
        FILE *f = fopen(path, "r+b");
        if (f) {
            fseek(f, 100, SEEK_SET);
            int c = fgetc(f);
            fseek(f, 100, SEEK_SET);
            fputc(c ^ 0x5A, f);
            fclose(f);
        }
        st = fresh_prepare_and_run(1);
        CHECK(st == QP_OK && strstr(logbuf, "rejected (size, key or checksum mismatch)"),
              "corrupt (checksum) entry not rebuilt: %s", logbuf);
        /* 2: truncated file */
        struct stat sb;
        if (stat(path, &sb) == 0 && truncate(path, sb.st_size / 2) == 0) {
            st = fresh_prepare_and_run(1);
            CHECK(st == QP_OK && strstr(logbuf, "rejected"), "truncated entry not rebuilt: %s", logbuf);
        }
        /* 3: a well-formed entry (valid checksum) whose payload is garbage:
         * the driver refuses the binary, and it is rebuilt */
        f = fopen(path, "r+b");
        unsigned char hdr[40];
        if (f && fread(hdr, 1, 40, f) == 40) {
            uint64_t size;
            memcpy(&size, hdr + 8, 8);
            unsigned char *junk = malloc(size);
            for (uint64_t i = 0; junk && i < size; i++) junk[i] = (unsigned char)(i * 13 + 7);
            uint64_t h = 0xcbf29ce484222325ull;
            for (uint64_t i = 0; junk && i < size; i++) h = (h ^ junk[i]) * 0x100000001b3ull;
            memcpy(hdr + 16, &h, 8);
            fseek(f, 0, SEEK_SET);
            fwrite(hdr, 1, 40, f);
            if (junk) fwrite(junk, 1, size, f);
            free(junk);
        }
        if (f) fclose(f);
        st = fresh_prepare_and_run(1);
        CHECK(st == QP_OK && strstr(logbuf, "rejected (clCreateProgramWithBinary") ,
              "garbage binary not rebuilt: %s", logbuf);
        st = fresh_prepare_and_run(1);
        CHECK(st == QP_OK && !strstr(logbuf, "rejected"), "rebuilt entry not reused: %s", logbuf);
    }
    /* QPORT_CACHE_DIR=off (cache_dir ""): built, nothing written */
    clear_cache();
    host.cache_dir = "";
    st = fresh_prepare_and_run(1);
    host.cache_dir = cache_dir;
    CHECK(st == QP_OK && count_cache_files(NULL, 0) == 0, "cache off: %d, %d files", (int)st, count_cache_files(NULL, 0));
    /* the ICD loader missing: zero devices and a logged reason */
    setenv("QPORT_CL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
    void *s3 = NULL;
    int n = init_backend(&s3);
    unsetenv("QPORT_CL_LIBRARY");
    CHECK(n == 0 && strstr(logbuf, "0 devices: no OpenCL ICD loader"), "no loader: %d devices, log '%s'", n, logbuf);
    ops->shutdown(s3);
}


int main(int argc, char **argv) {
    verbose = getenv("QP_TEST_VERBOSE") != NULL;
    if (getenv("QP_TEST_SEED")) seed = strtoull(getenv("QP_TEST_SEED"), NULL, 10);
    rng = seed | 1;
    ops = load_plugin();
    if (!ops) {
        fprintf(stderr, "test_cl: libqport-cl.so not found in QPORT_BACKEND_PATH\n");
        return 1;
    }
    CHECK(ops->abi_version == QP_BACKEND_ABI_VERSION && !strcmp(ops->name, "opencl"), "ops table");
    if (argc > 1 && !strcmp(argv[1], "--no-platform")) {
        /* run with OCL_ICD_VENDORS pointing at an empty folder */
        int n = init_backend(&state);
        CHECK(n == 0 && strstr(logbuf, "0 devices"), "no platform: %d devices, log '%s'", n, logbuf);
        ops->shutdown(state);
        printf("test_cl --no-platform: %s", logbuf);
        return failures ? 1 : 0;
    }
    const char *cd = getenv("QP_TEST_CACHE_DIR");
    snprintf(cache_dir, sizeof cache_dir, "%s", cd ? cd : "cl-test-cache");
    mkdir(cache_dir, 0755);
    int n = init_backend(&state);
    if (n == 0) {
        printf("test_cl: SKIP: no OpenCL device (%s)\n", logbuf);
        ops->shutdown(state);
        return 77;
    }
    dev = ops->device_get(state, 0);
    qp_device_info info = {0};
    info.struct_size = sizeof info;
    CHECK(ops->device_info(dev, &info) == QP_OK, "device_info");
    printf("opencl:0: %s | %s | %s | %s | kind %d | mem %llu | int_dot %d | fp16 %d | uuid %d\n", info.name, info.vendor,
           info.driver, info.api_version, (int)info.kind, (unsigned long long)info.memory_bytes, info.caps.int_dot,
           info.caps.fp16_arith, info.has_uuid);
    CHECK(!strcmp(info.backend, "opencl") && info.index == 0 && info.name[0], "info fields");
    const char *only = getenv("QP_TEST_ONLY"); /* iteration knobs: "fw" runs the block-float matrix and the optional ops alone, "large" the 4096x4096 layers */
    if (only && !strcmp(only, "large")) {
        large_layer();
        ops->shutdown(state);
        printf("test_cl: %s (%d failures, seed %llu)\n", failures ? "FAIL" : "ok", failures, seed);
        return failures ? 1 : 0;
    }
    if (only && !strcmp(only, "fw")) {
        fw_matrix();
        ops_matrix();
        printf("block-float only: %ld cases, %ld bit-exact outputs\n", n_cases, n_fw_exact);
        ops->shutdown(state);
        printf("test_cl: %s (%d failures, seed %llu)\n", failures ? "FAIL" : "ok", failures, seed);
        return failures ? 1 : 0;
    }
    double t0 = now();
    faults();
    double t1 = now();
    full_matrix();
    double t2a = now();
    fw_matrix();
    ops_matrix();
    double t2 = now();
    printf("block-float / unquantized / rotation / kv: %.1f s, %ld outputs bit-exact on selection weights\n", t2 - t2a, n_fw_exact);
    large_layer();
    double t3 = now();
    printf("matrix: %ld cases, %ld outputs compared\n", n_cases, n_outputs);
    ops->shutdown(state);
    /* division strategies: fp64 and fma-corrected, each on a fresh program */
    const char *modes[] = {"fp64", "fma", "fma-test"};
    for (int i = 0; i < 3; i++) {
        setenv("QPORT_CL_DIV", modes[i], 1);
        if (init_backend(&state) > 0) {
            dev = ops->device_get(state, 0);
            div_subset();
            char desc[128] = "";
            int8_t w[64 * 64];
            float ws[64];
            qp_lin_desc d = small_int8_desc(w, ws);
            void *lin = NULL;
            if (ops->linear_prepare(dev, &d, 0, &lin) == QP_OK) {
                ops->linear_describe(dev, lin, 1, desc, sizeof desc);
                ops->linear_destroy(dev, lin);
            }
            printf("division mode %s: %s\n", modes[i], desc);
        }
        ops->shutdown(state);
        unsetenv("QPORT_CL_DIV");
    }
    /* the int-dot kernels, where the device has the extension for real or
     * through the test knob */
    if (!info.caps.int_dot) setenv("QPORT_CL_FAKE_INT_DOT", "1", 1);
    if (init_backend(&state) > 0) {
        dev = ops->device_get(state, 0);
        int_dot_subset();
        char desc[160] = "";
        int8_t w[64 * 64];
        float ws[64];
        qp_lin_desc d = small_int8_desc(w, ws);
        void *lin = NULL;
        if (ops->linear_prepare(dev, &d, 0, &lin) == QP_OK) {
            ops->linear_describe(dev, lin, 64, desc, sizeof desc);
            ops->linear_destroy(dev, lin);
        }
        CHECK(strstr(desc, "int-dot") != NULL, "int-dot path not taken: '%s'", desc);
        printf("int-dot kernels: %s\n", desc);
    }
    ops->shutdown(state);
    /* a driver listing the extension whose compiler rejects dot(): the
     * program is rebuilt without the int-dot kernels */
    if (!info.caps.int_dot) {
        setenv("QPORT_CL_FAKE_INT_DOT", "ext", 1);
        qp_status st = fresh_prepare_and_run(1);
        CHECK(st == QP_OK && strstr(logbuf, "the int-dot build failed"), "int-dot build fallback: %d '%s'", (int)st,
              logbuf);
        /* ... and a forced int-dot path is then refused, not run plain */
        if (init_backend(&state) > 0) {
            dev = ops->device_get(state, 0);
            int8_t w[64 * 64];
            float ws[64];
            qp_lin_desc d = small_int8_desc(w, ws);
            void *lin = NULL;
            st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
            CHECK(st == QP_ERR_UNSUPPORTED, "forced int-dot after the fallback: %d '%s'", (int)st, last_error);
            if (lin) ops->linear_destroy(dev, lin);
        }
        ops->shutdown(state);
    }
    unsetenv("QPORT_CL_FAKE_INT_DOT");
    /* weights in column chunks */
    setenv("QPORT_CL_WEIGHT_CHUNK", "4096", 1);
    if (init_backend(&state) > 0) {
        dev = ops->device_get(state, 0);
        chunk_subset();
    }
    ops->shutdown(state);
    setenv("QPORT_CL_WEIGHT_CHUNK", "1000", 1); /* < 32 columns of 64 bytes */
    if (init_backend(&state) > 0) {
        dev = ops->device_get(state, 0);
        int8_t w[64 * 64];
        float ws[64];
        qp_lin_desc d = small_int8_desc(w, ws);
        void *lin = NULL;
        qp_status st = ops->linear_prepare(dev, &d, 0, &lin);
        CHECK(st == QP_ERR_OUT_OF_MEMORY && strstr(last_error, "does not fit") && strstr(last_error, "w_i8"),
              "chunk too small: %d '%s'", (int)st, last_error);
        if (lin) ops->linear_destroy(dev, lin);
    }
    ops->shutdown(state);
    unsetenv("QPORT_CL_WEIGHT_CHUNK");
    double t4 = now();
    printf("time: faults %.1f s, matrix %.1f s, 4096x4096 %.1f s, division modes %.1f s\n", t1 - t0, t2 - t1, t3 - t2,
           t4 - t3);
    printf("test_cl: %s (%d failures, seed %llu)\n", failures ? "FAIL" : "ok", failures, seed);
    return failures ? 1 : 0;
}
