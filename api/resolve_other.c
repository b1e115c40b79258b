/* QQQ (docs/semantics.md §9) and HF fp8 (quant_method "fp8") configs and resolution. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* QQQConfig.from_config + __init__ checks: ValueErrors vLLM raises when the
 * model is loaded, reported by every resolve. GPTQModel writes "bits". */
qp_status qp_config_parse_qqq(qp_config *cfg) {
    qp_status st = qp_config_packed_mapping(cfg);
    if (st != QP_OK) return st;
    const qj *wb = qj_get(cfg->qc, "wbits");
    if (!wb) wb = qj_get(cfg->qc, "bits");
    const qj *gs = qj_get(cfg->qc, "group_size");
    if (!wb)
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "wbits",
                                     "Cannot find any of ['wbits'] in the model's quantization config.");
    if (!gs)
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "group_size",
                                     "Cannot find any of ['group_size'] in the model's quantization config.");
    qp_buf b = {0};
    if (!qj_int_eq(wb, 4)) {
        qp_pyrepr(&b, wb);
        qp_config_defer_error(cfg, QP_ERR_VALUE, "wbits",
                              "QQQ does not support weight_bits = %s. Only weight_bits = [4] are supported.",
                              qp_buf_str(&b));
    } else if (!qj_int_eq(gs, -1) && !qj_int_eq(gs, 128)) {
        qp_pyrepr(&b, gs);
        qp_config_defer_error(cfg, QP_ERR_VALUE, "group_size",
                              "QQQ does not support group_size = %s. Only group_sizes = [-1, 128] are supported.",
                              qp_buf_str(&b));
    } else {
        cfg->qqq_bits = 4;
        cfg->qqq_group = qj_int_eq(gs, 128) ? 128 : -1;
    }
    qp_buf_free(&b);
    return QP_OK;
}

qp_status qp_resolve_qqq(const qp_resolve_ctx *rc, qp_scheme *out) {
    /* QQQConfig.get_quant_method: every LinearBase gets QQQLinearMethod (no
     * exclude list); other modules get none. */
    if (rc->kind == QP_LAYER_MOE) { /* FusedMoE falls back to its unquantized method */
        qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, "UnquantizedFusedMoEMethod", NULL, NULL, NULL);
        return QP_OK;
    }
    if (rc->kind != QP_LAYER_LINEAR) {
        qp_scheme_init(out, QP_SCHEME_NONE);
        return QP_OK;
    }
    qp_scheme_init(out, QP_SCHEME_QQQ_W4A8);
    qp_scheme_set_names(out, "QQQLinearMethod", NULL, NULL, NULL);
    out->weight.dtype = QP_DTYPE_I4;
    out->weight.symmetric = 1;
    out->weight.scale_dtype = QP_DTYPE_F32; /* s_channel */
    if (rc->cfg->qqq_group == 128) {
        out->weight.granularity = QP_GRAN_GROUP;
        out->weight.group_size = 128;
        out->weight.scale2_dtype = QP_DTYPE_F16; /* s_group */
    } else {
        out->weight.granularity = QP_GRAN_CHANNEL;
    }
    out->activation.dtype = QP_DTYPE_I8;
    out->activation.granularity = QP_GRAN_TOKEN;
    out->activation.dynamic = 1;
    out->activation.symmetric = 1;
    out->activation.scale_dtype = QP_DTYPE_F32;
    out->pack_method = QP_PACK_MARLIN_QQQ;
    out->min_capability = 80;
    out->out_dtype_fixed = QP_DTYPE_F16;
    return QP_OK;
}

/* vLLM's Fp8Config: activation_scheme static|dynamic, ignored_layers,
 * weight_block_size, and an fp8 KV cache for attention. */
qp_status qp_config_parse_fp8(qp_config *cfg) {
    qp_status st = qp_config_packed_mapping(cfg);
    if (st != QP_OK) return st;
    const qj *as = qj_get(cfg->qc, "activation_scheme");
    if (!as)
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "activation_scheme",
                                     "Cannot find any of ['activation_scheme'] in the model's quantization config.");
    if (!qj_str_eq(as, "static") && !qj_str_eq(as, "dynamic")) {
        qp_buf b = {0};
        if (as->type == QJ_STRING) qp_buf_puts(&b, as->s); else qp_pyrepr(&b, as);
        qp_config_defer_error(cfg, QP_ERR_VALUE, "activation_scheme", "Unsupported activation scheme %s", qp_buf_str(&b));
        qp_buf_free(&b);
        return QP_OK;
    }
    cfg->fp8_static_act = qj_str_eq(as, "static");
    st = qp_config_string_list(cfg, qj_get(cfg->qc, "ignored_layers"), "ignored_layers", &cfg->fp8_ignored,
                               &cfg->n_fp8_ignored);
    if (st != QP_OK) return st;
    char err[256];
    cfg->fp8_ignored_set = qp_nameset_create(cfg->fp8_ignored, cfg->n_fp8_ignored, false, NULL, err, sizeof err);
    if (!cfg->fp8_ignored_set) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "%s", err);
    const qj *bs = qj_get(cfg->qc, "weight_block_size");
    if (!qj_is_null(bs)) {
        if (bs->type != QJ_ARRAY || bs->n != 2 || bs->items[0]->type != QJ_INT || bs->items[1]->type != QJ_INT ||
            bs->items[0]->i <= 0 || bs->items[1]->i <= 0)
            return qp_config_defer_error(cfg, QP_ERR_VALUE, "weight_block_size",
                                         "The quantization block size of weight must have 2 dimensions, but got %zu "
                                         "dimensions",
                                         bs->type == QJ_ARRAY ? bs->n : (size_t)0);
        if (!cfg->fp8_static_act) {
            cfg->fp8_block = true;
            cfg->fp8_block_size[0] = bs->items[0]->i;
            cfg->fp8_block_size[1] = bs->items[1]->i;
        } else {
            return qp_config_defer_error(cfg, QP_ERR_VALUE, "weight_block_size",
                                         "The block-wise quantization only supports dynamic activation scheme for "
                                         "now, but got static activation scheme.");
        }
    }
    cfg->kv_cache.dtype = QP_DTYPE_F8_E4M3FN;
    cfg->kv_cache.granularity = QP_GRAN_TENSOR;
    cfg->kv_cache.symmetric = 1;
    cfg->kv_cache.scale_dtype = QP_DTYPE_F32;
    cfg->kv_cache_cfg = cfg->qc;
    return QP_OK;
}

/* is_layer_skipped (utils/quant_utils.py): exact names, fused layers by
 * their shards, all-or-none. */
static qp_status fp8_skipped(const qp_resolve_ctx *rc, bool *skipped) {
    const char *proj;
    const qp_packed_module *pm = qp_packed_find(&rc->packed, rc->layer, &proj);
    *skipped = false;
    if (!pm) { *skipped = qp_nameset_match(rc->cfg->fp8_ignored_set, rc->layer); return QP_OK; }
    size_t n = 0;
    for (size_t i = 0; i < pm->n_shards; i++) {
        char *s = qp_str_replace_all(rc->layer, proj, pm->shards[i]);
        if (!s) return qp_resolve_fail(rc, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        n += qp_nameset_match(rc->cfg->fp8_ignored_set, s);
        free(s);
    }
    if (n && n != pm->n_shards)
        return qp_resolve_fail(rc, QP_ERR_VALUE, "ignored_layers",
                               "Detected some but not all shards of %s are quantized. All shards of fused layers "
                               "to have the same precision.",
                               rc->layer);
    *skipped = pm->n_shards && n == pm->n_shards;
    return QP_OK;
}

qp_status qp_resolve_fp8(const qp_resolve_ctx *rc, qp_scheme *out) {
    if (rc->kind == QP_LAYER_ATTENTION) {
        qp_scheme_init(out, QP_SCHEME_KV_CACHE);
        qp_scheme_set_names(out, "Fp8KVCacheMethod", NULL, NULL, NULL);
        out->kv_cache = rc->cfg->kv_cache;
        return QP_OK;
    }
    bool skipped;
    qp_status st = fp8_skipped(rc, &skipped);
    if (st != QP_OK) return st;
    if (skipped) {
        qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, rc->kind == QP_LAYER_MOE ? "UnquantizedFusedMoEMethod" : "UnquantizedLinearMethod",
                            NULL, NULL, NULL);
        return QP_OK;
    }
    const char *wk, *ak;
    if (rc->cfg->fp8_block) { wk = "kFp8Static128BlockSym"; ak = "kFp8Dynamic128Sym"; }
    else { wk = "kFp8StaticTensorSym"; ak = rc->cfg->fp8_static_act ? "kFp8StaticTensorSym" : "kFp8DynamicTensorSym"; }
    /* Below sm89 vLLM's fp8 method runs weight-only through Marlin (W8A16). */
    bool marlin = rc->opts.capability != QP_CAPABILITY_NONE && rc->opts.capability < 89;
    qp_scheme_init(out, QP_SCHEME_HF_FP8);
    qp_scheme_set_names(out, rc->kind == QP_LAYER_MOE ? "Fp8MoEMethod" : "Fp8LinearMethod", NULL, wk, marlin ? NULL : ak);
    if (rc->cfg->fp8_block) {
        out->weight.block[0] = (int)rc->cfg->fp8_block_size[0];
        out->weight.block[1] = (int)rc->cfg->fp8_block_size[1];
    }
    out->min_capability = 80;
    return QP_OK;
}
