/* The CUDA emulator behind cuda_emu.h and the fake cuda_runtime_api.h:
 * cooperative fibers per block, PTX-table ldmatrix/mma, and a runtime with
 * one emulated device (QPORT_CUDA_EMU_CC, default 90; 4 SMs so that split-K
 * happens on small grids). Then the real kernels are compiled here. */
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QP_CU_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define QP_CU_EMU_ASAN 1
#endif
#if defined(QP_CU_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#include <vector>

#include "cuda_emu.h"
#include "../../cuda/cu_math.h"

/* x86-64 fiber switch without the signal-mask system calls of swapcontext:
 * push the callee-saved registers, swap stack pointers, pop, return. */
extern "C" void qp_cu_emu_swap(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl qp_cu_emu_swap\n"
        ".hidden qp_cu_emu_swap\n"
        ".type qp_cu_emu_swap,@function\n"
        "qp_cu_emu_swap:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size qp_cu_emu_swap, .-qp_cu_emu_swap\n");

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
static void yield_to_sched(void) { qp_cu_emu_swap(&emu_cur->sp, sched_sp); }

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
        for (int k = 0; k < 32; k++) c[i] = fmaf(qp_cu_e4m3_decode(A[row][k]), qp_cu_e4m3_decode(B[k][col]), c[i]);
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
            c[i] = fmaf(qp_cu_act_to_f32(ab, bf16), qp_cu_act_to_f32(bb, bf16), c[i]);
        }
    }
}

uint16_t emu_f64_to_f16(double v) { return qp_cu_f64_to_f16(v); }
float emu_f16_to_f32(uint16_t h) { return qp_cu_f16_to_f32(h); }

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
#if defined(QP_CU_EMU_ASAN)
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
                        qp_cu_emu_swap(&sched_sp, t.sp);
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

/* ---- the fake runtime -----------------------------------------------------
 *
 * Work runs synchronously at the call, except on a capturing stream. Stream
 * capture as the real runtime has it (CUDA 12/13): between
 * cudaStreamBeginCapture and cudaStreamEndCapture, kernel launches, async
 * copies / memsets and event records on the stream are recorded as the
 * graph's nodes (in order; the emulator has no concurrency), and graph
 * launches replay them. During a capture in global mode (any thread) or
 * thread-local mode (the capturing thread) cudaMalloc, cudaFree, the
 * synchronous cudaMemcpy and cudaDeviceSynchronize fail with
 * cudaErrorStreamCaptureUnsupported and invalidate the capture; so does
 * synchronizing or querying the capturing stream (any mode); synchronizing
 * the legacy stream while a blocking stream captures is
 * cudaErrorStreamCaptureImplicit. Work enqueued on an invalidated capture
 * fails with cudaErrorStreamCaptureInvalidated, and cudaStreamEndCapture
 * then returns it with no graph. Relaxed mode allows the unsafe calls. */

struct emu_node { std::function<void()> run; };
struct CUstream_st {
    unsigned flags;
    bool capturing, invalid;
    int mode;
    pthread_t thread;
    std::vector<emu_node> nodes;
};
struct CUgraph_st { std::vector<emu_node> nodes; };
struct CUgraphExec_st { std::vector<emu_node> nodes; };
struct CUevent_st { double t; unsigned flags; bool recorded; };

static std::vector<CUstream_st *> emu_streams;
static qp_cu_emu_stats emu_st;
static long emu_fault_in;        /* launches until the injected fault (0: none) */
static bool emu_fault_pending;   /* returned by the next synchronize        */
static thread_local int emu_cur_dev;
static thread_local cudaError_t emu_last_error;

static int dev_cc(void) {
    const char *v = getenv("QPORT_CUDA_EMU_CC");
    return v && *v ? atoi(v) : 90;
}
static int dev_count(void) {
    const char *v = getenv("QPORT_CUDA_EMU_DEVICES");
    int n = v && *v ? atoi(v) : 1;
    return n < 1 ? 1 : n > 8 ? 8 : n;
}
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A call the capture forbids: invalidates the offending captures. */
static bool unsafe_call_refused(void) {
    bool hit = false;
    for (CUstream_st *s : emu_streams)
        if (s->capturing && (s->mode == cudaStreamCaptureModeGlobal ||
                             (s->mode == cudaStreamCaptureModeThreadLocal && pthread_equal(s->thread, pthread_self())))) {
            s->invalid = true;
            hit = true;
        }
    if (hit) emu_st.capture_violations++;
    return hit;
}

/* Runs fn now, or records it on a capturing stream. */
static cudaError_t submit(cudaStream_t s, std::function<void()> fn) {
    if (s && s->capturing) {
        if (s->invalid) return cudaErrorStreamCaptureInvalidated;
        s->nodes.push_back(emu_node{std::move(fn)});
        emu_st.captured++;
        return cudaSuccess;
    }
    if (!s) /* the legacy stream joins a capturing blocking stream: refused */
        for (CUstream_st *c : emu_streams)
            if (c->capturing && !(c->flags & cudaStreamNonBlocking)) {
                c->invalid = true;
                emu_st.capture_violations++;
                return cudaErrorStreamCaptureImplicit;
            }
    fn();
    return cudaSuccess;
}

static cudaError_t fault_check(void) {
    if (!emu_fault_pending) return cudaSuccess;
    emu_fault_pending = false;
    return cudaErrorLaunchFailure;
}

void emu_submit_kernel(cudaStream_t st, dim3 grid, dim3 block, std::function<void()> body) {
    emu_st.launches++;
    cudaError_t e = submit(st, [grid, block, body]() {
        if (emu_fault_in > 0 && --emu_fault_in == 0) { emu_fault_pending = true; return; }
        emu_launch(grid, block, body);
    });
    if (e != cudaSuccess) emu_last_error = e;
}

#define EMU_API __attribute__((visibility("default")))

extern "C" {
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *n) {
    if (getenv("QPORT_CUDA_EMU_NO_DRIVER")) return cudaErrorInsufficientDriver;
    *n = dev_count();
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalState: return "the operation is not permitted in the current state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulated fault)";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return "emulated error";
    }
}
cudaError_t cudaGetLastError(void) {
    cudaError_t e = emu_last_error;
    emu_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int dev) {
    if (dev < 0 || dev >= dev_count()) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    int cc = dev_cc();
    emu_cc = cc * 10;
    snprintf(p->name, sizeof p->name, "qport CUDA emulator (sm_%d)", cc);
    for (int i = 0; i < 16; i++) p->uuid.bytes[i] = (char)(0xE0 + i + 16 * dev);
    p->totalGlobalMem = (size_t)8 << 30;
    p->sharedMemPerBlock = 48 << 10;
    p->major = cc / 10;
    p->minor = cc % 10;
    p->multiProcessorCount = 4;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) {
    if (dev < 0 || dev >= dev_count()) return cudaErrorInvalidDevice;
    emu_cur_dev = dev;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *dev) { *dev = emu_cur_dev; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) {
    emu_st.host_waits++;
    if (unsafe_call_refused()) return cudaErrorStreamCaptureUnsupported;
    return fault_check();
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    emu_st.mallocs++;
    if (unsafe_call_refused()) return cudaErrorStreamCaptureUnsupported;
    if (bytes > ((size_t)8 << 30)) return cudaErrorMemoryAllocation;
    *p = malloc(bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xCD, bytes); /* like uninitialised device memory */
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    emu_st.frees++;
    if (unsafe_call_refused()) return cudaErrorStreamCaptureUnsupported;
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)kind;
    if (unsafe_call_refused()) return cudaErrorStreamCaptureUnsupported;
    memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    CUstream_st *n = new CUstream_st();
    n->flags = flags;
    emu_streams.push_back(n);
    *s = n;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return cudaErrorInvalidResourceHandle;
    for (size_t i = 0; i < emu_streams.size(); i++)
        if (emu_streams[i] == s) { emu_streams.erase(emu_streams.begin() + (long)i); delete s; return cudaSuccess; }
    return cudaErrorInvalidResourceHandle;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    emu_st.host_waits++;
    if (s && s->capturing) {
        s->invalid = true;
        emu_st.capture_violations++;
        return cudaErrorStreamCaptureUnsupported;
    }
    if (!s)
        for (CUstream_st *c : emu_streams)
            if (c->capturing && !(c->flags & cudaStreamNonBlocking)) {
                c->invalid = true;
                emu_st.capture_violations++;
                return cudaErrorStreamCaptureImplicit;
            }
    return fault_check();
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    (void)flags;
    if (!e) return cudaErrorInvalidResourceHandle;
    if (s && s->capturing && s->invalid) return cudaErrorStreamCaptureInvalidated;
    return cudaSuccess; /* one in-order timeline: nothing to wait for */
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    (void)kind;
    return submit(s, [dst, src, bytes]() { memmove(dst, src, bytes); });
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    return submit(s, [p, v, n]() { memset(p, v, n); });
}
/* events: host clock at record time (work runs at the call) */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = new CUevent_st{0.0, flags, false};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return cudaErrorInvalidResourceHandle;
    return submit(s, [e]() { e->t = now_ms(); e->recorded = true; });
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    emu_st.host_waits++;
    return fault_check();
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e) return cudaErrorInvalidResourceHandle;
    return emu_fault_pending ? fault_check() : cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
    *ms = (float)(b->t - a->t);
    return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
    if (!s) return cudaErrorStreamCaptureUnsupported; /* the legacy stream cannot capture */
    if (s->capturing) return cudaErrorIllegalState;
    s->capturing = true;
    s->invalid = false;
    s->mode = (int)mode;
    s->thread = pthread_self();
    s->nodes.clear();
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    if (!s || !s->capturing) return cudaErrorIllegalState;
    s->capturing = false;
    *g = nullptr;
    if (s->invalid) {
        s->invalid = false;
        s->nodes.clear();
        return cudaErrorStreamCaptureInvalidated;
    }
    *g = new CUgraph_st{std::move(s->nodes)};
    s->nodes.clear();
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
    *st = s && s->capturing ? (s->invalid ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive)
                            : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags) {
    (void)flags;
    if (!g) return cudaErrorInvalidValue;
    *x = new CUgraphExec_st{g->nodes};
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) {
    if (!x) return cudaErrorInvalidValue;
    emu_st.graph_launches++;
    CUgraphExec_st *g = x;
    return submit(s, [g]() { for (emu_node &n : g->nodes) n.run(); });
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { delete x; return cudaSuccess; }
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }

void qp_cu_emu_get_stats(qp_cu_emu_stats *out) { *out = emu_st; }
void qp_cu_emu_fault_after(long n) { emu_fault_in = n > 0 ? n : 0; emu_fault_pending = false; }

/* The application's view of this runtime (tests/cuda_emu/cudart_shim.c):
 * the one exported symbol, name -> function. */
#define EMU_SYM(f) {#f, (void *)f}
EMU_API void *qp_cu_emu_symbol(const char *name) {
    static const struct { const char *n; void *f; } t[] = {
        EMU_SYM(cudaGetDeviceCount), EMU_SYM(cudaGetErrorString), EMU_SYM(cudaGetLastError),
        EMU_SYM(cudaGetDeviceProperties), EMU_SYM(cudaSetDevice), EMU_SYM(cudaGetDevice),
        EMU_SYM(cudaDeviceSynchronize), EMU_SYM(cudaMalloc), EMU_SYM(cudaFree), EMU_SYM(cudaMemcpy),
        EMU_SYM(cudaStreamCreate), EMU_SYM(cudaStreamCreateWithFlags), EMU_SYM(cudaStreamDestroy),
        EMU_SYM(cudaStreamSynchronize), EMU_SYM(cudaStreamWaitEvent), EMU_SYM(cudaMemcpyAsync),
        EMU_SYM(cudaMemsetAsync), EMU_SYM(cudaEventCreate), EMU_SYM(cudaEventCreateWithFlags),
        EMU_SYM(cudaEventDestroy), EMU_SYM(cudaEventRecord), EMU_SYM(cudaEventSynchronize),
        EMU_SYM(cudaEventQuery), EMU_SYM(cudaEventElapsedTime), EMU_SYM(cudaStreamBeginCapture),
        EMU_SYM(cudaStreamEndCapture), EMU_SYM(cudaStreamIsCapturing), EMU_SYM(cudaGraphInstantiate),
        EMU_SYM(cudaGraphLaunch), EMU_SYM(cudaGraphExecDestroy), EMU_SYM(cudaGraphDestroy),
        EMU_SYM(qp_cu_emu_get_stats), EMU_SYM(qp_cu_emu_fault_after),
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].n, name)) return t[i].f;
    return nullptr;
}
}

/* the real kernels */
#include "../../cuda/cuda_kernels.cu"
