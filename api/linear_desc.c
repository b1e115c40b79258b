/* From checkpoint tensors to the canonical layer description every backend
 * prepares from (backend.h qp_lin_desc): the caller's sizes checked, then
 * the kind's binder (its row in scheme_table.c; bind_*.c), the online
 * rotation and the bias, and every tensor accounted for (docs/semantics.md
 * §9, §10, §11, §15, §16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"

qp_status qp_bind_unquantized(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    const qp_tensor *w;
    qp_status s;
    const void *v;
    if ((s = qp_binder_find(b, "weight", true, &w)) ||
        (s = qp_binder_to_params(b, st, w, d->act_dtype, (size_t)d->N * d->K, "expected [N, K]", &v)))
        return s;
    d->w_act = v;
    d->act = QP_ACT_NONE;
    return QP_OK;
}

/* Quark online input rotation (vLLM QuarkConfig.maybe_update_config /
 * get_quant_method): a square int8 +-1 Hadamard `input_rotation`, on MXFP4
 * layers only. */
static qp_status bind_rotation(const qp_binder *b, qp_lin_desc *d) {
    const qp_tensor *t;
    qp_status s = qp_binder_find(b, "input_rotation", false, &t);
    if (s || !t) return s;
    if (t->dtype != QP_DTYPE_I8 || t->ndim != 2 || t->shape[0] != t->shape[1] || t->shape[0] <= 0) {
        char sh[96], m[320];
        qp_binder_shape_str(t, sh, sizeof sh);
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
        return qp_binder_fail(b, "input_rotation", "the input size is not a multiple of the rotation size %s", "(K % rotation_size != 0)");
    const int8_t *H = t->data;
    for (size_t i = 0; i < (size_t)r * r; i++)
        if (H[i] != 1 && H[i] != -1)
            return qp_binder_fail(b, "input_rotation", "%s", "input_rotation entries must be +1 or -1 (a Hadamard matrix)");
    /* orthogonal rows (H H^T = r I); skipped past 512, where it costs more
     * than the layer's own preparation */
    for (int i = 0; r <= 512 && i < r; i++)
        for (int j = i + 1; j < r; j++) {
            int dot = 0;
            for (int k = 0; k < r; k++) dot += H[(size_t)i * r + k] * H[(size_t)j * r + k];
            if (dot) return qp_binder_fail(b, "input_rotation", "%s", "input_rotation rows are not orthogonal: not a Hadamard matrix");
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
    /* vLLM's model dtypes; the bias follows act_dtype (qp_binder_bias) */
    if (o->act_dtype != QP_DTYPE_F16 && o->act_dtype != QP_DTYPE_BF16 && o->act_dtype != QP_DTYPE_F32)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer,
                            "activations must be fp16, bf16 or fp32, got %s", qp_dtype_name(o->act_dtype));
    qp_lin_desc_store *st = qp_lin_desc_store_new();
    bool *used = calloc(n ? n : 1, sizeof(bool));
    if (!st || !used) { free(st); free(used); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory"); }
    qp_binder b = {ctx, layer, t, n, used};
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
    bool ct = qp_scheme_is_ct(scheme);
    qp_lin_bind_fn bind = ct ? row->bind_ct : row->bind;
    s = bind ? bind(&b, st, o, d)
        : ct && row->bind ? qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer,
                                         "scheme %s is not bound from compressed-tensors checkpoints",
                                         qp_scheme_kind_name(scheme->kind))
        : qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, NULL, layer, "scheme %s is not a linear layer qport runs",
                       qp_scheme_kind_name(scheme->kind));
    if (!s) s = bind_rotation(&b, d);
    if (!s) s = qp_binder_bias(&b, st, d);
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
