/* The fp8 KV cache's per-tensor scales of one attention layer, as vLLM's
 * QuarkKVCacheMethod (BaseKVCacheMethod.process_weights_after_loading)
 * ends up with them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

/* The scale under any of the names vLLM's loaders map onto attn.<which>:
 * Quark's <prefix>.{k,v}_proj.output_scale (get_cache_scale_mapper), the
 * plain <prefix>.{k,v}_scale and the already-mapped <prefix>.attn.*. */
static qp_status find_scale(const qp_model *m, const char *prefix, char which, float *out, int *found) {
    char names[3][512];
    snprintf(names[0], sizeof names[0], "%s.%c_proj.output_scale", prefix, which);
    snprintf(names[1], sizeof names[1], "%s.%c_scale", prefix, which);
    snprintf(names[2], sizeof names[2], "%s.attn.%c_scale", prefix, which);
    *found = 0;
    for (int i = 0; i < 3; i++) {
        qp_tensor t;
        if (qp_model_find_tensor(m, names[i], &t) != QP_OK) continue;
        size_t n = 1;
        for (int d = 0; d < t.ndim; d++) n *= (size_t)t.shape[d];
        if (n != 1 || (t.dtype != QP_DTYPE_F32 && t.dtype != QP_DTYPE_F16 && t.dtype != QP_DTYPE_BF16))
            return qp_error_set(m->ctx, QP_ERR_VALUE, NULL, names[i], prefix,
                                "Only support per-tensor scaling factor for fp8 KV cache");
        *out = t.dtype == QP_DTYPE_F32 ? *(const float *)t.data : qp_format_decode(t.dtype, *(const uint16_t *)t.data);
        *found = 1;
        return QP_OK;
    }
    return QP_OK;
}

QP_API qp_status qp_model_kv_scales(const qp_model *m, const char *prefix, float *k_scale, float *v_scale) {
    if (!m || !prefix || !k_scale || !v_scale) return QP_ERR_INVALID_ARGUMENT;
    qp_context *ctx = m->ctx;
    const qp_config *cfg = qp_model_config(m);
    qp_qtensor kv;
    if (!cfg || qp_config_kv_cache(cfg, &kv) != QP_OK || kv.dtype == QP_DTYPE_NONE)
        return qp_error_set(ctx, QP_ERR_NOT_FOUND, NULL, "kv_cache_group", prefix,
                            "the quantization config does not quantize the KV cache");
    float k = -1.0f, v = -1.0f;
    int fk, fv;
    qp_status st = find_scale(m, prefix, 'k', &k, &fk);
    if (!st) st = find_scale(m, prefix, 'v', &v, &fv);
    if (st) return st;
    if (fk && fv) {
        /* both loaded: used as they are */
    } else if (!fk && !fv) {
        /* neither: vLLM's default of 1.0 (it warns of accuracy issues) */
        k = v = 1.0f;
    } else if (!fk) {
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "k_scale", prefix,
                            "the checkpoint has a v_scale but no k_scale for %s (vLLM asserts k_scale > 0)", prefix);
    } else {
        v = k; /* one scale given: vLLM duplicates max(k_scale, v_scale) = k_scale */
    }
    if (!(k > 0.0f) || !(v > 0.0f) || isinf(k) || isinf(v))
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "k_scale", prefix,
                            "KV-cache scales must be finite and > 0 (k_scale %g, v_scale %g)", (double)k, (double)v);
    *k_scale = k;
    *v_scale = v;
    return QP_OK;
}
