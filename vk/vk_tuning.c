/* The host's per-device tuning table for the Vulkan kernels: the constants
 * the kernels take as specialization constants or the host picks per
 * dispatch (the GEMV work-group size, the largest M the GEMV path takes
 * before the tiled GEMM does). The shaders keep their defaults (WG 64,
 * MMAX 16); a row overrides them for the devices it matches, first match
 * wins, and QPORT_VK_GEMV_WG / QPORT_VK_GEMV_MAX_M override the row (for
 * tuning runs with `qport bench`, docs/environment.md).
 *
 * No row has been measured on discrete hardware yet: the vendor rows hold
 * the kernels' defaults and say so in their name, so that a measurement
 * changes one line. Integer paths are bit-exact whatever the row says; the
 * float paths' summation order follows the work-group size, within the
 * bounds the tests hold them to. */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define ANY_TYPE VK_PHYSICAL_DEVICE_TYPE_MAX_ENUM

static const struct {
    uint32_t vendor;          /* PCI vendor id, 0: any                      */
    VkPhysicalDeviceType type; /* ANY_TYPE: any                              */
    qp_vk_tuning t;
} rows[] = {
    /* CPU implementations (lavapipe, SwiftShader): one lane per core, the
     * GEMV's 64-lane reductions are what CI measures (docs/benchmarks.md) */
    {0, VK_PHYSICAL_DEVICE_TYPE_CPU, {QP_VK_GEMV_WG, QP_VK_GEMV_MAX_M, "cpu"}},
    {0x10de, ANY_TYPE, {QP_VK_GEMV_WG, QP_VK_GEMV_MAX_M, "nvidia (defaults, unmeasured)"}},
    {0x1002, ANY_TYPE, {QP_VK_GEMV_WG, QP_VK_GEMV_MAX_M, "amd (defaults, unmeasured)"}},
    {0x8086, ANY_TYPE, {QP_VK_GEMV_WG, QP_VK_GEMV_MAX_M, "intel (defaults, unmeasured)"}},
    {0, ANY_TYPE, {QP_VK_GEMV_WG, QP_VK_GEMV_MAX_M, "default"}},
};

static uint32_t knob(const qp_host *h, const char *name, uint32_t dflt) {
    const char *v = qp_host_setting(h, name);
    return v && *v ? (uint32_t)strtoul(v, NULL, 10) : dflt; /* env.c allows only the enum's values */
}

void qp_vk_tuning_pick(const qp_host *h, const VkPhysicalDeviceProperties *p, qp_vk_tuning *out) {
    size_t i = 0;
    for (; i + 1 < sizeof rows / sizeof *rows; i++)
        if ((!rows[i].vendor || rows[i].vendor == p->vendorID) &&
            (rows[i].type == ANY_TYPE || rows[i].type == p->deviceType))
            break;
    *out = rows[i].t;
    out->gemv_wg = knob(h, "QPORT_VK_GEMV_WG", out->gemv_wg);
    out->gemv_max_m = (int)knob(h, "QPORT_VK_GEMV_MAX_M", (uint32_t)out->gemv_max_m);
    if (out->gemv_wg > p->limits.maxComputeWorkGroupSize[0]) out->gemv_wg = QP_VK_GEMV_WG;
}
