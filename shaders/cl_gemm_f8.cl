/* qport OpenCL kernels, part 5: W8A8-FP8 GEMM (docs/semantics.md §14, §16). Weights are
 * e4m3fn codes [N][K] decoded in the kernel; activations arrive as e4m3
 * values in fp32 from qp_quant_f8. Products of two e4m3 values are exact in
 * fp32, so only the fp32 sum order differs from the reference (which sums in
 * double): results are checked within a bound. Epilogue as cpu/ref_fp8.c. */

inline ushort qp_epilogue_f8(float acc, int m, int n, int flags, __global const float *sx,
                             __global const float *wsc, __global const ushort *bias) {
    int bf16 = (flags & QP_EPI_BF16) != 0;
    float s_a = sx[m], s_b = wsc[n];
    float v = (flags & QP_EPI_BIAS) ? fma(s_a, s_b * acc, qp_act_load(bias, n, bf16)) : s_a * (s_b * acc);
    return qp_act_encode(v, bf16);
}

/* The e4m3 decode table (code -> value) of a work-group of 64 lanes, ready
 * for every lane when it returns (a barrier). */
inline void qp_f8_table(__local float *dec, int lid) {
    for (int i = lid; i < 256; i += 64) dec[i] = qp_f8_decode((uint)i);
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* 16 e4m3 codes through the kernel's decode table (a table beats the bit
 * decode per weight) */
inline float16 qp_f8_dec16(__local const float *dec, uchar16 c) {
    return (float16)(dec[c.s0], dec[c.s1], dec[c.s2], dec[c.s3], dec[c.s4], dec[c.s5], dec[c.s6], dec[c.s7], dec[c.s8],
                     dec[c.s9], dec[c.sa], dec[c.sb], dec[c.sc], dec[c.sd], dec[c.se], dec[c.sf]);
}

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_f8(__global const float *xf, __global const uchar *w, int K, int N, int nb, int m0, int mrows, int flags,
                __global const float *sx, __global const float *wsc, __global const ushort *bias,
                __global ushort *y) {
    __local float red[QP_GEMV_MAX_M * QP_WG];
    __local float dec[256]; /* e4m3 code -> value: a table beats the bit decode per weight */
    int n = nb + get_group_id(0), lid = get_local_id(0);
    qp_f8_table(dec, lid);
    float acc[QP_GEMV_MAX_M];
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0.0f;
    __global const uchar *wr = w + (size_t)(n - nb) * K;
    int K16 = K & ~15;
    for (int k = lid * 16; k < K16; k += QP_WG * 16) {
        uchar16 c = vload16(0, wr + k);
        float16 wv = qp_f8_dec16(dec, c);
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {
            float16 p = vload16(0, xf + (size_t)(m0 + m) * K + k) * wv;
            float8 s8 = p.lo + p.hi;
            float4 s4 = s8.lo + s8.hi;
            acc[m] += (s4.x + s4.y) + (s4.z + s4.w);
        }
    }
    for (int k = K16 + lid; k < K; k += QP_WG) {
        float wk = dec[wr[k]];
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) acc[m] += xf[(size_t)(m0 + m) * K + k] * wk;
    }
    QP_GEMV_REDUCE(red, acc, mrows, lid);
    if (lid < mrows) y[(size_t)(m0 + lid) * N + n] = qp_epilogue_f8(red[lid * QP_WG], m0 + lid, n, flags, sx, wsc, bias);
}

#define QP_TKF 16

/* One k-tile of the 32x32 tiled kernels: each lane's 4x4 outputs (rows ty +
 * 8i, columns tx + 8j) accumulate As x Bs over the tile's QP_TKF columns in
 * increasing k, one rounding per add (the products of two 16-bit-exact
 * values are exact in fp32). */
inline void qp_tile_mac(__local const float *As, __local const float *Bs, int ty, int tx, float acc[4][4]) {
    for (int kk = 0; kk < QP_TKF; kk++) {
        float a[4], b[4];
        for (int i = 0; i < 4; i++) a[i] = As[(ty + 8 * i) * QP_TKF + kk];
        for (int j = 0; j < 4; j++) b[j] = Bs[(tx + 8 * j) * QP_TKF + kk];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
    }
}

/* a k-tile step: wait for both tiles, accumulate, free the tiles again */
inline void qp_tile_step(__local const float *As, __local const float *Bs, int ty, int tx, float acc[4][4]) {
    barrier(CLK_LOCAL_MEM_FENCE);
    qp_tile_mac(As, Bs, ty, tx, acc);
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The fp8 tiled kernels' start (qp_tiled_f8, qp_tiled_f8b): the two k-tiles
 * and the e4m3 table in local memory, the lane's place (tx, ty) in the 8x8
 * work-group, the output tile's origin (n0, m0) and the lane's share of a
 * k-tile load (row lr, columns lc .. lc+7). A macro because it declares the
 * kernel's local memory. */
#define QP_TILED_F8_START()                                                                                          \
    __local float As[QP_TM * QP_TKF];                                                                                \
    __local float Bs[QP_TN * QP_TKF];                                                                                \
    __local float dec[256];                                                                                          \
    int tx = get_local_id(0), ty = get_local_id(1), lid = ty * 8 + tx;                                               \
    qp_f8_table(dec, lid);                                                                                           \
    int n0 = nb + get_group_id(0) * QP_TN, m0 = get_group_id(1) * QP_TM;                                             \
    /* 64 lanes load 32 x 16 of each operand: lane -> (row lid/2, 8 columns) */                                      \
    int lr = lid >> 1, lc = (lid & 1) * 8

/* k-tile k0 of both operands, the lane's 8 columns of row lr: activations
 * (fp32 e4m3 values) and decoded weight codes, 0 outside M, ne and K */
inline void qp_f8_tile_load(__local float *As, __local float *Bs, __global const float *xf, __global const uchar *w,
                            __local const float *dec, int M, int K, int nb, int ne, int m0, int n0, int k0, int lr,
                            int lc) {
    for (int i = 0; i < 8; i++) {
        int gk = k0 + lc + i;
        int gm = m0 + lr, gn = n0 + lr;
        As[lr * QP_TKF + lc + i] = gm < M && gk < K ? xf[(size_t)gm * K + gk] : 0.0f;
        Bs[lr * QP_TKF + lc + i] = gn < ne && gk < K ? dec[w[(size_t)(gn - nb) * K + gk]] : 0.0f;
    }
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_f8(__global const float *xf, __global const uchar *w, int M, int K, int N, int nb, int ne, int flags,
                 __global const float *sx, __global const float *wsc, __global const ushort *bias,
                 __global ushort *y) {
    QP_TILED_F8_START();
    float acc[4][4];
    QP_TILE_ZERO(acc);
    for (int k0 = 0; k0 < K; k0 += QP_TKF) {
        qp_f8_tile_load(As, Bs, xf, w, dec, M, K, nb, ne, m0, n0, k0, lr, lc);
        qp_tile_step(As, Bs, ty, tx, acc);
    }
    QP_TILE_STORE(qp_epilogue_f8(acc[i][j], m, n, flags, sx, wsc, bias));
}
