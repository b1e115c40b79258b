/* Numeric element formats: encode (fp32 -> code), decode (code -> fp32) and
 * the packing layouts vLLM loads (docs/semantics.md §5, §6, §17 and §18; §18's
 * saturating fp8 encode is the one vLLM's CUDA kernels use).
 *
 * One table-driven minifloat codec covers every float format: encoding
 * rounds the exact fp32 value to nearest, ties to even, on the format's grid
 * (vLLM's rule for fp4, fp6 and fp8, docs/semantics.md §6, §18, and IEEE's for fp16/bf16), then
 * applies the format's overflow rule (inf or saturation) and NaN rule. The
 * rounding is done in double, where every step is exact: a float has 24
 * significant bits and the grid quantum is a power of two.
 *
 * No printing, no allocation, no asserts on user input. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "internal.h"

typedef enum {
    OVF_INF,      /* IEEE: overflow rounds to +-inf                           */
    OVF_SATURATE  /* no inf: clamp to +-max (docs/semantics.md §6, §18)       */
} overflow_rule;

typedef struct {
    int ebits, mbits, bias;
    int has_sign;      /* e8m0 is unsigned                                   */
    overflow_rule ovf;
    int max_biased;    /* biased exponent of the largest finite value        */
    int max_mant;      /* its mantissa field                                 */
    int has_inf;       /* exp all ones, mantissa 0 = inf (IEEE and e5m2)     */
    int ieee_nan;      /* exp all ones, mantissa != 0 = NaN                  */
    int nan_allones;   /* S.1111.111 is the only NaN pattern (e4m3fn)        */
    int nan_negzero;   /* 0x80 is the only NaN, no -0 (e4m3fnuz, docs/semantics.md §18) */
    uint32_t nan_code; /* code for an encoded NaN (sign added if nan_signed) */
    int nan_signed;
} fmt_desc;

/* docs/semantics.md §5 table, docs/semantics.md §18 (fnuz) and IEEE binary16 / bfloat16. */
static const fmt_desc *desc_of(qp_dtype d) {
    /* ebits mbits bias sign ovf maxE maxM inf ieeeNaN allones negzero nan signed */
    static const fmt_desc f16 = {5, 10, 15, 1, OVF_INF, 30, 1023, 1, 1, 0, 0, 0x7FFF, 0};
    static const fmt_desc bf16 = {8, 7, 127, 1, OVF_INF, 254, 127, 1, 1, 0, 0, 0x7FFF, 0};
    /* e4m3fn: max 448 = 1.110b * 2^8, 0x7F/0xFF are NaN (docs/semantics.md §5, §18). */
    static const fmt_desc e4m3fn = {4, 3, 7, 1, OVF_SATURATE, 15, 6, 0, 0, 1, 0, 0x7F, 1};
    /* e4m3fnuz: bias 8, max 240 = 1.111b * 2^7, NaN only 0x80 (docs/semantics.md §18). */
    static const fmt_desc e4m3fnuz = {4, 3, 8, 1, OVF_SATURATE, 15, 7, 0, 0, 0, 1, 0x80, 0};
    /* e5m2: IEEE-like with inf; NaN encoded as CUDA's 0x7F | sign. */
    static const fmt_desc e5m2 = {5, 2, 15, 1, OVF_INF, 30, 3, 1, 1, 0, 0, 0x7F, 1};
    /* fp6/fp4 (docs/semantics.md §5): every pattern is a number; NaN -> +max (qport). */
    static const fmt_desc e2m3 = {2, 3, 1, 1, OVF_SATURATE, 3, 7, 0, 0, 0, 0, 0x1F, 0};
    static const fmt_desc e3m2 = {3, 2, 3, 1, OVF_SATURATE, 7, 3, 0, 0, 0, 0, 0x1F, 0};
    static const fmt_desc e2m1 = {2, 1, 1, 1, OVF_SATURATE, 3, 1, 0, 0, 0, 0, 0x07, 0};
    switch (d) {
    case QP_DTYPE_F16: return &f16;
    case QP_DTYPE_BF16: return &bf16;
    case QP_DTYPE_F8_E4M3FN: return &e4m3fn;
    case QP_DTYPE_F8_E4M3FNUZ: return &e4m3fnuz;
    case QP_DTYPE_F8_E5M2: return &e5m2;
    case QP_DTYPE_F6_E2M3: return &e2m3;
    case QP_DTYPE_F6_E3M2: return &e3m2;
    case QP_DTYPE_F4_E2M1: return &e2m1;
    default: return NULL;
    }
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Round-half-to-even of a non-negative double, independent of the FP
 * rounding mode the caller may have set. */
static double rne(double m) {
    double f = floor(m);
    double diff = m - f;
    if (diff > 0.5 || (diff == 0.5 && fmod(f, 2.0) != 0.0)) f += 1.0;
    return f;
}

static uint32_t minifloat_encode(const fmt_desc *fd, float x) {
    uint32_t sign = (f32_bits(x) >> 31) & 1u;
    uint32_t sbit = (uint32_t)1 << (fd->ebits + fd->mbits);
    uint32_t s = sign ? sbit : 0;
    uint32_t max_code = ((uint32_t)fd->max_biased << fd->mbits) | (uint32_t)fd->max_mant;

    if (isnan(x)) return fd->nan_code | (fd->nan_signed ? s : 0);
    if (isinf(x)) {
        if (fd->ovf == OVF_INF) return s | ((uint32_t)((1 << fd->ebits) - 1) << fd->mbits);
        return s | max_code; /* saturate (docs/semantics.md §18 for e4m3fn) */
    }

    double a = fabs((double)x);
    int emin = 1 - fd->bias; /* exponent of the smallest normal */
    int e;
    if (a == 0.0) {
        e = emin;
    } else {
        (void)frexp(a, &e); /* a = f * 2^e, f in [0.5, 1): floor(log2 a) = e-1 */
        e -= 1;
        if (e < emin) e = emin; /* subnormal range shares the quantum of emin */
    }
    /* Saturated or overflowed before rounding: far above the top binade. */
    if (e > fd->max_biased - fd->bias + 1) {
        if (fd->ovf == OVF_INF) return s | ((uint32_t)((1 << fd->ebits) - 1) << fd->mbits);
        return s | max_code;
    }
    double q = ldexp(1.0, e - fd->mbits);      /* grid step in this binade   */
    double r = rne(a / q);                     /* integer significand        */
    double one = ldexp(1.0, fd->mbits);        /* the implicit leading 1     */
    uint32_t biased, mant;
    if (r >= 2.0 * one) {                      /* rounding carried: next binade */
        e += 1;
        r = one;
    }
    if (r < one) {                             /* subnormal (only at e == emin) */
        biased = 0;
        mant = (uint32_t)r;
    } else {
        biased = (uint32_t)(e + fd->bias);
        mant = (uint32_t)(r - one);
    }
    uint32_t code = (biased << fd->mbits) | mant;
    if (code > max_code) {
        if (fd->ovf == OVF_INF) return s | ((uint32_t)((1 << fd->ebits) - 1) << fd->mbits);
        return s | max_code; /* e4m3fn: |x| > 464 -> 448 (docs/semantics.md §18) */
    }
    if (code == 0 && fd->nan_negzero) return 0; /* fnuz has no -0 (docs/semantics.md §18) */
    return s | code;
}

static float minifloat_decode(const fmt_desc *fd, uint32_t code) {
    int nbits = fd->ebits + fd->mbits + 1;
    code &= ((uint32_t)1 << nbits) - 1u;
    uint32_t sign = code >> (nbits - 1);
    uint32_t mag = code & (((uint32_t)1 << (nbits - 1)) - 1u);
    uint32_t biased = mag >> fd->mbits;
    uint32_t mant = mag & (((uint32_t)1 << fd->mbits) - 1u);
    uint32_t emask = ((uint32_t)1 << fd->ebits) - 1u;

    if (fd->nan_negzero && code == ((uint32_t)1 << (nbits - 1))) return NAN;
    if (fd->nan_allones && mag == (((uint32_t)1 << (nbits - 1)) - 1u)) return sign ? -NAN : NAN;
    if (fd->ieee_nan && biased == emask) {
        if (mant == 0) return sign ? -INFINITY : INFINITY;
        return sign ? -NAN : NAN;
    }
    double v;
    if (biased == 0)
        v = ldexp((double)mant, 1 - fd->bias - fd->mbits);
    else
        v = ldexp((double)(mant | ((uint32_t)1 << fd->mbits)), (int)biased - fd->bias - fd->mbits);
    return (float)(sign ? -v : v); /* exact: every format fits in fp32 */
}

/* E8M0 (docs/semantics.md §5): unsigned power of two 2^(e-127), 255 = NaN. Encoding is
 * the exponent floor(log2|x|), clamped to 0..254; Quark's "even" rounding of
 * a block max (docs/semantics.md §6) is the quantizer's job, not this conversion's. */
static uint32_t e8m0_encode(float x) {
    if (isnan(x)) return 255;
    double a = fabs((double)x);
    if (isinf(x)) return 254;
    if (a == 0.0) return 0;
    int e;
    (void)frexp(a, &e);
    int biased = e - 1 + 127;
    if (biased < 0) biased = 0;
    if (biased > 254) biased = 254;
    return (uint32_t)biased;
}

static float e8m0_decode(uint32_t code) {
    code &= 0xFFu;
    if (code == 255) return NAN;
    /* pow2, not the as_float(e << 23) trick: code 0 is 2^-127 (docs/semantics.md §5). */
    return (float)ldexp(1.0, (int)code - 127);
}

QP_API uint32_t qp_format_encode(qp_dtype dtype, float x) {
    if (dtype == QP_DTYPE_F32) return f32_bits(x);
    if (dtype == QP_DTYPE_E8M0) return e8m0_encode(x);
    const fmt_desc *fd = desc_of(dtype);
    return fd ? minifloat_encode(fd, x) : 0;
}

QP_API float qp_format_decode(qp_dtype dtype, uint32_t code) {
    if (dtype == QP_DTYPE_F32) return f32_from_bits(code);
    if (dtype == QP_DTYPE_E8M0) return e8m0_decode(code);
    const fmt_desc *fd = desc_of(dtype);
    return fd ? minifloat_decode(fd, code) : NAN;
}

QP_API int qp_format_bits(qp_dtype dtype) {
    switch (dtype) {
    case QP_DTYPE_F32:
    case QP_DTYPE_I32: return 32;
    case QP_DTYPE_I64: return 64;
    case QP_DTYPE_F16:
    case QP_DTYPE_BF16: return 16;
    case QP_DTYPE_F8_E4M3FN:
    case QP_DTYPE_F8_E4M3FNUZ:
    case QP_DTYPE_F8_E5M2:
    case QP_DTYPE_E8M0:
    case QP_DTYPE_I8:
    case QP_DTYPE_U8: return 8;
    case QP_DTYPE_F6_E2M3:
    case QP_DTYPE_F6_E3M2: return 6;
    case QP_DTYPE_F4_E2M1:
    case QP_DTYPE_I4:
    case QP_DTYPE_U4: return 4;
    default: return 0;
    }
}

size_t qp_dtype_elem_bytes(qp_dtype d) {
    int bits = qp_format_bits(d);
    return bits >= 8 ? (size_t)bits / 8 : 1;
}

QP_API float qp_format_max(qp_dtype dtype) {
    if (dtype == QP_DTYPE_F32) return FLT_MAX;
    if (dtype == QP_DTYPE_E8M0) return (float)ldexp(1.0, 127);
    const fmt_desc *fd = desc_of(dtype);
    if (!fd) return 0.0f;
    uint32_t max_code = ((uint32_t)fd->max_biased << fd->mbits) | (uint32_t)fd->max_mant;
    return minifloat_decode(fd, max_code);
}

QP_API float qp_fp16_round(float x) {
    return qp_format_decode(QP_DTYPE_F16, qp_format_encode(QP_DTYPE_F16, x));
}

QP_API float qp_bf16_round(float x) {
    return qp_format_decode(QP_DTYPE_BF16, qp_format_encode(QP_DTYPE_BF16, x));
}

/* Element storage of the array helpers: 2 bytes, 1 byte, or 0 (unsupported). */
static int array_width(qp_dtype dtype) {
    switch (dtype) {
    case QP_DTYPE_F16:
    case QP_DTYPE_BF16: return 2;
    case QP_DTYPE_F8_E4M3FN:
    case QP_DTYPE_F8_E4M3FNUZ:
    case QP_DTYPE_F8_E5M2:
    case QP_DTYPE_E8M0:
    case QP_DTYPE_F6_E2M3:
    case QP_DTYPE_F6_E3M2:
    case QP_DTYPE_F4_E2M1: return 1;
    default: return 0;
    }
}

QP_API qp_status qp_format_encode_array(qp_dtype dtype, const float *x, size_t n, void *out) {
    int w = array_width(dtype);
    if (!w || !x || !out) return QP_ERR_INVALID_ARGUMENT;
    if (w == 2) {
        uint16_t *o = out;
        for (size_t i = 0; i < n; i++) o[i] = (uint16_t)qp_format_encode(dtype, x[i]);
    } else {
        uint8_t *o = out;
        for (size_t i = 0; i < n; i++) o[i] = (uint8_t)qp_format_encode(dtype, x[i]);
    }
    return QP_OK;
}

QP_API qp_status qp_format_decode_array(qp_dtype dtype, const void *in, size_t n, float *out) {
    int w = array_width(dtype);
    if (!w || !in || !out) return QP_ERR_INVALID_ARGUMENT;
    if (w == 2) {
        const uint16_t *p = in;
        for (size_t i = 0; i < n; i++) out[i] = qp_format_decode(dtype, p[i]);
    } else {
        const uint8_t *p = in;
        for (size_t i = 0; i < n; i++) out[i] = qp_format_decode(dtype, p[i]);
    }
    return QP_OK;
}

/* -- Packing (docs/semantics.md §5) --------------------------------------- */

static int codes_fit(const uint8_t *codes, size_t n, unsigned limit) {
    for (size_t i = 0; i < n; i++)
        if (codes[i] >= limit) return 0;
    return 1;
}

/* Quark Pack_fp4: byte i = e[2i+1] << 4 | e[2i] (low nibble first). */
QP_API qp_status qp_pack_fp4(const uint8_t *codes, size_t n, uint8_t *out) {
    if (!codes || !out || n % 2 != 0 || !codes_fit(codes, n, 16)) return QP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n / 2; i++)
        out[i] = (uint8_t)(codes[2 * i] | (codes[2 * i + 1] << 4));
    return QP_OK;
}

QP_API qp_status qp_unpack_fp4(const uint8_t *in, size_t n, uint8_t *codes) {
    if (!in || !codes || n % 2 != 0) return QP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n / 2; i++) {
        codes[2 * i] = (uint8_t)(in[i] & 0x0F);
        codes[2 * i + 1] = (uint8_t)(in[i] >> 4);
    }
    return QP_OK;
}

/* Quark Pack_fp6: W = v3<<18 | v2<<12 | v1<<6 | v0, bytes W&0xFF, W>>8, W>>16
 * (the MI355 mfma_scale f8f6f4 layout vLLM unpacks with reorder=False). */
QP_API qp_status qp_pack_fp6(const uint8_t *codes, size_t n, uint8_t *out) {
    if (!codes || !out || n % 4 != 0 || !codes_fit(codes, n, 64)) return QP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n / 4; i++) {
        const uint8_t *v = codes + 4 * i;
        uint32_t w = (uint32_t)v[0] | ((uint32_t)v[1] << 6) | ((uint32_t)v[2] << 12) |
                     ((uint32_t)v[3] << 18);
        out[3 * i] = (uint8_t)(w & 0xFF);
        out[3 * i + 1] = (uint8_t)((w >> 8) & 0xFF);
        out[3 * i + 2] = (uint8_t)((w >> 16) & 0xFF);
    }
    return QP_OK;
}

QP_API qp_status qp_unpack_fp6(const uint8_t *in, size_t n, uint8_t *codes) {
    if (!in || !codes || n % 4 != 0) return QP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n / 4; i++) {
        uint32_t w = (uint32_t)in[3 * i] | ((uint32_t)in[3 * i + 1] << 8) |
                     ((uint32_t)in[3 * i + 2] << 16);
        for (int j = 0; j < 4; j++) codes[4 * i + (size_t)j] = (uint8_t)((w >> (6 * j)) & 0x3F);
    }
    return QP_OK;
}

/* docs/semantics.md §17: nibble index of column j (0..7) inside its int32 word. */
static const int *int4_nibble_map(qp_pack_method method) {
    static const int order[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    static const int reorder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    if (method == QP_PACK_ORDER) return order;
    if (method == QP_PACK_REORDER) return reorder;
    return NULL;
}

/* What packing and unpacking check alike: the nibble map of a known pack
 * method (NULL otherwise), both arrays, 0 <= K, N <= QP_DIM_MAX. */
static const int *int4_args(qp_pack_method method, const void *in, const void *out, int K, int N) {
    const int *P = int4_nibble_map(method);
    return P && in && out && K >= 0 && N >= 0 && K <= QP_DIM_MAX && N <= QP_DIM_MAX ? P : NULL;
}

QP_API qp_status qp_pack_int4_quark(const uint8_t *codes, int K, int N, qp_pack_method method,
                                    int32_t *out) {
    const int *P = int4_args(method, codes, out, K, N);
    if (!P) return QP_ERR_INVALID_ARGUMENT;
    size_t k_n = (size_t)K, n_n = (size_t)N, words = (n_n + 7) / 8;
    if (!codes_fit(codes, k_n * n_n, 16)) return QP_ERR_INVALID_ARGUMENT;
    for (size_t k = 0; k < k_n; k++) {
        for (size_t c = 0; c < words; c++) {
            uint32_t w = 0;
            for (size_t j = 0; j < 8; j++) {
                size_t n = 8 * c + j;
                if (n >= n_n) break; /* padding nibbles stay 0 */
                w |= (uint32_t)codes[k * n_n + n] << (4 * P[j]);
            }
            int32_t sw;
            memcpy(&sw, &w, sizeof sw); /* the checkpoint's int32 bit pattern */
            out[k * words + c] = sw;
        }
    }
    return QP_OK;
}

QP_API qp_status qp_unpack_int4_quark(const int32_t *in, int K, int N, qp_pack_method method,
                                      uint8_t *codes) {
    const int *P = int4_args(method, in, codes, K, N);
    if (!P) return QP_ERR_INVALID_ARGUMENT;
    size_t k_n = (size_t)K, n_n = (size_t)N, words = (n_n + 7) / 8;
    for (size_t k = 0; k < k_n; k++) {
        for (size_t n = 0; n < n_n; n++) {
            uint32_t w;
            memcpy(&w, &in[k * words + n / 8], sizeof w);
            codes[k * n_n + n] = (uint8_t)((w >> (4 * P[n % 8])) & 0xF);
        }
    }
    return QP_OK;
}
