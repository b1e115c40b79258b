/* compressed-tensors configs (docs/semantics.md §21):
 * CompressedTensorsConfig.from_config with the QuantizationArgs validators
 * of the compressed-tensors package it pins. Errors vLLM raises here refuse
 * the whole model, so they are deferred to every resolve. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* pydantic wraps a validator's ValueError in a ValidationError (itself a
 * ValueError): a title line, the field's name for a field error (none for
 * the model validator), then the message. qport leaves out pydantic's echo
 * of the input and its URL line. */
#define PYD "1 validation error for QuantizationArgs\n"

static const char *const strategies[] = {"tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"};
static const char *const actorders[] = {"group", "weight", "dynamic", "static"};
static const char *const arg_keys[] = {"num_bits", "type", "symmetric", "group_size", "strategy", "block_structure",
                                       "dynamic", "actorder", "scale_dtype", "zp_dtype", "observer",
                                       "observer_kwargs"};

static int lookup_lower(const char *const *names, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(names[i], s)) return (int)i;
    return -1;
}

/* A model-validator error (no field line). */
static qp_status bad(qp_config *cfg, const char *key, const char *msg) {
    return qp_config_defer_error(cfg, QP_ERR_VALUE, key, PYD "  %s", msg);
}

/* A field error: the field's name on its own line. */
static qp_status bad_field(qp_config *cfg, const char *key, const char *field, const char *msg) {
    return qp_config_defer_error(cfg, QP_ERR_VALUE, key, PYD "%s\n  %s", field, msg);
}

/* An enum field validator's ValueError for a string it does not know. */
static qp_status bad_enum(qp_config *cfg, const char *key, const char *field, const char *val, const char *cls) {
    char m[256];
    snprintf(m, sizeof m, "Value error, '%.120s' is not a valid %s", val, cls);
    return bad_field(cfg, key, field, m);
}

/* A TorchDtype as its repr prints it ("torch.int8"). */
static void torch_dtype(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s%s", strncmp(s, "torch.", 6) ? "torch." : "", s);
}

/* pydantic's lax int: ints, bools, integral floats, decimal strings. */
static const char *lax_int(const qj *v, long long *out) {
    if (v->type == QJ_INT) { *out = v->i; return NULL; }
    if (v->type == QJ_BOOL) { *out = v->b; return NULL; }
    if (v->type == QJ_FLOAT) {
        /* beyond int64 qport cannot hold it (Python would take the big int) */
        if (!(v->d > -9.2e18 && v->d < 9.2e18)) return "Input should be a valid integer";
        if (v->d != (double)(long long)v->d) return "Input should be a valid integer, got a number with a fractional part";
        *out = (long long)v->d;
        return NULL;
    }
    if (v->type == QJ_STRING) {
        char *end;
        long long x = strtoll(v->s, &end, 10);
        if (end == v->s || *end) return "Input should be a valid integer, unable to parse string as an integer";
        *out = x;
        return NULL;
    }
    return "Input should be a valid integer";
}

/* pydantic's lax bool: bools, 0/1, and its true/false words. */
static const char *lax_bool(const qj *v, int *out) {
    static const char *const t[] = {"true", "1", "yes", "on", "t", "y"}, *const f[] = {"false", "0", "no", "off", "f", "n"};
    if (v->type == QJ_BOOL) { *out = v->b; return NULL; }
    if ((v->type == QJ_INT || v->type == QJ_FLOAT) && (v->d == 0 || v->d == 1)) { *out = v->d == 1; return NULL; }
    for (size_t i = 0; v->type == QJ_STRING && i < 6; i++) {
        if (!strcasecmp(v->s, t[i])) { *out = 1; return NULL; }
        if (!strcasecmp(v->s, f[i])) { *out = 0; return NULL; }
    }
    return v->type == QJ_NULL ? "Input should be a valid boolean" : "Input should be a valid boolean, unable to interpret input";
}

/* The field validators (mode="before") and types. */
static qp_status fields(qp_config *cfg, const qj *o, const char *key, qp_ct_args *a, int *ok) {
    char m[256];
    *ok = 0;
    for (size_t i = 0; i < o->n; i++) {
        size_t k = 0;
        while (k < sizeof arg_keys / sizeof *arg_keys && strcmp(arg_keys[k], o->keys[i])) k++;
        if (k == sizeof arg_keys / sizeof *arg_keys) { /* extra="forbid" */
            return bad_field(cfg, key, o->keys[i], "Extra inputs are not permitted");
        }
    }
    const qj *v;
    if ((v = qj_get(o, "num_bits"))) {
        const char *e = lax_int(v, &a->num_bits);
        if (e) return bad_field(cfg, key, "num_bits", e);
    }
    if ((v = qj_get(o, "type"))) {
        if (v->type != QJ_STRING) return bad_field(cfg, key, "type", "Input should be 'int' or 'float'");
        if (strcasecmp(v->s, "int") && strcasecmp(v->s, "float")) return bad_enum(cfg, key, "type", v->s, "QuantizationType");
        a->is_float = !strcasecmp(v->s, "float");
        a->type_given = 1;
    }
    if ((v = qj_get(o, "symmetric"))) {
        const char *e = lax_bool(v, &a->symmetric);
        if (e) return bad_field(cfg, key, "symmetric", e);
    }
    if ((v = qj_get(o, "group_size")) && v->type != QJ_NULL) {
        long long g;
        const char *e = v->type == QJ_STRING ? "Input should be a valid integer" : lax_int(v, &g);
        if (e) return bad_field(cfg, key, "group_size", e);
        if (g < -1) {
            snprintf(m, sizeof m, "Value error, Invalid group size %lld. Use group_size > 0 for strategy='group' "
                     "and group_size = -1 for 'channel'", g);
            return bad_field(cfg, key, "group_size", m);
        }
        a->has_group = 1;
        a->group_size = g;
    }
    int have_strategy = 0;
    if ((v = qj_get(o, "strategy")) && v->type != QJ_NULL) {
        if (v->type != QJ_STRING)
            return bad_field(cfg, key, "strategy", "Input should be 'tensor', 'channel', 'group', 'block', 'token', "
                                                   "'tensor_group' or 'attn_head'");
        int s = lookup_lower(strategies, 7, v->s);
        if (s < 0) return bad_enum(cfg, key, "strategy", v->s, "QuantizationStrategy");
        a->strategy = (qp_ct_strategy)s;
        have_strategy = 1;
    }
    if ((v = qj_get(o, "block_structure")) && v->type != QJ_NULL) {
        int n = 0, good = 0;
        if (v->type == QJ_STRING) {
            const char *p = v->s;
            for (good = 1; good; p++) {
                char *end;
                long long x = strtoll(p, &end, 10);
                while (*end == ' ') end++;
                if (end == p || (*end && *end != 'x') || n == 8) { good = 0; break; }
                a->block[n++] = x;
                if (!*end) break;
                p = end;
            }
        } else if (v->type == QJ_ARRAY && v->n == 2 && v->items[0]->type == QJ_INT && v->items[1]->type == QJ_INT) {
            a->block[0] = v->items[0]->i;
            a->block[1] = v->items[1]->i;
            n = 2;
            good = 1;
        }
        if (!good) {
            qp_buf b = {0};
            if (v->type == QJ_STRING) qp_buf_puts(&b, v->s); else qp_pyrepr(&b, v);
            snprintf(m, sizeof m, "Value error, Invalid block_structure '%.160s'. Must be a list of ints [rows, cols].",
                     qp_buf_str(&b));
            qp_buf_free(&b);
            return bad_field(cfg, key, "block_structure", m);
        }
        a->has_block = n;
    }
    if ((v = qj_get(o, "dynamic"))) {
        int d;
        if (v->type == QJ_BOOL || v->type == QJ_INT || v->type == QJ_FLOAT) {
            if (lax_bool(v, &d)) return bad_field(cfg, key, "dynamic", "Input should be 'local' or a valid boolean");
            a->dynamic = d;
        } else if (v->type == QJ_STRING && !strcasecmp(v->s, "local")) {
            a->dynamic = 2;
        } else if (v->type == QJ_STRING) {
            return bad_enum(cfg, key, "dynamic", v->s, "DynamicType");
        }
        else return bad_field(cfg, key, "dynamic", "Input should be 'local' or a valid boolean");
    }
    if ((v = qj_get(o, "actorder")) && v->type != QJ_NULL) {
        if (v->type == QJ_BOOL) a->actorder = v->b ? 1 : 0; /* True means GROUP */
        else {
            if (v->type != QJ_STRING)
                return bad_field(cfg, key, "actorder", "Input should be 'group', 'weight', 'dynamic' or 'static'");
            int s = lookup_lower(actorders, 4, v->s);
            if (s < 0) return bad_enum(cfg, key, "actorder", v->s, "ActivationOrdering");
            a->actorder = s + 1;
        }
    }
    if ((v = qj_get(o, "scale_dtype")) && v->type == QJ_STRING) torch_dtype(a->scale_dtype, sizeof a->scale_dtype, v->s);
    if ((v = qj_get(o, "zp_dtype")) && v->type == QJ_STRING) torch_dtype(a->zp_dtype, sizeof a->zp_dtype, v->s);
    if ((v = qj_get(o, "observer")) && v->type == QJ_STRING) snprintf(a->observer, sizeof a->observer, "%s", v->s);
    if ((v = qj_get(o, "observer_kwargs")) && v->type == QJ_OBJECT && v->n) a->observer_kwargs = v;
    *ok = 1;
    a->strategy_derived = !have_strategy;
    return QP_OK;
}

/* QuantizationArgs.validate_model_after: the strategy default and the
 * cross-field rules, in the validator's order. */
static qp_status model_after(qp_config *cfg, qp_ct_args *a, const char *key, int *ok) {
    *ok = 0;
    if (a->strategy_derived) {
        if (!a->has_group) a->strategy = QP_CT_TENSOR;
        else if (a->group_size > 0) a->strategy = QP_CT_GROUP;
        else if (a->group_size == -1) a->strategy = QP_CT_CHANNEL;
        else {
            char m[160];
            snprintf(m, sizeof m, "Value error, Invalid group size %lld. Use group_size > 0 for strategy='group' "
                     "and group_size = -1 for 'channel'", a->group_size);
            return bad(cfg, key, m);
        }
    }
    qp_ct_strategy s = a->strategy;
    int grp = s == QP_CT_GROUP || s == QP_CT_TENSOR_GROUP;
    if (s == QP_CT_TOKEN && !a->dynamic)
        return bad(cfg, key, "Value error, Cannot perform static token quantization, please use `dynamic=True`");
    if (grp && (!a->has_group || a->group_size <= 0)) {
        char m[160];
        snprintf(m, sizeof m, "Value error, strategy %s requires group_size to be set to a positive value",
                 s == QP_CT_GROUP ? "group" : "tensor_group");
        return bad(cfg, key, m);
    }
    if (a->has_group && a->group_size > 0 && !grp)
        return bad(cfg, key, "Value error, group_size requires strategy to be set to 'group'");
    if ((s == QP_CT_BLOCK) != (a->has_block != 0)) { /* the message prints the model */
        qp_buf b = {0};
        qp_ct_args_str(&b, a, " ", 0);
        qp_status st = qp_config_defer_error(cfg, QP_ERR_VALUE, key, PYD "  Value error, %s\n%s",
                                             a->has_block ? "Block structure requires block strategy"
                                                          : "Block strategy requires block structure",
                                             qp_buf_str(&b));
        qp_buf_free(&b);
        return st;
    }
    if ((a->actorder == 1 || a->actorder == 3) && !grp) /* "dynamic" is an alias of "group" */
        return bad(cfg, key, "Value error, Must use group or tensor_group quantization strategy in order to apply "
                             "group activation ordering");
    if (a->dynamic) {
        if (s != QP_CT_TOKEN && s != QP_CT_TENSOR && s != QP_CT_TENSOR_GROUP && s != QP_CT_GROUP)
            return bad(cfg, key, "Value error, One of (<QuantizationStrategy.TOKEN: 'token'>, "
                                 "<QuantizationStrategy.TENSOR: 'tensor'>, <QuantizationStrategy.TENSOR_GROUP: "
                                 "'tensor_group'>, <QuantizationStrategy.GROUP: 'group'>) must be used for dynamic "
                                 "quant.");
        if (a->dynamic == 2 && s != QP_CT_TENSOR_GROUP)
            return bad(cfg, key, "Value error, local is only supported for strategy tensor_group");
    }
    /* the zp_dtype default: pytorch_dtype() raises NotImplementedError,
     * which pydantic lets through unwrapped */
    /* the observer: none for dynamic=True, min-max for "local", else
     * memoryless min-max unless one is named */
    if (a->dynamic == 1) a->observer[0] = 0;
    else if (!a->observer[0]) snprintf(a->observer, sizeof a->observer, "%s", a->dynamic ? "minmax" : "memoryless_minmax");
    if (!a->zp_dtype[0]) {
        if (a->is_float && a->num_bits != 4 && a->num_bits != 8)
            return qp_config_defer_error(cfg, QP_ERR_NOT_IMPLEMENTED, key, "Only num_bits in (8) are supported");
        snprintf(a->zp_dtype, sizeof a->zp_dtype, "%s",
                 a->is_float ? "torch.float8_e4m3fn" : a->num_bits <= 8 ? "torch.int8" : a->num_bits <= 16 ? "torch.int16" : "torch.int32");
    }
    *ok = 1;
    return QP_OK;
}

static const char *const strategy_enums[] = {"TENSOR", "CHANNEL", "GROUP", "BLOCK", "TOKEN", "TENSOR_GROUP",
                                             "ATTN_HEAD"};

/* pydantic's field listing of a QuantizationArgs: str() joins with ' ',
 * repr() wraps it in QuantizationArgs(...) with ', '. use_enum_values turns
 * validated enums into their strings; a default `type` and a strategy the
 * model validator derived were never validated, so they stay enum members.
 * !validated: the model as the model validator sees it, before it derives
 * strategy, zp_dtype and observer (its messages print that). */
void qp_ct_args_str(qp_buf *b, const qp_ct_args *a, const char *sep, int validated) {
    qp_buf_printf(b, "num_bits=%lld%stype=", a->num_bits, sep);
    if (a->type_given) qp_buf_printf(b, "'%s'", a->is_float ? "float" : "int");
    else qp_buf_puts(b, "<QuantizationType.INT: 'int'>"); /* the default, never validated */
    qp_buf_printf(b, "%ssymmetric=%s%sgroup_size=", sep, a->symmetric ? "True" : "False", sep);
    if (a->has_group) qp_buf_printf(b, "%lld", a->group_size); else qp_buf_puts(b, "None");
    if (a->strategy_derived && !validated)
        qp_buf_printf(b, "%sstrategy=None", sep);
    else if (a->strategy_derived)
        qp_buf_printf(b, "%sstrategy=<QuantizationStrategy.%s: '%s'>", sep, strategy_enums[a->strategy],
                      strategies[a->strategy]);
    else
        qp_buf_printf(b, "%sstrategy='%s'", sep, strategies[a->strategy]);
    qp_buf_printf(b, "%sblock_structure=", sep);
    for (int i = 0; i < a->has_block; i++) qp_buf_printf(b, "%s%lld", i ? ", " : "[", a->block[i]);
    qp_buf_puts(b, a->has_block ? "]" : "None");
    static const char *const ao[] = {"None", "'group'", "'weight'", "'dynamic'", "'static'"};
    qp_buf_printf(b, "%sdynamic=%s%sactorder=%s%sscale_dtype=%s%szp_dtype=%s%sobserver=", sep,
                  a->dynamic == 2 ? "'local'" : a->dynamic ? "True" : "False", sep, ao[a->actorder], sep,
                  a->scale_dtype[0] ? a->scale_dtype : "None", sep, a->zp_dtype[0] ? a->zp_dtype : "None", sep);
    if (a->observer[0]) qp_buf_printf(b, "'%s'", a->observer); else qp_buf_puts(b, "None");
    qp_buf_printf(b, "%sobserver_kwargs=", sep);
    if (a->observer_kwargs) qp_pyrepr(b, a->observer_kwargs); else qp_buf_puts(b, "{}");
}

/* QuantizationArgs.model_validate(v); *ok 0 when an error was deferred. */
static qp_status parse_args(qp_config *cfg, const qj *v, const char *key, qp_ct_args *a, int *ok) {
    memset(a, 0, sizeof *a);
    a->num_bits = 8;
    a->symmetric = 1;
    *ok = 0;
    if (!v || v->type != QJ_OBJECT) {
        qp_buf b = {0};
        qp_pyrepr(&b, v);
        qp_status st = qp_config_defer_error(cfg, QP_ERR_VALUE, key,
                                             PYD "  Input should be a valid dictionary or instance of QuantizationArgs "
                                                 "[type=model_type, input_value=%s, input_type=%s]",
                                             v ? qp_buf_str(&b) : "None", v ? qj_type_name(v) : "NoneType");
        qp_buf_free(&b);
        return st;
    }
    qp_status st = fields(cfg, v, key, a, ok);
    if (st != QP_OK || !*ok) return st;
    return model_after(cfg, a, key, ok);
}

/* CompressionFormats whose layers quantize activations
 * (is_activation_quantization_format). */
int qp_ct_act_format(const char *f) {
    static const char *const act[] = {"naive-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized"};
    for (size_t i = 0; f && i < sizeof act / sizeof *act; i++)
        if (!strcmp(f, act[i])) return 1;
    return 0;
}

/* A dict assignment: a target seen before keeps its place, takes the new value. */
static qp_ct_target *target_slot(qp_config *cfg, const char *t, size_t cap) {
    for (size_t i = 0; i < cfg->n_ct_targets; i++)
        if (!strcmp(cfg->ct_targets[i].target, t)) {
            qp_regex_free(cfg->ct_targets[i].re);
            cfg->ct_targets[i].re = NULL;
            return &cfg->ct_targets[i];
        }
    if (cfg->n_ct_targets >= cap) return NULL;
    return &cfg->ct_targets[cfg->n_ct_targets++];
}

static qp_status group_targets(qp_config *cfg, const char *gname, const qj *g, size_t cap) {
    char key[256], k2[300];
    snprintf(key, sizeof key, "config_groups.%s", gname);
    const qj *targets = qj_get(g, "targets");
    const qj *fmt = qj_get(g, "format");
    const qj *inp = qj_get(g, "input_activations"), *outp = qj_get(g, "output_activations");
    const char *format = fmt && fmt->type == QJ_STRING ? fmt->s : NULL;
    for (size_t t = 0; t < targets->n; t++) {
        qp_ct_target *e = target_slot(cfg, targets->items[t]->s, cap);
        if (!e) return qp_error_set(cfg->ctx, QP_ERR_INTERNAL, cfg->file, key, NULL, "target table overflow");
        memset(e, 0, sizeof *e);
        e->target = targets->items[t]->s;
        int ok;
        snprintf(k2, sizeof k2, "%s.weights", key);
        qp_status st = parse_args(cfg, qj_get(g, "weights"), k2, &e->w, &ok);
        if (st != QP_OK || !ok) return st;
        if (e->w.actorder == 1 || e->w.actorder == 3)
            return qp_config_defer_error(cfg, QP_ERR_VALUE, k2,
                                         "Compressed-tensors group/dynamic activation ordering (actorder='%s') is no "
                                         "longer supported. Use a checkpoint with static/weight activation ordering "
                                         "or without activation ordering.",
                                         e->w.actorder == 1 ? "group" : "dynamic");
        e->format = format;
        int act = qp_ct_act_format(format ? format : cfg->ct_format);
        if (act || qj_truthy(inp)) {
            if (!qj_truthy(inp)) {
                if (!e->w.is_float)
                    return qp_config_defer_error(cfg, QP_ERR_UNSUPPORTED, key,
                                                 "AssertionError: vLLM asserts that a config group without "
                                                 "input_activations in an activation-quantization format has "
                                                 "float weights");
            } else {
                snprintf(k2, sizeof k2, "%s.input_activations", key);
                st = parse_args(cfg, inp, k2, &e->in, &ok);
                if (st != QP_OK || !ok) return st;
                e->has_in = 1;
            }
        }
        if (qj_truthy(outp)) {
            snprintf(k2, sizeof k2, "%s.output_activations", key);
            st = parse_args(cfg, outp, k2, &e->out, &ok);
            if (st != QP_OK || !ok) return st;
            e->has_out = 1;
        }
        if (!strncmp(e->target, "re:", 3)) {
            char err[256];
            e->re = qp_regex_compile(e->target + 3, err, sizeof err);
            if (!e->re) {
                snprintf(k2, sizeof k2, "%s.targets[%zu]", key, t);
                return qp_error_set(cfg->ctx, QP_ERR_PARSE, cfg->file, k2, NULL, "%s", err);
            }
        }
    }
    return QP_OK;
}

static qp_status type_err(qp_config *cfg, const char *key, const char *want, const qj *got) {
    return qp_error_set(cfg->ctx, QP_ERR_PARSE, cfg->file, key, NULL, "%s must be %s, got %s", key, want,
                        qj_type_name(got));
}

/* config_groups: groups of one `...Attention` target are dropped (vLLM
 * couples attention quantization with the KV cache). */
static qp_status parse_groups(qp_config *cfg) {
    const qj *groups = qj_get(cfg->qc, "config_groups");
    if (!groups) return QP_OK;
    if (groups->type != QJ_OBJECT) return type_err(cfg, "config_groups", "an object", groups);
    size_t cap = 0;
    for (size_t i = 0; i < groups->n; i++) {
        char key[256];
        snprintf(key, sizeof key, "config_groups.%s", groups->keys[i]);
        const qj *g = groups->items[i], *t = qj_get(g, "targets");
        if (g->type != QJ_OBJECT) return type_err(cfg, key, "an object", g);
        snprintf(key, sizeof key, "config_groups.%s.targets", groups->keys[i]);
        if (!t || t->type != QJ_ARRAY) return type_err(cfg, key, "a list of strings", t);
        for (size_t j = 0; j < t->n; j++)
            if (t->items[j]->type != QJ_STRING) return type_err(cfg, key, "a list of strings", t->items[j]);
        cap += t->n;
    }
    cfg->ct_targets = calloc(cap ? cap : 1, sizeof *cfg->ct_targets);
    if (!cfg->ct_targets) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "out of memory");
    for (size_t i = 0; i < groups->n; i++) {
        const qj *t = qj_get(groups->items[i], "targets");
        size_t tl;
        if (t->n == 1 && (tl = strlen(t->items[0]->s)) >= 9 && !strcmp(t->items[0]->s + tl - 9, "Attention")) {
            qp_log(cfg->ctx, QP_LOG_WARN, "Skipping CompressedTensors config group for %s. Attention quant is "
                   "coupled with KV-cache quantization in vLLM.", t->items[0]->s);
            continue;
        }
        qp_status st = group_targets(cfg, groups->keys[i], groups->items[i], cap);
        if (st != QP_OK || cfg->load_status != QP_OK) return st;
    }
    return QP_OK;
}

qp_status qp_config_parse_ct(qp_config *cfg) {
    qp_status st = qp_config_packed_mapping(cfg);
    if (st != QP_OK) return st;
    const qj *f = qj_get(cfg->qc, "format");
    if (f && f->type != QJ_STRING && f->type != QJ_NULL) return type_err(cfg, "format", "a string", f);
    cfg->ct_format = f && f->type == QJ_STRING ? f->s : NULL;
    st = qp_config_exclude_list(cfg, "ignore");
    if (st != QP_OK) return st;
    st = parse_groups(cfg);
    if (st != QP_OK) return st;
    /* The targets double as the config's layer patterns for inspect. */
    if (cfg->n_ct_targets) {
        cfg->patterns = calloc(cfg->n_ct_targets, sizeof *cfg->patterns);
        if (!cfg->patterns) return qp_error_set(cfg->ctx, QP_ERR_OUT_OF_MEMORY, cfg->file, NULL, NULL, "out of memory");
        for (size_t i = 0; i < cfg->n_ct_targets; i++) cfg->patterns[i].key = cfg->ct_targets[i].target;
        cfg->n_patterns = cfg->n_ct_targets;
    }
    /* _parse_sparsity_config: any sparsity target refuses the model. */
    const qj *sp = qj_get(cfg->qc, "sparsity_config");
    if (cfg->load_status == QP_OK && qj_truthy(sp) && sp->type == QJ_OBJECT && qj_truthy(qj_get(sp, "targets")))
        qp_config_defer_error(cfg, QP_ERR_UNSUPPORTED, "sparsity_config",
                              "Sparsity support has been removed from compressed-tensors. Please use a model "
                              "without sparsity configuration.");
    /* Online transforms (SpinQuant / QuIP rotations) wrap the linear method
     * in CompressedTensorsLinearTransformMethod: not modelled, so refused
     * rather than answered wrongly. */
    if (cfg->load_status == QP_OK && qj_truthy(qj_get(cfg->qc, "transform_config")))
        qp_config_defer_error(cfg, QP_ERR_UNSUPPORTED, "transform_config",
                              "compressed-tensors transform_config (online rotations, "
                              "CompressedTensorsLinearTransformMethod) is not supported by qport");
    const qj *kv = qj_get(cfg->qc, "kv_cache_scheme");
    if (!qj_is_null(kv)) {
        if (kv->type != QJ_OBJECT) return type_err(cfg, "kv_cache_scheme", "an object", kv);
        cfg->ct_kv_scheme = kv;
        /* what CompressedTensorsKVCacheMethod accepts (its errors come at
         * the attention layers' resolve) */
        const qj *ks = qj_get(kv, "strategy");
        if (qj_str_eq(qj_get(kv, "type"), "float") && qj_int_eq(qj_get(kv, "num_bits"), 8) &&
            (qj_str_eq(ks, "tensor") || qj_str_eq(ks, "attn_head")) && qj_truthy(qj_get(kv, "symmetric"))) {
            cfg->kv_cache.dtype = QP_DTYPE_F8_E4M3FN;
            /* one scale, or one per KV head ("attn_head") */
            cfg->kv_cache.granularity = qj_str_eq(ks, "attn_head") ? QP_GRAN_CHANNEL : QP_GRAN_TENSOR;
            cfg->kv_cache.symmetric = 1;
            cfg->kv_cache.scale_dtype = QP_DTYPE_F32;
        }
    }
    return QP_OK;
}
