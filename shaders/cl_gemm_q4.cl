/* qport OpenCL kernels, part 4: QQQ W4A8 GEMM over 4-bit weights (docs/semantics.md §11),
 * using the int8 machinery of cl_gemm_i8.cl (dot, tiles, QQQ epilogue).
 *
 * Layout (made by cl_linear.c): wq [N][K/2] bytes; the
 * 32 weights k = 32c .. 32c+31 of a row sit in bytes 16c .. 16c+15, byte i
 * holding k = 32c+i in its low nibble and k = 32c+16+i in its high nibble,
 * so 16 bytes unpack into two runs of 16 consecutive k. A nibble is a code
 * (per-channel: q4 & 15; group 128: q4 + 8 stored as 0..15); its exact int8
 * weight (docs/semantics.md §11 step 2, wrap included) is lut[g][n][code], g = k / gsz
 * (gsz 128, or INT_MAX for one group over K), so one shuffle per 16 weights
 * turns codes into the int8 weights the reference multiplies. K is a
 * multiple of 32 (prepare checks it; QQQ itself needs K % 128 == 0). */

#define QP_GEMV_Q4_BODY(DOT)                                                                                          \
    __local int red[QP_GEMV_MAX_M * QP_WG];                                                                            \
    int n = nb + get_group_id(0), lid = get_local_id(0);                                                               \
    int acc[QP_GEMV_MAX_M];                                                                                            \
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0;                                                                \
    __global const uchar *wr = wq + (size_t)(n - nb) * (K >> 1);                                                       \
    for (int k = lid * 32; k < K; k += QP_WG * 32)    {                                                                 \
        uchar16 b = vload16(0, wr + (k >> 1));                                                                         \
        char16 L = vload16(0, lut + ((size_t)(k / gsz) * N + n) * 16);                                                 \
        char16 w0 = shuffle(L, b & (uchar16)(15)), w1 = shuffle(L, b >> (uchar16)(4));                                 \
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {                                                                              \
            __global const char *xr = xq + (size_t)(m0 + m) * K + k;                                                   \
            char16 x0 = vload16(0, xr), x1 = vload16(0, xr + 16);                                                      \
            acc[m] += DOT(x0.s0123, w0.s0123) + DOT(x0.s4567, w0.s4567) + DOT(x0.s89ab, w0.s89ab) +                    \
                      DOT(x0.scdef, w0.scdef) + DOT(x1.s0123, w1.s0123) + DOT(x1.s4567, w1.s4567) +                    \
                      DOT(x1.s89ab, w1.s89ab) + DOT(x1.scdef, w1.scdef);                                               \
        }                                                                                                              \
    }                                                                                                                  \
    QP_GEMV_REDUCE(red, acc, mrows, lid);                                                                              \
    if (lid < mrows)                                                                                                   \
        y[(size_t)(m0 + lid) * N + n] = qp_epilogue_i8(red[lid * QP_WG], m0 + lid, n, flags, sx, szp, wsc, adj, bias);

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_q4(__global const char *xq, __global const uchar *wq, __global const char *lut, int K, int N, int nb, int gsz,
                int m0, int mrows, int flags, __global const float *sx, __global const int *szp,
                __global const float *wsc, __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_GEMV_Q4_BODY(qp_dot4_plain)
}

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_q4_dot(__global const char *xq, __global const uchar *wq, __global const char *lut, int K, int N, int nb, int gsz,
                    int m0, int mrows, int flags, __global const float *sx, __global const int *szp,
                    __global const float *wsc, __global const int *adj, __global const ushort *bias,
                    __global ushort *y) {
    QP_GEMV_Q4_BODY(QP_DOT4)
}

/* A 32 (n) x 32 (k) weight tile from the 4-bit layout into local char4s
 * (row r: 8 char4 = k 0..31): lane -> (row lid/2, bytes 8*(lid%2) .. +7),
 * which hold k = 8h..8h+7 (low nibbles) and 16+8h..16+8h+7 (high). */
inline void qp_tile_load_q4(__local char4 *dst, __global const uchar *wq, __global const char *lut, int N, int nb,
                            int ne, int n0, int K, int k0, int gsz, int lid) {
    int r = lid >> 1, h = lid & 1, gn = n0 + r;
    char8 lo = (char8)(0), hi = (char8)(0);
    if (gn < ne) {
        __global const uchar *wr = wq + (size_t)(gn - nb) * (K >> 1);
        __global const char *lutn = lut + ((size_t)(k0 / gsz) * N + gn) * 16;
        uchar8 b = vload8(0, wr + (k0 >> 1) + 8 * h);
        char16 L = vload16(0, lutn);
        lo = shuffle(L, b & (uchar8)(15));
        hi = shuffle(L, b >> (uchar8)(4));
    }
    __local char4 *d = dst + r * (QP_TK / 4);
    d[2 * h] = lo.lo;
    d[2 * h + 1] = lo.hi;
    d[4 + 2 * h] = hi.lo;
    d[5 + 2 * h] = hi.hi;
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_q4(__global const char *xq, __global const uchar *wq, __global const char *lut, int M, int K, int N,
                 int nb, int ne, int gsz, int flags, __global const float *sx, __global const int *szp, __global const float *wsc,
                 __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_TILED_I8_BODY(qp_dot4_plain, qp_tile_load_q4(Bs, wq, lut, N, nb, ne, n0, K, k0, gsz, lid))
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_q4_dot(__global const char *xq, __global const uchar *wq, __global const char *lut, int M, int K, int N,
                     int nb, int ne, int gsz, int flags, __global const float *sx, __global const int *szp, __global const float *wsc,
                     __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_TILED_I8_BODY(QP_DOT4, qp_tile_load_q4(Bs, wq, lut, N, nb, ne, n0, K, k0, gsz, lid))
}
