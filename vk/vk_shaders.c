/* SPIR-V of shaders/vk_*.comp, compiled at build time by glslangValidator
 * (-V --target-env vulkan1.2 -x: hex words; docs/backends.md). */
#include "vk_internal.h"

static const uint32_t act_stats[] = {
#include "vk_act_stats.spv.inc"
};
static const uint32_t act_quant[] = {
#include "vk_act_quant.spv.inc"
};
static const uint32_t gemv_i8[] = {
#include "vk_gemv_i8.spv.inc"
};
static const uint32_t gemm_i8[] = {
#include "vk_gemm_i8.spv.inc"
};
static const uint32_t gemv_fp8[] = {
#include "vk_gemv_fp8.spv.inc"
};
static const uint32_t gemm_fp8[] = {
#include "vk_gemm_fp8.spv.inc"
};
static const uint32_t gemv_w4[] = {
#include "vk_gemv_w4.spv.inc"
};
static const uint32_t gemm_w4[] = {
#include "vk_gemm_w4.spv.inc"
};
static const uint32_t act_qdq[] = {
#include "vk_act_qdq.spv.inc"
};
static const uint32_t gemv_wf[] = {
#include "vk_gemv_wf.spv.inc"
};
static const uint32_t gemm_wf[] = {
#include "vk_gemm_wf.spv.inc"
};
static const uint32_t act_fp8g[] = {
#include "vk_act_fp8g.spv.inc"
};
static const uint32_t gemv_fp8b[] = {
#include "vk_gemv_fp8b.spv.inc"
};
static const uint32_t gemm_fp8b[] = {
#include "vk_gemm_fp8b.spv.inc"
};
static const uint32_t kv[] = {
#include "vk_kv.spv.inc"
};
static const uint32_t rot[] = {
#include "vk_rot.spv.inc"
};
static const uint32_t moe_gemm_i8[] = {
#include "vk_moe_gemm_i8.spv.inc"
};
static const uint32_t moe_gemm_fp8[] = {
#include "vk_moe_gemm_fp8.spv.inc"
};
static const uint32_t moe_gemm_wf[] = {
#include "vk_moe_gemm_wf.spv.inc"
};
static const uint32_t moe_gemm_wf64[] = {
#include "vk_moe_gemm_wf64.spv.inc"
};
static const uint32_t moe_align[] = {
#include "vk_moe_align.spv.inc"
};
static const uint32_t moe_silu[] = {
#include "vk_moe_silu.spv.inc"
};
static const uint32_t moe_silu64[] = {
#include "vk_moe_silu64.spv.inc"
};
static const uint32_t moe_sum[] = {
#include "vk_moe_sum.spv.inc"
};
static const uint32_t moe_route[] = {
#include "vk_moe_route.spv.inc"
};
#if QP_VK_HAVE_DOT
static const uint32_t gemv_i8_dot[] = {
#include "vk_gemv_i8_dot.spv.inc"
};
static const uint32_t gemm_i8_dot[] = {
#include "vk_gemm_i8_dot.spv.inc"
};
static const uint32_t gemv_w4_dot[] = {
#include "vk_gemv_w4_dot.spv.inc"
};
static const uint32_t gemm_w4_dot[] = {
#include "vk_gemm_w4_dot.spv.inc"
};
#define DOT(x) x, sizeof x
#else
#define DOT(x) NULL, 0
#endif

static const qp_vk_spirv table[QP_VK_SH_COUNT] = {
    [QP_VK_SH_ACT_STATS] = {"vk_act_stats", act_stats, sizeof act_stats},
    [QP_VK_SH_ACT_QUANT] = {"vk_act_quant", act_quant, sizeof act_quant},
    [QP_VK_SH_GEMV_I8] = {"vk_gemv_i8", gemv_i8, sizeof gemv_i8},
    [QP_VK_SH_GEMM_I8] = {"vk_gemm_i8", gemm_i8, sizeof gemm_i8},
    [QP_VK_SH_GEMV_FP8] = {"vk_gemv_fp8", gemv_fp8, sizeof gemv_fp8},
    [QP_VK_SH_GEMM_FP8] = {"vk_gemm_fp8", gemm_fp8, sizeof gemm_fp8},
    [QP_VK_SH_GEMV_I8_DOT] = {"vk_gemv_i8 (OpSDot)", DOT(gemv_i8_dot)},
    [QP_VK_SH_GEMM_I8_DOT] = {"vk_gemm_i8 (OpSDot)", DOT(gemm_i8_dot)},
    [QP_VK_SH_GEMV_W4] = {"vk_gemv_i8 (int4)", gemv_w4, sizeof gemv_w4},
    [QP_VK_SH_GEMM_W4] = {"vk_gemm_i8 (int4)", gemm_w4, sizeof gemm_w4},
    [QP_VK_SH_GEMV_W4_DOT] = {"vk_gemv_i8 (int4, OpSDot)", DOT(gemv_w4_dot)},
    [QP_VK_SH_GEMM_W4_DOT] = {"vk_gemm_i8 (int4, OpSDot)", DOT(gemm_w4_dot)},
    [QP_VK_SH_ACT_QDQ] = {"vk_act_qdq", act_qdq, sizeof act_qdq},
    [QP_VK_SH_GEMV_WF] = {"vk_gemv_wf", gemv_wf, sizeof gemv_wf},
    [QP_VK_SH_GEMM_WF] = {"vk_gemm_wf", gemm_wf, sizeof gemm_wf},
    [QP_VK_SH_ACT_FP8G] = {"vk_act_fp8g", act_fp8g, sizeof act_fp8g},
    [QP_VK_SH_GEMV_FP8B] = {"vk_gemv_fp8b", gemv_fp8b, sizeof gemv_fp8b},
    [QP_VK_SH_GEMM_FP8B] = {"vk_gemm_fp8b", gemm_fp8b, sizeof gemm_fp8b},
    [QP_VK_SH_KV] = {"vk_kv", kv, sizeof kv},
    [QP_VK_SH_ROT] = {"vk_rot", rot, sizeof rot},
    [QP_VK_SH_MOE_GEMM_I8] = {"vk_moe_gemm (int8)", moe_gemm_i8, sizeof moe_gemm_i8},
    [QP_VK_SH_MOE_GEMM_FP8] = {"vk_moe_gemm (fp8)", moe_gemm_fp8, sizeof moe_gemm_fp8},
    [QP_VK_SH_MOE_GEMM_WF] = {"vk_moe_gemm (float weights)", moe_gemm_wf, sizeof moe_gemm_wf},
    [QP_VK_SH_MOE_GEMM_WF64] = {"vk_moe_gemm (float weights, fp64 sum)", moe_gemm_wf64, sizeof moe_gemm_wf64},
    [QP_VK_SH_MOE_ALIGN] = {"vk_moe_misc (align)", moe_align, sizeof moe_align},
    [QP_VK_SH_MOE_SILU] = {"vk_moe_misc (silu, fp32)", moe_silu, sizeof moe_silu},
    [QP_VK_SH_MOE_SILU64] = {"vk_moe_misc (silu, fp64)", moe_silu64, sizeof moe_silu64},
    [QP_VK_SH_MOE_SUM] = {"vk_moe_misc (sum)", moe_sum, sizeof moe_sum},
    [QP_VK_SH_MOE_ROUTE] = {"vk_moe_misc (routing, fp64 exp)", moe_route, sizeof moe_route},
};

const qp_vk_spirv *qp_vk_spirv_get(qp_vk_shader id) {
    return (unsigned)id < QP_VK_SH_COUNT ? &table[id] : 0;
}
