/* quantization_config JSON as the Quark / QQQ / HF-fp8 exporters write it,
 * for the one scheme table (cases.c) of `qport quantize`, `qport bench` and
 * the conformance cases, so one spelling of each scheme serves them all. */
#ifndef QPORT_QCONFIGS_H
#define QPORT_QCONFIGS_H

/* A Quark config: pack method P, exclude list X (a JSON array), global
 * weight W and input_tensors I (JSON objects or null). */
#define QC_QUARK(P, X, W, I)                                                                                    \
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"" P "\"},"              \
    "\"global_quant_config\":{\"weight\":" W ",\"input_tensors\":" I ",\"output_tensors\":null,\"bias\":null}," \
    "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":" X "}"
/* A plain QTensor: dtype, qscheme, symmetric, is_dynamic. */
#define QC_T(dt, qs, sym, dyn) "{\"dtype\":\"" dt "\",\"qscheme\":\"" qs "\",\"symmetric\":" sym ",\"is_dynamic\":" dyn "}"
/* OCP-MX: groups of 32 with e8m0 scales. */
#define QC_MX(dt, dyn) \
    "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"scale_format\":\"e8m0\",\"is_dynamic\":" dyn ",\"symmetric\":true}"
/* W4A16 int4/uint4 groups. */
#define QC_W4(dt, sym, G) \
    "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":" G ",\"symmetric\":" sym ",\"is_dynamic\":false}"
/* FP8 128x128 weight blocks (fp32 or e8m0 scales) and 1x128 activation groups. */
#define QC_FP8_BLOCK_W "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"is_dynamic\":false,\"symmetric\":true}"
#define QC_FP8_BLOCK_W_E8M0                                                                                        \
    "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"scale_type\":\"float8_e8m0fnu\"," \
    "\"is_dynamic\":false,\"symmetric\":true}"
#define QC_FP8_GROUP_A "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"is_dynamic\":true,\"symmetric\":true}"
/* NVFP4: fp4 groups of 16 with e4m3 scales plus an fp8 per-tensor global
 * scale, for weights (static) and inputs (dynamic). */
#define QC_NVFP4_W                                                                                                  \
    "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"scale_format\":\"fp8_e4m3\",\"is_dynamic\":false}," \
    "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}]"
#define QC_NVFP4_A                                                                                                 \
    "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"scale_format\":\"fp8_e4m3\",\"is_dynamic\":true}," \
    "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}]"
/* compressed-tensors (llm-compressor): one config group over every
 * Linear with weights W and input_activations I (JSON or null), format F,
 * lm_head ignored, as compressed-tensors 0.17 serializes a preset. */
#define QC_CT(F, W, I)                                                                                              \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"" F "\",\"quantization_status\":\"compressed\","         \
    "\"version\":\"0.17.0\",\"ignore\":[\"lm_head\"],\"kv_cache_scheme\":null,\"sparsity_config\":{},"                \
    "\"config_groups\":{\"group_0\":{\"targets\":[\"Linear\"],\"format\":\"" F "\",\"weights\":" W ","                \
    "\"input_activations\":" I ",\"output_activations\":null}}}"
/* QuantizationArgs: type, num_bits, strategy, group_size (JSON), symmetric,
 * dynamic (JSON: false, true or "local"), block_structure (JSON). */
#define QC_CTA(T, B, S, G, SYM, DYN, BLK)                                                                         \
    "{\"num_bits\":" B ",\"type\":\"" T "\",\"strategy\":\"" S "\",\"group_size\":" G ",\"symmetric\":" SYM      \
    ",\"dynamic\":" DYN ",\"actorder\":null,\"block_structure\":" BLK ",\"observer\":\"minmax\",\"observer_kwargs\":{}}"
#define QC_QQQ(G) "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":" G "}"
#endif
