#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Tiled W8A8-FP8 GEMM: tiles as vk_gemm_i8.comp, the e4m3fn codes decoded
// once into fp32 shared tiles (a 256-entry table), fp32 accumulation.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(local_size_x = 256) in;
#define BM 64u
#define BN 64u
#define BKW 8u
#define BK 32u

layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
#include "vk_epilogue.glsl"

shared float lut[256];
shared float As[BK][BM];
shared float Bs[BK][BN];

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
    lut[t] = e4m3_to_f32(t);
    barrier();
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < pc.Kw; k0 += BKW) {
        for (uint l = t; l < BM * BKW; l += 256u) {
            uint r = l / BKW, kk = l % BKW, kw = k0 + kk;
            uint gm = m0 + r, gn = n0 + r;
            uint a = (gm < pc.M && kw < pc.Kw) ? xq[gm * pc.Kw + kw] : 0u;
            uint b = (gn < pc.n_count && kw < pc.Kw) ? w[gn * pc.Kw + kw] : 0u;
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                As[kk * 4u + e][r] = lut[bitfieldExtract(a, int(8u * e), 8)];
                Bs[kk * 4u + e][r] = lut[bitfieldExtract(b, int(8u * e), 8)];
            }
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
            if (m < pc.M && nl < pc.n_count) store_float(m, nl, acc[i][j]);
        }
    }
}
