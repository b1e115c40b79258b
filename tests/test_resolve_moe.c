/* MoE method choice as vLLM 0.34.0's QuarkMoEMethod.get_moe_method_target /
 * get_moe_method and each method's __init__ (vLLM 0.34.0's
 * quark/quark_moe.py): one case per branch and per error, the SGLang
 * dialect where it differs, the FusedMoE probe of _find_matched_config and
 * the all-or-nothing exclusion of experts, and the shared configs that
 * have experts. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define M QP_LAYER_MOE

static qp_context *ctx;

#define FP8T "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}"
#define FP8C "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"ch_axis\":0,\"is_dynamic\":false,\"symmetric\":true}"
#define FP8DT "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":true,\"symmetric\":true}"
#define FP8DTOK "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"ch_axis\":1,\"is_dynamic\":true,\"symmetric\":true}"
#define FP8BLK "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"is_dynamic\":false,\"symmetric\":true}"
#define FP8G128 "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"is_dynamic\":true,\"symmetric\":true}"
#define I8T "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}"
#define I8C "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":0,\"is_dynamic\":false,\"symmetric\":true}"
#define I8TA "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":false}"
#define I8DTOK "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":1,\"is_dynamic\":true,\"symmetric\":true}"
#define I8DTOKA "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"ch_axis\":1,\"is_dynamic\":true,\"symmetric\":false}"
#define MX(d, dyn) "{\"dtype\":\"" d "\",\"qscheme\":\"per_group\",\"group_size\":32,\"scale_format\":\"e8m0\",\"is_dynamic\":" dyn "}"
#define FP4G16(dyn) "{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"is_dynamic\":" dyn "}"
#define I4C "{\"dtype\":\"int4\",\"qscheme\":\"per_channel\",\"ch_axis\":0,\"is_dynamic\":false,\"symmetric\":true}"
#define U4G "{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":128,\"is_dynamic\":false,\"symmetric\":false}"
#define I4G32 "{\"dtype\":\"int4\",\"qscheme\":\"per_group\",\"group_size\":32,\"is_dynamic\":false,\"symmetric\":true}"
#define I4G128 "{\"dtype\":\"int4\",\"qscheme\":\"per_group\",\"group_size\":128,\"is_dynamic\":false,\"symmetric\":true}"
#define FP8BLKE8 "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"is_dynamic\":false,\"symmetric\":true,\"scale_type\":\"float8_e8m0fnu\"}"
#define MXFP8A "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"is_dynamic\":true,\"symmetric\":true}"
#define MXFP8B(r) "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[" r ",32],\"scale_type\":\"float8_e8m0fnu\",\"symmetric\":true,\"is_dynamic\":false}"

typedef struct moe_case {
    const char *weight, *input;  /* JSON of global_quant_config.weight / input_tensors */
    qp_status status;
    const char *cls;             /* scheme class, or the message (prefix ~: contains) */
    const char *wkey, *akey;
    qp_scheme_kind kind;
} moe_case;

static const moe_case cases[] = {
    /* QuarkW8A8Fp8MoEMethod: per-tensor with per-tensor, per-channel with per-token, per-block with per-group */
    {FP8T, FP8T, QP_OK, "QuarkW8A8Fp8MoEMethod", "kFp8StaticTensorSym", "kFp8StaticTensorSym", QP_SCHEME_W8A8_FP8},
    {FP8T, FP8DT, QP_OK, "QuarkW8A8Fp8MoEMethod", "kFp8StaticTensorSym", "kFp8DynamicTensorSym", QP_SCHEME_W8A8_FP8},
    {FP8C, FP8DTOK, QP_OK, "QuarkW8A8Fp8MoEMethod", "kFp8StaticChannelSym", "kFp8DynamicTokenSym", QP_SCHEME_W8A8_FP8},
    {FP8C, FP8T, QP_ERR_VALUE,
     "For FP8 Fused MoE layers, only per-tensor, per-channel and per-block scales for weights and activations are "
     "supported. Found per_channel, per_tensor", NULL, NULL, 0},
    {FP8T, FP8DTOK, QP_ERR_VALUE,
     "For FP8 Fused MoE layers, only per-tensor, per-channel and per-block scales for weights and activations are "
     "supported. Found per_tensor, per_channel", NULL, NULL, 0},
    /* 0.34.0: per-block (128x128) experts run; e8m0 block scales are no key of the method */
    {FP8BLK, FP8G128, QP_OK, "QuarkW8A8Fp8MoEMethod", "kFp8Static128BlockSym", "kFp8Dynamic128Sym",
     QP_SCHEME_W8A8_FP8_BLOCK},
    {FP8BLKE8, FP8G128, QP_ERR_VALUE, "Unsupported weight quant key: QuantKey(f8e4m3fn,scale(f8e8m0fnu,static,GroupShape(row=128, col=128)),symmetric)", NULL, NULL, 0},
    /* per-block with static or per-token input, or without block_size: no predicate matches */
    {FP8BLK, FP8T, QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    {FP8BLK, FP8DTOK, QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    {"{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"is_dynamic\":false,\"symmetric\":true}", FP8G128,
     QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    /* QuarkW8A8Int8MoEMethod; asymmetric activation keys become symmetric */
    {I8C, I8DTOK, QP_OK, "QuarkW8A8Int8MoEMethod", "kInt8StaticChannelSym", "kInt8DynamicTokenSym", QP_SCHEME_W8A8_INT8},
    {I8T, I8T, QP_OK, "QuarkW8A8Int8MoEMethod", "kInt8StaticTensorSym", "kInt8StaticTensorSym", QP_SCHEME_W8A8_INT8},
    {I8T, I8TA, QP_OK, "QuarkW8A8Int8MoEMethod", "kInt8StaticTensorSym", "kInt8StaticTensorSym", QP_SCHEME_W8A8_INT8},
    {I8C, I8DTOKA, QP_OK, "QuarkW8A8Int8MoEMethod", "kInt8StaticChannelSym", "kInt8DynamicTokenSym", QP_SCHEME_W8A8_INT8},
    /* 0.34.0: QuarkW4A16Int4MoEMethod (group size from the config, symmetry from the key) */
    {U4G, "null", QP_OK, "QuarkW4A16Int4MoEMethod", "kInt4StaticAsym", "", QP_SCHEME_W4A16_INT4},
    {I4G128, "null", QP_OK, "QuarkW4A16Int4MoEMethod", "kInt4Static", "", QP_SCHEME_W4A16_INT4},
    {I4G32, "null", QP_OK, "QuarkW4A16Int4MoEMethod", "kInt4Static32", "", QP_SCHEME_W4A16_INT4},
    {"{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":32,\"symmetric\":false}", "null", QP_OK,
     "QuarkW4A16Int4MoEMethod", "kInt4Static32Asym", "", QP_SCHEME_W4A16_INT4},
    {"{\"dtype\":\"int4\",\"qscheme\":\"per_channel\",\"group_size\":-1,\"symmetric\":true}", "null", QP_ERR_VALUE,
     "Quark W4A16 weight.group_size must be a positive int, got -1", NULL, NULL, 0},
    {"{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"symmetric\":false}", "null", QP_ERR_VALUE,
     "Quark W4A16 INT4/UINT4 configs must specify weight.group_size", NULL, NULL, 0},
    {"{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":128}", "null", QP_ERR_VALUE,
     "Quark W4A16 INT4/UINT4 configs must specify weight.symmetric", NULL, NULL, 0},
    {"{\"dtype\":\"uint4\",\"group_size\":128,\"symmetric\":0}", "null", QP_ERR_VALUE,
     "Quark W4A16 weight.symmetric must be a bool, got 0", NULL, NULL, 0},
    /* int4 with activations is no W4A16, and nothing else takes it */
    {U4G, FP8DT, QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    /* QuarkOCP_MX_MoEMethod: weight-only, MX activations, static fp8 */
    {MX("fp4", "false"), "null", QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp4Static", "", QP_SCHEME_OCP_MX},
    {MX("fp4", "false"), MX("fp4", "true"), QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp4Static", "kMxfp4Dynamic", QP_SCHEME_OCP_MX},
    {MX("fp4", "false"), MX("fp6_e3m2", "true"), QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp4Static", "kMxfp6E3M2Dynamic",
     QP_SCHEME_OCP_MX},
    {MX("fp6_e2m3", "false"), MX("fp6_e2m3", "true"), QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp6E2M3Static",
     "kMxfp6E2M3Dynamic", QP_SCHEME_OCP_MX},
    {MX("fp6_e3m2", "false"), "null", QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp6E3M2Static", "", QP_SCHEME_OCP_MX},
    {MX("fp4", "false"), FP8T, QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp4Static", "kFp8StaticTensorSym",
     QP_SCHEME_W4A8_MXFP4_FP8},
    /* w_mxfp6_*_a_fp8: __init__ accepts it (qp_moe_create refuses, as vLLM does after loading) */
    {MX("fp6_e3m2", "false"), FP8T, QP_OK, "QuarkOCP_MX_MoEMethod", "kMxfp6E3M2Static", "kFp8StaticTensorSym",
     QP_SCHEME_OCP_MX},
    {MX("fp4", "false"), FP8DT, QP_ERR_NOT_IMPLEMENTED,
     "QuarkOCP_MX_MoEMethod with dynamic input scales is currently not implemented for OCP MX scheme w_mxfp4_a_fp8. "
     "Please open an issue.", NULL, NULL, 0},
    {MX("fp6_e2m3", "false"), FP8DT, QP_ERR_NOT_IMPLEMENTED, "~OCP MX scheme w_mxfp6_e2m3_a_fp8. Please open an issue.",
     NULL, NULL, 0},
    {MX("fp6_e3m2", "false"), MX("fp4", "true"), QP_ERR_VALUE,
     "Unsupported OCP MX dtype combination for MoE: input_dtype=mxfp4, weight_dtype=mxfp6_e3m2. Supported MoE weight "
     "dtypes are mxfp4, mxfp6_e3m2, and mxfp6_e2m3.", NULL, NULL, 0},
    {MX("fp6_e2m3", "false"), MX("fp6_e3m2", "true"), QP_ERR_VALUE,
     "~input_dtype=mxfp6_e3m2, weight_dtype=mxfp6_e2m3.", NULL, NULL, 0},
    /* 0.34.0: the method's explicit key lists refuse MXFP8 activations */
    {MX("fp4", "false"), MXFP8A, QP_ERR_VALUE, "Unsupported activation quant key: QuantKey(f8e4m3fn,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)", NULL, NULL, 0},
    /* 0.34.0: MXFP8 experts are QuarkW8A8Mxfp8MoEMethod (dynamic MXFP8 activations only) */
    {MX("fp8_e4m3", "false"), MXFP8A, QP_OK, "QuarkW8A8Mxfp8MoEMethod", "kMxfp8Static", "kMxfp8Dynamic",
     QP_SCHEME_OCP_MX},
    {MXFP8B("1"), MXFP8A, QP_OK, "QuarkW8A8Mxfp8MoEMethod", "kMxfp8Static", "kMxfp8Dynamic", QP_SCHEME_OCP_MX},
    {MX("fp8_e4m3", "false"), "null", QP_ERR_VALUE, "Unsupported activation quant key: None", NULL, NULL, 0},
    {MX("fp8_e4m3", "false"), MX("fp4", "true"), QP_ERR_VALUE, "Unsupported activation quant key: QuantKey(u8,scale(u8,dynamic,GroupShape(row=1, col=32)),symmetric)", NULL,
     NULL, 0},
    {MX("fp8_e4m3", "false"), FP8T, QP_ERR_VALUE, "Unsupported activation quant key: QuantKey(f8e4m3fn,scale(f32,static,per_tensor),symmetric)", NULL, NULL, 0},
    {MXFP8B("32"), MXFP8A, QP_ERR_NOT_IMPLEMENTED,
     "Quark MXFP8 MoE experts support only the 1-D per_group (group_size=32, e8m0) weight spelling, got {'dtype': "
     "'fp8_e4m3', 'qscheme': 'per_block', 'block_size': [32, 32], 'scale_type': 'float8_e8m0fnu', 'symmetric': True, "
     "'is_dynamic': False} for model.layers.1.mlp.experts", NULL, NULL, 0},
    /* static MX activations are no OCP MX match: nothing else takes them */
    {MX("fp4", "false"), MX("fp4", "false"), QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    /* lists: NVFP4 and the int4 W4A8-FP8 method (ROCm AITER only) */
    {"[" FP4G16("false") "," FP8T "]", "[" FP4G16("true") "," FP8T "]", QP_OK, "QuarkNvfp4MoEMethod", "kNvfp4Static",
     "kNvfp4Dynamic", QP_SCHEME_NVFP4},
    {"[" FP8T "," I4C "]", FP8DT, QP_ERR_UNSUPPORTED, "AssertionError: W4A8 FP8 MoE requires ROCm AITER fused MoE support.",
     NULL, NULL, 0},
    {"[" FP8T "," I4C "]", "[" FP8T "]", QP_ERR_UNSUPPORTED, "~ROCm AITER", NULL, NULL, 0},
    {"[" FP8T "," I8C "]", FP8T, QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme", NULL, NULL, 0},
    /* a one-entry list is unwrapped */
    {"[" FP8T "]", "[" FP8T "]", QP_OK, "QuarkW8A8Fp8MoEMethod", "kFp8StaticTensorSym", "kFp8StaticTensorSym",
     QP_SCHEME_W8A8_FP8},
    {"[" U4G "]", "null", QP_OK, "QuarkW4A16Int4MoEMethod", "kInt4StaticAsym", "", QP_SCHEME_W4A16_INT4},
    /* an OCP MX activation dtype vLLM does not know */
    {MX("fp4", "false"), MX("fp3", "true"), QP_ERR_VALUE, "~Unsupported input_dtype=mxfp3", NULL, NULL, 0},
};

static char *config(const char *w, const char *in, const char *extra) {
    static const char *fmt =
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
        "\"global_quant_config\":{\"weight\":%s,\"input_tensors\":%s,\"output_tensors\":null,\"bias\":null},"
        "\"layer_quant_config\":{%s},\"layer_type_quant_config\":{},\"exclude\":[\"lm_head\"]}";
    size_t n = strlen(fmt) + strlen(w) + strlen(in) + strlen(extra) + 1;
    char *s = malloc(n);
    snprintf(s, n, fmt, w, in, extra);
    return s;
}

static void run_case(const moe_case *c, int i) {
    char *json = config(c->weight, c->input, "");
    qp_config *cfg = tu_load(ctx, json);
    CHECK(cfg, "case %d: %s", i, qp_last_error(ctx));
    if (cfg) {
        qp_scheme s;
        qp_status st = qp_config_resolve(cfg, "model.layers.1.mlp.experts", M, NULL, &s);
        CHECK(st == c->status, "case %d: status %s, want %s (%s)", i, qp_status_str(st), qp_status_str(c->status),
              qp_last_error(ctx));
        if (st == QP_OK && c->status == QP_OK) {
            CHECK(!strcmp(s.method, "QuarkMoEMethod") && !strcmp(s.scheme_class, c->cls), "case %d: %s / %s", i,
                  s.method, s.scheme_class);
            CHECK(!strcmp(s.weight_key, c->wkey) && !strcmp(s.activation_key, c->akey), "case %d: keys %s %s", i, s.weight_key,
                  s.activation_key);
            CHECK(s.kind == c->kind, "case %d: kind %s", i, qp_scheme_kind_name(s.kind));
        } else if (st != QP_OK) {
            const char *e = qp_last_error(ctx);
            bool ok = c->cls[0] == '~' ? strstr(e, c->cls + 1) != NULL : strstr(e, c->cls) != NULL;
            CHECK(ok, "case %d: message %s, want %s", i, e, c->cls);
        }
        qp_config_destroy(cfg);
    }
    free(json);
}

int main(void) {
    if (qp_context_create(&ctx)) return 1;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], (int)i);

    qp_resolve_options o;
    qp_resolve_options_init(&o);
    /* no capability checks of the MoE methods' own: fp8 experts on sm_80 */
    o.capability = 80;
    char *json = config(FP8T, FP8T, "");
    qp_config *cfg = tu_load(ctx, json);
    EXPECT(cfg, ctx, "model.layers.1.mlp.experts", M, &o, QP_OK, "QuarkMoEMethod", "QuarkW8A8Fp8MoEMethod",
           "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    /* SGLang: its own classes, its capability check, no int8 */
    o.dialect = QP_DIALECT_SGLANG;
    EXPECT_ERR(cfg, ctx, "model.layers.1.mlp.experts", M, &o, QP_ERR_CAPABILITY, "~Min capability: 89");
    o.capability = 90;
    EXPECT(cfg, ctx, "model.layers.1.mlp.experts", M, &o, QP_OK, "QuarkFusedMoEMethod", "QuarkW8A8FP8MoE",
           "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    qp_config_destroy(cfg);
    free(json);
    json = config(I8C, I8DTOK, "");
    cfg = tu_load(ctx, json);
    EXPECT_ERR(cfg, ctx, "model.layers.1.mlp.experts", M, &o, QP_ERR_CAPABILITY, "Unsupported FusedMoe scheme");
    qp_config_destroy(cfg);
    free(json);
    json = config(MX("fp4", "false"), MX("fp4", "true"), "");
    cfg = tu_load(ctx, json);
    EXPECT(cfg, ctx, "model.layers.1.mlp.experts", M, &o, QP_OK, "QuarkFusedMoEMethod", "QuarkW4A4MXFp4MoE",
           "kMxfp4Static", "kMxfp4Dynamic");
    qp_config_destroy(cfg);
    free(json);

    /* the FusedMoE probe: a per-layer config for experts.0.gate_proj decides
     * the experts' method; excluding every expert makes them unquantized,
     * excluding some is vLLM's error */
    json = config(FP8T, FP8T, "\"model.layers.2.mlp.experts.0.gate_proj\":{\"weight\":" I8C ",\"input_tensors\":" I8DTOK
                              ",\"output_tensors\":null,\"bias\":null}");
    cfg = tu_load(ctx, json);
    EXPECT(cfg, ctx, "model.layers.2.mlp.experts", M, NULL, QP_OK, "QuarkMoEMethod", "QuarkW8A8Int8MoEMethod",
           "kInt8StaticChannelSym", "kInt8DynamicTokenSym");
    EXPECT(cfg, ctx, "model.layers.3.mlp.experts", M, NULL, QP_OK, "QuarkMoEMethod", "QuarkW8A8Fp8MoEMethod", NULL, NULL);
    qp_config_destroy(cfg);
    free(json);

    /* the shared config with experts: DeepSeek-V3.2 MXFP4 */
    const char *dir = getenv("QPORT_CONFIGS");
    char path[1024];
    snprintf(path, sizeof path, "%s/gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", dir ? dir : "tests/configs");
    if (!qp_config_load_file(ctx, path, &cfg)) {
        EXPECT(cfg, ctx, "model.layers.3.mlp.experts", M, NULL, QP_OK, "QuarkMoEMethod", "QuarkOCP_MX_MoEMethod",
               "kMxfp4Static", "kMxfp4Dynamic");
        qp_config_destroy(cfg);
    } else {
        CHECK(0, "%s", qp_last_error(ctx));
    }

    /* other methods' FusedMoE: QQQConfig.get_quant_method gives nothing for
     * a FusedMoE (its unquantized method), Fp8Config gives Fp8MoEMethod */
    cfg = tu_load(ctx, "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":-1}");
    qp_scheme s;
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", M, NULL, &s) && s.kind == QP_SCHEME_UNQUANTIZED &&
              !strcmp(s.method, "UnquantizedFusedMoEMethod"),
          "qqq moe: %s %s", qp_last_error(ctx), cfg ? s.method : "");
    qp_config_destroy(cfg);
    cfg = tu_load(ctx, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\"}");
    CHECK(cfg && !qp_config_resolve(cfg, "model.layers.0.mlp.experts", M, NULL, &s) && s.kind == QP_SCHEME_HF_FP8 &&
              !strcmp(s.method, "Fp8MoEMethod"),
          "fp8 moe: %s", qp_last_error(ctx));
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return tu_finish("resolve-moe");
}
