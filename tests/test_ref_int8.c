/* Reference W8A8-INT8: hand-computed epilogues, every activation mode on
 * random data against a double formulation, the static-asym rebuild. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static float frand(void) { st = st * 1664525u + 1013904223u; return (float)((st >> 8) / 16777216.0) * 2.0f - 1.0f; }
static float dec(qp_dtype d, uint16_t b) { return qp_format_decode(d, b); }
static uint16_t enc(qp_dtype d, float v) { return (uint16_t)qp_format_encode(d, v); }

static void hand(void) {
    qp_dtype d = QP_DTYPE_F16;
    uint16_t x[2] = {enc(d, 1.0f), enc(d, -2.0f)}, y[1], bias[1] = {enc(d, 0.5f)};
    int8_t w[2] = {10, 3};
    float ws = 0.25f;
    qp_ref_int8_args a = {d, x, 1, 2, 1, w, &ws, 0, 1, 1, 0.5f, 0, NULL};
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK && y[0] == 0x3C00, "static sym: %04x", y[0]);
    a.bias = bias;
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK && dec(d, y[0]) == 1.5f, "bias %g", dec(d, y[0]));
    a.bias = NULL; a.symmetric = 0; a.input_zp = 3;   /* xq = [5, -1], acc 47, azp_adj 39 */
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK && y[0] == 0x3C00, "static asym: %g", dec(d, y[0]));
    a.is_static = 0;                                   /* zp 42, xq [127,-128], acc 886, t 340 */
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK && y[0] == enc(d, (3.0f / 255.0f) * (0.25f * 340.0f)),
          "dynamic asym: %g", dec(d, y[0]));
    /* -0.0 becomes +0.0 in the azp epilogue (fma with +0.0) */
    uint16_t xz[2] = {0, 0};
    a.x = xz; a.is_static = 1; a.input_zp = 0;
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK && y[0] == 0x0000, "+0: %04x", y[0]);
    /* fp32: the epilogue value itself, not rounded to 16 bits: 1.0 * 3 *
     * 0.1 + 0.2 in one fma */
    float xf[2] = {1.0f, -2.0f}, yf[1], bf[1] = {0.2f};
    float ws3 = 0.1f;
    int8_t w3[2] = {3, 0};
    qp_ref_int8_args f = {QP_DTYPE_F32, xf, 1, 2, 1, w3, &ws3, 0, 1, 1, 1.0f, 0, bf};
    CHECK(qp_ref_w8a8_int8_forward(NULL, &f, yf) == QP_OK && yf[0] == fmaf(1.0f, 0.1f * 3.0f, 0.2f), "f32: %a", yf[0]);
    a.dtype = QP_DTYPE_F8_E4M3FN;
    CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_ERR_INVALID_ARGUMENT, "dtype");
}

/* Every mode on random data against a double formulation. fp32 (docs/semantics.md §14
 * with out dtype fp32): the integer path makes the result exact, so it must
 * equal the epilogue's fp32 value bit for bit (computed here from the
 * test's own integer sums), and with fp16-representable inputs the fp16
 * run must be that value rounded once. */
static void random_modes(qp_dtype d, int M, int K, int N) {
    size_t es = tu_esize(d);
    void *x = malloc(es * M * K), *y = malloc(es * M * N), *bias = malloc(es * N);
    uint16_t *x16 = malloc(2 * M * K), *b16 = malloc(2 * N), *y16 = malloc(2 * M * N);
    int8_t *w = malloc(N * K), *xq = malloc(K);
    float *ws = malloc(sizeof(float) * N), *xf = malloc(sizeof(float) * K);
    /* F32: every third row holds fp16 values (the consistency check), the
     * others full fp32 values */
    for (int i = 0; i < M * K; i++) {
        float v = frand() * 3.0f;
        tu_put(d, x, i, (i / K) % 3 ? v : qp_fp16_round(v));
        x16[i] = enc(QP_DTYPE_F16, (float)tu_get(d, x, i));
    }
    for (int i = 0; i < N * K; i++) w[i] = (int8_t)(frand() * 127.0f);
    for (int n = 0; n < N; n++) {
        ws[n] = 0.001f * (1.0f + frand() * 0.5f);
        tu_put(d, bias, n, qp_fp16_round(frand()));
        b16[n] = enc(QP_DTYPE_F16, (float)tu_get(d, bias, n));
    }
    double rel = tu_unit(d);
    for (int mode = 0; mode < 8; mode++) {
        qp_ref_int8_args a = {d, x, M, K, N, w, ws, mode & 1, (mode >> 1) & 1, (mode >> 2) & 1, 0.02f, (mode & 2) ? -7 : 0,
                              (mode & 1) ? bias : NULL};
        if (a.symmetric) a.input_zp = 0;
        CHECK(qp_ref_w8a8_int8_forward(NULL, &a, y) == QP_OK, "mode %d", mode);
        int bad = 0, inexact = 0, incons = 0;
        if (d == QP_DTYPE_F32) {
            qp_ref_int8_args a16 = a;
            a16.dtype = QP_DTYPE_F16; a16.x = x16; a16.bias = a.bias ? b16 : NULL;
            CHECK(qp_ref_w8a8_int8_forward(NULL, &a16, y16) == QP_OK, "mode %d fp16", mode);
        }
        for (int m = 0; m < M; m++) {
            for (int k = 0; k < K; k++) xf[k] = (float)tu_get(d, x, (size_t)m * K + k);
            float sa;
            int32_t zp = 0;
            if (a.is_static) { sa = a.input_scale; zp = a.input_zp; qp_quant_int8_static(NULL, xf, 1, K, sa, zp, a.symmetric, xq); }
            else qp_quant_int8_dynamic(NULL, xf, 1, K, a.symmetric, xq, &sa, &zp);
            for (int n = 0; n < N; n++) {
                int64_t t = 0;
                for (int k = 0; k < K; k++) t += ((int64_t)xq[k] - zp) * w[n * K + k];
                double acc = (double)t;
                float sb = a.w_per_channel ? ws[n] : ws[0];
                double ref = sa * (double)sb * acc + (a.bias ? tu_get(d, bias, n) : 0.0);
                double got = tu_get(d, y, (size_t)m * N + n);
                if (fabs(got - ref) > fabs(ref) * (rel + ldexp(1, -21)) + ldexp(1, -20)) bad++;
                if (d != QP_DTYPE_F32) continue;
                /* docs/semantics.md §14 in fp32: one fma with a bias or an azp epilogue */
                float b = a.bias ? (float)tu_get(d, bias, n) : 0.0f;
                float want = !a.symmetric || a.bias ? fmaf(sa, sb * (float)t, b) : sa * (sb * (float)t);
                float gotf = ((float *)y)[m * N + n];
                if (memcmp(&want, &gotf, 4)) inexact++;
                if (m % 3 == 0 && y16[m * N + n] != enc(QP_DTYPE_F16, gotf)) incons++;
            }
        }
        CHECK(bad == 0, "%s mode %d M %d: %d outputs outside the bound", qp_dtype_name(d), mode, M, bad);
        CHECK(inexact == 0, "f32 mode %d M %d: %d outputs differ from the fp32 epilogue", mode, M, inexact);
        CHECK(incons == 0, "f32 mode %d M %d: %d fp16 outputs are not the fp32 result rounded", mode, M, incons);
    }
    free(x); free(y); free(bias); free(x16); free(b16); free(y16); free(w); free(xq); free(ws); free(xf);
}

static void rebuild(void) {
    float s[2] = {0.1f, 0.2f}, so;
    int32_t z[2] = {0, 10}, zo;
    CHECK(qp_int8_static_asym_rebuild(NULL, s, z, 2, &so, &zo) == QP_OK, "rebuild");
    float rmax = fmaxf(0.1f * 127.0f, 0.2f * 117.0f), rmin = fminf(0.1f * -128.0f, 0.2f * -138.0f);
    float want = (rmax - rmin) * (1.0f / 255.0f);
    CHECK(so == want && zo == (int32_t)(-128.0f - rmin / want), "s %g azp %d", so, zo);
    /* truncation toward zero: z = -128 - rmin/s' with one shard s=1, zp=-5 → exactly -5 */
    float s1 = 1.0f;
    int32_t z1 = -5;
    CHECK(qp_int8_static_asym_rebuild(NULL, &s1, &z1, 1, &so, &zo) == QP_OK && so == 1.0f && zo == -5, "identity %g %d", so, zo);
    CHECK(qp_int8_static_asym_rebuild(NULL, s, z, 0, &so, &zo) == QP_ERR_INVALID_ARGUMENT, "empty");
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 3u;
    printf("seed %u\n", st);
    hand();
    int Ms[] = {1, 5, 17};
    for (int i = 0; i < 3; i++) {
        random_modes(QP_DTYPE_F16, Ms[i], 96, 40);
        random_modes(QP_DTYPE_BF16, Ms[i], 160, 24);
        random_modes(QP_DTYPE_F32, Ms[i], 128, 36);
    }
    rebuild();
    return tu_finish("test_ref_int8");
}
