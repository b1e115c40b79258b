#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Small-M W8A8-FP8 GEMV: e4m3fn codes decoded in the shader through a
// 256-entry table in shared memory, fp32 accumulation; same streaming as
// vk_gemv_i8.comp.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
// rows per dispatch (1, 2, 4, 8 or 16): the accumulators and the shared
// reduction are sized for it, so decode (M = 1) keeps 1 KiB of shared memory
layout(constant_id = 6) const uint MMAX = 16;
layout(local_size_x_id = 0) in;
#define NC 4u

layout(std430, binding = 1) readonly buffer XQ { uvec4 xq[]; };
layout(std430, binding = 3) readonly buffer W { uvec4 w[]; };
#include "vk_epilogue.glsl"

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
    uint Kv = pc.Kw / 4u;
    float acc[MMAX * NC];
    [[unroll]] for (uint i = 0u; i < MMAX * NC; i++) acc[i] = 0.0;
    [[unroll]] for (uint c = 0u; c < NC; c++) {
        uint nl = min(n0 + c, pc.n_count - 1u);
        for (uint i = t; i < Kv; i += WG) {
            uvec4 wv = w[nl * Kv + i];
            [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                if (m < pc.M) {
                    uvec4 xv = xq[(pc.m_base + m) * Kv + i];
                    acc[m * NC + c] += (dotw(xv.x, wv.x) + dotw(xv.y, wv.y)) + (dotw(xv.z, wv.z) + dotw(xv.w, wv.w));
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
        float s = 0.0;
        for (uint j = 0u; j < WG; j++) s += red[o * WG + j];
        store_float(pc.m_base + m, n0 + c, s);
    }
}
