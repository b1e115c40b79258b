/* Vulkan: W4A16 (docs/semantics.md §17) from the canonical fields. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_tests.h"

typedef struct w4_cmp {
    const bh_layer *L;
    const uint16_t *x, *ref;
} w4_cmp;

/* (K + 2) u 1.01 sum_k |x_k| |W_k| + 2 ulp (fp32 accumulation of exact
 * dequantized weights, bias in one fp32 add); NaN stays NaN */
static bool w4a16_bound(const uint16_t *y, int M, int mi, void *ctx_, const char *what) {
    (void)mi;
    w4_cmp *c = ctx_;
    const bh_layer *L = c->L;
    int K = L->K, N = L->N;
    double *ts = calloc((size_t)M * N, sizeof(double));
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            double xv = fabs((double)bh_dec(L->dt, c->x[(size_t)m * K + k]));
            if (isnan(xv)) continue;
            for (int n = 0; n < N; n++) ts[(size_t)m * N + n] += xv * fabs(L->wd[(size_t)n * K + k]);
        }
    int bad = bh_check_bound(y, c->ref, ts, K + 2.0, NULL, M, N, L->dt, what);
    free(ts);
    return bad == 0;
}

void vk_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, bool has_bias, bool padded, int N, int K) {
    static const int ms[] = {1, 3, 16, 17, 70};
    static const unsigned paths[] = {QP_PATH_AUTO, QP_PATH_GEMV | QP_PATH_NO_INT_DOT, QP_PATH_TILED};
    const int MM = 70;
    bh_layer L;
    bh_w4a16_layer(&L, dt, pack, sym, group, has_bias, N, K);
    uint16_t *x = malloc(2 * (size_t)MM * K), *ref = malloc(2 * (size_t)MM * N);
    bh_x_rows(dt, x, MM, K, true);
    CHECK(bh_layer_ref(&L, x, MM, ref) == QP_OK, "w4a16 reference");
    char name[200];
    snprintf(name, sizeof name, "w4a16 %s %s %s g%d%s%s K=%d N=%d", bh_dt_name(dt), sym ? "int4" : "uint4",
             pack == QP_PACK_ORDER ? "order" : "reorder", group, has_bias ? " bias" : "",
             padded ? " padded-scales" : "", K, N);
    w4_cmp c = {.L = &L, .x = x, .ref = ref};
    uint16_t *refs[5] = {ref, ref, ref, ref, ref}; /* rows are independent: the M=70 reference serves every prefix */
    vk_run_paths(&L.d, paths, 3, ms, 5, x, refs, dt, name, w4a16_bound, &c);
    /* a forced integer dot product on this float layer: a clear QP_ERR_UNSUPPORTED */
    void *lin = NULL;
    bh_err[0] = 0;
    qp_status st = bh_ops->linear_prepare(bh_dev, &L.d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(bh_err, "w4a16") && strstr(bh_err, "int-dot"),
          "%s: forced int-dot: %d '%s'", name, (int)st, bh_err);
    if (lin) bh_ops->linear_destroy(bh_dev, lin);
    free(x); free(ref);
    bh_layer_free(&L);
}

/* ---- the vk-w4a16 cases: W4A16 from the canonical fields -- order and
 * reorder packing, int4 / uint4, group 32 / 64 / 128 / per-channel, fp16 /
 * bf16, K not a multiple of 32 (per-channel), padded scales -- within the
 * bound, a forced int-dot path refused; the device_supports answers for
 * groups of 16 and 32 (the prepare refusals: the probes of
 * tests/backend/test_w4a16.c). */
static void w4a16_supports(void) {
    int K = 96, N = 16;
    qp_scheme sch = {0};
    sch.struct_size = sizeof sch;
    sch.kind = QP_SCHEME_W4A16_INT4;
    sch.weight.group_size = 16;
    sch.weight.symmetric = 1;
    sch.pack_method = QP_PACK_ORDER;
    qp_support_info si = {0};
    CHECK(bh_ops->device_supports(bh_dev, &sch, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED,
          "w4a16 g16 support level %d '%s'", (int)si.level, si.reason);
    sch.weight.group_size = 32;
    sch.weight.symmetric = 0;
    CHECK(bh_ops->device_supports(bh_dev, &sch, 1, N, K, &si) == QP_OK && si.level == QP_SUPPORT_NATIVE,
          "w4a16 g32 support level %d '%s'", (int)si.level, si.reason);
}

void vk_w4a16_cases(void) {
    const qp_dtype H = QP_DTYPE_F16, B = QP_DTYPE_BF16;
    const qp_pack_method O = QP_PACK_ORDER, R = QP_PACK_REORDER;
    vk_w4a16(H, R, 1, 128, true, false, 65, 256);
    vk_w4a16(B, O, 0, 128, false, false, 33, 384);
    vk_w4a16(H, O, 1, 32, true, true, 67, 96);
    vk_w4a16(B, R, 0, 64, true, false, 50, 192);
    vk_w4a16(H, R, 0, -1, false, false, 31, 100);
    vk_w4a16(B, O, 1, -1, true, true, 64, 160);
    w4a16_supports();
}
