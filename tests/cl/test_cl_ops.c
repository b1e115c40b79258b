/* cl-ops: the optional ops. Rotation bit-exact with qp_ref_rotation_forward
 * (Sylvester's Hadamard r = 1, 64 and random signs r = 32, 128; NaN, -inf
 * and overflowing rows), every fp16 / bf16 pattern through kv_quantize and
 * all 256 codes through kv_dequantize at four scales (also in place);
 * their faults (bad entries, K off the rotation, fp32, short buffers, zero
 * scales); buffer_copy with offsets, bounds and overlap; buffer_copy_time
 * and linear_time (total >= gemm-only > 0). */
#include <stdio.h>
#include <string.h>

#include "cl_tests.h"

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
        d.family = kind ? QP_LIN_DENSE : QP_LIN_BLOCK_FLOAT;
        if (kind) {
            d.w_act = wact;
        } else {
            d.w_elem = QP_DTYPE_F4_E2M1;
            d.w_codes = codes;
            d.w_lut = lut;
            d.w_blk = 32;
            d.w_blk_scale = bs;
        }
        d.act = kind ? QP_ACT_NONE : QP_ACT_MX_QDQ;
        d.act_elem = QP_DTYPE_F4_E2M1;
        d.act_mbits = 1;
        d.act_emax = 2;
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

int main(void) {
    int rc = cl_open("cl-ops");
    if (rc) return rc == 77 ? 77 : bh_finish();
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
    return cl_close();
}
