/* compressed-tensors resolution as vLLM 0.34.0's CompressedTensorsConfig
 * (compressed_tensors.py, utils.py, compressed_tensors_moe.py) with the
 * QuantizationArgs validators of compressed-tensors 0.17.0: one case per
 * predicate branch of _get_scheme_from_parts and get_moe_method and per
 * error message, targets and ignore matching, fused layers, lm_head and
 * embeddings, the KV cache, and the llm-compressor preset configs under
 * tests/configs/ct-*.json. The sglang dialect's cases (sgl_cases) follow
 * SGLang's CompressedTensorsConfig at sgl-project/sglang
 * 0104cc50eeb02378c3f04b2d8470a762449701fc. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static int skipped_groups; /* vLLM's warning for a dropped Attention group */

static void on_log(void *user, qp_log_level level, const char *msg) {
    (void)user;
    if (level == QP_LOG_WARN && strstr(msg, "Skipping CompressedTensors config group for LlamaAttention.")) skipped_groups++;
}

#define L QP_LAYER_LINEAR
#define M QP_LAYER_MOE
#define ATT QP_LAYER_ATTENTION
#define NOCAP QP_CAPABILITY_NONE
#define DOWN "model.layers.0.mlp.down_proj"
#define EXPERTS "model.layers.0.mlp.experts"

/* QuantizationArgs as llm-compressor writes them (the presets' values) */
#define I8CH "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"channel\",\"symmetric\":true,\"dynamic\":false}"
#define I8T "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"tensor\",\"symmetric\":true,\"dynamic\":false}"
#define I8TA "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"tensor\",\"symmetric\":false,\"dynamic\":false}"
#define I8TOK "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"token\",\"symmetric\":true,\"dynamic\":true}"
#define I8TOKA "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"token\",\"symmetric\":false,\"dynamic\":true}"
#define I8CHA "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"channel\",\"symmetric\":false,\"dynamic\":false}"
#define I4TOK "{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"token\",\"symmetric\":true,\"dynamic\":true}"
#define I4G(g) "{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"group\",\"group_size\":" #g ",\"symmetric\":true,\"dynamic\":false}"
#define U4G "{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"group\",\"group_size\":128,\"symmetric\":false,\"dynamic\":false}"
#define I8G "{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"group\",\"group_size\":128,\"symmetric\":true,\"dynamic\":false}"
#define I4CH "{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"channel\",\"symmetric\":true}"
#define IBITS(b) "{\"num_bits\":" #b ",\"type\":\"int\",\"strategy\":\"group\",\"group_size\":128}"
#define F8T "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"tensor\",\"symmetric\":true,\"dynamic\":false}"
#define F8CH "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\",\"symmetric\":true,\"dynamic\":false}"
#define F8TOK "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"token\",\"symmetric\":true,\"dynamic\":true}"
#define F8DT "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"tensor\",\"symmetric\":true,\"dynamic\":true}"
#define F8CHS "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"channel\",\"symmetric\":true,\"dynamic\":false}"
#define F8BLK "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"block\",\"block_structure\":[128,128]}"
#define F8G128 "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"group\",\"group_size\":128,\"dynamic\":true}"
#define NV(dyn) "{\"num_bits\":4,\"type\":\"float\",\"strategy\":\"tensor_group\",\"group_size\":16,\"dynamic\":" dyn \
                ",\"scale_dtype\":\"torch.float8_e4m3fn\",\"zp_dtype\":\"torch.float8_e4m3fn\"}"
#define MX(b, dyn) "{\"num_bits\":" #b ",\"type\":\"float\",\"strategy\":\"group\",\"group_size\":32,\"dynamic\":" dyn \
                   ",\"scale_dtype\":\"torch.uint8\",\"zp_dtype\":\"torch.uint8\"}"

/* One config group targeting Linear, the config's format, lm_head ignored. */
#define CT(w, in, fmt) \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"" fmt "\",\"ignore\":[\"lm_head\"],\"config_groups\":" \
    "{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":" w ",\"input_activations\":" in "}}}"
#define CTO(w, in, out, fmt) \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"" fmt "\",\"config_groups\":{\"group_0\":{\"targets\":" \
    "[\"Linear\"],\"weights\":" w ",\"input_activations\":" in ",\"output_activations\":" out "}}}"

typedef struct ct_case {
    const char *config;
    const char *layer;
    qp_layer_kind kind;
    int capability;
    qp_status status;
    const char *cls;    /* scheme class (MoE: method); on error vLLM's message, '~' prefix: contains */
    const char *wkey, *akey;
    qp_scheme_kind sk;
    int min_cap;
} ct_case;

static const ct_case cases[] = {
    /* _is_dynamic_token_w8a8 / _is_static_tensor_w8a8 -> CompressedTensorsW8A8Int8 */
    {CT(I8CH, I8TOK, "int-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Int8", "kInt8StaticChannelSym",
     "kInt8DynamicTokenSym", QP_SCHEME_W8A8_INT8, 75},
    {CT(I8T, I8TOKA, "int-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Int8", "kInt8StaticTensorSym",
     "kInt8DynamicTokenAsym", QP_SCHEME_W8A8_INT8, 75},
    {CT(I8CH, I8T, "int-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Int8", "kInt8StaticChannelSym",
     "kInt8StaticTensorSym", QP_SCHEME_W8A8_INT8, 75},
    {CT(I8T, I8TA, "int-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Int8", "kInt8StaticTensorSym",
     "kInt8StaticTensorAsym", QP_SCHEME_W8A8_INT8, 75},
    /* asymmetric int8 weights: no predicate takes them */
    {CT(I8CHA, I8TOK, "int-quantized"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED,
     "~No compressed-tensors compatible scheme was found for layer_name='model.layers.0.mlp.down_proj', "
     "weight_quant=QuantizationArgs(num_bits=8, type='int', symmetric=False, group_size=None, strategy='channel'",
     NULL, NULL, 0, 0},
    /* the scheme's capability: RuntimeError */
    {CT(I8CH, I8TOK, "int-quantized"), DOWN, L, 70, QP_ERR_CAPABILITY,
     "Quantization scheme is not supported for the current GPU. Min capability: 75. Current capability: 70.", NULL,
     NULL, 0, 0},
    /* the method's own minimum (70): ValueError before any layer */
    {CT(I8CH, I8TOK, "int-quantized"), DOWN, L, 61, QP_ERR_VALUE,
     "The quantization method compressed-tensors is not supported for the current GPU. Minimum capability: 70. "
     "Current capability: 61.", NULL, NULL, 0, 0},

    /* _is_fp8_w8a8 -> CompressedTensorsW8A8Fp8 from 89, else W8A16Fp8 */
    {CT(F8T, F8T, "float-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8StaticTensorSym",
     "kFp8StaticTensorSym", QP_SCHEME_W8A8_FP8, 89},
    {CT(F8T, F8T, "float-quantized"), DOWN, L, 89, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8StaticTensorSym",
     "kFp8StaticTensorSym", QP_SCHEME_W8A8_FP8, 89},
    {CT(F8T, F8T, "float-quantized"), DOWN, L, 86, QP_OK, "CompressedTensorsW8A16Fp8", "kFp8StaticTensorSym", "",
     QP_SCHEME_W8A16_FP8, 75},
    {CT(F8T, F8T, "float-quantized"), DOWN, L, 70, QP_ERR_CAPABILITY, "~Min capability: 75. Current capability: 70.",
     NULL, NULL, 0, 0},
    {CT(F8CH, F8TOK, "float-quantized"), DOWN, L, 90, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8StaticChannelSym",
     "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 89},
    /* dynamic per-tensor input: the dynamic key is per token all the same */
    {CT(F8T, F8DT, "float-quantized"), DOWN, L, 90, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8StaticTensorSym",
     "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 89},
    {CT(F8BLK, F8G128, "float-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8Static128BlockSym",
     "kFp8Dynamic128Sym", QP_SCHEME_W8A8_FP8_BLOCK, 89},
    {CT(F8BLK, F8G128, "float-quantized"), DOWN, L, 80, QP_OK, "CompressedTensorsW8A16Fp8", "kFp8Static128BlockSym",
     "", QP_SCHEME_W8A16_FP8, 75},
    /* static per-channel fp8 input: _is_fp8_w8a8 refuses it, _is_fp8_w8a16 takes the weights */
    {CT(F8CH, F8CHS, "float-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A16Fp8", "kFp8StaticChannelSym",
     "", QP_SCHEME_W8A16_FP8, 75},
    /* _is_fp8_w8a16: fp8 weights without input_activations */
    {CT(F8CH, "null", "float-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A16Fp8", "kFp8StaticChannelSym",
     "", QP_SCHEME_W8A16_FP8, 75},
    /* fp8 in a weight-only format: nothing takes it */
    {CT(F8CH, F8TOK, "pack-quantized"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED, "~format='pack-quantized'", NULL, NULL,
     0, 0},

    /* _is_wNa16_group_channel + pack-quantized -> CompressedTensorsWNA16 */
    {CT(I4G(128), "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4Static", "",
     QP_SCHEME_W4A16_INT4, 75},
    {CT(U4G, "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4StaticAsym", "",
     QP_SCHEME_W4A16_INT4, 75},
    {CT(I4CH, "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4Static", "",
     QP_SCHEME_W4A16_INT4, 75},
    {CT(I8G, "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt8Static", "",
     QP_SCHEME_WNA16, 75},
    {CT(IBITS(3), "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "", "", QP_SCHEME_WNA16,
     75},
    {CT(IBITS(16), "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "Unsupported num_bits = 16. Supported num_bits = [2, 3, 4, 5, 6, 7, 8]", NULL, NULL, 0, 0},
    /* the same weights in another format: no scheme */
    {CT(I4G(128), "null", "marlin-24"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED, "~format='marlin-24'", NULL, NULL, 0, 0},
    /* a group strategy needs a group size: the validator refuses first */
    {CT("{\"num_bits\":4,\"strategy\":\"group\"}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\n  Value error, strategy group requires group_size to be set to a "
     "positive value", NULL, NULL, 0, 0},
    /* the derived strategy (group_size -1 -> channel) */
    {CT("{\"num_bits\":4,\"group_size\":-1}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK,
     "CompressedTensorsWNA16", "kInt4Static", "", QP_SCHEME_W4A16_INT4, 75},

    /* actorder */
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"actorder\":\"weight\"}", "null", "pack-quantized"),
     DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4Static", "", QP_SCHEME_W4A16_INT4, 75},
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"actorder\":\"static\"}", "null", "pack-quantized"),
     DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4Static", "", QP_SCHEME_W4A16_INT4, 75},
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"actorder\":\"group\"}", "null", "pack-quantized"),
     DOWN, L, NOCAP, QP_ERR_VALUE,
     "Compressed-tensors group/dynamic activation ordering (actorder='group') is no longer supported. Use a "
     "checkpoint with static/weight activation ordering or without activation ordering.", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"actorder\":\"dynamic\"}", "null", "pack-quantized"),
     DOWN, L, NOCAP, QP_ERR_VALUE, "~(actorder='dynamic') is no longer supported", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"actorder\":true}", "null", "pack-quantized"),
     DOWN, L, NOCAP, QP_ERR_VALUE, "~(actorder='group') is no longer supported", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"strategy\":\"channel\",\"actorder\":\"group\"}", "null", "pack-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\n  Value error, Must use group or tensor_group quantization strategy in "
     "order to apply group activation ordering", NULL, NULL, 0, 0},

    /* NVFP4: W4A4Fp4, its A16 form, and a non-NVFP4 input */
    {CT(NV("false"), NV("\"local\""), "nvfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A4Fp4",
     "kNvfp4Static", "kNvfp4Dynamic", QP_SCHEME_NVFP4, 75},
    {CT(NV("false"), "null", "nvfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A4Fp4", "kNvfp4Static",
     "", QP_SCHEME_NVFP4_A16, 75},
    {CT(NV("false"), F8TOK, "nvfp4-pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "For NVFP4 weights, input quantization must also be NVFP4 format, None for NVFP4A16", NULL, NULL, 0, 0},
    /* MX: W4A8Mxfp4 (fp8 dynamic token input), W4A4Mxfp4, W8A8Mxfp8 */
    {CT(MX(4, "false"), F8TOK, "mxfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A8Mxfp4",
     "kMxfp4Static", "kFp8DynamicTokenSym", QP_SCHEME_CT_W4A8_MXFP4, 80},
    {CT(MX(4, "false"), MX(4, "true"), "mxfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A4Mxfp4",
     "kMxfp4Static", "kMxfp4Dynamic", QP_SCHEME_CT_MXFP4, 80},
    {CT(MX(4, "false"), "null", "mxfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A4Mxfp4",
     "kMxfp4Static", "kMxfp4Dynamic", QP_SCHEME_CT_MXFP4, 80},
    {CT(MX(4, "false"), "{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"group\",\"group_size\":128,\"dynamic\":true}",
        "mxfp4-pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A8Mxfp4", "kMxfp4Static",
     "kFp8Dynamic128Sym", QP_SCHEME_CT_W4A8_MXFP4, 80},
    {CT(MX(8, "false"), MX(8, "true"), "mxfp8-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Mxfp8",
     "kMxfp8Static", "kMxfp8Dynamic", QP_SCHEME_CT_MXFP8, 75},
    /* MXFP8 needs uint8 scales: fp8 group-32 weights with fp32 scales are no MX */
    {CT("{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"group\",\"group_size\":32}", MX(8, "true"),
        "mxfp8-quantized"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED, "~No compressed-tensors compatible scheme", NULL,
     NULL, 0, 0},

    /* W4AFP8: CompressedTensorsW4A8Fp8 on exactly sm_90 only */
    {CT(I4G(128), F8TOK, "pack-quantized"), DOWN, L, 90, QP_OK, "CompressedTensorsW4A8Fp8", "", "kFp8DynamicTokenSym",
     QP_SCHEME_W4A8_FP8, 90},
    {CT(I4G(128), F8TOK, "pack-quantized"), DOWN, L, 100, QP_ERR_NOT_IMPLEMENTED,
     "~No compressed-tensors compatible scheme", NULL, NULL, 0, 0},
    {CT(I4G(128), F8TOK, "pack-quantized"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED,
     "~No compressed-tensors compatible scheme", NULL, NULL, 0, 0},
    {CT(I4G(64), F8TOK, "pack-quantized"), DOWN, L, 90, QP_ERR_VALUE,
     "W4A8 kernels require group quantization with group size 128", NULL, NULL, 0, 0},
    /* W4A8 int: int-quantized -> W4A8Int; pack-quantized -> the Humming WNA8Int / WNA4Int */
    {CT(I4G(128), I8TOK, "int-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsW4A8Int", "",
     "kInt8DynamicTokenSym", QP_SCHEME_W4A8_INT, 1},
    {CT(I4CH, I8TOKA, "int-quantized"), DOWN, L, 20, QP_ERR_VALUE, "~Minimum capability: 70", NULL, NULL, 0, 0},
    {CT(I4G(128), I8TOK, "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA8Int", "",
     "kInt8DynamicTokenSym", QP_SCHEME_WNA8_INT, 75},
    {CT(I4G(128), I4TOK, "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA4Int", "", "",
     QP_SCHEME_WNA4_INT, 75},
    /* Humming takes symmetric inputs only: an asymmetric one falls through to nothing */
    {CT(I4G(128), I8TOKA, "pack-quantized"), DOWN, L, NOCAP, QP_ERR_NOT_IMPLEMENTED,
     "~No compressed-tensors compatible scheme", NULL, NULL, 0, 0},
    /* WNA8O8: static int8 input and output around int weights */
    {CTO(I4G(128), I8T, I8T, "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA8O8Int", "",
     "kInt8StaticTensorSym", QP_SCHEME_WNA8O8_INT, 70},
    {CTO(IBITS(3), I8T, I8T, "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "Unsupported num_bits = 3 for WNA8O8Int; supported = [4, 8]", NULL, NULL, 0, 0},

    /* from_config: int weights without inputs in an activation format */
    {CT(I8CH, "null", "int-quantized"), DOWN, L, NOCAP, QP_ERR_UNSUPPORTED, "~AssertionError", NULL, NULL, 0, 0},
    /* the validators, in their order */
    {CT("{\"num_bits\":8,\"strategy\":\"token\"}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "~Cannot perform static token quantization, please use `dynamic=True`", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"strategy\":\"tensor\",\"group_size\":64}", "null", "pack-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE, "~group_size requires strategy to be set to 'group'", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"block\"}", "null", "float-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\n  Value error, Block strategy requires block structure\nnum_bits=8 "
     "type='float' symmetric=True group_size=None strategy='block' block_structure=None dynamic=False actorder=None "
     "scale_dtype=None zp_dtype=None observer=None observer_kwargs={}", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":8,\"type\":\"float\",\"block_structure\":\"128x128\"}", "null", "float-quantized"), DOWN, L,
     NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\n  Value error, Block structure requires block strategy\nnum_bits=8 "
     "type='float' symmetric=True group_size=None strategy=None block_structure=[128, 128] dynamic=False "
     "actorder=None scale_dtype=None zp_dtype=None observer=None observer_kwargs={}", NULL, NULL, 0, 0},
    /* pydantic's lax coercion: "4", 64.0, "false", 1 pass; 4.5 and "maybe" do not */
    {CT("{\"num_bits\":\"4\",\"group_size\":64.0,\"strategy\":\"group\",\"symmetric\":\"false\",\"dynamic\":0}",
        "null", "pack-quantized"), DOWN, L, NOCAP, QP_OK, "CompressedTensorsWNA16", "kInt4StaticAsym", "",
     QP_SCHEME_W4A16_INT4, 75},
    {CT("{\"num_bits\":4.5}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\nnum_bits\n  Input should be a valid integer, got a number with a "
     "fractional part", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"symmetric\":\"maybe\"}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\nsymmetric\n  Input should be a valid boolean, unable to interpret input",
     NULL, NULL, 0, 0},
    {CT(I8CH, "{\"num_bits\":8,\"strategy\":\"channel\",\"dynamic\":true}", "int-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE, "~must be used for dynamic quant.", NULL, NULL, 0, 0},
    {CT(I8CH, "{\"num_bits\":8,\"strategy\":\"token\",\"dynamic\":\"local\"}", "int-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE, "~local is only supported for strategy tensor_group", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"group_size\":-2}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\ngroup_size\n  Value error, Invalid group size -2. Use group_size > 0 for "
     "strategy='group' and group_size = -1 for 'channel'", NULL, NULL,
     0, 0},
    {CT("{\"num_bits\":6,\"type\":\"float\",\"strategy\":\"channel\"}", "null", "pack-quantized"), DOWN, L, NOCAP,
     QP_ERR_NOT_IMPLEMENTED, "Only num_bits in (8) are supported", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"strategy\":\"group\",\"group_size\":128,\"bits\":4}", "null", "pack-quantized"), DOWN, L,
     NOCAP, QP_ERR_VALUE, "1 validation error for QuantizationArgs\nbits\n  Extra inputs are not permitted", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":4,\"type\":\"fp\"}", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\ntype\n  Value error, 'fp' is not a valid QuantizationType", NULL, NULL, 0, 0},
    {CT("{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"block\",\"block_structure\":[128]}", "null",
        "float-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\nblock_structure\n  Value error, Invalid block_structure '[128]'. Must be a "
     "list of ints [rows, cols].", NULL, NULL, 0, 0},
    {CT(I8CH, "{\"num_bits\":8,\"strategy\":\"Token\",\"dynamic\":true,\"actorder\":\"random\"}", "int-quantized"),
     DOWN, L, NOCAP, QP_ERR_VALUE,
     "1 validation error for QuantizationArgs\nactorder\n  Value error, 'random' is not a valid ActivationOrdering", NULL,
     NULL, 0, 0},
    {CT(I8CH, "{\"num_bits\":8,\"strategy\":\"row\",\"dynamic\":true}", "int-quantized"), DOWN, L, NOCAP,
     QP_ERR_VALUE, "~strategy\n  Value error, 'row' is not a valid QuantizationStrategy", NULL, NULL, 0, 0},
    /* the enum validators lower-case: "Token" and "FLOAT" are fine */
    {CT(F8CH, "{\"num_bits\":8,\"type\":\"FLOAT\",\"strategy\":\"Token\",\"dynamic\":true}", "float-quantized"),
     DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym",
     QP_SCHEME_W8A8_FP8, 89},
    {CT("null", "null", "pack-quantized"), DOWN, L, NOCAP, QP_ERR_VALUE,
     "~Input should be a valid dictionary or instance of QuantizationArgs", NULL, NULL, 0, 0},

    /* MoE: CompressedTensorsMoEMethod.get_moe_method, in its order */
    {CT(I4G(128), "null", "pack-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsWNA16MoEMethod", "kInt4Static",
     "", QP_SCHEME_W4A16_INT4, 0},
    {CT(I8G, "null", "pack-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsWNA16MoEMethod", "", "",
     QP_SCHEME_WNA16, 0},
    {CT(I4G(128), "null", "marlin-24"), EXPERTS, M, NOCAP, QP_ERR_VALUE,
     "For Fused MoE layers, only format: pack-quantized and bits: [2, 3, 4, 5, 6, 7, 8] is supported but got format: "
     "pack-quantized and bits: 4", NULL, NULL, 0, 0},
    /* (vLLM's fp8 / int8 MoE methods name no QuantKey: qport gives its
     * linear scheme's, which the fused MoE reads) */
    {CT(F8CH, F8TOK, "float-quantized"), EXPERTS, M, 80, QP_OK, "CompressedTensorsW8A8Fp8MoEMethod",
     "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 0},
    {CT(F8BLK, F8G128, "float-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsW8A8Fp8MoEMethod",
     "kFp8Static128BlockSym", "kFp8Dynamic128Sym", QP_SCHEME_W8A8_FP8_BLOCK, 0},
    {CT(I8CH, I8TOK, "int-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsW8A8Int8MoEMethod",
     "kInt8StaticChannelSym", "kInt8DynamicTokenSym", QP_SCHEME_W8A8_INT8, 0},
    {CT(NV("false"), NV("\"local\""), "nvfp4-pack-quantized"), EXPERTS, M, NOCAP, QP_OK,
     "CompressedTensorsW4A4Nvfp4MoEMethod", "kNvfp4Static", "kNvfp4Dynamic", QP_SCHEME_NVFP4, 0},
    {CT(NV("false"), "null", "nvfp4-pack-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsW4A4Nvfp4MoEMethod",
     "kNvfp4Static", "", QP_SCHEME_NVFP4_A16, 0},
    {CT(NV("false"), F8TOK, "nvfp4-pack-quantized"), EXPERTS, M, NOCAP, QP_ERR_VALUE,
     "~For NVFP4 weights, input quantization must also be NVFP4 format or None for NVFP4A16, found num_bits=8 "
     "type='float'", NULL, NULL, 0, 0},
    {CT(MX(4, "false"), F8TOK, "mxfp4-pack-quantized"), EXPERTS, M, NOCAP, QP_OK,
     "CompressedTensorsW4A8Mxfp4MoEMethod", "kMxfp4Static", "kFp8DynamicTokenSym", QP_SCHEME_CT_W4A8_MXFP4, 0},
    {CT(MX(4, "false"), MX(4, "true"), "mxfp4-pack-quantized"), EXPERTS, M, NOCAP, QP_OK,
     "CompressedTensorsW4A4Mxfp4MoEMethod", "kMxfp4Static", "", QP_SCHEME_CT_MXFP4, 0},
    {CT(MX(8, "false"), MX(8, "true"), "mxfp8-quantized"), EXPERTS, M, NOCAP, QP_OK,
     "CompressedTensorsW8A8Mxfp8MoEMethod", "kMxfp8Static", "kMxfp8Dynamic", QP_SCHEME_CT_MXFP8, 0},
    /* W4AFP8 experts need no sm_90 (the _sm90 probe is the linear path's) */
    {CT(I4G(128), F8TOK, "pack-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsW4A8Fp8MoEMethod", "",
     "kFp8DynamicTokenSym", QP_SCHEME_W4A8_FP8, 0},
    {CT(I4G(128), I8TOK, "int-quantized"), EXPERTS, M, NOCAP, QP_OK, "CompressedTensorsW4A8Int8MoEMethod", "", "",
     QP_SCHEME_W4A8_INT, 0},
    /* static int8 experts: no MoE method (RuntimeError) */
    {CT(I8CH, I8T, "int-quantized"), EXPERTS, M, NOCAP, QP_ERR_CAPABILITY,
     "Unsupported FusedMoe scheme: num_bits=8 type='int' symmetric=True group_size=None strategy='channel' "
     "block_structure=None dynamic=False actorder=None scale_dtype=None zp_dtype=torch.int8 "
     "observer='memoryless_minmax' observer_kwargs={}, num_bits=8 type='int' symmetric=True group_size=None "
     "strategy='tensor' block_structure=None dynamic=False actorder=None scale_dtype=None zp_dtype=torch.int8 "
     "observer='memoryless_minmax' observer_kwargs={}", NULL, NULL, 0, 0},

    /* the KV cache: CompressedTensorsKVCacheMethod.validate_kv_cache_scheme */
    {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{},\"kv_cache_scheme\":{\"num_bits\":8,\"type\":"
     "\"float\",\"strategy\":\"tensor\",\"symmetric\":true}}", "model.layers.0.self_attn.attn", ATT, NOCAP, QP_OK,
     "", "", "", QP_SCHEME_KV_CACHE, 0},
    {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{},\"kv_cache_scheme\":{\"num_bits\":8,\"type\":"
     "\"int\",\"strategy\":\"tensor\",\"symmetric\":true}}", "model.layers.0.self_attn.attn", ATT, NOCAP,
     QP_ERR_NOT_IMPLEMENTED,
     "Currently supported kv cache quantization is num_bits=8, type=float, however received num_bits=8, type=int",
     NULL, NULL, 0, 0},
    {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{},\"kv_cache_scheme\":{\"num_bits\":8,\"type\":"
     "\"float\",\"strategy\":\"channel\",\"symmetric\":true}}", "model.layers.0.self_attn.attn", ATT, NOCAP,
     QP_ERR_NOT_IMPLEMENTED, "~Invalid strategy for compressed-tensors KV cache.", NULL, NULL, 0, 0},
    {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{},\"kv_cache_scheme\":{\"num_bits\":8,\"type\":"
     "\"float\",\"strategy\":\"attn_head\",\"symmetric\":false}}", "model.layers.0.self_attn.attn", ATT, NOCAP,
     QP_ERR_NOT_IMPLEMENTED,
     "Only support symmetric scaling factor for compressed-tensors KV cache. However found symmetric: False", NULL,
     NULL, 0, 0},

    /* sparsity: any target refuses the model (vLLM: DeprecationWarning); none is fine */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}},\"sparsity_config\":{\"format\":"
     "\"sparse-24-bitmask\",\"sparsity_structure\":\"2:4\",\"targets\":[\"Linear\"]}}", DOWN, L, NOCAP,
     QP_ERR_UNSUPPORTED,
     "Sparsity support has been removed from compressed-tensors. Please use a model without sparsity configuration.",
     NULL, NULL, 0, 0},
    /* online transforms: qport's refusal (vLLM wraps the method) */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}},\"transform_config\":{\"config_groups\":"
     "{\"R1\":{\"type\":\"hadamard\"}}}}", DOWN, L, NOCAP, QP_ERR_UNSUPPORTED,
     "compressed-tensors transform_config (online rotations, CompressedTensorsLinearTransformMethod) is not supported "
     "by qport", NULL, NULL, 0, 0},
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}},\"sparsity_config\":{\"format\":"
     "\"dense\",\"targets\":[]},\"transform_config\":{}}", DOWN, L, NOCAP, QP_OK, "CompressedTensorsW8A8Fp8", NULL, NULL, QP_SCHEME_W8A8_FP8,
     89},
};

static void run_case(const ct_case *c, int i) {
    qp_config *cfg = tu_load(ctx, c->config);
    CHECK(cfg, "case %d: %s", i, qp_last_error(ctx));
    if (!cfg) return;
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.capability = c->capability;
    qp_scheme s;
    qp_status st = qp_config_resolve(cfg, c->layer, c->kind, &o, &s);
    CHECK(st == c->status, "case %d: status %s, want %s (%s)", i, qp_status_str(st), qp_status_str(c->status),
          qp_last_error(ctx));
    if (st == QP_OK && c->status == QP_OK) {
        const char *cls = c->kind == M ? s.method : s.scheme_class;
        CHECK(!strcmp(cls, c->cls), "case %d: class %s, want %s", i, cls, c->cls);
        if (c->kind == L) CHECK(!strcmp(s.method, "CompressedTensorsLinearMethod"), "case %d: %s", i, s.method);
        if (c->kind == ATT) CHECK(!strcmp(s.method, "CompressedTensorsKVCacheMethod"), "case %d: %s", i, s.method);
        CHECK(!c->wkey || !strcmp(s.weight_key, c->wkey), "case %d: weight key %s", i, s.weight_key);
        CHECK(!c->akey || !strcmp(s.activation_key, c->akey), "case %d: activation key %s", i, s.activation_key);
        CHECK(s.kind == c->sk, "case %d: kind %s", i, qp_scheme_kind_name(s.kind));
        CHECK(s.min_capability == c->min_cap, "case %d: min capability %d", i, s.min_capability);
    } else if (st != QP_OK) {
        const char *e = qp_last_error(ctx);
        bool ok = c->cls[0] == '~' ? strstr(e, c->cls + 1) != NULL : strstr(e, c->cls) != NULL;
        CHECK(ok, "case %d: message %s, want %s", i, e, c->cls);
    }
    qp_config_destroy(cfg);
}

#define LIN "CompressedTensorsLinearMethod"
#define UNQ "UnquantizedLinearMethod"
#define EMB "UnquantizedEmbeddingMethod"

/* targets and ignore (find_matched_target, should_ignore_layer) */
static void matching(void) {
    /* group A: q_proj by name, group B: k/v by regex, group C: the Linear class */
    const char *json =
        "{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\","
        "\"ignore\":[\"model.layers.0.mlp.gate_proj\",\"re:model\\\\.layers\\\\.2\\\\.mlp\\\\..*\"],"
        "\"config_groups\":{"
        "\"a\":{\"targets\":[\"model.layers.1.self_attn.q_proj\"],\"weights\":" I8G "},"
        "\"b\":{\"targets\":[\"re:.*self_attn\\\\.[kv]_proj$\"],\"weights\":" I4G(32) "},"
        "\"c\":{\"targets\":[\"Linear\"],\"weights\":" U4G "},"
        "\"e\":{\"targets\":[\"re:.*embed_tokens$\"],\"weights\":" I4G(128) "}}}";
    qp_config *cfg = tu_load(ctx, json);
    qp_scheme s;
    /* a fused layer whose shards fall in different groups takes the first shard's */
    CHECK(cfg && qp_config_resolve(cfg, "model.layers.1.self_attn.qkv_proj", L, NULL, &s) == QP_OK &&
              s.kind == QP_SCHEME_WNA16 && s.weight.group_size == 128,
          "qkv_proj of layer 1: %s", qp_last_error(ctx));
    /* layer 0 has no q_proj target: the fused match fails, the class matches */
    CHECK(cfg && qp_config_resolve(cfg, "model.layers.0.self_attn.qkv_proj", L, NULL, &s) == QP_OK &&
              s.kind == QP_SCHEME_W4A16_INT4 && !s.weight.symmetric,
          "qkv_proj of layer 0: %s", qp_last_error(ctx));
    /* a regex target for an unfused name */
    CHECK(cfg && qp_config_resolve(cfg, "model.layers.0.self_attn.k_proj", L, NULL, &s) == QP_OK &&
              s.weight.group_size == 32 && s.weight.symmetric,
          "k_proj: %s", qp_last_error(ctx));
    /* ignore: a shard named exactly, the other not: vLLM's error */
    EXPECT_ERR(cfg, ctx, "model.layers.0.mlp.gate_up_proj", L, NULL, QP_ERR_VALUE,
               "Found different quantization schemes for the shards of model.layers.0.mlp.gate_up_proj. vLLM "
               "requires all to use the same scheme.");
    EXPECT(cfg, ctx, "model.layers.0.mlp.gate_proj", L, NULL, QP_OK, UNQ, "", "", "");
    EXPECT(cfg, ctx, "model.layers.1.mlp.gate_up_proj", L, NULL, QP_OK, LIN, "CompressedTensorsWNA16",
           "kInt4StaticAsym", "");
    /* ignore by regex, fused and not */
    EXPECT(cfg, ctx, "model.layers.2.mlp.gate_up_proj", L, NULL, QP_OK, UNQ, "", "", "");
    EXPECT(cfg, ctx, "model.layers.2.mlp.down_proj", L, NULL, QP_OK, UNQ, "", "", "");
    /* "Linear" does not cover lm_head (a ParallelLMHead) */
    EXPECT(cfg, ctx, "lm_head", L, NULL, QP_OK, EMB, "", "", "");
    /* an embedding matched by a WNA16 int group */
    EXPECT(cfg, ctx, "model.embed_tokens", L, NULL, QP_OK, "CompressedTensorsEmbeddingWNA16Int", "", "", "");
    /* the layer-class option decides a class-name match */
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.layer_class = "ParallelLMHead";
    EXPECT(cfg, ctx, "model.layers.3.mlp.down_proj", L, &o, QP_OK, UNQ, "", "", "");
    o.layer_class = "ReplicatedLinear";
    EXPECT(cfg, ctx, "model.layers.3.mlp.down_proj", L, &o, QP_OK, LIN, "CompressedTensorsWNA16", NULL, NULL);
    /* experts: the Linear target covers RoutedExperts; layer 2's are ignored */
    EXPECT(cfg, ctx, "model.layers.1.mlp.experts", M, NULL, QP_OK, "CompressedTensorsWNA16MoEMethod", "", "kInt4StaticAsym", "");
    EXPECT(cfg, ctx, "model.layers.2.mlp.experts", M, NULL, QP_OK, "UnquantizedFusedMoEMethod", "", "", "");
    /* layer 0's experts.0.gate_proj is no ignore entry: the projections agree */
    EXPECT(cfg, ctx, "model.layers.0.mlp.experts", M, NULL, QP_OK, "CompressedTensorsWNA16MoEMethod", "", "kInt4StaticAsym", "");
    qp_config_destroy(cfg);

    /* lm_head targeted: its scheme (any); an embedding in fp8: vLLM's error */
    cfg = tu_load(ctx, "{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":"
                       "{\"g\":{\"targets\":[\"re:.*\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}}}");
    EXPECT(cfg, ctx, "lm_head", L, NULL, QP_OK, LIN, "CompressedTensorsW8A8Fp8", "kFp8StaticChannelSym",
           "kFp8DynamicTokenSym");
    EXPECT_ERR(cfg, ctx, "model.embed_tokens", L, NULL, QP_ERR_VALUE,
               "~compressed-tensors embeddings only support weight-only INT group/channel (WNA16) quantization, got: "
               "num_bits=8 type='float'");
    /* no kv_cache_scheme: the method still loads the scales, unquantized */
    qp_scheme a;
    CHECK(cfg && qp_config_resolve(cfg, "model.layers.0.self_attn.attn", ATT, NULL, &a) == QP_OK &&
              !strcmp(a.method, "CompressedTensorsKVCacheMethod") && a.kv_cache.dtype == QP_DTYPE_NONE,
          "attention without kv_cache_scheme: %s", qp_last_error(ctx));
    qp_config_destroy(cfg);

    /* the config's KV cache: what the method accepts, else none */
    static const struct { const char *kv; qp_dtype d; qp_granularity g; } kvs[] = {
        {"{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"attn_head\",\"symmetric\":true}", QP_DTYPE_F8_E4M3FN,
         QP_GRAN_CHANNEL},
        {"{\"num_bits\":8.0,\"type\":\"float\",\"strategy\":\"tensor\",\"symmetric\":true}", QP_DTYPE_F8_E4M3FN,
         QP_GRAN_TENSOR},
        {"{\"num_bits\":8,\"type\":\"int\",\"strategy\":\"tensor\",\"symmetric\":true}", QP_DTYPE_NONE, 0},
        {"{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"token\",\"symmetric\":true}", QP_DTYPE_NONE, 0},
        {"{\"num_bits\":8,\"type\":\"float\",\"strategy\":\"tensor\"}", QP_DTYPE_NONE, 0},
    };
    for (size_t i = 0; i < sizeof kvs / sizeof *kvs; i++) {
        char j[512];
        snprintf(j, sizeof j, "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{},\"kv_cache_scheme\":%s}",
                 kvs[i].kv);
        cfg = tu_load(ctx, j);
        qp_qtensor kv;
        CHECK(cfg && qp_config_kv_cache(cfg, &kv) == QP_OK && kv.dtype == kvs[i].d &&
                  (kv.dtype == QP_DTYPE_NONE || kv.granularity == kvs[i].g),
              "kv %zu: %s", i, qp_last_error(ctx));
        qp_status st = cfg ? qp_config_resolve(cfg, "model.layers.0.self_attn.attn", ATT, NULL, &a) : QP_ERR_INTERNAL;
        CHECK((st == QP_OK) == (kvs[i].d != QP_DTYPE_NONE) && (st != QP_OK || a.kv_cache.dtype == kvs[i].d),
              "kv %zu resolve %s", i, qp_status_str(st));
        qp_config_destroy(cfg);
    }

    /* MoE projections in different groups */
    cfg = tu_load(ctx, "{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{"
                       "\"a\":{\"targets\":[\"re:.*down_proj$\"],\"weights\":" I8G "},"
                       "\"b\":{\"targets\":[\"Linear\"],\"weights\":" I4G(128) "}}}");
    EXPECT_ERR(cfg, ctx, EXPERTS, M, NULL, QP_ERR_VALUE,
               "All MoE projections need to have same quantization scheme but found multiple");
    qp_config_destroy(cfg);

    /* dict order: a target written twice keeps its place and takes the later group */
    cfg = tu_load(ctx, "{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{"
                       "\"a\":{\"targets\":[\"Linear\",\"re:.*\"],\"weights\":" I8G "},"
                       "\"b\":{\"targets\":[\"Linear\"],\"weights\":" I4G(128) "}}}");
    EXPECT(cfg, ctx, DOWN, L, NULL, QP_OK, LIN, "CompressedTensorsWNA16", "kInt8Static", "");
    qp_config_summary sm;
    CHECK(cfg && qp_config_summarize(cfg, &sm) == QP_OK && sm.n_layer_patterns == 2 &&
              !strcmp(qp_config_layer_pattern(cfg, 0), "Linear") && qp_config_resolve_pattern(cfg, 0, NULL, &s) == QP_OK &&
              s.kind == QP_SCHEME_W4A16_INT4,
          "target table: %s", qp_last_error(ctx));
    qp_config_destroy(cfg);

    /* an Attention-only group is dropped (KV-cache quantization carries it) */
    cfg = tu_load(ctx, "{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{"
                       "\"a\":{\"targets\":[\"LlamaAttention\"],\"weights\":" F8T ",\"input_activations\":" F8T "}}}");
    EXPECT(cfg, ctx, DOWN, L, NULL, QP_OK, UNQ, "", "", "");
    CHECK(cfg && qp_config_summarize(cfg, &sm) == QP_OK && sm.n_layer_patterns == 0, "attention group kept");
    CHECK(skipped_groups == 1, "%d warnings for the dropped group", skipped_groups);
    qp_config_destroy(cfg);

    /* a bad regex in targets or ignore: a parse error naming the entry */
    qp_config *bad = NULL;
    const char *br = "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"a\":{\"targets\":[\"re:(\"],"
                     "\"weights\":" I8G "}}}";
    CHECK(qp_config_load_buffer(ctx, "t", br, strlen(br), &bad) == QP_ERR_PARSE && !bad &&
              strstr(qp_last_error(ctx), "config_groups.a.targets[0]"),
          "bad target regex: %s", qp_last_error(ctx));
    br = "{\"quant_method\":\"compressed-tensors\",\"ignore\":[\"x\",\"re:[\"],\"config_groups\":{}}";
    CHECK(qp_config_load_buffer(ctx, "t", br, strlen(br), &bad) == QP_ERR_PARSE && !bad &&
              strstr(qp_last_error(ctx), "ignore[1]"),
          "bad ignore regex: %s", qp_last_error(ctx));
    br = "{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"a\":{\"targets\":\"Linear\"}}}";
    CHECK(qp_config_load_buffer(ctx, "t", br, strlen(br), &bad) == QP_ERR_PARSE && !bad, "targets not a list");
}

/* The llm-compressor preset configs (whole config.json files). */
static void presets(void) {
    static const struct {
        const char *file, *layer;
        qp_layer_kind kind;
        const char *method, *cls, *wkey, *akey;
    } p[] = {
        {"ct-w8a8.json", "model.layers.0.self_attn.qkv_proj", L, LIN, "CompressedTensorsW8A8Int8",
         "kInt8StaticChannelSym", "kInt8DynamicTokenSym"},
        {"ct-w8a8-static.json", "model.layers.0.mlp.gate_up_proj", L, LIN, "CompressedTensorsW8A8Int8",
         "kInt8StaticTensorSym", "kInt8StaticTensorAsym"},
        {"ct-w4a16.json", "model.layers.1.mlp.down_proj", L, LIN, "CompressedTensorsWNA16", "kInt4Static", ""},
        {"ct-w4a16-asym.json", "model.layers.1.mlp.down_proj", L, LIN, "CompressedTensorsWNA16", "kInt4StaticAsym", ""},
        {"ct-w4a16-actorder-weight.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsWNA16",
         "kInt4Static", ""},
        {"ct-w8a16.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsWNA16", "kInt8Static", ""},
        {"ct-w4a8.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW4A8Int", "",
         "kInt8DynamicTokenSym"},
        {"ct-w4a8-pack.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsWNA8Int", "",
         "kInt8DynamicTokenSym"},
        {"ct-fp8.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW8A8Fp8", "kFp8StaticTensorSym",
         "kFp8StaticTensorSym"},
        {"ct-fp8-dynamic.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW8A8Fp8",
         "kFp8StaticChannelSym", "kFp8DynamicTokenSym"},
        {"ct-fp8-block.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW8A8Fp8",
         "kFp8Static128BlockSym", "kFp8Dynamic128Sym"},
        {"ct-nvfp4.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW4A4Fp4", "kNvfp4Static",
         "kNvfp4Dynamic"},
        {"ct-nvfp4a16.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW4A4Fp4", "kNvfp4Static", ""},
        {"ct-mxfp4.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW4A4Mxfp4", "kMxfp4Static",
         "kMxfp4Dynamic"},
        {"ct-mxfp8.json", "model.layers.0.self_attn.o_proj", L, LIN, "CompressedTensorsW8A8Mxfp8", "kMxfp8Static",
         "kMxfp8Dynamic"},
        {"ct-w8a8.json", "lm_head", L, "UnquantizedEmbeddingMethod", "", "", ""},
        {"ct-mixed-ignore-kv.json", "model.layers.0.self_attn.qkv_proj", L, LIN, "CompressedTensorsW8A8Fp8",
         "kFp8StaticChannelSym", "kFp8DynamicTokenSym"},
        {"ct-mixed-ignore-kv.json", "model.layers.0.mlp.gate_up_proj", L, LIN, "CompressedTensorsWNA16", "kInt4Static",
         ""},
        {"ct-mixed-ignore-kv.json", "model.layers.1.mlp.gate_up_proj", L, UNQ, "", "", ""},
        {"ct-mixed-ignore-kv.json", "model.layers.1.self_attn.attn", ATT, "CompressedTensorsKVCacheMethod", "", "", ""},
        {"ct-moe-w4a16.json", "model.layers.1.block_sparse_moe.experts", M, "CompressedTensorsWNA16MoEMethod", "",
         "kInt4Static", ""},
        {"ct-moe-w4a16.json", "model.layers.1.block_sparse_moe.gate", L, UNQ, "", "", ""},
        {"ct-moe-w4a16.json", "model.layers.1.self_attn.qkv_proj", L, LIN, "CompressedTensorsWNA16", "kInt4Static", ""},
        {"ct-moe-fp8-dynamic.json", "model.layers.0.block_sparse_moe.experts", M, "CompressedTensorsW8A8Fp8MoEMethod",
         "", "kFp8StaticChannelSym", "kFp8DynamicTokenSym"},
    };
    const char *dir = getenv("QPORT_CONFIGS");
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/configs", p[i].file);
        qp_config *cfg = NULL;
        qp_status st = qp_config_load_file(ctx, path, &cfg);
        CHECK(st == QP_OK, "%s: %s", p[i].file, qp_last_error(ctx));
        if (st != QP_OK) continue;
        CHECK(qp_config_method(cfg) == QP_METHOD_COMPRESSED_TENSORS &&
                  !strcmp(qp_method_name(qp_config_method(cfg)), "compressed-tensors"),
              "%s: method", p[i].file);
        tu_expect(cfg, ctx, p[i].layer, p[i].kind, NULL, QP_OK, p[i].method, p[i].cls, p[i].wkey, p[i].akey, p[i].file,
                  (int)i);
        qp_config_destroy(cfg);
    }
    /* refused presets: act-order groups, W4AFP8 off sm_90 (a 2:4 sparse
     * export: the sparsity cases above) */
    static const struct { const char *file; qp_status st; const char *msg; } r[] = {
        {"ct-w4a16-actorder-group.json", QP_ERR_VALUE, "~(actorder='group') is no longer supported"},
        {"ct-w4afp8.json", QP_ERR_NOT_IMPLEMENTED, "~No compressed-tensors compatible scheme"},
    };
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/configs", r[i].file);
        qp_config *cfg = NULL;
        CHECK(qp_config_load_file(ctx, path, &cfg) == QP_OK, "%s: %s", r[i].file, qp_last_error(ctx));
        tu_expect_error(cfg, ctx, "model.layers.0.mlp.down_proj", L, NULL, r[i].st, r[i].msg, r[i].file, (int)i);
        qp_config_destroy(cfg);
    }
    /* the preset's KV cache and ignore list as the config reports them */
    char path[1024];
    snprintf(path, sizeof path, "%s/ct-mixed-ignore-kv.json", dir ? dir : "tests/configs");
    qp_config *cfg = NULL;
    qp_qtensor kv;
    CHECK(qp_config_load_file(ctx, path, &cfg) == QP_OK && qp_config_kv_cache(cfg, &kv) == QP_OK &&
              kv.dtype == QP_DTYPE_F8_E4M3FN && kv.granularity == QP_GRAN_TENSOR &&
              !strcmp(qp_config_exclude(cfg, 1), "re:model\\.layers\\.1\\.mlp\\..*"),
          "mixed preset: %s", qp_last_error(ctx));
    qp_config_destroy(cfg);
}


/* ---- the sglang dialect: SGLang's CompressedTensorsConfig at
 * sgl-project/sglang 0104cc50eeb02378c3f04b2d8470a762449701fc
 * (compressed_tensors.py, schemes/), utils.py as stored at 06b5b190
 * (docs/semantics.md §21 "SGLang"). Each case names the SGLang function
 * it follows. */
typedef struct sgl_case {
    const char *config;
    const char *layer;
    qp_layer_kind kind;
    int capability;
    qp_status status;
    const char *method; /* NULL: not checked */
    const char *cls;    /* scheme class; on error SGLang's message, '~' prefix: contains */
    const char *wkey, *akey;
    qp_scheme_kind sk;
    int min_cap;
} sgl_case;

#define QKV "model.layers.0.self_attn.qkv_proj"
#define CTS(w, in, fmt, extra) \
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"" fmt "\"" extra ",\"config_groups\":" \
    "{\"group_0\":{\"targets\":[\"Linear\"],\"weights\":" w ",\"input_activations\":" in "}}}"
#define NOIN "null"

static const sgl_case sgl_cases[] = {
    /* agreement: _get_scheme_from_parts _is_fp8_w8a8 -> CompressedTensorsW8A8Fp8 at >= 89 */
    {CTS(F8CH, F8TOK, "float-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsW8A8Fp8",
     "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 89},
    /* agreement: _is_dynamic_token_w8a8 -> CompressedTensorsW8A8Int8, but its get_min_capability is 89 */
    {CTS(I8CH, I8TOK, "int-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsW8A8Int8",
     "kInt8StaticChannelSym", "kInt8DynamicTokenSym", QP_SCHEME_W8A8_INT8, 89},
    {CTS(I8CH, I8TOK, "int-quantized", ""), DOWN, L, 80, QP_ERR_CAPABILITY, NULL,
     "('Quantization scheme is not supported for ', 'the current GPU. Min capability: 89. ', 'Current capability: "
     "80.')", NULL, NULL, 0, 0},
    /* agreement: _is_wNa16_group_channel -> CompressedTensorsWNA16 (min 80 in SGLang) */
    {CTS(I4G(128), NOIN, "pack-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsWNA16", "kInt4Static", "",
     QP_SCHEME_W4A16_INT4, 80},
    /* _get_scheme_from_parts: WNA16_SUPPORTED_BITS is [4, 8]: other widths are SGLang's ImportError */
    {CTS(IBITS(3), NOIN, "pack-quantized", ""), DOWN, L, 90, QP_ERR_UNSUPPORTED, NULL,
     "ImportError: Other method (CompressedTensorsW4A16Sparse24) is not supported now", NULL, NULL, 0, 0},
    /* _quantization_scheme_map_from_config: input_activations only under an activation format, so
     * pack-quantized W4A8-int (vLLM: CompressedTensorsWNA8Int) is weight-only WNA16 */
    {CTS(I4G(128), I8TOK, "pack-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsWNA16", "kInt4Static", "",
     QP_SCHEME_W4A16_INT4, 80},
    /* _get_scheme_from_parts: no W4A8Int linear scheme (vLLM: CompressedTensorsW4A8Int) */
    {CTS(I4G(128), I8TOK, "int-quantized", ""), DOWN, L, 90, QP_ERR_NOT_IMPLEMENTED, NULL,
     "No compressed-tensors compatible scheme was found.", NULL, NULL, 0, 0},
    /* _is_fp8_w8a8 below CompressedTensorsW8A8Fp8.get_min_capability (89), and without a capability
     * (_check_scheme_supported(error=False) is False): CompressedTensorsW8A16Fp8, min 80 */
    {CTS(F8CH, F8TOK, "float-quantized", ""), DOWN, L, 86, QP_OK, LIN, "CompressedTensorsW8A16Fp8",
     "kFp8StaticChannelSym", "", QP_SCHEME_W8A16_FP8, 80},
    {CTS(F8CH, F8TOK, "float-quantized", ""), DOWN, L, NOCAP, QP_OK, LIN, "CompressedTensorsW8A16Fp8",
     "kFp8StaticChannelSym", "", QP_SCHEME_W8A16_FP8, 80},
    {CTS(F8CH, F8TOK, "float-quantized", ""), DOWN, L, 75, QP_ERR_CAPABILITY, NULL, "~Min capability: 80. ", NULL, NULL,
     0, 0},
    /* _is_fp8_w8a16 has no block strategy (vLLM's has): block fp8 weight-only finds no scheme */
    {CTS(F8BLK, NOIN, "float-quantized", ""), DOWN, L, 90, QP_ERR_NOT_IMPLEMENTED, NULL,
     "No compressed-tensors compatible scheme was found.", NULL, NULL, 0, 0},
    /* block fp8 W8A8 below 89: CompressedTensorsW8A16Fp8.create_weights knows tensor and channel only */
    {CTS(F8BLK, F8G128, "float-quantized", ""), DOWN, L, 86, QP_ERR_VALUE, NULL,
     "Unsupported weight strategy=block, supported strategies are [<QuantizationStrategy.CHANNEL: 'channel'>, "
     "<QuantizationStrategy.TENSOR: 'tensor'>]", NULL, NULL, 0, 0},
    {CTS(F8BLK, F8G128, "float-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsW8A8Fp8",
     "kFp8Static128BlockSym", "kFp8Dynamic128Sym", QP_SCHEME_W8A8_FP8_BLOCK, 89},
    /* _is_fp4a4_nvfp4: CompressedTensorsW4A4Fp4 needs 100, else weight-only CompressedTensorsW4A16Fp4 */
    {CTS(NV("false"), NV("\"local\""), "nvfp4-pack-quantized", ""), DOWN, L, 100, QP_OK, LIN,
     "CompressedTensorsW4A4Fp4", "kNvfp4Static", "kNvfp4Dynamic", QP_SCHEME_NVFP4, 100},
    {CTS(NV("false"), NV("\"local\""), "nvfp4-pack-quantized", ""), DOWN, L, 90, QP_OK, LIN,
     "CompressedTensorsW4A16Fp4", "kNvfp4Static", "", QP_SCHEME_NVFP4_A16, 80},
    /* _is_fp4a16_nvfp4 -> CompressedTensorsW4A16Fp4 */
    {CTS(NV("false"), NOIN, "nvfp4-pack-quantized", ""), DOWN, L, 90, QP_OK, LIN, "CompressedTensorsW4A16Fp4",
     "kNvfp4Static", "", QP_SCHEME_NVFP4_A16, 80},
    /* NVFP4 weights with fp8 input: SGLang's NotImplementedError (vLLM: ValueError) */
    {CTS(NV("false"), F8TOK, "nvfp4-pack-quantized", ""), DOWN, L, 100, QP_ERR_NOT_IMPLEMENTED, NULL,
     "Activation-quantized float4 is only supported in the NVFP4 layout (tensor_group, group_size 16); got "
     "strategy=", NULL, NULL, 0, 0},
    /* _is_mxfp4_linear -> CompressedTensorsW4A16Mxfp4, weight-only (vLLM: CompressedTensorsW4A4Mxfp4) */
    {CTS(MX(4, "false"), MX(4, "true"), "mxfp4-pack-quantized", ""), DOWN, L, 90, QP_OK, LIN,
     "CompressedTensorsW4A16Mxfp4", "kMxfp4Static", "", QP_SCHEME_CT_MXFP4, 80},
    /* MXFP8: no SGLang scheme (vLLM: CompressedTensorsW8A8Mxfp8) */
    {CTS(MX(8, "false"), MX(8, "true"), "float-quantized", ""), DOWN, L, 100, QP_ERR_NOT_IMPLEMENTED, NULL,
     "No compressed-tensors compatible scheme was found.", NULL, NULL, 0, 0},
    /* find_matched_target: nothing matches -> ValueError (vLLM: UnquantizedLinearMethod) */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"re:.*mlp.*\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}}}", "model.layers.0.self_attn.o_proj", L,
     90, QP_ERR_VALUE, NULL, "Unable to find matching target for model.layers.0.self_attn.o_proj in the "
     "compressed-tensors config.", NULL, NULL, 0, 0},
    /* find_matched_target: the class name before the fused shards (vLLM: the shards' group) */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{"
     "\"a\":{\"targets\":[\"re:.*self_attn\\\\.[qkv]_proj$\"],\"weights\":" F8T ",\"input_activations\":" F8T "},"
     "\"b\":{\"targets\":[\"Linear\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}}}", QKV, L, 90, QP_OK, LIN,
     "CompressedTensorsW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 89},
    /* should_ignore_layer: check_equal_or_regex_match is a case-insensitive substring */
    {CTS(F8CH, F8TOK, "float-quantized", ",\"ignore\":[\"MLP.DOWN\"]"), DOWN, L, 90, QP_OK, UNQ, "", "", "",
     QP_SCHEME_UNQUANTIZED, 0},
    /* should_ignore_layer: shards that disagree -> SGLang's ValueError */
    {CTS(F8CH, F8TOK, "float-quantized", ",\"ignore\":[\"self_attn.k_proj\"]"), QKV, L, 90, QP_ERR_VALUE, NULL,
     "Found a different quantization schemes for ['q_proj', 'k_proj', 'v_proj'] in "
     "model.layers.0.self_attn.qkv_proj. vLLM requires all to use the same scheme.", NULL, NULL, 0, 0},
    /* get_lm_head_scheme: a target naming lm_head quantizes it; Linear does not */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\",\"lm_head\"],\"weights\":" F8CH ",\"input_activations\":" F8TOK "}}}", "lm_head", L, 90, QP_OK, LIN,
     "CompressedTensorsW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 89},
    {CTS(F8CH, F8TOK, "float-quantized", ""), "lm_head", L, 90, QP_OK, EMB, "", "", "", QP_SCHEME_UNQUANTIZED, 0},
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"float-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\",\"lm_head\"],\"weights\":" F8BLK ",\"input_activations\":" F8G128 "}}}", "lm_head", L, 90,
     QP_ERR_NOT_IMPLEMENTED, NULL, "Block-quantized lm_head is not supported; use channel or tensor weight scales for "
     "the head.", NULL, NULL, 0, 0},
    /* get_quant_method: an embedding gets no compressed-tensors method (vLLM: EmbeddingWNA16Int) */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"re:.*embed_tokens$\"],\"weights\":" I4G(128) "}}}", "model.embed_tokens", L, 90, QP_OK, EMB, "", "", "",
     QP_SCHEME_UNQUANTIZED, 0},
    /* CompressedTensorsKVCacheMethod.is_supported_scheme: static symmetric per-tensor fp8 only */
    {CTS(F8CH, F8TOK, "float-quantized", ",\"kv_cache_scheme\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":"
     "\"tensor\",\"dynamic\":false}"), "model.layers.0.self_attn", ATT, 90, QP_OK, "CompressedTensorsKVCacheMethod", "",
     "", "", QP_SCHEME_KV_CACHE, 0},
    /* attn_head (vLLM: one scale per head) and int8 (vLLM: NotImplementedError): ignored, no method */
    {CTS(F8CH, F8TOK, "float-quantized", ",\"kv_cache_scheme\":{\"num_bits\":8,\"type\":\"float\",\"strategy\":"
     "\"attn_head\",\"symmetric\":true,\"dynamic\":false}"), "model.layers.0.self_attn", ATT, 90, QP_OK, "", "", "",
     "", QP_SCHEME_NONE, 0},
    {CTS(F8CH, F8TOK, "float-quantized", ",\"kv_cache_scheme\":{\"num_bits\":8,\"type\":\"int\",\"strategy\":"
     "\"tensor\",\"symmetric\":true,\"dynamic\":false}"), "model.layers.0.self_attn", ATT, 90, QP_OK, "", "", "", "",
     QP_SCHEME_NONE, 0},
    {CTS(F8CH, F8TOK, "float-quantized", ""), "model.layers.0.self_attn", ATT, 90, QP_OK, "", "", "", "",
     QP_SCHEME_NONE, 0},
    /* linear_fp8_config: not modelled, refused */
    {CTS(I4G(128), NOIN, "pack-quantized", ",\"linear_fp8_config\":{\"quant_method\":\"fp8\"}"), DOWN, L, 90,
     QP_ERR_UNSUPPORTED, NULL, "~linear_fp8_config", NULL, NULL, 0, 0},

    /* MoE (get_moe_scheme). Agreement: fp8 per-channel weights, per-token input */
    {CTS(F8CH, F8TOK, "float-quantized", ""), EXPERTS, M, 90, QP_OK, "CompressedTensorsW8A8Fp8MoE", NULL,
     "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8, 0},
    /* CompressedTensorsW8A8Fp8MoE.__init__: per-tensor weights with per-token input assert block */
    {CTS(F8T, F8TOK, "float-quantized", ""), EXPERTS, M, 90, QP_ERR_UNSUPPORTED, NULL, "~AssertionError", NULL, NULL,
     0, 0},
    /* WNA16: CompressedTensorsWNA16MoE (Marlin), CompressedTensorsWNA16TritonMoE on SM100 */
    {CTS(I4G(128), NOIN, "pack-quantized", ""), EXPERTS, M, 90, QP_OK, "CompressedTensorsWNA16MoE", NULL, "kInt4Static",
     "", QP_SCHEME_W4A16_INT4, 0},
    {CTS(I4G(128), NOIN, "pack-quantized", ""), EXPERTS, M, 100, QP_OK, "CompressedTensorsWNA16TritonMoE", NULL,
     "kInt4Static", "", QP_SCHEME_W4A16_INT4, 0},
    /* CompressedTensorsWNA16MoE.__init__: the config's format must be pack-quantized (the group's is not read) */
    {"{\"quant_method\":\"compressed-tensors\",\"format\":\"mixed-precision\",\"config_groups\":{\"g\":{\"targets\":"
     "[\"Linear\"],\"format\":\"pack-quantized\",\"weights\":" I4G(128) "}}}", EXPERTS, M, 90, QP_ERR_VALUE, NULL,
     "('For Fused MoE layers, only ', 'pack-quantized ', 'is supported for the following bits: ', '[4, 8]')", NULL,
     NULL, 0, 0},
    /* dynamic int8 experts: NPU only in SGLang (vLLM: CompressedTensorsW8A8Int8MoEMethod) */
    {CTS(I8CH, I8TOK, "int-quantized", ""), EXPERTS, M, 90, QP_ERR_NOT_IMPLEMENTED, NULL,
     "The W8A8Int8 Fused MoE scheme is implemented only for NPU for now.", NULL, NULL, 0, 0},
    /* _is_fp4a4_nvfp4: CompressedTensorsW4A4Nvfp4MoE from 100, else CompressedTensorsW4A16Nvfp4MoE */
    {CTS(NV("false"), NV("\"local\""), "nvfp4-pack-quantized", ""), EXPERTS, M, 100, QP_OK,
     "CompressedTensorsW4A4Nvfp4MoE", NULL, "kNvfp4Static", "kNvfp4Dynamic", QP_SCHEME_NVFP4, 0},
    {CTS(NV("false"), NV("\"local\""), "nvfp4-pack-quantized", ""), EXPERTS, M, 90, QP_OK,
     "CompressedTensorsW4A16Nvfp4MoE", NULL, "kNvfp4Static", "", QP_SCHEME_NVFP4_A16, 0},
    /* get_quant_method: _is_mxfp4_moe -> Mxfp4MoEMethod before the scheme path */
    {CTS(MX(4, "false"), NOIN, "mxfp4-pack-quantized", ""), EXPERTS, M, 90, QP_OK, "Mxfp4MoEMethod", NULL,
     "kMxfp4Static", "", QP_SCHEME_CT_MXFP4, 0},
    /* fp8 weight-only experts: _is_dynamic_token_w4a8 reads input_quant.num_bits of None */
    {CTS(F8CH, NOIN, "float-quantized", ""), EXPERTS, M, 90, QP_ERR_UNSUPPORTED, NULL,
     "AttributeError: 'NoneType' object has no attribute 'num_bits'", NULL, NULL, 0, 0},
    /* the experts' names are always .0.gate_proj/.0.up_proj/.0.down_proj; an ignored expert is unquantized */
    {CTS(F8CH, F8TOK, "float-quantized", ",\"ignore\":[\"re:.*experts.*\"]"), EXPERTS, M, 90, QP_OK,
     "UnquantizedFusedMoEMethod", NULL, "", "", QP_SCHEME_UNQUANTIZED, 0},
};

static void run_sgl_case(const sgl_case *c, int i) {
    qp_config *cfg = tu_load(ctx, c->config);
    CHECK(cfg, "sglang case %d: %s", i, qp_last_error(ctx));
    if (!cfg) return;
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.capability = c->capability;
    o.dialect = QP_DIALECT_SGLANG;
    qp_scheme s;
    qp_status st = qp_config_resolve(cfg, c->layer, c->kind, &o, &s);
    CHECK(st == c->status, "sglang case %d: status %s, want %s (%s)", i, qp_status_str(st), qp_status_str(c->status),
          qp_last_error(ctx));
    if (st == QP_OK && c->status == QP_OK) {
        const char *cls = c->kind == M ? s.method : s.scheme_class;
        if (c->kind == M) CHECK(!strcmp(s.method, c->method), "sglang case %d: method %s", i, s.method);
        else {
            CHECK(!c->method || !strcmp(s.method, c->method), "sglang case %d: method %s, want %s", i, s.method,
                  c->method);
            CHECK(!strcmp(cls, c->cls), "sglang case %d: class %s, want %s", i, cls, c->cls);
        }
        CHECK(!c->wkey || !strcmp(s.weight_key, c->wkey), "sglang case %d: weight key %s", i, s.weight_key);
        CHECK(!c->akey || !strcmp(s.activation_key, c->akey), "sglang case %d: activation key %s", i, s.activation_key);
        CHECK(s.kind == c->sk, "sglang case %d: kind %s", i, qp_scheme_kind_name(s.kind));
        CHECK(s.min_capability == c->min_cap, "sglang case %d: min capability %d", i, s.min_capability);
    } else if (st != QP_OK) {
        const char *e = qp_last_error(ctx);
        bool ok = c->cls[0] == '~' ? strstr(e, c->cls + 1) != NULL : strstr(e, c->cls) != NULL;
        CHECK(ok, "sglang case %d: message %s, want %s", i, e, c->cls);
    }
    qp_config_destroy(cfg);
}

int main(void) {
    if (qp_context_create(&ctx)) return 1;
    qp_set_log(ctx, on_log, NULL, QP_LOG_WARN);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], (int)i);
    matching();
    presets();
    for (size_t i = 0; i < sizeof sgl_cases / sizeof *sgl_cases; i++) run_sgl_case(&sgl_cases[i], (int)i);
    qp_context_destroy(ctx);
    return tu_finish("resolve-ct");
}
