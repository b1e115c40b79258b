/* Vulkan backend (issue 4): every op against the cpu reference on seeded
 * random data, through the plugin's ops table (api/backend.h) loaded from
 * QPORT_BACKEND_PATH, under VK_LAYER_KHRONOS_validation: any WARNING or
 * ERROR message fails the test.
 *   - W8A8-INT8 (static sym/asym, dynamic per-token sym/asym; per-tensor and
 *     per-channel weights; bias) and QQQ W4A8 (group -1, 128): bit-exact;
 *     W4A16 int4/uint4 (order/reorder, groups 32/64/128/-1): within the bound;
 *   - W8A8-FP8 (static, dynamic tensor, dynamic token): within the bound of
 *     fp32 accumulation, and bit-exact through an identity weight (which
 *     isolates the fp8 activation quantizer and the epilogue);
 *   - paths GEMV/tiled x int-dot/plain int32, fp16 and bf16, M in
 *     {1,2,3,5,8,16,17,64,256}, K/N around tile edges, a 4096x4096 layer,
 *     weights split over several bindings (QPORT_VK_MAX_BINDING);
 *   - issue 9: W4A16 from the canonical fields; OCP-MX (fp4/fp6/fp8 weights,
 *     none/MXFP4/MXFP6/MXFP8 activations), W4A8-MXFP4-FP8, NVFP4,
 *     unquantized and W8A8-FP8 per-block: bit-exact activation qdq through
 *     selection weights, random layers within the fp32-summation bound;
 *     rotation and the fp8 KV cache bit-exact; linear_time, buffer_copy,
 *     buffer_copy_time;
 *   - guard bands after every output, fault paths.
 * Exit 77 (skip) when there is no Vulkan device. Seed: QPORT_TEST_SEED. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "plugin_host.h"
#include "backend.h"
#include "testutil.h"

/* ---- host table ------------------------------------------------------------ */
static char last_err[1024];
static unsigned validation_msgs, validation_missing;
static int verbose;

static qp_status h_error(const qp_context *ctx, qp_status st, const char *fmt, ...) {
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    return st;
}

static void h_log(const qp_context *ctx, qp_log_level lvl, const char *fmt, ...) {
    (void)ctx;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (strstr(buf, "vulkan validation:") && lvl >= QP_LOG_WARN) {
        validation_msgs++;
        fprintf(stderr, "VALIDATION: %s\n", buf);
    } else if (strstr(buf, "validation requested but")) {
        validation_missing++;
        fprintf(stderr, "%s\n", buf);
    } else if (verbose || lvl >= QP_LOG_WARN) {
        fprintf(stderr, "log[%d]: %s\n", (int)lvl, buf);
    }
}

static char cache_dir[256];
static qp_host host = {
    .abi_version = QP_BACKEND_ABI_VERSION,
    .struct_size = sizeof(qp_host),
    .error = h_error,
    .log = h_log,
    .cache_dir = cache_dir,
    .version = "test",
    .validation = 1,
    .setting = tu_host_setting,
};

static const qp_backend_ops *ops;
static void *state, *dev;

static void *load_plugin(void) {
    const char *paths = getenv("QPORT_BACKEND_PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", paths ? paths : ".");
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/libqport-vk.so", dir);
        /* NODELETE: a leak in the plugin keeps its symbols for LSan */
        void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h) return h;
    }
    return NULL;
}

/* ---- data ------------------------------------------------------------------ */
static uint32_t rng;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5; return rng; }
static float frand(void) { return (float)((rnd() >> 8) / 16777216.0) * 2.0f - 1.0f; }
static uint16_t enc(qp_dtype dt, float v) { return (uint16_t)qp_format_encode(dt, v); }
static float dec(qp_dtype dt, uint16_t b) { return qp_format_decode(dt, b); }

/* x rows: mostly N(0,1)-like with a few wide values; row 3 all zero, row 4
 * constant (the asymmetric edge cases of errata 11.2), row 6 has a NaN. */
static void make_x(qp_dtype dt, uint16_t *x, int M, int K, bool specials) {
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            float v = frand() * 2.0f;
            if ((rnd() & 31) == 0) v *= 8.0f;
            if (specials && m == 3) v = 0.0f;
            if (specials && m == 4) v = 0.75f;
            x[(size_t)m * K + k] = enc(dt, v);
        }
    if (specials && M > 6) x[(size_t)6 * K + K / 2] = 0x7E00 | (dt == QP_DTYPE_BF16 ? 0x7FC0 : 0);
}

/* ---- device helpers ---------------------------------------------------------- */
#define GUARD 256
#define MMAX 256
static const int Ms[] = {1, 2, 3, 5, 8, 16, 17, 64, 256};
#define NM ((int)(sizeof Ms / sizeof Ms[0]))

static int cases_run, cases_failed;

typedef struct run_bufs {
    void *x, *y;
    size_t ybytes;
    uint8_t *yhost;
} run_bufs;

static bool bufs_alloc(run_bufs *b, int Mmax, int K, int N) {
    b->ybytes = (size_t)Mmax * N * 2 + GUARD;
    b->yhost = malloc(b->ybytes);
    return ops->buffer_alloc(dev, (size_t)Mmax * K * 2, &b->x) == QP_OK &&
           ops->buffer_alloc(dev, b->ybytes, &b->y) == QP_OK && b->yhost;
}

static void bufs_free(run_bufs *b) {
    ops->buffer_free(dev, b->x);
    ops->buffer_free(dev, b->y);
    free(b->yhost);
}

/* Runs the layer on M rows; y (host, M*N) gets the output. Checks the guard. */
static bool run(void *lin, run_bufs *b, const uint16_t *x, int M, int K, int N, uint16_t *y, const char *what) {
    memset(b->yhost, 0xA5, b->ybytes);
    if (ops->buffer_upload(dev, b->y, 0, b->yhost, b->ybytes) != QP_OK ||
        ops->buffer_upload(dev, b->x, 0, x, (size_t)M * K * 2) != QP_OK) {
        CHECK(0, "%s: upload: %s", what, last_err);
        return false;
    }
    qp_status st = ops->linear_forward(dev, lin, b->x, M, b->y);
    if (st != QP_OK) { CHECK(0, "%s: forward M=%d: %s", what, M, last_err); return false; }
    if (ops->buffer_download(dev, b->y, 0, b->yhost, b->ybytes) != QP_OK) { CHECK(0, "%s: download", what); return false; }
    size_t used = (size_t)M * N * 2;
    for (size_t i = used; i < b->ybytes; i++)
        if (b->yhost[i] != 0xA5) { CHECK(0, "%s M=%d: guard band overwritten at byte %zu", what, M, i - used); return false; }
    memcpy(y, b->yhost, used);
    return true;
}

static bool same_bits(const uint16_t *a, const uint16_t *b, int M, int N, qp_dtype dt, const char *what) {
    for (int i = 0; i < M * N; i++)
        if (a[i] != b[i]) {
            CHECK(0, "%s: y[%d][%d] = 0x%04x (%g), reference 0x%04x (%g)", what, i / N, i % N, a[i], dec(dt, a[i]), b[i],
                  dec(dt, b[i]));
            return false;
        }
    return true;
}

static void path_name(unsigned p, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s%s", p & QP_PATH_GEMV ? "gemv" : p & QP_PATH_TILED ? "tiled" : "auto",
             p & QP_PATH_INT_DOT ? "+int-dot" : "", p & QP_PATH_NO_INT_DOT ? "+no-int-dot" : "", "");
}

static const unsigned int_paths[] = {QP_PATH_GEMV | QP_PATH_INT_DOT, QP_PATH_TILED | QP_PATH_INT_DOT,
                                     QP_PATH_GEMV | QP_PATH_NO_INT_DOT, QP_PATH_TILED | QP_PATH_NO_INT_DOT};

/* Prepares desc under each path and compares every M against ref[M index]. */
static void run_paths(qp_lin_desc *desc, const unsigned *paths, int n_paths, const int *ms, int n_ms,
                      const uint16_t *x, uint16_t *const *ref, qp_dtype out_dt, const char *name,
                      bool (*cmp)(const uint16_t *, int M, int mi, void *ctx, const char *what), void *cmp_ctx) {
    run_bufs b = {0};
    int mmax = 0;
    for (int i = 0; i < n_ms; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    if (!bufs_alloc(&b, mmax, desc->K, desc->N)) { CHECK(0, "%s: buffers: %s", name, last_err); bufs_free(&b); return; }
    uint16_t *y = malloc(sizeof(uint16_t) * (size_t)mmax * desc->N);
    for (int p = 0; p < n_paths; p++) {
        char pn[64], what[256], how[96];
        path_name(paths[p], pn, sizeof pn);
        void *lin = NULL;
        qp_status st = ops->linear_prepare(dev, desc, paths[p], &lin);
        if (st != QP_OK) { CHECK(0, "%s [%s]: prepare: %s", name, pn, last_err); continue; }
        for (int i = 0; i < n_ms; i++) {
            int M = ms[i];
            ops->linear_describe(dev, lin, M, how, sizeof how);
            snprintf(what, sizeof what, "%s [%s: %s] M=%d", name, pn, how, M);
            cases_run++;
            bool ok = run(lin, &b, x, M, desc->K, desc->N, y, what) &&
                      (cmp ? cmp(y, M, i, cmp_ctx, what) : same_bits(y, ref[i], M, desc->N, out_dt, what));
            if (!ok) cases_failed++;
            if (verbose) printf("%s %s\n", ok ? "ok  " : "FAIL", what);
        }
        ops->linear_destroy(dev, lin);
    }
    free(y);
    bufs_free(&b);
}

/* ---- W8A8-INT8 ------------------------------------------------------------- */
static void test_int8(qp_dtype dt, bool is_static, bool sym, bool bias, bool per_channel, int K, int N,
                      const unsigned *paths, int n_paths, const int *ms, int n_ms) {
    size_t nk = (size_t)N * K;
    int8_t *w = malloc(nk);
    float *ws = malloc(sizeof(float) * N);
    int32_t *adj = malloc(sizeof(int32_t) * N);
    uint16_t *bs = malloc(sizeof(uint16_t) * N), *x = malloc(sizeof(uint16_t) * (size_t)MMAX * K);
    for (size_t i = 0; i < nk; i++) w[i] = (int8_t)((int)(rnd() % 255) - 127);
    float s0 = 0.001f + 0.001f * (frand() + 1.0f);
    for (int n = 0; n < N; n++) ws[n] = per_channel ? 0.0005f + 0.001f * (frand() + 1.0f) : s0;
    for (int n = 0; n < N; n++) bs[n] = enc(dt, frand() * 4.0f);
    float in_scale = sym ? 0.021f : 0.017f;
    int32_t in_zp = sym ? 0 : 7;
    for (int n = 0; n < N; n++) {
        int64_t s = 0;
        for (int k = 0; k < K; k++) s += w[(size_t)n * K + k];
        adj[n] = is_static ? (int32_t)((uint32_t)s * (uint32_t)in_zp) : (int32_t)s;
    }
    make_x(dt, x, MMAX, K, true);
    uint16_t *ref[NM];
    int mmax = 0;
    for (int i = 0; i < n_ms; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    uint16_t *all = malloc(sizeof(uint16_t) * (size_t)mmax * N);
    qp_ref_int8_args a = {.dtype = dt, .x = x, .M = mmax, .K = K, .N = N, .w = w, .w_scale = ws,
                          .w_per_channel = per_channel, .is_static = is_static, .symmetric = sym,
                          .input_scale = in_scale, .input_zp = in_zp, .bias = bias ? bs : NULL};
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, all) == QP_OK, "int8 reference");
    for (int i = 0; i < n_ms; i++) ref[i] = all; /* rows are independent: prefixes */
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_INT8, .act_dtype = dt, .N = N, .K = K,
                     .layer = "int8", .act = is_static ? QP_ACT_INT8_STATIC : QP_ACT_INT8_DYNAMIC_TOKEN,
                     .act_symmetric = sym, .input_scale = in_scale, .input_zp = in_zp, .bias = bias ? bs : NULL,
                     .w_i8 = w, .w_scale = ws, .w_per_channel = per_channel, .azp_adj = sym ? NULL : adj};
    char name[160];
    snprintf(name, sizeof name, "int8 %s %s %s%s%s K=%d N=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             is_static ? "static" : "dynamic", sym ? "sym" : "asym", bias ? " bias" : "",
             per_channel ? " per-channel" : " per-tensor", K, N);
    run_paths(&d, paths, n_paths, ms, n_ms, x, ref, dt, name, NULL, NULL);
    free(w); free(ws); free(adj); free(bs); free(x); free(all);
}

/* ---- QQQ W4A8 ------------------------------------------------------------------ */
static void test_qqq(int group, bool bias, int K, int N, const unsigned *paths, int n_paths) {
    size_t kn = (size_t)K * N;
    int8_t *q = malloc(kn), *q4 = malloc(kn), *w8 = malloc(kn);
    int ng = K / 128 + 1;
    float *sc = malloc(sizeof(float) * N), *scp = malloc(sizeof(float) * N);
    uint16_t *sg = malloc(sizeof(uint16_t) * ng * N), *sgp = malloc(sizeof(uint16_t) * ng * N);
    int32_t *B = malloc(sizeof(int32_t) * (K / 16) * 2 * N);
    uint16_t *bs = malloc(sizeof(uint16_t) * N), *x = malloc(sizeof(uint16_t) * (size_t)MMAX * K);
    for (size_t i = 0; i < kn; i++) q[i] = (int8_t)(group == 128 ? (int)(rnd() % 16) : (int)(rnd() % 16) - 8);
    for (int n = 0; n < N; n++) sc[n] = 0.0001f + 0.0002f * (frand() + 1.0f);
    /* s_group up to ~20: |t*s| passes 127.5, exercising the wrap (errata 11.7) */
    for (int i = 0; i < (K / 128) * N; i++) sg[i] = enc(QP_DTYPE_F16, 0.5f + 10.0f * (frand() + 1.0f));
    for (int n = 0; n < N; n++) bs[n] = enc(QP_DTYPE_F16, frand() * 2.0f);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int8_t c = q[(size_t)k * N + n];
            q4[(size_t)n * K + k] = c;
            w8[(size_t)n * K + k] = group == 128 ? qp_ref_qqq_group_weight(c - 8, sg[(size_t)(k / 128) * N + n])
                                                 : (int8_t)(16 * c);
        }
    CHECK(qp_qqq_pack_weight(NULL, q, K, N, group, B) == QP_OK, "qqq pack");
    CHECK(qp_qqq_permute_scales(NULL, sc, group == 128 ? sg : NULL, K, N, group, scp, group == 128 ? sgp : NULL) == QP_OK,
          "qqq permute");
    make_x(QP_DTYPE_F16, x, MMAX, K, true);
    uint16_t *all = malloc(sizeof(uint16_t) * (size_t)MMAX * N), *ref[NM];
    CHECK(qp_ref_qqq_forward(NULL, x, MMAX, K, N, group, B, scp, group == 128 ? sgp : NULL, bias ? bs : NULL, all) == QP_OK,
          "qqq reference");
    for (int i = 0; i < NM; i++) ref[i] = all;
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_QQQ_W4A8, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "qqq", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .bias = bias ? bs : NULL,
                     .group_size = group, .q4 = q4, .w8 = w8, .s_channel = sc, .s_group = group == 128 ? sg : NULL,
                     .marlin_B = B, .marlin_s_channel = scp, .marlin_s_group = group == 128 ? sgp : NULL};
    char name[128];
    snprintf(name, sizeof name, "qqq group %d%s K=%d N=%d", group, bias ? " bias" : "", K, N);
    run_paths(&d, paths, n_paths, Ms, NM, x, ref, QP_DTYPE_F16, name, NULL, NULL);
    free(q); free(q4); free(w8); free(sc); free(scp); free(sg); free(sgp); free(B); free(bs); free(x); free(all);
}

/* ---- W8A8-FP8 ---------------------------------------------------------------- */
typedef struct fp8_cmp {
    qp_dtype dt;
    qp_lin_desc *d;
    const uint16_t *x;
    uint16_t *const *ref;
    const int *ms;
} fp8_cmp;

static double ulp_of(qp_dtype dt, double v) {
    int mb = dt == QP_DTYPE_BF16 ? 7 : 10, emin = dt == QP_DTYPE_BF16 ? -126 : -14;
    v = fabs(v);
    int e = emin;
    if (v > 0) { frexp(v, &e); e -= 1; if (e < emin) e = emin; }
    return ldexp(1.0, e - mb);
}

/* |y - ref| <= |s_a s_b| * gamma_K * sum|xq w| + one output ulp. */
static bool fp8_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    fp8_cmp *c = ctx_;
    qp_lin_desc *d = c->d;
    int K = d->K, N = d->N;
    float *xf = malloc(sizeof(float) * (size_t)M * K), *sx = malloc(sizeof(float) * M);
    uint8_t *xq = malloc((size_t)M * K);
    for (size_t i = 0; i < (size_t)M * K; i++) xf[i] = dec(c->dt, c->x[i]);
    if (d->act == QP_ACT_FP8_STATIC) { qp_quant_fp8_static(NULL, xf, (size_t)M * K, d->input_scale, xq); for (int m = 0; m < M; m++) sx[m] = d->input_scale; }
    else if (d->act == QP_ACT_FP8_DYNAMIC_TENSOR) { qp_quant_fp8_dynamic_tensor(NULL, xf, (size_t)M * K, xq, sx); for (int m = 1; m < M; m++) sx[m] = sx[0]; }
    else qp_quant_fp8_dynamic_token(NULL, xf, (size_t)M, (size_t)K, 0.0f, xq, sx);
    static double f8[256];
    if (f8[0x38] == 0.0)
        for (int i = 0; i < 256; i++) f8[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, (uint32_t)i);
    bool ok = true;
    double gamma = (double)K * ldexp(1.0, -24) * 1.01;
    for (int m = 0; m < M && ok; m++)
        for (int n = 0; n < N && ok; n++) {
            double sabs = 0;
            for (int k = 0; k < K; k++)
                sabs += fabs(f8[xq[(size_t)m * K + k]] * f8[d->w_u8[(size_t)n * K + k]]);
            uint16_t g = y[m * N + n], r = c->ref[mi][m * N + n];
            if (g == r) continue;
            double gv = dec(c->dt, g), rv = dec(c->dt, r);
            double bound = fabs((double)sx[m] * d->w_scale[n]) * gamma * sabs * 1.0001 +
                           ulp_of(c->dt, fmax(fabs(gv), fabs(rv)));
            if (!(fabs(gv - rv) <= bound)) {
                CHECK(0, "%s: y[%d][%d] = %.9g, reference %.9g, bound %.3g", what, m, n, gv, rv, bound);
                ok = false;
            }
        }
    free(xf); free(sx); free(xq);
    return ok;
}

static void test_fp8(qp_dtype dt, qp_act_mode act, bool bias, int K, int N, bool identity, const unsigned *paths,
                     int n_paths) {
    if (identity) N = K;
    size_t nk = (size_t)N * K;
    uint8_t *w = malloc(nk);
    float *ws = malloc(sizeof(float) * N);
    uint16_t *bs = malloc(sizeof(uint16_t) * N), *x = malloc(sizeof(uint16_t) * (size_t)MMAX * K);
    for (size_t i = 0; i < nk; i++) {
        uint8_t b = (uint8_t)rnd();
        if ((b & 0x7F) == 0x7F) b = 0x7E;
        w[i] = identity ? (i / K == i % K ? 0x38 : 0) : b;
    }
    for (int n = 0; n < N; n++) ws[n] = identity ? 1.0f : 0.0005f + 0.001f * (frand() + 1.0f);
    for (int n = 0; n < N; n++) bs[n] = enc(dt, frand() * 2.0f);
    make_x(dt, x, MMAX, K, false);
    float in_scale = 0.013f;
    qp_fp8_act ract = act == QP_ACT_FP8_STATIC ? QP_FP8_ACT_STATIC
                      : act == QP_ACT_FP8_DYNAMIC_TENSOR ? QP_FP8_ACT_DYNAMIC_TENSOR : QP_FP8_ACT_DYNAMIC_TOKEN;
    uint16_t *ref[NM];
    /* dynamic-tensor scales depend on M: one reference per M; otherwise rows
     * are independent and the M=256 reference serves every prefix */
    bool per_m = act == QP_ACT_FP8_DYNAMIC_TENSOR;
    for (int i = 0; i < NM; i++) {
        ref[i] = NULL;
        if (!per_m && i < NM - 1) continue;
        ref[i] = malloc(sizeof(uint16_t) * (size_t)Ms[i] * N);
        qp_ref_fp8_args a = {.dtype = dt, .x = x, .M = Ms[i], .K = K, .N = N, .w = w, .w_scale = ws, .w_per_channel = 1,
                             .act = ract, .input_scale = in_scale, .bias = bias ? bs : NULL};
        CHECK(qp_ref_w8a8_fp8_forward(NULL, &a, ref[i]) == QP_OK, "fp8 reference");
    }
    uint16_t *ref_free[NM];
    memcpy(ref_free, ref, sizeof ref);
    if (!per_m)
        for (int i = 0; i < NM - 1; i++) ref[i] = ref[NM - 1];
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_FP8, .act_dtype = dt, .N = N, .K = K,
                     .layer = "fp8", .act = act, .input_scale = in_scale, .bias = bias ? bs : NULL, .w_u8 = w,
                     .w_scale = ws, .w_per_channel = 1};
    char name[160];
    snprintf(name, sizeof name, "fp8 %s %s%s%s K=%d N=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             act == QP_ACT_FP8_STATIC ? "static" : act == QP_ACT_FP8_DYNAMIC_TENSOR ? "dynamic-tensor" : "dynamic-token",
             bias ? " bias" : "", identity ? " identity (exact)" : "", K, N);
    fp8_cmp c = {.dt = dt, .d = &d, .x = x, .ref = ref, .ms = Ms};
    run_paths(&d, paths, n_paths, Ms, NM, x, ref, dt, name, identity ? NULL : fp8_bound, &c);
    for (int i = 0; i < NM; i++) free(ref_free[i]);
    free(w); free(ws); free(bs); free(x);
}

/* ---- timing (informational) ----------------------------------------------------- */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Mean wall time of a forward (submit + wait included) for a prepared desc. */
static void time_forward(qp_lin_desc *desc, unsigned path, int M, int reps, const char *name) {
    void *lin = NULL, *xb = NULL, *yb = NULL;
    if (ops->linear_prepare(dev, desc, path, &lin) != QP_OK ||
        ops->buffer_alloc(dev, (size_t)M * desc->K * 2, &xb) != QP_OK ||
        ops->buffer_alloc(dev, (size_t)M * desc->N * 2, &yb) != QP_OK) {
        CHECK(0, "timing %s: %s", name, last_err);
    } else {
        uint16_t *x = calloc((size_t)M * desc->K, 2);
        make_x(desc->act_dtype, x, M, desc->K, false);
        ops->buffer_upload(dev, xb, 0, x, (size_t)M * desc->K * 2);
        free(x);
        char how[96];
        ops->linear_describe(dev, lin, M, how, sizeof how);
        ops->linear_forward(dev, lin, xb, M, yb); /* pipelines */
        double t = now_s();
        for (int r = 0; r < reps; r++) ops->linear_forward(dev, lin, xb, M, yb);
        t = (now_s() - t) / reps;
        double wb = desc->kind == QP_SCHEME_QQQ_W4A8 || desc->kind == QP_SCHEME_NVFP4 ? 0.5
                    : desc->kind == QP_SCHEME_OCP_MX && desc->w_elem == QP_DTYPE_F4_E2M1 ? 0.5
                    : desc->kind == QP_SCHEME_UNQUANTIZED ? 2.0 : 1.0;
        printf("  %-28s M=%-4d %-34s %8.2f ms  %7.2f GB/s weights  %7.1f GOP/s\n", name, M, how, 1e3 * t,
               (double)desc->N * desc->K * wb / t * 1e-9,
               2.0 * M * desc->N * desc->K / t * 1e-9);
    }
    ops->buffer_free(dev, xb);
    ops->buffer_free(dev, yb);
    if (lin) ops->linear_destroy(dev, lin);
}

static void timings(bool have_dot) {
    int N = 4096, K = 4096;
    size_t nk = (size_t)N * K;
    int8_t *w = malloc(nk), *q4 = malloc(nk);
    float *ws = malloc(sizeof(float) * N);
    for (size_t i = 0; i < nk; i++) { w[i] = (int8_t)((int)(rnd() % 255) - 127); q4[i] = (int8_t)((int)(rnd() % 16) - 8); }
    for (int n = 0; n < N; n++) ws[n] = 1e-3f;
    int8_t *w8 = malloc(nk);
    for (size_t i = 0; i < nk; i++) w8[i] = (int8_t)(16 * q4[i]);
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_INT8, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .w_i8 = w, .w_scale = ws,
                     .w_per_channel = 1};
    qp_lin_desc q = {.struct_size = sizeof q, .kind = QP_SCHEME_QQQ_W4A8, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing-qqq", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .group_size = -1,
                     .q4 = q4, .w8 = w8, .s_channel = ws};
    printf("timings, 4096x4096 (informational; CPU-class devices say little about GPUs):\n");
    if (getenv("QPORT_TEST_TIMING_DEBUG")) {
        qp_lin_desc t = d;
        t.N = 64; t.K = 64;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "tiny 64x64");
        t.N = 4096; t.K = 64;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "N4096 K64");
        t.N = 64; t.K = 4096;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "N64 K4096");
        time_forward(&d, QP_PATH_NO_INT_DOT | QP_PATH_TILED, 1, 5, "int8 tiled M=1");
    }
    time_forward(&d, QP_PATH_NO_INT_DOT, 1, 5, "int8 dyn-sym");
    if (have_dot) time_forward(&d, QP_PATH_INT_DOT, 1, 5, "int8 dyn-sym");
    time_forward(&q, QP_PATH_NO_INT_DOT, 1, 5, "qqq channel (int4)");
    if (getenv("QPORT_TEST_TIMING")) { /* seconds each on lavapipe: opt-in */
        time_forward(&d, QP_PATH_NO_INT_DOT, 256, 2, "int8 dyn-sym");
        if (have_dot) time_forward(&d, QP_PATH_INT_DOT, 256, 2, "int8 dyn-sym");
    }
    free(w); free(q4); free(w8); free(ws);
}

/* ---- W4A16 (spec 6.7) --------------------------------------------------------------
 * Quark checkpoint tensors made here (random codes packed with
 * qp_pack_int4_quark, order / reorder; act-dtype scales [K/g][N], or the
 * padded [K/g][8*ceil(N/8)]; uint4 zero points), paths auto / GEMV / tiled,
 * M in {1, 3, 16, 17, 70}, judged against
 * qp_ref_w4a16_forward within |y - ref| <= (K + 2) u sum_k |x_k w_k| + 2 ulp
 * (fp32 accumulation of exact dequantized weights, bias in one fp32 add, as
 * tests/test_cl.c). A NaN in the reference must be a NaN on the device. */
typedef struct w4_cmp {
    qp_dtype dt;
    int K, N;
    const uint16_t *x, *ref;
    const float *wd; /* dequantized weights [N][K] */
} w4_cmp;

static bool w4a16_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    (void)mi;
    w4_cmp *c = ctx_;
    int K = c->K, N = c->N, bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ts = 0;
            for (int k = 0; k < K; k++) {
                double xv = fabs((double)dec(c->dt, c->x[(size_t)m * K + k]));
                if (!isnan(xv)) ts += xv * fabs((double)c->wd[(size_t)n * K + k]);
            }
            double r = dec(c->dt, c->ref[(size_t)m * N + n]), g = dec(c->dt, y[(size_t)m * N + n]);
            double tol = (K + 2.0) * ldexp(1.0, -24) * 1.01 * ts + 2.0 * ulp_of(c->dt, fabs(r));
            bool ok = isnan(r) ? isnan(g) : fabs(g - r) <= tol;
            if (!ok && bad++ < 3) CHECK(0, "%s: y[%d][%d] = %.9g, reference %.9g, bound %.3g", what, m, n, g, r, tol);
        }
    return bad == 0;
}

static void test_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, bool has_bias, bool padded, int N, int K) {
    static const int ms[] = {1, 3, 16, 17, 70};
    static const unsigned paths[] = {QP_PATH_AUTO, QP_PATH_GEMV | QP_PATH_NO_INT_DOT, QP_PATH_TILED};
    const int nms = 5, MM = 70;
    int g = group > 0 ? group : K, G = K / g, nc = (N + 7) / 8;
    uint8_t *codes = malloc((size_t)K * N), *zc = malloc((size_t)G * N);
    int32_t *W = calloc((size_t)K * nc, 4), *Z = calloc((size_t)G * nc, 4);
    uint16_t *sc = calloc((size_t)G * 8 * nc, 2), *sck = calloc((size_t)G * 8 * nc, 2), *bias = malloc(2 * (size_t)N);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    float *wd = malloc(sizeof(float) * (size_t)K * N);
    for (size_t i = 0; i < (size_t)K * N; i++) codes[i] = (uint8_t)(rnd() & 15);
    for (size_t i = 0; i < (size_t)G * N; i++) zc[i] = (uint8_t)(rnd() & 15);
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) /* a few negative and tiny scales too */
            sc[(size_t)gi * 8 * nc + n] =
                enc(dt, (n % 13 == 5 ? -1.0f : 1.0f) * (n % 17 == 3 ? 1e-6f : 0.002f + 0.02f * fabsf(frand())));
    for (int n = 0; n < N; n++) bias[n] = enc(dt, frand() * 2.0f);
    qp_status st = qp_pack_int4_quark(codes, K, N, pack, W);
    if (st == QP_OK && !sym) st = qp_pack_int4_quark(zc, G, N, pack, Z);
    CHECK(st == QP_OK, "w4a16: pack failed");
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int cd = codes[(size_t)k * N + n], v = sym ? cd - 16 * (cd >= 8) : cd - zc[(size_t)(k / g) * N + n];
            wd[(size_t)n * K + k] = (float)v * dec(dt, sc[(size_t)(k / g) * 8 * nc + n]);
        }
    int sw = padded ? 8 * nc : N;
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < sw; n++) sck[(size_t)gi * sw + n] = sc[(size_t)gi * 8 * nc + n];
    make_x(dt, x, MM, K, true);
    qp_ref_w4a16_args a = {dt, x, MM, K, N, W, sym ? NULL : Z, sc, group, sym, pack, has_bias ? bias : NULL};
    CHECK(qp_ref_w4a16_forward(NULL, &a, ref) == QP_OK, "w4a16 reference");
    /* the canonical fields the core binds (api/linear_desc.c): q4 [N][K]
     * stored codes, w4_zero / w4_scale [G][N] */
    int8_t *q4 = malloc((size_t)K * N);
    uint8_t *wz = malloc((size_t)G * N);
    float *wsf = malloc(sizeof(float) * (size_t)G * N);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) q4[(size_t)n * K + k] = (int8_t)codes[(size_t)k * N + n];
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) {
            wz[(size_t)gi * N + n] = zc[(size_t)gi * N + n];
            wsf[(size_t)gi * N + n] = dec(dt, sck[(size_t)gi * sw + n]);
        }
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W4A16_INT4;
    d.scheme.weight.group_size = group;
    d.scheme.weight.symmetric = sym;
    d.scheme.pack_method = pack;
    d.act_dtype = dt;
    d.N = N;
    d.K = K;
    d.layer = "w4a16";
    d.bias = has_bias ? bias : NULL;
    d.group_size = group;
    d.q4 = q4;
    d.w4_signed = sym;
    d.w4_zero = sym ? NULL : wz;
    d.w4_scale = wsf;
    char name[200];
    snprintf(name, sizeof name, "w4a16 %s %s %s g%d%s%s K=%d N=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             sym ? "int4" : "uint4", pack == QP_PACK_ORDER ? "order" : "reorder", group, has_bias ? " bias" : "",
             padded ? " padded-scales" : "", K, N);
    w4_cmp c = {.dt = dt, .K = K, .N = N, .x = x, .ref = ref, .wd = wd};
    uint16_t *refs[5] = {ref, ref, ref, ref, ref}; /* rows are independent: the M=70 reference serves every prefix */
    run_paths(&d, paths, 3, ms, nms, x, refs, dt, name, w4a16_bound, &c);
    /* a forced integer dot product on this float layer: a clear QP_ERR_UNSUPPORTED */
    void *lin = NULL;
    last_err[0] = 0;
    st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(last_err, "w4a16") && strstr(last_err, "int-dot"),
          "%s: forced int-dot: %d '%s'", name, (int)st, last_err);
    if (lin) ops->linear_destroy(dev, lin);
    free(codes); free(zc); free(W); free(Z); free(sc); free(sck); free(bias); free(x); free(ref); free(wd);
    free(q4); free(wz); free(wsf);
}

static void test_w4a16_faults(void) {
    /* group size not a multiple of 32; a uint4 layer without w4_zero */
    int K = 96, N = 16;
    int8_t q4[96 * 16] = {0};
    float sc[6 * 16] = {0};
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_W4A16_INT4;
    d.scheme.weight.group_size = 16;
    d.scheme.weight.symmetric = 1;
    d.scheme.pack_method = QP_PACK_ORDER;
    d.act_dtype = QP_DTYPE_F16;
    d.N = N;
    d.K = K;
    d.layer = "w4a16-bad";
    d.group_size = 16;
    d.q4 = q4;
    d.w4_signed = 1;
    d.w4_scale = sc;
    void *lin = NULL;
    qp_status st = ops->linear_prepare(dev, &d, QP_PATH_AUTO, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(last_err, "group size 16"), "w4a16 g16: %d '%s'", (int)st, last_err);
    qp_support_info si = {0};
    CHECK(ops->device_supports(dev, &d.scheme, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "w4a16 g16 support level %d '%s'", (int)si.level, si.reason);
    d.scheme.weight.group_size = d.group_size = 32;
    d.scheme.weight.symmetric = d.w4_signed = 0; /* uint4 without zero points */
    st = ops->linear_prepare(dev, &d, QP_PATH_AUTO, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(last_err, "w4_zero"), "w4a16 no zp: %d '%s'", (int)st,
          last_err);
    CHECK(ops->device_supports(dev, &d.scheme, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE,
          "w4a16 g32 support level %d '%s'", (int)si.level, si.reason);
}

/* ---- issue 9: float-weight layers (OCP-MX, W4A8-MXFP4-FP8, NVFP4,
 * unquantized) and W8A8-FP8 per-block ------------------------------------------
 * The canonical qp_lin_desc fields are built here the way api/linear_desc.c
 * binds them (w_codes + w_lut + w_blk_scale; block scales kept where the
 * reference's dequantization is an exact power of two or an fp32 product),
 * the reference runs on the checkpoint tensors. Selection weights (one code
 * of value 1 per row, block multiplier 1) make y[m][n] = x'[m][k_n], so the
 * activation qdq is checked bit for bit; random layers within the bound
 * (K + 2) u 1.01 sum |x'_k| |W_k| + 2 ulp (x' from the reference itself
 * through an identity weight). */
typedef enum fl_kind { FL_MX = 0, FL_W4A8, FL_NVFP4, FL_UNQ, FL_FP8B } fl_kind;

typedef struct fl_case {
    fl_kind kind;
    qp_dtype dt, w_elem;
    qp_ocp_mx_act act;
    int K, N;
    bool sel, bias;
    int ue8m0;
} fl_case;

typedef struct fl_layer {
    const fl_case *c;
    int K, N;
    uint8_t *codes;     /* [N][K] */
    uint8_t *packed;    /* reference weight tensor */
    uint8_t *sc8;       /* e8m0 [N][K/32] or e4m3 [N][K/16] */
    float *blk;         /* canonical multipliers [N][K/blk]; FP8B: w_scale blocks */
    float lut[256];
    uint16_t *wact;     /* unquantized [N][K] */
    uint16_t *bias;
    float w2, in_scale, in_gscale;
    double *wd;         /* exact dequantized weights [N][K] */
} fl_layer;

static const char *elem_name(qp_dtype e) {
    return e == QP_DTYPE_F4_E2M1 ? "fp4" : e == QP_DTYPE_F6_E3M2 ? "fp6e3m2" : e == QP_DTYPE_F6_E2M3 ? "fp6e2m3" : "fp8";
}

static int elem_bits(qp_dtype e) { return e == QP_DTYPE_F4_E2M1 ? 4 : e == QP_DTYPE_F8_E4M3FN ? 8 : 6; }

/* the code whose value is 1.0 */
static uint8_t code_one(qp_dtype e) {
    return e == QP_DTYPE_F4_E2M1 ? 0x2 : e == QP_DTYPE_F6_E2M3 ? 0x08 : e == QP_DTYPE_F6_E3M2 ? 0x0C : 0x38;
}

/* x rows for the qdq paths: random with wide and narrow blocks, then
 * specials: 3 zero, 4 constant, 5 a NaN, 6 an inf, 7 huge (saturation),
 * 8 tiny, 9 negative zeros, 10 ties-rich multiples of 1/8. */
static void make_fl_x(qp_dtype dt, uint16_t *x, int M, int K) {
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            float v = frand() * 2.0f;
            if ((k / 32) % 3 == 1) v *= 40.0f;
            if ((k / 32) % 5 == 2) v *= 0.001f;
            if ((rnd() & 31) == 0) v *= 16.0f;
            if (m == 3) v = 0.0f;
            if (m == 4) v = 0.75f;
            if (m == 7) v = frand() * (dt == QP_DTYPE_BF16 ? 1e30f : 60000.0f);
            if (m == 8) v = frand() * (dt == QP_DTYPE_BF16 ? 3e-39f : 1e-4f);
            if (m == 9) v = -0.0f;
            if (m == 10) v = (float)((int)(rnd() % 97) - 48) / 8.0f;
            x[(size_t)m * K + k] = enc(dt, v);
        }
    if (M > 6) {
        x[(size_t)5 * K + K / 2] = dt == QP_DTYPE_BF16 ? 0x7FC0 : 0x7E00;
        x[(size_t)5 * K + 1] = dt == QP_DTYPE_BF16 ? 0xFFC0 : 0xFE00; /* a negative NaN */
        x[(size_t)6 * K + 3] = dt == QP_DTYPE_BF16 ? 0x7F80 : 0x7C00;
        x[(size_t)6 * K + K - 1] = dt == QP_DTYPE_BF16 ? 0xFF80 : 0xFC00;
    }
}

static void fl_free(fl_layer *L) {
    free(L->codes); free(L->packed); free(L->sc8); free(L->blk); free(L->wact); free(L->bias); free(L->wd);
}

static void fl_make(const fl_case *c, int N, bool identity, fl_layer *L) {
    memset(L, 0, sizeof *L);
    L->c = c;
    int K = c->K;
    L->K = K;
    L->N = N;
    size_t nk = (size_t)N * K;
    qp_dtype dt = c->dt;
    L->codes = calloc(nk, 1);
    L->wd = calloc(nk, sizeof(double));
    L->bias = malloc(2 * (size_t)N);
    for (int n = 0; n < N; n++) L->bias[n] = enc(dt, frand() * 2.0f);
    bool sel = c->sel || identity;
    int kn_mul = identity ? 1 : 7, kn_add = identity ? 0 : 3;
    if (c->kind == FL_UNQ) {
        L->wact = malloc(2 * nk);
        for (size_t i = 0; i < nk; i++) {
            int n = (int)(i / K), k = (int)(i % K);
            L->wact[i] = sel ? enc(dt, k == (n * kn_mul + kn_add) % K ? 1.0f : 0.0f) : enc(dt, frand() * 0.1f);
            L->wd[i] = dec(dt, L->wact[i]);
        }
        return;
    }
    if (c->kind == FL_FP8B) {
        int gn = (N + 127) / 128, gk = K / 128;
        L->blk = malloc(sizeof(float) * (size_t)gn * gk);
        for (int i = 0; i < gn * gk; i++) L->blk[i] = sel ? 1.0f : 0.001f + 0.002f * fabsf(frand());
        for (size_t i = 0; i < nk; i++) {
            int n = (int)(i / K), k = (int)(i % K);
            uint8_t b = (uint8_t)rnd();
            if ((b & 0x7F) == 0x7F) b = 0x7E;
            L->codes[i] = sel ? (k == (n * kn_mul + kn_add) % K ? 0x38 : 0) : b;
            L->wd[i] = (double)qp_format_decode(QP_DTYPE_F8_E4M3FN, L->codes[i]) * L->blk[(n / 128) * gk + k / 128];
        }
        return;
    }
    qp_dtype we = c->kind == FL_MX ? c->w_elem : QP_DTYPE_F4_E2M1;
    int bits = elem_bits(we), blk = c->kind == FL_NVFP4 ? 16 : 32, nb = K / blk;
    uint32_t mask = (1u << bits) - 1u;
    for (size_t i = 0; i < nk; i++) {
        int n = (int)(i / K), k = (int)(i % K);
        uint8_t r8 = (uint8_t)(rnd() & mask);
        if (bits == 8 && (r8 & 0x7F) == 0x7F) r8 = 0x7E;
        L->codes[i] = sel ? (k == (n * kn_mul + kn_add) % K ? code_one(we) : 0) : r8;
    }
    for (int i = 0; i < 256; i++) L->lut[i] = qp_format_decode(we, (uint32_t)i & mask);
    L->sc8 = malloc((size_t)N * nb);
    L->blk = malloc(sizeof(float) * (size_t)N * nb);
    L->w2 = sel ? 1.0f : 0.75f;
    for (int i = 0; i < N * nb; i++) {
        if (c->kind == FL_NVFP4) {
            L->sc8[i] = sel ? 0x38 : (uint8_t)(0x30 + rnd() % 17); /* e4m3 0.5 .. 2 */
            L->blk[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, L->sc8[i]) * L->w2;
        } else {
            L->sc8[i] = sel ? 127 : (uint8_t)(124 + rnd() % 6); /* 2^-3 .. 2^2: exact in fp16 and bf16 */
            L->blk[i] = ldexpf(1.0f, (int)L->sc8[i] - 127);
        }
    }
    for (size_t i = 0; i < nk; i++)
        L->wd[i] = dec(dt, enc(dt, L->lut[L->codes[i]] * L->blk[(i / K) * nb + (i % K) / blk]));
    size_t pb = we == QP_DTYPE_F4_E2M1 ? nk / 2 : we == QP_DTYPE_F8_E4M3FN ? nk : nk * 3 / 4;
    L->packed = malloc(pb);
    if (we == QP_DTYPE_F4_E2M1) qp_pack_fp4(L->codes, nk, L->packed);
    else if (we == QP_DTYPE_F8_E4M3FN) memcpy(L->packed, L->codes, nk);
    else qp_pack_fp6(L->codes, nk, L->packed);
    L->in_scale = 0.0123f;
    L->in_gscale = 0.37f;
}

static qp_status fl_ref(const fl_layer *L, const uint16_t *x, int M, bool bias, uint16_t *y) {
    const fl_case *c = L->c;
    const void *b = bias ? L->bias : NULL;
    switch (c->kind) {
    case FL_MX: {
        qp_ref_ocp_mx_args a = {c->dt, x, M, L->K, L->N, c->w_elem, L->packed, L->sc8, 1, c->act, b};
        return qp_ref_ocp_mx_forward(NULL, &a, y);
    }
    case FL_W4A8: {
        qp_ref_w4a8_mxfp4_args a = {c->dt, x, M, L->K, L->N, L->packed, L->sc8, L->in_scale, b};
        return qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y);
    }
    case FL_NVFP4: {
        qp_ref_nvfp4_args a = {c->dt, x, M, L->K, L->N, L->packed, L->sc8, L->w2, L->in_gscale, b};
        return qp_ref_nvfp4_forward(NULL, &a, y);
    }
    case FL_UNQ: return qp_ref_unquantized_forward(NULL, c->dt, x, M, L->K, L->N, L->wact, b, y);
    default: {
        qp_ref_fp8_args a = {.dtype = c->dt, .x = x, .M = M, .K = L->K, .N = L->N, .w = L->codes, .w_scale = L->blk,
                             .w_per_channel = 1, .act = QP_FP8_ACT_GROUP128, .ue8m0 = c->ue8m0, .bias = b};
        return qp_ref_w8a8_fp8_forward(NULL, &a, y);
    }
    }
}

static void fl_desc(const fl_layer *L, bool bias, qp_lin_desc *d) {
    const fl_case *c = L->c;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->act_dtype = c->dt;
    d->N = L->N;
    d->K = L->K;
    d->layer = "fl";
    d->bias = bias ? L->bias : NULL;
    switch (c->kind) {
    case FL_UNQ: d->kind = QP_SCHEME_UNQUANTIZED; d->w_act = L->wact; d->act = QP_ACT_NONE; break;
    case FL_FP8B:
        d->kind = QP_SCHEME_W8A8_FP8_BLOCK; d->w_u8 = L->codes; d->w_scale = L->blk; d->w_per_channel = 1;
        d->act = QP_ACT_FP8_GROUP128; d->ue8m0 = c->ue8m0;
        break;
    default:
        d->kind = c->kind == FL_MX ? QP_SCHEME_OCP_MX : c->kind == FL_W4A8 ? QP_SCHEME_W4A8_MXFP4_FP8 : QP_SCHEME_NVFP4;
        d->w_elem = c->kind == FL_MX ? c->w_elem : QP_DTYPE_F4_E2M1;
        d->w_codes = L->codes;
        d->w_lut = L->lut;
        d->w_blk = c->kind == FL_NVFP4 ? 16 : 32;
        d->w_blk_scale = L->blk;
        if (c->kind == FL_W4A8) { d->act = QP_ACT_FP8_STATIC_QDQ; d->input_scale = L->in_scale; }
        if (c->kind == FL_NVFP4) { d->act = QP_ACT_NVFP4_QDQ; d->input_global_scale = L->in_gscale; d->bias_after_round = 1; }
        if (c->kind == FL_MX && c->act != QP_OCP_MX_ACT_NONE) {
            static const qp_dtype ae[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3, QP_DTYPE_F8_E4M3FN};
            static const int mb[] = {0, 1, 2, 3, 3}, em[] = {0, 2, 4, 2, 8};
            d->act = QP_ACT_MX_QDQ;
            d->act_elem = ae[c->act];
            d->act_mbits = mb[c->act];
            d->act_emax = em[c->act];
        }
        break;
    }
    d->scheme.kind = d->kind;
}

typedef struct fl_cmp {
    const fl_layer *L;
    const uint16_t *x, *ref;
    double *xa;  /* |x'| [MM][K] (or the fp8-block activation term) */
    bool bias;
} fl_cmp;

static bool fl_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    (void)mi;
    fl_cmp *c = ctx_;
    const fl_layer *L = c->L;
    qp_dtype dt = L->c->dt;
    int K = L->K, N = L->N, bad = 0;
    bool fp8b = L->c->kind == FL_FP8B;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            uint16_t g = y[(size_t)m * N + n], r = c->ref[(size_t)m * N + n];
            if (g == r) continue;
            double ts = 0;
            for (int k = 0; k < K; k++) {
                double t = c->xa[(size_t)m * K + k] * fabs(L->wd[(size_t)n * K + k]);
                if (!isnan(t)) ts += t;
            }
            double rv = dec(dt, r), gv = dec(dt, g);
            double gam = fp8b ? (132.0 + K / 128.0) : (K + 2.0);
            double tol = gam * ldexp(1.0, -24) * 1.01 * ts + 2.0 * ulp_of(dt, fabs(rv));
            if (L->c->kind == FL_NVFP4 && c->bias) tol += ulp_of(dt, fabs(rv - dec(dt, L->bias[n])));
            bool ok = isnan(rv) ? isnan(gv) : isinf(rv) ? gv == rv : fabs(gv - rv) <= tol;
            if (!ok && bad++ < 3) CHECK(0, "%s: y[%d][%d] = %.9g, reference %.9g, bound %.3g", what, m, n, gv, rv, tol);
        }
    return bad == 0;
}

static void test_fl(const fl_case *c) {
    static const int ms[] = {1, 3, 16, 17, 64};
    static const unsigned paths[] = {QP_PATH_AUTO, QP_PATH_GEMV, QP_PATH_TILED};
    const int nms = 5, MM = 64;
    int K = c->K, N = c->sel ? c->K : c->N;
    fl_layer L;
    fl_make(c, N, false, &L);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    make_fl_x(c->dt, x, MM, K);
    CHECK(fl_ref(&L, x, MM, c->bias, ref) == QP_OK, "float-layer reference");
    qp_lin_desc d;
    fl_desc(&L, c->bias, &d);
    char name[200];
    static const char *const kn[] = {"ocp-mx", "w4a8-mxfp4-fp8", "nvfp4", "unquantized", "fp8-block"};
    static const char *const an[] = {"none", "mxfp4", "mxfp6e3m2", "mxfp6e2m3", "mxfp8"};
    snprintf(name, sizeof name, "%s %s%s%s%s%s%s%s K=%d N=%d", kn[c->kind], c->dt == QP_DTYPE_BF16 ? "bf16" : "fp16",
             c->kind == FL_MX ? " w=" : "", c->kind == FL_MX ? elem_name(c->w_elem) : "", c->kind == FL_MX ? " a=" : "",
             c->kind == FL_MX ? an[c->act] : "", c->ue8m0 ? " ue8m0" : "",
             c->sel ? " selection (exact)" : c->bias ? " bias" : "", K, N);
    uint16_t *refs[5] = {ref, ref, ref, ref, ref};
    fl_cmp cc = {.L = &L, .x = x, .ref = ref, .bias = c->bias};
    if (!c->sel) {
        /* |x'| through an identity weight (the reference's own qdq) */
        cc.xa = malloc(sizeof(double) * (size_t)MM * K);
        if (c->kind == FL_FP8B) {
            for (int m = 0; m < MM; m++)
                for (int g0 = 0; g0 < K; g0 += 128) {
                    double amax = 0;
                    for (int k = g0; k < g0 + 128; k++) {
                        double v = fabs((double)dec(c->dt, x[(size_t)m * K + k]));
                        if (v > amax) amax = v;
                    }
                    double sg = 2.0 * fmax(1e-10, amax) / 448.0;
                    for (int k = g0; k < g0 + 128; k++)
                        cc.xa[(size_t)m * K + k] = fabs((double)dec(c->dt, x[(size_t)m * K + k])) * 1.0625 + 0x1p-10 * sg;
                }
        } else if (c->kind == FL_UNQ || (c->kind == FL_MX && c->act == QP_OCP_MX_ACT_NONE)) {
            for (size_t i = 0; i < (size_t)MM * K; i++) cc.xa[i] = fabs((double)dec(c->dt, x[i]));
        } else {
            fl_layer I;
            fl_case ci = *c;
            ci.sel = true;
            fl_make(&ci, K, true, &I);
            uint16_t *xp = malloc(2 * (size_t)MM * K);
            CHECK(fl_ref(&I, x, MM, false, xp) == QP_OK, "identity reference");
            for (size_t i = 0; i < (size_t)MM * K; i++) cc.xa[i] = fabs((double)dec(c->dt, xp[i]));
            free(xp);
            fl_free(&I);
        }
    }
    run_paths(&d, paths, 3, ms, nms, x, refs, c->dt, name, c->sel ? NULL : fl_bound, &cc);
    free(cc.xa);
    free(x); free(ref);
    fl_free(&L);
}

static void test_fl_all(void) {
    const qp_dtype F = QP_DTYPE_F16, B = QP_DTYPE_BF16, F4 = QP_DTYPE_F4_E2M1, E3 = QP_DTYPE_F6_E3M2,
                   E2 = QP_DTYPE_F6_E2M3, F8 = QP_DTYPE_F8_E4M3FN;
    const fl_case cases[] = {
        /* bit-exact qdq through selection weights, fp16 and bf16 */
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 96, 0, true, false, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 0, true, false, 0},
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_MX, B, F8, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_W4A8, F, F4, 0, 96, 0, true, false, 0},
        {FL_W4A8, B, F4, 0, 96, 0, true, false, 0},
        {FL_NVFP4, F, F4, 0, 144, 0, true, false, 0},
        {FL_NVFP4, B, F4, 0, 144, 0, true, true, 0},
        {FL_UNQ, F, 0, 0, 96, 0, true, false, 0},
        {FL_FP8B, F, 0, 0, 128, 0, true, false, 0},
        {FL_FP8B, B, 0, 0, 128, 0, true, false, 1},
        {FL_FP8B, F, 0, 0, 256, 0, true, false, 1}, /* two groups: an inf group scale meets a zero part */
        /* random layers within the bound (K not a multiple of the 32-chunk
         * for NVFP4, N around the tiles) */
        {FL_MX, F, F4, QP_OCP_MX_ACT_NONE, 160, 67, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 192, 65, false, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 128, 33, false, true, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 70, false, false, 0},
        {FL_MX, F, F8, QP_OCP_MX_ACT_MXFP8, 128, 64, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP8, 64, 129, false, true, 0},
        {FL_W4A8, F, F4, 0, 160, 66, false, true, 0},
        {FL_W4A8, B, F4, 0, 96, 31, false, false, 0},
        {FL_NVFP4, F, F4, 0, 208, 65, false, true, 0},
        {FL_NVFP4, B, F4, 0, 48, 40, false, false, 0},
        {FL_UNQ, F, 0, 0, 100, 67, false, true, 0},
        {FL_UNQ, B, 0, 0, 257, 130, false, false, 0},
        {FL_FP8B, F, 0, 0, 256, 130, false, true, 0},
        {FL_FP8B, B, 0, 0, 384, 64, false, false, 1},
        {FL_FP8B, F, 0, 0, 128, 257, false, true, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_fl(&cases[i]);
}

/* ---- rotation, fp8 KV cache, timing and copies ------------------------------------ */
static void test_rotation(qp_dtype dt, int r, int M, int K) {
    int8_t *H = malloc((size_t)r * r);
    for (int i = 0; i < r; i++) /* Sylvester Hadamard: (-1)^popcount(i & j) */
        for (int j = 0; j < r; j++) H[(size_t)i * r + j] = (int8_t)(__builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1);
    uint16_t *x = malloc(2 * (size_t)M * K), *ref = malloc(2 * (size_t)M * K), *y = malloc(2 * (size_t)M * K + GUARD);
    make_fl_x(dt, x, M, K);
    CHECK(qp_ref_rotation_forward(NULL, dt, x, M, K, H, r, ref) == QP_OK, "rotation reference");
    void *rot = NULL, *xb = NULL, *yb = NULL;
    char what[96];
    snprintf(what, sizeof what, "rotation %s r=%d M=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", r, M, K);
    qp_status st = ops->rotation_prepare(dev, H, r, qp_rotation_norm(r), &rot);
    CHECK(st == QP_OK, "%s: prepare: %s", what, last_err);
    size_t yb_bytes = 2 * (size_t)M * K + GUARD;
    if (st == QP_OK && ops->buffer_alloc(dev, 2 * (size_t)M * K, &xb) == QP_OK &&
        ops->buffer_alloc(dev, yb_bytes, &yb) == QP_OK) {
        memset(y, 0xA5, yb_bytes);
        ops->buffer_upload(dev, yb, 0, y, yb_bytes);
        ops->buffer_upload(dev, xb, 0, x, 2 * (size_t)M * K);
        st = ops->rotation_forward(dev, rot, dt, xb, M, K, yb);
        CHECK(st == QP_OK, "%s: forward: %s", what, last_err);
        ops->buffer_download(dev, yb, 0, y, yb_bytes);
        cases_run++;
        bool ok = same_bits(y, ref, M, K, dt, what);
        for (size_t i = 2 * (size_t)M * K; i < yb_bytes; i++)
            if (((uint8_t *)y)[i] != 0xA5) { CHECK(0, "%s: guard band overwritten", what); ok = false; break; }
        if (!ok) cases_failed++;
        /* in place (x and y one buffer): the same bits */
        ops->buffer_upload(dev, yb, 0, x, 2 * (size_t)M * K);
        st = ops->rotation_forward(dev, rot, dt, yb, M, K, yb);
        CHECK(st == QP_OK, "%s: in place: %s", what, last_err);
        ops->buffer_download(dev, yb, 0, y, 2 * (size_t)M * K);
        cases_run++;
        char w2[120];
        snprintf(w2, sizeof w2, "%s in place", what);
        if (!same_bits(y, ref, M, K, dt, w2)) cases_failed++;
        /* K not a multiple of r */
        st = ops->rotation_forward(dev, rot, dt, xb, 1, K - 1, yb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_err, "multiple"), "%s: K %% r: %d '%s'", what, (int)st, last_err);
    }
    ops->buffer_free(dev, xb);
    ops->buffer_free(dev, yb);
    ops->rotation_destroy(dev, rot);
    free(H); free(x); free(ref); free(y);
}

/* every fp16 / bf16 pattern through kv_quantize, every code through
 * kv_dequantize, bit-exact with the reference; guard bytes past n */
static void test_kv(qp_dtype dt, float scale) {
    const size_t n = 65536 + 3; /* a partial last word */
    uint16_t *x = malloc(2 * n), *xd = malloc(2 * 256 + GUARD), *xr = malloc(2 * 256);
    uint8_t *q = malloc(n + GUARD), *qr = malloc(n), codes[256];
    for (size_t i = 0; i < n; i++) x[i] = (uint16_t)i;
    char what[96];
    snprintf(what, sizeof what, "kv %s scale %g", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", (double)scale);
    CHECK(qp_ref_kv_quantize(NULL, dt, x, n, scale, qr) == QP_OK, "kv reference");
    void *xb = NULL, *qb = NULL, *db = NULL;
    if (ops->buffer_alloc(dev, 2 * n, &xb) == QP_OK && ops->buffer_alloc(dev, n + GUARD, &qb) == QP_OK &&
        ops->buffer_alloc(dev, 2 * 256 + GUARD, &db) == QP_OK) {
        memset(q, 0xA5, n + GUARD);
        ops->buffer_upload(dev, qb, 0, q, n + GUARD);
        ops->buffer_upload(dev, xb, 0, x, 2 * n);
        qp_status st = ops->kv_quantize(dev, dt, xb, n, scale, qb);
        CHECK(st == QP_OK, "%s: kv_quantize: %s", what, last_err);
        ops->buffer_download(dev, qb, 0, q, n + GUARD);
        cases_run++;
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                CHECK(0, "%s: quantize 0x%04zx -> 0x%02x, reference 0x%02x", what, i & 0xFFFF, q[i], qr[i]);
        for (size_t i = n; i < n + GUARD; i++)
            if (q[i] != 0xA5) { CHECK(0, "%s: guard byte %zu overwritten", what, i - n); bad++; break; }
        if (bad) cases_failed++;
        for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
        CHECK(qp_ref_kv_dequantize(NULL, dt, codes, 256, scale, xr) == QP_OK, "kv dequant reference");
        memset(xd, 0xA5, 2 * 256 + GUARD);
        ops->buffer_upload(dev, db, 0, xd, 2 * 256 + GUARD);
        ops->buffer_upload(dev, qb, 0, codes, 256);
        st = ops->kv_dequantize(dev, dt, qb, 256, scale, db);
        CHECK(st == QP_OK, "%s: kv_dequantize: %s", what, last_err);
        ops->buffer_download(dev, db, 0, xd, 2 * 256 + GUARD);
        cases_run++;
        bool ok = same_bits(xd, xr, 1, 256, dt, what);
        for (size_t i = 512; i < 512 + GUARD; i++)
            if (((uint8_t *)xd)[i] != 0xA5) { CHECK(0, "%s: dequantize guard overwritten", what); ok = false; break; }
        if (!ok) cases_failed++;
        /* in place: src and dst one buffer, both directions */
        ops->buffer_upload(dev, xb, 0, x, 2 * n);
        st = ops->kv_quantize(dev, dt, xb, n, scale, xb);
        CHECK(st == QP_OK, "%s: in-place kv_quantize: %s", what, last_err);
        ops->buffer_download(dev, xb, 0, q, n);
        cases_run++;
        bad = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                CHECK(0, "%s: in-place quantize 0x%04zx -> 0x%02x, reference 0x%02x", what, i & 0xFFFF, q[i], qr[i]);
        if (bad) cases_failed++;
        ops->buffer_upload(dev, db, 0, codes, 256);
        st = ops->kv_dequantize(dev, dt, db, 256, scale, db);
        CHECK(st == QP_OK, "%s: in-place kv_dequantize: %s", what, last_err);
        ops->buffer_download(dev, db, 0, xd, 2 * 256);
        cases_run++;
        char w2[120];
        snprintf(w2, sizeof w2, "%s in-place dequantize", what);
        if (!same_bits(xd, xr, 1, 256, dt, w2)) cases_failed++;
        ops->buffer_upload(dev, xb, 0, x, 2 * n);
        st = ops->kv_quantize(dev, dt, xb, n, 0.0f, qb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_err, "scale"), "%s: zero scale: %d '%s'", what, (int)st, last_err);
        st = ops->kv_quantize(dev, dt, xb, n + GUARD + 1, scale, qb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_err, "too small"), "%s: overrun: %d '%s'", what, (int)st, last_err);
    }
    ops->buffer_free(dev, xb);
    ops->buffer_free(dev, qb);
    ops->buffer_free(dev, db);
    free(x); free(xd); free(xr); free(q); free(qr);
}

/* linear_time (total and GEMM-only), buffer_copy, buffer_copy_time */
static void test_timers(void) {
    fl_case c = {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 256, 128, false, false, 0};
    fl_layer L;
    fl_make(&c, c.N, false, &L);
    qp_lin_desc d;
    fl_desc(&L, false, &d);
    void *lin = NULL, *xb = NULL, *yb = NULL, *cb = NULL;
    const int M = 16, reps = 3;
    uint16_t *x = malloc(2 * (size_t)M * c.K), *y0 = malloc(2 * (size_t)M * c.N), *y1 = malloc(2 * (size_t)M * c.N);
    make_fl_x(c.dt, x, M, c.K);
    qp_status st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_OK, "timers: prepare: %s", last_err);
    if (st == QP_OK && ops->buffer_alloc(dev, 2 * (size_t)M * c.K, &xb) == QP_OK &&
        ops->buffer_alloc(dev, 2 * (size_t)M * c.N, &yb) == QP_OK && ops->buffer_alloc(dev, 2 * (size_t)M * c.N, &cb) == QP_OK) {
        ops->buffer_upload(dev, xb, 0, x, 2 * (size_t)M * c.K);
        double tot[3] = {-1, -1, -1}, gem[3] = {-1, -1, -1};
        st = ops->linear_time(dev, lin, xb, M, yb, reps, tot, gem);
        CHECK(st == QP_OK, "linear_time: %s", last_err);
        for (int i = 0; i < reps && st == QP_OK; i++)
            CHECK(tot[i] > 0 && gem[i] > 0 && gem[i] <= tot[i] && tot[i] < 1e4, "linear_time rep %d: total %g gemm %g", i,
                  tot[i], gem[i]);
        ops->buffer_download(dev, yb, 0, y0, 2 * (size_t)M * c.N);
        /* the timed runs computed the layer: same bits as a plain forward */
        st = ops->buffer_copy(dev, yb, 0, cb, 0, 2 * (size_t)M * c.N);
        CHECK(st == QP_OK, "buffer_copy: %s", last_err);
        ops->buffer_download(dev, cb, 0, y1, 2 * (size_t)M * c.N);
        CHECK(!memcmp(y0, y1, 2 * (size_t)M * c.N), "buffer_copy: copy differs");
        ops->linear_forward(dev, lin, xb, M, yb);
        ops->buffer_download(dev, yb, 0, y1, 2 * (size_t)M * c.N);
        CHECK(!memcmp(y0, y1, 2 * (size_t)M * c.N), "linear_time output differs from linear_forward");
        double ms[3] = {-1, -1, -1};
        st = ops->buffer_copy_time(dev, yb, cb, 2 * (size_t)M * c.N, reps, ms);
        CHECK(st == QP_OK && ms[0] >= 0 && ms[2] >= 0 && ms[2] < 1e4, "buffer_copy_time: %d %g '%s'", (int)st, ms[2], last_err);
        st = ops->buffer_copy(dev, yb, 1, cb, 0, 2 * (size_t)M * c.N);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_err, "overruns"), "buffer_copy overrun: %d '%s'", (int)st, last_err);
        if (verbose) printf("linear_time mxfp4 16x128x256: total %.3f ms, gemm %.3f ms; copy %.3f ms\n", tot[2], gem[2], ms[2]);
    }
    ops->buffer_free(dev, xb);
    ops->buffer_free(dev, yb);
    ops->buffer_free(dev, cb);
    if (lin) ops->linear_destroy(dev, lin);
    free(x); free(y0); free(y1);
    fl_free(&L);
}

/* forward times of the issue-9 layers at 4096 x 4096, M = 1 (informational) */
static void fl_timings(void) {
    int N = 4096, K = 4096;
    size_t nk = (size_t)N * K;
    uint8_t *codes = malloc(nk), *w8 = malloc(nk);
    uint16_t *wa = malloc(2 * nk);
    float *blk = malloc(sizeof(float) * nk / 16), lut[256], bs[32 * 32];
    for (size_t i = 0; i < nk; i++) {
        uint32_t r = rnd();
        codes[i] = (uint8_t)(r & 15);
        w8[i] = (uint8_t)((r >> 8) & 0x77);
        wa[i] = enc(QP_DTYPE_F16, frand() * 0.05f);
    }
    for (size_t i = 0; i < nk / 16; i++) blk[i] = 1.0f;
    for (int i = 0; i < 256; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i & 15);
    for (int i = 0; i < 32 * 32; i++) bs[i] = 1e-3f;
    qp_lin_desc u = {.struct_size = sizeof u, .kind = QP_SCHEME_UNQUANTIZED, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing-unq", .act = QP_ACT_NONE, .w_act = wa};
    qp_lin_desc mx = {.struct_size = sizeof mx, .kind = QP_SCHEME_OCP_MX, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                      .layer = "timing-mx", .act = QP_ACT_MX_QDQ, .act_elem = QP_DTYPE_F4_E2M1, .act_mbits = 1,
                      .act_emax = 2, .w_elem = QP_DTYPE_F4_E2M1, .w_codes = codes, .w_lut = lut, .w_blk = 32,
                      .w_blk_scale = blk};
    qp_lin_desc nv = mx;
    nv.kind = QP_SCHEME_NVFP4;
    nv.layer = "timing-nvfp4";
    nv.act = QP_ACT_NVFP4_QDQ;
    nv.w_blk = 16;
    nv.input_global_scale = 1.0f;
    nv.bias_after_round = 1;
    qp_lin_desc fb = {.struct_size = sizeof fb, .kind = QP_SCHEME_W8A8_FP8_BLOCK, .act_dtype = QP_DTYPE_F16, .N = N,
                      .K = K, .layer = "timing-fp8b", .act = QP_ACT_FP8_GROUP128, .w_u8 = w8, .w_scale = bs,
                      .w_per_channel = 1};
    time_forward(&u, 0, 1, 5, "unquantized fp16");
    time_forward(&mx, 0, 1, 5, "mxfp4 w+a (qdq)");
    time_forward(&nv, 0, 1, 5, "nvfp4");
    time_forward(&fb, 0, 1, 5, "fp8 per-block");
    free(codes); free(w8); free(wa); free(blk);
}

/* issue-9 fault paths */
static void test_fl_faults(void) {
    fl_case c = {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 64, 16, false, false, 0};
    fl_layer L;
    fl_make(&c, c.N, false, &L);
    qp_lin_desc d;
    fl_desc(&L, false, &d);
    void *lin = NULL;
    qp_status st = ops->linear_prepare(dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(last_err, "int-dot"), "mx forced int-dot: %d '%s'", (int)st, last_err);
    d.K = 48; /* not whole MX blocks */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && !lin && strstr(last_err, "block size"), "mx K=48: %d '%s'", (int)st, last_err);
    d.K = 64;
    d.w_lut = NULL;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(last_err, "w_lut"), "mx no lut: %d '%s'", (int)st, last_err);
    d.w_lut = L.lut;
    d.kind = d.scheme.kind = QP_SCHEME_NVFP4;
    d.act = QP_ACT_NVFP4_QDQ;
    d.w_blk = 16;
    d.input_global_scale = 0.0f;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(last_err, "input_global_scale"), "nvfp4 g=0: %d '%s'", (int)st,
          last_err);
    d.kind = d.scheme.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    d.w_u8 = L.codes;
    d.w_scale = L.blk;
    d.act = QP_ACT_FP8_GROUP128;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_VALUE && !lin && strstr(last_err, "multiple of 128"), "fp8-block K=64: %d '%s'", (int)st, last_err);
    static const qp_scheme_kind em[] = {QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8, QP_SCHEME_NVFP4};
    for (int i = 0; i < 3; i++) {
        qp_scheme s = {.struct_size = sizeof s, .kind = em[i]};
        qp_support_info si = {0};
        CHECK(ops->device_supports(dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED &&
              strstr(si.reason, "no native"), "supports kind %d: %d '%s'", (int)em[i], (int)si.level, si.reason);
    }
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_NVFP4};
    qp_support_info si = {0};
    CHECK(ops->device_supports(dev, &s, 1, 64, 40, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED &&
          strstr(si.reason, "block size"), "nvfp4 K=40 support: %s", si.reason);
    s.kind = QP_SCHEME_UNQUANTIZED;
    CHECK(ops->device_supports(dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE, "supports unquantized");
    s.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    CHECK(ops->device_supports(dev, &s, 1, 64, 256, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED, "supports fp8-block");
    CHECK(ops->device_supports(dev, &s, 1, 64, 200, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "fp8-block K=200 support: %s", si.reason);
    fl_free(&L);
}

/* ---- faults ---------------------------------------------------------------------- */
static void test_faults(void) {
    void *b = NULL;
    qp_status st = ops->buffer_alloc(dev, (size_t)1 << 50, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY && !b && strstr(last_err, "bytes"), "huge alloc: %d '%s'", (int)st, last_err);
    int8_t w[64] = {0};
    float ws[4] = {1, 1, 1, 1};
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_KV_CACHE, .act_dtype = QP_DTYPE_F16, .N = 4, .K = 16,
                     .layer = "faults", .w_i8 = w, .w_scale = ws};
    void *lin = NULL;
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(last_err, "not yet implemented on vulkan"), "KV_CACHE layer: %d '%s'",
          (int)st, last_err);
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_KV_CACHE};
    qp_support_info si;
    CHECK(ops->device_supports(dev, &s, 1, 4, 16, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED &&
          strstr(si.reason, "not yet implemented on vulkan"), "supports KV_CACHE layer: %s", si.reason);
    s.kind = QP_SCHEME_W8A8_INT8;
    qp_device_info info = {.struct_size = sizeof info};
    ops->device_info(dev, &info);
    CHECK(ops->device_supports(dev, &s, 1, 4, 16, &si) == QP_OK &&
          si.level == (info.caps.int_dot_accelerated ? QP_SUPPORT_NATIVE : QP_SUPPORT_EMULATED), "supports int8: %s",
          si.reason);
    s.kind = QP_SCHEME_W8A8_FP8;
    CHECK(ops->device_supports(dev, &s, 1, 4, 16, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED &&
          strstr(si.reason, "fp8"), "supports fp8: %s", si.reason);
    d.kind = QP_SCHEME_W8A8_INT8;
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = 1;
    st = ops->linear_prepare(dev, &d, QP_PATH_GEMV | QP_PATH_TILED, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin, "GEMV|TILED: %d", (int)st);
    /* a forward into a too-small output buffer is refused */
    st = ops->linear_prepare(dev, &d, 0, &lin);
    CHECK(st == QP_OK, "prepare: %s", last_err);
    void *xb = NULL, *yb = NULL;
    if (st == QP_OK && ops->buffer_alloc(dev, 2 * 16 * 4, &xb) == QP_OK && ops->buffer_alloc(dev, 8, &yb) == QP_OK) {
        st = ops->linear_forward(dev, lin, xb, 4, yb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(last_err, "too small"), "small y: %d '%s'", (int)st, last_err);
    }
    ops->buffer_free(dev, xb);
    ops->buffer_free(dev, yb);
    if (lin) ops->linear_destroy(dev, lin);
    /* QQQ codes that contradict the int8 weights are refused */
    int8_t q4[128 * 64], w8[128 * 64];
    float sc[64];
    for (int i = 0; i < 128 * 64; i++) { q4[i] = (int8_t)(i % 15 - 7); w8[i] = (int8_t)(16 * q4[i]); }
    for (int n = 0; n < 64; n++) sc[n] = 1e-3f;
    w8[5 * 128 + 3] ^= 1;
    qp_lin_desc qd = {.struct_size = sizeof qd, .kind = QP_SCHEME_QQQ_W4A8, .act_dtype = QP_DTYPE_F16, .N = 64, .K = 128,
                      .layer = "qqq-bad", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .group_size = -1,
                      .q4 = q4, .w8 = w8, .s_channel = sc};
    lin = NULL;
    st = ops->linear_prepare(dev, &qd, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(last_err, "column 5, k 3"), "QQQ q4/w8: %d '%s'", (int)st,
          last_err);
}

/* A device that lacks integer dot product (QPORT_VK_NO_INT_DOT=1): forcing
 * the int-dot path is QP_ERR_UNSUPPORTED with the reason. */
static void test_no_int_dot_device(void) {
    setenv("QPORT_VK_NO_INT_DOT", "1", 1);
    void *st2 = NULL;
    CHECK(ops->init(&host, &st2) == QP_OK && ops->device_count(st2) > 0, "second init");
    if (st2 && ops->device_count(st2) > 0) {
        void *d2 = ops->device_get(st2, 0);
        int8_t w[64] = {0};
        float ws[4] = {1, 1, 1, 1};
        qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_INT8, .act_dtype = QP_DTYPE_F16, .N = 4, .K = 16,
                         .layer = "no-dot", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .w_i8 = w, .w_scale = ws};
        void *lin = NULL;
        qp_status st = ops->linear_prepare(d2, &d, QP_PATH_INT_DOT, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(last_err, "shaderIntegerDotProduct"), "forced int-dot: %d '%s'",
              (int)st, last_err);
        qp_device_info info = {.struct_size = sizeof info};
        CHECK(ops->device_info(d2, &info) == QP_OK && info.caps.int_dot == 0, "caps.int_dot");
    }
    ops->shutdown(st2);
    unsetenv("QPORT_VK_NO_INT_DOT");
}

/* A plugin whose runtime is missing: zero devices and a logged reason. */
static void test_missing_runtime(void) {
    setenv("QPORT_VK_LOADER", "/nonexistent/libvulkan.so.1", 1);
    void *st2 = NULL;
    CHECK(ops->init(&host, &st2) == QP_OK && ops->device_count(st2) == 0, "init without a loader");
    ops->shutdown(st2);
    unsetenv("QPORT_VK_LOADER");
}

/* Weights split over bindings: a lowered limit on a second context. */
static void test_split(void) {
    setenv("QPORT_VK_MAX_BINDING", "4096", 1);
    void *st2 = NULL, *saved = dev;
    CHECK(ops->init(&host, &st2) == QP_OK && ops->device_count(st2) > 0, "init with QPORT_VK_MAX_BINDING");
    if (st2 && ops->device_count(st2) > 0) {
        dev = ops->device_get(st2, 0);
        static const int ms[] = {1, 5, 17, 64};
        static const unsigned paths[] = {QP_PATH_GEMV, QP_PATH_TILED};
        test_int8(QP_DTYPE_F16, false, false, true, true, 300, 129, paths, 2, ms, 4);
        test_fp8(QP_DTYPE_BF16, QP_ACT_FP8_DYNAMIC_TOKEN, true, 300, 129, false, paths, 2);
        test_qqq(128, true, 256, 192, paths, 2); /* int4 codes + tables: 160 bytes a row, 8 chunks */
        test_w4a16(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, true, false, 200, 256); /* 128 bytes a row, 7 chunks */
        static const fl_case fc[] = {
            {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 192, 129, false, true, 0}, /* 4 chunks */
            {FL_NVFP4, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 144, 100, false, true, 0},                /* 2 chunks */
            {FL_FP8B, QP_DTYPE_BF16, 0, 0, 256, 130, false, true, 1},                                 /* 9 chunks */
            {FL_UNQ, QP_DTYPE_F16, 0, 0, 96, 0, true, false, 0},                                      /* 5 chunks */
        };
        for (int i = 0; i < 4; i++) test_fl(&fc[i]);
    }
    dev = saved;
    ops->shutdown(st2);
    unsetenv("QPORT_VK_MAX_BINDING");
}

int main(void) {
    verbose = getenv("QPORT_TEST_VERBOSE") != NULL;
    const char *seed_env = getenv("QPORT_TEST_SEED");
    uint32_t seed = seed_env ? (uint32_t)strtoul(seed_env, NULL, 0) : 0x5eed1234u;
    rng = seed ? seed : 1;
    printf("test_vk: seed 0x%08x (QPORT_TEST_SEED)\n", seed);
    const char *val = getenv("QPORT_VK_VALIDATION");
    host.validation = val ? atoi(val) : 1;
    const char *cd = getenv("QPORT_CACHE_DIR");
    if (cd && *cd && strcmp(cd, "off") != 0) {
        snprintf(cache_dir, sizeof cache_dir, "%s", cd);
        mkdir(cache_dir, 0777);
    }

    void *lib = load_plugin();
    if (!lib) { printf("SKIP: libqport-vk.so not found in QPORT_BACKEND_PATH: %s\n", dlerror()); return 77; }
    void *sym = dlsym(lib, QP_BACKEND_ENTRY_SYMBOL);
    qp_backend_entry_fn entry;
    memcpy(&entry, &sym, sizeof sym);
    ops = entry ? entry() : NULL;
    if (!ops || ops->abi_version != QP_BACKEND_ABI_VERSION) { printf("FAIL: bad plugin entry\n"); return 1; }
    if (ops->init(&host, &state) != QP_OK) { printf("FAIL: init: %s\n", last_err); return 1; }
    if (ops->device_count(state) == 0) {
        printf("SKIP: no Vulkan device (see the logged reason)\n");
        ops->shutdown(state);
        dlclose(lib);
        return 77;
    }
    dev = ops->device_get(state, 0);
    qp_device_info info = {.struct_size = sizeof info};
    ops->device_info(dev, &info);
    printf("device vulkan:0 '%s' (%s, %s), int-dot %d accelerated %d, subgroups %d..%d, max binding %lld\n", info.name,
           info.vendor, info.driver, info.caps.int_dot, info.caps.int_dot_accelerated, info.caps.subgroup_min,
           info.caps.subgroup_max, (long long)info.caps.max_buffer_bytes);
    CHECK(validation_missing == 0 || !host.validation, "validation layer missing");
    bool have_dot = info.caps.int_dot;
    const unsigned *ip = have_dot ? int_paths : int_paths + 2;
    int nip = have_dot ? 4 : 2;
    clock_t t0 = clock();

    static const int shapes[][2] = {{16, 64}, {31, 67}, {128, 128}, {300, 129}, {513, 33}};
    int ns = (int)(sizeof shapes / sizeof shapes[0]);
    int variant = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int mode = 0; mode < 4; mode++)
            for (int s = 0; s < ns; s++, variant++)
                test_int8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, mode < 2, (mode & 1) == 0, variant % 2 == 0,
                          variant % 3 != 1, shapes[s][0], shapes[s][1], ip, nip, Ms, NM);
    printf("int8: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    static const int qshapes[][2] = {{128, 64}, {256, 192}, {384, 128}};
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < 3; s++) test_qqq(g ? 128 : -1, s != 1, qshapes[s][0], qshapes[s][1], ip, nip);
    printf("+qqq: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    static const unsigned fpaths[] = {QP_PATH_GEMV, QP_PATH_TILED};
    static const qp_act_mode facts[] = {QP_ACT_FP8_STATIC, QP_ACT_FP8_DYNAMIC_TENSOR, QP_ACT_FP8_DYNAMIC_TOKEN};
    variant = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int a = 0; a < 3; a++) {
            test_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], a != 1, 72, 72, true, fpaths, 2);
            for (int s = 0; s < ns; s += 2, variant++)
                test_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], variant % 2 == 0, shapes[s][0], shapes[s][1], false,
                         fpaths, 2);
        }
    printf("+fp8: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    /* W4A16: both packings, int4 / uint4, group 32/64/128/per-channel,
     * fp16 / bf16, K not a multiple of 32 (per-channel), padded scales */
    test_w4a16(QP_DTYPE_F16, QP_PACK_REORDER, 1, 128, true, false, 65, 256);
    test_w4a16(QP_DTYPE_BF16, QP_PACK_ORDER, 0, 128, false, false, 33, 384);
    test_w4a16(QP_DTYPE_F16, QP_PACK_ORDER, 1, 32, true, true, 67, 96);
    test_w4a16(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, true, false, 50, 192);
    test_w4a16(QP_DTYPE_F16, QP_PACK_REORDER, 0, -1, false, false, 31, 100);
    test_w4a16(QP_DTYPE_BF16, QP_PACK_ORDER, 1, -1, true, true, 64, 160);
    test_w4a16_faults();
    printf("+w4a16: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    /* issue 9: OCP-MX, W4A8-MXFP4-FP8, NVFP4, unquantized, fp8 per-block */
    test_fl_all();
    test_fl_faults();
    printf("+float layers: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);
    for (int dt = 0; dt < 2; dt++) {
        qp_dtype t = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
        test_rotation(t, 32, 11, 96);
        test_rotation(t, 128, 3, 256);
        test_kv(t, 1.0f);
        test_kv(t, 0.0371f);
        test_kv(t, 3.5f);
    }
    test_timers();
    printf("+rotation/kv/timers: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    /* one layer of 4096 x 4096, the decode and a prefill-ish M, auto path */
    {
        static const int ms[] = {1, 17};
        static const unsigned paths[] = {QP_PATH_AUTO};
        test_int8(QP_DTYPE_F16, false, true, true, true, 4096, 4096, paths, 1, ms, 2);
    }
    printf("+4096x4096: %d cases, %.1f s\n", cases_run, (double)(clock() - t0) / CLOCKS_PER_SEC);

    /* weights past maxStorageBufferRange for real (lavapipe: 128 MiB):
     * 16400 x 8192 int8 = 134,348,800 bytes, split over two bindings */
    if (!getenv("QPORT_TEST_SKIP_LARGE") && info.caps.max_buffer_bytes > 0 &&
        info.caps.max_buffer_bytes <= ((int64_t)1 << 27) && info.memory_bytes >= ((uint64_t)1 << 30)) {
        static const int ms[] = {1, 3};
        static const unsigned paths[] = {QP_PATH_AUTO};
        test_int8(QP_DTYPE_BF16, false, true, true, true, 8192, 16400, paths, 1, ms, 2);
        printf("+8192x16400 (past maxStorageBufferRange): %d cases, %.1f s\n", cases_run,
               (double)(clock() - t0) / CLOCKS_PER_SEC);
    }

    if (!getenv("QPORT_TEST_SKIP_TIMING")) {
        timings(have_dot);
        fl_timings();
    }
    test_split();
    test_faults();
    test_no_int_dot_device();
    test_missing_runtime();

    ops->shutdown(state);
    dlclose(lib);
    if (*cache_dir) { /* the pipeline cache was saved under the driver's pipelineCacheUUID */
        char cmd[400];
        snprintf(cmd, sizeof cmd, "ls '%s'/vk-pipelines-*-test.bin >/dev/null 2>&1", cache_dir);
        CHECK(system(cmd) == 0, "no pipeline cache file in %s", cache_dir);
    }
    printf("test_vk: %d forward cases, %d failed; %u validation warnings/errors; %.1f s CPU\n", cases_run, cases_failed,
           validation_msgs, (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK(validation_msgs == 0, "%u validation messages", validation_msgs);
    return tu_finish("test_vk");
}
