/*
 * Scalar math shared by the CUDA kernels and the host tests (cuda_caps.c's
 * test compiles this header with gcc): the conversions and epilogues that
 * must be bit-exact with the cpu reference (cpu/ref_int8.c, ref_qqq.c,
 * ref_fp8.c, api/quant_int8.c, api/quant_fp8.c, api/format.c).
 *
 * Everything is written on bit patterns or with explicitly rounded
 * operations (QP_CU_MUL/ADD/DIV/FMA are __fmul_rn & co. on the device, plain
 * operators on the host where the build uses -ffp-contract=off), so no
 * compiler contraction or flush-to-zero can change a result.
 */
#ifndef QP_CU_MATH_H
#define QP_CU_MATH_H

#include <stdint.h>
#include <string.h>

/* QP_HD, QP_HD_RINT, qp_hd_isnan and the int8 conversions, shared with
 * api/quant_int8.c (with <math.h> on the host) */
#include "host_device.h"

#define QP_CU_HD QP_HD

#if defined(__CUDA_ARCH__)
#define QP_CU_MUL(a, b) __fmul_rn((a), (b))
#define QP_CU_ADD(a, b) __fadd_rn((a), (b))
#define QP_CU_SUB(a, b) __fsub_rn((a), (b))
#define QP_CU_DIV(a, b) __fdiv_rn((a), (b))
#define QP_CU_FMA(a, b, c) __fmaf_rn((a), (b), (c))
#define QP_CU_I2F(a) __int2float_rn(a)
#else
#define QP_CU_MUL(a, b) ((a) * (b))
#define QP_CU_ADD(a, b) ((a) + (b))
#define QP_CU_SUB(a, b) ((a) - (b))
#define QP_CU_DIV(a, b) ((a) / (b))
#define QP_CU_FMA(a, b, c) fmaf((a), (b), (c))
#define QP_CU_I2F(a) ((float)(a))
#endif

/* bit casts: NAME(FROM x) gives x's bits as TO (DEV: the device intrinsic) */
#if defined(__CUDA_ARCH__)
#define QP_CU_BITCAST(NAME, TO, FROM, DEV) QP_CU_HD TO NAME(FROM x) { return (TO)DEV(x); }
#else
#define QP_CU_BITCAST(NAME, TO, FROM, DEV)                                                                             \
    QP_CU_HD TO NAME(FROM x) {                                                                                         \
        TO u;                                                                                                          \
        memcpy(&u, &x, sizeof u);                                                                                      \
        return u;                                                                                                      \
    }
#endif
QP_CU_BITCAST(qp_cu_f2u, uint32_t, float, __float_as_uint)
QP_CU_BITCAST(qp_cu_u2f, float, uint32_t, __uint_as_float)
QP_CU_BITCAST(qp_cu_d2u, uint64_t, double, __double_as_longlong)
#undef QP_CU_BITCAST

/* Round m >> s to nearest, ties to even (0 <= s <= 63). */
QP_CU_HD uint64_t qp_cu_rne_shift(uint64_t m, int s) {
    if (s == 0) return m;
    uint64_t q = m >> s, rem = m & ((1ull << s) - 1), half = 1ull << (s - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return q;
}

/* ---- fp16 / bf16 (RNE, NaN -> 0x7FFF: docs/semantics.md §18) ----------- */

QP_CU_HD float qp_cu_f16_to_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F) return qp_cu_u2f(s | 0x7F800000u | (m << 13));
    if (e == 0) {
        /* subnormal: m * 2^-24, exact in fp32 */
        float v = QP_CU_MUL(QP_CU_I2F((int)m), 5.9604644775390625e-8f);
        return s ? -v : v;
    }
    return qp_cu_u2f(s | ((e + 112) << 23) | (m << 13));
}

QP_CU_HD float qp_cu_bf16_to_f32(uint16_t h) { return qp_cu_u2f((uint32_t)h << 16); }

QP_CU_HD uint16_t qp_cu_f32_to_f16(float x) {
    uint32_t u = qp_cu_f2u(x), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7FFF;
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520: inf */
    if (a >= 0x38800000u) {                                 /* normal fp16 */
        uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
    int e = (int)(a >> 23);
    if (e < 102) return (uint16_t)sign; /* below 2^-25 */
    uint64_t m = (a & 0x7FFFFFu) | 0x800000u;
    return (uint16_t)(sign | (uint32_t)qp_cu_rne_shift(m, 126 - e));
}

QP_CU_HD uint16_t qp_cu_f32_to_bf16(float x) {
    uint32_t u = qp_cu_f2u(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* fp16 bits of a double, rounded once (RNE): the QQQ bias add and the fp16
 * fma of the weight reconstruction (docs/semantics.md §11) round an exact value once. */
QP_CU_HD uint16_t qp_cu_f64_to_f16(double x) {
    uint64_t u = qp_cu_d2u(x), a = u & 0x7FFFFFFFFFFFFFFFull;
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
    if (a > 0x7FF0000000000000ull) return 0x7FFF;
    if (a >= 0x40EFFE0000000000ull) return (uint16_t)(sign | 0x7C00u); /* >= 65520 */
    if (a >= 0x3F10000000000000ull) {                                 /* >= 2^-14 */
        uint64_t r = a + 0x1FFFFFFFFFFull + ((a >> 42) & 1u);
        return (uint16_t)(sign | (uint16_t)((r - 0x3F00000000000000ull) >> 42));
    }
    int e = (int)(a >> 52);
    if (e < 998) return sign; /* below 2^-25 */
    uint64_t m = (a & 0xFFFFFFFFFFFFFull) | (1ull << 52);
    return (uint16_t)(sign | (uint16_t)qp_cu_rne_shift(m, 1051 - e));
}

QP_CU_HD float qp_cu_act_to_f32(uint16_t b, int bf16) { return bf16 ? qp_cu_bf16_to_f32(b) : qp_cu_f16_to_f32(b); }
QP_CU_HD uint16_t qp_cu_f32_to_act(float v, int bf16) { return bf16 ? qp_cu_f32_to_bf16(v) : qp_cu_f32_to_f16(v); }

/* ---- fp8 e4m3fn (api/format.c, docs/semantics.md §18) ------------------- */

QP_CU_HD uint8_t qp_cu_e4m3_encode(float x) {
    uint32_t u = qp_cu_f2u(x), a = u & 0x7FFFFFFFu;
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    if (a > 0x7F800000u) return (uint8_t)(sign | 0x7F);
    uint32_t code;
    if (a >= 0x3C800000u) { /* >= 2^-6: normal */
        if (a >= 0x43E80000u) return (uint8_t)(sign | 0x7E); /* >= 464: saturate to 448 */
        uint32_t r = a + 0x7FFFFu + ((a >> 20) & 1u);
        code = (r - 0x3C000000u) >> 20;
        if (code > 0x7E) code = 0x7E;
    } else {
        int e = (int)(a >> 23);
        if (e < 117) return sign; /* below 2^-10 */
        uint64_t m = (a & 0x7FFFFFu) | 0x800000u;
        code = (uint32_t)qp_cu_rne_shift(m, 141 - e);
    }
    return (uint8_t)(sign | code);
}

QP_CU_HD float qp_cu_e4m3_decode(uint8_t c) {
    uint32_t s = (uint32_t)(c & 0x80) << 24, e = (c >> 3) & 0xF, m = c & 7;
    if ((c & 0x7F) == 0x7F) return qp_cu_u2f(s | 0x7FC00000u);
    if (e == 0) {
        float v = QP_CU_MUL(QP_CU_I2F((int)m), 0.001953125f); /* m * 2^-9 */
        return s ? -v : v;
    }
    return qp_cu_u2f(s | ((e + 120) << 23) | (m << 20));
}

/* scaled_fp8_conversion: clamp with fminf/fmaxf (NaN -> +448), then encode */
QP_CU_HD uint8_t qp_cu_fp8_conv(float x) { return qp_cu_e4m3_encode(fmaxf(-448.0f, fminf(x, 448.0f))); }

/* ---- block-scaled float formats (api/quant_mx.c, api/format.c) ---------- */

/* 2^e as an fp32 (e in -149..127), exact */
QP_CU_HD float qp_cu_pow2f(int e) {
    if (e >= -126) return qp_cu_u2f((uint32_t)(e + 127) << 23);
    return qp_cu_u2f(1u << (e + 149));
}

/* rnd to act dtype and back: the value the reference's qp_num_round gives */
QP_CU_HD float qp_cu_round_act(float v, int bf16) { return qp_cu_act_to_f32(qp_cu_f32_to_act(v, bf16), bf16); }

/* The value of qp_format_encode(elem, x) for the MX element formats, with
 * mantissa bits `mbits`, smallest normal exponent `emin`, largest normal
 * exponent `emax` and largest value `maxv`: RNE, saturating (inf too);
 * NaN -> NaN for e4m3fn (0x7F | sign), +maxv for fp4/fp6 (qport's rule). */
QP_CU_HD float qp_cu_mini_round(float x, int mbits, int emin, int emax, float maxv, int e4m3) {
    uint32_t u = qp_cu_f2u(x), a = u & 0x7FFFFFFFu, sign = u & 0x80000000u;
    if (a > 0x7F800000u) return e4m3 ? qp_cu_u2f(sign | 0x7FC00000u) : maxv;
    if (a == 0x7F800000u) return qp_cu_u2f(sign | qp_cu_f2u(maxv));
    int e = a >= 0x00800000u ? (int)(a >> 23) - 127 : -127;
    if (e < emin) e = emin;
    if (e > emax + 1) return qp_cu_u2f(sign | qp_cu_f2u(maxv));
    float r = QP_HD_RINT(QP_CU_MUL(qp_cu_u2f(a), qp_cu_pow2f(mbits - e))); /* exact scaling, then RNE */
    float v = QP_CU_MUL(r, qp_cu_pow2f(e - mbits));                        /* exact */
    if (v > maxv) v = maxv;
    return qp_cu_u2f(sign | qp_cu_f2u(v));
}

/* fp4 e2m1 value rounding (NVFP4 step 4) */
QP_CU_HD float qp_cu_fp4_round(float x) { return qp_cu_mini_round(x, 1, 0, 2, 6.0f, 0); }

/* Quark's even shared scale (api/quant_mx.c even_scale); `a` the block's
 * absmax (NaN when the block holds a NaN). Returns the e8m0 code. */
QP_CU_HD int qp_cu_mx_even_scale(float a, int mbits, int emax) {
    uint32_t b = qp_cu_f2u(a) & 0x7FFFFFFFu;
    if (b > 0x7F800000u) return 255;
    if (b == 0) b = 0x00800000u; /* 2^-126 */
    b += 1u << (23 - mbits - 1);
    b &= 0xFF800000u;
    int E = (int)((b >> 23) & 0xFFu);
    int e = E == 0 ? -1000 : E == 255 ? 1000 : E - 127 - emax;
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return e + 127;
}

/* W4A8-MXFP4-FP8 activation qdq (cpu/ref_w4a8_mxfp4.c) of one element */
QP_CU_HD float qp_cu_fp8s_qdq(float x, float s, int bf16) {
    float t = fmaxf(-448.0f, fminf(qp_cu_round_act(QP_CU_DIV(x, s), bf16), 448.0f));
    float q = qp_cu_e4m3_decode(qp_cu_e4m3_encode(t));
    return qp_cu_round_act(QP_CU_MUL(qp_cu_round_act(q, bf16), s), bf16);
}

/* api/quant_fp8.c ue8m0: round a scale up to a power of two */
QP_CU_HD float qp_cu_ue8m0(float s) {
    uint32_t b = qp_cu_f2u(fmaxf(fabsf(s), 1e-10f));
    if (b & 0x7FFFFFu) b += 0x800000u;
    return qp_cu_u2f(b & 0xFF800000u);
}

/* ---- int8 conversions (cvt.rni.sat, api/quant_int8.c) ------------------- */

/* qp_rni_sat32, qp_rni_sat8, qp_sat8 and qp_add_wrap: api/host_device.h */

/* ---- QQQ weight reconstruction (docs/semantics.md §11 step 2) ---------- */

/* int8 weight of an unsigned group code c (0..15) with fp16 group scale s:
 * low byte of fp16(fma(c-8, s, 1152)) XOR 0x80, the fp16 fma rounding once. */
QP_CU_HD int8_t qp_cu_qqq_group_w8(int c, uint16_t s_bits) {
    double v = (double)(c - 8) * (double)qp_cu_f16_to_f32(s_bits) + 1152.0; /* exact */
    return (int8_t)(uint8_t)((qp_cu_f64_to_f16(v) & 0xFF) ^ 0x80);
}

/* Packed QQQ codes (qp_cu_pack_q4): a 32-bit word holds 8 consecutive k;
 * byte j carries k+j in its high nibble and k+4+j in its low nibble. The
 * per-channel expansion (w8 = 16 * q, docs/semantics.md §11) is two masks: */
QP_CU_HD void qp_cu_expand_ch(uint32_t w, uint32_t *lo, uint32_t *hi) {
    *lo = w & 0xF0F0F0F0u;         /* int8 of k..k+3   */
    *hi = (w << 4) & 0xF0F0F0F0u;  /* int8 of k+4..k+7 */
}

/* Group-128 expansion on the host (the kernels use the fp16 fma itself). */
QP_CU_HD void qp_cu_expand_g_host(uint32_t w, uint16_t s_bits, uint32_t *lo, uint32_t *hi) {
    *lo = 0;
    *hi = 0;
    for (int j = 0; j < 4; j++) {
        uint32_t b = (w >> (8 * j)) & 0xFFu;
        *lo |= (uint32_t)(uint8_t)qp_cu_qqq_group_w8((int)(b >> 4), s_bits) << (8 * j);
        *hi |= (uint32_t)(uint8_t)qp_cu_qqq_group_w8((int)(b & 0xFu), s_bits) << (8 * j);
    }
}

/* ---- epilogues ----------------------------------------------------------- */

/* W8A8-INT8 (docs/semantics.md §14): acc already corrected for azp. */
QP_CU_HD uint16_t qp_cu_epi_int8(int32_t t, float s_a, float s_b, int has_bias_or_azp, float bias, int bf16) {
    float v = has_bias_or_azp ? QP_CU_FMA(s_a, QP_CU_MUL(s_b, QP_CU_I2F(t)), bias)
                              : QP_CU_MUL(s_a, QP_CU_MUL(s_b, QP_CU_I2F(t)));
    return qp_cu_f32_to_act(v, bf16);
}

/* azp correction: t = acc - (static ? adj[n] : zp[m] * adj[n]), wrapping */
QP_CU_HD int32_t qp_cu_azp_correct(int32_t acc, int is_static, int32_t zp, int32_t adj) {
    uint32_t corr = is_static ? (uint32_t)adj : (uint32_t)zp * (uint32_t)adj;
    return (int32_t)((uint32_t)acc - corr);
}

/* W8A8-FP8 (docs/semantics.md §14): fp32 accumulator */
QP_CU_HD uint16_t qp_cu_epi_fp8(float acc, float s_a, float s_b, int has_bias, float bias, int bf16) {
    float v = has_bias ? QP_CU_FMA(s_a, QP_CU_MUL(s_b, acc), bias) : QP_CU_MUL(s_a, QP_CU_MUL(s_b, acc));
    return qp_cu_f32_to_act(v, bf16);
}

/* QQQ (docs/semantics.md §11 steps 4-5): fp16((float(acc) * s_ch) * s_tok), then the
 * fp16 bias add rounded once from the exact sum. */
QP_CU_HD uint16_t qp_cu_epi_qqq(int32_t acc, float s_ch, float s_tok, int has_bias, uint16_t bias_bits) {
    uint16_t out = qp_cu_f32_to_f16(QP_CU_MUL(QP_CU_MUL(QP_CU_I2F(acc), s_ch), s_tok));
    if (has_bias)
        out = qp_cu_f64_to_f16((double)qp_cu_f16_to_f32(out) + (double)qp_cu_f16_to_f32(bias_bits));
    return out;
}

/* ---- tensor-core tile index maps (cuda_kernels.cu k_gemm_tc) -------------
 * Shared tiles are [64 rows][QP_CU_SROW bytes]; a warp (wm, wn) owns rows
 * wm*32.. of A and rows (n) wn*32.. of B. ldmatrix.x4: lanes 8j..8j+7 give
 * the row addresses of matrix j, and lane l receives bytes 4(l%4).. of row
 * l/4 of matrix j in register j. The maps below make register j the mma
 * fragment register j (A: a0..a3; B: b0,b1 of n8 tile 2np, then of 2np+1).
 * tests/test_cuda_caps.c replays them against the PTX fragment tables. */
#define QP_CU_SROW 80

/* byte offset in the A tile of lane `lane`'s ldmatrix row address */
QP_CU_HD int qp_cu_tc_a_addr(int lane, int wm, int mi, int kk) {
    int row = wm * 32 + mi * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
    return row * QP_CU_SROW + kk + (lane >> 4) * 16;
}

QP_CU_HD int qp_cu_tc_b_addr(int lane, int wn, int np, int kk) {
    int j = lane >> 3;
    int row = wn * 32 + (np * 2 + (j >> 1)) * 8 + (lane & 7);
    return row * QP_CU_SROW + kk + (j & 1) * 16;
}

/* global -> shared copy: chunk c (16 bytes) of a 64 x 64-byte tile */
QP_CU_HD int qp_cu_tc_chunk_row(int c) { return c / 4; }
QP_CU_HD int qp_cu_tc_chunk_col(int c) { return (c % 4) * 16; }

/* accumulator element e (0..3) of tile (mi, ni) of warp (wm, wn), lane */
QP_CU_HD int qp_cu_tc_c_row(int lane, int wm, int mi, int e) { return wm * 32 + mi * 16 + (lane >> 2) + (e >= 2 ? 8 : 0); }
QP_CU_HD int qp_cu_tc_c_col(int lane, int wn, int ni, int e) { return wn * 32 + ni * 8 + 2 * (lane & 3) + (e & 1); }

#endif
