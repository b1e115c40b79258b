/* Building a Quark config (QuarkConfig.from_config, docs/semantics.md §1, §2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static qp_status type_error(qp_config *cfg, const char *key, const char *want, const qj *got) {
    return qp_error_set(cfg->ctx, QP_ERR_PARSE, cfg->file, key, NULL, "%s must be %s, got %s", key, want,
                        qj_type_name(got));
}

qp_status qp_config_string_list(qp_config *cfg, const qj *v, const char *key, const char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (qj_is_null(v)) return QP_OK;
    if (v->type != QJ_ARRAY) return type_error(cfg, key, "a list of strings", v);
    const char **a = calloc(v->n ? v->n : 1, sizeof *a);
    if (!a) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, key, NULL, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        if (v->items[i]->type != QJ_STRING) {
            free(a);
            char k[128];
            snprintf(k, sizeof k, "%s[%zu]", key, i);
            return type_error(cfg, k, "a string", v->items[i]);
        }
        a[i] = v->items[i]->s;
    }
    *out = a;
    *n = v->n;
    return QP_OK;
}

qp_status qp_config_exclude_list(qp_config *cfg, const char *key) {
    qp_status st = qp_config_string_list(cfg, qj_get(cfg->qc, key), key, &cfg->excludes, &cfg->n_excludes);
    if (st != QP_OK) return st;
    char err[512];
    size_t bad = 0;
    cfg->exclude_set = qp_nameset_create(cfg->excludes, cfg->n_excludes, true, &bad, err, sizeof err);
    if (!cfg->exclude_set) {
        char k[64];
        snprintf(k, sizeof k, "%s[%zu]", key, bad);
        return qp_error_set(cfg->ctx, QP_ERR_PARSE, cfg->file, k, NULL, "%s", err);
    }
    return QP_OK;
}

/* SGLang reads packed_modules_mapping from the quant config; some exports
 * carry one. */
qp_status qp_config_packed_mapping(qp_config *cfg) {
    const qj *pm = qj_get(cfg->qc, "packed_modules_mapping");
    if (qj_is_null(pm)) return QP_OK;
    if (pm->type != QJ_OBJECT) return type_error(cfg, "packed_modules_mapping", "an object", pm);
    cfg->cfg_packed = calloc(pm->n ? pm->n : 1, sizeof *cfg->cfg_packed);
    if (!cfg->cfg_packed) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "out of memory");
    for (size_t i = 0; i < pm->n; i++) {
        char key[256];
        snprintf(key, sizeof key, "packed_modules_mapping.%s", pm->keys[i]);
        const char **shards;
        size_t ns;
        qp_status st = qp_config_string_list(cfg, pm->items[i], key, &shards, &ns);
        if (st != QP_OK) return st;
        if (qj_is_null(pm->items[i])) return type_error(cfg, key, "a list of strings", pm->items[i]);
        cfg->cfg_packed[i].fused = pm->keys[i];
        cfg->cfg_packed[i].shards = shards;
        cfg->cfg_packed[i].n_shards = ns;
        cfg->n_cfg_packed++;
    }
    return QP_OK;
}

static void pattern_literals(qp_layer_pattern *p) {
    const char *k = p->key;
    size_t n = strlen(k), a = strcspn(k, "*?[");
    p->prefix_len = a;
    size_t s = 0;
    while (s < n && !strchr("*?[]", k[n - 1 - s])) s++;
    p->suffix_len = s;
    p->all = qp_bigram_mask(k, n);
    p->need = 0;
    if (!strpbrk(k, "?[")) {
        /* literal runs between '*' must appear in any matching name */
        for (const char *seg = k; *seg;) {
            size_t len = strcspn(seg, "*");
            p->need |= qp_bigram_mask(seg, len);
            seg += len;
            if (*seg) seg++;
        }
    }
}

/* docs/semantics.md §1: kv_cache_group → the KV-cache config, with vLLM's mutations
 * (matched configs and "*q_proj" lose their output_tensors). */
static qp_status parse_kv_cache(qp_config *cfg, const qj *export_cfg, const qj *lqc) {
    const qj *grp = qj_get(export_cfg, "kv_cache_group");
    if (qj_is_null(grp))
        /* vLLM calls len() on it: TypeError. */
        return qp_config_defer_error(cfg, QP_ERR_PARSE, "export.kv_cache_group",
                                     "export.kv_cache_group is missing (vLLM calls len() on it: "
                                     "TypeError: object of type 'NoneType' has no len())");
    const char **pats;
    size_t np;
    qp_status st = qp_config_string_list(cfg, grp, "export.kv_cache_group", &pats, &np);
    if (st != QP_OK) return st;
    if (np == 0) { free(pats); return QP_OK; }
    size_t nl = lqc ? lqc->n : 0;
    bool subset = true;
    for (size_t i = 0; i < np && subset; i++) {
        bool found = false;
        for (size_t j = 0; j < nl && !found; j++) found = !strcmp(lqc->keys[j], pats[i]);
        subset = found;
    }
    bool any = false;
    for (size_t j = 0; j < nl && !any; j++)
        for (size_t i = 0; i < np && !any; i++) any = qp_fnmatch(pats[i], lqc->keys[j]);
    if (!subset && !any) {
        free(pats);
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "export.kv_cache_group",
                                     "The Quark quantized model has the kv_cache_group parameter setting, "
                                     "but no kv_cache quantization settings were found in the quantization "
                                     "configuration.");
    }
    /* q_configs: the layer_quant_config entries whose *key* matches a pattern. */
    qj **q = calloc(nl ? nl : 1, sizeof *q);
    size_t nq = 0;
    if (!q) { free(pats); return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "out of memory"); }
    for (size_t j = 0; j < nl; j++)
        for (size_t i = 0; i < np; i++)
            if (qp_fnmatch(pats[i], lqc->keys[j])) { q[nq++] = lqc->items[j]; break; }
    free(pats);
    if (nq == 0) {
        free(q);
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "export.kv_cache_group",
                                     "The kv_cache quantization configuration is empty.");
    }
    for (size_t j = 1; j < nq; j++) {
        if (!qj_deep_compare(qj_get(q[j], "output_tensors"), qj_get(q[0], "output_tensors"))) {
            free(q);
            return qp_config_defer_error(cfg, QP_ERR_VALUE, "layer_quant_config",
                                         "The quantization method used for kv_cache should be the same, but the "
                                         "quantization method for the kv_cache layer in the config is different.");
        }
    }
    const qj *kv = qj_get(q[0], "output_tensors");
    if (qj_is_null(kv)) {
        free(q);
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "layer_quant_config",
                                     "The kv_cache quantization configuration is empty.");
    }
    /* Copy the KV description before the mutation nulls it. */
    qp_qtensor_from_quark(&cfg->kv_cache, kv);
    cfg->kv_cache_cfg = kv;
    const qj *dt = qj_get(kv, "dtype"), *qs = qj_get(kv, "qscheme");
    qp_buf b = {0};
    if (!qj_str_eq(dt, "fp8_e4m3")) {
        qp_buf_puts(&b, "Currently supported kv cache quantization is dtype=fp8_e4m3, however received ");
        if (dt && dt->type == QJ_STRING) qp_buf_puts(&b, dt->s); else qp_pyrepr(&b, dt);
        cfg->kv_status = QP_ERR_NOT_IMPLEMENTED;
    } else if (!qj_str_eq(qs, "per_tensor")) {
        qp_buf_puts(&b, "Only support per-tensor scaling factor for quark KV cache. Expected qscheme: "
                        "per_tensor, found qscheme: ");
        if (qs && qs->type == QJ_STRING) qp_buf_puts(&b, qs->s); else qp_pyrepr(&b, qs);
        cfg->kv_status = QP_ERR_NOT_IMPLEMENTED;
    }
    cfg->kv_error = b.p;
    for (size_t j = 0; j < nq; j++) {
        qj *o = (qj *)qj_get(q[j], "output_tensors");
        if (o) qj_set_null(o);
    }
    qj *qp = (qj *)qj_get(qj_get(lqc, "*q_proj"), "output_tensors");
    if (qp) qj_set_null(qp);
    free(q);
    return QP_OK;
}

qp_status qp_config_parse_quark(qp_config *cfg) {
    const qj *qc = cfg->qc;
    qp_status st = qp_config_packed_mapping(cfg);
    if (st != QP_OK) return st;

    const qj *g = qj_get(qc, "global_quant_config");
    if (!qj_is_null(g) && g->type != QJ_OBJECT) return type_error(cfg, "global_quant_config", "an object", g);
    cfg->global = qj_is_null(g) ? NULL : g;

    const qj *lqc = qj_get(qc, "layer_quant_config");
    if (!qj_is_null(lqc) && lqc->type != QJ_OBJECT) return type_error(cfg, "layer_quant_config", "an object", lqc);
    if (qj_is_null(lqc)) lqc = NULL;
    if (lqc) {
        cfg->patterns = calloc(lqc->n ? lqc->n : 1, sizeof *cfg->patterns);
        if (!cfg->patterns) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "out of memory");
        for (size_t i = 0; i < lqc->n; i++) {
            qp_layer_pattern *p = &cfg->patterns[i];
            p->key = lqc->keys[i];
            p->cfg = lqc->items[i];
            p->has_star = strchr(p->key, '*') != NULL;
            pattern_literals(p);
            if (p->cfg->type != QJ_OBJECT && p->cfg->type != QJ_NULL) {
                char k[512];
                snprintf(k, sizeof k, "layer_quant_config.%s", p->key);
                return type_error(cfg, k, "an object", p->cfg);
            }
        }
        cfg->n_patterns = lqc->n;
    }

    const qj *ltqc = qj_get(qc, "layer_type_quant_config");
    if (!qj_is_null(ltqc) && ltqc->type != QJ_OBJECT)
        return type_error(cfg, "layer_type_quant_config", "an object", ltqc);
    cfg->layer_type_qc = qj_is_null(ltqc) ? NULL : ltqc;

    st = qp_config_exclude_list(cfg, "exclude");
    if (st != QP_OK) return st;

    const qj *ex = qj_get(qc, "export");
    if (qj_is_null(ex))
        return qp_config_defer_error(cfg, QP_ERR_VALUE, "export",
                                     "The export key should be included in the configurations of Quark "
                                     "quantized model");
    if (ex->type != QJ_OBJECT) return type_error(cfg, "export", "an object", ex);
    const qj *pm = qj_get(ex, "pack_method");
    if (!qj_is_null(pm) && pm->type != QJ_STRING) return type_error(cfg, "export.pack_method", "a string", pm);
    cfg->pack_method = qj_is_null(pm) ? NULL : pm->s;
    return parse_kv_cache(cfg, ex, lqc);
}
