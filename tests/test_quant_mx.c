/* MX (docs/semantics.md §6) and NVFP4 (docs/semantics.md §8) quantizers: hand-checked Quark
 * "even" shared scales, saturation, NaN/inf, bad shapes, and seeded random
 * data against each format's rounding bound (half an ulp of the element
 * grid, or the distance to +-max once saturated). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static uint8_t sc(qp_dtype d, float a) {
    uint8_t s = 0xAA;
    if (qp_mx_shared_scale(d, a, &s) != QP_OK) return 0xAA;
    return s;
}

typedef struct { qp_dtype d; int mbits, bias; float max; const char *name; } fmt;
static const fmt FMTS[4] = {{QP_DTYPE_F4_E2M1, 1, 1, 6.0f, "e2m1"},
                            {QP_DTYPE_F6_E3M2, 2, 3, 28.0f, "e3m2"},
                            {QP_DTYPE_F6_E2M3, 3, 1, 7.5f, "e2m3"},
                            {QP_DTYPE_F8_E4M3FN, 3, 7, 448.0f, "e4m3fn"}};

/* the largest |q - y| for y quantized by RNE + saturation */
static double bound(const fmt *f, double y) {
    y = fabs(y);
    if (y > f->max) return y - f->max;
    double minnorm = ldexp(1.0, 1 - f->bias);
    return y >= minnorm ? ldexp(y, -(f->mbits + 1)) : ldexp(1.0, 1 - f->bias - f->mbits - 1);
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 29u;
    printf("seed %u\n", st);
    qp_context *ctx = NULL;
    CHECK(qp_context_create(&ctx) == QP_OK, "context");

    /* --- shared scales (docs/semantics.md §6) --- */
    const qp_dtype F4 = QP_DTYPE_F4_E2M1, E3 = QP_DTYPE_F6_E3M2, E2 = QP_DTYPE_F6_E2M3, F8 = QP_DTYPE_F8_E4M3FN;
    CHECK(sc(F4, 1.0f) == 125 && sc(F4, 1.74f) == 125 && sc(F4, 1.75f) == 126 && sc(F4, 1.9999f) == 126,
          "fp4 1.75 threshold: %u %u %u %u", sc(F4, 1.0f), sc(F4, 1.74f), sc(F4, 1.75f), sc(F4, 1.9999f));
    CHECK(sc(F4, 6.0f) == 127 && sc(F4, 6.99f) == 127 && sc(F4, 7.0f) == 128 && sc(F4, -7.0f) == 128,
          "fp4 [1.75*4, 8) -> 8: %u %u %u", sc(F4, 6.0f), sc(F4, 6.99f), sc(F4, 7.0f));
    CHECK(sc(F4, 0.4375f) == 124 && sc(F4, 0.43f) == 123, "fp4 n=-2: %u %u", sc(F4, 0.4375f), sc(F4, 0.43f));
    CHECK(sc(E3, 1.87f) == 123 && sc(E3, 1.875f) == 124, "e3m2 1.875: %u %u", sc(E3, 1.87f), sc(E3, 1.875f));
    CHECK(sc(E3, 28.0f) == 127 && sc(E3, 30.0f) == 128, "e3m2 28/30: %u %u", sc(E3, 28.0f), sc(E3, 30.0f));
    CHECK(sc(E2, 1.93f) == 125 && sc(E2, 1.9375f) == 126, "e2m3 1.9375: %u %u", sc(E2, 1.93f), sc(E2, 1.9375f));
    CHECK(sc(F8, 1.93f) == 119 && sc(F8, 1.9375f) == 120, "e4m3 1.9375: %u %u", sc(F8, 1.93f), sc(F8, 1.9375f));
    CHECK(sc(F8, 448.0f) == 127 && sc(F8, 496.0f) == 128, "e4m3 448/496: %u %u", sc(F8, 448.0f), sc(F8, 496.0f));
    for (int i = 0; i < 4; i++) {
        qp_dtype d = FMTS[i].d;
        CHECK(sc(d, 0.0f) == 0 && sc(d, -0.0f) == 0 && sc(d, 1e-45f) == 0, "%s zero block -> 2^-126 -> clamp -127", FMTS[i].name);
        CHECK(sc(d, NAN) == 255, "%s NaN -> 255", FMTS[i].name);
        CHECK(sc(d, INFINITY) == 254 && sc(d, 3.4e38f) == 254, "%s inf / FLT_MAX -> 254: %u %u", FMTS[i].name,
              sc(d, INFINITY), sc(d, 3.4e38f));
    }
    CHECK(sc(F4, ldexpf(1.0f, 127)) == 252, "fp4 2^127 -> %u", sc(F4, ldexpf(1.0f, 127)));
    uint8_t dummy;
    CHECK(qp_mx_shared_scale(QP_DTYPE_F16, 1.0f, &dummy) == QP_ERR_INVALID_ARGUMENT, "F16 is not an MX element");
    CHECK(qp_mx_shared_scale(QP_DTYPE_E8M0, 1.0f, &dummy) == QP_ERR_INVALID_ARGUMENT, "E8M0 is not an MX element");
    CHECK(qp_mx_shared_scale(F4, 1.0f, NULL) == QP_ERR_INVALID_ARGUMENT, "NULL out");

    /* --- saturation, NaN, inf (one block of 32 per format) --- */
    float xb[32];
    uint8_t qb[32], sb[2];
    float ob[32];
    const float sat_in[4] = {6.9f, 29.9f, 7.7f, 495.0f};
    const uint8_t sat_code[4] = {0x07, 0x1F, 0x1F, 0x7E}, neg_bit[4] = {0x08, 0x20, 0x20, 0x80};
    for (int f = 0; f < 4; f++) {
        memset(xb, 0, sizeof xb);
        xb[0] = sat_in[f];
        xb[1] = -sat_in[f];
        xb[2] = 1.0f;
        CHECK(qp_quant_mx(ctx, FMTS[f].d, xb, 1, 32, qb, sb) == QP_OK, "%s quant", FMTS[f].name);
        CHECK(sb[0] == 127 && qb[0] == sat_code[f] && qb[1] == (sat_code[f] | neg_bit[f]) && qb[3] == 0,
              "%s saturation: scale %u codes %02x %02x", FMTS[f].name, sb[0], qb[0], qb[1]);
        CHECK(qp_dequant_mx(ctx, FMTS[f].d, qb, sb, 1, 32, ob) == QP_OK && ob[0] == FMTS[f].max &&
                  ob[1] == -FMTS[f].max && ob[2] == 1.0f && ob[3] == 0.0f,
              "%s saturated dequant %g %g %g", FMTS[f].name, ob[0], ob[1], ob[2]);
        /* NaN anywhere: scale NaN (255), the whole block dequantizes to NaN */
        xb[5] = NAN;
        CHECK(qp_quant_mx(ctx, FMTS[f].d, xb, 1, 32, qb, sb) == QP_OK && sb[0] == 255, "%s NaN block scale %u",
              FMTS[f].name, sb[0]);
        qp_dequant_mx(ctx, FMTS[f].d, qb, sb, 1, 32, ob);
        CHECK(isnan(ob[0]) && isnan(ob[5]) && isnan(ob[31]), "%s NaN block dequant %g", FMTS[f].name, ob[0]);
        /* inf: scale 2^127 (254); inf saturates to max, the rest go to 0 */
        xb[5] = -INFINITY;
        CHECK(qp_quant_mx(ctx, FMTS[f].d, xb, 1, 32, qb, sb) == QP_OK && sb[0] == 254 &&
                  qb[5] == (sat_code[f] | neg_bit[f]) && (qb[0] & ~neg_bit[f]) == 0,
              "%s inf block scale %u code %02x", FMTS[f].name, sb[0], qb[5]);
        qp_dequant_mx(ctx, FMTS[f].d, qb, sb, 1, 32, ob);
        CHECK(isinf(ob[5]) && ob[5] < 0 && ob[0] == 0.0f, "%s inf dequant %g", FMTS[f].name, ob[5]);
    }
    /* fp4 ties: absmax 7 -> e = 1: 7/2 = 3.5 ties to 4 (code 6), 5/2 = 2.5 ties to 2 (code 4) */
    memset(xb, 0, sizeof xb);
    xb[0] = 7.0f;
    xb[1] = 5.0f;
    xb[2] = -0.5f;
    qp_quant_mx(ctx, F4, xb, 1, 32, qb, sb);
    CHECK(sb[0] == 128 && qb[0] == 6 && qb[1] == 4 && qb[2] == 8, "fp4 ties: %u %x %x %x", sb[0], qb[0], qb[1], qb[2]);

    /* --- shape and dtype errors --- */
    float x48[48] = {0};
    uint8_t q48[48], s48[2];
    CHECK(qp_quant_mx(ctx, F4, x48, 1, 48, q48, s48) == QP_ERR_INVALID_ARGUMENT, "k=48");
    CHECK(strstr(qp_last_error(ctx), "multiple of the MX block size (32)") != NULL, "msg: %s", qp_last_error(ctx));
    CHECK(qp_dequant_mx(ctx, F4, q48, s48, 1, 48, x48) == QP_ERR_INVALID_ARGUMENT, "dequant k=48");
    CHECK(qp_quant_mx(ctx, QP_DTYPE_F8_E5M2, x48, 1, 32, q48, s48) == QP_ERR_INVALID_ARGUMENT, "e5m2 not handled");
    CHECK(qp_quant_mx(NULL, F4, NULL, 1, 32, q48, s48) == QP_ERR_INVALID_ARGUMENT, "NULL x, NULL ctx");

    /* --- random round trips --- */
    enum { M = 8, K = 512 };
    float *x = malloc(sizeof(float) * M * K), *o = malloc(sizeof(float) * M * K);
    uint8_t *q = malloc(M * K), s[M * K / 16];
    for (int i = 0; i < M * K; i++) x[i] = frand() * ldexpf(1.0f, (i / 32) % 23 - 11) * (i % 7 == 0 ? 1.0f : frand());
    for (int f = 0; f < 4; f++) {
        int bad = 0, badscale = 0, sat = 0;
        CHECK(qp_quant_mx(ctx, FMTS[f].d, x, M, K, q, s) == QP_OK, "%s quant", FMTS[f].name);
        CHECK(qp_dequant_mx(ctx, FMTS[f].d, q, s, M, K, o) == QP_OK, "%s dequant", FMTS[f].name);
        for (int b = 0; b < M * K / 32; b++) {
            float a = 0;
            for (int i = 0; i < 32; i++) a = fmaxf(a, fabsf(x[b * 32 + i]));
            if (s[b] != sc(FMTS[f].d, a)) badscale++;
            for (int i = 0; i < 32; i++) {
                double t = x[b * 32 + i], y = ldexp(t, 127 - s[b]);
                if (fabs(y) > FMTS[f].max) sat++;
                if (fabs(o[b * 32 + i] - t) > ldexp(bound(&FMTS[f], y), s[b] - 127) * (1 + 1e-9)) bad++;
                if (o[b * 32 + i] != ldexp(qp_format_decode(FMTS[f].d, q[b * 32 + i]), s[b] - 127)) bad++;
            }
        }
        printf("%s: %d values, %d saturated, %d outside the bound, %d scale mismatches\n", FMTS[f].name, M * K, sat,
               bad, badscale);
        CHECK(bad == 0 && badscale == 0, "%s: %d values outside the bound, %d bad scales", FMTS[f].name, bad, badscale);
    }

    /* --- NVFP4 (docs/semantics.md §8) --- */
    /* g = 1, vmax 6: sf = 1 (0x38), out_scale 1; 2.5 ties to 2, -0.25 -> -0 */
    float xn[32] = {6.0f, 2.5f, -0.25f, 0.75f, 5.0f, -6.0f};
    uint8_t qn[32], sn[2];
    CHECK(qp_quant_nvfp4(ctx, xn, 1, 32, 1.0f, qn, sn) == QP_OK, "nvfp4 hand");
    CHECK(sn[0] == 0x38 && qn[0] == 7 && qn[1] == 4 && qn[2] == 8 && qn[3] == 2 && qn[4] == 6 && qn[5] == 15,
          "nvfp4 hand: sf %02x codes %x %x %x %x %x %x", sn[0], qn[0], qn[1], qn[2], qn[3], qn[4], qn[5]);
    CHECK(sn[1] == 0 && qn[16] == 0 && qn[31] == 0, "nvfp4 zero block: sf %02x code %x", sn[1], qn[16]);
    float gamax = 0;
    for (int i = 0; i < M * K; i++) gamax = fmaxf(gamax, fabsf(x[i]));
    float g = 448.0f * 6.0f / gamax;
    memset(x + 3 * K + 64, 0, 16 * sizeof(float)); /* one all-zero block */
    CHECK(qp_quant_nvfp4(ctx, x, M, K, g, q, s) == QP_OK, "nvfp4 random");
    int bad = 0, subn = 0;
    for (int b = 0; b < M * K / 16; b++) {
        double sff = qp_format_decode(QP_DTYPE_F8_E4M3FN, s[b]), sv = sff / g;
        if (sff < ldexp(1.0, -6)) subn++;
        for (int i = 0; i < 16; i++) {
            double t = x[b * 16 + i], v = qp_format_decode(QP_DTYPE_F4_E2M1, q[b * 16 + i]) * sv;
            /* sf <= 2^-10 encodes to e4m3 zero: the whole block becomes 0 */
            if (sff == 0) { if ((q[b * 16 + i] & 7) != 0 || fabs(t) * g / 6 > ldexp(1.0, -10) * 1.0001) bad++; continue; }
            double y = fabs(t) / sv, e = y > 6 ? y - 6 : fmax(0.25, 0.25 * y);
            if (fabs(v - t) > e * sv * 1.0001) bad++;
        }
    }
    CHECK(s[(3 * K + 64) / 16] == 0 && q[3 * K + 64] == 0 && q[3 * K + 79] == 0, "nvfp4 zero block in random data");
    printf("nvfp4: %d values, %d blocks with subnormal scales, %d outside the bound\n", M * K, subn, bad);
    CHECK(bad == 0, "nvfp4: %d values outside the fp4 bound", bad);
    CHECK(qp_quant_nvfp4(ctx, x, 1, 24, g, q, s) == QP_ERR_VALUE, "nvfp4 k=24");
    CHECK(strcmp(qp_last_error(ctx), "Input size per partition (24) must be divisible by group size (16)") == 0 ||
              strstr(qp_last_error(ctx), "Input size per partition (24) must be divisible by group size (16)"),
          "msg: %s", qp_last_error(ctx));
    CHECK(qp_quant_nvfp4(ctx, x, 1, 16, 0.0f, q, s) == QP_ERR_INVALID_ARGUMENT, "g = 0");

    free(x);
    free(o);
    free(q);
    qp_context_destroy(ctx);
    return tu_finish("test_quant_mx");
}
