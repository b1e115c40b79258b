/* qp_moe: a routed-experts layer from vLLM's FusedMoE parameters
 * (w13_weight [E, 2I, H], w2_weight [E, H, I], their scales), with each
 * Quark MoE method's process_weights_after_loading (vLLM 0.34.0's
 * quark/quark_moe.py): per-tensor fp8 and int8 w13 shards requantized to the larger
 * of the two scales, static input scales reduced to their max over the
 * experts. Runs on the cpu reference (cpu/ref_moe.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moe.h"
#include "scheme_table.h"

struct qp_moe {
    qp_device *dev;
    qp_moe_options o;
    char layer[256];
    qp_moe_desc d;
    void *own[8];             /* what the desc points to                    */
    void *handle;             /* the backend's layer (not on cpu)           */
    /* host-forward staging (x, ids, weights, y) for up to cap_m tokens */
    qp_buffer *stage[4];
    /* routing on the device: ids, weights, scratch for route_m tokens, and
     * the correction bias */
    qp_buffer *route[3], *bias_buf;
    int route_m;
    int cap_m, max_m;
    pthread_mutex_t lock;     /* guards the staging buffers                 */
};

/* qp_moe_desc's pointers, owned by the layer. */
static void *keep(qp_moe *m, void *p) {
    for (int i = 0; i < 8; i++)
        if (!m->own[i]) { m->own[i] = p; return p; }
    free(p);
    return NULL;
}

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
    for (size_t i = 0; i < *n; i++) (*out)[i] = qp_num_load(t->dtype, t->data, i);
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
static qp_status row_scales(const mb *b, qp_moe *m, int w13, bool fp8) {
    qp_moe_desc *r = &m->d;
    size_t E = (size_t)r->E, rows = w13 ? 2 * (size_t)r->I : (size_t)r->H, K = w13 ? (size_t)r->H : (size_t)r->I;
    const char *name = w13 ? "w13_weight_scale" : "w2_weight_scale";
    size_t ok[3] = {E * rows, w13 ? E * 2 : E, E};
    float *v = NULL, *out = keep(m, malloc(sizeof(float) * E * rows));
    size_t n;
    qp_status st = out ? scales(b, name, ok, w13 ? 3 : 2, &v, &n) : QP_ERR_OUT_OF_MEMORY;
    if (st) return st == QP_ERR_OUT_OF_MEMORY ? qp_error_set(b->ctx, st, NULL, name, b->layer, "out of memory") : st;
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
                        float dq = qp_num_round(QP_DTYPE_F16, (float)w[i] * s[sh]);
                        float q = nearbyintf(dq / smax);
                        w[i] = (int8_t)(q > 127.0f ? 127.0f : q < -128.0f ? -128.0f : q);
                    }
                }
            }
            for (size_t i = 0; i < rows; i++) out[e * rows + i] = smax;
        }
    }
    free(v);
    if (st) return st;
    if (w13) r->s13 = out; else r->s2 = out;
    return QP_OK;
}

static bool emulated(qp_scheme_kind k) {
    return k == QP_SCHEME_OCP_MX || k == QP_SCHEME_W4A8_MXFP4_FP8 || k == QP_SCHEME_NVFP4;
}

/* A [E, ...] tensor's slice of expert e, as a 2-D or 0-D view. */
static qp_tensor slice(const qp_tensor *t, const char *name, size_t e, size_t per, size_t bytes_per) {
    qp_tensor v = *t;
    v.name = name;
    v.data = (const uint8_t *)t->data + e * per * bytes_per;
    if (t->ndim >= 3) { v.ndim = 2; v.shape[0] = t->shape[1]; v.shape[1] = t->shape[2]; }
    else { v.ndim = 0; }
    return v;
}

/* OCP MX, W4A8 MXFP4-FP8 and NVFP4 experts: each expert's w13 (gate and up
 * rows as one [2I, H] layer) and w2 bound by the linear binder, so the
 * weights dequantize exactly as those schemes' linear layers do; the codes
 * and block multipliers are then stacked. Per-layer scalars, as vLLM's
 * process_weights_after_loading makes them: static fp8 input scales and
 * NVFP4 input global scales are the max over the experts (and shards);
 * NVFP4's w13 uses the gate's weight_scale_2 for both shards
 * (w13_weight_scale_2[:, 0], QuarkNvfp4MoEMethod). */
static qp_status bind_emulated(const mb *b, const qp_scheme *s, qp_moe *m) {
    qp_moe_desc *d = &m->d;
    size_t E = (size_t)d->E;
    for (int g = 0; g < 2; g++) {
        size_t rows = g ? (size_t)d->H : 2 * (size_t)d->I, K = g ? (size_t)d->I : (size_t)d->H;
        const char *wn = g ? "w2_weight" : "w13_weight", *sn = g ? "w2_weight_scale" : "w13_weight_scale";
        const char *in = s->kind == QP_SCHEME_NVFP4 ? (g ? "w2_input_scale_2" : "w13_input_scale_2")
                                                    : (g ? "w2_input_scale" : "w13_input_scale");
        const char *gn = g ? "w2_weight_scale_2" : "w13_weight_scale_2";
        const qp_tensor *w = get(b, wn), *ws = get(b, sn), *is = get(b, in), *w2s = get(b, gn);
        char m2[300];
        if (!w || !w->data || w->ndim != 3 || w->shape[0] != (int64_t)E || w->shape[1] != (int64_t)rows) {
            snprintf(m2, sizeof m2, "MoE tensor '%s' must be [E = %zu, %zu, packed %zu]", wn, E, rows, K);
            return bad(b, wn, "%s", m2);
        }
        if (!ws || !ws->data || ws->ndim != 3 || ws->shape[0] != (int64_t)E) {
            snprintf(m2, sizeof m2, "MoE tensor '%s' must be [E = %zu, %zu, K / block]", sn, E, rows);
            return bad(b, sn, "%s", m2);
        }
        bool need_in = s->kind != QP_SCHEME_OCP_MX, need_g = s->kind == QP_SCHEME_NVFP4;
        if (need_in && (!is || !is->data)) {
            snprintf(m2, sizeof m2, "missing MoE tensor '%s' [E%s]", in, g || !need_g ? "" : ", 2");
            return bad(b, in, "%s", m2);
        }
        if (need_g && (!w2s || !w2s->data || count(w2s) != E * (g ? 1 : 2) ||
                       (w2s->dtype != QP_DTYPE_F32 && w2s->dtype != QP_DTYPE_F16 && w2s->dtype != QP_DTYPE_BF16))) {
            snprintf(m2, sizeof m2, "MoE tensor '%s' must be a float tensor [E%s]", gn, g ? "" : ", 2");
            return bad(b, gn, "%s", m2);
        }
        size_t wper = count(w) / E, sper = count(ws) / E, nb = 0;
        uint8_t *codes = keep(m, malloc(E * rows * K));
        float *blk = NULL;
        if (!codes) return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, wn, b->layer, "out of memory");
        for (size_t e = 0; e < E; e++) {
            qp_tensor t[4];
            size_t n = 0;
            t[n++] = slice(w, "weight", e, wper, qp_dtype_elem_bytes(w->dtype));
            t[n++] = slice(ws, "weight_scale", e, sper, qp_dtype_elem_bytes(ws->dtype));
            if (need_in) { t[n] = *is; t[n++].name = need_g ? "input_scale_2" : "input_scale"; }
            float gs = 0;
            if (need_g) { /* the gate's (w13) or the expert's (w2) global weight scale */
                gs = qp_num_load(w2s->dtype, w2s->data, g ? e : 2 * e);
                t[n++] = (qp_tensor){"weight_scale_2", QP_DTYPE_F32, 0, {0}, &gs};
            }
            qp_linear_options lo;
            qp_linear_options_init(&lo);
            lo.act_dtype = d->act_dtype;
            lo.layer = b->layer;
            qp_lin_desc ld;
            qp_lin_desc_store *store = NULL;
            qp_status st = qp_lin_desc_build(b->ctx, s, (int)rows, (int)K, t, n, &lo, &ld, &store);
            if (st) return st;
            if (!blk) {
                nb = K / (size_t)ld.w_blk;
                blk = keep(m, malloc(sizeof(float) * E * rows * nb));
                float *lut = d->w_lut ? NULL : keep(m, malloc(sizeof(float) * 256));
                if (!blk || (!d->w_lut && !lut)) { qp_lin_desc_free(store); return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, wn, b->layer, "out of memory"); }
                if (lut) { memcpy(lut, ld.w_lut, sizeof(float) * 256); d->w_lut = lut; }
                d->w_dtype = ld.w_elem;
                d->w_blk = ld.w_blk;
                d->act = ld.act;
                d->act_elem = ld.act_elem;
                d->act_mbits = ld.act_mbits;
                d->act_emax = ld.act_emax;
                float a = ld.act == QP_ACT_NVFP4_QDQ ? ld.input_global_scale : ld.input_scale;
                if (g) d->a2_scale = a; else d->a13_scale = a;
            }
            memcpy(codes + e * rows * K, ld.w_codes, rows * K);
            memcpy(blk + e * rows * nb, ld.w_blk_scale, sizeof(float) * rows * nb);
            qp_lin_desc_free(store);
        }
        if (g) { d->w2 = codes; d->b2 = blk; } else { d->w13 = codes; d->b13 = blk; }
    }
    return QP_OK;
}

/* W4A16 int4/uint4 experts from QuarkW4A16Int4MoEMethod's parameters
 * (w13_weight [E, 2I, H/2] U8, two codes per byte along K, low nibble
 * first; symmetric codes uint4b8; w13_weight_scale [E, 2I, H/g] loaded
 * into the params dtype; w13_weight_zero_point [E, I, H/g] U8, two rows
 * per byte, asymmetric only), as the wna16 MoE kernels dequantize them:
 * W = rnd((c - z) * s) in the activation dtype (z = 8 when symmetric), the
 * GEMM a float GEMM of x. That is the block-float form of qp_moe_desc
 * exactly: one signed code v = c - z per byte (w_lut[b] = (int8_t)b, so
 * |v| <= 15), one multiplier s per (row, block of 32) -- a group of g
 * repeats its scale over g / 32 blocks, as vLLM's repeat_interleave when it
 * halves g -- and rnd(w_lut[v] * s) one fp32 multiply (exact: |v| < 2^4,
 * s has 11 significant bits) rounded once. vLLM's create_weights halves
 * the group size until it divides H and I, asserting >= 32. */
static qp_status bind_w4a16(const mb *b, const qp_scheme *s, qp_moe *m) {
    qp_moe_desc *d = &m->d;
    size_t E = (size_t)d->E;
    bool sym = strstr(s->weight_key, "Asym") == NULL;
    int g = s->weight.group_size;
    if (g <= 0) return bad(b, "w13_weight_scale", "%s", "W4A16 experts need the config's group size");
    while (d->I % g || d->H % g) {
        g /= 2;
        if (g < 32)
            return qp_error_set(b->ctx, QP_ERR_UNSUPPORTED, NULL, "weight", b->layer,
                                "AssertionError: group_size >= 32 (QuarkW4A16Int4MoEMethod.create_weights halves the group "
                                "size %d until it divides H = %d and I = %d)", s->weight.group_size, d->H, d->I);
    }
    int blk = g % 32 == 0 ? 32 : g;
    float *lut = keep(m, malloc(sizeof(float) * 256));
    if (!lut) return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, b->layer, "out of memory");
    for (int i = 0; i < 256; i++) lut[i] = (float)(int8_t)i;
    d->w_lut = lut;
    d->w_dtype = QP_DTYPE_I8;
    d->w_blk = blk;
    d->act = QP_ACT_NONE;
    for (int gi = 0; gi < 2; gi++) {
        size_t rows = gi ? (size_t)d->H : 2 * (size_t)d->I, K = gi ? (size_t)d->I : (size_t)d->H;
        const char *wn = gi ? "w2_weight" : "w13_weight", *sn = gi ? "w2_weight_scale" : "w13_weight_scale";
        const char *zn = gi ? "w2_weight_zero_point" : "w13_weight_zero_point";
        char shape[80];
        const qp_tensor *w, *zp = NULL;
        snprintf(shape, sizeof shape, "[E = %zu, %zu, %zu] (two codes per byte)", E, rows, K / 2);
        qp_status st = need(b, wn, QP_DTYPE_U8, E * rows * (K / 2), shape, &w);
        if (st) return st;
        size_t G = 0, ok[1], n;
        const qp_tensor *sc = get(b, sn);
        G = sc && rows && E ? count(sc) / (E * rows) : 0;
        if (!G || K % G || (K / G) % (size_t)blk) {
            char msg[200];
            snprintf(msg, sizeof msg, "MoE tensor '%s' must be [E = %zu, %zu, K / group] with groups of a multiple of %d", sn, E,
                     rows, blk);
            return bad(b, sn, "%s", msg);
        }
        ok[0] = E * rows * G;
        float *sv;
        if ((st = scales(b, sn, ok, 1, &sv, &n))) return st;
        if (!sym) {
            snprintf(shape, sizeof shape, "[E = %zu, %zu, %zu] (two rows per byte)", E, rows / 2, G);
            if ((st = need(b, zn, QP_DTYPE_U8, E * rows / 2 * G, shape, &zp))) { free(sv); return st; }
        }
        size_t per = K / (size_t)blk, gb = (K / G) / (size_t)blk; /* blocks per row, per group */
        uint8_t *codes = keep(m, malloc(E * rows * K));
        float *bs = keep(m, malloc(sizeof(float) * E * rows * per));
        if (!codes || !bs) { free(sv); return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, wn, b->layer, "out of memory"); }
        const uint8_t *wp = w->data, *zq = zp ? zp->data : NULL;
        for (size_t e = 0; e < E; e++)
            for (size_t r = 0; r < rows; r++) {
                size_t row = e * rows + r;
                for (size_t k = 0; k < K; k++) {
                    int c = (wp[row * (K / 2) + k / 2] >> (4 * (k % 2))) & 15;
                    int z = sym ? 8 : (zq[(e * rows / 2 + r / 2) * G + k / (K / G)] >> (4 * (r % 2))) & 15;
                    codes[row * K + k] = (uint8_t)(int8_t)(c - z);
                }
                /* the params-dtype scale, widened exactly */
                for (size_t i = 0; i < per; i++) bs[row * per + i] = qp_num_round(d->act_dtype, sv[row * G + i / gb]);
            }
        free(sv);
        if (gi) { d->w2 = codes; d->b2 = bs; } else { d->w13 = codes; d->b13 = bs; }
    }
    return QP_OK;
}

/* FP8 per-block experts (QuarkW8A8Fp8MoEMethod, per_block): e4m3 codes
 * w13 [E, 2I, H] / w2 [E, H, I] with one fp32 scale per 128 x 128 block
 * (w13_weight_scale [E, 2I/128, H/128], w2_weight_scale [E, H/128,
 * I/128]); activations quantized per token and group of 128 along k
 * (kFp8Dynamic128Sym); Triton's block-scaled GEMM sums each k-block in
 * fp32 and adds it times a_scale * b_scale. In the desc: the codes, and
 * b13/b2 the block scale of each (row, k-block) (w_blk 128), the act
 * QP_ACT_FP8_GROUP128. No per-tensor requantization: block scales stay. */
static qp_status bind_fp8_block(const mb *b, qp_moe *m) {
    qp_moe_desc *d = &m->d;
    size_t E = (size_t)d->E;
    if (d->I % 128 || d->H % 128)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "w13_weight", b->layer,
                            "fp8 per-block experts: H = %d and I = %d must be multiples of the 128 x 128 weight block",
                            d->H, d->I);
    d->w_dtype = QP_DTYPE_F8_E4M3FN;
    d->w_blk = 128;
    d->act = QP_ACT_FP8_GROUP128;
    for (int g = 0; g < 2; g++) {
        size_t rows = g ? (size_t)d->H : 2 * (size_t)d->I, K = g ? (size_t)d->I : (size_t)d->H;
        const char *wn = g ? "w2_weight" : "w13_weight", *sn = g ? "w2_weight_scale" : "w13_weight_scale";
        const qp_tensor *w;
        qp_status st = need(b, wn, QP_DTYPE_F8_E4M3FN, E * rows * K, g ? "[E, H, I]" : "[E, 2I, H]", &w);
        if (st) return st;
        size_t nb = rows / 128, kb = K / 128, ok[1] = {E * nb * kb}, n;
        float *sv;
        if ((st = scales(b, sn, ok, 1, &sv, &n))) return st;
        uint8_t *codes = keep(m, malloc(E * rows * K));
        float *bs = keep(m, malloc(sizeof(float) * E * rows * kb));
        if (!codes || !bs) { free(sv); return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, wn, b->layer, "out of memory"); }
        memcpy(codes, w->data, E * rows * K);
        for (size_t e = 0; e < E; e++)
            for (size_t r = 0; r < rows; r++)
                for (size_t i = 0; i < kb; i++) bs[(e * rows + r) * kb + i] = sv[(e * nb + r / 128) * kb + i];
        free(sv);
        if (g) { d->w2 = codes; d->b2 = bs; } else { d->w13 = codes; d->b13 = bs; }
    }
    return QP_OK;
}

static qp_status bind(const mb *b, const qp_scheme *s, qp_moe *m) {
    qp_moe_desc *r = &m->d;
    if (!strcmp(s->scheme_class, "QuarkW8A8Mxfp8MoEMethod") && (r->H % 32 || r->I % 32))
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "w13_weight", b->layer,
                            "Quark MXFP8 MoE requires hidden_size and intermediate_size_per_partition divisible by 32, "
                            "got %d and %d.", r->H, r->I);
    if (emulated(s->kind)) return bind_emulated(b, s, m);
    if (s->kind == QP_SCHEME_W4A16_INT4) return bind_w4a16(b, s, m);
    if (s->kind == QP_SCHEME_W8A8_FP8_BLOCK) return bind_fp8_block(b, m);
    size_t E = (size_t)r->E, H = (size_t)r->H, I = (size_t)r->I;
    const qp_tensor *w13, *w2;
    qp_status st;
    bool fp8 = s->kind == QP_SCHEME_W8A8_FP8, int8 = s->kind == QP_SCHEME_W8A8_INT8;
    qp_dtype wdt = fp8 ? QP_DTYPE_F8_E4M3FN : int8 ? QP_DTYPE_I8 : r->act_dtype;
    if ((st = need(b, "w13_weight", wdt, E * 2 * I * H, "[E, 2I, H]", &w13)) ||
        (st = need(b, "w2_weight", wdt, E * H * I, "[E, H, I]", &w2)))
        return st;
    size_t eb = qp_dtype_elem_bytes(wdt);
    void *a = keep(m, malloc(E * 2 * I * H * eb)), *c = keep(m, malloc(E * H * I * eb));
    if (!a || !c) return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, b->layer, "out of memory");
    memcpy(a, w13->data, E * 2 * I * H * eb);
    memcpy(c, w2->data, E * H * I * eb);
    r->w13 = a;
    r->w2 = c;
    r->w_dtype = wdt;
    if (!fp8 && !int8) { r->act = QP_ACT_NONE; return QP_OK; }
    if ((st = row_scales(b, m, 1, fp8)) || (st = row_scales(b, m, 0, fp8))) return st;
    const char *ak = s->activation_key;
    bool stat = strstr(ak, "Static") != NULL;
    if (fp8) r->act = stat ? QP_ACT_FP8_STATIC : strstr(ak, "Token") ? QP_ACT_FP8_DYNAMIC_TOKEN : QP_ACT_FP8_DYNAMIC_TENSOR;
    else r->act = stat ? QP_ACT_INT8_STATIC : QP_ACT_INT8_DYNAMIC_TOKEN; /* scaled_int8_quant: per token */
    if (stat) { /* the max over experts (vLLM warns when they differ) */
        const char *names[2] = {"w13_input_scale", "w2_input_scale"};
        float *dst[2] = {&r->a13_scale, &r->a2_scale};
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

static bool on_cpu(const qp_device *dev) { return !strcmp(dev->backend->ops->name, "cpu"); }

/* Whether the device's MoE kernels take the activations of `k`, with the
 * reason when not (the backend's moe_takes_act): the linear answer does
 * not cover the MoE GEMMs' own activation paths. */
static bool moe_takes(const qp_device *dev, qp_scheme_kind k, char *why, size_t cap) {
    const qp_backend_ops *ops = dev->backend->ops;
    if (k != QP_SCHEME_W8A8_FP8_BLOCK || !ops->moe_takes_act) return true;
    return ops->moe_takes_act(dev->handle, QP_ACT_FP8_GROUP128, why, cap) != 0;
}

/* QuarkOCP_MX_MoEMethod's w_mxfp6_e3m2_a_fp8 / w_mxfp6_e2m3_a_fp8: its
 * __init__ accepts them, get_fused_moe_quant_config (after loading) raises.
 * The OCP MX scheme's name, or NULL. */
static const char *mxfp6_fp8(const qp_scheme *s) {
    if (s->kind != QP_SCHEME_OCP_MX || strcmp(s->activation_key, "kFp8StaticTensorSym")) return NULL;
    return !strcmp(s->weight_key, "kMxfp6E3M2Static") ? "w_mxfp6_e3m2_a_fp8"
           : !strcmp(s->weight_key, "kMxfp6E2M3Static") ? "w_mxfp6_e2m3_a_fp8" : NULL;
}

/* The kind qp_moe runs a resolved MoE scheme as, or QP_SCHEME_NONE with
 * the reason. */
static qp_scheme_kind moe_kind(const qp_scheme *s, const char **why) {
    qp_scheme_kind k = s->kind;
    *why = NULL;
    if (k == QP_SCHEME_HF_FP8) { /* Fp8MoEMethod, per tensor */
        if (s->weight.block[0] <= 0) return QP_SCHEME_W8A8_FP8;
        *why = "no fused MoE for this scheme";
        return QP_SCHEME_NONE;
    }
    if (mxfp6_fp8(s)) {
        *why = "vLLM has no fused MoE quant config for MXFP6 weights with fp8 activations";
        return QP_SCHEME_NONE;
    }
    *why = qp_scheme_row_of(k)->moe_refusal;
    if (!*why) return k;
    return QP_SCHEME_NONE;
}

QP_API qp_status qp_device_supports_moe(qp_device *dev, const qp_scheme *scheme, qp_support_info *out) {
    if (!dev || !scheme || !out) return QP_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    const char *why;
    qp_scheme_kind k = moe_kind(scheme, &why);
    const qp_backend_ops *ops = dev->backend->ops;
    if (k == QP_SCHEME_NONE) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "%s experts: %s", qp_scheme_kind_name(scheme->kind), why);
        return QP_OK;
    }
    if (on_cpu(dev)) {
        out->level = QP_SUPPORT_NATIVE;
        snprintf(out->reason, sizeof out->reason, "the fused MoE reference");
        return QP_OK;
    }
    if (!ops->moe_prepare || !ops->moe_forward || !ops->moe_destroy) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "the %s backend has no fused MoE kernels", ops->name);
        return QP_OK;
    }
    char act_why[200] = "";
    if (!moe_takes(dev, k, act_why, sizeof act_why)) { /* its moe_prepare refuses it too */
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "fp8 per-block experts: %s", act_why);
        return QP_OK;
    }
    /* the MoE kernels quantize activations with the linear layers' kernels */
    qp_scheme lin = *scheme;
    lin.kind = k;
    qp_support_info li;
    qp_status st = qp_device_supports(dev, &lin, 0, 0, 0, &li);
    if (st) return st;
    out->level = li.level;
    snprintf(out->reason, sizeof out->reason, "fused MoE%s%.200s", li.reason[0] ? "; " : "", li.reason);
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
    /* caller-supplied sizes first: the stacked [E, 2I, H] and
     * [E, H, I] counts must not overflow, and every tensor must be sane */
    if (E <= 0 || H <= 0 || I <= 0 || E > QP_DIM_MAX || H > QP_DIM_MAX || I > QP_DIM_MAX / 2 ||
        (size_t)E * 2 * (size_t)I > SIZE_MAX / 8 / (size_t)H)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, E <= 0 || E > QP_DIM_MAX ? "E" : H <= 0 || H > QP_DIM_MAX ? "H" : "I",
                            layer, "bad MoE shape E = %d, H = %d, I = %d (each in 1 .. %d, 2I too, E*2I*H elements addressable)",
                            E, H, I, QP_DIM_MAX);
    if (n && !tensors)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "tensors", layer, "tensors is NULL with n_tensors = %zu", n);
    qp_status cs = qp_tensors_check(ctx, layer, tensors, n, 64);
    if (cs) return cs;
    if (opts->act_dtype != QP_DTYPE_F16 && opts->act_dtype != QP_DTYPE_BF16)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer, "MoE activations must be fp16 or bf16, got %s",
                            qp_dtype_name(opts->act_dtype));
    int G = opts->global_num_experts ? opts->global_num_experts : E;
    if (E > QP_EXPERTS_MAX || G < 0 || G > QP_EXPERTS_MAX)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, E > QP_EXPERTS_MAX ? "E" : "global_num_experts", layer,
                            "%d experts (E = %d, global_num_experts = %d): at most %d", E > QP_EXPERTS_MAX ? E : G, E,
                            opts->global_num_experts, QP_EXPERTS_MAX);
    if (opts->expert_offset < 0 || G < E || opts->expert_offset > G - E)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "expert_offset", layer,
                            "experts %d .. %lld are not within the %d experts of the layer", opts->expert_offset,
                            (long long)opts->expert_offset + E - 1, G);
    if (opts->top_k <= 0 || opts->top_k > G)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "top_k", layer, "top_k %d must be in 1 .. %d experts", opts->top_k, G);
    if ((cs = qp_moe_route_check(ctx, 1, G, opts))) return cs; /* grouped top-k, scoring: at create, not first forward */
    const qp_backend_ops *ops = dev->backend->ops;
    if (!on_cpu(dev) && (!ops->moe_prepare || !ops->moe_forward || !ops->moe_destroy))
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer, "the %s backend has no fused MoE kernels", ops->name);
    /* Fp8MoEMethod (a Hugging Face fp8 config) with per-tensor scales is
     * QuarkW8A8Fp8MoEMethod's computation */
    if (mxfp6_fp8(scheme))
        return qp_error_set(ctx, QP_ERR_NOT_IMPLEMENTED, NULL, NULL, layer,
                            "Currently there is no corresponding fused moe quant config configured in vLLM for OCP MX "
                            "scheme %s. Please open an issue.", mxfp6_fp8(scheme));
    const char *why;
    qp_scheme_kind k = moe_kind(scheme, &why);
    if (k == QP_SCHEME_NONE)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer, "%s experts (%s): %s",
                            qp_scheme_kind_name(scheme->kind), scheme->scheme_class[0] ? scheme->scheme_class : "no MoE method",
                            why);
    if (k != QP_SCHEME_UNQUANTIZED && !scheme->weight_key[0])
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer,
                            "the scheme has no MoE keys: resolve it with qp_config_resolve(..., QP_LAYER_MOE)");
    qp_moe *m = calloc(1, sizeof *m);
    if (!m) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory");
    m->dev = dev;
    m->o = *opts;
    snprintf(m->layer, sizeof m->layer, "%s", layer);
    m->o.layer = m->layer;
    m->o.e_score_correction_bias = NULL; /* copied below */
    m->d = (qp_moe_desc){.struct_size = sizeof(qp_moe_desc), .scheme = *scheme, .kind = k, .act_dtype = opts->act_dtype,
                         .E = E, .H = H, .I = I, .G = G, .expert_offset = opts->expert_offset, .layer = m->layer,
                         .act = QP_ACT_NONE};
    mb b = {ctx, m->layer, tensors, n};
    qp_scheme sk = *scheme;
    sk.kind = k;
    m->d.scheme = sk;
    qp_status st = bind(&b, &sk, m);
    if (!st && opts->e_score_correction_bias) {
        float *bias = malloc(sizeof(float) * (size_t)G);
        if (!bias) st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory");
        else memcpy(bias, opts->e_score_correction_bias, sizeof(float) * (size_t)G);
        m->o.e_score_correction_bias = bias;
    }
    pthread_mutex_init(&m->lock, NULL);
    if (!st && (opts->max_m < 0 || opts->max_m > (1 << 24)))
        st = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "max_m", layer,
                          "qp_moe_options.max_m %d: must be 0 (16) .. 16777216", opts->max_m);
    m->max_m = opts->max_m ? opts->max_m : 16;
    /* the refusal qp_device_supports_moe gives, rather than the backend's
     * own wording for the same missing kernel */
    char act_why[200] = "";
    if (!st && !on_cpu(dev) && !moe_takes(dev, k, act_why, sizeof act_why))
        st = qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer, "fp8 per-block experts: %s", act_why);
    if (!st && !on_cpu(dev)) {
        pthread_mutex_lock(&dev->lock);
        st = ops->moe_prepare(dev->handle, &m->d, &m->handle);
        if (!st && ops->moe_reserve) st = ops->moe_reserve(dev->handle, m->handle, m->max_m, opts->top_k);
        pthread_mutex_unlock(&dev->lock);
    }
    if (st) { qp_moe_destroy(m); return st; }
    *out = m;
    return QP_OK;
}

/* Replaces the n buffers of `set` by new ones of bytes[i]: all the old
 * ones go first (destroying one waits for the work that used it), so a
 * failure leaves NULLs, never a buffer of the old size. */
static qp_status rebuffer(qp_device *dev, qp_buffer **set, const size_t *bytes, int n) {
    for (int i = 0; i < n; i++) {
        qp_buffer_destroy(set[i]);
        set[i] = NULL;
    }
    for (int i = 0; i < n; i++) {
        qp_status st = qp_buffer_create(dev, bytes[i], &set[i]);
        if (st) return st;
    }
    return QP_OK;
}

/* The block's staging buffers for M tokens (grown with the block's lock
 * held). */
static qp_status stage_reserve(qp_moe *m, int M) {
    if (M <= m->cap_m) return QP_OK;
    size_t k = (size_t)m->o.top_k, xb = (size_t)M * (size_t)m->d.H * 2, ib = (size_t)M * k * 4;
    size_t bytes[4] = {xb, ib, ib, xb};
    m->cap_m = 0;
    qp_status st = rebuffer(m->dev, m->stage, bytes, 4);
    if (st) return st;
    m->cap_m = M;
    return QP_OK;
}

/* Enqueues the block on device buffers (device lock held); on cpu the
 * reference runs at once on the buffers' host memory. */
static qp_status enqueue_locked(qp_moe *m, qp_buffer *x, int M, qp_buffer *ids, qp_buffer *w, qp_buffer *y,
                                const qp_enqueue_sync *sync) {
    if (!m->handle)
        return qp_ref_moe_forward(m->dev->ctx, &m->d, x->handle, M, m->o.top_k, ids->handle, w->handle, y->handle);
    qp_status st = qp_device_enqueue_begin(m->dev, sync);
    if (st) return st;
    st = m->dev->backend->ops->moe_forward(m->dev->handle, m->handle, x->handle, M, m->o.top_k, ids->handle, w->handle,
                                           y->handle);
    return qp_device_enqueue_end(m->dev, sync, st);
}

static qp_status grow(qp_moe *m, int M) {
    if (M <= m->max_m) return QP_OK;
    qp_status st = QP_OK;
    if (m->handle && m->dev->backend->ops->moe_reserve) {
        pthread_mutex_lock(&m->dev->lock);
        st = m->dev->backend->ops->moe_reserve(m->dev->handle, m->handle, M, m->o.top_k);
        pthread_mutex_unlock(&m->dev->lock);
    }
    if (!st) m->max_m = M;
    return st;
}

QP_API qp_status qp_moe_enqueue(qp_moe *m, qp_buffer *x, int M, qp_buffer *ids, qp_buffer *w, qp_buffer *y,
                                const qp_enqueue_sync *sync) {
    if (!m) return QP_ERR_INVALID_ARGUMENT;
    qp_context *ctx = m->dev->ctx;
    if (!x || !ids || !w || !y || M <= 0 || M > (1 << 24))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, m->layer, "qp_moe_enqueue: NULL buffer or M = %d", M);
    qp_buffer *bufs[4] = {x, ids, w, y};
    static const char *const names[4] = {"x", "topk_ids", "topk_weights", "y"};
    size_t k = (size_t)m->o.top_k, xb = (size_t)M * (size_t)m->d.H * 2, ib = (size_t)M * k * 4;
    size_t need[4] = {xb, ib, ib, xb};
    for (int i = 0; i < 4; i++) {
        if (bufs[i]->dev != m->dev)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, names[i], m->layer,
                                "qp_moe_enqueue: %s belongs to another device", names[i]);
        if (bufs[i]->size < need[i])
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, names[i], m->layer,
                                "qp_moe_enqueue: %s holds %zu bytes, %zu needed for M = %d, top_k = %zu", names[i],
                                bufs[i]->size, need[i], M, k);
    }
    pthread_mutex_lock(&m->lock);
    qp_status st = grow(m, M);
    if (!st) {
        pthread_mutex_lock(&m->dev->lock);
        st = enqueue_locked(m, x, M, ids, w, y, sync);
        pthread_mutex_unlock(&m->dev->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

/* The ids, weights and scratch of routing on the device for M tokens. */
static qp_status route_reserve(qp_moe *m, int M) {
    if (M <= m->route_m) return QP_OK;
    size_t k = (size_t)m->o.top_k, G = (size_t)m->d.G;
    size_t bytes[3] = {(size_t)M * k * 4, (size_t)M * k * 4, 2 * (size_t)M * G * 4};
    m->route_m = 0;
    qp_status st = rebuffer(m->dev, m->route, bytes, 3);
    if (st) return st;
    if (m->o.e_score_correction_bias && !m->bias_buf) {
        st = qp_buffer_create(m->dev, G * 4, &m->bias_buf);
        if (!st) st = qp_buffer_upload(m->bias_buf, 0, m->o.e_score_correction_bias, G * 4);
        if (st) return st;
    }
    m->route_m = M;
    return QP_OK;
}

QP_API qp_status qp_moe_enqueue_logits(qp_moe *m, qp_buffer *x, int M, qp_buffer *logits, qp_buffer *y,
                                       const qp_enqueue_sync *sync) {
    if (!m) return QP_ERR_INVALID_ARGUMENT;
    qp_context *ctx = m->dev->ctx;
    if (!x || !logits || !y || M <= 0 || M > (1 << 24))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, m->layer,
                            "qp_moe_enqueue_logits: NULL buffer or M = %d", M);
    if (logits->dev != m->dev || x->dev != m->dev || y->dev != m->dev)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, logits->dev != m->dev ? "router_logits" : "x",
                            m->layer, "qp_moe_enqueue_logits: a buffer belongs to another device");
    size_t xb = (size_t)M * (size_t)m->d.H * 2;
    if (x->size < xb || y->size < xb)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, x->size < xb ? "x" : "y", m->layer,
                            "qp_moe_enqueue_logits: x and y need %zu bytes for M = %d (have %zu and %zu)", xb, M,
                            x->size, y->size);
    size_t lb = (size_t)M * (size_t)m->d.G * 4;
    if (logits->size < lb)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "router_logits", m->layer,
                            "qp_moe_enqueue_logits: router_logits holds %zu bytes, %zu needed for M = %d x %d experts",
                            logits->size, lb, M, m->d.G);
    const qp_backend_ops *ops = m->dev->backend->ops;
    if (m->handle && !ops->moe_route)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "router_logits", m->layer,
                            "the %s backend has no routing kernel: route on the host (qp_moe_route) and pass the top-k "
                            "ids and weights (qp_moe_enqueue)", ops->name);
    if (m->o.top_k > QP_ROUTE_MAX_K || m->o.num_expert_group > QP_ROUTE_MAX_K)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "top_k", m->layer,
                            "routing on the device takes top_k and num_expert_group up to %d (got %d and %d)",
                            QP_ROUTE_MAX_K, m->o.top_k, m->o.num_expert_group);
    /* the routing options checked as qp_moe_route checks them, on one row */
    float *zl = calloc((size_t)m->d.G, sizeof *zl);
    int32_t zi[QP_ROUTE_MAX_K];
    float zw[QP_ROUTE_MAX_K];
    qp_status st = zl ? qp_moe_route(ctx, zl, 1, m->d.G, &m->o, zi, zw)
                      : qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, m->layer, "out of memory");
    free(zl);
    if (st) return st;
    pthread_mutex_lock(&m->lock);
    st = route_reserve(m, M > m->max_m ? M : m->max_m);
    if (!st) st = grow(m, M);
    if (!st) {
        pthread_mutex_lock(&m->dev->lock);
        if (!m->handle) { /* the cpu reference: host memory, at once */
            st = qp_moe_route(ctx, logits->handle, M, m->d.G, &m->o, m->route[0]->handle, m->route[1]->handle);
            if (!st) st = enqueue_locked(m, x, M, m->route[0], m->route[1], y, sync);
        } else {
            qp_route_params p = {.G = m->d.G, .k = m->o.top_k, .renormalize = m->o.renormalize,
                                 .n_group = m->o.num_expert_group, .topk_group = m->o.topk_group,
                                 .sigmoid = m->o.scoring == QP_MOE_SIGMOID, .scale = m->o.routed_scaling_factor,
                                 .bias = m->bias_buf ? m->bias_buf->handle : NULL};
            /* one binding for both: the waits before the routing, the
             * signal after the block */
            st = qp_device_enqueue_begin(m->dev, sync);
            if (!st) {
                st = ops->moe_route(m->dev->handle, &p, logits->handle, M, m->route[2]->handle, m->route[0]->handle,
                                    m->route[1]->handle);
                if (!st)
                    st = ops->moe_forward(m->dev->handle, m->handle, x->handle, M, m->o.top_k, m->route[0]->handle,
                                          m->route[1]->handle, y->handle);
                st = qp_device_enqueue_end(m->dev, sync, st);
            }
        }
        pthread_mutex_unlock(&m->dev->lock);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

QP_API qp_status qp_moe_forward_topk(qp_moe *m, const void *x, int M, const int32_t *ids, const float *w, void *y) {
    if (!m) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !ids || !w || !y || M <= 0 || M > (1 << 24))
        return qp_error_set(m->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, m->layer, "qp_moe_forward: NULL buffer or M = %d", M);
    size_t mk = (size_t)M * (size_t)m->o.top_k;
    for (size_t i = 0; i < mk; i++)
        if (ids[i] < 0 || ids[i] >= m->d.G)
            return qp_error_set(m->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "topk_ids", m->layer,
                                "topk_ids[%zu][%zu] = %d is not an expert of 0 .. %d", i / (size_t)m->o.top_k,
                                i % (size_t)m->o.top_k, (int)ids[i], m->d.G - 1);
    if (!m->handle) {
        pthread_mutex_lock(&m->dev->lock);
        qp_status st = qp_ref_moe_forward(m->dev->ctx, &m->d, x, M, m->o.top_k, ids, w, y);
        pthread_mutex_unlock(&m->dev->lock);
        return st;
    }
    size_t xb = (size_t)M * (size_t)m->d.H * 2, ib = mk * 4;
    pthread_mutex_lock(&m->lock);
    qp_status st = stage_reserve(m, M);
    if (!st) st = grow(m, M);
    if (!st) {
        const qp_backend_ops *ops = m->dev->backend->ops;
        void *h = m->dev->handle;
        qp_buffer **b = m->stage;
        pthread_mutex_lock(&m->dev->lock);
        st = ops->buffer_upload(h, b[0]->handle, 0, x, xb);
        if (!st) st = ops->buffer_upload(h, b[1]->handle, 0, ids, ib);
        if (!st) st = ops->buffer_upload(h, b[2]->handle, 0, w, ib);
        if (!st) st = enqueue_locked(m, b[0], M, b[1], b[2], b[3], NULL);
        if (!st) st = ops->buffer_download(h, b[3]->handle, 0, y, xb);
        if (st) (void)qp_device_sync_locked(m->dev);
        pthread_mutex_unlock(&m->dev->lock);
    }
    pthread_mutex_unlock(&m->lock);
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
    qp_status st = ids && w ? qp_moe_route(m->dev->ctx, logits, M, m->d.G, &m->o, ids, w)
                            : qp_error_set(m->dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, m->layer, "out of memory");
    if (!st) st = qp_moe_forward_topk(m, x, M, ids, w, y);
    free(ids);
    free(w);
    return st;
}

QP_API void qp_moe_describe(qp_moe *m, int M, char *out, size_t cap) {
    if (!out || !cap) return;
    out[0] = 0;
    if (!m) return;
    const qp_backend_ops *ops = m->dev->backend->ops;
    if (!m->handle) { snprintf(out, cap, "reference"); return; }
    if (!ops->moe_describe) return;
    pthread_mutex_lock(&m->dev->lock);
    ops->moe_describe(m->dev->handle, m->handle, M, m->o.top_k, out, cap);
    pthread_mutex_unlock(&m->dev->lock);
}

QP_API void qp_moe_destroy(qp_moe *m) {
    if (!m) return;
    for (int i = 0; i < 4; i++) qp_buffer_destroy(m->stage[i]);
    for (int i = 0; i < 3; i++) qp_buffer_destroy(m->route[i]);
    qp_buffer_destroy(m->bias_buf);
    if (m->handle) {
        pthread_mutex_lock(&m->dev->lock);
        (void)qp_device_sync_locked(m->dev);
        m->dev->backend->ops->moe_destroy(m->dev->handle, m->handle);
        pthread_mutex_unlock(&m->dev->lock);
    }
    for (int i = 0; i < 8; i++) free(m->own[i]);
    free((void *)m->o.e_score_correction_bias);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
