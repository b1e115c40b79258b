/* qport quantize IN_DIR OUT_DIR --scheme NAME [--group-size G]: every linear
 * layer of an fp16/bf16/fp32 safetensors model quantized with the library's
 * quantizers into a model directory vLLM's loaders accept: config.json with
 * the scheme's quantization_config, one model.safetensors with the tensors
 * under their checkpoint names, dtypes and shapes. Other tensors (embeddings,
 * norms, biases, excluded layers) are copied unchanged. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "cases.h"
#include "tool.h"

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = (size_t)n; }
    return b;
}

static char *replace_once(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    if (!p) return strdup(s);
    char *o = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
    if (!o) return NULL;
    sprintf(o, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return o;
}

typedef struct out_list {
    qp_tensor *t;
    char **names;
    void **owned;
    size_t n, cap;
    qp_qweights **q;
    size_t nq, capq;
} out_list;

static int push(out_list *o, const char *name, const qp_tensor *t, void *own) {
    if (o->n == o->cap) {
        size_t c = o->cap ? 2 * o->cap : 64;
        qp_tensor *t2 = realloc(o->t, c * sizeof *t2);
        if (t2) o->t = t2;
        char **n2 = realloc(o->names, c * sizeof *n2);
        if (n2) o->names = n2;
        void **w2 = realloc(o->owned, c * sizeof *w2);
        if (w2) o->owned = w2;
        if (!t2 || !n2 || !w2) return -1;
        o->cap = c;
    }
    o->names[o->n] = strdup(name);
    o->owned[o->n] = own;
    o->t[o->n] = *t;
    o->t[o->n].name = o->names[o->n];
    o->n++;
    return o->names[o->n - 1] ? 0 : -1;
}

static int keep_q(out_list *o, qp_qweights *q) {
    if (o->nq == o->capq) {
        size_t c = o->capq ? 2 * o->capq : 16;
        qp_qweights **q2 = realloc(o->q, c * sizeof *q2);
        if (!q2) return -1;
        o->q = q2;
        o->capq = c;
    }
    o->q[o->nq++] = q;
    return 0;
}

static void out_free(out_list *o) {
    for (size_t i = 0; i < o->n; i++) { free(o->names[i]); free(o->owned[i]); }
    for (size_t i = 0; i < o->nq; i++) qp_qweights_destroy(o->q[i]);
    free(o->t); free(o->names); free(o->owned); free(o->q);
}

/* The Quark config with an fp8 KV cache, as Quark exports it: k_proj and
 * v_proj in kv_cache_group, each with a layer entry that repeats the global
 * weight / input configs and quantizes its output per tensor to fp8
 * (docs/semantics.md §1: those output_tensors become the cache's config). NULL when the config
 * is not a plain Quark one. */
static char *with_kv_cache(const char *qcfg) {
    const char *g = strstr(qcfg, "\"global_quant_config\":{"), *e = g ? strstr(g, ",\"output_tensors\":null") : NULL;
    if (!strstr(qcfg, "\"quant_method\":\"quark\"") || !g || !e || !strstr(qcfg, "\"layer_quant_config\":{}") ||
        !strstr(qcfg, "\"kv_cache_group\":[]"))
        return NULL;
    g += strlen("\"global_quant_config\":{");
    const char *fp8 = ",\"output_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,"
                      "\"is_dynamic\":false},\"bias\":null}";
    size_t cap = 2 * (size_t)(e - g) + 2 * strlen(fp8) + 128;
    char *layers = malloc(cap);
    if (!layers) return NULL;
    snprintf(layers, cap, "\"layer_quant_config\":{\"*k_proj\":{%.*s%s,\"*v_proj\":{%.*s%s}", (int)(e - g), g, fp8,
             (int)(e - g), g, fp8);
    char *a = replace_once(qcfg, "\"kv_cache_group\":[]", "\"kv_cache_group\":[\"*k_proj\",\"*v_proj\"]");
    char *b = a ? replace_once(a, "\"layer_quant_config\":{}", layers) : NULL;
    free(a);
    free(layers);
    return b;
}

/* k_proj / v_proj output scales: absmax of the layer's output over a seeded
 * N(0, 1) calibration batch, over 448 (Quark's static per-tensor fp8). */
/* The config text *cfg replaced by its rewrite r; a rewrite that does not
 * apply to the scheme (r NULL) leaves none: 0. */
static int take_rewrite(char **cfg, char *r) {
    free(*cfg);
    *cfg = r;
    return r != NULL;
}

static float output_scale(const float *w, int N, int K) {
    enum { ROWS = 32 };
    uint64_t s = 0x5EEDull + (uint64_t)N * 31 + (uint64_t)K;
    float *x = malloc(sizeof(float) * (size_t)K), amax = 0.0f;
    if (!x) return 1.0f;
    for (int r = 0; r < ROWS; r++) {
        for (int k = 0; k < K; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u1 = ((double)(s >> 11) + 0.5) * 0x1p-53;
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            double u2 = (double)(s >> 11) * 0x1p-53;
            x[k] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
        }
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)x[k] * w[(size_t)n * K + k];
            if (fabs(acc) > amax) amax = (float)fabs(acc);
        }
    }
    free(x);
    return amax > 0.0f ? amax / 448.0f : 1.0f;
}

static int is_kv_proj(const char *layer) {
    size_t l = strlen(layer);
    return l >= 7 && (!strcmp(layer + l - 7, ".k_proj") || !strcmp(layer + l - 7, ".v_proj"));
}

/* An expert projection ("...experts.3.up_proj") of an MoE block the
 * config leaves unquantized: UnquantizedFusedMoEMethod (a QQQ config
 * quantizes linear layers only, an excluded block) loads plain weights. */
static int experts_unquantized(qp_config *cfg, const char *layer) {
    const char *e = strstr(layer, ".experts.");
    if (!e || e[9] < '0' || e[9] > '9') return 0;
    char block[1024];
    snprintf(block, sizeof block, "%.*s", (int)(e - layer) + 8, layer);
    qp_scheme s;
    return !qp_config_resolve(cfg, block, QP_LAYER_MOE, NULL, &s) && s.kind == QP_SCHEME_UNQUANTIZED;
}

int cmd_quantize(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *scheme_name = NULL;
    int group = 0, kv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--scheme") && i + 1 < argc) scheme_name = argv[++i];
        else if (!strcmp(argv[i], "--kv-cache")) kv = 1;
        else if (!strcmp(argv[i], "--group-size") && i + 1 < argc) group = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !in) in = argv[i];
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else { in = NULL; break; }
    }
    const case_scheme *qs = scheme_name ? quant_scheme_find(scheme_name) : NULL;
    if (!in || !out || !qs) {
        tool_usage(stderr, "quantize");
        fprintf(stderr, "schemes: ");
        quant_scheme_list(stderr);
        return 2;
    }
    char *qcfg = strdup(qs->config);
    if (group && qcfg) {
        char to[48];
        snprintf(to, sizeof to, "\"group_size\":%d", group);
        char *r = strstr(qcfg, "\"group_size\":128") ? replace_once(qcfg, "\"group_size\":128", to) : NULL;
        if (!take_rewrite(&qcfg, r)) {
            fprintf(stderr, "qport quantize: scheme %s has no group size to set\n", qs->tool_name);
            return 2;
        }
    }
    if (kv && qcfg && !take_rewrite(&qcfg, with_kv_cache(qcfg))) {
        fprintf(stderr, "qport quantize: --kv-cache needs a Quark scheme (%s is not one)\n", qs->tool_name);
        return 2;
    }
    qp_context *ctx;
    if (!qcfg || qp_context_create(&ctx)) { free(qcfg); return 1; }
    tool_install_log(ctx);
    int rc = 1;
    qp_model *m = NULL;
    qp_config *cfg = NULL;
    char path[4096], *ctext = NULL;
    size_t clen = 0;
    out_list o = {0};
    tool_progress prog = {0};
    int t_st = -1, t_st2 = -1, t_cfg = -1, t_dir = -1; /* temporaries (tools/tmpfiles.c) */
    if (qp_model_open(ctx, in, &m)) { fprintf(stderr, "qport quantize: %s\n", qp_last_error(ctx)); goto done; }
    if (qp_model_config(m)) { fprintf(stderr, "qport quantize: %s is already quantized\n", in); goto done; }
    snprintf(path, sizeof path, "%s/config.json", in);
    ctext = read_text(path, &clen);
    if (!ctext || !strchr(ctext, '{')) { fprintf(stderr, "qport quantize: %s: cannot read a JSON object\n", path); goto done; }
    /* vLLM 0.34.0 builds Qwen3-MoE's router with the quant config: a
     * router kept in the model dtype must be excluded in the config, as
     * Quark's own qwen3_moe template does ("*.gate") */
    qp_arch_info arch = {.struct_size = sizeof arch};
    qp_model_arch(m, &arch);
    if (arch.router_quantized && !strstr(qcfg, "\"quant_method\":\"qqq\"")) {
        /* exact names: HF fp8's ignored_layers matches exactly (Quark's
         * exclude would take a "re:" pattern too) */
        const char *key = strstr(qcfg, "\"exclude\":[\"lm_head\"") ? "\"exclude\":[\"lm_head\"" : "\"ignored_layers\":[\"lm_head\"";
        size_t nb = qp_model_moe_count(m), cap = strlen(key) + 1;
        for (size_t i = 0; i < nb; i++) cap += strlen(qp_model_moe_name(m, i)) + 16;
        char *with = malloc(cap), *r = NULL;
        if (with) {
            size_t len = (size_t)snprintf(with, cap, "%s", key);
            for (size_t i = 0; i < nb; i++) {
                const char *bn = qp_model_moe_name(m, i), *dot = strrchr(bn, '.');
                len += (size_t)snprintf(with + len, cap - len, ",\"%.*s.%s\"", dot ? (int)(dot - bn) : 0, bn, arch.router);
            }
            r = replace_once(qcfg, key, with);
            free(with);
        }
        if (r) { free(qcfg); qcfg = r; }
    }
    if (qp_config_load_buffer(ctx, qs->tool_name, qcfg, strlen(qcfg), &cfg)) { fprintf(stderr, "qport quantize: %s\n", qp_last_error(ctx)); goto done; }
    qp_quantize_options qo;
    qp_quantize_options_init(&qo);
    /* the model dtype, and Quark's checkpoint layout (scales in the model
     * dtype, zero points of symmetric int4) for Quark configs */
    qp_dtype mdt = qp_model_dtype(m);
    qo.params_dtype = mdt == QP_DTYPE_BF16 ? QP_DTYPE_BF16 : QP_DTYPE_F16;
    if (qp_config_method(cfg) == QP_METHOD_QUARK) {
        qo.scale_dtype = qo.params_dtype;
        qo.sym_zero_points = 1;
    }
    size_t n = qp_model_tensor_count(m), nq_layers = 0;
    progress_start(&prog, "quantize: tensors", (long)n);
    for (size_t i = 0; i < n; i++) {
        qp_tensor t;
        if (i) progress_step(&prog, 1);
        if (qp_model_tensor_get(m, i, &t)) continue;
        size_t l = strlen(t.name);
        int is_w = l > 7 && !strcmp(t.name + l - 7, ".weight") && t.ndim == 2 && !strstr(t.name, "embed");
        char layer[1024];
        snprintf(layer, sizeof layer, "%.*s", (int)(l > 7 ? l - 7 : 0), t.name);
        /* a module the model class builds with quant_config=None (an MoE
         * router): vLLM never quantizes it (api/arch.c) */
        if (is_w && (arch.known ? qp_arch_module_class_vllm(&arch, qp_config_method(cfg), layer) == QP_MODULE_LINEAR_UNQUANTIZED
                                : qp_model_layer_unquantized(m, layer)))
            is_w = 0;
        if (is_w && experts_unquantized(cfg, layer)) is_w = 0;
        qp_scheme s;
        if (is_w && qp_config_resolve(cfg, layer, QP_LAYER_LINEAR, NULL, &s)) {
            progress_clear(&prog);
            fprintf(stderr, "qport quantize: %s: %s\n", layer, qp_last_error(ctx));
            goto done;
        }
        if (!is_w || s.kind == QP_SCHEME_UNQUANTIZED || s.kind == QP_SCHEME_NONE) { /* copied unchanged */
            size_t bytes = qp_tensor_bytes(&t);
            void *c = malloc(bytes + 1);
            if (!c) goto oom;
            memcpy(c, t.data, bytes);
            qp_tensor tc = t;
            tc.data = c;
            if (push(&o, t.name, &tc, c)) { free(c); goto oom; }
            continue;
        }
        int N = (int)t.shape[0], K = (int)t.shape[1];
        float *w = malloc(sizeof(float) * (size_t)N * K);
        if (!w) goto oom;
        if (qp_format_decode_array(t.dtype, t.data, (size_t)N * K, w)) {
            progress_clear(&prog);
            fprintf(stderr, "qport quantize: %s: dtype %s is not fp16/bf16/fp32\n", t.name, qp_dtype_name(t.dtype));
            free(w);
            goto done;
        }
        qp_qweights *q = NULL;
        qp_status st = qp_quantize_weights(ctx, &s, w, N, K, &qo, &q);
        float oscale = kv && is_kv_proj(layer) ? output_scale(w, N, K) : 0.0f;
        free(w);
        if (st) { progress_clear(&prog); fprintf(stderr, "qport quantize: %s: %s\n", layer, qp_last_error(ctx)); goto done; }
        if (keep_q(&o, q)) { qp_qweights_destroy(q); goto oom; }
        nq_layers++;
        for (size_t j = 0; j < qp_qweights_count(q); j++) {
            qp_tensor qt;
            qp_qweights_get(q, j, &qt);
            char nm[1100];
            snprintf(nm, sizeof nm, "%s.%s", layer, qt.name);
            if (push(&o, nm, &qt, NULL)) goto oom;
        }
        if (oscale > 0.0f) { /* a 0-d tensor in the model dtype, as Quark writes output_scale */
            uint16_t *v = malloc(sizeof(uint16_t));
            if (!v) goto oom;
            *v = (uint16_t)qp_format_encode(qo.params_dtype, oscale);
            qp_tensor st0 = {NULL, qo.params_dtype, 0, {0, 0, 0, 0}, v};
            char nm[1100];
            snprintf(nm, sizeof nm, "%s.output_scale", layer);
            if (push(&o, nm, &st0, v)) { free(v); goto oom; }
        }
    }
    progress_end(&prog);
    /* written whole or not at all: both files to temporaries (removed on
     * SIGINT/SIGTERM, tools/tmpfiles.c), renamed last, config.json last of all */
    if (!mkdir(out, 0755)) t_dir = tool_tmp_add_dir(out);
    else if (errno != EEXIST) { perror(out); goto done; }
    char st_tmp[4200], st_tmp2[4300], cfg_tmp[4200];
    snprintf(st_tmp, sizeof st_tmp, "%s/model.safetensors.partial%ld", out, (long)getpid());
    snprintf(st_tmp2, sizeof st_tmp2, "%s.tmp%ld", st_tmp, (long)getpid()); /* qp_safetensors_write's own */
    snprintf(cfg_tmp, sizeof cfg_tmp, "%s/config.json.partial%ld", out, (long)getpid());
    t_st = tool_tmp_add(st_tmp);
    t_st2 = tool_tmp_add(st_tmp2);
    t_cfg = tool_tmp_add(cfg_tmp);
    const char *meta[] = {"format", "pt", "quantized_by", "qport"};
    if (qp_safetensors_write(ctx, st_tmp, o.t, o.n, meta, 2)) { fprintf(stderr, "qport quantize: %s\n", qp_last_error(ctx)); goto done; }
    tool_tmp_drop(t_st2, 0);
    t_st2 = -1;
    /* config.json: the input's, with the quantization_config added */
    char *brace = strchr(ctext, '{');
    FILE *f = fopen(cfg_tmp, "w");
    if (!f) { perror(cfg_tmp); goto done; }
    fprintf(f, "%.*s{\n  \"quantization_config\": %s,%s", (int)(brace - ctext), ctext, qcfg, brace + 1);
    if (fclose(f)) { perror(cfg_tmp); goto done; }
    tool_tmp_test_stop();
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    if (tool_tmp_commit(t_st, path)) { t_st = -1; perror(path); goto done; }
    t_st = -1;
    snprintf(path, sizeof path, "%s/config.json", out);
    if (tool_tmp_commit(t_cfg, path)) { t_cfg = -1; perror(path); goto done; }
    t_cfg = -1;
    tool_tmp_drop(t_dir, 0);
    t_dir = -1;
    printf("wrote %s: scheme %s, %zu layers quantized, %zu tensors\n", out, qs->tool_name, nq_layers, o.n);
    rc = 0;
    goto done;
oom:
    progress_clear(&prog);
    fprintf(stderr, "qport quantize: out of memory\n");
done:
    progress_end(&prog);
    tool_tmp_drop(t_st, 1);
    tool_tmp_drop(t_st2, 1);
    tool_tmp_drop(t_cfg, 1);
    tool_tmp_drop(t_dir, 1);
    out_free(&o);
    free(ctext);
    free(qcfg);
    qp_config_destroy(cfg);
    qp_model_close(m);
    qp_context_destroy(ctx);
    return rc;
}
