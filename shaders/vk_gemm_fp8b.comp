#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Tiled W8A8-FP8 per-block GEMM (M > 16): tiles as vk_gemm_fp8.comp; the
// products of one group of 128 summed in fp32 per output, then folded as
// acc += (part * sx[m][g]) * sw[n / 128][g] (cpu/ref_fp8.c's order).
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_fp8b.glsl"

layout(local_size_x = 256) in;
#define BM 64u
#define BN 64u
#define BKW 8u
#define BK 32u

layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
layout(std430, binding = 2) readonly buffer STF { float sx[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer WS { float ws[]; };
layout(std430, binding = 6) readonly buffer BIAS { uint16_t bias[]; };
layout(std430, binding = 7) writeonly buffer Y { uint16_t y[]; };

shared float lut[256];
shared float As[BK][BM];
shared float Bs[BK][BN];

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
    lut[t] = e4m3_to_f32(t);
    barrier();
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint Kw = pc.K / 4u, G = pc.aux0;
    float acc[4][4], part[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    for (uint g = 0u; g < G; g++) {
        [[unroll]] for (uint i = 0u; i < 4u; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) part[i][j] = 0.0;
        for (uint k0 = g * 32u; k0 < g * 32u + 32u; k0 += BKW) {
            for (uint l = t; l < BM * BKW; l += 256u) {
                uint r = l / BKW, kk = l % BKW, kw = k0 + kk;
                uint gm = m0 + r, gn = n0 + r;
                uint a = gm < pc.M ? xq[gm * Kw + kw] : 0u;
                uint b = gn < pc.n_count ? w[gn * Kw + kw] : 0u;
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
                    [[unroll]] for (uint j = 0u; j < 4u; j++) part[i][j] = fma(a[i], b[j], part[i][j]);
            }
            barrier();
        }
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint m = min(m0 + ty + 16u * i, pc.M - 1u);
            float s_x = sx[m * G + g];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint n = pc.n_base + min(n0 + tx + 16u * j, pc.n_count - 1u);
                acc[i][j] = fp8b_fold(acc[i][j], part[i][j], s_x, ws[(n / 128u) * G + g]);
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint nl = n0 + tx + 16u * j;
            if (m < pc.M && nl < pc.n_count) {
                uint n = pc.n_base + nl;
                precise float v = HAS_BIAS ? acc[i][j] + act_to_f32(uint(bias[n]), IS_BF16) : acc[i][j];
                y[m * pc.N + n] = uint16_t(f32_to_act(v, IS_BF16));
            }
        }
    }
}
