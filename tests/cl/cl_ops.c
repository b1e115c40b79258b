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

/* cl-ops: the optional ops. Rotation bit-exact with qp_ref_rotation_forward
 * (Sylvester's Hadamard r = 1, 64 and random signs r = 32, 128; NaN, -inf
 * and overflowing rows), every fp16 / bf16 pattern through kv_quantize and
 * all 256 codes through kv_dequantize at four scales (also in place);
 * their faults (bad entries, K off the rotation, fp32, short buffers, zero
 * scales); buffer_copy with offsets, bounds and overlap; buffer_copy_time
 * and linear_time (total >= gemm-only > 0). */


static void op_faults_and_copies(void) {
    int8_t H[4] = {1, 1, 1, -1}, Hb[4] = {1, 2, 1, -1};
    void *rot = NULL;
    qp_status st = bh_ops->rotation_prepare(bh_dev, Hb, 2, 0.70710677f, &rot);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "+1 or -1"), "rotation entry 2: %d '%s'", (int)st, bh_err);
    st = bh_ops->rotation_prepare(bh_dev, H, 2, 0.70710677f, &rot);
    void *b1 = bh_alloc(64), *b2 = bh_alloc(64 + 16);
    if (st == QP_OK && b1 && b2) {
        st = bh_ops->rotation_forward(bh_dev, rot, QP_DTYPE_F16, b1, 1, 3, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "multiple of the rotation size"), "rotation K=3: %d '%s'",
              (int)st, bh_err);
        st = bh_ops->rotation_forward(bh_dev, rot, QP_DTYPE_F32, b1, 1, 4, b2);
        CHECK(st == QP_ERR_UNSUPPORTED, "rotation f32: %d '%s'", (int)st, bh_err);
        st = bh_ops->rotation_forward(bh_dev, rot, QP_DTYPE_F16, b1, 2, 32, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "smaller"), "rotation short x: %d '%s'", (int)st, bh_err);
        st = bh_ops->kv_quantize(bh_dev, QP_DTYPE_F16, b1, 32, 0.0f, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT, "kv scale 0: %d '%s'", (int)st, bh_err);
        st = bh_ops->kv_quantize(bh_dev, QP_DTYPE_F16, b1, 33, 1.0f, b2);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "too small"), "kv short: %d '%s'", (int)st, bh_err);
        st = bh_ops->kv_dequantize(bh_dev, QP_DTYPE_F32, b1, 8, 1.0f, b2);
        CHECK(st == QP_ERR_UNSUPPORTED, "kv f32: %d '%s'", (int)st, bh_err);
        bh_case("rotation/kv faults");
        /* copies: offsets, bounds, overlap */
        uint8_t src[64], got[80];
        for (int i = 0; i < 64; i++) src[i] = (uint8_t)(i * 7 + 1);
        memset(got, 0xA5, sizeof got);
        bh_ops->buffer_upload(bh_dev, b1, 0, src, 64);
        bh_ops->buffer_upload(bh_dev, b2, 0, got, 80);
        st = bh_ops->buffer_copy(bh_dev, b1, 8, b2, 3, 50);
        CHECK(st == QP_OK, "buffer_copy: %s", bh_err);
        bh_ops->buffer_download(bh_dev, b2, 0, got, 80);
        int bad = 0;
        for (int i = 0; i < 80; i++) bad += got[i] != (i >= 3 && i < 53 ? src[i + 5] : 0xA5);
        CHECK(!bad, "buffer_copy: %d bytes wrong", bad);
        st = bh_ops->buffer_copy(bh_dev, b1, 20, b2, 0, 45);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "source"), "copy past the source: %d '%s'", (int)st, bh_err);
        st = bh_ops->buffer_copy(bh_dev, b1, 0, b1, 8, 16);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "overlapping"), "overlapping copy: %d '%s'", (int)st,
              bh_err);
        bh_case("buffer_copy");
        double ms[3] = {-1, -1, -1};
        st = bh_ops->buffer_copy_time(bh_dev, b1, b2, 64, 3, ms);
        CHECK(st == QP_OK && ms[0] >= 0 && ms[1] >= 0 && ms[2] >= 0, "buffer_copy_time: %d %g '%s'", (int)st, ms[0],
              bh_err);
        bh_case("buffer_copy_time");
    }
    if (rot) bh_ops->rotation_destroy(bh_dev, rot);
    bh_free(b1);
    bh_free(b2);
}

/* device timers: total >= gemm-only >= 0 on an MX layer (a qdq step) and
 * an unquantized one */
static void timers(void) {
    for (int kind = 0; kind < 2; kind++) {
        int N = 64, K = 128, M = 5;
        static uint8_t codes[64 * 128];
        static float bs[64 * 4], lut[256];
        static uint16_t wact[64 * 128];
        for (int i = 0; i < 64 * 4; i++) bs[i] = 1.0f;
        for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
        for (int i = 0; i < N * K; i++) {
            codes[i] = (uint8_t)(i % 16);
            wact[i] = bh_enc(QP_DTYPE_F16, 0.25f);
        }
        qp_lin_desc d = {0};
        d.struct_size = sizeof d;
        d.kind = kind ? QP_SCHEME_UNQUANTIZED : QP_SCHEME_OCP_MX;
        d.act_dtype = QP_DTYPE_F16;
        d.N = N;
        d.K = K;
        d.layer = "timed";
        if (kind) { /* the weight fields of the desc's kind only */
            d.w_act = wact;
            d.act = QP_ACT_NONE;
        } else {
            d.w_elem = QP_DTYPE_F4_E2M1;
            d.w_codes = codes;
            d.w_lut = lut;
            d.w_blk = 32;
            d.w_blk_scale = bs;
            d.act = QP_ACT_MX_QDQ;
            d.act_elem = QP_DTYPE_F4_E2M1;
            d.act_mbits = 1;
            d.act_emax = 2;
        }
        void *lin = NULL;
        qp_status st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
        CHECK(st == QP_OK, "timed layer: %s", bh_err);
        void *dx = bh_alloc((size_t)M * K * 2), *dy = bh_alloc((size_t)M * N * 2);
        if (lin && dx && dy) {
            double tot[3] = {-1, -1, -1}, gm[3] = {-1, -1, -1};
            st = bh_ops->linear_time(bh_dev, lin, dx, M, dy, 3, tot, gm);
            CHECK(st == QP_OK, "linear_time: %s", bh_err);
            for (int i = 0; i < 3; i++)
                CHECK(tot[i] > 0 && gm[i] > 0 && gm[i] <= tot[i], "linear_time rep %d: total %g gemm %g", i, tot[i],
                      gm[i]);
            printf("linear_time %s M=%d %dx%d: total %.3f ms, gemm %.3f ms\n", kind ? "unquantized" : "mxfp4", M, N, K,
                   tot[2], gm[2]);
        }
        bh_free(dx);
        bh_free(dy);
        if (lin) bh_ops->linear_destroy(bh_dev, lin);
    }
}

void cl_ops_cases(void) {
    static const int ms[] = {1, 3, 17};
    if (bh_group("rotation")) {
        cl_rotation(QP_DTYPE_F16, 64, 1, ms, 3);
        cl_rotation(QP_DTYPE_BF16, 64, 1, ms, 3);
        cl_rotation(QP_DTYPE_F16, 32, 0, ms, 3);
        cl_rotation(QP_DTYPE_BF16, 128, 0, ms, 3);
        cl_rotation(QP_DTYPE_F16, 1, 1, ms, 3);
    }
    static const float scales[] = {1.0f, 0.0173f, 3.7e-3f, 240.5f};
    if (bh_group("kv"))
        for (int i = 0; i < 4; i++) {
            cl_kv(QP_DTYPE_F16, scales[i]);
            cl_kv(QP_DTYPE_BF16, scales[i]);
        }
    if (bh_group("copies")) op_faults_and_copies();
    if (bh_group("timers")) timers();
}
