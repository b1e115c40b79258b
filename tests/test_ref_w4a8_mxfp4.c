/* Reference W4A8 MXFP4-FP8 against unquantized activations times the exact
 * MXFP4 dequantization in fp64; the bound: e4m3 relative error 2^-4, three
 * roundings to the activation dtype, the fp8 subnormal floor s_in * 2^-10. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static int run(qp_dtype d, int M, int K, int N) {
    float *wf = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
    uint8_t *codes = malloc(N * K), *packed = malloc(N * K / 2), *sc = malloc(N * K / 32);
    size_t es = tu_esize(d);
    void *x = malloc(es * M * K), *y = malloc(es * M * N);
    for (int i = 0; i < N * K; i++) wf[i] = frand() * (1 + i % 4) * 0.05f;
    for (int i = 0; i < M * K; i++) tu_put(d, x, i, frand() * 3.0f);
    qp_quant_mx(NULL, QP_DTYPE_F4_E2M1, wf, N, K, codes, sc);
    qp_dequant_mx(NULL, QP_DTYPE_F4_E2M1, codes, sc, N, K, wd);
    qp_pack_fp4(codes, (size_t)N * K, packed);
    float s_in = 4.0f / 448.0f;
    qp_ref_w4a8_mxfp4_args a = {d, x, M, K, N, packed, sc, s_in, NULL};
    CHECK(qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y) == QP_OK, "forward");
    double u = tu_unit(d);
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0, wsum = 0;
            for (int k = 0; k < K; k++) {
                double xv = tu_get(d, x, (size_t)m * K + k), wv = wd[n * K + k];
                ref += xv * wv;
                mag += fabs(xv * wv);
                wsum += fabs(wv);
            }
            double got = tu_get(d, y, (size_t)m * N + n);
            if (fabs(got - ref) > mag * (ldexp(1, -4) + 4 * u) + wsum * s_in * ldexp(1, -10) + fabs(ref) * u + 1e-6) bad++;
        }
    free(wf); free(wd); free(codes); free(packed); free(sc); free(x); free(y);
    return bad;
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 17u;
    printf("seed %u\n", st);
    int Ms[] = {1, 3, 16};
    for (int i = 0; i < 3; i++) {
        CHECK(run(QP_DTYPE_F16, Ms[i], 128, 24) == 0, "fp16 M %d", Ms[i]);
        CHECK(run(QP_DTYPE_BF16, Ms[i], 96, 40) == 0, "bf16 M %d", Ms[i]);
        CHECK(run(QP_DTYPE_F32, Ms[i], 160, 32) == 0, "f32 M %d", Ms[i]);
    }
    /* hand case: 32 weights of 1.0 (code 2, scale 2^0), x = 1.0, s_in = 1 → 32 */
    uint8_t w[16], s[1] = {127};
    uint16_t x[32], y[1];
    for (int i = 0; i < 16; i++) w[i] = 0x22;
    for (int i = 0; i < 32; i++) x[i] = 0x3C00;
    qp_ref_w4a8_mxfp4_args a = {QP_DTYPE_F16, x, 1, 32, 1, w, s, 1.0f, NULL};
    CHECK(qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y) == QP_OK && y[0] == 0x5000, "32.0: %04x", y[0]);
    /* fp32: the dequant multiply is an fp32 one, and fp32 holds the e8m0
     * scale 2^-127 (code 0) as a subnormal where fp16's conversion flushes
     * it to 0: 32 weights of 6 * 2^-127, x = 1 -> 192 * 2^-127 */
    float xf[32], yf[1];
    for (int i = 0; i < 32; i++) xf[i] = 1.0f;
    uint8_t w6[16], s0[1] = {0};
    for (int i = 0; i < 16; i++) w6[i] = 0x77; /* 6.0, 6.0 */
    qp_ref_w4a8_mxfp4_args f = {QP_DTYPE_F32, xf, 1, 32, 1, w6, s0, 1.0f, NULL};
    CHECK(qp_ref_w4a8_mxfp4_fp8_forward(NULL, &f, yf) == QP_OK && yf[0] == 32 * 6 * 0x1p-127f, "f32 subnormal scale: %a", yf[0]);
    a.K = 16;
    CHECK(qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y) == QP_ERR_VALUE, "K %% 32");
    return tu_finish("test_ref_w4a8_mxfp4");
}
