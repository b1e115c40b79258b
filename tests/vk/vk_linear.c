/* Vulkan: W8A8-INT8, QQQ W4A8 and W8A8-FP8 layers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_tests.h"

void vk_int8(qp_dtype dt, bool is_static, bool sym, bool bias, bool per_channel, int K, int N, const unsigned *paths,
             int n_paths, const int *ms, int n_ms) {
    bh_layer L;
    bh_int8_layer(&L, dt, is_static, sym, per_channel, bias, N, K);
    int mmax = 0;
    for (int i = 0; i < n_ms; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)mmax * K), *all = malloc(sizeof(uint16_t) * (size_t)mmax * N);
    bh_x_rows(dt, x, mmax, K, true);
    CHECK(bh_layer_ref(&L, x, mmax, all) == QP_OK, "int8 reference");
    uint16_t *ref[VK_NM];
    for (int i = 0; i < n_ms; i++) ref[i] = all; /* rows are independent: prefixes */
    char name[160];
    snprintf(name, sizeof name, "int8 %s %s %s%s%s K=%d N=%d", bh_dt_name(dt), is_static ? "static" : "dynamic",
             sym ? "sym" : "asym", bias ? " bias" : "", per_channel ? " per-channel" : " per-tensor", K, N);
    vk_run_paths(&L.d, paths, n_paths, ms, n_ms, x, ref, dt, name, NULL, NULL);
    free(x); free(all);
    bh_layer_free(&L);
}

void vk_qqq(int group, bool bias, int K, int N, const unsigned *paths, int n_paths) {
    bh_layer L;
    bh_qqq_layer(&L, group, bias, N, K);
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)VK_MMAX * K), *all = malloc(sizeof(uint16_t) * (size_t)VK_MMAX * N);
    bh_x_rows(QP_DTYPE_F16, x, VK_MMAX, K, true);
    CHECK(bh_layer_ref(&L, x, VK_MMAX, all) == QP_OK, "qqq reference");
    uint16_t *ref[VK_NM];
    for (int i = 0; i < VK_NM; i++) ref[i] = all;
    char name[128];
    snprintf(name, sizeof name, "qqq group %d%s K=%d N=%d", group, bias ? " bias" : "", K, N);
    vk_run_paths(&L.d, paths, n_paths, vk_Ms, VK_NM, x, ref, QP_DTYPE_F16, name, NULL, NULL);
    free(x); free(all);
    bh_layer_free(&L);
}

typedef struct fp8_cmp {
    const bh_layer *L;
    const uint16_t *x;
    uint16_t *const *ref;
} fp8_cmp;

/* |y - ref| <= |s_a s_b| gamma_K sum |xq w| + one output ulp, with the
 * activation codes xq and scales s_a from the quantizers themselves */
static bool fp8_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    fp8_cmp *c = ctx_;
    const qp_lin_desc *d = &c->L->d;
    qp_dtype dt = c->L->dt;
    int K = d->K, N = d->N;
    float *xf = malloc(sizeof(float) * (size_t)M * K), *sx = malloc(sizeof(float) * M);
    uint8_t *xq = malloc((size_t)M * K);
    for (size_t i = 0; i < (size_t)M * K; i++) xf[i] = bh_dec(dt, c->x[i]);
    if (d->act == QP_ACT_FP8_STATIC) {
        qp_quant_fp8_static(NULL, xf, (size_t)M * K, d->input_scale, xq);
        for (int m = 0; m < M; m++) sx[m] = d->input_scale;
    } else if (d->act == QP_ACT_FP8_DYNAMIC_TENSOR) {
        qp_quant_fp8_dynamic_tensor(NULL, xf, (size_t)M * K, xq, sx);
        for (int m = 1; m < M; m++) sx[m] = sx[0];
    } else {
        qp_quant_fp8_dynamic_token(NULL, xf, (size_t)M, (size_t)K, 0.0f, xq, sx);
    }
    static double f8[256];
    if (f8[0x38] == 0.0)
        for (int i = 0; i < 256; i++) f8[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, (uint32_t)i);
    bool ok = true;
    double gamma = (double)K * ldexp(1.0, -24) * 1.01;
    for (int m = 0; m < M && ok; m++)
        for (int n = 0; n < N && ok; n++) {
            uint16_t g = y[m * N + n], r = c->ref[mi][m * N + n];
            if (g == r) continue;
            double sabs = 0;
            for (int k = 0; k < K; k++) sabs += fabs(f8[xq[(size_t)m * K + k]] * f8[d->w_u8[(size_t)n * K + k]]);
            double gv = bh_dec(dt, g), rv = bh_dec(dt, r);
            double bound = fabs((double)sx[m] * d->w_scale[n]) * gamma * sabs * 1.0001 +
                           bh_ulp(dt, fmax(fabs(gv), fabs(rv)));
            if (!(fabs(gv - rv) <= bound)) {
                CHECK(0, "%s: y[%d][%d] = %.9g, reference %.9g, bound %.3g", what, m, n, gv, rv, bound);
                ok = false;
            }
        }
    free(xf); free(sx); free(xq);
    return ok;
}

void vk_fp8(qp_dtype dt, qp_act_mode act, bool bias, int K, int N, bool identity, const unsigned *paths, int n_paths) {
    qp_fp8_act ract = act == QP_ACT_FP8_STATIC           ? QP_FP8_ACT_STATIC
                      : act == QP_ACT_FP8_DYNAMIC_TENSOR ? QP_FP8_ACT_DYNAMIC_TENSOR
                                                         : QP_FP8_ACT_DYNAMIC_TOKEN;
    bh_layer L;
    bh_fp8_layer(&L, dt, ract, true, bias, identity, N, K);
    N = L.N;
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)VK_MMAX * K);
    bh_x_rows(dt, x, VK_MMAX, K, false);
    /* dynamic-tensor scales depend on M: one reference per M; otherwise rows
     * are independent and the M=256 reference serves every prefix */
    bool per_m = act == QP_ACT_FP8_DYNAMIC_TENSOR;
    uint16_t *ref[VK_NM], *ref_own[VK_NM] = {0};
    for (int i = 0; i < VK_NM; i++) {
        if (!per_m && i < VK_NM - 1) continue;
        ref_own[i] = malloc(sizeof(uint16_t) * (size_t)vk_Ms[i] * N);
        CHECK(bh_layer_ref(&L, x, vk_Ms[i], ref_own[i]) == QP_OK, "fp8 reference");
    }
    for (int i = 0; i < VK_NM; i++) ref[i] = per_m ? ref_own[i] : ref_own[VK_NM - 1];
    char name[160];
    snprintf(name, sizeof name, "fp8 %s %s%s%s K=%d N=%d", bh_dt_name(dt),
             act == QP_ACT_FP8_STATIC ? "static" : act == QP_ACT_FP8_DYNAMIC_TENSOR ? "dynamic-tensor" : "dynamic-token",
             bias ? " bias" : "", identity ? " identity (exact)" : "", K, N);
    fp8_cmp c = {.L = &L, .x = x, .ref = ref};
    vk_run_paths(&L.d, paths, n_paths, vk_Ms, VK_NM, x, ref, dt, name, identity ? NULL : fp8_bound, &c);
    for (int i = 0; i < VK_NM; i++) free(ref_own[i]);
    free(x);
    bh_layer_free(&L);
}

/* the vk-linear cases: W8A8-INT8 (4 activation modes x fp16/bf16 x 5 (K, N) shapes
 * around the tile and word edges, bias and per-tensor / per-channel
 * weights alternating) and QQQ (group -1 / 128 x 3 shapes, bias on / off,
 * group scales that make the int8 weight wrap) bit for bit on the device's
 * paths (GEMV / tiled x int-dot / plain) and every M; W8A8-FP8 (3 modes x
 * fp16 / bf16) on GEMV and tiled within the fp32-accumulation bound, plus
 * an identity weight per mode compared bit for bit. */
void vk_linear_cases(void) {
    static const int shapes[][2] = {{16, 64}, {31, 67}, {128, 128}, {300, 129}, {513, 33}}; /* K, N */
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    int variant = 0;
    if (bh_group("int8"))
        for (int dt = 0; dt < 2; dt++)
            for (int mode = 0; mode < 4; mode++)
                for (int s = 0; s < ns; s++, variant++)
                    vk_int8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, mode < 2, (mode & 1) == 0, variant % 2 == 0,
                            variant % 3 != 1, shapes[s][0], shapes[s][1], vk_ip, vk_nip, vk_Ms, VK_NM);
    static const int qshapes[][2] = {{128, 64}, {256, 192}, {384, 128}};
    if (bh_group("qqq"))
        for (int g = 0; g < 2; g++)
            for (int s = 0; s < 3; s++) vk_qqq(g ? 128 : -1, s != 1, qshapes[s][0], qshapes[s][1], vk_ip, vk_nip);
    static const unsigned fpaths[] = {QP_PATH_GEMV, QP_PATH_TILED};
    static const qp_act_mode facts[] = {QP_ACT_FP8_STATIC, QP_ACT_FP8_DYNAMIC_TENSOR, QP_ACT_FP8_DYNAMIC_TOKEN};
    variant = 0;
    if (bh_group("fp8"))
        for (int dt = 0; dt < 2; dt++)
            for (int a = 0; a < 3; a++) {
                vk_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], a != 1, 72, 72, true, fpaths, 2);
                for (int s = 0; s < ns; s += 2, variant++)
                    vk_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], variant % 2 == 0, shapes[s][0], shapes[s][1],
                           false, fpaths, 2);
            }
}
