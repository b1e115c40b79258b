// The k-block fold of the fp8 per-block GEMMs (vk_gemv_fp8b.comp,
// vk_gemm_fp8b.comp, vk_moe_gemm.comp ARITH 3): acc + (part * s_x) * s_w,
// part one 128-wide k-block's sum of e4m3 products, s_x the token group's
// activation scale, s_w the weight block's scale. Left to right, each
// operation rounded once: `precise` keeps the compiler from fusing the
// second product into the add, which would round the terms differently
// from the reference. The fp64 overload (a source compiled with F64 = 1)
// is the MoE reference's own order: the k-block sum rounded to fp32 first,
// then the products and the running sum in double.
#ifndef VK_FP8B_GLSL
#define VK_FP8B_GLSL
float fp8b_fold(float acc, float part, float s_x, float s_w) {
    precise float t1 = part * s_x;
    precise float t2 = t1 * s_w;
    precise float r = acc + t2;
    return r;
}
#ifdef F64
#if F64
double fp8b_fold(double acc, float part, float s_x, float s_w) {
    precise double t1 = double(part) * double(s_x);
    precise double t2 = t1 * double(s_w);
    precise double r = acc + t2;
    return r;
}
#endif
#endif
#endif
