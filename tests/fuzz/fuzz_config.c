/* libFuzzer target: load any bytes as a config, then resolve a spread of
 * layer names, kinds and dialects. Any crash, leak or UB is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "qport.h"

static const char *const layers[] = {
    "model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.q_proj", "model.layers.1.mlp.gate_up_proj",
    "model.layers.1.mlp.down_proj", "lm_head", "model.layers.3.mlp.experts", "qkv_proj", "", ".", "a.b.",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static qp_context *ctx;
    if (!ctx && qp_context_create(&ctx) != QP_OK) return 0;
    qp_config *cfg = NULL;
    if (qp_config_load_buffer(ctx, "fuzz.json", (const char *)data, size, &cfg) != QP_OK) return 0;
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    for (int d = 0; d < 2; d++) {
        o.dialect = d ? QP_DIALECT_SGLANG : QP_DIALECT_VLLM;
        o.capability = d ? 80 : QP_CAPABILITY_NONE;
        o.layer_class = d ? "QKVParallelLinear" : NULL;
        for (size_t i = 0; i < sizeof layers / sizeof *layers; i++)
            for (int k = 0; k <= QP_LAYER_MOE; k++) {
                qp_scheme s;
                qp_config_resolve(cfg, layers[i], (qp_layer_kind)k, &o, &s);
                qp_error_info e;
                qp_last_error_info(ctx, &e);
                (void)strlen(qp_last_error(ctx));
            }
        qp_scheme s;
        qp_config_resolve_global(cfg, &o, &s);
        qp_config_summary sm;
        qp_config_summarize(cfg, &sm);
        for (size_t i = 0; i < sm.n_layer_patterns; i++) qp_config_resolve_pattern(cfg, i, &o, &s);
        for (size_t i = 0; qp_config_exclude(cfg, i); i++) {}
    }
    qp_qtensor kv;
    qp_config_kv_cache(cfg, &kv);
    char out[64];
    qp_config_map_scale_name(cfg, "model.layers.0.self_attn.k_proj.output_scale", out, sizeof out);
    qp_config_destroy(cfg);
    return 0;
}
