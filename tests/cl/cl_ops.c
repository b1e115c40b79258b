/* OpenCL: the optional ops -- input rotation and the fp8 KV cache --
 * against the reference, bit for bit, also in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_tests.h"

void cl_rotation(qp_dtype dt, int r, int hadamard, const int *ms, int nms) {
    int K = 3 * r;
    int8_t *H = malloc((size_t)r * r);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) /* Sylvester's Hadamard (r a power of two), or random signs */
            H[(size_t)i * r + j] = hadamard ? (int8_t)(__builtin_popcount((unsigned)(i & j)) % 2 ? -1 : 1)
                                            : (int8_t)(bh_next() & 1 ? 1 : -1);
    void *rot = NULL;
    qp_status st = bh_ops->rotation_prepare(bh_dev, H, r, qp_rotation_norm(r), &rot);
    CHECK(st == QP_OK, "rotation_prepare r=%d: %s", r, bh_err);
    for (int mi = 0; mi < nms && rot; mi++) {
        int M = ms[mi];
        size_t n = (size_t)M * K;
        uint16_t *x = malloc(2 * n), *yr = malloc(2 * n), *y = malloc(2 * n);
        bh_x_rows(dt, x, M, K, true);
        if (M > 5) x[5 * K + 1] = bh_enc(dt, dt == QP_DTYPE_BF16 ? 3.0e38f : 65504.0f); /* overflow after the sum */
        if (M > 4) x[4 * K + 2] = dt == QP_DTYPE_BF16 ? 0xFF80 : 0xFC00;               /* -inf */
        st = qp_ref_rotation_forward(NULL, dt, x, M, K, H, r, yr);
        CHECK(st == QP_OK, "rotation reference failed");
        char what[120];
        snprintf(what, sizeof what, "rotation %s r=%d%s M=%d", bh_dt_name(dt), r, hadamard ? " hadamard" : " random signs",
                 M);
        bh_case("%s", what);
        bh_outputs += (long)n;
        unsigned char *pad = malloc(2 * n + BH_GUARD);
        void *dx = bh_alloc(2 * n), *dy = bh_alloc(2 * n + BH_GUARD);
        memset(pad, 0xA5, 2 * n + BH_GUARD);
        if (pad && dx && dy && bh_ops->buffer_upload(bh_dev, dx, 0, x, 2 * n) == QP_OK &&
            bh_ops->buffer_upload(bh_dev, dy, 0, pad, 2 * n + BH_GUARD) == QP_OK) {
            st = bh_ops->rotation_forward(bh_dev, rot, dt, dx, M, K, dy);
            CHECK(st == QP_OK, "%s: rotation_forward: %s", what, bh_err);
            bh_ops->buffer_download(bh_dev, dy, 0, y, 2 * n);
            CHECK(bh_guard_intact(dy, 2 * n, 2 * n + BH_GUARD), "%s: guard band overwritten", what);
            bh_compare_exact(y, yr, M, K, dt, what);
            /* in place (x and y one buffer): rotated from a copy */
            if (bh_ops->buffer_upload(bh_dev, dx, 0, x, 2 * n) == QP_OK) {
                st = bh_ops->rotation_forward(bh_dev, rot, dt, dx, M, K, dx);
                CHECK(st == QP_OK, "%s: in-place rotation: %s", what, bh_err);
                bh_ops->buffer_download(bh_dev, dx, 0, y, 2 * n);
                strcat(what, " in place");
                bh_compare_exact(y, yr, M, K, dt, what);
            }
        }
        bh_free(dx);
        bh_free(dy);
        free(x); free(yr); free(y); free(pad);
    }
    if (rot) bh_ops->rotation_destroy(bh_dev, rot);
    free(H);
}

/* every fp16 / bf16 pattern through kv_quantize, every code through
 * kv_dequantize, bit-exact with the reference */
void cl_kv(qp_dtype dt, float scale) {
    size_t n = 65536;
    uint16_t *x = malloc(2 * n), *back = malloc(2 * 256), *backr = malloc(2 * 256);
    uint8_t *q = malloc(n + BH_GUARD), *qr = malloc(n), codes[256];
    for (size_t i = 0; i < n; i++) x[i] = (uint16_t)i;
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    void *dx = bh_alloc(2 * n), *dq = bh_alloc(n + BH_GUARD), *dc = bh_alloc(256), *db = bh_alloc(2 * 256);
    const char *dn = bh_dt_name(dt);
    char wq[80], wd[80];
    snprintf(wq, sizeof wq, "kv_quantize %s scale %g", dn, (double)scale);
    snprintf(wd, sizeof wd, "kv_dequantize %s scale %g", dn, (double)scale);
    bh_case("%s", wq);
    bh_case("%s", wd);
    bh_outputs += (long)n + 256;
    if (dx && dq && dc && db) {
        memset(q, 0xA5, n + BH_GUARD);
        bh_ops->buffer_upload(bh_dev, dx, 0, x, 2 * n);
        bh_ops->buffer_upload(bh_dev, dq, 0, q, n + BH_GUARD);
        qp_status st = bh_ops->kv_quantize(bh_dev, dt, dx, n, scale, dq);
        CHECK(st == QP_OK, "%s: %s", wq, bh_err);
        bh_ops->buffer_download(bh_dev, dq, 0, q, n + BH_GUARD);
        qp_ref_kv_quantize(NULL, dt, x, n, scale, qr);
        int bad = 0, gb = 0;
        for (size_t i = 0; i < n; i++)
            if (q[i] != qr[i] && bad++ < 3)
                fprintf(stderr, "  %s: x=0x%04zx -> 0x%02x, reference 0x%02x\n", wq, i, q[i], qr[i]);
        for (size_t i = n; i < n + BH_GUARD; i++) gb += q[i] != 0xA5;
        CHECK(!bad && !gb, "%s: %d of 65536 codes differ, %d guard bytes", wq, bad, gb);
        bh_ops->buffer_upload(bh_dev, dc, 0, codes, 256);
        st = bh_ops->kv_dequantize(bh_dev, dt, dc, 256, scale, db);
        CHECK(st == QP_OK, "%s: %s", wd, bh_err);
        bh_ops->buffer_download(bh_dev, db, 0, back, 2 * 256);
        qp_ref_kv_dequantize(NULL, dt, codes, 256, scale, backr);
        bh_compare_exact(back, backr, 1, 256, dt, wd);
        /* in place (src and dst one buffer) both ways */
        bh_ops->buffer_upload(bh_dev, dx, 0, x, 2 * n);
        st = bh_ops->kv_quantize(bh_dev, dt, dx, n, scale, dx);
        CHECK(st == QP_OK, "in-place %s: %s", wq, bh_err);
        bh_ops->buffer_download(bh_dev, dx, 0, q, n);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += q[i] != qr[i];
        CHECK(!bad, "in-place %s: %d codes differ", wq, bad);
        bh_ops->buffer_upload(bh_dev, db, 0, codes, 256);
        st = bh_ops->kv_dequantize(bh_dev, dt, db, 256, scale, db);
        CHECK(st == QP_OK, "in-place %s: %s", wd, bh_err);
        bh_ops->buffer_download(bh_dev, db, 0, back, 2 * 256);
        bh_compare_exact(back, backr, 1, 256, dt, "in-place kv_dequantize");
    }
    bh_free(dx); bh_free(dq); bh_free(dc); bh_free(db);
    free(x); free(back); free(backr); free(q); free(qr);
}
