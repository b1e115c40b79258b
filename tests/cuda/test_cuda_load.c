/* cuda-load: the plugin loads. Without a driver: zero devices and a logged
 * INFO reason; with a GPU: device_info (name, memory, UUID, compute
 * capability, capabilities that follow from it) and the device_supports
 * levels of W8A8-INT8, W8A8-FP8 (native from sm_89) and QQQ (from sm_80).
 * Needs no device: never skips. */
#include <stdio.h>
#include <string.h>

#include "cuda_tests.h"

static const char *level_name(qp_support_level l) {
    return l == QP_SUPPORT_NATIVE ? "native" : l == QP_SUPPORT_EMULATED ? "emulated" : "unsupported";
}

int main(void) {
    if (!cuda_load("cuda-load")) return bh_finish();
    int n = bh_ops->device_count(bh_state);
    printf("cuda: %d device(s)\n%s", n, bh_log);
    if (n == 0) {
        CHECK(strstr(bh_log, "[1] cuda: 0 devices") != NULL, "zero devices without a logged INFO reason: %s", bh_log);
        CHECK(bh_ops->device_get(bh_state, 0) == NULL, "device_get past the end");
    }
    for (int i = 0; i < n; i++) {
        void *d = bh_ops->device_get(bh_state, i);
        qp_device_info di;
        memset(&di, 0, sizeof di);
        di.struct_size = sizeof di;
        CHECK(bh_ops->device_info(d, &di) == QP_OK, "device_info");
        printf("cuda:%d %s cc %d.%d, %.1f GiB, %s, uuid %02x%02x%02x%02x...\n", i, di.name, di.cuda_cc / 10,
               di.cuda_cc % 10, (double)di.memory_bytes / (1 << 30), di.driver, di.uuid[0], di.uuid[1], di.uuid[2],
               di.uuid[3]);
        CHECK(strcmp(di.backend, "cuda") == 0 && di.name[0] && di.memory_bytes > 0 && di.has_uuid && di.cuda_cc >= 30,
              "device_info fields");
        CHECK(di.caps.tensor_core_int8 == (di.cuda_cc >= 75) && di.caps.tensor_core_fp8 == (di.cuda_cc >= 89) &&
                  di.caps.int_dot == (di.cuda_cc >= 61),
              "caps vs cc");
        qp_scheme s;
        memset(&s, 0, sizeof s);
        qp_support_info si;
        s.kind = QP_SCHEME_W8A8_INT8;
        CHECK(bh_ops->device_supports(d, &s, 1, 64, 64, &si) == QP_OK, "supports");
        printf("  W8A8-INT8: %s %s\n", level_name(si.level), si.reason);
        s.kind = QP_SCHEME_W8A8_FP8;
        s.activation.dtype = QP_DTYPE_F8_E4M3FN;
        bh_ops->device_supports(d, &s, 1, 64, 64, &si);
        printf("  W8A8-FP8:  %s %s\n", level_name(si.level), si.reason);
        CHECK((si.level == QP_SUPPORT_NATIVE) == (di.cuda_cc >= 89), "fp8 level");
        s.kind = QP_SCHEME_QQQ_W4A8;
        bh_ops->device_supports(d, &s, 1, 64, 64, &si);
        printf("  QQQ W4A8:  %s %s\n", level_name(si.level), si.reason);
        CHECK((si.level == QP_SUPPORT_NATIVE) == (di.cuda_cc >= 80), "qqq level");
    }
    return bh_finish();
}
