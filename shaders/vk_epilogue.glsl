// The scaled-mm epilogues, in the reference's float order (cpu/ref_int8.c,
// cpu/ref_qqq.c, cpu/ref_fp8.c; docs/semantics.md §11 steps 4-5, 6.3, docs/semantics.md §14).
// Needs spec constants EPI, IS_BF16, HAS_BIAS and bindings 2, 4, 5, 6, 7.
#ifndef VK_EPILOGUE_GLSL
#define VK_EPILOGUE_GLSL

layout(std430, binding = 2) readonly buffer ST { uint st[]; };
layout(std430, binding = 4) readonly buffer WS { float ws[]; };
layout(std430, binding = 5) readonly buffer AZP { int azp[]; };
layout(std430, binding = 6) readonly buffer BIAS { uint16_t bias[]; };
layout(std430, binding = 7) writeonly buffer Y { uint16_t y[]; };

// EPI: 0 int8 symmetric, 1 int8 static asymmetric (azp_adj already times
// azp), 2 int8 dynamic asymmetric (azp[m] * azp_adj[n]), 3 QQQ, 4 fp8.
float row_scale(uint m) { return uintBitsToFloat(st[m * ST_WORDS + ST_SCALE]); }

void store_int(uint m, uint nl, int acc) {
    uint n = pc.n_base + nl;
    float s_a = row_scale(m);
    float s_b = ws[n];
    uint out_bits;
    if (EPI == 3u) {
        precise float v1 = float(acc) * s_b;
        precise float v = v1 * s_a;
        out_bits = f32_to_f16(v);
        if (HAS_BIAS) out_bits = f16_add_rn(out_bits, uint(bias[n]));
    } else {
        int t = acc;
        if (EPI == 1u) t = t - azp[n];
        if (EPI == 2u) t = t - int(st[m * ST_WORDS + ST_ZP]) * azp[n];   // wrapping int32
        precise float sbt = s_b * float(t);
        precise float v;
        if (EPI != 0u || HAS_BIAS) {
            float b = HAS_BIAS ? act_to_f32(uint(bias[n]), IS_BF16) : 0.0;
            v = fma_rn(s_a, sbt, b);
        } else {
            v = s_a * sbt;
        }
        out_bits = f32_to_act(v, IS_BF16);
    }
    y[m * pc.N + n] = uint16_t(out_bits);
}

void store_float(uint m, uint nl, float acc) {
    uint n = pc.n_base + nl;
    float s_a = row_scale(m);
    float s_b = ws[n];
    precise float sbt = s_b * acc;
    precise float v;
    if (HAS_BIAS) v = fma_rn(s_a, sbt, act_to_f32(uint(bias[n]), IS_BF16));
    else v = s_a * sbt;
    y[m * pc.N + n] = uint16_t(f32_to_act(v, IS_BF16));
}
#endif
