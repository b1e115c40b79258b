/* Loading a config: find the quantization_config, route on quant_method,
 * and the config-wide queries. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define QP_CONFIG_MAX_BYTES ((size_t)64 << 20)

static const char *const method_names[] = {"quark", "quark_online", "qqq", "fp8", "compressed-tensors"};

QP_API const char *qp_method_name(qp_method m) {
    return (unsigned)m < sizeof method_names / sizeof *method_names ? method_names[m] : "unknown";
}

QP_API qp_method qp_config_method(const qp_config *cfg) { return cfg ? cfg->method : QP_METHOD_QUARK; }

qp_status qp_config_defer_error(qp_config *cfg, qp_status st, const char *key, const char *fmt, ...) {
    if (cfg->load_status != QP_OK) return QP_OK; /* vLLM stops at the first one */
    va_list ap;
    va_start(ap, fmt);
    qp_buf b = {0};
    char tmp[2048];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    qp_buf_puts(&b, tmp);
    cfg->load_status = st;
    cfg->load_error = b.p ? b.p : strdup("out of memory");
    cfg->load_key = strdup(key ? key : "");
    return QP_OK;
}

/* Routes on quant_method: quark / quark_online / fp8 / qqq, and
 * QQQ's legacy files that carry "wbits" (or GPTQModel's "bits") only. */
static qp_status route(qp_config *cfg) {
    const qj *qm = qj_get(cfg->qc, "quant_method");
    if (qm && qm->type != QJ_STRING && qm->type != QJ_NULL)
        return qp_error_set(cfg->ctx, QP_ERR_PARSE, cfg->file, "quant_method", NULL,
                            "quant_method must be a string, got %s", qj_type_name(qm));
    if (qj_is_null(qm)) {
        if (qj_get(cfg->qc, "wbits") || qj_get(cfg->qc, "bits")) {
            cfg->method = QP_METHOD_QQQ;
            return qp_config_parse_qqq(cfg);
        }
        return qp_error_set(cfg->ctx, QP_ERR_UNSUPPORTED, cfg->file, "quant_method", NULL,
                            "no quant_method in the quantization config (and no QQQ \"wbits\"): "
                            "qport supports quark, quark_online, qqq, fp8 and compressed-tensors");
    }
    const char *m = qm->s;
    if (!strcmp(m, "quark")) { cfg->method = QP_METHOD_QUARK; return qp_config_parse_quark(cfg); }
    if (!strcmp(m, "quark_online")) { cfg->method = QP_METHOD_QUARK_ONLINE; return qp_config_parse_quark(cfg); }
    if (!strcmp(m, "qqq")) { cfg->method = QP_METHOD_QQQ; return qp_config_parse_qqq(cfg); }
    if (!strcmp(m, "fp8")) { cfg->method = QP_METHOD_FP8; return qp_config_parse_fp8(cfg); }
    if (!strcmp(m, "compressed-tensors")) {
        cfg->method = QP_METHOD_COMPRESSED_TENSORS;
        return qp_config_parse_ct(cfg);
    }
    return qp_error_set(cfg->ctx, QP_ERR_UNSUPPORTED, cfg->file, "quant_method", NULL,
                        "unsupported quant_method '%s': qport supports quark, quark_online, qqq, fp8 and "
                        "compressed-tensors", m);
}

QP_API qp_status qp_config_load_buffer(qp_context *ctx, const char *name, const char *json,
                                       size_t len, qp_config **out) {
    if (!ctx || !json || !out) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, name, NULL, NULL,
                                                   "qp_config_load_buffer: NULL argument");
    *out = NULL;
    if (!name) name = "<buffer>";
    if (len > QP_CONFIG_MAX_BYTES)
        return qp_error_set(ctx, QP_ERR_PARSE, name, NULL, NULL, "config larger than %zu bytes",
                            QP_CONFIG_MAX_BYTES);
    char err[512];
    qj_doc *doc = qj_parse_bounded(json, len, QJ_CONFIG_MAX_VALUES(len), err, sizeof err);
    if (!doc) return qp_error_set(ctx, QP_ERR_PARSE, name, NULL, NULL, "%s", err);
    return qp_config_load_doc(ctx, name, doc, out);
}

/* A parsed config (owned from here on, freed on failure too): what
 * qp_model_open hands over, so config.json is parsed once. */
qp_status qp_config_load_doc(qp_context *ctx, const char *name, qj_doc *doc, qp_config **out) {
    *out = NULL;
    const qj *root = qj_root(doc);
    if (root->type != QJ_OBJECT) {
        qp_status st = qp_error_set(ctx, QP_ERR_PARSE, name, NULL, NULL, "the config must be a JSON object, got %s",
                                    qj_type_name(root));
        qj_free(doc);
        return st;
    }
    qp_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) { qj_free(doc); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, name, NULL, NULL, "out of memory"); }
    cfg->ctx = ctx;
    cfg->doc = doc;
    cfg->file = strdup(name);
    cfg->qc = root;
    /* A whole HF config.json nests the quantization config. */
    const qj *nested = qj_get(root, "quantization_config");
    if (nested) {
        if (nested->type != QJ_OBJECT) {
            qp_status st = qp_error_set(ctx, QP_ERR_PARSE, name, "quantization_config", NULL,
                                        "quantization_config must be an object, got %s", qj_type_name(nested));
            qp_config_destroy(cfg);
            return st;
        }
        cfg->qc = nested;
        const qj *mt = qj_get(root, "model_type");
        if (mt && mt->type == QJ_STRING) cfg->model_type = strdup(mt->s);
    }
    qp_arch_from_json(nested ? root : NULL, &cfg->arch);
    qp_status st = route(cfg);
    if (st != QP_OK) { qp_config_destroy(cfg); return st; }
    *out = cfg;
    return QP_OK;
}

QP_API qp_status qp_config_load_file(qp_context *ctx, const char *path, qp_config **out) {
    if (!ctx || !path || !out) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, path, NULL, NULL,
                                                   "qp_config_load_file: NULL argument");
    *out = NULL;
    /* a FIFO or a device is refused before it can block (file_io.c) */
    char *text;
    size_t len;
    qp_status st = qp_read_regular(ctx, path, QP_CONFIG_MAX_BYTES, &text, &len);
    if (st) return st;
    st = qp_config_load_buffer(ctx, path, text, len, out);
    free(text);
    return st;
}

QP_API void qp_config_destroy(qp_config *cfg) {
    if (!cfg) return;
    qj_free(cfg->doc);
    for (size_t i = 0; i < cfg->n_cfg_packed; i++) free((void *)cfg->cfg_packed[i].shards);
    for (size_t i = 0; i < cfg->n_ct_targets; i++) qp_regex_free(cfg->ct_targets[i].re);
    qp_nameset_free(cfg->exclude_set);
    qp_nameset_free(cfg->fp8_ignored_set);
    /* the plain allocations the config owns (strings and arrays) */
    void *owned[] = {cfg->file,     cfg->model_type, cfg->load_error, cfg->load_key,    cfg->cfg_packed,
                     cfg->patterns, cfg->excludes,   cfg->kv_error,   cfg->fp8_ignored, cfg->ct_targets};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++) free(owned[i]);
    free(cfg);
}

QP_API qp_status qp_config_summarize(const qp_config *cfg, qp_config_summary *out) {
    if (!cfg || !out) return QP_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->method = cfg->method;
    out->n_layer_patterns = cfg->n_patterns;
    out->n_excludes = cfg->method == QP_METHOD_FP8 ? cfg->n_fp8_ignored : cfg->n_excludes;
    out->pack_method = cfg->pack_method;
    out->model_type = cfg->model_type;
    out->file = cfg->file;
    return QP_OK;
}

QP_API size_t qp_config_layer_type_count(const qp_config *cfg) {
    return cfg && cfg->layer_type_qc && cfg->layer_type_qc->type == QJ_OBJECT ? cfg->layer_type_qc->n : 0;
}

QP_API const char *qp_config_layer_type_key(const qp_config *cfg, size_t i) {
    return i < qp_config_layer_type_count(cfg) ? cfg->layer_type_qc->keys[i] : NULL;
}

QP_API const char *qp_config_layer_pattern(const qp_config *cfg, size_t i) {
    return cfg && i < cfg->n_patterns ? cfg->patterns[i].key : NULL;
}

QP_API const char *qp_config_exclude(const qp_config *cfg, size_t i) {
    if (!cfg) return NULL;
    if (cfg->method == QP_METHOD_FP8) return i < cfg->n_fp8_ignored ? cfg->fp8_ignored[i] : NULL;
    return i < cfg->n_excludes ? cfg->excludes[i] : NULL;
}

QP_API qp_status qp_config_kv_cache(const qp_config *cfg, qp_qtensor *out) {
    if (!cfg || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = cfg->kv_cache;
    if (cfg->load_status != QP_OK)
        return qp_error_set(cfg->ctx, cfg->load_status, cfg->file, cfg->load_key, NULL, "%s", cfg->load_error);
    return QP_OK;
}

/* Quark's get_cache_scale_mapper (docs/semantics.md §1): a suffix rewrite. */
static const struct { const char *from, *to; } scale_map[] = {
    {".k_proj.output_scale", ".attn.k_scale"},
    {".v_proj.output_scale", ".attn.v_scale"},
    {".q_proj.output_scale", ".attn.q_scale"},
    {".self_attn.prob_output_scale", ".self_attn.attn.prob_scale"},
};

QP_API qp_status qp_config_map_scale_name(const qp_config *cfg, const char *name, char *out, size_t cap) {
    if (!cfg || !name || !out) return QP_ERR_INVALID_ARGUMENT;
    size_t n = strlen(name);
    const char *from = NULL, *to = NULL;
    if (cfg->method == QP_METHOD_QUARK || cfg->method == QP_METHOD_QUARK_ONLINE) {
        for (size_t i = 0; i < sizeof scale_map / sizeof *scale_map; i++) {
            size_t fl = strlen(scale_map[i].from);
            if (n >= fl && !strcmp(name + n - fl, scale_map[i].from)) { from = scale_map[i].from; to = scale_map[i].to; break; }
        }
    }
    size_t need = from ? n - strlen(from) + strlen(to) + 1 : n + 1;
    if (need > cap)
        return qp_error_set(cfg->ctx, QP_ERR_INVALID_ARGUMENT, cfg->file, NULL, NULL,
                            "qp_config_map_scale_name: output buffer of %zu bytes, %zu needed", cap, need);
    if (from) {
        memcpy(out, name, n - strlen(from));
        strcpy(out + n - strlen(from), to);
    } else {
        memcpy(out, name, n + 1);
    }
    return QP_OK;
}
