/* What examples/embed_vulkan.c, embed_opencl.c and embed_cuda.c share: a
 * decode step of an engine -- 32 W8A8-INT8 linear layers chained (each
 * reads the previous one's output) and one int8 MoE block -- built on any
 * qport device, and the same step on the cpu reference to check against.
 * The integer scheme makes every backend's result bit-exact, so the check
 * is equality. Header-only so each example stays one file plus this. */
#ifndef QP_EMBED_COMMON_H
#define QP_EMBED_COMMON_H

#include <qport.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EMB_LAYERS = 32, EMB_H = 256, EMB_M = 4, EMB_E = 8, EMB_I = 128, EMB_TOPK = 2 };

/* Quark W8A8-INT8: per-channel weights, dynamic per-token activations. */
static const char emb_config[] =
    "{\"quant_method\": \"quark\", \"export\": {\"kv_cache_group\": [], \"pack_method\": \"reorder\"},"
    " \"global_quant_config\": {"
    "\"weight\": {\"dtype\": \"int8\", \"qscheme\": \"per_channel\", \"ch_axis\": 0, \"symmetric\": true,"
    " \"is_dynamic\": false},"
    "\"input_tensors\": {\"dtype\": \"int8\", \"qscheme\": \"per_channel\", \"ch_axis\": 1, \"symmetric\": true,"
    " \"is_dynamic\": true}, \"output_tensors\": null, \"bias\": null}, \"exclude\": []}";

typedef struct emb_model {
    qp_context *ctx;
    qp_scheme lin, moe;
    qp_qweights *qw[EMB_LAYERS];
    /* the MoE block's stacked tensors (vLLM's FusedMoE names) */
    int8_t *w13, *w2;
    float *s13, *s2;
    qp_tensor moe_t[4];
    uint16_t x[EMB_M * EMB_H];           /* the step's input (fp16)     */
    int32_t ids[EMB_M * EMB_TOPK];
    float rw[EMB_M * EMB_TOPK];
} emb_model;

static uint32_t emb_rng = 20261203u;
static float emb_rand(void) { /* xorshift, uniform in [-1, 1) */
    emb_rng ^= emb_rng << 13; emb_rng ^= emb_rng >> 17; emb_rng ^= emb_rng << 5;
    return (float)(emb_rng >> 8) / (float)(1u << 23) - 1.0f;
}

static int emb_fail(qp_context *ctx, const char *what) {
    fprintf(stderr, "%s: %s\n", what, ctx ? qp_last_error(ctx) : "");
    return 1;
}

/* Quantizes expert e's [rows][cols] weight into codes and per-row scales. */
static int emb_quant_rows(emb_model *m, int rows, int cols, int8_t *codes, float *scales) {
    float *w = malloc(sizeof(float) * (size_t)rows * cols);
    if (!w) return 1;
    for (int i = 0; i < rows * cols; i++) w[i] = emb_rand() * 0.1f;
    qp_qweights *q;
    qp_tensor tw, ts;
    int rc = qp_quantize_weights(m->ctx, &m->lin, w, rows, cols, NULL, &q) || qp_qweights_find(q, "weight", &tw) ||
             qp_qweights_find(q, "weight_scale", &ts);
    if (!rc) {
        memcpy(codes, tw.data, (size_t)rows * cols);
        memcpy(scales, ts.data, sizeof(float) * (size_t)rows);
        qp_qweights_destroy(q);
    }
    free(w);
    return rc;
}

static int emb_model_build(emb_model *m, qp_context *ctx) {
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    qp_config *cfg;
    if (qp_config_load_buffer(ctx, "embed config", emb_config, sizeof emb_config - 1, &cfg) ||
        qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &m->lin) ||
        qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &m->moe))
        return emb_fail(ctx, "resolve");
    qp_config_destroy(cfg);
    float *w = malloc(sizeof(float) * EMB_H * EMB_H);
    if (!w) return 1;
    for (int l = 0; l < EMB_LAYERS; l++) {
        for (int i = 0; i < EMB_H * EMB_H; i++) w[i] = emb_rand() * 0.08f;
        if (qp_quantize_weights(ctx, &m->lin, w, EMB_H, EMB_H, NULL, &m->qw[l])) { free(w); return emb_fail(ctx, "quantize"); }
    }
    free(w);
    size_t n13 = (size_t)EMB_E * 2 * EMB_I * EMB_H, n2 = (size_t)EMB_E * EMB_H * EMB_I;
    m->w13 = malloc(n13); m->w2 = malloc(n2);
    m->s13 = malloc(sizeof(float) * EMB_E * 2 * EMB_I); m->s2 = malloc(sizeof(float) * EMB_E * EMB_H);
    if (!m->w13 || !m->w2 || !m->s13 || !m->s2) return 1;
    for (int e = 0; e < EMB_E; e++)
        if (emb_quant_rows(m, 2 * EMB_I, EMB_H, m->w13 + (size_t)e * 2 * EMB_I * EMB_H, m->s13 + e * 2 * EMB_I) ||
            emb_quant_rows(m, EMB_H, EMB_I, m->w2 + (size_t)e * EMB_H * EMB_I, m->s2 + e * EMB_H))
            return emb_fail(ctx, "quantize experts");
    m->moe_t[0] = (qp_tensor){"w13_weight", QP_DTYPE_I8, 3, {EMB_E, 2 * EMB_I, EMB_H}, m->w13};
    m->moe_t[1] = (qp_tensor){"w2_weight", QP_DTYPE_I8, 3, {EMB_E, EMB_H, EMB_I}, m->w2};
    m->moe_t[2] = (qp_tensor){"w13_weight_scale", QP_DTYPE_F32, 3, {EMB_E, 2 * EMB_I, 1}, m->s13};
    m->moe_t[3] = (qp_tensor){"w2_weight_scale", QP_DTYPE_F32, 3, {EMB_E, EMB_H, 1}, m->s2};
    for (int i = 0; i < EMB_M * EMB_H; i++) m->x[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, emb_rand());
    for (int t = 0; t < EMB_M; t++) { /* two distinct experts per token, weights summing to 1 */
        int a = (int)((emb_rand() + 1.0f) * 4.0f) % EMB_E, b = (a + 1 + t) % EMB_E;
        m->ids[2 * t] = a; m->ids[2 * t + 1] = b == a ? (a + 1) % EMB_E : b;
        m->rw[2 * t] = 0.625f; m->rw[2 * t + 1] = 0.375f;
    }
    return 0;
}

static void emb_model_free(emb_model *m) {
    for (int l = 0; l < EMB_LAYERS; l++) qp_qweights_destroy(m->qw[l]);
    free(m->w13); free(m->w2); free(m->s13); free(m->s2);
}

/* The step's layers on `dev`, scratch reserved for EMB_M rows. */
typedef struct emb_layers {
    qp_linear *lin[EMB_LAYERS];
    qp_moe *moe;
} emb_layers;

static int emb_layers_create(emb_model *m, qp_device *dev, emb_layers *L) {
    memset(L, 0, sizeof *L);
    for (int l = 0; l < EMB_LAYERS; l++) {
        qp_tensor t[8];
        size_t n = qp_qweights_count(m->qw[l]);
        for (size_t i = 0; i < n && i < 8; i++) qp_qweights_get(m->qw[l], i, &t[i]);
        qp_linear_options o;
        qp_linear_options_init(&o);
        o.max_m = EMB_M;
        if (qp_linear_create(dev, &m->lin, EMB_H, EMB_H, t, n, &o, &L->lin[l])) return emb_fail(m->ctx, "linear");
    }
    qp_moe_options mo;
    qp_moe_options_init(&mo);
    mo.top_k = EMB_TOPK;
    mo.max_m = EMB_M;
    mo.layer = "model.layers.0.mlp.experts";
    if (qp_moe_create(dev, &m->moe, EMB_E, EMB_H, EMB_I, m->moe_t, 4, &mo, &L->moe)) return emb_fail(m->ctx, "moe");
    return 0;
}

static void emb_layers_destroy(emb_layers *L) {
    for (int l = 0; l < EMB_LAYERS; l++) qp_linear_destroy(L->lin[l]);
    qp_moe_destroy(L->moe);
}

/* The step enqueued on device buffers: a -> b -> a ... through the 32
 * layers, then the MoE block from the last output into `out`. No wait. */
static int emb_step_enqueue(emb_model *m, emb_layers *L, qp_buffer *a, qp_buffer *b, qp_buffer *ids, qp_buffer *rw,
                            qp_buffer *out, const qp_enqueue_sync *last_sync) {
    qp_buffer *cur = a, *nxt = b;
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_enqueue(L->lin[l], cur, EMB_M, nxt, NULL)) return emb_fail(m->ctx, "qp_linear_enqueue");
        qp_buffer *t = cur; cur = nxt; nxt = t;
    }
    if (qp_moe_enqueue(L->moe, cur, EMB_M, ids, rw, out, last_sync)) return emb_fail(m->ctx, "qp_moe_enqueue");
    return 0;
}

/* The same step on the cpu reference, with host memory: y [EMB_M][EMB_H]. */
static int emb_reference(emb_model *m, qp_context *ctx, uint16_t *y) {
    qp_device *cpu;
    emb_layers L;
    if (qp_device_find(ctx, "cpu", &cpu) || emb_layers_create(m, cpu, &L)) return emb_fail(ctx, "cpu reference");
    static uint16_t a[EMB_M * EMB_H], b[EMB_M * EMB_H];
    memcpy(a, m->x, sizeof a);
    int rc = 0;
    for (int l = 0; l < EMB_LAYERS && !rc; l++) {
        rc = qp_linear_forward(L.lin[l], a, EMB_M, b) != QP_OK;
        memcpy(a, b, sizeof a);
    }
    if (!rc) rc = qp_moe_forward_topk(L.moe, a, EMB_M, m->ids, m->rw, y) != QP_OK;
    emb_layers_destroy(&L);
    return rc ? emb_fail(ctx, "cpu reference") : 0;
}

/* Equal bit for bit? Prints the first difference. */
static int emb_compare(const char *what, const uint16_t *got, const uint16_t *want) {
    for (int i = 0; i < EMB_M * EMB_H; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "%s: y[%d][%d] = 0x%04x, the cpu reference has 0x%04x\n", what, i / EMB_H, i % EMB_H,
                    got[i], want[i]);
            return 1;
        }
    return 0;
}

#endif
