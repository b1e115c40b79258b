/* Broken and empty plugins for the registry's fault tests, one per mode:
 * FAKE_WRONG_ABI (as libqport-vk.so), FAKE_NO_DEVICES (libqport-cl.so),
 * FAKE_INIT_FAILS (libqport-cuda.so). */
#include "backend.h"

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
static int count0(void *s) { (void)s; return 0; }
static void *get_none(void *s, int i) { (void)s; (void)i; return 0; }

static const qp_backend_ops ops = {
#if defined(FAKE_WRONG_ABI)
    QP_BACKEND_ABI_VERSION + 41, sizeof(qp_backend_ops), "vulkan", init_ok,
#elif defined(FAKE_NO_DEVICES)
    QP_BACKEND_ABI_VERSION, sizeof(qp_backend_ops), "opencl", init_ok,
#else
    QP_BACKEND_ABI_VERSION, sizeof(qp_backend_ops), "cuda", init_fail,
#endif
    shutdown_, count0, get_none, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

__attribute__((visibility("default"))) const qp_backend_ops *qp_backend_entry(void) { return &ops; }
