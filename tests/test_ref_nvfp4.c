/* Reference NVFP4 forward against unquantized activations times the exact
 * NVFP4 weight dequantization in fp64. Bound from the formats: an element x
 * of a block with scale s = e4m3(g*B/6)/g moves by at most 0.25*s (half the
 * fp4 subnormal step) + 0.25*|x| (fp4 has one mantissa bit) + the part of
 * |x| above 6s (saturation); the weight, x' and the output are rounded to
 * x.dtype, the bias added in x.dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static float absmax(const float *v, size_t n) {
    float a = 0;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(v[i]));
    return a;
}

static int run(qp_dtype d, int M, int K, int N, int with_bias) {
    float *wf = malloc(sizeof(float) * N * K), *xf = malloc(sizeof(float) * M * K);
    uint8_t *codes = malloc(N * K), *packed = malloc(N * K / 2), *sf = malloc(N * K / 16);
    size_t es = tu_esize(d);
    void *x = malloc(es * M * K), *y = malloc(es * M * N), *bias = malloc(es * N);
    for (int i = 0; i < N * K; i++) wf[i] = frand() * (1 + i % 4) * 0.05f;
    for (int i = 0; i < M * K; i++) {
        tu_put(d, x, i, frand() * (i % 5 ? 3.0f : 0.2f));
        xf[i] = (float)tu_get(d, x, i);
    }
    for (int i = 0; i < N; i++) tu_put(d, bias, i, frand());
    /* weights quantized the way an NVFP4 checkpoint is made: global scale
     * 448*6/amax, so weight_scale_2 = amax/(448*6) */
    float gw = 448.0f * 6.0f / absmax(wf, (size_t)N * K);
    qp_quant_nvfp4(NULL, wf, N, K, gw, codes, sf);
    qp_pack_fp4(codes, (size_t)N * K, packed);
    float ws2 = 1.0f / gw, is2 = absmax(xf, (size_t)M * K) / (448.0f * 6.0f);
    qp_ref_nvfp4_args a = {d, x, M, K, N, packed, sf, ws2, is2, with_bias ? bias : NULL, 0.0f};
    int bad = 0;
    if (qp_ref_nvfp4_forward(NULL, &a, y) != QP_OK) { bad = -1; goto out; }
    double u = tu_unit(d);
    float g = 1.0f / is2;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0, qerr = 0;
            for (int k = 0; k < K; k++) {
                double wv = (double)qp_format_decode(QP_DTYPE_F4_E2M1, codes[n * K + k]) *
                            qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[n * (K / 16) + k / 16]) * ws2;
                double xv = xf[m * K + k];
                float B = absmax(xf + m * K + k / 16 * 16, 16);
                double s = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, g * (B / 6.0f))) / g;
                ref += xv * wv;
                mag += fabs(xv * wv);
                qerr += fabs(wv) * (0.25 * s + 0.25 * fabs(xv) + fmax(0, fabs(xv) - 6 * s));
            }
            double b = with_bias ? tu_get(d, bias, n) : 0;
            double got = tu_get(d, y, (size_t)m * N + n);
            double bound = qerr * (1 + 2 * u) + mag * 2 * u + (fabs(ref) + qerr) * u + fabs(ref + b) * u + 1e-5;
            if (!(fabs(got - (ref + b)) <= bound)) {
                if (bad++ < 3) fprintf(stderr, "  m %d n %d got %g ref %g bound %g\n", m, n, got, ref + b, bound);
            }
        }
out:
    free(wf); free(xf); free(codes); free(packed); free(sf); free(x); free(y); free(bias);
    return bad;
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 29u;
    printf("seed %u\n", st);
    int Ms[] = {1, 4, 9};
    for (int i = 0; i < 3; i++) {
        CHECK(run(QP_DTYPE_F16, Ms[i], 128, 24, i & 1) == 0, "fp16 M %d", Ms[i]);
        CHECK(run(QP_DTYPE_BF16, Ms[i], 48, 40, !(i & 1)) == 0, "bf16 M %d", Ms[i]);
        CHECK(run(QP_DTYPE_F32, Ms[i], 96, 24, i & 1) == 0, "f32 M %d", Ms[i]);
    }
    /* hand case: 16 weights of 1.0 (code 2, e4m3 1.0 = 0x38, scale_2 1);
     * x = 1.0, input_scale_2 = 1: sf = e4m3(1/6) = 0.171875, 1/0.171875 =
     * 5.82 -> fp4 6, x' = 6 * 0.171875 = 1.03125, y = 16.5 (fp16 0x4C20);
     * bias 0.5 added after the matmul -> 17.0 */
    uint8_t w[8], s[1] = {0x38};
    uint16_t x[16], y[1], bias[1] = {0x3800};
    for (int i = 0; i < 8; i++) w[i] = 0x22;
    for (int i = 0; i < 16; i++) x[i] = 0x3C00;
    qp_ref_nvfp4_args a = {QP_DTYPE_F16, x, 1, 16, 1, w, s, 1.0f, 1.0f, NULL, 0.0f};
    CHECK(qp_ref_nvfp4_forward(NULL, &a, y) == QP_OK && y[0] == 0x4C20, "16.5: %04x", y[0]);
    a.bias = bias;
    CHECK(qp_ref_nvfp4_forward(NULL, &a, y) == QP_OK && y[0] == 0x4C40, "17.0: %04x", y[0]);
    qp_context *ctx;
    qp_context_create(&ctx);
    a.K = 24;
    CHECK(qp_ref_nvfp4_forward(ctx, &a, y) == QP_ERR_VALUE &&
              strstr(qp_last_error(ctx), "ValueError: Input size per partition (24) must be divisible by group size (16)"),
          "K %% 16: %s", qp_last_error(ctx));
    a.K = 16;
    a.input_scale_2 = 0.0f;
    CHECK(qp_ref_nvfp4_forward(ctx, &a, y) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "input_scale_2"),
          "zero input scale: %s", qp_last_error(ctx));
    a.input_scale_2 = 1.0f;
    /* fp32: the hand case again, and the bias added in fp32: 16.5 + 0.1 is
     * the fp32 sum, not rounded to fp16 (16.59375) */
    float xf[16], yf[1], bf[1] = {0.1f};
    for (int i = 0; i < 16; i++) xf[i] = 1.0f;
    qp_ref_nvfp4_args f = {QP_DTYPE_F32, xf, 1, 16, 1, w, s, 1.0f, 1.0f, bf, 0.0f};
    CHECK(qp_ref_nvfp4_forward(ctx, &f, yf) == QP_OK && yf[0] == 16.5f + 0.1f, "f32 16.6: %a", yf[0]);
    a.dtype = QP_DTYPE_F8_E4M3FN;
    CHECK(qp_ref_nvfp4_forward(ctx, &a, y) == QP_ERR_INVALID_ARGUMENT, "fp8 activations");
    qp_context_destroy(ctx);
    return tu_finish("test_ref_nvfp4");
}
