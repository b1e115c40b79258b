/* The public device and buffer API over the registry (docs/backends.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "scheme_table.h"

QP_API const char *qp_device_kind_name(qp_device_kind k) {
    static const char *const n[] = {"discrete-gpu", "integrated-gpu", "virtual-gpu", "cpu-class", "reference"};
    return (unsigned)k <= QP_DEVICE_REFERENCE ? n[k] : "unknown";
}

QP_API const char *qp_support_level_name(qp_support_level l) {
    static const char *const n[] = {"native", "emulated", "unsupported"};
    return (unsigned)l <= QP_SUPPORT_UNSUPPORTED ? n[l] : "unknown";
}

QP_API qp_status qp_device_count(qp_context *ctx, size_t *n) {
    if (!ctx || !n) return QP_ERR_INVALID_ARGUMENT;
    qp_registry *r;
    qp_status st = qp_registry_get(ctx, &r);
    *n = st ? 0 : r->n_devices;
    return st;
}

QP_API qp_status qp_device_get(qp_context *ctx, size_t i, qp_device **out) {
    if (!ctx || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_registry *r;
    qp_status st = qp_registry_get(ctx, &r);
    if (st) return st;
    if (i >= r->n_devices)
        return qp_error_set(ctx, QP_ERR_NOT_FOUND, NULL, NULL, NULL, "device %zu does not exist (%zu devices)", i, r->n_devices);
    *out = r->devices[i];
    return QP_OK;
}

static void list_devices(const qp_registry *r, char *out, size_t cap) {
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < r->n_devices && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s:%d (%s)", i ? ", " : "", r->devices[i]->info.backend,
                              r->devices[i]->info.index, r->devices[i]->info.name);
    if (!r->n_devices) snprintf(out, cap, "none");
}

static qp_status find_in(qp_context *ctx, qp_registry *r, const char *spec, const char *what, qp_device **out) {
    qp_device_spec sp;
    if (qp_device_spec_parse(spec, &sp) != QP_OK)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, what, NULL,
                            "invalid device '%s': expected cpu, vulkan[:N], opencl[:N], cuda[:N] or a name substring", spec);
    for (size_t i = 0; i < r->n_devices; i++)
        if (qp_device_matches_spec(&sp, r->devices[i])) { *out = r->devices[i]; return QP_OK; }
    char list[768];
    list_devices(r, list, sizeof list);
    return qp_error_set(ctx, QP_ERR_NOT_FOUND, NULL, what, NULL, "no device matches '%s'; devices: %s", spec, list);
}

QP_API qp_status qp_device_find(qp_context *ctx, const char *spec, qp_device **out) {
    if (!ctx || !spec || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    /* a backend spec ("cpu:0", "vulkan") loads that backend alone; a name
     * substring needs every device */
    qp_device_spec sp;
    qp_registry *r;
    bool one = qp_device_spec_parse(spec, &sp) == QP_OK && !sp.substring && sp.backend >= 0;
    qp_status st = one ? qp_registry_get_kind(ctx, sp.backend, &r) : qp_registry_get(ctx, &r);
    return st ? st : find_in(ctx, r, spec, NULL, out);
}

QP_API qp_status qp_device_get_info(const qp_device *dev, qp_device_info *out) {
    if (!dev || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    *out = dev->info;
    return QP_OK;
}

QP_API qp_status qp_device_supports(qp_device *dev, const qp_scheme *scheme, int M, int N, int K, qp_support_info *out) {
    if (!dev || !scheme || !out) return QP_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (scheme->kind == QP_SCHEME_NONE || scheme->kind == QP_SCHEME_KV_CACHE ||
        (unsigned)scheme->kind >= QP_SCHEME_KIND_COUNT_) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "%s is not a linear layer scheme", qp_scheme_kind_name(scheme->kind));
        return QP_OK;
    }
    /* kinds lowered to a dense weight at bind (api/bind_ct.c) reach the
     * backend as unquantized layers: they run where those run */
    qp_scheme dense;
    if (qp_scheme_row_of(scheme->kind)->lowered) {
        qp_scheme_init(&dense, QP_SCHEME_UNQUANTIZED);
        scheme = &dense;
    }
    const qp_backend_kind *bk = qp_backend_kind_of(dev->backend->ops, scheme->kind);
    if (bk && !bk->runs) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "%s", bk->reason);
        return QP_OK;
    }
    if (!dev->backend->ops->device_supports) { out->level = QP_SUPPORT_NATIVE; return QP_OK; }
    pthread_mutex_lock(&dev->lock);
    qp_status st = dev->backend->ops->device_supports(dev->handle, scheme, M, N, K, out);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

QP_API qp_status qp_device_pick(qp_context *ctx, const qp_scheme *scheme, qp_device **out) {
    if (!ctx || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_registry *r;
    qp_status st = qp_registry_get(ctx, &r);
    if (st) return st;
    if (r->settings.device) return find_in(ctx, r, r->settings.device, "QPORT_DEVICE", out);
    /* a device that runs the scheme natively, then one that emulates it;
     * the cpu reference only when no device runs it at all (it is the
     * oracle, not an accelerator) */
    qp_device *emulated = NULL, *reference = NULL;
    for (size_t i = 0; i < r->n_devices; i++) {
        qp_device *d = r->devices[i];
        if (d->info.same_as[0]) continue;
        qp_support_info si;
        if (scheme && qp_device_supports(d, scheme, 0, 0, 0, &si)) continue;
        qp_support_level lv = scheme ? si.level : QP_SUPPORT_NATIVE;
        if (lv == QP_SUPPORT_UNSUPPORTED) continue;
        if (d->info.kind == QP_DEVICE_REFERENCE) { if (!reference) reference = d; continue; }
        if (lv == QP_SUPPORT_NATIVE) { *out = d; return QP_OK; }
        if (!emulated) emulated = d;
    }
    if (emulated || reference) { *out = emulated ? emulated : reference; return QP_OK; }
    char list[768];
    list_devices(r, list, sizeof list);
    return qp_error_set(ctx, QP_ERR_NOT_FOUND, NULL, NULL, NULL, "no device runs scheme %s; devices: %s",
                        scheme ? qp_scheme_kind_name(scheme->kind) : "(any)", list);
}

qp_status qp_device_call_op(qp_device *dev, qp_status (*op)(void *handle)) {
    if (!op) return QP_OK;
    pthread_mutex_lock(&dev->lock);
    qp_status st = op(dev->handle);
    pthread_mutex_unlock(&dev->lock);
    return st;
}

QP_API qp_status qp_device_synchronize(qp_device *dev) {
    return dev ? qp_device_call_op(dev, dev->backend->ops->synchronize) : QP_ERR_INVALID_ARGUMENT;
}

QP_API qp_status qp_backend_get_status(qp_context *ctx, size_t i, qp_backend_status *out) {
    if (!ctx || !out) return QP_ERR_INVALID_ARGUMENT;
    qp_registry *r;
    qp_status st = qp_registry_get(ctx, &r);
    if (st) return st;
    if (i >= (size_t)r->n_slots) return QP_ERR_NOT_FOUND;
    const qp_backend_slot *s = &r->slots[i];
    *out = (qp_backend_status){qp_backend_name_at(s->kind), s->path, s->loaded, s->n_devices, s->note};
    return QP_OK;
}

/* -- buffers ------------------------------------------------------------- */

QP_API qp_status qp_buffer_create(qp_device *dev, size_t bytes, qp_buffer **out) {
    if (!dev || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_buffer *b = calloc(1, sizeof *b);
    if (!b) return qp_error_set(dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    pthread_mutex_lock(&dev->lock);
    qp_status st = dev->backend->ops->buffer_alloc(dev->handle, bytes ? bytes : 1, &b->handle);
    pthread_mutex_unlock(&dev->lock);
    if (st) { free(b); return st; }
    b->dev = dev;
    b->size = bytes;
    *out = b;
    return QP_OK;
}

QP_API void qp_buffer_destroy(qp_buffer *b) {
    if (!b) return;
    pthread_mutex_lock(&b->dev->lock);
    /* enqueued work may still use it (as cudaFree waits) */
    (void)qp_device_sync_locked(b->dev);
    if (!b->imported) b->dev->backend->ops->buffer_free(b->dev->handle, b->handle);
    else if (b->dev->backend->ops->buffer_unimport) b->dev->backend->ops->buffer_unimport(b->dev->handle, b->handle);
    pthread_mutex_unlock(&b->dev->lock);
    free(b);
}

static qp_status range_check(const qp_buffer *b, size_t off, size_t n, const void *p) {
    if (!b || (!p && n)) return QP_ERR_INVALID_ARGUMENT;
    if (off > b->size || n > b->size - off)
        return qp_error_set(b->dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "buffer range [%zu, %zu) outside a buffer of %zu bytes", off, off + n, b->size);
    return QP_OK;
}

/* n bytes at `off` of `b` from src (an upload) or into dst (a download;
 * src NULL), range-checked, under the device lock. */
static qp_status transfer(qp_buffer *b, size_t off, const void *src, void *dst, size_t n) {
    qp_status st = range_check(b, off, n, src ? src : dst);
    if (st || !n) return st;
    const qp_backend_ops *ops = b->dev->backend->ops;
    pthread_mutex_lock(&b->dev->lock);
    st = src ? ops->buffer_upload(b->dev->handle, b->handle, off, src, n)
             : ops->buffer_download(b->dev->handle, b->handle, off, dst, n);
    pthread_mutex_unlock(&b->dev->lock);
    return st;
}

QP_API qp_status qp_buffer_upload(qp_buffer *b, size_t off, const void *src, size_t n) {
    return transfer(b, off, src, NULL, n);
}

QP_API qp_status qp_buffer_download(qp_buffer *b, size_t off, void *dst, size_t n) {
    return transfer(b, off, NULL, dst, n);
}

QP_API size_t qp_buffer_size(const qp_buffer *b) { return b ? b->size : 0; }
