/* Conformance layers: schemes from real configs, seeded weights quantized
 * into checkpoint tensors with the library's own quantizers (the same
 * tensors a Quark/QQQ export holds), activation distributions, and the
 * bound each float path is held to. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qconfigs.h"

/* lm_head stays unquantized, as exporters leave it */
#define QUARK(W, I) QC_QUARK("reorder", "[\"lm_head\"]", W, I)
#define T QC_T
#define MX QC_MX
#define W4 QC_W4

/* One row per scheme description: the conformance cases (the rows before
 * n_case_schemes, in sweep order) and, under tool_name, the schemes
 * `qport quantize` writes and `qport bench` / `qport devices` list, so a
 * scheme variant is one row serving both (docs/contributing.md). The
 * configs are written as the exporters write them, lm_head excluded. */
const case_scheme case_schemes[] = {
    {"int8-dyn-sym", "int8-dyn-sym", QUARK(T("int8", "per_channel", "true", "false"), T("int8", "per_channel", "true", "true")), 1, 0, 1, 1, 0, 0},
    {"int8-dyn-asym", "int8-dyn-asym", QUARK(T("int8", "per_channel", "true", "false"), T("int8", "per_channel", "false", "true")), 1, 0, 1, 1, 0, 0},
    {"int8-static-sym", "int8-static-sym", QUARK(T("int8", "per_tensor", "true", "false"), T("int8", "per_tensor", "true", "false")), 1, 0, 1, 1, 0, 0},
    {"int8-static-asym", "int8-static-asym", QUARK(T("int8", "per_tensor", "true", "false"), T("int8", "per_tensor", "false", "false")), 1, 0, 1, 1, 0, 0},
    {"fp8-static", "fp8-static", QUARK(T("fp8_e4m3", "per_tensor", "true", "false"), T("fp8_e4m3", "per_tensor", "true", "false")), 0, 0, 1, 1, 0, 0},
    {"fp8-dyn-tensor", "fp8-dyn-tensor", QUARK(T("fp8_e4m3", "per_tensor", "true", "false"), T("fp8_e4m3", "per_tensor", "true", "true")), 0, 0, 1, 1, 0, 0},
    {"fp8-dyn-token", "fp8-dyn-token", QUARK(T("fp8_e4m3", "per_channel", "true", "false"), T("fp8_e4m3", "per_channel", "true", "true")), 0, 0, 1, 1, 0, 0},
    {"qqq-channel", "qqq-channel", QC_QQQ("-1"), 1, 1, 128, 64, 0, 0},
    {"qqq-g128", "qqq", QC_QQQ("128"), 1, 1, 128, 64, 0, 0},
    {"w4a16-int4-g128", "w4a16-int4", QUARK(W4("int4", "true", "128"), "null"), 0, 0, 128, 1, 0, 0},
    {"w4a16-uint4-order", NULL, QC_QUARK("order", "[]", W4("uint4", "false", "128"), "null"), 0, 0, 128, 1, 0, 0},
    {"w4a16-int4-g32", NULL, QUARK(W4("int4", "true", "32"), "null"), 0, 0, 32, 1, 0, 0},
    {"w4a16-uint4-g32", NULL, QUARK(W4("uint4", "false", "32"), "null"), 0, 0, 32, 1, 0, 1},
    {"w4a16-uint4-g64", "w4a16-uint4-g64", QUARK(W4("uint4", "false", "64"), "null"), 0, 0, 64, 1, 0, 0},
    {"fp8-block", "fp8-block", QUARK(QC_FP8_BLOCK_W, QC_FP8_GROUP_A), 0, 0, 128, 1, 0, 0},
    {"fp8-block-e8m0", NULL, QUARK(QC_FP8_BLOCK_W_E8M0, QC_FP8_GROUP_A), 0, 0, 128, 1, 0, 0},
    {"hf-fp8-block", NULL, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128]}", 0, 0, 128, 1, 0, 0},
    /* power-of-two activation group scales (vLLM with DeepGEMM's E8M0 path) */
    {"fp8-block-ue8m0", NULL, QUARK(QC_FP8_BLOCK_W_E8M0, QC_FP8_GROUP_A), 0, 0, 128, 1, 1, 0},
    {"mxfp4-w-only", "mxfp4", QUARK(MX("fp4", "false"), "null"), 0, 0, 32, 1, 0, 0},
    {"mxfp4", "mxfp4-a-mxfp4", QUARK(MX("fp4", "false"), MX("fp4", "true")), 0, 0, 32, 1, 0, 0},
    {"mxfp6-e3m2", "mxfp6-e3m2", QUARK(MX("fp6_e3m2", "false"), MX("fp6_e3m2", "true")), 0, 0, 32, 1, 0, 0},
    {"mxfp6-e2m3", "mxfp6-e2m3", QUARK(MX("fp6_e2m3", "false"), MX("fp6_e2m3", "true")), 0, 0, 32, 1, 0, 0},
    {"mxfp4-a-mxfp8", NULL, QUARK(MX("fp4", "false"), MX("fp8_e4m3", "true")), 0, 0, 32, 1, 0, 0},
    {"mxfp8", "mxfp8", QUARK(MX("fp8_e4m3", "false"), MX("fp8_e4m3", "true")), 0, 0, 32, 1, 0, 0},
    {"w4a8-mxfp4-fp8", "w4a8-mxfp4-fp8", QUARK(MX("fp4", "false"), T("fp8_e4m3", "per_tensor", "true", "false")), 0, 0, 32, 1, 0, 0},
    {"nvfp4", "nvfp4", QUARK(QC_NVFP4_W, QC_NVFP4_A), 0, 0, 16, 1, 0, 0},
    /* MXFP4 with Quark's online input rotation (a 32x32 Hadamard) */
    {"mxfp4-rotated", NULL, QUARK(MX("fp4", "false"), MX("fp4", "true")), 0, 0, 32, 1, 0, 0},
    /* compressed-tensors presets (llm-compressor's W8A8, FP8, FP8_DYNAMIC,
     * FP8_BLOCK, W4A16, W4A16_ASYM, NVFP4): the Quark twin's arithmetic in
     * llm-compressor's layout (to_ct) */
    {"ct-w8a8-int8", "ct-w8a8-int8", QC_CT("int-quantized", QC_CTA("int", "8", "channel", "null", "true", "false", "null"),
                                           QC_CTA("int", "8", "token", "null", "true", "true", "null")), 1, 0, 1, 1, 0, 0},
    {"ct-fp8", "ct-fp8", QC_CT("float-quantized", QC_CTA("float", "8", "tensor", "null", "true", "false", "null"),
                               QC_CTA("float", "8", "tensor", "null", "true", "false", "null")), 0, 0, 1, 1, 0, 0},
    {"ct-fp8-dynamic", "ct-fp8-dynamic", QC_CT("float-quantized", QC_CTA("float", "8", "channel", "null", "true", "false", "null"),
                                               QC_CTA("float", "8", "token", "null", "true", "true", "null")), 0, 0, 1, 1, 0, 0},
    {"ct-fp8-block", "ct-fp8-block", QC_CT("float-quantized", QC_CTA("float", "8", "block", "null", "true", "false", "[128, 128]"),
                                           QC_CTA("float", "8", "group", "128", "true", "true", "null")), 0, 0, 128, 1, 0, 0},
    {"ct-w4a16", "ct-w4a16", QC_CT("pack-quantized", QC_CTA("int", "4", "group", "128", "true", "false", "null"), "null"), 0, 0,
     128, 8, 0, 0},
    {"ct-w4a16-asym", "ct-w4a16-asym", QC_CT("pack-quantized", QC_CTA("int", "4", "group", "128", "false", "false", "null"), "null"),
     0, 0, 128, 8, 0, 0},
    {"ct-nvfp4", "ct-nvfp4", QC_CT("nvfp4-pack-quantized", QC_CTA("float", "4", "tensor_group", "16", "true", "false", "null"),
                                   QC_CTA("float", "4", "tensor_group", "16", "true", "\"local\"", "null")), 0, 0, 16, 1, 0, 0},
    /* an excluded layer: vLLM's UnquantizedLinearMethod */
    {"unquantized", NULL, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"ignored_layers\":[\"model.layers.0.mlp.down_proj\"]}", 0, 0, 1, 1, 0, 0},
};
const int n_case_schemes = (int)(sizeof case_schemes / sizeof *case_schemes);
/* the tools' schemes without a conformance case of their own */
static const case_scheme tool_rows[] = {
    {NULL, "w4a16-uint4", QUARK(W4("uint4", "false", "128"), "null"), 0, 0, 128, 1, 0, 0},
    {NULL, "hf-fp8", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"ignored_layers\":[\"lm_head\"]}", 0, 0, 1, 1, 0, 0},
    {NULL, "hf-fp8-static", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\",\"ignored_layers\":[\"lm_head\"]}", 0, 0, 1, 1, 0, 0},
};

const case_scheme *quant_scheme_at(size_t i) {
    for (int r = 0; r < n_case_schemes; r++)
        if (case_schemes[r].tool_name && !i--) return &case_schemes[r];
    return i < sizeof tool_rows / sizeof *tool_rows ? &tool_rows[i] : NULL;
}

const case_scheme *quant_scheme_find(const char *name) {
    for (size_t i = 0; quant_scheme_at(i); i++)
        if (!strcmp(quant_scheme_at(i)->tool_name, name)) return quant_scheme_at(i);
    return NULL;
}

void quant_scheme_list(FILE *f) {
    for (size_t i = 0; quant_scheme_at(i); i++) fprintf(f, "%s%s", i ? " " : "", quant_scheme_at(i)->tool_name);
    fputc('\n', f);
}

const case_scheme *case_scheme_find(const char *name) {
    for (int i = 0; i < n_case_schemes; i++)
        if (!strcmp(case_schemes[i].name, name)) return &case_schemes[i];
    return NULL;
}

const char *case_dist_name(case_dist d) {
    static const char *const n[] = {"uniform", "outliers", "zero-rows", "const-rows", "ties", "saturate"};
    return (unsigned)d < DIST_COUNT ? n[d] : "?";
}

uint64_t case_rng(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(uint64_t *s) { return (double)(case_rng(s) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0; }
static double gauss(uint64_t *s) {
    double u = (unif(s) + 1.0) * 0.5 + 1e-300, v = unif(s);
    return sqrt(-2.0 * log(u)) * cos(3.141592653589793 * v);
}

void case_activations(case_dist d, qp_dtype dt, int M, int K, uint64_t seed, uint16_t *x) {
    uint64_t s = seed * 0x2545F4914F6CDD1Dull + (uint64_t)d;
    for (int m = 0; m < M; m++) {
        double c = unif(&s) * 4.0;
        for (int k = 0; k < K; k++) {
            double v;
            switch (d) {
            case DIST_OUTLIERS: v = gauss(&s); if ((case_rng(&s) % 100) == 0) v *= 30.0; break;
            case DIST_ZERO_ROWS: v = m % 3 == 1 ? 0.0 : unif(&s); break;
            case DIST_CONST_ROWS: v = c; break;
            case DIST_TIES: v = (double)((int)(case_rng(&s) % 33) - 16) * 0.5; break; /* halves: int8/fp4 ties */
            case DIST_SATURATE: v = unif(&s) * 500.0; break;
            default: v = unif(&s); break;
            }
            x[(size_t)m * K + k] = (uint16_t)qp_format_encode(dt, (float)v);
        }
    }
}

static void *own(case_layer *l, size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    for (int i = 0; i < 10; i++)
        if (!l->owned[i]) { l->owned[i] = p; return p; }
    free(p);
    return NULL;
}

static void add(case_layer *l, const char *name, qp_dtype dt, int ndim, int64_t d0, int64_t d1, const void *data) {
    qp_tensor *t = &l->tensors[l->n_tensors++];
    *t = (qp_tensor){name, dt, ndim, {d0, d1, 0, 0}, data};
}

/* absmax over the calibration rows (static scales), 1.0 without them */
static void calib_range(const uint16_t *c, int cm, int K, qp_dtype dt, float *lo, float *hi) {
    *lo = -1.0f; *hi = 1.0f;
    if (!c || cm <= 0) return;
    *lo = INFINITY; *hi = -INFINITY;
    for (size_t i = 0; i < (size_t)cm * K; i++) {
        float v = qp_format_decode(dt, c[i]);
        if (isfinite(v)) { *lo = fminf(*lo, v); *hi = fmaxf(*hi, v); }
    }
    if (*lo > 0) *lo = 0;
    if (*hi < 0) *hi = 0;
    if (*hi - *lo == 0) { *lo = -1; *hi = 1; }
}

/* W8A8-FP8 per-block: Quark's, or HF fp8 with weight_block_size */
static int fp8_block(const case_layer *l) {
    return l->scheme.kind == QP_SCHEME_W8A8_FP8_BLOCK ||
           (l->scheme.kind == QP_SCHEME_HF_FP8 && l->scheme.weight.granularity == QP_GRAN_BLOCK);
}


static const qp_tensor *tensor_named(const case_layer *l, const char *name) {
    for (size_t i = 0; i < l->n_tensors; i++)
        if (!strcmp(l->tensors[i].name, name)) return &l->tensors[i];
    return NULL;
}

/* Sylvester's Hadamard matrix of order r (a power of two): H[i][j] =
 * (-1)^popcount(i & j). */
void case_hadamard(int r, int8_t *H) {
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) H[(size_t)i * r + j] = (int8_t)(__builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1);
}

/* The layer's checkpoint tensors from the library's exporter
 * (qp_quantize_weights, as `qport quantize` writes them), copied into the
 * layer under the exporter's names; `calib` (may be NULL) sets static
 * activation scales. */
static int export_tensors(qp_context *ctx, case_layer *l, const float *w, const uint16_t *calib, int calib_m,
                          char *err, size_t errcap) {
    static const char *const names[] = {"weight", "weight_scale", "weight_zero_point", "weight_scale_inv",
                                        "input_scale", "weight_scale_2", "input_scale_2"};
    int K = l->K, rc = 0;
    float *cf = NULL;
    qp_quantize_options qo;
    qp_quantize_options_init(&qo);
    qo.params_dtype = l->act_dtype;
    if (calib && calib_m > 0) {
        cf = malloc(sizeof(float) * (size_t)calib_m * K);
        if (!cf) { snprintf(err, errcap, "out of memory"); return -1; }
        for (size_t i = 0; i < (size_t)calib_m * K; i++) cf[i] = qp_format_decode(l->act_dtype, calib[i]);
        qo.calib = cf;
        qo.calib_rows = (size_t)calib_m;
    }
    qp_qweights *q = NULL;
    if (qp_quantize_weights(ctx, &l->scheme, w, l->N, K, &qo, &q)) {
        snprintf(err, errcap, "%s", qp_last_error(ctx));
        rc = -1;
    }
    free(cf);
    for (size_t i = 0; !rc && i < qp_qweights_count(q); i++) {
        qp_tensor t;
        qp_qweights_get(q, i, &t);
        /* the names are the library's static strings, but the layer keeps
         * its own (the qweights owns t.name) */
        const char *nm = NULL;
        for (size_t k = 0; k < sizeof names / sizeof *names; k++) if (!strcmp(t.name, names[k])) nm = names[k];
        if (!nm) { snprintf(err, errcap, "unexpected tensor '%s'", t.name); rc = -1; break; }
        size_t bytes = qp_tensor_bytes(&t);
        void *copy = own(l, bytes);
        if (!copy || l->n_tensors >= 6) { snprintf(err, errcap, "out of memory"); rc = -1; break; }
        memcpy(copy, t.data, bytes);
        add(l, nm, t.dtype, t.ndim, t.shape[0], t.ndim > 1 ? t.shape[1] : 0, copy);
    }
    qp_qweights_destroy(q);
    return rc;
}

/* OCP-MX, W4A8-MXFP4-FP8, NVFP4 and unquantized layers through the library's
 * exporter (qp_quantize_weights, as `qport quantize` writes them); w_deq is
 * the exact dequantized weight (the device's rounding to the activation
 * dtype changes it by at most one ulp, which the bound's 1.01 covers). */
static int make_block_float(qp_context *ctx, case_layer *l, const float *w, const uint16_t *calib, int calib_m,
                            char *err, size_t errcap) {
    int N = l->N, K = l->K;
    size_t NK = (size_t)N * K;
    if (l->scheme.kind == QP_SCHEME_UNQUANTIZED) {
        uint16_t *wa = own(l, NK * 2);
        if (!wa) { snprintf(err, errcap, "out of memory"); return -1; }
        for (size_t i = 0; i < NK; i++) {
            wa[i] = (uint16_t)qp_format_encode(l->act_dtype, w[i] * 20.0f);
            l->w_deq[i] = qp_format_decode(l->act_dtype, wa[i]);
        }
        add(l, "weight", l->act_dtype, 2, N, K, wa);
        return 0;
    }
    int rc = export_tensors(ctx, l, w, calib, calib_m, err, errcap);
    const qp_tensor *tw = tensor_named(l, "weight"), *ts = tensor_named(l, "weight_scale");
    if (!rc && (!tw || !ts)) { snprintf(err, errcap, "the exporter wrote no weight / weight_scale"); rc = -1; }
    uint8_t *codes = rc ? NULL : malloc(NK);
    if (!rc && !codes) { snprintf(err, errcap, "out of memory"); rc = -1; }
    qp_dtype we = l->scheme.kind == QP_SCHEME_OCP_MX ? l->scheme.weight.dtype : QP_DTYPE_F4_E2M1;
    for (int n = 0; !rc && n < N; n++) {
        const uint8_t *row = tw->data;
        if (we == QP_DTYPE_F4_E2M1) qp_unpack_fp4(row + (size_t)n * (K / 2), (size_t)K, codes + (size_t)n * K);
        else if (we == QP_DTYPE_F8_E4M3FN) memcpy(codes + (size_t)n * K, row + (size_t)n * K, (size_t)K);
        else qp_unpack_fp6(row + (size_t)n * ((size_t)K * 3 / 4), (size_t)K, codes + (size_t)n * K);
    }
    if (!rc && l->scheme.kind == QP_SCHEME_NVFP4) {
        const qp_tensor *t2 = tensor_named(l, "weight_scale_2");
        float g = t2 ? ((const float *)t2->data)[0] : 1.0f;
        for (size_t i = 0; i < NK; i++)
            l->w_deq[i] = qp_format_decode(QP_DTYPE_F4_E2M1, codes[i]) *
                          qp_format_decode(QP_DTYPE_F8_E4M3FN, ((const uint8_t *)ts->data)[i / 16]) * g;
    } else if (!rc && qp_dequant_mx(ctx, we, codes, ts->data, (size_t)N, (size_t)K, l->w_deq)) {
        snprintf(err, errcap, "%s", qp_last_error(ctx));
        rc = -1;
    }
    free(codes);
    if (!rc && !strcmp(l->cs->name, "mxfp4-rotated")) {
        int r = 32;
        l->rotation = own(l, (size_t)r * r);
        if (!l->rotation) { snprintf(err, errcap, "out of memory"); return -1; }
        case_hadamard(r, l->rotation);
        l->rotation_size = r;
        qp_tensor *t = &l->tensors[l->n_tensors++];
        *t = (qp_tensor){"input_rotation", QP_DTYPE_I8, 2, {r, r, 0, 0}, l->rotation};
    }
    return rc;
}

/* A compressed-tensors case is made as its Quark twin (the same
 * arithmetic: docs/loading.md "compressed-tensors") and its tensors then
 * rewritten here as llm-compressor stores them, with this file's own
 * packing (independent of the library's writer): W4A16 weight_packed
 * [N][K/8] (value i of a word at bits 4i, stored + 8), weight_scale
 * [N][K/g], asymmetric weight_zero_point [N/8][K/g] packed along N,
 * weight_shape; NVFP4 weight_packed and the inverted global scales; W8A8
 * without weight zero points. */
static qp_scheme quark_twin(const qp_scheme *ct) {
    qp_scheme q = *ct;
    snprintf(q.method, sizeof q.method, "QuarkLinearMethod");
    if (q.kind == QP_SCHEME_W4A16_INT4) {
        q.pack_method = QP_PACK_ORDER;
        q.weight.dtype = q.weight.symmetric ? QP_DTYPE_I4 : QP_DTYPE_U4;
    }
    return q;
}

static int to_ct(case_layer *l, char *err, size_t errcap) {
    int N = l->N, K = l->K;
    for (size_t i = 0; i < l->n_tensors; i++) {
        qp_tensor *t = &l->tensors[i];
        if (!strcmp(t->name, "weight_zero_point") && l->scheme.kind != QP_SCHEME_W4A16_INT4) {
            memmove(t, t + 1, sizeof *t * (l->n_tensors - i - 1));
            l->n_tensors--;
            i--;
        } else if (!strcmp(t->name, "weight_scale_2") || !strcmp(t->name, "input_scale_2")) {
            float *v = (float *)t->data; /* the case's own buffer */
            v[0] = 1.0f / v[0];
            t->name = t->name[0] == 'w' ? "weight_global_scale" : "input_global_scale";
        } else if (!strcmp(t->name, "weight") && l->scheme.kind == QP_SCHEME_NVFP4) {
            t->name = "weight_packed";
        }
    }
    if (l->scheme.kind != QP_SCHEME_W4A16_INT4) return 0;
    const qp_tensor *tw = tensor_named(l, "weight"), *ts = tensor_named(l, "weight_scale"), *tz = tensor_named(l, "weight_zero_point");
    int g = l->scheme.weight.group_size > 0 ? l->scheme.weight.group_size : K, G = K / g, sym = l->scheme.weight.symmetric;
    if (N % 8 || K % 8 || !tw || !ts || (!sym && !tz)) { snprintf(err, errcap, "compressed-tensors W4A16 case needs N, K multiples of 8"); return -1; }
    size_t NK = (size_t)N * K, es = ts->dtype == QP_DTYPE_F32 ? 4 : 2;
    uint8_t *codes = malloc(NK), *zc = malloc((size_t)G * N), *tmp = malloc((size_t)G * N * es);
    int64_t *shape = own(l, 16);
    int rc = !codes || !zc || !tmp || !shape || qp_unpack_int4_quark(tw->data, K, N, QP_PACK_ORDER, codes) ||
             (!sym && qp_unpack_int4_quark(tz->data, G, N, QP_PACK_ORDER, zc));
    if (rc) snprintf(err, errcap, "out of memory or bad int4 words");
    for (size_t i = 0; !rc && i < l->n_tensors; i++) {
        qp_tensor *t = &l->tensors[i];
        if (!strcmp(t->name, "weight")) { /* [K][N/8] -> [N][K/8], the same bytes */
            uint32_t *w = (uint32_t *)t->data;
            memset(w, 0, NK / 2);
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++)
                    w[(size_t)n * (K / 8) + k / 8] |= (uint32_t)(codes[(size_t)k * N + n] ^ (sym ? 8 : 0)) << (4 * (k % 8));
            *t = (qp_tensor){"weight_packed", QP_DTYPE_I32, 2, {N, K / 8, 0, 0}, w};
        } else if (!strcmp(t->name, "weight_scale")) { /* [G][N] -> [N][G] */
            memcpy(tmp, t->data, (size_t)G * N * es);
            for (int gi = 0; gi < G; gi++)
                for (int n = 0; n < N; n++)
                    memcpy((uint8_t *)t->data + ((size_t)n * G + gi) * es, tmp + ((size_t)gi * N + n) * es, es);
            t->shape[0] = N;
            t->shape[1] = G;
        } else if (!strcmp(t->name, "weight_zero_point")) { /* [G][N/8] -> [N/8][G] along N */
            uint32_t *z = (uint32_t *)t->data;
            memset(z, 0, (size_t)G * N / 2);
            for (int gi = 0; gi < G; gi++)
                for (int n = 0; n < N; n++) z[(size_t)(n / 8) * G + gi] |= (uint32_t)zc[(size_t)gi * N + n] << (4 * (n % 8));
            t->shape[0] = N / 8;
            t->shape[1] = G;
        }
    }
    if (!rc) {
        shape[0] = N;
        shape[1] = K;
        add(l, "weight_shape", QP_DTYPE_I64, 1, 2, 0, shape);
    }
    free(codes); free(zc); free(tmp);
    return rc ? -1 : 0;
}

int case_layer_make(qp_context *ctx, const case_scheme *cs, int N, int K, qp_dtype dt, uint64_t seed,
                    const uint16_t *calib, int calib_m, case_layer *l, char *err, size_t errcap) {
    memset(l, 0, sizeof *l);
    l->cs = cs; l->N = N; l->K = K; l->act_dtype = dt;
    qp_config *cfg = NULL;
    if (qp_config_load_buffer(ctx, cs->name, cs->config, strlen(cs->config), &cfg) ||
        qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &l->scheme)) {
        snprintf(err, errcap, "%s", qp_last_error(ctx));
        qp_config_destroy(cfg);
        return -1;
    }
    qp_config_destroy(cfg);
    qp_scheme ct = l->scheme;
    int is_ct = !strncmp(ct.method, "CompressedTensors", 17);
    if (is_ct) l->scheme = quark_twin(&ct);
    size_t NK = (size_t)N * K;
    float *w = malloc(sizeof(float) * NK);
    l->w_deq = own(l, sizeof(float) * NK);
    if (!w || !l->w_deq) { free(w); snprintf(err, errcap, "out of memory"); return -1; }
    uint64_t s = seed ^ 0xA5A5A5A5ull;
    for (size_t i = 0; i < NK; i++) w[i] = (float)(unif(&s) * (1.0 + (double)(i % 7) * 0.1)) * 0.05f;
    float lo, hi;
    calib_range(calib, calib_m, K, dt, &lo, &hi);
    int rc = 0;
    qp_scheme_kind kind = l->scheme.kind;
    if (kind == QP_SCHEME_W8A8_INT8 || kind == QP_SCHEME_W8A8_FP8) {
        int fp8 = kind == QP_SCHEME_W8A8_FP8;
        int per_ch = l->scheme.weight.granularity == QP_GRAN_CHANNEL;
        float qmax = fp8 ? 448.0f : 127.0f;
        int8_t *wq = own(l, NK);
        float *ws = own(l, sizeof(float) * (per_ch ? N : 1));
        float tmax = 0;
        for (size_t i = 0; i < NK; i++) tmax = fmaxf(tmax, fabsf(w[i]));
        for (int n = 0; n < N; n++) {
            float a = 0;
            for (int k = 0; k < K; k++) a = fmaxf(a, fabsf(w[(size_t)n * K + k]));
            float sc = (per_ch ? a : tmax) / qmax;
            if (sc == 0) sc = 1;
            if (per_ch || n == 0) ws[per_ch ? n : 0] = sc;
            for (int k = 0; k < K; k++) {
                size_t i = (size_t)n * K + k;
                float q = w[i] / sc;
                if (fp8) {
                    uint32_t c = qp_format_encode(QP_DTYPE_F8_E4M3FN, q);
                    ((uint8_t *)wq)[i] = (uint8_t)c;
                    l->w_deq[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, c) * sc;
                } else {
                    float r = fminf(fmaxf(rintf(q), -127.0f), 127.0f);
                    wq[i] = (int8_t)r;
                    l->w_deq[i] = r * sc;
                }
            }
        }
        add(l, "weight", fp8 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_I8, 2, N, K, wq);
        add(l, "weight_scale", QP_DTYPE_F32, per_ch ? 2 : 1, per_ch ? N : 1, 1, ws);
        if (!l->scheme.activation.dynamic) {
            float *is = own(l, sizeof(float));
            if (l->scheme.activation.symmetric) {
                *is = fmaxf(fabsf(lo), fabsf(hi)) / qmax;
                add(l, "input_scale", QP_DTYPE_F32, 1, 1, 0, is);
            } else {
                /* Quark's asymmetric export: scale (max-min)/255, zp -128 - min/scale */
                int8_t *zp = own(l, 1);
                *is = (hi - lo) / 255.0f;
                *zp = (int8_t)fminf(fmaxf(rintf(-128.0f - lo / *is), -128.0f), 127.0f);
                add(l, "input_scale", QP_DTYPE_F32, 1, 1, 0, is);
                add(l, "input_zero_point", QP_DTYPE_I8, 1, 1, 0, zp);
            }
        }
    } else if (kind == QP_SCHEME_QQQ_W4A8) {
        int g = l->scheme.weight.group_size == 128 ? 128 : -1;
        float *wkn = malloc(sizeof(float) * NK);
        int8_t *q = malloc(NK);
        float *sc = malloc(sizeof(float) * N);
        uint16_t *sg = g == 128 ? malloc(sizeof(uint16_t) * (size_t)(K / 128) * N) : NULL;
        int32_t *B = own(l, (size_t)K / 16 * 2 * N * 4);
        float *scp = own(l, sizeof(float) * N);
        uint16_t *sgp = g == 128 ? own(l, sizeof(uint16_t) * (size_t)(K / 128) * N) : NULL;
        if (!wkn || !q || !sc || (g == 128 && !sg)) rc = -1;
        for (int n = 0; !rc && n < N; n++)
            for (int k = 0; k < K; k++) wkn[(size_t)k * N + n] = w[(size_t)n * K + k];
        if (!rc && (qp_qqq_quantize_weight(ctx, wkn, K, N, g, q, sc, sg) || qp_qqq_pack_weight(ctx, q, K, N, g, B) ||
                    qp_qqq_permute_scales(ctx, sc, sg, K, N, g, scp, sgp))) {
            snprintf(err, errcap, "%s", qp_last_error(ctx));
            rc = -1;
        }
        for (int n = 0; !rc && n < N; n++) /* dequantized: (int8 weight) * s_channel */
            for (int k = 0; k < K; k++) {
                int8_t c = q[(size_t)k * N + n];
                int w8 = g == 128 ? qp_ref_qqq_group_weight(c - 8, sg[(size_t)(k / 128) * N + n]) : 16 * c;
                l->w_deq[(size_t)n * K + k] = (float)w8 * sc[n];
            }
        free(wkn); free(q); free(sc); free(sg);
        add(l, "B", QP_DTYPE_I32, 2, K / 16, 2 * N, B);
        add(l, "s_channel", QP_DTYPE_F32, 2, 1, N, scp);
        if (g == 128) add(l, "s_group", QP_DTYPE_F16, 2, K / 128, N, sgp);
    } else if (kind == QP_SCHEME_OCP_MX || kind == QP_SCHEME_W4A8_MXFP4_FP8 || kind == QP_SCHEME_NVFP4 ||
               kind == QP_SCHEME_UNQUANTIZED) {
        rc = make_block_float(ctx, l, w, calib, calib_m, err, errcap);
    } else if (kind == QP_SCHEME_W4A16_INT4 || fp8_block(l)) {
        /* the library's exporter; the dequantized weights are rebuilt from
         * the checkpoint tensors */
        rc = export_tensors(ctx, l, w, NULL, 0, err, errcap);
        const qp_tensor *tw = tensor_named(l, "weight"), *tz = tensor_named(l, "weight_zero_point");
        const qp_tensor *ts = tensor_named(l, "weight_scale") ? tensor_named(l, "weight_scale") : tensor_named(l, "weight_scale_inv");
        if (!rc && (!tw || !ts)) { snprintf(err, errcap, "the exporter wrote no weight / weight_scale"); rc = -1; }
        if (!rc && kind == QP_SCHEME_W4A16_INT4) {
            /* int4: two's-complement codes times the group scale; uint4:
             * (code - zero point) times the scale (docs/semantics.md §17) */
            int g = l->scheme.weight.group_size > 0 ? l->scheme.weight.group_size : K, G = K / g;
            int sym = l->scheme.weight.symmetric;
            uint8_t *codes = malloc(NK), *zc = malloc((size_t)G * N);
            if (!codes || !zc || qp_unpack_int4_quark(tw->data, K, N, l->scheme.pack_method, codes) ||
                (!sym && (!tz || qp_unpack_int4_quark(tz->data, G, N, l->scheme.pack_method, zc)))) {
                snprintf(err, errcap, "cannot unpack the int4 weights");
                rc = -1;
            }
            for (int k = 0; !rc && k < K; k++)
                for (int n = 0; n < N; n++) {
                    int c = codes[(size_t)k * N + n];
                    int v = sym ? c - 16 * (c >= 8) : c - zc[(size_t)(k / g) * N + n];
                    float sc = qp_format_decode(ts->dtype, ((const uint16_t *)ts->data)[(size_t)(k / g) * N + n]);
                    l->w_deq[(size_t)n * K + k] = (float)v * sc;
                }
            free(codes); free(zc);
        } else if (!rc) {
            /* e4m3 code times its 128x128 block's scale (fp32, or e8m0) */
            int kb = (K + 127) / 128;
            for (int n = 0; n < N; n++)
                for (int k = 0; k < K; k++) {
                    size_t bi = (size_t)(n / 128) * kb + k / 128;
                    float sc = ts->dtype == QP_DTYPE_E8M0 ? qp_format_decode(QP_DTYPE_E8M0, ((const uint8_t *)ts->data)[bi])
                                                          : ((const float *)ts->data)[bi];
                    l->w_deq[(size_t)n * K + k] =
                        qp_format_decode(QP_DTYPE_F8_E4M3FN, ((const uint8_t *)tw->data)[(size_t)n * K + k]) * sc;
                }
        }
    } else {
        snprintf(err, errcap, "no case generator for %s", qp_scheme_kind_name(kind));
        rc = -1;
    }
    if (!rc && is_ct) {
        rc = to_ct(l, err, errcap);
        l->scheme = ct;
    }
    /* a bias on every layer: the epilogue path with the bias term */
    if (!rc) {
        uint16_t *b = own(l, sizeof(uint16_t) * N);
        for (int n = 0; n < N; n++) b[n] = (uint16_t)qp_format_encode(dt, (float)(unif(&s) * 0.1));
        add(l, "bias", dt, 1, N, 0, b);
    }
    free(w);
    if (rc) case_layer_free(l);
    return rc;
}

void case_layer_free(case_layer *l) {
    for (int i = 0; i < 10; i++) { free(l->owned[i]); l->owned[i] = NULL; }
    free(l->xq);
    l->xq = NULL;
    l->xq_src = NULL;
    l->n_tensors = 0;
}

/*
 * Float paths. Notation: u = 2^-24 (fp32 unit roundoff), ulp = one unit in
 * the last place of the output dtype at |ref|.
 *
 * fp8 (per-tensor / per-channel weights): device and reference quantize the
 * activations with the same fp32 operations, so they agree on every code
 * and scale; they differ only in how the K products are summed (fp32 on a
 * device, fp64 in the reference) and in the final rounding. Summation of K
 * terms in fp32 in any order errs by at most (K-1) u sum|terms| (Higham's
 * gamma_K, first order); the terms are bounded by |x_k| (1 + 2^-3) |w_deq_k|
 * (an e4m3 code is within 2^-4 of its input, and a dynamic scale can only
 * shrink |x|/s; the factor 2^-3 leaves room for the scale's own rounding).
 * The output rounding adds one ulp of the output dtype at |ref| (the
 * reference's own rounding and the device's may land on neighbours), and
 * the bias add in the epilogue one more:
 *     K u 1.125 sum_k |x_k| |w_deq,k| + 2 ulp.
 *
 * W4A16: no activation quantization; device and reference multiply the same
 * x_k by the same dequantized weight w_deq,k = (code - zp) * scale (exact in
 * fp32 and fp64). The reference sums the products in double and rounds once;
 * a device rounds each product and K-1 partial sums in fp32 (any order:
 * gamma_K of the dot product), adds the bias in fp32 (one more rounding) and
 * rounds to the output dtype:
 *     (K + 2) u 1.01 sum_k |x_k| |w_deq,k| + 2 ulp
 * (1.01 covers gamma_K's 1/(1 - K u) and the reference's fp64 error).
 *
 * fp8-block: the activation codes and per-group scales s_g are identical on
 * both sides (qp_quant_fp8_group, bit-exact), so each term is the exact
 * product q_k s_g * w_deq,k, with |q_k s_g| <= 1.0625 |x_k| + 2^-10 s_g (an
 * e4m3 code is within 2^-4 relatively in the normal range, within half the
 * subnormal step 2^-9 absolutely) and s_g <= 2 max(1e-10, absmax_g)/448 (2:
 * room for a power-of-two scale). The reference sums each group of 128 in
 * double, rounds it to fp32, scales and sums the groups in double: two fp32
 * roundings. A device rounds at most 127 times inside a group, twice in the
 * scaling (s_x * s_w, then part * that), K/128 times across groups and once
 * for the bias; so every term passes through at most 130 + K/128 + 2
 * roundings, and (first order)
 *     (132 + K/128) u 1.01 sum_k T_k |w_deq,k| + 2 ulp,
 * T_k the activation bound above: far tighter than K u for large K.
 */
/* The row the GEMM of a fake-quantizing scheme sees: x, rotated when the
 * layer carries a rotation, then quantized and dequantized exactly as the
 * reference does; cached per (x, m). NULL for the other schemes. */
static const float *qdq_row(const case_layer *cl, const uint16_t *x, int m) {
    case_layer *l = (case_layer *)cl;
    qp_scheme_kind kind = l->scheme.kind;
    if (kind != QP_SCHEME_OCP_MX && kind != QP_SCHEME_W4A8_MXFP4_FP8 && kind != QP_SCHEME_NVFP4) return NULL;
    int K = l->K;
    if (l->xq && l->xq_src == x && l->xq_m == m) return l->xq;
    if (!l->xq && !(l->xq = malloc(sizeof(float) * (size_t)K * 2 + (size_t)K * 2 + (size_t)K))) return NULL;
    float *xr = l->xq + K;
    uint16_t *rot = (uint16_t *)(xr + K);
    uint8_t *codes = (uint8_t *)(rot + K);
    uint8_t sc[4096];
    const uint16_t *src = x + (size_t)m * K;
    if (l->rotation) {
        qp_ref_rotation_forward(NULL, l->act_dtype, src, 1, K, l->rotation, l->rotation_size, rot);
        src = rot;
    }
    for (int k = 0; k < K; k++) xr[k] = qp_format_decode(l->act_dtype, src[k]);
    const qp_qtensor *a = &l->scheme.activation;
    if (K / 16 > (int)sizeof sc) return NULL;
    if (kind == QP_SCHEME_OCP_MX && a->dtype != QP_DTYPE_NONE) {
        qp_dtype ae = a->dtype;
        qp_quant_mx(NULL, ae, xr, 1, (size_t)K, codes, sc);
        qp_dequant_mx(NULL, ae, codes, sc, 1, (size_t)K, l->xq);
    } else if (kind == QP_SCHEME_NVFP4) {
        /* Quark's input_scale_2 is 1 / g; compressed-tensors stores g */
        const qp_tensor *t = tensor_named(l, "input_scale_2"), *tg = tensor_named(l, "input_global_scale");
        float g = tg ? ((const float *)tg->data)[0] : 1.0f / (t ? ((const float *)t->data)[0] : 1.0f);
        qp_quant_nvfp4(NULL, xr, 1, (size_t)K, g, codes, sc);
        for (int k = 0; k < K; k++)
            l->xq[k] = qp_format_decode(QP_DTYPE_F4_E2M1, codes[k]) * (qp_format_decode(QP_DTYPE_F8_E4M3FN, sc[k / 16]) / g);
    } else if (kind == QP_SCHEME_W4A8_MXFP4_FP8) {
        const qp_tensor *t = tensor_named(l, "input_scale");
        float s = t ? ((const float *)t->data)[0] : 1.0f;
        for (int k = 0; k < K; k++) {
            float v = fmaxf(-448.0f, fminf(xr[k] / s, 448.0f));
            l->xq[k] = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, v)) * s;
        }
    } else {
        memcpy(l->xq, xr, sizeof(float) * (size_t)K);
    }
    l->xq_src = x;
    l->xq_m = m;
    return l->xq;
}

double case_bound(const case_layer *l, const uint16_t *x, int m, double ref, qp_dtype out, int n) {
    double sum = 0;
    const uint16_t *xr = x + (size_t)m * l->K;
    const float *wr = l->w_deq + (size_t)n * l->K;
    double ulp_rel = out == QP_DTYPE_BF16 ? 0x1p-7 : 0x1p-10;
    double ulp = fmax(fabs(ref) * ulp_rel, out == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24);
    if (fp8_block(l)) {
        for (int g0 = 0; g0 < l->K; g0 += 128) {
            double amax = 0;
            for (int k = g0; k < g0 + 128 && k < l->K; k++) {
                double v = fabs((double)qp_format_decode(l->act_dtype, xr[k]));
                if (v > amax) amax = v; /* NaN skipped, as the quantizer's fmaxf */
            }
            double sg = 2.0 * fmax(1e-10, amax) / 448.0;
            for (int k = g0; k < g0 + 128 && k < l->K; k++)
                sum += (fabs((double)qp_format_decode(l->act_dtype, xr[k])) * 1.0625 + 0x1p-10 * sg) * fabs((double)wr[k]);
        }
        return (132.0 + l->K / 128.0) * 0x1p-24 * 1.01 * sum + 2.0 * ulp;
    }
    const float *xq = qdq_row(l, x, m);
    if (xq) {
        /* qdq schemes: x' is bit-identical on both sides (exact fp32 steps);
         * W4A16's argument with x' for x, the products exact (two 16-bit
         * floats), and 1.01 also covering x' and W rounded to the activation
         * dtype; NVFP4 rounds the sum before adding the bias: one ulp more */
        for (int k = 0; k < l->K; k++) sum += 1.01 * fabs((double)xq[k]) * fabs((double)wr[k]);
        double extra = 0;
        if (l->scheme.kind == QP_SCHEME_NVFP4) {
            /* the rounding before the bias is an ulp of the sum, which may be
             * far larger than |y| when the bias cancels it: |sum| <= |y| + |b| */
            const qp_tensor *b = tensor_named(l, "bias");
            double bn = b ? fabs((double)qp_format_decode(l->act_dtype, ((const uint16_t *)b->data)[n])) : 0.0;
            extra = fmax((fabs(ref) + bn) * ulp_rel, out == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24);
        }
        return (l->K + 2.0) * 0x1p-24 * 1.01 * sum + 2.0 * ulp + extra;
    }
    for (int k = 0; k < l->K; k++) sum += fabs((double)qp_format_decode(l->act_dtype, xr[k])) * fabs((double)wr[k]);
    if (l->scheme.kind == QP_SCHEME_W4A16_INT4 || l->scheme.kind == QP_SCHEME_UNQUANTIZED)
        return (l->K + 2.0) * 0x1p-24 * 1.01 * sum + 2.0 * ulp;
    return (double)l->K * 0x1p-24 * sum * 1.125 + 2.0 * ulp;
}
