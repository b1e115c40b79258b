#version 450
#extension GL_GOOGLE_include_directive : require
// Per-row statistics of x for the dynamic activation quantizers (docs/semantics.md §12,
// 6.2): absmax (from 0, NaN skipped as fmaxf does), min and max (from
// +-FLT_MAX). One workgroup per row; a shared-memory tree, no subgroup ops.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 2) buffer ST { uint st[]; };

shared float s_amax[WG], s_min[WG], s_max[WG];

void main() {
    uint m = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    float amax = 0.0, mn = 3.4028234663852886e38, mx = -3.4028234663852886e38;
    for (uint k = t; k < pc.K; k += WG) {
        float v = act_to_f32(uint(x[m * pc.K + k]), IS_BF16);
        amax = nmax(amax, abs(v));
        mn = nmin(mn, v);
        mx = nmax(mx, v);
    }
    s_amax[t] = amax; s_min[t] = mn; s_max[t] = mx;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (t < h) {
            s_amax[t] = max(s_amax[t], s_amax[t + h]);
            s_min[t] = min(s_min[t], s_min[t + h]);
            s_max[t] = max(s_max[t], s_max[t + h]);
        }
        barrier();
    }
    if (t == 0u) {
        st[m * ST_WORDS + ST_AMAX] = floatBitsToUint(s_amax[0]);
        st[m * ST_WORDS + ST_MIN] = floatBitsToUint(s_min[0]);
        st[m * ST_WORDS + ST_MAX] = floatBitsToUint(s_max[0]);
    }
}
