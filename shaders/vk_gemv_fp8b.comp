#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// W8A8-FP8 per-block GEMV (cpu/ref_fp8.c): e4m3 codes of x (from
// vk_act_fp8g.comp) and of W [N][K], per-token-group activation scales
// sx[m][g] and weight block scales ws[n / 128][g]. Each invocation owns
// whole groups of 128 (strided by the work-group size): the group's
// products summed in fp32, then acc += (part * sx) * sw as the reference's
// sum_g part_g * s_x * s_w; a shared-memory reduction across invocations,
// y = rnd(acc + bias). Whole groups per invocation (not coalesced 16-byte
// pieces) because the group sum is what meets the scales: with an infinite
// activation scale (a group holding an inf) the reference gives
// part * inf, NaN exactly when the whole group's part is 0.
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_fp8b.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 6) const uint MMAX = 16;
layout(local_size_x_id = 0) in;
#define NC 4u

layout(std430, binding = 1) readonly buffer XQ { uvec4 xq[]; };
layout(std430, binding = 2) readonly buffer STF { float sx[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w[]; };
layout(std430, binding = 4) readonly buffer WS { float ws[]; };
layout(std430, binding = 6) readonly buffer BIAS { uint16_t bias[]; };
layout(std430, binding = 7) writeonly buffer Y { uint16_t y[]; };

shared float lut[256];
shared float red[MMAX * NC * WG];

float dotw(uint a, uint b) {
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 32u; i += 8u)
        s += lut[bitfieldExtract(a, int(i), 8)] * lut[bitfieldExtract(b, int(i), 8)];
    return s;
}

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint i = t; i < 256u; i += WG) lut[i] = e4m3_to_f32(i);
    barrier();
    uint n0 = gl_WorkGroupID.x * NC;
    uint Kv = pc.K / 16u, G = pc.aux0;
    float acc[MMAX * NC];
    [[unroll]] for (uint i = 0u; i < MMAX * NC; i++) acc[i] = 0.0;
    [[unroll]] for (uint c = 0u; c < NC; c++) {
        uint nl = min(n0 + c, pc.n_count - 1u), n = pc.n_base + nl;
        for (uint g = t; g < G; g += WG) {
            float part[MMAX];
            [[unroll]] for (uint m = 0u; m < MMAX; m++) part[m] = 0.0;
            for (uint q = 0u; q < 8u; q++) {
                uvec4 wv = w[nl * Kv + g * 8u + q];
                [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                    if (m < pc.M) {
                        uvec4 xv = xq[(pc.m_base + m) * Kv + g * 8u + q];
                        part[m] += (dotw(xv.x, wv.x) + dotw(xv.y, wv.y)) + (dotw(xv.z, wv.z) + dotw(xv.w, wv.w));
                    }
                }
            }
            float swv = ws[(n / 128u) * G + g];
            [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                if (m < pc.M) {
                    acc[m * NC + c] = fp8b_fold(acc[m * NC + c], part[m], sx[(pc.m_base + m) * G + g], swv);
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
