/* fp8 activation quantizers: the kernel's special cases (NaN → +448,
 * zero tensors, minimum per-token scale, UE8M0 scales) and random inputs
 * against the e4m3 error bound (3 mantissa bits: relative error <= 2^-4,
 * absolute <= 2^-10 * s below the normal range). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }
static float dec(uint8_t c) { return qp_format_decode(QP_DTYPE_F8_E4M3FN, c); }

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 11u;
    printf("seed %u\n", st);
    uint8_t q[8];
    float s[4];
    float x1[6] = {1.0f, 896.0f, NAN, -INFINITY, -1.0f, 0.0f};
    CHECK(qp_quant_fp8_static(NULL, x1, 6, 1.0f, q) == QP_OK, "static");
    CHECK(q[0] == 0x38 && q[1] == 0x7E && q[2] == 0x7E && q[3] == 0xFE && q[4] == 0xB8 && q[5] == 0x00,
          "static %02x %02x %02x %02x %02x %02x", q[0], q[1], q[2], q[3], q[4], q[5]);
    float z[4] = {0, 0, 0, 0};
    CHECK(qp_quant_fp8_dynamic_tensor(NULL, z, 4, q, s) == QP_OK && s[0] == 0.0f && q[0] == 0x7E && q[3] == 0x7E,
          "zero tensor: s %g q %02x", s[0], q[0]);
    float x2[4] = {448.0f, -224.0f, 1.0f, 0.0f};
    CHECK(qp_quant_fp8_dynamic_tensor(NULL, x2, 4, q, s) == QP_OK && s[0] == 1.0f && q[0] == 0x7E && q[1] == 0xF6,
          "dyn tensor s %g %02x %02x", s[0], q[0], q[1]);
    float tiny[4] = {1e-9f, -1e-9f, 0, 0};
    CHECK(qp_quant_fp8_dynamic_token(NULL, tiny, 1, 4, 0, q, s) == QP_OK && s[0] == 1.0f / (448.0f * 512.0f),
          "min scale %g", s[0]);
    float x3[4] = {1000.0f, 10.0f, 0, 0};
    CHECK(qp_quant_fp8_dynamic_token(NULL, x3, 1, 4, 500.0f, q, s) == QP_OK && s[0] == 500.0f / 448.0f && q[0] == 0x7E,
          "scale_ub %g", s[0]);
    /* UE8M0: 1344/448 = 3 rounds up to 4; an all-zero group clamps to 1e-10 first, then 2^ceil(log2) = 2^-33 */
    float x4[8] = {1344.0f, 1.0f, 0, 0, 0, 0, 0, 0};
    float gs[2];
    CHECK(qp_quant_fp8_group(NULL, x4, 1, 8, 4, 1, q, gs) == QP_OK && gs[0] == 4.0f && gs[1] == ldexpf(1.0f, -33), "ue8m0 scales %g %g", gs[0], gs[1]);
    CHECK(qp_quant_fp8_group(NULL, x4, 1, 8, 3, 1, q, gs) == QP_ERR_INVALID_ARGUMENT, "group must divide k");

    enum { M = 16, K = 384 };
    float *x = malloc(sizeof(float) * M * K), sc[M * 3];
    uint8_t *qq = malloc(M * K);
    for (int i = 0; i < M * K; i++) x[i] = frand() * powf(2.0f, (float)(i % 9) - 4.0f);
    int bad = 0;
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 0) qp_quant_fp8_dynamic_token(NULL, x, M, K, 0, qq, sc);
        else qp_quant_fp8_group(NULL, x, M, K, 128, mode == 2, qq, sc);
        for (int r = 0; r < M; r++)
            for (int i = 0; i < K; i++) {
                float sv = mode == 0 ? sc[r] : sc[r * 3 + i / 128];
                double v = dec(qq[r * K + i]) * (double)sv, t = x[r * K + i];
                if (fabs(v - t) > fmax(fabs(t) * 0.0625, ldexp(sv, -10)) * 1.0001) bad++;
            }
    }
    CHECK(bad == 0, "%d values outside the e4m3 bound", bad);
    free(x);
    free(qq);
    return tu_finish("test_quant_fp8");
}
