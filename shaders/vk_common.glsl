// Shared GLSL helpers for the Vulkan backend (shaders/vk_*.comp).
//
// Exactness (docs/semantics.md §18): every conversion that rounds is
// done with integer operations here, because Vulkan leaves the rounding mode
// of OpFConvert to 16 bits and the precision of OpFDiv (2.5 ulp) open.
// Variables that feed the reference's float order are `precise` so the
// compiler never contracts a mul+add that the reference rounds twice.
#ifndef VK_COMMON_GLSL
#define VK_COMMON_GLSL

// ---- fp16 / bf16 decode (exact) -------------------------------------------
float f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0u) {
        // subnormal or zero: m * 2^-24 is exact in fp32
        float v = float(m) * 5.9604644775390625e-8;
        return uintBitsToFloat(floatBitsToUint(v) | s);
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

float bf16_to_f32(uint b) { return uintBitsToFloat(b << 16); }

float act_to_f32(uint bits, bool is_bf16) { return is_bf16 ? bf16_to_f32(bits) : f16_to_f32(bits); }

// ---- fp32 -> fp16 / bf16, round to nearest even, NaN -> 0x7FFF -------------
uint f32_to_f16(float f) {
    uint u = floatBitsToUint(f);
    uint s = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FFFu;                 // NaN (docs/semantics.md §18)
    if (a >= 0x477FF000u) return s | 0x7C00u;            // >= 65520: inf
    if (a >= 0x38800000u) {                              // normal fp16 range
        uint r = a + 0xFFFu + ((a >> 13) & 1u);
        return s | ((r >> 13) - (112u << 10));
    }
    // subnormal fp16: a * 2^24 is exact, roundEven is RNE on the integer grid
    float v = uintBitsToFloat(a) * 16777216.0;
    return s | uint(roundEven(v));
}

uint f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

uint f32_to_act(float f, bool is_bf16) { return is_bf16 ? f32_to_bf16(f) : f32_to_f16(f); }

// ---- e4m3fn --------------------------------------------------------------
// Encode of a value already clamped to [-448, 448] (scaled_fp8_conversion),
// RNE; |x| <= 2^-10 -> +-0.
uint f32_to_e4m3(float r) {
    uint u = floatBitsToUint(r);
    uint s = (u >> 24) & 0x80u;
    uint a = u & 0x7FFFFFFFu;
    if (a < 0x3C800000u) {                               // < 2^-6: subnormal grid 2^-9
        float v = uintBitsToFloat(a) * 512.0;
        return s | uint(roundEven(v));
    }
    uint q = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    return s | (q - (120u << 3));
}

// vLLM's conversion: clamp with fminf/fmaxf (NaN -> +448), then encode.
uint fp8_conv(float x) {
    if (isnan(x)) return 0x7Eu;
    return f32_to_e4m3(clamp(x, -448.0, 448.0));
}

float e4m3_to_f32(uint c) {
    uint s = (c & 0x80u) << 24;
    uint e = (c >> 3) & 0xFu;
    uint m = c & 7u;
    if (e == 15u && m == 7u) return uintBitsToFloat(s | 0x7FC00000u);
    if (e == 0u) {
        float v = float(m) * 0.001953125;                // m * 2^-9
        return uintBitsToFloat(floatBitsToUint(v) | s);
    }
    return uintBitsToFloat(s | ((e + 120u) << 23) | (m << 20));
}

// ---- exact fma ------------------------------------------------------------
// Vulkan only promises fma() as precise as a*b+c (lavapipe lowers it to a
// multiply and an add), so the single-rounding fma the reference uses is
// built from correctly rounded adds and multiplies: Dekker's product
// (Veltkamp split), TwoSum, and Boldo-Melquiond's round-to-odd final sum.
// Exact while nothing overflows or underflows (|a|,|b| < 2^100).
void two_sum(float a, float b, out float s, out float e) {
    precise float ss = a + b;
    precise float bb = ss - a;
    precise float ee = (a - (ss - bb)) + (b - bb);
    s = ss; e = ee;
}
void two_prod(float a, float b, out float p, out float e) {
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float pp = a * b;
    precise float ee = ((ah * bh - pp) + ah * bl + al * bh) + al * bl;
    p = pp; e = ee;
}
// x + y rounded to odd: the RN sum, moved to its odd neighbour on the side
// of the exact value when it is inexact and even.
float add_ro(float x, float y) {
    float s, e;
    two_sum(x, y, s, e);
    uint sb = floatBitsToUint(s);
    if (e != 0.0 && (sb & 1u) == 0u) sb = ((e > 0.0) == (s > 0.0)) ? sb + 1u : sb - 1u;
    return uintBitsToFloat(sb);
}
float fma_rn(float a, float b, float c) {
    if (isinf(a) || isinf(b) || isinf(c) || isnan(a) || isnan(b) || isnan(c) || a == 0.0 || b == 0.0) {
        precise float p = a * b;
        // zero + zero: the sign by integer ops, since compilers fold x + 0.0
        // to x even under `precise` (lavapipe does), turning +0 into -0
        if (p == 0.0 && c == 0.0) return uintBitsToFloat(floatBitsToUint(p) & floatBitsToUint(c) & 0x80000000u);
        precise float r = p + c;
        return r;
    }
    float ph, pl, uh, ul;
    two_prod(a, b, ph, pl);
    if (isinf(ph)) { precise float r = ph + c; return r; }
    two_sum(c, ph, uh, ul);
    float t = add_ro(ul, pl);
    precise float r = uh + t;
    return r;
}

// ---- correctly rounded division ------------------------------------------
// OpFDiv may be 2.5 ulp off; pick the best of q-1ulp, q, q+1ulp by the exact
// fma residual x - c*y (ties to the even significand). Specials and ranges
// where the residual could underflow keep the hardware quotient.
float div_rn(float x, float y) {
    if (isnan(x) || isnan(y)) return uintBitsToFloat(0x7FC00000u);
    if (y == 0.0) {
        if (x == 0.0) return uintBitsToFloat(0x7FC00000u);
        uint sg = (floatBitsToUint(x) ^ floatBitsToUint(y)) & 0x80000000u;
        return uintBitsToFloat(sg | 0x7F800000u);
    }
    if (isinf(y)) {
        if (isinf(x)) return uintBitsToFloat(0x7FC00000u);
        uint sg = (floatBitsToUint(x) ^ floatBitsToUint(y)) & 0x80000000u;
        return uintBitsToFloat(sg);
    }
    precise float q = x / y;
    float ax = abs(x), aq = abs(q);
    if (isinf(x) || ax < 1.0e-30 || aq < 1.0e-30 || aq > 1.0e30 || abs(y) > 1.0e30 || abs(y) < 1.0e-30) return q;
    uint qb = floatBitsToUint(q);
    float best = q;
    precise float rb = abs(fma_rn(-q, y, x));
    for (int d = -1; d <= 1; d += 2) {
        float c = uintBitsToFloat(uint(int(qb) + d));
        precise float rc = abs(fma_rn(-c, y, x));
        if (rc < rb || (rc == rb && (floatBitsToUint(c) & 1u) == 0u)) { best = c; rb = rc; }
    }
    return best;
}

// ---- integer conversions of vLLM's int8 quantizers ---------------------------
// cvt.rni.sat.s32.f32
int rni_sat32(float x) {
    if (isnan(x)) return 0;
    float r = roundEven(x);
    if (r >= 2147483648.0) return 2147483647;
    if (r < -2147483648.0) return -2147483647 - 1;
    return int(r);
}
// cvt.rni.sat.s8.f32
int rni_sat8(float x) {
    if (isnan(x)) return 0;
    float r = roundEven(x);
    return int(clamp(r, -128.0, 127.0));
}
int sat8_i32(int v) { return clamp(v, -128, 127); }

// NaN-skipping max/min as fmaxf/fminf with a non-NaN accumulator.
float nmax(float a, float v) { return v > a ? v : a; }
float nmin(float a, float v) { return v < a ? v : a; }

// fp16 sum a + b of two fp16 values rounded once to fp16 (QQQ bias add):
// an fp32 sum with round-to-odd (TwoSum error decides the odd neighbour)
// has 13 spare bits, so its RNE to fp16 equals the exact sum's.
uint f16_add_rn(uint ha, uint hb) {
    float a = f16_to_f32(ha), b = f16_to_f32(hb);
    precise float s = a + b;
    if (isinf(s) || isnan(s)) return f32_to_f16(s);
    precise float bb = s - a;
    precise float err = (a - (s - bb)) + (b - bb);
    uint sb = floatBitsToUint(s);
    if (err != 0.0 && (sb & 1u) == 0u) {
        bool up = (err > 0.0) == (s > 0.0);           // away from zero in magnitude
        sb = up ? sb + 1u : sb - 1u;
    }
    return f32_to_f16(uintBitsToFloat(sb));
}
#endif
