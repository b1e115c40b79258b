#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Tiled int8 GEMM for larger M: 64x64 output tiles, 256 invocations each
// computing 4x4 outputs, K staged through shared memory 32 bytes at a time.
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_dot.glsl"

layout(constant_id = 5) const bool GROUPED = false;   // W4: per-group tables
layout(local_size_x = 256) in;
#define BM 64u
#define BN 64u
#define BKW 8u

layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
#include "vk_epilogue.glsl"

shared uint As[BKW][BM];
shared uint Bs[BKW][BN];

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    int acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0;
    for (uint k0 = 0u; k0 < pc.Kw; k0 += BKW) {
        for (uint l = t; l < BM * BKW; l += 256u) {
            uint r = l / BKW, kk = l % BKW, kw = k0 + kk;
            uint gm = m0 + r, gn = n0 + r;
            As[kk][r] = (gm < pc.M && kw < pc.Kw) ? xq[gm * pc.Kw + kw] : 0u;
#if W4
            // QQQ packed int4 (vk_dot.glsl): word kw is the low (even kw) or
            // high (odd kw) nibbles of packed word kw/2 of the row
            uint bv = 0u;
            if (gn < pc.n_count && kw < pc.Kw) {
                uint hw = pc.Kw / 2u;
                uint pw = w[gn * hw + kw / 2u];
                if (GROUPED) {
                    uint e = pc.n_count * hw + 4u * (gn * (pc.K / 128u) + kw / 32u);
                    bv = w4_group(pw, (kw & 1u) != 0u, uvec4(w[e], w[e + 1u], w[e + 2u], w[e + 3u]));
                } else {
                    bv = w4_channel(pw, (kw & 1u) != 0u);
                }
            }
            Bs[kk][r] = bv;
#else
            Bs[kk][r] = (gn < pc.n_count && kw < pc.Kw) ? w[gn * pc.Kw + kw] : 0u;
#endif
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BKW; kk++) {
            uint a[4], b[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) a[i] = As[kk][ty + 16u * i];
            [[unroll]] for (uint j = 0u; j < 4u; j++) b[j] = Bs[kk][tx + 16u * j];
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] += dot4(a[i], b[j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint nl = n0 + tx + 16u * j;
            if (m < pc.M && nl < pc.n_count) store_int(m, nl, acc[i][j]);
        }
    }
}
