/* int8 activation quantizers: hand-computed cases, the kernel's edge cases
 * (docs/semantics.md §12), and random rows against an independent double-precision
 * formulation (equal except where fp32 rounding sits on a .5 tie). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 7u;
    printf("seed %u\n", st);
    int8_t q[8];
    float s[2];
    int32_t zp[2];
    /* static symmetric: division, ties to even, saturation, NaN → 0 */
    float x1[8] = {0.5f, 1.5f, 2.5f, -0.5f, 1000.0f, -1000.0f, NAN, -INFINITY};
    CHECK(qp_quant_int8_static(NULL, x1, 1, 8, 1.0f, 0, 1, q) == QP_OK, "static");
    int8_t w1[8] = {0, 2, 2, 0, 127, -128, 0, -128};
    CHECK(!memcmp(q, w1, 8), "static sym %d %d %d %d %d %d %d %d", q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]);
    /* x / s vs x * (1/s) differ: 0.3f/0.1f... pick s with inexact reciprocal */
    float xs[1] = {3.0f}, sc = 3.0f / 2.5f;   /* 3 / 1.2 = 2.5 exactly? not in fp32: shows division is used */
    CHECK(qp_quant_int8_static(NULL, xs, 1, 1, sc, 0, 1, q) == QP_OK && q[0] == (int8_t)nearbyintf(3.0f / sc), "division");
    /* static asymmetric: x*inv rounded, plus azp, saturated */
    float x2[4] = {0.0f, 1.0f, -1.0f, 200.0f};
    CHECK(qp_quant_int8_static(NULL, x2, 1, 4, 0.5f, -10, 0, q) == QP_OK, "asym");
    CHECK(q[0] == -10 && q[1] == -8 && q[2] == -12 && q[3] == 127, "asym %d %d %d %d", q[0], q[1], q[2], q[3]);
    /* dynamic symmetric: x * (127/absmax); zero row → scale 0, q 0 */
    float x3[8] = {1.0f, -2.0f, 0.5f, 2.0f, 0, 0, 0, 0};
    CHECK(qp_quant_int8_dynamic(NULL, x3, 2, 4, 1, q, s, NULL) == QP_OK, "dyn");
    CHECK(s[0] == 2.0f / 127.0f && s[1] == 0.0f, "scales %g %g", s[0], s[1]);
    CHECK(q[0] == (int8_t)nearbyintf(1.0f * (127.0f / 2.0f)) && q[1] == -127 && q[3] == 127 && q[4] == 0 && q[7] == 0,
          "dyn sym %d %d %d", q[0], q[1], q[3]);
    /* dynamic asymmetric: constant row → every q is -1; zero row → 0, azp 0 */
    float x4[8] = {3.0f, 3.0f, 3.0f, 3.0f, 0, 0, 0, 0};
    CHECK(qp_quant_int8_dynamic(NULL, x4, 2, 4, 0, q, s, zp) == QP_OK, "dyn asym");
    CHECK(q[0] == -1 && q[3] == -1 && zp[0] == INT32_MIN && s[0] == 0.0f, "constant row %d zp %d", q[0], zp[0]);
    CHECK(q[4] == 0 && q[7] == 0 && zp[1] == 0, "zero row %d zp %d", q[4], zp[1]);
    float x5[4] = {-3.0f, -3.0f, -3.0f, -3.0f};
    CHECK(qp_quant_int8_dynamic(NULL, x5, 1, 4, 0, q, s, zp) == QP_OK && q[0] == -1 && zp[0] == INT32_MAX, "neg const");
    /* all-negative row: min/max start at ±FLT_MAX, not FLT_MIN (docs/semantics.md §12) */
    float x6[4] = {-4.0f, -1.0f, -2.0f, -3.0f};
    CHECK(qp_quant_int8_dynamic(NULL, x6, 1, 4, 0, q, s, zp) == QP_OK && s[0] == 3.0f / 255.0f && q[0] == -128 &&
              q[1] == 127, "all negative: s %g q %d %d", s[0], q[0], q[1]);

    /* random rows vs a double formulation of the same rules */
    enum { M = 64, K = 257 };
    float *x = malloc(sizeof(float) * M * K);
    int8_t *qq = malloc(M * K);
    float sc2[M];
    int32_t az[M];
    for (int i = 0; i < M * K; i++) x[i] = frand() * (float)(1 + i % 7) * 3.0f;
    qp_quant_int8_dynamic(NULL, x, M, K, 1, qq, sc2, NULL);
    int mismatch = 0;
    for (int r = 0; r < M; r++) {
        double amax = 0;
        for (int i = 0; i < K; i++) amax = fmax(amax, fabs(x[r * K + i]));
        for (int i = 0; i < K; i++) {
            double v = x[r * K + i] * (127.0 / amax);
            long want = lrint(v);
            if (want > 127) want = 127;
            if (want < -128) want = -128;
            if (qq[r * K + i] != want && fabs(fabs(v - floor(v)) - 0.5) > 1e-4) mismatch++;
        }
    }
    CHECK(mismatch == 0, "%d dynamic-sym mismatches", mismatch);
    qp_quant_int8_dynamic(NULL, x, M, K, 0, qq, sc2, az);
    mismatch = 0;
    for (int r = 0; r < M; r++) {
        double mn = 1e30, mx = -1e30;
        for (int i = 0; i < K; i++) { mn = fmin(mn, x[r * K + i]); mx = fmax(mx, x[r * K + i]); }
        for (int i = 0; i < K; i++) {
            double dq = ((double)qq[r * K + i] - az[r]) * sc2[r];
            if (fabs(dq - x[r * K + i]) > sc2[r] * 0.5 * 1.001 + 1e-6 && qq[r * K + i] != -128 && qq[r * K + i] != 127) mismatch++;
        }
    }
    CHECK(mismatch == 0, "%d dynamic-asym values off by more than half a step", mismatch);
    CHECK(qp_quant_int8_dynamic(NULL, x, M, K, 0, qq, sc2, NULL) == QP_ERR_INVALID_ARGUMENT, "asym needs azp");
    free(x);
    free(qq);
    return tu_finish("test_quant_int8");
}
