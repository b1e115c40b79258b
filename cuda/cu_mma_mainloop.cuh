/*
 * The tensor-core mainloop of the tiled kernels (k_gemm_tc, k_gemm_tch,
 * k_moe_tc, k_moe_tch): one double-buffered cp.async -> ldmatrix ->
 * mma.sync loop over a range of k-tiles, parameterized by
 *   Op     the operand type's traits: accumulator type, k per tile, the
 *          mma.sync of each architecture (qp_cu_op_s8 / _e4m3 / _h<BF16>)
 *   AL     where A's 64 rows come from (qp_cu_a_rows: a dense block of x;
 *          qp_cu_a_gather: the MoE's sorted slots, one pointer a row)
 *   BL     how a B stage is filled (qp_cu_b_bytes: 8-bit weights copied as
 *          stored; the decoding loaders of cuda_kernels.cu)
 *   Fold   per k-group scales folded into the accumulators (qp_cu_fold_none,
 *          or cuda_kernels.cu's block / group scale folds)
 * Included by cuda_kernels.cu (which defines WARP), so the emulator and the
 * PTX report see it without another build rule.
 *
 * The tile is the same on sm_75 .. sm_90: 64 x 64 outputs, 4 warps (2 x 2)
 * of 32 x 32 = 2 m16 x 4 n8 mma tiles, every k-tile 64 bytes of each A and
 * B row. Shared rows are padded to 80 bytes (16-byte aligned for cp.async /
 * ldmatrix; 8 consecutive rows hit 8 distinct 4-bank groups). Architectures
 * differ only in the instructions: cp.async from sm_80 (plain 16-byte copies
 * below), and each Op's mma variant.
 *
 * Order of the arithmetic (what makes the float sums reproducible): k-tiles
 * in increasing order, within one the two 32-byte halves in order, each
 * accumulator element updated by one mma per half; a fold adds its group's
 * sum once, at the group's last k-tile or the range's end.
 */
#ifndef QP_CU_MMA_MAINLOOP_CUH
#define QP_CU_MMA_MAINLOOP_CUH

#define TC_THREADS 128
#define SROW QP_CU_SROW
/* bytes of one A / B row in one k-tile (whatever the element size) */
#define QP_CU_TC_KB 64

/* Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit A/B; lane = 4g + t):
 *   A a0: row g,   k 4t..4t+3     a1: row g+8, k 4t..4t+3
 *     a2: row g,   k 16+4t..      a3: row g+8, k 16+4t..
 *   B b0: n g, k 4t..4t+3         b1: n g, k 16+4t..
 *   C c0,c1: row g, n 2t, 2t+1    c2,c3: row g+8, n 2t, 2t+1
 * m8n8k16 (sm_75) has A = one row-g word, B = one n-g word, C = c0,c1, so
 * one m16n8k32 is four m8n8k16: (a0,b0),(a2,b1) -> c0,c1; (a1,b0),(a3,b1)
 * -> c2,c3. */
/* one mma with the four-register A and C fragments (CC: "+r" int32 or "+f"
 * fp32 accumulators), and the two-register m8n8k16 int8 one (sm_75) */
#define QP_CU_MMA_A4(INSTR, CC, c, a, b0, b1)                                                                          \
    asm volatile(INSTR " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                                     \
                 : CC(c[0]), CC(c[1]), CC(c[2]), CC(c[3])                                                              \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
#define QP_CU_MMA_8816(c0, c1, a, b)                                                                                   \
    asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"                      \
                 : "+r"(c0), "+r"(c1) : "r"(a), "r"(b))
#define QP_CU_MMA_1688(c, a0, a1, b)                                                                                   \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"     \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a0), "r"(a1), "r"(b))

__device__ __forceinline__ void mma_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(QP_CU_EMULATE)
    emu_mma_s8(c, a, b0, b1);
#elif __CUDA_ARCH__ >= 800
    QP_CU_MMA_A4("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "+r", c, a, b0, b1);
#elif __CUDA_ARCH__ >= 750
    QP_CU_MMA_8816(c[0], c[1], a[0], b0);
    QP_CU_MMA_8816(c[0], c[1], a[2], b1);
    QP_CU_MMA_8816(c[2], c[3], a[1], b0);
    QP_CU_MMA_8816(c[2], c[3], a[3], b1);
#endif
}

__device__ __forceinline__ void mma_e4m3(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(QP_CU_EMULATE)
    emu_mma_e4m3(c, a, b0, b1);
#elif __CUDA_ARCH__ >= 890
    QP_CU_MMA_A4("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "+f", c, a, b0, b1);
#endif
    /* below sm_89 the host never launches an fp8 tiled kernel */
}

/* fp16 / bf16 tensor cores, fp32 accumulation. m16n8k16 (sm_80+; bf16
 * needs sm_80) has the byte layout of the 8-bit m16n8k32 fragments (A a0:
 * row g, k 2t..2t+1; a2: k 8+2t..; B b0: k 2t.., b1: k 8+2t..), so the
 * same ldmatrix maps serve with 64-byte (32-element) k-tiles.
 * sm_75: two m16n8k8 (fp16 only). */
template <bool BF16>
__device__ __forceinline__ void mma_h(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(QP_CU_EMULATE)
    emu_mma_h(c, a, b0, b1, BF16);
#elif __CUDA_ARCH__ >= 800
    if constexpr (BF16)
        QP_CU_MMA_A4("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "+f", c, a, b0, b1);
    else
        QP_CU_MMA_A4("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "+f", c, a, b0, b1);
#elif __CUDA_ARCH__ >= 750
    if constexpr (!BF16) {
        QP_CU_MMA_1688(c, a[0], a[1], b0);
        QP_CU_MMA_1688(c, a[2], a[3], b1);
    }
    /* bf16 below sm_80: the host never launches a bf16 tiled kernel */
#endif
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint8_t *p) {
#if defined(QP_CU_EMULATE)
    emu_ldmatrix_x4(r, p);
#else
    uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}

__device__ __forceinline__ void cp16(uint8_t *dst, const uint8_t *src) {
#if __CUDA_ARCH__ >= 800
    uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
    *(uint4 *)dst = *(const uint4 *)src;
#endif
}

__device__ __forceinline__ void cp_commit() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void cp_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* ---- operand traits ------------------------------------------------------ */
/* K: elements of one k-tile (QP_CU_TC_KB bytes); the host pads K to it. */
struct qp_cu_op_s8 {
    typedef int acc_t;
    static constexpr int K = QP_CU_BK;
    static __device__ __forceinline__ void mma(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_s8(c, a, b0, b1);
    }
};
struct qp_cu_op_e4m3 {
    typedef float acc_t;
    static constexpr int K = QP_CU_BK;
    static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_e4m3(c, a, b0, b1);
    }
};
template <bool BF16>
struct qp_cu_op_h {
    typedef float acc_t;
    static constexpr int K = QP_CU_BKH;
    static __device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        mma_h<BF16>(c, a, b0, b1);
    }
};

/* ---- A loaders: row r's bytes of k-tile kt are row(r) + kt * 64 ---------- */
struct qp_cu_a_rows { /* rows at a fixed stride (a block of x' / xq) */
    const uint8_t *base;
    size_t stride;
    __device__ __forceinline__ const uint8_t *row(int r) const { return base + (size_t)r * stride; }
};
struct qp_cu_a_gather { /* a pointer per row in shared memory */
    const uint8_t *const *rows;
    __device__ __forceinline__ const uint8_t *row(int r) const { return rows[r]; }
};

/* 64 rows x 4 chunks of 16 bytes, two chunks per thread */
template <class Rows>
__device__ __forceinline__ void qp_cu_tc_copy(uint8_t *s, const Rows &src, int kt) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int c = threadIdx.x + i * TC_THREADS, r = qp_cu_tc_chunk_row(c), col = qp_cu_tc_chunk_col(c);
        cp16(s + r * SROW + col, src.row(r) + (size_t)kt * QP_CU_TC_KB + col);
    }
}

/* ---- B loader for weights stored as the mma reads them ([n][Kp] bytes) ---- */
struct qp_cu_b_bytes {
    qp_cu_a_rows rows; /* weight row n0 and its stride */
    __device__ __forceinline__ void load(uint8_t *sb, int kt) const { qp_cu_tc_copy(sb, rows, kt); }
};

/* ---- folds: per k-group scales applied once per group --------------------
 * A fold has ON, group() (k elements per group) and apply(acc, part, g,
 * lane, wm, wn): acc += part * scale of group g, part = 0. */
struct qp_cu_fold_none {
    static constexpr bool ON = false;
};

/* The shared tiles: two stages of A and B. */
struct qp_cu_tc_smem {
    uint8_t a[2][QP_CU_BM * SROW];
    uint8_t b[2][QP_CU_BN * SROW];
};

/* acc (zeroed here) = the sum over k-tiles [kbeg, kend). nmi: the m16
 * fragments of this warp that hold live rows (warp-uniform; 2 = all): the
 * MoE's last, mostly empty tile of an expert skips the rest. */
template <class Op, class AL, class BL, class Fold>
__device__ __forceinline__ void qp_cu_tc_mainloop(qp_cu_tc_smem &sm, const AL &al, const BL &bl, const Fold &fold,
                                                 int kbeg, int kend, int nmi, typename Op::acc_t (&acc)[2][4][4]) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int wm = warp >> 1, wn = warp & 1;
    float part[2][4][4]; /* a fold's current group (unused otherwise) */
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0, part[i][j][e] = 0.0f;

    /* kt = kbeg - 1 fills stage 0 only; then tile kt + 1 loads while kt
     * multiplies (one load site: the decoding loaders are large) */
    for (int kt = kbeg - 1; kt < kend; kt++) {
        const int cur = (kt - kbeg) & 1;
        if (kt + 1 < kend) {
            qp_cu_tc_copy(sm.a[cur ^ 1], al, kt + 1);
            bl.load(sm.b[cur ^ 1], kt + 1);
            cp_commit();
        }
        if (kt < kbeg) continue;
        if (kt + 1 < kend) cp_wait<1>();
        else cp_wait<0>();
        __syncthreads();
        const uint8_t *A = sm.a[cur], *B = sm.b[cur];
#pragma unroll
        for (int kk = 0; nmi && kk < QP_CU_TC_KB; kk += 32) {
            uint32_t af[2][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
                if (mi < nmi) ldsm_x4(af[mi], A + qp_cu_tc_a_addr(lane, wm, mi, kk));
#pragma unroll
            for (int np = 0; np < 2; np++) { /* two n8 tiles per ldmatrix.x4 */
                uint32_t r[4];
                ldsm_x4(r, B + qp_cu_tc_b_addr(lane, wn, np, kk));
                bf[np * 2][0] = r[0];
                bf[np * 2][1] = r[1];
                bf[np * 2 + 1][0] = r[2];
                bf[np * 2 + 1][1] = r[3];
            }
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    if (mi >= nmi) continue;
                    if constexpr (Fold::ON) Op::mma(part[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
                    else Op::mma(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
                }
        }
        if constexpr (Fold::ON) {
            /* end of a group or of this range: a split-K range may end inside one */
            if (((kt + 1) * Op::K) % fold.group() == 0 || kt + 1 == kend)
                fold.apply(acc, part, kt * Op::K / fold.group(), lane, wm, wn);
        }
        __syncthreads();
    }
}

/* put(row, col, v) for every accumulator of this thread (tile coordinates) */
template <class T, class Put>
__device__ __forceinline__ void qp_cu_tc_store(const T (&acc)[2][4][4], const Put &put) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int wm = warp >> 1, wn = warp & 1;
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                put(qp_cu_tc_c_row(lane, wm, mi, e), qp_cu_tc_c_col(lane, wn, ni, e), acc[mi][ni][e]);
}

#endif
