/* Conformance layers: schemes from real configs, seeded weights quantized
 * into checkpoint tensors with the library's own quantizers (the same
 * tensors a Quark/QQQ export holds), activation distributions, and the
 * bound each float path is held to. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUARK(W, I)                                                                                            \
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"            \
    "\"global_quant_config\":{\"weight\":" W ",\"input_tensors\":" I ",\"output_tensors\":null,\"bias\":null}," \
    "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}"
#define T(dt, qs, sym, dyn) "{\"dtype\":\"" dt "\",\"qscheme\":\"" qs "\",\"symmetric\":" sym ",\"is_dynamic\":" dyn "}"

const case_scheme case_schemes[] = {
    {"int8-dyn-sym", QUARK(T("int8", "per_channel", "true", "false"), T("int8", "per_channel", "true", "true")), 1, 0, 1, 1},
    {"int8-dyn-asym", QUARK(T("int8", "per_channel", "true", "false"), T("int8", "per_channel", "false", "true")), 1, 0, 1, 1},
    {"int8-static-sym", QUARK(T("int8", "per_tensor", "true", "false"), T("int8", "per_tensor", "true", "false")), 1, 0, 1, 1},
    {"int8-static-asym", QUARK(T("int8", "per_tensor", "true", "false"), T("int8", "per_tensor", "false", "false")), 1, 0, 1, 1},
    {"fp8-static", QUARK(T("fp8_e4m3", "per_tensor", "true", "false"), T("fp8_e4m3", "per_tensor", "true", "false")), 0, 0, 1, 1},
    {"fp8-dyn-tensor", QUARK(T("fp8_e4m3", "per_tensor", "true", "false"), T("fp8_e4m3", "per_tensor", "true", "true")), 0, 0, 1, 1},
    {"fp8-dyn-token", QUARK(T("fp8_e4m3", "per_channel", "true", "false"), T("fp8_e4m3", "per_channel", "true", "true")), 0, 0, 1, 1},
    {"qqq-channel", "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":-1}", 1, 1, 128, 64},
    {"qqq-g128", "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":128}", 1, 1, 128, 64},
};
const int n_case_schemes = (int)(sizeof case_schemes / sizeof *case_schemes);

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
    for (int i = 0; i < 8; i++)
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
    } else {
        snprintf(err, errcap, "no case generator for %s", qp_scheme_kind_name(kind));
        rc = -1;
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
    for (int i = 0; i < 8; i++) { free(l->owned[i]); l->owned[i] = NULL; }
    l->n_tensors = 0;
}

/*
 * Float paths (fp8): device and reference quantize the activations with the
 * same fp32 operations, so they agree on every code and scale; they differ
 * only in how the K products are summed (fp32 on a device, fp64 in the
 * reference) and in the final rounding. Summation of K terms in fp32 in
 * any order errs by at most (K-1) * 2^-24 * sum|terms| (Higham's gamma_K,
 * first order); the terms are bounded by |x_k| (1 + 2^-3) |w_deq_k| (an
 * e4m3 code is within 2^-4 of its input, and a dynamic scale can only
 * shrink |x|/s; the factor 2^-3 leaves room for the scale's own rounding).
 * The output rounding adds one ulp of the output dtype at |ref| (the
 * reference's own rounding and the device's may land on neighbours), and
 * the bias add in the epilogue one more.
 */
double case_bound(const case_layer *l, const uint16_t *x, int m, double ref, qp_dtype out, int n) {
    double sum = 0;
    for (int k = 0; k < l->K; k++)
        sum += fabs((double)qp_format_decode(l->act_dtype, x[(size_t)m * l->K + k])) *
               fabs((double)l->w_deq[(size_t)n * l->K + k]);
    double ulp_rel = out == QP_DTYPE_BF16 ? 0x1p-7 : 0x1p-10;
    double ulp = fmax(fabs(ref) * ulp_rel, out == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24);
    return (double)l->K * 0x1p-24 * sum * 1.125 + 2.0 * ulp;
}
