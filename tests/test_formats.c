/* Numeric formats (docs/semantics.md §5, §6, §17, §18).
 *
 * Checks qp_format_* and the packing helpers against formulas written
 * independently of api/format.c (a per-format value formula, vLLM's fp4
 * table, a brute-force nearest-value search on each format's value table,
 * the compiler's _Float16 conversion, the bf16 bit trick) and against golden
 * vectors from PyPI ml_dtypes (tests/golden/formats.txt, path in argv[1]).
 *
 * Where vLLM's semantics differ from the ml_dtypes cast, the golden file
 * already holds vLLM's answer and flags the line "# fmt:spec(ml=..)"
 * (gen_formats.py lists them): NaN -> 0x7FFF for f16/bf16, e4m3fn/e4m3fnuz
 * saturation instead of NaN on overflow and inf (docs/semantics.md §18), e5m2 NaN ->
 * 0x7F|sign, fp6/fp4 NaN -> +max, and e8m0's floor(log2) rule. This test
 * compares every column bit for bit, overrides included.
 *
 * Usage: test_formats GOLDEN_FILE. Prints failing cases; exit status 1 on
 * any failure. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qport.h"

static long n_checks, n_fail;

static const char *dname(qp_dtype d) {
    switch (d) {
    case QP_DTYPE_F16: return "f16";
    case QP_DTYPE_BF16: return "bf16";
    case QP_DTYPE_F8_E4M3FN: return "e4m3fn";
    case QP_DTYPE_F8_E4M3FNUZ: return "e4m3fnuz";
    case QP_DTYPE_F8_E5M2: return "e5m2";
    case QP_DTYPE_F6_E2M3: return "e2m3";
    case QP_DTYPE_F6_E3M2: return "e3m2";
    case QP_DTYPE_F4_E2M1: return "e2m1";
    case QP_DTYPE_E8M0: return "e8m0";
    default: return "?";
    }
}

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        n_checks++;                                                        \
        if (!(cond)) {                                                     \
            n_fail++;                                                      \
            if (n_fail <= 200) {                                           \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);                \
                printf(__VA_ARGS__);                                       \
                printf("\n");                                              \
            }                                                              \
        }                                                                  \
    } while (0)

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
static float bitsf(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}
/* Same value, or both NaN (decode results compare bit for bit otherwise, so
 * -0 and +0 are distinct). */
static int same(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return fbits(a) == fbits(b);
}

/* -- Independent reference: the small formats ---------------------------- */

typedef struct {
    const char *name;
    qp_dtype dt;
    int nbits, ebits, mbits, bias;
    int kind; /* 0: fn (S.1111.111 NaN), 1: fnuz, 2: IEEE (inf+NaN), 3: no specials */
    double max;
} small_fmt;

static const small_fmt SMALL[] = {
    {"e4m3fn", QP_DTYPE_F8_E4M3FN, 8, 4, 3, 7, 0, 448.0},
    {"e4m3fnuz", QP_DTYPE_F8_E4M3FNUZ, 8, 4, 3, 8, 1, 240.0},
    {"e5m2", QP_DTYPE_F8_E5M2, 8, 5, 2, 15, 2, 57344.0},
    {"e2m3", QP_DTYPE_F6_E2M3, 6, 2, 3, 1, 3, 7.5},
    {"e3m2", QP_DTYPE_F6_E3M2, 6, 3, 2, 3, 3, 28.0},
    {"e2m1", QP_DTYPE_F4_E2M1, 4, 2, 1, 1, 3, 6.0},
};
#define N_SMALL (sizeof SMALL / sizeof SMALL[0])

/* docs/semantics.md §5's value formula written out with pow(): value = (1+m/2^M) *
 * 2^(e-bias) for e>0, m/2^M * 2^(1-bias) for e == 0. */
static double ref_small_decode(const small_fmt *f, unsigned code) {
    unsigned s = (code >> (f->nbits - 1)) & 1;
    unsigned e = (code >> f->mbits) & ((1u << f->ebits) - 1);
    unsigned m = code & ((1u << f->mbits) - 1);
    double M = pow(2.0, f->mbits);
    if (f->kind == 0 && e == (1u << f->ebits) - 1 && m == (1u << f->mbits) - 1) return NAN;
    if (f->kind == 1 && code == (1u << (f->nbits - 1))) return NAN;
    if (f->kind == 2 && e == (1u << f->ebits) - 1) return m ? NAN : (s ? -INFINITY : INFINITY);
    double v = e ? (1.0 + m / M) * pow(2.0, (double)e - f->bias) : (m / M) * pow(2.0, 1.0 - f->bias);
    return s ? -v : v;
}

/* docs/semantics.md §5: e2m1 code & 7 -> {0, 0.5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign. */
static const float FP4_TABLE[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static unsigned ref_nan_small(const small_fmt *f, int neg) {
    switch (f->kind) {
    case 0:
    case 2: return 0x7Fu | (neg ? 0x80u : 0);
    case 1: return 0x80;
    default: return f->nbits == 4 ? 0x07 : 0x1F; /* +max, qport's choice */
    }
}

/* Brute-force encoder: the nearest finite value of the format on its table,
 * ties to the even code, then vLLM's overflow / NaN / sign rules. */
static unsigned ref_small_encode(const small_fmt *f, float x) {
    unsigned sbit = 1u << (f->nbits - 1);
    int neg = signbit(x) != 0;
    if (isnan(x)) return ref_nan_small(f, neg);
    double a = fabs((double)x);
    unsigned best = 0;
    double bestd = INFINITY;
    /* Clip first so the distances below stay exact (|v - a| loses the small
     * differences for huge a); anything above max is nearest to max. */
    if (a > f->max * 2) a = f->max * 2;
    for (unsigned c = 0; c < sbit; c++) {
        double v = ref_small_decode(f, c);
        if (isnan(v) || isinf(v)) continue;
        double d = fabs(v - a);
        if (d < bestd || (d == bestd && (c & 1u) == 0)) {
            bestd = d;
            best = c;
        }
    }
    /* Above max: e5m2 (IEEE) overflows to inf at or beyond the midpoint to
     * the next (virtual) binade value, the others saturate (§6, §18). */
    if (f->kind == 2) {
        double step = pow(2.0, 30.0 - f->bias - f->mbits); /* ulp of the top binade (exp 30) */
        if (a >= f->max + step / 2) best = 0x7C;
    }
    if (f->kind == 1 && best == 0) return 0; /* no -0 */
    return best | (neg ? sbit : 0);
}

static void test_small_decode_and_roundtrip(long *n_codes) {
    for (size_t i = 0; i < N_SMALL; i++) {
        const small_fmt *f = &SMALL[i];
        for (unsigned c = 0; c < (1u << f->nbits); c++) {
            float got = qp_format_decode(f->dt, c);
            double ref = ref_small_decode(f, c);
            CHECK(same(got, (float)ref), "%s decode 0x%x = %a, want %a", f->name, c, got, ref);
            if (f->nbits == 4) {
                float t = FP4_TABLE[c & 7];
                CHECK(same(got, (c & 8) ? -t : t), "e2m1 decode 0x%x = %a vs spec table", c, got);
            }
            (*n_codes)++;
            if (isnan(ref)) {
                CHECK(qp_format_encode(f->dt, got) == ref_nan_small(f, signbit(got) != 0),
                      "%s encode(decode(NaN 0x%x))", f->name, c);
                continue;
            }
            unsigned back = qp_format_encode(f->dt, got);
            CHECK(back == c, "%s encode(decode(0x%x)) = 0x%x", f->name, c, back);
        }
    }
}

static void test_e8m0(long *n_codes) {
    for (unsigned c = 0; c < 256; c++) {
        float got = qp_format_decode(QP_DTYPE_E8M0, c);
        float ref = c == 255 ? NAN : (float)pow(2.0, (double)c - 127.0);
        CHECK(same(got, ref), "e8m0 decode 0x%x = %a", c, got);
        CHECK(qp_format_encode(QP_DTYPE_E8M0, got) == c, "e8m0 encode(decode(0x%x))", c);
        (*n_codes)++;
    }
    struct { float x; unsigned code; } cases[] = {
        {1.0f, 127}, {1.5f, 127}, {1.9999999f, 127}, {2.0f, 128}, {0.75f, 126},
        {-2.0f, 128}, {0.0f, 0}, {-0.0f, 0}, {INFINITY, 254}, {-INFINITY, 254},
        {NAN, 255}, {-NAN, 255}, {0x1p127f, 254}, {FLT_MAX, 254}, {0x1p-127f, 0},
        {0x1p-140f, 0}, {0x1p-126f, 1}, {0x1.8p-127f, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(qp_format_encode(QP_DTYPE_E8M0, cases[i].x) == cases[i].code, "e8m0 encode(%a) = 0x%x want 0x%x",
              cases[i].x, qp_format_encode(QP_DTYPE_E8M0, cases[i].x), cases[i].code);
}

/* Every midpoint between adjacent values must go to the even code, and its
 * neighbouring floats to the nearer value (both signs). */
static void test_small_ties(long *n_ties) {
    for (size_t i = 0; i < N_SMALL; i++) {
        const small_fmt *f = &SMALL[i];
        unsigned sbit = 1u << (f->nbits - 1);
        /* Non-negative codes are monotonic in value for these formats. */
        for (unsigned c = 0; c + 1 < sbit; c++) {
            double a = ref_small_decode(f, c), b = ref_small_decode(f, c + 1);
            if (!isfinite(a) || !isfinite(b)) continue;
            float mid = (float)((a + b) / 2); /* exact: needs <= 5 bits */
            unsigned even = (c & 1u) ? c + 1 : c;
            unsigned neg_even = even | sbit, neg_lo = c | sbit, neg_hi = (c + 1) | sbit;
            if (f->kind == 1) { /* fnuz: no -0 */
                if (even == 0) neg_even = 0;
                if (c == 0) neg_lo = 0;
            }
            CHECK(qp_format_encode(f->dt, mid) == even, "%s tie %a -> 0x%x want 0x%x", f->name, mid,
                  qp_format_encode(f->dt, mid), even);
            CHECK(qp_format_encode(f->dt, -mid) == neg_even, "%s tie -%a", f->name, mid);
            CHECK(qp_format_encode(f->dt, nextafterf(mid, 0.0f)) == c, "%s below tie %a", f->name, mid);
            CHECK(qp_format_encode(f->dt, nextafterf(mid, INFINITY)) == c + 1, "%s above tie %a", f->name, mid);
            CHECK(qp_format_encode(f->dt, -nextafterf(mid, 0.0f)) == neg_lo, "%s below tie -%a", f->name, mid);
            CHECK(qp_format_encode(f->dt, -nextafterf(mid, INFINITY)) == neg_hi, "%s above tie -%a", f->name, mid);
            (*n_ties)++;
        }
    }
}

/* Saturation, NaN, inf and tiny inputs, as docs/semantics.md §18 states them. */
static void test_small_specials(void) {
    struct { qp_dtype dt; float x; unsigned code; const char *why; } cases[] = {
        /* docs/semantics.md §18: e4m3fn */
        {QP_DTYPE_F8_E4M3FN, 464.0f, 0x7E, "464 ties to 448"},
        {QP_DTYPE_F8_E4M3FN, 464.00003f, 0x7E, "> 464 saturates"},
        {QP_DTYPE_F8_E4M3FN, 1e30f, 0x7E, "huge saturates"},
        {QP_DTYPE_F8_E4M3FN, -1e30f, 0xFE, "huge saturates"},
        {QP_DTYPE_F8_E4M3FN, FLT_MAX, 0x7E, "FLT_MAX saturates"},
        {QP_DTYPE_F8_E4M3FN, INFINITY, 0x7E, "+inf -> 448"},
        {QP_DTYPE_F8_E4M3FN, -INFINITY, 0xFE, "-inf -> -448"},
        {QP_DTYPE_F8_E4M3FN, NAN, 0x7F, "NaN"},
        {QP_DTYPE_F8_E4M3FN, -NAN, 0xFF, "NaN keeps sign"},
        {QP_DTYPE_F8_E4M3FN, 0x1p-10f, 0x00, "2^-10 -> 0"},
        {QP_DTYPE_F8_E4M3FN, -0x1p-10f, 0x80, "-2^-10 -> -0"},
        {QP_DTYPE_F8_E4M3FN, 0x1.000002p-10f, 0x01, "just above 2^-10"},
        {QP_DTYPE_F8_E4M3FN, 0x1p-149f, 0x00, "tiny"},
        {QP_DTYPE_F8_E4M3FN, -0x1p-149f, 0x80, "tiny negative"},
        {QP_DTYPE_F8_E4M3FN, -0.0f, 0x80, "-0"},
        /* docs/semantics.md §18: e4m3fnuz */
        {QP_DTYPE_F8_E4M3FNUZ, 240.0f, 0x7F, "max"},
        {QP_DTYPE_F8_E4M3FNUZ, 248.0f, 0x7F, "tie above max saturates"},
        {QP_DTYPE_F8_E4M3FNUZ, 1e30f, 0x7F, "huge"},
        {QP_DTYPE_F8_E4M3FNUZ, -1e30f, 0xFF, "huge negative"},
        {QP_DTYPE_F8_E4M3FNUZ, INFINITY, 0x7F, "+inf"},
        {QP_DTYPE_F8_E4M3FNUZ, -INFINITY, 0xFF, "-inf"},
        {QP_DTYPE_F8_E4M3FNUZ, NAN, 0x80, "NaN"},
        {QP_DTYPE_F8_E4M3FNUZ, -NAN, 0x80, "-NaN"},
        {QP_DTYPE_F8_E4M3FNUZ, -0.0f, 0x00, "no -0"},
        {QP_DTYPE_F8_E4M3FNUZ, -0x1p-12f, 0x00, "negative underflow, no -0"},
        {QP_DTYPE_F8_E4M3FNUZ, 0x1p-11f, 0x00, "2^-11 ties to 0"},
        {QP_DTYPE_F8_E4M3FNUZ, 0x1p-10f, 0x01, "min subnormal"},
        /* e5m2: IEEE-like */
        {QP_DTYPE_F8_E5M2, 57344.0f, 0x7B, "max"},
        {QP_DTYPE_F8_E5M2, 61439.996f, 0x7B, "below overflow tie"},
        {QP_DTYPE_F8_E5M2, 61440.0f, 0x7C, "overflow tie -> inf"},
        {QP_DTYPE_F8_E5M2, -1e30f, 0xFC, "-inf"},
        {QP_DTYPE_F8_E5M2, INFINITY, 0x7C, "inf"},
        {QP_DTYPE_F8_E5M2, NAN, 0x7F, "NaN"},
        {QP_DTYPE_F8_E5M2, -NAN, 0xFF, "NaN keeps sign"},
        {QP_DTYPE_F8_E5M2, 0x1p-17f, 0x00, "2^-17 ties to 0"},
        {QP_DTYPE_F8_E5M2, -0x1p-17f, 0x80, "-0"},
        /* docs/semantics.md §6: fp4 table */
        {QP_DTYPE_F4_E2M1, 0.25f, 0x0, "0.25 -> 0"},
        {QP_DTYPE_F4_E2M1, -0.25f, 0x8, "-0.25 -> -0"},
        {QP_DTYPE_F4_E2M1, 0.2500001f, 0x1, "(0.25,0.75) -> 0.5"},
        {QP_DTYPE_F4_E2M1, 0.75f, 0x2, "0.75 -> 1"},
        {QP_DTYPE_F4_E2M1, 1.25f, 0x2, "1.25 -> 1"},
        {QP_DTYPE_F4_E2M1, 1.75f, 0x4, "1.75 -> 2"},
        {QP_DTYPE_F4_E2M1, 2.5f, 0x4, "2.5 -> 2"},
        {QP_DTYPE_F4_E2M1, 3.5f, 0x6, "3.5 -> 4"},
        {QP_DTYPE_F4_E2M1, 5.0f, 0x6, "5 -> 4"},
        {QP_DTYPE_F4_E2M1, 5.0000005f, 0x7, ">5 -> 6"},
        {QP_DTYPE_F4_E2M1, 7.0f, 0x7, "saturate"},
        {QP_DTYPE_F4_E2M1, -1e30f, 0xF, "saturate"},
        {QP_DTYPE_F4_E2M1, INFINITY, 0x7, "inf saturates"},
        {QP_DTYPE_F4_E2M1, -INFINITY, 0xF, "-inf saturates"},
        {QP_DTYPE_F4_E2M1, NAN, 0x7, "NaN -> +max (qport)"},
        {QP_DTYPE_F4_E2M1, -NAN, 0x7, "NaN -> +max (qport)"},
        /* fp6: RNE + saturation */
        {QP_DTYPE_F6_E2M3, 7.75f, 0x1F, "tie above max"},
        {QP_DTYPE_F6_E2M3, 100.0f, 0x1F, "saturate"},
        {QP_DTYPE_F6_E2M3, -INFINITY, 0x3F, "-inf"},
        {QP_DTYPE_F6_E2M3, 0.0625f, 0x00, "half min subnormal ties to 0"},
        {QP_DTYPE_F6_E2M3, NAN, 0x1F, "NaN -> +max (qport)"},
        {QP_DTYPE_F6_E3M2, 30.0f, 0x1F, "tie above max"},
        {QP_DTYPE_F6_E3M2, -1e9f, 0x3F, "saturate"},
        {QP_DTYPE_F6_E3M2, 0x1p-5f, 0x00, "half min subnormal ties to 0"},
        {QP_DTYPE_F6_E3M2, -0x1p-5f, 0x20, "-0"},
        {QP_DTYPE_F6_E3M2, NAN, 0x1F, "NaN -> +max (qport)"},
        /* docs/semantics.md §18: fp16/bf16 NaN -> 0x7FFF */
        {QP_DTYPE_F16, NAN, 0x7FFF, "NaN"},
        {QP_DTYPE_F16, -NAN, 0x7FFF, "-NaN"},
        {QP_DTYPE_F16, 65504.0f, 0x7BFF, "max"},
        {QP_DTYPE_F16, 65519.996f, 0x7BFF, "below overflow tie"},
        {QP_DTYPE_F16, 65520.0f, 0x7C00, "overflow tie -> inf"},
        {QP_DTYPE_F16, -INFINITY, 0xFC00, "-inf"},
        {QP_DTYPE_F16, 0x1p-25f, 0x0000, "2^-25 ties to 0"},
        {QP_DTYPE_F16, 0x1.000002p-25f, 0x0001, "just above"},
        {QP_DTYPE_F16, -0.0f, 0x8000, "-0"},
        {QP_DTYPE_BF16, NAN, 0x7FFF, "NaN"},
        {QP_DTYPE_BF16, -NAN, 0x7FFF, "-NaN"},
        {QP_DTYPE_BF16, FLT_MAX, 0x7F80, "FLT_MAX rounds to inf"},
        {QP_DTYPE_BF16, 0x1.fep127f, 0x7F7F, "bf16 max"},
        {QP_DTYPE_BF16, 0x1p-149f, 0x0000, "tiny"},
        {QP_DTYPE_BF16, 0x1p-133f, 0x0001, "min subnormal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t got = qp_format_encode(cases[i].dt, cases[i].x);
        CHECK(got == cases[i].code, "%s: encode(%s, %a) = 0x%x want 0x%x", cases[i].why,
              dname(cases[i].dt), cases[i].x, got, cases[i].code);
    }
}

/* Random and swept fp32 inputs against the brute-force encoder. */
static uint64_t rng_state;
static uint32_t rnd32(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void test_small_sweep(long *n_inputs) {
    for (size_t i = 0; i < N_SMALL; i++) {
        const small_fmt *f = &SMALL[i];
        /* Every 65521st fp32 bit pattern (all exponents, both signs), then
         * random magnitudes around the format's range. */
        for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 65521) {
            float x = bitsf((uint32_t)b);
            unsigned got = qp_format_encode(f->dt, x), ref = ref_small_encode(f, x);
            CHECK(got == ref, "%s encode(%a [0x%08x]) = 0x%x want 0x%x", f->name, x, (unsigned)b, got, ref);
            (*n_inputs)++;
        }
        for (int k = 0; k < 20000; k++) {
            double mag = ldexp(1.0 + (rnd32() >> 8) / 16777216.0, (int)(rnd32() % 40) - 20);
            float x = (float)((rnd32() & 1) ? -mag : mag);
            unsigned got = qp_format_encode(f->dt, x), ref = ref_small_encode(f, x);
            CHECK(got == ref, "%s encode(%a) = 0x%x want 0x%x", f->name, x, got, ref);
            (*n_inputs)++;
        }
    }
}

/* -- fp16 / bf16 ----------------------------------------------------------- */

/* IEEE binary16 value formula (independent of the library). */
static float ref_f16_decode(unsigned c) {
    unsigned s = c >> 15, e = (c >> 10) & 31, m = c & 1023;
    double v;
    if (e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    v = e ? ldexp(1024.0 + m, (int)e - 25) : ldexp((double)m, -24);
    return (float)(s ? -v : v);
}

/* fp32 -> bf16 by the usual bit trick (round half to even on the dropped
 * 16 bits), NaN -> 0x7FFF (docs/semantics.md §18). */
static unsigned ref_bf16_encode(float x) {
    if (isnan(x)) return 0x7FFF;
    uint32_t u = fbits(x);
    return (unsigned)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static unsigned ref_f16_encode(float x) {
    if (isnan(x)) return 0x7FFF;
#if defined(__FLT16_MAX__)
    _Float16 h = (_Float16)x; /* the compiler's IEEE conversion (RNE) */
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
#else
    /* Fallback: brute-force over the table of positive values. */
    unsigned sign = signbit(x) ? 0x8000u : 0;
    double a = fabs((double)x);
    if (a >= 65520.0) return sign | 0x7C00;
    unsigned lo = 0, hi = 0x7BFF;
    while (lo < hi) { /* first code with value >= a */
        unsigned mid = (lo + hi) / 2;
        if ((double)ref_f16_decode(mid) < a) lo = mid + 1; else hi = mid;
    }
    if (lo > 0) {
        double vl = ref_f16_decode(lo - 1), vh = ref_f16_decode(lo);
        if (a - vl < vh - a || (a - vl == vh - a && ((lo - 1) & 1) == 0)) lo--;
    }
    return sign | lo;
#endif
}

static void test_16bit(long *n_codes, long *n_ties) {
    for (unsigned c = 0; c < 65536; c++) {
        float h = qp_format_decode(QP_DTYPE_F16, c);
        float b = qp_format_decode(QP_DTYPE_BF16, c);
        CHECK(same(h, ref_f16_decode(c)), "f16 decode 0x%04x = %a", c, h);
        CHECK(same(b, bitsf((uint32_t)c << 16)), "bf16 decode 0x%04x = %a", c, b);
        unsigned hb = qp_format_encode(QP_DTYPE_F16, h), bb = qp_format_encode(QP_DTYPE_BF16, b);
        CHECK(hb == (isnan(h) ? 0x7FFFu : c), "f16 encode(decode(0x%04x)) = 0x%x", c, hb);
        CHECK(bb == (isnan(b) ? 0x7FFFu : c), "bf16 encode(decode(0x%04x)) = 0x%x", c, bb);
        CHECK(same(qp_fp16_round(h), h) && same(qp_bf16_round(b), b), "fp16/bf16_round fixed point 0x%x", c);
        *n_codes += 2;
        /* Ties between c and c+1 (positive finite, adjacent). */
        if (c < 0x7BFF) {
            float a0 = ref_f16_decode(c), a1 = ref_f16_decode(c + 1);
            float mid = (float)(((double)a0 + a1) / 2);
            unsigned even = (c & 1) ? c + 1 : c;
            CHECK(qp_format_encode(QP_DTYPE_F16, mid) == even, "f16 tie %a", mid);
            CHECK(qp_format_encode(QP_DTYPE_F16, -mid) == (even | 0x8000u), "f16 tie -%a", mid);
            CHECK(qp_format_encode(QP_DTYPE_F16, nextafterf(mid, 0)) == c, "f16 below tie %a", mid);
            CHECK(qp_format_encode(QP_DTYPE_F16, nextafterf(mid, INFINITY)) == c + 1, "f16 above tie %a", mid);
            (*n_ties)++;
        }
        if (c < 0x7F7F) {
            float a0 = bitsf((uint32_t)c << 16), a1 = bitsf((uint32_t)(c + 1) << 16);
            float mid = (float)(((double)a0 + a1) / 2);
            unsigned even = (c & 1) ? c + 1 : c;
            CHECK(qp_format_encode(QP_DTYPE_BF16, mid) == even, "bf16 tie %a", mid);
            CHECK(qp_format_encode(QP_DTYPE_BF16, -mid) == (even | 0x8000u), "bf16 tie -%a", mid);
            CHECK(qp_format_encode(QP_DTYPE_BF16, nextafterf(mid, 0)) == c, "bf16 below tie %a", mid);
            CHECK(qp_format_encode(QP_DTYPE_BF16, nextafterf(mid, INFINITY)) == c + 1, "bf16 above tie %a", mid);
            (*n_ties)++;
        }
    }
}

static void test_16bit_sweep(long *n_inputs) {
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 4093) {
        float x = bitsf((uint32_t)b);
        unsigned h = qp_format_encode(QP_DTYPE_F16, x), bf = qp_format_encode(QP_DTYPE_BF16, x);
        CHECK(h == ref_f16_encode(x), "f16 encode(%a [0x%08x]) = 0x%x want 0x%x", x, (unsigned)b, h, ref_f16_encode(x));
        CHECK(bf == ref_bf16_encode(x), "bf16 encode(%a [0x%08x]) = 0x%x want 0x%x", x, (unsigned)b, bf, ref_bf16_encode(x));
        *n_inputs += 2;
    }
}

/* -- Misc API --------------------------------------------------------------- */

static void test_api(void) {
    CHECK(qp_format_bits(QP_DTYPE_F32) == 32 && qp_format_bits(QP_DTYPE_F16) == 16 &&
              qp_format_bits(QP_DTYPE_BF16) == 16 && qp_format_bits(QP_DTYPE_F8_E4M3FN) == 8 &&
              qp_format_bits(QP_DTYPE_F8_E4M3FNUZ) == 8 && qp_format_bits(QP_DTYPE_F8_E5M2) == 8 &&
              qp_format_bits(QP_DTYPE_F6_E2M3) == 6 && qp_format_bits(QP_DTYPE_F6_E3M2) == 6 &&
              qp_format_bits(QP_DTYPE_F4_E2M1) == 4 && qp_format_bits(QP_DTYPE_E8M0) == 8 &&
              qp_format_bits(QP_DTYPE_NONE) == 0 && qp_format_bits(QP_DTYPE_COUNT_) == 0,
          "qp_format_bits");
    CHECK(qp_format_max(QP_DTYPE_F16) == 65504.0f && qp_format_max(QP_DTYPE_BF16) == 0x1.fep127f &&
              qp_format_max(QP_DTYPE_F8_E4M3FN) == 448.0f && qp_format_max(QP_DTYPE_F8_E4M3FNUZ) == 240.0f &&
              qp_format_max(QP_DTYPE_F8_E5M2) == 57344.0f && qp_format_max(QP_DTYPE_F6_E2M3) == 7.5f &&
              qp_format_max(QP_DTYPE_F6_E3M2) == 28.0f && qp_format_max(QP_DTYPE_F4_E2M1) == 6.0f &&
              qp_format_max(QP_DTYPE_E8M0) == 0x1p127f && qp_format_max(QP_DTYPE_F32) == FLT_MAX &&
              qp_format_max(QP_DTYPE_I8) == 0.0f,
          "qp_format_max");
    CHECK(qp_format_encode(QP_DTYPE_I8, 1.0f) == 0 && qp_format_encode(QP_DTYPE_NONE, 1.0f) == 0 &&
              qp_format_encode((qp_dtype)999, 1.0f) == 0, "encode of non-float dtype is 0");
    CHECK(isnan(qp_format_decode(QP_DTYPE_I8, 1)), "decode of non-float dtype is NaN");
    CHECK(qp_format_encode(QP_DTYPE_F32, -1.5f) == 0xBFC00000u && qp_format_decode(QP_DTYPE_F32, 0x3F800000u) == 1.0f,
          "F32 is a bit cast");
    CHECK(qp_format_decode(QP_DTYPE_F4_E2M1, 0xF3) == 1.5f, "decode uses only the low bits");
    CHECK(isnan(qp_fp16_round(NAN)) && qp_fp16_round(65520.0f) == INFINITY && qp_fp16_round(1.0f + 0x1p-11f) == 1.0f &&
              qp_bf16_round(1.0f + 0x1p-8f) == 1.0f && qp_bf16_round(nextafterf(1.0f + 0x1p-8f, 2.0f)) == 1.0f + 0x1p-7f,
          "qp_fp16_round / qp_bf16_round");

    float x[6] = {1.0f, -2.0f, 0.3f, 500.0f, NAN, -INFINITY};
    uint8_t b8[6];
    uint16_t b16[6];
    float y[6];
    CHECK(qp_format_encode_array(QP_DTYPE_F8_E4M3FN, x, 6, b8) == QP_OK, "encode_array fp8");
    for (int i = 0; i < 6; i++) CHECK(b8[i] == qp_format_encode(QP_DTYPE_F8_E4M3FN, x[i]), "encode_array fp8 [%d]", i);
    CHECK(qp_format_decode_array(QP_DTYPE_F8_E4M3FN, b8, 6, y) == QP_OK, "decode_array fp8");
    for (int i = 0; i < 6; i++) CHECK(same(y[i], qp_format_decode(QP_DTYPE_F8_E4M3FN, b8[i])), "decode_array fp8 [%d]", i);
    CHECK(qp_format_encode_array(QP_DTYPE_BF16, x, 6, b16) == QP_OK, "encode_array bf16");
    for (int i = 0; i < 6; i++) CHECK(b16[i] == qp_format_encode(QP_DTYPE_BF16, x[i]), "encode_array bf16 [%d]", i);
    CHECK(qp_format_decode_array(QP_DTYPE_F16, b16, 6, y) == QP_OK, "decode_array f16");
    CHECK(qp_format_encode_array(QP_DTYPE_F4_E2M1, x, 6, b8) == QP_OK && b8[3] == 0x7, "encode_array fp4 codes");
    CHECK(qp_format_encode_array(QP_DTYPE_F32, x, 6, b8) == QP_ERR_INVALID_ARGUMENT, "encode_array F32 rejected");
    CHECK(qp_format_encode_array(QP_DTYPE_I8, x, 6, b8) == QP_ERR_INVALID_ARGUMENT, "encode_array I8 rejected");
    CHECK(qp_format_encode_array(QP_DTYPE_F16, NULL, 6, b16) == QP_ERR_INVALID_ARGUMENT, "encode_array NULL in");
    CHECK(qp_format_encode_array(QP_DTYPE_F16, x, 6, NULL) == QP_ERR_INVALID_ARGUMENT, "encode_array NULL out");
    CHECK(qp_format_decode_array(QP_DTYPE_F16, NULL, 6, y) == QP_ERR_INVALID_ARGUMENT, "decode_array NULL in");
    CHECK(qp_format_decode_array(QP_DTYPE_NONE, b16, 6, y) == QP_ERR_INVALID_ARGUMENT, "decode_array NONE");
}

/* -- Packing (docs/semantics.md §5, §17) ------------------------------------ */

static void test_packing(long *n_packed) {
    /* Hand-checked examples. */
    uint8_t c4[4] = {1, 2, 0xF, 0x0}, p4[2], u4[4];
    CHECK(qp_pack_fp4(c4, 4, p4) == QP_OK && p4[0] == 0x21 && p4[1] == 0x0F, "fp4 pack example");
    uint8_t c6[4] = {1, 2, 3, 4}, p6[3], u6[4];
    /* W = 4<<18 | 3<<12 | 2<<6 | 1 = 0x103081 -> 81 30 10 */
    CHECK(qp_pack_fp6(c6, 4, p6) == QP_OK && p6[0] == 0x81 && p6[1] == 0x30 && p6[2] == 0x10, "fp6 pack example");
    uint8_t ci[8] = {0, 1, 2, 3, 4, 5, 6, 7}, ui[8];
    int32_t w;
    CHECK(qp_pack_int4_quark(ci, 1, 8, QP_PACK_ORDER, &w) == QP_OK && (uint32_t)w == 0x76543210u, "int4 order example");
    /* reorder: column j in nibble [0,4,1,5,2,6,3,7][j] */
    CHECK(qp_pack_int4_quark(ci, 1, 8, QP_PACK_REORDER, &w) == QP_OK && (uint32_t)w == 0x75316420u,
          "int4 reorder example (0x%08x)", (unsigned)w);
    uint8_t cf[3] = {0xF, 0x9, 0x8};
    /* N = 3: col0 -> nibble 0, col1 -> nibble 4, col2 -> nibble 1, padding 0 */
    CHECK(qp_pack_int4_quark(cf, 1, 3, QP_PACK_REORDER, &w) == QP_OK && (uint32_t)w == 0x0009008Fu,
          "int4 padding example (0x%08x)", (unsigned)w);
    /* Bad arguments: nothing written. */
    uint8_t bad4[2] = {0x10, 0};
    p4[0] = 0xAA;
    CHECK(qp_pack_fp4(bad4, 2, p4) == QP_ERR_INVALID_ARGUMENT && p4[0] == 0xAA, "fp4 code > 15 rejected");
    CHECK(qp_pack_fp4(c4, 3, p4) == QP_ERR_INVALID_ARGUMENT, "fp4 odd n");
    CHECK(qp_pack_fp4(NULL, 2, p4) == QP_ERR_INVALID_ARGUMENT && qp_unpack_fp4(p4, 2, NULL) == QP_ERR_INVALID_ARGUMENT,
          "fp4 NULL");
    uint8_t bad6[4] = {0x40, 0, 0, 0};
    CHECK(qp_pack_fp6(bad6, 4, p6) == QP_ERR_INVALID_ARGUMENT, "fp6 code > 63 rejected");
    CHECK(qp_pack_fp6(c6, 6, p6) == QP_ERR_INVALID_ARGUMENT && qp_unpack_fp6(p6, 2, u6) == QP_ERR_INVALID_ARGUMENT,
          "fp6 n %% 4");
    CHECK(qp_pack_int4_quark(ci, 1, 8, QP_PACK_MARLIN_QQQ, &w) == QP_ERR_INVALID_ARGUMENT &&
              qp_pack_int4_quark(ci, 1, 8, QP_PACK_NONE, &w) == QP_ERR_INVALID_ARGUMENT &&
              qp_pack_int4_quark(ci, -1, 8, QP_PACK_ORDER, &w) == QP_ERR_INVALID_ARGUMENT &&
              qp_pack_int4_quark(ci, 1, -8, QP_PACK_ORDER, &w) == QP_ERR_INVALID_ARGUMENT &&
              qp_pack_int4_quark(NULL, 1, 8, QP_PACK_ORDER, &w) == QP_ERR_INVALID_ARGUMENT &&
              qp_unpack_int4_quark(&w, 1, 8, QP_PACK_ORDER, NULL) == QP_ERR_INVALID_ARGUMENT,
          "int4 bad arguments");
    ci[5] = 16;
    CHECK(qp_pack_int4_quark(ci, 1, 8, QP_PACK_ORDER, &w) == QP_ERR_INVALID_ARGUMENT, "int4 code > 15 rejected");
    CHECK(qp_pack_fp4(c4, 4, p4) == QP_OK && qp_unpack_fp4(p4, 4, u4) == QP_OK && u4[0] == 1 && u4[1] == 2 && u4[2] == 0xF && u4[3] == 0, "fp4 unpack example");
    CHECK(qp_unpack_fp6(p6, 4, u6) == QP_OK && u6[0] == 1 && u6[1] == 2 && u6[2] == 3 && u6[3] == 4, "fp6 unpack example");
    int32_t wr = (int32_t)0x75316420;
    CHECK(qp_unpack_int4_quark(&wr, 1, 8, QP_PACK_REORDER, ui) == QP_OK && ui[0] == 0 && ui[1] == 1 && ui[7] == 7 &&
              ui[4] == 4, "int4 reorder unpack example");

    /* Random round trips. */
    enum { NR = 4096 };
    static uint8_t codes[NR], back[NR], packed[NR];
    static int32_t words[NR];
    for (int t = 0; t < 50; t++) {
        size_t n = 4 * (1 + rnd32() % (NR / 4));
        for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)(rnd32() & 0xF);
        CHECK(qp_pack_fp4(codes, n, packed) == QP_OK && qp_unpack_fp4(packed, n, back) == QP_OK &&
                  memcmp(codes, back, n) == 0, "fp4 round trip n=%zu", n);
        for (size_t i = 0; i < n / 2; i++)
            if (packed[i] != (uint8_t)(codes[2 * i] | codes[2 * i + 1] << 4)) {
                CHECK(0, "fp4 layout byte %zu", i);
                break;
            }
        for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)(rnd32() & 0x3F);
        CHECK(qp_pack_fp6(codes, n, packed) == QP_OK && qp_unpack_fp6(packed, n, back) == QP_OK &&
                  memcmp(codes, back, n) == 0, "fp6 round trip n=%zu", n);
        /* fp6 layout: bit 6j+b of the little-endian 3-byte word is bit b of v_j */
        for (size_t i = 0; i < n; i++) {
            size_t bit0 = (i / 4) * 24 + (i % 4) * 6;
            unsigned v = 0;
            for (int b = 0; b < 6; b++) v |= ((packed[(bit0 + (size_t)b) / 8] >> ((bit0 + (size_t)b) % 8)) & 1u) << b;
            if (v != codes[i]) {
                CHECK(0, "fp6 layout element %zu", i);
                break;
            }
        }
        int K = 1 + (int)(rnd32() % 16), N = 1 + (int)(rnd32() % 64);
        for (int i = 0; i < K * N; i++) codes[i] = (uint8_t)(rnd32() & 0xF);
        for (int m = 0; m < 2; m++) {
            qp_pack_method pm = m ? QP_PACK_REORDER : QP_PACK_ORDER;
            static const int P[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 4, 1, 5, 2, 6, 3, 7}};
            int W = (N + 7) / 8;
            CHECK(qp_pack_int4_quark(codes, K, N, pm, words) == QP_OK &&
                      qp_unpack_int4_quark(words, K, N, pm, back) == QP_OK &&
                      memcmp(codes, back, (size_t)(K * N)) == 0, "int4 %s round trip K=%d N=%d", m ? "reorder" : "order", K, N);
            for (int k = 0; k < K; k++)
                for (int c = 0; c < W; c++) {
                    uint32_t u = (uint32_t)words[k * W + c], want = 0;
                    for (int j = 0; j < 8 && 8 * c + j < N; j++) want |= (uint32_t)codes[k * N + 8 * c + j] << (4 * P[m][j]);
                    if (u != want) CHECK(0, "int4 layout k=%d c=%d 0x%08x want 0x%08x", k, c, u, want);
                }
        }
        *n_packed += 3;
    }
}

/* -- Golden vectors (ml_dtypes) --------------------------------------------- */

static qp_dtype dtype_of(const char *name) {
    static const qp_dtype all[] = {QP_DTYPE_F16, QP_DTYPE_BF16, QP_DTYPE_F8_E4M3FN, QP_DTYPE_F8_E4M3FNUZ,
                                   QP_DTYPE_F8_E5M2, QP_DTYPE_F6_E2M3, QP_DTYPE_F6_E3M2, QP_DTYPE_F4_E2M1,
                                   QP_DTYPE_E8M0};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(dname(all[i]), name) == 0) return all[i];
    return QP_DTYPE_NONE;
}

/* Column order of the "enc" records (gen_formats.py FORMATS). */
static const char *const ENC_COLS[9] = {"f16", "bf16", "e4m3fn", "e4m3fnuz", "e5m2", "e2m3", "e3m2", "e2m1", "e8m0"};

static int test_golden(const char *path, long *n_dec, long *n_enc) {
    FILE *fp = fopen(path, "r");
    if (!fp) {
        printf("FAIL cannot open golden file %s\n", path);
        n_fail++;
        return 0;
    }
    char line[512];
    long lineno = 0;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok[12];
        int nt = 0;
        for (char *t = strtok(line, " \t\r\n"); t && nt < 12; t = strtok(NULL, " \t\r\n")) tok[nt++] = t;
        if (nt == 0) continue;
        if (strcmp(tok[0], "dec") == 0 && nt == 4) {
            qp_dtype dt = dtype_of(tok[1]);
            unsigned code = (unsigned)strtoul(tok[2], NULL, 16);
            float want = strcmp(tok[3], "nan") == 0 ? NAN : bitsf((uint32_t)strtoul(tok[3], NULL, 16));
            float got = qp_format_decode(dt, code);
            CHECK(dt != QP_DTYPE_NONE && same(got, want), "golden line %ld: decode %s 0x%x = %a want %a", lineno,
                  tok[1], code, got, want);
            (*n_dec)++;
        } else if (strcmp(tok[0], "enc") == 0 && nt == 11) {
            float x = bitsf((uint32_t)strtoul(tok[1], NULL, 16));
            for (int c = 0; c < 9; c++) {
                qp_dtype dt = dtype_of(ENC_COLS[c]);
                unsigned want = (unsigned)strtoul(tok[2 + c], NULL, 16);
                unsigned got = qp_format_encode(dt, x);
                CHECK(got == want, "golden line %ld: encode %s(%a [%s]) = 0x%x want 0x%x", lineno, ENC_COLS[c], x,
                      tok[1], got, want);
                (*n_enc)++;
            }
        } else {
            CHECK(0, "golden line %ld: malformed record", lineno);
        }
    }
    fclose(fp);
    return 1;
}

int main(int argc, char **argv) {
    const char *golden = argc > 1 ? argv[1] : NULL;
    const char *seed_env = getenv("QP_TEST_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 20240503u;
    rng_state = seed;
    printf("test_formats: seed %llu (set QP_TEST_SEED to change)\n", (unsigned long long)seed);

    long n_codes = 0, n_ties = 0, n_inputs = 0, n_packed = 0, n_dec = 0, n_enc = 0;
    test_small_decode_and_roundtrip(&n_codes);
    test_e8m0(&n_codes);
    test_small_ties(&n_ties);
    test_small_specials();
    test_small_sweep(&n_inputs);
    test_16bit(&n_codes, &n_ties);
    test_16bit_sweep(&n_inputs);
    test_api();
    test_packing(&n_packed);
    if (golden)
        test_golden(golden, &n_dec, &n_enc);
    else {
        printf("FAIL no golden file given (argv[1])\n");
        n_fail++;
    }
    printf("test_formats: %ld codes decoded+round-tripped, %ld tie midpoints, %ld swept/random encodes, "
           "%ld packing round trips, golden %ld decode + %ld encode values\n",
           n_codes, n_ties, n_inputs, n_packed, n_dec, n_enc);
    printf("test_formats: %ld checks, %ld failed\n", n_checks, n_fail);
    return n_fail ? 1 : 0;
}
