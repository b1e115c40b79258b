// The one descriptor-set and push-constant layout every vk_*.comp shares
// (vk_pipeline.c creates a single VkPipelineLayout for all of them).
#ifndef VK_LAYOUT_GLSL
#define VK_LAYOUT_GLSL
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable

layout(push_constant) uniform PC {
    uint M;          // rows
    uint K;          // input features
    uint Kw;         // 32-bit words per quantized row (a multiple of 4)
    uint N;          // output features (row stride of y)
    uint n_base;     // first output column of this weight chunk
    uint n_count;    // columns in this chunk
    float input_scale;
    int input_zp;
    uint m_base;     // GEMV: first row of this slice of at most 16 rows
    uint flags;      // PC_BF16 | PC_BIAS
    uint epi;        // epilogue (vk_epilogue.glsl)
    uint aux0;       // qdq: element format (vk_act_qdq.comp); fp8-block: groups per row
    uint aux1;       // qdq: MX scale mantissa bits | emax << 8
    float aux2;      // NVFP4: 1 / g
    float aux3;      // NVFP4: fp32(1 / 6)
} pc;

// Uniform per-dispatch choices are push constants, not specialization
// constants: one pipeline serves fp16/bf16, bias or not and every epilogue
// (on lavapipe each pipeline costs a compile of a second or so).
#define IS_BF16 ((pc.flags & 1u) != 0u)
#define HAS_BIAS ((pc.flags & 2u) != 0u)
#define BIAS_AFTER ((pc.flags & 4u) != 0u) // y = rnd(rnd(sum) + bias)
#define EPI (pc.epi)

// Row statistics and activation scales, 8 words per row:
// 0 absmax, 1 min, 2 max (fp32 bits), 3 scale s_a (fp32 bits), 4 zero point.
#define ST_AMAX 0u
#define ST_MIN 1u
#define ST_MAX 2u
#define ST_SCALE 3u
#define ST_ZP 4u
#define ST_WORDS 8u
#endif
