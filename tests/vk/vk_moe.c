/* The fused MoE on Vulkan against the cpu reference through the
 * public API (qp_moe_create / qp_moe_forward / qp_moe_forward_topk), both
 * devices given the same tensors, router logits or top-k ids. Seeded data.
 *
 * Every scheme (unquantized, W8A8-FP8 static / dynamic per-tensor /
 * dynamic per-token with per-tensor or per-channel weights, W8A8-INT8
 * static / dynamic per-token, OCP MX mxfp4 w4a4 / weight-only / mxfp6,
 * W4A8 MXFP4-FP8, NVFP4) x fp16 / bf16, E in {8, 64}, k in {1, 2, 8}, M in
 * {1, 3, 16, 17, 64} on both paths (M <= 16 decode blocks, M > 16 tiles),
 * grouped top-k routing, experts with no token, one expert taking every
 * token, expert parallelism (global_num_experts / expert_offset). FP8
 * per-block experts (H 256, I 128) through tests/backend_moe.c's layers
 * and routings: within its derived bound, and here also 0 ulp; and a
 * layer whose k-block sums cancel, which only exact sums get right.
 *
 * The bound is zero for every scheme, derived: the device and the
 * reference differ at most in how sums are computed, and here they do not.
 * Each GEMM output on the device is summed over k in increasing order, one
 * add at a time, exactly the reference's order; every product is exact
 * (int8: integers; fp8: 4-bit x 4-bit significands in fp32; unquantized:
 * two act-dtype values, at most 11 x 11 bits, in fp32; emulated: x' and
 * W are act-dtype values, exact in double, summed in double and rounded
 * once to fp32 as the reference does; fp8 per-block: each k-block's e4m3
 * products summed in double, exact whatever the order, rounded once to
 * fp32, then folded with the two scales in double in k-block order and
 * rounded once, the reference's own arithmetic). With identical sums, the
 * epilogues, quantizers (the linear layers' own, bit-exact), silu (double,
 * rounded once: checked over every finite fp16 and bf16 input below) and
 * the ordered k-sum are the same correctly rounded operations, so every
 * output matches bit for bit: the allowed difference is 0 ulp.
 * A device without shaderFloat64 computes silu in fp32 (vk_moe.c logs a
 * warning saying "not bit-exact"); there the comparison is skipped with a note.
 * Also: the validation layer stays silent, refusals are QP_ERR_UNSUPPORTED
 * with a clear message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_moe.h"
#include "vk_tests.h"

static qp_context *ctx;
static qp_device *cpu, *gpu;
static unsigned vmsgs;
static long n_cases, n_outputs, n_mismatch;
static bool exact = true;
static uint64_t rng = 0x243f6a8885a308d3ull;

static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static void on_log(void *user, qp_log_level level, const char *msg) {
    (void)user;
    if (level >= QP_LOG_WARN && strstr(msg, "not bit-exact")) exact = false; /* vk_moe.c: no shaderFloat64 */
    if (level >= QP_LOG_WARN && strstr(msg, "validation")) {
        vmsgs++;
        fprintf(stderr, "%s\n", msg);
    }
}

enum sk { UNQ, FP8_STATIC_T, FP8_DYN_T, FP8_DYN_TOK, I8_STATIC_T, I8_STATIC, I8_DYN, MXFP4, MXFP4_WO, MXFP6, W4A8,
          NVFP4 };
static const char *const sk_name[] = {"unquantized", "fp8 static (per-tensor w)", "fp8 dyn per-tensor (per-tensor w)",
                                      "fp8 dyn per-token (per-channel w)", "int8 static (per-tensor w)",
                                      "int8 static", "int8 dyn per-token", "mxfp4 w4a4", "mxfp4 weight-only", "mxfp6",
                                      "w4a8 mxfp4-fp8", "nvfp4"};

#define FP8T "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}"
#define FP8C "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"ch_axis\":0,\"is_dynamic\":false,\"symmetric\":true}"
#define FP8DT "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":true,\"symmetric\":true}"
#define FP8DTOK "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"ch_axis\":1,\"is_dynamic\":true,\"symmetric\":true}"
#define I8T "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}"
#define I8C "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":0,\"is_dynamic\":false,\"symmetric\":true}"
#define I8DTOK "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":1,\"is_dynamic\":true,\"symmetric\":true}"
#define MXW(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"ch_axis\":-1,\"symmetric\":null," \
    "\"is_dynamic\":false,\"scale_format\":\"e8m0\",\"scale_calculation_mode\":\"even\",\"round_method\":\"half_even\"}"
#define MXA(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"ch_axis\":-1,\"symmetric\":null," \
    "\"is_dynamic\":true,\"scale_format\":\"e8m0\",\"scale_calculation_mode\":\"even\",\"round_method\":\"half_even\"}"
#define NVF(dyn) "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"ch_axis\":-1,\"symmetric\":null," \
    "\"is_dynamic\":" dyn ",\"is_scale_quant\":false,\"scale_format\":\"float32\"},{\"dtype\":\"fp8_e4m3\",\"qscheme\":" \
    "\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false,\"is_scale_quant\":true}]"

static const char *const sk_w[] = {NULL, FP8T, FP8T, FP8C, I8T, I8C, I8C, MXW("fp4"), MXW("fp4"), MXW("fp6_e2m3"),
                                   MXW("fp4"), NVF("false")};
static const char *const sk_a[] = {NULL, FP8T, FP8DT, FP8DTOK, I8T, I8T, I8DTOK, MXA("fp4"), NULL,
                                   MXA("fp6_e2m3"), FP8T, NVF("true")};

static bool emulated(int s) { return s >= MXFP4; }

static qp_status resolve(int s, qp_layer_kind kind, const char *layer, qp_scheme *out) {
    if (s == UNQ) {
        memset(out, 0, sizeof *out);
        out->kind = QP_SCHEME_UNQUANTIZED;
        return QP_OK;
    }
    char js[2400];
    snprintf(js, sizeof js,
             "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
             "\"global_quant_config\":{\"weight\":%s,\"input_tensors\":%s,\"output_tensors\":null,\"bias\":null},"
             "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
             sk_w[s], sk_a[s] ? sk_a[s] : "null");
    qp_config *cfg = tu_load(ctx, js);
    if (!cfg) return QP_ERR_INVALID_ARGUMENT;
    qp_status st = qp_config_resolve(cfg, layer, kind, NULL, out);
    qp_config_destroy(cfg);
    return st;
}

/* The experts' tensors under vLLM's FusedMoE names. */
typedef struct tens {
    qp_tensor t[8];
    size_t n;
    void *mem[8];
} tens;

static void *add(tens *T, const char *name, qp_dtype dt, int ndim, int64_t a, int64_t b, int64_t c, size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    T->mem[T->n] = p;
    T->t[T->n++] = (qp_tensor){name, dt, ndim, {a, b, c, 0}, p};
    return p;
}

static void tens_free(tens *T) {
    for (size_t i = 0; i < T->n; i++) free(T->mem[i]);
    T->n = 0;
}

static uint8_t enc(qp_dtype d, float v) { return (uint8_t)qp_format_encode(d, v); }

/* Direct fp8 / int8 / unquantized tensors (tests/test_moe.c's way), or
 * each expert quantized by qp_quantize_weights and stacked
 * (tests/test_moe_emulated.c's way). */
static bool make_tensors(int s, qp_dtype dt, int E, int H, int I, tens *T) {
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    if (s == UNQ) {
        uint16_t *a = add(T, "w13_weight", dt, 3, E, 2 * I, H, 2 * n13), *b = add(T, "w2_weight", dt, 3, E, H, I, 2 * n2);
        for (size_t i = 0; i < n13; i++) tu_put(dt, a, i, (float)(nrand() / sqrt(H)));
        for (size_t i = 0; i < n2; i++) tu_put(dt, b, i, (float)(nrand() / sqrt(I)));
        return true;
    }
    if (!emulated(s)) {
        bool i8 = s == I8_STATIC || s == I8_DYN || s == I8_STATIC_T;
        bool per_t = s == FP8_STATIC_T || s == FP8_DYN_T || s == I8_STATIC_T;
        qp_dtype wd = i8 ? QP_DTYPE_I8 : QP_DTYPE_F8_E4M3FN;
        uint8_t *a = add(T, "w13_weight", wd, 3, E, 2 * I, H, n13), *b = add(T, "w2_weight", wd, 3, E, H, I, n2);
        for (size_t i = 0; i < n13; i++) a[i] = i8 ? (uint8_t)(int8_t)(urand() * 255 - 127) : enc(wd, (float)(nrand() * 64));
        for (size_t i = 0; i < n2; i++) b[i] = i8 ? (uint8_t)(int8_t)(urand() * 255 - 127) : enc(wd, (float)(nrand() * 64));
        float *s13, *s2;
        if (per_t) {
            s13 = add(T, "w13_weight_scale", QP_DTYPE_F32, 2, E, 2, 0, sizeof(float) * E * 2);
            s2 = add(T, "w2_weight_scale", QP_DTYPE_F32, 1, E, 0, 0, sizeof(float) * E);
            for (int i = 0; i < 2 * E; i++) s13[i] = (float)((0.5 + urand()) / 64 / sqrt(H));
            for (int i = 0; i < E; i++) s2[i] = (float)((0.5 + urand()) / 64 / sqrt(I));
        } else {
            s13 = add(T, "w13_weight_scale", QP_DTYPE_F32, 3, E, 2 * I, 1, sizeof(float) * E * 2 * I);
            s2 = add(T, "w2_weight_scale", QP_DTYPE_F32, 3, E, H, 1, sizeof(float) * E * H);
            double q = i8 ? 127 : 64;
            for (int i = 0; i < 2 * E * I; i++) s13[i] = (float)((0.5 + urand()) / q / sqrt(H));
            for (int i = 0; i < E * H; i++) s2[i] = (float)((0.5 + urand()) / q / sqrt(I));
        }
        if (s == FP8_STATIC_T || s == I8_STATIC || s == I8_STATIC_T) {
            float *i13 = add(T, "w13_input_scale", QP_DTYPE_F32, 1, E, 0, 0, sizeof(float) * E);
            float *i2 = add(T, "w2_input_scale", QP_DTYPE_F32, 1, E, 0, 0, sizeof(float) * E);
            double q = i8 ? 127 : 448;
            for (int e = 0; e < E; e++) {
                i13[e] = (float)(3.0 / q * (1 + 0.05 * e));
                i2[e] = (float)(0.5 / q * (1 + 0.05 * e));
            }
        }
        return true;
    }
    qp_scheme lin;
    if (resolve(s, QP_LAYER_LINEAR, "model.layers.0.mlp.experts.0.down_proj", &lin)) return false;
    qp_quantize_options qo;
    qp_quantize_options_init(&qo);
    qo.params_dtype = dt;
    qo.input_absmax = 3.0f;
    bool nv = s == NVFP4, ok = true;
    float *w = malloc(sizeof(float) * 2 * I * H);
    static const char *const src[] = {"weight", "weight_scale", "input_scale", "input_scale_2", "weight_scale_2"};
    for (int g = 0; g < 2 && ok; g++) {
        int rows = g ? H : 2 * I, K = g ? I : H;
        const char *pre = g ? "w2_" : "w13_";
        qp_qweights **q = calloc((size_t)E, sizeof *q);
        for (int e = 0; e < E && ok; e++) {
            for (int i = 0; i < rows * K; i++) w[i] = (float)(nrand() / sqrt(K));
            ok = !qp_quantize_weights(ctx, &lin, w, rows, K, &qo, &q[e]);
        }
        for (int j = 0; j < 5 && ok; j++) {
            qp_tensor t0;
            if (qp_qweights_find(q[0], src[j], &t0)) continue;
            if ((j == 2 && nv) || (j == 3 && !nv)) continue;
            size_t bytes = 1;
            for (int d = 0; d < t0.ndim; d++) bytes *= (size_t)t0.shape[d];
            int bits = qp_format_bits(t0.dtype);
            bytes *= bits >= 8 ? (size_t)bits / 8 : 1;
            int per = j >= 3 && !g ? 2 : 1; /* w13's per-shard scalars: [E, 2] */
            static char names[2][5][40];
            snprintf(names[g][j], sizeof names[g][j], "%s%s", pre, src[j]);
            uint8_t *p = add(T, names[g][j], t0.dtype, t0.ndim + 1, E, 0, 0, bytes * (size_t)E * (size_t)per);
            qp_tensor *t = &T->t[T->n - 1];
            for (int d = 0; d < t0.ndim; d++) t->shape[d + 1] = t0.shape[d];
            if (per > 1) { t->ndim = 2; t->shape[1] = per; }
            for (int e = 0; e < E; e++) {
                qp_tensor te;
                qp_qweights_find(q[e], src[j], &te);
                for (int c = 0; c < per; c++) memcpy(p + ((size_t)e * per + c) * bytes, te.data, bytes);
            }
        }
        for (int e = 0; e < E; e++) qp_qweights_destroy(q[e]);
        free(q);
    }
    free(w);
    CHECK(ok, "%s: quantize: %s", sk_name[s], qp_last_error(ctx));
    return ok;
}

/* y bit for bit (NaNs of any payload equal) */
static long compare(qp_dtype dt, const uint16_t *a, const uint16_t *b, size_t n, const char *what) {
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        bool na = isnan(tu_get(dt, a, i)), nb = isnan(tu_get(dt, b, i));
        if (a[i] != b[i] && !(na && nb)) {
            if (bad < 3)
                fprintf(stderr, "  %s: y[%zu] vulkan %#06x (%g) cpu %#06x (%g)\n", what, i, a[i], tu_get(dt, a, i), b[i],
                        tu_get(dt, b, i));
            bad++;
        }
    }
    n_outputs += (long)n;
    return bad;
}

typedef struct mcase {
    int s;
    int E, H, I, k;
    int Ms[3];
    int groups, ep; /* grouped top-k (num_expert_group, topk_group = groups / 2); ep: G = 2E, offset E */
} mcase;

static void check_case(qp_moe *mg, qp_moe *mc, qp_dtype dt, int M, int H, const void *x, const int32_t *ids,
                       const float *w, const float *logits, const char *what) {
    size_t n = (size_t)M * H;
    uint16_t *yg = malloc(2 * n), *yc = malloc(2 * n);
    qp_status a = ids ? qp_moe_forward_topk(mg, x, M, ids, w, yg) : qp_moe_forward(mg, x, M, logits, yg);
    CHECK(!a, "%s: vulkan: %s", what, qp_last_error(ctx));
    qp_status b = ids ? qp_moe_forward_topk(mc, x, M, ids, w, yc) : qp_moe_forward(mc, x, M, logits, yc);
    CHECK(!b, "%s: cpu: %s", what, qp_last_error(ctx));
    n_cases++;
    if (!a && !b && exact) {
        long bad = compare(dt, yg, yc, n, what);
        n_mismatch += bad;
        CHECK(bad == 0, "%s: %ld of %zu outputs differ (bound: 0 ulp)", what, bad, n);
    }
    free(yg);
    free(yc);
}

static void run(const mcase *c, qp_dtype dt) {
    int E = c->E, H = c->H, I = c->I, k = c->k, G = c->ep ? 2 * E : E;
    tens T = {0};
    qp_scheme s;
    char name[160];
    snprintf(name, sizeof name, "%s %s E=%d%s k=%d H=%d I=%d%s", sk_name[c->s], qp_dtype_name(dt), E, c->ep ? "/2E" : "",
             k, H, I, c->groups ? " grouped" : "");
    if (resolve(c->s, QP_LAYER_MOE, "model.layers.0.mlp.experts", &s) || !make_tensors(c->s, dt, E, H, I, &T)) {
        CHECK(0, "%s: setup: %s", name, qp_last_error(ctx));
        tens_free(&T);
        return;
    }
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    o.renormalize = 1;
    o.layer = "model.layers.0.mlp.experts";
    if (c->groups) { o.num_expert_group = c->groups; o.topk_group = c->groups / 2; }
    if (c->ep) { o.global_num_experts = G; o.expert_offset = E; }
    qp_moe *mg = NULL, *mc = NULL;
    CHECK(!qp_moe_create(gpu, &s, E, H, I, T.t, T.n, &o, &mg), "%s: vulkan create: %s", name, qp_last_error(ctx));
    CHECK(!qp_moe_create(cpu, &s, E, H, I, T.t, T.n, &o, &mc), "%s: cpu create: %s", name, qp_last_error(ctx));
    if (mg && mc) {
        int Mmax = 0;
        for (int i = 0; i < 3; i++) Mmax = c->Ms[i] > Mmax ? c->Ms[i] : Mmax;
        uint16_t *x = malloc(2 * (size_t)Mmax * H);
        float *logits = malloc(sizeof(float) * (size_t)Mmax * G), *w = malloc(sizeof(float) * (size_t)Mmax * k);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)Mmax * k);
        for (size_t i = 0; i < (size_t)Mmax * H; i++) tu_put(dt, x, i, (float)nrand());
        for (size_t i = 0; i < (size_t)Mmax * G; i++) logits[i] = (float)nrand();
        /* the last local expert (global G - 1) never wins: an expert with no token */
        for (int m = 0; m < Mmax; m++) logits[(size_t)m * G + G - 1] = -100.0f;
        for (int i = 0; i < 3 && c->Ms[i]; i++) {
            int M = c->Ms[i];
            char what[300];
            const char *how = M <= 16 ? "decode" : "tiled"; /* vk_moe.c's paths */
            snprintf(what, sizeof what, "%s M=%d [%s]", name, M, how);
            check_case(mg, mc, dt, M, H, x, NULL, NULL, logits, what);
            /* one expert (the first local one) takes every token in slot 0,
             * the other slots distinct experts, weights random */
            for (int m = 0; m < M; m++)
                for (int j = 0; j < k; j++) {
                    /* later slots: distinct other experts; with expert
                     * parallelism every odd slot another rank's expert */
                    int other = 1 + (m + j - 1) % (E - 1);
                    ids[m * k + j] = j == 0 ? (c->ep ? E : 0) : c->ep && j % 2 ? other : (c->ep ? E : 0) + other;
                    w[m * k + j] = (float)urand();
                }
            snprintf(what, sizeof what, "%s M=%d one expert for all tokens [%s]", name, M, how);
            check_case(mg, mc, dt, M, H, x, ids, w, NULL, what);
        }
        free(x); free(logits); free(w); free(ids);
    }
    qp_moe_destroy(mg);
    qp_moe_destroy(mc);
    tens_free(&T);
}

/* silu over every finite act-dtype value g, isolated by an unquantized
 * layer whose GEMMs are exact selections: x one-hot at column p, the gate
 * row n of expert e holding a g value in column p, the up rows all 1, w2
 * the identity: y = rnd(silu(g)) where the reference rounds
 * (float)((double)g / (1 + exp(-(double)g))) to the act dtype. */
static void silu_all(qp_dtype dt) {
    enum { E = 4, H = 128, I = 128, M = E * H };
    tens T = {0};
    uint16_t *a = add(&T, "w13_weight", dt, 3, E, 2 * I, H, 2 * (size_t)E * 2 * I * H);
    uint16_t *b = add(&T, "w2_weight", dt, 3, E, H, I, 2 * (size_t)E * H * I);
    uint32_t v = 0;
    for (int e = 0; e < E; e++)
        for (int n = 0; n < I; n++)
            for (int p = 0; p < H; p++) {
                uint16_t bits;
                do { bits = (uint16_t)v++; } while (isnan(tu_get(dt, &bits, 0)) || isinf(tu_get(dt, &bits, 0)));
                a[((size_t)e * 2 * I + n) * H + p] = v < 65536u ? bits : 0;
                tu_put(dt, a, ((size_t)e * 2 * I + I + n) * H + p, 1.0f);
            }
    for (int e = 0; e < E; e++)
        for (int n = 0; n < H; n++) tu_put(dt, b, ((size_t)e * H + n) * I + n, 1.0f);
    uint16_t *x = calloc((size_t)M * H, 2);
    int32_t *ids = malloc(sizeof(int32_t) * M);
    float *w = malloc(sizeof(float) * M);
    for (int m = 0; m < M; m++) {
        tu_put(dt, x, (size_t)m * H + m % H, 1.0f);
        ids[m] = m / H;
        w[m] = 1.0f;
    }
    qp_scheme s;
    resolve(UNQ, QP_LAYER_MOE, "", &s);
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = 1;
    qp_moe *mg = NULL, *mc = NULL;
    CHECK(!qp_moe_create(gpu, &s, E, H, I, T.t, T.n, &o, &mg) && !qp_moe_create(cpu, &s, E, H, I, T.t, T.n, &o, &mc),
          "silu: %s", qp_last_error(ctx));
    char what[80];
    snprintf(what, sizeof what, "silu of every finite %s value", qp_dtype_name(dt));
    if (mg && mc) check_case(mg, mc, dt, M, H, x, ids, w, NULL, what);
    qp_moe_destroy(mg);
    qp_moe_destroy(mc);
    free(x); free(ids); free(w);
    tens_free(&T);
}

/* fp8 per-block k-block sums exact: each gate row's products are
 * +448 * 448, then 126 of 2^-9 * 2^-9 = 2^-18, then -448 * 448. A fp32
 * running sum loses the small ones against the large (its ulp there is
 * 2^-6) and ends at 0; the reference's double sum keeps 126 * 2^-18, so
 * the gate is 126 * 2^-8 (block scale 1024), the up 1 and, through an
 * identity w2, y = rnd(silu(0.49)) ~ 0.3 in every column: only a device
 * whose k-block sums are exact matches, on both paths (M 1 and 17). */
static void fp8_block_cancel(const qp_scheme *s, qp_dtype dt) {
    enum { H = 128, I = 128, MMAX = 17 };
    const qp_dtype f8 = QP_DTYPE_F8_E4M3FN;
    tens T = {0};
    uint8_t *w13 = add(&T, "w13_weight", f8, 3, 1, 2 * I, H, 2 * I * H);
    float *s13 = add(&T, "w13_weight_scale", QP_DTYPE_F32, 3, 1, 2, 1, 2 * sizeof(float));
    uint8_t *w2 = add(&T, "w2_weight", f8, 3, 1, H, I, H * I);
    float *s2 = add(&T, "w2_weight_scale", QP_DTYPE_F32, 3, 1, 1, 1, sizeof(float));
    uint8_t big = enc(f8, 448.0f), tiny = enc(f8, 0x1p-9f), one = enc(f8, 1.0f);
    for (int n = 0; n < I; n++) {
        uint8_t *g = w13 + (size_t)n * H, *u = w13 + (size_t)(I + n) * H;
        g[0] = big;
        for (int h = 1; h < H - 1; h++) g[h] = tiny;
        g[H - 1] = big | 0x80;
        u[0] = one;
    }
    s13[0] = 1024.0f;      /* the gate rows' block */
    s13[1] = 1.0f / 448;   /* the up rows' block */
    for (int n = 0; n < H; n++) w2[(size_t)n * I + n] = one;
    s2[0] = 1.0f;
    uint16_t *x = malloc(2 * (size_t)MMAX * H), *y = malloc(2 * (size_t)H);
    int32_t ids[MMAX] = {0};
    float w[MMAX];
    for (int m = 0; m < MMAX; m++) {
        w[m] = 1.0f;
        for (int h = 0; h < H; h++) tu_put(dt, x, (size_t)m * H + h, h == 0 || h == H - 1 ? 448.0f : 0x1p-9f);
    }
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = 1;
    o.layer = "model.layers.0.mlp.experts";
    qp_moe *mg = NULL, *mc = NULL;
    CHECK(!qp_moe_create(gpu, s, 1, H, I, T.t, T.n, &o, &mg) && !qp_moe_create(cpu, s, 1, H, I, T.t, T.n, &o, &mc),
          "fp8 per-block cancellation: %s", qp_last_error(ctx));
    if (mg && mc) {
        CHECK(!qp_moe_forward_topk(mc, x, 1, ids, w, y) && tu_get(dt, y, 0) > 0.25 && tu_get(dt, y, H - 1) < 0.35,
              "fp8 per-block cancellation: the reference's y %g is not silu(0.49)", tu_get(dt, y, 0));
        char what[120];
        for (int M = 1; M <= MMAX; M += MMAX - 1) {
            snprintf(what, sizeof what, "fp8 per-block k-block cancellation %s M=%d", qp_dtype_name(dt), M);
            check_case(mg, mc, dt, M, H, x, ids, w, NULL, what);
        }
    }
    qp_moe_destroy(mg);
    qp_moe_destroy(mc);
    free(x);
    free(y);
    tens_free(&T);
}

/* FP8 per-block experts: supported on Vulkan, both paths (M <= 16 decode,
 * tiled above), backend_moe.c's bound and then 0 ulp (the header's
 * derivation; without shaderFloat64 only the bound is meaningful, and as
 * for the other schemes nothing is compared). */
static void fp8_block(void) {
    qp_scheme fb;
    qp_config *fbc = NULL;
    qp_support_info si;
    /* one token (decode) and 17 (tiles): the k-block fold is the same on
     * every block; the paths' block lists are the other schemes' */
    static const int ms[] = {1, 17};
    md_init(ctx, cpu, gpu, "vulkan", ms, 2);
    md_fp8_block_scheme(&fb, &fbc);
    /* supported, at the level of the linear layers whose arithmetic it shares
     * (emulated: Vulkan has no fp8 multiply, e4m3 is decoded to float) */
    qp_support_info li;
    CHECK(!qp_device_supports(gpu, &fb, 0, 0, 0, &li) && !qp_device_supports_moe(gpu, &fb, &si) &&
              si.level != QP_SUPPORT_UNSUPPORTED && si.level == li.level,
          "fp8 per-block MoE: level %d (%s), linear %d", (int)si.level, si.reason, (int)li.level);
    qp_config_destroy(fbc);
    fp8_block_cancel(&fb, QP_DTYPE_F16);
    fp8_block_cancel(&fb, QP_DTYPE_BF16);
    if (!exact) return;
    clock_t t0 = clock();
    md_run_fp8_block();
    long outs, equal;
    md_counts(&outs, &equal);
    CHECK(outs > 0 && equal == outs, "fp8 per-block: %ld of %ld outputs differ (bound: 0 ulp)", outs - equal, outs);
    n_outputs += outs;
    n_mismatch += outs - equal;
    md_report("vk-moe fp8 per-block", (double)t0);
}

/* Refusals: more local experts than the align pass takes. */
static void refusals(void) {
    int E = 1025, H = 32, I = 32;
    tens T = {0};
    make_tensors(UNQ, QP_DTYPE_F16, E, H, I, &T);
    qp_scheme s;
    resolve(UNQ, QP_LAYER_MOE, "", &s);
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = QP_DTYPE_F16;
    o.top_k = 2;
    o.layer = "big.experts";
    qp_moe *m = NULL;
    qp_status st = qp_moe_create(gpu, &s, E, H, I, T.t, T.n, &o, &m);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(ctx), "1025 local experts"), "E = 1025: %s (%s)",
          qp_status_str(st), qp_last_error(ctx));
    qp_moe_destroy(m);
    tens_free(&T);
}

int vk_moe_run(const char *program, int argc, char **argv) {
    (void)argc;
    (void)argv;
    if (qp_context_create(&ctx)) return 1;
    qp_set_log(ctx, on_log, NULL, QP_LOG_WARN);
    if (qp_device_find(ctx, "cpu", &cpu)) return 1;
    if (qp_device_find(ctx, "vulkan:0", &gpu)) {
        printf("SKIP: no Vulkan device: %s\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }
    clock_t t0 = clock();
    silu_all(QP_DTYPE_F16);
    silu_all(QP_DTYPE_BF16);
    static const mcase cases[] = {
        {UNQ, 8, 80, 48, 2, {1, 3, 17}, 4, 0},
        {FP8_STATIC_T, 8, 64, 32, 2, {1, 16, 17}, 0, 0},
        {FP8_DYN_T, 64, 64, 32, 8, {1, 17, 64}, 0, 1},
        {FP8_DYN_TOK, 8, 80, 48, 1, {3, 64, 0}, 0, 0},
        {I8_STATIC_T, 8, 64, 32, 2, {16, 17, 0}, 0, 0},
        {I8_STATIC, 8, 80, 48, 8, {1, 3, 17}, 0, 0},
        {I8_DYN, 64, 64, 32, 2, {16, 64, 0}, 8, 0},
        {MXFP4, 8, 64, 32, 2, {1, 17, 0}, 0, 0},
        {MXFP4_WO, 8, 96, 64, 1, {3, 64, 0}, 0, 0},
        {MXFP6, 8, 64, 32, 8, {1, 16, 0}, 0, 0},
        {W4A8, 64, 64, 32, 2, {1, 17, 0}, 0, 1},
        {NVFP4, 8, 64, 32, 2, {3, 64, 0}, 4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run(&cases[i], QP_DTYPE_F16);
        run(&cases[i], QP_DTYPE_BF16);
    }
    fp8_block();
    refusals();
    if (!exact) printf("NOTE: the device has no shaderFloat64: outputs were not compared\n");
    CHECK(vmsgs == 0, "%u validation messages", vmsgs);
    printf("%s: %ld cases, %ld outputs, %ld mismatches (bound 0 ulp); %u validation messages; %.1f s CPU\n", program,
           n_cases, n_outputs, n_mismatch, vmsgs, (double)(clock() - t0) / CLOCKS_PER_SEC);
    qp_context_destroy(ctx);
    return tu_finish(program);
}
