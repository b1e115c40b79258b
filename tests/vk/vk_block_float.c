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
