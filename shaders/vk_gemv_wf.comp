#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Float-weight GEMV (M <= 16 rows a dispatch): W4A16 int4/uint4,
// OCP-MX / W4A8-MXFP4-FP8 / NVFP4 block-scaled codes and unquantized
// fp16/bf16 weights (vk_wdeq.glsl), kept packed on the device and
// dequantized in registers to the reference's exact weight; activations
// x' [M][Kw] fp32 from vk_act_qdq.comp (padding zero); fp32 accumulation.
// Each invocation takes whole 32-weight chunks of NC = 4 columns, strided
// by the work-group size, then a shared-memory reduction and the epilogue.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 6) const uint MMAX = 16;
layout(local_size_x_id = 0) in;
#define NC 4u

layout(std430, binding = 1) readonly buffer XF { vec4 xf[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
#include "vk_epilogue.glsl"
#include "vk_wdeq.glsl"

shared float red[MMAX * NC * WG];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * NC;
    wf_lut_load(t, WG);

    uint Kc = pc.Kw / 32u;
    float acc[MMAX * NC];
    [[unroll]] for (uint i = 0u; i < MMAX * NC; i++) acc[i] = 0.0;
    [[unroll]] for (uint c = 0u; c < NC; c++) {
        uint nl = min(n0 + c, pc.n_count - 1u), n = pc.n_base + nl;
        for (uint i = t; i < Kc; i += WG) {
            vec4 wv[8];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                float v[8];
                wpart(nl, n, i, j, Kc, v);
                wv[2u * j] = vec4(v[0], v[1], v[2], v[3]);
                wv[2u * j + 1u] = vec4(v[4], v[5], v[6], v[7]);
            }
            [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                if (m < pc.M) {
                    uint xb = ((pc.m_base + m) * Kc + i) * 8u;
                    float s0 = (dot(xf[xb], wv[0]) + dot(xf[xb + 1u], wv[1])) +
                               (dot(xf[xb + 2u], wv[2]) + dot(xf[xb + 3u], wv[3]));
                    float s1 = (dot(xf[xb + 4u], wv[4]) + dot(xf[xb + 5u], wv[5])) +
                               (dot(xf[xb + 6u], wv[6]) + dot(xf[xb + 7u], wv[7]));
                    acc[m * NC + c] += s0 + s1;
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
        store_wf(pc.m_base + m, pc.n_base + n0 + c, s);
    }
}
