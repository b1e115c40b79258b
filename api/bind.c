/* Layer binding: the checkpoint tensors of one linear layer of a
 * model directory, with vLLM's handling of fused layers (q/k/v, gate/up
 * shards concatenated along the output dimension, per-shard scalars
 * stacked so process-after-loading can treat them per shard) and of
 * tensor-parallel partitions (column-parallel layers split N, row-parallel
 * o_proj/down_proj split K, the bias of a row-parallel layer only on rank
 * 0, as RowParallelLinear adds it once after the all-reduce). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define MAX_T 16
#define MAX_SHARDS 8

typedef struct part { char suffix[48]; qp_tensor t; void *owned; } part;

QP_API void qp_bind_options_init(qp_bind_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->tp_size = 1;
    o->ep_size = 1;
}

static int is_row_parallel(const char *layer) {
    const char *dot = strrchr(layer, '.');
    const char *p = dot ? dot + 1 : layer;
    static const char *const rows[] = {"o_proj", "down_proj", "out_proj", "dense_4h_to_h", "c_proj", "w2", "wo"};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if (!strcmp(p, rows[i])) return 1;
    return 0;
}

QP_API int qp_layer_is_row_parallel(const char *layer) { return layer ? is_row_parallel(layer) : 0; }

qp_status qp_model_copy(const qp_model *m, void *dst, const void *src, size_t n) {
    qp_status st = QP_OK;
    for (size_t i = 0; i < m->n_files; i++)
        if (qp_safetensors_pread(m->files[i], dst, src, n, &st)) return st;
    if (n) memcpy(dst, src, n); /* a copy the binding owns already */
    return QP_OK;
}

/* Copies the [lo, hi) slice of dimension `dim` (2-D or 1-D) into *out. */
static qp_status slice(const qp_model *m, const qp_tensor *t, int dim, int64_t lo, int64_t hi, void **out) {
    size_t es = qp_dtype_elem_bytes(t->dtype);
    int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    if (t->ndim == 1) dim = 1;
    int64_t r0 = dim == 0 ? lo : 0, r1 = dim == 0 ? hi : rows, c0 = dim == 1 ? lo : 0, c1 = dim == 1 ? hi : cols;
    char *o = malloc((size_t)((r1 - r0) * (c1 - c0)) * es + 1), *w = o;
    *out = o;
    if (!o) return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, NULL, "out of memory");
    qp_status st = QP_OK;
    if (c0 == 0 && c1 == cols) /* whole rows: one read */
        return qp_model_copy(m, o, (const char *)t->data + (size_t)(r0 * cols) * es, (size_t)((r1 - r0) * cols) * es);
    for (int64_t r = r0; r < r1 && !st; r++, w += (size_t)(c1 - c0) * es)
        st = qp_model_copy(m, w, (const char *)t->data + ((size_t)(r * cols + c0)) * es, (size_t)(c1 - c0) * es);
    return st;
}

/* The shards still the size they were opened with (before mapped bytes
 * are read in place). */
static qp_status check_mapped(const qp_model *m) {
    for (size_t i = 0; i < m->n_files; i++) {
        qp_status st = qp_safetensors_check(m->files[i]);
        if (st) return st;
    }
    return QP_OK;
}

static qp_status collect(qp_model *m, const char *prefix, part *p, size_t *n) {
    size_t pl = strlen(prefix);
    *n = 0;
    char dotted[1100];
    if (pl + 2 > sizeof dotted)
        return qp_error_set(m->ctx, QP_ERR_INVALID_ARGUMENT, m->dir, NULL, prefix, "layer name of %zu bytes is too long", pl);
    snprintf(dotted, sizeof dotted, "%s.", prefix);
    for (size_t i = 0; i < m->n_files; i++) {
        /* "<prefix>.*" from the shard's name index, in header order (issue
         * 31: binding a layer no longer scans every tensor) */
        size_t *idx, ni;
        qp_status ps = qp_safetensors_prefixed(m->files[i], dotted, &idx, &ni);
        if (ps) return ps;
        for (size_t k = 0; k < ni; k++) {
            qp_tensor t;
            if (qp_safetensors_get(m->files[i], idx[k], &t, NULL)) continue;
            if (strncmp(t.name, prefix, pl) || t.name[pl] != '.' || strchr(t.name + pl + 1, '.')) continue;
            const char *suf = t.name + pl + 1;
            if (!strcmp(suf, "output_scale")) continue; /* the KV-cache scale belongs to the attention layer */
            /* routing state: the router's fp32 parameter, read by
             * qp_model_moe_options, never an input of the linear layer */
            if (!strcmp(suf, "e_score_correction_bias")) continue;
            if (*n >= MAX_T || strlen(suf) >= sizeof p->suffix) {
                free(idx);
                return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, t.name, prefix, "too many tensors or a long name");
            }
            snprintf(p[*n].suffix, sizeof p[*n].suffix, "%s", suf);
            p[*n].t = t;
            p[*n].owned = NULL;
            (*n)++;
        }
        free(idx);
    }
    return QP_OK;
}

static const part *get(const part *p, size_t n, const char *suffix) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(p[i].suffix, suffix)) return &p[i];
    return NULL;
}

QP_API void qp_layer_binding_free(qp_layer_binding *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_tensors; i++) free(b->owned_[i]);
    memset(b, 0, sizeof *b);
}

/* QQQ group-128 checkpoints whose s_group makes (code - 8) * s_group leave
 * int8: vLLM's Marlin-QQQ kernel rebuilds the int8 weight with its fp16
 * trick and wraps (docs/semantics.md §11), where GPTQModel's own kernel
 * saturates. qport computes what vLLM computes, and says at load how many
 * groups of the layer differ from a saturating reconstruction. */
static void qqq_wrap_warning(qp_model *m, const char *layer, const qp_layer_binding *b) {
    const qp_tensor *B = NULL, *sc = NULL, *sg = NULL;
    for (size_t i = 0; i < b->n_tensors; i++) {
        if (!strcmp(b->tensors[i].name, "B")) B = &b->tensors[i];
        else if (!strcmp(b->tensors[i].name, "s_channel")) sc = &b->tensors[i];
        else if (!strcmp(b->tensors[i].name, "s_group")) sg = &b->tensors[i];
    }
    int K = b->K, N = b->N;
    if (b->scheme.weight.group_size != 128 || !B || !sc || !sg || B->dtype != QP_DTYPE_I32 || sg->dtype != QP_DTYPE_F16 ||
        sc->dtype != QP_DTYPE_F32 || K <= 0 || N <= 0 || K % 128 || qp_tensor_bytes(B) != (size_t)K / 16 * 2 * (size_t)N * 4 ||
        qp_tensor_bytes(sg) != (size_t)K / 128 * (size_t)N * 2 || qp_tensor_bytes(sc) != (size_t)N * 4)
        return; /* the binder's checks report these */
    size_t kn = (size_t)K * (size_t)N, groups = (size_t)K / 128 * (size_t)N, bad = 0;
    int8_t *q = malloc(kn);
    float *s_ch = malloc(sizeof(float) * (size_t)N);
    uint16_t *s_g = malloc(sizeof(uint16_t) * groups);
    double smax = 0;
    if (q && s_ch && s_g && !qp_qqq_unpack_weight(m->ctx, B->data, K, N, 128, q) &&
        !qp_qqq_unpermute_scales(m->ctx, sc->data, sg->data, K, N, 128, s_ch, s_g)) {
        for (int g = 0; g < K / 128; g++)
            for (int n = 0; n < N; n++) {
                uint16_t sb = s_g[(size_t)g * N + n];
                double s = qp_format_decode(QP_DTYPE_F16, sb);
                int wraps = 0;
                for (int k = g * 128; k < g * 128 + 128 && !wraps; k++) {
                    int t = q[(size_t)k * N + n] - 8;
                    double v = nearbyint((double)t * s);
                    v = v > 127 ? 127 : v < -128 ? -128 : v; /* saturating */
                    wraps = qp_ref_qqq_group_weight(t, sb) != (int8_t)v;
                }
                if (wraps) { bad++; smax = s > smax ? s : smax; }
            }
        if (bad)
            qp_log(m->ctx, QP_LOG_WARN,
                   "%s: %zu of %zu QQQ weight groups have (code - 8) * s_group outside int8 (s_group up to %g): vLLM's "
                   "Marlin-QQQ kernel wraps them (docs/semantics.md §11) and qport computes as vLLM does; GPTQModel's own kernel "
                   "saturates them (docs/loading.md)",
                   layer, bad, groups, smax);
    }
    free(q); free(s_ch); free(s_g);
}

/* A shard's compressed-tensors weight_shape: int64 or int32 [2], [N, K]. */
static qp_status shape_pair(qp_model *m, const part *p, const char *src, int64_t *n, int64_t *k) {
    const qp_tensor *t = &p->t;
    if ((t->dtype != QP_DTYPE_I64 && t->dtype != QP_DTYPE_I32) || t->ndim != 1 || t->shape[0] != 2)
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_shape", src, "weight_shape must be int64 or int32 [2]");
    qp_status st = check_mapped(m); /* before the shard's bytes are read */
    if (st) return st;
    int64_t v[2];
    qp_ct_weight_shape(t, v);
    if (v[0] <= 0 || v[1] <= 0 || v[0] > QP_DIM_MAX || v[1] > QP_DIM_MAX)
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_shape", src, "weight_shape [%lld, %lld] is out of range",
                            (long long)v[0], (long long)v[1]);
    *n = v[0];
    *k = v[1];
    return QP_OK;
}

QP_API qp_status qp_model_bind_layer(qp_model *m, const char *layer, const qp_bind_options *opts, qp_layer_binding *b) {
    if (!m || !layer || !b) return QP_ERR_INVALID_ARGUMENT;
    memset(b, 0, sizeof *b);
    qp_bind_options o;
    qp_bind_options_init(&o);
    if (opts) o = *opts;
    if (o.tp_size < 1 || o.tp_rank < 0 || o.tp_rank >= o.tp_size)
        return qp_error_set(m->ctx, QP_ERR_INVALID_ARGUMENT, m->dir, NULL, layer, "tp rank %d of size %d", o.tp_rank, o.tp_size);
    if (!m->cfg)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, "quantization_config", layer,
                            "the model has no quantization_config (quantize it with `qport quantize`)");
    snprintf(b->layer, sizeof b->layer, "%s", layer);
    qp_status st = QP_OK;
    if (qp_model_layer_unquantized(m, layer)) {
        /* an MoE router: vLLM builds it with quant_config=None (api/bind_moe.c) */
        qp_scheme_init(&b->scheme, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(&b->scheme, "UnquantizedLinearMethod", NULL, NULL, NULL);
    } else if ((st = qp_config_resolve(m->cfg, layer, QP_LAYER_LINEAR, o.resolve, &b->scheme))) {
        return st;
    }
    const char *const *shards;
    size_t ns;
    const char *proj;
    if ((st = qp_config_layer_shards(m->cfg, layer, o.resolve, &shards, &ns, &proj))) return st;
    /* per-shard tensors on disk, or the fused layer stored as one */
    char *src[MAX_SHARDS];
    size_t nsrc = 0;
    part parts[MAX_SHARDS][MAX_T];
    size_t np[MAX_SHARDS];
    if (ns > MAX_SHARDS) return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, NULL, layer, "more than %d shards", MAX_SHARDS);
    for (size_t i = 0; i < ns; i++) {
        src[i] = qp_str_replace_all(layer, proj, shards[i]);
        if (!src[i]) { nsrc = i; st = qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, layer, "out of memory"); goto done; }
        nsrc = i + 1;
        if ((st = collect(m, src[i], parts[i], &np[i]))) goto done;
        if (!np[i]) break;
    }
    if (!ns || !np[0]) {
        for (size_t i = 0; i < nsrc; i++) free(src[i]);
        nsrc = 1;
        src[0] = strdup(layer);
        if (!src[0] || (st = collect(m, layer, parts[0], &np[0]))) goto done;
    }
    for (size_t i = 0; i < nsrc; i++)
        if (!np[i]) { st = qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, NULL, src[i], "no tensors for '%s' in the checkpoint", src[i]); goto done; }
    qp_scheme_kind kind = b->scheme.kind;
    if (kind == QP_SCHEME_NONE) {
        st = qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, NULL, layer, "not quantized (vLLM: %s)",
                          b->scheme.method[0] ? b->scheme.method : "no quant method");
        goto done;
    }
    /* compressed-tensors keeps integer and fp4 weights as weight_packed
     * [N, packed K] with the true [N, K] in weight_shape (api/bind_ct.c) */
    int ct = qp_scheme_is_ct(&b->scheme), ct_int = ct && (kind == QP_SCHEME_W4A16_INT4 || kind == QP_SCHEME_WNA16);
    int ct_packed = ct_int || (ct && (kind == QP_SCHEME_NVFP4 || kind == QP_SCHEME_NVFP4_A16));
    int kmajor = kind == QP_SCHEME_QQQ_W4A8 || (kind == QP_SCHEME_W4A16_INT4 && !ct);
    const char *wname = kind == QP_SCHEME_QQQ_W4A8 ? "B" : ct_packed ? "weight_packed" : "weight";
    int row = is_row_parallel(layer), tp = o.tp_size, rank = o.tp_rank;
    int64_t Ntot = 0, K = -1;
    for (size_t s = 0; s < nsrc; s++) {
        const part *w = get(parts[s], np[s], wname);
        if (!w || w->t.ndim != 2) { st = qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, wname, src[s], "missing 2-D '%s'", wname); goto done; }
        int64_t n_i = kind == QP_SCHEME_QQQ_W4A8 ? w->t.shape[1] / 2 : kmajor ? w->t.shape[1] * 8 : w->t.shape[0];
        int64_t kd = kmajor ? w->t.shape[0] : w->t.shape[1];
        int64_t k_i = kind == QP_SCHEME_QQQ_W4A8 ? kd * 16
                    : ct_int ? kd * (b->scheme.weight.dtype == QP_DTYPE_I8 || b->scheme.weight.dtype == QP_DTYPE_U8 ? 4 : 8)
                    : b->scheme.weight.dtype == QP_DTYPE_F4_E2M1 ? kd * 2
                    : b->scheme.weight.dtype == QP_DTYPE_F6_E2M3 || b->scheme.weight.dtype == QP_DTYPE_F6_E3M2 ? kd * 4 / 3 : kd;
        const part *wsh = ct ? get(parts[s], np[s], "weight_shape") : NULL;
        if (wsh && (st = shape_pair(m, wsh, src[s], &n_i, &k_i))) goto done;
        if (K >= 0 && k_i != K) { st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, wname, src[s], "shard input size %lld differs from %lld", (long long)k_i, (long long)K); goto done; }
        K = k_i;
        /* tensor parallel: slice each shard's tensors (spec: vLLM's weight loaders) */
        int64_t part_n = n_i;
        if (tp > 1) {
            int64_t total = row ? K : n_i;
            if (total % tp) {
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, NULL, src[s], "%lld is not divisible by %d", (long long)total, tp);
                goto done;
            }
            if (!row) part_n = n_i / tp;
            for (size_t i = 0; i < np[s]; i++) {
                part *p = &parts[s][i];
                qp_tensor *t = &p->t;
                if (row && !strcmp(p->suffix, "bias")) { if (rank) t->ndim = -1; continue; }
                if (!strcmp(p->suffix, "input_rotation")) continue; /* acts on blocks of k, never split */
                if (!strcmp(p->suffix, "weight_shape")) continue;   /* rewritten for the fused layer below */
                for (int d = 0; d < t->ndim && t->ndim <= 2; d++) {
                    int is_n = t->ndim == 1 ? (t->shape[0] == n_i && n_i > 1) : (kmajor ? d == 1 : d == 0);
                    int is_k = t->ndim == 2 && !is_n;
                    if (t->shape[d] == 1 || (row ? !is_k : !is_n)) continue;
                    if (t->shape[d] % tp) {
                        st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, p->suffix, src[s], "%lld is not divisible by %d",
                                          (long long)t->shape[d], tp);
                        goto done;
                    }
                    int64_t len = t->shape[d] / tp;
                    void *c;
                    st = slice(m, t, d, len * rank, len * (rank + 1), &c);
                    if (st) { free(c); goto done; }
                    free(p->owned);
                    p->owned = c;
                    t->data = c;
                    t->shape[d] = len;
                }
            }
            if (row) K /= tp;
        }
        b->shard_rows[s] = (int)part_n;
        Ntot += part_n;
    }
    b->N = (int)Ntot;
    b->K = (int)K;
    b->n_shards = nsrc > 1 ? nsrc : 0;
    /* fuse: concatenate along N, stack per-shard scalars */
    for (size_t i = 0; i < np[0]; i++) {
        const part *p0 = &parts[0][i];
        if (p0->t.ndim < 0) continue;
        size_t es = qp_dtype_elem_bytes(p0->t.dtype), total = 0;
        int scalar = 1;
        size_t ns = nsrc; /* shards merged into this tensor */
        for (size_t s = 0; s < nsrc; s++) {
            const part *p = get(parts[s], np[s], p0->suffix);
            if (!p || p->t.dtype != p0->t.dtype || p->t.ndim != p0->t.ndim) {
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, p0->suffix, src[s], "shard tensor missing or of another type");
                goto done;
            }
            size_t bytes = qp_tensor_bytes(&p->t);
            total += bytes;
            scalar &= bytes == es;
        }
        if (!strcmp(p0->suffix, "input_rotation")) {
            /* QuarkConfig._input_rotation_size: one rotation for all shards */
            for (size_t s = 1; s < nsrc; s++) {
                const qp_tensor *q = &get(parts[s], np[s], p0->suffix)->t;
                if ((st = check_mapped(m))) goto done;
                if (q->shape[0] != p0->t.shape[0] || q->shape[1] != p0->t.shape[1] ||
                    memcmp(q->data, p0->t.data, qp_tensor_bytes(q))) {
                    st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, p0->suffix, layer,
                                      "The shards of %s must all use the same input rotation.", layer);
                    goto done;
                }
            }
            total = qp_tensor_bytes(&p0->t);
            ns = 1;
        }
        int nk_shape = ct && !strcmp(p0->suffix, "weight_shape"); /* the bound layer's [N, K], each shard's checked above */
        if (nk_shape) {
            total = 16;
            ns = 1;
        }
        qp_tensor *t = &b->tensors[b->n_tensors];
        char *buf = malloc(total ? total : 1);
        if (!buf) { st = qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, layer, "out of memory"); goto done; }
        b->owned_[b->n_tensors] = buf;
        memcpy(b->names_[b->n_tensors], p0->suffix, sizeof p0->suffix); /* both 48 bytes, NUL-terminated */
        *t = p0->t;
        t->name = b->names_[b->n_tensors];
        t->data = buf;
        b->n_tensors++;
        if (nk_shape) {
            int64_t nk[2] = {b->N, b->K};
            memcpy(buf, nk, sizeof nk);
            t->dtype = QP_DTYPE_I64;
            t->ndim = 1;
            t->shape[0] = 2;
            continue;
        }
        int cat_dim = p0->t.ndim == 2 && kmajor ? 1 : 0;
        if (ns > 1 && scalar) { t->ndim = 1; t->shape[0] = (int64_t)ns; }
        else if (ns > 1) {
            t->shape[cat_dim] = 0;
            for (size_t s = 0; s < ns; s++) t->shape[cat_dim] += get(parts[s], np[s], p0->suffix)->t.shape[cat_dim];
        }
        if (cat_dim == 1 && ns > 1 && !scalar) { /* interleave rows of the shards */
            int64_t rows = p0->t.shape[0];
            char *w = buf;
            for (int64_t r = 0; r < rows; r++)
                for (size_t s = 0; s < ns; s++) {
                    const qp_tensor *q = &get(parts[s], np[s], p0->suffix)->t;
                    size_t rb = (size_t)q->shape[1] * es;
                    if ((st = qp_model_copy(m, w, (const char *)q->data + (size_t)r * rb, rb))) goto done;
                    w += rb;
                }
        } else {
            char *w = buf;
            for (size_t s = 0; s < ns; s++) {
                const qp_tensor *q = &get(parts[s], np[s], p0->suffix)->t;
                if ((st = qp_model_copy(m, w, q->data, qp_tensor_bytes(q)))) goto done;
                w += qp_tensor_bytes(q);
            }
        }
    }
    if (kind == QP_SCHEME_QQQ_W4A8) qqq_wrap_warning(m, layer, b);
done:
    for (size_t s = 0; s < nsrc; s++) {
        for (size_t i = 0; i < np[s] && s < MAX_SHARDS; i++) free(parts[s][i].owned);
        free(src[s]);
    }
    if (st) qp_layer_binding_free(b);
    return st;
}
