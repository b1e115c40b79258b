/* Reference W4A16: Quark order/reorder packing, symmetric two's-complement
 * and asymmetric zero-point codes, group sizes 32/64/128/-1, against
 * unpacked values summed in double (1 output ulp allowed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t st;
static uint32_t rnd(void) { st = st * 1664525u + 1013904223u; return st >> 8; }
static float frand(void) { return (float)(rnd() / 16777216.0) * 2.0f - 1.0f; }

static int run(qp_dtype d, int M, int K, int N, int group, int sym, qp_pack_method pack, qp_pack_method told) {
    int g = group == -1 ? K : group, G = K / g, nc = (N + 7) / 8, ss = nc * 8;
    int *val = malloc(sizeof(int) * K * N);
    uint8_t *codes = malloc(K * N), *zc = malloc(G * N);
    int32_t *wp = malloc(sizeof(int32_t) * K * nc), *zp = malloc(sizeof(int32_t) * G * nc);
    size_t es = tu_esize(d); /* scales, x, bias and y in the params dtype */
    void *sc = calloc((size_t)G * ss, es), *x = malloc(es * M * K), *y = malloc(es * M * N), *bias = malloc(es * N);
    for (int i = 0; i < G * N; i++) zc[i] = (uint8_t)(rnd() % 16);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = (int)(rnd() % 16);
            codes[k * N + n] = (uint8_t)c;
            val[k * N + n] = sym ? (c >= 8 ? c - 16 : c) : c - zc[(k / g) * N + n];
        }
    for (int i = 0; i < G; i++)
        for (int n = 0; n < N; n++) tu_put(d, sc, (size_t)i * ss + n, 0.01f * (1.0f + frand() * 0.5f));
    for (int i = 0; i < M * K; i++) tu_put(d, x, i, frand() * 2.0f);
    for (int n = 0; n < N; n++) tu_put(d, bias, n, frand());
    CHECK(qp_pack_int4_quark(codes, K, N, pack, wp) == QP_OK, "pack");
    CHECK(qp_pack_int4_quark(zc, G, N, pack, zp) == QP_OK, "pack zp");
    qp_ref_w4a16_args a = {d, x, M, K, N, wp, sym ? NULL : zp, sc, group, sym, told, bias};
    CHECK(qp_ref_w4a16_forward(NULL, &a, y) == QP_OK, "forward");
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = tu_get(d, bias, n);
            for (int k = 0; k < K; k++)
                acc += tu_get(d, x, (size_t)m * K + k) * val[k * N + n] * tu_get(d, sc, (size_t)(k / g) * ss + n);
            double got = tu_get(d, y, (size_t)m * N + n);
            double ulp = fmax(fabs(acc), 1e-30) * 2 * tu_unit(d); /* one output rounding */
            if (fabs(got - acc) > ulp) bad++;
        }
    free(val); free(codes); free(zc); free(wp); free(zp); free(sc); free(x); free(y); free(bias);
    return bad;
}

int main(int argc, char **argv) {
    st = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 13u;
    printf("seed %u\n", st);
    int groups[] = {32, 64, 128, -1};
    for (int gi = 0; gi < 4; gi++)
        for (int sym = 0; sym < 2; sym++)
            for (int p = 0; p < 2; p++) {
                qp_pack_method pm = p ? QP_PACK_REORDER : QP_PACK_ORDER;
                int bad = run(gi % 2 ? QP_DTYPE_BF16 : QP_DTYPE_F16, 1 + gi * 5, 256, 20 + 8 * gi, groups[gi], sym, pm, pm);
                CHECK(bad == 0, "group %d sym %d pack %d: %d outputs off", groups[gi], sym, p, bad);
                /* fp32 model: fp32 scales (params dtype), x, bias and y */
                bad = run(QP_DTYPE_F32, 2 + gi * 3, 128 + 64 * (gi % 2), 12 + 8 * gi, groups[gi], sym, pm, pm);
                CHECK(bad == 0, "f32 group %d sym %d pack %d: %d outputs off", groups[gi], sym, p, bad);
            }
    /* packing order matters: a reorder checkpoint read as order is wrong */
    CHECK(run(QP_DTYPE_F16, 2, 128, 16, 128, 1, QP_PACK_REORDER, QP_PACK_ORDER) > 0, "order mix-up must be detected");
    qp_ref_w4a16_args a = {QP_DTYPE_F16, NULL, 1, 100, 8, NULL, NULL, NULL, 128, 1, QP_PACK_ORDER, NULL};
    uint16_t y[8];
    CHECK(qp_ref_w4a16_forward(NULL, &a, y) == QP_ERR_INVALID_ARGUMENT, "NULL");
    return tu_finish("test_ref_w4a16");
}
