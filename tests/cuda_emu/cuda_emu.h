/*
 * A small CUDA emulator for cuda/cuda_kernels.cu (compiled as C++ with
 * QP_CU_EMULATE): every block runs its threads as cooperative fibers
 * (ucontext), blocks one after another, so __shared__ can be a static.
 * __syncthreads and the warp-wide operations (shuffles, ldmatrix, mma.sync)
 * are barriers over the live threads of the block / warp; ldmatrix and mma
 * follow the PTX ISA fragment tables (the same tables as the replay in
 * tests/test_cuda_caps.c). What it proves: the kernels' indexing, pipeline,
 * split-K, packing, quantization and epilogue code run end to end against
 * the cpu reference. What it cannot: the hardware's own behaviour.
 */
#ifndef QP_CU_CUDA_EMU_H
#define QP_CU_CUDA_EMU_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3e { unsigned x, y, z; };
struct uint4 { uint32_t x, y, z, w; };
struct uint2 { uint32_t x, y; };
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return uint4{a, b, c, d}; }

struct emu_thread;
extern emu_thread *emu_cur;
extern uint3e emu_block_idx;
extern dim3 emu_block_dim, emu_grid_dim;
extern int emu_cc; /* compute capability * 10 (900, 800, 750): mma variant */
uint3e emu_thread_idx(void);
#define threadIdx (emu_thread_idx())
#define blockIdx (emu_block_idx)
#define blockDim (emu_block_dim)
#define gridDim (emu_grid_dim)

void __syncthreads(void);
/* exchange of one 64-bit value per lane across the current warp */
void emu_warp_exchange(uint64_t mine, uint64_t all[32]);
int emu_lane(void);

template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int o) {
    uint64_t u = 0, all[32];
    memcpy(&u, &v, sizeof v);
    emu_warp_exchange(u, all);
    T r;
    memcpy(&r, &all[(emu_lane() ^ o) & 31], sizeof r);
    return r;
}

static inline int __dp4a(int a, int b, int c) {
    uint32_t u = (uint32_t)c;
    for (int j = 0; j < 4; j++) u += (uint32_t)((int)(int8_t)(a >> (8 * j)) * (int)(int8_t)(b >> (8 * j)));
    return (int)u;
}

static inline unsigned atomicMax(uint32_t *p, uint32_t v) { uint32_t o = *p; if (v > o) *p = v; return o; }

static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }

/* fp16 as bits; arithmetic through exact doubles rounded once */
struct __half { uint16_t x; };
uint16_t emu_f64_to_f16(double v);
float emu_f16_to_f32(uint16_t h);
static inline __half __ushort_as_half(uint16_t b) { return __half{b}; }
static inline uint16_t __half_as_ushort(__half h) { return h.x; }
static inline __half __int2half_rn(int i) { return __half{emu_f64_to_f16((double)i)}; }
static inline __half __float2half_rn(float f) { return __half{emu_f64_to_f16((double)f)}; }
static inline __half __hfma(__half a, __half b, __half c) {
    return __half{emu_f64_to_f16((double)emu_f16_to_f32(a.x) * (double)emu_f16_to_f32(b.x) + (double)emu_f16_to_f32(c.x))};
}

/* warp-wide tensor-core and ldmatrix operations (PTX ISA semantics) */
void emu_ldmatrix_x4(uint32_t r[4], const void *row_addr);
void emu_mma_s8(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
void emu_mma_e4m3(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
/* m16n8k16 fp16 / bf16 with fp32 accumulation */
void emu_mma_h(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool bf16);

void emu_launch(dim3 grid, dim3 block, const std::function<void()> &body);
/* A kernel launch on stream st: run now, or recorded when st is capturing
 * (the graph launch runs it); the arguments are copies taken now. */
void emu_submit_kernel(cudaStream_t st, dim3 grid, dim3 block, std::function<void()> body);
template <typename K, typename... A>
static inline void emu_launch_kernel(cudaStream_t st, dim3 grid, dim3 block, K kern, A... a) {
    emu_submit_kernel(st, grid, block, [=]() { kern(a...); });
}
struct cudaFuncAttributes { int dummy; };
template <typename F> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *, F) { return cudaSuccess; }

#endif
