/* Broken and empty plugins for the registry's fault tests, one per mode:
 * FAKE_WRONG_ABI (as libqport-vk.so), FAKE_NO_DEVICES (libqport-cl.so),
 * FAKE_INIT_FAILS (libqport-cuda.so); and FAKE_TWIN=<backend name>: one
 * discrete GPU with a fixed UUID, built as both libqport-vk.so and
 * libqport-cl.so, so the registry must list it once (same UUID) and rank
 * the Vulkan entry first; FAKE_NO_KINDS (libqport-cl.so in nokinds/): a
 * scheme-kind table that leaves a linear kind out. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

/* every linear kind, as a backend that decided about each declares them;
 * FAKE_NO_KINDS leaves NVFP4 out, which the registry must refuse */
static const qp_backend_kind kinds[] = {
    {QP_SCHEME_UNQUANTIZED, 1, NULL}, {QP_SCHEME_W8A8_FP8, 1, NULL}, {QP_SCHEME_W8A8_FP8_BLOCK, 1, NULL},
    {QP_SCHEME_W8A8_INT8, 1, NULL}, {QP_SCHEME_W4A16_INT4, 1, NULL}, {QP_SCHEME_OCP_MX, 1, NULL},
    {QP_SCHEME_W4A8_MXFP4_FP8, 1, NULL}, {QP_SCHEME_QQQ_W4A8, 1, NULL}, {QP_SCHEME_HF_FP8, 1, NULL},
#if !defined(FAKE_NO_KINDS)
    {QP_SCHEME_NVFP4, 0, "fake: no fp4 kernels"},
#endif
};
#define KINDS .linear_kinds = kinds, .n_linear_kinds = sizeof kinds / sizeof *kinds

__attribute__((unused)) static qp_status init_ok(const qp_host *h, void **state) {
    h->log(h->ctx, QP_LOG_INFO, "fake: no driver here");
    *state = (void *)h;
    return QP_OK;
}
__attribute__((unused)) static qp_status init_fail(const qp_host *h, void **state) {
    (void)state;
    return h->error(h->ctx, QP_ERR_DEVICE, "fake: driver refused to initialise (error -3)");
}
static void shutdown_(void *s) { (void)s; }
__attribute__((unused)) static int count0(void *s) { (void)s; return 0; }
__attribute__((unused)) static void *get_none(void *s, int i) { (void)s; (void)i; return 0; }

#if defined(FAKE_TWIN)
static int count1(void *s) { (void)s; return 1; }
static void *get_one(void *s, int i) { return i == 0 ? s : 0; }
static qp_status info(void *dev, qp_device_info *o) {
    (void)dev;
    snprintf(o->name, sizeof o->name, "Fake Twin GPU");
    o->kind = QP_DEVICE_DISCRETE_GPU;
    memset(o->uuid, 0xAB, 16);
    o->has_uuid = 1;
    o->memory_bytes = (uint64_t)8 << 30;
    return QP_OK;
}
static qp_status supports(void *dev, const qp_scheme *s, int M, int N, int K, qp_support_info *out) {
    (void)dev; (void)M; (void)N; (void)K;
    out->level = s->kind == QP_SCHEME_W8A8_INT8 ? QP_SUPPORT_NATIVE
               : s->kind == QP_SCHEME_W8A8_FP8 ? QP_SUPPORT_EMULATED : QP_SUPPORT_UNSUPPORTED;
    return QP_OK;
}
static const qp_backend_ops ops = {
    .abi_version = QP_BACKEND_ABI_VERSION, .struct_size = sizeof(qp_backend_ops), .name = FAKE_TWIN, .init = init_ok,
    .shutdown = shutdown_, .device_count = count1, .device_get = get_one, .device_info = info, .device_supports = supports,
    KINDS,
};
#else
static const qp_backend_ops ops = {
#if defined(FAKE_WRONG_ABI)
    .abi_version = QP_BACKEND_ABI_VERSION + 41, .name = "vulkan", .init = init_ok,
#elif defined(FAKE_NO_DEVICES) || defined(FAKE_NO_KINDS)
    .abi_version = QP_BACKEND_ABI_VERSION, .name = "opencl", .init = init_ok,
#else
    .abi_version = QP_BACKEND_ABI_VERSION, .name = "cuda", .init = init_fail,
#endif
    .struct_size = sizeof(qp_backend_ops), .shutdown = shutdown_, .device_count = count0, .device_get = get_none, KINDS,
};
#endif

__attribute__((visibility("default"))) const qp_backend_ops *qp_backend_entry(void) { return &ops; }
