/* The cuda-faults cases: what the CUDA plugin refuses. A 2^50-byte
 * allocation (cudaMalloc's reason); uploads and downloads past the end;
 * and, on the CUDA plugin itself, tiled without int-dot, fp8 with a forced
 * int-dot path, fp8 tiled below sm_89 (a scheme kind that is not a linear
 * layer, forced paths that exclude each other: the probes of
 * tests/backend/test_faults.c). */
#include <stdio.h>
#include <string.h>

#include "cuda_tests.h"

static void faults(void) {
    void *b = NULL;
    qp_status st = bh_ops->buffer_alloc(bh_dev, (size_t)1 << 50, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY && (!cuda_is_cuda || strstr(bh_err, "cudaMalloc")), "huge alloc: %d %s", (int)st, bh_err);
    CHECK(bh_ops->buffer_alloc(bh_dev, 64, &b) == QP_OK, "small alloc");
    char tmp[128] = { 0 };
    CHECK(bh_ops->buffer_upload(bh_dev, b, 32, tmp, 64) == QP_ERR_INVALID_ARGUMENT, "upload past the end");
    CHECK(bh_ops->buffer_download(bh_dev, b, 65, tmp, 0) == QP_ERR_INVALID_ARGUMENT, "offset past the end");
    bh_ops->buffer_free(bh_dev, b);
    int8_t w[64 * 64] = { 0 };
    uint8_t w8[64 * 64] = { 0 };
    float ws[64];
    for (int i = 0; i < 64; i++) ws[i] = 1;
    qp_lin_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_INT8; d.act_dtype = QP_DTYPE_F16; d.N = 64; d.K = 64; d.layer = "fault";
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN; d.act_symmetric = 1; d.w_i8 = w; d.w_scale = ws;
    void *lin = NULL;
    if (!cuda_is_cuda) return;
    st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_TILED | QP_PATH_NO_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "fault"), "tiled + no-int-dot: %d %s", (int)st, bh_err);
    /* a KV_CACHE layer: a probe of tests/backend/test_faults.c */
    d.kind = QP_SCHEME_W8A8_FP8; d.w_u8 = w8; d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "fp8 + int-dot: %s", bh_err);
    if (bh_info.cuda_cc < 89) {
        st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_TILED, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "8.9"), "fp8 tiled below 8.9: %s", bh_err);
    }
    printf("faults: checked\n");
}

void cuda_faults_cases(void) {
    faults();
}
