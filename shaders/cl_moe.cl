/* qport OpenCL kernels, part 8: the fused MoE layer, the steps of
 * cpu/ref_moe.c (vLLM's fused_experts). The activation quantizers are the
 * linear layers' (qp_quant_i8, qp_rowmax + qp_quant_f8, qp_quant_f8_group,
 * qp_act_qdq); here:
 *
 *   qp_moe_align   slots sorted by local expert (moe_align_block_size):
 *                  per-expert counts, prefix sums of blocks of BM slots, the
 *                  sorted slot list padded with -1 per expert, each block's
 *                  expert; slots routed to another rank's expert zero their
 *                  h row (the reference's zero cache rows);
 *   qp_moe_gemv_*  decode (BM = 16): one work-group per (block, output row),
 *                  so each selected expert's weight rows are read once;
 *   qp_moe_tiled_* prefill: 32 slots x 32 outputs per 8x8 work-group
 *                  (qp_moe_gemv_f8b: fp8 per-block decode, k-block sums);
 *   qp_moe_sum     y[m] = sum over the k slots in order, rounded per add.
 *
 * The GEMM kernels run both GEMMs: w13 (gemm2 = 0) computes the gate row n
 * and the up row I + n of each slot and writes h = silu_and_mul directly
 * (fused: no cache1); w2 (gemm2 = 1) writes cache3 = the epilogue times the
 * routing weight. A rows: slot t reads row t / adiv (adiv = k: the token's
 * row of x; 1: the slot's row of h). Float sums are fp32 (the reference's
 * order differs only there); int8 sums are exact int32. */

/* fp32 silu of the reference: g / (1 + exp(-g)) in double, rounded once.
 * Without fp64 the fp32 formula (not bit-exact; moe_describe says so). */
inline float qp_moe_silu(float g) {
#if QP_HAS_FP64
    double gd = (double)g;
    return (float)(gd / (1.0 + exp(-gd)));
#else
    return g / (1.0f + exp(-g));
#endif
}

/* ---- slot sorting: one work-group of QP_WG lanes ---------------------------
 * cnt [E] and eblk [E] are scratch; sorted [nbmax * BM]; bexp [nbmax];
 * nblk [1]. Expert e's slots keep their index order (deterministic). */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_moe_align(__global const int *ids, int MK, int E, int off, int BM, __global int *cnt, __global int *eblk,
                  __global int *sorted, __global int *bexp, __global int *nblk, __global ushort *h, int I) {
    int lid = get_local_id(0);
    for (int e = lid; e < E; e += QP_WG) {
        int c = 0;
        for (int t = 0; t < MK; t++) c += ids[t] - off == e;
        cnt[e] = c;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0) {
        int p = 0;
        for (int e = 0; e < E; e++) {
            int nb = (cnt[e] + BM - 1) / BM;
            eblk[e] = p;
            for (int b = 0; b < nb; b++) bexp[p + b] = e;
            p += nb;
        }
        nblk[0] = p;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (int e = lid; e < E; e += QP_WG) {
        int j = eblk[e] * BM, end = j + (cnt[e] + BM - 1) / BM * BM;
        for (int t = 0; t < MK; t++)
            if (ids[t] - off == e) sorted[j++] = t;
        for (; j < end; j++) sorted[j] = -1;
    }
    for (int t = lid; t < MK; t += QP_WG)
        if (ids[t] < off || ids[t] >= off + E)
            for (int i = 0; i < I; i++) h[(size_t)t * I + i] = 0;
}

/* ---- epilogues -------------------------------------------------------------- */

/* w13: h[t][n] = rnd(rnd(silu(g)) * u), g and u rounded to the act dtype */
inline void qp_moe_store_h(float g, float u, int t, int n, int I, int bf16, __global ushort *out) {
    float gr = qp_rnd_act(g, bf16), ur = qp_rnd_act(u, bf16);
    float s = qp_rnd_act(qp_moe_silu(gr), bf16);
    out[(size_t)t * I + n] = qp_act_encode(s * ur, bf16);
}

/* quantized schemes: acc * a_scale * w_scale, left to right (cpu/ref_moe.c) */
inline float qp_moe_scale(float acc, int quant, __global const float *rs, int arow, __global const float *ws,
                          size_t wrow) {
    return quant ? acc * rs[arow] * ws[wrow] : acc;
}

/* one slot's outputs: w13 -> h (gate n, up I + n), w2 -> cache3 * weight */
inline void qp_moe_out(float ag, float au, int t, int arow, int n, int e, int NO, int gemm2, int quant, int bf16,
                       __global const float *rs, __global const float *ws, __global const float *rw,
                       __global ushort *out) {
    if (gemm2) {
        float v = qp_moe_scale(ag, quant, rs, arow, ws, (size_t)e * NO + n) * rw[t];
        out[(size_t)t * NO + n] = qp_act_encode(v, bf16);
    } else {
        size_t base = (size_t)e * 2 * NO;
        qp_moe_store_h(qp_moe_scale(ag, quant, rs, arow, ws, base + n), qp_moe_scale(au, quant, rs, arow, ws, base + NO + n),
                       t, n, NO, bf16, out);
    }
}

/* ---- float GEMMs (unquantized, fp8, emulated block-float) ---------------------
 * a [rows][K] fp32 (e4m3 values / x' / widened act bits); weights by wfmt:
 * 0 act-dtype bits, 2 byte codes W = rnd(lut[c] * bs[row][k / blk]), 3 e4m3
 * codes (W = value), 4 e4m3 codes with bs [row][K/128] the k-block scales
 * (fp8 per-block: prefill here, decode qp_moe_gemv_f8b). Weight row r of expert e: row e * NR + r, NR = 2 NO
 * (w13) or NO (w2). */
inline float qp_moe_w(__global const uchar *w, size_t row, int k, int K, int wfmt, int blk, __local const float *lut,
                      __global const float *bs, int bf16) {
    if (wfmt == 0) return qp_act_load((__global const ushort *)w, row * (size_t)K + (size_t)k, bf16);
    uint c = w[row * (size_t)K + (size_t)k];
    if (wfmt >= 3) return lut[c];
    return qp_rnd_act(lut[c] * bs[row * (size_t)(K / blk) + (size_t)(k / blk)], bf16);
}

/* Weight row of output n of expert e: w13's gate row (its up row is NO
 * further) or w2's row */
inline size_t qp_moe_wrow(int e, int n, int NO, int gemm2) {
    return gemm2 ? (size_t)e * NO + n : (size_t)e * 2 * NO + n;
}

/* The GEMM kernels' last parameters: the epilogue's scales (rs, ws) and
 * routing weights (rw), the align stage's sorted slots, block experts and
 * block count, and the output; the names the macros below read. */
#define QP_MOE_GEMM_TAIL_PARAMS                                                                                      \
    __global const float *rs, __global const float *ws, __global const float *rw, __global const int *sorted,       \
        __global const int *bexp, __global const int *nblk, __global ushort *out

#define QP_MOE_BMD 16 /* decode block: slots per work-group */

/* The decode kernels' start: the block's slot table, work-group (block b,
 * output n) of the grid, the lane; a work-group past the last block leaves
 * (the whole work-group: no barrier skipped by part of it). */
#define QP_MOE_GEMV_START()                                                                                          \
    __local int slot[QP_MOE_BMD];                                                                                    \
    int gid = get_group_id(0), b = gid / NO, n = gid - b * NO, lid = get_local_id(0);                                \
    if (b >= nblk[0]) return

/* The decode kernels' block b: its slots (after the work-group's local
 * tables: one barrier for both), expert e, the slots in use, and weight
 * rows rg (gate, or w2's row) and ru (up) of output n. */
#define QP_MOE_GEMV_BLOCK()                                                                                          \
    if (lid < QP_MOE_BMD) slot[lid] = sorted[b * QP_MOE_BMD + lid];                                                  \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                                    \
    int e = bexp[b], rows = 0;                                                                                       \
    for (int r = 0; r < QP_MOE_BMD; r++) rows += slot[r] >= 0;                                                       \
    size_t rg = qp_moe_wrow(e, n, NO, gemm2), ru = rg + (size_t)NO

/* The decode kernels' lane sums -> red[r * QP_WG] (gate r, up BMD + r): a
 * macro so the float and the int32 kernels share one tree order. */
#define QP_MOE_GEMV_REDUCE(red, ag, au, lid)                                                                         \
    do {                                                                                                             \
        for (int r_ = 0; r_ < QP_MOE_BMD; r_++) {                                                                    \
            (red)[r_ * QP_WG + (lid)] = (ag)[r_];                                                                    \
            (red)[(QP_MOE_BMD + r_) * QP_WG + (lid)] = (au)[r_];                                                     \
        }                                                                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
        for (int o_ = QP_WG / 2; o_ > 0; o_ >>= 1) {                                                                 \
            if ((lid) < o_)                                                                                          \
                for (int r_ = 0; r_ < 2 * QP_MOE_BMD; r_++) (red)[r_ * QP_WG + (lid)] += (red)[r_ * QP_WG + (lid) + o_]; \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
        }                                                                                                            \
    } while (0)

/* The prefill kernels' start: the block's slot table, block b (the grid's
 * y), the lane (tx, ty) of the 8x8 work-group; a work-group past the last
 * block leaves (the whole work-group: no barrier skipped by part of it). */
#define QP_MOE_TILED_START()                                                                                         \
    __local int slot[QP_TM];                                                                                         \
    int b = get_group_id(1);                                                                                         \
    if (b >= nblk[0]) return;                                                                                        \
    int tx = get_local_id(0), ty = get_local_id(1), lid = ty * 8 + tx

/* The prefill kernels' block b: its slots (after the work-group's local
 * tables: one barrier for both), expert e and first output n0; the lane
 * loads tile row lr (two lanes a row): slot st, output gn, weight rows rg
 * (gate, or w2's row) and ru (up). */
#define QP_MOE_TILED_BLOCK()                                                                                         \
    if (lid < QP_TM) slot[lid] = sorted[b * QP_TM + lid];                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                                    \
    int e = bexp[b], n0 = get_group_id(0) * QP_TN;                                                                   \
    int lr = lid >> 1, st = slot[lr], gn = n0 + lr;                                                                  \
    size_t rg = qp_moe_wrow(e, gn, NO, gemm2), ru = rg + (size_t)NO

/* The prefill kernels' epilogue: lane (ty, tx) holds rows ty + 8i, columns
 * n0 + tx + 8j; CONV turns an accumulator into the fp32 the epilogue takes. */
#define QP_MOE_TILE_OUT(CONV, quant)                                                                                 \
    for (int i = 0; i < 4; i++) {                                                                                    \
        int t = slot[ty + 8 * i];                                                                                    \
        if (t < 0) continue;                                                                                         \
        for (int j = 0; j < 4; j++) {                                                                                \
            int n = n0 + tx + 8 * j;                                                                                 \
            if (n < NO)                                                                                              \
                qp_moe_out(CONV(ag[i][j]), CONV(au[i][j]), t, t / adiv, n, e, NO, gemm2, quant, bf16, rs, ws, rw, out); \
        }                                                                                                            \
    }

#define QP_MOE_NOCONV(x) (x)

/* The decode kernels' end: the lane sums reduced (QP_MOE_GEMV_REDUCE), then
 * slot lid < rows's outputs; CONV as in QP_MOE_TILE_OUT. */
#define QP_MOE_GEMV_OUT(CONV, quant)                                                                                 \
    QP_MOE_GEMV_REDUCE(red, ag, au, lid);                                                                            \
    if (lid < rows) {                                                                                                \
        int t = slot[lid];                                                                                           \
        qp_moe_out(CONV(red[lid * QP_WG]), CONV(red[(QP_MOE_BMD + lid) * QP_WG]), t, t / adiv, n, e, NO, gemm2,      \
                   quant, bf16, rs, ws, rw, out);                                                                    \
    }

/* Decode: work-group (b, n); lanes stride over K; a tree reduction. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_moe_gemv_f(__global const float *a, int adiv, __global const uchar *w, __global const float *lutg,
                   __global const float *bs, int wfmt, int blk, int K, int NO, int gemm2, int quant, int bf16,
                   QP_MOE_GEMM_TAIL_PARAMS) {
    __local float red[2 * QP_MOE_BMD * QP_WG];
    __local float lut[256];
    QP_MOE_GEMV_START();
    for (int i = lid; i < 256; i += QP_WG) lut[i] = wfmt == 3 ? qp_f8_decode((uint)i) : wfmt ? lutg[i] : 0.0f;
    QP_MOE_GEMV_BLOCK();
    float ag[QP_MOE_BMD], au[QP_MOE_BMD];
    for (int r = 0; r < QP_MOE_BMD; r++) ag[r] = au[r] = 0.0f;
    for (int k = lid; k < K; k += QP_WG) {
        float wg = qp_moe_w(w, rg, k, K, wfmt, blk, lut, bs, bf16);
        float wu = gemm2 ? 0.0f : qp_moe_w(w, ru, k, K, wfmt, blk, lut, bs, bf16);
        for (int r = 0; r < QP_MOE_BMD; r++)
            if (r < rows) {
                float x = a[(size_t)(slot[r] / adiv) * K + k];
                ag[r] += x * wg;
                au[r] += x * wu;
            }
    }
    QP_MOE_GEMV_OUT(QP_MOE_NOCONV, quant);
}

/* Prefill: block b of 32 sorted slots x 32 outputs (rows ty + 8i, columns
 * tx + 8j per lane), K in steps of QP_TKF through local memory; w13 keeps a
 * gate and an up tile. fp8 per-block (wfmt 4, rs [rows][K/128]) sums each
 * 128-wide k-block in pg / pu and folds it into ag / au times s_a * s_w,
 * as the linear qp_tiled_f8b. */
__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_moe_tiled_f(__global const float *a, int adiv, __global const uchar *w, __global const float *lutg,
                    __global const float *bs, int wfmt, int blk, int K, int NO, int gemm2, int quant, int bf16,
                    QP_MOE_GEMM_TAIL_PARAMS) {
    __local float As[QP_TM * QP_TKF];
    __local float Bg[QP_TN * QP_TKF];
    __local float Bu[QP_TN * QP_TKF];
    __local float lut[256];
    QP_MOE_TILED_START();
    for (int i = lid; i < 256; i += 64) lut[i] = wfmt >= 3 ? qp_f8_decode((uint)i) : wfmt ? lutg[i] : 0.0f;
    QP_MOE_TILED_BLOCK();
    int f8b = wfmt == 4, kb = K >> 7;
    float ag[4][4], au[4][4], pg[4][4], pu[4][4];
    QP_TILE_ZERO(ag);
    QP_TILE_ZERO(au);
    QP_TILE_ZERO(pg);
    QP_TILE_ZERO(pu);
    int lc = (lid & 1) * 8; /* 8 columns of row lr */
    for (int k0 = 0; k0 < K; k0 += QP_TKF) {
        for (int i = 0; i < 8; i++) {
            int gk = k0 + lc + i;
            As[lr * QP_TKF + lc + i] = st >= 0 && gk < K ? a[(size_t)(st / adiv) * K + gk] : 0.0f;
            Bg[lr * QP_TKF + lc + i] = gn < NO && gk < K ? qp_moe_w(w, rg, gk, K, wfmt, blk, lut, bs, bf16) : 0.0f;
            Bu[lr * QP_TKF + lc + i] =
                !gemm2 && gn < NO && gk < K ? qp_moe_w(w, ru, gk, K, wfmt, blk, lut, bs, bf16) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (f8b) {
            qp_tile_mac(As, Bg, ty, tx, pg);
            if (!gemm2) qp_tile_mac(As, Bu, ty, tx, pu);
        } else {
            qp_tile_mac(As, Bg, ty, tx, ag);
            if (!gemm2) qp_tile_mac(As, Bu, ty, tx, au);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (f8b && ((k0 + QP_TKF) & 127) == 0) { /* end of a k-block: scale and fold */
            int g = k0 >> 7;
            for (int i = 0; i < 4; i++) {
                int t = slot[ty + 8 * i];
                for (int j = 0; j < 4; j++) {
                    int n = n0 + tx + 8 * j;
                    if (t >= 0 && n < NO) {
                        float sx = rs[(size_t)(t / adiv) * kb + g];
                        size_t r0 = qp_moe_wrow(e, n, NO, gemm2);
                        ag[i][j] += pg[i][j] * (sx * bs[r0 * (size_t)kb + g]);
                        if (!gemm2) au[i][j] += pu[i][j] * (sx * bs[(r0 + (size_t)NO) * (size_t)kb + g]);
                    }
                    pg[i][j] = pu[i][j] = 0.0f;
                }
            }
        }
    }
    QP_MOE_TILE_OUT(QP_MOE_NOCONV, quant)
}

/* ---- fp8 per-block decode (w_blk 128, per-token-group-128 activations) -----
 * a [rows][K] the e4m3 values of qp_quant_f8_group with rs [rows][K/128];
 * w e4m3 codes, ws [weight row][K/128] the block scale of each (row,
 * k-block). As the linear qp_gemv_f8b / qp_tiled_f8b: each k-block's exact
 * products summed in fp32, times s_a * s_w, accumulated; no epilogue scale
 * (qp_moe_out with quant 0). K % 128 == 0 (the host checks). */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_moe_gemv_f8b(__global const float *a, int adiv, __global const uchar *w, int K, int NO, int gemm2, int bf16,
                     QP_MOE_GEMM_TAIL_PARAMS) {
    __local float red[2 * QP_MOE_BMD * QP_WG];
    __local float dec[256];
    QP_MOE_GEMV_START();
    int kb = K >> 7;
    for (int i = lid; i < 256; i += QP_WG) dec[i] = qp_f8_decode((uint)i);
    QP_MOE_GEMV_BLOCK();
    __global const uchar *wg = w + rg * (size_t)K, *wu = w + ru * (size_t)K;
    float ag[QP_MOE_BMD], au[QP_MOE_BMD];
    for (int r = 0; r < QP_MOE_BMD; r++) ag[r] = au[r] = 0.0f;
    for (int k = lid * 16; k < K; k += QP_WG * 16) {
        int g = k >> 7;
        float sg = ws[rg * (size_t)kb + g], su = gemm2 ? 0.0f : ws[ru * (size_t)kb + g];
        float16 vg = qp_f8_dec16(dec, vload16(0, wg + k)), vu = gemm2 ? (float16)(0.0f) : qp_f8_dec16(dec, vload16(0, wu + k));
        for (int r = 0; r < QP_MOE_BMD; r++)
            if (r < rows) {
                size_t ar = (size_t)(slot[r] / adiv);
                float16 x = vload16(0, a + ar * K + k);
                float sx = rs[ar * kb + g];
                ag[r] += qp_sum16(x * vg) * (sx * sg);
                au[r] += qp_sum16(x * vu) * (sx * su);
            }
    }
    QP_MOE_GEMV_OUT(QP_MOE_NOCONV, 0);
}

/* ---- int8 GEMMs (W8A8-INT8): exact int32 sums, (float)acc in the epilogue -- */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_moe_gemv_i(__global const char *a, int adiv, __global const char *w, int K, int NO, int gemm2, int bf16,
                   QP_MOE_GEMM_TAIL_PARAMS) {
    __local int red[2 * QP_MOE_BMD * QP_WG];
    QP_MOE_GEMV_START();
    QP_MOE_GEMV_BLOCK();
    __global const char *wg = w + rg * (size_t)K, *wu = w + ru * (size_t)K;
    int ag[QP_MOE_BMD], au[QP_MOE_BMD];
    for (int r = 0; r < QP_MOE_BMD; r++) ag[r] = au[r] = 0;
    int K4 = K & ~3;
    for (int k = lid * 4; k < K4; k += QP_WG * 4) {
        char4 g4 = vload4(0, wg + k), u4 = gemm2 ? (char4)(0) : vload4(0, wu + k);
        for (int r = 0; r < QP_MOE_BMD; r++)
            if (r < rows) {
                char4 x4 = vload4(0, a + (size_t)(slot[r] / adiv) * K + k);
                ag[r] += QP_DOT4(x4, g4);
                au[r] += QP_DOT4(x4, u4);
            }
    }
    for (int k = K4 + lid; k < K; k += QP_WG) {
        int g1 = wg[k], u1 = gemm2 ? 0 : wu[k];
        for (int r = 0; r < QP_MOE_BMD; r++)
            if (r < rows) {
                int x = a[(size_t)(slot[r] / adiv) * K + k];
                ag[r] += x * g1;
                au[r] += x * u1;
            }
    }
    QP_MOE_GEMV_OUT(convert_float_rte, 1);
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_moe_tiled_i(__global const char *a, int adiv, __global const char *w, int K, int NO, int gemm2, int bf16,
                    QP_MOE_GEMM_TAIL_PARAMS) {
    __local char4 As[QP_TM * (QP_TK / 4)];
    __local char4 Bg[QP_TN * (QP_TK / 4)];
    __local char4 Bu[QP_TN * (QP_TK / 4)];
    QP_MOE_TILED_START();
    QP_MOE_TILED_BLOCK();
    int ag[4][4], au[4][4];
    QP_TILE_ZERO(ag);
    QP_TILE_ZERO(au);
    /* 64 lanes x 16 bytes = one 32 x 32 tile: lane -> (row lid/2, half lid%2) */
    int lc = (lid & 1) * 16;
    for (int k0 = 0; k0 < K; k0 += QP_TK) {
        char av[16], gv[16], uv[16];
        for (int i = 0; i < 16; i++) {
            int gk = k0 + lc + i;
            bool kin = gk < K;
            av[i] = st >= 0 && kin ? a[(size_t)(st / adiv) * K + gk] : 0;
            gv[i] = gn < NO && kin ? w[rg * (size_t)K + gk] : 0;
            uv[i] = !gemm2 && gn < NO && kin ? w[ru * (size_t)K + gk] : 0;
        }
        for (int q = 0; q < 4; q++) {
            As[lr * (QP_TK / 4) + lc / 4 + q] = (char4)(av[4 * q], av[4 * q + 1], av[4 * q + 2], av[4 * q + 3]);
            Bg[lr * (QP_TK / 4) + lc / 4 + q] = (char4)(gv[4 * q], gv[4 * q + 1], gv[4 * q + 2], gv[4 * q + 3]);
            Bu[lr * (QP_TK / 4) + lc / 4 + q] = (char4)(uv[4 * q], uv[4 * q + 1], uv[4 * q + 2], uv[4 * q + 3]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < QP_TK / 4; kk++) {
            char4 x[4], g[4], u[4];
            for (int i = 0; i < 4; i++) x[i] = As[(ty + 8 * i) * (QP_TK / 4) + kk];
            for (int j = 0; j < 4; j++) {
                g[j] = Bg[(tx + 8 * j) * (QP_TK / 4) + kk];
                u[j] = Bu[(tx + 8 * j) * (QP_TK / 4) + kk];
            }
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    ag[i][j] += QP_DOT4(x[i], g[j]);
                    au[i][j] += QP_DOT4(x[i], u[j]);
                }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    QP_MOE_TILE_OUT(convert_float_rte, 1)
}

/* ---- the k-slot sum: y[m][n] = (((0 + c3[m][0][n]) + c3[m][1][n]) ...), each
 * add rounded to the act dtype; another rank's slot adds +0 (the
 * reference's zero row). One lane per output. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_moe_sum(__global const ushort *c3, __global const int *ids, int M, int k, int H, int E, int off, int bf16,
                __global ushort *y) {
    int it = get_global_id(0);
    if (it >= M * H) return;
    int m = it / H, n = it - m * H;
    float acc = 0.0f;
    for (int j = 0; j < k; j++) {
        int t = m * k + j, id = ids[t];
        float v = id >= off && id < off + E ? qp_act_load(c3, (size_t)t * H + n, bf16) : 0.0f;
        acc = qp_rnd_act(acc + v, bf16);
    }
    y[it] = qp_act_encode(acc, bf16);
}

/* ---- routing on the device (qp_moe_enqueue_logits) -------------------------
 * api/moe_route.c for one token per work-item: softmax (or sigmoid) scores
 * with the exponential in double rounded once, correctly rounded divisions
 * (qp_div), the lower index on ties, grouped top-k with the correction bias
 * choosing but not weighting. Without fp64 the kernel is not built: the
 * host refuses (the reference's exponential needs it). sc: scratch
 * [2][M][G] (scores, biased). flags: 1 renormalize, 2 sigmoid, 4 bias. */
#if QP_HAS_FP64
#define QP_ROUTE_KMAX 64
inline float qp_exp_rn(float x) { return (float)exp((double)x); }

/* top-k by value, the lower index on ties; one body for the global scores
 * and the private ones (OpenCL C has no generic pointer in 1.2). */
#define QP_TOPK_DEF(name, AS)                                                                                        \
    inline void name(AS const float *v, int n, int k, int *idx) {                                                    \
        for (int j = 0; j < k; j++) {                                                                                \
            int best = -1;                                                                                           \
            for (int i = 0; i < n; i++) {                                                                            \
                int taken = 0;                                                                                       \
                for (int t = 0; t < j; t++) taken |= idx[t] == i;                                                    \
                if (taken) continue;                                                                                 \
                if (best < 0 || v[i] > v[best]) best = i;                                                            \
            }                                                                                                        \
            idx[j] = best;                                                                                           \
        }                                                                                                            \
    }
QP_TOPK_DEF(qp_topk_g, __global)
QP_TOPK_DEF(qp_topk_p, __private)

__kernel void qp_moe_route(__global const float *lg, int M, int G, int k, int flags, int ng, int topk_group,
                           float scale, __global const float *bias, __global float *sc, __global int *ids,
                           __global float *rw, int dm) {
    int m = get_global_id(0);
    if (m >= M) return;
    __global const float *x = lg + (size_t)m * G;
    __global float *s = sc + (size_t)m * G, *b = sc + (size_t)M * G + (size_t)m * G;
    int renorm = flags & 1, sig = flags & 2, hb = flags & 4;
    if (!sig) {
        float mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < G; e++) mx = fmax(mx, x[e]);
        for (int e = 0; e < G; e++) sum += (s[e] = qp_exp_rn(x[e] - mx));
        float inv = qp_div(1.0f, sum, dm);
        for (int e = 0; e < G; e++) s[e] *= inv;
    } else {
        for (int e = 0; e < G; e++) s[e] = qp_div(1.0f, 1.0f + qp_exp_rn(-x[e]), dm);
    }
    int sel[QP_ROUTE_KMAX];
    if (ng > 0) {
        int per = G / ng;
        float gs[QP_ROUTE_KMAX];
        int gi[QP_ROUTE_KMAX], two[2];
        for (int e = 0; e < G; e++) b[e] = hb ? s[e] + bias[e] : s[e];
        for (int g = 0; g < ng; g++) {
            qp_topk_g(b + g * per, per, hb ? 2 : 1, two);
            gs[g] = hb ? b[g * per + two[0]] + b[g * per + two[1]] : b[g * per + two[0]];
        }
        qp_topk_p(gs, ng, topk_group, gi);
        for (int e = 0; e < G; e++) {
            int keep = 0;
            for (int t = 0; t < topk_group; t++) keep |= gi[t] == e / per;
            if (!keep) b[e] = -INFINITY;
        }
        qp_topk_g(b, G, k, sel);
    } else {
        qp_topk_g(s, G, k, sel);
    }
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum += s[sel[j]];
    for (int j = 0; j < k; j++) {
        float w = s[sel[j]];
        if (renorm) w = qp_div(w, sum, dm);
        if (ng > 0 && scale != 1.0f) w *= scale;
        ids[(size_t)m * k + j] = sel[j];
        rw[(size_t)m * k + j] = w;
    }
}
#endif
