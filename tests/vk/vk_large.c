/* vk-large: big layers and weights over several bindings. A 4096x4096
 * int8 layer (M 1, 17, auto path) bit for bit; a real 16400x8192 layer
 * (134 MB, past lavapipe's maxStorageBufferRange) split over two bindings
 * (QPORT_TEST_SKIP_LARGE=1 skips it); int8, fp8, QQQ int4, W4A16, MXFP4,
 * NVFP4, fp8 per-block and unquantized weights split into 2-10 chunks on a
 * second state with QPORT_VK_MAX_BINDING=4096; and forward times at
 * 4096x4096 (informational: CPU-class devices say little about GPUs;
 * QPORT_TEST_SKIP_TIMING=1 skips them, QPORT_TEST_TIMING=1 adds M = 256,
 * QPORT_TEST_TIMING_DEBUG=1 a few odd shapes). */
#include <stdio.h>
#include <stdlib.h>

#include "vk_tests.h"

/* Mean wall time of a forward (submit + wait included) for a prepared desc. */
static void time_forward(qp_lin_desc *desc, unsigned path, int M, int reps, const char *name) {
    void *lin = NULL, *xb = NULL, *yb = NULL;
    if (bh_ops->linear_prepare(bh_dev, desc, path, &lin) != QP_OK ||
        bh_ops->buffer_alloc(bh_dev, (size_t)M * desc->K * 2, &xb) != QP_OK ||
        bh_ops->buffer_alloc(bh_dev, (size_t)M * desc->N * 2, &yb) != QP_OK) {
        CHECK(0, "timing %s: %s", name, bh_err);
    } else {
        uint16_t *x = calloc((size_t)M * desc->K, 2);
        bh_x_rows(desc->act_dtype, x, M, desc->K, false);
        bh_ops->buffer_upload(bh_dev, xb, 0, x, (size_t)M * desc->K * 2);
        free(x);
        char how[96];
        bh_ops->linear_describe(bh_dev, lin, M, how, sizeof how);
        bh_ops->linear_forward(bh_dev, lin, xb, M, yb); /* pipelines */
        double t = bh_now();
        for (int r = 0; r < reps; r++) bh_ops->linear_forward(bh_dev, lin, xb, M, yb);
        t = (bh_now() - t) / reps;
        double wb = desc->kind == QP_SCHEME_QQQ_W4A8 || desc->kind == QP_SCHEME_NVFP4 ? 0.5
                    : desc->kind == QP_SCHEME_OCP_MX && desc->w_elem == QP_DTYPE_F4_E2M1 ? 0.5
                    : desc->kind == QP_SCHEME_UNQUANTIZED ? 2.0 : 1.0;
        printf("  %-28s M=%-4d %-34s %8.2f ms  %7.2f GB/s weights  %7.1f GOP/s\n", name, M, how, 1e3 * t,
               (double)desc->N * desc->K * wb / t * 1e-9,
               2.0 * M * desc->N * desc->K / t * 1e-9);
    }
    bh_ops->buffer_free(bh_dev, xb);
    bh_ops->buffer_free(bh_dev, yb);
    if (lin) bh_ops->linear_destroy(bh_dev, lin);
}

static void timings(bool have_dot) {
    int N = 4096, K = 4096;
    size_t nk = (size_t)N * K;
    int8_t *w = malloc(nk), *q4 = malloc(nk);
    float *ws = malloc(sizeof(float) * N);
    for (size_t i = 0; i < nk; i++) { w[i] = (int8_t)((int)(bh_rand32() % 255) - 127); q4[i] = (int8_t)((int)(bh_rand32() % 16) - 8); }
    for (int n = 0; n < N; n++) ws[n] = 1e-3f;
    int8_t *w8 = malloc(nk);
    for (size_t i = 0; i < nk; i++) w8[i] = (int8_t)(16 * q4[i]);
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_INT8, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .w_i8 = w, .w_scale = ws,
                     .w_per_channel = 1};
    qp_lin_desc q = {.struct_size = sizeof q, .kind = QP_SCHEME_QQQ_W4A8, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing-qqq", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .group_size = -1,
                     .q4 = q4, .w8 = w8, .s_channel = ws};
    printf("timings, 4096x4096 (informational; CPU-class devices say little about GPUs):\n");
    if (getenv("QPORT_TEST_TIMING_DEBUG")) {
        qp_lin_desc t = d;
        t.N = 64; t.K = 64;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "tiny 64x64");
        t.N = 4096; t.K = 64;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "N4096 K64");
        t.N = 64; t.K = 4096;
        time_forward(&t, QP_PATH_NO_INT_DOT, 1, 5, "N64 K4096");
        time_forward(&d, QP_PATH_NO_INT_DOT | QP_PATH_TILED, 1, 5, "int8 tiled M=1");
    }
    time_forward(&d, QP_PATH_NO_INT_DOT, 1, 5, "int8 dyn-sym");
    if (have_dot) time_forward(&d, QP_PATH_INT_DOT, 1, 5, "int8 dyn-sym");
    time_forward(&q, QP_PATH_NO_INT_DOT, 1, 5, "qqq channel (int4)");
    if (getenv("QPORT_TEST_TIMING")) { /* seconds each on lavapipe: opt-in */
        time_forward(&d, QP_PATH_NO_INT_DOT, 256, 2, "int8 dyn-sym");
        if (have_dot) time_forward(&d, QP_PATH_INT_DOT, 256, 2, "int8 dyn-sym");
    }
    free(w); free(q4); free(w8); free(ws);
}

/* forward times of the issue-9 layers at 4096 x 4096, M = 1 (informational) */
static void fl_timings(void) {
    int N = 4096, K = 4096;
    size_t nk = (size_t)N * K;
    uint8_t *codes = malloc(nk), *w8 = malloc(nk);
    uint16_t *wa = malloc(2 * nk);
    float *blk = malloc(sizeof(float) * nk / 16), lut[256], bs[32 * 32];
    for (size_t i = 0; i < nk; i++) {
        uint32_t r = bh_rand32();
        codes[i] = (uint8_t)(r & 15);
        w8[i] = (uint8_t)((r >> 8) & 0x77);
        wa[i] = bh_enc(QP_DTYPE_F16, bh_frand() * 0.05f);
    }
    for (size_t i = 0; i < nk / 16; i++) blk[i] = 1.0f;
    for (int i = 0; i < 256; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i & 15);
    for (int i = 0; i < 32 * 32; i++) bs[i] = 1e-3f;
    qp_lin_desc u = {.struct_size = sizeof u, .kind = QP_SCHEME_UNQUANTIZED, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                     .layer = "timing-unq", .act = QP_ACT_NONE, .w_act = wa};
    qp_lin_desc mx = {.struct_size = sizeof mx, .kind = QP_SCHEME_OCP_MX, .act_dtype = QP_DTYPE_F16, .N = N, .K = K,
                      .layer = "timing-mx", .act = QP_ACT_MX_QDQ, .act_elem = QP_DTYPE_F4_E2M1, .act_mbits = 1,
                      .act_emax = 2, .w_elem = QP_DTYPE_F4_E2M1, .w_codes = codes, .w_lut = lut, .w_blk = 32,
                      .w_blk_scale = blk};
    qp_lin_desc nv = mx;
    nv.kind = QP_SCHEME_NVFP4;
    nv.layer = "timing-nvfp4";
    nv.act = QP_ACT_NVFP4_QDQ;
    nv.w_blk = 16;
    nv.input_global_scale = nv.input_global_scale_inv = 1.0f;
    nv.bias_after_round = 1;
    qp_lin_desc fb = {.struct_size = sizeof fb, .kind = QP_SCHEME_W8A8_FP8_BLOCK, .act_dtype = QP_DTYPE_F16, .N = N,
                      .K = K, .layer = "timing-fp8b", .act = QP_ACT_FP8_GROUP128, .w_u8 = w8, .w_scale = bs,
                      .w_per_channel = 1};
    time_forward(&u, 0, 1, 5, "unquantized fp16");
    time_forward(&mx, 0, 1, 5, "mxfp4 w+a (qdq)");
    time_forward(&nv, 0, 1, 5, "nvfp4");
    time_forward(&fb, 0, 1, 5, "fp8 per-block");
    free(codes); free(w8); free(wa); free(blk);
}

/* Weights split over bindings: a lowered limit on a second context. */
static void split(void) {
    setenv("QPORT_VK_MAX_BINDING", "4096", 1);
    void *st2 = NULL, *saved = bh_dev;
    CHECK(bh_ops->init(&bh_host, &st2) == QP_OK && bh_ops->device_count(st2) > 0, "init with QPORT_VK_MAX_BINDING");
    if (st2 && bh_ops->device_count(st2) > 0) {
        bh_dev = bh_ops->device_get(st2, 0);
        static const int ms[] = {1, 5, 17, 64};
        static const unsigned paths[] = {QP_PATH_GEMV, QP_PATH_TILED};
        vk_int8(QP_DTYPE_F16, false, false, true, true, 300, 129, paths, 2, ms, 4);
        vk_fp8(QP_DTYPE_BF16, QP_ACT_FP8_DYNAMIC_TOKEN, true, 300, 129, false, paths, 2);
        vk_qqq(128, true, 256, 192, paths, 2); /* int4 codes + tables: 160 bytes a row, 8 chunks */
        vk_w4a16(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, true, false, 200, 256); /* 128 bytes a row, 7 chunks */
        static const vk_fl_case fc[] = {
            {FL_MX, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 192, 129, false, true, 0}, /* 4 chunks */
            {FL_NVFP4, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 144, 100, false, true, 0},                /* 2 chunks */
            {FL_FP8B, QP_DTYPE_BF16, 0, 0, 256, 130, false, true, 1},                                 /* 9 chunks */
            {FL_UNQ, QP_DTYPE_F16, 0, 0, 96, 0, true, false, 0},                                      /* 5 chunks */
        };
        for (int i = 0; i < 4; i++) vk_fl(&fc[i]);
    }
    bh_dev = saved;
    bh_ops->shutdown(st2);
    unsetenv("QPORT_VK_MAX_BINDING");
}

void vk_large_cases(void) {
    /* one layer of 4096 x 4096, the decode and a prefill-ish M, auto path */
    {
        static const int ms[] = {1, 17};
        static const unsigned paths[] = {QP_PATH_AUTO};
        vk_int8(QP_DTYPE_F16, false, true, true, true, 4096, 4096, paths, 1, ms, 2);
    }
    /* weights past maxStorageBufferRange for real (lavapipe: 128 MiB):
     * 16400 x 8192 int8 = 134,348,800 bytes, split over two bindings */
    if (!getenv("QPORT_TEST_SKIP_LARGE") && bh_info.caps.max_buffer_bytes > 0 &&
        bh_info.caps.max_buffer_bytes <= ((int64_t)1 << 27) && bh_info.memory_bytes >= ((uint64_t)1 << 30)) {
        static const int ms[] = {1, 3};
        static const unsigned paths[] = {QP_PATH_AUTO};
        vk_int8(QP_DTYPE_BF16, false, true, true, true, 8192, 16400, paths, 1, ms, 2);
    }
    if (!getenv("QPORT_TEST_SKIP_TIMING")) {
        timings(bh_info.caps.int_dot);
        fl_timings();
    }
    split();
}
