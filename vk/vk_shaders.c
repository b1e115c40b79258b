/* SPIR-V of shaders/vk_*.comp, compiled at build time by glslangValidator
 * (-V --target-env vulkan1.2 -x: hex words, TOOLCHAIN.md). */
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
static const uint32_t act_f32[] = {
#include "vk_act_f32.spv.inc"
};
static const uint32_t gemv_w4a16[] = {
#include "vk_gemv_w4a16.spv.inc"
};
static const uint32_t gemm_w4a16[] = {
#include "vk_gemm_w4a16.spv.inc"
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
    [QP_VK_SH_ACT_F32] = {"vk_act_f32", act_f32, sizeof act_f32},
    [QP_VK_SH_GEMV_W4A16] = {"vk_gemv_w4a16", gemv_w4a16, sizeof gemv_w4a16},
    [QP_VK_SH_GEMM_W4A16] = {"vk_gemm_w4a16", gemm_w4a16, sizeof gemm_w4a16},
};

const qp_vk_spirv *qp_vk_spirv_get(qp_vk_shader id) {
    return (unsigned)id < QP_VK_SH_COUNT ? &table[id] : 0;
}
