/* Reference OCP-MX forward against a second formulation: unquantized
 * activations times the exact MX dequantization of the weights, in fp64.
 * The bound is derived from the formats: the activation qdq moves each
 * element by at most 2^-m of its block max (m = mantissa bits; this also
 * covers the subnormal step and the even rule's saturation), the weight
 * dequant, the qdq result and the output are each rounded once to x.dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }

static int mbits(qp_dtype e) { return e == QP_DTYPE_F4_E2M1 ? 1 : e == QP_DTYPE_F6_E3M2 ? 2 : 3; }
static qp_dtype act_elem(qp_ocp_mx_act a) {
    return a == QP_OCP_MX_ACT_MXFP4 ? QP_DTYPE_F4_E2M1 : a == QP_OCP_MX_ACT_MXFP6_E3M2 ? QP_DTYPE_F6_E3M2
         : a == QP_OCP_MX_ACT_MXFP6_E2M3 ? QP_DTYPE_F6_E2M3 : a == QP_OCP_MX_ACT_MXFP8 ? QP_DTYPE_F8_E4M3FN
         : QP_DTYPE_NONE;
}

/* codes [N][K] -> the checkpoint's packed weight */
static void pack(qp_dtype w, const uint8_t *codes, int N, int K, uint8_t *out) {
    if (w == QP_DTYPE_F4_E2M1) qp_pack_fp4(codes, (size_t)N * K, out);
    else if (w == QP_DTYPE_F8_E4M3FN) memcpy(out, codes, (size_t)N * K);
    else qp_pack_fp6(codes, (size_t)N * K, out);
}

static int run(qp_dtype d, qp_dtype we, qp_ocp_mx_act act, int M, int K, int N, int with_bias) {
    float *wf = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
    uint8_t *codes = malloc(N * K), *packed = malloc(N * K), *sc = malloc(N * K / 32);
    size_t es = tu_esize(d);
    void *x = malloc(es * M * K), *y = malloc(es * M * N), *bias = malloc(es * N);
    for (int i = 0; i < N * K; i++) wf[i] = frand() * (1 + i % 4) * 0.05f;
    for (int i = 0; i < M * K; i++) tu_put(d, x, i, frand() * (i % 7 ? 3.0f : 0.01f));
    for (int i = 0; i < N; i++) tu_put(d, bias, i, frand());
    qp_quant_mx(NULL, we, wf, N, K, codes, sc);
    qp_dequant_mx(NULL, we, codes, sc, N, K, wd);
    pack(we, codes, N, K, packed);
    qp_ref_ocp_mx_args a = {d, x, M, K, N, we, packed, sc, 0, act, with_bias ? bias : NULL};
    int bad = 0;
    if (qp_ref_ocp_mx_forward(NULL, &a, y) != QP_OK) { bad = -1; goto out; }
    double u = tu_unit(d);
    qp_dtype ae = act_elem(act);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double ref = with_bias ? tu_get(d, bias, n) : 0, mag = 0, qerr = 0;
            for (int k = 0; k < K; k++) {
                double xv = tu_get(d, x, (size_t)m * K + k), wv = wd[n * K + k];
                ref += xv * wv;
                mag += fabs(xv * wv);
                if (ae != QP_DTYPE_NONE) {
                    double A = 0;
                    for (int j = k / 32 * 32; j < k / 32 * 32 + 32; j++) A = fmax(A, fabs(tu_get(d, x, (size_t)m * K + j)));
                    qerr += fabs(wv) * A * ldexp(1, -mbits(ae));
                }
            }
            double got = tu_get(d, y, (size_t)m * N + n);
            double bound = qerr * (1 + 2 * u) + mag * 3 * u + fabs(ref) * u + 1e-6;
            if (!(fabs(got - ref) <= bound)) {
                if (bad++ < 3) fprintf(stderr, "  m %d n %d got %g ref %g bound %g\n", m, n, got, ref, bound);
            }
        }
out:
    free(wf); free(wd); free(codes); free(packed); free(sc); free(x); free(y); free(bias);
    return bad;
}

static void hand_cases(void) {
    /* 32 fp4 weights of 1.0 (code 2, scale 2^0); x = [1.0, 0.3, 0...]:
     * weight-only gives 1 + fp16(0.3); MXFP4 activations: the block max 1.0
     * gives scale 2^-2, 0.3/0.25 = 1.2 -> 1, so 1.0 + 0.25 = 1.25 */
    uint8_t w[16], s[1] = {127};
    uint16_t x[32] = {0}, y[1];
    for (int i = 0; i < 16; i++) w[i] = 0x22;
    x[0] = 0x3C00;
    x[1] = (uint16_t)qp_format_encode(QP_DTYPE_F16, 0.3f);
    qp_ref_ocp_mx_args a = {QP_DTYPE_F16, x, 1, 32, 1, QP_DTYPE_F4_E2M1, w, s, 0, QP_OCP_MX_ACT_NONE, NULL};
    CHECK(qp_ref_ocp_mx_forward(NULL, &a, y) == QP_OK && y[0] == qp_format_encode(QP_DTYPE_F16, 1.0f + qp_format_decode(QP_DTYPE_F16, x[1])),
          "weight-only: %04x", y[0]);
    a.act = QP_OCP_MX_ACT_MXFP4;
    CHECK(qp_ref_ocp_mx_forward(NULL, &a, y) == QP_OK && y[0] == 0x3D00, "mxfp4 act: %04x", y[0]);
    /* fp6 e2m3 weights: 32 x 1.5 (code 0b001100 = 12) packed in quads, scale 2^-1 -> 0.75 each; x = 1 -> 24 */
    uint8_t c6[32], w6[24];
    for (int i = 0; i < 32; i++) { c6[i] = 12; x[i] = 0x3C00; }
    qp_pack_fp6(c6, 32, w6);
    uint8_t s6[1] = {126};
    qp_ref_ocp_mx_args b = {QP_DTYPE_BF16, x, 1, 32, 1, QP_DTYPE_F6_E2M3, w6, s6, 0, QP_OCP_MX_ACT_MXFP6_E2M3, NULL};
    for (int i = 0; i < 32; i++) x[i] = 0x3F80; /* bf16 1.0 */
    CHECK(qp_ref_ocp_mx_forward(NULL, &b, y) == QP_OK && y[0] == 0x41C0, "fp6: %04x", y[0]);
    /* MXFP8 per_block [2,32]: rows 0 and 1 share one scale row */
    uint8_t w8[64], s8[1] = {128};
    for (int i = 0; i < 64; i++) w8[i] = 0x38; /* e4m3 1.0 */
    uint16_t y2[2];
    qp_ref_ocp_mx_args c = {QP_DTYPE_BF16, x, 1, 32, 2, QP_DTYPE_F8_E4M3FN, w8, s8, 2, QP_OCP_MX_ACT_MXFP8, NULL};
    CHECK(qp_ref_ocp_mx_forward(NULL, &c, y2) == QP_OK && y2[0] == 0x4280 && y2[1] == 0x4280, "mxfp8 R=2: %04x %04x", y2[0], y2[1]);

    /* docs/semantics.md §6 in fp16: e8m0 2^20 saturates to 2^15 in the fp4 path (hmul),
     * so 1.0 * 2^15 = 32768 (0x7800); the fp6 path computes 2**(e-127) in
     * fp16, which overflows to inf: inf weights, and 0 * inf = NaN */
    uint16_t xo[32] = {0x3C00};
    uint8_t sbig[1] = {147};
    qp_ref_ocp_mx_args h = {QP_DTYPE_F16, xo, 1, 32, 1, QP_DTYPE_F4_E2M1, w, sbig, 0, QP_OCP_MX_ACT_NONE, NULL};
    CHECK(qp_ref_ocp_mx_forward(NULL, &h, y) == QP_OK && y[0] == 0x7800, "fp4 hmul saturation: %04x", y[0]);
    /* fp32 holds 2^20 exactly (no fp16 saturation): 1.0 * 2^20 */
    float xo32[32] = {1.0f}, y32[1];
    qp_ref_ocp_mx_args h32 = h;
    h32.dtype = QP_DTYPE_F32; h32.x = xo32;
    CHECK(qp_ref_ocp_mx_forward(NULL, &h32, y32) == QP_OK && y32[0] == 0x1p20f, "fp32 scale 2^20: %a", y32[0]);
    h.w_elem = QP_DTYPE_F6_E2M3;
    h.weight = w6;
    CHECK(qp_ref_ocp_mx_forward(NULL, &h, y) == QP_OK && (y[0] & 0x7FFF) > 0x7C00, "fp6 fp16 scale overflow -> NaN: %04x", y[0]);
    /* errors */
    qp_context *ctx;
    qp_context_create(&ctx);
    a.K = 16;
    CHECK(qp_ref_ocp_mx_forward(ctx, &a, y) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "divisible by the OCP MX group size 32"),
          "K %% 32: %s", qp_last_error(ctx));
    a.K = 32;
    a.act = QP_OCP_MX_ACT_FP8_DYNAMIC;
    CHECK(qp_ref_ocp_mx_forward(ctx, &a, y) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "Unsupported activation quant key: QuantKey(f8e4m3fn,scale(f32,dynamic,per_tensor),symmetric)"),
          "fp8 act: %s", qp_last_error(ctx));
    a.act = QP_OCP_MX_ACT_FP8_STATIC;
    CHECK(qp_ref_ocp_mx_forward(ctx, &a, y) == QP_ERR_VALUE, "fp8 static act");
    b.act = QP_OCP_MX_ACT_MXFP6_E3M2;
    CHECK(qp_ref_ocp_mx_forward(ctx, &b, y) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "not an OCP_MX_Scheme"),
          "fp6 pair: %s", qp_last_error(ctx));
    b.act = QP_OCP_MX_ACT_MXFP4;
    CHECK(qp_ref_ocp_mx_forward(ctx, &b, y) == QP_ERR_VALUE, "fp6 weights, fp4 act");
    b.act = QP_OCP_MX_ACT_NONE;
    b.w_elem = QP_DTYPE_F8_E5M2;
    CHECK(qp_ref_ocp_mx_forward(ctx, &b, y) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "weight"), "e5m2 weights");
    b.w_elem = QP_DTYPE_F6_E2M3;
    b.dtype = QP_DTYPE_I8;
    CHECK(qp_ref_ocp_mx_forward(ctx, &b, y) == QP_ERR_INVALID_ARGUMENT, "int8 activations");
    b.dtype = QP_DTYPE_BF16;
    b.scale_rows = 2;
    CHECK(qp_ref_ocp_mx_forward(ctx, &b, y) == QP_ERR_INVALID_ARGUMENT, "per_block fp6");
    CHECK(qp_ref_ocp_mx_forward(ctx, NULL, y) == QP_ERR_INVALID_ARGUMENT, "NULL args");
    qp_context_destroy(ctx);
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 23u;
    printf("seed %u\n", st);
    static const struct { qp_dtype w; qp_ocp_mx_act a; } combos[] = {
        {QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_NONE},       {QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4},
        {QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP6_E3M2}, {QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP6_E2M3},
        {QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP8},      {QP_DTYPE_F6_E3M2, QP_OCP_MX_ACT_NONE},
        {QP_DTYPE_F6_E3M2, QP_OCP_MX_ACT_MXFP6_E3M2}, {QP_DTYPE_F6_E2M3, QP_OCP_MX_ACT_NONE},
        {QP_DTYPE_F6_E2M3, QP_OCP_MX_ACT_MXFP6_E2M3}, {QP_DTYPE_F6_E2M3, QP_OCP_MX_ACT_MXFP8},
        {QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_NONE},     {QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_MXFP8},
    };
    int Ms[] = {1, 5};
    for (size_t c = 0; c < sizeof combos / sizeof *combos; c++)
        for (int i = 0; i < 2; i++) {
            int r = run(QP_DTYPE_F16, combos[c].w, combos[c].a, Ms[i], 128, 24, i);
            CHECK(r == 0, "fp16 w %s act %d M %d: %d", qp_dtype_name(combos[c].w), (int)combos[c].a, Ms[i], r);
            r = run(QP_DTYPE_BF16, combos[c].w, combos[c].a, Ms[i], 96, 40, !i);
            CHECK(r == 0, "bf16 w %s act %d M %d: %d", qp_dtype_name(combos[c].w), (int)combos[c].a, Ms[i], r);
            r = run(QP_DTYPE_F32, combos[c].w, combos[c].a, Ms[i], 64, 16, i);
            CHECK(r == 0, "f32 w %s act %d M %d: %d", qp_dtype_name(combos[c].w), (int)combos[c].a, Ms[i], r);
        }
    hand_cases();
    return tu_finish("test_ref_ocp_mx");
}
