/* qport OpenCL kernels, part 6: W4A16 (docs/semantics.md §17) and W8A8-FP8 per-block
 * (docs/semantics.md §16) GEMMs, both float paths: fp32 accumulation, judged against the
 * reference (which sums in double) within a bound (tools/cases.c).
 *
 * W4A16 layout (made by cl_linear.c from the Quark-packed checkpoint
 * tensors): wq [N][Kp/2] bytes, Kp = K rounded up to 32; the 32 weights
 * k = 32c .. 32c+31 of a row sit in bytes 16c .. 16c+15, byte i holding
 * k = 32c+i in its low nibble and k = 32c+16+i in its high nibble (as the
 * QQQ layout of cl_gemm_q4.cl). A nibble is an unsigned code u; the weight is
 * (u - z) * s with z = wz[g][n] (uint4: the checkpoint's zero point; int4:
 * 8, the codes stored as c ^ 8, so u - 8 is the two's-complement value) and
 * s = ws[g][n] (the act-dtype scale widened to fp32, exact), g = k / gsz.
 * (u - z) * s is exact in fp32 (a 5-bit integer times an 11-bit mantissa),
 * i.e. the very weight the reference multiplies in double. The group is
 * constant over 32 consecutive k: gsz is a multiple of 32 or covers K. */

/* y = acc (+ bias, one fp32 add), rounded RNE to the act dtype */
inline ushort qp_epilogue_f32(float acc, int n, int flags, __global const ushort *bias) {
    int bf16 = (flags & QP_EPI_BF16) != 0;
    float v = (flags & QP_EPI_BIAS) ? acc + qp_act_load(bias, n, bf16) : acc;
    return qp_act_encode(v, bf16);
}

/* fp16/bf16 activations widened to fp32 (exact), once per forward */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_act_f32(__global const ushort *x, int total, int bf16, __global float *xf) {
    int i = get_global_id(0);
    if (i < total) xf[i] = qp_act_load(x, (size_t)i, bf16);
}

inline float qp_sum16(float16 p) {
    float8 s8 = p.lo + p.hi;
    float4 s4 = s8.lo + s8.hi;
    return (s4.x + s4.y) + (s4.z + s4.w);
}

/* The GEMVs' 32-k chunk at k: acc[m] (rows m0 + m, m < mrows) += the sums
 * of x times w0 (k .. k+15) and w1 (k+16 .. k+31); the tail chunk (k + 32 >
 * K) element by element, the weights in wt. */
inline void qp_gemv_acc32(float *acc, __global const float *xf, int K, int m0, int mrows, int k, float16 w0,
                          float16 w1) {
    for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {
        __global const float *xr = xf + (size_t)(m0 + m) * K + k;
        acc[m] += qp_sum16(vload16(0, xr) * w0) + qp_sum16(vload16(0, xr + 16) * w1);
    }
}
inline void qp_gemv_acc32_tail(float *acc, __global const float *xf, int K, int m0, int mrows, int k,
                               const float *wt) {
    for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {
        __global const float *xr = xf + (size_t)(m0 + m) * K + k;
        for (int i = 0; i < 32; i++) if (k + i < K) acc[m] += xr[i] * wt[i];
    }
}

/* GEMV (M <= 16): one work-group per column, lanes stride over K 32 weights
 * (16 bytes) at a time, dequantized in registers. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_w4(__global const float *xf, __global const uchar *wq, __global const float *ws,
                __global const uchar *wz, int K, int N, int nb, int gsz, int m0, int mrows, int flags,
                __global const ushort *bias, __global ushort *y) {
    __local float red[QP_GEMV_MAX_M * QP_WG];
    int n = nb + get_group_id(0), lid = get_local_id(0);
    float acc[QP_GEMV_MAX_M];
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0.0f;
    int Kp = (K + 31) & ~31;
    __global const uchar *wr = wq + (size_t)(n - nb) * (size_t)(Kp >> 1);
    for (int k = lid * 32; k < K; k += QP_WG * 32) {
        size_t gi = (size_t)(k / gsz) * N + n;
        float s = ws[gi];
        int z = wz[gi];
        uchar16 b = vload16(0, wr + (k >> 1));
        float16 w0 = convert_float16(convert_int16(b & (uchar16)(15)) - z) * s;
        float16 w1 = convert_float16(convert_int16(b >> (uchar16)(4)) - z) * s;
        if (k + 32 <= K) {
            qp_gemv_acc32(acc, xf, K, m0, mrows, k, w0, w1);
        } else {
            float wt[32];
            vstore16(w0, 0, wt);
            vstore16(w1, 0, wt + 16);
            qp_gemv_acc32_tail(acc, xf, K, m0, mrows, k, wt);
        }
    }
    QP_GEMV_REDUCE(red, acc, mrows, lid);
    if (lid < mrows) y[(size_t)(m0 + lid) * N + n] = qp_epilogue_f32(red[lid * QP_WG], n, flags, bias);
}

/* Tiled (M > 16): 32x32 output tile per 8x8 work-group, K in steps of 16
 * through local memory; each lane dequantizes 8 weights of one row (one
 * half-chunk of 8 bytes: one group, one nibble half). */
__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_w4(__global const float *xf, __global const uchar *wq, __global const float *ws,
                 __global const uchar *wz, int M, int K, int N, int nb, int ne, int gsz, int flags,
                 __global const ushort *bias, __global ushort *y) {
    __local float As[QP_TM * QP_TKF];
    __local float Bs[QP_TN * QP_TKF];
    int tx = get_local_id(0), ty = get_local_id(1), lid = ty * 8 + tx;
    int n0 = nb + get_group_id(0) * QP_TN, m0 = get_group_id(1) * QP_TM;
    int Kp = (K + 31) & ~31;
    float acc[4][4];
    QP_TILE_ZERO(acc);
    int lr = lid >> 1, lc = (lid & 1) * 8;
    int gm = m0 + lr, gn = n0 + lr;
    for (int k0 = 0; k0 < K; k0 += QP_TKF) {
        int kc = k0 + lc; /* 8 weights kc .. kc+7, inside one 32-chunk */
        for (int i = 0; i < 8; i++) {
            int gk = kc + i;
            As[lr * QP_TKF + lc + i] = gm < M && gk < K ? xf[(size_t)gm * K + gk] : 0.0f;
        }
        if (gn < ne && kc < K) {
            size_t gi = (size_t)(kc / gsz) * N + gn;
            float s = ws[gi];
            int z = wz[gi], j = kc & 31;
            uchar8 b = vload8(0, wq + (size_t)(gn - nb) * (size_t)(Kp >> 1) + (size_t)(kc >> 5) * 16 + (j & 15));
            uchar8 c = (j & 16) ? (b >> (uchar8)(4)) : (b & (uchar8)(15));
            float8 wv = convert_float8(convert_int8(c) - z) * s;
            float wt[8];
            vstore8(wv, 0, wt);
            for (int i = 0; i < 8; i++) Bs[lr * QP_TKF + lc + i] = kc + i < K ? wt[i] : 0.0f;
        } else {
            for (int i = 0; i < 8; i++) Bs[lr * QP_TKF + lc + i] = 0.0f;
        }
        qp_tile_step(As, Bs, ty, tx, acc);
    }
    QP_TILE_STORE(qp_epilogue_f32(acc[i][j], n, flags, bias));
}

/* ---- W8A8-FP8 per-block (docs/semantics.md §16) -------------------------
 * Weights e4m3 codes [N][K] with fp32 scales wsb [ceil(N/128)][K/128] (e8m0
 * already decoded by the core); activations quantized per token and group
 * of 128 by qp_quant_f8_group (xf: e4m3 values, sx [M][K/128]). As the
 * reference: per group the exact products are summed, then scaled by
 * s_x[m][g] * s_w[n/128][g] and summed over the groups; K % 128 == 0. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_f8b(__global const float *xf, __global const uchar *w, int K, int N, int nb, int m0, int mrows,
                 int flags, __global const float *sx, __global const float *wsb, __global const ushort *bias,
                 __global ushort *y) {
    __local float red[QP_GEMV_MAX_M * QP_WG];
    __local float dec[256];
    int n = nb + get_group_id(0), lid = get_local_id(0), kb = K >> 7;
    qp_f8_table(dec, lid);
    float acc[QP_GEMV_MAX_M];
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0.0f;
    __global const uchar *wr = w + (size_t)(n - nb) * K;
    __global const float *wsn = wsb + (size_t)(n >> 7) * kb;
    for (int k = lid * 16; k < K; k += QP_WG * 16) {
        int g = k >> 7;
        float sw = wsn[g];
        uchar16 c = vload16(0, wr + k);
        float16 wv = qp_f8_dec16(dec, c);
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {
            float part = qp_sum16(vload16(0, xf + (size_t)(m0 + m) * K + k) * wv);
            acc[m] += part * (sx[(size_t)(m0 + m) * kb + g] * sw);
        }
    }
    QP_GEMV_REDUCE(red, acc, mrows, lid);
    if (lid < mrows) y[(size_t)(m0 + lid) * N + n] = qp_epilogue_f32(red[lid * QP_WG], n, flags, bias);
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_f8b(__global const float *xf, __global const uchar *w, int M, int K, int N, int nb, int ne, int flags,
                  __global const float *sx, __global const float *wsb, __global const ushort *bias,
                  __global ushort *y) {
    QP_TILED_F8_START();
    int kb = K >> 7;
    float acc[4][4], part[4][4];
    QP_TILE_ZERO(acc);
    QP_TILE_ZERO(part);
    for (int k0 = 0; k0 < K; k0 += QP_TKF) {
        qp_f8_tile_load(As, Bs, xf, w, dec, M, K, nb, ne, m0, n0, k0, lr, lc); /* K % 128 == 0: all gk < K */
        qp_tile_step(As, Bs, ty, tx, part);
        if (((k0 + QP_TKF) & 127) == 0) { /* end of a 128-group: scale and fold */
            int g = k0 >> 7;
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    int m = m0 + ty + 8 * i, n = n0 + tx + 8 * j;
                    if (m < M && n < ne) acc[i][j] += part[i][j] * (sx[(size_t)m * kb + g] * wsb[(size_t)(n >> 7) * kb + g]);
                    part[i][j] = 0.0f;
                }
        }
    }
    QP_TILE_STORE(qp_epilogue_f32(acc[i][j], n, flags, bias));
}
