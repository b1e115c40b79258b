/* qp_moe: a routed-experts layer from vLLM's FusedMoE parameters
 * (w13_weight [E, 2I, H], w2_weight [E, H, I], their scales), with each
 * Quark MoE method's process_weights_after_loading (shared/reference/
 * vllm-quark_moe.py): per-tensor fp8 and int8 w13 shards requantized to the larger
 * of the two scales, static input scales reduced to their max over the
 * experts. Runs on the cpu reference (cpu/ref_moe.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"
#include "registry.h"

struct qp_moe {
    qp_device *dev;
    qp_moe_options o;
    char layer[256];
    qp_moe_ref r;
};

static size_t count(const qp_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)(t->shape[d] > 0 ? t->shape[d] : 0);
    return n;
}

typedef struct mb {
    qp_context *ctx;
    const char *layer;
    const qp_tensor *t;
    size_t n;
} mb;

static const qp_tensor *get(const mb *b, const char *name) {
    for (size_t i = 0; i < b->n; i++)
        if (b->t[i].name && !strcmp(b->t[i].name, name)) return &b->t[i];
    return NULL;
}

static qp_status bad(const mb *b, const char *name, const char *fmt, const char *detail) {
    return qp_error_set(b->ctx, QP_ERR_INVALID_ARGUMENT, NULL, name, b->layer, fmt, detail);
}

/* Required tensor of dtype dt and `want` elements; `shape` says the rule. */
static qp_status need(const mb *b, const char *name, qp_dtype dt, size_t want, const char *shape, const qp_tensor **out) {
    const qp_tensor *t = get(b, name);
    char m[300];
    if (!t || !t->data) {
        snprintf(m, sizeof m, "missing MoE tensor '%s' %s", name, shape);
        return bad(b, name, "%s", m);
    }
    if (t->dtype != dt || count(t) != want) {
        snprintf(m, sizeof m, "MoE tensor '%s' must be %s %s, got %s of %zu elements", name, qp_dtype_name(dt), shape,
                 qp_dtype_name(t->dtype), count(t));
        return bad(b, name, "%s", m);
    }
    *out = t;
    return QP_OK;
}

/* A float tensor (f32/f16/bf16: vLLM copies them into fp32 parameters)
 * widened into `out`, with one of the accepted element counts. */
static qp_status scales(const mb *b, const char *name, const size_t *ok, int nok, float **out, size_t *n) {
    const qp_tensor *t = get(b, name);
    char m[300];
    if (!t || !t->data) {
        snprintf(m, sizeof m, "missing MoE tensor '%s'", name);
        return bad(b, name, "%s", m);
    }
    if (t->dtype != QP_DTYPE_F32 && t->dtype != QP_DTYPE_F16 && t->dtype != QP_DTYPE_BF16) {
        snprintf(m, sizeof m, "MoE tensor '%s' must be a float tensor (f32, f16 or bf16), got %s", name, qp_dtype_name(t->dtype));
        return bad(b, name, "%s", m);
    }
    *n = count(t);
    bool fits = false;
    for (int i = 0; i < nok; i++) fits |= *n == ok[i];
    if (!fits) {
        snprintf(m, sizeof m, "MoE tensor '%s' has %zu elements; expected %zu%s%s", name, *n, ok[0],
                 nok > 1 ? " or other per-expert shapes of its scheme" : "", "");
        return bad(b, name, "%s", m);
    }
    *out = malloc(sizeof(float) * (*n ? *n : 1));
    if (!*out) return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, name, b->layer, "out of memory");
    for (size_t i = 0; i < *n; i++) (*out)[i] = qp_ref_load(t->dtype, t->data, i);
    return QP_OK;
}

static float max_of(const float *v, size_t n) {
    float m = v[0];
    for (size_t i = 1; i < n; i++) m = fmaxf(m, v[i]);
    return m;
}

/* Weight scales as one per output row: per-channel as given, per-tensor
 * repeated; w13 per-tensor shards of fp8 and int8 requantized to the larger scale
 * (vLLM's Fp8 and Int8 MoE process_weights_after_loading). */
static qp_status row_scales(const mb *b, qp_moe_ref *r, int w13, bool fp8) {
    size_t E = (size_t)r->E, rows = w13 ? 2 * (size_t)r->I : (size_t)r->H, K = w13 ? (size_t)r->H : (size_t)r->I;
    const char *name = w13 ? "w13_weight_scale" : "w2_weight_scale";
    size_t ok[3] = {E * rows, w13 ? E * 2 : E, E};
    float *v = NULL, *out = malloc(sizeof(float) * E * rows);
    size_t n;
    qp_status st = out ? scales(b, name, ok, w13 ? 3 : 2, &v, &n) : QP_ERR_OUT_OF_MEMORY;
    if (st) { free(out); return st == QP_ERR_OUT_OF_MEMORY ? qp_error_set(b->ctx, st, NULL, name, b->layer, "out of memory") : st; }
    for (size_t e = 0; !st && e < E; e++) {
        if (n == E * rows) {
            memcpy(out + e * rows, v + e * rows, sizeof(float) * rows);
        } else if (n == E) {
            for (size_t i = 0; i < rows; i++) out[e * rows + i] = v[e];
        } else { /* [E, 2]: one scale per shard of w13 */
            float s[2] = {v[2 * e], v[2 * e + 1]}, smax = fmaxf(s[0], s[1]);
            if (s[0] != s[1] && fp8) {
                int sr[2] = {r->I, r->I};
                st = qp_fp8_requantize_max_scale(b->ctx, (uint8_t *)r->w13 + e * rows * K, (int)K, sr, 2, s, &smax);
            } else if (s[0] != s[1]) {
                /* QuarkW8A8Int8MoEMethod: per_tensor_dequantize (fp16: the
                 * int8 codes times the scale, rounded to fp16), then
                 * scaled_int8_quant at the max scale (static symmetric:
                 * rne(x / s), saturated) */
                int8_t *w = (int8_t *)r->w13 + e * rows * K;
                for (int sh = 0; sh < 2; sh++) {
                    if (s[sh] == smax) continue;
                    for (size_t i = (size_t)sh * (size_t)r->I * K; i < (size_t)(sh + 1) * (size_t)r->I * K; i++) {
                        float dq = qp_ref_round(QP_DTYPE_F16, (float)w[i] * s[sh]);
                        float v = nearbyintf(dq / smax);
                        w[i] = (int8_t)(v > 127.0f ? 127.0f : v < -128.0f ? -128.0f : v);
                    }
                }
            }
            for (size_t i = 0; i < rows; i++) out[e * rows + i] = smax;
        }
    }
    free(v);
    if (st) { free(out); return st; }
    if (w13) r->s13 = out; else r->s2 = out;
    return QP_OK;
}

static qp_status bind(const mb *b, const qp_scheme *s, qp_moe_ref *r) {
    size_t E = (size_t)r->E, H = (size_t)r->H, I = (size_t)r->I;
    const qp_tensor *w13, *w2;
    qp_status st;
    bool fp8 = s->kind == QP_SCHEME_W8A8_FP8, int8 = s->kind == QP_SCHEME_W8A8_INT8;
    qp_dtype wdt = fp8 ? QP_DTYPE_F8_E4M3FN : int8 ? QP_DTYPE_I8 : r->dt;
    if ((st = need(b, "w13_weight", wdt, E * 2 * I * H, "[E, 2I, H]", &w13)) ||
        (st = need(b, "w2_weight", wdt, E * H * I, "[E, H, I]", &w2)))
        return st;
    size_t ws = qp_ref_elem_size(r->dt);
    size_t eb = fp8 || int8 ? 1 : ws;
    r->w13 = malloc(E * 2 * I * H * eb);
    r->w2 = malloc(E * H * I * eb);
    if (!r->w13 || !r->w2) return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, b->layer, "out of memory");
    memcpy(r->w13, w13->data, E * 2 * I * H * eb);
    memcpy(r->w2, w2->data, E * H * I * eb);
    if (!fp8 && !int8) { r->act = QP_MOE_ACT_NONE; return QP_OK; }
    if ((st = row_scales(b, r, 1, fp8)) || (st = row_scales(b, r, 0, fp8))) return st;
    const char *ak = s->activation_key;
    bool stat = strstr(ak, "Static") != NULL;
    if (fp8) r->act = stat ? QP_MOE_ACT_FP8_STATIC : strstr(ak, "Token") ? QP_MOE_ACT_FP8_DYN_TOKEN : QP_MOE_ACT_FP8_DYN_TENSOR;
    else r->act = stat ? QP_MOE_ACT_INT8_STATIC : QP_MOE_ACT_INT8_DYN_TOKEN; /* scaled_int8_quant: per token */
    if (stat) { /* the max over experts (vLLM warns when they differ) */
        const char *names[2] = {"w13_input_scale", "w2_input_scale"};
        float *dst[2] = {&r->a13, &r->a2};
        for (int i = 0; i < 2; i++) {
            float *v;
            size_t n, ok[2] = {E, 1};
            if ((st = scales(b, names[i], ok, 2, &v, &n))) return st;
            *dst[i] = max_of(v, n);
            free(v);
            if (!(*dst[i] > 0.0f) || isinf(*dst[i]))
                return bad(b, names[i], "%s must be finite and > 0", names[i]);
        }
    }
    return QP_OK;
}

QP_API qp_status qp_moe_create(qp_device *dev, const qp_scheme *scheme, int E, int H, int I, const qp_tensor *tensors,
                               size_t n, const qp_moe_options *opts, qp_moe **out) {
    if (!dev || !scheme || !out || !opts) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_context *ctx = dev->ctx;
    const char *layer = opts->layer ? opts->layer : "";
    if (opts->struct_size < sizeof *opts)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer, "qp_moe_options: call qp_moe_options_init");
    if (E <= 0 || H <= 0 || I <= 0 || (n && !tensors))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer, "bad MoE shape E = %d, H = %d, I = %d", E, H, I);
    if (opts->act_dtype != QP_DTYPE_F16 && opts->act_dtype != QP_DTYPE_BF16)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer, "MoE activations must be fp16 or bf16, got %s",
                            qp_dtype_name(opts->act_dtype));
    int G = opts->global_num_experts ? opts->global_num_experts : E;
    if (opts->expert_offset < 0 || G < E || opts->expert_offset > G - E)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "expert_offset", layer,
                            "experts %d .. %d are not within the %d experts of the layer", opts->expert_offset,
                            opts->expert_offset + E - 1, G);
    if (opts->top_k <= 0 || opts->top_k > G)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "top_k", layer, "top_k %d must be in 1 .. %d experts", opts->top_k, G);
    if (strcmp(dev->backend->ops->name, "cpu"))
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer,
                            "MoE layers run on the cpu reference for now; %s has no fused MoE kernels yet",
                            dev->backend->ops->name);
    qp_scheme_kind k = scheme->kind;
    if (k != QP_SCHEME_UNQUANTIZED && k != QP_SCHEME_W8A8_FP8 && k != QP_SCHEME_W8A8_INT8)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer,
                            "the MoE reference runs unquantized, w8a8-fp8 and w8a8-int8 experts so far, not %s",
                            qp_scheme_kind_name(k));
    if ((k == QP_SCHEME_W8A8_FP8 || k == QP_SCHEME_W8A8_INT8) && !scheme->activation_key[0])
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer,
                            "the scheme has no activation key: resolve it with qp_config_resolve(..., QP_LAYER_MOE)");
    qp_moe *m = calloc(1, sizeof *m);
    if (!m) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory");
    m->dev = dev;
    m->o = *opts;
    snprintf(m->layer, sizeof m->layer, "%s", layer);
    m->o.layer = m->layer;
    m->o.e_score_correction_bias = NULL; /* copied below */
    m->r = (qp_moe_ref){k, opts->act_dtype, E, H, I, G, opts->expert_offset, QP_MOE_ACT_NONE, NULL, NULL, NULL, NULL, 0, 0};
    mb b = {ctx, m->layer, tensors, n};
    qp_status st = bind(&b, scheme, &m->r);
    if (!st && opts->e_score_correction_bias) {
        float *bias = malloc(sizeof(float) * (size_t)G);
        if (!bias) st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory");
        else memcpy(bias, opts->e_score_correction_bias, sizeof(float) * (size_t)G);
        m->o.e_score_correction_bias = bias;
    }
    if (st) { qp_moe_destroy(m); return st; }
    *out = m;
    return QP_OK;
}

QP_API qp_status qp_moe_forward_topk(qp_moe *m, const void *x, int M, const int32_t *ids, const float *w, void *y) {
    if (!m) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !ids || !w || !y || M <= 0)
        return qp_error_set(m->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, m->layer, "qp_moe_forward: NULL buffer or M = %d", M);
    pthread_mutex_lock(&m->dev->lock);
    qp_status st = qp_ref_moe_forward(m->dev->ctx, m->layer, &m->r, x, M, m->o.top_k, ids, w, y);
    pthread_mutex_unlock(&m->dev->lock);
    return st;
}

QP_API qp_status qp_moe_forward(qp_moe *m, const void *x, int M, const float *logits, void *y) {
    if (!m) return QP_ERR_INVALID_ARGUMENT;
    if (!logits || M <= 0)
        return qp_error_set(m->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "router_logits", m->layer,
                            "qp_moe_forward: NULL router logits or M = %d", M);
    size_t mk = (size_t)M * (size_t)m->o.top_k;
    int32_t *ids = malloc(sizeof(int32_t) * mk);
    float *w = malloc(sizeof(float) * mk);
    qp_status st = ids && w ? qp_moe_route(m->dev->ctx, logits, M, m->r.G, &m->o, ids, w)
                            : qp_error_set(m->dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, m->layer, "out of memory");
    if (!st) st = qp_moe_forward_topk(m, x, M, ids, w, y);
    free(ids);
    free(w);
    return st;
}

QP_API void qp_moe_destroy(qp_moe *m) {
    if (!m) return;
    free(m->r.w13); free(m->r.w2); free(m->r.s13); free(m->r.s2);
    free((void *)m->o.e_score_correction_bias);
    free(m);
}
