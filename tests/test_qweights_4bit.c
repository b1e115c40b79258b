/* 4/6-bit weight quantizers (W4A16, OCP-MX, W4A8-MXFP4-FP8, NVFP4, QQQ):
 * names, dtypes and shapes of the checkpoint tensors, then the tensors fed
 * to the matching reference forward and compared with an fp64 matmul of the
 * original weights within the bound the formats allow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static qp_scheme mk(qp_scheme_kind kind, qp_dtype wd, qp_granularity wg, int group, qp_dtype ad, int adyn) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = kind;
    s.weight.dtype = wd;
    s.weight.granularity = wg;
    s.weight.group_size = group;
    s.weight.symmetric = 1;
    s.activation.dtype = ad;
    s.activation.dynamic = adyn;
    s.activation.symmetric = 1;
    return s;
}

static const void *expect(const qp_qweights *q, size_t i, const char *name, qp_dtype dt, int ndim, int s0, int s1, int line) {
    qp_tensor t;
    if (!q || qp_qweights_get(q, i, &t) != QP_OK) { CHECK(0, "line %d: no tensor %zu (%s)", line, i, name); return NULL; }
    bool ok = !strcmp(t.name, name) && t.dtype == dt && t.ndim == ndim && t.shape[0] == s0 && (ndim < 2 || t.shape[1] == s1);
    size_t n = (size_t)s0 * (ndim > 1 ? (size_t)s1 : 1);
    size_t eb = dt == QP_DTYPE_F32 || dt == QP_DTYPE_I32 ? 4 : dt == QP_DTYPE_F16 || dt == QP_DTYPE_BF16 ? 2 : 1;
    CHECK(ok && qp_tensor_bytes(&t) == n * eb, "line %d: tensor %zu is %s %s [%lld,%lld], want %s %s [%d,%d]", line, i, t.name,
          qp_dtype_name(t.dtype), (long long)t.shape[0], (long long)(t.ndim > 1 ? t.shape[1] : 0), name,
          qp_dtype_name(dt), s0, s1);
    return ok ? t.data : NULL;
}
#define EXPECT_T(q, i, name, dt, nd, s0, s1) expect(q, i, name, dt, nd, s0, s1, __LINE__)

typedef struct data { int M, K, N; qp_dtype d; float *w, *xf; uint16_t *x; } data;

static data mkdata(int M, int K, int N, qp_dtype d) {
    data D = {M, K, N, d, malloc(sizeof(float) * N * K), malloc(sizeof(float) * M * K), malloc(2 * M * K)};
    for (int i = 0; i < N * K; i++) D.w[i] = frand() * (1 + i % 5) * 0.04f + (i % 11 ? 0.0f : 0.03f);
    for (int i = 0; i < M * K; i++) {
        D.x[i] = (uint16_t)qp_format_encode(d, frand() * 2.0f);
        D.xf[i] = qp_format_decode(d, D.x[i]);
    }
    return D;
}
static void freedata(data *D) { free(D->w); free(D->xf); free(D->x); }

/* |y - x @ w^T| <= sum_k |x_k| werr(n,k) + xerr(m,k) |w_k| (+ their
 * product) + output rounding; werr / xerr supplied per case. */
typedef double (*err_fn)(const data *D, const void *ctx, int row, int k);
static int compare(const data *D, const uint16_t *y, err_fn werr, const void *wc, err_fn xerr, const void *xc, int out_roundings) {
    double u = D->d == QP_DTYPE_F16 ? ldexp(1, -11) : ldexp(1, -8);
    int bad = 0;
    for (int m = 0; m < D->M; m++)
        for (int n = 0; n < D->N; n++) {
            double ref = 0, mag = 0, b = 0;
            for (int k = 0; k < D->K; k++) {
                double xv = D->xf[m * D->K + k], wv = D->w[n * D->K + k];
                double we = werr(D, wc, n, k), xe = xerr ? xerr(D, xc, m, k) : 0;
                ref += xv * wv;
                mag += fabs(xv) * (fabs(wv) + we);
                b += fabs(xv) * we + xe * (fabs(wv) + we);
            }
            double got = qp_format_decode(D->d, y[m * D->N + n]);
            double bound = b * (1 + 4 * u) + mag * 2 * u + (fabs(ref) + b) * u * out_roundings + 1e-6;
            if (!(fabs(got - ref) <= bound) && bad++ < 3)
                fprintf(stderr, "  m %d n %d got %g ref %g bound %g\n", m, n, got, ref, bound);
        }
    return bad;
}

/* --- W4A16 --------------------------------------------------------------- */
typedef struct { const uint16_t *sc; int g, N; qp_dtype pd; } w4_ctx;
static double w4_err(const data *D, const void *c, int n, int k) {
    const w4_ctx *w = c;
    (void)D;
    /* half a step, plus the clamp that a scale rounded to the model dtype
     * can cause at the top of the range */
    return qp_format_decode(w->pd, w->sc[(size_t)(k / w->g) * w->N + n]) * (0.5 + 32 * ldexp(1, -8));
}

static void w4a16_case(qp_dtype d, qp_dtype pd, int sym, qp_pack_method pack, int group, int N) {
    data D = mkdata(3, 256, N, d);
    qp_scheme s = mk(QP_SCHEME_W4A16_INT4, sym ? QP_DTYPE_I4 : QP_DTYPE_U4, group > 0 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL,
                     group > 0 ? group : 0, QP_DTYPE_NONE, 0);
    s.weight.symmetric = sym;
    s.pack_method = pack;
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.params_dtype = pd;
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, N, D.K, &o, &q) == QP_OK, "w4a16 quantize");
    int g = group > 0 ? group : D.K, G = D.K / g, C = (N + 7) / 8;
    const int32_t *w = EXPECT_T(q, 0, "weight", QP_DTYPE_I32, 2, D.K, C);
    const uint16_t *sc = EXPECT_T(q, 1, "weight_scale", pd, 2, G, N);
    const int32_t *zp = sym ? NULL : EXPECT_T(q, 2, "weight_zero_point", QP_DTYPE_I32, 2, G, C);
    CHECK(qp_qweights_count(q) == (size_t)(sym ? 2 : 3), "w4a16 count");
    if (w && sc && (sym || zp) && pd == d) { /* the forward takes the scale in x.dtype */
        uint16_t *scp = calloc((size_t)G * C * 8, 2), *y = malloc(2 * D.M * N);
        for (int i = 0; i < G; i++) memcpy(scp + (size_t)i * C * 8, sc + (size_t)i * N, 2 * (size_t)N); /* vLLM pads to 8*ceil(N/8) */
        qp_ref_w4a16_args a = {d, D.x, D.M, D.K, N, w, zp, scp, group, sym, pack, NULL};
        CHECK(qp_ref_w4a16_forward(NULL, &a, y) == QP_OK, "w4a16 forward");
        w4_ctx c = {sc, g, N, pd};
        int bad = compare(&D, y, w4_err, &c, NULL, NULL, 1);
        CHECK(bad == 0, "w4a16 %s sym %d pack %d group %d N %d", qp_dtype_name(d), sym, (int)pack, group, N);
        free(scp); free(y);
    }
    qp_qweights_destroy(q);
    freedata(&D);
}

/* --- OCP-MX and W4A8 ------------------------------------------------------ */
static int mbits(qp_dtype e) { return e == QP_DTYPE_F4_E2M1 ? 1 : e == QP_DTYPE_F6_E3M2 ? 2 : 3; }
typedef struct { qp_dtype e; int R; } mx_ctx;
/* 2^-m of the block max covers half an ulp, the subnormal step and the even
 * rule's saturation (test_ref_ocp_mx.c) */
static double mx_err(const data *D, const void *c, int n, int k) {
    const mx_ctx *x = c;
    double a = 0;
    for (int r = n / x->R * x->R; r < (n / x->R + 1) * x->R && r < D->N; r++)
        for (int j = k / 32 * 32; j < k / 32 * 32 + 32; j++) a = fmax(a, fabs(D->w[r * D->K + j]));
    return a * ldexp(1, -mbits(x->e));
}
static double fp8_static_err(const data *D, const void *c, int m, int k) {
    double s = *(const float *)c;
    return fabs(D->xf[m * D->K + k]) * (ldexp(1, -4) + ldexp(1, -7)) + s * ldexp(1, -10);
}

static void mx_case(qp_dtype d, qp_scheme_kind kind, qp_dtype e, int R) {
    data D = mkdata(3, 128, 24, d);
    qp_scheme s = mk(kind, e, R > 1 ? QP_GRAN_BLOCK : QP_GRAN_GROUP, 32, kind == QP_SCHEME_W4A8_MXFP4_FP8 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_NONE, 0);
    if (R > 1) { s.weight.block[0] = R; s.weight.block[1] = 32; }
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.calib = D.xf;
    o.calib_rows = (size_t)D.M;
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, D.N, D.K, &o, &q) == QP_OK, "mx quantize");
    int rowb = e == QP_DTYPE_F4_E2M1 ? D.K / 2 : e == QP_DTYPE_F8_E4M3FN ? D.K : D.K * 3 / 4;
    const uint8_t *w = EXPECT_T(q, 0, "weight", QP_DTYPE_U8, 2, D.N, rowb);
    const uint8_t *sc = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_U8, 2, (D.N + R - 1) / R, D.K / 32);
    const float *is = kind == QP_SCHEME_W4A8_MXFP4_FP8 ? EXPECT_T(q, 2, "input_scale", QP_DTYPE_F32, 1, 1, 0) : NULL;
    CHECK(qp_qweights_count(q) == (size_t)(2 + (is != NULL)), "mx count");
    uint16_t *y = malloc(2 * D.M * D.N);
    mx_ctx c = {e, R};
    if (w && sc && kind == QP_SCHEME_OCP_MX) {
        qp_ref_ocp_mx_args a = {d, D.x, D.M, D.K, D.N, e, w, sc, R, QP_OCP_MX_ACT_NONE, NULL};
        CHECK(qp_ref_ocp_mx_forward(NULL, &a, y) == QP_OK, "ocp mx forward");
        CHECK(compare(&D, y, mx_err, &c, NULL, NULL, 1) == 0, "ocp mx %s %s R %d", qp_dtype_name(d), qp_dtype_name(e), R);
    } else if (w && sc && is) {
        CHECK(fabsf(is[0] - 2.0f / 448.0f) < 0.01f, "input_scale %g", (double)is[0]);
        qp_ref_w4a8_mxfp4_args a = {d, D.x, D.M, D.K, D.N, w, sc, is[0], NULL};
        CHECK(qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y) == QP_OK, "w4a8 forward");
        CHECK(compare(&D, y, mx_err, &c, fp8_static_err, is, 3) == 0, "w4a8 %s", qp_dtype_name(d));
    }
    free(y);
    qp_qweights_destroy(q);
    freedata(&D);
}

/* --- NVFP4 ------------------------------------------------------------- */
typedef struct { const uint8_t *sf; float s2; } nv_ctx;
static double nv_err(const data *D, const void *c, int n, int k) {
    const nv_ctx *x = c;
    double s = qp_format_decode(QP_DTYPE_F8_E4M3FN, x->sf[n * (D->K / 16) + k / 16]) * x->s2;
    double w = fabs(D->w[n * D->K + k]);
    return 0.25 * s + 0.25 * w + fmax(0, w - 6 * s);
}
static double nv_xerr(const data *D, const void *c, int m, int k) {
    float g = 1.0f / *(const float *)c, B = 0;
    for (int j = k / 16 * 16; j < k / 16 * 16 + 16; j++) B = fmaxf(B, fabsf(D->xf[m * D->K + j]));
    double s = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, g * (B / 6.0f))) / g;
    double x = fabs(D->xf[m * D->K + k]);
    return 0.25 * s + 0.25 * x + fmax(0, x - 6 * s);
}
static void nvfp4_case(qp_dtype d) {
    data D = mkdata(4, 64, 40, d);
    qp_scheme s = mk(QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, QP_DTYPE_F4_E2M1, 1);
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.calib = D.xf;
    o.calib_rows = (size_t)D.M;
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, D.N, D.K, &o, &q) == QP_OK, "nvfp4 quantize");
    const uint8_t *w = EXPECT_T(q, 0, "weight", QP_DTYPE_U8, 2, D.N, D.K / 2);
    const uint8_t *sf = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F8_E4M3FN, 2, D.N, D.K / 16);
    const float *w2 = EXPECT_T(q, 2, "weight_scale_2", QP_DTYPE_F32, 1, 1, 0);
    const float *i2 = EXPECT_T(q, 3, "input_scale_2", QP_DTYPE_F32, 1, 1, 0);
    if (w && sf && w2 && i2) {
        uint16_t *y = malloc(2 * D.M * D.N);
        qp_ref_nvfp4_args a = {d, D.x, D.M, D.K, D.N, w, sf, w2[0], i2[0], NULL, 0.0f};
        CHECK(qp_ref_nvfp4_forward(NULL, &a, y) == QP_OK, "nvfp4 forward");
        nv_ctx c = {sf, w2[0]};
        CHECK(compare(&D, y, nv_err, &c, nv_xerr, i2, 2) == 0, "nvfp4 %s", qp_dtype_name(d));
        free(y);
    }
    qp_qweights_destroy(q);
    freedata(&D);
}

/* --- QQQ: the same tensors as the direct qp_qqq_* pipeline, bit for bit,
 * and the forward within the int4/int8 steps ------------------------------ */
static void qqq_case(int group, int K, int N) {
    data D = mkdata(3, K, N, QP_DTYPE_F16);
    qp_scheme s = mk(QP_SCHEME_QQQ_W4A8, QP_DTYPE_I4, group == 128 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL, group == 128 ? 128 : 0, QP_DTYPE_I8, 1);
    qp_qweights *q;
    CHECK(qp_quantize_weights(NULL, &s, D.w, N, K, NULL, &q) == QP_OK, "qqq quantize");
    const int32_t *B = EXPECT_T(q, 0, "B", QP_DTYPE_I32, 2, K / 16, 2 * N);
    const float *sc = EXPECT_T(q, 1, "s_channel", QP_DTYPE_F32, 2, 1, N);
    const uint16_t *sg = group == 128 ? EXPECT_T(q, 2, "s_group", QP_DTYPE_F16, 2, K / 128, N) : NULL;
    CHECK(qp_qweights_count(q) == (size_t)(group == 128 ? 3 : 2), "qqq count");
    float *wt = malloc(sizeof(float) * K * N), *sch = malloc(sizeof(float) * N), *schp = malloc(sizeof(float) * N);
    int8_t *codes = malloc((size_t)K * N);
    uint16_t *sgr = malloc(2 * (K / 128) * N), *sgp = malloc(2 * (K / 128) * N);
    int32_t *B2 = malloc(4 * (size_t)(K / 16) * 2 * N);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) wt[k * N + n] = D.w[n * K + k];
    qp_qqq_quantize_weight(NULL, wt, K, N, group, codes, sch, sgr);
    qp_qqq_pack_weight(NULL, codes, K, N, group, B2);
    qp_qqq_permute_scales(NULL, sch, group == 128 ? sgr : NULL, K, N, group, schp, group == 128 ? sgp : NULL);
    if (B && sc && (group != 128 || sg)) {
        CHECK(!memcmp(B, B2, 4 * (size_t)(K / 16) * 2 * N) && !memcmp(sc, schp, 4 * (size_t)N) &&
                  (group != 128 || !memcmp(sg, sgp, 2 * (size_t)(K / 128) * N)), "qqq tensors differ from the direct pipeline");
        uint16_t *y = malloc(2 * D.M * N);
        CHECK(qp_ref_qqq_forward(NULL, D.x, D.M, K, N, group, B, sc, sg, NULL, y) == QP_OK, "qqq forward");
        /* weights within half an int4 step (+ the int8 step of the group
         * reconstruction), activations within half an int8 step */
        double u = ldexp(1, -11);
        int bad = 0;
        for (int m = 0; m < D.M; m++) {
            double amax = 0;
            for (int k = 0; k < K; k++) amax = fmax(amax, fabs(D.xf[m * K + k]));
            double s_tok = amax / 127;
            for (int n = 0; n < N; n++) {
                double ref = 0, b = 0, cmax = 0;
                for (int k = 0; k < K; k++) cmax = fmax(cmax, fabs(D.w[n * K + k]));
                for (int k = 0; k < K; k++) {
                    double gmax = 0;
                    for (int j = k / 128 * 128; group == 128 && j < k / 128 * 128 + 128; j++) gmax = fmax(gmax, fabs(D.w[n * K + j]));
                    double we = group == 128 ? gmax / 15 + cmax * 8.0 / 15 / 127 / 2 + fabs(D.w[n * K + k]) * 8 * u
                                             : cmax / 14 + fabs(D.w[n * K + k]) * 4 * u;
                    ref += (double)D.xf[m * K + k] * D.w[n * K + k];
                    b += fabs(D.xf[m * K + k]) * we + (fabs(D.w[n * K + k]) + we) * s_tok / 2;
                }
                double got = qp_format_decode(QP_DTYPE_F16, y[m * N + n]);
                if (!(fabs(got - ref) <= b * 1.01 + fabs(ref) * u * 2 + 1e-5) && bad++ < 3)
                    fprintf(stderr, "  qqq m %d n %d got %g ref %g bound %g\n", m, n, got, ref, b);
            }
        }
        CHECK(bad == 0, "qqq group %d", group);
        free(y);
    }
    free(wt); free(sch); free(schp); free(codes); free(sgr); free(sgp); free(B2);
    qp_qweights_destroy(q);
    freedata(&D);
}

/* hand-checked scales and codes: the bounds above only see consistency */
static void hand_cases(void) {
    qp_qweights *q;
    qp_tensor t;
    /* int4 symmetric: max 1.75 -> s = 0.25; 7, -1.5 -> -2 (tie to even,
     * stored 0xE), 0.5 -> 0 (tie to even) */
    float w[32] = {1.75f, -0.375f, 0.125f};
    qp_scheme s = mk(QP_SCHEME_W4A16_INT4, QP_DTYPE_I4, QP_GRAN_GROUP, 32, QP_DTYPE_NONE, 0);
    s.pack_method = QP_PACK_REORDER;
    CHECK(qp_quantize_weights(NULL, &s, w, 1, 32, NULL, &q) == QP_OK, "hand int4");
    const int32_t *c = EXPECT_T(q, 0, "weight", QP_DTYPE_I32, 2, 32, 1);
    const uint16_t *sc = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F16, 2, 1, 1);
    CHECK(c && sc && c[0] == 7 && c[1] == 0xE && c[2] == 0 && c[3] == 0 && sc[0] == 0x3400, "int4 %d %d %d %04x",
          c ? c[0] : -1, c ? c[1] : -1, c ? c[2] : -1, sc ? sc[0] : 0);
    qp_qweights_destroy(q);
    /* uint4: range [-0.375, 1.5] -> s = 0.125, zp = 3; codes 15, 0, 3 */
    float wa[32] = {1.5f, -0.375f};
    s.weight.dtype = QP_DTYPE_U4;
    s.weight.symmetric = 0;
    CHECK(qp_quantize_weights(NULL, &s, wa, 1, 32, NULL, &q) == QP_OK, "hand uint4");
    c = EXPECT_T(q, 0, "weight", QP_DTYPE_I32, 2, 32, 1);
    sc = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F16, 2, 1, 1);
    const int32_t *z = EXPECT_T(q, 2, "weight_zero_point", QP_DTYPE_I32, 2, 1, 1);
    CHECK(c && sc && z && c[0] == 15 && c[1] == 0 && c[2] == 3 && sc[0] == 0x3000 && z[0] == 3, "uint4");
    qp_qweights_destroy(q);
    /* NVFP4: max 6 -> weight_scale_2 = 6/2688, g = 448: the block scale is
     * e4m3(448) = 0x7E, 6 -> code 7, 1 -> code 2 (element 1: high nibble) */
    float wn[16] = {6.0f, 1.0f};
    s = mk(QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, QP_DTYPE_F4_E2M1, 1);
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.input_absmax = 2688.0f;
    CHECK(qp_quantize_weights(NULL, &s, wn, 1, 16, &o, &q) == QP_OK, "hand nvfp4");
    const uint8_t *b = EXPECT_T(q, 0, "weight", QP_DTYPE_U8, 2, 1, 8);
    const uint8_t *sf = EXPECT_T(q, 1, "weight_scale", QP_DTYPE_F8_E4M3FN, 2, 1, 1);
    CHECK(b && sf && b[0] == 0x27 && sf[0] == 0x7E, "nvfp4 codes %02x %02x", b ? b[0] : 0, sf ? sf[0] : 0);
    CHECK(qp_qweights_find(q, "weight_scale_2", &t) == QP_OK && *(const float *)t.data == 6.0f / 2688.0f, "ws2");
    CHECK(qp_qweights_find(q, "input_scale_2", &t) == QP_OK && *(const float *)t.data == 1.0f, "is2");
    qp_qweights_destroy(q);
    /* W4A8: input_scale = absmax / 448 of the calibration data */
    float cal[32] = {0};
    cal[7] = -8.96f;
    o.calib = cal;
    o.calib_rows = 1;
    s = mk(QP_SCHEME_W4A8_MXFP4_FP8, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 32, QP_DTYPE_F8_E4M3FN, 0);
    CHECK(qp_quantize_weights(NULL, &s, w, 1, 32, &o, &q) == QP_OK, "hand w4a8");
    CHECK(qp_qweights_find(q, "input_scale", &t) == QP_OK && *(const float *)t.data == 8.96f / 448.0f, "w4a8 input_scale");
    qp_qweights_destroy(q);
}

static void errors(void) {
    qp_context *ctx;
    qp_context_create(&ctx);
    qp_qweights *q;
    float w[64 * 48];
    for (int i = 0; i < 64 * 48; i++) w[i] = frand();
    qp_scheme s = mk(QP_SCHEME_OCP_MX, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 32, QP_DTYPE_F4_E2M1, 1);
    CHECK(qp_quantize_weights(ctx, &s, w, 64, 48, NULL, &q) == QP_ERR_VALUE && !q &&
              strstr(qp_last_error(ctx), "input size per partition of 48 must be divisible by the OCP MX group size 32"),
          "mx K: %s", qp_last_error(ctx));
    s = mk(QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, QP_DTYPE_F4_E2M1, 1);
    CHECK(qp_quantize_weights(ctx, &s, w, 64, 40, NULL, &q) == QP_ERR_VALUE &&
              strstr(qp_last_error(ctx), "Input size per partition (40) must be divisible by group size (16)"),
          "nvfp4 K: %s", qp_last_error(ctx));
    s = mk(QP_SCHEME_QQQ_W4A8, QP_DTYPE_I4, QP_GRAN_CHANNEL, 0, QP_DTYPE_I8, 1);
    CHECK(qp_quantize_weights(ctx, &s, w, 48, 64, NULL, &q) != QP_OK && *qp_last_error(ctx), "qqq shape: %s", qp_last_error(ctx));
    s = mk(QP_SCHEME_W4A16_INT4, QP_DTYPE_I4, QP_GRAN_GROUP, 32, QP_DTYPE_NONE, 0);
    s.pack_method = QP_PACK_REORDER;
    CHECK(qp_quantize_weights(ctx, &s, w, 64, 48, NULL, &q) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "not divisible by the group size 32"),
          "w4a16 group: %s", qp_last_error(ctx));
    s.pack_method = QP_PACK_NONE;
    CHECK(qp_quantize_weights(ctx, &s, w, 64, 32, NULL, &q) == QP_ERR_INVALID_ARGUMENT, "w4a16 pack");
    /* a group whose scale overflows fp16 (max|w|/7 > 65504) */
    s.pack_method = QP_PACK_ORDER;
    float big[32];
    for (int i = 0; i < 32; i++) big[i] = i ? 1.0f : 1e6f;
    CHECK(qp_quantize_weights(ctx, &s, big, 1, 32, NULL, &q) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "overflows f16"),
          "w4a16 overflow: %s", qp_last_error(ctx));
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.params_dtype = QP_DTYPE_BF16;
    CHECK(qp_quantize_weights(ctx, &s, big, 1, 32, &o, &q) == QP_OK, "bf16 holds it");
    qp_qweights_destroy(q);
    o.params_dtype = QP_DTYPE_F32;
    CHECK(qp_quantize_weights(ctx, &s, big, 1, 32, &o, &q) == QP_ERR_INVALID_ARGUMENT, "params f32");
    qp_context_destroy(ctx);
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 37u;
    printf("seed %u\n", st);
    for (int di = 0; di < 2; di++) {
        qp_dtype d = di ? QP_DTYPE_BF16 : QP_DTYPE_F16;
        int groups[] = {32, 64, 128, -1};
        for (int gi = 0; gi < 4; gi++)
            for (int sym = 0; sym < 2; sym++) {
                w4a16_case(d, d, sym, QP_PACK_REORDER, groups[gi], 24);
                w4a16_case(d, d, sym, QP_PACK_ORDER, groups[gi], 20);
            }
        w4a16_case(d, di ? QP_DTYPE_F16 : QP_DTYPE_BF16, 1, QP_PACK_ORDER, 128, 16); /* names only */
        qp_dtype es[] = {QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E2M3, QP_DTYPE_F6_E3M2, QP_DTYPE_F8_E4M3FN};
        for (int i = 0; i < 4; i++) mx_case(d, QP_SCHEME_OCP_MX, es[i], 1);
        mx_case(d, QP_SCHEME_OCP_MX, QP_DTYPE_F8_E4M3FN, 4);
        mx_case(d, QP_SCHEME_W4A8_MXFP4_FP8, QP_DTYPE_F4_E2M1, 1);
        nvfp4_case(d);
    }
    qqq_case(-1, 128, 64);
    qqq_case(128, 256, 128);
    hand_cases();
    errors();
    return tu_finish("test_qweights_4bit");
}
