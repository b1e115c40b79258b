/*
 * CUDA kernels of the qport CUDA backend: activation
 * quantization, the GEMV path, the tensor-core tiled path with split-K and
 * the per-scheme epilogues. Written from docs/semantics.md (§11-§16) and the
 * PTX ISA (mma.sync fragment layouts, ldmatrix,
 * cp.async); the scalar math is cu_math.h, shared with the host tests.
 *
 * Determinism: every GEMM writes raw accumulators to a partial buffer
 * [splits][Mp][Np]; the epilogue kernel sums the splits in index order
 * (int32 wrapping adds are exact in any order anyway; fp32 sums are fixed
 * by that order and the fixed per-thread k order), then applies the
 * scheme's epilogue in the reference's float order.
 */
#if defined(QP_CU_EMULATE)
#include "cuda_emu.h" /* tests/cuda_emu: the kernels on the CPU */
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
#include <stdint.h>

#include <type_traits>

#include "cu_math.h"
#include "cuda_kernels.h"

#define WARP 32

/* ------------------------------------------------------------------------ */
/* Activation quantization: one block per row                               */
/* ------------------------------------------------------------------------ */

#define QT 256

struct qp_cu_fmax {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct qp_cu_fmin {
    __device__ __forceinline__ float operator()(float a, float b) const { return fminf(a, b); }
};

/* xor butterfly over the warp: every lane gets the same result */
template <class F>
__device__ __forceinline__ float warp_reduce(float v, F f) {
    for (int o = 16; o; o >>= 1) v = f(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}
/* the butterfly sums: fp32 in a fixed order; int32 wrapping, exact */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}
__device__ __forceinline__ int warp_sum(int v) {
    uint32_t u = (uint32_t)v;
    for (int o = 16; o; o >>= 1) u += (uint32_t)__shfl_xor_sync(0xFFFFFFFFu, (int)u, o);
    return (int)u;
}

/* Block-wide max/min (exact: max and min do not round). */
template <class F>
__device__ __forceinline__ float block_reduce(float v, float *sh, F f) {
    v = warp_reduce(v, f);
    int w = threadIdx.x / WARP, l = threadIdx.x % WARP;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    float r = sh[0];
    for (int i = 1; i < QT / WARP; i++) r = f(r, sh[i]);
    return r;
}
__device__ float block_max(float v, float *sh) { return block_reduce(v, sh, qp_cu_fmax{}); }
__device__ float block_min(float v, float *sh) { return block_reduce(v, sh, qp_cu_fmin{}); }

__device__ __forceinline__ float load_act(const uint16_t *x, size_t i, int bf16) {
    return qp_cu_act_to_f32(x[i], bf16);
}

/* Dynamic fp8 per tensor, pass 1: absmax over every row into *amax (the
 * bits of a non-negative float order like unsigned ints; fmaxf skips NaN as
 * the reference does). */
__global__ void __launch_bounds__(QT) k_rowmax(const uint16_t *x, int K, int bf16, uint32_t *amax) {
    __shared__ float sh[QT / WARP];
    const uint16_t *xr = x + (size_t)blockIdx.x * K;
    float a = 0.0f;
    for (int k = threadIdx.x; k < K; k += QT) a = fmaxf(a, fabsf(load_act(xr, k, bf16)));
    a = block_max(a, sh);
    if (threadIdx.x == 0) atomicMax(amax, qp_cu_f2u(a));
}

/* One row: docs/semantics.md §12, §13 exactly as api/quant_int8.c and quant_fp8.c. */
__global__ void __launch_bounds__(QT) k_quant(const uint16_t *x, int K, int Kp, int bf16, int act, float in_scale,
                                              int32_t in_zp, const uint32_t *amax, uint8_t *xq, float *xs,
                                              int32_t *xzp) {
    __shared__ float sh[QT / WARP];
    const int m = blockIdx.x;
    const uint16_t *xr = x + (size_t)m * K;
    uint8_t *qr = xq + (size_t)m * Kp;
    float inv = 0.0f, s = 0.0f;
    int32_t zp = 0;
    switch (act) {
    case QP_CU_ACT_I8_STATIC_SYM:
        break;
    case QP_CU_ACT_I8_STATIC_ASYM:
        inv = QP_CU_DIV(1.0f, in_scale);
        break;
    case QP_CU_ACT_F8_STATIC:
        inv = QP_CU_DIV(1.0f, in_scale);
        if (m == 0 && threadIdx.x == 0) xs[0] = in_scale; /* the epilogue's s_a */
        break;
    case QP_CU_ACT_I8_DYN_SYM: {
        float a = 0.0f;
        for (int k = threadIdx.x; k < K; k += QT) a = fmaxf(a, fabsf(load_act(xr, k, bf16)));
        a = block_max(a, sh);
        s = QP_CU_DIV(a, 127.0f);
        inv = a == 0.0f ? 0.0f : QP_CU_DIV(127.0f, a);
        if (threadIdx.x == 0) xs[m] = s;
        break;
    }
    case QP_CU_ACT_I8_DYN_ASYM: {
        float mn = 3.402823466e38f, mx = -3.402823466e38f;
        for (int k = threadIdx.x; k < K; k += QT) {
            float v = load_act(xr, k, bf16);
            mn = fminf(mn, v);
            mx = fmaxf(mx, v);
        }
        mn = block_min(mn, sh);
        mx = block_max(mx, sh);
        s = QP_CU_DIV(QP_CU_SUB(mx, mn), 255.0f);
        zp = qp_rni_sat32(QP_CU_SUB(-128.0f, QP_CU_DIV(mn, s)));
        inv = QP_CU_DIV(1.0f, s);
        if (threadIdx.x == 0) { xs[m] = s; xzp[m] = zp; }
        break;
    }
    case QP_CU_ACT_F8_DYN_TENSOR:
        s = QP_CU_DIV(qp_cu_u2f(*amax), 448.0f);
        inv = QP_CU_DIV(1.0f, s);
        if (m == 0 && threadIdx.x == 0) xs[0] = s;
        break;
    case QP_CU_ACT_F8_DYN_TOKEN: {
        float a = 0.0f;
        for (int k = threadIdx.x; k < K; k += QT) a = fmaxf(a, fabsf(load_act(xr, k, bf16)));
        a = block_max(a, sh);
        s = fmaxf(QP_CU_DIV(a, 448.0f), QP_CU_DIV(1.0f, QP_CU_MUL(448.0f, 512.0f)));
        if (threadIdx.x == 0) xs[m] = s;
        break;
    }
    }
    for (int k = threadIdx.x; k < Kp; k += QT) {
        uint8_t q = 0;
        if (k < K) {
            float v = load_act(xr, k, bf16);
            switch (act) {
            case QP_CU_ACT_I8_STATIC_SYM: q = (uint8_t)qp_rni_sat8(QP_CU_DIV(v, in_scale)); break;
            case QP_CU_ACT_I8_STATIC_ASYM:
                q = (uint8_t)qp_sat8(qp_add_wrap(qp_rni_sat32(QP_CU_MUL(v, inv)), in_zp));
                break;
            case QP_CU_ACT_I8_DYN_SYM: q = (uint8_t)qp_rni_sat8(QP_CU_MUL(v, inv)); break;
            case QP_CU_ACT_I8_DYN_ASYM: q = (uint8_t)qp_sat8(qp_add_wrap(qp_rni_sat32(QP_CU_MUL(v, inv)), zp)); break;
            case QP_CU_ACT_F8_STATIC:
            case QP_CU_ACT_F8_DYN_TENSOR: q = qp_cu_fp8_conv(QP_CU_MUL(v, inv)); break;
            case QP_CU_ACT_F8_DYN_TOKEN: q = qp_cu_fp8_conv(QP_CU_DIV(v, s)); break;
            }
        }
        qr[k] = q; /* K padding: zero codes (int 0, e4m3 +0) */
    }
}

/* W8A8-FP8 per-block activations: qp_quant_fp8_group(group 128), one
 * thread per (row, group): absmax (fmaxf skips NaN), s = max(1e-10, a) /
 * 448 (ue8m0: rounded up to a power of two, then x * (1/s)), e4m3 codes. */
__global__ void k_quant_g128(const uint16_t *x, int M, int K, int Kp, int bf16, int ue8m0, uint8_t *xq, float *xs) {
    const int nb = K / 128;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)M * nb) return;
    const int m = (int)(t / nb), g = (int)(t % nb);
    const uint16_t *xg = x + (size_t)m * K + (size_t)g * 128;
    uint8_t *qg = xq + (size_t)m * Kp + (size_t)g * 128;
    float a = 0.0f;
    for (int i = 0; i < 128; i++) a = fmaxf(a, fabsf(load_act(xg, i, bf16)));
    float s = QP_CU_DIV(fmaxf(1e-10f, a), 448.0f);
    if (ue8m0) s = qp_cu_ue8m0(s);
    xs[t] = s;
    float inv = QP_CU_DIV(1.0f, s);
    for (int i = 0; i < 128; i++) {
        float v = load_act(xg, i, bf16);
        qg[i] = qp_cu_fp8_conv(ue8m0 ? QP_CU_MUL(v, inv) : QP_CU_DIV(v, s));
    }
}

/* ------------------------------------------------------------------------ */
/* int4 -> int8 expansion in registers (QQQ, docs/semantics.md §11 step 2)  */
/* ------------------------------------------------------------------------ */
/* Packing: see qp_cu_pack_q4 (cuda_caps.c) and qp_cu_expand_ch (cu_math.h).
 *   per-channel: two masks give int8 16*q (exact);
 *   group 128:   each code c gives the low byte of fp16(fma(c-8, s, 1152))
 *                XOR 0x80 (one fp16 rounding, wrap included: docs/semantics.md §11),
 *                the same value qp_cu_qqq_group_w8 computes on the host. */
__device__ __forceinline__ void expand_ch(uint32_t w, uint32_t &lo, uint32_t &hi) { qp_cu_expand_ch(w, &lo, &hi); }

__device__ __forceinline__ uint32_t group_byte(uint32_t c, __half s) {
    __half t = __int2half_rn((int)c - 8);                     /* exact */
    __half h = __hfma(t, s, __float2half_rn(1152.0f));          /* fma.rn.f16 */
    return ((uint32_t)__half_as_ushort(h) & 0xFFu) ^ 0x80u;
}

__device__ __forceinline__ void expand_g(uint32_t w, __half s, uint32_t &lo, uint32_t &hi) {
    lo = 0;
    hi = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        uint32_t b = (w >> (8 * j)) & 0xFFu;
        lo |= group_byte(b >> 4, s) << (8 * j);
        hi |= group_byte(b & 0xFu, s) << (8 * j);
    }
}

/* ------------------------------------------------------------------------ */
/* GEMV path (small M): one warp per output column, every weight byte read  */
/* once, 16-byte coalesced loads, all MR rows of x reused per weight load.   */
/* ------------------------------------------------------------------------ */

#define GV_WARPS 8

/* rows m0 + i's warp sums of column n into partial [Mp][Np] (lane 0 writes) */
template <int MR, class T>
__device__ __forceinline__ void gemv_store(const T (&acc)[MR], int lane, int M, int m0, int Np, int n, T *partial) {
#pragma unroll
    for (int i = 0; i < MR; i++) {
        T v = warp_sum(acc[i]);
        if (lane == 0 && m0 + i < M) partial[(size_t)(m0 + i) * Np + n] = v;
    }
}

__device__ __forceinline__ int dot4(uint32_t a, uint32_t b, int acc, bool dp4a) {
    if (dp4a) return __dp4a((int)a, (int)b, acc);
    uint32_t u = (uint32_t)acc; /* int32 wraps like the GPU's integer adds */
#pragma unroll
    for (int j = 0; j < 4; j++)
        u += (uint32_t)((int)(int8_t)(a >> (8 * j)) * (int)(int8_t)(b >> (8 * j)));
    return (int)u;
}

/* the GEMV thread's lane, its column n and the first m0 of its MR rows */
struct gemv_pos {
    int lane, n, m0;
};
template <int MR>
__device__ __forceinline__ gemv_pos gemv_place() {
    return { (int)(threadIdx.x % WARP), (int)(blockIdx.x * GV_WARPS + threadIdx.x / WARP), (int)(blockIdx.y * MR) };
}
template <int MR, class T>
__device__ __forceinline__ void zero(T (&acc)[MR]) {
#pragma unroll
    for (int i = 0; i < MR; i++) acc[i] = 0;
}
/* Every GEMV kernel's frame: the thread's place, MR accumulators of T from
 * zero, the lane-strided k loop (STEP k per lane step, k < Kp) calling
 * chunk(acc, n, m0, k) for the kernel's own loads and sums, then the warp
 * sums into partial [Mp][Np]. */
template <int MR, int STEP, class T, class Chunk>
__device__ __forceinline__ void gemv_run(int M, int N, int Kp, int Np, T *partial, Chunk chunk) {
    const auto [lane, n, m0] = gemv_place<MR>();
    if (n >= N) return;
    T acc[MR];
    zero(acc);
    for (int k = lane * STEP; k < Kp; k += WARP * STEP) chunk(acc, n, m0, k);
    gemv_store(acc, lane, M, m0, Np, n, partial);
}

/* the 16 bytes at p (16-byte aligned) as four words */
__device__ __forceinline__ void load16(const uint8_t *p, uint32_t (&w)[4]) {
    uint4 v = *(const uint4 *)p;
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
}
/* byte j of the four words as e4m3, decoded to fp32 (exact) */
__device__ __forceinline__ float e4m3_at(const uint32_t (&w)[4], int j) {
    return qp_cu_e4m3_decode((uint8_t)(w[j / 4] >> (8 * (j % 4))));
}
__device__ __forceinline__ void decode16(const uint32_t (&w)[4], float (&wf)[16]) {
#pragma unroll
    for (int j = 0; j < 16; j++) wf[j] = e4m3_at(w, j);
}

/* acc + the int8 dot product of the 16 weight bytes w and the 16 bytes at x
 * (four dot4 in word order) */
__device__ __forceinline__ int dot16(const uint32_t (&w)[4], const uint8_t *x, int acc, bool dp4a) {
    uint4 xv = *(const uint4 *)x;
    acc = dot4(w[0], xv.x, acc, dp4a);
    acc = dot4(w[1], xv.y, acc, dp4a);
    acc = dot4(w[2], xv.z, acc, dp4a);
    return dot4(w[3], xv.w, acc, dp4a);
}
/* c after 16 fp32 fmas c = fma(x[j], wj(j), c), j in order: x the 16 e4m3
 * codes at x */
template <class W>
__device__ __forceinline__ float fma16_e4m3(float c, const uint8_t *x, W wj) {
    uint32_t xw[4];
    load16(x, xw);
#pragma unroll
    for (int j = 0; j < 16; j++) c = __fmaf_rn(e4m3_at(xw, j), wj(j), c);
    return c;
}
/* acc after 8 fp32 fmas acc = fma(x[j], w[j], acc), j in order: x the 8
 * act-dtype values at x */
__device__ __forceinline__ float fma8_act(float acc, const uint16_t *x, const float (&w)[8], int bf16) {
    uint4 xv = *(const uint4 *)x;
    uint32_t xw[4] = { xv.x, xv.y, xv.z, xv.w };
#pragma unroll
    for (int j = 0; j < 8; j++) acc = __fmaf_rn(qp_cu_act_to_f32((uint16_t)(xw[j / 2] >> (16 * (j % 2))), bf16), w[j], acc);
    return acc;
}

/* int kinds: I8 / Q4CH / Q4G. acc int32 into partial [Mp][Np]. */
template <int WK, bool DP4A, int MR>
__global__ void __launch_bounds__(GV_WARPS * WARP) k_gemv_int(int M, int N, int Kp, int Np, const uint8_t *xq,
                                                              const void *w, const uint16_t *s_group,
                                                              int32_t *partial) {
    gemv_run<MR, 16>(M, N, Kp, Np, partial, [&](int (&acc)[MR], int n, int m0, int k) {
        uint32_t wv[4];
        if constexpr (WK == QP_CU_W_I8) {
            load16((const uint8_t *)w + (size_t)n * Kp + k, wv);
        } else {
            uint2 v = *(const uint2 *)((const uint8_t *)w + (size_t)n * (Kp / 2) + k / 2);
            if constexpr (WK == QP_CU_W_Q4CH) {
                expand_ch(v.x, wv[0], wv[1]);
                expand_ch(v.y, wv[2], wv[3]);
            } else {
                __half s = __ushort_as_half(s_group[(size_t)(k / 128) * Np + n]);
                expand_g(v.x, s, wv[0], wv[1]);
                expand_g(v.y, s, wv[2], wv[3]);
            }
        }
#pragma unroll
        for (int i = 0; i < MR; i++) {
            if (m0 + i < M) acc[i] = dot16(wv, xq + (size_t)(m0 + i) * Kp + k, acc[i], DP4A);
        }
    });
}

/* fp8: decode e4m3 to fp32 (exact), products exact, fp32 fma accumulation
 * in a fixed order (lane-strided k, then the xor butterfly, which gives
 * every lane the same sum). Works on every target (the sm < 89 path). */
template <int MR>
__global__ void __launch_bounds__(GV_WARPS * WARP) k_gemv_f8(int M, int N, int Kp, int Np, const uint8_t *xq,
                                                             const uint8_t *w, float *partial) {
    gemv_run<MR, 16>(M, N, Kp, Np, partial, [&](float (&acc)[MR], int n, int m0, int k) {
        uint32_t wv[4];
        load16(w + (size_t)n * Kp + k, wv);
        float wf[16];
        decode16(wv, wf);
#pragma unroll
        for (int i = 0; i < MR; i++)
            if (m0 + i < M) acc[i] = fma16_e4m3(acc[i], xq + (size_t)(m0 + i) * Kp + k, [&](int j) { return wf[j]; });
    });
}

/* fp8 per-block: each lane's 16-k chunk lies in one group of 128; its
 * chunk sum (fp32 fma) is scaled by sx[m][g] * sw[n/128][g] and added. */
template <int MR>
__global__ void __launch_bounds__(GV_WARPS * WARP) k_gemv_f8b(int M, int N, int Kp, int Np, const uint8_t *xq,
                                                              const uint8_t *w, const float *xs, const float *wsb,
                                                              int nkb, float *partial) {
    gemv_run<MR, 16>(M, N, Kp, Np, partial, [&](float (&acc)[MR], int n, int m0, int k) {
        uint32_t wv[4];
        load16(w + (size_t)n * Kp + k, wv);
        /* MR 16: weights decoded once; MR 4: per row (that variant spills on
         * sm_86/89 with the decoded array live) */
        float wf[16];
        if constexpr (MR > 4) decode16(wv, wf);
        const int g = k / 128;
        const float sw = wsb[(size_t)(n / 128) * nkb + g];
#pragma unroll
        for (int i = 0; i < MR; i++) {
            if (m0 + i < M) {
                float c = fma16_e4m3(0.0f, xq + (size_t)(m0 + i) * Kp + k,
                                     [&](int j) { return MR > 4 ? wf[j] : e4m3_at(wv, j); });
                acc[i] = __fmaf_rn(c, QP_CU_MUL(xs[(size_t)(m0 + i) * nkb + g], sw), acc[i]);
            }
        }
    });
}

/* ------------------------------------------------------------------------ */
/* Tensor-core tiled path (the mainloop: cu_mma_mainloop.cuh)               */
/* ------------------------------------------------------------------------ */
/* split-K: blockIdx.z takes k-tiles [z*KT/S, (z+1)*KT/S). */

#include "cu_mma_mainloop.cuh"

__device__ __forceinline__ void tc_split(int KT, int &kbeg, int &kend) {
    const int S = gridDim.z;
    kbeg = (int)((long long)blockIdx.z * KT / S);
    kend = (int)((long long)(blockIdx.z + 1) * KT / S);
}

/* B stage of the 8-bit kinds: int8 / e4m3 copied as stored; QQQ int4: 64
 * rows x 32 packed bytes, one 16-byte chunk (32 k) per thread, expanded in
 * registers to 32 int8 and stored. */
template <int WK>
struct tc_b8 {
    const uint8_t *w;
    const uint16_t *s_group;
    int Kp, Np, n0;
    __device__ __forceinline__ void load(uint8_t *sb, int kt) const {
        if constexpr (WK == QP_CU_W_Q4CH || WK == QP_CU_W_Q4G) {
            const int tid = threadIdx.x, k0 = kt * QP_CU_BK;
            int r = tid / 2, half = tid % 2;
            uint4 v = *(const uint4 *)(w + (size_t)(n0 + r) * (Kp / 2) + k0 / 2 + half * 16);
            uint32_t in[4] = { v.x, v.y, v.z, v.w }, out[8];
            if constexpr (WK == QP_CU_W_Q4CH) {
#pragma unroll
                for (int j = 0; j < 4; j++) expand_ch(in[j], out[2 * j], out[2 * j + 1]);
            } else {
                __half s = __ushort_as_half(s_group[(size_t)(k0 / 128) * Np + n0 + r]);
#pragma unroll
                for (int j = 0; j < 4; j++) expand_g(in[j], s, out[2 * j], out[2 * j + 1]);
            }
            uint4 *d = (uint4 *)(sb + r * SROW + half * 32);
            d[0] = make_uint4(out[0], out[1], out[2], out[3]);
            d[1] = make_uint4(out[4], out[5], out[6], out[7]);
        } else {
            qp_cu_b_bytes{ { w + (size_t)n0 * Kp, (size_t)Kp } }.load(sb, kt);
        }
    }
};

/* W8A8-FP8 per-block: acc += part * (sx[m][g] * sw[n/128][g]); a 64-column
 * tile lies in one 128-row weight block */
struct tc_fold_blk {
    static constexpr bool ON = true;
    const float *gxs, *gws;
    int nkb, m0, n0;
    __device__ __forceinline__ int group() const { return 128; }
    __device__ __forceinline__ void apply(float (&acc)[2][4][4], float (&part)[2][4][4], int g, int lane, int wm,
                                          int) const {
        const float sw = gws[(size_t)(n0 / 128) * nkb + g];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const float sc = QP_CU_MUL(gxs[(size_t)(m0 + qp_cu_tc_c_row(lane, wm, mi, 2 * h)) * nkb + g], sw);
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int e = 2 * h; e < 2 * h + 2; e++) {
                        acc[mi][ni][e] = __fmaf_rn(part[mi][ni][e], sc, acc[mi][ni][e]);
                        part[mi][ni][e] = 0.0f;
                    }
            }
    }
};

template <int WK>
__device__ __forceinline__ auto tc_fold8(const float *gxs, const float *gws, int nkb, int m0, int n0) {
    if constexpr (WK == QP_CU_W_F8B) return tc_fold_blk{ gxs, gws, nkb, m0, n0 };
    else return qp_cu_fold_none{};
}

/* raw sums of tile (m0, n0) into split z's partial [Mp][Np] */
template <class T>
__device__ __forceinline__ void tc_store_partial(const T (&acc)[2][4][4], void *partial, int Mp, int Np, int m0,
                                                 int n0) {
    T *P = (T *)partial + (size_t)blockIdx.z * Mp * Np;
    qp_cu_tc_store(acc, [&](int r, int c, T v) { P[(size_t)(m0 + r) * Np + n0 + c] = v; });
}

template <int WK>
__global__ void __launch_bounds__(TC_THREADS) k_gemm_tc(int Kp, int Np, int Mp, const uint8_t *xq, const uint8_t *w,
                                                        const uint16_t *s_group, void *partial, const float *gxs,
                                                        const float *gws, int nkb) {
    typedef typename std::conditional<WK == QP_CU_W_F8 || WK == QP_CU_W_F8B, qp_cu_op_e4m3, qp_cu_op_s8>::type op;
    __shared__ __align__(16) qp_cu_tc_smem sm;
    const int m0 = blockIdx.y * QP_CU_BM, n0 = blockIdx.x * QP_CU_BN;
    int kbeg, kend;
    tc_split(Kp / op::K, kbeg, kend);
    typename op::acc_t acc[2][4][4];
    qp_cu_tc_mainloop<op>(sm, qp_cu_a_rows{ xq + (size_t)m0 * Kp, (size_t)Kp }, tc_b8<WK>{ w, s_group, Kp, Np, n0 },
                         tc_fold8<WK>(gxs, gws, nkb, m0, n0), kbeg, kend, 2, acc);
    tc_store_partial(acc, partial, Mp, Np, m0, n0);
}

/* ------------------------------------------------------------------------ */
/* Float kinds: W4A16, unquantized, MX / W4A8-MXFP4 / NVFP4                  */
/* ------------------------------------------------------------------------ */
/* The layer as the float kernels see it (passed by value). */
struct qp_cu_fwd_w {
    const void *w;
    const uint8_t *zero; /* Q4F [Gp][Np] */
    const float *scale;  /* Q4F [Gp][Np]; LUT [Np][Kp/blk] */
    const float *lut;    /* LUT [256] */
    int Kp, Np, group, blk;
};

/* k_act16 writes x' [Mp][Kp] in act dtype (K padding: +0), one thread per
 * unit of 16 elements (MX: 32, one block). The qdq chains are the
 * reference's fp32 operations one for one (cu_math.h), so x' is bit-exact. */
__global__ void k_act16(const uint16_t *x, int M, int K, int Kp, int bf16, int act, float in_scale, int mbits,
                        int emin, int emax, float maxv, int e4m3, float nv_g, uint16_t *xa) {
    const int U = act == QP_CU_ACT_MX_QDQ ? 32 : 16, per_row = Kp / U;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)M * per_row) return;
    const int m = (int)(t / per_row), k0 = (int)(t % per_row) * U;
    const uint16_t *xr = x + (size_t)m * K;
    uint16_t *o = xa + (size_t)m * Kp;
    if (k0 >= K) {
        for (int i = 0; i < U; i++) o[k0 + i] = 0;
        return;
    }
    switch (act) {
    case QP_CU_ACT_MX_QDQ: { /* qp_quant_mx + qp_dequant_mx, then rnd */
        float a = 0.0f;
        int nan = 0;
        for (int i = 0; i < 32; i++) {
            float v = fabsf(load_act(xr, k0 + i, bf16));
            if (qp_hd_isnan(v)) nan = 1;
            else if (v > a) a = v;
        }
        int sc = qp_cu_mx_even_scale(nan ? qp_cu_u2f(0x7FC00000u) : a, mbits, emax);
        for (int i = 0; i < 32; i++) {
            float v;
            if (sc == 255) v = qp_cu_u2f(0x7FC00000u);
            else {
                float y = QP_CU_MUL(load_act(xr, k0 + i, bf16), qp_cu_pow2f(127 - sc));
                v = QP_CU_MUL(qp_cu_mini_round(y, mbits, emin, emax, maxv, e4m3), qp_cu_pow2f(sc - 127));
            }
            o[k0 + i] = qp_cu_f32_to_act(v, bf16);
        }
        break;
    }
    case QP_CU_ACT_NVFP4_QDQ: { /* qp_quant_nvfp4 (g = nv_g), x' = rnd(q * (sf / g)) */
        float vmax = 0.0f;
        for (int i = 0; i < 16; i++) vmax = fmaxf(vmax, fabsf(load_act(xr, k0 + i, bf16)));
        const float inv6 = QP_CU_DIV(1.0f, 6.0f), inv_g = QP_CU_DIV(1.0f, nv_g);
        float sf_f = qp_cu_e4m3_decode(qp_cu_e4m3_encode(QP_CU_MUL(nv_g, QP_CU_MUL(vmax, inv6))));
        float out_scale = sf_f == 0.0f ? 0.0f : QP_CU_DIV(1.0f, QP_CU_MUL(sf_f, inv_g));
        float ds = QP_CU_DIV(sf_f, nv_g);
        for (int i = 0; i < 16; i++) {
            float q = qp_cu_fp4_round(QP_CU_MUL(load_act(xr, k0 + i, bf16), out_scale));
            o[k0 + i] = qp_cu_f32_to_act(QP_CU_MUL(q, ds), bf16);
        }
        break;
    }
    case QP_CU_ACT_F8S_QDQ:
        for (int i = 0; i < 16; i++)
            o[k0 + i] = k0 + i < K ? qp_cu_f32_to_act(qp_cu_fp8s_qdq(load_act(xr, k0 + i, bf16), in_scale, bf16), bf16) : 0;
        break;
    default:
        for (int i = 0; i < 16; i++) o[k0 + i] = k0 + i < K ? xr[k0 + i] : 0;
        break;
    }
}

/* Weight decode to fp32 (exact): 8 consecutive k of row n from k. */
template <int WK>
__device__ __forceinline__ void decode8(const qp_cu_fwd_w &p, int n, int k, int bf16, float (&w)[8]) {
    if constexpr (WK == QP_CU_W_Q4F) {
        uint32_t c = *((const uint32_t *)p.w + ((size_t)n * p.Kp + k) / 8);
        size_t gi = (size_t)(k / p.group) * p.Np + n;
        float z = (float)p.zero[gi], s = p.scale[gi];
#pragma unroll
        for (int j = 0; j < 8; j++) w[j] = QP_CU_MUL(QP_CU_SUB((float)((c >> (4 * j)) & 0xFu), z), s);
    } else if constexpr (WK == QP_CU_W_H) {
        uint4 v = *(const uint4 *)((const uint16_t *)p.w + (size_t)n * p.Kp + k);
        uint32_t vv[4] = { v.x, v.y, v.z, v.w };
#pragma unroll
        for (int j = 0; j < 8; j++) w[j] = qp_cu_act_to_f32((uint16_t)(vv[j / 2] >> (16 * (j % 2))), bf16);
    } else if constexpr (WK == QP_CU_W_LUT4) {
        uint32_t v = *((const uint32_t *)p.w + ((size_t)n * p.Kp + k) / 8);
        float bs = p.scale[(size_t)n * (p.Kp / p.blk) + k / p.blk];
#pragma unroll
        for (int j = 0; j < 8; j++) w[j] = qp_cu_round_act(QP_CU_MUL(p.lut[(v >> (4 * j)) & 0xFu], bs), bf16);
    } else {
        uint2 v = *(const uint2 *)((const uint8_t *)p.w + (size_t)n * p.Kp + k);
        float bs = p.scale[(size_t)n * (p.Kp / p.blk) + k / p.blk];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t c = ((j < 4 ? v.x : v.y) >> (8 * (j % 4))) & 0xFFu;
            w[j] = qp_cu_round_act(QP_CU_MUL(p.lut[c], bs), bf16);
        }
    }
}

/* GEMV for the float kinds: one warp per column, 8 k per lane step, fp32
 * fma accumulation in a fixed order, partial [Mp][Np] fp32. */
template <int WK, int MR>
__global__ void __launch_bounds__(GV_WARPS * WARP) k_gemv_h(int M, int N, qp_cu_fwd_w p, const uint16_t *xa, int bf16,
                                                            float *partial) {
    gemv_run<MR, 8>(M, N, p.Kp, p.Np, partial, [&](float (&acc)[MR], int n, int m0, int k) {
        float w[8];
        decode8<WK>(p, n, k, bf16, w);
#pragma unroll
        for (int i = 0; i < MR; i++)
            if (m0 + i < M) acc[i] = fma8_act(acc[i], xa + (size_t)(m0 + i) * p.Kp + k, w, bf16);
    });
}

/* B stage for the float kinds: 64 rows (n) x 32 k of act-dtype weights,
 * decoded in registers (W4A16: v = c - z exact; the scale is applied per
 * group to the fp32 accumulators). 128 threads: row tid/2, 16 k each. */
template <int WK>
__device__ __forceinline__ void tch_load_b(uint8_t *sb, int kt, int n0, const qp_cu_fwd_w &p, int bf16) {
    const int tid = threadIdx.x, k0 = kt * QP_CU_BKH;
    if constexpr (WK == QP_CU_W_H) {
        qp_cu_b_bytes{ { (const uint8_t *)p.w + (size_t)n0 * p.Kp * 2, (size_t)p.Kp * 2 } }.load(sb, kt);
    } else {
        const int r = tid / 2, kh = (tid % 2) * 16, n = n0 + r;
        uint32_t out[8];
        if constexpr (WK == QP_CU_W_Q4F) {
            uint2 c = *(const uint2 *)((const uint32_t *)p.w + ((size_t)n * p.Kp + k0 + kh) / 8);
            uint32_t z = p.zero[(size_t)(k0 / p.group) * p.Np + n];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t word = j < 4 ? c.x : c.y, sh = 8 * (j % 4);
                int v0 = (int)((word >> sh) & 0xFu) - (int)z, v1 = (int)((word >> (sh + 4)) & 0xFu) - (int)z;
                /* small integers: exact in fp16 and bf16 */
                out[j] = (uint32_t)qp_cu_f32_to_act((float)v0, bf16) | (uint32_t)qp_cu_f32_to_act((float)v1, bf16) << 16;
            }
        } else if constexpr (WK == QP_CU_W_LUT4) {
            uint2 c = *(const uint2 *)((const uint32_t *)p.w + ((size_t)n * p.Kp + k0 + kh) / 8);
            float bs = p.scale[(size_t)n * (p.Kp / p.blk) + (k0 + kh) / p.blk];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t word = j < 4 ? c.x : c.y, sh = 8 * (j % 4);
                out[j] = (uint32_t)qp_cu_f32_to_act(QP_CU_MUL(p.lut[(word >> sh) & 0xFu], bs), bf16) |
                         (uint32_t)qp_cu_f32_to_act(QP_CU_MUL(p.lut[(word >> (sh + 4)) & 0xFu], bs), bf16) << 16;
            }
        } else {
            uint4 c = *(const uint4 *)((const uint8_t *)p.w + (size_t)n * p.Kp + k0 + kh);
            uint32_t cw[4] = { c.x, c.y, c.z, c.w };
            float bs = p.scale[(size_t)n * (p.Kp / p.blk) + (k0 + kh) / p.blk];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint32_t c0 = (cw[j / 2] >> (16 * (j % 2))) & 0xFFu, c1 = (cw[j / 2] >> (16 * (j % 2) + 8)) & 0xFFu;
                out[j] = (uint32_t)qp_cu_f32_to_act(QP_CU_MUL(p.lut[c0], bs), bf16) |
                         (uint32_t)qp_cu_f32_to_act(QP_CU_MUL(p.lut[c1], bs), bf16) << 16;
            }
        }
        uint4 *d = (uint4 *)(sb + r * SROW + kh * 2);
        d[0] = make_uint4(out[0], out[1], out[2], out[3]);
        d[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
}

/* the B loader of the float kinds: row n0 of the (stacked) weights */
template <int WK, bool BF16>
struct tch_b {
    const qp_cu_fwd_w &p;
    int n0;
    __device__ __forceinline__ void load(uint8_t *sb, int kt) const { tch_load_b<WK>(sb, kt, n0, p, BF16); }
};

/* W4A16: acc += part * scale[g][n] (v = c - z is exact in the act dtype;
 * the scale applies per group to the fp32 sums) */
struct tch_fold_group {
    static constexpr bool ON = true;
    const qp_cu_fwd_w &p;
    int n0;
    __device__ __forceinline__ int group() const { return p.group; }
    __device__ __forceinline__ void apply(float (&acc)[2][4][4], float (&part)[2][4][4], int g, int lane, int,
                                          int wn) const {
        const float *sc = p.scale + (size_t)g * p.Np + n0;
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float s = sc[qp_cu_tc_c_col(lane, wn, ni, e)];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    acc[mi][ni][e] = __fmaf_rn(part[mi][ni][e], s, acc[mi][ni][e]);
                    acc[mi][ni][e + 2] = __fmaf_rn(part[mi][ni][e + 2], s, acc[mi][ni][e + 2]);
                    part[mi][ni][e] = part[mi][ni][e + 2] = 0.0f;
                }
            }
    }
};

template <int WK>
__device__ __forceinline__ auto tch_fold(const qp_cu_fwd_w &p, int n0) {
    if constexpr (WK == QP_CU_W_Q4F) return tch_fold_group{ p, n0 };
    else return qp_cu_fold_none{};
}

template <int WK, bool BF16>
__global__ void __launch_bounds__(TC_THREADS) k_gemm_tch(int Mp, qp_cu_fwd_w p, const uint16_t *xa, float *partial) {
    typedef qp_cu_op_h<BF16> op;
    __shared__ __align__(16) qp_cu_tc_smem sm;
    const int m0 = blockIdx.y * QP_CU_BM, n0 = blockIdx.x * QP_CU_BN;
    int kbeg, kend;
    tc_split(p.Kp / op::K, kbeg, kend);
    float acc[2][4][4];
    qp_cu_tc_mainloop<op>(sm, qp_cu_a_rows{ (const uint8_t *)(xa + (size_t)m0 * p.Kp), (size_t)p.Kp * 2 },
                         tch_b<WK, BF16>{ p, n0 }, tch_fold<WK>(p, n0), kbeg, kend, 2, acc);
    tc_store_partial(acc, partial, Mp, p.Np, m0, n0);
}

/* output (m, n)'s raw sums of the S splits in index order: fp32 from split
 * 0; int32 wrapping (exact in any order) */
__device__ __forceinline__ float sum_splits(const float *partial, int S, int Mp, int Np, int m, int n) {
    float a = partial[(size_t)m * Np + n];
    for (int s = 1; s < S; s++) a = __fadd_rn(a, partial[((size_t)s * Mp + m) * Np + n]);
    return a;
}
__device__ __forceinline__ int32_t sum_splits(const int32_t *partial, int S, int Mp, int Np, int m, int n) {
    uint32_t a = 0;
    for (int s = 0; s < S; s++) a += (uint32_t)partial[((size_t)s * Mp + m) * Np + n];
    return (int32_t)a;
}

/* y = rnd(sum + bias), or (NVFP4) rnd(rnd(sum) + bias) */
__global__ void k_epi_h(int M, int N, int Mp, int Np, int S, const float *partial, const uint16_t *bias, int bf16,
                        int after, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    int m = (int)(i / N), n = (int)(i % N);
    float a = sum_splits(partial, S, Mp, Np, m, n);
    if (bias) {
        float b = qp_cu_act_to_f32(bias[n], bf16);
        a = after ? QP_CU_ADD(qp_cu_round_act(a, bf16), b) : QP_CU_ADD(a, b);
    }
    y[i] = qp_cu_f32_to_act(a, bf16);
}

/* ------------------------------------------------------------------------ */
/* Epilogues: one thread per output, splits summed in index order            */
/* ------------------------------------------------------------------------ */

__global__ void k_epi_int8(int M, int N, int Mp, int Np, int S, const int32_t *partial, const float *xs, float in_scale,
                           int is_static, const int32_t *xzp, const int32_t *adj, const float *w_scale,
                           const uint16_t *bias, int bf16, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    int m = (int)(i / N), n = (int)(i % N);
    int32_t t = sum_splits(partial, S, Mp, Np, m, n);
    if (adj) t = qp_cu_azp_correct(t, is_static, is_static ? 0 : xzp[m], adj[n]);
    float s_a = is_static ? in_scale : xs[m];
    float b = bias ? qp_cu_act_to_f32(bias[n], bf16) : 0.0f;
    y[i] = qp_cu_epi_int8(t, s_a, w_scale[n], adj != NULL || bias != NULL, b, bf16);
}

__global__ void k_epi_fp8(int M, int N, int Mp, int Np, int S, const float *partial, const float *xs, int per_token,
                          const float *w_scale, const uint16_t *bias, int bf16, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    int m = (int)(i / N), n = (int)(i % N);
    float a = sum_splits(partial, S, Mp, Np, m, n);
    float s_a = per_token ? xs[m] : xs[0];
    float b = bias ? qp_cu_act_to_f32(bias[n], bf16) : 0.0f;
    y[i] = qp_cu_epi_fp8(a, s_a, w_scale[n], bias != NULL, b, bf16);
}

__global__ void k_epi_qqq(int M, int N, int Mp, int Np, int S, const int32_t *partial, const float *xs,
                          const float *s_ch, const uint16_t *bias, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    int m = (int)(i / N), n = (int)(i % N);
    y[i] = qp_cu_epi_qqq(sum_splits(partial, S, Mp, Np, m, n), s_ch[n], xs[m], bias != NULL, bias ? bias[n] : 0);
}

/* ------------------------------------------------------------------------ */
/* Host side                                                                */
/* ------------------------------------------------------------------------ */

/* KERNEL is a plain name (an alias for template instances). */
#if defined(QP_CU_EMULATE)
/* the arguments are evaluated now and kept by value: a launch on a
 * capturing stream runs when its graph is launched */
#define QP_CU_LAUNCH(KERNEL, GRID, BLOCK, ST, ...)                                                                     \
    do {                                                                                                               \
        qp_cu_tl_launches++;                                                                                            \
        emu_launch_kernel(ST, GRID, BLOCK, KERNEL, __VA_ARGS__);                                                       \
    } while (0)
#else
#define QP_CU_LAUNCH(KERNEL, GRID, BLOCK, ST, ...)                                                                     \
    do {                                                                                                               \
        qp_cu_tl_launches++;                                                                                            \
        KERNEL<<<GRID, BLOCK, 0, ST>>>(__VA_ARGS__);                                                                   \
    } while (0)
#endif
/* kernel launches and memsets of the calling thread (the backend's
 * device_stats: submissions) */
static thread_local unsigned long qp_cu_tl_launches;
extern "C" unsigned long qp_cu_launch_count(void) { return qp_cu_tl_launches; }
static inline cudaError_t qp_cu_memset_async(void *p, int v, size_t n, cudaStream_t st) {
    qp_cu_tl_launches++;
    return cudaMemsetAsync(p, v, n, st);
}

template <int WK, bool DP4A>
static void launch_gemv_int(const qp_cu_fwd *f, dim3 grid, cudaStream_t st, int mr) {
    auto kfn = mr == 4 ? k_gemv_int<WK, DP4A, 4> : k_gemv_int<WK, DP4A, 16>;
    QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, f->Kp, f->Np, (const uint8_t *)f->xq, f->w, f->s_group,
                (int32_t *)f->partial);
}

template <bool DP4A>
static void launch_gemv_int_kind(const qp_cu_fwd *f, dim3 grid, cudaStream_t st, int mr) {
    switch (f->wkind) {
    case QP_CU_W_I8: launch_gemv_int<QP_CU_W_I8, DP4A>(f, grid, st, mr); break;
    case QP_CU_W_Q4CH: launch_gemv_int<QP_CU_W_Q4CH, DP4A>(f, grid, st, mr); break;
    case QP_CU_W_Q4G: launch_gemv_int<QP_CU_W_Q4G, DP4A>(f, grid, st, mr); break;
    }
}

static int forward_h(const qp_cu_fwd *f, const char **what) {
    cudaStream_t st = (cudaStream_t)f->stream;
    cudaError_t e;
    uint16_t *xa = (uint16_t *)f->xq;
    (void)st; /* unused by the emulator's launches */
    *what = "k_act16";
    {
        int U = f->act == QP_CU_ACT_MX_QDQ ? 32 : 16;
        size_t units = (size_t)f->M * (f->Kp / U);
        unsigned blocks = (unsigned)((units + 127) / 128);
        QP_CU_LAUNCH(k_act16, blocks, 128, st, (const uint16_t *)f->x, f->M, f->K, f->Kp, f->bf16, f->act, f->in_scale,
                    f->act_mbits, f->act_emin, f->act_emax, f->act_maxv, f->act_e4m3, f->nv_g, xa);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    qp_cu_fwd_w p;
    p.w = f->w; p.zero = f->w_zero; p.scale = f->w_scale; p.lut = f->lut;
    p.Kp = f->Kp; p.Np = f->Np; p.group = f->group; p.blk = f->blk;
    float *part = (float *)f->partial;
    int S = 1;
    if (f->ev_g0 && (e = cudaEventRecord((cudaEvent_t)f->ev_g0, st)) != cudaSuccess) return (int)e;
    if (f->kpath == QP_CU_KP_TILED) {
        *what = "k_gemm_tch";
        S = f->splits;
        dim3 grid(f->Np / QP_CU_BN, f->Mp / QP_CU_BM, S);
#define QP_CU_TCH(WK)                                                                                  \
    do {                                                                                              \
        auto kfn = f->bf16 ? k_gemm_tch<WK, true> : k_gemm_tch<WK, false>;                            \
        QP_CU_LAUNCH(kfn, grid, TC_THREADS, st, f->Mp, p, (const uint16_t *)xa, part);                 \
    } while (0)
        if (f->wkind == QP_CU_W_Q4F) QP_CU_TCH(QP_CU_W_Q4F);
        else if (f->wkind == QP_CU_W_H) QP_CU_TCH(QP_CU_W_H);
        else if (f->wkind == QP_CU_W_LUT4) QP_CU_TCH(QP_CU_W_LUT4);
        else QP_CU_TCH(QP_CU_W_LUT);
#undef QP_CU_TCH
    } else {
        *what = "k_gemv_h";
        /* LUT decode: 8 rows a chunk (16 spills below sm_90) */
        int mr = f->M <= 4 ? 4 : f->wkind == QP_CU_W_LUT || f->wkind == QP_CU_W_LUT4 ? 8 : QP_CU_GEMV_MAX_ROWS;
        dim3 grid((f->N + GV_WARPS - 1) / GV_WARPS, (f->M + mr - 1) / mr);
#define QP_CU_GVH(WK)                                                                                  \
    do {                                                                                              \
        auto kfn = mr == 4 ? k_gemv_h<WK, 4> : k_gemv_h<WK, 16>;                                     \
        QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, p, (const uint16_t *)xa, f->bf16, part); \
    } while (0)
        if (f->wkind == QP_CU_W_Q4F) QP_CU_GVH(QP_CU_W_Q4F);
        else if (f->wkind == QP_CU_W_H) QP_CU_GVH(QP_CU_W_H);
        else if (f->wkind == QP_CU_W_LUT4) {
            auto kfn = mr == 4 ? k_gemv_h<QP_CU_W_LUT4, 4> : k_gemv_h<QP_CU_W_LUT4, 8>;
            QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, p, (const uint16_t *)xa, f->bf16, part);
        } else {
            auto kfn = mr == 4 ? k_gemv_h<QP_CU_W_LUT, 4> : k_gemv_h<QP_CU_W_LUT, 8>;
            QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, p, (const uint16_t *)xa, f->bf16, part);
        }
#undef QP_CU_GVH
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    *what = "k_epi_h";
    size_t total = (size_t)f->M * f->N;
    unsigned blocks = (unsigned)((total + 255) / 256);
    if (blocks) {
        QP_CU_LAUNCH(k_epi_h, blocks, 256, st, f->M, f->N, f->Mp, f->Np, S, (const float *)part, f->bias, f->bf16,
                    f->bias_after_round, (uint16_t *)f->y);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    if (f->ev_g1 && (e = cudaEventRecord((cudaEvent_t)f->ev_g1, st)) != cudaSuccess) return (int)e;
    *what = "";
    return 0;
}

extern "C" int qp_cu_forward(const qp_cu_fwd *f, const char **what) {
    if (QP_CU_IS_FLOAT_KIND(f->wkind)) return forward_h(f, what);
    cudaStream_t st = (cudaStream_t)f->stream;
    cudaError_t e;
    const uint16_t *x = (const uint16_t *)f->x;
    *what = "k_quant";
    if (f->act == QP_CU_ACT_F8_DYN_TENSOR) {
        *what = "cudaMemsetAsync(amax)";
        if ((e = qp_cu_memset_async(f->amax, 0, sizeof(uint32_t), st)) != cudaSuccess) return (int)e;
        *what = "k_rowmax";
        QP_CU_LAUNCH(k_rowmax, f->M, QT, st, x, f->K, f->bf16, f->amax);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
        *what = "k_quant";
    }
    if (f->act == QP_CU_ACT_F8_GROUP128) {
        *what = "k_quant_g128";
        size_t units = (size_t)f->M * (f->K / 128);
        QP_CU_LAUNCH(k_quant_g128, (unsigned)((units + 127) / 128), 128, st, x, f->M, f->K, f->Kp, f->bf16, f->ue8m0,
                    (uint8_t *)f->xq, f->xs);
    } else {
        QP_CU_LAUNCH(k_quant, f->M, QT, st, x, f->K, f->Kp, f->bf16, f->act, f->in_scale, f->in_zp, f->amax,
                    (uint8_t *)f->xq, f->xs, f->xzp);
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;

    int S = 1;
    if (f->ev_g0 && (e = cudaEventRecord((cudaEvent_t)f->ev_g0, st)) != cudaSuccess) return (int)e;
    if (f->kpath == QP_CU_KP_TILED) {
        *what = "k_gemm_tc";
        S = f->splits;
        dim3 grid(f->Np / QP_CU_BN, f->Mp / QP_CU_BM, S);
        const uint8_t *xq = (const uint8_t *)f->xq, *w = (const uint8_t *)f->w;
        auto kfn = f->wkind == QP_CU_W_I8     ? k_gemm_tc<QP_CU_W_I8>
                   : f->wkind == QP_CU_W_Q4CH ? k_gemm_tc<QP_CU_W_Q4CH>
                   : f->wkind == QP_CU_W_Q4G  ? k_gemm_tc<QP_CU_W_Q4G>
                   : f->wkind == QP_CU_W_F8B  ? k_gemm_tc<QP_CU_W_F8B>
                                             : k_gemm_tc<QP_CU_W_F8>;
        QP_CU_LAUNCH(kfn, grid, TC_THREADS, st, f->Kp, f->Np, f->Mp, xq, w, f->s_group, f->partial, f->xs, f->w_scale,
                    f->K / 128);
    } else {
        *what = "k_gemv";
        int mr = f->M <= 4 ? 4 : QP_CU_GEMV_MAX_ROWS;
        dim3 grid((f->N + GV_WARPS - 1) / GV_WARPS, (f->M + mr - 1) / mr);
        if (f->wkind == QP_CU_W_F8B) {
            auto kfn = mr == 4 ? k_gemv_f8b<4> : k_gemv_f8b<16>;
            QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, f->Kp, f->Np, (const uint8_t *)f->xq,
                        (const uint8_t *)f->w, f->xs, f->w_scale, f->K / 128, (float *)f->partial);
        } else if (f->wkind == QP_CU_W_F8) {
            auto kfn = mr == 4 ? k_gemv_f8<4> : k_gemv_f8<16>;
            QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, f->M, f->N, f->Kp, f->Np, (const uint8_t *)f->xq,
                        (const uint8_t *)f->w, (float *)f->partial);
        } else if (f->kpath == QP_CU_KP_GEMV_DP4A) {
            launch_gemv_int_kind<true>(f, grid, st, mr);
        } else {
            launch_gemv_int_kind<false>(f, grid, st, mr);
        }
    }
    if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;

    *what = "k_epilogue";
    size_t total = (size_t)f->M * f->N;
    unsigned blocks = (unsigned)((total + 255) / 256);
    if (blocks) {
        if (f->wkind == QP_CU_W_F8B) /* y = rnd(sum + bias): the scales are folded in */
            QP_CU_LAUNCH(k_epi_h, blocks, 256, st, f->M, f->N, f->Mp, f->Np, S, (const float *)f->partial, f->bias,
                        f->bf16, 0, (uint16_t *)f->y);
        else if (f->wkind == QP_CU_W_F8)
            QP_CU_LAUNCH(k_epi_fp8, blocks, 256, st, f->M, f->N, f->Mp, f->Np, S, (const float *)f->partial, f->xs,
                                              f->act == QP_CU_ACT_F8_DYN_TOKEN, f->w_scale, f->bias, f->bf16,
                                              (uint16_t *)f->y);
        else if (!f->qqq)
            QP_CU_LAUNCH(k_epi_int8, blocks, 256, st, f->M, f->N, f->Mp, f->Np, S, (const int32_t *)f->partial, f->xs,
                                               f->in_scale,
                                               f->act == QP_CU_ACT_I8_STATIC_SYM || f->act == QP_CU_ACT_I8_STATIC_ASYM,
                                               f->xzp, f->azp_adj, f->w_scale, f->bias, f->bf16, (uint16_t *)f->y);
        else
            QP_CU_LAUNCH(k_epi_qqq, blocks, 256, st, f->M, f->N, f->Mp, f->Np, S, (const int32_t *)f->partial, f->xs,
                                              f->w_scale, f->bias, (uint16_t *)f->y);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    if (f->ev_g1 && (e = cudaEventRecord((cudaEvent_t)f->ev_g1, st)) != cudaSuccess) return (int)e;
    *what = "";
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Rotation and fp8 KV cache: the reference's fp32 steps exactly             */
/* ------------------------------------------------------------------------ */

/* one thread per output (m, b, j): S = sum_i in increasing i of +-x, y =
 * rnd(S * c) (qp_ref_rotation_forward) */
__global__ void k_rotate(const uint16_t *x, uint16_t *y, int M, int K, const int8_t *H, int r, float c, int bf16) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (size_t)M * K) return;
    size_t m = t / K;
    int kk = (int)(t % K), b = kk / r, j = kk % r;
    const uint16_t *xr = x + m * K + (size_t)b * r;
    float sum = 0.0f;
    for (int i = 0; i < r; i++) {
        float v = qp_cu_act_to_f32(xr[i], bf16);
        sum = QP_CU_ADD(sum, H[(size_t)i * r + j] > 0 ? v : -v);
    }
    y[t] = qp_cu_f32_to_act(QP_CU_MUL(sum, c), bf16);
}

__global__ void k_kv_quant(const uint16_t *src, uint8_t *dst, size_t n, float scale, int bf16) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = qp_cu_e4m3_encode(QP_CU_DIV(qp_cu_act_to_f32(src[i], bf16), scale));
}

__global__ void k_kv_dequant(const uint8_t *src, uint16_t *dst, size_t n, float scale, int bf16) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = qp_cu_f32_to_act(QP_CU_MUL(qp_cu_e4m3_decode(src[i]), scale), bf16);
}

extern "C" int qp_cu_rotate(const void *x, void *y, int M, int K, const int8_t *H, int r, float c, int bf16, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    (void)st;
    size_t total = (size_t)M * K;
    if (!total) return 0;
    QP_CU_LAUNCH(k_rotate, (unsigned)((total + 255) / 256), 256, st, (const uint16_t *)x, (uint16_t *)y, M, K, H, r, c, bf16);
    return (int)cudaGetLastError();
}

extern "C" int qp_cu_kv_quant(const void *src, uint8_t *dst, size_t n, float scale, int bf16, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    (void)st;
    if (!n) return 0;
    QP_CU_LAUNCH(k_kv_quant, (unsigned)((n + 255) / 256), 256, st, (const uint16_t *)src, dst, n, scale, bf16);
    return (int)cudaGetLastError();
}

extern "C" int qp_cu_kv_dequant(const uint8_t *src, void *dst, size_t n, float scale, int bf16, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    (void)st;
    if (!n) return 0;
    QP_CU_LAUNCH(k_kv_dequant, (unsigned)((n + 255) / 256), 256, st, src, (uint16_t *)dst, n, scale, bf16);
    return (int)cudaGetLastError();
}

extern "C" int qp_cu_kernel_probe(void) {
    cudaFuncAttributes a;
    return (int)cudaFuncGetAttributes(&a, k_quant);
}

/* The fused MoE kernels share this translation unit's device
 * helpers: see cuda_moe.cu. */
#include "cuda_moe.h"
#include "cuda_moe.cu"
