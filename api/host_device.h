/*
 * Routines written once for the host, the CUDA kernels and the OpenCL
 * kernels, where every device must give the host's bits: compiled as C
 * (libqport), as CUDA C++ (the kernels, through cuda/cu_math.h and
 * cuda/cuda_moe.cu), as plain C++ (the CPU emulator of the kernels,
 * tests/cuda_emu) and as OpenCL C (cl/meson.build embeds this file ahead of
 * shaders/cl_common.cl in the program source). Everything is inline: the
 * backend plugins do not link libqport.
 */
#ifndef QP_HOST_DEVICE_H
#define QP_HOST_DEVICE_H

#if defined(__OPENCL_VERSION__)
/* OpenCL C has the fixed-width types under other names and no headers */
typedef int int32_t;
typedef char int8_t;
typedef uint uint32_t;
#define INT32_MAX INT_MAX
#define INT32_MIN INT_MIN
#else
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#endif

/* QP_HD: a function for the host and, under nvcc, the device too; in
 * OpenCL C an inline function of the program. */
#if defined(__OPENCL_VERSION__)
#define QP_HD inline
#elif defined(__CUDACC__)
#define QP_HD __host__ __device__ __forceinline__
#else
#include <math.h>
#define QP_HD static inline
#endif

/* Round to nearest, ties to even, in the current (default) rounding mode:
 * rintf is cvt.rni.f32 on the device, rint in OpenCL C; on the host
 * nearbyintf (which does not raise FE_INEXACT). */
#if defined(__OPENCL_VERSION__)
#define QP_HD_RINT(a) rint(a)
#elif defined(__CUDA_ARCH__)
#define QP_HD_RINT(a) rintf(a)
#else
#define QP_HD_RINT(a) nearbyintf(a)
#endif

/* x is a NaN, tested on its bits: one test in C (where isnan is a macro),
 * C++ and CUDA device code (where it is an overload set) and OpenCL C. */
QP_HD int qp_hd_isnan(float x) {
#if defined(__OPENCL_VERSION__)
    uint32_t u = as_uint(x);
#elif defined(__CUDA_ARCH__)
    uint32_t u = __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
#endif
    return (u & 0x7FFFFFFFu) > 0x7F800000u;
}

/* ---- int8 conversions (api/quant_int8.c, the CUDA k_quant kernel, the
 * OpenCL quantize kernels) ------------------------------------------------ */

/* cvt.rni.sat.s32.f32: round to nearest even, saturate, NaN -> 0. */
QP_HD int32_t qp_rni_sat32(float x) {
    if (qp_hd_isnan(x)) return 0;
    float r = QP_HD_RINT(x);
    if (r >= 2147483648.0f) return INT32_MAX;
    if (r < -2147483648.0f) return INT32_MIN;
    return (int32_t)r;
}

/* cvt.rni.sat.s8.f32 */
QP_HD int8_t qp_rni_sat8(float x) {
    if (qp_hd_isnan(x)) return 0;
    float r = QP_HD_RINT(x);
    return (int8_t)(r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r);
}

/* cvt.sat.s8.s32 */
QP_HD int8_t qp_sat8(int32_t v) { return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v); }

/* int32 add as the GPU does it: wraps. */
QP_HD int32_t qp_add_wrap(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }

/* ---- MoE routing (api/moe_route.c, the CUDA k_moe_route kernel) --------- */

/* Indices of the k largest of v[n] in descending order, the lower index
 * first on ties; -inf entries are never taken before finite ones. */
QP_HD void qp_moe_topk(const float *v, int n, int k, int *idx) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            bool taken = false;
            for (int t = 0; t < j; t++) taken |= idx[t] == i;
            if (taken) continue;
            if (best < 0 || v[i] > v[best]) best = i; /* NaN never wins */
        }
        idx[j] = best;
    }
}

#endif
