/* The CUDA emulator behind cuda_emu.h and the fake cuda_runtime_api.h:
 * cooperative fibers per block, PTX-table ldmatrix/mma, and a runtime with
 * one emulated device (QPORT_CUDA_EMU_CC, default 90; 4 SMs so that split-K
 * happens on small grids). Then the real kernels are compiled here. */
#include <cstdio>
#include <cstdlib>
#include <ctime>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QPCU_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define QPCU_EMU_ASAN 1
#endif
#if defined(QPCU_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#include <vector>

#include "cuda_emu.h"
#include "../../cuda/cu_math.h"

/* x86-64 fiber switch without the signal-mask system calls of swapcontext:
 * push the callee-saved registers, swap stack pointers, pop, return. */
extern "C" void qpcu_emu_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl qpcu_emu_swap\n"
        ".hidden qpcu_emu_swap\n"
        ".type qpcu_emu_swap,@function\n"
        "qpcu_emu_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size qpcu_emu_swap, .-qpcu_emu_swap\n");

struct emu_thread {
    void *sp;
    uint3e tid;
    int lane, warp;
    bool done;
};

emu_thread *emu_cur;
uint3e emu_block_idx;
dim3 emu_block_dim, emu_grid_dim;
int emu_cc = 900;

static void *sched_sp;
static std::vector<emu_thread> thr;
static std::vector<char> stacks;
static const size_t STACK = 128 * 1024;
static const std::function<void()> *cur_body;
static int live;
static unsigned bar_gen, bar_count;
struct warp_state { uint64_t slot[32]; unsigned gen, count; int live; };
static std::vector<warp_state> warps;

uint3e emu_thread_idx(void) { return emu_cur->tid; }
int emu_lane(void) { return emu_cur->lane; }
static void yield_to_sched(void) { qpcu_emu_swap(&emu_cur->sp, sched_sp); }

void __syncthreads(void) {
    unsigned gen = bar_gen;
    if (++bar_count == (unsigned)live) { bar_count = 0; bar_gen++; return; }
    while (bar_gen == gen) yield_to_sched();
}

static void warp_barrier(warp_state &w) {
    unsigned gen = w.gen;
    if (++w.count == (unsigned)w.live) { w.count = 0; w.gen++; return; }
    while (w.gen == gen) yield_to_sched();
}

void emu_warp_exchange(uint64_t mine, uint64_t all[32]) {
    warp_state &w = warps[emu_cur->warp];
    w.slot[emu_cur->lane] = mine;
    warp_barrier(w);
    memcpy(all, w.slot, sizeof w.slot);
    warp_barrier(w);
}

void emu_ldmatrix_x4(uint32_t r[4], const void *row_addr) {
    uint64_t all[32];
    emu_warp_exchange((uint64_t)(uintptr_t)row_addr, all);
    int l = emu_cur->lane;
    for (int j = 0; j < 4; j++) {
        const uint8_t *p = (const uint8_t *)(uintptr_t)all[8 * j + l / 4] + 4 * (l % 4);
        r[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
}

/* Gathers the warp's A (16x32) and B (32x8) bytes from every lane's
 * fragment registers (PTX ISA tables for the 8-bit m16n8k32 shape). */
static void gather(const uint32_t a[4], uint32_t b0, uint32_t b1, uint8_t A[16][32], uint8_t B[32][8]) {
    uint64_t a01[32], a23[32], bb[32];
    emu_warp_exchange((uint64_t)a[0] | (uint64_t)a[1] << 32, a01);
    emu_warp_exchange((uint64_t)a[2] | (uint64_t)a[3] << 32, a23);
    emu_warp_exchange((uint64_t)b0 | (uint64_t)b1 << 32, bb);
    /* only what this lane's accumulators use: A rows g, g+8 (the lanes of
     * its group) and B columns 2t, 2t+1 (the lanes of those two groups) */
    const int me = emu_cur->lane;
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        if (g == (me >> 2)) {
            uint32_t ar[4] = { (uint32_t)a01[l], (uint32_t)(a01[l] >> 32), (uint32_t)a23[l], (uint32_t)(a23[l] >> 32) };
            for (int i = 0; i < 16; i++) {
                int row = ((i >= 4 && i < 8) || i >= 12) ? g + 8 : g, col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
                A[row][col] = (uint8_t)(ar[i / 4] >> (8 * (i % 4)));
            }
        }
        if ((g >> 1) == (me & 3)) {
            uint32_t br[2] = { (uint32_t)bb[l], (uint32_t)(bb[l] >> 32) };
            for (int i = 0; i < 8; i++) B[4 * t + (i & 3) + (i >= 4 ? 16 : 0)][g] = (uint8_t)(br[i / 4] >> (8 * (i % 4)));
        }
    }
}

void emu_mma_s8(int c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    uint8_t A[16][32], B[32][8];
    gather(a, b0, b1, A, B);
    int l = emu_cur->lane, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        uint32_t u = (uint32_t)c[i];
        for (int k = 0; k < 32; k++) u += (uint32_t)((int)(int8_t)A[row][k] * (int)(int8_t)B[k][col]);
        c[i] = (int)u;
    }
}

void emu_mma_e4m3(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    uint8_t A[16][32], B[32][8];
    gather(a, b0, b1, A, B);
    int l = emu_cur->lane, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        for (int k = 0; k < 32; k++) c[i] = fmaf(qpcu_e4m3_decode(A[row][k]), qpcu_e4m3_decode(B[k][col]), c[i]);
    }
}

/* the 16-bit fragments have the byte layout of the 8-bit ones: element k
 * of a row is bytes 2k, 2k+1 */
void emu_mma_h(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1, bool bf16) {
    uint8_t A[16][32], B[32][8];
    gather(a, b0, b1, A, B);
    int l = emu_cur->lane, g = l >> 2, t = l & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        for (int k = 0; k < 16; k++) {
            uint16_t ab = (uint16_t)(A[row][2 * k] | A[row][2 * k + 1] << 8);
            uint16_t bb = (uint16_t)(B[2 * k][col] | B[2 * k + 1][col] << 8);
            c[i] = fmaf(qpcu_act_to_f32(ab, bf16), qpcu_act_to_f32(bb, bf16), c[i]);
        }
    }
}

uint16_t emu_f64_to_f16(double v) { return qpcu_f64_to_f16(v); }
float emu_f16_to_f32(uint16_t h) { return qpcu_f16_to_f32(h); }

static void trampoline(void) {
    (*cur_body)();
    emu_cur->done = true;
    for (;;) yield_to_sched(); /* never resumed */
}

void emu_launch(dim3 grid, dim3 block, const std::function<void()> &body) {
    int n = (int)(block.x * block.y * block.z);
    if (stacks.size() < (size_t)n * STACK) stacks.resize((size_t)n * STACK);
    thr.resize((size_t)n);
    warps.resize((size_t)(n + 31) / 32);
    emu_block_dim = block;
    emu_grid_dim = grid;
    cur_body = &body;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                emu_block_idx = uint3e{ bx, by, bz };
                live = n;
                bar_gen = bar_count = 0;
                for (auto &w : warps) { w.gen = w.count = 0; w.live = 0; }
                for (int i = 0; i < n; i++) {
                    emu_thread &t = thr[(size_t)i];
                    t.tid = uint3e{ (unsigned)i % block.x, ((unsigned)i / block.x) % block.y, (unsigned)i / (block.x * block.y) };
                    t.lane = i % 32;
                    t.warp = i / 32;
                    t.done = false;
                    warps[(size_t)t.warp].live++;
                    /* initial frame: 6 saved registers, then trampoline as the
                     * return address, entered with rsp = 8 (mod 16) */
#if defined(QPCU_EMU_ASAN)
                    /* frames of finished fibers were never popped: clear their redzones */
                    ASAN_UNPOISON_MEMORY_REGION(&stacks[(size_t)i * STACK], STACK);
#endif
                    uintptr_t top = ((uintptr_t)&stacks[(size_t)i * STACK] + STACK) & ~(uintptr_t)15;
                    void **sp = (void **)top;
                    *--sp = nullptr;
                    *--sp = (void *)trampoline;
                    for (int r = 0; r < 6; r++) *--sp = nullptr;
                    t.sp = sp;
                }
                while (live > 0) {
                    for (int i = 0; i < n; i++) {
                        emu_thread &t = thr[(size_t)i];
                        if (t.done) continue;
                        emu_cur = &t;
                        qpcu_emu_swap(&sched_sp, t.sp);
                        if (t.done) {
                            live--;
                            warp_state &w = warps[(size_t)t.warp];
                            w.live--;
                            /* a thread that left releases barriers it no longer joins */
                            if (w.count && w.count == (unsigned)w.live) { w.count = 0; w.gen++; }
                            if (bar_count && bar_count == (unsigned)live) { bar_count = 0; bar_gen++; }
                        }
                    }
                }
            }
}

/* ---- the fake runtime ----------------------------------------------------- */

static int dev_cc(void) {
    const char *v = getenv("QPORT_CUDA_EMU_CC");
    return v && *v ? atoi(v) : 90;
}

extern "C" {
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *n) {
    if (getenv("QPORT_CUDA_EMU_NO_DRIVER")) return cudaErrorInsufficientDriver;
    *n = 1;
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    default: return "emulated error";
    }
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
    (void)dev;
    memset(p, 0, sizeof *p);
    int cc = dev_cc();
    emu_cc = cc * 10;
    snprintf(p->name, sizeof p->name, "qport CUDA emulator (sm_%d)", cc);
    for (int i = 0; i < 16; i++) p->uuid.bytes[i] = (char)(0xE0 + i);
    p->totalGlobalMem = (size_t)8 << 30;
    p->sharedMemPerBlock = 48 << 10;
    p->major = cc / 10;
    p->minor = cc % 10;
    p->multiProcessorCount = 4;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { (void)dev; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (bytes > ((size_t)8 << 30)) return cudaErrorMemoryAllocation;
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xCD, bytes); /* like uninitialised device memory */
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)kind;
    memcpy(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) { (void)flags; *s = (cudaStream_t)1; return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    (void)kind; (void)s;
    memmove(dst, src, bytes);
    return cudaSuccess;
}
/* events: host clock at record time (the emulator runs kernels synchronously) */
struct CUevent_st { double t; };
cudaError_t cudaEventCreate(cudaEvent_t *e) { *e = new CUevent_st{ 0.0 }; return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { *ms = (float)(b->t - a->t); return cudaSuccess; }
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    (void)s;
    memset(p, v, n);
    return cudaSuccess;
}

/* the real kernels */
#include "../../cuda/cuda_kernels.cu"
