/* qport bench-resolve: resolution rate over many layer names (the scale a
 * large MoE model asks for: 60 layers x 256 experts x 3 projections plus
 * attention, against thousands of exclude entries). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A config shaped like a large MoE export: 3,000 exact excludes, a few
 * regexes, 300 layer_quant_config patterns. */
static char *synthetic_config(void) {
    size_t cap = 1 << 20, len = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
#define P(...) do { int n_ = snprintf(b + len, cap - len, __VA_ARGS__); if (n_ < 0 || (size_t)n_ >= cap - len) { free(b); return NULL; } len += (size_t)n_; } while (0)
    P("{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},");
    P("\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"is_dynamic\":false},"
      "\"input_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"is_dynamic\":true}},");
    P("\"layer_quant_config\":{");
    for (int i = 0; i < 300; i++)
        P("%s\"*layers.%d.mlp.experts.*.down_proj\":{\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\","
          "\"symmetric\":true,\"is_dynamic\":false},\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\","
          "\"is_dynamic\":true,\"symmetric\":true}}", i ? "," : "", 1000 + i);
    P("},\"exclude\":[\"lm_head\",\"re:.*mlp.gate$\",\"re:model.layers.61.*\"");
    for (int i = 0; i < 3000; i++) P(",\"model.layers.%d.mlp.shared_experts.x%d\"", i % 60, i);
    P("]}");
#undef P
    return b;
}

int cmd_bench_resolve(int argc, char **argv) {
    const char *path = NULL;
    long n_layers = 60;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc) n_layers = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--synthetic")) path = NULL;
        else if (argv[i][0] != '-') path = argv[i];
        else { tool_usage(stderr, "bench-resolve"); return 2; }
    }
    if (n_layers <= 0 || n_layers > 100000) { fprintf(stderr, "qport bench-resolve: bad --layers\n"); return 2; }
    qp_context *ctx;
    if (qp_context_create(&ctx) != QP_OK) return 2;
    qp_config *cfg = NULL;
    double t0 = now();
    qp_status st;
    if (path) st = qp_config_load_file(ctx, path, &cfg);
    else {
        char *j = synthetic_config();
        st = j ? qp_config_load_buffer(ctx, "<synthetic>", j, strlen(j), &cfg) : QP_ERR_OUT_OF_MEMORY;
        free(j);
    }
    if (st != QP_OK) { fprintf(stderr, "qport bench-resolve: %s\n", qp_last_error(ctx)); qp_context_destroy(ctx); return 2; }
    double t_load = now() - t0;
    static const char *proj[] = {"gate_proj", "up_proj", "down_proj"};
    static const char *attn[] = {"q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj"};
    char name[256];
    long count = 0, errors = 0;
    t0 = now();
    for (long l = 0; l < n_layers; l++) {
        for (int e = 0; e < 256; e++)
            for (int p = 0; p < 3; p++) {
                snprintf(name, sizeof name, "model.layers.%ld.mlp.experts.%d.%s", l, e, proj[p]);
                qp_scheme s;
                errors += qp_config_resolve(cfg, name, QP_LAYER_LINEAR, NULL, &s) != QP_OK;
                count++;
            }
        for (int a = 0; a < 5; a++) {
            snprintf(name, sizeof name, "model.layers.%ld.self_attn.%s", l, attn[a]);
            qp_scheme s;
            errors += qp_config_resolve(cfg, name, QP_LAYER_LINEAR, NULL, &s) != QP_OK;
            count++;
        }
    }
    double t = now() - t0;
    printf("load: %.3f ms\nresolved %ld layer names in %.3f s: %.0f names/s (%ld errors)\n", t_load * 1e3, count, t,
           (double)count / t, errors);
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return 0;
}
