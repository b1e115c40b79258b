/* vk-ops: the optional ops. Rotation (Sylvester's Hadamard r = 32, 128)
 * and the fp8 KV cache (all 65,536 fp16 and bf16 patterns through
 * quantize at 3 scales, all 256 codes through dequantize, guard bytes;
 * also in place) bit for bit, K off the rotation and zero or overrunning
 * KV arguments refused; linear_time (total and GEMM-only, and the layer
 * still computes the right thing), buffer_copy, buffer_copy_time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_tests.h"

static void rotation(qp_dtype dt, int r, int M, int K) {
    int8_t *H = malloc((size_t)r * r);
    for (int i = 0; i < r; i++) /* Sylvester Hadamard: (-1)^popcount(i & j) */
        for (int j = 0; j < r; j++) H[(size_t)i * r + j] = (int8_t)(__builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1);
    uint16_t *x = malloc(2 * (size_t)M * K), *ref = malloc(2 * (size_t)M * K), *y = malloc(2 * (size_t)M * K + BH_GUARD);
    bh_x_blocks(dt, x, M, K, BH_X_SPECIALS);
    CHECK(qp_ref_rotation_forward(NULL, dt, x, M, K, H, r, ref) == QP_OK, "rotation reference");
    void *rot = NULL, *xb = NULL, *yb = NULL;
    char what[96];
    snprintf(what, sizeof what, "rotation %s r=%d M=%d K=%d", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", r, M, K);
    qp_status st = bh_ops->rotation_prepare(bh_dev, H, r, qp_rotation_norm(r), &rot);
    CHECK(st == QP_OK, "%s: prepare: %s", what, bh_err);
    size_t yb_bytes = 2 * (size_t)M * K + BH_GUARD;
    if (st == QP_OK && bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * K, &xb) == QP_OK &&
        bh_ops->buffer_alloc(bh_dev, yb_bytes, &yb) == QP_OK) {
        memset(y, 0xA5, yb_bytes);
        bh_ops->buffer_upload(bh_dev, yb, 0, y, yb_bytes);
        bh_ops->buffer_upload(bh_dev, xb, 0, x, 2 * (size_t)M * K);
        st = bh_ops->rotation_forward(bh_dev, rot, dt, xb, M, K, yb);
        CHECK(st == QP_OK, "%s: forward: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, yb, 0, y, yb_bytes);
        bh_case("%s [out of place]", what);
        bool ok = bh_compare_exact(y, ref, M, K, dt, what) == 0;
        for (size_t i = 2 * (size_t)M * K; i < yb_bytes; i++)
            if (((uint8_t *)y)[i] != 0xA5) { CHECK(0, "%s: guard band overwritten", what); ok = false; break; }
        if (!ok) vk_failed++;
        /* in place (x and y one buffer): the same bits */
        bh_ops->buffer_upload(bh_dev, yb, 0, x, 2 * (size_t)M * K);
        st = bh_ops->rotation_forward(bh_dev, rot, dt, yb, M, K, yb);
        CHECK(st == QP_OK, "%s: in place: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, yb, 0, y, 2 * (size_t)M * K);
        bh_case("%s [in place]", what);
        char w2[120];
        snprintf(w2, sizeof w2, "%s in place", what);
        if (bh_compare_exact(y, ref, M, K, dt, w2)) vk_failed++;
        /* K not a multiple of r */
        st = bh_ops->rotation_forward(bh_dev, rot, dt, xb, 1, K - 1, yb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "multiple"), "%s: K %% r: %d '%s'", what, (int)st, bh_err);
    }
    bh_ops->buffer_free(bh_dev, xb);
    bh_ops->buffer_free(bh_dev, yb);
    bh_ops->rotation_destroy(bh_dev, rot);
    free(H); free(x); free(ref); free(y);
}

/* every fp16 / bf16 pattern through kv_quantize, every code through
 * kv_dequantize, bit-exact with the reference; guard bytes past n */
static void kv(qp_dtype dt, float scale) {
    const size_t n = 65536 + 3; /* a partial last word */
    uint16_t *x = malloc(2 * n), *xd = malloc(2 * 256 + BH_GUARD), *xr = malloc(2 * 256);
    uint8_t *q = malloc(n + BH_GUARD), *qr = malloc(n), codes[256];
    for (size_t i = 0; i < n; i++) x[i] = (uint16_t)i;
    char what[96];
    snprintf(what, sizeof what, "kv %s scale %g", dt == QP_DTYPE_BF16 ? "bf16" : "fp16", (double)scale);
    CHECK(qp_ref_kv_quantize(NULL, dt, x, n, scale, qr) == QP_OK, "kv reference");
    void *xb = NULL, *qb = NULL, *db = NULL;
    if (bh_ops->buffer_alloc(bh_dev, 2 * n, &xb) == QP_OK && bh_ops->buffer_alloc(bh_dev, n + BH_GUARD, &qb) == QP_OK &&
        bh_ops->buffer_alloc(bh_dev, 2 * 256 + BH_GUARD, &db) == QP_OK) {
        memset(q, 0xA5, n + BH_GUARD);
        bh_ops->buffer_upload(bh_dev, qb, 0, q, n + BH_GUARD);
        bh_ops->buffer_upload(bh_dev, xb, 0, x, 2 * n);
        qp_status st = bh_ops->kv_quantize(bh_dev, dt, xb, n, scale, qb);
        CHECK(st == QP_OK, "%s: kv_quantize: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, qb, 0, q, n + BH_GUARD);
        bh_case("%s [quantize]", what);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                CHECK(0, "%s: quantize 0x%04zx -> 0x%02x, reference 0x%02x", what, i & 0xFFFF, q[i], qr[i]);
        for (size_t i = n; i < n + BH_GUARD; i++)
            if (q[i] != 0xA5) { CHECK(0, "%s: guard byte %zu overwritten", what, i - n); bad++; break; }
        if (bad) vk_failed++;
        for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
        CHECK(qp_ref_kv_dequantize(NULL, dt, codes, 256, scale, xr) == QP_OK, "kv dequant reference");
        memset(xd, 0xA5, 2 * 256 + BH_GUARD);
        bh_ops->buffer_upload(bh_dev, db, 0, xd, 2 * 256 + BH_GUARD);
        bh_ops->buffer_upload(bh_dev, qb, 0, codes, 256);
        st = bh_ops->kv_dequantize(bh_dev, dt, qb, 256, scale, db);
        CHECK(st == QP_OK, "%s: kv_dequantize: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, db, 0, xd, 2 * 256 + BH_GUARD);
        bh_case("%s [dequantize]", what);
        bool ok = bh_compare_exact(xd, xr, 1, 256, dt, what) == 0;
        for (size_t i = 512; i < 512 + BH_GUARD; i++)
            if (((uint8_t *)xd)[i] != 0xA5) { CHECK(0, "%s: dequantize guard overwritten", what); ok = false; break; }
        if (!ok) vk_failed++;
        /* in place: src and dst one buffer, both directions */
        bh_ops->buffer_upload(bh_dev, xb, 0, x, 2 * n);
        st = bh_ops->kv_quantize(bh_dev, dt, xb, n, scale, xb);
        CHECK(st == QP_OK, "%s: in-place kv_quantize: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, xb, 0, q, n);
        bh_case("%s [in-place quantize]", what);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                CHECK(0, "%s: in-place quantize 0x%04zx -> 0x%02x, reference 0x%02x", what, i & 0xFFFF, q[i], qr[i]);
        if (bad) vk_failed++;
        bh_ops->buffer_upload(bh_dev, db, 0, codes, 256);
        st = bh_ops->kv_dequantize(bh_dev, dt, db, 256, scale, db);
        CHECK(st == QP_OK, "%s: in-place kv_dequantize: %s", what, bh_err);
        bh_ops->buffer_download(bh_dev, db, 0, xd, 2 * 256);
        bh_case("%s [in-place dequantize]", what);
        char w2[120];
        snprintf(w2, sizeof w2, "%s in-place dequantize", what);
        if (bh_compare_exact(xd, xr, 1, 256, dt, w2)) vk_failed++;
        bh_ops->buffer_upload(bh_dev, xb, 0, x, 2 * n);
        st = bh_ops->kv_quantize(bh_dev, dt, xb, n, 0.0f, qb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "scale"), "%s: zero scale: %d '%s'", what, (int)st, bh_err);
        st = bh_ops->kv_quantize(bh_dev, dt, xb, n + BH_GUARD + 1, scale, qb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "too small"), "%s: overrun: %d '%s'", what, (int)st, bh_err);
    }
    bh_ops->buffer_free(bh_dev, xb);
    bh_ops->buffer_free(bh_dev, qb);
    bh_ops->buffer_free(bh_dev, db);
    free(x); free(xd); free(xr); free(q); free(qr);
}

/* linear_time (total and GEMM-only), buffer_copy, buffer_copy_time */
static void timers(void) {
    vk_fl_case c = {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 256, 128, false, false, 0};
    bh_layer L;
    if (!vk_fl_layer(&c, c.N, BH_SEL_NONE, &L)) {
        bh_layer_free(&L);
        return;
    }
    const qp_lin_desc d = L.d;
    void *lin = NULL, *xb = NULL, *yb = NULL, *cb = NULL;
    const int M = 16, reps = 3;
    uint16_t *x = malloc(2 * (size_t)M * c.K), *y0 = malloc(2 * (size_t)M * c.N), *y1 = malloc(2 * (size_t)M * c.N);
    bh_x_blocks(c.dt, x, M, c.K, BH_X_SPECIALS);
    qp_status st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_OK, "timers: prepare: %s", bh_err);
    if (st == QP_OK && bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * c.K, &xb) == QP_OK &&
        bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * c.N, &yb) == QP_OK && bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * c.N, &cb) == QP_OK) {
        bh_ops->buffer_upload(bh_dev, xb, 0, x, 2 * (size_t)M * c.K);
        double tot[3] = {-1, -1, -1}, gem[3] = {-1, -1, -1};
        st = bh_ops->linear_time(bh_dev, lin, xb, M, yb, reps, tot, gem);
        CHECK(st == QP_OK, "linear_time: %s", bh_err);
        for (int i = 0; i < reps && st == QP_OK; i++)
            CHECK(tot[i] > 0 && gem[i] > 0 && gem[i] <= tot[i] && tot[i] < 1e4, "linear_time rep %d: total %g gemm %g", i,
                  tot[i], gem[i]);
        bh_ops->buffer_download(bh_dev, yb, 0, y0, 2 * (size_t)M * c.N);
        /* the timed runs computed the layer: same bits as a plain forward */
        st = bh_ops->buffer_copy(bh_dev, yb, 0, cb, 0, 2 * (size_t)M * c.N);
        CHECK(st == QP_OK, "buffer_copy: %s", bh_err);
        bh_ops->buffer_download(bh_dev, cb, 0, y1, 2 * (size_t)M * c.N);
        CHECK(!memcmp(y0, y1, 2 * (size_t)M * c.N), "buffer_copy: copy differs");
        bh_ops->linear_forward(bh_dev, lin, xb, M, yb);
        bh_ops->buffer_download(bh_dev, yb, 0, y1, 2 * (size_t)M * c.N);
        CHECK(!memcmp(y0, y1, 2 * (size_t)M * c.N), "linear_time output differs from linear_forward");
        double ms[3] = {-1, -1, -1};
        st = bh_ops->buffer_copy_time(bh_dev, yb, cb, 2 * (size_t)M * c.N, reps, ms);
        CHECK(st == QP_OK && ms[0] >= 0 && ms[2] >= 0 && ms[2] < 1e4, "buffer_copy_time: %d %g '%s'", (int)st, ms[2], bh_err);
        st = bh_ops->buffer_copy(bh_dev, yb, 1, cb, 0, 2 * (size_t)M * c.N);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "overruns"), "buffer_copy overrun: %d '%s'", (int)st, bh_err);
        if (bh_verbose) printf("linear_time mxfp4 16x128x256: total %.3f ms, gemm %.3f ms; copy %.3f ms\n", tot[2], gem[2], ms[2]);
    }
    bh_ops->buffer_free(bh_dev, xb);
    bh_ops->buffer_free(bh_dev, yb);
    bh_ops->buffer_free(bh_dev, cb);
    if (lin) bh_ops->linear_destroy(bh_dev, lin);
    free(x); free(y0); free(y1);
    bh_layer_free(&L);
}

void vk_ops_cases(void) {
    for (int dt = 0; dt < 2; dt++) {
        qp_dtype t = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
        if (bh_group("rotation")) {
            rotation(t, 32, 11, 96);
            rotation(t, 128, 3, 256);
        }
        if (bh_group("kv")) {
            kv(t, 1.0f);
            kv(t, 0.0371f);
            kv(t, 3.5f);
        }
    }
    if (bh_group("timers")) timers();
}
