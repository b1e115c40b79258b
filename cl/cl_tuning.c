/* The host's per-device tuning table for the OpenCL kernels: the largest M
 * the GEMV kernels take before the tiled GEMM does (the kernels' own
 * limit, GEMV_MAX_M rows per launch, stays the default). The work-group
 * size is the program's build option (-DQP_WG=64, cl_program.c) and not
 * tuned per device yet. A row matches a device type and PCI vendor id,
 * first match wins; QPORT_CL_GEMV_MAX_M overrides it (tuning runs with
 * `qport bench`, docs/environment.md). No row has been measured on a GPU:
 * the vendor rows hold the defaults and say so. Integer paths are
 * bit-exact whichever path a row picks; float paths stay within the
 * bounds the tests hold them to. */
#include <stdlib.h>

#include "cl_internal.h"

static const struct {
    cl_device_type type; /* 0: any */
    cl_uint vendor;      /* 0: any */
    qp_cl_tuning t;
} rows[] = {
    {CL_DEVICE_TYPE_CPU, 0, {QP_CL_GEMV_MAX_M, "cpu"}},
    {0, 0x10de, {QP_CL_GEMV_MAX_M, "nvidia (defaults, unmeasured)"}},
    {0, 0x1002, {QP_CL_GEMV_MAX_M, "amd (defaults, unmeasured)"}},
    {0, 0x8086, {QP_CL_GEMV_MAX_M, "intel (defaults, unmeasured)"}},
    {0, 0, {QP_CL_GEMV_MAX_M, "default"}},
};

void qp_cl_tuning_pick(const qp_host *h, cl_device_type type, cl_uint vendor, qp_cl_tuning *out) {
    size_t i = 0;
    for (; i + 1 < sizeof rows / sizeof *rows; i++)
        if ((!rows[i].type || (rows[i].type & type)) && (!rows[i].vendor || rows[i].vendor == vendor)) break;
    *out = rows[i].t;
    const char *v = qp_host_setting(h, "QPORT_CL_GEMV_MAX_M"); /* env.c allows only 1..16 */
    if (v && *v) out->gemv_max_m = atoi(v);
}
