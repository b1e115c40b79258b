#version 450
#extension GL_GOOGLE_include_directive : require
// Quark online input rotation (api/backend.h rotation_forward,
// cpu/ref_misc.c qp_ref_rotation_forward): for K % r == 0,
//   y[m][b*r + j] = rnd(fp32(S * c)), S = fp32 sum over i = 0..r-1 in
//   increasing i of +-x[m][b*r + i] (sign of H[i][j]), c = pc.input_scale.
// r = pc.N, H [r][r] int32 at binding 1; one invocation per output.
// S starts from pc.input_zp's bits (0 at run time): a literal 0.0 would let
// the compiler fold 0 + v into v, turning +0 + -0 = +0 into -0.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 1) readonly buffer H { int h[]; };
layout(std430, binding = 3) writeonly buffer Y { uint16_t y[]; };

void main() {
    uint r = pc.N, total = pc.M * pc.K;
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint o = gl_GlobalInvocationID.x; o < total; o += stride) {
        uint j = (o % pc.K) % r, base = o - j;
        precise float s = intBitsToFloat(pc.input_zp);
        for (uint i = 0u; i < r; i++) {
            float v = act_to_f32(uint(x[base + i]), IS_BF16);
            s = s + (h[i * r + j] > 0 ? v : -v);
        }
        precise float p = s * pc.input_scale;
        y[o] = uint16_t(f32_to_act(p, IS_BF16));
    }
}
