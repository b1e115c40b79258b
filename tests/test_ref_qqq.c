/* QQQ: weight quantization, the reference forward against an independent
 * double-precision formulation, and the int8 reconstruction wrap rule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }
static uint16_t f16(float v) { return (uint16_t)qp_format_encode(QP_DTYPE_F16, v); }
static float d16(uint16_t b) { return qp_format_decode(QP_DTYPE_F16, b); }

static void wrap_rule(void) {
    CHECK(qp_ref_qqq_group_weight(3, f16(10.0f)) == 30, "plain");
    CHECK(qp_ref_qqq_group_weight(-8, f16(16.0f)) == -128, "-128 exact");
    CHECK(qp_ref_qqq_group_weight(7, f16(18.5f)) == -126, "129.5 → 130 wraps to -126: %d", qp_ref_qqq_group_weight(7, f16(18.5f)));
    CHECK(qp_ref_qqq_group_weight(-8, f16(16.25f)) == 124, "-130 → 124 (wraps, docs/semantics.md §11): %d", qp_ref_qqq_group_weight(-8, f16(16.25f)));
    CHECK(qp_ref_qqq_group_weight(1, f16(2.5f)) == 2, "tie 2.5 → 2");
    CHECK(qp_ref_qqq_group_weight(1, f16(3.5f)) == 4, "tie 3.5 → 4");
}

static void forward(int group, int M, int K, int N) {
    size_t kn = (size_t)K * N;
    float *w = malloc(sizeof(float) * kn), *sc = malloc(sizeof(float) * N), *scp = malloc(sizeof(float) * N);
    int8_t *q = malloc(kn);
    uint16_t *sg = malloc(sizeof(uint16_t) * (K / 128 + 1) * N), *sgp = malloc(sizeof(uint16_t) * (K / 128 + 1) * N);
    int32_t *B = malloc(sizeof(int32_t) * (K / 16) * 2 * N);
    uint16_t *x = malloc(sizeof(uint16_t) * M * K), *y = malloc(sizeof(uint16_t) * M * N), *yb = malloc(sizeof(uint16_t) * M * N);
    uint16_t *bias = malloc(sizeof(uint16_t) * N);
    for (size_t i = 0; i < kn; i++) w[i] = frand() * 0.05f * (float)(1 + (i % 5));
    for (int i = 0; i < M * K; i++) x[i] = f16(frand() * 4.0f);
    for (int n = 0; n < N; n++) bias[n] = f16(frand());
    CHECK(qp_qqq_quantize_weight(NULL, w, K, N, group, q, sc, sg) == QP_OK, "quantize");
    CHECK(qp_qqq_pack_weight(NULL, q, K, N, group, B) == QP_OK, "pack");
    CHECK(qp_qqq_permute_scales(NULL, sc, group == 128 ? sg : NULL, K, N, group, scp, group == 128 ? sgp : NULL) == QP_OK, "perm");
    CHECK(qp_ref_qqq_forward(NULL, x, M, K, N, group, B, scp, group == 128 ? sgp : NULL, NULL, y) == QP_OK, "forward");
    CHECK(qp_ref_qqq_forward(NULL, x, M, K, N, group, B, scp, group == 128 ? sgp : NULL, bias, yb) == QP_OK, "forward bias");
    /* quantized weights reconstruct the fp16 weights within the 4-bit step */
    int bad_w = 0;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)k * N + n;
            double deq = group == 128 ? (q[i] - 8) * (double)d16(sg[(k / 128) * N + n]) * sc[n] : 16.0 * q[i] * sc[n];
            double step = group == 128 ? d16(sg[(k / 128) * N + n]) * sc[n] : 16.0 * sc[n];
            /* half a step, plus the fp16 rounding of the scales (s_g, s_group = s_g/s_ch: 2^-11 each, times |q-8| <= 8) */
            /* per-channel: the quotient is rounded to fp16 (2^-8 at 4..8) before rne */
            double slack = group == 128 ? 8.0 * step * ldexp(1, -10) : step * (ldexp(1, -8) + 7 * ldexp(1, -11));
            if (fabs(deq - w[i]) > step * 0.5 + slack + 1e-7) bad_w++;
        }
    CHECK(bad_w == 0, "%d weights beyond half a step (group %d)", bad_w, group);
    /* independent formulation: int8 activations, w8 = 16q or rne((q-8)*s_group), double sums */
    float *xf = malloc(sizeof(float) * K), stok;
    int8_t *xq = malloc(K);
    int bad = 0, bad_bias = 0;
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) xf[k] = d16(x[m * K + k]);
        qp_quant_int8_dynamic(NULL, xf, 1, K, 1, xq, &stok, NULL);
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
                size_t i = (size_t)k * N + n;
                double w8 = group == 128 ? nearbyint((q[i] - 8) * (double)d16(sg[(k / 128) * N + n])) : 16.0 * q[i];
                acc += xq[k] * w8;
            }
            double ref = acc * sc[n] * stok;
            double got = d16(y[m * N + n]);
            /* fp16 rounding (2^-11 relative) + two fp32 products + subnormal floor */
            if (fabs(got - ref) > fabs(ref) * (ldexp(1, -11) + ldexp(1, -22)) + ldexp(1, -25)) bad++;
            uint16_t want_b = f16((float)((double)d16(y[m * N + n]) + d16(bias[n])));
            if (yb[m * N + n] != want_b && fabs(d16(yb[m * N + n]) - (d16(y[m * N + n]) + d16(bias[n]))) >
                                              ldexp(fabs(d16(want_b)), -11)) bad_bias++;
        }
    }
    CHECK(bad == 0, "%d outputs outside the bound (group %d, M %d K %d N %d)", bad, group, M, K, N);
    CHECK(bad_bias == 0, "%d bias outputs wrong", bad_bias);
    free(w); free(sc); free(scp); free(q); free(sg); free(sgp); free(B); free(x); free(y); free(yb); free(bias); free(xf); free(xq);
}

static void errors(void) {
    qp_context *ctx;
    qp_context_create(&ctx);
    float w[128 * 64] = {0}, sc[64];
    int8_t q[128 * 64];
    uint16_t sg[64];
    CHECK(qp_qqq_quantize_weight(ctx, w, 128, 64, 64, q, sc, sg) == QP_ERR_VALUE, "group 64");
    CHECK(qp_qqq_quantize_weight(ctx, w, 100, 64, 128, q, sc, sg) == QP_ERR_VALUE &&
              strstr(qp_last_error(ctx), "not divisible by group_size = 128"), "%s", qp_last_error(ctx));
    /* all-zero weights: zero codes and scales, documented (vLLM gives NaN) */
    CHECK(qp_qqq_quantize_weight(ctx, w, 128, 64, 128, q, sc, sg) == QP_OK && q[0] == 8 && sc[0] == 0.0f && sg[0] == 0,
          "zero weights");
    CHECK(qp_qqq_quantize_weight(ctx, w, 128, 64, -1, q, sc, NULL) == QP_OK && q[0] == 0 && sc[0] == 0.0f, "zero pc");
    uint16_t x[128] = {0}, y[64];
    int32_t B[8 * 128];
    CHECK(qp_ref_qqq_forward(ctx, x, 1, 120, 64, -1, B, sc, NULL, NULL, y) == QP_ERR_VALUE &&
              strstr(qp_last_error(ctx), "min_k_threads = 128"), "%s", qp_last_error(ctx));
    qp_context_destroy(ctx);
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 5u;
    printf("seed %u\n", st);
    wrap_rule();
    int Ms[] = {1, 3, 17};
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 3; i++) forward(g ? 128 : -1, Ms[i], 256, 128);
    forward(128, 2, 512, 192);
    errors();
    return tu_finish("test_ref_qqq");
}
