/* The architecture table (api/arch.c) as vLLM 0.34.0's model classes
 * build the models: packed modules per config (DeepSeek's
 * fused_qkv_a_proj only with a q_lora_rank, qkv_proj only without MLA;
 * Qwen2-MoE's gate_up_proj only with a shared expert), module classes
 * (routers, shared_expert_gate, lm_head, experts) and what each method
 * quantizes, resolution and binding through them (an excluded
 * fused_qkv_a_proj, the DeepSeek router with its bf16
 * e_score_correction_bias widened exactly to fp32, QQQ's lm_head), the
 * unknown-architecture fallback, and QQQ's wrap-around warning naming
 * the layer and the count of groups. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/cases.h"
#include "testutil.h"

static qp_context *ctx;
static char dir[64];

#define QUARK_FP8(EXCL)                                                                                             \
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"                 \
    "\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,"  \
    "\"is_dynamic\":false},\"input_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true," \
    "\"is_dynamic\":false},\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},"                      \
    "\"layer_type_quant_config\":{},\"exclude\":" EXCL "}"
#define QQQ_G128 "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":128}"

static qp_config *whole(const char *model_keys, const char *qc) {
    char buf[4096];
    snprintf(buf, sizeof buf, "{%s,\"quantization_config\":%s}", model_keys, qc);
    qp_config *c = tu_load(ctx, buf);
    CHECK(c, "load: %s", qp_last_error(ctx));
    return c;
}

static const char *packed_str(const qp_config *c, char *out, size_t cap) {
    const qp_packed_module *pm;
    size_t n, len = 0;
    out[0] = 0;
    if (qp_config_packed_modules(c, NULL, &pm, &n)) return "error";
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(out + len, cap - len, "%s%s=", i ? " " : "", pm[i].fused);
        for (size_t j = 0; j < pm[i].n_shards; j++) len += (size_t)snprintf(out + len, cap - len, "%s%s", j ? "," : "", pm[i].shards[j]);
    }
    return out;
}

#define DSV3 "\"architectures\":[\"DeepseekV3ForCausalLM\"],\"model_type\":\"deepseek_v3\",\"n_routed_experts\":8,"     \
             "\"moe_intermediate_size\":32,\"first_k_dense_replace\":1,\"moe_layer_freq\":1,\"topk_method\":\"noaux_tc\"," \
             "\"qk_nope_head_dim\":16,\"qk_rope_head_dim\":8,\"n_shared_experts\":1"

static void packed_per_config(void) {
    char s[512];
    qp_config *c = whole(DSV3 ",\"q_lora_rank\":32", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "gate_up_proj=gate_proj,up_proj fused_qkv_a_proj=q_a_proj,kv_a_proj_with_mqa"), "dsv3: %s", s);
    qp_config_destroy(c);
    /* DeepSeek-V2-Lite: q_lora_rank null, no fused_qkv_a_proj */
    c = whole(DSV3 ",\"q_lora_rank\":null", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "gate_up_proj=gate_proj,up_proj"), "no q_lora: %s", s);
    qp_config_destroy(c);
    /* DeepSeek v1 (model_type "deepseek", MHA): qkv_proj */
    c = whole("\"architectures\":[\"DeepseekV2ForCausalLM\"],\"model_type\":\"deepseek\"", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "qkv_proj=q_proj,k_proj,v_proj gate_up_proj=gate_proj,up_proj"), "mha: %s", s);
    qp_config_destroy(c);
    /* Qwen2-MoE: gate_up_proj only with a shared expert */
    c = whole("\"architectures\":[\"Qwen2MoeForCausalLM\"],\"shared_expert_intermediate_size\":0", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "qkv_proj=q_proj,k_proj,v_proj"), "qwen2moe no shared: %s", s);
    qp_config_destroy(c);
    c = whole("\"architectures\":[\"Qwen2MoeForCausalLM\"],\"shared_expert_intermediate_size\":128", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "qkv_proj=q_proj,k_proj,v_proj gate_up_proj=gate_proj,up_proj"), "qwen2moe: %s", s);
    qp_config_destroy(c);
    c = whole("\"architectures\":[\"MixtralForCausalLM\"]", QUARK_FP8("[]"));
    CHECK(!strcmp(packed_str(c, s, sizeof s), "qkv_proj=q_proj,k_proj,v_proj"), "mixtral: %s", s);
    qp_config_destroy(c);
    /* by model_type alone, and a multimodal wrapper's text_config */
    c = whole("\"model_type\":\"kimi_k2\",\"q_lora_rank\":1536,\"qk_nope_head_dim\":128", QUARK_FP8("[]"));
    qp_arch_info a = {.struct_size = sizeof a};
    CHECK(!qp_config_arch(c, &a) && a.known && !strcmp(a.name, "DeepseekV3ForCausalLM"), "kimi_k2 on DeepSeek-V3");
    qp_config_destroy(c);
    /* unknown: the Llama rules, with a note */
    c = whole("\"architectures\":[\"FooForCausalLM\"]", QUARK_FP8("[]"));
    CHECK(!qp_config_arch(c, &a) && !a.known && a.note && strstr(a.note, "Llama rules") && !strcmp(a.name, "FooForCausalLM"),
          "unknown arch");
    CHECK(!strcmp(packed_str(c, s, sizeof s), "qkv_proj=q_proj,k_proj,v_proj gate_up_proj=gate_proj,up_proj"), "fallback: %s", s);
    qp_config_destroy(c);
    /* a bare quantization_config: no architecture */
    c = tu_load(ctx, QUARK_FP8("[]"));
    CHECK(!qp_config_arch(c, &a) && !a.known && !a.name && !a.moe_block, "bare config");
    qp_config_destroy(c);
    a.struct_size = 8;
    CHECK(qp_arch_lookup("LlamaForCausalLM", NULL, &a) == QP_ERR_INVALID_ARGUMENT, "struct_size checked");
    a.struct_size = sizeof a;
    CHECK(qp_arch_lookup(NULL, "nope", &a) == QP_ERR_NOT_FOUND && !a.known, "lookup unknown");
    CHECK(qp_arch_count() >= 10, "rows");
    for (size_t i = 0; i < qp_arch_count(); i++)
        CHECK(!qp_arch_lookup(qp_arch_name(i), NULL, &a) && a.known && !strcmp(a.name, qp_arch_name(i)), "row %zu", i);
}

static void module_classes(void) {
    qp_arch_info a = {.struct_size = sizeof a};
    qp_config *c = whole(DSV3 ",\"q_lora_rank\":32", QUARK_FP8("[]"));
    qp_config_arch(c, &a);
    CHECK(a.grouped_topk && a.correction_bias && a.first_k_dense_replace == 1 && a.num_experts == 8 &&
              a.moe_intermediate_size == 32 && !strcmp(a.shared_experts, "shared_experts") && !a.router_quantized,
          "dsv3 facts");
    CHECK(!qp_arch_layer_is_moe(&a, 0) && qp_arch_layer_is_moe(&a, 1) && qp_arch_layer_is_moe(&a, 2), "first_k_dense_replace");
    CHECK(qp_arch_module_class(&a, "model.layers.1.mlp.gate") == QP_MODULE_LINEAR_UNQUANTIZED, "router");
    CHECK(qp_arch_module_class(&a, "model.layers.0.mlp.gate_proj") == QP_MODULE_LINEAR, "dense layer 0 mlp");
    CHECK(qp_arch_module_class(&a, "model.layers.1.mlp.experts") == QP_MODULE_ROUTED_EXPERTS, "experts");
    CHECK(qp_arch_module_class(&a, "model.layers.1.mlp.shared_experts.gate_up_proj") == QP_MODULE_LINEAR, "shared experts");
    CHECK(qp_arch_module_class(&a, "lm_head") == QP_MODULE_LM_HEAD, "lm_head");
    CHECK(qp_arch_module_class(&a, "model.embed_tokens") == QP_MODULE_EMBEDDING, "embed");
    qp_config_destroy(c);
    c = whole("\"architectures\":[\"Qwen2MoeForCausalLM\"],\"shared_expert_intermediate_size\":128", QUARK_FP8("[]"));
    qp_config_arch(c, &a);
    CHECK(qp_arch_module_class(&a, "model.layers.0.mlp.shared_expert_gate") == QP_MODULE_LINEAR_UNQUANTIZED, "shared gate");
    CHECK(qp_arch_module_class(&a, "model.layers.0.mlp.gate") == QP_MODULE_LINEAR_UNQUANTIZED, "qwen2 router");
    qp_config_destroy(c);
    /* Qwen3-MoE: GateLinear(quant_config=quant_config) in 0.34.0, quant_config=None in 0.8.5 (QQQ) */
    c = whole("\"architectures\":[\"Qwen3MoeForCausalLM\"]", QUARK_FP8("[]"));
    qp_config_arch(c, &a);
    CHECK(a.router_quantized && qp_arch_module_class(&a, "model.layers.0.mlp.gate") == QP_MODULE_LINEAR, "qwen3 router");
    CHECK(qp_arch_module_class_vllm(&a, QP_METHOD_QQQ, "model.layers.0.mlp.gate") == QP_MODULE_LINEAR_UNQUANTIZED, "qqq 0.8.5");
    EXPECT(c, ctx, "model.layers.0.mlp.gate", QP_LAYER_LINEAR, NULL, QP_OK, "QuarkLinearMethod", "QuarkW8A8Fp8",
           "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    qp_config_destroy(c);
    c = whole("\"architectures\":[\"Qwen3MoeForCausalLM\"]", QQQ_G128);
    EXPECT(c, ctx, "model.layers.0.mlp.gate", QP_LAYER_LINEAR, NULL, QP_OK, "UnquantizedLinearMethod", "", "", "");
    qp_config_destroy(c);
    /* Mixtral: block_sparse_moe, and mlp as transformers 5 exports it */
    c = whole("\"architectures\":[\"MixtralForCausalLM\"]", QUARK_FP8("[]"));
    qp_config_arch(c, &a);
    CHECK(qp_arch_module_class(&a, "model.layers.0.block_sparse_moe.gate") == QP_MODULE_LINEAR_UNQUANTIZED &&
              qp_arch_module_class(&a, "model.layers.0.mlp.gate") == QP_MODULE_LINEAR_UNQUANTIZED && a.renormalize == 1,
          "mixtral");
    qp_config_destroy(c);
    /* what each method quantizes at all */
    CHECK(qp_method_quantizes(QP_METHOD_QQQ, QP_MODULE_LINEAR) && !qp_method_quantizes(QP_METHOD_QQQ, QP_MODULE_LM_HEAD) &&
              !qp_method_quantizes(QP_METHOD_QQQ, QP_MODULE_ROUTED_EXPERTS) &&
              qp_method_quantizes(QP_METHOD_QUARK, QP_MODULE_ROUTED_EXPERTS) &&
              !qp_method_quantizes(QP_METHOD_QUARK, QP_MODULE_LM_HEAD) && !qp_method_quantizes(QP_METHOD_FP8, QP_MODULE_EMBEDDING) &&
              !qp_method_quantizes(QP_METHOD_QUARK, QP_MODULE_LINEAR_UNQUANTIZED) &&
              qp_method_quantizes(QP_METHOD_FP8, QP_MODULE_ATTENTION),
          "qp_method_quantizes");
}

static void resolution(void) {
    /* both parts excluded: vLLM's packed fused_qkv_a_proj is unquantized */
    qp_config *c = whole(DSV3 ",\"q_lora_rank\":32",
                         QUARK_FP8("[\"lm_head\",\"model.layers.0.self_attn.q_a_proj\",\"model.layers.0.self_attn.kv_a_proj_with_mqa\"]"));
    EXPECT(c, ctx, "model.layers.0.self_attn.fused_qkv_a_proj", QP_LAYER_LINEAR, NULL, QP_OK, "UnquantizedLinearMethod", "", "", "");
    EXPECT(c, ctx, "model.layers.1.self_attn.fused_qkv_a_proj", QP_LAYER_LINEAR, NULL, QP_OK, "QuarkLinearMethod",
           "QuarkW8A8Fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    EXPECT(c, ctx, "model.layers.1.mlp.gate", QP_LAYER_LINEAR, NULL, QP_OK, "UnquantizedLinearMethod", "", "", "");
    const char *const *sh;
    size_t ns;
    CHECK(!qp_config_layer_shards(c, "model.layers.0.self_attn.fused_qkv_a_proj", NULL, &sh, &ns, NULL) && ns == 2 &&
              !strcmp(sh[1], "kv_a_proj_with_mqa"),
          "shards");
    qp_config_destroy(c);
    /* one part excluded: vLLM's fused-layer error */
    c = whole(DSV3 ",\"q_lora_rank\":32", QUARK_FP8("[\"model.layers.0.self_attn.q_a_proj\"]"));
    qp_scheme s;
    CHECK(qp_config_resolve(c, "model.layers.0.self_attn.fused_qkv_a_proj", QP_LAYER_LINEAR, NULL, &s) == QP_ERR_VALUE,
          "half excluded: %s", qp_last_error(ctx));
    qp_config_destroy(c);
    /* the same config without an architecture: the Llama mapping, no fused_qkv_a_proj */
    c = tu_load(ctx, QUARK_FP8("[\"model.layers.0.self_attn.q_a_proj\",\"model.layers.0.self_attn.kv_a_proj_with_mqa\"]"));
    EXPECT(c, ctx, "model.layers.0.self_attn.fused_qkv_a_proj", QP_LAYER_LINEAR, NULL, QP_OK, "QuarkLinearMethod",
           "QuarkW8A8Fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    qp_config_destroy(c);
    /* QQQ: lm_head is a ParallelLMHead, which QQQConfig never quantizes */
    c = whole("\"architectures\":[\"LlamaForCausalLM\"]", QQQ_G128);
    EXPECT(c, ctx, "lm_head", QP_LAYER_LINEAR, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    CHECK(!qp_config_resolve(c, "lm_head", QP_LAYER_LINEAR, NULL, &s) && s.kind == QP_SCHEME_UNQUANTIZED, "unquantized kind");
    qp_config_destroy(c);
    c = tu_load(ctx, QQQ_G128); /* bare: lm_head is still vLLM's ParallelLMHead */
    EXPECT(c, ctx, "lm_head", QP_LAYER_LINEAR, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    qp_config_destroy(c);
    /* layer_type_quant_config keys are reported */
    c = tu_load(ctx, "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
                     "\"global_quant_config\":{\"weight\":null,\"input_tensors\":null,\"output_tensors\":null,\"bias\":null},"
                     "\"layer_quant_config\":{},\"layer_type_quant_config\":{\"Linear\":{}},\"exclude\":[]}");
    CHECK(qp_config_layer_type_count(c) == 1 && !strcmp(qp_config_layer_type_key(c, 0), "Linear") &&
              !qp_config_layer_type_key(c, 1),
          "layer types");
    qp_config_destroy(c);
}

static void write_file(const char *name, const char *text) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

/* The DeepSeek router: bf16 weight and e_score_correction_bias; bound as an
 * unquantized layer without the bias, and the bias widened exactly. */
static void router_state(void) {
    write_file("config.json", "{" DSV3 ",\"q_lora_rank\":32,\"n_group\":2,\"topk_group\":1,\"num_experts_per_tok\":2,"
                              "\"scoring_func\":\"sigmoid\",\"routed_scaling_factor\":2.5,\"norm_topk_prob\":true,"
                              "\"dtype\":\"bfloat16\",\"quantization_config\":" QUARK_FP8("[\"lm_head\"]") "}");
    enum { E = 8, H = 64 };
    uint16_t w[E * H], bias[E];
    uint64_t r = 5;
    for (int i = 0; i < E * H; i++) w[i] = (uint16_t)qp_format_encode(QP_DTYPE_BF16, (float)((double)(case_rng(&r) >> 11) * 0x1p-53 - 0.5));
    for (int i = 0; i < E; i++) bias[i] = (uint16_t)qp_format_encode(QP_DTYPE_BF16, (float)(0.01 * (i - 3) + 1.0 / 3.0));
    qp_tensor t[2] = {{"model.layers.1.mlp.gate.weight", QP_DTYPE_BF16, 2, {E, H}, w},
                      {"model.layers.1.mlp.gate.e_score_correction_bias", QP_DTYPE_BF16, 1, {E}, bias}};
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, p, t, 2, NULL, 0), "%s", qp_last_error(ctx));
    qp_model *m;
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    qp_arch_info a = {.struct_size = sizeof a};
    CHECK(!qp_model_arch(m, &a) && a.known && !strcmp(a.name, "DeepseekV3ForCausalLM"), "model arch");
    CHECK(qp_model_layer_unquantized(m, "model.layers.1.mlp.gate"), "router unquantized");
    qp_layer_binding b;
    CHECK(!qp_model_bind_layer(m, "model.layers.1.mlp.gate", NULL, &b), "bind router: %s", qp_last_error(ctx));
    CHECK(b.scheme.kind == QP_SCHEME_UNQUANTIZED && b.n_tensors == 1 && !strcmp(b.tensors[0].name, "weight") && b.N == E && b.K == H,
          "router binding: kind %d, %zu tensors", b.scheme.kind, b.n_tensors);
    qp_layer_binding_free(&b);
    qp_moe_options o;
    CHECK(!qp_model_moe_options(m, "model.layers.1.mlp.experts", &o), "%s", qp_last_error(ctx));
    CHECK(o.num_expert_group == 2 && o.topk_group == 1 && o.scoring == QP_MOE_SIGMOID && o.routed_scaling_factor == 2.5f &&
              o.e_score_correction_bias,
          "routing");
    for (int i = 0; o.e_score_correction_bias && i < E; i++)
        CHECK(o.e_score_correction_bias[i] == qp_format_decode(QP_DTYPE_BF16, bias[i]), "bias %d widened exactly", i);
    qp_model_close(m);
    unlink(p);
}

static int n_warn;
static char warn[1024];
static void on_log(void *u, qp_log_level l, const char *msg) {
    (void)u;
    if (l == QP_LOG_WARN && strstr(msg, "QQQ")) { n_warn++; snprintf(warn, sizeof warn, "%s", msg); }
}

/* A QQQ g128 layer whose s_group is 17 everywhere: code 0 (t = -8) gives
 * -136, which vLLM's kernel turns into 112 (fp16 1152 - 136 = 1016 =
 * 0x63F0, low byte 0xF0 ^ 0x80) where a saturating rebuild gives -128. */
static void qqq_wrap(void) {
    CHECK(qp_ref_qqq_group_weight(-8, (uint16_t)qp_format_encode(QP_DTYPE_F16, 17.0f)) == 112, "-136 -> 112");
    CHECK(qp_ref_qqq_group_weight(-8, (uint16_t)qp_format_encode(QP_DTYPE_F16, 18.0f)) == 96, "-144 -> 96 (0x63E0)");
    CHECK(qp_ref_qqq_group_weight(7, (uint16_t)qp_format_encode(QP_DTYPE_F16, 18.0f)) == 126, "126 fits");
    enum { K = 256, N = 128 };
    write_file("config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"dtype\":\"float16\",\"quantization_config\":" QQQ_G128 "}");
    qp_config *c = tu_load(ctx, QQQ_G128);
    qp_scheme s;
    CHECK(!qp_config_resolve(c, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &s), "%s", qp_last_error(ctx));
    float *w = malloc(sizeof(float) * N * K);
    uint64_t r = 9;
    for (int i = 0; i < N * K; i++) w[i] = (float)((double)(case_rng(&r) >> 11) * 0x1p-53 - 0.5);
    qp_qweights *q;
    CHECK(!qp_quantize_weights(ctx, &s, w, N, K, NULL, &q), "%s", qp_last_error(ctx));
    free(w);
    qp_tensor t[4], tt[4];
    char names[4][96];
    size_t nt = qp_qweights_count(q);
    int8_t *codes = malloc((size_t)K * N);
    size_t want = 0;
    for (size_t j = 0; j < nt; j++) {
        qp_qweights_get(q, j, &t[j]);
        tt[j] = t[j];
        snprintf(names[j], sizeof names[j], "model.layers.0.mlp.down_proj.%s", t[j].name);
        tt[j].name = names[j];
        if (!strcmp(t[j].name, "s_group")) { /* every group scale 17: permutation-proof */
            uint16_t *sg = malloc(qp_tensor_bytes(&t[j]));
            for (size_t i = 0; i < qp_tensor_bytes(&t[j]) / 2; i++) sg[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, 17.0f);
            tt[j].data = sg;
        }
        if (!strcmp(t[j].name, "B")) {
            CHECK(!qp_qqq_unpack_weight(ctx, t[j].data, K, N, 128, codes), "unpack");
            for (int g = 0; g < K / 128; g++)
                for (int n = 0; n < N; n++) {
                    int has0 = 0;
                    for (int k = g * 128; k < g * 128 + 128; k++) has0 |= codes[(size_t)k * N + n] == 0;
                    want += (size_t)has0;
                }
        }
    }
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, p, tt, nt, NULL, 0), "%s", qp_last_error(ctx));
    for (size_t j = 0; j < nt; j++)
        if (tt[j].data != t[j].data) free((void *)tt[j].data);
    qp_qweights_destroy(q);
    qp_config_destroy(c);
    CHECK(want > 0, "the seeded weights have code 0 somewhere");
    qp_set_log(ctx, on_log, NULL, QP_LOG_WARN);
    qp_model *m;
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    qp_layer_binding b;
    n_warn = 0;
    CHECK(!qp_model_bind_layer(m, "model.layers.0.mlp.down_proj", NULL, &b), "%s", qp_last_error(ctx));
    char expect[160];
    snprintf(expect, sizeof expect, "model.layers.0.mlp.down_proj: %zu of %d QQQ weight groups", want, K / 128 * N);
    CHECK(n_warn == 1 && strstr(warn, expect) && strstr(warn, "s_group up to 17"), "warning: %d '%s' (want '%s')", n_warn, warn, expect);
    /* qport's forward is vLLM's: the weight rebuilt with the wrap */
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear *l;
    uint16_t x[K], y[N];
    int k0 = -1, n0 = -1; /* a weight of code 0 (t = -8) */
    for (int i = 0; i < K * N && k0 < 0; i++)
        if (codes[i] == 0) k0 = i / N, n0 = i % N;
    for (int k = 0; k < K; k++) x[k] = (uint16_t)qp_format_encode(QP_DTYPE_F16, k == k0 ? 1.0f : 0.0f);
    CHECK(!qp_linear_create(cpu, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, NULL, &l), "%s", qp_last_error(ctx));
    CHECK(!qp_linear_forward(l, x, 1, y), "%s", qp_last_error(ctx));
    /* x = e_k0: y[n0] = w8[k0][n0] * s_channel[n0] (s_tok 1/127 times 127):
     * positive with vLLM's wrap (112), negative were it saturated (-128) */
    CHECK(n0 >= 0 && qp_format_decode(QP_DTYPE_F16, y[n0]) > 0, "column %d: the wrapped weight (112) is positive: %g", n0,
          n0 >= 0 ? qp_format_decode(QP_DTYPE_F16, y[n0]) : 0.0);
    qp_linear_destroy(l);
    qp_layer_binding_free(&b);
    qp_model_close(m);
    qp_set_log(ctx, NULL, NULL, QP_LOG_WARN);
    free(codes);
    unlink(p);
}

int main(void) {
    qp_context_create(&ctx);
    snprintf(dir, sizeof dir, "/tmp/qport-arch-%d", (int)getpid());
    mkdir(dir, 0755);
    packed_per_config();
    module_classes();
    resolution();
    router_state();
    qqq_wrap();
    char p[256];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
    qp_context_destroy(ctx);
    return tu_finish("arch");
}
