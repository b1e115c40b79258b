/* The OpenCL backend's ops table (api/backend.h) and its lifetime: init
 * loads the ICD loader and enumerates devices; a missing loader or platform
 * is zero devices and an INFO log line, never an error. */
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

qp_status qp_cl_error(const qp_cl_device *d, qp_status st, const char *layer, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qp_status r = qp_backend_verror(d->be->host, st, "opencl", d->index, layer, fmt, ap);
    va_end(ap);
    return r;
}

#define QP_CL_EXPORT __attribute__((visibility("default")))

static qp_status cl_init(const qp_host *host, void **state) {
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

static void cl_shutdown(void *state) {
    qp_cl_backend *be = state;
    if (!be) return;
    for (int i = 0; i < be->n_devices; i++) qp_cl_device_close(&be->devices[i]);
    if (be->loaded) qp_cl_unload(&be->api);
    free(be);
}

static int cl_device_count(void *state) { return state ? ((qp_cl_backend *)state)->n_devices : 0; }

static void *cl_device_get(void *state, int i) {
    qp_cl_backend *be = state;
    return be && i >= 0 && i < be->n_devices ? &be->devices[i] : NULL;
}

/* The scheme kinds linear_prepare runs (the registry checks that the table
 * names every linear kind; shape and feature limits are device_supports's answers). */
static const qp_backend_kind cl_kinds[] = {
    {QP_SCHEME_UNQUANTIZED, 1, NULL},    {QP_SCHEME_W8A8_INT8, 1, NULL},      {QP_SCHEME_W8A8_FP8, 1, NULL},
    {QP_SCHEME_W8A8_FP8_BLOCK, 1, NULL}, {QP_SCHEME_HF_FP8, 1, NULL},         {QP_SCHEME_QQQ_W4A8, 1, NULL},
    {QP_SCHEME_W4A16_INT4, 1, NULL},     {QP_SCHEME_OCP_MX, 1, NULL},         {QP_SCHEME_W4A8_MXFP4_FP8, 1, NULL},
    {QP_SCHEME_NVFP4, 1, NULL},
};

static const qp_backend_ops cl_ops = {
    .abi_version = QP_BACKEND_ABI_VERSION,
    .struct_size = sizeof(qp_backend_ops),
    .name = "opencl",
    .init = cl_init,
    .shutdown = cl_shutdown,
    .device_count = cl_device_count,
    .device_get = cl_device_get,
    .device_info = qp_cl_device_info,
    .device_supports = qp_cl_device_supports,
    .buffer_alloc = qp_cl_buffer_alloc,
    .buffer_free = qp_cl_buffer_free,
    .buffer_upload = qp_cl_buffer_upload,
    .buffer_download = qp_cl_buffer_download,
    .linear_prepare = qp_cl_linear_prepare,
    .linear_destroy = qp_cl_linear_destroy,
    .linear_forward = qp_cl_linear_forward,
    .linear_describe = qp_cl_linear_describe,
    .synchronize = qp_cl_synchronize,
    .rotation_prepare = qp_cl_rotation_prepare,
    .rotation_destroy = qp_cl_rotation_destroy,
    .rotation_forward = qp_cl_rotation_forward,
    .kv_quantize = qp_cl_kv_quantize,
    .kv_dequantize = qp_cl_kv_dequantize,
    .linear_time = qp_cl_linear_time,
    .buffer_copy = qp_cl_buffer_copy,
    .buffer_copy_time = qp_cl_buffer_copy_time,
    .moe_prepare = qp_cl_moe_prepare,
    .moe_destroy = qp_cl_moe_destroy,
    .linear_reserve = qp_cl_linear_reserve,
    .moe_reserve = qp_cl_moe_reserve,
    .flush = qp_cl_flush,
    .event_record = qp_cl_event_record,
    .event_wait = qp_cl_event_wait,
    .event_query = qp_cl_event_query,
    .event_destroy = qp_cl_event_destroy,
    .sync_begin = qp_cl_sync_begin,
    .sync_end = qp_cl_sync_end,
    .device_import = qp_cl_device_import,
    .device_release = qp_cl_device_release,
    .device_native = qp_cl_device_native,
    .buffer_import = qp_cl_buffer_import,
    .buffer_unimport = qp_cl_buffer_unimport,
    .buffer_native = qp_cl_buffer_native,
    .device_stats = qp_cl_device_stats,
    .linear_kinds = cl_kinds,
    .n_linear_kinds = sizeof cl_kinds / sizeof *cl_kinds,
    .moe_route = qp_cl_moe_route,
    .moe_forward = qp_cl_moe_forward,
    .moe_describe = qp_cl_moe_describe,
};

QP_CL_EXPORT const qp_backend_ops *qp_backend_entry(void);
QP_CL_EXPORT const qp_backend_ops *qp_backend_entry(void) { return &cl_ops; }
