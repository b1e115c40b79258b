/* cuda-ops: the optional ops. Rotation (random signs, r = 4, 32, 128)
 * bit for bit with qp_ref_rotation_forward, also in place, K off the
 * rotation refused; the fp8 KV cache (every fp16 / bf16 pattern through
 * kv_quantize at 3 scales, every code through kv_dequantize; in place;
 * zero scale and overruns refused); buffer_copy (content, overlap, bounds),
 * buffer_copy_time, linear_time; vendor_gemm_time (cuBLASLt, or the reason
 * it is not there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_tests.h"

static void misc_ops(void) {
    int before = tu_failures;
    CHECK(bh_ops->rotation_prepare && bh_ops->kv_quantize && bh_ops->kv_dequantize && bh_ops->buffer_copy && bh_ops->linear_time &&
          bh_ops->buffer_copy_time, "optional ops present");
    if (!bh_ops->rotation_prepare || !bh_ops->kv_quantize || !bh_ops->buffer_copy || !bh_ops->linear_time) return;
    /* rotation: bit-exact against qp_ref_rotation_forward */
    const int rs[] = { 4, 32, 128 };
    int rot_cases = 0;
    for (int ri = 0; ri < 3; ri++)
        for (int dt = 0; dt < 2; dt++) {
            int r = rs[ri], K = r * (ri == 2 ? 2 : 3), M = 5;
            qp_dtype dtype = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
            int8_t *H = malloc((size_t)r * r);
            for (int i = 0; i < r * r; i++) H[i] = (bh_rand32() & 1) ? 1 : -1;
            uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * K), *yg = malloc(2 * (size_t)M * K);
            bh_x_blocks(dtype, x, M, K, BH_X_SPECIALS);
            CHECK(qp_ref_rotation_forward(NULL, dtype, x, M, K, H, r, yr) == QP_OK, "ref rotation");
            void *rot = NULL, *bx = NULL, *by = NULL;
            CHECK(bh_ops->rotation_prepare(bh_dev, H, r, qp_rotation_norm(r), &rot) == QP_OK, "rotation_prepare: %s", bh_err);
            bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * K, &bx);
            bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * K, &by);
            bh_ops->buffer_upload(bh_dev, bx, 0, x, 2 * (size_t)M * K);
            CHECK(bh_ops->rotation_forward(bh_dev, rot, dtype, bx, M, K, by) == QP_OK, "rotation_forward: %s", bh_err);
            bh_ops->buffer_download(bh_dev, by, 0, yg, 2 * (size_t)M * K);
            char what[64];
            snprintf(what, sizeof what, "rotation r=%d %s", r, dt ? "bf16" : "f16");
            cuda_compare_exact(what, dtype, yr, yg, M, K);
            rot_cases++;
            CHECK(bh_ops->rotation_forward(bh_dev, rot, dtype, bx, M, K - 1, by) == QP_ERR_INVALID_ARGUMENT, "K %% r != 0");
            /* in place (x and y one buffer) */
            CHECK(bh_ops->rotation_forward(bh_dev, rot, dtype, bx, M, K, bx) == QP_OK, "in-place rotation: %s", bh_err);
            bh_ops->buffer_download(bh_dev, bx, 0, yg, 2 * (size_t)M * K);
            snprintf(what, sizeof what, "in-place rotation r=%d %s", r, dt ? "bf16" : "f16");
            cuda_compare_exact(what, dtype, yr, yg, M, K);
            bh_ops->rotation_destroy(bh_dev, rot);
            bh_ops->buffer_free(bh_dev, bx); bh_ops->buffer_free(bh_dev, by);
            free(H); free(x); free(yr); free(yg);
        }
    /* KV cache: every fp16 / bf16 pattern through quantize, every code through dequantize */
    const size_t NP = 65536;
    const float scales[] = { 1.0f, 0.0371f, 3.5f };
    uint16_t *pat = malloc(2 * NP), *dq = malloc(2 * 256), *dr = malloc(2 * 256);
    uint8_t *qr = malloc(NP), *qg = malloc(NP), codes[256];
    for (size_t i = 0; i < NP; i++) pat[i] = (uint16_t)i;
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    void *bs = NULL, *bq = NULL, *bd = NULL;
    bh_ops->buffer_alloc(bh_dev, 2 * NP, &bs);
    bh_ops->buffer_alloc(bh_dev, NP, &bq);
    bh_ops->buffer_alloc(bh_dev, 2 * 256, &bd);
    bh_ops->buffer_upload(bh_dev, bs, 0, pat, 2 * NP);
    int kv_bad = 0;
    for (int dt = 0; dt < 2; dt++)
        for (int si = 0; si < 3; si++) {
            qp_dtype dtype = dt ? QP_DTYPE_BF16 : QP_DTYPE_F16;
            CHECK(qp_ref_kv_quantize(NULL, dtype, pat, NP, scales[si], qr) == QP_OK, "ref kv");
            CHECK(bh_ops->kv_quantize(bh_dev, dtype, bs, NP, scales[si], bq) == QP_OK, "kv_quantize: %s", bh_err);
            bh_ops->buffer_download(bh_dev, bq, 0, qg, NP);
            for (size_t i = 0; i < NP; i++)
                if (qr[i] != qg[i]) { if (kv_bad++ < 3) CHECK(0, "kv_quantize %s scale %g: x %04zx -> %02x, reference %02x", dt ? "bf16" : "f16", scales[si], i, qg[i], qr[i]); }
            bh_ops->buffer_upload(bh_dev, bq, 0, codes, 256);
            CHECK(qp_ref_kv_dequantize(NULL, dtype, codes, 256, scales[si], dr) == QP_OK, "ref kv dq");
            CHECK(bh_ops->kv_dequantize(bh_dev, dtype, bq, 256, scales[si], bd) == QP_OK, "kv_dequantize: %s", bh_err);
            bh_ops->buffer_download(bh_dev, bd, 0, dq, 2 * 256);
            for (int i = 0; i < 256; i++)
                if (dq[i] != dr[i]) { if (kv_bad++ < 6) CHECK(0, "kv_dequantize %s scale %g: code %02x -> %04x, reference %04x", dt ? "bf16" : "f16", scales[si], i, dq[i], dr[i]); }
        }
    /* in place: one buffer for source and result */
    {
        void *bi = NULL;
        bh_ops->buffer_alloc(bh_dev, 2 * NP, &bi);
        bh_ops->buffer_upload(bh_dev, bi, 0, pat, 2 * NP);
        CHECK(qp_ref_kv_quantize(NULL, QP_DTYPE_BF16, pat, NP, 0.0371f, qr) == QP_OK, "ref kv");
        CHECK(bh_ops->kv_quantize(bh_dev, QP_DTYPE_BF16, bi, NP, 0.0371f, bi) == QP_OK, "in-place kv_quantize: %s", bh_err);
        bh_ops->buffer_download(bh_dev, bi, 0, qg, NP);
        CHECK(memcmp(qr, qg, NP) == 0, "in-place kv_quantize differs");
        bh_ops->buffer_upload(bh_dev, bi, 0, codes, 256);
        CHECK(qp_ref_kv_dequantize(NULL, QP_DTYPE_F16, codes, 256, 3.5f, dr) == QP_OK, "ref kv dq");
        CHECK(bh_ops->kv_dequantize(bh_dev, QP_DTYPE_F16, bi, 256, 3.5f, bi) == QP_OK, "in-place kv_dequantize: %s", bh_err);
        bh_ops->buffer_download(bh_dev, bi, 0, dq, 2 * 256);
        CHECK(memcmp(dq, dr, 2 * 256) == 0, "in-place kv_dequantize differs");
        /* large in place (600000 elements, above the plugin's chunk through
         * its workspace: CUDA runs the first chunk from a copy and the rest
         * in disjoint ranges, no allocation) */
        enum { NL = 600000 };
        void *bl = NULL;
        uint16_t *lx = malloc(2 * (size_t)NL), *ly = malloc(2 * (size_t)NL), *lr = malloc(2 * (size_t)NL);
        uint8_t *lq = malloc(NL), *lqr = malloc(NL);
        if (lx && ly && lr && lq && lqr && bh_ops->buffer_alloc(bh_dev, 2 * (size_t)NL, &bl) == QP_OK) {
            for (size_t i = 0; i < NL; i++) lx[i] = (uint16_t)(i * 40503u >> 3);
            bh_ops->buffer_upload(bh_dev, bl, 0, lx, 2 * (size_t)NL);
            CHECK(qp_ref_kv_quantize(NULL, QP_DTYPE_F16, lx, NL, 0.75f, lqr) == QP_OK, "ref kv");
            CHECK(bh_ops->kv_quantize(bh_dev, QP_DTYPE_F16, bl, NL, 0.75f, bl) == QP_OK, "large in-place kv_quantize: %s", bh_err);
            bh_ops->buffer_download(bh_dev, bl, 0, lq, NL);
            size_t bad = 0;
            for (size_t i = 0; i < NL; i++) bad += lq[i] != lqr[i];
            CHECK(!bad, "large in-place kv_quantize: %zu of %d codes differ", bad, NL);
            for (size_t i = 0; i < NL; i++) lq[i] = (uint8_t)(i * 7 + (i >> 9));
            bh_ops->buffer_upload(bh_dev, bl, 0, lq, NL);
            CHECK(qp_ref_kv_dequantize(NULL, QP_DTYPE_BF16, lq, NL, 1.25f, lr) == QP_OK, "ref kv dq");
            CHECK(bh_ops->kv_dequantize(bh_dev, QP_DTYPE_BF16, bl, NL, 1.25f, bl) == QP_OK, "large in-place kv_dequantize: %s", bh_err);
            bh_ops->buffer_download(bh_dev, bl, 0, ly, 2 * (size_t)NL);
            bad = 0;
            for (size_t i = 0; i < NL; i++) bad += ly[i] != lr[i];
            CHECK(!bad, "large in-place kv_dequantize: %zu of %d values differ", bad, NL);
            bh_ops->buffer_free(bh_dev, bl);
        }
        free(lx); free(ly); free(lr); free(lq); free(lqr);
        CHECK(bh_ops->buffer_copy(bh_dev, bi, 0, bi, 100, 200) == QP_ERR_INVALID_ARGUMENT, "overlapping copy refused");
        CHECK(bh_ops->buffer_copy(bh_dev, bi, 0, bi, 200, 200) == QP_OK, "disjoint copy in one buffer: %s", bh_err);
        bh_ops->buffer_free(bh_dev, bi);
    }
    CHECK(bh_ops->kv_quantize(bh_dev, QP_DTYPE_F16, bs, NP, 0.0f, bq) == QP_ERR_INVALID_ARGUMENT, "kv scale 0");
    CHECK(bh_ops->kv_quantize(bh_dev, QP_DTYPE_F16, bs, NP + 1, 1.0f, bq) == QP_ERR_INVALID_ARGUMENT, "kv past the end");
    /* copy */
    void *bc = NULL;
    bh_ops->buffer_alloc(bh_dev, 2 * NP, &bc);
    CHECK(bh_ops->buffer_copy(bh_dev, bs, 256, bc, 0, 1000) == QP_OK, "buffer_copy: %s", bh_err);
    uint16_t back[500];
    bh_ops->buffer_download(bh_dev, bc, 0, back, 1000);
    CHECK(memcmp(back, pat + 128, 1000) == 0, "buffer_copy content");
    CHECK(bh_ops->buffer_copy(bh_dev, bs, 2 * NP - 10, bc, 0, 20) == QP_ERR_INVALID_ARGUMENT, "copy past the end");
    double ms[3] = { -1, -1, -1 };
    CHECK(bh_ops->buffer_copy_time(bh_dev, bs, bc, 2 * NP, 3, ms) == QP_OK && ms[0] >= 0 && ms[2] >= 0, "buffer_copy_time: %s", bh_err);
    /* linear_time on a small unquantized layer */
    int N = 64, K = 64, M = 3;
    uint16_t *w = calloc((size_t)N * K, 2);
    qp_lin_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_UNQUANTIZED; d.act_dtype = QP_DTYPE_F16; d.N = N; d.K = K; d.layer = "timed"; d.w_act = w;
    void *lin = NULL;
    if (bh_ops->linear_prepare(bh_dev, &d, 0, &lin) == QP_OK) {
        double tot[2] = { -1, -1 }, gm[2] = { -2, -2 };
        CHECK(bh_ops->linear_time(bh_dev, lin, bs, M, bc, 2, tot, gm) == QP_OK && tot[1] >= 0 && gm[1] >= 0 && gm[1] <= tot[1] + 1e-3,
              "linear_time: %s (%g %g)", bh_err, tot[1], gm[1]);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    free(w);
    /* cuBLASLt baseline: runs, or says why not (the emulator has none) */
    if (bh_ops->vendor_gemm_time) {
        double vm[2] = { -1, -1 };
        char vname[128] = "";
        qp_status vs = bh_ops->vendor_gemm_time(bh_dev, QP_DTYPE_F16, 64, 128, 256, 2, vm, vname, sizeof vname);
        CHECK((vs == QP_OK && vm[1] >= 0 && strstr(vname, "cuBLASLt")) ||
              (vs == QP_ERR_UNSUPPORTED && (strstr(bh_err, "cuBLASLt") || strstr(bh_err, "cublasLt"))),
              "vendor_gemm_time: %d %s", (int)vs, vs == QP_OK ? vname : bh_err);
        printf("vendor_gemm_time f16 64x128x256: %s\n", vs == QP_OK ? vname : bh_err);
        CHECK(bh_ops->vendor_gemm_time(bh_dev, QP_DTYPE_BF16, 64, 128, 256, 2, vm, vname, sizeof vname) == QP_ERR_UNSUPPORTED,
              "vendor bf16 refused");
    } else {
        CHECK(0, "vendor_gemm_time missing");
    }
    bh_ops->buffer_free(bh_dev, bs); bh_ops->buffer_free(bh_dev, bq); bh_ops->buffer_free(bh_dev, bd); bh_ops->buffer_free(bh_dev, bc);
    free(pat); free(dq); free(dr); free(qr); free(qg);
    printf("misc: rotation %d cases bit-exact, kv %d quantize x 65536 + %d dequantize x 256 %s, copy/timers %s\n", rot_cases,
           6, 6, kv_bad ? "MISMATCH" : "bit-exact", tu_failures == before ? "ok" : "FAILURES");
}

void cuda_ops_cases(void) {
    misc_ops();
}
