/* The fused MoE of one GPU backend against the cpu reference, through the
 * public API (qp_moe_create / qp_moe_forward / qp_moe_forward_topk on the
 * "cpu" device and the backend's device of one context), seeded random
 * data: the layers, routings and bound that tests/cl/test_cl_moe.c and
 * tests/cuda/test_cuda_moe.c share (backend_moe.h).
 *
 * int8 schemes: bit for bit. Float schemes: |y_dev - y_cpu| within a bound
 * derived per output. The two differ only in the fp32 summation order of
 * the GEMMs (the reference sums fp8 / unquantized in fp32 in index order,
 * emulated in double; the device in fp32 in its own order) and in what
 * follows from it. Propagated per slot:
 *   c1 (each w13 output) before rounding: d = 2 H 2^-24 S1 + 2^-22 |c1|,
 *     S1 = sum_h |a_h w_h| (each sum within gamma_H S1 of the exact one,
 *     the epilogue's scale products alike on both sides); after rounding
 *     to dt: d + ulp(|c1| + d) (two values d apart round at most that far);
 *   silu: |silu'| <= 1.1: ds = 1.1 dg + ulp(|s| + ds) (the fp32 silu is
 *     g / (1 + exp(-g)) in fp64 rounded once on both sides; a device
 *     without fp64 is not bit-exact and fails the int8 checks, as its
 *     moe_describe says), dh = |u| ds + |s| du + ds du + ulp(|h| + ...);
 *   the second quantization of h: a perturbed input may flip a code (or a
 *     dynamic scale): + one quantization step of the element format at
 *     |h| + dh with the largest scale the perturbed group can have, and an
 *     ulp of dt for the QDQ schemes' rounding;
 *   fp8 per-block (k-block sums): the reference sums each 128-wide k-block
 *     in double rounded once, then the blocks times s_a * s_w in double;
 *     the device sums 16-wide parts (decode) or whole k-blocks (prefill) in
 *     fp32, each times fp32 s_a * s_w: at most K/16 + 18 roundings of
 *     partial sums of |a w|, inside the 2 K 2^-24 S1 above for K >= 128;
 *     its h quantization step takes the scale of the group of 128;
 *   w2: |rw| (sum_i |W| da_i + 2 I 2^-24 S2) + 2^-22 |c3|, S2 with |a| <=
 *     |h| + da, plus the rounding of c3;
 *   y: the k slot differences plus k ulps of the running sum.
 * A magnitude is always taken at the fp64 model's value plus its bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_moe.h"
#include "internal.h"
#include "registry.h"
#include "testutil.h"

static qp_context *ctx;
static qp_device *cpu, *dev;
static const char *devname;        /* "cuda", "opencl" in messages */
static const int *token_ms;       /* the token counts of each layer */
static int n_token_ms;
static uint64_t rng = 0x51ab3c9d2e7f1023ull;
static long n_cases, n_outputs, n_exact, n_int_outputs;
static double worst_ratio;
static char worst_where[200];

static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

static int H = 64, I = 32; /* per layer (md_set_shape) */

typedef enum fam { F_UNQ, F_FP8, F_INT8, F_EMU, F_W4, F_FP8B } fam;

typedef struct scheme_case {
    const char *name;
    fam f;
    const char *akey, *wkey; /* fp8 / int8 */
    int per_channel;
    const char *weight, *input; /* emulated: Quark QTensorConfig JSON */
} scheme_case;

#define MX(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"ch_axis\":-1,\"symmetric\":null," \
               "\"is_dynamic\":%s,\"scale_format\":\"e8m0\",\"scale_calculation_mode\":\"even\",\"round_method\":\"half_even\"}"
#define NV "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"ch_axis\":-1,\"symmetric\":null," \
           "\"is_dynamic\":%s,\"is_scale_quant\":false,\"scale_format\":\"float32\"},{\"dtype\":\"fp8_e4m3\",\"qscheme\":" \
           "\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false,\"is_scale_quant\":true}]"
static const scheme_case cases[] = {
    {"unquantized", F_UNQ, NULL, NULL, 0, NULL, NULL},
    {"fp8 static, per-tensor w", F_FP8, "kFp8StaticTensorSym", "kFp8StaticTensorSym", 0, NULL, NULL},
    {"fp8 dyn-tensor, per-channel w", F_FP8, "kFp8DynamicTensorSym", "kFp8StaticChannelSym", 1, NULL, NULL},
    {"fp8 dyn-token, per-tensor w", F_FP8, "kFp8DynamicTokenSym", "kFp8StaticTensorSym", 0, NULL, NULL},
    {"fp8 dyn-token, per-channel w", F_FP8, "kFp8DynamicTokenSym", "kFp8StaticChannelSym", 1, NULL, NULL},
    {"int8 static", F_INT8, "kInt8StaticTensorSym", "kInt8StaticChannelSym", 1, NULL, NULL},
    {"int8 dyn-token", F_INT8, "kInt8DynamicTokenSym", "kInt8StaticChannelSym", 1, NULL, NULL},
    {"mxfp4 w4a4", F_EMU, NULL, NULL, 0, MX("fp4"), MX("fp4")},
    {"mxfp4 weight-only", F_EMU, NULL, NULL, 0, MX("fp4"), NULL},
    {"mxfp6_e2m3", F_EMU, NULL, NULL, 0, MX("fp6_e2m3"), MX("fp6_e2m3")},
    {"mxfp6_e3m2", F_EMU, NULL, NULL, 0, MX("fp6_e3m2"), MX("fp6_e3m2")},
    {"w4a8 mxfp4-fp8", F_EMU, NULL, NULL, 0, MX("fp4"),
     "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false}"},
    {"nvfp4", F_EMU, NULL, NULL, 0, NV, NV},
    /* vLLM 0.34.0's QuarkW8A8Mxfp8MoEMethod and QuarkW4A16Int4MoEMethod (per_channel: 1 = uint4 with zero points) */
    {"mxfp8", F_EMU, NULL, NULL, 0, MX("fp8_e4m3"),
     "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"symmetric\":true,\"is_dynamic\":%s}"},
    {"w4a16 uint4 g128", F_W4, NULL, "kInt4StaticAsym", 1, NULL, NULL},
    {"w4a16 int4 g32", F_W4, NULL, "kInt4Static32", 0, NULL, NULL},
    /* QuarkW8A8Fp8MoEMethod per_block: H and I multiples of 128, so not in
     * md_run_matrix's shapes (md_run_fp8_block) */
    {"fp8 per-block 128x128", F_FP8B, NULL, NULL, 0, NULL, NULL},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* ---- one layer: the tensors, the dequantized weights of the model ------- */
typedef struct layer {
    const scheme_case *c;
    qp_dtype dt;
    int E, G, off, k;
    qp_scheme s;
    qp_tensor t[8];
    size_t nt;
    void *mem[8];
    double *w13, *w2;      /* dequantized [E][2I][H], [E][H][I] */
    qp_act_mode act;       /* the model's view of the activation mode */
    float a13, a2;         /* static scales / NVFP4 global scales */
    qp_dtype aelem;        /* MX activations */
    qp_config *cfg;
} layer;

static void *keep(layer *L, size_t bytes) {
    void *p = calloc(1, bytes);
    L->mem[L->nt] = p;
    return p;
}

static void add(layer *L, const char *name, qp_dtype dt, int nd, int64_t a, int64_t b, int64_t c, void *p) {
    L->t[L->nt++] = (qp_tensor){name, dt, nd, {a, b, c, 0}, p};
}

/* W4A16 experts in QuarkW4A16Int4MoEMethod's parameters (two codes per
 * byte along K, scales in the model dtype per (row, group), uint4 zero
 * points two rows per byte), dequantized as its kernels do: rnd((c - z) * s). */
static void w4_layer(layer *L) {
    const scheme_case *c = L->c;
    bool asym = c->per_channel;
    int group = strstr(c->name, "g128") ? 128 : 32, g = group;
    while (H % g || I % g) g /= 2; /* as vLLM's create_weights */
    L->s.kind = QP_SCHEME_W4A16_INT4;
    snprintf(L->s.weight_key, sizeof L->s.weight_key, "%s", c->wkey);
    L->s.weight.group_size = group;
    L->s.weight.symmetric = !asym;
    L->act = QP_ACT_NONE;
    for (int pass = 0; pass < 2; pass++) {
        size_t rows = pass ? (size_t)H : 2 * (size_t)I, K = pass ? (size_t)I : (size_t)H, G = K / (size_t)g;
        size_t nr = (size_t)L->E * rows;
        uint8_t *w = keep(L, nr * K / 2);
        add(L, pass ? "w2_weight" : "w13_weight", QP_DTYPE_U8, 3, L->E, (int64_t)rows, (int64_t)K / 2, w);
        uint16_t *sc = keep(L, 2 * nr * G);
        add(L, pass ? "w2_weight_scale" : "w13_weight_scale", L->dt, 3, L->E, (int64_t)rows, (int64_t)G, sc);
        uint8_t *z = NULL;
        if (asym) {
            z = keep(L, nr / 2 * G);
            add(L, pass ? "w2_weight_zero_point" : "w13_weight_zero_point", QP_DTYPE_U8, 3, L->E, (int64_t)rows / 2,
                (int64_t)G, z);
        }
        double *wd = pass ? L->w2 : L->w13;
        for (size_t r = 0; r < nr; r++) {
            for (size_t gi = 0; gi < G; gi++) {
                tu_put(L->dt, sc, r * G + gi, (float)((0.5 + urand()) / 6 / sqrt((double)K)));
                if (asym) z[(r / 2) * G + gi] |= (uint8_t)((int)(urand() * 16) << (4 * (r % 2)));
            }
            for (size_t q = 0; q < K; q++) {
                int code = (int)(urand() * 16);
                w[r * K / 2 + q / 2] |= (uint8_t)(code << (4 * (q % 2)));
                int zz = asym ? (z[(r / 2) * G + q / (size_t)g] >> (4 * (r % 2))) & 15 : 8;
                wd[r * K + q] = qp_num_round(L->dt, (float)(code - zz) * (float)tu_get(L->dt, sc, r * G + q / (size_t)g));
            }
        }
    }
}

#define FP8_BLOCK_CONFIG                                                                                            \
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"                           \
    "\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],"       \
    "\"symmetric\":true,\"is_dynamic\":false},\"input_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\","          \
    "\"group_size\":128,\"symmetric\":true,\"is_dynamic\":true},\"output_tensors\":null,\"bias\":null},"                  \
    "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}"

/* FP8 per-block experts as a Quark per_block export stores them: e4m3
 * codes with one fp32 scale per 128 x 128 block (its amax / 448). */
static void fp8_block_layer(layer *L) {
    L->cfg = tu_load(ctx, FP8_BLOCK_CONFIG);
    CHECK(L->cfg && !qp_config_resolve(L->cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &L->s) &&
              L->s.kind == QP_SCHEME_W8A8_FP8_BLOCK, "fp8 per-block: %s", qp_last_error(ctx));
    L->act = QP_ACT_FP8_GROUP128;
    for (int g = 0; g < 2; g++) {
        size_t rows = g ? (size_t)H : 2 * (size_t)I, K = g ? (size_t)I : (size_t)H, nb = rows / 128, kb = K / 128;
        size_t E = (size_t)L->E;
        uint8_t *w = keep(L, E * rows * K);
        add(L, g ? "w2_weight" : "w13_weight", QP_DTYPE_F8_E4M3FN, 3, L->E, (int64_t)rows, (int64_t)K, w);
        float *sc = keep(L, sizeof(float) * E * nb * kb);
        add(L, g ? "w2_weight_scale" : "w13_weight_scale", QP_DTYPE_F32, 3, L->E, (int64_t)nb, (int64_t)kb, sc);
        double *wd = g ? L->w2 : L->w13;
        float *mw = malloc(sizeof(float) * rows * K);
        for (size_t e = 0; e < E; e++) {
            for (size_t i = 0; i < rows * K; i++) mw[i] = (float)(nrand() / sqrt((double)K));
            for (size_t bi = 0; bi < nb * kb; bi++) {
                size_t r0 = bi / kb * 128, c0 = bi % kb * 128;
                float amax = 0;
                for (size_t r = r0; r < r0 + 128; r++)
                    for (size_t q = c0; q < c0 + 128; q++) amax = fmaxf(amax, fabsf(mw[r * K + q]));
                float s = amax / 448;
                sc[e * nb * kb + bi] = s;
                for (size_t r = r0; r < r0 + 128; r++)
                    for (size_t q = c0; q < c0 + 128; q++) {
                        size_t i = (e * rows + r) * K + q;
                        w[i] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, mw[r * K + q] / s);
                        wd[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, w[i]) * (double)s;
                    }
            }
        }
        free(mw);
    }
}

static void direct_layer(layer *L) {
    const scheme_case *c = L->c;
    size_t E = (size_t)L->E, n13 = E * 2 * I * H, n2 = E * H * I;
    L->w13 = malloc(sizeof(double) * n13);
    L->w2 = malloc(sizeof(double) * n2);
    memset(&L->s, 0, sizeof L->s);
    if (c->f == F_W4) { w4_layer(L); return; }
    if (c->f == F_FP8B) { fp8_block_layer(L); return; }
    if (c->f == F_UNQ) {
        L->s.kind = QP_SCHEME_UNQUANTIZED;
        uint16_t *a = keep(L, 2 * n13);
        add(L, "w13_weight", L->dt, 3, L->E, 2 * I, H, a);
        uint16_t *b = keep(L, 2 * n2);
        add(L, "w2_weight", L->dt, 3, L->E, H, I, b);
        for (size_t i = 0; i < n13; i++) { tu_put(L->dt, a, i, (float)(nrand() / sqrt(H))); L->w13[i] = tu_get(L->dt, a, i); }
        for (size_t i = 0; i < n2; i++) { tu_put(L->dt, b, i, (float)(nrand() / sqrt(I))); L->w2[i] = tu_get(L->dt, b, i); }
        L->act = QP_ACT_NONE;
        return;
    }
    bool fp8 = c->f == F_FP8;
    L->s.kind = fp8 ? QP_SCHEME_W8A8_FP8 : QP_SCHEME_W8A8_INT8;
    snprintf(L->s.activation_key, sizeof L->s.activation_key, "%s", c->akey);
    snprintf(L->s.weight_key, sizeof L->s.weight_key, "%s", c->wkey);
    qp_dtype wdt = fp8 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_I8;
    uint8_t *a = keep(L, n13);
    add(L, "w13_weight", wdt, 3, L->E, 2 * I, H, a);
    uint8_t *b = keep(L, n2);
    add(L, "w2_weight", wdt, 3, L->E, H, I, b);
    /* scales: per channel (one per row) or per tensor (one per expert and
     * shard, the same for both shards: no requantization to model) */
    size_t r13 = c->per_channel ? E * 2 * I : E * 2, r2 = c->per_channel ? E * H : E;
    float *s13 = keep(L, sizeof(float) * r13);
    if (c->per_channel) add(L, "w13_weight_scale", QP_DTYPE_F32, 3, L->E, 2 * I, 1, s13);
    else add(L, "w13_weight_scale", QP_DTYPE_F32, 2, L->E, 2, 0, s13);
    float *s2 = keep(L, sizeof(float) * r2);
    if (c->per_channel) add(L, "w2_weight_scale", QP_DTYPE_F32, 3, L->E, H, 1, s2);
    else add(L, "w2_weight_scale", QP_DTYPE_F32, 1, L->E, 0, 0, s2);
    double qmax = fp8 ? 448 : 127;
    for (int g = 0; g < 2; g++) {
        size_t rows = g ? H : 2 * I, K = g ? I : H;
        uint8_t *w = g ? b : a;
        double *wd = g ? L->w2 : L->w13;
        float *sc = g ? s2 : s13;
        for (size_t e = 0; e < E; e++) {
            float *mw = malloc(sizeof(float) * rows * K);
            for (size_t i = 0; i < rows * K; i++) mw[i] = (float)(nrand() / sqrt((double)K));
            float amax = 0;
            for (size_t i = 0; i < rows * K; i++) amax = fmaxf(amax, fabsf(mw[i]));
            for (size_t r = 0; r < rows; r++) {
                float ra = 0;
                for (size_t q = 0; q < K; q++) ra = fmaxf(ra, fabsf(mw[r * K + q]));
                float s = (float)((c->per_channel ? ra : amax) / qmax);
                size_t si = c->per_channel ? e * rows + r : g ? e : 2 * e + (r >= (size_t)I);
                sc[si] = s;
                for (size_t q = 0; q < K; q++) {
                    size_t i = (e * rows + r) * K + q;
                    float v = mw[r * K + q] / s;
                    if (fp8) { w[i] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, v); wd[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, w[i]) * (double)s; }
                    else { int8_t q8 = (int8_t)lrintf(fminf(127, fmaxf(-127, v))); w[i] = (uint8_t)q8; wd[i] = q8 * (double)s; }
                }
            }
            free(mw);
        }
    }
    bool stat = strstr(c->akey, "Static") != NULL;
    if (stat) {
        float *i13 = keep(L, sizeof(float) * E), *i2 = NULL;
        add(L, "w13_input_scale", QP_DTYPE_F32, 1, L->E, 0, 0, i13);
        i2 = keep(L, sizeof(float) * E);
        add(L, "w2_input_scale", QP_DTYPE_F32, 1, L->E, 0, 0, i2);
        for (size_t e = 0; e < E; e++) { i13[e] = (float)(4.0 / qmax * (1 + 0.05 * (double)(e % 3))); i2[e] = (float)(2.0 / qmax); }
        L->a13 = (float)(4.0 / qmax * 1.1); /* the max over experts, as vLLM */
        for (size_t e = 0; e < E; e++) L->a13 = fmaxf(L->a13, i13[e]);
        L->a2 = i2[0];
    }
    L->act = fp8 ? (stat ? QP_ACT_FP8_STATIC : strstr(c->akey, "Token") ? QP_ACT_FP8_DYNAMIC_TOKEN : QP_ACT_FP8_DYNAMIC_TENSOR)
                 : (stat ? QP_ACT_INT8_STATIC : QP_ACT_INT8_DYNAMIC_TOKEN);
}

/* tests/test_moe_emulated.c's stacking of per-expert quantized weights */
static void stack_add(layer *L, const char *name, qp_qweights *const *q, const char *src, int per_shard_cols) {
    qp_tensor t0;
    if (qp_qweights_find(q[0], src, &t0)) return;
    size_t bytes = 1;
    for (int d = 0; d < t0.ndim; d++) bytes *= (size_t)t0.shape[d];
    int bits = qp_format_bits(t0.dtype);
    bytes *= bits >= 8 ? (size_t)bits / 8 : 1;
    int cols = per_shard_cols ? per_shard_cols : 1;
    unsigned char *p = keep(L, bytes * (size_t)L->E * (size_t)cols);
    for (int e = 0; e < L->E; e++) {
        qp_tensor te;
        qp_qweights_find(q[e], src, &te);
        for (int c = 0; c < cols; c++) memcpy(p + ((size_t)e * (size_t)cols + (size_t)c) * bytes, te.data, bytes);
    }
    qp_tensor t = {name, t0.dtype, t0.ndim + 1, {L->E, 0, 0, 0}, p};
    for (int d = 0; d < t0.ndim; d++) t.shape[d + 1] = t0.shape[d];
    if (per_shard_cols > 1) { t.ndim = 2; t.shape[1] = per_shard_cols; }
    L->t[L->nt++] = t;
}

/* an expert's weights as the reference dequantizes them (the linear binder) */
static void dequant(layer *L, const qp_scheme *lin, qp_qweights *q, int N, int K, double *out) {
    qp_tensor t[8];
    size_t n = qp_qweights_count(q);
    for (size_t i = 0; i < n; i++) qp_qweights_get(q, i, &t[i]);
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = L->dt;
    qp_lin_desc d;
    qp_lin_desc_store *store = NULL;
    CHECK(!qp_lin_desc_build(ctx, lin, N, K, t, n, &lo, &d, &store), "%s", qp_last_error(ctx));
    if (!store) return;
    for (size_t r = 0; r < (size_t)N; r++)
        for (size_t c = 0; c < (size_t)K; c++)
            out[r * K + c] = qp_num_round(L->dt, d.w_lut[d.w_codes[r * K + c]] * d.w_blk_scale[r * (K / d.w_blk) + c / d.w_blk]);
    L->act = d.act;
    L->aelem = d.act_elem;
    float a = d.act == QP_ACT_NVFP4_QDQ ? d.input_global_scale : d.input_scale;
    if (K == H) L->a13 = a; else L->a2 = a;
    qp_lin_desc_free(store);
}

static bool emulated_layer(layer *L) {
    const scheme_case *c = L->c;
    char w[700], in[700], js[2000];
    snprintf(w, sizeof w, c->weight, "false");
    if (c->input) snprintf(in, sizeof in, c->input, "true");
    snprintf(js, sizeof js,
             "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
             "\"global_quant_config\":{\"weight\":%s,\"input_tensors\":%s,\"output_tensors\":null,\"bias\":null},"
             "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
             w, c->input ? in : "null");
    L->cfg = tu_load(ctx, js);
    qp_scheme lin;
    CHECK(L->cfg && !qp_config_resolve(L->cfg, "model.layers.0.mlp.experts.0.down_proj", QP_LAYER_LINEAR, NULL, &lin) &&
              !qp_config_resolve(L->cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &L->s),
          "%s: %s", c->name, qp_last_error(ctx));
    if (!L->cfg) return false;
    qp_quantize_options qo;
    qp_quantize_options_init(&qo);
    qo.params_dtype = L->dt;
    qo.input_absmax = 3.0f;
    qp_qweights **q13 = calloc((size_t)L->E, sizeof *q13), **q2 = calloc((size_t)L->E, sizeof *q2);
    float *m13 = malloc(sizeof(float) * 2 * I * H), *m2 = malloc(sizeof(float) * H * I);
    L->w13 = malloc(sizeof(double) * (size_t)L->E * 2 * I * H);
    L->w2 = malloc(sizeof(double) * (size_t)L->E * H * I);
    bool ok = true;
    for (int e = 0; e < L->E && ok; e++) {
        for (int i = 0; i < 2 * I * H; i++) m13[i] = (float)(nrand() / sqrt(H));
        for (int i = 0; i < H * I; i++) m2[i] = (float)(nrand() / sqrt(I));
        ok = !qp_quantize_weights(ctx, &lin, m13, 2 * I, H, &qo, &q13[e]) && !qp_quantize_weights(ctx, &lin, m2, H, I, &qo, &q2[e]);
        CHECK(ok, "%s: quantize: %s", c->name, qp_last_error(ctx));
        if (ok) {
            dequant(L, &lin, q13[e], 2 * I, H, L->w13 + (size_t)e * 2 * I * H);
            dequant(L, &lin, q2[e], H, I, L->w2 + (size_t)e * H * I);
        }
    }
    if (ok) {
        bool nv = L->s.kind == QP_SCHEME_NVFP4;
        stack_add(L, "w13_weight", q13, "weight", 0);
        stack_add(L, "w13_weight_scale", q13, "weight_scale", 0);
        stack_add(L, "w2_weight", q2, "weight", 0);
        stack_add(L, "w2_weight_scale", q2, "weight_scale", 0);
        stack_add(L, nv ? "w13_input_scale_2" : "w13_input_scale", q13, nv ? "input_scale_2" : "input_scale", nv ? 2 : 0);
        stack_add(L, nv ? "w2_input_scale_2" : "w2_input_scale", q2, nv ? "input_scale_2" : "input_scale", 0);
        stack_add(L, "w13_weight_scale_2", q13, "weight_scale_2", 2);
        stack_add(L, "w2_weight_scale_2", q2, "weight_scale_2", 0);
    }
    for (int e = 0; e < L->E; e++) { qp_qweights_destroy(q13[e]); qp_qweights_destroy(q2[e]); }
    free(q13); free(q2); free(m13); free(m2);
    return ok;
}

static void layer_free(layer *L) {
    for (int i = 0; i < 8; i++) free(L->mem[i]);
    free(L->w13); free(L->w2);
    qp_config_destroy(L->cfg);
}

/* ---- the bound model --------------------------------------------------- */
static double ulp(qp_dtype dt, double v) {
    v = fabs(v);
    int mb = dt == QP_DTYPE_F16 ? 10 : 7;
    double sub = dt == QP_DTYPE_F16 ? 0x1p-24 : 0x1p-133;
    if (v == 0) return sub;
    int e;
    frexp(v, &e); /* v in [2^(e-1), 2^e) */
    return fmax(ldexp(1.0, e - 1 - mb), sub);
}

/* fp32 values of the A1 quantization (dequantized), exactly as the reference
 * (cpu/ref_moe.c quant / qdq) for the magnitudes S1 */
static void quant_rows(const layer *L, float scale, const float *v, int R, int C, double *out) {
    qp_act_mode act = L->act;
    qp_dtype dt = L->dt;
    size_t n = (size_t)R * (size_t)C;
    uint8_t *codes = malloc(n);
    float *rs = malloc(sizeof(float) * (n / 128 + (size_t)R)), *tmp = malloc(sizeof(float) * n); /* groups of 128 */
    memcpy(tmp, v, sizeof(float) * n);
    switch (act) {
    case QP_ACT_FP8_STATIC: qp_quant_fp8_static(ctx, v, n, scale, codes); for (int r = 0; r < R; r++) rs[r] = scale; break;
    case QP_ACT_FP8_DYNAMIC_TENSOR: { float s; qp_quant_fp8_dynamic_tensor(ctx, v, n, codes, &s); for (int r = 0; r < R; r++) rs[r] = s; break; }
    case QP_ACT_FP8_DYNAMIC_TOKEN: qp_quant_fp8_dynamic_token(ctx, v, (size_t)R, (size_t)C, 0.0f, codes, rs); break;
    case QP_ACT_FP8_GROUP128:
        qp_quant_fp8_group(ctx, v, (size_t)R, (size_t)C, 128, 0, codes, rs);
        for (size_t i = 0; i < n; i++) tmp[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, codes[i]) * rs[i / 128];
        break;
    case QP_ACT_FP8_STATIC_QDQ:
        for (size_t i = 0; i < n; i++) {
            float t = fmaxf(-448.0f, fminf(qp_num_round(dt, v[i] / scale), 448.0f));
            float q = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, t));
            tmp[i] = qp_num_round(dt, qp_num_round(dt, q) * scale);
        }
        break;
    case QP_ACT_MX_QDQ:
        for (int r = 0; r < R; r++) {
            uint8_t sc[64];
            qp_quant_mx(ctx, L->aelem, v + (size_t)r * C, 1, (size_t)C, codes, sc);
            qp_dequant_mx(ctx, L->aelem, codes, sc, 1, (size_t)C, tmp + (size_t)r * C);
            for (int c = 0; c < C; c++) tmp[(size_t)r * C + c] = qp_num_round(dt, tmp[(size_t)r * C + c]);
        }
        break;
    case QP_ACT_NVFP4_QDQ: {
        const float g = 1.0f / scale;
        for (int r = 0; r < R; r++) {
            uint8_t sc[64];
            qp_quant_nvfp4(ctx, v + (size_t)r * C, 1, (size_t)C, g, codes, sc);
            for (int c = 0; c < C; c++) {
                float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, sc[c / 16]) / g;
                tmp[(size_t)r * C + c] = qp_num_round(dt, qp_format_decode(QP_DTYPE_F4_E2M1, codes[c]) * s);
            }
        }
        break;
    }
    default: break;
    }
    if (act == QP_ACT_FP8_STATIC || act == QP_ACT_FP8_DYNAMIC_TENSOR || act == QP_ACT_FP8_DYNAMIC_TOKEN)
        for (size_t i = 0; i < n; i++) tmp[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, codes[i]) * rs[i / (size_t)C];
    for (size_t i = 0; i < n; i++) out[i] = tmp[i];
    free(codes); free(rs); free(tmp);
}

/* One quantization step (dequantized units) of the h quantizer at |v|, the
 * group's scale at its largest: amax the (model) absmax of the group with
 * its bound added. */
static double hstep(const layer *L, double v, double amax) {
    switch (L->act) {
    case QP_ACT_FP8_STATIC: return 0x1p-3 * v + 0x1p-9 * L->a2;
    case QP_ACT_FP8_DYNAMIC_TENSOR: return 0x1p-3 * v + 0x1p-9 * amax / 448;
    case QP_ACT_FP8_DYNAMIC_TOKEN: return 0x1p-3 * v + 0x1p-9 * fmax(amax / 448, 1.0 / (448 * 512));
    case QP_ACT_FP8_GROUP128: return 0x1p-3 * v + 0x1p-9 * fmax(amax, 1e-10) / 448;
    case QP_ACT_FP8_STATIC_QDQ: return 0x1p-3 * v + 0x1p-9 * L->a2 + 2 * ulp(L->dt, v);
    case QP_ACT_MX_QDQ: {
        int mb = L->aelem == QP_DTYPE_F4_E2M1 ? 1 : L->aelem == QP_DTYPE_F6_E3M2 ? 2 : 3;
        int emin = L->aelem == QP_DTYPE_F6_E3M2 ? -2 : 0;
        int emax = L->aelem == QP_DTYPE_F4_E2M1 ? 2 : L->aelem == QP_DTYPE_F6_E3M2 ? 4 : 2;
        int e;
        frexp(fmax(amax, 1e-30), &e);
        double s = ldexp(1.0, e + 1 - emax); /* the largest block scale */
        return ldexp(v, -mb) + ldexp(s, emin - mb) + 2 * ulp(L->dt, v);
    }
    case QP_ACT_NVFP4_QDQ: return 0.5 * v + 0.5 * 1.25 * amax / 6 + 2 * ulp(L->dt, v);
    default: return 0;
    }
}

static bool int8_act(qp_act_mode a) { return a == QP_ACT_INT8_STATIC || a == QP_ACT_INT8_DYNAMIC_TOKEN; }

/* the bound of |y_cl - y_cpu| for every output (the header's derivation) */
static void bound(const layer *L, const uint16_t *x, int M, const int32_t *ids, const float *wt, double *B) {
    qp_dtype dt = L->dt;
    int k = L->k, MK = M * k;
    float *xf = malloc(sizeof(float) * (size_t)M * H);
    double *a1 = malloc(sizeof(double) * (size_t)M * H);
    for (size_t i = 0; i < (size_t)M * H; i++) xf[i] = (float)tu_get(dt, x, i);
    quant_rows(L, L->a13, xf, M, H, a1);
    if (L->act == QP_ACT_NONE) for (size_t i = 0; i < (size_t)M * H; i++) a1[i] = xf[i];
    double *h = calloc((size_t)MK * I, sizeof(double)), *dh = calloc((size_t)MK * I, sizeof(double));
    double *c3 = calloc((size_t)MK * H, sizeof(double)), *d3 = calloc((size_t)MK * H, sizeof(double));
    for (int t = 0; t < MK; t++) {
        int e = ids[t] - L->off, m = t / k;
        if (e < 0 || e >= L->E) continue;
        for (int i = 0; i < I; i++) {
            double c[2], d[2];
            for (int s = 0; s < 2; s++) {
                const double *w = L->w13 + ((size_t)e * 2 * I + (size_t)(s * I + i)) * H;
                double acc = 0, S = 0;
                for (int q = 0; q < H; q++) { acc += a1[(size_t)m * H + q] * w[q]; S += fabs(a1[(size_t)m * H + q] * w[q]); }
                double pre = 2.0 * H * 0x1p-24 * S + 0x1p-22 * fabs(acc);
                c[s] = acc;
                d[s] = pre + ulp(dt, fabs(acc) + pre);
            }
            double g = c[0], u = c[1], sg = g / (1 + exp(-g));
            double ds = 1.1 * d[0];
            ds += ulp(dt, fabs(sg) + ds);
            double hv = sg * u, e2 = fabs(u) * ds + fabs(sg) * d[1] + ds * d[1];
            h[(size_t)t * I + i] = hv;
            dh[(size_t)t * I + i] = e2 + ulp(dt, fabs(hv) + e2);
        }
    }
    /* the second quantization: one step where the perturbed h may flip it */
    bool q2 = L->act != QP_ACT_NONE;
    double *da = malloc(sizeof(double) * (size_t)MK * I);
    double tmax = 0;
    for (size_t i = 0; i < (size_t)MK * I; i++) tmax = fmax(tmax, fabs(h[i]) + dh[i]);
    for (int t = 0; t < MK; t++) {
        double rmax = 0;
        for (int i = 0; i < I; i++) rmax = fmax(rmax, fabs(h[(size_t)t * I + i]) + dh[(size_t)t * I + i]);
        for (int i = 0; i < I; i++) {
            size_t j = (size_t)t * I + (size_t)i;
            double v = fabs(h[j]) + dh[j], gmax = rmax;
            if (L->act == QP_ACT_FP8_DYNAMIC_TENSOR) gmax = tmax;
            int gs = L->act == QP_ACT_MX_QDQ ? 32 : L->act == QP_ACT_NVFP4_QDQ ? 16 : L->act == QP_ACT_FP8_GROUP128 ? 128 : 0;
            if (gs) {
                gmax = 0;
                for (int q = i / gs * gs; q < i / gs * gs + gs; q++)
                    gmax = fmax(gmax, fabs(h[(size_t)t * I + q]) + dh[(size_t)t * I + q]);
            }
            da[j] = dh[j] + (q2 ? hstep(L, v, gmax) : 0);
        }
    }
    for (int t = 0; t < MK; t++) {
        int e = ids[t] - L->off;
        if (e < 0 || e >= L->E) continue;
        for (int n = 0; n < H; n++) {
            const double *w = L->w2 + ((size_t)e * H + (size_t)n) * I;
            double acc = 0, S = 0, D = 0;
            for (int i = 0; i < I; i++) {
                size_t j = (size_t)t * I + (size_t)i;
                acc += h[j] * w[i];
                S += (fabs(h[j]) + da[j]) * fabs(w[i]);
                D += da[j] * fabs(w[i]);
            }
            double rw = fabs((double)wt[t]);
            double pre = rw * (D + 2.0 * I * 0x1p-24 * S) + 0x1p-22 * rw * (fabs(acc) + D);
            c3[(size_t)t * H + n] = acc * wt[t];
            d3[(size_t)t * H + n] = pre + ulp(dt, fabs(acc * wt[t]) + pre);
        }
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < H; n++) {
            double dd = 0, mag = 0, b = 0;
            for (int j = 0; j < k; j++) {
                size_t q = ((size_t)m * k + (size_t)j) * H + (size_t)n;
                dd += d3[q];
                mag += fabs(c3[q]) + d3[q];
                b += ulp(dt, mag + dd);
            }
            B[(size_t)m * H + n] = dd + b;
        }
    free(xf); free(a1); free(h); free(dh); free(c3); free(d3); free(da);
}

/* ---- one comparison -------------------------------------------------------- */
static void compare(const layer *L, qp_moe *mc, qp_moe *mo, int M, const int32_t *ids, const float *wt, const char *what) {
    size_t n = (size_t)M * H;
    uint16_t *x = malloc(2 * n), *yc = malloc(2 * n), *yo = malloc(2 * n);
    for (size_t i = 0; i < n; i++) tu_put(L->dt, x, i, (float)(1.3 * nrand()));
    char where[200];
    snprintf(where, sizeof where, "%s %s E=%d G=%d k=%d M=%d %s", L->c->name, qp_dtype_name(L->dt), L->E, L->G, L->k, M, what);
    qp_status a = qp_moe_forward_topk(mc, x, M, ids, wt, yc), b = qp_moe_forward_topk(mo, x, M, ids, wt, yo);
    CHECK(!a && !b, "%s: %s", where, qp_last_error(ctx));
    n_cases++;
    if (a || b) goto out;
    if (int8_act(L->act)) {
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += yc[i] != yo[i];
        CHECK(differ == 0, "%s: %zu of %zu outputs differ (int8: bit for bit)", where, differ, n);
        n_int_outputs += (long)n;
        n_exact += (long)(n - differ);
        n_outputs += (long)n;
        goto out;
    }
    double *B = malloc(sizeof(double) * n);
    bound(L, x, M, ids, wt, B);
    for (size_t i = 0; i < n; i++) {
        double dv = fabs(tu_get(L->dt, yc, i) - tu_get(L->dt, yo, i));
        bool nan = isnan(tu_get(L->dt, yc, i)) || isnan(tu_get(L->dt, yo, i));
        double r = dv == 0 ? 0 : dv / B[i];
        n_exact += dv == 0 && !nan;
        if (nan || !(r <= 1.0)) {
            CHECK(false, "%s: y[%zu][%zu] %.9g (%s) vs %.9g (cpu): %.3g x the bound %.3g", where, i / H, i % H,
                  tu_get(L->dt, yo, i), devname, tu_get(L->dt, yc, i), r, B[i]);
            break;
        }
        if (r > worst_ratio) { worst_ratio = r; snprintf(worst_where, sizeof worst_where, "%s", where); }
    }
    n_outputs += (long)n;
    free(B);
out:
    free(x); free(yc); free(yo);
}

/* the distinct kernel paths seen (qp_moe_describe), printed at the end */
static char paths[48][160];
static int n_paths;
static void note_path(const char *d) {
    for (int i = 0; i < n_paths; i++)
        if (!strcmp(paths[i], d)) return;
    if (n_paths < 48) snprintf(paths[n_paths++], sizeof paths[0], "%s", d);
}

void md_run_layer(int ci, qp_dtype dt, int E, int G, int off, int k) {
    layer L;
    memset(&L, 0, sizeof L);
    L.c = &cases[ci]; L.dt = dt; L.E = E; L.G = G; L.off = off; L.k = k;
    bool ok = L.c->f == F_EMU ? emulated_layer(&L) : (direct_layer(&L), true);
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    o.renormalize = 1;
    o.global_num_experts = G;
    o.expert_offset = off;
    o.layer = "model.layers.0.mlp.experts";
    bool grouped = G == 64;
    if (grouped) { o.num_expert_group = 8; o.topk_group = 2; }
    qp_moe *mc = NULL, *mo = NULL;
    if (ok) {
        CHECK(!qp_moe_create(cpu, &L.s, E, H, I, L.t, L.nt, &o, &mc), "%s cpu: %s", L.c->name, qp_last_error(ctx));
        CHECK(!qp_moe_create(dev, &L.s, E, H, I, L.t, L.nt, &o, &mo), "%s %s: %s", L.c->name, devname, qp_last_error(ctx));
    }
    int nm = n_token_ms;
    const int *Ms = token_ms;
    for (int mi = 0; mc && mo && mi < nm; mi++) {
        int M = Ms[mi], MK = M * k;
        float *logits = malloc(sizeof(float) * (size_t)M * G), *wt = malloc(sizeof(float) * (size_t)MK);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)MK);
        for (int i = 0; i < M * G; i++) logits[i] = (float)(1.5 * nrand());
        /* experts 1 and 5 (of every group of 8) never chosen */
        for (int m = 0; m < M; m++)
            for (int e = 1; e < G; e += 4) logits[(size_t)m * G + e] = -40;
        CHECK(!qp_moe_route(ctx, logits, M, G, &o, ids, wt), "%s", qp_last_error(ctx));
        compare(&L, mc, mo, M, ids, wt, grouped ? "grouped top-k" : "top-k");
        char dsc[160];
        qp_moe_describe(mo, M, dsc, sizeof dsc);
        note_path(dsc);
        CHECK(strstr(dsc, M <= 16 ? "moe decode" : "moe ") != NULL, "%s M=%d: path '%s'", L.c->name, M, dsc);
        /* qp_moe_forward (routing in the core) equals the top-k call */
        if (mi == 1 || mi == 3) {
            size_t n = (size_t)M * H;
            uint16_t *x = malloc(2 * n), *y1 = malloc(2 * n), *y2 = malloc(2 * n);
            for (size_t i = 0; i < n; i++) tu_put(dt, x, i, (float)nrand());
            CHECK(!qp_moe_forward(mo, x, M, logits, y1) && !qp_moe_forward_topk(mo, x, M, ids, wt, y2) &&
                      !memcmp(y1, y2, 2 * n),
                  "%s: qp_moe_forward != qp_moe_forward_topk: %s", L.c->name, qp_last_error(ctx));
            free(x); free(y1); free(y2);
        }
        /* every token through one expert (this rank's off + 2), in every
         * slot of the token for the second half of the tokens */
        if (nm < 5 || mi == 0 || mi == 2 || mi == 4) {
            for (int t = 0; t < MK; t++) {
                int m = t / k, j = t % k;
                ids[t] = j == 0 || m >= M / 2 ? off + 2 : (off + 3 + j) % G;
                wt[t] = (float)(0.25 + 0.5 * urand());
            }
            compare(&L, mc, mo, M, ids, wt, "one expert for all");
        }
        free(logits); free(wt); free(ids);
    }
    qp_moe_destroy(mc);
    qp_moe_destroy(mo);
    layer_free(&L);
}

void md_init(qp_context *c, qp_device *ref, qp_device *d, const char *name, const int *ms, int n_ms) {
    ctx = c; cpu = ref; dev = d; devname = name; token_ms = ms; n_token_ms = n_ms;
    const char *seed = getenv("QPORT_TEST_SEED");
    if (seed && *seed) rng ^= strtoull(seed, NULL, 0) * 0x9e3779b97f4a7c15ull;
}

void md_set_shape(int h, int i) { H = h; I = i; }

void md_run_matrix(void) {
    static const int ks[3] = {1, 2, 8};
    for (int ci = 0; ci < NCASES; ci++)
        for (int di = 0; di < 2 && cases[ci].f != F_FP8B; di++) {
            qp_dtype dt = di ? QP_DTYPE_BF16 : QP_DTYPE_F16;
            int E = (ci + di) % 2 ? 64 : 8, k = ks[(ci + 2 * di) % 3];
            md_run_layer(ci, dt, E, E, 0, k);
        }
    /* expert parallelism: this rank holds experts 8..15 of 16 */
    md_run_layer(2, QP_DTYPE_F16, 8, 16, 8, 2);  /* fp8 dyn per-tensor: zero rows in the absmax */
    md_run_layer(6, QP_DTYPE_BF16, 8, 16, 8, 8); /* int8 dyn per-token */
    md_run_layer(12, QP_DTYPE_BF16, 8, 16, 8, 1); /* nvfp4 */
}

void md_run_fp8_block(void) {
    int h = H, i = I, ci = NCASES - 1;
    long out0 = n_outputs, eq0 = n_exact;
    md_set_shape(256, 128);
    md_run_layer(ci, QP_DTYPE_F16, 4, 4, 0, 2);
    md_run_layer(ci, QP_DTYPE_BF16, 4, 8, 4, 2); /* expert parallelism: experts 4..7 of 8 */
    md_set_shape(h, i);
    /* The bound is sized for h codes that differ by one fp8 step, so a
     * wrong group or block scale can stay inside it. The device quantizes x
     * and h to the reference's codes and scales; only the fp32 order of the
     * k-block sums differs, which the act-dtype rounding almost always
     * absorbs (> 99.9% of outputs equal here): most outputs must be equal. */
    long out = n_outputs - out0, eq = n_exact - eq0;
    CHECK(out > 0 && eq >= out * 9 / 10, "fp8 per-block: %ld of %ld outputs equal the reference bit for bit (90%% wanted)",
          eq, out);
}

void md_counts(long *outputs, long *equal) {
    *outputs = n_outputs;
    *equal = n_exact;
}

void md_fp8_block_scheme(qp_scheme *s, qp_config **cfg) {
    *cfg = tu_load(ctx, FP8_BLOCK_CONFIG);
    CHECK(*cfg && !qp_config_resolve(*cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, s), "fp8 per-block: %s",
          qp_last_error(ctx));
}

void md_refuse_unsupported(void) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_QQQ_W4A8; /* QQQ configs quantize no experts (W4A16 experts run since vLLM 0.34.0) */
    snprintf(s.weight_key, sizeof s.weight_key, "kInt4");
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = 2;
    qp_moe *m = NULL;
    CHECK(qp_moe_create(dev, &s, 8, H, I, NULL, 0, &o, &m) == QP_ERR_UNSUPPORTED && strstr(qp_last_error(ctx), "no fused MoE"),
          "W4A16 experts: %s", qp_last_error(ctx));
}

qp_status md_create_direct(qp_device *d, int ci, qp_dtype dt, int E, int k, qp_moe **out) {
    layer L;
    memset(&L, 0, sizeof L);
    L.c = &cases[ci]; L.dt = dt; L.E = E; L.G = E; L.k = k;
    direct_layer(&L);
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    qp_status st = qp_moe_create(d, &L.s, E, H, I, L.t, L.nt, &o, out);
    layer_free(&L);
    return st;
}

void md_report(const char *test, double t0) {
    printf("%s paths:\n", test);
    for (int i = 0; i < n_paths; i++) printf("  %s\n", paths[i]);
    printf("%s: %ld cases, %ld outputs (%ld int8, bit for bit), %ld equal bit for bit; worst float |diff| %.3f of "
           "the bound (%s); %.1f s cpu\n", test, n_cases, n_outputs, n_int_outputs, n_exact, worst_ratio, worst_where,
           ((double)clock() - t0) / CLOCKS_PER_SEC);
}
