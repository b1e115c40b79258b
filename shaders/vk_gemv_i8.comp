#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Small-M int8 GEMV (M <= 16, decode): W8A8-INT8 (W4=0) and QQQ from packed
// int4 weights (W4=1). Each workgroup owns NC output columns and streams
// their weight rows once, 16 bytes (int4: 8 bytes) per invocation per step
// (coalesced vector loads), for all M rows at once; partial sums meet in
// shared memory (no subgroup ops).
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_dot.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 5) const bool GROUPED = false;   // W4: per-group tables
// rows per dispatch (1, 2, 4, 8 or 16): the accumulators and the shared
// reduction are sized for it, so decode (M = 1) keeps 1 KiB of shared memory
layout(constant_id = 6) const uint MMAX = 16;
layout(local_size_x_id = 0) in;
#define NC 4u

layout(std430, binding = 1) readonly buffer XQ { uvec4 xq[]; };
#if W4
// [n_count][Kw/4] uvec2 of packed codes, then (GROUPED) [n_count][K/128]
// tables of 16 bytes (2 uvec2 each)
layout(std430, binding = 3) readonly buffer W { uvec2 w[]; };
#else
layout(std430, binding = 3) readonly buffer W { uvec4 w[]; };
#endif
#include "vk_epilogue.glsl"

shared int red[MMAX * NC * WG];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * NC;
    uint Kv = pc.Kw / 4u;
    int acc[MMAX * NC];
    [[unroll]] for (uint i = 0u; i < MMAX * NC; i++) acc[i] = 0;
    [[unroll]] for (uint c = 0u; c < NC; c++) {
        uint nl = min(n0 + c, pc.n_count - 1u);        // clamped: the extra sums are dropped
        for (uint i = t; i < Kv; i += WG) {
#if W4
            uvec2 wp = w[nl * Kv + i];
            uvec4 wv;
            if (GROUPED) {
                uint e = pc.n_count * Kv + 2u * (nl * (pc.K / 128u) + i / 8u);
                uvec4 L = uvec4(w[e], w[e + 1u]);
                wv = uvec4(w4_group(wp.x, false, L), w4_group(wp.x, true, L), w4_group(wp.y, false, L),
                           w4_group(wp.y, true, L));
            } else {
                wv = uvec4(w4_channel(wp.x, false), w4_channel(wp.x, true), w4_channel(wp.y, false),
                           w4_channel(wp.y, true));
            }
#else
            uvec4 wv = w[nl * Kv + i];
#endif
            [[unroll]] for (uint m = 0u; m < MMAX; m++) {
                if (m < pc.M) acc[m * NC + c] += dot16(xq[(pc.m_base + m) * Kv + i], wv);
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
        int s = 0;
        for (uint j = 0u; j < WG; j++) s += red[o * WG + j];
        store_int(pc.m_base + m, n0 + c, s);
    }
}
