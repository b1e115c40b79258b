/* qport OpenCL kernels, part 1: conversions shared by every kernel.
 * OpenCL C 1.2, no cl_khr_fp16 needed: fp16/bf16/e4m3 go through integer
 * bit operations (PoCL cannot declare `half` variables), RNE everywhere,
 * NaN -> 0x7FFF for fp16/bf16 (docs/semantics.md §18).
 *
 * FP_CONTRACT is ON by default in OpenCL C (clang contracts a*b+c within an
 * expression): the reference (cpu/ref_*.c) never fuses except where it
 * calls fmaf, so contraction is switched off here and fma() is written
 * exactly where the reference has fmaf. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef QP_WG
#define QP_WG 64
#endif

/* Correctly rounded fp32 division (docs/semantics.md §12, §13 divide with IEEE '/'). The
 * strategy `dm` is a kernel argument (one program serves every mode):
 * 0: the device's '/', correctly rounded by -cl-fp32-correctly-rounded-divide-sqrt;
 * 1: through double: 53 >= 2*24+2, so rounding the double quotient to float
 *    is innocuous and gives the correctly rounded float quotient;
 * 2: the device's '/' (<= 2.5 ulp in OpenCL 1.2) corrected with exact fma
 *    remainders, ties to even; in the normal range only;
 * 3: as 2 from a quotient pushed 2 ulp off (tests the correction where the
 *    device's '/' is already exact). */
#if QP_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

inline float qp_div_fma(float a, float b, int perturb) {
    float q = a / b;
    float aa = fabs(a), ab = fabs(b), aq = fabs(q);
    if (!(aa >= 0x1p-100f && aa <= 0x1p100f && ab >= 0x1p-100f && ab <= 0x1p100f && aq >= 0x1p-100f))
        return q;
    if (perturb) {
        float dir = (as_uint(a) & 1u) ? INFINITY : 0.0f;
        aq = nextafter(nextafter(aq, dir), dir);
    }
    for (int i = 0; i < 4; i++) {
        float r = fma(-aq, ab, aa); /* aa - aq*ab, exact for a quotient within a few ulp */
        if (r == 0.0f) break;
        if (r > 0.0f) {
            float up = nextafter(aq, INFINITY);
            float r2 = -fma(-up, ab, aa);
            if (r2 < r || (r2 == r && (as_uint(up) & 1u) == 0u)) aq = up; else break;
        } else {
            float dn = nextafter(aq, 0.0f);
            float r2 = fma(-dn, ab, aa);
            if (r2 < -r || (r2 == -r && (as_uint(dn) & 1u) == 0u)) aq = dn; else break;
        }
    }
    return as_float(as_uint(aq) | (as_uint(q) & 0x80000000u));
}

inline float qp_div(float a, float b, int dm) {
#if QP_HAS_FP64
    if (dm == 1) return (float)((double)a / (double)b);
#endif
    if (dm >= 2) return qp_div_fma(a, b, dm == 3);
    return a / b;
}

inline float qp_f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    float v;
    if (e == 0u) v = (float)m * 0x1p-24f;                         /* exact */
    else if (e == 31u) v = as_float(0x7F800000u | (m << 13));
    else v = as_float(((e + 112u) << 23) | (m << 13));
    return as_float(as_uint(v) | s);
}

inline float qp_bf16_to_f32(uint b) { return as_float((b & 0xFFFFu) << 16); }

inline uint qp_f32_to_f16(float f) {
    uint u = as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FFFu;                 /* NaN (docs/semantics.md §18) */
    if (a >= 0x477FF000u) return s | 0x7C00u;            /* >= 65520 rounds to inf */
    if (a < 0x38800000u)                                 /* below 2^-14: subnormal grid 2^-24 */
        return s | (uint)rint(as_float(a) * 0x1p24f);    /* exact scaling, RNE; 1024 = 2^-14 */
    uint h = (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3FFu);
    uint rb = a & 0x1FFFu;
    if (rb > 0x1000u || (rb == 0x1000u && (h & 1u))) h++;
    return s | h;
}

inline uint qp_f32_to_bf16(float f) {
    uint u = as_uint(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFFu;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

inline float qp_act_load(__global const ushort *p, size_t i, int bf16) {
    uint b = p[i];
    return bf16 ? qp_bf16_to_f32(b) : qp_f16_to_f32(b);
}

inline ushort qp_act_encode(float v, int bf16) {
    return (ushort)(bf16 ? qp_f32_to_bf16(v) : qp_f32_to_f16(v));
}

/* qp_rni_sat32, qp_rni_sat8, qp_sat8, qp_add_wrap (cvt.rni.sat.s32.f32,
 * cvt.rni.sat.s8.f32, cvt.sat.s8.s32, wrapping add; docs/semantics.md §12):
 * api/host_device.h, ahead of this file in the program source */

/* e4m3fn encode of an already clamped value: RNE, |x| >= 464 -> 448,
 * NaN -> 0x7F | sign (docs/semantics.md §18). */
inline uint qp_f8_encode(float x) {
    uint u = as_uint(x), s = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return s | 0x7Fu;
    float f = as_float(a);
    if (f >= 464.0f) return s | 0x7Eu;
    if (a < 0x3C800000u) return s | (uint)rint(f * 512.0f); /* below 2^-6: grid 2^-9 */
    uint h = (((a >> 23) - 120u) << 3) | ((a >> 20) & 7u);
    uint rb = a & 0xFFFFFu;
    if (rb > 0x80000u || (rb == 0x80000u && (h & 1u))) h++;
    return s | min(h, 0x7Eu);
}

inline float qp_f8_decode(uint c) {
    uint s = (c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
    float v;
    if (e == 15u && m == 7u) v = as_float(0x7FC00000u);
    else if (e == 0u) v = (float)m * 0x1p-9f;
    else v = as_float(((e + 120u) << 23) | (m << 20));
    return as_float(as_uint(v) | s);
}

/* scaled_fp8_conversion: clamp with fmin/fmax first (NaN -> +448). */
inline uint qp_fp8_conv(float x) { return qp_f8_encode(fmax(-448.0f, fmin(x, 448.0f))); }

/* Work-group reductions over QP_WG lanes (order-free: max/min are exact). */
#define QP_WG_REDUCE_DEF(name, OP)                                                                                   \
    inline float name(__local float *red, float v) {                                                                 \
        int lid = get_local_id(0);                                                                                   \
        red[lid] = v;                                                                                                \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
        for (int off = QP_WG / 2; off > 0; off >>= 1) {                                                              \
            if (lid < off) red[lid] = OP(red[lid], red[lid + off]);                                                  \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
        }                                                                                                            \
        float r = red[0];                                                                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
        return r;                                                                                                    \
    }
QP_WG_REDUCE_DEF(qp_wg_max, fmax)
QP_WG_REDUCE_DEF(qp_wg_min, fmin)

/* The decode GEMVs' tail: lane sums acc[m] of the first mrows rows ->
 * red[m * QP_WG], one tree order for every scheme (float sums depend on it;
 * int32 ones do not). A macro: acc is float or int by kernel. */
#define QP_GEMV_REDUCE(red, acc, mrows, lid)                                                                         \
    do {                                                                                                             \
        for (int m_ = 0; m_ < QP_GEMV_MAX_M; m_++)                                                                   \
            if (m_ < (mrows)) (red)[m_ * QP_WG + (lid)] = (acc)[m_];                                                 \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
        for (int off_ = QP_WG / 2; off_ > 0; off_ >>= 1) {                                                           \
            if ((lid) < off_)                                                                                        \
                for (int m_ = 0; m_ < QP_GEMV_MAX_M; m_++)                                                           \
                    if (m_ < (mrows)) (red)[m_ * QP_WG + (lid)] += (red)[m_ * QP_WG + (lid) + off_];                 \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                            \
        }                                                                                                            \
    } while (0)

/* The 32x32 tiled kernels: 8x8 lanes, lane (ty, tx) owning the 4x4 outputs
 * of rows m0 + ty + 8i and columns n0 + tx + 8j. QP_TILE_ZERO clears an
 * accumulator tile; QP_TILE_STORE writes the outputs inside M x ne as
 * y[m * N + n] = EPI, EPI an expression of acc[i][j], m and n. Macros: the
 * accumulators are float or int by kernel. */
#define QP_TILE_ZERO(acc)                                                                                            \
    for (int i_ = 0; i_ < 4; i_++)                                                                                   \
        for (int j_ = 0; j_ < 4; j_++) (acc)[i_][j_] = 0
#define QP_TILE_STORE(EPI)                                                                                           \
    for (int i = 0; i < 4; i++)                                                                                      \
        for (int j = 0; j < 4; j++) {                                                                                \
            int m = m0 + ty + 8 * i, n = n0 + tx + 8 * j;                                                            \
            if (m < M && n < ne) y[(size_t)m * N + n] = EPI;                                                         \
        }
