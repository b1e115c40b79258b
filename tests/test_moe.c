/* The MoE core: vLLM's routing (fused_topk, grouped_topk with a correction
 * bias), the fused MoE reference against an fp64 model with a bound derived
 * from its roundings (unquantized, fp8) and bit for bit against an
 * independent integer model (int8), process-after-loading (fp8 w13 shards
 * requantized to the larger scale, static input scales max over experts),
 * and the error paths. Seeded random inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static qp_device *cpu;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void) { /* [0, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand()); }

/* ---- routing --------------------------------------------------------- */

static void test_route(void) {
    enum { M = 64, E = 16, K = 4 };
    float logits[M * E], w[M * K];
    int32_t ids[M * K];
    for (int i = 0; i < M * E; i++) logits[i] = (float)(2 * nrand());
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = K;
    for (int renorm = 0; renorm < 2; renorm++) {
        o.renormalize = renorm;
        CHECK(!qp_moe_route(ctx, logits, M, E, &o, ids, w), "%s", qp_last_error(ctx));
        for (int m = 0; m < M; m++) {
            double p[E], z = 0, mx = -1e300, sel = 0;
            for (int e = 0; e < E; e++) mx = fmax(mx, logits[m * E + e]);
            for (int e = 0; e < E; e++) z += (p[e] = exp((double)logits[m * E + e] - mx));
            for (int j = 0; j < K; j++) sel += p[ids[m * K + j]] / z;
            for (int j = 0; j < K; j++) {
                int e = ids[m * K + j];
                /* the j-th largest: exactly j experts score higher */
                int higher = 0;
                for (int f = 0; f < E; f++) higher += logits[m * E + f] > logits[m * E + e];
                CHECK(higher == j, "token %d slot %d: expert %d is not the %d-th largest", m, j, e, j);
                double want = p[e] / z / (renorm ? sel : 1.0);
                CHECK(fabs(w[m * K + j] - want) <= 8 * E * 0x1p-24 * want, "token %d slot %d: weight %g vs %g", m, j,
                      (double)w[m * K + j], want);
            }
        }
    }
    /* ties go to the lower expert index */
    float tie[E] = {0};
    o.top_k = 3;
    CHECK(!qp_moe_route(ctx, tie, 1, E, &o, ids, w) && ids[0] == 0 && ids[1] == 1 && ids[2] == 2, "ties: %d %d %d",
          ids[0], ids[1], ids[2]);
    /* grouped top-k with a correction bias: 8 experts in 4 groups, 2 groups
     * kept; the bias decides the choice, the unbiased scores the weights */
    float lg[8] = {0, 0, 0, 0, 3.0f, -3.0f, 0.5f, 0.4f};
    float bias[8] = {0, 0, 2.0f, 2.0f, 0, 0, 0, 0};
    qp_moe_options g;
    qp_moe_options_init(&g);
    g.top_k = 2;
    g.num_expert_group = 4;
    g.topk_group = 2;
    g.scoring = QP_MOE_SIGMOID;
    g.e_score_correction_bias = bias;
    g.routed_scaling_factor = 2.5f;
    CHECK(!qp_moe_route(ctx, lg, 1, 8, &g, ids, w), "%s", qp_last_error(ctx));
    /* biased group scores (top-2 sums): g0 = 1.0, g1 = 5.0, g2 = 0.95+0.05 ~ 1.0..., g3 = 1.22 + ... */
    double s[8], b[8], gs[4];
    for (int e = 0; e < 8; e++) { s[e] = 1 / (1 + exp(-(double)lg[e])); b[e] = s[e] + bias[e]; }
    for (int q = 0; q < 4; q++) gs[q] = b[2 * q] + b[2 * q + 1];
    int g1 = 0, g2 = -1;
    for (int q = 1; q < 4; q++) if (gs[q] > gs[g1]) g1 = q;
    for (int q = 0; q < 4; q++) if (q != g1 && (g2 < 0 || gs[q] > gs[g2])) g2 = q;
    int e1 = -1, e2 = -1;
    for (int e = 0; e < 8; e++) if ((e / 2 == g1 || e / 2 == g2) && (e1 < 0 || b[e] > b[e1])) e1 = e;
    for (int e = 0; e < 8; e++) if (e != e1 && (e / 2 == g1 || e / 2 == g2) && (e2 < 0 || b[e] > b[e2])) e2 = e;
    CHECK(ids[0] == e1 && ids[1] == e2, "grouped: experts %d %d, want %d %d", ids[0], ids[1], e1, e2);
    CHECK(fabs(w[0] - 2.5 * s[e1]) <= 1e-6 && fabs(w[1] - 2.5 * s[e2]) <= 1e-6, "grouped weights %g %g", (double)w[0],
          (double)w[1]);
    CHECK(e1 == 2 || e2 == 2 || e1 == 3 || e2 == 3, "the bias must pull group 1 in");
    /* bad routing arguments */
    o.top_k = E + 1;
    CHECK(qp_moe_route(ctx, logits, M, E, &o, ids, w) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "top_k"),
          "top_k > E: %s", qp_last_error(ctx));
    g.num_expert_group = 3;
    CHECK(qp_moe_route(ctx, lg, 1, 8, &g, ids, w) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "divisible by num_expert_group"),
          "groups: %s", qp_last_error(ctx));
    o.top_k = 2;
    o.scoring = QP_MOE_SIGMOID;
    CHECK(qp_moe_route(ctx, logits, M, E, &o, ids, w) == QP_ERR_INVALID_ARGUMENT, "sigmoid without groups");
}

/* ---- the fused forward ------------------------------------------------ */

typedef struct layer {
    int E, H, I;
    qp_dtype dt;
    float *w13, *w2; /* fp32 master weights [E][2I][H], [E][H][I] */
} layer;

static void layer_make(layer *L, int E, int H, int I, qp_dtype dt) {
    *L = (layer){E, H, I, dt, malloc(sizeof(float) * (size_t)E * 2 * I * H), malloc(sizeof(float) * (size_t)E * H * I)};
    for (size_t i = 0; i < (size_t)E * 2 * I * H; i++) L->w13[i] = (float)(nrand() / sqrt(H));
    for (size_t i = 0; i < (size_t)E * H * I; i++) L->w2[i] = (float)(nrand() / sqrt(I));
}

/* fp64 model of one token's MoE output row given dequantized weights, plus
 * the bound of qport's roundings (docs/moe.md): every rounding to the
 * activation dtype (cache1, silu, cache2, cache3, the k-sum) is one u of
 * its value, propagated; fp32 sums K 2^-24 of their absolute sums. */
static void model_row(const layer *L, const double *w13, const double *w2, const double *x, const int32_t *ids,
                      const float *wt, int k, double act_err, double *y, double *bound) {
    int H = L->H, I = L->I;
    double u = tu_unit(L->dt);
    double *h = malloc(sizeof(double) * I), *hb = malloc(sizeof(double) * I), *hab = malloc(sizeof(double) * I);
    for (int n = 0; n < H; n++) y[n] = bound[n] = 0;
    double *c3 = calloc((size_t)k * H, sizeof(double));
    for (int j = 0; j < k; j++) {
        int e = ids[j];
        for (int i = 0; i < I; i++) {
            double g = 0, up = 0, ga = 0, ua = 0;
            for (int t = 0; t < H; t++) {
                g += w13[((size_t)e * 2 * I + i) * H + t] * x[t];
                up += w13[((size_t)e * 2 * I + I + i) * H + t] * x[t];
                ga += fabs(w13[((size_t)e * 2 * I + i) * H + t] * x[t]);
                ua += fabs(w13[((size_t)e * 2 * I + I + i) * H + t] * x[t]);
            }
            double eg = (u + H * 0x1p-24 + act_err) * ga + u * fabs(g), eu = (u + H * 0x1p-24 + act_err) * ua + u * fabs(up);
            double sg = g / (1 + exp(-g));
            h[i] = sg * up;
            /* silu' <= 1.1: an error eg in g moves silu by <= 1.1 eg; silu and
             * the product are rounded once each */
            double es = 1.1 * eg + u * (fabs(sg) + 1.1 * eg);
            hb[i] = es * (fabs(up) + eu) + fabs(sg) * eu + u * (fabs(h[i]) + es * (fabs(up) + eu) + fabs(sg) * eu);
            hab[i] = fabs(h[i]) + hb[i];
        }
        for (int n = 0; n < H; n++) {
            double acc = 0, ab = 0, eb = 0;
            for (int i = 0; i < I; i++) {
                acc += w2[((size_t)e * H + n) * I + i] * h[i];
                ab += fabs(w2[((size_t)e * H + n) * I + i]) * hab[i];
                eb += fabs(w2[((size_t)e * H + n) * I + i]) * hb[i];
            }
            c3[(size_t)j * H + n] = wt[j] * acc;
            bound[n] += fabs(wt[j]) * (eb + (I * 0x1p-24 + act_err) * ab) + u * fabs(wt[j]) * (fabs(acc) + eb + ab * 0x1p-20);
        }
    }
    for (int n = 0; n < H; n++) {
        double s = 0, sa = 0;
        for (int j = 0; j < k; j++) { s += c3[(size_t)j * H + n]; sa += fabs(c3[(size_t)j * H + n]); }
        y[n] = s;
        /* k roundings of the sum, and a subnormal step per rounding */
        bound[n] += k * u * (sa + bound[n]) + (2.0 * k + 6) * (L->dt == QP_DTYPE_F16 ? 0x1p-24 : 0x1p-133);
    }
    free(h); free(hb); free(hab); free(c3);
}

static int run_unquantized(qp_dtype dt) {
    layer L;
    layer_make(&L, 8, 64, 32, dt);
    int E = L.E, H = L.H, I = L.I, M = 17, k = 2;
    size_t es = 2;
    uint16_t *w13 = malloc(es * E * 2 * I * H), *w2 = malloc(es * E * H * I), *x = malloc(es * M * H), *y = malloc(es * M * H);
    double *d13 = malloc(sizeof(double) * E * 2 * I * H), *d2 = malloc(sizeof(double) * E * H * I);
    for (size_t i = 0; i < (size_t)E * 2 * I * H; i++) { tu_put(dt, w13, i, L.w13[i]); d13[i] = tu_get(dt, w13, i); }
    for (size_t i = 0; i < (size_t)E * H * I; i++) { tu_put(dt, w2, i, L.w2[i]); d2[i] = tu_get(dt, w2, i); }
    for (size_t i = 0; i < (size_t)M * H; i++) tu_put(dt, x, i, (float)nrand());
    qp_tensor t[2] = {{"w13_weight", dt, 3, {E, 2 * I, H}, w13}, {"w2_weight", dt, 3, {E, H, I}, w2}};
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_UNQUANTIZED;
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    o.renormalize = 1;
    o.layer = "model.layers.0.mlp.experts";
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, 2, &o, &moe), "%s", qp_last_error(ctx));
    float *logits = malloc(sizeof(float) * M * E), *wt = malloc(sizeof(float) * M * k);
    int32_t *ids = malloc(sizeof(int32_t) * M * k);
    for (int i = 0; i < M * E; i++) logits[i] = (float)nrand();
    /* expert 7 gets no token; token 0 is routed to expert 3 only through
     * explicit ids below */
    for (int m = 0; m < M; m++) logits[m * E + 7] = -30;
    int worst_i = -1;
    double worst = 0;
    if (moe) {
        CHECK(!qp_moe_forward(moe, x, M, logits, y), "%s", qp_last_error(ctx));
        CHECK(!qp_moe_route(ctx, logits, M, E, &o, ids, wt), "%s", qp_last_error(ctx));
        double xr[64], yr[64], b[64];
        for (int m = 0; m < M; m++) {
            for (int t2 = 0; t2 < H; t2++) xr[t2] = tu_get(dt, x, (size_t)m * H + t2);
            model_row(&L, d13, d2, xr, ids + m * k, wt + m * k, k, 0, yr, b);
            for (int n = 0; n < H; n++) {
                double r = fabs(tu_get(dt, y, (size_t)m * H + n) - yr[n]) / b[n];
                if (!(r <= worst)) { worst = r; worst_i = m * H + n; }
            }
        }
        CHECK(worst <= 1.0, "%s unquantized MoE: |y - y64| is %.3g x the bound at %d", qp_dtype_name(dt), worst, worst_i);
        /* explicit routing: every token to expert 3 with weight 1 equals k = 1 */
        for (int m = 0; m < M * k; m++) { ids[m] = 3; wt[m] = m % k ? 0.0f : 1.0f; }
        uint16_t *y2 = malloc(es * M * H);
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y2), "%s", qp_last_error(ctx));
        double xr2[64], yr2[64], b2[64];
        double w2worst = 0;
        for (int m = 0; m < M; m++) {
            for (int t2 = 0; t2 < H; t2++) xr2[t2] = tu_get(dt, x, (size_t)m * H + t2);
            model_row(&L, d13, d2, xr2, ids + m * k, wt + m * k, k, 0, yr2, b2);
            for (int n = 0; n < H; n++) w2worst = fmax(w2worst, fabs(tu_get(dt, y2, (size_t)m * H + n) - yr2[n]) / b2[n]);
        }
        CHECK(w2worst <= 1.0, "one expert for every token: %.3g x the bound", w2worst);
        /* bad ids are an error naming them */
        ids[5] = E;
        CHECK(qp_moe_forward_topk(moe, x, M, ids, wt, y2) == QP_ERR_INVALID_ARGUMENT &&
                  strstr(qp_last_error(ctx), "topk_ids[2][1] = 8"),
              "bad id: %s", qp_last_error(ctx));
        free(y2);
    }
    printf("moe unquantized %s: worst %.3f of the derived bound\n", qp_dtype_name(dt), worst);
    qp_moe_destroy(moe);
    free(w13); free(w2); free(x); free(y); free(d13); free(d2); free(logits); free(wt); free(ids);
    free(L.w13); free(L.w2);
    return 0;
}

/* int8 experts, per-channel weights, dynamic per-token activations: an
 * independent integer model of the same steps, bit for bit. */
static void run_int8(void) {
    int E = 4, H = 64, I = 32, M = 5, k = 2;
    qp_dtype dt = QP_DTYPE_BF16;
    int8_t *w13 = malloc((size_t)E * 2 * I * H), *w2 = malloc((size_t)E * H * I);
    float *s13 = malloc(sizeof(float) * E * 2 * I), *s2 = malloc(sizeof(float) * E * H);
    for (int i = 0; i < E * 2 * I * H; i++) w13[i] = (int8_t)(urand() * 255 - 127);
    for (int i = 0; i < E * H * I; i++) w2[i] = (int8_t)(urand() * 255 - 127);
    for (int i = 0; i < E * 2 * I; i++) s13[i] = (float)(0.5 + urand()) / 127 / 8;
    for (int i = 0; i < E * H; i++) s2[i] = (float)(0.5 + urand()) / 127 / 4;
    uint16_t x[5 * 64], y[5 * 64];
    for (int i = 0; i < M * H; i++) tu_put(dt, x, (size_t)i, (float)nrand());
    qp_tensor t[4] = {{"w13_weight", QP_DTYPE_I8, 3, {E, 2 * I, H}, w13}, {"w2_weight", QP_DTYPE_I8, 3, {E, H, I}, w2},
                      {"w13_weight_scale", QP_DTYPE_F32, 3, {E, 2 * I, 1}, s13}, {"w2_weight_scale", QP_DTYPE_F32, 2, {E, H}, s2}};
    qp_config *cfg = tu_load(ctx, "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
                                  "\"global_quant_config\":{\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":0,"
                                  "\"symmetric\":true,\"is_dynamic\":false},\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":"
                                  "\"per_channel\",\"ch_axis\":1,\"symmetric\":true,\"is_dynamic\":true},\"output_tensors\":null,"
                                  "\"bias\":null},\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}");
    qp_scheme s;
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &s) &&
              !strcmp(s.scheme_class, "QuarkW8A8Int8MoEMethod"),
          "%s", qp_last_error(ctx));
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, 4, &o, &moe), "%s", qp_last_error(ctx));
    int32_t ids[10] = {0, 1, 2, 2, 3, 0, 1, 1, 0, 3};
    float wt[10];
    for (int i = 0; i < 10; i++) wt[i] = (float)urand();
    if (moe) CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y), "%s", qp_last_error(ctx));
    /* the model: quantize per token with the public quantizer, exact dots */
    float xf[5 * 64], c2f[10 * 32];
    int8_t xq[5 * 64], hq[10 * 32];
    float xs[5], hs[10];
    for (int i = 0; i < M * H; i++) xf[i] = (float)tu_get(dt, x, (size_t)i);
    qp_quant_int8_dynamic(ctx, xf, (size_t)M, (size_t)H, 1, xq, xs, NULL);
    for (int tk = 0; tk < M * k; tk++) {
        int m = tk / k, e = ids[tk];
        uint16_t c1[64];
        for (int n = 0; n < 2 * I; n++) {
            int32_t acc = 0;
            for (int h = 0; h < H; h++) acc += xq[m * H + h] * w13[((size_t)e * 2 * I + n) * H + h];
            tu_put(dt, c1, (size_t)n, (float)acc * xs[m] * s13[e * 2 * I + n]);
        }
        for (int i = 0; i < I; i++) {
            float g = (float)tu_get(dt, c1, (size_t)i), u = (float)tu_get(dt, c1, (size_t)(I + i));
            uint16_t sb;
            tu_put(dt, &sb, 0, (float)((double)g / (1.0 + exp(-(double)g)))); /* the fp32 silu, correctly rounded */
            uint16_t hb;
            tu_put(dt, &hb, 0, (float)tu_get(dt, &sb, 0) * u);
            c2f[tk * I + i] = (float)tu_get(dt, &hb, 0);
        }
    }
    qp_quant_int8_dynamic(ctx, c2f, (size_t)(M * k), (size_t)I, 1, hq, hs, NULL);
    size_t differ = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < H; n++) {
            float sum = 0;
            for (int j = 0; j < k; j++) {
                int tk = m * k + j, e = ids[tk];
                int32_t acc = 0;
                for (int i = 0; i < I; i++) acc += hq[tk * I + i] * w2[((size_t)e * H + n) * I + i];
                uint16_t c3, sb;
                tu_put(dt, &c3, 0, (float)acc * hs[tk] * s2[e * H + n] * wt[tk]);
                tu_put(dt, &sb, 0, sum + (float)tu_get(dt, &c3, 0));
                sum = (float)tu_get(dt, &sb, 0);
            }
            uint16_t want;
            tu_put(dt, &want, 0, sum);
            differ += want != y[m * H + n];
        }
    CHECK(differ == 0, "int8 MoE: %zu of %d outputs differ from the integer model", differ, M * H);
    printf("moe int8 (per-channel, dynamic per-token, bf16): %d outputs bit for bit\n", M * H - (int)differ);
    qp_moe_destroy(moe);
    qp_config_destroy(cfg);
    free(w13); free(w2); free(s13); free(s2);
}

/* fp8 per-tensor experts with static activations: w13 shard scales that
 * differ are requantized to the larger one; the input scales' max over
 * experts is used. Against the fp64 model on the dequantized weights,
 * with each activation's fp8 step (2^-4 relative + the subnormal step)
 * added to the bound. */
static void run_fp8_static(void) {
    layer L;
    layer_make(&L, 4, 64, 32, QP_DTYPE_F16);
    int E = L.E, H = L.H, I = L.I, M = 6, k = 2;
    uint8_t *w13 = malloc((size_t)E * 2 * I * H), *w2 = malloc((size_t)E * H * I);
    float s13[8], s2[4], in13[4], in2[4];
    for (int e = 0; e < E; e++) {
        for (int sh = 0; sh < 2; sh++) {
            float amax = 0;
            for (int r = 0; r < I; r++)
                for (int h = 0; h < H; h++) amax = fmaxf(amax, fabsf(L.w13[((size_t)e * 2 * I + sh * I + r) * H + h]));
            s13[2 * e + sh] = amax / 448 * (sh ? 1.5f : 1.0f); /* shards differ */
            for (int r = 0; r < I; r++)
                for (int h = 0; h < H; h++) {
                    size_t i = ((size_t)e * 2 * I + sh * I + r) * H + h;
                    w13[i] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, L.w13[i] / s13[2 * e + sh]);
                }
        }
        float amax = 0;
        for (int i = 0; i < H * I; i++) amax = fmaxf(amax, fabsf(L.w2[(size_t)e * H * I + i]));
        s2[e] = amax / 448;
        for (int i = 0; i < H * I; i++) w2[(size_t)e * H * I + i] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, L.w2[(size_t)e * H * I + i] / s2[e]);
        in13[e] = (float)(4.0 / 448 * (1 + 0.1 * e));
        in2[e] = (float)(8.0 / 448 * (1 + 0.1 * e));
    }
    qp_tensor t[6] = {{"w13_weight", QP_DTYPE_F8_E4M3FN, 3, {E, 2 * I, H}, w13}, {"w2_weight", QP_DTYPE_F8_E4M3FN, 3, {E, H, I}, w2},
                      {"w13_weight_scale", QP_DTYPE_F32, 2, {E, 2}, s13}, {"w2_weight_scale", QP_DTYPE_F32, 1, {E}, s2},
                      {"w13_input_scale", QP_DTYPE_F32, 1, {E}, in13}, {"w2_input_scale", QP_DTYPE_F32, 1, {E}, in2}};
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_W8A8_FP8;
    snprintf(s.activation_key, sizeof s.activation_key, "kFp8StaticTensorSym");
    snprintf(s.weight_key, sizeof s.weight_key, "kFp8StaticTensorSym");
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = k;
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, 6, &o, &moe), "%s", qp_last_error(ctx));
    /* the model's weights: the requantized w13 (vLLM's process-after-loading) */
    double *d13 = malloc(sizeof(double) * E * 2 * I * H), *d2 = malloc(sizeof(double) * E * H * I);
    for (int e = 0; e < E; e++) {
        uint8_t *we = malloc((size_t)2 * I * H);
        memcpy(we, w13 + (size_t)e * 2 * I * H, (size_t)2 * I * H);
        int sr[2] = {I, I};
        float smax;
        qp_fp8_requantize_max_scale(ctx, we, H, sr, 2, s13 + 2 * e, &smax);
        for (int i = 0; i < 2 * I * H; i++) d13[(size_t)e * 2 * I * H + i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, we[i]) * (double)smax;
        for (int i = 0; i < H * I; i++) d2[(size_t)e * H * I + i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, w2[(size_t)e * H * I + i]) * (double)s2[e];
        free(we);
    }
    uint16_t x[6 * 64], y[6 * 64];
    for (int i = 0; i < M * H; i++) tu_put(QP_DTYPE_F16, x, (size_t)i, (float)nrand());
    int32_t ids[12];
    float wt[12];
    for (int i = 0; i < M * k; i++) { ids[i] = (int)(urand() * E); wt[i] = (float)urand(); }
    double worst = 0;
    if (moe) {
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y), "%s", qp_last_error(ctx));
        double xr[64], yr[64], b[64];
        for (int m = 0; m < M; m++) {
            for (int h = 0; h < H; h++) xr[h] = tu_get(QP_DTYPE_F16, x, (size_t)m * H + h);
            /* one fp8 step per activation: 2^-4 relative (e4m3 half ulp)
             * plus the subnormal step at the largest input scale */
            model_row(&L, d13, d2, xr, ids + m * k, wt + m * k, k, 0x1p-4 + 0x1p-9, yr, b);
            for (int n = 0; n < H; n++) worst = fmax(worst, fabs(tu_get(QP_DTYPE_F16, y, (size_t)m * H + n) - yr[n]) / b[n]);
        }
        CHECK(worst <= 1.0, "fp8 static MoE: |y - y64| is %.3g x the bound", worst);
    }
    printf("moe fp8 static (shards requantized): worst %.3f of the bound\n", worst);
    qp_moe_destroy(moe);
    /* errors: a missing tensor, a wrong dtype, a wrong shape name the tensor */
    t[4].name = "w13_input_scalez";
    CHECK(qp_moe_create(cpu, &s, E, H, I, t, 6, &o, &moe) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "missing MoE tensor 'w13_input_scale'"),
          "missing: %s", qp_last_error(ctx));
    t[4].name = "w13_input_scale";
    t[1].dtype = QP_DTYPE_I8;
    CHECK(qp_moe_create(cpu, &s, E, H, I, t, 6, &o, &moe) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "'w2_weight' must be fp8_e4m3fn [E, H, I], got int8"),
          "dtype: %s", qp_last_error(ctx));
    t[1].dtype = QP_DTYPE_F8_E4M3FN;
    CHECK(qp_moe_create(cpu, &s, E, H + 1, I, t, 6, &o, &moe) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "'w13_weight'"),
          "shape: %s", qp_last_error(ctx));
    qp_scheme w4;
    memset(&w4, 0, sizeof w4);
    w4.kind = QP_SCHEME_W4A8_INT4_FP8; /* QuarkW4A8Fp8MoEMethod: ROCm AITER only */
    CHECK(qp_moe_create(cpu, &w4, E, H, I, t, 6, &o, &moe) == QP_ERR_UNSUPPORTED &&
              strstr(qp_last_error(ctx), "AITER"),
          "w4a8 int4-fp8: %s", qp_last_error(ctx));
    free(w13); free(w2); free(d13); free(d2); free(L.w13); free(L.w2);
}

/* Expert parallelism: three ranks own experts 0-2, 3-5, 6-7 of 8; with
 * top-1 each token's output comes from one rank, bit for bit the full
 * layer's, and the others give +0. */
static void run_ep(void) {
    int E = 8, H = 32, I = 16, M = 9;
    qp_dtype dt = QP_DTYPE_F16;
    uint16_t *w13 = malloc(2 * (size_t)E * 2 * I * H), *w2 = malloc(2 * (size_t)E * H * I);
    for (size_t i = 0; i < (size_t)E * 2 * I * H; i++) tu_put(dt, w13, i, (float)(nrand() / sqrt(H)));
    for (size_t i = 0; i < (size_t)E * H * I; i++) tu_put(dt, w2, i, (float)(nrand() / sqrt(I)));
    uint16_t x[9 * 32], yf[9 * 32], yr[9 * 32];
    float logits[9 * 8];
    for (int i = 0; i < M * H; i++) tu_put(dt, x, (size_t)i, (float)nrand());
    for (int i = 0; i < M * E; i++) logits[i] = (float)nrand();
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_UNQUANTIZED;
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = 1;
    qp_tensor t[2] = {{"w13_weight", dt, 3, {E, 2 * I, H}, w13}, {"w2_weight", dt, 3, {E, H, I}, w2}};
    qp_moe *full = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, 2, &o, &full) && !qp_moe_forward(full, x, M, logits, yf), "%s", qp_last_error(ctx));
    int32_t ids[9];
    float w[9];
    qp_moe_route(ctx, logits, M, E, &o, ids, w);
    int first[3] = {0, 3, 6}, cnt[3] = {3, 3, 2};
    size_t wrong = 0;
    for (int r = 0; r < 3; r++) {
        qp_tensor tr[2] = {{"w13_weight", dt, 3, {cnt[r], 2 * I, H}, w13 + (size_t)first[r] * 2 * I * H},
                           {"w2_weight", dt, 3, {cnt[r], H, I}, w2 + (size_t)first[r] * H * I}};
        qp_moe_options orr = o;
        orr.global_num_experts = E;
        orr.expert_offset = first[r];
        qp_moe *part = NULL;
        CHECK(!qp_moe_create(cpu, &s, cnt[r], H, I, tr, 2, &orr, &part) && !qp_moe_forward(part, x, M, logits, yr), "%s",
              qp_last_error(ctx));
        for (int mm = 0; mm < M; mm++) {
            bool mine = ids[mm] >= first[r] && ids[mm] < first[r] + cnt[r];
            for (int n = 0; n < H; n++)
                wrong += mine ? yr[mm * H + n] != yf[mm * H + n] : yr[mm * H + n] != 0;
        }
        qp_moe_destroy(part);
    }
    CHECK(wrong == 0, "expert parallel: %zu outputs differ from the full layer's (or are not +0)", wrong);
    qp_moe_options bad = o;
    bad.global_num_experts = E;
    bad.expert_offset = 6;
    qp_moe *p = NULL;
    CHECK(qp_moe_create(cpu, &s, 3, H, I, t, 2, &bad, &p) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "experts 6 .. 8 are not within the 8 experts"),
          "offset past the end: %s", qp_last_error(ctx));
    qp_moe_destroy(full);
    free(w13);
    free(w2);
}

/* ---- 0.34.0's new MoE methods against an independent model ---------- */

/* The steps of docs/moe.md with caller-made GEMM outputs: g13(tk, n) and
 * g2(tk, n, h) give the fp32 GEMM values before the routing weight (the
 * model's own dot products); cache1, silu_and_mul, cache3 and the k-sum
 * rounded as vLLM's fused_experts rounds them. */
typedef float (*gemm13_fn)(void *ctx, int tk, int n);
typedef float (*gemm2_fn)(void *ctx, int tk, int n, const float *h);

static void model_moe(qp_dtype dt, int M, int k, int H, int I, const float *wt, gemm13_fn g13, gemm2_fn g2, void *c,
                      float *h_out, uint16_t *y) {
    uint16_t *c1 = malloc(2 * (size_t)(2 * I));
    for (int tk = 0; tk < M * k; tk++) {
        for (int n = 0; n < 2 * I; n++) tu_put(dt, c1, (size_t)n, g13(c, tk, n));
        for (int i = 0; i < I; i++) {
            float g = (float)tu_get(dt, c1, (size_t)i), u = (float)tu_get(dt, c1, (size_t)(I + i));
            uint16_t sb, hb;
            tu_put(dt, &sb, 0, (float)((double)g / (1.0 + exp(-(double)g))));
            tu_put(dt, &hb, 0, (float)tu_get(dt, &sb, 0) * u);
            h_out[(size_t)tk * I + i] = (float)tu_get(dt, &hb, 0);
        }
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < H; n++) {
            float sum = 0;
            for (int j = 0; j < k; j++) {
                int tk = m * k + j;
                uint16_t c3, sb;
                tu_put(dt, &c3, 0, g2(c, tk, n, h_out + (size_t)tk * I) * wt[tk]);
                tu_put(dt, &sb, 0, sum + (float)tu_get(dt, &c3, 0));
                sum = (float)tu_get(dt, &sb, 0);
            }
            tu_put(dt, y, (size_t)m * H + n, sum);
        }
    free(c1);
}

/* W4A16 (QuarkW4A16Int4MoEMethod): the model dequantizes each weight as
 * the wna16 kernels do, rnd((c - z) * s) with s in the params dtype (z = 8
 * for the symmetric uint4b8 codes), and sums x * W in double rounded once. */
typedef struct w4m {
    qp_dtype dt;
    int H, I, k;
    const double *x, *w13, *w2; /* x [M][H]; dequantized W [E][2I][H], [E][H][I] */
    const int32_t *ids;
} w4m;

static float w4_g13(void *c, int tk, int n) {
    w4m *q = c;
    double acc = 0;
    for (int h = 0; h < q->H; h++) acc += q->x[(size_t)(tk / q->k) * q->H + h] * q->w13[((size_t)q->ids[tk] * 2 * q->I + n) * q->H + h];
    return (float)acc;
}
static float w4_g2(void *c, int tk, int n, const float *h) {
    w4m *q = c;
    double acc = 0;
    for (int i = 0; i < q->I; i++) acc += (double)h[i] * q->w2[((size_t)q->ids[tk] * q->H + n) * q->I + i];
    return (float)acc;
}

static void run_w4a16(qp_dtype dt, bool sym, int group) {
    int E = 4, H = 256, I = 64, M = 5, k = 2;
    char js[900];
    snprintf(js, sizeof js,
             "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
             "\"global_quant_config\":{\"weight\":{\"dtype\":\"%s\",\"qscheme\":\"per_group\",\"group_size\":%d,"
             "\"symmetric\":%s,\"is_dynamic\":false},\"input_tensors\":null,\"output_tensors\":null,\"bias\":null},"
             "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
             sym ? "int4" : "uint4", group, sym ? "true" : "false");
    qp_config *cfg = tu_load(ctx, js);
    qp_scheme s;
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &s) &&
              !strcmp(s.scheme_class, "QuarkW4A16Int4MoEMethod"), "w4a16: %s", qp_last_error(ctx));
    /* vLLM halves the group until it divides H and I (the checkpoint's
     * scales are repeated); the test's scales are per effective group */
    int g = group;
    while (H % g || I % g) g /= 2;
    size_t r13 = 2 * (size_t)I, r2 = (size_t)H;
    uint8_t *w13 = calloc((size_t)E * r13 * H / 2, 1), *w2 = calloc((size_t)E * r2 * I / 2, 1);
    uint8_t *z13 = calloc((size_t)E * r13 / 2 * (H / g), 1), *z2 = calloc((size_t)E * r2 / 2 * (I / g), 1);
    uint16_t *s13 = malloc(2 * (size_t)E * r13 * (H / g)), *s2 = malloc(2 * (size_t)E * r2 * (I / g));
    double *d13 = malloc(sizeof(double) * E * r13 * H), *d2 = malloc(sizeof(double) * E * r2 * I);
    for (int pass = 0; pass < 2; pass++) {
        size_t rows = pass ? r2 : r13, K = pass ? (size_t)I : (size_t)H, G = K / (size_t)g;
        uint8_t *w = pass ? w2 : w13, *z = pass ? z2 : z13;
        uint16_t *sc = pass ? s2 : s13;
        double *d = pass ? d2 : d13;
        for (size_t r = 0; r < (size_t)E * rows; r++) {
            for (size_t gi = 0; gi < G; gi++) {
                tu_put(dt, sc, r * G + gi, (float)((0.5 + urand()) / 8 / sqrt((double)K)));
                int zz = (int)(urand() * 16);
                if (!sym) z[(r / 2) * G + gi] |= (uint8_t)(zz << (4 * (r % 2)));
            }
            for (size_t kk = 0; kk < K; kk++) {
                int c = (int)(urand() * 16);
                w[r * K / 2 + kk / 2] |= (uint8_t)(c << (4 * (kk % 2)));
                int zz = sym ? 8 : (z[(r / 2) * G + kk / (size_t)g] >> (4 * (r % 2))) & 15;
                /* the wna16 dequantization: one rounding of (c - z) * s */
                uint16_t wb;
                tu_put(dt, &wb, 0, (float)(c - zz) * (float)tu_get(dt, sc, r * G + kk / (size_t)g));
                d[r * K + kk] = tu_get(dt, &wb, 0);
            }
        }
    }
    qp_tensor t[6] = {{"w13_weight", QP_DTYPE_U8, 3, {E, (int64_t)r13, H / 2}, w13},
                      {"w2_weight", QP_DTYPE_U8, 3, {E, (int64_t)r2, I / 2}, w2},
                      {"w13_weight_scale", dt, 3, {E, (int64_t)r13, H / g}, s13},
                      {"w2_weight_scale", dt, 3, {E, (int64_t)r2, I / g}, s2},
                      {"w13_weight_zero_point", QP_DTYPE_U8, 3, {E, (int64_t)r13 / 2, H / g}, z13},
                      {"w2_weight_zero_point", QP_DTYPE_U8, 3, {E, (int64_t)r2 / 2, I / g}, z2}};
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    o.layer = "model.layers.0.mlp.experts";
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, sym ? 4 : 6, &o, &moe), "w4a16: %s", qp_last_error(ctx));
    uint16_t *x = malloc(2 * (size_t)M * H), *y = malloc(2 * (size_t)M * H), *want = malloc(2 * (size_t)M * H);
    double *xd = malloc(sizeof(double) * M * H);
    float *hbuf = malloc(sizeof(float) * M * k * I), wt[10];
    int32_t ids[10] = {0, 1, 2, 3, 3, 0, 1, 1, 2, 0};
    for (int i = 0; i < M * H; i++) { tu_put(dt, x, (size_t)i, (float)nrand()); xd[i] = tu_get(dt, x, (size_t)i); }
    for (int i = 0; i < M * k; i++) wt[i] = (float)urand();
    size_t differ = 0;
    if (moe) {
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y), "%s", qp_last_error(ctx));
        w4m q = {dt, H, I, k, xd, d13, d2, ids};
        model_moe(dt, M, k, H, I, wt, w4_g13, w4_g2, &q, hbuf, want);
        for (int i = 0; i < M * H; i++) differ += want[i] != y[i];
    }
    CHECK(differ == 0, "w4a16 %s %s g%d MoE: %zu of %d outputs differ from the model", sym ? "int4" : "uint4",
          qp_dtype_name(dt), group, differ, M * H);
    printf("moe w4a16 %s g%d (%s): %d outputs bit for bit\n", sym ? "int4" : "uint4", group, qp_dtype_name(dt),
           M * H - (int)differ);
    /* a zero point tensor of the wrong shape names the tensor */
    if (!sym) {
        qp_moe *bad = NULL;
        t[4].shape[1] = (int64_t)r13;
        CHECK(qp_moe_create(cpu, &s, E, H, I, t, 6, &o, &bad) == QP_ERR_INVALID_ARGUMENT &&
                  strstr(qp_last_error(ctx), "w13_weight_zero_point"), "bad zero points: %s", qp_last_error(ctx));
        qp_moe_destroy(bad);
    }
    qp_moe_destroy(moe);
    qp_config_destroy(cfg);
    free(w13); free(w2); free(z13); free(z2); free(s13); free(s2); free(d13); free(d2);
    free(x); free(y); free(want); free(xd); free(hbuf);
}

/* FP8 per-block experts (QuarkW8A8Fp8MoEMethod, per_block): the model
 * quantizes per token and group of 128 with the public quantizer and sums
 * each 128-block of e4m3 products in double, times both scales. */
typedef struct fbm {
    int H, I, k;
    const uint8_t *xq, *w13, *w2;
    const float *xs, *b13, *b2; /* xs [M][H/128]; weight scales [E][rows/128][K/128] */
    const int32_t *ids;
    qp_context *ctx;
} fbm;

static float fb_dot(const uint8_t *a, const float *as, const uint8_t *w, const float *ws, int K) {
    double sum = 0;
    for (int g = 0; g < K / 128; g++) {
        double part = 0;
        for (int h = g * 128; h < (g + 1) * 128; h++)
            part += (double)qp_format_decode(QP_DTYPE_F8_E4M3FN, a[h]) * qp_format_decode(QP_DTYPE_F8_E4M3FN, w[h]);
        sum += (double)(float)part * as[g] * ws[g];
    }
    return (float)sum;
}
static float fb_g13(void *c, int tk, int n) {
    fbm *q = c;
    int e = q->ids[tk], m = tk / q->k, kb = q->H / 128;
    return fb_dot(q->xq + (size_t)m * q->H, q->xs + (size_t)m * kb, q->w13 + ((size_t)e * 2 * q->I + n) * q->H,
                  q->b13 + ((size_t)e * (2 * q->I / 128) + n / 128) * kb, q->H);
}
static float fb_g2(void *c, int tk, int n, const float *h) {
    fbm *q = c;
    int e = q->ids[tk], kb = q->I / 128;
    uint8_t hq[256];
    float hs[2];
    qp_quant_fp8_group(q->ctx, h, 1, (size_t)q->I, 128, 0, hq, hs);
    return fb_dot(hq, hs, q->w2 + ((size_t)e * q->H + n) * q->I, q->b2 + ((size_t)e * (q->H / 128) + n / 128) * kb, q->I);
}

static void run_fp8_block(qp_dtype dt) {
    int E = 3, H = 256, I = 128, M = 4, k = 2;
    qp_config *cfg = tu_load(ctx, "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
                                  "\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\","
                                  "\"block_size\":[128,128],\"symmetric\":true,\"is_dynamic\":false},\"input_tensors\":{"
                                  "\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":true,"
                                  "\"is_dynamic\":true},\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},"
                                  "\"layer_type_quant_config\":{},\"exclude\":[]}");
    qp_scheme s;
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &s) &&
              s.kind == QP_SCHEME_W8A8_FP8_BLOCK, "fp8 block: %s", qp_last_error(ctx));
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    uint8_t *w13 = malloc(n13), *w2 = malloc(n2);
    for (size_t i = 0; i < n13; i++) w13[i] = qp_format_encode(QP_DTYPE_F8_E4M3FN, (float)(nrand() * 64));
    for (size_t i = 0; i < n2; i++) w2[i] = qp_format_encode(QP_DTYPE_F8_E4M3FN, (float)(nrand() * 64));
    int nb13 = E * (2 * I / 128) * (H / 128), nb2 = E * (H / 128) * (I / 128);
    float *b13 = malloc(sizeof(float) * nb13), *b2 = malloc(sizeof(float) * nb2);
    for (int i = 0; i < nb13; i++) b13[i] = (float)((0.5 + urand()) / 64 / 16);
    for (int i = 0; i < nb2; i++) b2[i] = (float)((0.5 + urand()) / 64 / 11);
    qp_tensor t[4] = {{"w13_weight", QP_DTYPE_F8_E4M3FN, 3, {E, 2 * I, H}, w13},
                      {"w2_weight", QP_DTYPE_F8_E4M3FN, 3, {E, H, I}, w2},
                      {"w13_weight_scale", QP_DTYPE_F32, 3, {E, 2 * I / 128, H / 128}, b13},
                      {"w2_weight_scale", QP_DTYPE_F32, 3, {E, H / 128, I / 128}, b2}};
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = dt;
    o.top_k = k;
    o.layer = "model.layers.0.mlp.experts";
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &s, E, H, I, t, 4, &o, &moe), "fp8 block: %s", qp_last_error(ctx));
    uint16_t x[4 * 256], y[4 * 256], want[4 * 256];
    float xf[4 * 256], xs[4 * 2], hbuf[8 * 128], wt[8];
    uint8_t xq[4 * 256];
    int32_t ids[8] = {0, 1, 2, 2, 1, 0, 0, 2};
    for (int i = 0; i < M * H; i++) { tu_put(dt, x, (size_t)i, (float)nrand()); xf[i] = (float)tu_get(dt, x, (size_t)i); }
    for (int i = 0; i < M * k; i++) wt[i] = (float)urand();
    qp_quant_fp8_group(ctx, xf, (size_t)M, (size_t)H, 128, 0, xq, xs);
    size_t differ = 0;
    if (moe) {
        CHECK(!qp_moe_forward_topk(moe, x, M, ids, wt, y), "%s", qp_last_error(ctx));
        fbm q = {H, I, k, xq, w13, w2, xs, b13, b2, ids, ctx};
        model_moe(dt, M, k, H, I, wt, fb_g13, fb_g2, &q, hbuf, want);
        for (int i = 0; i < M * H; i++) differ += want[i] != y[i];
    }
    CHECK(differ == 0, "fp8 per-block %s MoE: %zu of %d outputs differ from the model", qp_dtype_name(dt), differ, M * H);
    printf("moe fp8 per-block 128x128 (%s): %d outputs bit for bit\n", qp_dtype_name(dt), M * H - (int)differ);
    /* vLLM's block-shape rule and the shape of the scales */
    qp_moe *bad = NULL;
    t[2].shape[1] = 1;
    CHECK(qp_moe_create(cpu, &s, E, H, I, t, 4, &o, &bad) != QP_OK && strstr(qp_last_error(ctx), "w13_weight_scale"),
          "bad block scales: %s", qp_last_error(ctx));
    qp_moe_destroy(bad);
    bad = NULL;
    CHECK(qp_moe_create(cpu, &s, E, H, 96, t, 4, &o, &bad) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "I = 96"),
          "I = 96: %s", qp_last_error(ctx));
    qp_moe_destroy(bad);
    /* GPU backends refuse it with a reason, the reference runs it */
    qp_support_info si;
    CHECK(!qp_device_supports_moe(cpu, &s, &si) && si.level == QP_SUPPORT_NATIVE, "cpu support");
    qp_moe_destroy(moe);
    qp_config_destroy(cfg);
    free(w13); free(w2); free(b13); free(b2);
}

/* 0.34.0's refusals at binding time, before any tensor is read */
static void create_refusals(void) {
#define QCFG(W, I) "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"}," \
    "\"global_quant_config\":{\"weight\":" W ",\"input_tensors\":" I ",\"output_tensors\":null,\"bias\":null}," \
    "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}"
#define MXW(d) "{\"dtype\":\"" d "\",\"qscheme\":\"per_group\",\"group_size\":32,\"scale_format\":\"e8m0\",\"is_dynamic\":false}"
    static const struct { const char *cfg; int H, I; qp_status st; const char *msg; } t[] = {
        {QCFG(MXW("fp8_e4m3"), "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"is_dynamic\":true}"), 48,
         32, QP_ERR_VALUE,
         "Quark MXFP8 MoE requires hidden_size and intermediate_size_per_partition divisible by 32, got 48 and 32."},
        {QCFG(MXW("fp6_e3m2"), "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}"),
         64, 32, QP_ERR_NOT_IMPLEMENTED,
         "Currently there is no corresponding fused moe quant config configured in vLLM for OCP MX scheme "
         "w_mxfp6_e3m2_a_fp8. Please open an issue."},
        {QCFG("{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":false}", "null"), 48, 64,
         QP_ERR_UNSUPPORTED, "AssertionError: group_size >= 32"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        qp_config *cfg = tu_load(ctx, t[i].cfg);
        qp_scheme s;
        CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &s), "case %zu: %s", i,
              qp_last_error(ctx));
        qp_moe_options o;
        qp_moe_options_init(&o);
        o.top_k = 2;
        o.layer = "model.layers.0.mlp.experts";
        qp_moe *m = NULL;
        qp_status st = cfg ? qp_moe_create(cpu, &s, 4, t[i].H, t[i].I, NULL, 0, &o, &m) : QP_OK;
        CHECK(st == t[i].st && strstr(qp_last_error(ctx), t[i].msg), "case %zu: %s: %s", i, qp_status_str(st),
              qp_last_error(ctx));
        qp_moe_destroy(m);
        qp_config_destroy(cfg);
    }
}

int main(void) {
    if (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu)) return 1;
    test_route();
    run_unquantized(QP_DTYPE_F16);
    run_unquantized(QP_DTYPE_BF16);
    run_int8();
    run_fp8_static();
    run_ep();
    run_w4a16(QP_DTYPE_F16, false, 128);
    run_w4a16(QP_DTYPE_BF16, false, 128);
    run_w4a16(QP_DTYPE_F16, true, 32);
    run_w4a16(QP_DTYPE_BF16, true, 128);
    run_w4a16(QP_DTYPE_F16, false, 256); /* halved to 64 to divide I = 64 */
    run_fp8_block(QP_DTYPE_F16);
    run_fp8_block(QP_DTYPE_BF16);
    create_refusals();
    qp_context_destroy(ctx);
    return tu_finish("moe");
}
