/* NaN / +-inf / zero / constant / huge / tiny sweeps for every quantizer,
 * asserting what vLLM does (docs/semantics.md §6, §8, §12, §13,
 * §18) and, for the weight quantizers, qport's documented
 * contract: non-finite weights are refused naming the element, zero weights
 * give zero codes, and every magnitude fp32 holds (QQQ: fp16) comes back
 * through the scheme's reference forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NS 8
static const char *const names[NS] = {"zero", "const", "huge", "tiny", "subnormal", "nan", "+inf", "-inf"};
static float special(int i) {
    static const float v[NS] = {0.0f, 0.75f, 3.3e38f, 1e-30f, 1e-40f, 0, 0, 0};
    return i == 5 ? NAN : i == 6 ? INFINITY : i == 7 ? -INFINITY : v[i];
}
/* a 32-element row: 1.0 everywhere except the special at [1] (rows 0-1:
 * the whole row is that value) */
static void row(int i, float *x) {
    for (int k = 0; k < 32; k++) x[k] = i <= 1 ? special(i) : 1.0f;
    if (i > 1) x[1] = special(i);
}

static void int8_sweep(void) {
    float x[32];
    int8_t q[32];
    float s;
    int32_t z;
    for (int i = 0; i < NS; i++) {
        row(i, x);
        /* static symmetric q = sat8(rne(x / s)): NaN -> 0, +-inf saturate */
        qp_quant_int8_static(NULL, x, 1, 32, 0.01f, 0, 1, q);
        int want1 = i == 0 ? 0 : i == 1 ? 75 : i == 2 || i == 6 ? 127 : i == 7 ? -128 : i == 5 ? 0 : 0;
        CHECK(q[1] == want1, "int8 static sym %s: %d", names[i], q[1]);
        /* dynamic symmetric: absmax skips NaN; zero row -> scale 0, q 0 */
        qp_quant_int8_dynamic(NULL, x, 1, 32, 1, q, &s, NULL);
        if (i == 0) CHECK(s == 0.0f && q[0] == 0, "int8 dyn zero row: s %g", (double)s);
        if (i == 1) CHECK(s == 0.75f / 127.0f && q[0] == 127, "int8 dyn const row");
        if (i == 5) CHECK(s == 1.0f / 127.0f && q[1] == 0 && q[0] == 127, "int8 dyn NaN: q[1] %d", q[1]);
        /* an infinite absmax: scale inf, 127/inf = 0, so every q is 0 (inf * 0 = NaN -> 0) */
        if (i >= 6) CHECK(isinf(s) && q[0] == 0 && q[1] == 0, "int8 dyn %s: s %g q %d %d", names[i], (double)s, q[0], q[1]);
        /* dynamic asymmetric: constant rows -> every q = -1 (docs/semantics.md §12),
         * all-zero rows -> q 0, azp 0 */
        qp_quant_int8_dynamic(NULL, x, 1, 32, 0, q, &s, &z);
        if (i == 0) CHECK(q[0] == 0 && z == 0, "int8 asym zero row: q %d azp %d", q[0], z);
        if (i == 1) CHECK(q[0] == -1 && q[31] == -1 && s == 0.0f && z == INT32_MIN, "int8 asym const row: q %d azp %d", q[0], z);
    }
    /* static asymmetric: +inf saturates to INT32_MAX and the int32 add of
     * a positive azp wraps (docs/semantics.md §12: the GPU's adds wrap) -> -128 */
    row(6, x);
    qp_quant_int8_static(NULL, x, 1, 32, 0.01f, 5, 0, q);
    CHECK(q[1] == -128 && q[0] == 105, "int8 static asym +inf with azp 5: %d %d", q[1], q[0]);
    row(5, x);
    qp_quant_int8_static(NULL, x, 1, 32, 0.01f, 5, 0, q);
    CHECK(q[1] == 5, "int8 static asym NaN -> 0 + azp: %d", q[1]);
}

static void fp8_sweep(void) {
    float x[32], s[1];
    uint8_t q[32];
    for (int i = 0; i < NS; i++) {
        row(i, x);
        /* static: NaN -> +448 (fminf/fmaxf clamp), +-inf -> +-448, tiny -> 0 */
        qp_quant_fp8_static(NULL, x, 32, 0.5f, q);
        uint8_t want = i == 0 ? 0x00 : i == 1 ? 0x3C /* 1.5 */ : i == 2 || i == 5 || i == 6 ? 0x7E : i == 7 ? 0xFE : 0x00;
        CHECK(q[1] == want, "fp8 static %s: %02x want %02x", names[i], q[1], want);
        /* dynamic per tensor: no minimum scale; all zero -> s 0 and 0x7E (docs/semantics.md §13) */
        qp_quant_fp8_dynamic_tensor(NULL, x, 32, q, s);
        if (i == 0) CHECK(s[0] == 0.0f && q[0] == 0x7E && q[31] == 0x7E, "fp8 tensor zero: %g %02x", (double)s[0], q[0]);
        if (i == 5) CHECK(s[0] == 1.0f / 448.0f && q[1] == 0x7E && q[0] == 0x7E, "fp8 tensor NaN");
        /* dynamic per token: min scale 1/(448*512) */
        qp_quant_fp8_dynamic_token(NULL, x, 1, 32, 0.0f, q, s);
        if (i == 0) CHECK(s[0] == 1.0f / (448.0f * 512.0f) && q[0] == 0, "fp8 token zero");
        if (i == 4) CHECK(s[0] == 1.0f / 448.0f, "fp8 token subnormal special keeps the row's scale");
        /* group: absmax >= 1e-10 */
        qp_quant_fp8_group(NULL, x, 1, 32, 32, 0, q, s);
        if (i == 0) CHECK(s[0] == 1e-10f / 448.0f && q[0] == 0, "fp8 group zero: %g", (double)s[0]);
        qp_quant_fp8_group(NULL, x, 1, 32, 32, 1, q, s);
        if (i == 1) CHECK(s[0] == ldexpf(1.0f, -9) && q[0] == qp_format_encode(QP_DTYPE_F8_E4M3FN, 384.0f), "fp8 group ue8m0 const");
        if (i == 6) CHECK(isinf(s[0]) && q[1] == 0x7E && q[0] == 0, "fp8 group ue8m0 +inf: s %g", (double)s[0]);
    }
}

static void mx_sweep(void) {
    float x[32], back[32];
    uint8_t q[32], s;
    for (int i = 0; i < NS; i++) {
        row(i, x);
        qp_quant_mx(NULL, QP_DTYPE_F4_E2M1, x, 1, 32, q, &s);
        qp_dequant_mx(NULL, QP_DTYPE_F4_E2M1, q, &s, 1, 32, back);
        switch (i) {
        case 0: CHECK(s == 0 && q[0] == 0 && back[0] == 0.0f, "mx zero: scale %d", s); break; /* 2^-126 -> e clamps to -127 */
        /* 0.75 = 1.5 * 2^-1 is below the 1.75 threshold: e = -1 - 2 (code 124), 0.75 / 2^-3 = 6 */
        case 1: CHECK(s == 124 && q[0] == 7 && back[0] == 0.75f, "mx const: %d %g", s, (double)back[0]); break;
        /* 3.3e38 = 1.94 * 2^127 rounds past FLT_MAX: e = 127 (code 254);
         * 1.94 -> fp4 2.0, which dequantizes to 2^128 = inf */
        case 2: CHECK(s == 254 && q[1] == 4 && isinf(back[1]) && q[0] == 0, "mx huge: %d %d %g", s, q[1], (double)back[1]); break;
        case 5: CHECK(s == 255 && isnan(back[0]), "mx NaN block: %d", s); break;
        case 6: CHECK(s == 254 && q[1] == 7 && q[0] == 0, "mx +inf: %d %d", s, q[1]); break;
        case 7: CHECK(s == 254 && q[1] == 15, "mx -inf: %d %d", s, q[1]); break;
        default: CHECK(back[0] == 1.0f, "mx %s: the 1.0s survive", names[i]);
        }
    }
}

static void nvfp4_sweep(void) {
    float x[32];
    uint8_t q[16], sf;
    for (int i = 0; i < NS; i++) {
        row(i, x); /* the first 16 of the row: one block */
        qp_quant_nvfp4(NULL, x, 1, 16, 2688.0f, q, &sf);
        switch (i) {
        case 0: CHECK(sf == 0 && q[0] == 0, "nvfp4 zero: sf %02x", sf); break;       /* out_scale 0 */
        case 5: CHECK(q[1] == 7 && q[0] == 7 && sf == 0x7E, "nvfp4 NaN -> +6 (satfinite): %d", q[1]); break; /* vmax skips NaN: 1.0 * 6 */
        case 6: CHECK(sf == 0x7E && q[1] == 7, "nvfp4 +inf: sf %02x q %d", sf, q[1]); break;
        case 7: CHECK(sf == 0x7E && q[1] == 15, "nvfp4 -inf: q %d", q[1]); break;
        default: break;
        }
    }
}

/* --- weight quantizers through the reference forwards ------------------- */
static qp_scheme mk(qp_scheme_kind kind, qp_dtype wd, qp_granularity wg, int group, qp_dtype ad, qp_granularity ag,
                    int adyn, int asym) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = kind;
    s.weight = (qp_qtensor){wd, wg, group, {0, 0}, 1, 0, QP_DTYPE_F32, QP_DTYPE_NONE};
    s.activation = (qp_qtensor){ad, ag, 0, {0, 0}, !asym, adyn, QP_DTYPE_F32, QP_DTYPE_NONE};
    return s;
}

static const void *T(const qp_qweights *q, const char *name) {
    qp_tensor t;
    return qp_qweights_find(q, name, &t) == QP_OK ? t.data : NULL;
}

/* Runs the scheme's reference forward from the named tensors. */
static qp_status forward(const qp_scheme *s, const qp_qweights *q, qp_dtype d, const uint16_t *x, int M, int K, int N,
                         uint16_t *y) {
    const float *is = T(q, "input_scale");
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8: {
        float sx = is ? is[0] : 0;
        int32_t azp = 0;
        const int8_t *iz = T(q, "input_zero_point");
        if (iz) { int32_t z = iz[0]; qp_int8_static_asym_rebuild(NULL, is, &z, 1, &sx, &azp); }
        qp_ref_int8_args a = {d, x, M, K, N, T(q, "weight"), T(q, "weight_scale"), s->weight.granularity == QP_GRAN_CHANNEL,
                              !s->activation.dynamic, s->activation.symmetric, sx, azp, NULL};
        return qp_ref_w8a8_int8_forward(NULL, &a, y);
    }
    case QP_SCHEME_W8A8_FP8: case QP_SCHEME_W8A8_FP8_BLOCK: case QP_SCHEME_HF_FP8: {
        bool block = s->weight.granularity == QP_GRAN_BLOCK || s->weight.block[0] > 0;
        qp_fp8_act act = block ? QP_FP8_ACT_GROUP128 : !s->activation.dynamic ? QP_FP8_ACT_STATIC
                       : s->activation.granularity == QP_GRAN_TOKEN ? QP_FP8_ACT_DYNAMIC_TOKEN : QP_FP8_ACT_DYNAMIC_TENSOR;
        const float *ws = T(q, s->kind == QP_SCHEME_HF_FP8 && block ? "weight_scale_inv" : "weight_scale");
        qp_ref_fp8_args a = {d, x, M, K, N, T(q, "weight"), ws, s->weight.granularity == QP_GRAN_CHANNEL, act,
                             is ? is[0] : 0, 0, NULL};
        return qp_ref_w8a8_fp8_forward(NULL, &a, y);
    }
    case QP_SCHEME_W4A16_INT4: {
        qp_ref_w4a16_args a = {d, x, M, K, N, T(q, "weight"), T(q, "weight_zero_point"), T(q, "weight_scale"),
                               s->weight.granularity == QP_GRAN_GROUP ? s->weight.group_size : -1, s->weight.dtype == QP_DTYPE_I4,
                               s->pack_method, NULL};
        return qp_ref_w4a16_forward(NULL, &a, y); /* N % 8 == 0 here: no scale padding */
    }
    case QP_SCHEME_OCP_MX: {
        qp_ref_ocp_mx_args a = {d, x, M, K, N, s->weight.dtype, T(q, "weight"), T(q, "weight_scale"), 1, QP_OCP_MX_ACT_NONE, NULL};
        return qp_ref_ocp_mx_forward(NULL, &a, y);
    }
    case QP_SCHEME_W4A8_MXFP4_FP8: {
        qp_ref_w4a8_mxfp4_args a = {d, x, M, K, N, T(q, "weight"), T(q, "weight_scale"), is[0], NULL};
        return qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y);
    }
    case QP_SCHEME_NVFP4: {
        qp_ref_nvfp4_args a = {d, x, M, K, N, T(q, "weight"), T(q, "weight_scale"), *(const float *)T(q, "weight_scale_2"),
                               *(const float *)T(q, "input_scale_2"), NULL, 0.0f};
        return qp_ref_nvfp4_forward(NULL, &a, y);
    }
    case QP_SCHEME_QQQ_W4A8:
        return qp_ref_qqq_forward(NULL, x, M, K, N, s->weight.granularity == QP_GRAN_GROUP ? 128 : -1, T(q, "B"),
                                  T(q, "s_channel"), T(q, "s_group"), NULL, y);
    default: return QP_ERR_UNSUPPORTED;
    }
}

#define K_ 128
#define N_ 64
static const float pattern[5] = {1.0f, -0.5f, 0.75f, -0.25f, 0.375f};

/* w = c * pattern; x = one-hot rows in x.dtype, so y[k][n] = W'[n][k]:
 * |y - w| <= tol * c + 2^-7 |w| (tol: the format's step at the block max) */
static void weight_sweep(const char *label, const qp_scheme *s, double tol) {
    qp_dtype d = s->kind == QP_SCHEME_QQQ_W4A8 ? QP_DTYPE_F16 : QP_DTYPE_BF16;
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    o.params_dtype = d;
    float *w = malloc(sizeof(float) * N_ * K_);
    uint16_t *x = calloc(K_ * K_, 2), *y = malloc(2 * K_ * N_);
    for (int k = 0; k < K_; k++) x[k * K_ + k] = (uint16_t)qp_format_encode(d, 1.0f);
    qp_context *ctx;
    qp_context_create(&ctx);
    qp_qweights *q;
    /* NaN / inf anywhere: refused, naming the element */
    for (int i = 0; i < N_ * K_; i++) w[i] = 0.5f;
    w[3 * K_ + 7] = NAN;
    CHECK(qp_quantize_weights(ctx, s, w, N_, K_, &o, &q) == QP_ERR_INVALID_ARGUMENT && !q &&
              strstr(qp_last_error(ctx), "weight [3][7] is NaN"), "%s NaN: %s", label, qp_last_error(ctx));
    w[3 * K_ + 7] = -INFINITY;
    CHECK(qp_quantize_weights(ctx, s, w, N_, K_, &o, &q) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "infinite"),
          "%s -inf: %s", label, qp_last_error(ctx));
    bool f16 = s->kind == QP_SCHEME_QQQ_W4A8;
    const double cs[] = {0.0, 1.0, f16 ? 4096.0 : ldexp(1, 60), f16 ? ldexp(1, -8) : ldexp(1, -100)};
    for (int ci = 0; ci < 4; ci++) {
        double c = cs[ci];
        for (int i = 0; i < N_ * K_; i++) w[i] = (float)(c * pattern[(i + i / K_) % 5]);
        qp_status st = qp_quantize_weights(ctx, s, w, N_, K_, &o, &q);
        CHECK(st == QP_OK, "%s c=%g: %s", label, c, qp_last_error(ctx));
        if (st != QP_OK) continue;
        st = forward(s, q, d, x, K_, K_, N_, y);
        CHECK(st == QP_OK, "%s c=%g forward: %s", label, c, qp_status_str(st));
        int bad = 0;
        for (int k = 0; st == QP_OK && k < K_; k++)
            for (int n = 0; n < N_; n++) {
                double got = qp_format_decode(d, y[k * N_ + n]), want = w[n * K_ + k];
                if (!(fabs(got - want) <= tol * c + ldexp(fabs(want), -7)) && bad++ < 2)
                    fprintf(stderr, "  %s c=%g: W'[%d][%d] = %g, w = %g\n", label, c, n, k, got, want);
            }
        CHECK(bad == 0, "%s c=%g: %d elements off", label, c, bad);
        qp_qweights_destroy(q);
    }
    /* magnitudes the checkpoint cannot hold are refused with a reason */
    if (f16) {
        for (int i = 0; i < N_ * K_; i++) w[i] = 1e6f;
        CHECK(qp_quantize_weights(ctx, s, w, N_, K_, &o, &q) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "overflows fp16"),
              "%s 1e6: %s", label, qp_last_error(ctx));
    } else {
        for (int i = 0; i < N_ * K_; i++) w[i] = (float)(3.3e38 * pattern[i % 5]);
        qp_status st = qp_quantize_weights(ctx, s, w, N_, K_, &o, &q);
        CHECK(st == QP_OK, "%s 3.3e38: %s", label, qp_last_error(ctx));
        qp_qweights_destroy(q);
        for (int i = 0; i < N_ * K_; i++) w[i] = 1e-40f * pattern[i % 5];
        CHECK(qp_quantize_weights(ctx, s, w, N_, K_, &o, &q) == QP_OK, "%s subnormal: %s", label, qp_last_error(ctx));
        qp_qweights_destroy(q);
    }
    qp_context_destroy(ctx);
    free(w); free(x); free(y);
}

static void weight_sweeps(void) {
    qp_scheme s;
    s = mk(QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, QP_GRAN_CHANNEL, 0, QP_DTYPE_I8, QP_GRAN_TOKEN, 1, 0);
    weight_sweep("int8 channel, dynamic", &s, 1.0 / 200);
    s = mk(QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, QP_GRAN_TENSOR, 0, QP_DTYPE_I8, QP_GRAN_TENSOR, 0, 1);
    weight_sweep("int8 tensor, static asym", &s, 1.0 / 200);
    s = mk(QP_SCHEME_W8A8_FP8, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, 0);
    weight_sweep("fp8 tensor, static", &s, 1.0 / 16);
    s = mk(QP_SCHEME_W8A8_FP8, QP_DTYPE_F8_E4M3FN, QP_GRAN_CHANNEL, 0, QP_DTYPE_F8_E4M3FN, QP_GRAN_TOKEN, 1, 0);
    weight_sweep("fp8 channel, token", &s, 1.0 / 16);
    s = mk(QP_SCHEME_W8A8_FP8_BLOCK, QP_DTYPE_F8_E4M3FN, QP_GRAN_BLOCK, 0, QP_DTYPE_F8_E4M3FN, QP_GRAN_GROUP, 1, 0);
    s.weight.block[0] = s.weight.block[1] = 128;
    weight_sweep("fp8 block", &s, 1.0 / 16);
    s = mk(QP_SCHEME_HF_FP8, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, 0);
    weight_sweep("hf fp8 static", &s, 1.0 / 16);
    s = mk(QP_SCHEME_W4A16_INT4, QP_DTYPE_I4, QP_GRAN_GROUP, 32, QP_DTYPE_NONE, QP_GRAN_NONE, 0, 0);
    s.pack_method = QP_PACK_REORDER;
    weight_sweep("w4a16 int4 g32", &s, 1.0 / 13);
    s = mk(QP_SCHEME_W4A16_INT4, QP_DTYPE_U4, QP_GRAN_GROUP, 128, QP_DTYPE_NONE, QP_GRAN_NONE, 0, 0);
    s.weight.symmetric = 0;
    s.pack_method = QP_PACK_ORDER;
    weight_sweep("w4a16 uint4 g128", &s, 1.0 / 13);
    qp_dtype mx[] = {QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E2M3, QP_DTYPE_F6_E3M2, QP_DTYPE_F8_E4M3FN};
    for (int i = 0; i < 4; i++) {
        s = mk(QP_SCHEME_OCP_MX, mx[i], QP_GRAN_GROUP, 32, QP_DTYPE_NONE, QP_GRAN_NONE, 0, 0);
        weight_sweep(qp_dtype_name(mx[i]), &s, 1.0 / 8);
    }
    s = mk(QP_SCHEME_W4A8_MXFP4_FP8, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 32, QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, 0);
    weight_sweep("w4a8 mxfp4", &s, 1.0 / 8);
    s = mk(QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 1, 0);
    weight_sweep("nvfp4", &s, 1.0 / 8);
    s = mk(QP_SCHEME_QQQ_W4A8, QP_DTYPE_I4, QP_GRAN_CHANNEL, 0, QP_DTYPE_I8, QP_GRAN_TOKEN, 1, 0);
    weight_sweep("qqq channel", &s, 1.0 / 13);
    s = mk(QP_SCHEME_QQQ_W4A8, QP_DTYPE_I4, QP_GRAN_GROUP, 128, QP_DTYPE_I8, QP_GRAN_TOKEN, 1, 0);
    weight_sweep("qqq group", &s, 1.0 / 13);
}

int main(void) {
    int8_sweep();
    fp8_sweep();
    mx_sweep();
    nvfp4_sweep();
    weight_sweeps();
    return tu_finish("test_quant_sweeps");
}
