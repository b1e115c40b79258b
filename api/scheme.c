/* The scheme vocabulary: vLLM QuantKey names and what each means (docs/semantics.md §4),
 * scheme kinds, dtype names, and the public resolve entry point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct key_def {
    const char *name;
    qp_dtype dtype;
    qp_granularity gran;
    int group, block0, block1;
    int dynamic, symmetric;
    qp_dtype scale, scale2;
} key_def;

/* docs/semantics.md §4: QuantKey = (dtype, ScaleDesc(dtype, static, group shape),
 * scale2, symmetric). One row per constant qport can produce. */
static const key_def keys[] = {
    {"kFp8StaticTensorSym", QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, 0, 0, 0, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8DynamicTensorSym", QP_DTYPE_F8_E4M3FN, QP_GRAN_TENSOR, 0, 0, 0, 1, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8StaticChannelSym", QP_DTYPE_F8_E4M3FN, QP_GRAN_CHANNEL, 0, 0, 0, 0, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8DynamicTokenSym", QP_DTYPE_F8_E4M3FN, QP_GRAN_TOKEN, 0, 0, 0, 1, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8Dynamic128Sym", QP_DTYPE_F8_E4M3FN, QP_GRAN_GROUP, 128, 0, 0, 1, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8Static128BlockSym", QP_DTYPE_F8_E4M3FN, QP_GRAN_BLOCK, 0, 128, 128, 0, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kFp8Static128BlockE8M0Sym", QP_DTYPE_F8_E4M3FN, QP_GRAN_BLOCK, 0, 128, 128, 0, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kInt8StaticTensorSym", QP_DTYPE_I8, QP_GRAN_TENSOR, 0, 0, 0, 0, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt8StaticTensorAsym", QP_DTYPE_I8, QP_GRAN_TENSOR, 0, 0, 0, 0, 0, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt8StaticChannelSym", QP_DTYPE_I8, QP_GRAN_CHANNEL, 0, 0, 0, 0, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt8DynamicTokenSym", QP_DTYPE_I8, QP_GRAN_TOKEN, 0, 0, 0, 1, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt8DynamicTokenAsym", QP_DTYPE_I8, QP_GRAN_TOKEN, 0, 0, 0, 1, 0, QP_DTYPE_F32, QP_DTYPE_NONE},
    /* vLLM's names say "Tensor", but its dynamic int8 kernel is always
     * per-token (docs/semantics.md §4, §12); the granularity records what runs. */
    {"kInt8DynamicTensorSym", QP_DTYPE_I8, QP_GRAN_TOKEN, 0, 0, 0, 1, 1, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt8DynamicTensorAsym", QP_DTYPE_I8, QP_GRAN_TOKEN, 0, 0, 0, 1, 0, QP_DTYPE_F32, QP_DTYPE_NONE},
    {"kInt4Static", QP_DTYPE_I4, QP_GRAN_GROUP, 0, 0, 0, 0, 1, QP_DTYPE_F16, QP_DTYPE_NONE},
    {"kInt4Static32", QP_DTYPE_I4, QP_GRAN_GROUP, 32, 0, 0, 0, 1, QP_DTYPE_F16, QP_DTYPE_NONE},
    {"kInt4StaticAsym", QP_DTYPE_U4, QP_GRAN_GROUP, 0, 0, 0, 0, 0, QP_DTYPE_F16, QP_DTYPE_NONE},
    {"kInt4Static32Asym", QP_DTYPE_U4, QP_GRAN_GROUP, 32, 0, 0, 0, 0, QP_DTYPE_F16, QP_DTYPE_NONE},
    {"kMxfp4Static", QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 32, 0, 0, 0, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp4Dynamic", QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 32, 0, 0, 1, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp6E3M2Static", QP_DTYPE_F6_E3M2, QP_GRAN_GROUP, 32, 0, 0, 0, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp6E3M2Dynamic", QP_DTYPE_F6_E3M2, QP_GRAN_GROUP, 32, 0, 0, 1, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp6E2M3Static", QP_DTYPE_F6_E2M3, QP_GRAN_GROUP, 32, 0, 0, 0, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp6E2M3Dynamic", QP_DTYPE_F6_E2M3, QP_GRAN_GROUP, 32, 0, 0, 1, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp8Static", QP_DTYPE_F8_E4M3FN, QP_GRAN_GROUP, 32, 0, 0, 0, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kMxfp8Dynamic", QP_DTYPE_F8_E4M3FN, QP_GRAN_GROUP, 32, 0, 0, 1, 1, QP_DTYPE_E8M0, QP_DTYPE_NONE},
    {"kNvfp4Static", QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, 0, 0, 0, 1, QP_DTYPE_F8_E4M3FN, QP_DTYPE_F32},
    {"kNvfp4Dynamic", QP_DTYPE_F4_E2M1, QP_GRAN_GROUP, 16, 0, 0, 1, 1, QP_DTYPE_F8_E4M3FN, QP_DTYPE_F32},
};

static void qtensor_from_key(qp_qtensor *t, const char *name) {
    memset(t, 0, sizeof *t);
    if (!name || !*name) return;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (strcmp(keys[i].name, name)) continue;
        t->dtype = keys[i].dtype;
        t->granularity = keys[i].gran;
        t->group_size = keys[i].group;
        t->block[0] = keys[i].block0;
        t->block[1] = keys[i].block1;
        t->dynamic = keys[i].dynamic;
        t->symmetric = keys[i].symmetric;
        t->scale_dtype = keys[i].scale;
        t->scale2_dtype = keys[i].scale2;
        return;
    }
}

void qp_scheme_init(qp_scheme *s, qp_scheme_kind kind) {
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->kind = kind;
}

static void copy_name(char *dst, const char *src) {
    snprintf(dst, QP_NAME_MAX, "%s", src ? src : "");
}

void qp_scheme_set_names(qp_scheme *s, const char *method, const char *scheme_class,
                         const char *weight_key, const char *act_key) {
    copy_name(s->method, method);
    copy_name(s->scheme_class, scheme_class);
    copy_name(s->weight_key, weight_key);
    copy_name(s->activation_key, act_key);
    qtensor_from_key(&s->weight, weight_key);
    qtensor_from_key(&s->activation, act_key);
}

static qp_dtype quark_dtype(const char *s) {
    static const struct { const char *n; qp_dtype d; } t[] = {
        {"fp8_e4m3", QP_DTYPE_F8_E4M3FN}, {"fp8_e5m2", QP_DTYPE_F8_E5M2}, {"int8", QP_DTYPE_I8},
        {"uint8", QP_DTYPE_U8}, {"int4", QP_DTYPE_I4}, {"uint4", QP_DTYPE_U4}, {"fp4", QP_DTYPE_F4_E2M1},
        {"fp6_e3m2", QP_DTYPE_F6_E3M2}, {"fp6_e2m3", QP_DTYPE_F6_E2M3}, {"bfloat16", QP_DTYPE_BF16},
        {"float16", QP_DTYPE_F16},
    };
    for (size_t i = 0; s && i < sizeof t / sizeof *t; i++)
        if (!strcmp(t[i].n, s)) return t[i].d;
    return QP_DTYPE_NONE;
}

void qp_qtensor_from_quark(qp_qtensor *t, const qj *q) {
    memset(t, 0, sizeof *t);
    if (!q || q->type != QJ_OBJECT) return;
    const qj *dt = qj_get(q, "dtype"), *qs = qj_get(q, "qscheme"), *gs = qj_get(q, "group_size");
    t->dtype = quark_dtype(dt && dt->type == QJ_STRING ? dt->s : NULL);
    t->dynamic = qj_truthy(qj_get(q, "is_dynamic"));
    t->symmetric = !(qj_get(q, "symmetric") && qj_get(q, "symmetric")->type == QJ_BOOL && !qj_get(q, "symmetric")->b);
    t->scale_dtype = QP_DTYPE_F32;
    if (qj_str_eq(qs, "per_tensor")) t->granularity = QP_GRAN_TENSOR;
    else if (qj_str_eq(qs, "per_channel")) t->granularity = QP_GRAN_CHANNEL;
    else if (qj_str_eq(qs, "per_group")) t->granularity = QP_GRAN_GROUP;
    else if (qj_str_eq(qs, "per_block")) t->granularity = QP_GRAN_BLOCK;
    if (gs && gs->type == QJ_INT && gs->i > 0 && gs->i < (1 << 30)) t->group_size = (int)gs->i;
}

QP_API const char *qp_dtype_name(qp_dtype d) {
    static const char *n[QP_DTYPE_COUNT_] = {
        "none", "f32", "f16", "bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2",
        "fp4_e2m1", "e8m0", "int8", "uint8", "int4", "uint4", "int32", "int64"};
    return (unsigned)d < QP_DTYPE_COUNT_ ? n[d] : "unknown";
}

QP_API const char *qp_granularity_name(qp_granularity g) {
    static const char *n[] = {"none", "tensor", "channel", "token", "group", "block"};
    return (unsigned)g <= QP_GRAN_BLOCK ? n[g] : "unknown";
}

QP_API const char *qp_layer_kind_name(qp_layer_kind k) {
    static const char *n[] = {"linear", "attention", "moe"};
    return (unsigned)k <= QP_LAYER_MOE ? n[k] : "unknown";
}

QP_API qp_status qp_layer_kind_parse(const char *s, qp_layer_kind *out) {
    if (!s || !out) return QP_ERR_INVALID_ARGUMENT;
    for (int k = 0; k <= QP_LAYER_MOE; k++)
        if (!strcmp(s, qp_layer_kind_name((qp_layer_kind)k))) { *out = (qp_layer_kind)k; return QP_OK; }
    return QP_ERR_INVALID_ARGUMENT;
}

QP_API void qp_resolve_options_init(qp_resolve_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->capability = QP_CAPABILITY_NONE;
    o->dialect = QP_DIALECT_VLLM;
}

/* vLLM's default for Llama-style models (the model class attribute). */
static const char *const qkv_shards[] = {"q_proj", "k_proj", "v_proj"};
static const char *const gate_up_shards[] = {"gate_proj", "up_proj"};
static const qp_packed_module default_packed[] = {
    {"qkv_proj", qkv_shards, 3},
    {"gate_up_proj", gate_up_shards, 2},
};

qp_status qp_resolve_fail(const qp_resolve_ctx *rc, qp_status st, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qp_status r = qp_error_setv(rc->cfg->ctx, st, rc->cfg->file, key, rc->layer, fmt, ap);
    va_end(ap);
    return r;
}

qp_status qp_capability_check(const qp_resolve_ctx *rc, int min_capability) {
    /* docs/semantics.md §4, §19: no capability (no GPU platform) → no error raised. */
    if (rc->opts.capability == QP_CAPABILITY_NONE || rc->opts.capability >= min_capability) return QP_OK;
    return qp_resolve_fail(rc, QP_ERR_CAPABILITY, NULL,
                           "Quantization scheme is not supported for the current GPU. Min capability: %d. "
                           "Current capability: %d.",
                           min_capability, rc->opts.capability);
}

QP_API qp_status qp_scheme_check_capability(qp_context *ctx, const qp_scheme *s, int capability) {
    if (!s) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, "NULL scheme");
    if (capability == QP_CAPABILITY_NONE || capability >= s->min_capability) return QP_OK;
    return qp_error_set(ctx, QP_ERR_CAPABILITY, NULL, NULL, NULL,
                        "Quantization scheme is not supported for the current GPU. Min capability: %d. "
                        "Current capability: %d.",
                        s->min_capability, capability);
}

/* vLLM's config-level check (_verify_quantization): the method's own
 * minimum, a ValueError raised before any layer is built. */
static qp_status method_capability(const qp_resolve_ctx *rc) {
    int cap = rc->opts.capability, min;
    switch (rc->cfg->method) {
    case QP_METHOD_QQQ: min = 80; break;
    case QP_METHOD_FP8: min = 80; break;
    default: min = 70; break;
    }
    if (cap == QP_CAPABILITY_NONE || cap >= min) return QP_OK;
    return qp_resolve_fail(rc, QP_ERR_VALUE, NULL,
                           "The quantization method %s is not supported for the current GPU. Minimum "
                           "capability: %d. Current capability: %d.",
                           qp_method_name(rc->cfg->method), min, cap);
}

static qp_status resolve_setup(const qp_config *cfg, const char *layer, qp_layer_kind kind,
                               const qp_resolve_options *opts, qp_resolve_ctx *rc) {
    memset(rc, 0, sizeof *rc);
    rc->cfg = cfg;
    rc->layer = layer;
    rc->kind = kind;
    qp_resolve_options_init(&rc->opts);
    if (opts) {
        if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof rc->opts)
            return qp_resolve_fail(rc, QP_ERR_INVALID_ARGUMENT, NULL,
                                   "qp_resolve_options.struct_size %zu is not a size this library knows",
                                   opts->struct_size);
        memcpy(&rc->opts, opts, opts->struct_size);
    }
    if ((unsigned)kind > QP_LAYER_MOE)
        return qp_resolve_fail(rc, QP_ERR_INVALID_ARGUMENT, NULL, "unknown layer kind %d", (int)kind);
    if ((unsigned)rc->opts.dialect > QP_DIALECT_SGLANG)
        return qp_resolve_fail(rc, QP_ERR_INVALID_ARGUMENT, NULL, "unknown dialect %d", (int)rc->opts.dialect);
    if (rc->opts.capability != QP_CAPABILITY_NONE && (rc->opts.capability < 0 || rc->opts.capability > 1000))
        return qp_resolve_fail(rc, QP_ERR_INVALID_ARGUMENT, NULL, "capability %d is not major*10+minor",
                               rc->opts.capability);
    if (rc->opts.packed) {
        rc->packed.mods = rc->opts.packed;
        rc->packed.n = rc->opts.n_packed;
    } else if (cfg->cfg_packed) {
        rc->packed.mods = cfg->cfg_packed;
        rc->packed.n = cfg->n_cfg_packed;
    } else if (cfg->arch.row) { /* the model class's (api/arch.c) */
        rc->packed.mods = cfg->arch.packed;
        rc->packed.n = cfg->arch.n_packed;
    } else {
        rc->packed.mods = default_packed;
        rc->packed.n = 2;
    }
    for (size_t i = 0; i < rc->packed.n; i++)
        if (!rc->packed.mods[i].fused || !*rc->packed.mods[i].fused || (rc->packed.mods[i].n_shards && !rc->packed.mods[i].shards))
            return qp_resolve_fail(rc, QP_ERR_INVALID_ARGUMENT, NULL, "packed-modules mapping entry %zu is empty", i);
    if (!rc->opts.model_type) rc->opts.model_type = cfg->model_type;
    return QP_OK;
}

/* What the model class decides before the config is asked (api/arch.c):
 * a module built with quant_config=None (an MoE router, Qwen-MoE's
 * shared_expert_gate) is UnquantizedLinearMethod; an lm_head or
 * embedding that the method's get_quant_method does not quantize (it
 * quantizes LinearBase only) is UnquantizedEmbeddingMethod. Quark's
 * lm_head and embeddings are left to its resolver, which asks the same
 * question after its exclude check (QuarkConfig.get_quant_method_target
 * runs should_ignore_layer first, and its errors win).
 * QP_ERR_NOT_FOUND: the config decides. */
qp_module_class qp_resolve_module_class(const qp_resolve_ctx *rc, int *known) {
    qp_arch_info a = {.struct_size = sizeof a};
    qp_config_arch(rc->cfg, &a);
    if (known) *known = a.known;
    return qp_arch_module_class_vllm(&a, rc->cfg->method, rc->layer);
}

static qp_status module_class_rule(const qp_resolve_ctx *rc, qp_scheme *out) {
    int known;
    qp_module_class c = qp_resolve_module_class(rc, &known);
    if (c == QP_MODULE_LINEAR_UNQUANTIZED && known) {
        qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, "UnquantizedLinearMethod", NULL, NULL, NULL);
        return QP_OK;
    }
    if ((c == QP_MODULE_LM_HEAD || c == QP_MODULE_EMBEDDING) && rc->cfg->method != QP_METHOD_QUARK &&
        rc->cfg->method != QP_METHOD_QUARK_ONLINE &&
        !qp_method_quantizes(rc->cfg->method, c)) {
        qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
        qp_scheme_set_names(out, "UnquantizedEmbeddingMethod", NULL, NULL, NULL);
        return QP_OK;
    }
    return QP_ERR_NOT_FOUND;
}

QP_API qp_status qp_config_resolve(const qp_config *cfg, const char *layer_name, qp_layer_kind kind,
                                   const qp_resolve_options *opts, qp_scheme *out) {
    if (!cfg) return QP_ERR_INVALID_ARGUMENT;
    if (!layer_name || !out)
        return qp_error_set(cfg->ctx, QP_ERR_INVALID_ARGUMENT, cfg->file, NULL, layer_name,
                            "qp_config_resolve: NULL layer name or output");
    qp_resolve_ctx rc;
    qp_status st = resolve_setup(cfg, layer_name, kind, opts, &rc);
    if (st != QP_OK) return st;
    qp_scheme_init(out, QP_SCHEME_NONE);
    if (cfg->load_status != QP_OK)
        return qp_resolve_fail(&rc, cfg->load_status, cfg->load_key, "%s", cfg->load_error);
    st = method_capability(&rc);
    if (st != QP_OK) return st;
    if (kind == QP_LAYER_LINEAR && (st = module_class_rule(&rc, out)) != QP_ERR_NOT_FOUND) return st;
    switch (cfg->method) {
    case QP_METHOD_QQQ: return qp_resolve_qqq(&rc, out);
    case QP_METHOD_FP8: return qp_resolve_fp8(&rc, out);
    case QP_METHOD_COMPRESSED_TENSORS: return qp_resolve_ct(&rc, out);
    default: return qp_resolve_quark(&rc, out);
    }
}

/* One Quark config object, or compressed-tensors target i, as a linear
 * layer nothing else overrides. */
static qp_status resolve_one_config(const qp_config *cfg, const qj *c, size_t i, const char *key,
                                    const qp_resolve_options *opts, qp_scheme *out) {
    qp_resolve_ctx rc;
    qp_status st = resolve_setup(cfg, "", QP_LAYER_LINEAR, opts, &rc);
    if (st != QP_OK) return st;
    qp_scheme_init(out, QP_SCHEME_NONE);
    if (cfg->load_status != QP_OK)
        return qp_resolve_fail(&rc, cfg->load_status, cfg->load_key, "%s", cfg->load_error);
    if (cfg->method == QP_METHOD_COMPRESSED_TENSORS) return qp_resolve_ct_target(&rc, i, out);
    return qp_resolve_quark_config(&rc, c, key, out);
}

QP_API qp_status qp_config_resolve_global(const qp_config *cfg, const qp_resolve_options *opts, qp_scheme *out) {
    if (!cfg || !out) return QP_ERR_INVALID_ARGUMENT;
    if (cfg->method == QP_METHOD_QQQ || cfg->method == QP_METHOD_FP8 || cfg->method == QP_METHOD_COMPRESSED_TENSORS) {
        /* These methods have one scheme for every quantized linear layer
         * (compressed-tensors: the one a `Linear` target gives). */
        return qp_config_resolve(cfg, "", QP_LAYER_LINEAR, opts, out);
    }
    return resolve_one_config(cfg, cfg->global, 0, "global_quant_config", opts, out);
}

QP_API qp_status qp_config_resolve_pattern(const qp_config *cfg, size_t i, const qp_resolve_options *opts,
                                           qp_scheme *out) {
    if (!cfg || !out || i >= cfg->n_patterns) return QP_ERR_INVALID_ARGUMENT;
    char key[512];
    snprintf(key, sizeof key, "layer_quant_config.%s", cfg->patterns[i].key);
    return resolve_one_config(cfg, cfg->patterns[i].cfg, i, key, opts, out);
}

QP_API qp_status qp_config_layer_shards(const qp_config *cfg, const char *layer, const qp_resolve_options *opts,
                                        const char *const **shards, size_t *n_shards, const char **proj) {
    if (!cfg || !layer || !shards || !n_shards) return QP_ERR_INVALID_ARGUMENT;
    qp_resolve_ctx rc;
    qp_status st = resolve_setup(cfg, layer, QP_LAYER_LINEAR, opts, &rc);
    if (st != QP_OK) return st;
    const char *p;
    const qp_packed_module *m = qp_packed_find(&rc.packed, layer, &p);
    *shards = m ? m->shards : NULL;
    *n_shards = m ? m->n_shards : 0;
    if (proj) *proj = p;
    return QP_OK;
}

/* str(QuantKey) as vLLM 0.34.0 prints it in QuarkScheme / QuarkMoEMethod's
 * "Unsupported ... quant key: K" messages (quant_utils.py's QuantKey and
 * ScaleDesc __str__, torch.fx's dtype abbreviations, ScalarType names),
 * made by running 0.34.0's quant_utils.py (see docs/numerics.md). */
static const struct { const char *name, *repr; } key_reprs[] = {
    {"kFp8Dynamic128Sym", "QuantKey(f8e4m3fn,scale(f32,dynamic,GroupShape(row=1, col=128)),symmetric)"},
    {"kFp8Dynamic64Sym", "QuantKey(f8e4m3fn,scale(f32,dynamic,GroupShape(row=1, col=64)),symmetric)"},
    {"kFp8DynamicTensorSym", "QuantKey(f8e4m3fn,scale(f32,dynamic,per_tensor),symmetric)"},
    {"kFp8DynamicTokenSym", "QuantKey(f8e4m3fn,scale(f32,dynamic,per_token),symmetric)"},
    {"kFp8Static128BlockE8M0Sym", "QuantKey(f8e4m3fn,scale(f8e8m0fnu,static,GroupShape(row=128, col=128)),symmetric)"},
    {"kFp8Static128BlockSym", "QuantKey(f8e4m3fn,scale(f32,static,GroupShape(row=128, col=128)),symmetric)"},
    {"kFp8StaticChannelSym", "QuantKey(f8e4m3fn,scale(f32,static,per_channel),symmetric)"},
    {"kFp8StaticTensorSym", "QuantKey(f8e4m3fn,scale(f32,static,per_tensor),symmetric)"},
    {"kFp8StaticTokenSym", "QuantKey(f8e4m3fn,scale(f32,static,per_token),symmetric)"},
    {"kInt4Static", "QuantKey(uint4b8,scale(f16,static,per_token),symmetric)"},
    {"kInt4Static32", "QuantKey(uint4b8,scale(f16,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kInt4Static32Asym", "QuantKey(uint4,scale(f16,static,GroupShape(row=1, col=32)),asymmetric)"},
    {"kInt4StaticAsym", "QuantKey(uint4,scale(f16,static,per_token),asymmetric)"},
    {"kInt4W4A8StaticChannelSym", "QuantKey(i8,scale(f32,static,per_channel),symmetric)"},
    {"kInt4W4A8StaticGroup128Sym", "QuantKey(i8,scale(bf16,static,GroupShape(row=1, col=128)),symmetric)"},
    {"kInt4W4A8StaticGroup32Sym", "QuantKey(i8,scale(bf16,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kInt4W4A8StaticGroup64Sym", "QuantKey(i8,scale(bf16,static,GroupShape(row=1, col=64)),symmetric)"},
    {"kInt4W4A8StaticGroupSym", "QuantKey(i8,scale(bf16,static,per_token),symmetric)"},
    {"kInt8Dynamic32Sym", "QuantKey(i8,scale(f32,dynamic,GroupShape(row=1, col=32)),symmetric)"},
    {"kInt8DynamicTensorAsym", "QuantKey(i8,scale(f32,dynamic,per_tensor),asymmetric)"},
    {"kInt8DynamicTensorSym", "QuantKey(i8,scale(f32,dynamic,per_tensor),symmetric)"},
    {"kInt8DynamicTokenAsym", "QuantKey(i8,scale(f32,dynamic,per_token),asymmetric)"},
    {"kInt8DynamicTokenSym", "QuantKey(i8,scale(f32,dynamic,per_token),symmetric)"},
    {"kInt8Static", "QuantKey(uint8b128,scale(f16,static,per_token),symmetric)"},
    {"kInt8StaticChannelSym", "QuantKey(i8,scale(f32,static,per_channel),symmetric)"},
    {"kInt8StaticTensorAsym", "QuantKey(i8,scale(f32,static,per_tensor),asymmetric)"},
    {"kInt8StaticTensorSym", "QuantKey(i8,scale(f32,static,per_tensor),symmetric)"},
    {"kLutBStatic", "QuantKey(u8,scale(f8e4m3fn,static,GroupShape(row=8, col=64)),symmetric)"},
    {"kMxfp4Dynamic", "QuantKey(u8,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp4Static", "QuantKey(u8,scale(u8,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp6E2M3Dynamic", "QuantKey(float6_e2m3f,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp6E2M3Static", "QuantKey(float6_e2m3f,scale(u8,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp6E3M2Dynamic", "QuantKey(float6_e3m2f,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp6E3M2Static", "QuantKey(float6_e3m2f,scale(u8,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp8Dynamic", "QuantKey(f8e4m3fn,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)"},
    {"kMxfp8Static", "QuantKey(f8e4m3fn,scale(u8,static,GroupShape(row=1, col=32)),symmetric)"},
    {"kNvfp4Dynamic", "QuantKey(u8,scale(f8e4m3fn,dynamic,GroupShape(row=1, col=16)),scale2(f32,static,per_tensor),symmetric)"},
    {"kNvfp4DynamicToken", "QuantKey(u8,scale(f8e4m3fn,dynamic,GroupShape(row=1, col=16)),scale2(f32,dynamic,per_token),symmetric)"},
    {"kNvfp4Static", "QuantKey(u8,scale(f8e4m3fn,static,GroupShape(row=1, col=16)),scale2(f32,static,per_tensor),symmetric)"},
};

const char *qp_quant_key_repr(const char *name) {
    if (!name || !*name) return "None";
    for (size_t i = 0; i < sizeof key_reprs / sizeof *key_reprs; i++)
        if (!strcmp(key_reprs[i].name, name)) return key_reprs[i].repr;
    return name;
}

QP_API qp_status qp_config_packed_modules(const qp_config *cfg, const qp_resolve_options *opts,
                                          const qp_packed_module **mods, size_t *n) {
    if (!cfg || !mods || !n) return QP_ERR_INVALID_ARGUMENT;
    qp_resolve_ctx rc;
    qp_status st = resolve_setup(cfg, "", QP_LAYER_LINEAR, opts, &rc);
    if (st != QP_OK) return st;
    *mods = rc.packed.mods;
    *n = rc.packed.n;
    return QP_OK;
}
