/* The model architectures qport knows, as vLLM 0.34.0's model classes
 * build them (vllm/model_executor/models/<file>.py): which modules are
 * packed (the class's packed_modules_mapping, with the entries its
 * __init__ adds from config.json), which modules are built with
 * quant_config=None, where the routed experts live and how their
 * projections are spelled, the shared experts, the routing and the keys of
 * config.json each reads. One table; every other file asks it. A model
 * vLLM would build with a class not listed here falls back to the Llama
 * rules qport had before the table (qkv_proj, gate_up_proj; the router is
 * the "gate" sibling of "experts"), and says so in qp_arch_info.note. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const qkv[] = {"q_proj", "k_proj", "v_proj"};
static const char *const gate_up[] = {"gate_proj", "up_proj"};
static const char *const qkv_a[] = {"q_a_proj", "kv_a_proj_with_mqa"};

/* Packed entries: which a class has always, which it adds from config. */
enum {
    PK_QKV = 1,        /* qkv_proj = q, k, v                                        */
    PK_GATE_UP = 2,    /* gate_up_proj = gate, up                                   */
    PK_QKV_A = 4,      /* fused_qkv_a_proj = q_a_proj, kv_a_proj_with_mqa           */
    /* conditional entries (vLLM adds them in the class's __init__) */
    PK_IF_QLORA = 8,   /* DeepSeek: fused_qkv_a_proj when q_lora_rank is not None    */
    PK_IF_MHA = 16,    /* DeepSeek: qkv_proj when model_type "deepseek" or no MLA dims */
    PK_IF_SHARED = 32, /* Qwen2-MoE: gate_up_proj when shared_expert_intermediate_size
                        * > 0 or mlp_only_layers; Qwen3-MoE: mlp_only_layers only  */
    PK_IF_DENSE = 64,  /* Qwen3-MoE: gate_up_proj when mlp_only_layers is non-empty  */
};

typedef struct arch_row {
    const char *cls;          /* vLLM's class (the registry's architectures key) */
    const char *model_types;  /* HF model_type values, space separated           */
    unsigned packed;
    const char *moe_block;    /* the MoE sub-module of a decoder layer, NULL: dense */
    const char *router;       /* sibling of "experts"                              */
    int router_quantized;     /* 1: built with quant_config                        */
    const char *shared;       /* shared-expert module, sibling of "experts"         */
    const char *shared_gate;  /* its sigmoid gate (quant_config=None)               */
    const char *proj[3];      /* expert projections: gate, up, down                */
    qp_moe_scoring scoring;
    int grouped, renormalize; /* renormalize -1: config's norm_topk_prob            */
    const char *n_experts_key, *inter_key, *shared_inter_key;
    const char *note;
} arch_row;

#define LLAMA_PROJ {"gate_proj", "up_proj", "down_proj"}
static const arch_row rows[] = {
    {"LlamaForCausalLM", "llama", PK_QKV | PK_GATE_UP, NULL, NULL, 0, NULL, NULL, {NULL, NULL, NULL},
     QP_MOE_SOFTMAX, 0, 0, NULL, NULL, NULL, NULL},
    {"MistralForCausalLM", "mistral ministral3", PK_QKV | PK_GATE_UP, NULL, NULL, 0, NULL, NULL, {NULL, NULL, NULL},
     QP_MOE_SOFTMAX, 0, 0, NULL, NULL, NULL, NULL},
    {"Qwen2ForCausalLM", "qwen2", PK_QKV | PK_GATE_UP, NULL, NULL, 0, NULL, NULL, {NULL, NULL, NULL}, QP_MOE_SOFTMAX, 0,
     0, NULL, NULL, NULL, NULL},
    {"Qwen3ForCausalLM", "qwen3", PK_QKV | PK_GATE_UP, NULL, NULL, 0, NULL, NULL, {NULL, NULL, NULL}, QP_MOE_SOFTMAX, 0,
     0, NULL, NULL, NULL, NULL},
    /* MixtralMoE: GateLinear(quant_config=None), renormalize=True; the
     * WeightsMapper reads gate/up/down_proj as w1/w3/w2 */
    {"MixtralForCausalLM", "mixtral", PK_QKV, "block_sparse_moe mlp", "gate", 0, NULL, NULL, LLAMA_PROJ,
     QP_MOE_SOFTMAX, 0, 1, "num_local_experts", "intermediate_size", NULL, NULL},
    /* Qwen2MoeSparseMoeBlock: gate GateLinear (no quant_config),
     * shared_expert_gate ReplicatedLinear(quant_config=None), the shared
     * expert a quantized Qwen2MoeMLP */
    {"Qwen2MoeForCausalLM", "qwen2_moe", PK_QKV | PK_IF_SHARED, "mlp", "gate", 0, "shared_expert", "shared_expert_gate",
     LLAMA_PROJ, QP_MOE_SOFTMAX, 0, -1, "num_experts", "moe_intermediate_size", "shared_expert_intermediate_size",
     NULL},
    /* Qwen3MoeSparseMoeBlock: the gate is GateLinear(quant_config=quant_config):
     * quantized unless the config excludes it */
    {"Qwen3MoeForCausalLM", "qwen3_moe", PK_QKV | PK_IF_DENSE, "mlp", "gate", 1, "shared_expert", "shared_expert_gate",
     LLAMA_PROJ, QP_MOE_SOFTMAX, 0, -1, "num_experts", "moe_intermediate_size", "shared_expert_intermediate_size",
     NULL},
    /* DeepseekV2MoE: GateLinear (no quant_config) owning the fp32
     * e_score_correction_bias (topk_method "noaux_tc"), shared_experts a
     * quantized DeepseekV2MLP of moe_intermediate_size * n_shared_experts,
     * use_grouped_topk=True; layers >= first_k_dense_replace with
     * layer % moe_layer_freq == 0 are MoE */
    {"DeepseekV2ForCausalLM", "deepseek_v2 deepseek", PK_GATE_UP | PK_IF_QLORA | PK_IF_MHA, "mlp", "gate", 0,
     "shared_experts", NULL, LLAMA_PROJ, QP_MOE_SOFTMAX, 1, -1, "n_routed_experts", "moe_intermediate_size", NULL, NULL},
    {"DeepseekV3ForCausalLM", "deepseek_v3 kimi_k2", PK_GATE_UP | PK_IF_QLORA | PK_IF_MHA, "mlp", "gate", 0,
     "shared_experts", NULL, LLAMA_PROJ, QP_MOE_SOFTMAX, 1, -1, "n_routed_experts", "moe_intermediate_size", NULL,
     NULL},
    {"DeepseekV32ForCausalLM", "deepseek_v32", PK_GATE_UP | PK_IF_QLORA | PK_IF_MHA, "mlp", "gate", 0, "shared_experts",
     NULL, LLAMA_PROJ, QP_MOE_SOFTMAX, 1, -1, "n_routed_experts", "moe_intermediate_size", NULL,
     "DeepSeek-V3.2's sparse attention indexer is not modelled"},
    /* GptOssMLP: router GateLinear(bias=True), swigluoai experts with biases
     * stored as 3-D tensors */
    {"GptOssForCausalLM", "gpt_oss", PK_QKV, "mlp", "router", 0, NULL, NULL, {NULL, NULL, NULL}, QP_MOE_SOFTMAX, 0, 1,
     "num_local_experts", "intermediate_size", NULL,
     "experts are 3-D tensors with biases and swigluoai: qport binds no GPT-OSS MoE block"},
    /* Llama4MoE: router GateLinear, sigmoid top-1 applied on the input, a
     * quantized shared_expert (LlamaMLP); layers (l + 1) % interleave_moe_layer_step == 0 */
    {"Llama4ForCausalLM", "llama4 llama4_text", PK_QKV | PK_GATE_UP, "feed_forward", "router", 0, "shared_expert", NULL,
     {NULL, NULL, NULL}, QP_MOE_SIGMOID, 0, 0, "num_local_experts", "intermediate_size", NULL,
     "experts are 3-D tensors and routing is applied on the input: qport binds no Llama-4 MoE block"},
};
#define N_ROWS (sizeof rows / sizeof *rows)

static const qp_packed_module pk_qkv = {"qkv_proj", qkv, 3};
static const qp_packed_module pk_gate_up = {"gate_up_proj", gate_up, 2};
static const qp_packed_module pk_qkv_a = {"fused_qkv_a_proj", qkv_a, 2};

static int has_word(const char *list, const char *w) {
    size_t n = strlen(w);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, w, n)) return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

static const arch_row *find_row(const char *cls, const char *model_type) {
    for (size_t i = 0; cls && i < N_ROWS; i++)
        if (!strcmp(rows[i].cls, cls)) return &rows[i];
    for (size_t i = 0; model_type && i < N_ROWS; i++)
        if (has_word(rows[i].model_types, model_type)) return &rows[i];
    return NULL;
}

static long long int_key(const qj *root, const qj *tc, const char *key, long long dflt) {
    const qj *v = qj_get(root, key);
    if (!v && tc) v = qj_get(tc, key);
    return v && v->type == QJ_INT ? v->i : dflt;
}

static int non_empty_list(const qj *root, const qj *tc, const char *key) {
    const qj *v = qj_get(root, key);
    if (!v && tc) v = qj_get(tc, key);
    return v && v->type == QJ_ARRAY && v->n > 0;
}

void qp_arch_from_json(const qj *root, qp_arch_state *st) {
    memset(st, 0, sizeof *st);
    st->first_k_dense_replace = 0;
    st->moe_layer_freq = 1;
    st->num_experts = st->moe_intermediate_size = -1;
    if (!root || root->type != QJ_OBJECT) return;
    const qj *tc = qj_get(root, "text_config");
    if (tc && tc->type != QJ_OBJECT) tc = NULL;
    const qj *ar = qj_get(root, "architectures"), *mt = qj_get(root, "model_type");
    const char *cls = ar && ar->type == QJ_ARRAY && ar->n && ar->items[0]->type == QJ_STRING ? ar->items[0]->s : NULL;
    const char *type = mt && mt->type == QJ_STRING ? mt->s : NULL;
    if (cls) snprintf(st->given_cls, sizeof st->given_cls, "%s", cls);
    if (type) snprintf(st->given_type, sizeof st->given_type, "%s", type);
    st->seen = cls || type;
    const arch_row *r = find_row(cls, type);
    if (!r && tc) { /* multimodal wrappers: the text model's type */
        const qj *tmt = qj_get(tc, "model_type");
        if (tmt && tmt->type == QJ_STRING) r = find_row(NULL, tmt->s);
    }
    st->row = r;
    if (!r) { /* an unknown class: whether it has experts at all */
        static const char *const keys[] = {"n_routed_experts", "num_local_experts", "num_experts"};
        for (size_t i = 0; i < 3 && st->num_experts < 0; i++) st->num_experts = int_key(root, tc, keys[i], -1);
        return;
    }
    unsigned pk = r->packed;
    const qj *ql = qj_get(root, "q_lora_rank");
    if (!ql && tc) ql = qj_get(tc, "q_lora_rank");
    if ((pk & PK_IF_QLORA) && ql && ql->type != QJ_NULL) pk |= PK_QKV_A;
    if ((pk & PK_IF_MHA) && ((type && !strcmp(type, "deepseek")) ||
                             (int_key(root, tc, "qk_nope_head_dim", 0) == 0 && int_key(root, tc, "qk_rope_head_dim", 0) == 0)))
        pk |= PK_QKV;
    if ((pk & PK_IF_SHARED) && (non_empty_list(root, tc, "mlp_only_layers") ||
                                int_key(root, tc, "shared_expert_intermediate_size", 0) > 0))
        pk |= PK_GATE_UP;
    if ((pk & PK_IF_DENSE) && non_empty_list(root, tc, "mlp_only_layers")) pk |= PK_GATE_UP;
    if (pk & PK_QKV) st->packed[st->n_packed++] = pk_qkv;
    if (pk & PK_GATE_UP) st->packed[st->n_packed++] = pk_gate_up;
    if (pk & PK_QKV_A) st->packed[st->n_packed++] = pk_qkv_a;
    if (r->moe_block) {
        st->num_experts = int_key(root, tc, r->n_experts_key, -1);
        st->moe_intermediate_size = int_key(root, tc, r->inter_key, -1);
        if (r->grouped) {
            st->first_k_dense_replace = int_key(root, tc, "first_k_dense_replace", 0);
            st->moe_layer_freq = int_key(root, tc, "moe_layer_freq", 1);
            const qj *tm = qj_get(root, "topk_method");
            if (!tm && tc) tm = qj_get(tc, "topk_method");
            st->correction_bias = tm && tm->type == QJ_STRING && !strcmp(tm->s, "noaux_tc");
        } else if (r->shared_gate) { /* Qwen-MoE: decoder_sparse_step */
            st->moe_layer_freq = int_key(root, tc, "decoder_sparse_step", 1);
        } else if (r->scoring == QP_MOE_SIGMOID) { /* Llama-4 */
            st->moe_layer_freq = int_key(root, tc, "interleave_moe_layer_step", 1);
        }
        st->has_shared = r->shared_inter_key ? int_key(root, tc, r->shared_inter_key, 0) > 0
                         : r->grouped      ? int_key(root, tc, "n_shared_experts", 0) > 0
                                           : r->shared != NULL;
    }
}

void qp_arch_fill(const qp_arch_state *st, qp_arch_info *o) {
    size_t ss = o->struct_size;
    memset(o, 0, sizeof *o);
    o->struct_size = ss;
    const arch_row *r = st->row;
    o->known = r != NULL;
    o->name = r ? r->cls : st->given_cls[0] ? st->given_cls : NULL;
    o->packed = r ? st->packed : NULL;
    o->n_packed = r ? st->n_packed : 0;
    o->router = "gate";
    o->experts = "experts";
    o->renormalize = -1;
    o->first_k_dense_replace = st->first_k_dense_replace;
    o->moe_layer_freq = st->moe_layer_freq;
    o->num_experts = st->num_experts;
    o->moe_intermediate_size = st->moe_intermediate_size;
    if (!r && st->num_experts > 0) o->moe_block = "mlp";
    if (!r) {
        o->note = st->seen ? "an architecture qport's table does not list: the Llama rules (qkv_proj, gate_up_proj; the "
                             "router is the \"gate\" beside \"experts\")"
                           : "no architectures or model_type in the config: the Llama rules (qkv_proj, gate_up_proj; "
                             "the router is the \"gate\" beside \"experts\")";
        return;
    }
    o->moe_block = r->moe_block;
    if (r->moe_block && strchr(r->moe_block, ' ')) o->moe_block = "block_sparse_moe"; /* Mixtral: also "mlp" (transformers 5) */
    if (r->router) o->router = r->router;
    o->router_quantized = r->router_quantized;
    o->shared_experts = st->has_shared ? r->shared : NULL;
    o->shared_expert_gate = st->has_shared ? r->shared_gate : NULL;
    for (int i = 0; i < 3; i++) o->expert_proj[i] = r->proj[i];
    o->scoring = r->scoring;
    o->grouped_topk = r->grouped;
    o->correction_bias = st->correction_bias;
    o->renormalize = r->renormalize;
    o->num_experts_key = r->n_experts_key;
    o->moe_intermediate_key = r->inter_key;
    o->moe_layer_rule = r->grouped ? QP_MOE_LAYERS_DEEPSEEK
                        : r->shared_gate || r->scoring == QP_MOE_SIGMOID ? QP_MOE_LAYERS_STEP : QP_MOE_LAYERS_ALL;
    o->note = r->note;
}

QP_API qp_status qp_config_arch(const qp_config *cfg, qp_arch_info *out) {
    if (!cfg || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    qp_arch_fill(&cfg->arch, out);
    return QP_OK;
}

QP_API qp_status qp_arch_lookup(const char *architecture, const char *model_type, qp_arch_info *out) {
    if (!out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    qp_arch_state st;
    qp_arch_from_json(NULL, &st);
    st.row = find_row(architecture, model_type);
    st.seen = architecture || model_type;
    if (architecture) snprintf(st.given_cls, sizeof st.given_cls, "%s", architecture);
    if (st.row) { /* the class's unconditional entries */
        if (st.row->packed & PK_QKV) st.packed[st.n_packed++] = pk_qkv;
        if (st.row->packed & PK_GATE_UP) st.packed[st.n_packed++] = pk_gate_up;
        st.has_shared = st.row->shared != NULL;
    }
    qp_arch_fill(&st, out);
    return st.row ? QP_OK : QP_ERR_NOT_FOUND;
}

QP_API size_t qp_arch_count(void) { return N_ROWS; }
QP_API const char *qp_arch_name(size_t i) { return i < N_ROWS ? rows[i].cls : NULL; }
QP_API const char *qp_arch_model_types(size_t i) { return i < N_ROWS ? rows[i].model_types : NULL; }

/* Decoder layer index of "...layers.<i>....", or -1. */
static long layer_index(const char *name) {
    const char *p = strstr(name, "layers.");
    if (!p) return -1;
    char *end;
    long v = strtol(p + 7, &end, 10);
    return end != p + 7 && (*end == '.' || !*end) ? v : -1;
}

QP_API int qp_arch_layer_is_moe(const qp_arch_info *a, long layer) {
    if (!a || !a->moe_block || layer < 0) return 0;
    if (a->moe_layer_freq <= 0) return 0;
    if (a->moe_layer_rule == QP_MOE_LAYERS_DEEPSEEK) return layer >= a->first_k_dense_replace && layer % a->moe_layer_freq == 0;
    if (a->moe_layer_rule == QP_MOE_LAYERS_STEP) return (layer + 1) % a->moe_layer_freq == 0;
    return 1;
}

/* The last dotted component of `name` and the one before it. */
static void tail2(const char *name, const char **last, size_t *plen, const char **parent, size_t *parent_len) {
    const char *dot = strrchr(name, '.');
    *last = dot ? dot + 1 : name;
    *plen = dot ? (size_t)(dot - name) : 0;
    *parent = name;
    *parent_len = 0;
    if (!dot) return;
    const char *p = dot;
    while (p > name && p[-1] != '.') p--;
    *parent = p;
    *parent_len = (size_t)(dot - p);
}

static int parent_is_block(const qp_arch_info *a, const char *parent, size_t plen) {
    static const char *const any[] = {"mlp", "block_sparse_moe", "feed_forward"};
    if (!a->known) {
        for (size_t i = 0; i < 3; i++)
            if (strlen(any[i]) == plen && !strncmp(parent, any[i], plen)) return 1;
        return 0;
    }
    if (!a->moe_block) return 0;
    if (strlen(a->moe_block) == plen && !strncmp(parent, a->moe_block, plen)) return 1;
    /* Mixtral exported by transformers 5 / Quark: mlp.experts */
    return !strcmp(a->moe_block, "block_sparse_moe") && plen == 3 && !strncmp(parent, "mlp", 3);
}

QP_API qp_module_class qp_arch_module_class(const qp_arch_info *a, const char *module) {
    if (!a || !module) return QP_MODULE_LINEAR;
    const char *last, *parent;
    size_t plen, parent_len;
    tail2(module, &last, &plen, &parent, &parent_len);
    if (!strcmp(last, "lm_head")) return QP_MODULE_LM_HEAD;
    if (!strcmp(last, "embed_tokens") || !strcmp(last, "wte") || !strcmp(last, "embed_in")) return QP_MODULE_EMBEDDING;
    long li = layer_index(module);
    int block = parent_is_block(a, parent, parent_len) && (!a->known || li < 0 || qp_arch_layer_is_moe(a, li));
    if (block && !strcmp(last, a->experts)) return QP_MODULE_ROUTED_EXPERTS;
    if (block && !strcmp(last, a->router)) return a->router_quantized ? QP_MODULE_LINEAR : QP_MODULE_LINEAR_UNQUANTIZED;
    if (block && a->shared_expert_gate && !strcmp(last, a->shared_expert_gate)) return QP_MODULE_LINEAR_UNQUANTIZED;
    if (!strcmp(last, "attn")) return QP_MODULE_ATTENTION;
    return QP_MODULE_LINEAR;
}

QP_API qp_module_class qp_arch_module_class_vllm(const qp_arch_info *a, qp_method method, const char *module) {
    /* QQQ follows vLLM 0.8.5, whose Qwen3-MoE built its router as
     * ReplicatedLinear(quant_config=None); 0.34.0's GateLinear takes the
     * quant config */
    if (a && a->router_quantized && method == QP_METHOD_QQQ) {
        qp_arch_info b = *a;
        b.router_quantized = 0;
        return qp_arch_module_class(&b, module);
    }
    return qp_arch_module_class(a, module);
}

/* Which module classes each method's get_quant_method gives a quant method:
 * Quark (0.34.0 QuarkConfig.get_quant_method_target): LinearBase,
 * Attention, RoutedExperts; QQQ (vLLM 0.8.5 QQQConfig.get_quant_method):
 * LinearBase only, so FusedMoE and ParallelLMHead get None; HF fp8
 * (Fp8Config.get_quant_method): LinearBase, RoutedExperts, Attention.
 * ParallelLMHead and VocabParallelEmbedding are no LinearBase: none of
 * these methods quantizes them (UnquantizedEmbeddingMethod); compressed-
 * tensors asks its config for both (CompressedTensorsConfig.get_quant_method:
 * LinearBase, ParallelLMHead, VocabParallelEmbedding, Attention,
 * RoutedExperts), which may still leave them unquantized; modules the
 * class builds with quant_config=None never see the config. */
QP_API int qp_method_quantizes(qp_method method, qp_module_class cls) {
    switch (cls) {
    case QP_MODULE_LINEAR: return 1;
    case QP_MODULE_ATTENTION:
    case QP_MODULE_ROUTED_EXPERTS: return method != QP_METHOD_QQQ; /* Quark, Quark online, fp8 */
    case QP_MODULE_LM_HEAD:
    case QP_MODULE_EMBEDDING: return method == QP_METHOD_COMPRESSED_TENSORS;
    case QP_MODULE_LINEAR_UNQUANTIZED:
    default: return 0;
    }
}

QP_API const char *qp_module_class_name(qp_module_class c) {
    static const char *const n[] = {"linear", "linear (quant_config=None)", "lm_head (ParallelLMHead)",
                                    "embedding (VocabParallelEmbedding)", "routed experts (FusedMoE)", "attention"};
    return (unsigned)c < sizeof n / sizeof *n ? n[c] : "unknown";
}
