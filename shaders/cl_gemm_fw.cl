/* qport OpenCL kernels, part 7: the emulated block-float schemes
 * (OCP-MX, W4A8-MXFP4-FP8, NVFP4) and unquantized fp16/bf16 layers, plus the
 * layers around them (Quark input rotation, fp8 KV cache).
 *
 * A forward is two launches: qp_act_qdq writes x' (the fake-quantized
 * activations, each already rounded to the act dtype, held as fp32) to a
 * scratch buffer -- a chain of exactly rounded fp32 operations that matches
 * api/quant_mx.c and cpu/ref_*.c bit for bit -- then qp_gemv_fw / qp_tiled_fw
 * dequantize the weights in registers and accumulate in fp32.
 *
 * Weight formats (wfmt):
 *   0: act-dtype bits [N][K] (unquantized);
 *   1: fp4 codes two per byte [N][Kp/2], Kp = K rounded up to 32, in the
 *      layout of cl_gemm_w4.cl (the 32 codes k = 32c .. 32c+31 in bytes
 *      16c .. 16c+15: k = 32c+i low nibble, k = 32c+16+i high nibble);
 *   2: one code per byte [N][K] (fp6, fp8).
 * Codes 1/2 decode through lut[256] and one fp32 multiplier per (row, block
 * of blk = 16 or 32 along k): W = rnd(lut[c] * bsc[n][k / blk]), one fp32
 * multiply then RNE to the act dtype, exactly the reference's weight. */

#define QP_EPI_BIAS_RND 32 /* NVFP4: y = rnd(rnd(sum) + bias) */

/* 2^p for p in [-149, 127], exact (subnormal below -126) */
inline float qp_pow2(int p) { return p >= -126 ? as_float((uint)(p + 127) << 23) : as_float(1u << (p + 149)); }

/* fp32 -> the act dtype -> fp32 (RNE, fp16 overflow to inf, NaN stays NaN) */
inline float qp_rnd_act(float v, int bf16) {
    return bf16 ? qp_bf16_to_f32(qp_f32_to_bf16(v)) : qp_f16_to_f32(qp_f32_to_f16(v));
}

/* the same on 16 lanes, by bit operations */
inline float16 qp_rnd16(float16 v, int bf16) {
    uint16 u = as_uint16(v), a = u & (uint16)(0x7FFFFFFFu);
    int16 nan = a > (uint16)(0x7F800000u);
    if (bf16) {
        uint16 r = (u + (uint16)(0x7FFFu) + ((u >> (uint16)(16)) & (uint16)(1u))) & (uint16)(0xFFFF0000u);
        return as_float16(select(r, u, nan));
    }
    uint16 r = (u + (uint16)(0xFFFu) + ((u >> (uint16)(13)) & (uint16)(1u))) & (uint16)(0xFFFFE000u);
    float16 sub = rint(v * 0x1p24f) * 0x1p-24f; /* below 2^-14: the subnormal grid 2^-24 */
    r = select(r, as_uint16(sub), a < (uint16)(0x38800000u));
    r = select(r, (u & (uint16)(0x80000000u)) | (uint16)(0x7F800000u), a >= (uint16)(0x477FF000u));
    return as_float16(select(r, u, nan));
}

/* fp16/bf16 bits -> fp32 on 16 lanes (exact) */
inline float16 qp_act16(ushort16 h, int bf16) {
    uint16 b = convert_uint16(h);
    if (bf16) return as_float16(b << (uint16)(16));
    uint16 s = (b & (uint16)(0x8000u)) << (uint16)(16), e = (b >> (uint16)(10)) & (uint16)(0x1Fu),
           m = b & (uint16)(0x3FFu);
    uint16 nrm = ((e + (uint16)(112u)) << (uint16)(23)) | (m << (uint16)(13));
    uint16 sub = as_uint16(convert_float16(m) * 0x1p-24f);
    uint16 r = select(nrm, sub, e == (uint16)(0u));
    r = select(r, (uint16)(0x7F800000u) | (m << (uint16)(13)), e == (uint16)(31u));
    return as_float16(r | s);
}

/* ---- element formats (api/format.c minifloat_encode / _decode) ---------- */

/* fp4 / fp6: RNE, saturating to +-max, NaN -> +max (every pattern a number) */
inline uint qp_mf_encode(float x, int ebits, int mbits, int bias, uint maxc) {
    if (isnan(x)) return maxc;
    uint s = (as_uint(x) >> 31) << (ebits + mbits);
    float a = fabs(x);
    if (isinf(a)) return s | maxc;
    int emin = 1 - bias, e = (int)(as_uint(a) >> 23) - 127;
    if (e < emin) e = emin; /* the subnormal range shares the quantum of emin */
    if (e > (int)(maxc >> mbits) - bias + 1) return s | maxc;
    float r = rint(a * qp_pow2(mbits - e)); /* exact scaling, RNE */
    float one = (float)(1u << mbits);
    uint code;
    if (r >= 2.0f * one) { e += 1; r = one; }
    if (r < one) code = (uint)r;
    else code = ((uint)(e + bias) << mbits) | ((uint)r - (1u << mbits));
    return s | min(code, maxc);
}

inline float qp_mf_decode(uint c, int ebits, int mbits, int bias) {
    uint nb = (uint)(ebits + mbits), mag = c & ((1u << nb) - 1u), be = mag >> mbits, m = mag & ((1u << mbits) - 1u);
    float v = be == 0u ? (float)m * qp_pow2(1 - bias - mbits) : (float)(m | (1u << mbits)) * qp_pow2((int)be - bias - mbits);
    return ((c >> nb) & 1u) ? -v : v;
}

/* elem: 1 fp4 e2m1, 2 fp6 e3m2, 3 fp6 e2m3, 4 fp8 e4m3fn */
inline uint qp_elem_encode(int elem, float x) {
    if (elem == 1) return qp_mf_encode(x, 2, 1, 1, 0x7u);
    if (elem == 2) return qp_mf_encode(x, 3, 2, 3, 0x1Fu);
    if (elem == 3) return qp_mf_encode(x, 2, 3, 1, 0x1Fu);
    return qp_f8_encode(x); /* |x| >= 464 -> 448, NaN -> 0x7F | sign */
}

inline float qp_elem_decode(int elem, uint c) {
    if (elem == 1) return qp_mf_decode(c, 2, 1, 1);
    if (elem == 2) return qp_mf_decode(c, 3, 2, 3);
    if (elem == 3) return qp_mf_decode(c, 2, 3, 1);
    return qp_f8_decode(c);
}

/* Quark's even e8m0 scale of a block absmax (docs/semantics.md §6) */
inline uint qp_mx_even_scale(float amax, int mbits, int emax) {
    float a = fabs(amax);
    if (isnan(a)) return 255u;
    if (a == 0.0f) a = 0x1p-126f;
    uint b = (as_uint(a) + (1u << (22 - mbits))) & 0xFF800000u;
    int E = (int)((b >> 23) & 0xFFu);
    int e = E == 0 ? -1000 : E == 255 ? 1000 : E - 127 - emax;
    return (uint)(clamp(e, -127, 127) + 127);
}

/* ---- activation fake quantization --------------------------------------
 * mode 0: x' = x; 1: OCP-MX qdq, one lane per block of 32 (elem, mbits,
 * emax); 2: fp8 static qdq (W4A8-MXFP4-FP8; sc = input_scale), one lane per
 * element; 3: NVFP4, one lane per block of 16 (g, inv_g = 1 / g as the host
 * computed them). `items` lanes do work; K is a multiple of the block. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_act_qdq(__global const ushort *x, int items, int bf16, int mode, int elem, int mbits, int emax, float sc,
                float g, float inv_g, int dm, __global float *xf) {
    int it = get_global_id(0);
    if (it >= items) return;
    if (mode == 0) {
        xf[it] = qp_act_load(x, (size_t)it, bf16);
    } else if (mode == 2) {
        float v = qp_act_load(x, (size_t)it, bf16);
        float t = fmax(-448.0f, fmin(qp_rnd_act(qp_div(v, sc, dm), bf16), 448.0f));
        float q = qp_f8_decode(qp_f8_encode(t));
        xf[it] = qp_rnd_act(qp_rnd_act(q, bf16) * sc, bf16);
    } else if (mode == 1) {
        size_t base = (size_t)it * 32;
        float a = 0.0f;
        for (int i = 0; i < 32; i++) { /* torch amax: a NaN makes the max NaN */
            float v = fabs(qp_act_load(x, base + i, bf16));
            if (isnan(v) || v > a) a = v;
            if (isnan(v)) break;
        }
        uint s = qp_mx_even_scale(a, mbits, emax);
        float up = qp_pow2(127 - (int)s), dn = qp_pow2((int)s - 127);
        for (int i = 0; i < 32; i++) {
            float v = qp_act_load(x, base + i, bf16);
            float y = s == 255u ? NAN : v * up; /* x / 2^e, exact unless below the element's range */
            float q = qp_elem_decode(elem, qp_elem_encode(elem, y));
            xf[base + i] = s == 255u ? NAN : qp_rnd_act(q * dn, bf16);
        }
    } else {
        size_t base = (size_t)it * 16;
        float vmax = 0.0f;
        for (int i = 0; i < 16; i++) vmax = fmax(vmax, fabs(qp_act_load(x, base + i, bf16)));
        float sf = g * (vmax * 0x1.555556p-3f); /* fp32(1/6) */
        float sf_f = qp_f8_decode(qp_f8_encode(sf));
        float out_scale = sf_f == 0.0f ? 0.0f : qp_div(1.0f, sf_f * inv_g, dm);
        float s2 = qp_div(sf_f, g, dm);
        for (int i = 0; i < 16; i++) {
            float q = qp_mf_decode(qp_mf_encode(qp_act_load(x, base + i, bf16) * out_scale, 2, 1, 1, 0x7u), 2, 1, 1);
            xf[base + i] = qp_rnd_act(q * s2, bf16);
        }
    }
}

/* ---- weights ---------------------------------------------------------------- */
inline size_t qp_fw_row_bytes(int wfmt, int K) {
    return wfmt == 0 ? 2 * (size_t)K : wfmt == 1 ? (size_t)(((K + 31) & ~31) >> 1) : (size_t)K;
}

/* one weight (k < K) of row wr */
inline float qp_fw_weight(__global const uchar *wr, int k, int wfmt, int blk, __local const float *lut,
                          __global const float *bs, int bf16) {
    if (wfmt == 0) return qp_act_load((__global const ushort *)wr, (size_t)k, bf16);
    uint c;
    if (wfmt == 1) {
        uchar b = wr[(k >> 5) * 16 + (k & 15)];
        c = (k & 16) ? (uint)(b >> 4) : (uint)(b & 15);
    } else {
        c = wr[k];
    }
    return qp_rnd_act(lut[c] * bs[k / blk], bf16);
}

/* e2m1 values of 16 codes by bit construction (no table gather): exponent
 * field e, mantissa bit m: e == 0 -> 0 or 0.5, else (1 + m/2) 2^(e-1); the
 * host checks that w_lut[0..15] is this table */
inline float16 qp_e2m1_16(uchar16 c) {
    uint16 u = convert_uint16(c);
    uint16 e = (u >> (uint16)(1)) & (uint16)(3u), m = u & (uint16)(1u);
    uint16 r = ((e + (uint16)(126u)) << (uint16)(23)) | (m << (uint16)(22));
    r = select(r, m * (uint16)(0x3F000000u), e == (uint16)(0u)); /* 0.5 or 0 */
    return as_float16(r | ((u & (uint16)(8u)) << (uint16)(28)));
}

#define QP_LUT16(c) (float16)(lut[(c).s0], lut[(c).s1], lut[(c).s2], lut[(c).s3], lut[(c).s4], lut[(c).s5], \
                              lut[(c).s6], lut[(c).s7], lut[(c).s8], lut[(c).s9], lut[(c).sa], lut[(c).sb], \
                              lut[(c).sc], lut[(c).sd], lut[(c).se], lut[(c).sf])

inline ushort qp_epilogue_fw(float acc, int n, int flags, __global const ushort *bias) {
    int bf16 = (flags & QP_EPI_BF16) != 0;
    if (flags & QP_EPI_BIAS) {
        float b = qp_act_load(bias, (size_t)n, bf16);
        acc = (flags & QP_EPI_BIAS_RND) ? qp_rnd_act(acc, bf16) + b : acc + b;
    }
    return qp_act_encode(acc, bf16);
}

/* GEMV (M <= 16): one work-group per column, lanes stride over K 32 weights
 * at a time, dequantized in registers (16 lanes of a vector at a time). */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_gemv_fw(__global const float *xf, __global const uchar *w, __global const float *lutg,
                __global const float *bsc, int K, int N, int nb, int wfmt, int blk, int m0, int mrows, int flags,
                __global const ushort *bias, __global ushort *y) {
    __local float red[QP_GEMV_MAX_M * QP_WG];
    __local float lut[256];
    int n = nb + get_group_id(0), lid = get_local_id(0), bf16 = (flags & QP_EPI_BF16) != 0;
    for (int i = lid; i < 256; i += QP_WG) lut[i] = wfmt ? lutg[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[QP_GEMV_MAX_M];
    for (int m = 0; m < QP_GEMV_MAX_M; m++) acc[m] = 0.0f;
    __global const uchar *wr = w + (size_t)(n - nb) * qp_fw_row_bytes(wfmt, K);
    __global const float *bs = bsc + (size_t)n * (size_t)(K / blk);
    for (int k = lid * 32; k < K; k += QP_WG * 32) {
        if (k + 32 <= K) {
            float16 w0, w1;
            if (wfmt == 0) {
                __global const ushort *wa = (__global const ushort *)wr;
                w0 = qp_act16(vload16(0, wa + k), bf16);
                w1 = qp_act16(vload16(0, wa + k + 16), bf16);
            } else if (wfmt == 1) {
                uchar16 b = vload16(0, wr + (k >> 1));
                uchar16 c0 = b & (uchar16)(15), c1 = b >> (uchar16)(4);
                w0 = qp_rnd16(qp_e2m1_16(c0) * bs[k / blk], bf16);
                w1 = qp_rnd16(qp_e2m1_16(c1) * bs[(k + 16) / blk], bf16);
            } else {
                uchar16 c0 = vload16(0, wr + k), c1 = vload16(0, wr + k + 16);
                w0 = qp_rnd16(QP_LUT16(c0) * bs[k / blk], bf16);
                w1 = qp_rnd16(QP_LUT16(c1) * bs[(k + 16) / blk], bf16);
            }
            qp_gemv_acc32(acc, xf, K, m0, mrows, k, w0, w1);
        } else {
            float wt[32];
            for (int i = 0; i < 32; i++) wt[i] = k + i < K ? qp_fw_weight(wr, k + i, wfmt, blk, lut, bs, bf16) : 0.0f;
            qp_gemv_acc32_tail(acc, xf, K, m0, mrows, k, wt);
        }
    }
    QP_GEMV_REDUCE(red, acc, mrows, lid);
    if (lid < mrows) y[(size_t)(m0 + lid) * N + n] = qp_epilogue_fw(red[lid * QP_WG], n, flags, bias);
}

/* Tiled (M > 16): 32x32 output tile per 8x8 work-group, K in steps of 16
 * through local memory, each lane dequantizing 8 weights of one row. */
__kernel __attribute__((reqd_work_group_size(8, 8, 1)))
void qp_tiled_fw(__global const float *xf, __global const uchar *w, __global const float *lutg,
                 __global const float *bsc, int M, int K, int N, int nb, int ne, int wfmt, int blk, int flags,
                 __global const ushort *bias, __global ushort *y) {
    __local float As[QP_TM * QP_TKF];
    __local float Bs[QP_TN * QP_TKF];
    __local float lut[256];
    int tx = get_local_id(0), ty = get_local_id(1), lid = ty * 8 + tx, bf16 = (flags & QP_EPI_BF16) != 0;
    for (int i = lid; i < 256; i += 64) lut[i] = wfmt ? lutg[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    int n0 = nb + get_group_id(0) * QP_TN, m0 = get_group_id(1) * QP_TM;
    float acc[4][4];
    QP_TILE_ZERO(acc);
    int lr = lid >> 1, lc = (lid & 1) * 8;
    int gm = m0 + lr, gn = n0 + lr;
    size_t rowb = qp_fw_row_bytes(wfmt, K);
    __global const uchar *wr = w + (size_t)(gn - nb) * rowb;
    __global const float *bs = bsc + (size_t)gn * (size_t)(K / blk);
    for (int k0 = 0; k0 < K; k0 += QP_TKF) {
        int kc = k0 + lc;
        for (int i = 0; i < 8; i++) {
            int gk = kc + i;
            As[lr * QP_TKF + lc + i] = gm < M && gk < K ? xf[(size_t)gm * K + gk] : 0.0f;
            Bs[lr * QP_TKF + lc + i] = gn < ne && gk < K ? qp_fw_weight(wr, gk, wfmt, blk, lut, bs, bf16) : 0.0f;
        }
        qp_tile_step(As, Bs, ty, tx, acc);
    }
    QP_TILE_STORE(qp_epilogue_fw(acc[i][j], n, flags, bias));
}

/* ---- Quark online input rotation (api/backend.h rotation_forward) -------
 * y[m][b*r + j] = rnd(S * c), S the sequential fp32 sum over i of
 * +-x[m][b*r + i] (H[i][j]); one lane per output element. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_rotate(__global const ushort *x, __global const char *H, int r, float c, int total, int bf16,
               __global ushort *y) {
    int it = get_global_id(0);
    if (it >= total) return;
    int j = it % r;
    size_t base = (size_t)(it - j);
    float s = 0.0f;
    for (int i = 0; i < r; i++) {
        float v = qp_act_load(x, base + i, bf16);
        s = s + (H[(size_t)i * r + j] > 0 ? v : -v);
    }
    y[it] = qp_act_encode(s * c, bf16);
}

/* ---- fp8 e4m3 KV cache (api/backend.h kv_quantize / kv_dequantize) ------
 * elements base .. base+n-1 (the host launches chunks of at most 2^30) */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_kv_quant(__global const ushort *src, ulong base, int n, float scale, int bf16, int dm, __global uchar *dst) {
    int i = get_global_id(0);
    if (i < n) dst[base + i] = (uchar)qp_f8_encode(qp_div(qp_act_load(src, base + i, bf16), scale, dm));
}

__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_kv_dequant(__global const uchar *src, ulong base, int n, float scale, int bf16, __global ushort *dst) {
    int i = get_global_id(0);
    if (i < n) dst[base + i] = qp_act_encode(qp_f8_decode(src[base + i]) * scale, bf16);
}
