/* The binders' shared rules: finding a layer's checkpoint tensors by name,
 * dtype and shape checks that name the tensor and the rule, float tensors
 * converted as vLLM's parameters receive them (copy_ into fp32 scales or
 * params-dtype tensors), per-shard scalars, and the storage a built
 * qp_lin_desc points into. The per-scheme binders (bind_*.c) use these.
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

#include "binder.h"

struct qp_lin_desc_store {
    void *allocs[24];
    int n;
};

void *qp_binder_keep(qp_lin_desc_store *s, void *p) {
    if (p && s->n < 24) s->allocs[s->n++] = p;
    else if (p) { free(p); p = NULL; }
    return p;
}

void qp_lin_desc_free(qp_lin_desc_store *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->allocs[i]);
    free(s);
}

size_t qp_tensor_count(const qp_tensor *t) {
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


void qp_binder_shape_str(const qp_tensor *t, char *out, size_t cap) {
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < t->ndim && o < cap; d++)
        o += (size_t)snprintf(out + o, cap - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (o < cap) snprintf(out + o, cap - o, "]");
}

qp_status qp_binder_fail(const qp_binder *b, const char *tensor, const char *fmt, const char *detail) {
    return qp_error_set(b->ctx, QP_ERR_INVALID_ARGUMENT, NULL, tensor, b->layer, fmt, detail);
}

/* The tensor called `name`; required ones missing are an error. */
qp_status qp_binder_find(const qp_binder *b, const char *name, bool required, const qp_tensor **out) {
    *out = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->t[i].name && !strcmp(b->t[i].name, name)) {
            if (*out) return qp_binder_fail(b, name, "tensor '%s' given twice", name);
            *out = &b->t[i];
            b->used[i] = true;
        }
    if (!*out && required) return qp_binder_fail(b, name, "missing checkpoint tensor '%s'", name);
    if (*out && (!(*out)->data || (*out)->ndim < 0 || (*out)->ndim > QP_TENSOR_MAX_DIMS))
        return qp_binder_fail(b, name, "tensor '%s' has no data or a bad rank", name);
    return QP_OK;
}

/* dtype check plus an element count; `want` 0 skips the count. */
qp_status qp_binder_expect(const qp_binder *b, const qp_tensor *t, qp_dtype dt, size_t want, const char *rule) {
    if (t->dtype != dt) {
        char m[160];
        snprintf(m, sizeof m, "tensor '%s' must be %s, got %s", t->name, qp_dtype_name(dt), qp_dtype_name(t->dtype));
        return qp_binder_fail(b, t->name, "%s", m);
    }
    if (want && qp_tensor_count(t) != want) {
        char sh[96], m[320];
        qp_binder_shape_str(t, sh, sizeof sh);
        snprintf(m, sizeof m, "tensor '%s' has shape %s: %s", t->name, sh, rule);
        return qp_binder_fail(b, t->name, "%s", m);
    }
    return QP_OK;
}

qp_status qp_binder_oom(const qp_binder *b) {
    return qp_error_set(b->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, b->layer, "out of memory preparing the layer");
}

bool qp_dtype_is_float(qp_dtype d) { return d == QP_DTYPE_F32 || d == QP_DTYPE_F16 || d == QP_DTYPE_BF16; }

/* A float tensor converted into dtype `dt` (fp32, or fp16/bf16 bits), as
 * torch's copy_ into a parameter of that dtype makes it: exact when the
 * checkpoint holds `dt` or widens into it, otherwise rounded to nearest
 * even. `want` 0 skips the count; `accepts` says what the message asks. */
qp_status qp_binder_convert(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                         const char *rule, const char *accepts, const void **out) {
    if (!qp_dtype_is_float(t->dtype)) {
        char m[200];
        snprintf(m, sizeof m, "tensor '%s' must be a float tensor (%s), got %s", t->name, accepts, qp_dtype_name(t->dtype));
        return qp_binder_fail(b, t->name, "%s", m);
    }
    qp_status s = qp_binder_expect(b, t, t->dtype, want, rule);
    if (s) return s;
    if (t->dtype == dt) { *out = t->data; return QP_OK; }
    size_t n = qp_tensor_count(t);
    void *o = qp_binder_keep(st, malloc(qp_num_elem_size(dt) * (n ? n : 1)));
    if (!o) return qp_binder_oom(b);
    for (size_t i = 0; i < n; i++) qp_num_store(dt, o, i, qp_num_load(t->dtype, t->data, i));
    *out = o;
    return QP_OK;
}

/* A float tensor as fp32 values. vLLM creates its scale parameters in fp32
 * and its weight loaders copy_ whatever float dtype the checkpoint holds
 * into them: f16 and bf16 widen exactly (Quark writes scales in the model
 * dtype). */
qp_status qp_binder_widen(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, size_t want, const char *rule,
                       const float **out) {
    return qp_binder_convert(b, st, t, QP_DTYPE_F32, want, rule, "f32, f16 or bf16", (const void **)out);
}

/* A float tensor in the params dtype `dt` (unquantized weights, biases,
 * W4A16 scales). */
qp_status qp_binder_to_params(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                           const char *rule, const void **out) {
    char accepts[64];
    snprintf(accepts, sizeof accepts, "the params dtype %s, or f32/f16/bf16", qp_dtype_name(dt));
    return qp_binder_convert(b, st, t, dt, want, rule, accepts, out);
}

/* Per-shard scalars → one per row (convert_to_channelwise, docs/semantics.md §15). */
qp_status qp_binder_channelwise(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *ws, const float *v, int N,
                             const qp_linear_options *o, const float **out, int *per_channel) {
    size_t n = qp_tensor_count(ws);
    float *sc = qp_binder_keep(st, malloc(sizeof(float) * (size_t)N));
    if (!sc) return qp_binder_oom(b);
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
        qp_binder_shape_str(ws, sh, sizeof sh);
        snprintf(m, sizeof m, "weight_scale has shape %s: expected [%d], [%d, 1], [1] or one per shard (qp_linear_options.shard_rows)", sh, N, N);
        return qp_binder_fail(b, "weight_scale", "%s", m);
    }
    *out = sc;
    return QP_OK;
}

qp_status qp_binder_bias(const qp_binder *b, qp_lin_desc_store *st, qp_lin_desc *d) {
    const qp_tensor *t;
    qp_status s = qp_binder_find(b, "bias", false, &t);
    if (s || !t) return s;
    const void *v;
    s = qp_binder_to_params(b, st, t, d->act_dtype, (size_t)d->N, "bias must have N elements", &v);
    if (!s) d->bias = v;
    return s;
}

/* The largest of a scalar-per-shard fp32 tensor (process-after-loading takes
 * the max over fused shards: docs/semantics.md §7, §8, §16). */
qp_status qp_binder_max_scalar(const qp_binder *b, qp_lin_desc_store *st, const char *name, float *out) {
    const qp_tensor *t;
    const float *v;
    qp_status s;
    if ((s = qp_binder_find(b, name, true, &t)) || (s = qp_binder_widen(b, st, t, 0, "", &v))) return s;
    size_t n = qp_tensor_count(t);
    if (!n) return qp_binder_fail(b, name, "%s is empty", name);
    *out = v[0];
    for (size_t i = 1; i < n; i++) *out = fmaxf(*out, v[i]);
    return QP_OK;
}
qp_lin_desc_store *qp_lin_desc_store_new(void) { return calloc(1, sizeof(qp_lin_desc_store)); }

qp_status qp_binder_positive_scalar(const qp_binder *b, qp_lin_desc_store *st, const char *name, float *out) {
    qp_status s = qp_binder_max_scalar(b, st, name, out);
    if (s || (*out > 0.0f && !isinf(*out))) return s;
    char m[96];
    snprintf(m, sizeof m, "%s must be finite and > 0", name);
    return qp_binder_fail(b, name, "%s", m);
}
