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
#elif STAGE == 3
// 3 routing on the device (qp_moe_enqueue_logits): api/moe_route.c for one
//   token per invocation -- softmax (or sigmoid) scores with the exponential
//   in double rounded once, correctly rounded divisions, the lower index on
//   ties, grouped top-k with the correction bias choosing but not weighting.
//   pc.M tokens, pc.N = G experts, pc.K = k; pc.flags: 1 renormalize,
//   2 sigmoid, 4 a bias; pc.aux0 groups (0: plain top-k), pc.aux1 topk_group,
//   pc.aux2 the routed scaling factor. Scratch [2][M][G]: scores, biased.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer LG { float lg[]; };
layout(std430, binding = 1) writeonly buffer IDS { int ids[]; };
layout(std430, binding = 2) writeonly buffer RW { float rw[]; };
layout(std430, binding = 3) buffer SC { float sc[]; };
layout(std430, binding = 4) readonly buffer BIAS { float bias[]; };
#define KMAX 64

float exp_rn(float x) { return d2f_rn(exp_d(double(x))); }

// the k largest of sc[base + 0 .. n-1], descending (api/moe_route.c topk)
void topk_sc(uint base, uint n, uint k, inout int idx[KMAX]) {
    for (uint j = 0u; j < k; j++) {
        int best = -1;
        for (uint i = 0u; i < n; i++) {
            bool taken = false;
            for (uint t = 0u; t < j; t++) taken = taken || idx[t] == int(i);
            if (taken) continue;
            if (best < 0 || sc[base + i] > sc[base + uint(best)]) best = int(i);
        }
        idx[j] = best;
    }
}

void topk_local(float v[KMAX], uint n, uint k, inout int idx[KMAX]) {
    for (uint j = 0u; j < k; j++) {
        int best = -1;
        for (uint i = 0u; i < n; i++) {
            bool taken = false;
            for (uint t = 0u; t < j; t++) taken = taken || idx[t] == int(i);
            if (taken) continue;
            if (best < 0 || v[i] > v[uint(best)]) best = int(i);
        }
        idx[j] = best;
    }
}

void main() {
    uint m = gl_GlobalInvocationID.x;
    if (m >= pc.M) return;
    uint G = pc.N, k = pc.K, s0 = m * G, b0 = pc.M * G + m * G;
    bool renorm = (pc.flags & 1u) != 0u, sig = (pc.flags & 2u) != 0u, hb = (pc.flags & 4u) != 0u;
    if (!sig) {
        float mx = uintBitsToFloat(0xFF800000u);
        for (uint e = 0u; e < G; e++) { float v = lg[s0 + e]; mx = v > mx ? v : mx; }
        precise float sum = 0.0;
        for (uint e = 0u; e < G; e++) {
            precise float d = lg[s0 + e] - mx;
            float v = exp_rn(d);
            sc[s0 + e] = v;
            sum = sum + v;
        }
        float inv = div_rn(1.0, sum);
        for (uint e = 0u; e < G; e++) { precise float v = sc[s0 + e] * inv; sc[s0 + e] = v; }
    } else {
        for (uint e = 0u; e < G; e++) { precise float t = 1.0 + exp_rn(-lg[s0 + e]); sc[s0 + e] = div_rn(1.0, t); }
    }
    int sel[KMAX];
    uint ng = pc.aux0;
    if (ng > 0u) {
        uint per = G / ng;
        for (uint e = 0u; e < G; e++) { precise float b = hb ? sc[s0 + e] + bias[e] : sc[s0 + e]; sc[b0 + e] = b; }
        float gs[KMAX];
        for (uint g = 0u; g < ng; g++) {
            int two[KMAX];
            topk_sc(b0 + g * per, per, hb ? 2u : 1u, two);
            float best = sc[b0 + g * per + uint(two[0])];
            if (hb) { precise float t = best + sc[b0 + g * per + uint(two[1])]; best = t; }
            gs[g] = best;
        }
        int gi[KMAX];
        topk_local(gs, ng, pc.aux1, gi);
        for (uint e = 0u; e < G; e++) {
            bool keep = false;
            for (uint t = 0u; t < pc.aux1; t++) keep = keep || gi[t] == int(e / per);
            if (!keep) sc[b0 + e] = uintBitsToFloat(0xFF800000u);
        }
        topk_sc(b0, G, k, sel);
    } else {
        topk_sc(s0, G, k, sel);
    }
    precise float sum = 0.0;
    for (uint j = 0u; j < k; j++) sum = sum + sc[s0 + uint(sel[j])];
    for (uint j = 0u; j < k; j++) {
        float w = sc[s0 + uint(sel[j])];
        if (renorm) w = div_rn(w, sum);
        if (ng > 0u && pc.aux2 != 1.0) { precise float t = w * pc.aux2; w = t; }
        ids[m * k + j] = sel[j];
        rw[m * k + j] = w;
    }
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
