/* Quark scheme resolution: exclude handling (docs/semantics.md §2), per-layer config
 * lookup (§3), scheme dispatch and its predicates (§4), for the vllm
 * dialect (vLLM latest) and the sglang dialect (SGLang's quark.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MAX_SHARD_DEPTH 8

static bool is_vllm(const qp_resolve_ctx *rc) { return rc->opts.dialect == QP_DIALECT_VLLM; }

/* Python repr of the shard list: ['q_proj', 'k_proj', 'v_proj']. */
static void shard_list_repr(qp_buf *b, const qp_packed_module *pm) {
    qp_buf_puts(b, "[");
    for (size_t i = 0; i < pm->n_shards; i++) qp_buf_printf(b, "%s'%s'", i ? ", " : "", pm->shards[i]);
    qp_buf_puts(b, "]");
}

static qp_status oom(const qp_resolve_ctx *rc) {
    return qp_resolve_fail(rc, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory");
}

/* ---- exclude (docs/semantics.md §2) ------------------------------------ */

/* should_ignore_layer. vllm: a direct match of the (fused) name wins, then
 * per-shard matches; sglang (older utils): per shard only. */
qp_status qp_resolve_should_ignore(const qp_resolve_ctx *rc, const char *key, bool check_children, bool *ignored) {
    const qp_config *cfg = rc->cfg;
    const char *name = rc->layer;
    *ignored = false;
    if (check_children && qp_nameset_has_child(cfg->exclude_set, name)) { *ignored = true; return QP_OK; }
    if (is_vllm(rc) && qp_nameset_match(cfg->exclude_set, name)) { *ignored = true; return QP_OK; }
    const char *proj;
    const qp_packed_module *pm = qp_packed_find(&rc->packed, name, &proj);
    if (!pm) {
        *ignored = !is_vllm(rc) && qp_nameset_match(cfg->exclude_set, name);
        return QP_OK;
    }
    size_t n_ign = 0;
    for (size_t i = 0; i < pm->n_shards; i++) {
        char *shard = qp_str_replace_all(name, proj, pm->shards[i]);
        if (!shard) return oom(rc);
        n_ign += qp_nameset_match(cfg->exclude_set, shard);
        free(shard);
    }
    if (n_ign != 0 && n_ign != pm->n_shards) {
        if (is_vllm(rc))
            return qp_resolve_fail(rc, QP_ERR_VALUE, key,
                                   "Found different quantization schemes for the shards of %s. vLLM requires "
                                   "all to use the same scheme.",
                                   name);
        qp_buf b = {0};
        shard_list_repr(&b, pm);
        qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, key,
                                       "Found a different quantization schemes for %s in %s. vLLM requires all "
                                       "to use the same scheme.",
                                       qp_buf_str(&b), name);
        qp_buf_free(&b);
        return st;
    }
    *ignored = pm->n_shards > 0 && n_ign == pm->n_shards;
    return QP_OK;
}

/* ---- per-layer config lookup (docs/semantics.md §3) --------------------- */

static bool pattern_matches(const qp_resolve_ctx *rc, const qp_layer_pattern *p, const char *name, uint64_t name_mask) {
    if (!is_vllm(rc)) return qp_fnmatch(p->key, name); /* SGLang: fnmatch for every key */
    if (!p->has_star) /* docs/semantics.md §3: `layer_name in pattern` */
        return !(name_mask & ~p->all) && strstr(p->key, name) != NULL;
    if (p->need & ~name_mask) return false;
    size_t n = strlen(name);
    if (n < p->prefix_len + p->suffix_len) return false;
    if (memcmp(name, p->key, p->prefix_len)) return false;
    if (memcmp(name + n - p->suffix_len, p->key + strlen(p->key) - p->suffix_len, p->suffix_len)) return false;
    return qp_fnmatch(p->key, name);
}

typedef struct found {
    const qj *cfg;
    const char *key; /* layer_quant_config key, or the fallback's name */
    bool pattern;    /* key is a layer_quant_config pattern */
} found;

static qp_status different_configs(const qp_resolve_ctx *rc, const qp_packed_module *pm, const char *name) {
    qp_buf b = {0};
    shard_list_repr(&b, pm);
    qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, "layer_quant_config",
                                   "Found a different quantization configuration for %s in %s. %s requires all "
                                   "to use the same scheme.",
                                   qp_buf_str(&b), name, is_vllm(rc) ? "vLLM" : "SGLang");
    qp_buf_free(&b);
    return st;
}

/* vLLM get_layer_quant_config_from_name: NULL cfg when nothing matched. */
static qp_status lookup_name(const qp_resolve_ctx *rc, const char *name, int depth, found *out) {
    out->cfg = NULL;
    out->key = NULL;
    out->pattern = false;
    if (depth > MAX_SHARD_DEPTH)
        return qp_resolve_fail(rc, QP_ERR_VALUE, "packed_modules_mapping",
                               "packed-modules mapping recurses more than %d levels at '%s'", MAX_SHARD_DEPTH, name);
    const char *proj;
    const qp_packed_module *pm = qp_packed_find(&rc->packed, name, &proj);
    if (pm) {
        found first = {0};
        for (size_t i = 0; i < pm->n_shards; i++) {
            char *shard = qp_str_replace_all(name, proj, pm->shards[i]);
            if (!shard) return oom(rc);
            found f = {0};
            qp_status st = strcmp(shard, name) ? lookup_name(rc, shard, depth + 1, &f) : QP_OK;
            free(shard);
            if (st != QP_OK) return st;
            if (!f.key) continue;
            if (!first.key) first = f;
            else if (!qj_deep_compare(f.cfg, first.cfg)) return different_configs(rc, pm, name);
        }
        *out = first;
        return QP_OK;
    }
    const qp_config *cfg = rc->cfg;
    uint64_t mask = qp_bigram_mask(name, strlen(name));
    for (size_t i = 0; i < cfg->n_patterns; i++) {
        if (pattern_matches(rc, &cfg->patterns[i], name, mask)) {
            out->cfg = cfg->patterns[i].cfg;
            out->key = cfg->patterns[i].key;
            out->pattern = true;
            return QP_OK;
        }
    }
    return QP_OK;
}

static found fallback(const qp_resolve_ctx *rc) {
    found f = {rc->cfg->global, "global_quant_config", false};
    /* vllm: layer_type_quant_config is keyed by a Python class object and
     * never matches JSON keys (docs/semantics.md §3). sglang looks the class name up. */
    if (!is_vllm(rc) && rc->opts.layer_class && rc->cfg->layer_type_qc) {
        const qj *c = qj_get(rc->cfg->layer_type_qc, rc->opts.layer_class);
        if (c) { f.cfg = c; f.key = "layer_type_quant_config"; }
    }
    return f;
}

/* _find_matched_config. */
static qp_status find_config(const qp_resolve_ctx *rc, const char *name, int depth, found *out) {
    found fb = fallback(rc);
    const char *proj;
    const qp_packed_module *pm = qp_packed_find(&rc->packed, name, &proj);
    if (!pm) {
        qp_status st = lookup_name(rc, name, depth, out);
        if (st == QP_OK && !out->key) *out = fb;
        return st;
    }
    found first = {0};
    for (size_t i = 0; i < pm->n_shards; i++) {
        char *shard = qp_str_replace_all(name, proj, pm->shards[i]);
        if (!shard) return oom(rc);
        found f = fb;
        qp_status st = QP_OK;
        if (!is_vllm(rc)) {
            /* SGLang recurses into _find_matched_config for each shard. */
            if (depth > MAX_SHARD_DEPTH) st = qp_resolve_fail(rc, QP_ERR_VALUE, "packed_modules_mapping",
                                                              "packed-modules mapping recurses at '%s'", shard);
            else st = find_config(rc, shard, depth + 1, &f);
        } else if (strcmp(shard, name)) {
            found g;
            st = lookup_name(rc, shard, depth + 1, &g);
            if (g.key) f = g;
        }
        free(shard);
        if (st != QP_OK) return st;
        if (i == 0) first = f;
        else if (!qj_deep_compare(f.cfg, first.cfg)) return different_configs(rc, pm, name);
    }
    *out = pm->n_shards ? first : fb;
    return QP_OK;
}

/* ---- predicates (docs/semantics.md §4) ---------------------------------- */

typedef struct match {
    bool ok;
    const char *wkey, *akey;
} match;

static const match no_match = {false, NULL, NULL};

static bool is_obj(const qj *v) { return v && v->type == QJ_OBJECT; }
#define G(q, k) qj_get((q), (k))

static bool block_is(const qj *w, long long a, long long b) {
    const qj *bs = G(w, "block_size");
    return bs && bs->type == QJ_ARRAY && bs->n == 2 && qj_int_eq(bs->items[0], a) && qj_int_eq(bs->items[1], b);
}

static match is_fp8_w8a8(const qj *w, const qj *in) {
    if (!is_obj(w) || !is_obj(in)) return no_match;
    bool fp8 = qj_str_eq(G(w, "dtype"), "fp8_e4m3") && qj_str_eq(G(in, "dtype"), "fp8_e4m3");
    bool static_w = !qj_truthy(G(w, "is_dynamic"));
    bool tensor_or_channel = qj_str_eq(G(w, "qscheme"), "per_tensor") || qj_str_eq(G(w, "qscheme"), "per_channel");
    bool per_block = qj_str_eq(G(w, "qscheme"), "per_block") && block_is(w, 128, 128) && qj_is_true(G(w, "symmetric"));
    if (!fp8 || !static_w) return no_match;
    if (per_block) {
        if (!qj_truthy(G(in, "is_dynamic"))) return no_match;
        if (!(qj_str_eq(G(in, "qscheme"), "per_group") && qj_int_eq(G(in, "group_size"), 128) &&
              qj_is_true(G(in, "symmetric"))))
            return no_match;
        return (match){true,
                       qj_str_eq(G(w, "scale_type"), "float8_e8m0fnu") ? "kFp8Static128BlockE8M0Sym"
                                                                        : "kFp8Static128BlockSym",
                       "kFp8Dynamic128Sym"};
    }
    if (!tensor_or_channel) return no_match;
    const char *wk = qj_str_eq(G(w, "qscheme"), "per_channel") ? "kFp8StaticChannelSym" : "kFp8StaticTensorSym";
    if (qj_truthy(G(in, "is_dynamic")))
        return (match){true, wk,
                       qj_str_eq(G(in, "qscheme"), "per_channel") ? "kFp8DynamicTokenSym" : "kFp8DynamicTensorSym"};
    if (!qj_str_eq(G(in, "qscheme"), "per_tensor")) return no_match;
    return (match){true, wk, "kFp8StaticTensorSym"};
}

static match is_w8a8_int8(const qj *w, const qj *in) {
    if (!is_obj(w) || !is_obj(in)) return no_match;
    bool int8 = qj_str_eq(G(w, "dtype"), "int8") && qj_str_eq(G(in, "dtype"), "int8");
    bool wchan = qj_str_eq(G(w, "qscheme"), "per_channel");
    bool wok = qj_str_eq(G(w, "qscheme"), "per_tensor") || wchan;
    bool static_in = qj_str_eq(G(in, "qscheme"), "per_tensor") && !qj_truthy(G(in, "is_dynamic"));
    bool dyn_in = qj_str_eq(G(in, "qscheme"), "per_channel") && qj_is_true(G(in, "is_dynamic"));
    bool wsym = qj_is_true(G(w, "symmetric"));
    if (!(int8 && wok && wsym && ((static_in && !qj_truthy(G(w, "is_dynamic"))) || dyn_in))) return no_match;
    bool asym = !qj_is_true(G(in, "symmetric")); /* `symmetric is True`, so null is asymmetric */
    const char *wk = wchan ? "kInt8StaticChannelSym" : "kInt8StaticTensorSym";
    const char *ak;
    if (static_in) ak = asym ? "kInt8StaticTensorAsym" : "kInt8StaticTensorSym";
    else if (wchan) ak = asym ? "kInt8DynamicTokenAsym" : "kInt8DynamicTokenSym";
    else ak = asym ? "kInt8DynamicTensorAsym" : "kInt8DynamicTensorSym";
    return (match){true, wk, ak};
}

/* parse_w4a16_int4_weight_config (0.34.0 quark/utils.py): group_size a
 * positive int (-1, which an earlier revision took as one group over K, is
 * refused now), symmetric a bool; vLLM's ValueErrors otherwise. */
static qp_status w4a16_params(const qp_resolve_ctx *rc, const char *key, const qj *w, long long *group, bool *sym) {
    const qj *gs = G(w, "group_size"), *sy = G(w, "symmetric");
    qp_buf b = {0};
    qp_status st = QP_OK;
    if (qj_is_null(gs)) st = qp_resolve_fail(rc, QP_ERR_VALUE, key, "Quark W4A16 INT4/UINT4 configs must specify weight.group_size");
    else if (qj_is_null(sy)) st = qp_resolve_fail(rc, QP_ERR_VALUE, key, "Quark W4A16 INT4/UINT4 configs must specify weight.symmetric");
    else if (gs->type != QJ_INT || gs->i <= 0) {
        qp_pyrepr(&b, gs);
        st = qp_resolve_fail(rc, QP_ERR_VALUE, key, "Quark W4A16 weight.group_size must be a positive int, got %s", qp_buf_str(&b));
    } else if (sy->type != QJ_BOOL) {
        qp_pyrepr(&b, sy);
        st = qp_resolve_fail(rc, QP_ERR_VALUE, key, "Quark W4A16 weight.symmetric must be a bool, got %s", qp_buf_str(&b));
    } else {
        *group = gs->i;
        *sym = sy->b;
    }
    qp_buf_free(&b);
    return st;
}

/* _is_w4a16_int4: weight-only int4/uint4 with a known pack method. */
static bool is_w4a16_int4(const qp_resolve_ctx *rc, const qj *w, const qj *in) {
    return w && qj_is_null(in) && is_obj(w) && (qj_str_eq(G(w, "dtype"), "int4") || qj_str_eq(G(w, "dtype"), "uint4")) &&
           rc->cfg->pack_method && (!strcmp(rc->cfg->pack_method, "order") || !strcmp(rc->cfg->pack_method, "reorder"));
}

/* A W4A16 int4 weight's group size (w4a16_params, its messages naming
 * `wkey`) and the weight key it and the symmetry select. */
static qp_status w4a16_int4_key(const qp_resolve_ctx *rc, const char *wkey, const qj *w, long long *g, const char **k) {
    bool sym = false;
    qp_status st = w4a16_params(rc, wkey, w, g, &sym);
    *k = sym ? (*g == 32 ? "kInt4Static32" : "kInt4Static") : (*g == 32 ? "kInt4Static32Asym" : "kInt4StaticAsym");
    return st;
}

/* What W4A16 int4 sets on a scheme, linear or MoE: groups of g, the
 * config's pack method. */
static void w4a16_int4_set(const qp_resolve_ctx *rc, long long g, qp_scheme *out) {
    out->weight.granularity = QP_GRAN_GROUP;
    out->weight.group_size = (int)g;
    out->pack_method = strcmp(rc->cfg->pack_method, "order") ? QP_PACK_REORDER : QP_PACK_ORDER;
}

static match is_w4a8_mxfp4_fp8(const qj *w, const qj *in) {
    if (!is_obj(w) || !is_obj(in)) return no_match;
    bool wm = qj_str_eq(G(w, "dtype"), "fp4") && qj_str_eq(G(w, "qscheme"), "per_group") &&
              qj_int_eq(G(w, "group_size"), 32) && qj_str_eq(G(w, "scale_format"), "e8m0") &&
              !qj_truthy(G(w, "is_dynamic"));
    bool im = qj_str_eq(G(in, "dtype"), "fp8_e4m3") && qj_str_eq(G(in, "qscheme"), "per_tensor") &&
              !qj_truthy(G(in, "is_dynamic")) && qj_is_true(G(in, "symmetric"));
    return wm && im ? (match){true, "kMxfp4Static", "kFp8StaticTensorSym"} : no_match;
}

static match is_nvfp4(const qj *w, const qj *in) {
    if (!w || !in || w->type != QJ_ARRAY || w->n != 2 || in->type != QJ_ARRAY || in->n != 2) return no_match;
    const qj *w0 = w->items[0], *w1 = w->items[1], *i0 = in->items[0], *i1 = in->items[1];
    if (!is_obj(w0) || !is_obj(w1) || !is_obj(i0) || !is_obj(i1)) return no_match;
    bool a = qj_str_eq(G(w0, "dtype"), "fp4") && qj_str_eq(G(w0, "qscheme"), "per_group") &&
             qj_int_eq(G(w0, "group_size"), 16) && !qj_truthy(G(w0, "is_dynamic"));
    bool b = qj_str_eq(G(i0, "dtype"), "fp4") && qj_str_eq(G(i0, "qscheme"), "per_group") &&
             qj_int_eq(G(i0, "group_size"), 16) && qj_truthy(G(i0, "is_dynamic"));
    bool c = qj_str_eq(G(w1, "dtype"), "fp8_e4m3") && qj_str_eq(G(w1, "qscheme"), "per_tensor") &&
             !qj_truthy(G(w1, "is_dynamic"));
    bool d = qj_str_eq(G(i1, "dtype"), "fp8_e4m3") && qj_str_eq(G(i1, "qscheme"), "per_tensor") &&
             !qj_truthy(G(i1, "is_dynamic"));
    return a && b && c && d ? (match){true, "kNvfp4Static", "kNvfp4Dynamic"} : no_match;
}

/* The OCP MX weight and activation maps (utils/ocp_mx_utils.py). */
static const struct { const char *dtype, *wkey, *akey; } mx_map[] = {
    {"mxfp4", "kMxfp4Static", "kMxfp4Dynamic"},
    {"mxfp6_e3m2", "kMxfp6E3M2Static", "kMxfp6E3M2Dynamic"},
    {"mxfp6_e2m3", "kMxfp6E2M3Static", "kMxfp6E2M3Dynamic"},
    {"mxfp8_e4m3", "kMxfp8Static", "kMxfp8Dynamic"},
};
#define MX_N (sizeof mx_map / sizeof *mx_map)

static int mx_index(const char *mxname) {
    for (size_t i = 0; i < MX_N; i++)
        if (!strcmp(mx_map[i].dtype, mxname)) return (int)i;
    return -1;
}

/* ocp_mx_weight_dtype_and_rows: the MX weight format, or -1. */
static int ocp_mx_weight(const qj *w, int *rows) {
    if (!is_obj(w)) return -1;
    const qj *dt = G(w, "dtype");
    if (!dt || dt->type != QJ_STRING) return -1;
    char *mx = qp_str_replace_all(dt->s, "fp", "mxfp");
    int idx = mx ? mx_index(mx) : -1;
    free(mx);
    if (idx < 0) return -1;
    if (qj_str_eq(G(w, "qscheme"), "per_group")) {
        if (!qj_int_eq(G(w, "group_size"), 32) || !qj_str_eq(G(w, "scale_format"), "e8m0")) return -1;
        *rows = 1;
        return idx;
    }
    if (qj_str_eq(G(w, "qscheme"), "per_block") && !strcmp(mx_map[idx].dtype, "mxfp8_e4m3")) {
        const qj *bs = G(w, "block_size");
        if (!bs || bs->type != QJ_ARRAY || bs->n != 2 || bs->items[0]->type != QJ_INT || bs->items[0]->i <= 0 ||
            bs->items[0]->i > (1 << 20) || !qj_int_eq(bs->items[1], 32))
            return -1;
        if (!qj_str_eq(G(w, "scale_type"), "float8_e8m0fnu") || !qj_is_true(G(w, "symmetric")) ||
            qj_truthy(G(w, "is_dynamic")))
            return -1;
        *rows = (int)bs->items[0]->i;
        return idx;
    }
    return -1;
}

static qp_status is_ocp_mx(const qp_resolve_ctx *rc, const char *key, const qj *w, const qj *in, bool allow_static_fp8,
                           match *m, int *rows) {
    *m = no_match;
    int wi = ocp_mx_weight(w, rows);
    if (wi < 0) return QP_OK;
    const char *ak = NULL;
    if (qj_is_null(in)) {
        ak = NULL;
    } else if (!is_obj(in)) {
        return QP_OK;
    } else if (!qj_truthy(G(in, "is_dynamic"))) {
        if (allow_static_fp8 && qj_str_eq(G(in, "dtype"), "fp8_e4m3") && qj_str_eq(G(in, "qscheme"), "per_tensor") &&
            qj_is_true(G(in, "symmetric")))
            ak = "kFp8StaticTensorSym";
        else
            return QP_OK;
    } else if (qj_str_eq(G(in, "dtype"), "fp8_e4m3") && qj_str_eq(G(in, "qscheme"), "per_group") &&
               qj_int_eq(G(in, "group_size"), 32)) {
        ak = "kMxfp8Dynamic";
    } else if (qj_str_eq(G(in, "dtype"), "fp8_e4m3")) {
        ak = "kFp8DynamicTensorSym";
    } else {
        const qj *dt = G(in, "dtype");
        char *mx = dt && dt->type == QJ_STRING ? qp_str_replace_all(dt->s, "fp", "mxfp") : NULL;
        int ai = mx ? mx_index(mx) : -1;
        if (ai < 0) {
            qp_buf b = {0};
            if (mx) qp_buf_puts(&b, mx); else qp_pyrepr(&b, dt);
            free(mx);
            qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, key,
                                           "Unsupported input_dtype=%s in Quark's vLLM integration. Supported "
                                           "activation dtypes are dict_keys(['mxfp4', 'mxfp6_e3m2', 'mxfp6_e2m3', "
                                           "'mxfp8_e4m3']), or None for weight-only quantization.",
                                           qp_buf_str(&b));
            qp_buf_free(&b);
            return st;
        }
        free(mx);
        ak = mx_map[ai].akey;
    }
    *m = (match){true, mx_map[wi].wkey, ak};
    return QP_OK;
}

/* SGLang's _is_mx_fp4. */
static bool sg_is_mx_fp4(const qj *w, const qj *in) {
    if (!is_obj(w) || !is_obj(in)) return false;
    if (!qj_str_eq(G(w, "dtype"), "fp4") || !qj_str_eq(G(in, "dtype"), "fp4")) return false;
    if (!qj_str_eq(G(w, "qscheme"), "per_group") || !qj_str_eq(G(in, "qscheme"), "per_group")) return false;
    if (!qj_int_eq(G(w, "group_size"), 32) || !qj_int_eq(G(in, "group_size"), 32)) return false;
    if (qj_is_true(G(w, "is_dynamic"))) return false;
    const qj *idyn = G(in, "is_dynamic");
    if (idyn && idyn->type == QJ_BOOL && !idyn->b) return false; /* `is False` */
    return qj_str_eq(G(w, "scale_format"), "e8m0") && qj_str_eq(G(in, "scale_format"), "e8m0");
}

/* SGLang's _is_fp8_w8a8 (no per-block, any dynamic input accepted). */
static match sg_is_fp8_w8a8(const qj *w, const qj *in) {
    if (!is_obj(w) || !is_obj(in)) return no_match;
    bool fp8 = qj_str_eq(G(w, "dtype"), "fp8_e4m3") && qj_str_eq(G(in, "dtype"), "fp8_e4m3");
    bool tc = qj_str_eq(G(w, "qscheme"), "per_tensor") || qj_str_eq(G(w, "qscheme"), "per_channel");
    if (!fp8 || qj_truthy(G(w, "is_dynamic")) || !tc) return no_match;
    const char *wk = qj_str_eq(G(w, "qscheme"), "per_channel") ? "kFp8StaticChannelSym" : "kFp8StaticTensorSym";
    if (qj_truthy(G(in, "is_dynamic")))
        return (match){true, wk, qj_str_eq(G(in, "qscheme"), "per_channel") ? "kFp8DynamicTokenSym" : "kFp8DynamicTensorSym"};
    if (!qj_str_eq(G(in, "qscheme"), "per_tensor")) return no_match;
    return (match){true, wk, "kFp8StaticTensorSym"};
}

/* ---- scheme dispatch (docs/semantics.md §4) ----------------------------- */

/* qport's note after vLLM's "No quark compatible scheme": a key
 * or a dtype / qscheme value of the weight or input config that Quark never
 * writes, with the nearest one it does when that is a likely typo
 * ("per_chanel" -> "per_channel", "symetric" -> "symmetric", "int9" ->
 * "int8"). vLLM's message itself is kept as it is. */
static const char *const quark_keys[] = {"dtype", "qscheme", "is_dynamic", "symmetric", "group_size", "ch_axis",
                                         "block_size", "scale_format", "scale_type", "scale_calculation_mode",
                                         "round_method", "observer_cls", "mx_element_dtype", "is_scale_quant",
                                         "zero_point_type", "enable_buffer_reuse", "max_input_numel", "qat_spec", NULL};
static const char *const quark_dtypes[] = {"int8", "uint8", "int4", "uint4", "int2", "int16", "int32", "fp8_e4m3",
                                           "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4", "float16", "bfloat16", "float32",
                                           "mx", "mx6", "mx9", "bfp16", NULL};
static const char *const quark_qschemes[] = {"per_tensor", "per_channel", "per_group", "per_block", NULL};

/* Levenshtein distance, capped (names are short). */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The nearest of `valid` within 2 edits (the first on ties), or NULL; sets
 * *known when `x` is one of them. */
static const char *nearest(const char *x, const char *const *valid, bool *known) {
    const char *best = NULL;
    size_t bd = 3;
    *known = false;
    for (size_t i = 0; valid[i]; i++) {
        size_t d = edit_distance(x, valid[i]);
        if (!d) { *known = true; return valid[i]; }
        if (d < bd) { bd = d; best = valid[i]; }
    }
    return best;
}

static void note_spec(qp_buf *b, int *notes, const char *which, const qj *spec) {
    if (spec && spec->type == QJ_ARRAY) {
        for (size_t i = 0; i < spec->n; i++) note_spec(b, notes, which, spec->items[i]);
        return;
    }
    if (!spec || spec->type != QJ_OBJECT) return;
    bool known;
    for (size_t i = 0; i < spec->n; i++) {
        const char *k = spec->keys[i], *near = nearest(k, quark_keys, &known);
        if (known || !near) continue; /* a key Quark writes, or one too far from any to be a typo */
        qp_buf_printf(b, "%sunknown key '%s' in the %s config (did you mean '%s'?)", (*notes)++ ? "; " : " (qport: ", k, which, near);
    }
    static const char *const vkeys[2] = {"dtype", "qscheme"};
    const char *const *vals[2] = {quark_dtypes, quark_qschemes};
    for (int v = 0; v < 2; v++) {
        const qj *x = qj_get(spec, vkeys[v]);
        if (!x || x->type != QJ_STRING) continue;
        const char *near = nearest(x->s, vals[v], &known);
        if (known) continue;
        qp_buf_printf(b, "%s%s '%s' in the %s config is not one Quark writes", (*notes)++ ? "; " : " (qport: ", vkeys[v], x->s, which);
        if (near) qp_buf_printf(b, " (did you mean '%s'?)", near);
    }
}

static qp_status no_scheme(const qp_resolve_ctx *rc, const char *key, const qj *w, const qj *in) {
    qp_buf b = {0};
    qp_buf_puts(&b, "No quark compatible scheme was found. Weight config: ");
    qp_pyrepr(&b, w);
    qp_buf_puts(&b, ", Input config: ");
    qp_pyrepr(&b, in);
    int notes = 0;
    note_spec(&b, &notes, "weight", w);
    note_spec(&b, &notes, "input", in);
    if (notes) qp_buf_puts(&b, ")");
    qp_status st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, key, "%s", qp_buf_str(&b));
    qp_buf_free(&b);
    return st;
}

static const qj *unwrap_single(const qj *v) {
    if (v && v->type == QJ_ARRAY) return v->n == 1 ? v->items[0] : NULL;
    return v;
}

static void set_quark(qp_scheme *s, qp_scheme_kind kind, const char *cls, match m, int min_cap) {
    qp_scheme_init(s, kind);
    qp_scheme_set_names(s, "QuarkLinearMethod", cls, m.wkey, m.akey);
    s->min_capability = min_cap;
}

static qp_status sglang_scheme(const qp_resolve_ctx *rc, const qj *c, const char *key, qp_scheme *out) {
    const qj *w = G(c, "weight"), *in = G(c, "input_tensors");
    if (sg_is_mx_fp4(w, in)) {
        set_quark(out, QP_SCHEME_OCP_MX, "QuarkW4A4MXFP4", (match){true, "kMxfp4Static", "kMxfp4Dynamic"}, 70);
    } else {
        match m = sg_is_fp8_w8a8(w, in);
        /* SGLang checks the capability without raising; no GPU → False. */
        bool fp8_ok = rc->opts.capability != QP_CAPABILITY_NONE && rc->opts.capability >= 89;
        if (!m.ok || !fp8_ok) return no_scheme(rc, key, w, in);
        set_quark(out, QP_SCHEME_W8A8_FP8, "QuarkW8A8Fp8", m, 89);
    }
    return qp_capability_check(rc, out->min_capability);
}

qp_status qp_resolve_quark_config(const qp_resolve_ctx *rc, const qj *c, const char *key, qp_scheme *out) {
    if (!is_obj(c))
        return qp_resolve_fail(rc, QP_ERR_PARSE, key,
                               "no quantization config applies (%s is %s): vLLM would fail with AttributeError",
                               key, qj_is_null(c) ? "missing or null" : qj_type_name(c));
    if (qj_truthy(G(c, "output_tensors")) || qj_truthy(G(c, "bias")))
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, key,
                               "Currently, Quark models with output_tensors and bias quantized are not supported");
    if (!is_vllm(rc)) return sglang_scheme(rc, c, key, out);
    const qj *w = G(c, "weight"), *in = G(c, "input_tensors");
    if ((w && w->type == QJ_ARRAY && w->n > 1) || (in && in->type == QJ_ARRAY && in->n > 1)) {
        match m = is_nvfp4(w, in);
        if (!m.ok)
            return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, key,
                                   "Multi-entry weight or activation quantization configs are only supported for NVFP4.");
        set_quark(out, QP_SCHEME_NVFP4, "QuarkNVFP4", m, 75);
        return qp_capability_check(rc, 75);
    }
    w = unwrap_single(w);
    in = unwrap_single(in);
    if (is_obj(w) && qj_str_eq(G(w, "qscheme"), "per_block") && !qj_truthy(G(w, "block_size")))
        return qp_resolve_fail(rc, QP_ERR_VALUE, key,
                               "Quark W8A8 FP8 per-block weight quantization requires `block_size` in the weight "
                               "quantization config.");
    match m = is_fp8_w8a8(w, in);
    if (m.ok) {
        bool block = qj_str_eq(G(w, "qscheme"), "per_block");
        set_quark(out, block ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8,
                  block ? "QuarkW8A8Fp8PerBlock" : "QuarkW8A8Fp8", m, 89);
        return qp_capability_check(rc, 89);
    }
    m = is_w8a8_int8(w, in);
    if (m.ok) {
        set_quark(out, QP_SCHEME_W8A8_INT8, "QuarkW8A8Int8", m, 75);
        return qp_capability_check(rc, 75);
    }
    if (is_w4a16_int4(rc, w, in)) {
        long long g = 0;
        const char *k;
        char wkey[600];
        snprintf(wkey, sizeof wkey, "%s.weight", key);
        qp_status st = w4a16_int4_key(rc, wkey, w, &g, &k);
        if (st != QP_OK) return st;
        set_quark(out, QP_SCHEME_W4A16_INT4, "QuarkW4A16Int4", (match){true, k, NULL}, 70);
        w4a16_int4_set(rc, g, out);
        return qp_capability_check(rc, 70);
    }
    m = is_w4a8_mxfp4_fp8(w, in);
    if (m.ok) {
        set_quark(out, QP_SCHEME_W4A8_MXFP4_FP8, "QuarkW4A8_MXFP4_FP8", m, 70);
        return qp_capability_check(rc, 70);
    }
    int rows = 1;
    qp_status st = is_ocp_mx(rc, key, w, in, false, &m, &rows);
    if (st != QP_OK) return st;
    if (m.ok) {
        /* QuarkScheme.__init__ key validation: QuarkOCP_MX accepts only MX
         * activation keys or none (docs/semantics.md §4). */
        if (m.akey && !strstr(m.akey, "Mxfp"))
            return qp_resolve_fail(rc, QP_ERR_VALUE, key, "Unsupported activation quant key: %s", qp_quant_key_repr(m.akey));
        set_quark(out, QP_SCHEME_OCP_MX, "QuarkOCP_MX", m, 70);
        if (rows > 1) {
            out->weight.granularity = QP_GRAN_BLOCK;
            out->weight.block[0] = rows;
            out->weight.block[1] = 32;
        }
        return qp_capability_check(rc, 70);
    }
    return no_scheme(rc, key, w, in);
}

/* _is_fp8_w4a8 (MoE only): weight [fp8_e4m3 per_tensor, int4 per_channel
 * sym ch_axis 0], both static; input fp8_e4m3 (a one-entry list is
 * unwrapped), dynamic (per-token key) or static per_tensor. */
static match is_fp8_w4a8(const qj *w, const qj *in) {
    if (in && in->type == QJ_ARRAY) {
        if (in->n != 1) return no_match;
        in = in->items[0];
    }
    if (!w || w->type != QJ_ARRAY || w->n != 2 || !is_obj(in) || !is_obj(w->items[0]) || !is_obj(w->items[1]))
        return no_match;
    const qj *w0 = w->items[0], *w1 = w->items[1];
    bool dt = qj_str_eq(G(w0, "dtype"), "fp8_e4m3") && qj_str_eq(G(w1, "dtype"), "int4") && qj_str_eq(G(in, "dtype"), "fp8_e4m3");
    bool st = !qj_truthy(G(w0, "is_dynamic")) && !qj_truthy(G(w1, "is_dynamic"));
    bool sh = qj_str_eq(G(w0, "qscheme"), "per_tensor") && qj_str_eq(G(w1, "qscheme"), "per_channel") &&
              qj_is_true(G(w1, "symmetric")) && qj_int_eq(G(w1, "ch_axis"), 0);
    if (!(dt && st && sh)) return no_match;
    if (qj_truthy(G(in, "is_dynamic"))) return (match){true, "kInt4W4A8StaticChannelSym", "kFp8DynamicTokenSym"};
    if (!qj_str_eq(G(in, "qscheme"), "per_tensor")) return no_match;
    return (match){true, "kInt4W4A8StaticChannelSym", "kFp8StaticTensorSym"};
}

static bool key_in(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (k ? list[i] && !strcmp(k, list[i]) : !list[i]) return true;
    return false;
}

/* QuarkMoEMethod.__init__: the method's supported keys (activation first). */
static qp_status moe_keys(const qp_resolve_ctx *rc, const char *key, const match *m, const char *const *acts, size_t na,
                          const char *const *ws, size_t nw) {
    if (!key_in(m->akey, acts, na))
        return qp_resolve_fail(rc, QP_ERR_VALUE, key, "Unsupported activation quant key: %s", qp_quant_key_repr(m->akey));
    if (!key_in(m->wkey, ws, nw))
        return qp_resolve_fail(rc, QP_ERR_VALUE, key, "Unsupported weight quant key: %s", qp_quant_key_repr(m->wkey));
    return QP_OK;
}
#define KEYS(a) a, sizeof a / sizeof *a

static void set_moe(qp_scheme *s, qp_scheme_kind kind, const char *cls, match m, int min_cap) {
    qp_scheme_init(s, kind);
    qp_scheme_set_names(s, "QuarkMoEMethod", cls, m.wkey, m.akey);
    s->min_capability = min_cap;
}

/* vLLM 0.34.0's QuarkMoEMethod.get_moe_method_target + get_moe_method
 * (with layer_name) + the chosen method's __init__
 * (vLLM 0.34.0's quark/quark_moe.py): lists of more than
 * one entry are W4A8-FP8 (int4) or NVFP4; then fp8 w8a8 (per-block
 * included), W4A16 int4/uint4, OCP MX (static fp8 activations allowed;
 * MXFP8 weights go to QuarkW8A8Mxfp8MoEMethod), int8 w8a8; anything else is
 * RuntimeError("Unsupported FusedMoe scheme"). Each method checks its own
 * key lists (QuarkMoEMethod.__init__, activation first). The MoE methods
 * run no capability check of their own (their kernels fall back or
 * emulate); min_capability is the matching linear scheme's, for
 * information. */
static qp_status vllm_moe(const qp_resolve_ctx *rc, const char *key, const qj *w, const qj *in, qp_scheme *out) {
    static const char *const fp8_acts[] = {"kFp8StaticTensorSym", "kFp8DynamicTensorSym", "kFp8DynamicTokenSym",
                                           "kFp8Dynamic128Sym"};
    static const char *const fp8_ws[] = {"kFp8StaticChannelSym", "kFp8StaticTensorSym", "kFp8Static128BlockSym"};
    static const char *const int8_acts[] = {"kInt8StaticTensorSym",  "kInt8StaticTensorAsym", "kInt8DynamicTensorSym",
                                            "kInt8DynamicTensorAsym", "kInt8DynamicTokenSym",  "kInt8DynamicTokenAsym"};
    static const char *const int8_ws[] = {"kInt8StaticChannelSym", "kInt8StaticTensorSym"};
    static const char *const w4_acts[] = {NULL};
    static const char *const w4_ws[] = {"kInt4Static", "kInt4Static32", "kInt4StaticAsym", "kInt4Static32Asym"};
    /* QuarkOCP_MX_MoEMethod: MXFP4/MXFP6 elements only (MXFP8 experts are
     * QuarkW8A8Mxfp8MoEMethod's), and no MXFP8 activations */
    static const char *const mx_acts[] = {"kMxfp4Dynamic",        "kMxfp6E3M2Dynamic",   "kMxfp6E2M3Dynamic",
                                          "kFp8DynamicTensorSym", "kFp8StaticTensorSym", NULL};
    static const char *const mx_ws[] = {"kMxfp4Static", "kMxfp6E3M2Static", "kMxfp6E2M3Static"};
    static const char *const mxfp8_acts[] = {"kMxfp8Dynamic"};
    static const char *const mxfp8_ws[] = {"kMxfp8Static"};
    match m;
    qp_status st;
    if ((w && w->type == QJ_ARRAY && w->n > 1) || (in && in->type == QJ_ARRAY && in->n > 1)) {
        if ((m = is_fp8_w4a8(w, in)).ok) {
            /* QuarkW4A8Fp8MoEMethod.__init__ asserts ROCm AITER fused MoE,
             * which no platform qport models provides */
            set_moe(out, QP_SCHEME_W4A8_INT4_FP8, "QuarkW4A8Fp8MoEMethod", m, 0);
            return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, key,
                                   "AssertionError: W4A8 FP8 MoE requires ROCm AITER fused MoE support.");
        }
        if ((m = is_nvfp4(w, in)).ok) {
            set_moe(out, QP_SCHEME_NVFP4, "QuarkNvfp4MoEMethod", m, 75);
            return QP_OK;
        }
        return qp_resolve_fail(rc, QP_ERR_CAPABILITY, key, "Unsupported FusedMoe scheme");
    }
    w = unwrap_single(w);
    in = unwrap_single(in);
    if ((m = is_fp8_w8a8(w, in)).ok) {
        if ((st = moe_keys(rc, key, &m, KEYS(fp8_acts), KEYS(fp8_ws)))) return st;
        /* the weight/input qschemes the keys name; per-block pairs only
         * with per-group (kFp8Dynamic128Sym) activations */
        const char *wq = !strcmp(m.wkey, "kFp8StaticChannelSym")    ? "per_channel"
                         : !strcmp(m.wkey, "kFp8Static128BlockSym") ? "per_block"
                                                                    : "per_tensor";
        const char *aq = !strcmp(m.akey, "kFp8DynamicTokenSym") ? "per_channel"
                         : !strcmp(m.akey, "kFp8Dynamic128Sym") ? "per_group"
                                                                : "per_tensor";
        bool ok = (!strcmp(wq, "per_tensor") && !strcmp(aq, "per_tensor")) ||
                  (!strcmp(wq, "per_channel") && !strcmp(aq, "per_channel")) ||
                  (!strcmp(wq, "per_block") && !strcmp(aq, "per_group"));
        if (!ok)
            return qp_resolve_fail(rc, QP_ERR_VALUE, key,
                                   "For FP8 Fused MoE layers, only per-tensor, per-channel and per-block scales for "
                                   "weights and activations are supported. Found %s, %s",
                                   wq, aq);
        bool block = !strcmp(wq, "per_block");
        set_moe(out, block ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8, "QuarkW8A8Fp8MoEMethod", m, 89);
        if (block) {
            out->weight.granularity = QP_GRAN_BLOCK;
            out->weight.block[0] = out->weight.block[1] = 128;
        }
        return QP_OK;
    }
    /* QuarkW4A16Int4MoEMethod reads group_size from the config (the key
     * only says 32 or not) and symmetry from the key */
    if (is_w4a16_int4(rc, w, in)) {
        long long g = 0;
        const char *k;
        char wkey[700];
        snprintf(wkey, sizeof wkey, "%s.weight", key);
        if ((st = w4a16_int4_key(rc, wkey, w, &g, &k))) return st;
        m = (match){true, k, NULL};
        if ((st = moe_keys(rc, key, &m, KEYS(w4_acts), KEYS(w4_ws)))) return st;
        set_moe(out, QP_SCHEME_W4A16_INT4, "QuarkW4A16Int4MoEMethod", m, 70);
        w4a16_int4_set(rc, g, out);
        return QP_OK;
    }
    int rows = 1;
    if ((st = is_ocp_mx(rc, key, w, in, true, &m, &rows))) return st;
    if (m.ok && !strcmp(m.wkey, "kMxfp8Static")) {
        /* MXFP8 experts run through the FP8 MoE kernels; only the 1-D
         * per_group spelling */
        if (rows != 1) {
            qp_buf b = {0};
            qp_pyrepr(&b, w);
            st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, key,
                                 "Quark MXFP8 MoE experts support only the 1-D per_group (group_size=32, e8m0) weight "
                                 "spelling, got %s for %s",
                                 qp_buf_str(&b), rc->layer);
            qp_buf_free(&b);
            return st;
        }
        if ((st = moe_keys(rc, key, &m, KEYS(mxfp8_acts), KEYS(mxfp8_ws)))) return st;
        set_moe(out, QP_SCHEME_OCP_MX, "QuarkW8A8Mxfp8MoEMethod", m, 70);
        return QP_OK;
    }
    if (m.ok) {
        if ((st = moe_keys(rc, key, &m, KEYS(mx_acts), KEYS(mx_ws)))) return st;
        /* OCP_MX_Scheme.from_quant_dtype(input_dtype, weight_dtype) */
        static const struct { const char *wkey, *name; } wd[] = {
            {"kMxfp4Static", "mxfp4"}, {"kMxfp6E3M2Static", "mxfp6_e3m2"}, {"kMxfp6E2M3Static", "mxfp6_e2m3"}};
        static const struct { const char *akey, *name; } ad[] = {
            {NULL, "None"}, {"kMxfp4Dynamic", "mxfp4"}, {"kMxfp6E3M2Dynamic", "mxfp6_e3m2"},
            {"kMxfp6E2M3Dynamic", "mxfp6_e2m3"}, {"kFp8DynamicTensorSym", "fp8"}, {"kFp8StaticTensorSym", "fp8"}};
        size_t wi = 0, ai = 0;
        while (wi < 2 && strcmp(wd[wi].wkey, m.wkey)) wi++;
        while (ai < 5 && (m.akey ? !ad[ai].akey || strcmp(ad[ai].akey, m.akey) : ad[ai].akey != NULL)) ai++;
        const char *wn = wd[wi].name, *an = ad[ai].name;
        /* the OCP_MX_Scheme members: weight-only, same-dtype activations,
         * MXFP6 activations on MXFP4 weights, fp8 on any */
        bool fp8 = !strcmp(an, "fp8");
        bool pair_ok = !m.akey || fp8 || !strcmp(an, wn) || !strcmp(wn, "mxfp4");
        if (!pair_ok)
            return qp_resolve_fail(rc, QP_ERR_VALUE, key,
                                   "Unsupported OCP MX dtype combination for MoE: input_dtype=%s, weight_dtype=%s. "
                                   "Supported MoE weight dtypes are mxfp4, mxfp6_e3m2, and mxfp6_e2m3.",
                                   an, wn);
        bool static_fp8 = m.akey && !strcmp(m.akey, "kFp8StaticTensorSym");
        if (fp8 && !static_fp8)
            return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, key,
                                   "QuarkOCP_MX_MoEMethod with dynamic input scales is currently not implemented for "
                                   "OCP MX scheme w_%s_a_fp8. Please open an issue.", wn);
        /* w_mxfp6_*_a_fp8 passes __init__; vLLM refuses it after loading
         * (get_fused_moe_quant_config), which qp_moe_create reproduces */
        set_moe(out, static_fp8 && wi == 0 ? QP_SCHEME_W4A8_MXFP4_FP8 : QP_SCHEME_OCP_MX, "QuarkOCP_MX_MoEMethod", m, 70);
        return QP_OK;
    }
    if ((m = is_w8a8_int8(w, in)).ok) {
        if ((st = moe_keys(rc, key, &m, KEYS(int8_acts), KEYS(int8_ws)))) return st;
        /* QuarkW8A8Int8MoEMethod maps asymmetric activation keys to their
         * symmetric ones ("oracle needs to support asym int8"): the
         * experts run symmetric whatever the config says */
        if (strstr(m.akey, "Asym")) {
            static const char *const sym[][2] = {{"kInt8StaticTensorAsym", "kInt8StaticTensorSym"},
                                                 {"kInt8DynamicTensorAsym", "kInt8DynamicTensorSym"},
                                                 {"kInt8DynamicTokenAsym", "kInt8DynamicTokenSym"}};
            for (size_t i = 0; i < 3; i++)
                if (!strcmp(m.akey, sym[i][0])) m.akey = sym[i][1];
        }
        set_moe(out, QP_SCHEME_W8A8_INT8, "QuarkW8A8Int8MoEMethod", m, 75);
        return QP_OK;
    }
    return qp_resolve_fail(rc, QP_ERR_CAPABILITY, key, "Unsupported FusedMoe scheme");
}

/* The MoE path: the matched config decides the experts' method. vLLM's
 * QuarkMoEMethod targets are reported with their weight/activation keys. */
static qp_status resolve_moe(const qp_resolve_ctx *rc, const found *f, qp_scheme *out) {
    const qj *c = f->cfg;
    if (!is_obj(c))
        return qp_resolve_fail(rc, QP_ERR_PARSE, f->key, "no quantization config applies to this MoE layer");
    if (qj_truthy(G(c, "output_tensors")) || qj_truthy(G(c, "bias")))
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, f->key,
                               "Currently, Quark models with output_tensors and bias quantized are not supported");
    if (is_vllm(rc)) return vllm_moe(rc, f->key, G(c, "weight"), G(c, "input_tensors"), out);
    /* SGLang's QuarkMoEMethod.get_moe_method: MXFP4 (W4A4), W4A8 MXFP4-FP8,
     * FP8 W8A8, with a capability check; nothing else */
    const qj *w = unwrap_single(G(c, "weight")), *in = unwrap_single(G(c, "input_tensors"));
    match m;
    if (sg_is_mx_fp4(w, in)) {
        qp_scheme_init(out, QP_SCHEME_OCP_MX);
        qp_scheme_set_names(out, "QuarkFusedMoEMethod", "QuarkW4A4MXFp4MoE", "kMxfp4Static", "kMxfp4Dynamic");
    } else if (is_w4a8_mxfp4_fp8(w, in).ok ||
               (is_obj(w) && is_obj(in) && qj_str_eq(G(w, "dtype"), "fp4") && qj_str_eq(G(in, "dtype"), "fp8_e4m3fn"))) {
        qp_scheme_init(out, QP_SCHEME_W4A8_MXFP4_FP8);
        qp_scheme_set_names(out, "QuarkFusedMoEMethod", "QuarkW4A8MXFp4MoE", "kMxfp4Static", "kFp8StaticTensorSym");
    } else if ((m = sg_is_fp8_w8a8(w, in)).ok) {
        qp_scheme_init(out, QP_SCHEME_W8A8_FP8);
        qp_scheme_set_names(out, "QuarkFusedMoEMethod", "QuarkW8A8FP8MoE", m.wkey, m.akey);
        out->min_capability = 89;
    } else {
        return qp_resolve_fail(rc, QP_ERR_CAPABILITY, f->key, "Unsupported FusedMoe scheme");
    }
    return qp_capability_check(rc, out->min_capability);
}

qp_status qp_resolve_quark(const qp_resolve_ctx *rc, qp_scheme *out) {
    bool moe = rc->kind == QP_LAYER_MOE;
    bool ignored = false;
    qp_status st = qp_resolve_should_ignore(rc, "exclude", moe && is_vllm(rc), &ignored);
    if (st != QP_OK) return st;
    if (rc->kind == QP_LAYER_ATTENTION) {
        /* vllm: an excluded attention module gets no method; SGLang still
         * builds its QuarkKVCacheMethod. */
        if (ignored && is_vllm(rc)) { qp_scheme_init(out, QP_SCHEME_NONE); return QP_OK; }
        if (rc->cfg->kv_status != QP_OK)
            return qp_resolve_fail(rc, rc->cfg->kv_status, "export.kv_cache_group", "%s", rc->cfg->kv_error);
        qp_scheme_init(out, rc->cfg->kv_cache_cfg ? QP_SCHEME_KV_CACHE : QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, "QuarkKVCacheMethod", NULL, NULL, NULL);
        out->kv_cache = rc->cfg->kv_cache;
        if (out->kv_cache.dtype != QP_DTYPE_NONE) out->kv_cache.scale_dtype = QP_DTYPE_F32;
        return QP_OK;
    }
    /* vLLM builds lm_head as a ParallelLMHead and embed_tokens as a
     * VocabParallelEmbedding, neither a LinearBase:
     * QuarkConfig.get_quant_method_target gives them no method whether or
     * not `exclude` names them, and they fall back to
     * UnquantizedEmbeddingMethod. The architecture table names them. */
    if (rc->kind == QP_LAYER_LINEAR && is_vllm(rc)) {
        qp_module_class c = qp_resolve_module_class(rc, NULL);
        if (c == QP_MODULE_LM_HEAD || c == QP_MODULE_EMBEDDING) {
            qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
            qp_scheme_set_names(out, "UnquantizedEmbeddingMethod", NULL, NULL, NULL);
            return QP_OK;
        }
    }
    if (ignored) {
        if (moe) {
            if (!is_vllm(rc)) { qp_scheme_init(out, QP_SCHEME_NONE); return QP_OK; }
            qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
            qp_scheme_set_names(out, "UnquantizedFusedMoEMethod", NULL, NULL, NULL);
            return QP_OK;
        }
        qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, "UnquantizedLinearMethod", NULL, NULL, NULL);
        return QP_OK;
    }
    found f;
    st = find_config(rc, rc->layer, 0, &f);
    if (st != QP_OK) return st;
    char key[600];
    if (f.pattern) snprintf(key, sizeof key, "layer_quant_config.%s", f.key);
    else snprintf(key, sizeof key, "%s", f.key);
    if (moe) {
        found g = {f.cfg, key, false};
        return resolve_moe(rc, &g, out);
    }
    return qp_resolve_quark_config(rc, f.cfg, key, out);
}
