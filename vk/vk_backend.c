/* The Vulkan backend's ops table (api/backend.h): libqport-vk.so exports
 * only qp_backend_entry. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

QP_BACKEND_DEFINE_ERROR(qp_vk_error, qp_vk_device, d->be->host, "vulkan")

#define QP_VK_EXPORT __attribute__((visibility("default")))

const char *qp_vk_scheme_name(qp_scheme_kind k) {
    static const char *const names[QP_SCHEME_KIND_COUNT_] = {
        [QP_SCHEME_UNQUANTIZED] = "unquantized", [QP_SCHEME_W8A8_FP8] = "W8A8-FP8",
        [QP_SCHEME_W8A8_FP8_BLOCK] = "W8A8-FP8 per-block", [QP_SCHEME_W8A8_INT8] = "W8A8-INT8",
        [QP_SCHEME_W4A16_INT4] = "W4A16-INT4", [QP_SCHEME_OCP_MX] = "OCP MX",
        [QP_SCHEME_W4A8_MXFP4_FP8] = "W4A8 MXFP4-FP8", [QP_SCHEME_NVFP4] = "NVFP4", [QP_SCHEME_QQQ_W4A8] = "QQQ W4A8",
        [QP_SCHEME_HF_FP8] = "HF FP8", [QP_SCHEME_KV_CACHE] = "KV cache", [QP_SCHEME_NONE] = "no quantization"};
    return (unsigned)k < QP_SCHEME_KIND_COUNT_ && names[k] ? names[k] : "unknown scheme";
}

void qp_vk_shutdown(void *state) {
    qp_vk_backend *be = state;
    if (!be) return;
    for (int i = 0; i < be->n_devices; i++) qp_vk_device_destroy(be->devices[i]);
    free(be->devices);
    qp_vk_instance_destroy(be);
    if (be->validation)
        QP_VK_LOG(be, QP_LOG_DEBUG, "vulkan: %u validation warnings/errors in this context", be->validation_messages);
    qp_vk_unload(&be->fn);
    free(be);
}

qp_status qp_vk_init(const qp_host *host, void **state) {
    *state = NULL;
    if (!host || host->abi_version != QP_BACKEND_ABI_VERSION || host->struct_size < sizeof(qp_host)) {
        if (host && host->error)
            return host->error(host->ctx, QP_ERR_INVALID_ARGUMENT, "vulkan: host ABI %u, plugin ABI %u",
                               host->abi_version, QP_BACKEND_ABI_VERSION);
        return QP_ERR_INVALID_ARGUMENT;
    }
    qp_vk_backend *be = calloc(1, sizeof *be);
    if (!be) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    be->host = host;
    *state = be;
    char why[256];
    if (!qp_vk_load_library(&be->fn, qp_host_setting(host, "QPORT_VK_LOADER"), why, sizeof why)) {
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: 0 devices: %s", why);
        return QP_OK;
    }
    qp_status st = qp_vk_instance_create(be);
    if (st != QP_OK || !be->instance) return st;
    uint32_t n = 0;
    VkResult r = be->fn.vkEnumeratePhysicalDevices(be->instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: 0 devices: vkEnumeratePhysicalDevices: %s, %u devices", qp_vk_result_str(r), n);
        return QP_OK;
    }
    VkPhysicalDevice *phys = calloc(n, sizeof *phys);
    be->devices = calloc(n, sizeof *be->devices);
    if (!phys || !be->devices) {
        free(phys);
        return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    }
    r = be->fn.vkEnumeratePhysicalDevices(be->instance, &n, phys);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: 0 devices: vkEnumeratePhysicalDevices: %s", qp_vk_result_str(r));
        free(phys);
        return QP_OK;
    }
    for (uint32_t i = 0; i < n; i++) {
        qp_vk_device *d = qp_vk_device_create(be, phys[i], be->n_devices);
        if (d) be->devices[be->n_devices++] = d;
    }
    free(phys);
    if (!be->n_devices) QP_VK_LOG(be, QP_LOG_INFO, "vulkan: 0 usable devices among %u", n);
    return QP_OK;
}

int qp_vk_device_count(void *state) { return state ? ((qp_vk_backend *)state)->n_devices : 0; }

void *qp_vk_device_get(void *state, int i) {
    qp_vk_backend *be = state;
    return be && i >= 0 && i < be->n_devices ? be->devices[i] : NULL;
}

static void support(qp_support_info *out, qp_support_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void support(qp_support_info *out, qp_support_level level, const char *fmt, ...) {
    out->level = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

qp_status qp_vk_device_supports(void *dev, const qp_scheme *s, int M, int N, int K, qp_support_info *out) {
    qp_vk_device *d = dev;
    (void)M; (void)N;
    out->level = QP_SUPPORT_NATIVE;
    out->reason[0] = '\0';
    /* a scheme whose arithmetic the device lacks runs emulated,
     * and says which feature is missing (as the OpenCL backend does) */
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8:
    case QP_SCHEME_QQQ_W4A8:
        if (!d->int_dot_accel || !qp_vk_spirv_get(QP_VK_SH_GEMV_I8_DOT)->code)
            support(out, QP_SUPPORT_EMULATED, "%s: int8 products as int32 multiply-adds",
                    d->int_dot ? "integer dot product not accelerated by the driver"
                               : "no shaderIntegerDotProduct");
        break;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
    case QP_SCHEME_W8A8_FP8_BLOCK:
        if (s->kind == QP_SCHEME_W8A8_FP8_BLOCK || s->weight.granularity == QP_GRAN_BLOCK ||
            s->activation.granularity == QP_GRAN_GROUP) {
            if (K > 0 && K % 128)
                support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: per-block fp8 needs K (%d) to be a multiple of 128", K);
            else
                support(out, QP_SUPPORT_EMULATED, "%s", "no fp8 arithmetic in Vulkan: e4m3 decoded to fp32, fp32 multiply-adds "
                        "per group of 128, block scales applied per group");
        } else {
            support(out, QP_SUPPORT_EMULATED, "%s", "no fp8 arithmetic in Vulkan: e4m3 decoded to fp32, fp32 multiply-adds");
        }
        break;
    case QP_SCHEME_W4A16_INT4:
        if (s->weight.group_size > 0 && s->weight.group_size % 32 && s->weight.group_size != K)
            support(out, QP_SUPPORT_UNSUPPORTED, "%s", "unsupported: W4A16 group sizes other than multiples of 32 or per-channel");
        else
            support(out, QP_SUPPORT_NATIVE, "%s", "int4 dequantized in registers, fp32 multiply-adds");
        break;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
        if (K > 0 && K % (s->kind == QP_SCHEME_NVFP4 ? 16 : 32)) {
            support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: K = %d is not a multiple of the %s block size (%d)", K,
                    qp_vk_scheme_name(s->kind), s->kind == QP_SCHEME_NVFP4 ? 16 : 32);
            break;
        }
        support(out, QP_SUPPORT_EMULATED, "%s", s->kind == QP_SCHEME_NVFP4
                ? "no native fp4 in Vulkan/lavapipe: activations fake-quantized (NVFP4 qdq) in fp32, fp4 weights "
                  "dequantized in registers, fp32 multiply-adds"
                : "no native MX/fp4/fp6/fp8 in Vulkan/lavapipe: activations fake-quantized (qdq) in fp32, weights "
                  "dequantized in registers, fp32 multiply-adds");
        break;
    case QP_SCHEME_UNQUANTIZED:
        support(out, QP_SUPPORT_NATIVE, "%s", "fp16/bf16 weights, fp32 multiply-adds");
        break;
    default:
        support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: %s not yet implemented on vulkan", qp_vk_scheme_name(s->kind));
        return QP_OK;
    }
    if (out->level != QP_SUPPORT_UNSUPPORTED && K > 0 && (uint64_t)((K + 15) / 16 * 16) > d->max_range)
        support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: one weight row exceeds %s", "maxStorageBufferRange");
    return QP_OK;
}

qp_status qp_vk_buffer_alloc(void *dev, size_t bytes, void **buf) {
    qp_vk_device *d = dev;
    *buf = NULL;
    qp_vk_buf *b = calloc(1, sizeof *b);
    if (!b) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    qp_status st = qp_vk_buf_create(d, bytes, false, "a device buffer", b);
    if (st != QP_OK) { free(b); return st; }
    *buf = b;
    return QP_OK;
}

void qp_vk_buffer_free(void *dev, void *buf) {
    if (!buf) return;
    if (qp_vk_busy(dev)) (void)qp_vk_idle(dev); /* work in flight may use it */
    qp_vk_buf_destroy(dev, buf);
    free(buf);
}

qp_status qp_vk_buffer_upload(void *dev, void *buf, size_t off, const void *src, size_t bytes) {
    return qp_vk_upload(dev, buf, off, src, bytes);
}

qp_status qp_vk_buffer_download(void *dev, void *buf, size_t off, void *dst, size_t bytes) {
    return qp_vk_download(dev, buf, off, dst, bytes);
}

qp_status qp_vk_synchronize(void *dev) {
    qp_status st = qp_vk_submit(dev, VK_NULL_HANDLE, 0);
    qp_status w = qp_vk_wait(dev, UINT64_MAX);
    return st ? st : w;
}

static qp_status qp_vk_flush(void *dev) { return qp_vk_submit(dev, VK_NULL_HANDLE, 0); }

/* An event is the serial of the last batch submitted when it was recorded:
 * waiting for it waits for every batch up to that one. */
qp_status qp_vk_event_record(void *dev, void **ev) {
    qp_vk_device *d = dev;
    qp_status st = qp_vk_submit(d, VK_NULL_HANDLE, 0);
    if (st != QP_OK) return st;
    uint64_t *e = malloc(sizeof *e);
    if (!e) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    *e = d->serial;
    *ev = e;
    return QP_OK;
}

qp_status qp_vk_event_wait(void *dev, void *ev) { return qp_vk_wait(dev, *(uint64_t *)ev); }

qp_status qp_vk_event_query(void *dev, void *ev, int *done) {
    qp_vk_device *d = dev;
    uint64_t upto = *(uint64_t *)ev;
    *done = 1;
    for (int i = 0; i < QP_VK_RING; i++) {
        qp_vk_slot *s = &d->ring[i];
        if (!s->pending || s->serial > upto) continue;
        VkResult r = d->fn->vkGetFenceStatus(d->dev, s->fence);
        if (r == VK_NOT_READY) { *done = 0; return QP_OK; }
        if (r != VK_SUCCESS) return qp_vk_wait(d, upto); /* reports the fault, naming the work */
    }
    return QP_OK;
}

void qp_vk_event_destroy(void *dev, void *ev) { (void)dev; free(ev); }

qp_status qp_vk_sync_begin(void *dev, const qp_enqueue_sync *s) {
    qp_vk_device *d = dev;
    if ((s->vk_wait_semaphore || s->vk_signal_semaphore) && !d->timeline)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "qp_enqueue_sync semaphores need the timelineSemaphore feature "
                         "enabled on the device");
    if (!s->vk_wait_semaphore != !s->vk_wait_value && !s->vk_wait_semaphore)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "vk_wait_value without vk_wait_semaphore");
    if (!s->vk_signal_semaphore && s->vk_signal_value)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "vk_signal_value without vk_signal_semaphore");
    if (s->vk_command_buffer && (s->vk_wait_semaphore || s->vk_signal_semaphore))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "recording into the application's command buffer: its "
                         "submission carries the semaphores, not qport's (leave vk_*_semaphore unset)");
    /* what was enqueued before is submitted first: the wait (or the
     * application's command buffer) covers this enqueue only */
    qp_status st = qp_vk_submit(d, VK_NULL_HANDLE, 0);
    if (st != QP_OK) return st;
    if (s->vk_command_buffer) {
        d->ext_cmd = (VkCommandBuffer)s->vk_command_buffer;
        return QP_OK;
    }
    if (s->vk_wait_semaphore) {
        if (d->n_waits == QP_VK_MAX_WAITS)
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "more than %d semaphore waits",
                             QP_VK_MAX_WAITS);
        d->wait_sem[d->n_waits] = (VkSemaphore)s->vk_wait_semaphore;
        d->wait_val[d->n_waits++] = s->vk_wait_value;
    }
    return QP_OK;
}

qp_status qp_vk_sync_end(void *dev, const qp_enqueue_sync *s, qp_status st) {
    qp_vk_device *d = dev;
    if (s->vk_command_buffer) {
        d->ext_cmd = VK_NULL_HANDLE;
        d->cmd = VK_NULL_HANDLE;
        return QP_OK;
    }
    if (st != QP_OK && d->open < 0) d->n_waits = 0;
    /* the signal (and the waits) go with this enqueue's batch, now */
    if (s->vk_signal_semaphore || d->n_waits)
        return qp_vk_submit(d, (VkSemaphore)s->vk_signal_semaphore, s->vk_signal_value);
    return QP_OK;
}

qp_status qp_vk_device_import(void *state, const qp_device_import_desc *desc, void **dev) {
    qp_vk_backend *be = state;
    qp_vk_device *d = NULL;
    qp_status st = qp_vk_device_adopt(be, desc, &d);
    *dev = d;
    return st;
}

void qp_vk_device_release(void *state, void *dev) {
    (void)state;
    qp_vk_device_destroy(dev);
}

qp_status qp_vk_device_native(void *dev, qp_device_native *o) {
    qp_vk_device *d = dev;
    o->api = QP_NATIVE_VULKAN;
    o->vk_instance = d->be->instance;
    o->vk_physical_device = d->phys;
    o->vk_device = d->dev;
    o->vk_queue = d->queue;
    o->vk_queue_family = d->queue_family;
    return QP_OK;
}

qp_status qp_vk_buffer_import(void *dev, const qp_buffer_import_desc *desc, void **buf) {
    qp_vk_device *d = dev;
    *buf = NULL;
    if (!desc->vk_buffer)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import takes vk_buffer on a Vulkan device");
    uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
    if (align && desc->offset % align)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: offset %zu is not a multiple of "
                         "minStorageBufferOffsetAlignment (%llu)", desc->offset, (unsigned long long)align);
    if (desc->size % 4)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: size %zu is not a multiple of 4 "
                         "bytes (the shaders bind 32-bit words)", desc->size);
    if (desc->size > d->max_range)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "qp_buffer_import: %zu bytes exceed maxStorageBufferRange "
                         "(%llu)", desc->size, (unsigned long long)d->max_range);
    qp_vk_buf *b = calloc(1, sizeof *b);
    if (!b) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    b->buf = (VkBuffer)desc->vk_buffer;
    b->size = b->alloc_size = desc->size;
    b->offset = desc->offset;
    b->imported = true;
    *buf = b;
    return QP_OK;
}

void qp_vk_buffer_unimport(void *dev, void *buf) {
    (void)dev;
    free(buf);
}

qp_status qp_vk_buffer_native(void *dev, void *buf, qp_buffer_native *o) {
    (void)dev;
    qp_vk_buf *b = buf;
    o->api = QP_NATIVE_VULKAN;
    o->vk_buffer = b->buf;
    o->offset = b->offset;
    return QP_OK;
}

qp_status qp_vk_device_stats(void *dev, qp_device_stats *out) {
    return qp_backend_stats_copy(&((const qp_vk_device *)dev)->stats, out);
}

/* The scheme kinds linear_prepare runs (the registry checks that the table
 * names every linear kind; shape and feature limits are device_supports's answers). */
static const qp_backend_kind vk_kinds[] = {QP_BACKEND_KINDS_ABI5_RUN};

static const qp_backend_ops vk_ops = {
    QP_BACKEND_OPS_INIT(qp_vk, "vulkan", vk_kinds),
    .flush = qp_vk_flush,
};

QP_VK_EXPORT const qp_backend_ops *qp_backend_entry(void) { return &vk_ops; }
