// Helpers of the fused MoE shaders (vk_moe_gemm.comp, vk_moe_misc.comp).
// With F64: double-precision exp and the RNE double -> float conversion,
// so silu = (float)((double)g / (1.0 + exp(-(double)g))) and the emulated
// schemes' double GEMM sums round exactly as cpu/ref_moe.c does. Vulkan
// does not promise how OpFConvert rounds, and GLSL has no double exp, so
// both are built here from correctly rounded double adds and multiplies.
#ifndef VK_MOE_GLSL
#define VK_MOE_GLSL
#if F64
// The fp32 neighbour of f on the side of r's sign (r != 0).
float f32_step(float f, bool up) {
    uint b = floatBitsToUint(f);
    if ((b & 0x7FFFFFFFu) == 0u) return uintBitsToFloat(up ? 1u : 0x80000001u);
    bool pos = (b & 0x80000000u) == 0u;
    return uintBitsToFloat(pos == up ? b + 1u : b - 1u);
}

// RNE of a double to fp32: the hardware conversion, then the better of it
// and its neighbour toward d by the exact residual (ties to even).
float d2f_rn(double d) {
    float f = float(d);
    if (isnan(d) || isinf(f) || isinf(d)) return f;
    double r = d - double(f);            // exact: f is within an ulp of d
    if (r == 0.0LF) return f;
    float g = f32_step(f, r > 0.0LF);
    if (isinf(g)) return f;
    double rf = abs(r), rg = abs(double(g) - d);
    if (rg < rf || (rg == rf && (floatBitsToUint(g) & 1u) == 0u)) return g;
    return f;
}

double pow2d(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); } // -1022 <= k <= 1023

// exp(x) in double, within a few units of 1e-16 relative: x = n ln2 + r
// (Cody-Waite, fdlibm's split of ln2), |r| <= 0.35, Taylor to degree 14.
double exp_d(double x) {
    if (isnan(x)) return x;
    if (x > 709.78LF) return packDouble2x32(uvec2(0u, 0x7FF00000u));
    if (x < -745.2LF) return 0.0LF;
    double n = roundEven(x * 1.4426950408889634074LF);
    precise double r1 = x - n * 6.93147180369123816490e-01LF; // ln2_hi: n * ln2_hi exact
    precise double r = r1 - n * 1.90821492927058770002e-10LF; // ln2_lo
    double p = 1.0LF;
    [[unroll]] for (int i = 14; i >= 1; i--) p = 1.0LF + p * r / double(i);
    int ni = int(n), n1 = ni / 2;
    return p * pow2d(n1) * pow2d(ni - n1);
}
#endif
#endif
