/* qport inspect: what vLLM would run for each layer of a config. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

#define MAX_ITEMS 4096

typedef struct layer_arg {
    const char *name;
    qp_layer_kind kind;
} layer_arg;

static const char *nz(const char *s) { return s && *s ? s : NULL; }

static void qtensor_json(FILE *f, const qp_qtensor *t) {
    if (t->dtype == QP_DTYPE_NONE) { fputs("null", f); return; }
    fprintf(f, "{\"dtype\":\"%s\",\"granularity\":\"%s\",\"group_size\":%d,\"block\":[%d,%d],"
               "\"symmetric\":%s,\"dynamic\":%s,\"scale_dtype\":\"%s\",\"scale2_dtype\":",
            qp_dtype_name(t->dtype), qp_granularity_name(t->granularity), t->group_size, t->block[0], t->block[1],
            t->symmetric ? "true" : "false", t->dynamic ? "true" : "false", qp_dtype_name(t->scale_dtype));
    if (t->scale2_dtype == QP_DTYPE_NONE) fputs("null}", f);
    else fprintf(f, "\"%s\"}", qp_dtype_name(t->scale2_dtype));
}

static void qtensor_human(FILE *f, const char *label, const qp_qtensor *t) {
    if (t->dtype == QP_DTYPE_NONE) return;
    fprintf(f, "    %-10s %s %s", label, qp_dtype_name(t->dtype), qp_granularity_name(t->granularity));
    if (t->group_size) fprintf(f, " g%d", t->group_size);
    if (t->block[0]) fprintf(f, " %dx%d", t->block[0], t->block[1]);
    fprintf(f, " %s %s scale=%s", t->dynamic ? "dynamic" : "static", t->symmetric ? "sym" : "asym",
            qp_dtype_name(t->scale_dtype));
    if (t->scale2_dtype != QP_DTYPE_NONE) fprintf(f, " scale2=%s", qp_dtype_name(t->scale2_dtype));
    fputc('\n', f);
}

static void scheme_json(FILE *f, const qp_scheme *s) {
    fputs(",\"method\":", f); json_str(f, nz(s->method));
    fputs(",\"scheme\":", f); json_str(f, nz(s->scheme_class));
    fputs(",\"scheme_kind\":", f); json_str(f, qp_scheme_kind_name(s->kind));
    fputs(",\"weight_key\":", f); json_str(f, nz(s->weight_key));
    fputs(",\"activation_key\":", f); json_str(f, nz(s->activation_key));
    if (s->min_capability) fprintf(f, ",\"min_capability\":%d", s->min_capability);
    else fputs(",\"min_capability\":null", f);
    fputs(",\"weight\":", f); qtensor_json(f, &s->weight);
    fputs(",\"activation\":", f); qtensor_json(f, &s->activation);
    fputs(",\"kv_cache\":", f); qtensor_json(f, &s->kv_cache);
    static const char *packs[] = {NULL, "order", "reorder", "marlin_qqq"};
    fputs(",\"pack_method\":", f); json_str(f, packs[s->pack_method]);
}

static void scheme_human(FILE *f, const qp_scheme *s) {
    fprintf(f, "%s", nz(s->method) ? s->method : "(no quant method)");
    if (nz(s->scheme_class)) fprintf(f, " / %s", s->scheme_class);
    if (s->min_capability) fprintf(f, "  (min capability %d)", s->min_capability);
    fputc('\n', f);
    if (nz(s->weight_key) || nz(s->activation_key))
        fprintf(f, "    keys       weight=%s activation=%s\n", nz(s->weight_key) ? s->weight_key : "None",
                nz(s->activation_key) ? s->activation_key : "None");
    qtensor_human(f, "weight", &s->weight);
    qtensor_human(f, "activation", &s->activation);
    qtensor_human(f, "kv-cache", &s->kv_cache);
}

static void error_json(FILE *f, qp_context *ctx, qp_status st) {
    qp_error_info e;
    qp_last_error_info(ctx, &e);
    fputs(",\"method\":null,\"scheme\":null,\"weight_key\":null,\"activation_key\":null,\"min_capability\":null", f);
    fputs(",\"error_type\":", f); json_str(f, qp_status_exception(st) ? qp_status_exception(st) : qp_status_str(st));
    fputs(",\"error\":", f); json_str(f, e.message);
    fputs(",\"key_path\":", f); json_str(f, nz(e.key_path));
}

/* 1 when vLLM would refuse the config (a resolution error other than "no
 * such part"), as a --layer query that fails exits 1. */
static int refused(qp_status st) { return st != QP_OK && st != QP_ERR_NOT_FOUND; }

/* What the followed vLLM release says of the config as a whole: 0.34.0 (the
 * Quark reference) removed QQQ and refuses the method at config parsing;
 * qport keeps resolving QQQ as vLLM 0.8.5 did. NULL when nothing. */
static const char *dialect_note(const qp_config *cfg, const qp_resolve_options *o) {
    if (o->dialect == QP_DIALECT_VLLM && qp_config_method(cfg) == QP_METHOD_QQQ)
        return "vLLM 0.34.0 refuses this config (ValueError: Unknown quantization method: qqq. Must be one of [...]): "
               "QQQ was removed after 0.8.5; qport resolves QQQ as vLLM 0.8.5 did";
    return NULL;
}

static int summary(qp_context *ctx, const qp_config *cfg, const qp_resolve_options *o) {
    int rc = 0;
    qp_status st;
    qp_config_summary sm;
    qp_config_summarize(cfg, &sm);
    printf("config:       %s\n", sm.file);
    printf("quant_method: %s\n", qp_method_name(sm.method));
    if (sm.model_type) printf("model_type:   %s\n", sm.model_type);
    if (sm.pack_method) printf("pack_method:  %s\n", sm.pack_method);
    if (dialect_note(cfg, o)) printf("note:         %s\n", dialect_note(cfg, o));
    qp_scheme s;
    printf("global:       ");
    if ((st = qp_config_resolve_global(cfg, o, &s)) == QP_OK) scheme_human(stdout, &s);
    else { printf("error: %s\n", qp_last_error(ctx)); rc |= refused(st); }
    /* the architecture (api/arch.c): vLLM's class, the packed modules */
    qp_arch_info a = {.struct_size = sizeof a};
    qp_config_arch(cfg, &a);
    const qp_packed_module *pm;
    size_t npm;
    if (a.name || a.known) {
        printf("architecture: %s%s\n", a.name ? a.name : "-", a.known ? "" : " (not in qport's table)");
        if (!qp_config_packed_modules(cfg, o, &pm, &npm) && npm) {
            printf("packed:      ");
            for (size_t i = 0; i < npm; i++) {
                printf(" %s=", pm[i].fused);
                for (size_t j = 0; j < pm[i].n_shards; j++) printf("%s%s", j ? "," : "", pm[i].shards[j]);
            }
            putchar('\n');
        }
        if (a.note) printf("    note: %s\n", a.note);
    }
    /* the experts of a MoE model: vLLM's MoE method for the global config
     * in the first layer with an MoE block (a --layer NAME:moe query
     * answers for one block); a dense model has none */
    if (a.moe_block) {
        long l0 = 0;
        while (l0 < 4096 && a.known && !qp_arch_layer_is_moe(&a, l0)) l0++;
        char blk[160];
        snprintf(blk, sizeof blk, "model.layers.%ld.%s.%s", l0, a.moe_block, a.experts);
        printf("experts:      ");
        if ((st = qp_config_resolve(cfg, blk, QP_LAYER_MOE, o, &s)) == QP_OK) {
            printf("(%s) ", blk);
            scheme_human(stdout, &s);
        } else printf("error: %s\n", qp_last_error(ctx));
    }
    for (size_t i = 0; i < sm.n_layer_patterns; i++) {
        printf("pattern %-40s ", qp_config_layer_pattern(cfg, i));
        if ((st = qp_config_resolve_pattern(cfg, i, o, &s)) == QP_OK) scheme_human(stdout, &s);
        else { printf("error: %s\n", qp_last_error(ctx)); rc |= refused(st); }
    }
    size_t nlt = qp_config_layer_type_count(cfg);
    if (nlt) {
        printf("layer types:  %zu (", nlt);
        for (size_t i = 0; i < nlt; i++) printf("%s%s", i ? ", " : "", qp_config_layer_type_key(cfg, i));
        if (o->dialect == QP_DIALECT_VLLM)
            printf("): never matched: vLLM looks layer_type_quant_config up by type(module), a class, not these string "
                   "keys (docs/semantics.md §3)\n");
        else
            printf("): matched by the module class name (--dialect sglang)\n");
    }
    printf("excludes:     %zu\n", sm.n_excludes);
    for (size_t i = 0; i < sm.n_excludes && i < 20; i++) printf("    %s\n", qp_config_exclude(cfg, i));
    if (sm.n_excludes > 20) printf("    ... (%zu more)\n", sm.n_excludes - 20);
    qp_qtensor kv;
    if ((st = qp_config_kv_cache(cfg, &kv)) != QP_OK) { printf("kv cache:     error: %s\n", qp_last_error(ctx)); rc |= refused(st); }
    else if (kv.dtype == QP_DTYPE_NONE) printf("kv cache:     not quantized\n");
    else { printf("kv cache:\n"); qtensor_human(stdout, "kv-cache", &kv); }
    return rc;
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    static layer_arg layers[MAX_ITEMS];
    static qp_packed_module packed[64];
    size_t n_layers = 0, n_packed = 0;
    bool json = false;
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--layer") && i + 1 < argc) {
            if (n_layers == MAX_ITEMS) { fprintf(stderr, "qport inspect: too many --layer options\n"); return 2; }
            char *spec = argv[++i];
            char *colon = strrchr(spec, ':');
            layers[n_layers].kind = QP_LAYER_LINEAR;
            if (colon && qp_layer_kind_parse(colon + 1, &layers[n_layers].kind) == QP_OK) *colon = 0;
            else if (colon && !strchr(colon, '.')) {
                fprintf(stderr, "qport inspect: unknown layer kind '%s' (linear, attention, moe)\n", colon + 1);
                return 2;
            }
            layers[n_layers++].name = spec;
        } else if (!strcmp(a, "--packed") && i + 1 < argc) {
            if (n_packed == 64 || parse_packed(argv[++i], &packed[n_packed])) {
                fprintf(stderr, "qport inspect: bad --packed '%s' (want FUSED=SHARD,SHARD...)\n", argv[i]);
                return 2;
            }
            n_packed++;
        } else if (!strcmp(a, "--capability") && i + 1 < argc) {
            char *end;
            const char *v = argv[++i];
            long c = strtol(v, &end, 10);
            if (*end == '.' && end[1] >= '0' && end[1] <= '9' && !end[2]) c = c * 10 + (end[1] - '0'), end += 2;
            if (*end || c < 0 || c > 1000) { fprintf(stderr, "qport inspect: bad --capability '%s' (e.g. 89 or 8.9)\n", v); return 2; }
            o.capability = (int)c;
        } else if (!strcmp(a, "--dialect") && i + 1 < argc) {
            const char *d = argv[++i];
            if (!strcmp(d, "vllm")) o.dialect = QP_DIALECT_VLLM;
            else if (!strcmp(d, "sglang")) o.dialect = QP_DIALECT_SGLANG;
            else { fprintf(stderr, "qport inspect: unknown dialect '%s' (vllm, sglang)\n", d); return 2; }
        } else if (a[0] == '-' ) {
            fprintf(stderr, "qport inspect: unknown or incomplete option '%s'\n", a);
            return 2;
        } else if (!path) path = a;
        else { fprintf(stderr, "qport inspect: more than one CONFIG given\n"); return 2; }
    }
    if (!path) {
        tool_usage(stderr, "inspect");
        return 2;
    }
    if (n_packed) { o.packed = packed; o.n_packed = n_packed; }
    qp_context *ctx;
    if (qp_context_create(&ctx) != QP_OK) { fprintf(stderr, "qport: out of memory\n"); return 2; }
    qp_config *cfg;
    if (qp_config_load_file(ctx, path, &cfg) != QP_OK) {
        fprintf(stderr, "qport inspect: %s\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 2;
    }
    int rc = 0;
    if (!n_layers) {
        if (json) {
            qp_scheme s;
            qp_status st = qp_config_resolve_global(cfg, &o, &s);
            rc |= refused(st);
            printf("{\"config\":"); json_str(stdout, path);
            printf(",\"quant_method\":\"%s\",\"global\":{\"result\":\"%s\"", qp_method_name(qp_config_method(cfg)),
                   st == QP_OK ? "ok" : "error");
            if (st == QP_OK) scheme_json(stdout, &s); else error_json(stdout, ctx, st);
            printf("},\"note\":");
            json_str(stdout, dialect_note(cfg, &o));
            printf("}\n");
        } else {
            rc |= summary(ctx, cfg, &o);
        }
    }
    for (size_t i = 0; i < n_layers; i++) {
        qp_scheme s;
        qp_status st = qp_config_resolve(cfg, layers[i].name, layers[i].kind, &o, &s);
        if (st != QP_OK) rc = 1;
        if (json) {
            printf("{\"layer\":"); json_str(stdout, layers[i].name);
            printf(",\"kind\":\"%s\",\"result\":\"%s\"", qp_layer_kind_name(layers[i].kind), st == QP_OK ? "ok" : "error");
            if (st == QP_OK) { scheme_json(stdout, &s); fputs(",\"error_type\":null,\"error\":null", stdout); }
            else error_json(stdout, ctx, st);
            printf("}\n");
        } else {
            printf("%s (%s): ", layers[i].name, qp_layer_kind_name(layers[i].kind));
            if (st == QP_OK) scheme_human(stdout, &s);
            else {
                qp_error_info e;
                qp_last_error_info(ctx, &e);
                printf("error %s: %s\n", qp_status_exception(st) ? qp_status_exception(st) : qp_status_str(st), e.message);
            }
        }
    }
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return rc;
}
