/* From checkpoint tensors to the canonical layer description every backend
 * prepares from (backend.h qp_lin_desc): binding by checkpoint name, dtype
 * and shape checks that name the tensor and the rule, and vLLM's
 * process_weights_after_loading (docs/semantics.md §9, §10, §11, §15, §16).
 *
 * What is accepted follows vLLM's parameter creation and weight loaders,
 * proven on amd-quark's own exports (tests/quark_exports): float scales in
 * f32, f16 or bf16 are widened exactly (copy_ into fp32 parameters),
 * params-dtype tensors (unquantized weights, biases, W4A16 scales) are
 * converted into the model dtype, scalars are [] or [1], per-channel
 * scales [N] or [N, 1], and the zero points vLLM creates and ignores are
 * accepted. The per-scheme tables: docs/loading.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "scheme_table.h"

struct qp_lin_desc_store {
    void *allocs[24];
    int n;
};

static void *keep(qp_lin_desc_store *s, void *p) {
    if (p && s->n < 24) s->allocs[s->n++] = p;
    else if (p) { free(p); p = NULL; }
    return p;
}

void qp_lin_desc_free(qp_lin_desc_store *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->allocs[i]);
    free(s);
}

static size_t elem_count(const qp_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

QP_API size_t qp_tensor_bytes(const qp_tensor *t) {
    if (!t || t->ndim < 0 || t->ndim > QP_TENSOR_MAX_DIMS) return 0;
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0) return 0;
        size_t s = (size_t)t->shape[d];
        if (s && n > SIZE_MAX / 8 / s) return 0;
        n *= s;
    }
    int bits = qp_format_bits(t->dtype);
    if (bits <= 0) return 0;
    return (n * (size_t)bits + 7) / 8;
}

struct qp_binder {
    qp_context *ctx;
    const char *layer;
    const qp_tensor *t;
    size_t n;
    bool *used;
};
typedef struct qp_binder binder;

static void shape_str(const qp_tensor *t, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(out + o, cap - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

static qp_status fail(const binder *b, const char *tensor, const char *fmt, const char *detail) {
    return qp_error_set(b->ctx, QP_ERR_INVALID_ARGUMENT, NULL, tensor, b->layer, fmt, detail);
}

/* The tensor called `name`; required ones missing are an error. */
static qp_status find(const binder *b, const char *name, bool required, const qp_tensor **out) {
    *out = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->t[i].name && !strcmp(b->t[i].name, name)) {
            if (*out) return fail(b, name, "tensor '%s' given twice", name);
            *out = &b->t[i];
            b->used[i] = true;
        }
    if (!*out && required) return fail(b, name, "missing checkpoint tensor '%s'", name);
    if (*out && (!(*out)->data || (*out)->ndim < 0 || (*out)->ndim > QP_TENSOR_MAX_DIMS))
        return fail(b, name, "tensor '%s' has no data or a bad rank", name);
    return QP_OK;
}

/* dtype check plus an element count; `want` 0 skips the count. */
static qp_status expect(const binder *b, const qp_tensor *t, qp_dtype dt, size_t want, const char *rule) {
    if (t->dtype != dt) {
        char m[160];
        snprintf(m, sizeof m, "tensor '%s' must be %s, got %s", t->name, qp_dtype_name(dt), qp_dtype_name(t->dtype));
        return fail(b, t->name, "%s", m);
    }
    if (want && elem_count(t) != want) {
        char sh[96], m[320];
        shape_str(t, sh, sizeof sh);
        snprintf(m, sizeof m, "tensor '%s' has shape %s: %s", t->name, sh, rule);
        return fail(b, t->name, "%s", m);
    }
    return QP_OK;
}

static qp_status oom(const binder *b) {
    return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, b->layer, "out of memory preparing the layer");
}

static bool is_float(qp_dtype d) { return d == QP_DTYPE_F32 || d == QP_DTYPE_F16 || d == QP_DTYPE_BF16; }

/* A float tensor converted into dtype `dt` (fp32, or fp16/bf16 bits), as
 * torch's copy_ into a parameter of that dtype makes it: exact when the
 * checkpoint holds `dt` or widens into it, otherwise rounded to nearest
 * even. `want` 0 skips the count; `accepts` says what the message asks. */
static qp_status convert(const binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                         const char *rule, const char *accepts, const void **out) {
    if (!is_float(t->dtype)) {
        char m[200];
        snprintf(m, sizeof m, "tensor '%s' must be a float tensor (%s), got %s", t->name, accepts, qp_dtype_name(t->dtype));
        return fail(b, t->name, "%s", m);
    }
    qp_status s = expect(b, t, t->dtype, want, rule);
    if (s) return s;
    if (t->dtype == dt) { *out = t->data; return QP_OK; }
    size_t n = elem_count(t);
    void *o = keep(st, malloc(qp_num_elem_size(dt) * (n ? n : 1)));
    if (!o) return oom(b);
    for (size_t i = 0; i < n; i++) qp_num_store(dt, o, i, qp_num_load(t->dtype, t->data, i));
    *out = o;
    return QP_OK;
}

/* A float tensor as fp32 values. vLLM creates its scale parameters in fp32
 * and its weight loaders copy_ whatever float dtype the checkpoint holds
 * into them: f16 and bf16 widen exactly (Quark writes scales in the model
 * dtype). */
static qp_status widen(const binder *b, qp_lin_desc_store *st, const qp_tensor *t, size_t want, const char *rule,
                       const float **out) {
    return convert(b, st, t, QP_DTYPE_F32, want, rule, "f32, f16 or bf16", (const void **)out);
}

/* A float tensor in the params dtype `dt` (unquantized weights, biases,
 * W4A16 scales). */
static qp_status to_params(const binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                           const char *rule, const void **out) {
    char accepts[64];
    snprintf(accepts, sizeof accepts, "the params dtype %s, or f32/f16/bf16", qp_dtype_name(dt));
    return convert(b, st, t, dt, want, rule, accepts, out);
}

/* Per-shard scalars → one per row (convert_to_channelwise, docs/semantics.md §15). */
static qp_status channelwise(const binder *b, qp_lin_desc_store *st, const qp_tensor *ws, const float *v, int N,
                             const qp_linear_options *o, const float **out, int *per_channel) {
    size_t n = elem_count(ws);
    float *sc = keep(st, malloc(sizeof(float) * (size_t)N));
    if (!sc) return oom(b);
    if (n == (size_t)N && (N > 1 || ws->ndim >= 1)) {
        memcpy(sc, v, sizeof(float) * (size_t)N);
        *per_channel = n > 1 || (ws->ndim == 2 && ws->shape[1] == 1);
    } else if (n == 1) {
        for (int i = 0; i < N; i++) sc[i] = v[0];
        *per_channel = 0;
    } else if (o->n_shards == n && o->shard_rows) {
        qp_status s = qp_scale_to_channelwise(b->ctx, v, o->shard_rows, n, sc, (size_t)N);
        if (s) return s;
        *per_channel = 0;
    } else {
        char sh[96], m[256];
        shape_str(ws, sh, sizeof sh);
        snprintf(m, sizeof m, "weight_scale has shape %s: expected [%d], [%d, 1], [1] or one per shard (qp_linear_options.shard_rows)", sh, N, N);
        return fail(b, "weight_scale", "%s", m);
    }
    *out = sc;
    return QP_OK;
}

static qp_status bind_bias(const binder *b, qp_lin_desc_store *st, qp_lin_desc *d) {
    const qp_tensor *t;
    qp_status s = find(b, "bias", false, &t);
    if (s || !t) return s;
    const void *v;
    s = to_params(b, st, t, d->act_dtype, (size_t)d->N, "bias must have N elements", &v);
    if (!s) d->bias = v;
    return s;
}

/* The largest of a scalar-per-shard fp32 tensor (process-after-loading takes
 * the max over fused shards: docs/semantics.md §7, §8, §16). */
static qp_status max_scalar(const binder *b, qp_lin_desc_store *st, const char *name, float *out) {
    const qp_tensor *t;
    const float *v;
    qp_status s;
    if ((s = find(b, name, true, &t)) || (s = widen(b, st, t, 0, "", &v))) return s;
    size_t n = elem_count(t);
    if (!n) return fail(b, name, "%s is empty", name);
    *out = v[0];
    for (size_t i = 1; i < n; i++) *out = fmaxf(*out, v[i]);
    return QP_OK;
}

qp_status qp_bind_int8(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    const qp_tensor *w, *ws, *is = NULL, *iz = NULL, *wz;
    size_t NK = (size_t)d->N * (size_t)d->K;
    qp_status s;
    if ((s = find(b, "weight", true, &w)) || (s = expect(b, w, QP_DTYPE_I8, NK, "expected [N, K]"))) return s;
    const float *wsv, *sv;
    if ((s = find(b, "weight_scale", true, &ws)) || (s = widen(b, st, ws, 0, "", &wsv))) return s;
    if ((s = find(b, "weight_zero_point", false, &wz))) return s; /* dropped unvalidated, docs/semantics.md §15 */
    if ((s = channelwise(b, st, ws, wsv, d->N, o, &d->w_scale, &d->w_per_channel))) return s;
    d->w_i8 = w->data;
    d->act_symmetric = d->scheme.activation.symmetric;
    if (d->scheme.activation.dynamic) {
        d->act = QP_ACT_INT8_DYNAMIC_TOKEN;
    } else {
        d->act = QP_ACT_INT8_STATIC;
        if ((s = find(b, "input_scale", true, &is)) || (s = widen(b, st, is, 0, "", &sv))) return s;
        size_t ns = elem_count(is);
        if (!ns) return fail(b, "input_scale", "%s", "input_scale is empty");
        if (d->act_symmetric) {
            if ((s = find(b, "input_zero_point", false, &iz))) return s; /* dropped, docs/semantics.md §15 */
            float mx = sv[0]; /* docs/semantics.md §15: max over shards */
            for (size_t i = 1; i < ns; i++) mx = fmaxf(mx, sv[i]);
            d->input_scale = mx;
        } else {
            if ((s = find(b, "input_zero_point", true, &iz))) return s;
            if (elem_count(iz) != ns || (iz->dtype != QP_DTYPE_I8 && iz->dtype != QP_DTYPE_I32))
                return fail(b, "input_zero_point", "%s", "input_zero_point must be int8 or int32 with one entry per input_scale entry");
            int32_t *zp = keep(st, malloc(sizeof(int32_t) * ns));
            if (!zp) return oom(b);
            for (size_t i = 0; i < ns; i++)
                zp[i] = iz->dtype == QP_DTYPE_I8 ? ((const int8_t *)iz->data)[i] : ((const int32_t *)iz->data)[i];
            if ((s = qp_int8_static_asym_rebuild(b->ctx, sv, zp, ns, &d->input_scale, &d->input_zp))) return s;
        }
    }
    if (!d->act_symmetric) {
        /* docs/semantics.md §15: azp_adj = column sums (wrapping int32), times azp when static */
        int32_t *adj = keep(st, malloc(sizeof(int32_t) * (size_t)d->N));
        if (!adj) return oom(b);
        for (int n = 0; n < d->N; n++) {
            uint32_t sum = 0;
            for (int k = 0; k < d->K; k++) sum += (uint32_t)(int32_t)d->w_i8[(size_t)n * d->K + k];
            if (d->act == QP_ACT_INT8_STATIC) sum *= (uint32_t)d->input_zp;
            adj[n] = (int32_t)sum;
        }
        d->azp_adj = adj;
    }
    return QP_OK;
}

qp_status qp_bind_fp8(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    const qp_tensor *w, *ws;
    size_t NK = (size_t)d->N * (size_t)d->K;
    qp_status s;
    if ((s = find(b, "weight", true, &w)) || (s = expect(b, w, QP_DTYPE_F8_E4M3FN, NK, "expected [N, K]"))) return s;
    /* HF fp8 with weight_block_size names its block scales weight_scale_inv
     * (vLLM Fp8LinearMethod, DeepSeek's name; a dequant multiplier, not
     * inverted); Quark's per-block scheme calls them weight_scale (docs/semantics.md §16) */
    const char *sname = d->kind == QP_SCHEME_W8A8_FP8_BLOCK && d->scheme.kind == QP_SCHEME_HF_FP8 ? "weight_scale_inv"
                                                                                                   : "weight_scale";
    if ((s = find(b, sname, true, &ws))) return s;
    const qp_qtensor *a = &d->scheme.activation;
    if (d->kind == QP_SCHEME_W8A8_FP8_BLOCK) {
        size_t nb = (size_t)(d->N + 127) / 128 * (size_t)((d->K + 127) / 128);
        if (ws->dtype == QP_DTYPE_E8M0) {
            if ((s = expect(b, ws, QP_DTYPE_E8M0, nb, "expected [ceil(N/128), ceil(K/128)]"))) return s;
            float *f = keep(st, malloc(sizeof(float) * nb));
            if (!f) return oom(b);
            qp_format_decode_array(QP_DTYPE_E8M0, ws->data, nb, f);
            d->w_scale = f;
        } else {
            if ((s = widen(b, st, ws, nb, "expected [ceil(N/128), ceil(K/128)]", &d->w_scale))) return s;
        }
        if (d->K % 128) return fail(b, "weight", "%s", "per-block fp8 needs K to be a multiple of 128 (per-token-group activations)");
        d->w_u8 = w->data;
        d->act = QP_ACT_FP8_GROUP128;
        d->ue8m0 = o->act_ue8m0 != 0;
        d->w_per_channel = 1;
        return QP_OK;
    }
    const float *wsv;
    if ((s = widen(b, st, ws, 0, "", &wsv))) return s;
    size_t nws = elem_count(ws);
    d->w_u8 = w->data;
    if (nws > 1 && nws != (size_t)d->N && d->scheme.weight.granularity != QP_GRAN_CHANNEL) {
        /* per-tensor shards: requantize_with_max_scale (docs/semantics.md §16) */
        if (o->n_shards != nws || !o->shard_rows)
            return fail(b, "weight_scale", "%s", "one weight_scale per shard needs qp_linear_options.shard_rows");
        uint8_t *wq = keep(st, malloc(NK));
        float *sc = keep(st, malloc(sizeof(float) * (size_t)d->N));
        if (!wq || !sc) return oom(b);
        memcpy(wq, w->data, NK);
        float smax;
        if ((s = qp_fp8_requantize_max_scale(b->ctx, wq, d->K, o->shard_rows, nws, wsv, &smax))) return s;
        for (int i = 0; i < d->N; i++) sc[i] = smax;
        d->w_u8 = wq;
        d->w_scale = sc;
        d->w_per_channel = 0;
    } else if ((s = channelwise(b, st, ws, wsv, d->N, o, &d->w_scale, &d->w_per_channel))) {
        return s;
    }
    if (!a->dynamic) {
        d->act = QP_ACT_FP8_STATIC;
        if ((s = max_scalar(b, st, "input_scale", &d->input_scale))) return s;
    } else {
        d->act = a->granularity == QP_GRAN_TOKEN || a->granularity == QP_GRAN_CHANNEL ? QP_ACT_FP8_DYNAMIC_TOKEN
                                                                                        : QP_ACT_FP8_DYNAMIC_TENSOR;
    }
    return QP_OK;
}

qp_status qp_bind_qqq(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    const qp_tensor *B, *sc, *sg;
    int K = d->K, N = d->N, g = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : -1;
    qp_status s;
    if (d->act_dtype != QP_DTYPE_F16) /* QQQLinearMethod.create_weights (docs/semantics.md §9) */
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, NULL, b->layer, "The params dtype must be float16, but got %s",
                            d->act_dtype == QP_DTYPE_BF16 ? "torch.bfloat16"
                            : d->act_dtype == QP_DTYPE_F32 ? "torch.float32" : qp_dtype_name(d->act_dtype));
    /* QQQLinearMethod.create_weights (docs/semantics.md §9), vLLM's messages */
    if (N % 64)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "B", b->layer,
                            "Weight output_size_per_partition = %d is not divisible by min_n_threads = 64.", N);
    if (K % 128)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "B", b->layer,
                            "Weight input_size_per_partition = %d is not divisible by min_k_threads = 128.", K);
    if ((s = find(b, "B", true, &B)) || (s = expect(b, B, QP_DTYPE_I32, (size_t)K / 16 * 2 * (size_t)N, "expected [K/16, 2N]")))
        return s;
    if ((s = find(b, "s_channel", true, &sc)) || (s = expect(b, sc, QP_DTYPE_F32, (size_t)N, "expected [1, N]"))) return s;
    if ((s = find(b, "s_group", g == 128, &sg))) return s;
    if (g == 128 && (s = expect(b, sg, QP_DTYPE_F16, (size_t)K / 128 * (size_t)N, "expected [K/128, N]"))) return s;
    if (g != 128 && sg && elem_count(sg))
        return fail(b, "s_group", "%s", "per-channel QQQ has an empty s_group");
    size_t kn = (size_t)K * N;
    int8_t *qkn = keep(st, malloc(kn)), *q4 = keep(st, malloc(kn)), *w8 = keep(st, malloc(kn));
    float *s_ch = keep(st, malloc(sizeof(float) * (size_t)N));
    uint16_t *s_g = g == 128 ? keep(st, malloc(sizeof(uint16_t) * (size_t)(K / 128) * N)) : NULL;
    if (!qkn || !q4 || !w8 || !s_ch || (g == 128 && !s_g)) return oom(b);
    if ((s = qp_qqq_unpack_weight(b->ctx, B->data, K, N, g, qkn))) return s;
    if ((s = qp_qqq_unpermute_scales(b->ctx, sc->data, g == 128 ? sg->data : NULL, K, N, g, s_ch, s_g))) return s;
    /* natural [K][N] -> canonical [N][K]; the exact int8 weight of docs/semantics.md §11 step 2 */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int8_t c = qkn[(size_t)k * N + n];
            q4[(size_t)n * K + k] = c;
            w8[(size_t)n * K + k] =
                g == 128 ? qp_ref_qqq_group_weight(c - 8, s_g[(size_t)(k / 128) * N + n]) : (int8_t)(16 * c);
        }
    d->group_size = g;
    d->q4 = q4;
    d->w8 = w8;
    d->s_channel = s_ch;
    d->s_group = s_g;
    d->marlin_B = B->data;
    d->marlin_s_channel = sc->data;
    d->marlin_s_group = g == 128 ? sg->data : NULL;
    d->act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d->act_symmetric = 1;
    return QP_OK;
}


/* W4A16 (docs/semantics.md §17): Quark's packed int32 words -> codes [N][K], scales and
 * zero points [G][N]; the scale tensor may carry vLLM's 8*ceil(N/8) pad. */
qp_status qp_bind_w4a16(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    int K = d->K, N = d->N, gs = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : -1;
    int g = gs > 0 ? gs : K, nc = (N + 7) / 8;
    if (K % g)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight_scale", b->layer,
                            "input size %d is not divisible by the group size %d", K, gs);
    int G = K / g;
    bool sym = d->scheme.weight.symmetric;
    const qp_tensor *w, *sc, *zp;
    qp_status s;
    if ((s = find(b, "weight", true, &w)) || (s = expect(b, w, QP_DTYPE_I32, (size_t)K * nc, "expected [K, ceil(N/8)]")))
        return s;
    if ((s = find(b, "weight_scale", true, &sc))) return s;
    /* the scale parameter is [G, 8*ceil(N/8)] in the params dtype; a float
     * checkpoint scale of another dtype is copy_'d into it (rounded) */
    size_t ns = elem_count(sc);
    if (!is_float(sc->dtype) || (ns != (size_t)G * N && ns != (size_t)G * 8 * nc)) {
        char sh[96], pad[32] = "", m[320];
        shape_str(sc, sh, sizeof sh);
        if (8 * nc != N) snprintf(pad, sizeof pad, " or [%d, %d]", G, 8 * nc);
        snprintf(m, sizeof m, "tensor 'weight_scale' must be a float tensor [%d, %d]%s (loaded into the params dtype %s), got %s %s",
                 G, N, pad, qp_dtype_name(d->act_dtype), qp_dtype_name(sc->dtype), sh);
        return fail(b, "weight_scale", "%s", m);
    }
    /* vLLM creates weight_zero_point for symmetric layers too and ignores
     * it (Quark writes zeros there); it must still fit the parameter */
    if ((s = find(b, "weight_zero_point", !sym, &zp))) return s;
    if (zp && (s = expect(b, zp, QP_DTYPE_I32, (size_t)G * nc, "expected [K/group_size, ceil(N/8)]"))) return s;
    size_t nk = (size_t)N * K, gn = (size_t)G * N;
    uint8_t *kn = malloc(nk > gn ? nk : gn);
    uint8_t *q4 = keep(st, malloc(nk)), *z = sym ? NULL : keep(st, malloc(gn));
    float *f = keep(st, malloc(sizeof(float) * gn));
    if (!kn || !q4 || !f || (!sym && !z)) { free(kn); return oom(b); }
    s = qp_unpack_int4_quark(w->data, K, N, d->scheme.pack_method, kn);
    for (int k = 0; !s && k < K; k++)
        for (int n = 0; n < N; n++) q4[(size_t)n * K + k] = kn[(size_t)k * N + n];
    if (!s && !sym) {
        s = qp_unpack_int4_quark(zp->data, G, N, d->scheme.pack_method, kn);
        if (!s) memcpy(z, kn, gn);
    }
    free(kn);
    if (s) return fail(b, "weight", "%s", "cannot unpack the int4 words (pack_method must be order or reorder)");
    size_t stride = ns == gn ? (size_t)N : (size_t)8 * nc;
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++)
            f[(size_t)gi * N + n] = qp_num_round(d->act_dtype, qp_num_load(sc->dtype, sc->data, (size_t)gi * stride + n));
    d->q4 = (const int8_t *)q4;
    d->w4_signed = sym;
    d->w4_zero = z;
    d->w4_scale = f;
    d->group_size = gs;
    d->act = QP_ACT_NONE;
    return QP_OK;
}

/* Element codes of a packed MX / NVFP4 weight, one per byte, [N][K]. */
static qp_status unpack_codes(const binder *b, qp_lin_desc_store *st, const qp_tensor *w, qp_dtype elem, qp_lin_desc *d) {
    size_t N = (size_t)d->N, K = (size_t)d->K;
    uint8_t *c = keep(st, malloc(N * K));
    if (!c) return oom(b);
    const uint8_t *p = w->data;
    for (size_t n = 0; n < N; n++) {
        qp_status s = QP_OK;
        if (elem == QP_DTYPE_F4_E2M1) s = qp_unpack_fp4(p + n * (K / 2), K, c + n * K);
        else if (elem == QP_DTYPE_F8_E4M3FN) memcpy(c + n * K, p + n * K, K);
        else s = qp_unpack_fp6(p + n * (K * 3 / 4), K, c + n * K);
        if (s) return fail(b, "weight", "%s", "cannot unpack the weight codes");
    }
    float *lut = keep(st, calloc(256, sizeof(float)));
    if (!lut) return oom(b);
    int bits = qp_format_bits(elem);
    for (uint32_t i = 0; i < (1u << bits) && i < 256; i++) lut[i] = qp_format_decode(elem, i);
    d->w_elem = elem;
    d->w_codes = c;
    d->w_lut = lut;
    return QP_OK;
}

/* The e8m0 block scales of MX weights, [rows][K/32] as stored (E8M0 or
 * U8), one fp32 dequant multiplier per (row, block) after each element
 * format's rule (docs/semantics.md §6, ref_ocp_mx.c dequant_row). */
static qp_status mx_scales(const binder *b, qp_lin_desc_store *st, qp_dtype elem, int R, qp_lin_desc *d) {
    const qp_tensor *ws;
    qp_status s;
    size_t nb = (size_t)d->K / 32, rows = ((size_t)d->N + (size_t)R - 1) / (size_t)R;
    if ((s = find(b, "weight_scale", true, &ws))) return s;
    if ((s = expect(b, ws, ws->dtype == QP_DTYPE_U8 ? QP_DTYPE_U8 : QP_DTYPE_E8M0, rows * nb,
                    R > 1 ? "expected [ceil(N/R), K/32] for per_block [R, 32] scales" : "expected [N, K/32]")))
        return s;
    float *f = keep(st, malloc(sizeof(float) * (size_t)d->N * nb));
    if (!f) return oom(b);
    const uint8_t *e = ws->data;
    for (int n = 0; n < d->N; n++)
        for (size_t j = 0; j < nb; j++) {
            uint8_t x = e[(size_t)(n / R) * nb + j];
            float m;
            if (elem == QP_DTYPE_F4_E2M1) m = qp_num_e8m0_hmul_scale(d->act_dtype, x);
            else if (elem == QP_DTYPE_F8_E4M3FN) m = x == 255 ? NAN : ldexpf(1.0f, (int)x - 127);
            else m = qp_num_round(d->act_dtype, ldexpf(1.0f, (int)x - 127));
            f[(size_t)n * nb + j] = m;
        }
    d->w_blk = 32;
    d->w_blk_scale = f;
    return QP_OK;
}

static size_t packed_row(qp_dtype elem, size_t K) {
    return elem == QP_DTYPE_F4_E2M1 ? K / 2 : elem == QP_DTYPE_F8_E4M3FN ? K : K * 3 / 4;
}

qp_status qp_bind_ocp_mx(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    qp_dtype we = d->scheme.weight.dtype;
    const qp_qtensor *a = &d->scheme.activation;
    qp_ocp_mx_act act = a->dtype == QP_DTYPE_NONE          ? QP_OCP_MX_ACT_NONE
                        : a->dtype == QP_DTYPE_F4_E2M1     ? QP_OCP_MX_ACT_MXFP4
                        : a->dtype == QP_DTYPE_F6_E3M2     ? QP_OCP_MX_ACT_MXFP6_E3M2
                        : a->dtype == QP_DTYPE_F6_E2M3     ? QP_OCP_MX_ACT_MXFP6_E2M3
                        : a->granularity == QP_GRAN_GROUP  ? QP_OCP_MX_ACT_MXFP8
                        : a->dynamic                       ? QP_OCP_MX_ACT_FP8_DYNAMIC
                                                           : QP_OCP_MX_ACT_FP8_STATIC;
    qp_status s = qp_ocp_mx_check_pair(b->ctx, we, act);
    if (s) return s;
    if (d->K % 32)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight", b->layer,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", d->K);
    int R = d->scheme.weight.granularity == QP_GRAN_BLOCK && d->scheme.weight.block[0] > 0 ? d->scheme.weight.block[0] : 1;
    const qp_tensor *w;
    qp_dtype wdt = we == QP_DTYPE_F8_E4M3FN ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8;
    if ((s = find(b, "weight", true, &w))) return s;
    if (w->dtype == QP_DTYPE_U8) wdt = QP_DTYPE_U8;
    if ((s = expect(b, w, wdt, (size_t)d->N * packed_row(we, (size_t)d->K),
                    we == QP_DTYPE_F4_E2M1 ? "expected [N, K/2] (two fp4 codes per byte)"
                    : we == QP_DTYPE_F8_E4M3FN ? "expected [N, K]" : "expected [N, 3K/4] (four fp6 codes per 3 bytes)")))
        return s;
    if ((s = unpack_codes(b, st, w, we, d)) || (s = mx_scales(b, st, we, R, d))) return s;
    static const qp_dtype ae[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3, QP_DTYPE_F8_E4M3FN};
    static const int mb[] = {0, 1, 2, 3, 3}, em[] = {0, 2, 4, 2, 8}; /* get_dtype_params, docs/semantics.md §6 */
    d->act = act == QP_OCP_MX_ACT_NONE ? QP_ACT_NONE : QP_ACT_MX_QDQ;
    d->act_elem = ae[act];
    d->act_mbits = mb[act];
    d->act_emax = em[act];
    return QP_OK;
}

qp_status qp_bind_w4a8_mxfp4(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    if (d->K % 32)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight", b->layer,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", d->K);
    const qp_tensor *w;
    qp_status s;
    if ((s = find(b, "weight", true, &w)) ||
        (s = expect(b, w, QP_DTYPE_U8, (size_t)d->N * d->K / 2, "expected [N, K/2] (two fp4 codes per byte)")))
        return s;
    if ((s = unpack_codes(b, st, w, QP_DTYPE_F4_E2M1, d)) || (s = mx_scales(b, st, QP_DTYPE_F4_E2M1, 1, d)) ||
        (s = max_scalar(b, st, "input_scale", &d->input_scale)))
        return s;
    if (!(d->input_scale > 0.0f) || isinf(d->input_scale))
        return fail(b, "input_scale", "input_scale must be finite and > 0 (got %s)", d->input_scale != d->input_scale ? "nan" : "<= 0 or inf");
    d->act = QP_ACT_FP8_STATIC_QDQ;
    return QP_OK;
}

qp_status qp_bind_nvfp4(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    int K = d->K, N = d->N;
    if (K % 16) /* QuarkNVFP4.create_weights (docs/semantics.md §8) */
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight", b->layer,
                            "Input size per partition (%d) must be divisible by group size (16)", K);
    const qp_tensor *w, *ws;
    qp_status s;
    float w2;
    if ((s = find(b, "weight", true, &w)) ||
        (s = expect(b, w, QP_DTYPE_U8, (size_t)N * K / 2, "expected [N, K/2] (two fp4 codes per byte)")))
        return s;
    if ((s = find(b, "weight_scale", true, &ws)) ||
        (s = expect(b, ws, QP_DTYPE_F8_E4M3FN, (size_t)N * K / 16, "expected [N, K/16]")))
        return s;
    if ((s = max_scalar(b, st, "weight_scale_2", &w2)) || (s = max_scalar(b, st, "input_scale_2", &d->input_global_scale)))
        return s;
    if (isnan(w2)) return fail(b, "weight_scale_2", "%s", "weight_scale_2 is NaN");
    if (!(d->input_global_scale > 0.0f) || isinf(d->input_global_scale))
        return fail(b, "input_scale_2", "%s", "the input global scale (input_scale_2) must be finite and > 0");
    if ((s = unpack_codes(b, st, w, QP_DTYPE_F4_E2M1, d))) return s;
    size_t nb = (size_t)K / 16;
    float *f = keep(st, malloc(sizeof(float) * (size_t)N * nb));
    if (!f) return oom(b);
    const uint8_t *sf = ws->data;
    /* dequantize_to_dtype: the block factor e4m3(sf) * weight_global_scale in fp32 */
    for (size_t i = 0; i < (size_t)N * nb; i++) f[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[i]) * w2;
    d->w_blk = 16;
    d->w_blk_scale = f;
    d->act = QP_ACT_NVFP4_QDQ;
    d->bias_after_round = 1;
    return QP_OK;
}

qp_status qp_bind_unquantized(const binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    const qp_tensor *w;
    qp_status s;
    const void *v;
    if ((s = find(b, "weight", true, &w)) ||
        (s = to_params(b, st, w, d->act_dtype, (size_t)d->N * d->K, "expected [N, K]", &v)))
        return s;
    d->w_act = v;
    d->act = QP_ACT_NONE;
    return QP_OK;
}

/* Quark online input rotation (vLLM QuarkConfig.maybe_update_config /
 * get_quant_method): a square int8 +-1 Hadamard `input_rotation`, on MXFP4
 * layers only. */
static qp_status bind_rotation(const binder *b, qp_lin_desc *d) {
    const qp_tensor *t;
    qp_status s = find(b, "input_rotation", false, &t);
    if (s || !t) return s;
    if (t->dtype != QP_DTYPE_I8 || t->ndim != 2 || t->shape[0] != t->shape[1] || t->shape[0] <= 0) {
        char sh[96], m[320];
        shape_str(t, sh, sizeof sh);
        snprintf(m, sizeof m, "%s.input_rotation: only square int8 (Hadamard) input rotations are supported, got "
                 "dtype=%s shape=%s. Trained rotations are not supported.", b->layer, qp_dtype_name(t->dtype), sh);
        return qp_error_set(b->ctx, QP_ERR_UNSUPPORTED, NULL, "input_rotation", b->layer, "%s", m);
    }
    bool mxfp4 = d->kind == QP_SCHEME_W4A8_MXFP4_FP8 || (d->kind == QP_SCHEME_OCP_MX && d->w_elem == QP_DTYPE_F4_E2M1);
    if (!mxfp4)
        return qp_error_set(b->ctx, QP_ERR_UNSUPPORTED, NULL, "input_rotation", b->layer,
                            "%s: Quark online input rotation is only supported on MXFP4 linear layers, not with "
                            "weight=%s.", b->layer, d->scheme.weight_key[0] ? d->scheme.weight_key : qp_scheme_kind_name(d->kind));
    int r = (int)t->shape[0];
    if (d->K % r)
        return fail(b, "input_rotation", "the input size is not a multiple of the rotation size %s", "(K % rotation_size != 0)");
    const int8_t *H = t->data;
    for (size_t i = 0; i < (size_t)r * r; i++)
        if (H[i] != 1 && H[i] != -1)
            return fail(b, "input_rotation", "%s", "input_rotation entries must be +1 or -1 (a Hadamard matrix)");
    /* orthogonal rows (H H^T = r I); skipped past 512, where it costs more
     * than the layer's own preparation */
    for (int i = 0; r <= 512 && i < r; i++)
        for (int j = i + 1; j < r; j++) {
            int dot = 0;
            for (int k = 0; k < r; k++) dot += H[(size_t)i * r + k] * H[(size_t)j * r + k];
            if (dot) return fail(b, "input_rotation", "%s", "input_rotation rows are not orthogonal: not a Hadamard matrix");
        }
    d->rotation = H;
    d->rotation_size = r;
    return QP_OK;
}

/* Caller-supplied tensors: a name, a qport dtype, a rank of 0 .. 4, dims
 * >= 0 whose product does not overflow, and data wherever there are
 * elements. */
qp_status qp_tensors_check(qp_context *ctx, const char *layer, const qp_tensor *t, size_t n, size_t max_n) {
    if (max_n && n > max_n)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "n_tensors", layer,
                            "n_tensors = %zu: a layer has at most %zu checkpoint tensors", n, max_n);
    for (size_t i = 0; i < n; i++) {
        const char *nm = t[i].name ? t[i].name : "(null)";
        if (!t[i].name)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "tensors", layer, "tensors[%zu] has no name", i);
        if ((int)t[i].dtype <= QP_DTYPE_NONE || (int)t[i].dtype >= QP_DTYPE_COUNT_)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, nm, layer, "tensor '%s' has no qport dtype (%d)", nm,
                                (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > QP_TENSOR_MAX_DIMS)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, nm, layer, "tensor '%s' has rank %d (0 .. %d)", nm,
                                t[i].ndim, QP_TENSOR_MAX_DIMS);
        size_t cnt = 1;
        for (int k = 0; k < t[i].ndim; k++) {
            int64_t v = t[i].shape[k];
            if (v < 0 || (uint64_t)v > SIZE_MAX / 8 || (v && cnt > SIZE_MAX / 8 / (size_t)v))
                return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, nm, layer,
                                    "tensor '%s': dimension %d is %lld (negative, or the element count overflows)", nm, k,
                                    (long long)v);
            cnt *= (size_t)v;
        }
        if (cnt && !t[i].data)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, nm, layer, "tensor '%s' has %zu elements and no data", nm,
                                cnt);
    }
    return QP_OK;
}

/* Every caller-supplied size is checked before anything is read or
 * allocated from it: the layer shape, the tensors' ranks, dims,
 * dtypes and data, the scheme's group and block sizes, and the fused
 * shards' rows, which must sum to N (the binders index the weight by them). */
static qp_status check_args(qp_context *ctx, const char *layer, const qp_scheme *s, int N, int K, const qp_tensor *t,
                            size_t n, const qp_linear_options *o) {
    if (N <= 0 || K <= 0 || N > QP_DIM_MAX || K > QP_DIM_MAX)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, N <= 0 || N > QP_DIM_MAX ? "N" : "K", layer,
                            "bad layer shape N = %d, K = %d (each must be in 1 .. %d)", N, K, QP_DIM_MAX);
    if (n && !t)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "tensors", layer, "tensors is NULL with n_tensors = %zu", n);
    qp_status st = qp_tensors_check(ctx, layer, t, n, 64);
    if (st) return st;
    const qp_qtensor *q[2] = {&s->weight, &s->activation};
    for (int i = 0; i < 2; i++)
        if (q[i]->group_size < -1 || q[i]->group_size > QP_DIM_MAX || q[i]->block[0] < 0 || q[i]->block[1] < 0 ||
            q[i]->block[0] > QP_DIM_MAX || q[i]->block[1] > QP_DIM_MAX)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, i ? "scheme.activation" : "scheme.weight", layer,
                                "scheme %s: group_size %d or block [%d, %d] out of range (-1 .. %d)",
                                i ? "activation" : "weight", q[i]->group_size, q[i]->block[0], q[i]->block[1], QP_DIM_MAX);
    if (o->n_shards && !o->shard_rows)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "shard_rows", layer,
                            "qp_linear_options.shard_rows is NULL with n_shards = %zu", o->n_shards);
    if (o->n_shards > 64)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "n_shards", layer,
                            "qp_linear_options.n_shards = %zu: at most 64 shards", o->n_shards);
    if (o->n_shards) {
        long long sum = 0;
        for (size_t i = 0; i < o->n_shards; i++) {
            if (o->shard_rows[i] < 0)
                return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "shard_rows", layer,
                                    "qp_linear_options.shard_rows[%zu] = %d is negative", i, o->shard_rows[i]);
            sum += o->shard_rows[i];
        }
        if (sum != N)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "shard_rows", layer,
                                "qp_linear_options.shard_rows sum to %lld rows, not the layer's N = %d", sum, N);
    }
    return QP_OK;
}

qp_status qp_lin_desc_build(qp_context *ctx, const qp_scheme *scheme, int N, int K, const qp_tensor *t, size_t n,
                            const qp_linear_options *o, qp_lin_desc *d, qp_lin_desc_store **store) {
    *store = NULL;
    memset(d, 0, sizeof *d);
    const char *layer = o->layer ? o->layer : "";
    qp_status cs = check_args(ctx, layer, scheme, N, K, t, n, o);
    if (cs) return cs;
    /* vLLM's model dtypes; the bias follows act_dtype (bind_bias) */
    if (o->act_dtype != QP_DTYPE_F16 && o->act_dtype != QP_DTYPE_BF16 && o->act_dtype != QP_DTYPE_F32)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer,
                            "activations must be fp16, bf16 or fp32, got %s", qp_dtype_name(o->act_dtype));
    qp_lin_desc_store *st = calloc(1, sizeof *st);
    bool *used = calloc(n ? n : 1, sizeof(bool));
    if (!st || !used) { free(st); free(used); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory"); }
    binder b = {ctx, layer, t, n, used};
    d->struct_size = sizeof *d;
    d->scheme = *scheme;
    d->kind = scheme->kind == QP_SCHEME_HF_FP8 ? (scheme->weight.granularity == QP_GRAN_BLOCK ? QP_SCHEME_W8A8_FP8_BLOCK
                                                                                               : QP_SCHEME_W8A8_FP8)
                                               : scheme->kind;
    d->act_dtype = o->act_dtype;
    d->N = N;
    d->K = K;
    d->layer = layer;
    d->tensors = t;
    d->n_tensors = n;
    qp_status s;
    const qp_scheme_row *row = qp_scheme_row_of(d->kind);
    d->family = row->family;
    s = row->bind ? row->bind(&b, st, o, d)
                  : qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer, "scheme %s is not a linear layer qport runs",
                                 qp_scheme_kind_name(scheme->kind));
    if (!s) s = bind_rotation(&b, d);
    if (!s) s = bind_bias(&b, st, d);
    for (size_t i = 0; !s && i < n; i++)
        if (!used[i])
            s = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, t[i].name ? t[i].name : "(null)", layer,
                             "unexpected tensor '%s' for scheme %s", t[i].name ? t[i].name : "(null)",
                             qp_scheme_kind_name(scheme->kind));
    free(used);
    if (s) { qp_lin_desc_free(st); return s; }
    *store = st;
    return QP_OK;
}
