/* The schemes `qport quantize` writes, each a quantization_config as a
 * Quark / QQQ / HF-fp8 exporter would put in config.json. */
#include <stdio.h>
#include <string.h>

#include "tool.h"

#include "qconfigs.h"

/* lm_head stays unquantized, as exporters leave it */
#define QK(W, I) QC_QUARK("reorder", "[\"lm_head\"]", W, I)
#define T4 QC_T
#define MX QC_MX
#define W4 QC_W4

static const quant_scheme table[] = {
    {"int8-dyn-sym", QK(T4("int8", "per_channel", "true", "false"), T4("int8", "per_channel", "true", "true"))},
    {"int8-dyn-asym", QK(T4("int8", "per_channel", "true", "false"), T4("int8", "per_channel", "false", "true"))},
    {"int8-static-sym", QK(T4("int8", "per_tensor", "true", "false"), T4("int8", "per_tensor", "true", "false"))},
    {"int8-static-asym", QK(T4("int8", "per_tensor", "true", "false"), T4("int8", "per_tensor", "false", "false"))},
    {"fp8-static", QK(T4("fp8_e4m3", "per_tensor", "true", "false"), T4("fp8_e4m3", "per_tensor", "true", "false"))},
    {"fp8-dyn-tensor", QK(T4("fp8_e4m3", "per_tensor", "true", "false"), T4("fp8_e4m3", "per_tensor", "true", "true"))},
    {"fp8-dyn-token", QK(T4("fp8_e4m3", "per_channel", "true", "false"), T4("fp8_e4m3", "per_channel", "true", "true"))},
    {"fp8-block", QK(QC_FP8_BLOCK_W, QC_FP8_GROUP_A)},
    {"w4a16-int4", QK(W4("int4", "true", "128"), "null")},
    {"w4a16-uint4", QK(W4("uint4", "false", "128"), "null")},
    {"mxfp4", QK(MX("fp4", "false"), "null")},
    {"mxfp4-a-mxfp4", QK(MX("fp4", "false"), MX("fp4", "true"))},
    {"mxfp8", QK(MX("fp8_e4m3", "false"), MX("fp8_e4m3", "true"))},
    {"mxfp6-e3m2", QK(MX("fp6_e3m2", "false"), MX("fp6_e3m2", "true"))},
    {"mxfp6-e2m3", QK(MX("fp6_e2m3", "false"), MX("fp6_e2m3", "true"))},
    {"w4a8-mxfp4-fp8", QK(MX("fp4", "false"), T4("fp8_e4m3", "per_tensor", "true", "false"))},
    {"nvfp4", QK(QC_NVFP4_W, QC_NVFP4_A)},
    {"qqq", QC_QQQ("128")},
    {"qqq-channel", QC_QQQ("-1")},
    {"hf-fp8", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"ignored_layers\":[\"lm_head\"]}"},
    {"hf-fp8-static", "{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\",\"ignored_layers\":[\"lm_head\"]}"},
};

const quant_scheme *quant_scheme_find(const char *name) {
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

void quant_scheme_list(FILE *f) {
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) fprintf(f, "%s%s", i ? " " : "", table[i].name);
    fputc('\n', f);
}

const quant_scheme *quant_scheme_at(size_t i) { return i < sizeof table / sizeof *table ? &table[i] : NULL; }
