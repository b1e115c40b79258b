#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// W4A16 GEMV (issue 9, spec 6.7): int4/uint4 weights kept packed on the
// device, dequantized in registers, fp32 accumulation, as the OpenCL
// kernel qp_gemv_w4 (shaders/cl_gemm_w4.cl).
//
// Layout (vk_linear.c): w [N][Kw/32] uvec4, Kw = K rounded up to 32; the 32
// weights k = 32c .. 32c+31 of a row are uvec4 c, byte i (word i/4, byte
// i%4) holding k = 32c+i in its low nibble and k = 32c+16+i in its high
// nibble. A nibble is an unsigned code u; the weight is (u - z) * s with
// z = wz[g][n] (uint4: the checkpoint's zero point; int4: 8, codes stored
// as c ^ 8) and s = ws[g][n] (the act-dtype scale widened to fp32),
// g = k / gsz: (u - z) * s is exact in fp32 (5-bit integer times an 11-bit
// mantissa), the very weight the reference multiplies in double. The group
// is constant over a 32-chunk (gsz is a multiple of 32 or covers K).
// Activations: xf [M][Kw] fp32 from vk_act_f32.comp (padding zero).
// y = acc (+ bias in one fp32 add), RNE to the act dtype. The group size
// travels in the push constant input_zp (W4A16 has no activation zero).
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 6) const uint MMAX = 16;
layout(local_size_x_id = 0) in;
#define NC 4u

layout(std430, binding = 1) readonly buffer XF { vec4 xf[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w[]; };
#include "vk_epilogue.glsl"

shared float red[MMAX * NC * WG];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * NC;
    uint Kc = pc.Kw / 32u, gsz = uint(pc.input_zp);
    float acc[MMAX * NC];
    [[unroll]] for (uint i = 0u; i < MMAX * NC; i++) acc[i] = 0.0;
    [[unroll]] for (uint c = 0u; c < NC; c++) {
        uint nl = min(n0 + c, pc.n_count - 1u), n = pc.n_base + nl;
        for (uint i = t; i < Kc; i += WG) {
            uvec4 wv = w[nl * Kc + i];
            uint gi = (i * 32u / gsz) * pc.N + n;
            float s = ws[gi];
            int z = azp[gi];
            vec4 wl[4], wh[4];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint word = wv[j];
                [[unroll]] for (uint b = 0u; b < 4u; b++) {
                    wl[j][b] = float(int(bitfieldExtract(word, int(8u * b), 4)) - z) * s;
                    wh[j][b] = float(int(bitfieldExtract(word, int(8u * b + 4u), 4)) - z) * s;
                }
            }
            [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                if (m < pc.M) {
                    uint xb = ((pc.m_base + m) * Kc + i) * 8u;
                    float lo = (dot(xf[xb], wl[0]) + dot(xf[xb + 1u], wl[1])) +
                               (dot(xf[xb + 2u], wl[2]) + dot(xf[xb + 3u], wl[3]));
                    float hi = (dot(xf[xb + 4u], wh[0]) + dot(xf[xb + 5u], wh[1])) +
                               (dot(xf[xb + 6u], wh[2]) + dot(xf[xb + 7u], wh[3]));
                    acc[m * NC + c] += lo + hi;
                }
            }
        }
    }
    [[unroll]] for (uint m = 0u; m < MMAX; m++) {
        if (m < pc.M) {
            [[unroll]] for (uint c = 0u; c < NC; c++) red[(m * NC + c) * WG + t] = acc[m * NC + c];
        }
    }
    barrier();
    for (uint o = t; o < pc.M * NC; o += WG) {
        uint m = o / NC, c = o % NC;
        if (n0 + c >= pc.n_count) continue;
        uint n = pc.n_base + n0 + c;
        float s = 0.0;
        for (uint j = 0u; j < WG; j++) s += red[o * WG + j];
        precise float v = HAS_BIAS ? s + act_to_f32(uint(bias[n]), IS_BF16) : s;
        y[(pc.m_base + m) * pc.N + n] = uint16_t(f32_to_act(v, IS_BF16));
    }
}
