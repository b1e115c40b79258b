#version 450
#extension GL_GOOGLE_include_directive : require
// Activation quantization on the device, bit-exact with api/quant_int8.c and
// api/quant_fp8.c (docs/semantics.md §12, §13, §18). One
// workgroup per row: invocation 0 derives the row's scale (and zero point),
// then the row is written as packed words of 4 codes, zero-padded to Kw.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
// 0 int8 static sym, 1 int8 static asym, 2 int8 dynamic sym, 3 int8 dynamic
// asym, 4 fp8 static, 5 fp8 dynamic tensor, 6 fp8 dynamic token
layout(constant_id = 1) const uint MODE = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 1) writeonly buffer XQ { uint xq[]; };
layout(std430, binding = 2) buffer ST { uint st[]; };

shared float s_scale, s_inv;
shared int s_zp;

uint quant1(float v) {
    if (MODE == 0u) return uint(rni_sat8(div_rn(v, s_scale))) & 0xFFu;     // true division
    if (MODE == 1u || MODE == 3u) {
        precise float p = v * s_inv;
        return uint(sat8_i32(rni_sat32(p) + s_zp)) & 0xFFu;               // wrapping add
    }
    if (MODE == 2u) { precise float p = v * s_inv; return uint(rni_sat8(p)) & 0xFFu; }
    if (MODE == 6u) return fp8_conv(div_rn(v, s_scale));                    // division (docs/semantics.md §12)
    precise float p = v * s_inv;                                            // fp8 static / tensor
    return fp8_conv(p);
}

void main() {
    uint m = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    if (t == 0u) {
        float scale = pc.input_scale, inv = 0.0;
        int zp = 0;
        float amax = uintBitsToFloat(st[m * ST_WORDS + ST_AMAX]);
        if (MODE == 0u) {
            scale = pc.input_scale;
        } else if (MODE == 1u) {
            inv = div_rn(1.0, scale);
            zp = pc.input_zp;
        } else if (MODE == 2u) {
            scale = div_rn(amax, 127.0);
            inv = amax == 0.0 ? 0.0 : div_rn(127.0, amax);
        } else if (MODE == 3u) {
            float mn = uintBitsToFloat(st[m * ST_WORDS + ST_MIN]);
            float mx = uintBitsToFloat(st[m * ST_WORDS + ST_MAX]);
            precise float range = mx - mn;
            scale = div_rn(range, 255.0);
            precise float z = -128.0 - div_rn(mn, scale);
            zp = rni_sat32(z);
            inv = div_rn(1.0, scale);
        } else if (MODE == 4u) {
            inv = div_rn(1.0, scale);
        } else if (MODE == 5u) {
            float a = 0.0;
            for (uint r = 0u; r < pc.M; r++) a = max(a, uintBitsToFloat(st[r * ST_WORDS + ST_AMAX]));
            scale = div_rn(a, 448.0);                   // no minimum (docs/semantics.md §13)
            inv = div_rn(1.0, scale);
        } else {
            scale = max(div_rn(amax, 448.0), 1.0 / (448.0 * 512.0));
        }
        s_scale = scale; s_inv = inv; s_zp = zp;
        st[m * ST_WORDS + ST_SCALE] = floatBitsToUint(scale);
        st[m * ST_WORDS + ST_ZP] = uint(zp);
    }
    barrier();
    for (uint w = t; w < pc.Kw; w += WG) {
        uint word = 0u;
        for (uint b = 0u; b < 4u; b++) {
            uint k = 4u * w + b;
            if (k < pc.K) word |= quant1(act_to_f32(uint(x[m * pc.K + k]), IS_BF16)) << (8u * b);
        }
        xq[m * pc.Kw + w] = word;
    }
}
