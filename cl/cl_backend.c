/* The OpenCL backend's ops table (api/backend.h) and its lifetime: init
 * loads the ICD loader and enumerates devices; a missing loader or platform
 * is zero devices and an INFO log line, never an error. */
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

QP_BACKEND_DEFINE_ERROR(qp_cl_error, qp_cl_device, d->be->host, "opencl")

#define QP_CL_EXPORT __attribute__((visibility("default")))

qp_status qp_cl_init(const qp_host *host, void **state) {
    if (!host || !state || host->abi_version != QP_BACKEND_ABI_VERSION) return QP_ERR_INVALID_ARGUMENT;
    qp_cl_backend *be = calloc(1, sizeof *be);
    if (!be) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "opencl: out of host memory at init");
    be->host = host;
    char why[512];
    if (!qp_cl_load(&be->api, qp_host_setting(host, "QPORT_CL_LIBRARY"), why, sizeof why)) {
        host->log(host->ctx, QP_LOG_INFO, "opencl: 0 devices: %s", why);
    } else {
        be->loaded = 1;
        qp_cl_devices_enumerate(be);
    }
    *state = be;
    return QP_OK;
}

void qp_cl_shutdown(void *state) {
    qp_cl_backend *be = state;
    if (!be) return;
    for (int i = 0; i < be->n_devices; i++) qp_cl_device_close(&be->devices[i]);
    if (be->loaded) qp_cl_unload(&be->api);
    free(be);
}

int qp_cl_device_count(void *state) { return state ? ((qp_cl_backend *)state)->n_devices : 0; }

void *qp_cl_device_get(void *state, int i) {
    qp_cl_backend *be = state;
    return be && i >= 0 && i < be->n_devices ? &be->devices[i] : NULL;
}

/* The scheme kinds linear_prepare runs (the registry checks that the table
 * names every linear kind; shape and feature limits are device_supports's answers). */
static const qp_backend_kind cl_kinds[] = {QP_BACKEND_KINDS_ABI5_RUN};

static const qp_backend_ops cl_ops = {
    QP_BACKEND_OPS_INIT(qp_cl, "opencl", cl_kinds),
    .flush = qp_cl_flush,
};

QP_CL_EXPORT const qp_backend_ops *qp_backend_entry(void);
QP_CL_EXPORT const qp_backend_ops *qp_backend_entry(void) { return &cl_ops; }
