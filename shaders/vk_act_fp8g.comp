#version 450
#extension GL_GOOGLE_include_directive : require
// W8A8-FP8 per-block activations: per-token groups of 128,
// bit-exact with api/quant_fp8.c qp_quant_fp8_group: a = fmaxf(1e-10,
// absmax) (NaN skipped), s = a / 448, with ue8m0 (pc.aux1 != 0) s rounded up
// to a power of two on its bits; q = e4m3(x * (1/s)) with ue8m0, else
// e4m3(x / s) (correctly rounded divisions, vLLM's clamp: NaN -> 0x7E).
// One work-group of 32 per (group g, row m); codes [M][K] bytes at xq,
// scales st[m * G + g] (G = pc.aux0 groups a row).
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(local_size_x = 32) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 1) writeonly buffer XQ { uint xq[]; };
layout(std430, binding = 2) writeonly buffer ST { float sx[]; };

shared float red[32];

float ue8m0(float s) {
    float a = max(abs(s), uintBitsToFloat(0x2EDBE6FFu));   // fmaxf(fabsf(s), 1e-10f)
    uint b = floatBitsToUint(a);
    if ((b & 0x7FFFFFu) != 0u) b += 0x800000u;
    return uintBitsToFloat(b & 0xFF800000u);
}

void main() {
    uint g = gl_WorkGroupID.x, m = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    uint k0 = m * pc.K + g * 128u + 4u * t;
    float v[4];
    float a = 0.0;
    for (uint i = 0u; i < 4u; i++) {
        v[i] = act_to_f32(uint(x[k0 + i]), IS_BF16);
        a = nmax(a, abs(v[i]));
    }
    red[t] = a;
    barrier();
    for (uint h = 16u; h > 0u; h >>= 1) {
        if (t < h) red[t] = nmax(red[t], red[t + h]);
        barrier();
    }
    float amax = max(uintBitsToFloat(0x2EDBE6FFu), red[0]);
    float s = div_rn(amax, 448.0);
    bool ue = pc.aux1 != 0u;
    if (ue) s = ue8m0(s);
    float inv = div_rn(1.0, s);
    uint word = 0u;
    for (uint i = 0u; i < 4u; i++) {
        float q;
        if (ue) { precise float p = v[i] * inv; q = p; }
        else q = div_rn(v[i], s);
        word |= fp8_conv(q) << (8u * i);
    }
    xq[(m * pc.K + g * 128u) / 4u + t] = word;
    if (t == 0u) sx[m * pc.aux0 + g] = s;
}
