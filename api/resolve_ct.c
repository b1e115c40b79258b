/* compressed-tensors resolution (docs/semantics.md §21):
 * CompressedTensorsConfig.get_quant_method, get_scheme_dict,
 * _get_scheme_from_parts and CompressedTensorsMoEMethod.get_moe_method of
 * vLLM 0.34.0, with find_matched_target and should_ignore_layer; the
 * sglang dialect follows SGLang's own CompressedTensorsConfig (below). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const strategy_enums[] = {"TENSOR", "CHANNEL", "GROUP", "BLOCK", "TOKEN", "TENSOR_GROUP",
                                             "ATTN_HEAD"};

static void args_repr(qp_buf *b, const qp_ct_args *a, int has) {
    if (!has) { qp_buf_puts(b, "None"); return; }
    qp_buf_puts(b, "QuantizationArgs(");
    qp_ct_args_str(b, a, ", ", 1);
    qp_buf_puts(b, ")");
}

static int args_eq(const qp_ct_args *a, const qp_ct_args *b) {
    return a->num_bits == b->num_bits && a->is_float == b->is_float && a->symmetric == b->symmetric &&
           a->has_group == b->has_group && (!a->has_group || a->group_size == b->group_size) &&
           a->strategy == b->strategy && a->has_block == b->has_block &&
           !memcmp(a->block, b->block, sizeof a->block) && a->dynamic == b->dynamic &&
           a->actorder == b->actorder && !strcmp(a->scale_dtype, b->scale_dtype) && !strcmp(a->zp_dtype, b->zp_dtype) &&
           !strcmp(a->observer, b->observer) &&
           (a->observer_kwargs && b->observer_kwargs ? qj_deep_compare(a->observer_kwargs, b->observer_kwargs) &&
                                                           qj_deep_compare(b->observer_kwargs, a->observer_kwargs)
                                                     : a->observer_kwargs == b->observer_kwargs);
}

static const char *eff_format(const qp_config *cfg, const qp_ct_target *t) {
    return t->format ? t->format : cfg->ct_format;
}

static int str_eq0(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* Python `==` of two scheme dicts (weights, input/output activations, format). */
static int dict_eq(const qp_config *cfg, const qp_ct_target *a, const qp_ct_target *b) {
    if (!a || !b) return a == b;
    return args_eq(&a->w, &b->w) && a->has_in == b->has_in && (!a->has_in || args_eq(&a->in, &b->in)) &&
           a->has_out == b->has_out && (!a->has_out || args_eq(&a->out, &b->out)) &&
           str_eq0(eff_format(cfg, a), eff_format(cfg, b));
}

/* ---- matching (find_matched_target) ------------------------------------- */

/* is_equal_or_regex_match: "re:" -> re.match; check_contains -> a
 * case-insensitive substring; else equality. */
static int target_match(const qp_ct_target *t, const char *value, int check_contains) {
    if (t->re) return qp_regex_match(t->re, value);
    if (!check_contains) return !strcmp(t->target, value);
    size_t n = strlen(t->target), m = strlen(value);
    for (size_t i = 0; n <= m && i + n <= m; i++) {
        size_t k = 0;
        while (k < n && tolower((unsigned char)value[i + k]) == tolower((unsigned char)t->target[k])) k++;
        if (k == n) return 1;
    }
    return 0;
}

static const qp_ct_target *first_match(const qp_config *cfg, const char *value, int check_contains,
                                       int with_experts) {
    for (size_t i = 0; i < cfg->n_ct_targets; i++)
        if (target_match(&cfg->ct_targets[i], value, check_contains)) return &cfg->ct_targets[i];
    /* _add_fused_moe_to_target_scheme_map: a "Linear" target (and no
     * "RoutedExperts" one) also answers for the routed experts, appended
     * last, so only a class-name lookup reaches it. */
    if (with_experts && check_contains && strstr(value, "RoutedExperts")) {
        const qp_ct_target *lin = NULL;
        for (size_t i = 0; i < cfg->n_ct_targets; i++) {
            if (!strcmp(cfg->ct_targets[i].target, "RoutedExperts")) return NULL;
            if (!strcmp(cfg->ct_targets[i].target, "Linear")) lin = &cfg->ct_targets[i];
        }
        return lin;
    }
    return NULL;
}

/* _match_fused_layer: the first mapping key the name ends with; every shard
 * must match a target (names and regexes only); the first shard's wins. */
static int fused_match(const qp_resolve_ctx *rc, const char *name, const qp_ct_target **out) {
    *out = NULL;
    size_t n = strlen(name);
    for (size_t i = 0; i < rc->packed.n; i++) {
        const qp_packed_module *pm = &rc->packed.mods[i];
        size_t fl = strlen(pm->fused);
        if (n < fl || strcmp(name + n - fl, pm->fused)) continue;
        const qp_ct_target *first = NULL;
        for (size_t s = 0; s < pm->n_shards; s++) {
            char *u = qp_str_replace_all(name, pm->fused, pm->shards[s]);
            if (!u) return -1;
            const qp_ct_target *m = first_match(rc->cfg, u, 0, 0);
            free(u);
            if (!m) return 0;
            if (!s) first = m;
        }
        *out = first;
        return 0;
    }
    return 0;
}

/* get_scheme_dict: NULL *out when the layer is ignored or nothing matches. */
static qp_status scheme_dict(const qp_resolve_ctx *rc, const char *name, const char *cls, const qp_ct_target **out) {
    *out = NULL;
    qp_resolve_ctx r = *rc;
    r.layer = name;
    bool ignored;
    qp_status st = qp_resolve_should_ignore(&r, "ignore", false, &ignored);
    if (st != QP_OK || ignored) return st;
    const qp_ct_target *m = first_match(rc->cfg, name, 0, 0);
    if (!m && fused_match(rc, name, &m) < 0) return qp_resolve_fail(rc, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (!m) m = first_match(rc->cfg, cls, 1, 1);
    *out = m;
    return QP_OK;
}

/* The vLLM class a linear layer is built as: what a class-name target
 * (other than "Linear", which every one of them contains) is matched against. */
static const char *linear_class(const qp_resolve_ctx *rc) {
    if (rc->opts.layer_class && *rc->opts.layer_class) return rc->opts.layer_class;
    const char *last = strrchr(rc->layer, '.');
    last = last ? last + 1 : rc->layer;
    if (!strcmp(last, "qkv_proj")) return "QKVParallelLinear";
    const char *proj;
    if (qp_packed_find(&rc->packed, rc->layer, &proj)) return "MergedColumnParallelLinear";
    if (!strcmp(last, "o_proj") || !strcmp(last, "down_proj") || !strcmp(last, "out_proj") ||
        !strcmp(last, "dense") || !strcmp(last, "w2"))
        return "RowParallelLinear";
    return "ColumnParallelLinear";
}

/* ---- predicates (CompressedTensorsConfig._is_*) ------------------------- */

typedef const qp_ct_args args;

static int is_nvfp4(args *q) {
    return q && q->strategy == QP_CT_TENSOR_GROUP && q->is_float && q->num_bits == 4 && q->has_group &&
           q->group_size == 16 && q->symmetric;
}
static int is_mxfp4(args *q) {
    return q && q->strategy == QP_CT_GROUP && q->symmetric && q->has_group && q->group_size == 32 && q->is_float &&
           q->num_bits == 4;
}
static int is_mxfp4_w4a8_fp8(args *w, args *in) {
    if (!is_mxfp4(w) || !in) return 0;
    return in->is_float && in->num_bits == 8 && !w->dynamic && in->dynamic &&
           (in->strategy == QP_CT_TOKEN || in->strategy == QP_CT_GROUP) && in->symmetric;
}
static int is_mxfp8(args *q) {
    return q && q->strategy == QP_CT_GROUP && q->symmetric && q->has_group && q->group_size == 32 && q->is_float &&
           q->num_bits == 8 && !strcmp(q->scale_dtype, "torch.uint8");
}
static int w_tensor_or_channel(args *w) { return w->strategy == QP_CT_TENSOR || w->strategy == QP_CT_CHANNEL; }
static int is_static_tensor_w8a8(args *w, args *in) {
    return w->num_bits == 8 && in->num_bits == 8 && w_tensor_or_channel(w) && in->strategy == QP_CT_TENSOR &&
           w->symmetric && !w->dynamic && !in->dynamic;
}
static int is_dynamic_token_w8a8(args *w, args *in) {
    return w->num_bits == 8 && in->num_bits == 8 && w_tensor_or_channel(w) && in->strategy == QP_CT_TOKEN &&
           w->symmetric && !w->dynamic && in->dynamic;
}
static int is_dynamic_token_w4a8_int(args *w, args *in) {
    if (!w || !in || w->is_float || in->is_float) return 0;
    return w->num_bits == 4 && in->num_bits == 8 && (w->strategy == QP_CT_GROUP || w->strategy == QP_CT_CHANNEL) &&
           in->strategy == QP_CT_TOKEN && w->symmetric && !w->dynamic && in->dynamic;
}
static int is_fp8_w8a8(args *w, args *in) {
    if (!w || !in) return 0;
    if (!(w->is_float && in->is_float && w->symmetric && !w->dynamic &&
          (w_tensor_or_channel(w) || w->strategy == QP_CT_BLOCK)))
        return 0;
    if (in->dynamic) return 1;
    return in->symmetric && in->strategy == QP_CT_TENSOR;
}
static int is_fp8_w4a8(args *w, args *in) {
    if (!w || !in || w->is_float || !in->is_float) return 0;
    return w->num_bits == 4 && in->num_bits == 8 && w->strategy == QP_CT_GROUP && in->strategy == QP_CT_TOKEN &&
           w->symmetric && in->symmetric && !w->dynamic && in->dynamic;
}
static int is_fp8_w8a16(args *w) {
    return w && w->is_float && w->symmetric && !w->dynamic && (w_tensor_or_channel(w) || w->strategy == QP_CT_BLOCK);
}
static int is_wna16_group_channel(args *w, args *in) {
    return (w->strategy == QP_CT_CHANNEL || w->strategy == QP_CT_GROUP) && !in && !w->dynamic;
}
static int is_int8_static_tensor(args *q) {
    return q && !q->is_float && q->strategy == QP_CT_TENSOR && q->num_bits == 8 && !q->dynamic;
}
static int is_wna8o8_int(args *w, args *in, args *out, const char *format) {
    int pack = str_eq0(format, "pack-quantized") || str_eq0(format, "int-quantized");
    int intn = !w->is_float && !w->dynamic && (w->strategy == QP_CT_CHANNEL || w->strategy == QP_CT_GROUP) && pack;
    return intn && is_int8_static_tensor(in) && is_int8_static_tensor(out);
}
static int is_wnam_int(args *w, args *in, const char *format) {
    if (!in) return 0;
    return !w->is_float && !w->dynamic && (w->strategy == QP_CT_CHANNEL || w->strategy == QP_CT_GROUP) &&
           str_eq0(format, "pack-quantized") && !in->is_float && in->symmetric && in->dynamic &&
           (in->strategy == QP_CT_TOKEN || in->strategy == QP_CT_GROUP);
}

/* _fp8_dynamic_input_key: per token, or per group of the input's size
 * (a constant for the sizes vLLM names, else none). */
static const char *fp8_dynamic_key(args *in) {
    if (in->strategy != QP_CT_GROUP) return "kFp8DynamicTokenSym";
    return in->group_size == 128 ? "kFp8Dynamic128Sym" : in->group_size == 64 ? "kFp8Dynamic64Sym" : "";
}

/* _check_scheme_supported(min, error=False, match_exact): no platform
 * capability -> supported unless an exact match is asked for. */
static int supported(const qp_resolve_ctx *rc, int min, int exact) {
    int cap = rc->opts.capability;
    if (cap == QP_CAPABILITY_NONE) return !exact;
    return exact ? cap == min : cap >= min;
}

/* ---- scheme description ------------------------------------------------- */

static void qtensor_from_args(qp_qtensor *t, args *a) {
    memset(t, 0, sizeof *t);
    if (!a) return;
    if (a->is_float) t->dtype = a->num_bits == 8 ? QP_DTYPE_F8_E4M3FN : a->num_bits == 4 ? QP_DTYPE_F4_E2M1 : QP_DTYPE_NONE;
    else t->dtype = a->num_bits == 8 ? QP_DTYPE_I8 : a->num_bits == 4 ? (a->symmetric ? QP_DTYPE_I4 : QP_DTYPE_U4) : QP_DTYPE_NONE;
    static const qp_granularity g[] = {QP_GRAN_TENSOR, QP_GRAN_CHANNEL, QP_GRAN_GROUP, QP_GRAN_BLOCK,
                                       QP_GRAN_TOKEN, QP_GRAN_GROUP, QP_GRAN_CHANNEL};
    t->granularity = g[a->strategy];
    if (t->granularity == QP_GRAN_GROUP && a->has_group && a->group_size > 0 && a->group_size < (1 << 30))
        t->group_size = (int)a->group_size;
    if (a->has_block == 2 && a->block[0] > 0 && a->block[1] > 0 && a->block[0] < (1 << 30) && a->block[1] < (1 << 30)) {
        t->block[0] = (int)a->block[0];
        t->block[1] = (int)a->block[1];
    }
    t->symmetric = a->symmetric;
    t->dynamic = a->dynamic != 0;
    t->scale_dtype = !strcmp(a->scale_dtype, "torch.uint8") ? QP_DTYPE_E8M0 : QP_DTYPE_F32;
    if (a->strategy == QP_CT_TENSOR_GROUP) {
        t->scale_dtype = QP_DTYPE_F8_E4M3FN;
        t->scale2_dtype = QP_DTYPE_F32;
    }
}

static void describe(qp_scheme *out, qp_scheme_kind kind, const char *method, const char *cls, const char *wkey,
                     const char *akey, int min_cap, args *w, args *in) {
    qp_scheme_init(out, kind);
    qp_scheme_set_names(out, method, cls, wkey, akey);
    qtensor_from_args(&out->weight, w);
    qtensor_from_args(&out->activation, in);
    out->min_capability = min_cap;
}

/* The WNA* constructors' checks (num_bits 2..8; any of them asymmetric). */
static qp_status wna_bits(const qp_resolve_ctx *rc, args *w, const char *for_cls) {
    if (w->num_bits >= 2 && w->num_bits <= 8) return QP_OK;
    if (for_cls)
        return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported num_bits = %lld for %s; supported = "
                               "[2, 3, 4, 5, 6, 7, 8]", w->num_bits, for_cls);
    return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported num_bits = %lld. Supported num_bits = "
                           "[2, 3, 4, 5, 6, 7, 8]", w->num_bits);
}

static qp_status fp8_keys(const qp_resolve_ctx *rc, args *w, int static_in, const char **wk, const char **ak) {
    if (w->has_block) {
        if (static_in)
            return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "AssertionError: vLLM asserts that block fp8 "
                                   "weights come with dynamic activations (CompressedTensorsW8A8Fp8)");
        *wk = w->has_block == 2 && w->block[0] == 128 && w->block[1] == 128 ? "kFp8Static128BlockSym" : "";
        *ak = w->block[0] == 128 ? "kFp8Dynamic128Sym" : w->block[0] == 64 ? "kFp8Dynamic64Sym" : "";
        return QP_OK;
    }
    *wk = w->strategy == QP_CT_CHANNEL ? "kFp8StaticChannelSym" : "kFp8StaticTensorSym";
    *ak = static_in ? "kFp8StaticTensorSym" : "kFp8DynamicTokenSym";
    return QP_OK;
}

static qp_status no_scheme(const qp_resolve_ctx *rc, const qp_ct_target *t, const char *format) {
    qp_buf b = {0};
    qp_buf_printf(&b, "No compressed-tensors compatible scheme was found for layer_name='%s', weight_quant=", rc->layer);
    args_repr(&b, &t->w, 1);
    qp_buf_puts(&b, ", input_quant=");
    args_repr(&b, &t->in, t->has_in);
    qp_buf_puts(&b, ", output_quant=");
    args_repr(&b, &t->out, t->has_out);
    if (format) qp_buf_printf(&b, ", format='%s'", format); else qp_buf_puts(&b, ", format=None");
    qp_status st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "%s", qp_buf_str(&b));
    qp_buf_free(&b);
    return st;
}

#define LIN "CompressedTensorsLinearMethod"

/* _get_scheme_from_parts, in its order, then the scheme's capability. */
static qp_status scheme_from_parts(const qp_resolve_ctx *rc, const qp_ct_target *t, qp_scheme *out) {
    args *w = &t->w, *in = t->has_in ? &t->in : NULL, *o = t->has_out ? &t->out : NULL;
    const char *format = eff_format(rc->cfg, t);
    qp_status st;
    if (is_nvfp4(w)) {
        if (!in) describe(out, QP_SCHEME_NVFP4_A16, LIN, "CompressedTensorsW4A4Fp4", "kNvfp4Static", NULL, 75, w, NULL);
        else if (!is_nvfp4(in))
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "For NVFP4 weights, input quantization must also be NVFP4 "
                                   "format, None for NVFP4A16");
        else describe(out, QP_SCHEME_NVFP4, LIN, "CompressedTensorsW4A4Fp4", "kNvfp4Static", "kNvfp4Dynamic", 75, w, in);
    } else if (is_mxfp4_w4a8_fp8(w, in)) {
        describe(out, QP_SCHEME_CT_W4A8_MXFP4, LIN, "CompressedTensorsW4A8Mxfp4", "kMxfp4Static", fp8_dynamic_key(in), 80,
                 w, in);
    } else if (is_mxfp4(w)) {
        /* the scheme's default activation key, with or without input args:
         * the MXFP4 kernel qport does not model decides whether it runs */
        describe(out, QP_SCHEME_CT_MXFP4, LIN, "CompressedTensorsW4A4Mxfp4", "kMxfp4Static", "kMxfp4Dynamic", 80, w, in);
    } else if (is_mxfp8(w)) {
        describe(out, QP_SCHEME_CT_MXFP8, LIN, "CompressedTensorsW8A8Mxfp8", "kMxfp8Static", "kMxfp8Dynamic", 75, w, in);
    } else if (supported(rc, 90, 1) && is_fp8_w4a8(w, in)) {
        if (!w->has_group || w->group_size != 128 || w->strategy != QP_CT_GROUP)
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "W4A8 kernels require group quantization with group size 128");
        if (w->num_bits != 4)
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported num_bits = %lld. Supported num_bits = "
                                   "dict_keys([4])", w->num_bits);
        describe(out, QP_SCHEME_W4A8_FP8, LIN, "CompressedTensorsW4A8Fp8", NULL, "kFp8DynamicTokenSym", 90, w, in);
    } else if (is_wna8o8_int(w, in, o, format)) {
        if (w->num_bits != 4 && w->num_bits != 8)
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported num_bits = %lld for WNA8O8Int; supported = "
                                   "[4, 8]", w->num_bits);
        describe(out, QP_SCHEME_WNA8O8_INT, LIN, "CompressedTensorsWNA8O8Int", NULL, "kInt8StaticTensorSym", 70, w, in);
    } else if (is_wnam_int(w, in, format) && in->num_bits == 8) {
        /* _is_wNaM_int already asked for the symmetric dynamic token/group
         * input the constructor checks */
        if ((st = wna_bits(rc, w, "WNA8Int"))) return st;
        describe(out, QP_SCHEME_WNA8_INT, LIN, "CompressedTensorsWNA8Int", NULL,
                 in->strategy == QP_CT_TOKEN ? "kInt8DynamicTokenSym" : "", 75, w, in);
    } else if (is_wnam_int(w, in, format) && in->num_bits == 4) {
        if ((st = wna_bits(rc, w, "WNA4Int"))) return st;
        describe(out, QP_SCHEME_WNA4_INT, LIN, "CompressedTensorsWNA4Int", NULL, NULL, 75, w, in);
    } else if (is_wna16_group_channel(w, in) && str_eq0(format, "pack-quantized")) {
        if (!w->has_group || w->group_size == -1) {
            if (w->strategy != QP_CT_CHANNEL)
                return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Pack-quantized format requires group quantization or "
                                       "channelwise quantization, but found no group size and strategy is not "
                                       "channelwise.");
        }
        if ((st = wna_bits(rc, w, NULL))) return st;
        int four = w->num_bits == 4 && !w->is_float;
        describe(out, four ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, LIN, "CompressedTensorsWNA16",
                 four ? (w->symmetric ? "kInt4Static" : "kInt4StaticAsym") : w->num_bits == 8 && w->symmetric ? "kInt8Static" : NULL,
                 NULL, 75, w, NULL);
    } else if (qp_ct_act_format(format) && is_fp8_w8a8(w, in)) {
        int static_in = in && !in->dynamic;
        const char *wk = NULL, *ak = NULL;
        if (supported(rc, 89, 0)) {
            if ((st = fp8_keys(rc, w, static_in, &wk, &ak))) return st;
            describe(out, w->strategy == QP_CT_BLOCK ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8, LIN,
                     "CompressedTensorsW8A8Fp8", wk, ak, 89, w, in);
        } else { /* below Ada: weight-only through Marlin; the input args are ignored */
            static const char *const wkeys[] = {"kFp8StaticTensorSym", "kFp8StaticChannelSym", "", "kFp8Static128BlockSym"};
            describe(out, QP_SCHEME_W8A16_FP8, LIN, "CompressedTensorsW8A16Fp8", wkeys[w->strategy], NULL, 75, w, NULL);
        }
    } else if (qp_ct_act_format(format) && is_fp8_w8a16(w)) {
        static const char *const wkeys[] = {"kFp8StaticTensorSym", "kFp8StaticChannelSym", "", "kFp8Static128BlockSym"};
        describe(out, QP_SCHEME_W8A16_FP8, LIN, "CompressedTensorsW8A16Fp8", wkeys[w->strategy], NULL, 75, w, NULL);
    } else if (qp_ct_act_format(format) && in && is_static_tensor_w8a8(w, in)) {
        describe(out, QP_SCHEME_W8A8_INT8, LIN, "CompressedTensorsW8A8Int8",
                 w->strategy == QP_CT_CHANNEL ? "kInt8StaticChannelSym" : "kInt8StaticTensorSym",
                 in->symmetric ? "kInt8StaticTensorSym" : "kInt8StaticTensorAsym", 75, w, in);
    } else if (qp_ct_act_format(format) && in && is_dynamic_token_w8a8(w, in)) {
        describe(out, QP_SCHEME_W8A8_INT8, LIN, "CompressedTensorsW8A8Int8",
                 w->strategy == QP_CT_CHANNEL ? "kInt8StaticChannelSym" : "kInt8StaticTensorSym",
                 in->symmetric ? "kInt8DynamicTokenSym" : "kInt8DynamicTokenAsym", 75, w, in);
    } else if (qp_ct_act_format(format) && is_dynamic_token_w4a8_int(w, in)) {
        if (w->num_bits != 4)
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported num_bits = %lld.Supported num_bits = "
                                   "dict_keys([4])", w->num_bits);
        describe(out, QP_SCHEME_W4A8_INT, LIN, "CompressedTensorsW4A8Int", NULL,
                 in->symmetric ? "kInt8DynamicTokenSym" : "kInt8DynamicTokenAsym", 1, w, in);
    } else {
        return no_scheme(rc, t, format);
    }
    return qp_capability_check(rc, out->min_capability);
}

/* get_scheme: NULL dict -> UnquantizedLinearMethod. */
static qp_status linear(const qp_resolve_ctx *rc, const char *cls, qp_scheme *out, int *none) {
    const qp_ct_target *t;
    qp_status st = scheme_dict(rc, rc->layer, cls, &t);
    *none = 0;
    if (st != QP_OK) return st;
    if (!t) { *none = 1; return QP_OK; }
    return scheme_from_parts(rc, t, out);
}

static void unquantized(qp_scheme *out, const char *method) {
    qp_scheme_init(out, QP_SCHEME_UNQUANTIZED);
    qp_scheme_set_names(out, method, NULL, NULL, NULL);
}

/* ParallelLMHead: get_scheme, a ValueError swallowed; no scheme -> the
 * VocabParallelEmbedding branch (ParallelLMHead is one) asks again.
 * VocabParallelEmbedding: WNA16 int weights or nothing. */
static qp_status embedding(const qp_resolve_ctx *rc, int lm_head, qp_scheme *out) {
    const char *cls = lm_head ? "ParallelLMHead" : "VocabParallelEmbedding";
    if (lm_head) {
        int none;
        qp_status st = linear(rc, cls, out, &none);
        if (st == QP_OK && !none) return QP_OK;
        if (st != QP_OK && st != QP_ERR_VALUE) return st;
    }
    const qp_ct_target *t;
    qp_status st = scheme_dict(rc, rc->layer, cls, &t);
    if (st != QP_OK) return st;
    if (!t) { unquantized(out, "UnquantizedEmbeddingMethod"); return QP_OK; }
    if (!(is_wna16_group_channel(&t->w, NULL) && !t->w.is_float)) {
        qp_buf b = {0};
        qp_ct_args_str(&b, &t->w, " ", 1);
        st = qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "compressed-tensors embeddings only support weight-only INT "
                             "group/channel (WNA16) quantization, got: %s", qp_buf_str(&b));
        qp_buf_free(&b);
        return st;
    }
    describe(out, t->w.num_bits == 4 ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, "CompressedTensorsEmbeddingWNA16Int",
             NULL, NULL, NULL, 0, &t->w, NULL);
    return QP_OK;
}

/* CompressedTensorsKVCacheMethod.validate_kv_cache_scheme. */
static qp_status kv_cache(const qp_resolve_ctx *rc, qp_scheme *out) {
    const qj *kv = rc->cfg->ct_kv_scheme;
    if (kv) {
        const qj *ty = qj_get(kv, "type"), *nb = qj_get(kv, "num_bits");
        if (!qj_str_eq(ty, "float") || !qj_int_eq(nb, 8)) {
            qp_buf a = {0}, b = {0};
            qp_pyrepr(&a, nb);
            if (ty && ty->type == QJ_STRING) qp_buf_puts(&b, ty->s); else qp_pyrepr(&b, ty);
            qp_status st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, "kv_cache_scheme",
                                           "Currently supported kv cache quantization is num_bits=8, type=float, "
                                           "however received num_bits=%s, type=%s",
                                           nb ? qp_buf_str(&a) : "None", ty ? qp_buf_str(&b) : "None");
            qp_buf_free(&a);
            qp_buf_free(&b);
            return st;
        }
        const qj *s = qj_get(kv, "strategy");
        static const char *const all[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
        int idx = -1;
        for (int i = 0; s && s->type == QJ_STRING && i < 7; i++)
            if (!strcmp(all[i], s->s)) idx = i;
        if (idx < 0) {
            qp_buf b = {0};
            qp_pyrepr(&b, s);
            qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, "kv_cache_scheme", "%s is not a valid QuantizationStrategy",
                                           s ? qp_buf_str(&b) : "None");
            qp_buf_free(&b);
            return st;
        }
        if (idx != QP_CT_TENSOR && idx != QP_CT_ATTN_HEAD)
            return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, "kv_cache_scheme",
                                   "Invalid strategy for compressed-tensors KV cache. Expected strategies: "
                                   "(<QuantizationStrategy.TENSOR: 'tensor'>, <QuantizationStrategy.ATTN_HEAD: "
                                   "'attn_head'>), found strategy: QuantizationStrategy.%s", strategy_enums[idx]);
        const qj *sym = qj_get(kv, "symmetric");
        if (!qj_truthy(sym)) {
            qp_buf b = {0};
            qp_pyrepr(&b, sym);
            qp_status st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, "kv_cache_scheme",
                                           "Only support symmetric scaling factor for compressed-tensors KV cache. "
                                           "However found symmetric: %s", sym ? qp_buf_str(&b) : "None");
            qp_buf_free(&b);
            return st;
        }
    }
    qp_scheme_init(out, QP_SCHEME_KV_CACHE);
    qp_scheme_set_names(out, "CompressedTensorsKVCacheMethod", NULL, NULL, NULL);
    out->kv_cache = rc->cfg->kv_cache;
    return QP_OK;
}

#define MOE(k, cls, wk, ak) describe(out, k, cls, NULL, wk, ak, 0, w, in)

/* The RuntimeError both dialects raise when no MoE method takes the args
 * (pydantic's str() of each, "None" for no input args). */
static qp_status unsupported_moe(const qp_resolve_ctx *rc, const args *w, const args *in) {
    qp_buf b = {0};
    qp_ct_args_str(&b, w, " ", 1);
    qp_buf_puts(&b, ", ");
    if (in) qp_ct_args_str(&b, in, " ", 1); else qp_buf_puts(&b, "None");
    qp_status st = qp_resolve_fail(rc, QP_ERR_CAPABILITY, NULL, "Unsupported FusedMoe scheme: %s", qp_buf_str(&b));
    qp_buf_free(&b);
    return st;
}

/* CompressedTensorsMoEMethod.get_moe_method (CUDA: no ROCm FlyDSL branch). */
static qp_status moe(const qp_resolve_ctx *rc, qp_scheme *out) {
    qp_arch_info a = {.struct_size = sizeof a};
    qp_config_arch(rc->cfg, &a);
    static const char *const dflt[3] = {"gate_proj", "up_proj", "down_proj"};
    const qp_ct_target *d[3];
    for (int i = 0; i < 3; i++) {
        char name[1024];
        snprintf(name, sizeof name, "%s.0.%s", rc->layer, a.expert_proj[i] ? a.expert_proj[i] : dflt[i]);
        qp_status st = scheme_dict(rc, name, "RoutedExperts", &d[i]);
        if (st != QP_OK) return st;
    }
    if (!dict_eq(rc->cfg, d[0], d[2]) || !dict_eq(rc->cfg, d[1], d[2]))
        return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "All MoE projections need to have same quantization scheme "
                               "but found multiple");
    const qp_ct_target *t = d[2];
    if (!t) { unquantized(out, "UnquantizedFusedMoEMethod"); return QP_OK; }
    args *w = &t->w, *in = t->has_in ? &t->in : NULL;
    if (is_mxfp4_w4a8_fp8(w, in))
        MOE(QP_SCHEME_CT_W4A8_MXFP4, "CompressedTensorsW4A8Mxfp4MoEMethod", "kMxfp4Static", fp8_dynamic_key(in));
    else if (is_mxfp4(w)) MOE(QP_SCHEME_CT_MXFP4, "CompressedTensorsW4A4Mxfp4MoEMethod", "kMxfp4Static", NULL);
    else if (is_mxfp8(w)) MOE(QP_SCHEME_CT_MXFP8, "CompressedTensorsW8A8Mxfp8MoEMethod", "kMxfp8Static", "kMxfp8Dynamic");
    else if (is_wna16_group_channel(w, in)) {
        if (!(w->num_bits >= 2 && w->num_bits <= 8 && str_eq0(eff_format(rc->cfg, t), "pack-quantized")))
            /* vLLM prints pack-quantized where it means the layer's format */
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "For Fused MoE layers, only format: pack-quantized and "
                                   "bits: [2, 3, 4, 5, 6, 7, 8] is supported but got format: pack-quantized and "
                                   "bits: %lld", w->num_bits);
        MOE(w->num_bits == 4 && !w->is_float ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, "CompressedTensorsWNA16MoEMethod",
            w->num_bits == 4 ? (w->symmetric ? "kInt4Static" : "kInt4StaticAsym") : NULL, NULL);
    } else if (is_nvfp4(w)) {
        if (in && !is_nvfp4(in)) {
            qp_buf b = {0};
            qp_ct_args_str(&b, in, " ", 1);
            qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "For NVFP4 weights, input quantization must also "
                                           "be NVFP4 format or None for NVFP4A16, found %s", qp_buf_str(&b));
            qp_buf_free(&b);
            return st;
        }
        MOE(in ? QP_SCHEME_NVFP4 : QP_SCHEME_NVFP4_A16, "CompressedTensorsW4A4Nvfp4MoEMethod", "kNvfp4Static",
            in ? "kNvfp4Dynamic" : NULL);
    } else if (is_fp8_w8a8(w, in)) {
        /* vLLM's method names no QuantKey; qport states the arithmetic with
         * the keys its linear scheme would carry (the fused MoE reads them) */
        const char *wk = NULL, *ak = NULL;
        qp_status st = fp8_keys(rc, w, in && !in->dynamic, &wk, &ak);
        if (st) return st;
        MOE(w->strategy == QP_CT_BLOCK ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8MoEMethod",
            wk, ak);
    } else if (in && is_dynamic_token_w8a8(w, in)) {
        MOE(QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8MoEMethod",
            w->strategy == QP_CT_CHANNEL ? "kInt8StaticChannelSym" : "kInt8StaticTensorSym",
            in->symmetric ? "kInt8DynamicTokenSym" : "kInt8DynamicTokenAsym");
    } else if (is_fp8_w4a8(w, in)) {
        MOE(QP_SCHEME_W4A8_FP8, "CompressedTensorsW4A8Fp8MoEMethod", NULL, "kFp8DynamicTokenSym");
    } else if (is_dynamic_token_w4a8_int(w, in)) {
        MOE(QP_SCHEME_W4A8_INT, "CompressedTensorsW4A8Int8MoEMethod", NULL, NULL);
    } else {
        return unsupported_moe(rc, w, in);
    }
    qtensor_from_args(&out->weight, w);
    qtensor_from_args(&out->activation, in);
    return QP_OK;
}

/* ---- the sglang dialect (docs/semantics.md §21, "SGLang") ---------------
 * SGLang's CompressedTensorsConfig (sgl-project/sglang 0104cc50,
 * python/sglang/srt/layers/quantization/compressed_tensors/): its own
 * get_quant_method, get_linear_scheme, get_lm_head_scheme, get_moe_scheme,
 * _get_scheme_from_parts and utils.py matchers. */

static int is_sgl(const qp_resolve_ctx *rc) { return rc->opts.dialect == QP_DIALECT_SGLANG; }

/* _check_scheme_supported(min, error=False): false without a capability. */
static int sgl_supported(const qp_resolve_ctx *rc, int min) {
    return rc->opts.capability != QP_CAPABILITY_NONE && rc->opts.capability >= min;
}

/* _check_scheme_supported(min) (error=True): RuntimeError with its three
 * arguments, printed as Python prints a tuple; no capability, no check. */
static qp_status sgl_capability(const qp_resolve_ctx *rc, int min) {
    if (rc->opts.capability == QP_CAPABILITY_NONE || rc->opts.capability >= min) return QP_OK;
    return qp_resolve_fail(rc, QP_ERR_CAPABILITY, NULL, "('Quantization scheme is not supported for ', 'the current "
                           "GPU. Min capability: %d. ', 'Current capability: %d.')", min, rc->opts.capability);
}

/* The input args SGLang stores: only under an activation format. */
static args *sgl_in(const qp_config *cfg, const qp_ct_target *t) {
    return t->has_in && qp_ct_act_format(eff_format(cfg, t)) ? &t->in : NULL;
}

/* f"{args.strategy}": a validated strategy is its string (use_enum_values),
 * a derived one an enum member (Python >= 3.12 formats it as str()). */
static void strategy_fstr(qp_buf *b, args *a) {
    static const char *const v[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
    if (a->strategy_derived) qp_buf_printf(b, "QuantizationStrategy.%s", strategy_enums[a->strategy]);
    else qp_buf_puts(b, v[a->strategy]);
}

/* utils.should_ignore_layer: a fused name (its last component a key of the
 * mapping) not itself listed checks its shards, which must agree; every
 * check is check_equal_or_regex_match (re: at the start, else a
 * case-insensitive substring). */
static qp_status sgl_ignored(const qp_resolve_ctx *rc, const char *name, int *ign) {
    const qp_nameset *s = rc->cfg->exclude_set;
    const char *last = strrchr(name, '.');
    last = last ? last + 1 : name;
    const qp_packed_module *pm = NULL;
    for (size_t i = 0; i < rc->packed.n && !pm; i++)
        if (!strcmp(rc->packed.mods[i].fused, last)) pm = &rc->packed.mods[i];
    *ign = 0;
    if (!pm || qp_nameset_has_exact(s, name) || !pm->n_shards) {
        *ign = qp_nameset_match_contains(s, name);
        return QP_OK;
    }
    for (size_t i = 0; i < pm->n_shards; i++) {
        char *u = qp_str_replace_all(name, last, pm->shards[i]);
        if (!u) return qp_resolve_fail(rc, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory");
        int m = qp_nameset_match_contains(s, u);
        free(u);
        if (!i) *ign = m;
        else if (m != *ign) {
            qp_buf b = {0};
            qp_buf_puts(&b, "[");
            for (size_t k = 0; k < pm->n_shards; k++) qp_buf_printf(&b, "%s'%s'", k ? ", " : "", pm->shards[k]);
            qp_buf_puts(&b, "]");
            qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, "ignore", "Found a different quantization schemes for "
                                           "%s in %s. vLLM requires all to use the same scheme.", qp_buf_str(&b), name);
            qp_buf_free(&b);
            return st;
        }
    }
    return QP_OK;
}

/* find_matched_target: the name (exact or re:), then the module class
 * (case-insensitive substring; for a FusedMoE the "FusedMoE" / "DeepEPMoE"
 * entries _add_fused_moe_to_target_scheme_map appends with the "Linear"
 * target's args), then the fused shards; none is a ValueError. */
static qp_status sgl_find_target(const qp_resolve_ctx *rc, const char *name, const char *cls, int moe,
                                 const qp_ct_target **out) {
    const qp_config *cfg = rc->cfg;
    const qp_ct_target *m = first_match(cfg, name, 0, 0);
    if (!m) m = first_match(cfg, cls, 1, 0);
    if (!m && moe) {
        const qp_ct_target *lin = NULL;
        int has_fused = 0;
        for (size_t i = 0; i < cfg->n_ct_targets; i++) {
            if (!strcmp(cfg->ct_targets[i].target, "Linear")) lin = &cfg->ct_targets[i];
            if (!strcmp(cfg->ct_targets[i].target, "FusedMoE")) has_fused = 1;
        }
        qp_ct_target fm = {.target = "FusedMoE"}, dm = {.target = "DeepEPMoE"};
        if (lin && !has_fused && (target_match(&fm, cls, 1) || target_match(&dm, cls, 1))) m = lin;
    }
    if (!m && fused_match(rc, name, &m) < 0) return qp_resolve_fail(rc, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (!m)
        return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unable to find matching target for %s in the "
                               "compressed-tensors config.", name);
    *out = m;
    return QP_OK;
}

/* get_scheme_dict: NULL when ignored (or no targets at all). */
static qp_status sgl_scheme_dict(const qp_resolve_ctx *rc, const char *name, const char *cls, int moe,
                                 const qp_ct_target **out) {
    *out = NULL;
    int ign;
    qp_status st = sgl_ignored(rc, name, &ign);
    if (st != QP_OK || ign || !rc->cfg->n_ct_targets) return st;
    return sgl_find_target(rc, name, cls, moe, out);
}

static int sgl_wna16_group_channel(args *w, args *in) {
    return (w->strategy == QP_CT_CHANNEL || w->strategy == QP_CT_GROUP) && !in && !w->dynamic && !w->is_float;
}
static int sgl_fp4a4_nvfp4(args *w, args *in) { return in && is_nvfp4(w) && is_nvfp4(in); }
static int sgl_fp4a16_nvfp4(args *w, args *in) { return !in && is_nvfp4(w); }
static int sgl_mxfp4_linear(args *w) {
    return w->strategy == QP_CT_GROUP && w->is_float && w->num_bits == 4 && w->has_group && w->group_size == 32 &&
           w->symmetric;
}
static int sgl_fp8_w8a16(args *w) { return w->is_float && w->symmetric && !w->dynamic && w_tensor_or_channel(w); }

static const char *wna16_wkey(args *w) {
    return w->num_bits == 4 ? (w->symmetric ? "kInt4Static" : "kInt4StaticAsym")
                            : w->num_bits == 8 && w->symmetric ? "kInt8Static" : NULL;
}

/* CompressedTensorsW8A16Fp8: create_weights knows tensor and channel only. */
static qp_status sgl_w8a16(const qp_resolve_ctx *rc, args *w, qp_scheme *out) {
    if (!w_tensor_or_channel(w)) {
        qp_buf b = {0};
        strategy_fstr(&b, w);
        qp_status st = qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Unsupported weight strategy=%s, supported strategies "
                                       "are [<QuantizationStrategy.CHANNEL: 'channel'>, <QuantizationStrategy.TENSOR: "
                                       "'tensor'>]", qp_buf_str(&b));
        qp_buf_free(&b);
        return st;
    }
    describe(out, QP_SCHEME_W8A16_FP8, LIN, "CompressedTensorsW8A16Fp8",
             w->strategy == QP_CT_CHANNEL ? "kFp8StaticChannelSym" : "kFp8StaticTensorSym", NULL, 80, w, NULL);
    return QP_OK;
}

/* SGLang's _get_scheme_from_parts (CUDA), then get_linear_scheme's check. */
static qp_status sgl_from_parts(const qp_resolve_ctx *rc, const qp_ct_target *t, qp_scheme *out) {
    args *w = &t->w, *in = sgl_in(rc->cfg, t);
    const char *format = eff_format(rc->cfg, t);
    qp_status st;
    if (sgl_wna16_group_channel(w, in)) {
        if (!(str_eq0(format, "pack-quantized") && (w->num_bits == 4 || w->num_bits == 8)))
            return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "ImportError: Other method "
                                   "(CompressedTensorsW4A16Sparse24) is not supported now");
        if ((!w->has_group || w->group_size == -1) && w->strategy != QP_CT_CHANNEL)
            return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "Marlin kernels require group quantization or channelwise "
                                   "quantization, but found no group size and strategy is not channelwise.");
        describe(out, w->num_bits == 4 ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, LIN, "CompressedTensorsWNA16",
                 wna16_wkey(w), NULL, 80, w, NULL);
    } else if (sgl_mxfp4_linear(w)) { /* weight-only FP4 Marlin, input args dropped */
        describe(out, QP_SCHEME_CT_MXFP4, LIN, "CompressedTensorsW4A16Mxfp4", "kMxfp4Static", NULL, 80, w, NULL);
    } else if (!qp_ct_act_format(format)) {
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "No compressed-tensors compatible scheme was found.");
    } else if (sgl_fp4a16_nvfp4(w, in)) {
        describe(out, QP_SCHEME_NVFP4_A16, LIN, "CompressedTensorsW4A16Fp4", "kNvfp4Static", NULL, 80, w, NULL);
    } else if (sgl_fp4a4_nvfp4(w, in)) {
        if (sgl_supported(rc, 100))
            describe(out, QP_SCHEME_NVFP4, LIN, "CompressedTensorsW4A4Fp4", "kNvfp4Static", "kNvfp4Dynamic", 100, w, in);
        else /* below Blackwell: weight-only through FP4 Marlin */
            describe(out, QP_SCHEME_NVFP4_A16, LIN, "CompressedTensorsW4A16Fp4", "kNvfp4Static", NULL, 80, w, NULL);
    } else if (in && w->is_float && w->num_bits == 4) {
        qp_buf b = {0};
        strategy_fstr(&b, w);
        if (w->has_group) qp_buf_printf(&b, ", group_size=%lld", w->group_size);
        else qp_buf_puts(&b, ", group_size=None");
        st = qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "Activation-quantized float4 is only supported in the "
                             "NVFP4 layout (tensor_group, group_size 16); got strategy=%s.", qp_buf_str(&b));
        qp_buf_free(&b);
        return st;
    } else if (is_fp8_w8a8(w, in)) {
        if (!sgl_supported(rc, 89)) {
            if ((st = sgl_w8a16(rc, w, out))) return st;
        } else {
            if (w->has_block && !in->dynamic)
                return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "qport does not model SGLang's "
                                       "CompressedTensorsW8A8Fp8 with block weights and static input scales");
            const char *wk = NULL, *ak = NULL;
            if ((st = fp8_keys(rc, w, !in->dynamic, &wk, &ak))) return st;
            describe(out, w->strategy == QP_CT_BLOCK ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8, LIN,
                     "CompressedTensorsW8A8Fp8", wk, ak, 89, w, in);
        }
    } else if (sgl_fp8_w8a16(w)) {
        if ((st = sgl_w8a16(rc, w, out))) return st;
    } else if (in && (is_static_tensor_w8a8(w, in) || is_dynamic_token_w8a8(w, in))) {
        int stat = !in->dynamic;
        describe(out, QP_SCHEME_W8A8_INT8, LIN, "CompressedTensorsW8A8Int8",
                 w->strategy == QP_CT_CHANNEL ? "kInt8StaticChannelSym" : "kInt8StaticTensorSym",
                 stat ? (in->symmetric ? "kInt8StaticTensorSym" : "kInt8StaticTensorAsym")
                      : (in->symmetric ? "kInt8DynamicTokenSym" : "kInt8DynamicTokenAsym"), 89, w, in);
    } else {
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "No compressed-tensors compatible scheme was found.");
    }
    return sgl_capability(rc, out->min_capability);
}

/* get_quant_method for a LinearBase: linear_fp8_config, then get_linear_scheme. */
static qp_status sgl_linear(const qp_resolve_ctx *rc, qp_scheme *out) {
    if (qj_truthy(qj_get(rc->cfg->qc, "linear_fp8_config")))
        return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, "linear_fp8_config", "SGLang's linear_fp8_config "
                               "(Fp8LinearMethod for every linear layer) is not modelled by qport");
    const qp_ct_target *t;
    qp_status st = sgl_scheme_dict(rc, rc->layer, linear_class(rc), 0, &t);
    if (st != QP_OK) return st;
    if (!t) { unquantized(out, "UnquantizedLinearMethod"); return QP_OK; }
    return sgl_from_parts(rc, t, out);
}

/* ParallelLMHead: get_lm_head_scheme (a target naming it, by
 * check_equal_or_regex_match, else the unquantized embedding default);
 * VocabParallelEmbedding: no method. */
static qp_status sgl_embedding(const qp_resolve_ctx *rc, int lm_head, qp_scheme *out) {
    unquantized(out, "UnquantizedEmbeddingMethod");
    if (!lm_head || !rc->cfg->n_ct_targets) return QP_OK;
    int ign;
    qp_status st = sgl_ignored(rc, rc->layer, &ign);
    if (st != QP_OK || ign) return st;
    const qp_ct_target *t = NULL;
    for (size_t i = 0; i < rc->cfg->n_ct_targets && !t; i++)
        if (target_match(&rc->cfg->ct_targets[i], rc->layer, 1)) t = &rc->cfg->ct_targets[i];
    if (!t) return QP_OK;
    if (t->w.has_block)
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "Block-quantized lm_head is not supported; use channel "
                               "or tensor weight scales for the head.");
    return sgl_from_parts(rc, t, out);
}

/* RadixAttention: CompressedTensorsKVCacheMethod.is_supported_scheme, else
 * no method (a warning, not an error). */
static qp_status sgl_kv_cache(const qp_resolve_ctx *rc, qp_scheme *out) {
    const qj *kv = rc->cfg->ct_kv_scheme;
    qp_scheme_init(out, QP_SCHEME_NONE);
    if (!kv) return QP_OK;
    const qj *sym = qj_get(kv, "symmetric"), *dyn = qj_get(kv, "dynamic");
    if (!(qj_str_eq(qj_get(kv, "type"), "float") && qj_int_eq(qj_get(kv, "num_bits"), 8) &&
          qj_str_eq(qj_get(kv, "strategy"), "tensor") && (!sym || qj_truthy(sym)) && !(dyn && qj_truthy(dyn)))) {
        qp_buf b = {0};
        qp_pyrepr(&b, kv);
        qp_log(rc->cfg->ctx, QP_LOG_WARN, "Ignoring compressed-tensors kv_cache_scheme %s: only static symmetric "
               "per-tensor FP8 scales are supported.", qp_buf_str(&b));
        qp_buf_free(&b);
        return QP_OK;
    }
    qp_scheme_init(out, QP_SCHEME_KV_CACHE);
    qp_scheme_set_names(out, "CompressedTensorsKVCacheMethod", NULL, NULL, NULL);
    out->kv_cache.dtype = QP_DTYPE_F8_E4M3FN;
    out->kv_cache.granularity = QP_GRAN_TENSOR;
    out->kv_cache.symmetric = 1;
    out->kv_cache.scale_dtype = QP_DTYPE_F32;
    return QP_OK;
}

static const qp_ct_target *target_named(const qp_config *cfg, const char *name) {
    for (size_t i = 0; i < cfg->n_ct_targets; i++)
        if (!strcmp(cfg->ct_targets[i].target, name)) return &cfg->ct_targets[i];
    return NULL;
}

/* get_scheme_dict's dicts compared with == (weights, input_activations,
 * the group's own format). */
static int sgl_dict_eq(const qp_config *cfg, const qp_ct_target *a, const qp_ct_target *b) {
    if (!a || !b) return a == b;
    args *ia = sgl_in(cfg, a), *ib = sgl_in(cfg, b);
    return args_eq(&a->w, &b->w) && (ia && ib ? args_eq(ia, ib) : ia == ib) && str_eq0(a->format, b->format);
}

#define SMOE(k, cls, wk, ak) describe(out, k, cls, NULL, wk, ak, 0, w, in)

/* get_quant_method for a FusedMoE (CUDA): _is_mxfp4_moe first, then
 * get_moe_scheme with the default (auto) MoE runner backend. */
static qp_status sgl_moe(const qp_resolve_ctx *rc, qp_scheme *out) {
    const qp_config *cfg = rc->cfg;
    const qp_ct_target *lin = target_named(cfg, "Linear"), *fm = target_named(cfg, "FusedMoE");
    const qp_ct_target *mx = NULL;
    if (fm ? sgl_mxfp4_linear(&fm->w) : lin && sgl_mxfp4_linear(&lin->w)) mx = fm ? fm : lin;
    else if (fm && lin && sgl_mxfp4_linear(&lin->w)) mx = lin;
    if (mx || (cfg->ct_format && strstr(cfg->ct_format, "mxfp4"))) {
        qp_scheme_init(out, QP_SCHEME_CT_MXFP4);
        qp_scheme_set_names(out, "Mxfp4MoEMethod", NULL, "kMxfp4Static", NULL);
        if (mx) qtensor_from_args(&out->weight, &mx->w);
        return QP_OK;
    }
    const char *cls = rc->opts.layer_class && *rc->opts.layer_class ? rc->opts.layer_class : "FusedMoE";
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    const qp_ct_target *d[3];
    for (int i = 0; i < 3; i++) {
        char name[1024];
        snprintf(name, sizeof name, "%s.0.%s", rc->layer, proj[i]);
        qp_status st = sgl_scheme_dict(rc, name, cls, 1, &d[i]);
        if (st != QP_OK) return st;
    }
    if (!sgl_dict_eq(cfg, d[1], d[0]) || !sgl_dict_eq(cfg, d[2], d[0]))
        return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "All MoE projections need to have same quantization scheme "
                               "but found multiple");
    const qp_ct_target *t = d[0];
    if (!t) { unquantized(out, "UnquantizedFusedMoEMethod"); return QP_OK; }
    args *w = &t->w, *in = sgl_in(cfg, t);
    if (sgl_wna16_group_channel(w, in)) {
        int triton = w->num_bits == 4 && !w->is_float && w->strategy == QP_CT_GROUP && w->has_group &&
                     (w->group_size == 32 || w->group_size == 128) && w->symmetric && !w->actorder;
        if (triton && (rc->opts.capability == 100 || rc->opts.capability == 103)) {
            SMOE(w->num_bits == 4 ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, "CompressedTensorsWNA16TritonMoE",
                 wna16_wkey(w), NULL);
        } else {
            /* CompressedTensorsWNA16MoE reads the "Linear" target's weights
             * and the config's own format */
            if (!lin) return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "KeyError: 'Linear'");
            w = &lin->w;
            if (!(str_eq0(cfg->ct_format, "pack-quantized") && (w->num_bits == 4 || w->num_bits == 8)))
                return qp_resolve_fail(rc, QP_ERR_VALUE, NULL, "('For Fused MoE layers, only ', 'pack-quantized ', "
                                       "'is supported for the following bits: ', '[4, 8]')");
            SMOE(w->num_bits == 4 && !w->is_float ? QP_SCHEME_W4A16_INT4 : QP_SCHEME_WNA16, "CompressedTensorsWNA16MoE",
                 wna16_wkey(w), NULL);
        }
    } else if (sgl_fp4a16_nvfp4(w, in)) {
        SMOE(QP_SCHEME_NVFP4_A16, "CompressedTensorsW4A16Nvfp4MoE", "kNvfp4Static", NULL);
    } else if (sgl_fp4a4_nvfp4(w, in)) {
        if (sgl_supported(rc, 100)) SMOE(QP_SCHEME_NVFP4, "CompressedTensorsW4A4Nvfp4MoE", "kNvfp4Static", "kNvfp4Dynamic");
        else { in = NULL; SMOE(QP_SCHEME_NVFP4_A16, "CompressedTensorsW4A16Nvfp4MoE", "kNvfp4Static", NULL); }
    } else if (is_fp8_w8a8(w, in)) {
        /* CompressedTensorsW8A8Fp8MoE.__init__ */
        int per_tensor = w->strategy == QP_CT_TENSOR && in->strategy == QP_CT_TENSOR;
        int per_channel = w->strategy == QP_CT_CHANNEL && in->strategy == QP_CT_TOKEN;
        if (per_tensor)
            SMOE(QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8MoE", "kFp8StaticTensorSym",
                 in->dynamic ? "kFp8DynamicTensorSym" : "kFp8StaticTensorSym");
        else if (per_channel)
            SMOE(QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8MoE", "kFp8StaticChannelSym", "kFp8DynamicTokenSym");
        else if (w->strategy != QP_CT_BLOCK)
            return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "AssertionError: SGLang's CompressedTensorsW8A8Fp8MoE "
                                   "asserts block weights unless the weights and input are per tensor, or per channel "
                                   "and per token");
        else if (!in->dynamic)
            return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "qport does not model SGLang's "
                                   "CompressedTensorsW8A8Fp8MoE with block weights and static input scales");
        else {
            const char *wk = NULL, *ak = NULL;
            qp_status st = fp8_keys(rc, w, 0, &wk, &ak);
            if (st) return st;
            SMOE(QP_SCHEME_W8A8_FP8_BLOCK, "CompressedTensorsW8A8Fp8MoE", wk, ak);
        }
    } else if (in && is_dynamic_token_w8a8(w, in)) {
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "The W8A8Int8 Fused MoE scheme is implemented only "
                               "for NPU for now.");
    } else if (in && str_eq0(cfg->ct_format, "pack-quantized") && w->num_bits == 4 && !w->is_float && w->symmetric &&
               !w->dynamic && in->num_bits == 8 && in->dynamic) { /* _is_wint4afp8 */
        SMOE(QP_SCHEME_W4A8_FP8, "CompressedTensorsW4AFP8MoE", NULL, NULL);
    } else if (!in) { /* _is_dynamic_token_w4a8 reads input_quant.num_bits */
        return qp_resolve_fail(rc, QP_ERR_UNSUPPORTED, NULL, "AttributeError: 'NoneType' object has no attribute "
                               "'num_bits'");
    } else if (w->num_bits == 4 && in->num_bits == 8 && (w->strategy == QP_CT_GROUP || w->strategy == QP_CT_CHANNEL) &&
               in->strategy == QP_CT_TOKEN && w->symmetric && !w->dynamic && in->dynamic) {
        return qp_resolve_fail(rc, QP_ERR_NOT_IMPLEMENTED, NULL, "The W4A8Int8 Fused MoE scheme is implemented only "
                               "for NPU for now.");
    } else {
        return unsupported_moe(rc, w, in);
    }
    qtensor_from_args(&out->weight, w);
    qtensor_from_args(&out->activation, in);
    return QP_OK;
}

qp_status qp_resolve_ct(const qp_resolve_ctx *rc0, qp_scheme *out) {
    qp_resolve_ctx rc = *rc0;
    if (is_sgl(&rc)) {
        if (rc.kind == QP_LAYER_ATTENTION) return sgl_kv_cache(&rc, out);
        if (rc.kind == QP_LAYER_MOE) return sgl_moe(&rc, out);
        qp_module_class c = qp_resolve_module_class(&rc, NULL);
        if (c == QP_MODULE_LM_HEAD || c == QP_MODULE_EMBEDDING) return sgl_embedding(&rc, c == QP_MODULE_LM_HEAD, out);
        return sgl_linear(&rc, out);
    }
    if (rc.kind == QP_LAYER_ATTENTION) return kv_cache(&rc, out);
    if (rc.kind == QP_LAYER_MOE) return moe(&rc, out);
    qp_module_class c = qp_resolve_module_class(&rc, NULL);
    if (c == QP_MODULE_LM_HEAD || c == QP_MODULE_EMBEDDING) return embedding(&rc, c == QP_MODULE_LM_HEAD, out);
    int none;
    qp_status st = linear(&rc, linear_class(&rc), out, &none);
    if (st == QP_OK && none) unquantized(out, "UnquantizedLinearMethod");
    return st;
}

qp_status qp_resolve_ct_target(const qp_resolve_ctx *rc, size_t i, qp_scheme *out) {
    if (is_sgl(rc)) return sgl_from_parts(rc, &rc->cfg->ct_targets[i], out);
    return scheme_from_parts(rc, &rc->cfg->ct_targets[i], out);
}
