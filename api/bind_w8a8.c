/* The W8A8 binders: int8 (docs/semantics.md §14, §15) and fp8 per tensor,
 * channel and block (§16), from Quark, HF fp8 and compressed-tensors
 * checkpoints (the same tensor names). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"

qp_status qp_bind_int8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    const qp_tensor *w, *ws, *is = NULL, *iz = NULL, *wz;
    size_t NK = (size_t)d->N * (size_t)d->K;
    qp_status s;
    if ((s = qp_binder_find(b, "weight", true, &w)) || (s = qp_binder_expect(b, w, QP_DTYPE_I8, NK, "expected [N, K]"))) return s;
    const float *wsv, *sv;
    if ((s = qp_binder_find(b, "weight_scale", true, &ws)) || (s = qp_binder_widen(b, st, ws, 0, "", &wsv))) return s;
    if ((s = qp_binder_find(b, "weight_zero_point", false, &wz))) return s; /* dropped unvalidated, docs/semantics.md §15 */
    if ((s = qp_binder_channelwise(b, st, ws, wsv, d->N, o, &d->w_scale, &d->w_per_channel))) return s;
    d->w_i8 = w->data;
    d->act_symmetric = d->scheme.activation.symmetric;
    if (d->scheme.activation.dynamic) {
        d->act = QP_ACT_INT8_DYNAMIC_TOKEN;
    } else {
        d->act = QP_ACT_INT8_STATIC;
        if ((s = qp_binder_find(b, "input_scale", true, &is)) || (s = qp_binder_widen(b, st, is, 0, "", &sv))) return s;
        size_t ns = qp_tensor_count(is);
        if (!ns) return qp_binder_fail(b, "input_scale", "%s", "input_scale is empty");
        if (d->act_symmetric) {
            if ((s = qp_binder_find(b, "input_zero_point", false, &iz))) return s; /* dropped, docs/semantics.md §15 */
            float mx = sv[0]; /* docs/semantics.md §15: max over shards */
            for (size_t i = 1; i < ns; i++) mx = fmaxf(mx, sv[i]);
            d->input_scale = mx;
        } else {
            if ((s = qp_binder_find(b, "input_zero_point", true, &iz))) return s;
            if (qp_tensor_count(iz) != ns || (iz->dtype != QP_DTYPE_I8 && iz->dtype != QP_DTYPE_I32))
                return qp_binder_fail(b, "input_zero_point", "%s", "input_zero_point must be int8 or int32 with one entry per input_scale entry");
            int32_t *zp = qp_binder_keep(st, malloc(sizeof(int32_t) * ns));
            if (!zp) return qp_binder_oom(b);
            for (size_t i = 0; i < ns; i++)
                zp[i] = iz->dtype == QP_DTYPE_I8 ? ((const int8_t *)iz->data)[i] : ((const int32_t *)iz->data)[i];
            if ((s = qp_int8_static_asym_rebuild(b->ctx, sv, zp, ns, &d->input_scale, &d->input_zp))) return s;
        }
    }
    if (!d->act_symmetric) {
        /* docs/semantics.md §15: azp_adj = column sums (wrapping int32), times azp when static */
        int32_t *adj = qp_binder_keep(st, malloc(sizeof(int32_t) * (size_t)d->N));
        if (!adj) return qp_binder_oom(b);
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

qp_status qp_bind_fp8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    const qp_tensor *w, *ws;
    size_t NK = (size_t)d->N * (size_t)d->K;
    qp_status s;
    if ((s = qp_binder_find(b, "weight", true, &w)) || (s = qp_binder_expect(b, w, QP_DTYPE_F8_E4M3FN, NK, "expected [N, K]"))) return s;
    /* HF fp8 with weight_block_size names its block scales weight_scale_inv
     * (vLLM Fp8LinearMethod, DeepSeek's name; a dequant multiplier, not
     * inverted); Quark's per-block scheme calls them weight_scale (docs/semantics.md §16) */
    const char *sname = d->kind == QP_SCHEME_W8A8_FP8_BLOCK && d->scheme.kind == QP_SCHEME_HF_FP8 ? "weight_scale_inv"
                                                                                                   : "weight_scale";
    if ((s = qp_binder_find(b, sname, true, &ws))) return s;
    const qp_qtensor *a = &d->scheme.activation;
    if (d->kind == QP_SCHEME_W8A8_FP8_BLOCK) {
        size_t nb = (size_t)(d->N + 127) / 128 * (size_t)((d->K + 127) / 128);
        if (ws->dtype == QP_DTYPE_E8M0) {
            if ((s = qp_binder_expect(b, ws, QP_DTYPE_E8M0, nb, "expected [ceil(N/128), ceil(K/128)]"))) return s;
            float *f = qp_binder_keep(st, malloc(sizeof(float) * nb));
            if (!f) return qp_binder_oom(b);
            qp_format_decode_array(QP_DTYPE_E8M0, ws->data, nb, f);
            d->w_scale = f;
        } else {
            if ((s = qp_binder_widen(b, st, ws, nb, "expected [ceil(N/128), ceil(K/128)]", &d->w_scale))) return s;
        }
        if (d->K % 128) return qp_binder_fail(b, "weight", "%s", "per-block fp8 needs K to be a multiple of 128 (per-token-group activations)");
        d->w_u8 = w->data;
        d->act = QP_ACT_FP8_GROUP128;
        d->ue8m0 = o->act_ue8m0 != 0;
        d->w_per_channel = 1;
        return QP_OK;
    }
    const float *wsv;
    if ((s = qp_binder_widen(b, st, ws, 0, "", &wsv))) return s;
    size_t nws = qp_tensor_count(ws);
    d->w_u8 = w->data;
    if (nws > 1 && nws != (size_t)d->N && d->scheme.weight.granularity != QP_GRAN_CHANNEL) {
        /* per-tensor shards: requantize_with_max_scale (docs/semantics.md §16) */
        if (o->n_shards != nws || !o->shard_rows)
            return qp_binder_fail(b, "weight_scale", "%s", "one weight_scale per shard needs qp_linear_options.shard_rows");
        uint8_t *wq = qp_binder_keep(st, malloc(NK));
        float *sc = qp_binder_keep(st, malloc(sizeof(float) * (size_t)d->N));
        if (!wq || !sc) return qp_binder_oom(b);
        memcpy(wq, w->data, NK);
        float smax;
        if ((s = qp_fp8_requantize_max_scale(b->ctx, wq, d->K, o->shard_rows, nws, wsv, &smax))) return s;
        for (int i = 0; i < d->N; i++) sc[i] = smax;
        d->w_u8 = wq;
        d->w_scale = sc;
        d->w_per_channel = 0;
    } else if ((s = qp_binder_channelwise(b, st, ws, wsv, d->N, o, &d->w_scale, &d->w_per_channel))) {
        return s;
    }
    if (!a->dynamic) {
        d->act = QP_ACT_FP8_STATIC;
        if ((s = qp_binder_max_scalar(b, st, "input_scale", &d->input_scale))) return s;
    } else {
        d->act = a->granularity == QP_GRAN_TOKEN || a->granularity == QP_GRAN_CHANNEL ? QP_ACT_FP8_DYNAMIC_TOKEN
                                                                                        : QP_ACT_FP8_DYNAMIC_TENSOR;
    }
    return QP_OK;
}
