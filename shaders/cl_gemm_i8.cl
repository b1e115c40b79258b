/* qport OpenCL kernels, part 3: int8 x int8 -> int32 GEMM for W8A8-INT8 and
 * QQQ W4A8 (whose exact int8 weights w8 arrive from prepare), with the fused
 * epilogue of cpu/ref_int8.c / cpu/ref_qqq.c. Weights w [N][K] int8.
 *
 * QP_INT_DOT (the device has cl_khr_integer_dot_product) makes the *_dot
 * kernels use dot(char4, char4); the plain kernels multiply-add in int32.
 * Both are exact. */

#if QP_INT_DOT
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
#define QP_DOT4(a, b) dot((a), (b))
#else
/* no extension: the *_dot kernels exist but compute the plain dot; the
 * host runs them only under the QPORT_CL_FAKE_INT_DOT test knob */
#define QP_DOT4(a, b) qp_dot4_plain((a), (b))
#endif

inline int qp_dot4_plain(char4 a, char4 b) {
    int4 p = convert_int4(a) * convert_int4(b);
    return p.x + p.y + p.z + p.w;
}

#define QP_EPI_ASYM 1
#define QP_EPI_STATIC 2
#define QP_EPI_BIAS 4
#define QP_EPI_BF16 8
#define QP_EPI_QQQ 16

/* W8A8-INT8 (docs/semantics.md §14) or QQQ (docs/semantics.md §11 steps 4-5). */
inline ushort qp_epilogue_i8(int acc, int m, int n, int flags, __global const float *sx, __global const int *szp,
                             __global const float *wsc, __global const int *adj, __global const ushort *bias) {
    int bf16 = (flags & QP_EPI_BF16) != 0;
    if (flags & QP_EPI_QQQ) {
        /* fp16( (float(acc) * s_channel) * s_tok ), then y += bias in fp16 */
        float v = (convert_float_rte(acc) * wsc[n]) * sx[m]; /* cvt.rn.f32.s32 */
        uint h = qp_f32_to_f16(v);
        if (flags & QP_EPI_BIAS) h = qp_f32_to_f16(qp_f16_to_f32(h) + qp_f16_to_f32(bias[n]));
        return (ushort)h;
    }
    float s_a = sx[m], s_b = wsc[n];
    int t = acc;
    if (flags & QP_EPI_ASYM) {
        uint corr = (flags & QP_EPI_STATIC) ? (uint)adj[n] : (uint)szp[m] * (uint)adj[n];
        t = as_int((uint)t - corr);
    }
    float v, tf = convert_float_rte(t);
    if (flags & (QP_EPI_ASYM | QP_EPI_BIAS)) {
        float b = (flags & QP_EPI_BIAS) ? qp_act_load(bias, n, bf16) : 0.0f;
        v = fma(s_a, s_b * tf, b);
    } else {
        v = s_a * (s_b * tf);
    }
    return qp_act_encode(v, bf16);
}

#define QP_GEMV_MAX_M 16

/* GEMV (decode, M <= 16): one work-group per output column; lanes stride
 * over K 16 bytes at a time (coalesced, every weight byte read once), each
 * lane keeps one int32 sum per row, then a work-group reduction. Row loops
 * run to the constant 16 with a guard, so that GPU compilers unroll them and
 * keep acc[] in registers (a runtime bound would index it dynamically). */
#define QP_GEMV_I8_BODY(DOT)                                                                                          \
    __local int red[QP_GEMV_MAX_M * QP_WG];                                                                            \
    int n = nb + get_group_id(0), lid = get_local_id(0);                                                               \
    int acc[QP_GEMV_MAX_M];                                                                                            \
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0;                                                                \
    __global const char *wr = w + (size_t)(n - nb) * K;                                                                \
    int K16 = K & ~15;                                                                                                 \
    for (int k = lid * 16; k < K16; k += QP_WG * 16) {                                                                 \
        char16 wv = vload16(0, wr + k);                                                                                \
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) {                                                                              \
            char16 xv = vload16(0, xq + (size_t)(m0 + m) * K + k);                                                     \
            acc[m] += DOT(xv.s0123, wv.s0123) + DOT(xv.s4567, wv.s4567) + DOT(xv.s89ab, wv.s89ab) +                    \
                      DOT(xv.scdef, wv.scdef);                                                                         \
        }                                                                                                              \
    }                                                                                                                  \
    for (int k = K16 + lid; k < K; k += QP_WG) {                                                                       \
        int wk = wr[k];                                                                                                \
        for (int m = 0; m < QP_GEMV_MAX_M; m++) if (m < mrows) acc[m] += (int)xq[(size_t)(m0 + m) * K + k] * wk;                             \
    }                                                                                                                  \
    QP_GEMV_REDUCE(red, acc, mrows, lid);                                                                              \
    if (lid < mrows)                                                                                                   \
        y[(size_t)(m0 + lid) * N + n] = qp_epilogue_i8(red[lid * QP_WG], m0 + lid, n, flags, sx, szp, wsc, adj, bias);

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_i8(__global const char *xq, __global const char *w, int K, int N, int nb, int m0, int mrows, int flags,
                __global const float *sx, __global const int *szp, __global const float *wsc,
                __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_GEMV_I8_BODY(qp_dot4_plain)
}

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_i8_dot(__global const char *xq, __global const char *w, int K, int N, int nb, int m0, int mrows, int flags,
                    __global const float *sx, __global const int *szp, __global const float *wsc,
                    __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_GEMV_I8_BODY(QP_DOT4)
}

/* Tiled (prefill): a 32x32 output tile per work-group of 8x8 lanes, each
 * lane 4x4 outputs (rows ty+8i, columns tx+8j); K in steps of 32 through
 * local memory as char4. Weights may be split in column chunks (buffers
 * larger than the device allows): w holds columns nb .. ne-1, N is the
 * full width (y's row stride, global column index of scales and bias). */
#define QP_TM 32
#define QP_TN 32
#define QP_TK 32

inline void qp_tile_load_i8(__local char4 *dst, __global const char *src, int rows, int r0, int K, int k0, int lid) {
    /* 64 lanes x 16 bytes = a 32 x 32 tile; lane -> (row lid/2, half lid%2) */
    int r = lid >> 1, c = (lid & 1) * 16;
    int gr = r0 + r, gk = k0 + c;
    char16 v = (char16)(0);
    if (gr < rows) {
        __global const char *p = src + (size_t)gr * K + gk;
        if (gk + 16 <= K) {
            v = vload16(0, p);
        } else {
            char tmp[16];
            for (int i = 0; i < 16; i++) tmp[i] = gk + i < K ? p[i] : 0;
            v = vload16(0, tmp);
        }
    }
    __local char4 *d = dst + r * (QP_TK / 4) + c / 4;
    d[0] = v.s0123;
    d[1] = v.s4567;
    d[2] = v.s89ab;
    d[3] = v.scdef;
}

#define QP_TILED_I8_BODY(DOT, LOADB)                                                                                       \
    __local char4 As[QP_TM * (QP_TK / 4)];                                                                             \
    __local char4 Bs[QP_TN * (QP_TK / 4)];                                                                             \
    int tx = get_local_id(0), ty = get_local_id(1), lid = ty * 8 + tx;                                                 \
    int n0 = nb + get_group_id(0) * QP_TN, m0 = get_group_id(1) * QP_TM;                                               \
    int acc[4][4];                                                                                                     \
    QP_TILE_ZERO(acc);                                                                                                 \
    for (int k0 = 0; k0 < K; k0 += QP_TK) {                                                                            \
        qp_tile_load_i8(As, xq, M, m0, K, k0, lid);                                                                    \
        LOADB;                                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                  \
        for (int kk = 0; kk < QP_TK / 4; kk++) {                                                                       \
            char4 a[4], b[4];                                                                                          \
            for (int i = 0; i < 4; i++) a[i] = As[(ty + 8 * i) * (QP_TK / 4) + kk];                                    \
            for (int j = 0; j < 4; j++) b[j] = Bs[(tx + 8 * j) * (QP_TK / 4) + kk];                                    \
            for (int i = 0; i < 4; i++)                                                                                \
                for (int j = 0; j < 4; j++) acc[i][j] += DOT(a[i], b[j]);                                              \
        }                                                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                  \
    }                                                                                                                  \
    QP_TILE_STORE(qp_epilogue_i8(acc[i][j], m, n, flags, sx, szp, wsc, adj, bias))

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_i8(__global const char *xq, __global const char *w, int M, int K, int N, int nb, int ne, int flags,
                 __global const float *sx, __global const int *szp, __global const float *wsc,
                 __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_TILED_I8_BODY(qp_dot4_plain, qp_tile_load_i8(Bs, w, ne - nb, n0 - nb, K, k0, lid))
}

__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_i8_dot(__global const char *xq, __global const char *w, int M, int K, int N, int nb, int ne, int flags,
                     __global const float *sx, __global const int *szp, __global const float *wsc,
                     __global const int *adj, __global const ushort *bias, __global ushort *y) {
    QP_TILED_I8_BODY(QP_DOT4, qp_tile_load_i8(Bs, w, ne - nb, n0 - nb, K, k0, lid))
}
