#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// The small stages of the fused MoE (vk_moe.c), one per STAGE:
//   0 align (vLLM's moe_align_block_size): one work-group counts the slots
//     of each local expert, gives each expert ceil(count / BM) blocks in
//     expert order and lists its slots in slot order (-1 padding); slots of
//     other ranks' experts get no block. pc.M = M*k slots, pc.N = E,
//     pc.input_zp = expert_offset, pc.aux0 = BM, pc.aux1 = MAXB.
//   1 silu_and_mul: h = rnd(rnd(silu(g)) * u) per slot row (zeros for other
//     ranks' slots, as the reference's zero rows give), silu the fp32 value
//     g / (1 + exp(-g)) evaluated in double and rounded once (F64; without
//     fp64 an fp32 evaluation, not bit-exact). pc.M slots, pc.K = I.
//   2 moe_sum: y[m][n] = sum over the k slots j = 0..k-1 in order, each add
//     rounded to the act dtype, from 0. pc.M tokens, pc.N = H, pc.K = k.
#include "vk_layout.glsl"
#include "vk_common.glsl"
#include "vk_moe.glsl"

#if STAGE == 0
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer INFO { int info[]; };
layout(std430, binding = 1) readonly buffer IDS { int ids[]; };
#define EMAX 1024u
shared uint cnt[EMAX], start[EMAX];

void main() {
    uint t = gl_LocalInvocationID.x, E = pc.N, MK = pc.M, BM = pc.aux0, maxb = pc.aux1;
    int off = pc.input_zp;
    for (uint e = t; e < E; e += 256u) {
        uint c = 0u;
        for (uint s = 0u; s < MK; s++) c += ids[s] - off == int(e) ? 1u : 0u;
        cnt[e] = c;
    }
    barrier();
    if (t == 0u) {
        uint a = 0u;
        for (uint e = 0u; e < E; e++) { start[e] = a; a += (cnt[e] + BM - 1u) / BM; }
        info[0] = int(a);
    }
    barrier();
    for (uint e = t; e < E; e += 256u) {
        uint b0 = start[e], nbl = (cnt[e] + BM - 1u) / BM, p = 0u;
        for (uint q = 0u; q < nbl; q++) info[1u + b0 + q] = int(e);
        for (uint s = 0u; s < MK; s++)
            if (ids[s] - off == int(e)) { info[1u + maxb + b0 * BM + p] = int(s); p++; }
        for (; p < nbl * BM; p++) info[1u + maxb + b0 * BM + p] = -1;
    }
}
#elif STAGE == 1
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer C1 { uint16_t c1[]; };
layout(std430, binding = 1) readonly buffer IDS { int ids[]; };
layout(std430, binding = 7) writeonly buffer C2 { uint16_t c2[]; };

float rnd_act(float v) { return act_to_f32(f32_to_act(v, IS_BF16), IS_BF16); }

float silu(float g) {
#if F64
    double gd = double(g);
    precise double den = 1.0LF + exp_d(-gd);
    precise double q = gd / den;
    return d2f_rn(q);
#else
    return div_rn(g, 1.0 + exp(-g));
#endif
}

void main() {
    uint s = gl_WorkGroupID.y, i = gl_GlobalInvocationID.x, I = pc.K;
    if (i >= I) return;
    int id = ids[s] - pc.input_zp;
    uint o = 0u;
    if (id >= 0 && id < int(pc.N)) {
        float g = act_to_f32(uint(c1[s * 2u * I + i]), IS_BF16);
        float u = act_to_f32(uint(c1[s * 2u * I + I + i]), IS_BF16);
        precise float h = rnd_act(silu(g)) * u;   // exact: two act-dtype values
        o = f32_to_act(h, IS_BF16);
    }
    c2[s * I + i] = uint16_t(o);
}
#else
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer C3 { uint16_t c3[]; };
layout(std430, binding = 1) readonly buffer IDS { int ids[]; };
layout(std430, binding = 7) writeonly buffer Y { uint16_t y[]; };

void main() {
    uint m = gl_WorkGroupID.y, n = gl_GlobalInvocationID.x, H = pc.N, k = pc.K;
    if (n >= H) return;
    float acc = 0.0;
    for (uint j = 0u; j < k; j++) {
        uint s = m * k + j;
        int id = ids[s] - pc.input_zp;
        // another rank's slot adds the reference's +0 row: acc is never -0
        // (it starts at +0 and RNE sums give -0 only from -0 + -0)
        if (id < 0 || id >= int(pc.aux0)) continue;
        precise float a = acc + act_to_f32(uint(c3[s * H + n]), IS_BF16);
        acc = act_to_f32(f32_to_act(a, IS_BF16), IS_BF16);
    }
    y[m * H + n] = uint16_t(f32_to_act(acc, IS_BF16));
}
#endif
