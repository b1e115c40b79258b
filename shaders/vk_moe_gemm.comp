#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Grouped expert GEMM of the fused MoE (vk_moe.c): one work-group per
// (block of BM slots of one expert, 64 output columns), the blocks and
// their slots written by vk_moe_misc.comp's align stage (info buffer:
// [0] block count, [1 + b] the block's local expert, [1 + MAXB + b*BM + i]
// its slots, -1 padding). A slot's activation row is slot / pc.epi (w13:
// the token, slot / k; w2: the slot itself). BM = 16 is the decode path
// (M <= 16: an expert gets at most one block, so its weights are read once
// per column tile), BM = 64 the prefill tiles.
//   ARITH 0: int8 codes x int8 weights, exact int32 sum;
//   ARITH 1: e4m3 codes x e4m3 weights, fp32 sum (every product exact);
//   ARITH 2: fp32 x' (vk_act_qdq.comp) x weights dequantized by
//            vk_wdeq.glsl to act-dtype values (every product exact in fp32
//            and fp64); F64: the sum in double, rounded once to fp32;
//   ARITH 3: fp8 per-block: e4m3 codes of x (vk_act_fp8g.comp, one fp32
//            scale per row and group of 128 in ST, G = K / 128 a row) x
//            e4m3 weights with one fp32 scale per (row, k-block) in WS;
//            each 128-wide k-block summed on its own, then folded as
//            acc + (part * s_x) * s_w (vk_fp8b.glsl). F64: the k-block sum
//            in double (exact: products are multiples of 2^-18 below 2^18,
//            128 of them fit in 53 bits) rounded once to fp32, the fold and
//            acc in double, rounded once at the end, which is
//            cpu/ref_moe.c's arithmetic; else all in fp32.
// Every output sums k in increasing order, one multiply-add at a time,
// which is cpu/ref_moe.c's order: with exact products the sums, and so the
// outputs, match the reference bit for bit (ARITH 3: without F64 within
// the fp32 summation bound). Epilogue (ARITH 0/1):
// (acc * a_scale) * w_scale, then with ROUTED (flags & 8) times the
// routing weight, all fp32, rounded to the act dtype.
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_moe.glsl"
#include "vk_fp8b.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 6) const uint BM = 64;
#define BN 64u
#define BK 32u
#define RI (BM / 16u)
#define ROUTED ((pc.flags & 8u) != 0u)

layout(std430, binding = 0) readonly buffer INFO { int info[]; };
#if ARITH == 2
layout(std430, binding = 1) readonly buffer XF { float xf[]; };
#else
layout(std430, binding = 1) readonly buffer XQ { uint xq[]; };
#endif
layout(std430, binding = 2) readonly buffer ST { uint st[]; };
layout(std430, binding = 3) readonly buffer W { uint w[]; };
layout(std430, binding = 4) readonly buffer WS { float ws[]; };
layout(std430, binding = 5) readonly buffer AZP { int azp[]; };
layout(std430, binding = 6) readonly buffer RW { float rw[]; };
layout(std430, binding = 7) writeonly buffer Y { uint16_t y[]; };
#if ARITH == 2
#define WDEQ_NO_STORE 1
#include "vk_wdeq.glsl"
#endif

#if ARITH == 0
#define T int
#else
#define T float
#endif
#if (ARITH == 2 || ARITH == 3) && F64
#define ACC double
#else
#define ACC T
#endif

shared T As[BK][BM];
shared T Bs[BK][BN];
shared int slot[BM];

T code(uint word, uint b) {
#if ARITH == 0
    return bitfieldExtract(int(word), int(8u * b), 8);
#elif ARITH == 1 || ARITH == 3
    return e4m3_to_f32((word >> (8u * b)) & 0xFFu);
#else
    return 0.0;
#endif
}

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
    uint b = gl_WorkGroupID.y;
    if (int(b) >= info[0]) return;       // the dispatch covers the most blocks M*k slots can need
#if ARITH == 2
    wf_lut_load(t, 256u);
#endif
    uint maxb = pc.aux1, N = pc.N;
    uint e = uint(info[1u + b]);
    for (uint i = t; i < BM; i += 256u) slot[i] = info[1u + maxb + b * BM + i];
    barrier();
    uint n0 = gl_WorkGroupID.x * BN;
#if ARITH == 2
    uint Kc = pc.Kw / BK;
#else
    uint Kc = pc.Kw / 8u;                // 8 words of 4 codes a chunk
#endif
    ACC acc[RI][4];
    [[unroll]] for (uint i = 0u; i < RI; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = ACC(0);
#if ARITH == 3
    ACC part[RI][4];                     // the current k-block's sums
    [[unroll]] for (uint i = 0u; i < RI; i++) [[unroll]] for (uint j = 0u; j < 4u; j++) part[i][j] = ACC(0);
#define SUM part
#else
#define SUM acc
#endif
    for (uint c = 0u; c < Kc; c++) {
#if ARITH == 2
        for (uint l = t; l < BM * BK; l += 256u) {
            uint r = l / BK, kk = l % BK;
            int s = slot[r];
            As[kk][r] = s >= 0 ? xf[(uint(s) / pc.epi) * pc.Kw + c * BK + kk] : 0.0;
        }
        {
            uint r = t / 4u, j = t % 4u, gn = n0 + r;
            float v[8];
            if (gn < N) {
                uint row = e * N + gn;
                wpart(row, row, c, j, Kc, v);
            } else {
                [[unroll]] for (uint q = 0u; q < 8u; q++) v[q] = 0.0;
            }
            [[unroll]] for (uint q = 0u; q < 8u; q++) Bs[8u * j + q][r] = v[q];
        }
#else
        for (uint l = t; l < BM * 8u; l += 256u) {
            uint r = l / 8u, q = l % 8u;
            int s = slot[r];
            uint word = s >= 0 ? xq[(uint(s) / pc.epi) * pc.Kw + c * 8u + q] : 0u;
            [[unroll]] for (uint z = 0u; z < 4u; z++) As[4u * q + z][r] = code(word, z);
        }
        for (uint l = t; l < BN * 8u; l += 256u) {
            uint r = l / 8u, q = l % 8u, gn = n0 + r;
            uint word = gn < N ? w[(e * N + gn) * pc.Kw + c * 8u + q] : 0u;
            [[unroll]] for (uint z = 0u; z < 4u; z++) Bs[4u * q + z][r] = code(word, z);
        }
#endif
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            T a[RI], bb[4];
            [[unroll]] for (uint i = 0u; i < RI; i++) a[i] = As[kk][ty + 16u * i];
            [[unroll]] for (uint j = 0u; j < 4u; j++) bb[j] = Bs[kk][tx + 16u * j];
            [[unroll]] for (uint i = 0u; i < RI; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) {
                    precise ACC p = ACC(a[i]) * ACC(bb[j]);
                    precise ACC s = SUM[i][j] + p;
                    SUM[i][j] = s;
                }
        }
        barrier();
#if ARITH == 3
        if (c % 4u == 3u) {              // the last chunk of k-block g: fold
            uint g = c / 4u, G = pc.K / 128u;
            [[unroll]] for (uint i = 0u; i < RI; i++) {
                int s = slot[ty + 16u * i]; // padding and unused columns: any in-range scale
                float s_x = uintBitsToFloat(st[(s >= 0 ? uint(s) / pc.epi : 0u) * G + g]);
                [[unroll]] for (uint j = 0u; j < 4u; j++) {
                    uint n = min(n0 + tx + 16u * j, N - 1u);
#if F64
                    float pf = d2f_rn(part[i][j]);
#else
                    float pf = part[i][j];
#endif
                    acc[i][j] = fp8b_fold(acc[i][j], pf, s_x, ws[(e * N + n) * G + g]);
                    part[i][j] = ACC(0);
                }
            }
        }
#endif
    }
    [[unroll]] for (uint i = 0u; i < RI; i++) {
        int s = slot[ty + 16u * i];
        if (s < 0) continue;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint n = n0 + tx + 16u * j;
            if (n >= N) continue;
#if ARITH >= 2
#if F64
            float v = d2f_rn(acc[i][j]);
#else
            float v = acc[i][j];
#endif
#else
            float s_a = uintBitsToFloat(st[(uint(s) / pc.epi) * ST_WORDS + ST_SCALE]);
            precise float v1 = float(acc[i][j]) * s_a;
            precise float v = v1 * ws[e * N + n];
#endif
            if (ROUTED) {
                precise float r = v * rw[s];
                v = r;
            }
            y[uint(s) * N + n] = uint16_t(f32_to_act(v, IS_BF16));
        }
    }
}
