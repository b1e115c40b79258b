/* The emulated MoE schemes (OCP MX with mxfp4 / mxfp6 / no activation
 * quantization, W4A8 MXFP4-FP8, NVFP4): the fused MoE reference against a
 * composition of the same schemes' linear layers, bit for bit. With
 * routing weights 1 every step is defined alike: an expert's w13 output is
 * its [gate; up] linear layer's, silu_and_mul in the activation dtype, the
 * w2 output its down linear's, and the k slots summed in the activation
 * dtype. Also: vLLM's NVFP4 quirk (w13 uses the gate's weight_scale_2 for
 * both shards), the max over experts of static input scales, routing
 * weights != 1 within one rounding, and bad tensors. Seeded inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static qp_device *cpu;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static double urand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

enum { E = 4, H = 64, I = 32, M = 7, K = 2, NT = 16 };

typedef struct scheme_case {
    const char *name, *weight, *input; /* Quark QTensorConfig JSON */
} scheme_case;

#define MX(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"ch_axis\":-1,\"symmetric\":null," \
               "\"is_dynamic\":%s,\"scale_format\":\"e8m0\",\"scale_calculation_mode\":\"even\",\"round_method\":\"half_even\"}"
static const scheme_case cases[] = {
    {"mxfp4 (w4a4)", MX("fp4"), MX("fp4")},
    {"mxfp4 weight-only", MX("fp4"), NULL},
    {"mxfp6_e2m3", MX("fp6_e2m3"), MX("fp6_e2m3")},
    /* 0.34.0's QuarkW8A8Mxfp8MoEMethod: e4m3 elements, e8m0 scales, dynamic MXFP8 activations */
    {"mxfp8", MX("fp8_e4m3"), "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"ch_axis\":-1,"
                              "\"symmetric\":true,\"is_dynamic\":%s,\"scale_format\":\"e8m0\"}"},
    {"mxfp4 + fp8 static", MX("fp4"),
     "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false}"},
    {"nvfp4", /* Quark's two-level export: fp4 blocks of 16, then fp8 scales */
     "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"ch_axis\":-1,\"symmetric\":null,"
     "\"is_dynamic\":%s,\"is_scale_quant\":false,\"scale_format\":\"float32\"},{\"dtype\":\"fp8_e4m3\",\"qscheme\":"
     "\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false,\"is_scale_quant\":true}]",
     "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"ch_axis\":-1,\"symmetric\":null,"
     "\"is_dynamic\":%s,\"is_scale_quant\":false,\"scale_format\":\"float32\"},{\"dtype\":\"fp8_e4m3\",\"qscheme\":"
     "\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false,\"is_scale_quant\":true}]"},
};

static qp_config *config_of(const scheme_case *c) {
    char w[700], in[700], js[2000];
    snprintf(w, sizeof w, c->weight, "false");
    if (c->input) snprintf(in, sizeof in, c->input, "true");
    snprintf(js, sizeof js,
             "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
             "\"global_quant_config\":{\"weight\":%s,\"input_tensors\":%s,\"output_tensors\":null,\"bias\":null},"
             "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
             w, c->input ? in : "null");
    return tu_load(ctx, js);
}

/* The MoE tensors under vLLM's FusedMoE names, stacked from each expert's
 * quantized [gate; up] (one layer, so NVFP4's gate and up share a
 * weight_scale_2 as Quark's exports do) and down weights. */
typedef struct stacked {
    qp_tensor t[8];
    size_t n;
    void *mem[8];
} stacked;

static void stack_add(stacked *s, const char *name, qp_qweights *const *q, const char *src, int per_shard_cols) {
    qp_tensor t0;
    if (qp_qweights_find(q[0], src, &t0)) return;
    size_t bytes = 1;
    for (int d = 0; d < t0.ndim; d++) bytes *= (size_t)t0.shape[d];
    int bits = qp_format_bits(t0.dtype);
    bytes *= bits >= 8 ? (size_t)bits / 8 : 1;
    unsigned char *p = malloc(bytes * E * (size_t)(per_shard_cols ? per_shard_cols : 1));
    for (int e = 0; e < E; e++) {
        qp_tensor te;
        qp_qweights_find(q[e], src, &te);
        for (int c = 0; c < (per_shard_cols ? per_shard_cols : 1); c++)
            memcpy(p + ((size_t)e * (per_shard_cols ? per_shard_cols : 1) + (size_t)c) * bytes, te.data, bytes);
    }
    qp_tensor t = {name, t0.dtype, t0.ndim + 1, {E, 0, 0, 0}, p};
    for (int d = 0; d < t0.ndim; d++) t.shape[d + 1] = t0.shape[d];
    if (per_shard_cols > 1) { t.ndim = 2; t.shape[1] = per_shard_cols; } /* a scalar per shard */
    s->mem[s->n] = p;
    s->t[s->n++] = t;
}

static void silu_mul(qp_dtype dt, const void *c1, void *h) {
    for (int i = 0; i < I; i++) {
        float g = (float)tu_get(dt, c1, (size_t)i), u = (float)tu_get(dt, c1, (size_t)(I + i));
        uint16_t sb;
        tu_put(dt, &sb, 0, (float)((double)g / (1.0 + exp(-(double)g))));
        tu_put(dt, h, (size_t)i, (float)tu_get(dt, &sb, 0) * u);
    }
}

static void run_case(const scheme_case *c, qp_dtype dt) {
    qp_config *cfg = config_of(c);
    qp_scheme lin, moe_s;
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts.0.down_proj", QP_LAYER_LINEAR, NULL, &lin) &&
              !qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &moe_s),
          "%s: %s", c->name, qp_last_error(ctx));
    if (!cfg) return;
    qp_quantize_options qo;
    qp_quantize_options_init(&qo);
    qo.params_dtype = dt;
    qo.input_absmax = 3.0f; /* the same static input scale for every expert */
    qp_qweights *q13[E] = {0}, *q2[E] = {0};
    float *w13 = malloc(sizeof(float) * 2 * I * H), *w2 = malloc(sizeof(float) * H * I);
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < 2 * I * H; i++) w13[i] = (float)(nrand() / sqrt(H));
        for (int i = 0; i < H * I; i++) w2[i] = (float)(nrand() / sqrt(I));
        CHECK(!qp_quantize_weights(ctx, &lin, w13, 2 * I, H, &qo, &q13[e]) &&
                  !qp_quantize_weights(ctx, &lin, w2, H, I, &qo, &q2[e]),
              "%s: quantize: %s", c->name, qp_last_error(ctx));
    }
    bool nv = moe_s.kind == QP_SCHEME_NVFP4;
    stacked s = {0};
    stack_add(&s, "w13_weight", q13, "weight", 0);
    stack_add(&s, "w13_weight_scale", q13, "weight_scale", 0);
    stack_add(&s, "w2_weight", q2, "weight", 0);
    stack_add(&s, "w2_weight_scale", q2, "weight_scale", 0);
    stack_add(&s, nv ? "w13_input_scale_2" : "w13_input_scale", q13, nv ? "input_scale_2" : "input_scale", nv ? 2 : 0);
    stack_add(&s, nv ? "w2_input_scale_2" : "w2_input_scale", q2, nv ? "input_scale_2" : "input_scale", 0);
    stack_add(&s, "w13_weight_scale_2", q13, "weight_scale_2", 2);
    stack_add(&s, "w2_weight_scale_2", q2, "weight_scale_2", 0);
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = K;
    o.layer = "model.layers.0.mlp.experts";
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &moe), "%s %s: %s", c->name, qp_dtype_name(dt),
          qp_last_error(ctx));
    /* the composition's layers */
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = dt;
    qp_linear *l13[E] = {0}, *l2[E] = {0};
    for (int e = 0; e < E; e++) {
        qp_tensor t[8];
        size_t n = qp_qweights_count(q13[e]);
        for (size_t i = 0; i < n; i++) qp_qweights_get(q13[e], i, &t[i]);
        CHECK(!qp_linear_create(cpu, &lin, 2 * I, H, t, n, &lo, &l13[e]), "%s", qp_last_error(ctx));
        n = qp_qweights_count(q2[e]);
        for (size_t i = 0; i < n; i++) qp_qweights_get(q2[e], i, &t[i]);
        CHECK(!qp_linear_create(cpu, &lin, H, I, t, n, &lo, &l2[e]), "%s", qp_last_error(ctx));
    }
    uint16_t x[M * H], y[M * H], y1[M * H];
    for (int i = 0; i < M * H; i++) tu_put(dt, x, (size_t)i, (float)(1.2 * nrand()));
    int32_t ids[M * K];
    float ones[M * K], wt[M * K];
    for (int i = 0; i < M * K; i++) { ids[i] = i % K ? 1 + (int)(urand() * 2) : (i / K) % 2 ? 3 : 0; ones[i] = 1.0f; wt[i] = (float)urand(); }
    ids[2 * K] = ids[2 * K + 1] = 0; /* token 2: expert 0 in both slots */
    size_t differ = 0;
    if (moe && l13[E - 1] && l2[E - 1]) {
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, ones, y), "%s", qp_last_error(ctx));
        for (int m = 0; m < M; m++) {
            float sum[H];
            for (int n = 0; n < H; n++) sum[n] = 0;
            for (int j = 0; j < K; j++) {
                int e = ids[m * K + j];
                uint16_t c1[2 * I], h[I], c3[H];
                CHECK(!qp_linear_forward(l13[e], x + m * H, 1, c1), "%s", qp_last_error(ctx));
                silu_mul(dt, c1, h);
                CHECK(!qp_linear_forward(l2[e], h, 1, c3), "%s", qp_last_error(ctx));
                for (int n = 0; n < H; n++) {
                    uint16_t sb;
                    tu_put(dt, &sb, 0, sum[n] + (float)tu_get(dt, c3, (size_t)n));
                    sum[n] = (float)tu_get(dt, &sb, 0);
                }
            }
            for (int n = 0; n < H; n++) {
                uint16_t want;
                tu_put(dt, &want, 0, sum[n]);
                differ += want != y[m * H + n];
            }
        }
        CHECK(differ == 0, "%s %s: %zu of %d outputs differ from the linear layers' composition", c->name,
              qp_dtype_name(dt), differ, M * H);
        /* routing weights != 1: each slot's product rounded once more */
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y1), "%s", qp_last_error(ctx));
        double worst = 0;
        for (int m = 0; m < M; m++) {
            uint16_t yk[K][H];
            for (int j = 0; j < K; j++) {
                /* slot j alone, weight 1 (the other slot's weight 0) */
                int32_t id2[K];
                float wj[K];
                for (int q = 0; q < K; q++) { id2[q] = ids[m * K + j]; wj[q] = q == 0 ? 1.0f : 0.0f; }
                CHECK(!qp_moe_forward_topk(moe, x + m * H, 1, id2, wj, yk[j]), "%s", qp_last_error(ctx));
            }
            for (int n = 0; n < H; n++) {
                double want = 0, mag = 0;
                for (int j = 0; j < K; j++) {
                    double v = tu_get(dt, yk[j], (size_t)n) * wt[m * K + j];
                    want += v;
                    mag += fabs(v);
                }
                /* the unrounded product differs from the rounded slot by one
                 * rounding; k more in the sum; plus subnormal steps */
                double u = tu_unit(dt), b = (K + 2) * u * (mag + fabs(want)) + 4 * (dt == QP_DTYPE_F16 ? 0x1p-24 : 0x1p-133);
                worst = fmax(worst, fabs(tu_get(dt, y1, (size_t)m * H + n) - want) / b);
            }
        }
        CHECK(worst <= 1.0, "%s %s: routing weights: %.3g x the bound", c->name, qp_dtype_name(dt), worst);
        printf("moe %-20s %s: %d outputs bit for bit with the linear layers; weighted: worst %.3f of the bound\n",
               c->name, qp_dtype_name(dt), M * H, worst);
    }
    if (nv && moe) {
        /* vLLM's w13_weight_scale_2[:, 0]: the up shard's own global scale is
         * ignored; the gate's applies to both */
        float *g2 = NULL;
        for (size_t i = 0; i < s.n; i++)
            if (!strcmp(s.t[i].name, "w13_weight_scale_2")) g2 = s.mem[i];
        uint16_t y2[M * H];
        for (int e = 0; e < E; e++) g2[2 * e + 1] *= 4.0f;
        qp_moe *m2 = NULL;
        CHECK(!qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &m2) && !qp_moe_forward_topk(m2, x, M, ids, ones, y2) &&
                  !memcmp(y2, y, sizeof y),
              "nvfp4: the up shard's weight_scale_2 must not matter: %s", qp_last_error(ctx));
        qp_moe_destroy(m2);
        for (int e = 0; e < E; e++) g2[2 * e] *= 4.0f;
        CHECK(!qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &m2) && !qp_moe_forward_topk(m2, x, M, ids, ones, y2) &&
                  memcmp(y2, y, sizeof y),
              "nvfp4: the gate's weight_scale_2 must matter");
        qp_moe_destroy(m2);
    }
    if (moe_s.kind == QP_SCHEME_W4A8_MXFP4_FP8 && moe) {
        /* the static input scale is the max over experts */
        float *is = NULL;
        for (size_t i = 0; i < s.n; i++)
            if (!strcmp(s.t[i].name, "w13_input_scale")) is = s.mem[i];
        float keep = is[2];
        is[2] = keep / 2; /* a smaller one elsewhere changes nothing */
        uint16_t y2[M * H];
        qp_moe *m2 = NULL;
        CHECK(!qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &m2) && !qp_moe_forward_topk(m2, x, M, ids, ones, y2) &&
                  !memcmp(y2, y, sizeof y),
              "w4a8: a smaller expert input scale must not matter");
        qp_moe_destroy(m2);
        is[2] = keep * 2;
        CHECK(!qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &m2) && !qp_moe_forward_topk(m2, x, M, ids, ones, y2) &&
                  memcmp(y2, y, sizeof y),
              "w4a8: the largest input scale must apply");
        qp_moe_destroy(m2);
        is[2] = keep;
    }
    /* bad tensors name themselves */
    if (moe) {
        qp_moe *bad = NULL;
        qp_tensor save = s.t[1];
        s.t[1].shape[0] = E - 1;
        CHECK(qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &bad) == QP_ERR_INVALID_ARGUMENT &&
                  strstr(qp_last_error(ctx), "w13_weight_scale"),
              "%s: short scales: %s", c->name, qp_last_error(ctx));
        s.t[1] = save;
        s.t[0].name = "w13_weights";
        CHECK(qp_moe_create(cpu, &moe_s, E, H, I, s.t, s.n, &o, &bad) == QP_ERR_INVALID_ARGUMENT &&
                  strstr(qp_last_error(ctx), "'w13_weight'"),
              "%s: missing weight: %s", c->name, qp_last_error(ctx));
        s.t[0].name = "w13_weight";
        CHECK(qp_moe_create(cpu, &moe_s, E, H + 32, I, s.t, s.n, &o, &bad) == QP_ERR_INVALID_ARGUMENT,
              "%s: wrong H: %s", c->name, qp_last_error(ctx));
    }
    qp_moe_destroy(moe);
    for (int e = 0; e < E; e++) {
        qp_linear_destroy(l13[e]); qp_linear_destroy(l2[e]);
        qp_qweights_destroy(q13[e]); qp_qweights_destroy(q2[e]);
    }
    for (size_t i = 0; i < s.n; i++) free(s.mem[i]);
    free(w13); free(w2);
    qp_config_destroy(cfg);
}

int main(void) {
    if (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu)) return 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run_case(&cases[i], QP_DTYPE_F16);
        run_case(&cases[i], QP_DTYPE_BF16);
    }
    qp_context_destroy(ctx);
    return tu_finish("moe-emulated");
}
