/* The vk-faults cases: what the Vulkan plugin refuses, and how. A 2^50-byte
 * allocation; the device_supports answers for a scheme kind that is not a
 * linear layer (its prepare and GEMV|TILED: the probes of
 * tests/backend/test_faults.c); a too-small output buffer; QQQ codes
 * that contradict the int8 weights; a forced int-dot path on a device
 * without it (QPORT_VK_NO_INT_DOT=1); a missing loader (QPORT_VK_LOADER):
 * zero devices. */
#include <stdlib.h>
#include <string.h>

#include "vk_tests.h"

static void faults(void) {
    void *b = NULL;
    qp_status st = bh_ops->buffer_alloc(bh_dev, (size_t)1 << 50, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY && !b && strstr(bh_err, "bytes"), "huge alloc: %d '%s'", (int)st, bh_err);
    int8_t w[64] = {0};
    float ws[4] = {1, 1, 1, 1};
    qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_KV_CACHE, .act_dtype = QP_DTYPE_F16, .N = 4, .K = 16,
                     .layer = "faults", .w_i8 = w, .w_scale = ws};
    void *lin = NULL; /* prepare of a KV_CACHE layer: a probe of tests/backend/test_faults.c */
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_KV_CACHE};
    qp_support_info si;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 4, 16, &si) == QP_OK && si.level == QP_SUPPORT_UNSUPPORTED &&
          strstr(si.reason, "not yet implemented on vulkan"), "supports KV_CACHE layer: %s", si.reason);
    s.kind = QP_SCHEME_W8A8_INT8;
    qp_device_info info = {.struct_size = sizeof info};
    bh_ops->device_info(bh_dev, &info);
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 4, 16, &si) == QP_OK &&
          si.level == (info.caps.int_dot_accelerated ? QP_SUPPORT_NATIVE : QP_SUPPORT_EMULATED), "supports int8: %s",
          si.reason);
    s.kind = QP_SCHEME_W8A8_FP8;
    CHECK(bh_ops->device_supports(bh_dev, &s, 1, 4, 16, &si) == QP_OK && si.level == QP_SUPPORT_EMULATED &&
          strstr(si.reason, "fp8"), "supports fp8: %s", si.reason);
    d.kind = QP_SCHEME_W8A8_INT8;
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = 1;
    /* a forward into a too-small output buffer is refused */
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_OK, "prepare: %s", bh_err);
    void *xb = NULL, *yb = NULL;
    if (st == QP_OK && bh_ops->buffer_alloc(bh_dev, 2 * 16 * 4, &xb) == QP_OK && bh_ops->buffer_alloc(bh_dev, 8, &yb) == QP_OK) {
        st = bh_ops->linear_forward(bh_dev, lin, xb, 4, yb);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "too small"), "small y: %d '%s'", (int)st, bh_err);
    }
    bh_ops->buffer_free(bh_dev, xb);
    bh_ops->buffer_free(bh_dev, yb);
    if (lin) bh_ops->linear_destroy(bh_dev, lin);
    /* QQQ codes that contradict the int8 weights are refused */
    int8_t q4[128 * 64], w8[128 * 64];
    float sc[64];
    for (int i = 0; i < 128 * 64; i++) { q4[i] = (int8_t)(i % 15 - 7); w8[i] = (int8_t)(16 * q4[i]); }
    for (int n = 0; n < 64; n++) sc[n] = 1e-3f;
    w8[5 * 128 + 3] ^= 1;
    qp_lin_desc qd = {.struct_size = sizeof qd, .kind = QP_SCHEME_QQQ_W4A8, .act_dtype = QP_DTYPE_F16, .N = 64, .K = 128,
                      .layer = "qqq-bad", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .group_size = -1,
                      .q4 = q4, .w8 = w8, .s_channel = sc};
    lin = NULL;
    st = bh_ops->linear_prepare(bh_dev, &qd, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && !lin && strstr(bh_err, "column 5, k 3"), "QQQ q4/w8: %d '%s'", (int)st,
          bh_err);
}

/* A device that lacks integer dot product (QPORT_VK_NO_INT_DOT=1): forcing
 * the int-dot path is QP_ERR_UNSUPPORTED with the reason. */
static void no_int_dot_device(void) {
    setenv("QPORT_VK_NO_INT_DOT", "1", 1);
    void *st2 = NULL;
    CHECK(bh_ops->init(&bh_host, &st2) == QP_OK && bh_ops->device_count(st2) > 0, "second init");
    if (st2 && bh_ops->device_count(st2) > 0) {
        void *d2 = bh_ops->device_get(st2, 0);
        int8_t w[64] = {0};
        float ws[4] = {1, 1, 1, 1};
        qp_lin_desc d = {.struct_size = sizeof d, .kind = QP_SCHEME_W8A8_INT8, .act_dtype = QP_DTYPE_F16, .N = 4, .K = 16,
                         .layer = "no-dot", .act = QP_ACT_INT8_DYNAMIC_TOKEN, .act_symmetric = 1, .w_i8 = w, .w_scale = ws};
        void *lin = NULL;
        qp_status st = bh_ops->linear_prepare(d2, &d, QP_PATH_INT_DOT, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && !lin && strstr(bh_err, "shaderIntegerDotProduct"), "forced int-dot: %d '%s'",
              (int)st, bh_err);
        qp_device_info info = {.struct_size = sizeof info};
        CHECK(bh_ops->device_info(d2, &info) == QP_OK && info.caps.int_dot == 0, "caps.int_dot");
    }
    bh_ops->shutdown(st2);
    unsetenv("QPORT_VK_NO_INT_DOT");
}

/* A plugin whose runtime is missing: zero devices and a logged reason. */
static void missing_runtime(void) {
    setenv("QPORT_VK_LOADER", "/nonexistent/libvulkan.so.1", 1);
    void *st2 = NULL;
    CHECK(bh_ops->init(&bh_host, &st2) == QP_OK && bh_ops->device_count(st2) == 0, "init without a loader");
    bh_ops->shutdown(st2);
    unsetenv("QPORT_VK_LOADER");
}

void vk_faults_cases(void) {
    faults();
    no_int_dot_device();
    missing_runtime();
}
