/* Vulkan: the issue-9 float-weight layers (OCP-MX, W4A8-MXFP4-FP8, NVFP4,
 * unquantized) and W8A8-FP8 per-block. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_tests.h"

bool vk_fl_layer(const vk_fl_case *c, int N, bh_sel sel, bh_layer *L) {
    if (c->kind == FL_FP8B) {
        bh_fp8_block_layer(L, c->dt, c->ue8m0, c->bias, sel, N, c->K);
        return true;
    }
    static const bh_fw_kind fk[] = {BH_FW_MX, BH_FW_W4A8, BH_FW_NVFP4, BH_FW_UNQ};
    bh_fw_spec s;
    bh_fw_spec_init(&s, fk[c->kind], c->dt, c->w_elem, c->act, N, c->K, sel, c->bias);
    s.e8m0_lo = 124; /* 2^-3 .. 2^2: exact in fp16 and bf16 */
    s.e8m0_hi = 129;
    s.e4m3_lo = 0x30; /* e4m3 0.5 .. 2 */
    s.e4m3_hi = 0x40;
    s.wact_amp = 0.1f;
    s.in_scale = 0.0123f;
    s.in_gscale = 0.37f;
    return bh_fw_layer(L, &s);
}

static const char *elem_name(qp_dtype e) {
    return e == QP_DTYPE_F4_E2M1 ? "fp4" : e == QP_DTYPE_F6_E3M2 ? "fp6e3m2" : e == QP_DTYPE_F6_E2M3 ? "fp6e2m3" : "fp8";
}

typedef struct fl_cmp {
    const bh_layer *L;
    const uint16_t *ref;
    double *xa; /* T_k [MM][K]: |x'|, or the fp8-block activation term */
    bool nvfp4_bias;
} fl_cmp;

static bool fl_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    (void)mi;
    fl_cmp *c = ctx_;
    const bh_layer *L = c->L;
    int K = L->K, N = L->N;
    double *ts = calloc((size_t)M * N, sizeof(double)), *extra = NULL;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double a = c->xa[(size_t)m * K + k];
            for (int n = 0; n < N; n++) {
                double t = a * fabs(L->wd[(size_t)n * K + k]);
                if (!isnan(t)) ts[(size_t)m * N + n] += t;
            }
        }
    if (c->nvfp4_bias) { /* the bias added after the rounded sum */
        extra = calloc((size_t)M * N, sizeof(double));
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double rv = bh_dec(L->dt, c->ref[(size_t)m * N + n]);
                extra[(size_t)m * N + n] = bh_ulp(L->dt, fabs(rv - bh_dec(L->dt, L->bias[n])));
            }
    }
    double gam = L->d.kind == QP_SCHEME_W8A8_FP8_BLOCK ? 132.0 + K / 128.0 : K + 2.0;
    int bad = bh_check_bound(y, c->ref, ts, gam, extra, M, N, L->dt, what);
    free(ts);
    free(extra);
    return bad == 0;
}

void vk_fl(const vk_fl_case *c) {
    static const int ms[] = {1, 3, 16, 17, 64};
    static const unsigned paths[] = {QP_PATH_AUTO, QP_PATH_GEMV, QP_PATH_TILED};
    const int MM = 64;
    int K = c->K, N = c->sel ? c->K : c->N;
    qp_dtype dt = c->dt;
    bh_layer L;
    if (!vk_fl_layer(c, N, c->sel ? BH_SEL_PERM : BH_SEL_NONE, &L)) {
        bh_layer_free(&L);
        return;
    }
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    bh_x_blocks(dt, x, MM, K, BH_X_SPECIALS);
    CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "float-layer reference");
    char name[200];
    static const char *const kn[] = {"ocp-mx", "w4a8-mxfp4-fp8", "nvfp4", "unquantized", "fp8-block"};
    static const char *const an[] = {"none", "mxfp4", "mxfp6e3m2", "mxfp6e2m3", "mxfp8"};
    snprintf(name, sizeof name, "%s %s%s%s%s%s%s%s K=%d N=%d", kn[c->kind], bh_dt_name(dt),
             c->kind == FL_MX ? " w=" : "", c->kind == FL_MX ? elem_name(c->w_elem) : "", c->kind == FL_MX ? " a=" : "",
             c->kind == FL_MX ? an[c->act] : "", c->ue8m0 ? " ue8m0" : "",
             c->sel ? " selection (exact)" : c->bias ? " bias" : "", K, N);
    uint16_t *refs[5] = {ref, ref, ref, ref, ref};
    fl_cmp cc = {.L = &L, .ref = ref, .nvfp4_bias = c->kind == FL_NVFP4 && c->bias};
    if (!c->sel) {
        cc.xa = malloc(sizeof(double) * (size_t)MM * K);
        if (c->kind == FL_FP8B) {
            /* the dequantized fp8 activation: the group-128 amax, half a code step */
            for (int m = 0; m < MM; m++)
                for (int g0 = 0; g0 < K; g0 += 128) {
                    double amax = 0;
                    for (int k = g0; k < g0 + 128; k++) {
                        double v = fabs((double)bh_dec(dt, x[(size_t)m * K + k]));
                        if (v > amax) amax = v;
                    }
                    double sg = 2.0 * fmax(1e-10, amax) / 448.0;
                    for (int k = g0; k < g0 + 128; k++)
                        cc.xa[(size_t)m * K + k] = fabs((double)bh_dec(dt, x[(size_t)m * K + k])) * 1.0625 + 0x1p-10 * sg;
                }
        } else if (c->kind == FL_UNQ || (c->kind == FL_MX && c->act == QP_OCP_MX_ACT_NONE)) {
            for (size_t i = 0; i < (size_t)MM * K; i++) cc.xa[i] = fabs((double)bh_dec(dt, x[i]));
        } else {
            /* |x'| through an identity weight (the reference's own qdq) */
            bh_layer I;
            vk_fl_case ci = *c;
            ci.bias = false;
            uint16_t *xp = malloc(2 * (size_t)MM * K);
            if (vk_fl_layer(&ci, K, BH_SEL_DIAG, &I))
                CHECK(bh_layer_ref(&I, x, MM, xp) == QP_OK, "identity reference");
            for (size_t i = 0; i < (size_t)MM * K; i++) cc.xa[i] = fabs((double)bh_dec(dt, xp[i]));
            free(xp);
            bh_layer_free(&I);
        }
    }
    vk_run_paths(&L.d, paths, 3, ms, 5, x, refs, dt, name, c->sel ? NULL : fl_bound, &cc);
    free(cc.xa);
    free(x); free(ref);
    bh_layer_free(&L);
}

/* ---- the vk-block-float cases: the block-float layers on auto / GEMV /
 * tiled, M in {1, 3, 16, 17, 64}: OCP-MX (fp4 / fp6 e3m2 / fp6 e2m3 / fp8
 * weights x none / MXFP4 / MXFP6 / MXFP8 activations), W4A8-MXFP4-FP8,
 * NVFP4 (bias after rounding), unquantized and fp8 per-block (fp32 and
 * UE8M0 activation scales): 14 selection-weight layers compared bit for
 * bit (fp16 and bf16) and 15 random layers within the bound, K not a
 * multiple of 32 (NVFP4, unquantized), rows with NaN (both signs), +-inf,
 * huge, tiny, zero, negative-zero and constant blocks, bias; then the
 * device_supports answers (the layers that cannot run: the probes of
 * tests/backend/test_block_float.c). */
static void fl_supports(void) {
    static const qp_scheme_kind em[] = {QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8, QP_SCHEME_NVFP4};
    for (int i = 0; i < 3; i++) {
        qp_scheme s = {.struct_size = sizeof s, .kind = em[i]};
        qp_support_info si = {0};
        CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED &&
                  strstr(si.reason, "no native"),
              "supports kind %d: %d '%s'", (int)em[i], (int)si.level, si.reason);
    }
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_NVFP4};
    qp_support_info si = {0};
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 40, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED &&
              strstr(si.reason, "block size"),
          "nvfp4 K=40 support: %s", si.reason);
    s.kind = QP_SCHEME_UNQUANTIZED;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 64, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE,
          "supports unquantized");
    s.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 256, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED,
          "supports fp8-block");
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 64, 200, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "fp8-block K=200 support: %s", si.reason);
}

void vk_block_float_cases(void) {
    const qp_dtype F = QP_DTYPE_F16, B = QP_DTYPE_BF16, F4 = QP_DTYPE_F4_E2M1, E3 = QP_DTYPE_F6_E3M2,
                   E2 = QP_DTYPE_F6_E2M3, F8 = QP_DTYPE_F8_E4M3FN;
    const vk_fl_case cases[] = {
        /* bit-exact qdq through selection weights, fp16 and bf16 */
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 96, 0, true, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 96, 0, true, false, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 0, true, false, 0},
        {FL_MX, F, F4, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_MX, B, F8, QP_OCP_MX_ACT_MXFP8, 96, 0, true, false, 0},
        {FL_W4A8, F, F4, 0, 96, 0, true, false, 0},
        {FL_W4A8, B, F4, 0, 96, 0, true, false, 0},
        {FL_NVFP4, F, F4, 0, 144, 0, true, false, 0},
        {FL_NVFP4, B, F4, 0, 144, 0, true, true, 0},
        {FL_UNQ, F, 0, 0, 96, 0, true, false, 0},
        {FL_FP8B, F, 0, 0, 128, 0, true, false, 0},
        {FL_FP8B, B, 0, 0, 128, 0, true, false, 1},
        {FL_FP8B, F, 0, 0, 256, 0, true, false, 1}, /* two groups: an inf group scale meets a zero part */
        /* random layers within the bound (K not a multiple of the 32-chunk
         * for NVFP4, N around the tiles) */
        {FL_MX, F, F4, QP_OCP_MX_ACT_NONE, 160, 67, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP4, 192, 65, false, false, 0},
        {FL_MX, F, E3, QP_OCP_MX_ACT_MXFP6_E3M2, 128, 33, false, true, 0},
        {FL_MX, B, E2, QP_OCP_MX_ACT_MXFP6_E2M3, 96, 70, false, false, 0},
        {FL_MX, F, F8, QP_OCP_MX_ACT_MXFP8, 128, 64, false, true, 0},
        {FL_MX, B, F4, QP_OCP_MX_ACT_MXFP8, 64, 129, false, true, 0},
        {FL_W4A8, F, F4, 0, 160, 66, false, true, 0},
        {FL_W4A8, B, F4, 0, 96, 31, false, false, 0},
        {FL_NVFP4, F, F4, 0, 208, 65, false, true, 0},
        {FL_NVFP4, B, F4, 0, 48, 40, false, false, 0},
        {FL_UNQ, F, 0, 0, 100, 67, false, true, 0},
        {FL_UNQ, B, 0, 0, 257, 130, false, false, 0},
        {FL_FP8B, F, 0, 0, 256, 130, false, true, 0},
        {FL_FP8B, B, 0, 0, 384, 64, false, false, 1},
        {FL_FP8B, F, 0, 0, 128, 257, false, true, 1},
    };
    if (bh_group("layers"))
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) vk_fl(&cases[i]);
    if (bh_group("faults")) fl_supports();
}
