#version 450
#extension GL_GOOGLE_include_directive : require
// fp8 e4m3fn KV cache (cpu/ref_misc.c qp_ref_kv_quantize /
// qp_ref_kv_dequantize), n = pc.M elements, scale = pc.input_scale:
//   MODE 0 quantize:   q[i] = e4m3fn(x[i] / scale) (correctly rounded
//                      division, RNE, saturating to +-448, NaN -> 0x7F | sign);
//                      one invocation per word of 4 codes (a partial last
//                      word keeps the bytes past n);
//   MODE 1 dequantize: x[i] = rnd(value(q[i]) * scale), one per element.
// Bindings: 0 source as 16-bit, 1 destination as words, 2 source as words,
// 3 destination as 16-bit (the host binds each buffer twice).
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint MODE = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer S16 { uint16_t s16[]; };
layout(std430, binding = 1) buffer D32 { uint d32[]; };
layout(std430, binding = 2) readonly buffer S32 { uint s32[]; };
layout(std430, binding = 3) writeonly buffer D16 { uint16_t d16[]; };

uint kv_code(uint bits) {
    float v = act_to_f32(bits, IS_BF16);
    uint sg = (bits & 0x8000u) != 0u ? 0x80u : 0u;
    if (isnan(v)) return 0x7Fu | sg;
    float q = div_rn(v, pc.input_scale);
    if (isnan(q)) return 0x7Fu;
    return f32_to_e4m3(clamp(q, -448.0, 448.0));
}

void main() {
    uint n = pc.M;
    uint stride = gl_NumWorkGroups.x * WG;
    if (MODE == 0u) {
        uint nw = (n + 3u) / 4u;
        for (uint w = gl_GlobalInvocationID.x; w < nw; w += stride) {
            uint word = 0u, keep = 0u;
            for (uint b = 0u; b < 4u; b++) {
                uint i = 4u * w + b;
                if (i < n) word |= kv_code(uint(s16[i])) << (8u * b);
                else keep |= 0xFFu << (8u * b);
            }
            if (keep != 0u) word |= d32[w] & keep;
            d32[w] = word;
        }
    } else {
        for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
            uint c = (s32[i / 4u] >> (8u * (i % 4u))) & 0xFFu;
            precise float v = e4m3_to_f32(c) * pc.input_scale;
            d16[i] = uint16_t(f32_to_act(v, IS_BF16));
        }
    }
}
