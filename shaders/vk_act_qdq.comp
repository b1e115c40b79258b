#version 450
#extension GL_GOOGLE_include_directive : require
// Activations of the float-weight layers as fp32 rows [M][Kw]
// (Kw = K rounded up to 32, the padding zero), each value x' exactly the
// reference's act-dtype activation:
//   MODE 0: x as is (W4A16, unquantized, OCP-MX without activation quant);
//   MODE 1: OCP-MX qdq (api/quant_mx.c qp_quant_mx + qp_dequant_mx, then RNE
//           to the act dtype): blocks of 32, Quark's even e8m0 scale of the
//           block absmax (a NaN makes the block NaN), elements x / 2^e
//           rounded to the element format pc.aux0 (0 fp4 e2m1, 1 fp6 e3m2,
//           2 fp6 e2m3, 3 fp8 e4m3fn; saturating, NaN -> the encoder's code),
//           back as value * 2^e; scale rule bits pc.aux1 (mbits | emax << 8);
//   MODE 2: W4A8-MXFP4-FP8 static fp8 qdq (cpu/ref_w4a8_mxfp4.c):
//           t = clamp(rnd(x / s), +-448), x' = rnd(e4m3(t) * s);
//   MODE 3: NVFP4 (api/quant_mx.c qp_quant_nvfp4, cpu/ref_nvfp4.c): blocks of
//           16, g = pc.input_scale, 1/g = pc.aux2, fp32(1/6) = pc.aux3.
// Every step is a correctly rounded fp32 operation or an exact one (scaling
// by powers of two, integer-grid rounding), in the reference's order, so x'
// matches it bit for bit. One work-group per row, one invocation per block.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint MODE = 0;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 1) writeonly buffer XF { float xf[]; };

float xin(uint m, uint k) { return act_to_f32(uint(x[m * pc.K + k]), IS_BF16); }
float rnd_act(float v) { return act_to_f32(f32_to_act(v, IS_BF16), IS_BF16); }
// 2^e for -126 <= e <= 127
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
// v * 2^e, -127 <= e <= 127, rounded once (the last multiply is the only
// inexact one: v * 2^-1 is exact for the normal values that can matter)
float scale2(float v, int e) {
    if (e >= -126) { precise float r = v * pow2(e); return r; }
    precise float h = v * 0.5;
    precise float r = h * pow2(e + 1);
    return r;
}

// RNE of x to a saturating minifloat: mb mantissa bits, smallest normal
// exponent emin, largest value maxv; NaN -> nanv. The sign is kept (-0).
float mini_round(float v, int mb, int emin, float maxv, float nanv) {
    if (isnan(v)) return nanv;
    uint u = floatBitsToUint(v);
    uint s = u & 0x80000000u;
    float a = uintBitsToFloat(u & 0x7FFFFFFFu);
    float r;
    if (isinf(a) || a > 2.0 * maxv) {
        r = maxv;
    } else {
        int e = max(int((u >> 23) & 0xFFu) - 127, emin);
        precise float g = a * pow2(mb - e);
        precise float q = roundEven(g) * pow2(e - mb);
        r = min(q, maxv);
    }
    return uintBitsToFloat(s | floatBitsToUint(r));
}

float elem_round(uint elem, float v) {
    if (elem == 0u) return mini_round(v, 1, 0, 6.0, 6.0);           // fp4 e2m1, NaN -> 0x7 (+6)
    if (elem == 1u) return mini_round(v, 2, -2, 28.0, 28.0);        // fp6 e3m2, NaN -> 0x1F
    if (elem == 2u) return mini_round(v, 3, 0, 7.5, 7.5);           // fp6 e2m3, NaN -> 0x1F
    return mini_round(v, 3, -6, 448.0, uintBitsToFloat(0x7FC00000u)); // e4m3fn, NaN -> 0x7F|s
}

// Quark's even_round shared scale (docs/semantics.md §6), on the fp32 bits.
uint even_scale(float amax, uint mbits, int emax) {
    float a = abs(amax);
    if (isnan(a)) return 255u;
    uint b = a == 0.0 ? 0x00800000u : floatBitsToUint(a);
    b += 1u << (22u - mbits);
    b &= 0xFF800000u;
    int E = int((b >> 23) & 0xFFu);
    int e = E == 0 ? -1000 : E == 255 ? 1000 : E - 127 - emax;
    return uint(clamp(e, -127, 127) + 127);
}

void main() {
    uint m = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint row = m * pc.Kw;
    if (MODE == 0u) {
        for (uint k = t; k < pc.Kw; k += WG) xf[row + k] = k < pc.K ? xin(m, k) : 0.0;
        return;
    }
    if (MODE == 2u) {
        float s = pc.input_scale;
        for (uint k = t; k < pc.Kw; k += WG) {
            float o = 0.0;
            if (k < pc.K) {
                float tt = rnd_act(div_rn(xin(m, k), s));
                tt = isnan(tt) ? 448.0 : clamp(tt, -448.0, 448.0);   // fmaxf(-448, fminf(t, 448))
                float q = elem_round(3u, tt);
                precise float p = q * s;
                o = rnd_act(p);
            }
            xf[row + k] = o;
        }
        return;
    }
    for (uint k = pc.K + t; k < pc.Kw; k += WG) xf[row + k] = 0.0;
    uint B = MODE == 1u ? 32u : 16u;
    for (uint blk = t; blk * B < pc.K; blk += WG) {
        uint k0 = blk * B;
        if (MODE == 1u) {
            float a = 0.0;
            for (uint i = 0u; i < B; i++) {
                float v = abs(xin(m, k0 + i));
                if (isnan(v)) { a = v; break; }
                if (v > a) a = v;
            }
            uint s = even_scale(a, pc.aux1 & 0xFFu, int(pc.aux1 >> 8));
            for (uint i = 0u; i < B; i++) {
                float o;
                if (s == 255u) {
                    o = uintBitsToFloat(0x7FC00000u);
                } else {
                    float q = elem_round(pc.aux0, scale2(xin(m, k0 + i), 127 - int(s)));
                    o = rnd_act(scale2(q, int(s) - 127));
                }
                xf[row + k0 + i] = o;
            }
        } else {
            float g = pc.input_scale, inv_g = pc.aux2, inv6 = pc.aux3;
            float vmax = 0.0;
            for (uint i = 0u; i < B; i++) vmax = nmax(vmax, abs(xin(m, k0 + i)));
            precise float t1 = vmax * inv6;
            precise float sf = g * t1;
            float sf_f = e4m3_to_f32(f32_to_e4m3(min(sf, 448.0)));
            precise float den = sf_f * inv_g;
            float out_scale = sf_f == 0.0 ? 0.0 : div_rn(1.0, den);
            float ds = div_rn(sf_f, g);
            for (uint i = 0u; i < B; i++) {
                precise float p = xin(m, k0 + i) * out_scale;
                float q = elem_round(0u, p);
                precise float o = q * ds;
                xf[row + k0 + i] = rnd_act(o);
            }
        }
    }
}
