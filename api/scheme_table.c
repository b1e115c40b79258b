/* The scheme kinds, one row each (scheme_table.h says what a row names).
 * Designated initializers keep each row next to its kind; the static assert
 * and qp_scheme_row_of's range check keep the table and the enum in step. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "scheme_table.h"

#define NO_MOE "no fused MoE for this scheme"
/* Resolved as vLLM resolves it; qport has no kernel for its arithmetic. */
#define CT_NO_RUN "compressed-tensors scheme qport resolves but does not run yet"
#define CT_ROW(name, tensors, classes) {name, QP_LIN_NONE, 0, NULL, NULL, CT_NO_RUN, tensors, classes, NULL, 0}
#define CT_LOWERED(name, tensors, classes, binder) \
    {name, QP_LIN_DENSE, 0, NULL, NULL, "no fused MoE for this scheme yet", tensors, classes, binder, 1}

static const qp_scheme_row rows[] = {
    [QP_SCHEME_UNQUANTIZED] = {"unquantized", QP_LIN_DENSE, 0, qp_bind_unquantized, NULL, NULL,
                               "weight (model dtype [N, K]), bias?",
                               "UnquantizedLinearMethod, UnquantizedFusedMoEMethod", NULL, 0},
    [QP_SCHEME_W8A8_FP8] = {"w8a8-fp8", QP_LIN_W8A8, 0, qp_bind_fp8, qp_qw_fp8, NULL,
                            "weight (fp8 [N, K]), weight_scale ([N] or per tensor/shard), input_scale? (static), bias?",
                            "QuarkW8A8Fp8, QuarkW8A8Fp8MoEMethod"
                            ", CompressedTensorsW8A8Fp8, CompressedTensorsW8A8Fp8MoEMethod", .bind_ct = qp_bind_fp8},
    [QP_SCHEME_W8A8_FP8_BLOCK] = {"w8a8-fp8-block", QP_LIN_W8A8, 0, qp_bind_fp8, qp_qw_fp8, NULL,
                                  "weight (fp8 [N, K]), weight_scale ([ceil(N/128), ceil(K/128)], fp32 or e8m0), bias?",
                                  "QuarkW8A8Fp8PerBlock, QuarkW8A8Fp8MoEMethod"
                                  ", CompressedTensorsW8A8Fp8, CompressedTensorsW8A8Fp8MoEMethod", .bind_ct = qp_bind_fp8},
    [QP_SCHEME_W8A8_INT8] = {"w8a8-int8", QP_LIN_W8A8, 1, qp_bind_int8, qp_qw_int8, NULL,
                             "weight (int8 [N, K]), weight_scale ([N] or per tensor/shard), weight_zero_point?, "
                             "input_scale? and input_zero_point? (static), bias?",
                             "QuarkW8A8Int8, QuarkW8A8Int8MoEMethod"
                             ", CompressedTensorsW8A8Int8, CompressedTensorsW8A8Int8MoEMethod", .bind_ct = qp_bind_int8},
    [QP_SCHEME_W4A16_INT4] = {"w4a16-int4", QP_LIN_INT4, 0, qp_bind_w4a16, qp_qw_w4a16, NULL,
                              "Quark: weight (int32 [K, N/8]), weight_scale ([K/g, N]), weight_zero_point (uint4); "
                              "compressed-tensors: weight_packed (int32 [N, K/8]), weight_scale ([N, K/g]), "
                              "weight_zero_point? (int32 [N/8, K/g]), weight_shape?; bias?",
                              "QuarkW4A16Int4, QuarkW4A16Int4MoEMethod"
                              ", CompressedTensorsWNA16, CompressedTensorsWNA16MoEMethod", .bind_ct = qp_bind_ct_w4a16},
    [QP_SCHEME_OCP_MX] = {"ocp-mx", QP_LIN_BLOCK_FLOAT, 0, qp_bind_ocp_mx, qp_qw_mx, NULL,
                          "weight (packed fp4/fp6/fp8 codes [N, K']), weight_scale (e8m0 [N, K/32]), "
                          "input_rotation?, bias?",
                          "QuarkOCP_MX, QuarkW4A4MXFP4, QuarkOCP_MX_MoEMethod, QuarkW8A8Mxfp8MoEMethod", NULL, 0},
    [QP_SCHEME_W4A8_MXFP4_FP8] = {"w4a8-mxfp4-fp8", QP_LIN_BLOCK_FLOAT, 0, qp_bind_w4a8_mxfp4, qp_qw_mx, NULL,
                                  "weight (fp4 codes [N, K/2]), weight_scale (e8m0 [N, K/32]), input_scale, bias?",
                                  "QuarkW4A8_MXFP4_FP8, QuarkOCP_MX_MoEMethod", NULL, 0},
    [QP_SCHEME_NVFP4] = {"nvfp4", QP_LIN_BLOCK_FLOAT, 0, qp_bind_nvfp4, qp_qw_nvfp4, NULL,
                         "Quark: weight (fp4 codes [N, K/2]), weight_scale (fp8 [N, K/16]), weight_scale_2, "
                         "input_scale_2; compressed-tensors: weight_packed, weight_scale, weight_global_scale, "
                         "input_global_scale (the inverses, per shard); bias?",
                         "QuarkNVFP4, QuarkNvfp4MoEMethod"
                         ", CompressedTensorsW4A4Fp4, CompressedTensorsW4A4Nvfp4MoEMethod", .bind_ct = qp_bind_ct_nvfp4},
    [QP_SCHEME_QQQ_W4A8] = {"qqq-w4a8", QP_LIN_INT4, 1, qp_bind_qqq, qp_qw_qqq, NO_MOE,
                            "B (int32 Marlin tiles [K/16, 2N]), s_channel (f32 [1, N]), s_group (f16 [K/128, N], "
                            "group 128), bias?",
                            "QQQLinearMethod", NULL, 0},
    [QP_SCHEME_HF_FP8] = {"hf-fp8", QP_LIN_W8A8, 0, qp_bind_fp8, qp_qw_fp8, NULL,
                          "weight (fp8 [N, K]), weight_scale or weight_scale_inv (per-block), input_scale? (static), "
                          "bias?",
                          "Fp8LinearMethod, Fp8MoEMethod", NULL, 0},
    [QP_SCHEME_KV_CACHE] = {"kv-cache", QP_LIN_NONE, 0, NULL, NULL, "an attention layer, not experts",
                            "k_scale, v_scale (QuarkKVCacheMethod)",
                            "QuarkKVCacheMethod, Fp8KVCacheMethod", NULL, 0},
    [QP_SCHEME_NONE] = {"none", QP_LIN_NONE, 0, NULL, NULL, "vLLM assigns no quant method to this layer", "-",
                        "-", NULL, 0},
    [QP_SCHEME_W4A8_INT4_FP8] = {"w4a8-int4-fp8", QP_LIN_NONE, 0, NULL, NULL,
                                 "runs only through ROCm AITER's fused MoE in vLLM", "-",
                                 "QuarkW4A8Fp8MoEMethod", NULL, 0},
    /* compressed-tensors weight-only schemes without a kernel of their own:
     * dequantized at bind time as vLLM's Marlin kernels dequantize them */
    [QP_SCHEME_WNA16] = CT_LOWERED("wna16", "weight_packed (int32 [N, K*bits/32]; 8-bit runs), weight_scale ([N, K/g]), "
        "weight_zero_point? (int32 [N*bits/32, K/g]), weight_shape?, bias?",
        "CompressedTensorsWNA16, CompressedTensorsWNA16MoEMethod", qp_bind_ct_wna16),
    [QP_SCHEME_W8A16_FP8] = CT_LOWERED("w8a16-fp8", "weight (fp8 [N, K]), weight_scale (per tensor/shard, [N, 1] or "
        "[ceil(N/128), ceil(K/128)]), input_scale? (ignored), bias?", "CompressedTensorsW8A16Fp8", qp_bind_ct_w8a16_fp8),
    [QP_SCHEME_NVFP4_A16] = CT_LOWERED("nvfp4-a16", "weight_packed (fp4 pairs uint8 [N, K/2]), weight_scale (fp8 [N, K/16]), "
        "weight_global_scale (per shard), bias?", "CompressedTensorsW4A4Fp4, CompressedTensorsW4A4Nvfp4MoEMethod",
        qp_bind_ct_nvfp4_a16),
    [QP_SCHEME_W4A8_INT] = CT_ROW("w4a8-int", "weight (int8 [N, K]), weight_scale",
        "CompressedTensorsW4A8Int, CompressedTensorsW4A8Int8MoEMethod"),
    [QP_SCHEME_W4A8_FP8] = CT_ROW("w4a8-fp8", "weight_packed (int32), weight_shape, weight_scale (group 128), weight_chan_scale",
        "CompressedTensorsW4A8Fp8, CompressedTensorsW4A8Fp8MoEMethod"),
    /* (vLLM's Marlin W4A16 path, which every capability below 100 takes) */
    [QP_SCHEME_CT_MXFP4] = CT_LOWERED("ct-mxfp4", "weight_packed (fp4 pairs uint8 [N, K/2]), weight_scale (e8m0 uint8 "
        "[N, K/32]), bias?", "CompressedTensorsW4A4Mxfp4, CompressedTensorsW4A4Mxfp4MoEMethod", qp_bind_ct_mxfp4),
    [QP_SCHEME_CT_MXFP8] = CT_ROW("ct-mxfp8", "weight (fp8 [N, K]), weight_scale (e8m0 [N, K/32])",
        "CompressedTensorsW8A8Mxfp8, CompressedTensorsW8A8Mxfp8MoEMethod"),
    [QP_SCHEME_CT_W4A8_MXFP4] = CT_ROW("ct-w4a8-mxfp4", "weight_packed (fp4 [N, K/2]), weight_scale (e8m0 [N, K/32])",
        "CompressedTensorsW4A8Mxfp4, CompressedTensorsW4A8Mxfp4MoEMethod"),
    [QP_SCHEME_WNA8O8_INT] = CT_ROW("wna8o8-int", "weight_packed or weight, weight_scale, input_scale, output_scale",
        "CompressedTensorsWNA8O8Int"),
    [QP_SCHEME_WNA8_INT] = CT_ROW("wna8-int", "weight_packed (int32), weight_shape, weight_scale, weight_zero_point?",
        "CompressedTensorsWNA8Int"),
    [QP_SCHEME_WNA4_INT] = CT_ROW("wna4-int", "weight_packed (int32), weight_shape, weight_scale, weight_zero_point?",
        "CompressedTensorsWNA4Int"),
};
_Static_assert(sizeof rows / sizeof *rows == QP_SCHEME_KIND_COUNT_, "one row per qp_scheme_kind");

const qp_scheme_row *qp_scheme_row_of(qp_scheme_kind kind) {
    return &rows[(unsigned)kind < QP_SCHEME_KIND_COUNT_ && rows[kind].name ? kind : QP_SCHEME_NONE];
}

int qp_scheme_row_runs(const qp_scheme_row *r) { return (r->bind || r->bind_ct) && !r->lowered; }

const char *qp_lin_family_name(qp_lin_family f) {
    static const char *const n[] = {"none", "dense", "w8a8", "int4", "block-float"};
    return (unsigned)f <= QP_LIN_BLOCK_FLOAT ? n[f] : "unknown";
}

QP_API const char *qp_scheme_kind_name(qp_scheme_kind k) {
    return (unsigned)k < QP_SCHEME_KIND_COUNT_ && rows[k].name ? rows[k].name : "unknown";
}

QP_API qp_status qp_scheme_kind_describe(qp_scheme_kind kind, qp_scheme_kind_info *out) {
    if (!out || out->struct_size < sizeof *out || (unsigned)kind >= QP_SCHEME_KIND_COUNT_ || !rows[kind].name)
        return QP_ERR_INVALID_ARGUMENT;
    const qp_scheme_row *r = &rows[kind];
    size_t n = out->struct_size;
    memset(out, 0, sizeof *out);
    out->struct_size = n;
    out->name = r->name;
    out->family = qp_lin_family_name(r->family);
    out->linear = r->bind != NULL || r->bind_ct != NULL;
    out->moe = r->moe_refusal == NULL;
    out->exact = r->exact;
    out->moe_refusal = r->moe_refusal;
    out->tensors = r->tensors;
    out->classes = r->classes;
    return QP_OK;
}

const qp_backend_kind *qp_backend_kind_of(const qp_backend_ops *ops, qp_scheme_kind kind) {
    for (size_t i = 0; ops && ops->linear_kinds && i < ops->n_linear_kinds; i++)
        if (ops->linear_kinds[i].kind == kind) return &ops->linear_kinds[i];
    return NULL;
}

qp_status qp_backend_kinds_check(const qp_backend_ops *ops, char *why, size_t cap) {
    if (!ops->linear_kinds || !ops->n_linear_kinds) {
        snprintf(why, cap, "backend %s has no scheme-kind table (qp_backend_ops.linear_kinds)", ops->name);
        return QP_ERR_UNSUPPORTED;
    }
    int seen[QP_SCHEME_KIND_COUNT_] = {0};
    for (size_t i = 0; i < ops->n_linear_kinds; i++) {
        const qp_backend_kind *e = &ops->linear_kinds[i];
        if ((unsigned)e->kind >= QP_SCHEME_KIND_COUNT_ || !qp_scheme_row_runs(&rows[e->kind])) {
            snprintf(why, cap, "backend %s: linear_kinds[%zu] is %s, not a linear scheme kind", ops->name, i,
                     qp_scheme_kind_name(e->kind));
            return QP_ERR_UNSUPPORTED;
        }
        if (seen[e->kind]++) {
            snprintf(why, cap, "backend %s: linear_kinds names %s twice", ops->name, rows[e->kind].name);
            return QP_ERR_UNSUPPORTED;
        }
        if (!e->runs && (!e->reason || !*e->reason)) {
            snprintf(why, cap, "backend %s: linear_kinds refuses %s without a reason", ops->name, rows[e->kind].name);
            return QP_ERR_UNSUPPORTED;
        }
    }
    for (int k = 0; k < QP_SCHEME_KIND_COUNT_; k++)
        if (qp_scheme_row_runs(&rows[k]) && !seen[k]) {
            snprintf(why, cap, "backend %s does not say whether it runs scheme kind %s (its linear_kinds table "
                     "leaves it out)", ops->name, rows[k].name);
            return QP_ERR_UNSUPPORTED;
        }
    return QP_OK;
}
