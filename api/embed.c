/* Embedding qport in an engine: the application's devices and memory,
 * enqueue bindings, events, flush and counters over the backends' ABI-3 ops
 * (docs/c-api.md, "Embedding qport in an engine"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static const char *api_name(qp_native_api a) {
    static const char *const n[] = {"none", "host", "vulkan", "opencl", "cuda"};
    return (unsigned)a <= QP_NATIVE_CUDA ? n[a] : "unknown";
}

QP_API void qp_device_import_desc_init(qp_device_import_desc *d) {
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
}

QP_API void qp_buffer_import_desc_init(qp_buffer_import_desc *d) {
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
}

QP_API void qp_enqueue_sync_init(qp_enqueue_sync *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
}

/* The backend kind that serves `api` ("cpu" for host memory). */
static int kind_for(qp_native_api api) {
    const char *want = api == QP_NATIVE_HOST ? "cpu" : api_name(api);
    return qp_backend_name_index(want, strlen(want));
}

static qp_backend_slot *slot_for(qp_registry *r, qp_native_api api) {
    int kind = kind_for(api);
    for (int i = 0; i < r->n_slots; i++)
        if (r->slots[i].kind == kind) return &r->slots[i];
    return NULL;
}

QP_API qp_status qp_device_import(qp_context *ctx, const qp_device_import_desc *desc, qp_device **out) {
    if (!ctx || !desc || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (desc->struct_size < sizeof *desc)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "struct_size", NULL,
                            "qp_device_import_desc.struct_size %zu: call qp_device_import_desc_init", desc->struct_size);
    if (desc->api != QP_NATIVE_VULKAN && desc->api != QP_NATIVE_OPENCL && desc->api != QP_NATIVE_CUDA)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "api", NULL,
                            "qp_device_import: api must be QP_NATIVE_VULKAN, QP_NATIVE_OPENCL or QP_NATIVE_CUDA (got %d)",
                            (int)desc->api);
    qp_registry *r;
    /* loads that backend only (the others stay unloaded) */
    qp_status st = qp_registry_get_kind(ctx, kind_for(desc->api), &r);
    if (st) return st;
    qp_backend_slot *s = slot_for(r, desc->api);
    if (!s || !s->loaded || !s->ops)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "api", NULL, "qp_device_import: the %s backend is not loaded%s%s",
                            api_name(desc->api), s && s->note[0] ? ": " : "", s ? s->note : "");
    if (!s->ops->device_import)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "api", NULL,
                            "qp_device_import: the %s backend cannot adopt application devices", s->ops->name);
    qp_device *d = calloc(1, sizeof *d);
    if (!d) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    d->ctx = ctx;
    d->backend = s;
    d->imported = 1;
    d->flip_bit = -1;
    d->info.struct_size = sizeof d->info;
    d->info.cuda_cc = -1;
    st = s->ops->device_import(s->state, desc, &d->handle);
    if (!st) st = s->ops->device_info(d->handle, &d->info);
    if (st) {
        if (d->handle && s->ops->device_release) s->ops->device_release(s->state, d->handle);
        free(d);
        return st;
    }
    snprintf(d->info.backend, sizeof d->info.backend, "%s", s->ops->name);
    d->info.same_as[0] = 0;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_lock(&r->imported_lock);
    d->next_imported = r->imported;
    r->imported = d;
    pthread_mutex_unlock(&r->imported_lock);
    *out = d;
    return QP_OK;
}

QP_API void qp_device_release(qp_device *dev) {
    if (!dev || !dev->imported) return;
    qp_registry *r;
    if (qp_registry_get_kind(dev->ctx, dev->backend->kind, &r)) return;
    pthread_mutex_lock(&r->imported_lock);
    for (qp_device **p = &r->imported; *p; p = &(*p)->next_imported)
        if (*p == dev) { *p = dev->next_imported; break; }
    pthread_mutex_unlock(&r->imported_lock);
    pthread_mutex_lock(&dev->lock);
    if (dev->backend->ops->device_release) dev->backend->ops->device_release(dev->backend->state, dev->handle);
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

QP_API qp_status qp_device_get_native(const qp_device *dev, qp_device_native *out) {
    if (!dev || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    size_t sz = out->struct_size;
    memset(out, 0, sizeof *out);
    out->struct_size = sz;
    out->imported = dev->imported;
    if (!dev->backend->ops->device_native)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "the %s backend has no native handles",
                            dev->backend->ops->name);
    qp_device *d = (qp_device *)dev;
    pthread_mutex_lock(&d->lock);
    qp_status st = dev->backend->ops->device_native(dev->handle, out);
    pthread_mutex_unlock(&d->lock);
    out->imported = dev->imported;
    return st;
}

QP_API void qp_device_lock(qp_device *dev) {
    if (dev) pthread_mutex_lock(&dev->lock);
}

QP_API void qp_device_unlock(qp_device *dev) {
    if (dev) pthread_mutex_unlock(&dev->lock);
}

QP_API qp_status qp_device_flush(qp_device *dev) {
    return dev ? qp_device_call_op(dev, dev->backend->ops->flush) : QP_ERR_INVALID_ARGUMENT;
}

qp_status qp_device_sync_locked(qp_device *dev) {
    return dev->backend->ops->synchronize ? dev->backend->ops->synchronize(dev->handle) : QP_OK;
}

QP_API qp_status qp_device_get_stats(const qp_device *dev, qp_device_stats *out) {
    if (!dev || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    size_t sz = out->struct_size;
    memset(out, 0, sizeof *out);
    out->struct_size = sz;
    if (!dev->backend->ops->device_stats) return QP_OK;
    qp_device *d = (qp_device *)dev;
    pthread_mutex_lock(&d->lock);
    qp_status st = dev->backend->ops->device_stats(dev->handle, out);
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* -- enqueue bindings --------------------------------------------------- */

static bool has_vk(const qp_enqueue_sync *s) {
    return s->vk_wait_semaphore || s->vk_signal_semaphore || s->vk_command_buffer || s->vk_wait_value ||
           s->vk_signal_value;
}
static bool has_cl(const qp_enqueue_sync *s) { return s->cl_wait_list || s->cl_n_wait || s->cl_out_event; }
static bool has_cuda(const qp_enqueue_sync *s) { return s->cuda_wait_event || s->cuda_record_event; }

qp_status qp_device_enqueue_begin(qp_device *dev, const qp_enqueue_sync *s) {
    if (!s) return QP_OK;
    qp_context *ctx = dev->ctx;
    const char *be = dev->backend->ops->name;
    if (s->struct_size < sizeof *s)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "sync", NULL,
                            "qp_enqueue_sync.struct_size %zu: call qp_enqueue_sync_init", s->struct_size);
    bool vk = !strcmp(be, "vulkan"), cl = !strcmp(be, "opencl"), cu = !strcmp(be, "cuda");
    if ((has_vk(s) && !vk) || (has_cl(s) && !cl) || (has_cuda(s) && !cu))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "sync", NULL,
                            "qp_enqueue_sync: %s fields set for a %s device", has_vk(s) ? "Vulkan" : has_cl(s) ? "OpenCL" : "CUDA",
                            be);
    if (s->cl_n_wait && !s->cl_wait_list)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "sync", NULL,
                            "qp_enqueue_sync: cl_n_wait %u with a NULL cl_wait_list", s->cl_n_wait);
    if (!has_vk(s) && !has_cl(s) && !has_cuda(s)) return QP_OK;
    if (!dev->backend->ops->sync_begin || !dev->backend->ops->sync_end)
        return qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "sync", NULL, "the %s backend takes no enqueue synchronisation", be);
    return dev->backend->ops->sync_begin(dev->handle, s);
}

qp_status qp_device_enqueue_end(qp_device *dev, const qp_enqueue_sync *s, qp_status st) {
    if (!s || (!has_vk(s) && !has_cl(s) && !has_cuda(s)) || !dev->backend->ops->sync_end) return st;
    qp_status e = dev->backend->ops->sync_end(dev->handle, s, st);
    return st ? st : e;
}

/* -- events ------------------------------------------------------------- */

QP_API qp_status qp_event_record(qp_device *dev, qp_event **out) {
    if (!dev || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_event *e = calloc(1, sizeof *e);
    if (!e) return qp_error_set(dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    e->dev = dev;
    qp_status st = QP_OK;
    pthread_mutex_lock(&dev->lock);
    if (dev->backend->ops->event_record) st = dev->backend->ops->event_record(dev->handle, &e->handle);
    pthread_mutex_unlock(&dev->lock);
    if (st) { free(e); return st; }
    *out = e;
    return QP_OK;
}

QP_API qp_status qp_event_wait(qp_event *e) {
    if (!e) return QP_ERR_INVALID_ARGUMENT;
    /* a backend without events completes every call before returning */
    if (!e->handle || !e->dev->backend->ops->event_wait) return QP_OK;
    pthread_mutex_lock(&e->dev->lock);
    qp_status st = e->dev->backend->ops->event_wait(e->dev->handle, e->handle);
    pthread_mutex_unlock(&e->dev->lock);
    return st;
}

QP_API qp_status qp_event_query(qp_event *e, int *done) {
    if (!e || !done) return QP_ERR_INVALID_ARGUMENT;
    *done = 1;
    if (!e->handle || !e->dev->backend->ops->event_query) return QP_OK;
    pthread_mutex_lock(&e->dev->lock);
    qp_status st = e->dev->backend->ops->event_query(e->dev->handle, e->handle, done);
    pthread_mutex_unlock(&e->dev->lock);
    return st;
}

QP_API void qp_event_destroy(qp_event *e) {
    if (!e) return;
    if (e->handle && e->dev->backend->ops->event_destroy) {
        pthread_mutex_lock(&e->dev->lock);
        e->dev->backend->ops->event_destroy(e->dev->handle, e->handle);
        pthread_mutex_unlock(&e->dev->lock);
    }
    free(e);
}

/* -- the application's memory ------------------------------------------ */

QP_API qp_status qp_buffer_import(qp_device *dev, const qp_buffer_import_desc *desc, qp_buffer **out) {
    if (!dev || !desc || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (desc->struct_size < sizeof *desc)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "struct_size", NULL,
                            "qp_buffer_import_desc.struct_size %zu: call qp_buffer_import_desc_init", desc->struct_size);
    int n = !!desc->vk_buffer + !!desc->cl_mem + !!desc->cuda_ptr + !!desc->host_ptr;
    if (n != 1)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "buffer", NULL,
                            "qp_buffer_import: set exactly one of vk_buffer, cl_mem, cuda_ptr, host_ptr (%d set)", n);
    if (!desc->size)
        return qp_error_set(dev->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "size", NULL, "qp_buffer_import: size 0");
    if (!dev->backend->ops->buffer_import)
        return qp_error_set(dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "the %s backend cannot wrap application memory",
                            dev->backend->ops->name);
    qp_buffer *b = calloc(1, sizeof *b);
    if (!b) return qp_error_set(dev->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    pthread_mutex_lock(&dev->lock);
    qp_status st = dev->backend->ops->buffer_import(dev->handle, desc, &b->handle);
    pthread_mutex_unlock(&dev->lock);
    if (st) { free(b); return st; }
    b->dev = dev;
    b->size = desc->size;
    b->imported = 1;
    *out = b;
    return QP_OK;
}

QP_API qp_status qp_buffer_get_native(const qp_buffer *b, qp_buffer_native *out) {
    if (!b || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    size_t sz = out->struct_size;
    memset(out, 0, sizeof *out);
    out->struct_size = sz;
    if (!b->dev->backend->ops->buffer_native)
        return qp_error_set(b->dev->ctx, QP_ERR_UNSUPPORTED, NULL, NULL, NULL, "the %s backend has no native buffers",
                            b->dev->backend->ops->name);
    pthread_mutex_lock(&b->dev->lock);
    qp_status st = b->dev->backend->ops->buffer_native(b->dev->handle, b->handle, out);
    pthread_mutex_unlock(&b->dev->lock);
    out->imported = b->imported;
    out->size = b->size;
    return st;
}
