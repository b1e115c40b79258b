/*
 * Fused MoE kernels: cpu/ref_moe.c's steps (vLLM's
 * fused_experts) on the device. Included at the end of cuda_kernels.cu, not
 * compiled on its own: the activation quantizers (k_quant, k_rowmax,
 * k_act16), the tensor-core mainloop (cu_mma_mainloop.cuh) and the weight
 * decoders (decode8, tc_b8, tch_load_b) are the linear layers', so the MoE's
 * quantization is bit-exact with theirs and the PTX report and the CPU
 * emulator see these kernels without another build rule.
 *
 *   k_moe_align   slots sorted by local expert (moe_align_block_size): per
 *                 expert counts, prefix sums of padded blocks of BM slots,
 *                 the sorted slot list (-1 pads), each block's expert
 *   (x quantized over its M rows by the linear quantizers; fp8 per-block:
 *    k_quant_g128, a scale per row and group of 128)
 *   w13 GEMM      raw sums of every (slot, gate/up row) into p1:
 *                   k_moe_gemv  decode, 16 slots of one expert per block, a
 *                               warp per weight row: each selected expert's
 *                               rows are read once (dp4a / fp32 decode)
 *                   k_moe_tc    64 slots x 64 rows, int8 / e4m3 mma.sync
 *                               (fp8 per-block: the group sums folded in
 *                               with their scales, as k_gemm_tc)
 *                   k_moe_tch   the same, fp16 / bf16 mma.sync (float kinds)
 *   k_moe_silu    the w13 epilogue (acc * a_scale * w_scale, rounded) fused
 *                 with silu_and_mul -> h [M*k][I]
 *   (h quantized over its M*k rows by the same quantizers)
 *   w2 GEMM       as w13 into p2
 *   k_moe_sum     the w2 epilogue times the routing weight, rounded, and the
 *                 ordered k-slot sum in the act dtype -> y
 *
 * GEMM grids are sized for the most blocks the routing can make; blocks
 * past the device-computed count return at once (no count goes back to the
 * host). int8 sums are exact; float sums are fp32 (tensor cores or a fixed
 * fma order), which is the only difference from the reference.
 */

/* fp32 silu of the reference: g / (1 + exp(-g)) in double, rounded once */
__device__ __forceinline__ float moe_silu(float g) {
    double gd = (double)g;
    return (float)(gd / (1.0 + exp(-gd)));
}

/* the GEMM's row scale: static, per tensor (xs[0]) or per row */
__device__ __forceinline__ float moe_rs(int act, float s_static, const float *xs, int row) {
    switch (act) {
    case QP_CU_ACT_I8_STATIC_SYM:
    case QP_CU_ACT_F8_STATIC: return s_static;
    case QP_CU_ACT_F8_DYN_TENSOR: return xs[0];
    default: return xs[row];
    }
}

/* the GEMM epilogue before rounding: cpu/ref_moe.c's acc * rs * ws (left
 * to right); float kinds: the sum itself */
__device__ __forceinline__ float moe_epi(const void *P, size_t i, int wkind, float rs, float ws) {
    if (wkind == QP_CU_W_I8) return QP_CU_MUL(QP_CU_MUL(QP_CU_I2F(((const int32_t *)P)[i]), rs), ws);
    float a = ((const float *)P)[i];
    return wkind == QP_CU_W_F8 ? QP_CU_MUL(QP_CU_MUL(a, rs), ws) : a;
}

/* One block; expert e's slots keep their index order (deterministic). */
__global__ void __launch_bounds__(256) k_moe_align(const int32_t *ids, int MK, int E, int off, int BM, int32_t *cnt,
                                                   int32_t *eblk, int32_t *sorted, int32_t *bexp, int32_t *nblk) {
    const int tid = threadIdx.x;
    for (int e = tid; e < E; e += blockDim.x) {
        int c = 0;
        for (int t = 0; t < MK; t++) c += ids[t] - off == e;
        cnt[e] = c;
    }
    __syncthreads();
    if (tid == 0) {
        int p = 0;
        for (int e = 0; e < E; e++) {
            int nb = (cnt[e] + BM - 1) / BM;
            eblk[e] = p;
            for (int b = 0; b < nb; b++) bexp[p + b] = e;
            p += nb;
        }
        nblk[0] = p;
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) {
        int j = eblk[e] * BM, end = j + (cnt[e] + BM - 1) / BM * BM;
        for (int t = 0; t < MK && j < end; t++)
            if (ids[t] - off == e) sorted[j++] = t;
        for (; j < end; j++) sorted[j] = -1;
    }
}

/* ---- decode: a warp per weight row, the block's <= 16 slots ---------------
 * A rows: slot t reads row t / adiv (adiv = k: its token's x; 1: its h row)
 * of [rows][Kp]. Weight row n of expert e is row e * NRp + n. Raw sums go to
 * P [slot][NRp] (int32 for int8, else fp32); fp8 per-block (F8B): each
 * lane's 16-k chunk lies in one group g of 128, and its fp32 sum is added
 * times as[A row][g] x scale[weight row][g] (k_gemv_f8b's order). MR rows
 * per pass (the float kinds' decoders spill with 16 live rows on some
 * targets: two passes of 8, the second reading the weights from cache). */
template <int WK, int MR>
__global__ void __launch_bounds__(GV_WARPS * WARP) k_moe_gemv(int NR, int NRp, qp_cu_fwd_w p, const void *A, int adiv,
                                                              const float *as, int bf16, const int32_t *sorted,
                                                              const int32_t *bexp, const int32_t *nblk, void *P) {
    typedef typename std::conditional<WK == QP_CU_W_I8, int, float>::type acc_t;
    const int b = blockIdx.y;
    if (b >= *nblk) return;
    const int lane = threadIdx.x % WARP, n = blockIdx.x * GV_WARPS + threadIdx.x / WARP;
    if (n >= NR) return;
    const int Kp = p.Kp;
    const int32_t *sl = sorted + (size_t)b * QP_CU_MOE_BMD;
    int rows = 0;
    for (int r = 0; r < QP_CU_MOE_BMD; r++) rows += sl[r] >= 0; /* valid slots come first */
    const int wrow = bexp[b] * NRp + n;
    for (int r0 = 0; r0 < rows; r0 += MR) {
        acc_t acc[MR];
        zero(acc);
        if constexpr (WK == QP_CU_W_I8 || WK == QP_CU_W_F8 || WK == QP_CU_W_F8B) {
            for (int k = lane * 16; k < Kp; k += WARP * 16) {
                uint32_t wv[4];
                load16((const uint8_t *)p.w + (size_t)wrow * Kp + k, wv);
                if constexpr (WK == QP_CU_W_I8) {
#pragma unroll
                    for (int i = 0; i < MR; i++)
                        if (r0 + i < rows) acc[i] = dot16(wv, (const uint8_t *)A + (size_t)(sl[r0 + i] / adiv) * Kp + k, acc[i], true);
                } else {
                    float wf[16];
                    decode16(wv, wf);
                    const int nkb = Kp / 128, g = k / 128;
                    const float sw = WK == QP_CU_W_F8B ? p.scale[(size_t)wrow * nkb + g] : 0.0f;
#pragma unroll
                    for (int i = 0; i < MR; i++)
                        if (r0 + i < rows) {
                            const size_t ar = (size_t)(sl[r0 + i] / adiv);
                            float c = fma16_e4m3(WK == QP_CU_W_F8B ? 0.0f : acc[i], (const uint8_t *)A + ar * Kp + k,
                                                 [&](int j) { return wf[j]; });
                            acc[i] = WK == QP_CU_W_F8B ? __fmaf_rn(c, QP_CU_MUL(as[ar * nkb + g], sw), acc[i]) : c;
                        }
                }
            }
        } else {
            for (int k = lane * 8; k < Kp; k += WARP * 8) {
                float wf[8];
                decode8<WK>(p, wrow, k, bf16, wf);
#pragma unroll
                for (int i = 0; i < MR; i++)
                    if (r0 + i < rows) acc[i] = fma8_act(acc[i], (const uint16_t *)A + (size_t)(sl[r0 + i] / adiv) * Kp + k, wf, bf16);
            }
        }
#pragma unroll
        for (int i = 0; i < MR; i++) {
            if (r0 + i >= rows) continue; /* warp-uniform: no shuffles for pad slots */
            acc_t v = warp_sum(acc[i]);
            if (lane == 0) ((acc_t *)P)[(size_t)sl[r0 + i] * NRp + n] = v;
        }
    }
}

/* ---- tiled: 64 sorted slots x 64 weight rows, the linear layers' mainloop --
 * The A tile gathers the slots' rows (a pad slot reads a zero row), the B
 * tile is one expert's rows (row e * NRp + n of the stacked layout); no
 * split-K (the blocks of all experts fill the GPU). */

/* Block b's slots and their A rows (row_bytes a row of A, pad: zrow); the
 * live m16 fragments of this warp (warp-uniform: a block's valid slots come
 * first), so an expert's last, mostly empty tile costs the mma of its live
 * rows only. */
__device__ __forceinline__ int moe_tc_rows(const int32_t *sorted, int b, const uint8_t *A, size_t row_bytes, int adiv,
                                           const uint8_t *zrow, const uint8_t **arow, int *slot) {
    const int tid = threadIdx.x, wm = (tid / WARP) >> 1;
    if (tid < QP_CU_MOE_BMT) {
        int t = sorted[(size_t)b * QP_CU_MOE_BMT + tid];
        slot[tid] = t;
        arow[tid] = t >= 0 ? A + (size_t)(t / adiv) * row_bytes : zrow;
    }
    __syncthreads();
    return slot[wm * 32 + 16] >= 0 ? 2 : slot[wm * 32] >= 0 ? 1 : 0;
}

/* the live slots' raw sums into P [slot][NRp] */
template <class T>
__device__ __forceinline__ void moe_tc_store(const T (&acc)[2][4][4], const int *slot, int NRp, int n0, T *P) {
    qp_cu_tc_store(acc, [&](int r, int c, T v) {
        int t = slot[r];
        if (t >= 0) P[(size_t)t * NRp + n0 + c] = v;
    });
}

/* fp8 per-block: acc += part * (as[row][g] * ws[weight row][g]), the A row
 * of each slot (pad slots: no scale, their sums are not stored) and the
 * scale of each weight row */
struct moe_fold_blk {
    static constexpr bool ON = true;
    const float *as, *ws;
    const int *slot;
    int adiv, nkb, wn0;
    __device__ __forceinline__ int group() const { return 128; }
    __device__ __forceinline__ void apply(float (&acc)[2][4][4], float (&part)[2][4][4], int g, int lane, int wm,
                                          int wn) const {
        float sw[4][2];
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 2; e++) sw[ni][e] = ws[(size_t)(wn0 + qp_cu_tc_c_col(lane, wn, ni, e)) * nkb + g];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int t = slot[qp_cu_tc_c_row(lane, wm, mi, 2 * h)];
                const float sx = t >= 0 ? as[(size_t)(t / adiv) * nkb + g] : 0.0f;
#pragma unroll
                for (int ni = 0; ni < 4; ni++)
#pragma unroll
                    for (int e = 2 * h; e < 2 * h + 2; e++) {
                        acc[mi][ni][e] = __fmaf_rn(part[mi][ni][e], QP_CU_MUL(sx, sw[ni][e & 1]), acc[mi][ni][e]);
                        part[mi][ni][e] = 0.0f;
                    }
            }
    }
};

/* int8 / e4m3 (fp8 per-block: as / ws the group scales of A / weight rows) */
template <int WK>
__global__ void __launch_bounds__(TC_THREADS) k_moe_tc(int NRp, int Kp, const uint8_t *A, int adiv,
                                                       const uint8_t *zrow, const uint8_t *w, const float *as,
                                                       const float *ws, const int32_t *sorted, const int32_t *bexp,
                                                       const int32_t *nblk, void *P) {
    typedef typename std::conditional<WK == QP_CU_W_I8, qp_cu_op_s8, qp_cu_op_e4m3>::type op;
    __shared__ __align__(16) qp_cu_tc_smem sm;
    __shared__ const uint8_t *arow[QP_CU_MOE_BMT];
    __shared__ int slot[QP_CU_MOE_BMT];
    const int b = blockIdx.y;
    if (b >= *nblk) return;
    const int nmi = moe_tc_rows(sorted, b, A, (size_t)Kp, adiv, zrow, arow, slot);
    const int n0 = blockIdx.x * QP_CU_BN, wn0 = bexp[b] * NRp + n0;
    typename op::acc_t acc[2][4][4];
    const tc_b8<WK> bl{ w, NULL, Kp, 0, wn0 };
    if constexpr (WK == QP_CU_W_F8B)
        qp_cu_tc_mainloop<op>(sm, qp_cu_a_gather{ arow }, bl, moe_fold_blk{ as, ws, slot, adiv, Kp / 128, wn0 }, 0,
                             Kp / op::K, nmi, acc);
    else
        qp_cu_tc_mainloop<op>(sm, qp_cu_a_gather{ arow }, bl, qp_cu_fold_none{}, 0, Kp / op::K, nmi, acc);
    moe_tc_store(acc, slot, NRp, n0, (typename op::acc_t *)P);
}

/* The float kinds (unquantized, OCP MX, W4A8 MXFP4-FP8, NVFP4): x' / h' in
 * the act dtype, the weights decoded into the B stage (tch_load_b), fp16 /
 * bf16 mma.sync, fp32 sums. */
template <int WK, bool BF16>
__global__ void __launch_bounds__(TC_THREADS) k_moe_tch(int NRp, qp_cu_fwd_w p, const uint16_t *A, int adiv,
                                                        const uint16_t *zrow, const int32_t *sorted,
                                                        const int32_t *bexp, const int32_t *nblk, float *P) {
    typedef qp_cu_op_h<BF16> op;
    __shared__ __align__(16) qp_cu_tc_smem sm;
    __shared__ const uint8_t *arow[QP_CU_MOE_BMT];
    __shared__ int slot[QP_CU_MOE_BMT];
    const int b = blockIdx.y;
    if (b >= *nblk) return;
    const int nmi = moe_tc_rows(sorted, b, (const uint8_t *)A, (size_t)p.Kp * 2, adiv, (const uint8_t *)zrow, arow,
                                slot);
    const int n0 = blockIdx.x * QP_CU_BN;
    float acc[2][4][4];
    qp_cu_tc_mainloop<op>(sm, qp_cu_a_gather{ arow }, tch_b<WK, BF16>{ p, bexp[b] * NRp + n0 }, qp_cu_fold_none{}, 0,
                         p.Kp / op::K, nmi, acc);
    moe_tc_store(acc, slot, NRp, n0, P);
}

/* ---- epilogues ------------------------------------------------------------- */

/* h[t][i] = rnd(rnd(silu(g)) * u), g and u the w13 outputs rounded to the
 * act dtype (cache1); another rank's slot: a zero row */
__global__ void k_moe_silu(int MK, int k, int I, int N13p, int E, int off, const int32_t *ids, const void *P,
                           int wkind, int act, float s_static, const float *xs, const float *ws13, int bf16,
                           uint16_t *h) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)MK * I) return;
    const int t = (int)(i / I), n = (int)(i % I), id = ids[t];
    if (id < off || id >= off + E) {
        h[i] = 0;
        return;
    }
    const size_t wr = (size_t)(id - off) * 2 * I + n;
    const bool q = wkind == QP_CU_W_I8 || wkind == QP_CU_W_F8;
    const float rs = q ? moe_rs(act, s_static, xs, t / k) : 0.0f;
    float g = qp_cu_round_act(moe_epi(P, (size_t)t * N13p + n, wkind, rs, q ? ws13[wr] : 0.0f), bf16);
    float u = qp_cu_round_act(moe_epi(P, (size_t)t * N13p + I + n, wkind, rs, q ? ws13[wr + I] : 0.0f), bf16);
    float s = qp_cu_round_act(moe_silu(g), bf16);
    h[i] = qp_cu_f32_to_act(QP_CU_MUL(s, u), bf16);
}

/* y[m][n] = (((0 + c3[m][0][n]) + c3[m][1][n]) ...) in the act dtype, c3 =
 * rnd(epilogue * routing weight); another rank's slot adds +0 */
__global__ void k_moe_sum(int M, int k, int H, int N2p, int E, int off, const int32_t *ids, const float *rw,
                          const void *P, int wkind, int act, float s_static, const float *hs, const float *ws2,
                          int bf16, uint16_t *y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * H) return;
    const int m = (int)(i / H), n = (int)(i % H);
    const bool q = wkind == QP_CU_W_I8 || wkind == QP_CU_W_F8;
    float acc = 0.0f;
    for (int j = 0; j < k; j++) {
        const int t = m * k + j, id = ids[t];
        float v = 0.0f;
        if (id >= off && id < off + E) {
            float a = moe_epi(P, (size_t)t * N2p + n, wkind, q ? moe_rs(act, s_static, hs, t) : 0.0f,
                              q ? ws2[(size_t)(id - off) * H + n] : 0.0f);
            v = qp_cu_round_act(QP_CU_MUL(a, rw[t]), bf16);
        }
        acc = qp_cu_round_act(QP_CU_ADD(acc, v), bf16);
    }
    y[i] = qp_cu_f32_to_act(acc, bf16);
}


/* ---- routing on the device (qp_moe_enqueue_logits) --------------------------
 * api/moe_route.c for one token per thread: softmax (or sigmoid) scores with
 * the exponential in double rounded once, IEEE fp32 divisions, the lower
 * index on ties (the host's own top-k, qp_moe_topk of api/host_device.h),
 * grouped top-k with the correction bias choosing but not weighting.
 * sc: scratch [2][M][G] (scores, biased); flags: 1 renormalize, 2 sigmoid,
 * 4 bias. */
#define QP_CU_ROUTE_KMAX 64
__device__ static inline float route_exp(float x) { return (float)exp((double)x); }

__global__ void k_moe_route(const float *lg, int M, int G, int k, int flags, int ng, int topk_group, float scale,
                            const float *bias, float *sc, int32_t *ids, float *rw) {
    int m = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (m >= M) return;
    const float *x = lg + (size_t)m * G;
    float *s = sc + (size_t)m * G, *b = sc + (size_t)M * G + (size_t)m * G;
    const bool renorm = flags & 1, sig = flags & 2, hb = flags & 4;
    if (!sig) {
        float mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < G; e++) mx = x[e] > mx ? x[e] : mx;
        for (int e = 0; e < G; e++) {
            s[e] = route_exp(QP_CU_ADD(x[e], -mx));
            sum = QP_CU_ADD(sum, s[e]);
        }
        float inv = QP_CU_DIV(1.0f, sum);
        for (int e = 0; e < G; e++) s[e] = QP_CU_MUL(s[e], inv);
    } else {
        for (int e = 0; e < G; e++) s[e] = QP_CU_DIV(1.0f, QP_CU_ADD(1.0f, route_exp(-x[e])));
    }
    int sel[QP_CU_ROUTE_KMAX];
    if (ng > 0) {
        int per = G / ng, gi[QP_CU_ROUTE_KMAX], two[2];
        float gs[QP_CU_ROUTE_KMAX];
        for (int e = 0; e < G; e++) b[e] = hb ? QP_CU_ADD(s[e], bias[e]) : s[e];
        for (int g = 0; g < ng; g++) {
            qp_moe_topk(b + g * per, per, hb ? 2 : 1, two);
            gs[g] = hb ? QP_CU_ADD(b[g * per + two[0]], b[g * per + two[1]]) : b[g * per + two[0]];
        }
        qp_moe_topk(gs, ng, topk_group, gi);
        for (int e = 0; e < G; e++) {
            bool keep = false;
            for (int t = 0; t < topk_group; t++) keep |= gi[t] == e / per;
            if (!keep) b[e] = -INFINITY;
        }
        qp_moe_topk(b, G, k, sel);
    } else {
        qp_moe_topk(s, G, k, sel);
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum = QP_CU_ADD(sum, s[sel[j]]);
    for (int j = 0; j < k; j++) {
        float w = s[sel[j]];
        if (renorm) w = QP_CU_DIV(w, sum);
        if (ng > 0 && scale != 1.0f) w = QP_CU_MUL(w, scale);
        ids[(size_t)m * k + j] = sel[j];
        rw[(size_t)m * k + j] = w;
    }
}

extern "C" int qp_cu_moe_route_launch(const float *lg, int M, int G, int k, int flags, int ng, int topk_group, float scale,
                              const float *bias, float *sc, int32_t *ids, float *rw, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    (void)st;
    QP_CU_LAUNCH(k_moe_route, (unsigned)((M + 63) / 64), 64, st, lg, M, G, k, flags, ng, topk_group, scale, bias, sc,
                ids, rw);
    return (int)cudaGetLastError();
}

/* ---- host side ------------------------------------------------------------- */

static bool moe_float_kind(int wkind) { return QP_CU_IS_FLOAT_KIND(wkind); }

/* The GEMM input from act-dtype rows src [R][K]: the linear quantizers
 * (codes [R][Kp] + row scales) or x' [R][Kp] (float kinds). */
static int moe_quant(const qp_cu_moe_fwd *f, const uint16_t *src, int R, int K, int Kp, float s, float g, void *dst,
                     float *rs, uint32_t *amax, const char **what) {
    cudaStream_t st = (cudaStream_t)f->stream;
    cudaError_t e;
    (void)st;
    if (moe_float_kind(f->wkind)) {
        *what = "k_act16";
        int U = f->act == QP_CU_ACT_MX_QDQ ? 32 : 16;
        size_t units = (size_t)R * (Kp / U);
        QP_CU_LAUNCH(k_act16, (unsigned)((units + 127) / 128), 128, st, src, R, K, Kp, f->bf16, f->act, s, f->act_mbits,
                    f->act_emin, f->act_emax, f->act_maxv, f->act_e4m3, g, (uint16_t *)dst);
        return (int)cudaGetLastError();
    }
    if (f->act == QP_CU_ACT_F8_GROUP128) { /* per_token_group_quant_fp8, no ue8m0 */
        *what = "k_quant_g128";
        size_t units = (size_t)R * (size_t)(K / 128);
        QP_CU_LAUNCH(k_quant_g128, (unsigned)((units + 127) / 128), 128, st, src, R, K, Kp, f->bf16, 0, (uint8_t *)dst, rs);
        return (int)cudaGetLastError();
    }
    if (f->act == QP_CU_ACT_F8_DYN_TENSOR) {
        *what = "cudaMemsetAsync(amax)";
        if ((e = qp_cu_memset_async(amax, 0, sizeof(uint32_t), st)) != cudaSuccess) return (int)e;
        *what = "k_rowmax";
        QP_CU_LAUNCH(k_rowmax, R, QT, st, src, K, f->bf16, amax);
        if ((e = cudaGetLastError()) != cudaSuccess) return (int)e;
    }
    *what = "k_quant";
    QP_CU_LAUNCH(k_quant, R, QT, st, src, K, Kp, f->bf16, f->act, s, 0, amax, (uint8_t *)dst, rs, f->zp);
    return (int)cudaGetLastError();
}

/* One grouped GEMM: w13 (gemm2 0: A = x', adiv = k) or w2 (A = h', adiv 1). */
static int moe_gemm(const qp_cu_moe_fwd *f, int gemm2, const char **what) {
    cudaStream_t st = (cudaStream_t)f->stream;
    (void)st;
    const void *A = gemm2 ? f->ha : f->xa;
    const float *as = gemm2 ? f->hs : f->xs; /* F8B: the A rows' group scales */
    const int adiv = gemm2 ? 1 : f->k, NR = gemm2 ? f->H : 2 * f->I, NRp = gemm2 ? f->N2p : f->N13p;
    qp_cu_fwd_w p;
    p.w = gemm2 ? f->w2 : f->w13;
    p.zero = NULL;
    p.scale = gemm2 ? f->b2 : f->b13;
    p.lut = f->lut;
    p.Kp = gemm2 ? f->Ip : f->Hp;
    p.Np = NRp;
    p.group = 0;
    p.blk = f->blk;
    void *P = gemm2 ? f->p2 : f->p1;
    if (f->kpath == QP_CU_MOE_TC) {
        dim3 grid(NRp / QP_CU_BN, f->nbmax);
        if (!moe_float_kind(f->wkind)) {
            *what = f->wkind == QP_CU_W_F8 ? "k_moe_tc<e4m3>" : f->wkind == QP_CU_W_F8B ? "k_moe_tc<e4m3 blocks>" : "k_moe_tc<s8>";
            auto kfn = f->wkind == QP_CU_W_F8    ? k_moe_tc<QP_CU_W_F8>
                       : f->wkind == QP_CU_W_F8B ? k_moe_tc<QP_CU_W_F8B>
                                                : k_moe_tc<QP_CU_W_I8>;
            QP_CU_LAUNCH(kfn, grid, TC_THREADS, st, NRp, p.Kp, (const uint8_t *)A, adiv, (const uint8_t *)f->zrow,
                        (const uint8_t *)p.w, as, p.scale, f->sorted, f->bexp, f->nblk, P);
        } else {
            *what = "k_moe_tch";
#define QP_CU_MOE_TCH(WK)                                                                                         \
    do {                                                                                                         \
        auto kfn = f->bf16 ? k_moe_tch<WK, true> : k_moe_tch<WK, false>;                                         \
        QP_CU_LAUNCH(kfn, grid, TC_THREADS, st, NRp, p, (const uint16_t *)A, adiv, (const uint16_t *)f->zrow,     \
                    f->sorted, f->bexp, f->nblk, (float *)P);                                                    \
    } while (0)
            if (f->wkind == QP_CU_W_H) QP_CU_MOE_TCH(QP_CU_W_H);
            else if (f->wkind == QP_CU_W_LUT4) QP_CU_MOE_TCH(QP_CU_W_LUT4);
            else QP_CU_MOE_TCH(QP_CU_W_LUT);
#undef QP_CU_MOE_TCH
        }
    } else {
        *what = "k_moe_gemv";
        dim3 grid((NR + GV_WARPS - 1) / GV_WARPS, f->nbmax);
        auto kfn = f->wkind == QP_CU_W_I8    ? k_moe_gemv<QP_CU_W_I8, 16>
                   : f->wkind == QP_CU_W_F8  ? k_moe_gemv<QP_CU_W_F8, 16>
                   : f->wkind == QP_CU_W_F8B ? k_moe_gemv<QP_CU_W_F8B, 16>
                   : f->wkind == QP_CU_W_H   ? k_moe_gemv<QP_CU_W_H, 8>
                   : f->wkind == QP_CU_W_LUT4 ? k_moe_gemv<QP_CU_W_LUT4, 8>
                                             : k_moe_gemv<QP_CU_W_LUT, 8>;
        QP_CU_LAUNCH(kfn, grid, GV_WARPS * WARP, st, NR, NRp, p, A, adiv, as, f->bf16, f->sorted, f->bexp, f->nblk, P);
    }
    return (int)cudaGetLastError();
}

extern "C" int qp_cu_moe_forward_launch(const qp_cu_moe_fwd *f, const char **what) {
    cudaStream_t st = (cudaStream_t)f->stream;
    (void)st;
    int e;
    const int MK = f->M * f->k;
    *what = "k_moe_align";
    QP_CU_LAUNCH(k_moe_align, 1, 256, st, f->ids, MK, f->E, f->off,
                f->kpath == QP_CU_MOE_TC ? QP_CU_MOE_BMT : QP_CU_MOE_BMD, f->cnt, f->eblk, f->sorted, f->bexp, f->nblk);
    if ((e = (int)cudaGetLastError())) return e;
    /* 1-3: x quantized over its M rows, w13, epilogue + silu_and_mul */
    if ((e = moe_quant(f, f->x, f->M, f->H, f->Hp, f->s13, f->g13, f->xa, f->xs, f->amax, what))) return e;
    if ((e = moe_gemm(f, 0, what))) return e;
    *what = "k_moe_silu";
    size_t nh = (size_t)MK * f->I;
    QP_CU_LAUNCH(k_moe_silu, (unsigned)((nh + 255) / 256), 256, st, MK, f->k, f->I, f->N13p, f->E, f->off, f->ids,
                (const void *)f->p1, f->wkind, f->act, f->s13, (const float *)f->xs, f->ws13, f->bf16, f->h);
    if ((e = (int)cudaGetLastError())) return e;
    /* 4-6: h quantized over its M*k rows, w2, epilogue * weight + k-slot sum */
    if ((e = moe_quant(f, f->h, MK, f->I, f->Ip, f->s2, f->g2, f->ha, f->hs, f->amax + 1, what))) return e;
    if ((e = moe_gemm(f, 1, what))) return e;
    *what = "k_moe_sum";
    size_t ny = (size_t)f->M * f->H;
    QP_CU_LAUNCH(k_moe_sum, (unsigned)((ny + 255) / 256), 256, st, f->M, f->k, f->H, f->N2p, f->E, f->off, f->ids,
                f->rw, (const void *)f->p2, f->wkind, f->act, f->s2, (const float *)f->hs, f->ws2, f->bf16, f->y);
    if ((e = (int)cudaGetLastError())) return e;
    *what = "";
    return 0;
}
