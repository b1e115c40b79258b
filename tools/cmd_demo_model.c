/* qport demo-model OUT_DIR: a small Llama-style fp16 model with
 * deterministic random weights (a few layers of q/k/v/o and gate/up/down),
 * generated rather than committed. Weights are N(0, 1/sqrt(K)) with a few
 * outlier input channels, like real checkpoints, so the quantizers meet
 * realistic ranges. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cases.h"
#include "tool.h"

typedef struct demo_cfg { int hidden, inter, layers, heads, kv_heads, vocab; uint64_t seed; int experts, topk; } demo_cfg;

static uint16_t *matrix(int n, int k, uint64_t seed) {
    uint16_t *m = malloc(sizeof(uint16_t) * (size_t)n * k);
    if (!m) return NULL;
    uint64_t s = seed;
    double sd = 1.0 / sqrt((double)k);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < k; c++) {
            double u1 = ((double)(case_rng(&s) >> 11) + 0.5) * 0x1p-53, u2 = (double)(case_rng(&s) >> 11) * 0x1p-53;
            double g = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) * sd;
            if (c % 97 == 13) g *= 8.0; /* outlier input channels */
            m[(size_t)r * k + c] = (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)g);
        }
    return m;
}

int cmd_demo_model(int argc, char **argv) {
    demo_cfg c = {512, 0, 2, 8, 4, 256, 20261202, 0, 2};
    const char *out = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force")) force = 1;
        else if (!strcmp(argv[i], "--hidden") && i + 1 < argc) c.hidden = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--intermediate") && i + 1 < argc) c.inter = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) c.layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) c.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--experts") && i + 1 < argc) c.experts = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--topk") && i + 1 < argc) c.topk = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else { tool_usage(stderr, "demo-model"); return 2; }
    }
    if (!c.inter) c.inter = c.experts ? 256 : 1408; /* an expert's MLP is narrower */
    if (!out || c.hidden <= 0 || c.hidden % (c.heads * 8) || c.inter <= 0 || c.layers <= 0 || c.layers > 64 ||
        c.experts < 0 || c.experts > 256 || (c.experts && (c.topk <= 0 || c.topk > c.experts))) {
        fprintf(stderr, "qport demo-model: need OUT_DIR, hidden a multiple of %d, positive sizes, 0..256 experts and "
                        "1 <= topk <= experts\n", c.heads * 8);
        return 2;
    }
    char dirbuf[4096];
    static const char *const written[] = {"config.json", "model.safetensors"};
    for (size_t i = 0; i < 2 && !force; i++) { /* never overwrite a model silently */
        struct stat sb;
        snprintf(dirbuf, sizeof dirbuf, "%s/%s", out, written[i]);
        if (!stat(dirbuf, &sb)) {
            fprintf(stderr, "qport demo-model: %s already exists; pass --force to overwrite the model in %s\n", dirbuf, out);
            return 1;
        }
    }
    snprintf(dirbuf, sizeof dirbuf, "%s", out);
    for (char *p = dirbuf + 1; *p; p++) /* mkdir -p */
        if (*p == '/') { *p = 0; if (mkdir(dirbuf, 0755) && errno != EEXIST) { perror(dirbuf); return 1; } *p = '/'; }
    if (mkdir(out, 0755) && errno != EEXIST) { perror(out); return 1; }
    int hd = c.hidden / c.heads, kv = c.kv_heads * hd;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return 1; }
    if (c.experts) /* Qwen3-MoE's layout: mlp.gate routes to mlp.experts.E */
        fprintf(f, "{\n  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n  \"model_type\": \"qwen3_moe\",\n"
                   "  \"hidden_size\": %d,\n  \"moe_intermediate_size\": %d,\n  \"num_experts\": %d,\n"
                   "  \"num_experts_per_tok\": %d,\n  \"norm_topk_prob\": true,\n  \"num_hidden_layers\": %d,\n"
                   "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"vocab_size\": %d,\n"
                   "  \"torch_dtype\": \"float16\",\n  \"rms_norm_eps\": 1e-06\n}\n",
                c.hidden, c.inter, c.experts, c.topk, c.layers, c.heads, c.kv_heads, c.vocab);
    else
        fprintf(f, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n  \"hidden_size\": %d,\n"
                   "  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
                   "  \"num_key_value_heads\": %d,\n  \"vocab_size\": %d,\n  \"torch_dtype\": \"float16\",\n"
                   "  \"rms_norm_eps\": 1e-05\n}\n", c.hidden, c.inter, c.layers, c.heads, c.kv_heads, c.vocab);
    if (fclose(f)) { perror(path); return 1; }
    static const struct { const char *name; int out_rows, in_cols; } shapes[] = {
        {"self_attn.q_proj", 0, 0}, {"self_attn.k_proj", 1, 0}, {"self_attn.v_proj", 1, 0}, {"self_attn.o_proj", 0, 0},
        {"mlp.gate_proj", 2, 0}, {"mlp.up_proj", 2, 0}, {"mlp.down_proj", 0, 2}};
    size_t nt = 2 + (size_t)c.layers * (9 + 1 + 3 * (size_t)c.experts), k = 0;
    qp_tensor *t = calloc(nt, sizeof *t);
    char (*names)[128] = calloc(nt, 128);
    int dims[3] = {c.hidden, kv, c.inter};
    int rc = 0;
    if (!t || !names) { fprintf(stderr, "out of memory\n"); free(t); free(names); return 1; }
    uint16_t *ones = malloc(sizeof(uint16_t) * (size_t)c.hidden);
    for (int i = 0; ones && i < c.hidden; i++) ones[i] = 0x3C00;
    snprintf(names[k], 128, "model.embed_tokens.weight");
    t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 2, {c.vocab, c.hidden}, matrix(c.vocab, c.hidden, c.seed)};
    k++;
    for (int l = 0; l < c.layers; l++) {
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int n = dims[shapes[s].out_rows], kk = dims[shapes[s].in_cols];
            if (c.experts && s >= 4) { /* the MLP is routed experts */
                for (int e = 0; e < c.experts; e++) {
                    snprintf(names[k], 128, "model.layers.%d.mlp.experts.%d.%s.weight", l, e, shapes[s].name + 4);
                    t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 2, {n, kk},
                                       matrix(n, kk, c.seed + (uint64_t)l * 100 + s + 1 + (uint64_t)e * 7919)};
                    k++;
                }
                continue;
            }
            snprintf(names[k], 128, "model.layers.%d.%s.weight", l, shapes[s].name);
            t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 2, {n, kk}, matrix(n, kk, c.seed + (uint64_t)l * 100 + s + 1)};
            k++;
        }
        if (c.experts) { /* the router, left unquantized by every exporter */
            snprintf(names[k], 128, "model.layers.%d.mlp.gate.weight", l);
            t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 2, {c.experts, c.hidden}, matrix(c.experts, c.hidden, c.seed + (uint64_t)l * 100 + 99)};
            k++;
        }
        snprintf(names[k], 128, "model.layers.%d.input_layernorm.weight", l);
        t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 1, {c.hidden}, ones};
        k++;
        snprintf(names[k], 128, "model.layers.%d.post_attention_layernorm.weight", l);
        t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 1, {c.hidden}, ones};
        k++;
    }
    snprintf(names[k], 128, "model.norm.weight");
    t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 1, {c.hidden}, ones};
    k++;
    for (size_t i = 0; i < k; i++)
        if (!t[i].data) rc = 1;
    qp_context *ctx;
    qp_context_create(&ctx);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    const char *meta[] = {"format", "pt"};
    if (!rc && qp_safetensors_write(ctx, path, t, k, meta, 1)) { fprintf(stderr, "qport demo-model: %s\n", qp_last_error(ctx)); rc = 1; }
    if (!rc && c.experts)
        printf("wrote %s: %d layers, hidden %d, %d experts (top-%d) of intermediate %d, %zu tensors (fp16, seed %llu)\n",
               out, c.layers, c.hidden, c.experts, c.topk, c.inter, k, (unsigned long long)c.seed);
    else if (!rc)
        printf("wrote %s: %d layers, hidden %d, intermediate %d, %zu tensors (fp16, seed %llu)\n", out, c.layers,
               c.hidden, c.inter, k, (unsigned long long)c.seed);
    for (size_t i = 0; i < k; i++)
        if (t[i].data != ones) free((void *)t[i].data);
    free(ones); free(t); free(names);
    qp_context_destroy(ctx);
    return rc;
}
