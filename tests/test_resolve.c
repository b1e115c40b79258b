/* Scheme resolution: every predicate branch and error message of docs/semantics.md §1-§4,
 * §9, §19, §20 on small configs, and the published configs in ../shared. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define L QP_LAYER_LINEAR
#define A QP_LAYER_ATTENTION
#define M QP_LAYER_MOE

static qp_context *ctx;

/* A Quark config with the given global weight and input_tensors specs. */
static qp_config *quark(const char *weight, const char *input) {
    char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
             "\"global_quant_config\":{\"weight\":%s,\"input_tensors\":%s,\"output_tensors\":null,\"bias\":null},"
             "\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
             weight, input);
    qp_config *c = tu_load(ctx, buf);
    if (!c) { tu_failures++; fprintf(stderr, "FAIL: load: %s\n%s\n", qp_last_error(ctx), buf); }
    return c;
}

#define W_FP8_T "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}"
#define W_FP8_C "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"is_dynamic\":false}"
#define I_FP8_ST "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}"
#define I_FP8_DT "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":true}"
#define I_FP8_DC "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"is_dynamic\":true}"
#define W_I8_C "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false}"
#define W_I8_T "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false}"
#define MX_W(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"scale_format\":\"e8m0\",\"is_dynamic\":false}"
#define MX_I(dt) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":32,\"scale_format\":\"e8m0\",\"is_dynamic\":true}"

static void one(const char *w, const char *in, qp_status st, const char *scheme, const char *wk, const char *ak, int line) {
    qp_config *c = quark(w, in);
    tu_expect(c, ctx, "model.layers.0.mlp.down_proj", L, NULL, st, st == QP_OK ? "QuarkLinearMethod" : NULL, scheme,
              wk, ak, __FILE__, line);
    qp_config_destroy(c);
}
#define ONE(w, in, st, s, wk, ak) one(w, in, st, s, wk, ak, __LINE__)

static void one_err(const char *w, const char *in, qp_status st, const char *msg, int line) {
    qp_config *c = quark(w, in);
    tu_expect_error(c, ctx, "model.layers.0.mlp.down_proj", L, NULL, st, msg, __FILE__, line);
    qp_config_destroy(c);
}
#define ONE_ERR(w, in, st, msg) one_err(w, in, st, msg, __LINE__)

static void predicates(void) {
    /* fp8 (docs/semantics.md §4 _is_fp8_w8a8) */
    ONE(W_FP8_T, I_FP8_ST, QP_OK, "QuarkW8A8Fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    ONE(W_FP8_C, I_FP8_ST, QP_OK, "QuarkW8A8Fp8", "kFp8StaticChannelSym", "kFp8StaticTensorSym");
    ONE(W_FP8_T, I_FP8_DT, QP_OK, "QuarkW8A8Fp8", "kFp8StaticTensorSym", "kFp8DynamicTensorSym");
    ONE(W_FP8_C, I_FP8_DC, QP_OK, "QuarkW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym");
    /* dynamic per_group input on per-tensor weights: any other qscheme → tensor */
    ONE(W_FP8_T, "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"is_dynamic\":true}", QP_OK, "QuarkW8A8Fp8",
        "kFp8StaticTensorSym", "kFp8DynamicTensorSym");
    /* static per_channel input is not supported */
    ONE_ERR(W_FP8_T, "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\",\"is_dynamic\":false}", QP_ERR_NOT_IMPLEMENTED,
            "No quark compatible scheme was found. Weight config: {'dtype': 'fp8_e4m3', 'qscheme': 'per_tensor', "
            "'is_dynamic': False}, Input config: {'dtype': 'fp8_e4m3', 'qscheme': 'per_channel', 'is_dynamic': False}");
    /* typos: vLLM's message, then qport's note naming the key or value and the nearest valid one */
    ONE_ERR("{\"dtype\":\"int8\",\"qscheme\":\"per_chanel\",\"symmetric\":true,\"is_dynamic\":false}", I_FP8_ST,
            QP_ERR_NOT_IMPLEMENTED,
            "No quark compatible scheme was found. Weight config: {'dtype': 'int8', 'qscheme': 'per_chanel', 'symmetric': True, "
            "'is_dynamic': False}, Input config: {'dtype': 'fp8_e4m3', 'qscheme': 'per_tensor', 'is_dynamic': False} (qport: "
            "qscheme 'per_chanel' in the weight config is not one Quark writes (did you mean 'per_channel'?))");
    ONE_ERR("{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symetric\":true,\"is_dynamic\":false}",
            "{\"dtype\":\"int9\",\"qscheme\":\"per_channel\",\"is_dynamic\":true,\"zzzz_new_field\":1}", QP_ERR_NOT_IMPLEMENTED,
            "~}, Input config: {'dtype': 'int9', 'qscheme': 'per_channel', 'is_dynamic': True, 'zzzz_new_field': 1} (qport: "
            "unknown key 'symetric' in the weight config (did you mean 'symmetric'?); dtype 'int9' in the input config is "
            "not one Quark writes (did you mean 'int8'?))");
    ONE_ERR("{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false}",
            "{\"dtype\":\"qqqqq\",\"qscheme\":\"per_channel\",\"is_dynamic\":true}", QP_ERR_NOT_IMPLEMENTED,
            "~'is_dynamic': True} (qport: dtype 'qqqqq' in the input config is not one Quark writes)");
    /* dynamic weights never match */
    ONE_ERR("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":true}", I_FP8_ST, QP_ERR_NOT_IMPLEMENTED,
            "~No quark compatible scheme was found.");
    /* per-block */
    ONE("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"symmetric\":true,\"is_dynamic\":false}",
        "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":true,\"is_dynamic\":true}", QP_OK,
        "QuarkW8A8Fp8PerBlock", "kFp8Static128BlockSym", "kFp8Dynamic128Sym");
    ONE("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"symmetric\":true,\"is_dynamic\":false,"
        "\"scale_type\":\"float8_e8m0fnu\"}",
        "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":true,\"is_dynamic\":true}", QP_OK,
        "QuarkW8A8Fp8PerBlock", "kFp8Static128BlockE8M0Sym", "kFp8Dynamic128Sym");
    ONE_ERR("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"symmetric\":true}", I_FP8_DT, QP_ERR_VALUE,
            "Quark W8A8 FP8 per-block weight quantization requires `block_size` in the weight quantization config.");
    ONE_ERR("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[64,64],\"symmetric\":true}",
            "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":true,\"is_dynamic\":true}",
            QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");
    /* per-block with static input does not match */
    ONE_ERR("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[128,128],\"symmetric\":true}", I_FP8_ST,
            QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");

    /* int8 (docs/semantics.md §4 _is_w8a8_int8) */
    ONE(W_I8_C, "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticChannelSym", "kInt8StaticTensorSym");
    ONE(W_I8_T, "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"symmetric\":false,\"is_dynamic\":false}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticTensorSym", "kInt8StaticTensorAsym");
    /* symmetric null is not `True`: asymmetric */
    ONE(W_I8_T, "{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\",\"symmetric\":null,\"is_dynamic\":false}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticTensorSym", "kInt8StaticTensorAsym");
    ONE(W_I8_C, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticChannelSym", "kInt8DynamicTokenSym");
    ONE(W_I8_C, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":false,\"is_dynamic\":true}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticChannelSym", "kInt8DynamicTokenAsym");
    ONE(W_I8_T, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true}", QP_OK,
        "QuarkW8A8Int8", "kInt8StaticTensorSym", "kInt8DynamicTensorSym");
    ONE(W_I8_T, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"is_dynamic\":true}", QP_OK, "QuarkW8A8Int8",
        "kInt8StaticTensorSym", "kInt8DynamicTensorAsym");
    /* asymmetric weights rejected; is_dynamic must be `is True` for dynamic input */
    ONE_ERR("{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":false}",
            "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"is_dynamic\":true}", QP_ERR_NOT_IMPLEMENTED,
            "~No quark compatible scheme was found.");
    ONE_ERR(W_I8_C, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"is_dynamic\":1}", QP_ERR_NOT_IMPLEMENTED,
            "~No quark compatible scheme was found.");

    /* W4A16 (docs/semantics.md §17) */
    ONE("{\"dtype\":\"int4\",\"qscheme\":\"per_group\",\"group_size\":128,\"symmetric\":true}", "null", QP_OK,
        "QuarkW4A16Int4", "kInt4Static", "");
    ONE("{\"dtype\":\"int4\",\"qscheme\":\"per_group\",\"group_size\":32,\"symmetric\":true}", "null", QP_OK,
        "QuarkW4A16Int4", "kInt4Static32", "");
    ONE("{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":64,\"symmetric\":false}", "null", QP_OK,
        "QuarkW4A16Int4", "kInt4StaticAsym", "");
    ONE("{\"dtype\":\"uint4\",\"qscheme\":\"per_group\",\"group_size\":32,\"symmetric\":false}", "null", QP_OK,
        "QuarkW4A16Int4", "kInt4Static32Asym", "");
    /* 0.34.0: -1 (one group over K in older revisions) is no positive int */
    ONE_ERR("{\"dtype\":\"int4\",\"qscheme\":\"per_channel\",\"group_size\":-1,\"symmetric\":true}", "null",
            QP_ERR_VALUE, "Quark W4A16 weight.group_size must be a positive int, got -1");
    ONE_ERR("{\"dtype\":\"int4\",\"symmetric\":true}", "null", QP_ERR_VALUE,
            "Quark W4A16 INT4/UINT4 configs must specify weight.group_size");
    ONE_ERR("{\"dtype\":\"int4\",\"group_size\":128}", "null", QP_ERR_VALUE,
            "Quark W4A16 INT4/UINT4 configs must specify weight.symmetric");
    ONE_ERR("{\"dtype\":\"int4\",\"group_size\":\"x\",\"symmetric\":true}", "null", QP_ERR_VALUE,
            "Quark W4A16 weight.group_size must be a positive int, got 'x'");
    ONE_ERR("{\"dtype\":\"int4\",\"group_size\":0,\"symmetric\":true}", "null", QP_ERR_VALUE,
            "Quark W4A16 weight.group_size must be a positive int, got 0");
    ONE_ERR("{\"dtype\":\"int4\",\"group_size\":128,\"symmetric\":\"yes\"}", "null", QP_ERR_VALUE,
            "Quark W4A16 weight.symmetric must be a bool, got 'yes'");
    /* int4 with an input config is not W4A16 */
    ONE_ERR("{\"dtype\":\"int4\",\"group_size\":128,\"symmetric\":true}", I_FP8_DT, QP_ERR_NOT_IMPLEMENTED,
            "~No quark compatible scheme was found.");

    /* W4A8 MXFP4 + FP8 */
    ONE(MX_W("fp4"), "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false,\"symmetric\":true}", QP_OK,
        "QuarkW4A8_MXFP4_FP8", "kMxfp4Static", "kFp8StaticTensorSym");
    /* symmetric missing: not W4A8; static input also rejected by OCP-MX */
    ONE_ERR(MX_W("fp4"), I_FP8_ST, QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");

    /* OCP MX */
    ONE(MX_W("fp4"), MX_I("fp4"), QP_OK, "QuarkOCP_MX", "kMxfp4Static", "kMxfp4Dynamic");
    ONE(MX_W("fp4"), "null", QP_OK, "QuarkOCP_MX", "kMxfp4Static", "");
    ONE(MX_W("fp6_e3m2"), MX_I("fp6_e3m2"), QP_OK, "QuarkOCP_MX", "kMxfp6E3M2Static", "kMxfp6E3M2Dynamic");
    ONE(MX_W("fp6_e2m3"), MX_I("fp6_e2m3"), QP_OK, "QuarkOCP_MX", "kMxfp6E2M3Static", "kMxfp6E2M3Dynamic");
    ONE(MX_W("fp4"), MX_I("fp6_e2m3"), QP_OK, "QuarkOCP_MX", "kMxfp4Static", "kMxfp6E2M3Dynamic");
    ONE(MX_W("fp4"), "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"is_dynamic\":true}", QP_OK,
        "QuarkOCP_MX", "kMxfp4Static", "kMxfp8Dynamic");
    ONE(MX_W("fp8_e4m3"), MX_I("fp4"), QP_OK, "QuarkOCP_MX", "kMxfp8Static", "kMxfp4Dynamic");
    /* MXFP8 weights (0.34.0): QuarkOCP_MX, 1-D per_group or 2-D per_block [R, 32] with float8_e8m0fnu scales
     * (scale_block_rows R: the weight's block [R, 32]); dynamic fp8 per_group 32 activations are kMxfp8Dynamic */
#define MXFP8_A "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_group\",\"group_size\":32,\"is_dynamic\":true,\"symmetric\":true}"
#define MXFP8_B(r, st) "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[" r ",32],\"scale_type\":\"" st "\"," \
                       "\"symmetric\":true,\"is_dynamic\":false}"
    ONE(MX_W("fp8_e4m3"), MXFP8_A, QP_OK, "QuarkOCP_MX", "kMxfp8Static", "kMxfp8Dynamic");
    ONE(MX_W("fp8_e4m3"), "null", QP_OK, "QuarkOCP_MX", "kMxfp8Static", "");
    ONE(MXFP8_B("32", "float8_e8m0fnu"), MXFP8_A, QP_OK, "QuarkOCP_MX", "kMxfp8Static", "kMxfp8Dynamic");
    ONE(MXFP8_B("1", "float8_e8m0fnu"), MXFP8_A, QP_OK, "QuarkOCP_MX", "kMxfp8Static", "kMxfp8Dynamic");
    {
        qp_config *c = quark(MXFP8_B("32", "float8_e8m0fnu"), MXFP8_A);
        qp_scheme sc;
        CHECK(c && !qp_config_resolve(c, "model.layers.0.mlp.down_proj", L, NULL, &sc) &&
                  sc.weight.granularity == QP_GRAN_BLOCK && sc.weight.block[0] == 32 && sc.weight.block[1] == 32,
              "mxfp8 per_block [32, 32]: scale_block_rows 32: %s", qp_last_error(ctx));
        qp_config_destroy(c);
        c = quark(MX_W("fp8_e4m3"), MXFP8_A);
        CHECK(c && !qp_config_resolve(c, "model.layers.0.mlp.down_proj", L, NULL, &sc) &&
                  sc.weight.granularity == QP_GRAN_GROUP && sc.weight.group_size == 32,
              "mxfp8 per_group: %s", qp_last_error(ctx));
        qp_config_destroy(c);
    }
    /* the 2-D spelling needs float8_e8m0fnu, an unpacked dtype and a symmetric static weight */
    ONE_ERR(MXFP8_B("32", "e8m0"), MXFP8_A, QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");
    ONE_ERR("{\"dtype\":\"fp4\",\"qscheme\":\"per_block\",\"block_size\":[32,32],\"scale_type\":\"float8_e8m0fnu\","
            "\"symmetric\":true,\"is_dynamic\":false}", "null", QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");
    ONE_ERR("{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_block\",\"block_size\":[32,16],\"scale_type\":\"float8_e8m0fnu\","
            "\"symmetric\":true,\"is_dynamic\":false}", MXFP8_A, QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");
    /* QuarkOCP_MX's keys: MX activations or none */
    ONE_ERR(MX_W("fp8_e4m3"), I_FP8_DT, QP_ERR_VALUE, "Unsupported activation quant key: QuantKey(f8e4m3fn,scale(f32,dynamic,per_tensor),symmetric)");
    /* docs/semantics.md §4: MXFP4 weight + dynamic fp8 passes the predicate, fails the key check */
    ONE_ERR(MX_W("fp4"), I_FP8_DT, QP_ERR_VALUE, "Unsupported activation quant key: QuantKey(f8e4m3fn,scale(f32,dynamic,per_tensor),symmetric)");
    ONE_ERR(MX_W("fp4"), "{\"dtype\":\"int8\",\"is_dynamic\":true}", QP_ERR_VALUE,
            "Unsupported input_dtype=int8 in Quark's vLLM integration. Supported activation dtypes are "
            "dict_keys(['mxfp4', 'mxfp6_e3m2', 'mxfp6_e2m3', 'mxfp8_e4m3']), or None for weight-only quantization.");
    /* OCP-MX needs e8m0 scales and group 32 */
    ONE_ERR("{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"scale_format\":\"e8m0\"}", "null",
            QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");

    /* one-element lists are unwrapped; multi-entry lists only for NVFP4 */
    ONE("[" W_FP8_C "]", "[" I_FP8_DC "]", QP_OK, "QuarkW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym");
    ONE_ERR("[" W_FP8_C "," W_FP8_C "]", I_FP8_DC, QP_ERR_NOT_IMPLEMENTED,
            "Multi-entry weight or activation quantization configs are only supported for NVFP4.");
    ONE("[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"is_dynamic\":false},"
        "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}]",
        "[{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":16,\"is_dynamic\":true},"
        "{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}]",
        QP_OK, "QuarkNVFP4", "kNvfp4Static", "kNvfp4Dynamic");
    /* an empty list unwraps to None */
    ONE_ERR("[]", "[]", QP_ERR_NOT_IMPLEMENTED,
            "No quark compatible scheme was found. Weight config: None, Input config: None");
    /* wrong types compare unequal, as in Python */
    ONE_ERR("{\"dtype\":5}", "null", QP_ERR_NOT_IMPLEMENTED,
            "No quark compatible scheme was found. Weight config: {'dtype': 5}, Input config: None");
    ONE_ERR("{\"dtype\":\"fp8_e5m2\",\"qscheme\":\"per_tensor\",\"scale\":1.5e-07,\"v\":[0.1,1e+16,true]}", "null",
            QP_ERR_NOT_IMPLEMENTED,
            "No quark compatible scheme was found. Weight config: {'dtype': 'fp8_e5m2', 'qscheme': 'per_tensor', "
            "'scale': 1.5e-07, 'v': [0.1, 1e+16, True]}, Input config: None");
}

static void capability(void) {
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    qp_config *c = quark(W_FP8_T, I_FP8_ST);
    o.capability = 89;
    EXPECT(c, ctx, "x.down_proj", L, &o, QP_OK, "QuarkLinearMethod", "QuarkW8A8Fp8", NULL, NULL);
    o.capability = 80;
    EXPECT_ERR(c, ctx, "x.down_proj", L, &o, QP_ERR_CAPABILITY,
               "Quantization scheme is not supported for the current GPU. Min capability: 89. Current capability: 80.");
    qp_error_info e;
    qp_last_error_info(ctx, &e);
    CHECK(!strcmp(e.exception, "RuntimeError"), "%s", e.exception);
    CHECK(!strcmp(e.layer, "x.down_proj"), "%s", e.layer);
    CHECK(strstr(qp_last_error(ctx), "test.json") && strstr(qp_last_error(ctx), "x.down_proj"), "%s", qp_last_error(ctx));
    o.capability = 60;
    EXPECT_ERR(c, ctx, "x.down_proj", L, &o, QP_ERR_VALUE,
               "The quantization method quark is not supported for the current GPU. Minimum capability: 70. Current "
               "capability: 60.");
    o.capability = -5;
    EXPECT(c, ctx, "x.down_proj", L, &o, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL, NULL);
    qp_config_destroy(c);
    c = quark(W_I8_C, "{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true}");
    o.capability = 75;
    EXPECT(c, ctx, "x.down_proj", L, &o, QP_OK, NULL, "QuarkW8A8Int8", NULL, NULL);
    o.capability = 72;
    EXPECT_ERR(c, ctx, "x.down_proj", L, &o, QP_ERR_CAPABILITY, "~Min capability: 75. Current capability: 72.");
    qp_scheme s;
    CHECK(qp_config_resolve(c, "x.down_proj", L, NULL, &s) == QP_OK, "resolve");
    CHECK(qp_scheme_check_capability(ctx, &s, 70) == QP_ERR_CAPABILITY, "check 70");
    CHECK(qp_scheme_check_capability(ctx, &s, 86) == QP_OK, "check 86");
    CHECK(s.min_capability == 75 && s.weight.dtype == QP_DTYPE_I8 && s.activation.granularity == QP_GRAN_TOKEN &&
              s.activation.dynamic && s.struct_size == sizeof s,
          "scheme fields");
    qp_config_destroy(c);
}

static const char *LQC =
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"order\"},"
    "\"global_quant_config\":{\"weight\":" W_FP8_C ",\"input_tensors\":" I_FP8_DC "},"
    "\"layer_quant_config\":{"
    "\"model.layers.1.mlp.down_proj.extra\":{\"weight\":" W_I8_C ",\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"is_dynamic\":true,\"symmetric\":true}},"
    "\"*layers.2.*q_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST "},"
    "\"*layers.2.*k_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST "},"
    "\"*layers.2.*v_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST "},"
    "\"*layers.3.*q_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST "},"
    "\"*layers.[4]?.self_attn.o_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_DT "},"
    "\"*layers.5.*\":{\"weight\":{\"dtype\":\"int4\",\"group_size\":128,\"symmetric\":true},\"input_tensors\":null}"
    "},"
    "\"layer_type_quant_config\":{\"QKVParallelLinear\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_DT "}},"
    "\"exclude\":[\"lm_head\",\"model.layers.6.self_attn.q_proj\",\"model.layers.6.self_attn.k_proj\","
    "\"model.layers.6.self_attn.v_proj\",\"model.layers.7.self_attn.q_proj\",\"re:.*mlp\\\\.gate$\","
    "\"re:^(?!.*\\\\.mlp\\\\.experts(?:\\\\.|$)).*layers\\\\.9\\\\..*$\",\"model.layers.8.mlp.experts.0.up_proj\"]}";

static void layer_matching(void) {
    qp_config *c = tu_load(ctx, LQC);
    CHECK(c != NULL, "%s", qp_last_error(ctx));
    if (!c) return;
    /* docs/semantics.md §3: no '*' → `layer_name in pattern` (substring, reversed) */
    EXPECT(c, ctx, "model.layers.1.mlp.down_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Int8", NULL, NULL);
    EXPECT(c, ctx, "layers.1", L, NULL, QP_OK, NULL, "QuarkW8A8Int8", NULL, NULL);
    EXPECT(c, ctx, "model.layers.1.mlp.down_proj.extra.more", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8",
           "kFp8StaticChannelSym", NULL);
    /* fused layer: all shards match the same config */
    EXPECT(c, ctx, "model.layers.2.self_attn.qkv_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", "kFp8StaticTensorSym",
           "kFp8StaticTensorSym");
    /* fused layer with one shard overridden → vLLM's error */
    EXPECT_ERR(c, ctx, "model.layers.3.self_attn.qkv_proj", L, NULL, QP_ERR_VALUE,
               "Found a different quantization configuration for ['q_proj', 'k_proj', 'v_proj'] in "
               "model.layers.3.self_attn.qkv_proj. vLLM requires all to use the same scheme.");
    /* '?' and '[...]' are live once a '*' is present */
    EXPECT(c, ctx, "model.layers.4x.self_attn.o_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", NULL, "kFp8DynamicTensorSym");
    EXPECT(c, ctx, "model.layers.3x.self_attn.o_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", NULL, "kFp8DynamicTokenSym");
    /* W4A16 needs a pack method: "order" here */
    qp_scheme s;
    CHECK(qp_config_resolve(c, "model.layers.5.mlp.up_proj", L, NULL, &s) == QP_OK && s.pack_method == QP_PACK_ORDER &&
              s.weight.group_size == 128,
          "w4a16 order: %s", qp_last_error(ctx));
    /* docs/semantics.md §3: layer_type_quant_config never matches in vllm... */
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.layer_class = "QKVParallelLinear";
    EXPECT(c, ctx, "model.layers.11.self_attn.qkv_proj", L, &o, QP_OK, NULL, "QuarkW8A8Fp8", "kFp8StaticChannelSym", NULL);
    /* ...but SGLang looks the class name up */
    o.dialect = QP_DIALECT_SGLANG;
    o.capability = 90;
    EXPECT(c, ctx, "model.layers.11.self_attn.qkv_proj", L, &o, QP_OK, NULL, "QuarkW8A8Fp8", "kFp8StaticTensorSym",
           "kFp8DynamicTensorSym");
    /* SGLang uses fnmatch for keys without '*': exact match only */
    o.layer_class = NULL;
    EXPECT(c, ctx, "layers.1", L, &o, QP_OK, NULL, "QuarkW8A8Fp8", "kFp8StaticChannelSym", NULL);
    EXPECT_ERR(c, ctx, "model.layers.3.self_attn.qkv_proj", L, &o, QP_ERR_VALUE,
               "~SGLang requires all to use the same scheme.");
    /* SGLang without a GPU capability cannot pick fp8 */
    o.capability = QP_CAPABILITY_NONE;
    EXPECT_ERR(c, ctx, "model.layers.0.mlp.up_proj", L, &o, QP_ERR_NOT_IMPLEMENTED, "~No quark compatible scheme was found.");

    /* excludes (docs/semantics.md §2): exact names, fused names via shards, re: prefix match */
    /* lm_head is vLLM's ParallelLMHead (no LinearBase): no Quark method,
     * excluded or not (0.34.0 get_quant_method_target); SGLang's exclude */
    EXPECT(c, ctx, "lm_head", L, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    EXPECT(c, ctx, "model.lm_head", L, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    /* embed_tokens is a VocabParallelEmbedding: no LinearBase either */
    EXPECT(c, ctx, "model.embed_tokens", L, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    EXPECT(c, ctx, "model.embed_tokensx", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", NULL, NULL);
    qp_resolve_options so;
    qp_resolve_options_init(&so);
    so.dialect = QP_DIALECT_SGLANG;
    so.capability = 90;
    EXPECT(c, ctx, "lm_head", L, &so, QP_OK, "UnquantizedLinearMethod", "", "", "");
    EXPECT(c, ctx, "model.lm_headx", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", NULL, NULL);
    EXPECT(c, ctx, "model.layers.6.self_attn.qkv_proj", L, NULL, QP_OK, "UnquantizedLinearMethod", NULL, NULL, NULL);
    EXPECT_ERR(c, ctx, "model.layers.7.self_attn.qkv_proj", L, NULL, QP_ERR_VALUE,
               "Found different quantization schemes for the shards of model.layers.7.self_attn.qkv_proj. vLLM requires "
               "all to use the same scheme.");
    EXPECT(c, ctx, "model.layers.3.mlp.gate", L, NULL, QP_OK, "UnquantizedLinearMethod", NULL, NULL, NULL);
    EXPECT(c, ctx, "model.layers.3.mlp.gate_proj", L, NULL, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    /* negative lookahead: experts of layer 9 stay quantized */
    EXPECT(c, ctx, "model.layers.9.self_attn.o_proj", L, NULL, QP_OK, "UnquantizedLinearMethod", NULL, NULL, NULL);
    EXPECT(c, ctx, "model.layers.9.mlp.experts.3.up_proj", L, NULL, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    /* exclude entries are not globs */
    EXPECT(c, ctx, "model.layers.19.self_attn.o_proj", L, NULL, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    /* MoE: check_children (all-or-nothing) */
    EXPECT(c, ctx, "model.layers.8.mlp.experts", M, NULL, QP_OK, "UnquantizedFusedMoEMethod", NULL, NULL, NULL);
    EXPECT(c, ctx, "model.layers.10.mlp.experts", M, NULL, QP_OK, "QuarkMoEMethod", NULL, "kFp8StaticChannelSym", NULL);
    /* attention: KV cache not quantized here */
    CHECK(qp_config_resolve(c, "model.layers.0.self_attn", A, NULL, &s) == QP_OK && !strcmp(s.method, "QuarkKVCacheMethod") &&
              s.kv_cache.dtype == QP_DTYPE_NONE,
          "attention");
    /* caller mapping wins over the default */
    static const char *const shards[] = {"w1", "w3"};
    qp_packed_module pm = {"w13", shards, 2};
    qp_resolve_options_init(&o);
    o.packed = &pm;
    o.n_packed = 1;
    EXPECT(c, ctx, "model.layers.7.self_attn.qkv_proj", L, &o, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    qp_config_destroy(c);
}

static void shard_replace_quirk(void) {
    /* docs/semantics.md §2: str.replace rewrites every occurrence of the projection name */
    qp_config *c = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[]},"
        "\"global_quant_config\":{\"weight\":" W_FP8_C ",\"input_tensors\":" I_FP8_DC "},"
        "\"exclude\":[\"m.q_proj.q_proj\",\"m.k_proj.k_proj\",\"m.v_proj.v_proj\"]}");
    EXPECT(c, ctx, "m.qkv_proj.qkv_proj", L, NULL, QP_OK, "UnquantizedLinearMethod", NULL, NULL, NULL);
    EXPECT(c, ctx, "m.qkv_proj", L, NULL, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    qp_config_destroy(c);
    /* a packed_modules_mapping inside the config replaces the default */
    c = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[]},\"packed_modules_mapping\":{\"wqkv\":[\"wq\",\"wk\"]},"
        "\"global_quant_config\":{\"weight\":" W_FP8_C ",\"input_tensors\":" I_FP8_DC "},"
        "\"exclude\":[\"m.wq\",\"m.wk\",\"m.q_proj\"]}");
    EXPECT(c, ctx, "m.wqkv", L, NULL, QP_OK, "UnquantizedLinearMethod", NULL, NULL, NULL);
    EXPECT(c, ctx, "m.qkv_proj", L, NULL, QP_OK, "QuarkLinearMethod", NULL, NULL, NULL);
    qp_config_destroy(c);
}

static void kv_cache(void) {
    const char *kv =
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\",\"*v_proj\"],\"pack_method\":\"reorder\"},"
        "\"global_quant_config\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST "},"
        "\"layer_quant_config\":{"
        "\"*k_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST ",\"output_tensors\":" I_FP8_ST "},"
        "\"*v_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST ",\"output_tensors\":" I_FP8_ST "},"
        "\"*q_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST ",\"output_tensors\":" I_FP8_ST "}},"
        "\"exclude\":[]}";
    qp_config *c = tu_load(ctx, kv);
    qp_scheme s;
    CHECK(c && qp_config_resolve(c, "model.layers.0.self_attn.attn", A, NULL, &s) == QP_OK && s.kind == QP_SCHEME_KV_CACHE &&
              s.kv_cache.dtype == QP_DTYPE_F8_E4M3FN && s.kv_cache.granularity == QP_GRAN_TENSOR,
          "kv: %s", qp_last_error(ctx));
    /* output_tensors of k/v and *q_proj are cleared, so qkv resolves */
    EXPECT(c, ctx, "model.layers.0.self_attn.qkv_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", "kFp8StaticTensorSym", NULL);
    char out[128];
    CHECK(qp_config_map_scale_name(c, "model.layers.0.self_attn.k_proj.output_scale", out, sizeof out) == QP_OK &&
              !strcmp(out, "model.layers.0.self_attn.attn.k_scale"), "%s", out);
    CHECK(qp_config_map_scale_name(c, "model.layers.0.self_attn.prob_output_scale", out, sizeof out) == QP_OK &&
              !strcmp(out, "model.layers.0.self_attn.attn.prob_scale"), "%s", out);
    CHECK(qp_config_map_scale_name(c, "model.layers.0.self_attn.o_proj.weight", out, sizeof out) == QP_OK &&
              !strcmp(out, "model.layers.0.self_attn.o_proj.weight"), "%s", out);
    CHECK(qp_config_map_scale_name(c, "model.layers.0.self_attn.k_proj.output_scale", out, 8) == QP_ERR_INVALID_ARGUMENT, "cap");
    qp_config_destroy(c);

    /* an o_proj config that keeps output_tensors is refused */
    c = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[]},"
        "\"global_quant_config\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST ",\"output_tensors\":" I_FP8_ST "}}");
    EXPECT_ERR(c, ctx, "x.o_proj", L, NULL, QP_ERR_NOT_IMPLEMENTED,
               "Currently, Quark models with output_tensors and bias quantized are not supported");
    qp_config_destroy(c);

    struct { const char *json, *msg; qp_status st; } bad[] = {
        {"{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\"]},\"layer_quant_config\":{\"*q_proj\":{}}}",
         "The Quark quantized model has the kv_cache_group parameter setting, but no kv_cache quantization settings were "
         "found in the quantization configuration.", QP_ERR_VALUE},
        {"{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\",\"*v_proj\"]},\"layer_quant_config\":{"
         "\"*k_proj\":{\"output_tensors\":" I_FP8_ST "},\"*v_proj\":{\"output_tensors\":" I_FP8_DT "}}}",
         "The quantization method used for kv_cache should be the same, but the quantization method for the kv_cache "
         "layer in the config is different.", QP_ERR_VALUE},
        {"{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\"]},\"layer_quant_config\":{\"*k_proj\":{}}}",
         "The kv_cache quantization configuration is empty.", QP_ERR_VALUE},
        {"{\"quant_method\":\"quark\",\"global_quant_config\":{}}",
         "The export key should be included in the configurations of Quark quantized model", QP_ERR_VALUE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = tu_load(ctx, bad[i].json);
        EXPECT_ERR(c, ctx, "x.q_proj", L, NULL, bad[i].st, bad[i].msg);
        EXPECT_ERR(c, ctx, "x.attn", A, NULL, bad[i].st, bad[i].msg);
        qp_config_destroy(c);
    }
    /* QuarkKVCacheMethod validation: only for attention layers */
    c = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\"]},\"global_quant_config\":{\"weight\":" W_FP8_T
        ",\"input_tensors\":" I_FP8_ST "},\"layer_quant_config\":{\"*k_proj\":{\"weight\":" W_FP8_T ",\"input_tensors\":" I_FP8_ST
        ",\"output_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_tensor\"}}}}");
    EXPECT_ERR(c, ctx, "x.attn", A, NULL, QP_ERR_NOT_IMPLEMENTED,
               "Currently supported kv cache quantization is dtype=fp8_e4m3, however received int8");
    EXPECT(c, ctx, "x.k_proj", L, NULL, QP_OK, NULL, "QuarkW8A8Fp8", NULL, NULL);
    qp_config_destroy(c);
    c = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\"]},\"layer_quant_config\":{\"*k_proj\":"
        "{\"output_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_channel\"}}}}");
    EXPECT_ERR(c, ctx, "x.attn", A, NULL, QP_ERR_NOT_IMPLEMENTED,
               "Only support per-tensor scaling factor for quark KV cache. Expected qscheme: per_tensor, found qscheme: "
               "per_channel");
    qp_config_destroy(c);
}

static void qqq_and_fp8(void) {
    struct { const char *json; qp_status st; const char *msg; } q[] = {
        {"{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":128}", QP_OK, NULL},
        {"{\"bits\":4,\"group_size\":-1}", QP_OK, NULL},
        {"{\"quant_method\":\"qqq\",\"wbits\":8,\"group_size\":128}", QP_ERR_VALUE,
         "QQQ does not support weight_bits = 8. Only weight_bits = [4] are supported."},
        {"{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":64}", QP_ERR_VALUE,
         "QQQ does not support group_size = 64. Only group_sizes = [-1, 128] are supported."},
        {"{\"quant_method\":\"qqq\",\"group_size\":64}", QP_ERR_VALUE,
         "Cannot find any of ['wbits'] in the model's quantization config."},
        {"{\"quant_method\":\"qqq\",\"wbits\":4}", QP_ERR_VALUE,
         "Cannot find any of ['group_size'] in the model's quantization config."},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        qp_config *c = tu_load(ctx, q[i].json);
        if (q[i].st == QP_OK) EXPECT(c, ctx, "model.layers.0.mlp.down_proj", L, NULL, QP_OK, "QQQLinearMethod", "", "", "");
        else EXPECT_ERR(c, ctx, "model.layers.0.mlp.down_proj", L, NULL, q[i].st, q[i].msg);
        qp_config_destroy(c);
    }
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.capability = 75;
    qp_config *c = tu_load(ctx, "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":128}");
    EXPECT_ERR(c, ctx, "x.down_proj", L, &o, QP_ERR_VALUE,
               "The quantization method qqq is not supported for the current GPU. Minimum capability: 80. Current "
               "capability: 75.");
    qp_scheme s;
    CHECK(qp_config_resolve(c, "x.down_proj", L, NULL, &s) == QP_OK && s.kind == QP_SCHEME_QQQ_W4A8 &&
              s.weight.group_size == 128 && s.out_dtype_fixed == QP_DTYPE_F16 && s.pack_method == QP_PACK_MARLIN_QQQ,
          "qqq scheme");
    CHECK(qp_config_resolve(c, "x.attn", A, NULL, &s) == QP_OK && s.kind == QP_SCHEME_NONE && !s.method[0], "qqq attn");
    qp_config_destroy(c);

    c = tu_load(ctx, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"ignored_layers\":[\"lm_head\","
                     "\"m.q_proj\",\"m.k_proj\"]}");
    EXPECT(c, ctx, "x.down_proj", L, NULL, QP_OK, "Fp8LinearMethod", "", "kFp8StaticTensorSym", "kFp8DynamicTensorSym");
    /* lm_head is a ParallelLMHead, no LinearBase: Fp8Config.get_quant_method
     * returns None whatever ignored_layers says (api/arch.c) */
    EXPECT(c, ctx, "lm_head", L, NULL, QP_OK, "UnquantizedEmbeddingMethod", "", "", "");
    EXPECT_ERR(c, ctx, "m.qkv_proj", L, NULL, QP_ERR_VALUE,
               "Detected some but not all shards of m.qkv_proj are quantized. All shards of fused layers to have the "
               "same precision.");
    o.capability = 86;
    EXPECT(c, ctx, "x.down_proj", L, &o, QP_OK, "Fp8LinearMethod", "", "kFp8StaticTensorSym", "");
    qp_config_destroy(c);
    c = tu_load(ctx, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"sometimes\"}");
    EXPECT_ERR(c, ctx, "x", L, NULL, QP_ERR_VALUE, "Unsupported activation scheme sometimes");
    qp_config_destroy(c);
}

/* Every published config in ../shared/configs, with the expected scheme. */
static void shared_configs(void) {
    /* the bundled copies (tests/configs); the suite must not need ../shared */
    const char *dir = getenv("QPORT_CONFIGS");
    if (!dir) dir = "tests/configs";
    struct { const char *file, *layer; qp_layer_kind kind; qp_status st; const char *method, *scheme, *wk, *ak; } t[] = {
        {"hf-amd-Llama-3.1-8B-Instruct-FP8-KV.quant.json", "model.layers.0.self_attn.qkv_proj", L, QP_OK, "Fp8LinearMethod", "", "kFp8StaticTensorSym", "kFp8StaticTensorSym"},
        {"hf-amd-Llama-3.1-8B-Instruct-FP8-KV.quant.json", "lm_head", L, QP_OK, "UnquantizedEmbeddingMethod", "", "", ""},
        {"hf-amd-Llama-3.1-8B-Instruct-FP8-KV.quant.json", "model.layers.0.self_attn.attn", A, QP_OK, "Fp8KVCacheMethod", "", "", ""},
        {"quark-online-preset-fp8_ptpc.json", "model.layers.0.mlp.gate_up_proj", L, QP_OK, "QuarkLinearMethod", "QuarkW8A8Fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym"},
        {"quark-online-preset-fp8_ptpc.json", "lm_head", L, QP_OK, "UnquantizedEmbeddingMethod", "", "", ""},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.3.mlp.experts.7.down_proj", L, QP_OK, "QuarkLinearMethod", "QuarkOCP_MX", "kMxfp4Static", "kMxfp4Dynamic"},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.3.mlp.shared_experts.gate_up_proj", L, QP_OK, "QuarkLinearMethod", "QuarkOCP_MX", "kMxfp4Static", "kMxfp4Dynamic"},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.3.mlp.gate", L, QP_OK, "UnquantizedLinearMethod", "", "", ""},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.61.mlp.experts.0.up_proj", L, QP_OK, "UnquantizedLinearMethod", "", "", ""},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.3.self_attn.q_a_proj", L, QP_OK, "UnquantizedLinearMethod", "", "", ""},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "lm_head", L, QP_OK, "UnquantizedEmbeddingMethod", "", "", ""},
        {"gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json", "model.layers.3.mlp.experts", M, QP_OK, "QuarkMoEMethod", NULL, "kMxfp4Static", "kMxfp4Dynamic"},
        /* no "export" key: vLLM's from_config raises (docs/numerics.md documents it) */
        {"fixture-quarkparser-nvfp4-two-stage.quant.json", "model.layers.0.mlp.down_proj", L, QP_ERR_VALUE, NULL, NULL, NULL, NULL},
        {"fixture-vllm-quark-w4a16-int4-sym-g128-reorder.quant.json", "model.layers.0.self_attn.o_proj", L, QP_OK, "QuarkLinearMethod", "QuarkW4A16Int4", "kInt4Static", ""},
        {"qqq-exporter-derived-g128.quant.json", "model.layers.0.mlp.down_proj", L, QP_OK, "QQQLinearMethod", "", "", ""},
        {"qqq-exporter-derived-perchannel.quant.json", "model.layers.0.self_attn.qkv_proj", L, QP_OK, "QQQLinearMethod", "", "", ""},
        {"qqq-legacy-quant_config-derived-g128.json", "model.layers.0.mlp.gate_up_proj", L, QP_OK, "QQQLinearMethod", "", "", ""},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, t[i].file);
        qp_config *c = NULL;
        if (qp_config_load_file(ctx, path, &c) != QP_OK) {
            tu_failures++;
            fprintf(stderr, "FAIL: load %s: %s\n", path, qp_last_error(ctx));
            continue;
        }
        tu_expect(c, ctx, t[i].layer, t[i].kind, NULL, t[i].st, t[i].method, t[i].scheme, t[i].wk, t[i].ak, t[i].file, (int)i);
        qp_config_destroy(c);
    }
    /* The NVFP4 fixture resolves once it carries an export section. */
    size_t n;
    char path[1024];
    snprintf(path, sizeof path, "%s/fixture-quarkparser-nvfp4-two-stage.quant.json", dir);
    char *txt = tu_read_file(path, &n);
    CHECK(txt != NULL, "read %s", path);
    if (txt) {
        char *brace = strchr(txt, '{');
        char *j = malloc(n + 64);
        sprintf(j, "{\"export\":{\"kv_cache_group\":[]},%s", brace + 1);
        qp_config *c = tu_load(ctx, j);
        EXPECT(c, ctx, "model.layers.0.mlp.down_proj", L, NULL, QP_OK, "QuarkLinearMethod", "QuarkNVFP4", "kNvfp4Static", "kNvfp4Dynamic");
        qp_scheme s;
        CHECK(c && qp_config_resolve(c, "a.b", L, NULL, &s) == QP_OK && s.weight.group_size == 16 &&
                  s.weight.scale_dtype == QP_DTYPE_F8_E4M3FN && s.weight.scale2_dtype == QP_DTYPE_F32, "nvfp4 fields");
        qp_config_destroy(c);
        free(j);
        free(txt);
    }
}

int main(void) {
    if (qp_context_create(&ctx) != QP_OK) return 1;
    predicates();
    capability();
    layer_matching();
    shard_replace_quirk();
    kv_cache();

    qqq_and_fp8();
    shared_configs();
    qp_context_destroy(ctx);
    return tu_finish("test_resolve");
}
