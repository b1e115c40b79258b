/* 8-bit weight quantizers (W8A8-INT8, W8A8-FP8, FP8 per-block, HF fp8):
 * the checkpoint tensors' names, dtypes and shapes, then the tensors fed to
 * the matching reference forward and compared with an fp64 matmul of the
 * original weights within the bound the formats allow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static qp_scheme mk(qp_scheme_kind kind, qp_dtype wd, qp_granularity wg, qp_dtype ad, int adyn, int asym) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = kind;
    s.weight.dtype = wd;
    s.weight.granularity = wg;
    s.weight.symmetric = 1;
    s.weight.scale_dtype = QP_DTYPE_F32;
    s.activation.dtype = ad;
    s.activation.dynamic = adyn;
    s.activation.symmetric = !asym;
    return s;
}

/* the tensor at `i` has this name, dtype and shape */
static const void *expect(const qp_qweights *q, size_t i, const char *name, qp_dtype dt, int ndim, int s0, int s1, int line) {
    qp_tensor t;
    if (qp_qweights_get(q, i, &t) != QP_OK) { CHECK(0, "line %d: no tensor %zu (%s)", line, i, name); return NULL; }
    bool ok = !strcmp(t.name, name) && t.dtype == dt && t.ndim == ndim && t.shape[0] == s0 && (ndim < 2 || t.shape[1] == s1);
    size_t n = (size_t)s0 * (ndim > 1 ? (size_t)s1 : 1);
    size_t eb = dt == QP_DTYPE_F32 || dt == QP_DTYPE_I32 ? 4 : dt == QP_DTYPE_F16 || dt == QP_DTYPE_BF16 ? 2 : 1;
    CHECK(ok && qp_tensor_bytes(&t) == n * eb, "line %d: tensor %zu is %s %s [%lld,%lld] (%zu bytes), want %s %s [%d,%d]", line, i,
          t.name, qp_dtype_name(t.dtype), (long long)t.shape[0], (long long)(t.ndim > 1 ? t.shape[1] : 0), qp_tensor_bytes(&t),
          name, qp_dtype_name(dt), s0, s1);
    return t.data;
}
#define EXPECT_T(q, i, name, dt, nd, s0, s1) expect(q, i, name, dt, nd, s0, s1, __LINE__)

typedef struct data { int M, K, N; float *w, *xf; uint16_t *x; double *ref, *mag; } data;

static data mkdata(int M, int K, int N, qp_dtype d) {
    data D = {M, K, N, malloc(sizeof(float) * N * K), malloc(sizeof(float) * M * K), malloc(2 * M * K),
              malloc(sizeof(double) * M * N), malloc(sizeof(double) * M * N)};
    for (int i = 0; i < N * K; i++) D.w[i] = frand() * (1 + i % 5) * 0.04f;
    for (int i = 0; i < M * K; i++) {
        D.x[i] = (uint16_t)qp_format_encode(d, frand() * 2.0f + (i % 3 ? 0.0f : 0.7f)); /* skewed: asym ranges differ */
        D.xf[i] = qp_format_decode(d, D.x[i]);
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double r = 0, a = 0;
            for (int k = 0; k < K; k++) { r += (double)D.xf[m * K + k] * D.w[n * K + k]; a += fabs((double)D.xf[m * K + k] * D.w[n * K + k]); }
            D.ref[m * N + n] = r;
            D.mag[m * N + n] = a;
        }
    return D;
}
static void freedata(data *D) { free(D->w); free(D->xf); free(D->x); free(D->ref); free(D->mag); }

static double rowabs(const float *v, int K, int r) {
    double a = 0;
    for (int k = 0; k < K; k++) a = fmax(a, fabs(v[r * K + k]));
    return a;
}
static double absmaxf(const float *v, size_t n) {
    double a = 0;
    for (size_t i = 0; i < n; i++) a = fmax(a, fabs(v[i]));
    return a;
}

/* int8: weights within s_w/2, activations within s_x/2 (calibrated on x
 * itself, so nothing clamps) */
static void int8_case(qp_dtype d, int per_channel, int is_static, int asym) {
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    data D = mkdata(4, 64, 24, d);
    o.calib = D.xf;
    o.calib_rows = (size_t)D.M;
    qp_scheme s = mk(QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, per_channel ? QP_GRAN_CHANNEL : QP_GRAN_TENSOR, QP_DTYPE_I8,
                     !is_static, asym);
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, D.N, D.K, &o, &q) == QP_OK, "int8 quantize");
    if (!q) { freedata(&D); return; }
    int ns = per_channel ? D.N : 1;
    const int8_t *w = EXPECT_T(q, 0, "weight", QP_DTYPE_I8, 2, D.N, D.K);
    const float *ws = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F32, 1, ns, 0);
    const int8_t *wz = EXPECT_T(q, 2, "weight_zero_point", QP_DTYPE_I8, 1, ns, 0);
    const float *is = NULL;
    const int8_t *iz = NULL;
    if (is_static) is = EXPECT_T(q, 3, "input_scale", QP_DTYPE_F32, 1, 1, 0);
    if (is_static && asym) iz = EXPECT_T(q, 4, "input_zero_point", QP_DTYPE_I8, 1, 1, 0);
    CHECK(qp_qweights_count(q) == (size_t)(3 + is_static + (is_static && asym)), "int8 count %zu", qp_qweights_count(q));
    for (int i = 0; wz && i < ns; i++) CHECK(wz[i] == 0, "weight_zero_point %d", wz[i]);
    if (!w || !ws || (is_static && !is) || (is_static && asym && !iz)) { qp_qweights_destroy(q); freedata(&D); return; }
    float sx = is ? is[0] : 0;
    int32_t azp = 0;
    if (iz) { int32_t z = iz[0]; qp_int8_static_asym_rebuild(NULL, is, &z, 1, &sx, &azp); }
    uint16_t *y = malloc(2 * D.M * D.N);
    qp_ref_int8_args a = {d, D.x, D.M, D.K, D.N, w, ws, per_channel, is_static, !asym, sx, azp, NULL};
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK, "int8 forward");
    double u = d == QP_DTYPE_F16 ? ldexp(1, -11) : ldexp(1, -8);
    int bad = 0;
    for (int m = 0; m < D.M; m++) {
        double amax = rowabs(D.xf, D.K, m), mn = 0, mx = 0;
        for (int k = 0; k < D.K; k++) { mn = fmin(mn, D.xf[m * D.K + k]); mx = fmax(mx, D.xf[m * D.K + k]); }
        double s_x = is_static ? sx : asym ? (mx - mn) / 255 : amax / 127;
        for (int n = 0; n < D.N; n++) {
            double s_w = ws[per_channel ? n : 0], b = 0;
            for (int k = 0; k < D.K; k++)
                b += fabs(D.xf[m * D.K + k]) * s_w / 2 + fabs(D.w[n * D.K + k]) * s_x * 0.51 + s_w * s_x / 4;
            double got = qp_format_decode(d, y[m * D.N + n]);
            if (!(fabs(got - D.ref[m * D.N + n]) <= b * 1.01 + fabs(D.ref[m * D.N + n]) * u * 1.5 + 1e-6) && bad++ < 3)
                fprintf(stderr, "  int8 pc %d static %d asym %d: m %d n %d got %g ref %g bound %g\n", per_channel,
                        is_static, asym, m, n, got, D.ref[m * D.N + n], b);
        }
    }
    CHECK(bad == 0, "int8 %s pc %d static %d asym %d", qp_dtype_name(d), per_channel, is_static, asym);
    free(y);
    qp_qweights_destroy(q);
    freedata(&D);
}

/* fp8: each element within 2^-4 relative + the subnormal floor s * 2^-10 */
static void fp8_case(qp_dtype d, qp_scheme_kind kind, int per_channel, qp_fp8_act act, int e8m0) {
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    int block = kind == QP_SCHEME_W8A8_FP8_BLOCK || act == QP_FP8_ACT_GROUP128;
    data D = mkdata(3, block ? 256 : 96, block ? 200 : 40, d);
    o.calib = D.xf;
    o.calib_rows = (size_t)D.M;
    qp_scheme s = mk(kind, QP_DTYPE_F8_E4M3FN, block ? QP_GRAN_BLOCK : per_channel ? QP_GRAN_CHANNEL : QP_GRAN_TENSOR,
                     QP_DTYPE_F8_E4M3FN, act != QP_FP8_ACT_STATIC, 0);
    if (block) { s.weight.block[0] = s.weight.block[1] = 128; }
    if (e8m0) s.weight.scale_dtype = QP_DTYPE_E8M0;
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, D.N, D.K, &o, &q) == QP_OK, "fp8 quantize");
    if (!q) { freedata(&D); return; }
    int nr = (D.N + 127) / 128, nc = D.K / 128;
    const uint8_t *w = EXPECT_T(q, 0, "weight", QP_DTYPE_F8_E4M3FN, 2, D.N, D.K);
    const void *ws = block ? EXPECT_T(q, 1, kind == QP_SCHEME_HF_FP8 ? "weight_scale_inv" : "weight_scale",
                                      e8m0 ? QP_DTYPE_E8M0 : QP_DTYPE_F32, 2, nr, nc)
                           : EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F32, 1, per_channel ? D.N : 1, 0);
    const float *is = act == QP_FP8_ACT_STATIC ? EXPECT_T(q, 2, "input_scale", QP_DTYPE_F32, 1, 1, 0) : NULL;
    CHECK(qp_qweights_count(q) == (size_t)(2 + (act == QP_FP8_ACT_STATIC)), "fp8 count");
    if (!w || !ws || (act == QP_FP8_ACT_STATIC && !is)) { qp_qweights_destroy(q); freedata(&D); return; }
    float *wsf = malloc(sizeof(float) * (size_t)(block ? nr * nc : D.N));
    for (int i = 0; i < (block ? nr * nc : per_channel ? D.N : 1); i++)
        wsf[i] = e8m0 ? qp_format_decode(QP_DTYPE_E8M0, ((const uint8_t *)ws)[i]) : ((const float *)ws)[i];
    uint16_t *y = malloc(2 * D.M * D.N);
    qp_ref_fp8_args a = {d, D.x, D.M, D.K, D.N, w, wsf, per_channel, act, is ? is[0] : 0, 0, NULL};
    CHECK(qp_ref_w8a8_fp8_forward(NULL, &a, y) == QP_OK, "fp8 forward");
    double u = d == QP_DTYPE_F16 ? ldexp(1, -11) : ldexp(1, -8), r = ldexp(1, -4);
    int bad = 0;
    for (int m = 0; m < D.M; m++) {
        double s_x = is ? is[0] : (act == QP_FP8_ACT_DYNAMIC_TENSOR ? absmaxf(D.xf, (size_t)D.M * D.K) : rowabs(D.xf, D.K, m)) / 448;
        for (int n = 0; n < D.N; n++) {
            double b = 0;
            for (int k = 0; k < D.K; k++) {
                double s_w = block ? wsf[(n / 128) * nc + k / 128] : wsf[per_channel ? n : 0];
                double xe = fabs(D.xf[m * D.K + k]) * r + s_x * ldexp(1, -10), we = fabs(D.w[n * D.K + k]) * r + s_w * ldexp(1, -10);
                b += fabs(D.xf[m * D.K + k]) * we + fabs(D.w[n * D.K + k]) * xe + xe * we;
            }
            double got = qp_format_decode(d, y[m * D.N + n]);
            if (!(fabs(got - D.ref[m * D.N + n]) <= b + fabs(D.ref[m * D.N + n]) * u * 1.5 + 1e-6) && bad++ < 3)
                fprintf(stderr, "  fp8 kind %d pc %d act %d: m %d n %d got %g ref %g bound %g\n", (int)kind, per_channel,
                        (int)act, m, n, got, D.ref[m * D.N + n], b);
        }
    }
    CHECK(bad == 0, "fp8 %s kind %d pc %d act %d e8m0 %d", qp_dtype_name(d), (int)kind, per_channel, (int)act, e8m0);
    free(y); free(wsf);
    qp_qweights_destroy(q);
    freedata(&D);
}

static void hand_and_errors(void) {
    qp_context *ctx;
    qp_context_create(&ctx);
    qp_qweights *q;
    qp_tensor t;
    /* int8 per-tensor: max|w| = 2.54 -> scale 0.02, codes w / 0.02 */
    float w[4] = {2.54f, -1.0f, 0.01f, 0.0f};
    qp_scheme s = mk(QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, QP_GRAN_TENSOR, QP_DTYPE_I8, 1, 0);
    CHECK(qp_quantize_weights(ctx, &s, w, 1, 4, NULL, &q) == QP_OK, "hand int8");
    if (q) {
        const int8_t *c = EXPECT_T(q, 0, "weight", QP_DTYPE_I8, 2, 1, 4);
        CHECK(c && c[0] == 127 && c[1] == -50 && c[2] == 0 && c[3] == 0, "int8 codes %d %d %d %d", c[0], c[1], c[2], c[3]);
        CHECK(qp_qweights_find(q, "weight_scale", &t) == QP_OK && *(const float *)t.data == 2.54f / 127.0f, "int8 scale");
        CHECK(qp_qweights_find(q, "input_scale", &t) == QP_ERR_NOT_FOUND, "dynamic: no input_scale");
        CHECK(qp_qweights_get(q, 3, &t) == QP_ERR_NOT_FOUND, "past the end");
        qp_qweights_destroy(q);
    }
    /* static asymmetric int8 without calibration: input_absmax 127.5 ->
     * range [-127.5, 127.5], s = 1, zp = rne(-128 + 127.5) = 0 (ties to even) */
    s = mk(QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, QP_GRAN_CHANNEL, QP_DTYPE_I8, 0, 1);
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.input_absmax = 127.5f;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, &o, &q) == QP_OK, "asym default");
    if (q) {
        CHECK(qp_qweights_find(q, "input_scale", &t) == QP_OK && *(const float *)t.data == 1.0f, "asym scale");
        CHECK(qp_qweights_find(q, "input_zero_point", &t) == QP_OK && *(const int8_t *)t.data == 0, "asym zp");
        qp_qweights_destroy(q);
    }
    /* calibration [0, 5.1]: s = 0.02, zp = -128 */
    float cal[4] = {0.0f, 5.1f, 1.0f, 2.0f};
    o.calib = cal;
    o.calib_rows = 2;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, &o, &q) == QP_OK, "asym calib");
    if (q) {
        CHECK(qp_qweights_find(q, "input_zero_point", &t) == QP_OK && *(const int8_t *)t.data == -128, "asym calib zp %d",
              *(const int8_t *)t.data);
        qp_qweights_destroy(q);
    }
    /* fp8 per-block e8m0: max|w| = 1280 -> scale 2.86 rounded up to 4 (code 129), 1280/4 = 320 */
    float wb[128 * 128];
    for (int i = 0; i < 128 * 128; i++) wb[i] = i == 5 ? 1280.0f : 1.0f;
    s = mk(QP_SCHEME_W8A8_FP8_BLOCK, QP_DTYPE_F8_E4M3FN, QP_GRAN_BLOCK, QP_DTYPE_F8_E4M3FN, 1, 0);
    s.weight.block[0] = s.weight.block[1] = 128;
    s.weight.scale_dtype = QP_DTYPE_E8M0;
    CHECK(qp_quantize_weights(ctx, &s, wb, 128, 128, NULL, &q) == QP_OK, "e8m0 block");
    if (q) {
        const uint8_t *c = EXPECT_T(q, 0, "weight", QP_DTYPE_F8_E4M3FN, 2, 128, 128);
        const uint8_t *sc = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_E8M0, 2, 1, 1);
        CHECK(c && sc && sc[0] == 129 && qp_format_decode(QP_DTYPE_F8_E4M3FN, c[5]) == 320.0f &&
                  qp_format_decode(QP_DTYPE_F8_E4M3FN, c[0]) == 0.25f, "e8m0 %d", sc ? sc[0] : -1);
        qp_qweights_destroy(q);
    }
    /* errors */
    float bad[4] = {1.0f, NAN, 0.0f, 0.0f};
    s = mk(QP_SCHEME_W8A8_FP8, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, QP_DTYPE_F8_E4M3FN, 1, 0);
    CHECK(qp_quantize_weights(ctx, &s, bad, 2, 2, NULL, &q) == QP_ERR_INVALID_ARGUMENT && !q &&
              strstr(qp_last_error(ctx), "weight [0][1] is NaN"), "NaN weight: %s", qp_last_error(ctx));
    bad[1] = -INFINITY;
    CHECK(qp_quantize_weights(ctx, &s, bad, 2, 2, NULL, &q) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "infinite"), "inf weight: %s", qp_last_error(ctx));
    s.activation.dynamic = 0;
    float calnan[2] = {1.0f, NAN};
    o.calib = calnan;
    o.calib_rows = 1;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, &o, &q) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "calibration activation [0][1] is NaN"),
          "NaN calib: %s", qp_last_error(ctx));
    float cal0[2] = {0.0f, -0.0f};
    o.calib = cal0;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, &o, &q) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "all zero"),
          "zero calib: %s", qp_last_error(ctx));
    o.calib = NULL;
    o.input_absmax = 0.0f;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, &o, &q) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "input_absmax"),
          "absmax 0: %s", qp_last_error(ctx));
    s.kind = QP_SCHEME_UNQUANTIZED;
    CHECK(qp_quantize_weights(ctx, &s, w, 2, 2, NULL, &q) == QP_ERR_UNSUPPORTED, "unquantized");
    s.kind = QP_SCHEME_W8A8_FP8;
    CHECK(qp_quantize_weights(ctx, &s, w, 0, 2, NULL, &q) == QP_ERR_INVALID_ARGUMENT, "N 0");
    CHECK(qp_quantize_weights(ctx, NULL, w, 2, 2, NULL, &q) == QP_ERR_INVALID_ARGUMENT, "NULL scheme");
    CHECK(qp_qweights_count(NULL) == 0 && qp_qweights_get(NULL, 0, &t) == QP_ERR_INVALID_ARGUMENT, "NULL qweights");
    qp_qweights_destroy(NULL);
    qp_context_destroy(ctx);
}

/* A resolved scheme from a bundled config gives the same names. */
static void from_config(void) {
    qp_context *ctx;
    qp_context_create(&ctx);
    const char *dir = getenv("QPORT_CONFIGS");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/configs", "hf-amd-Llama-3.1-8B-Instruct-FP8-KV.quant.json");
    qp_config *cfg;
    if (qp_config_load_file(ctx, path, &cfg) != QP_OK) { CHECK(0, "load %s: %s", path, qp_last_error(ctx)); qp_context_destroy(ctx); return; }
    qp_scheme s;
    CHECK(qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &s) == QP_OK, "resolve");
    float w[64 * 32];
    for (int i = 0; i < 64 * 32; i++) w[i] = frand();
    qp_qweights *q;
    CHECK(qp_quantize_weights(ctx, &s, w, 64, 32, NULL, &q) == QP_OK, "quantize %s", qp_last_error(ctx));
    if (q) {
        EXPECT_T(q, 0, "weight", QP_DTYPE_F8_E4M3FN, 2, 64, 32);
        EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F32, 1, 1, 0);
        EXPECT_T(q, 2, "input_scale", QP_DTYPE_F32, 1, 1, 0);
        qp_qweights_destroy(q);
    }
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 31u;
    printf("seed %u\n", st);
    for (int di = 0; di < 2; di++) {
        qp_dtype d = di ? QP_DTYPE_BF16 : QP_DTYPE_F16;
        for (int pc = 0; pc < 2; pc++)
            for (int is = 0; is < 2; is++)
                for (int as = 0; as < 2; as++) int8_case(d, pc, is, as);
        for (int pc = 0; pc < 2; pc++) {
            fp8_case(d, QP_SCHEME_W8A8_FP8, pc, QP_FP8_ACT_STATIC, 0);
            fp8_case(d, QP_SCHEME_W8A8_FP8, pc, QP_FP8_ACT_DYNAMIC_TENSOR, 0);
            fp8_case(d, QP_SCHEME_W8A8_FP8, pc, QP_FP8_ACT_DYNAMIC_TOKEN, 0);
        }
        fp8_case(d, QP_SCHEME_W8A8_FP8_BLOCK, 0, QP_FP8_ACT_GROUP128, 0);
        fp8_case(d, QP_SCHEME_W8A8_FP8_BLOCK, 0, QP_FP8_ACT_GROUP128, 1);
        fp8_case(d, QP_SCHEME_HF_FP8, 0, QP_FP8_ACT_STATIC, 0);
        fp8_case(d, QP_SCHEME_HF_FP8, 0, QP_FP8_ACT_GROUP128, 0);
    }
    hand_and_errors();
    from_config();
    return tu_finish("test_qweights_8bit");
}
