#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Tiled float-weight GEMM (M > 16): 64x64 output tiles, 256 invocations x
// 4x4 outputs; K in steps of one 32-weight chunk: the activations x' (fp32
// from vk_act_qdq.comp) and the weights, dequantized once per chunk by
// vk_wdeq.glsl (exact), staged in shared memory; fp32 accumulation.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(local_size_x = 256) in;
#define BM 64u
#define BN 64u
#define BK 32u

layout(std430, binding = 1) readonly buffer XF { float xf[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
#include "vk_epilogue.glsl"
#include "vk_wdeq.glsl"

shared float As[BK][BM];
shared float Bs[BK][BN];

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
    wf_lut_load(t, 256u);

    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint Kc = pc.Kw / 32u;
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    for (uint c = 0u; c < Kc; c++) {
        uint k0 = c * BK;
        for (uint l = t; l < BM * BK; l += 256u) {
            uint r = l / BK, kk = l % BK, gm = m0 + r;
            As[kk][r] = gm < pc.M ? xf[gm * pc.Kw + k0 + kk] : 0.0;
        }
        {
            uint r = t / 4u, j = t % 4u, gn = n0 + r;
            float v[8];
            if (gn < pc.n_count) {
                wpart(gn, pc.n_base + gn, c, j, Kc, v);
            } else {
                [[unroll]] for (uint b = 0u; b < 8u; b++) v[b] = 0.0;
            }
            [[unroll]] for (uint b = 0u; b < 8u; b++) Bs[8u * j + b][r] = v[b];
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            float a[4], b[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) a[i] = As[kk][ty + 16u * i];
            [[unroll]] for (uint j = 0u; j < 4u; j++) b[j] = Bs[kk][tx + 16u * j];
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint nl = n0 + tx + 16u * j;
            if (m < pc.M && nl < pc.n_count) store_wf(m, pc.n_base + nl, acc[i][j]);
        }
    }
}
