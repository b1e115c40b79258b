/* Asynchronous execution and embedding (ABI 3) on OpenCL: the device's
 * in-order queue carries every op; synchronize is clFinish, events are
 * markers, an enqueue's wait list is a barrier with that list and its out
 * event a marker after it; an application's context, device and in-order
 * queue (retained, never released beyond that) and its cl_mem (as a
 * sub-buffer at an offset) are adopted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

void qp_cl_enqueued(qp_cl_device *d, const char *what) {
    if (!d->pending_first[0]) snprintf(d->pending_first, sizeof d->pending_first, "%s", what);
    snprintf(d->pending_last, sizeof d->pending_last, "%s", what);
    d->stats.submissions++;
}

static qp_status queue_error(qp_cl_device *d, cl_int err, const char *call) {
    qp_status st = qp_cl_error(d, err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE
                                    ? QP_ERR_OUT_OF_MEMORY : QP_ERR_DEVICE, NULL,
                             "the enqueued work from %s to %s failed: %s: %s (%d)",
                             d->pending_first[0] ? d->pending_first : "(none)",
                             d->pending_last[0] ? d->pending_last : "(none)", call, qp_cl_strerror(err), (int)err);
    return st;
}

qp_status qp_cl_synchronize(void *dev) {
    qp_cl_device *d = dev;
    /* nothing enqueued since the last wait (uploads and downloads block):
     * no clFinish, so freeing a buffer on an idle queue costs no wait */
    if (!d->queue || !d->pending_first[0]) return QP_OK;
    cl_int err = d->be->api.clFinish(d->queue);
    d->stats.host_waits++;
    qp_status st = err == CL_SUCCESS ? QP_OK : queue_error(d, err, "clFinish");
    d->pending_first[0] = d->pending_last[0] = 0;
    return st;
}

qp_status qp_cl_flush(void *dev) {
    qp_cl_device *d = dev;
    if (!d->queue) return QP_OK;
    cl_int err = d->be->api.clFlush(d->queue);
    return err == CL_SUCCESS ? QP_OK : queue_error(d, err, "clFlush");
}

qp_status qp_cl_event_record(void *dev, void **ev) {
    qp_cl_device *d = dev;
    *ev = NULL;
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    cl_event e = NULL;
    cl_int err = d->be->api.clEnqueueMarkerWithWaitList(d->queue, 0, NULL, &e);
    if (err == CL_SUCCESS) err = d->be->api.clFlush(d->queue);
    if (err != CL_SUCCESS) {
        if (e) d->be->api.clReleaseEvent(e);
        return queue_error(d, err, "clEnqueueMarkerWithWaitList");
    }
    *ev = e;
    return QP_OK;
}

static qp_status event_status(qp_cl_device *d, cl_event e, cl_int *status) {
    cl_int err = d->be->api.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof *status, status, NULL);
    return err == CL_SUCCESS ? QP_OK : queue_error(d, err, "clGetEventInfo");
}

qp_status qp_cl_event_wait(void *dev, void *ev) {
    qp_cl_device *d = dev;
    cl_event e = ev;
    cl_int err = d->be->api.clWaitForEvents(1, &e);
    d->stats.host_waits++;
    cl_int status = CL_COMPLETE;
    qp_status st = event_status(d, e, &status);
    if (st != QP_OK) return st;
    if (err != CL_SUCCESS || status < 0) return queue_error(d, status < 0 ? status : err, "clWaitForEvents");
    return QP_OK;
}

qp_status qp_cl_event_query(void *dev, void *ev, int *done) {
    qp_cl_device *d = dev;
    cl_int status = CL_COMPLETE;
    qp_status st = event_status(d, ev, &status);
    if (st != QP_OK) return st;
    if (status < 0) return queue_error(d, status, "the event");
    *done = status == CL_COMPLETE;
    return QP_OK;
}

void qp_cl_event_destroy(void *dev, void *ev) {
    qp_cl_device *d = dev;
    if (ev) d->be->api.clReleaseEvent(ev);
}

qp_status qp_cl_sync_begin(void *dev, const qp_enqueue_sync *s) {
    qp_cl_device *d = dev;
    if (!s->cl_n_wait) return QP_OK;
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    /* an in-order queue: a barrier holding back everything after it */
    cl_int err = d->be->api.clEnqueueBarrierWithWaitList(d->queue, s->cl_n_wait, (const cl_event *)s->cl_wait_list, NULL);
    if (err != CL_SUCCESS)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "clEnqueueBarrierWithWaitList over the %u events of "
                         "qp_enqueue_sync.cl_wait_list failed: %s (%d)", s->cl_n_wait, qp_cl_strerror(err),
                         (int)err);
    return QP_OK;
}

qp_status qp_cl_sync_end(void *dev, const qp_enqueue_sync *s, qp_status st) {
    qp_cl_device *d = dev;
    if (!s->cl_out_event) return QP_OK;
    *s->cl_out_event = NULL;
    if (st != QP_OK || !d->queue) return QP_OK;
    cl_event e = NULL;
    cl_int err = d->be->api.clEnqueueMarkerWithWaitList(d->queue, 0, NULL, &e);
    if (err != CL_SUCCESS) return queue_error(d, err, "clEnqueueMarkerWithWaitList");
    *s->cl_out_event = e;
    return QP_OK;
}

qp_status qp_cl_device_import(void *state, const qp_device_import_desc *desc, void **dev) {
    qp_cl_backend *be = state;
    const qp_host *h = be->host;
    *dev = NULL;
    if (!be->loaded)
        return h->error(h->ctx, QP_ERR_UNSUPPORTED, "opencl: qp_device_import: the OpenCL ICD loader did not load");
    if (!desc->cl_context || !desc->cl_device || !desc->cl_queue)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "opencl: qp_device_import needs cl_context, cl_device and "
                        "cl_queue");
    qp_cl_api *api = &be->api;
    cl_command_queue q = desc->cl_queue;
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_command_queue_properties props = 0;
    cl_int err = api->clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL);
    if (err == CL_SUCCESS) err = api->clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL);
    if (err == CL_SUCCESS) err = api->clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "opencl: qp_device_import: clGetCommandQueueInfo on cl_queue "
                        "failed: %s (%d): not a valid command queue", qp_cl_strerror(err), (int)err);
    if (qctx != (cl_context)desc->cl_context || qdev != (cl_device_id)desc->cl_device)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "opencl: qp_device_import: cl_queue belongs to another %s",
                        qctx != (cl_context)desc->cl_context ? "context" : "device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return h->error(h->ctx, QP_ERR_UNSUPPORTED, "opencl: qp_device_import: out-of-order queues are not supported "
                        "(qport's kernels rely on queue order); pass an in-order queue");
    cl_platform_id plat = NULL;
    if ((err = api->clGetDeviceInfo(qdev, CL_DEVICE_PLATFORM, sizeof plat, &plat, NULL)) != CL_SUCCESS)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "opencl: qp_device_import: clGetDeviceInfo on cl_device "
                        "failed: %s (%d)", qp_cl_strerror(err), (int)err);
    qp_cl_device *d = calloc(1, sizeof *d);
    if (!d) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "opencl: out of host memory");
    d->be = be;
    d->index = QP_CL_MAX_DEVICES + be->n_imported++; /* unique in messages */
    d->platform = plat;
    d->id = qdev;
    qp_cl_fill_device(be, d);
    api->clRetainContext(qctx);
    api->clRetainCommandQueue(q);
    d->context = qctx;
    d->queue = q;
    d->imported = 1;
    d->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
    d->dummy = api->clCreateBuffer(d->context, CL_MEM_READ_WRITE, 64, NULL, &err);
    if (!d->dummy) {
        qp_cl_device_release(be, d);
        return h->error(h->ctx, QP_ERR_DEVICE, "opencl: qp_device_import: clCreateBuffer (64 bytes) failed: %s (%d)",
                        qp_cl_strerror(err), (int)err);
    }
    *dev = d;
    return QP_OK;
}

void qp_cl_device_release(void *state, void *dev) {
    (void)state;
    qp_cl_device *d = dev;
    if (!d) return;
    qp_cl_device_close(d); /* waits for qport's work, releases the retained context and queue */
    free(d);
}

qp_status qp_cl_device_native(void *dev, qp_device_native *o) {
    qp_cl_device *d = dev;
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    o->api = QP_NATIVE_OPENCL;
    o->cl_context = d->context;
    o->cl_device = d->id;
    o->cl_queue = d->queue;
    return QP_OK;
}

qp_status qp_cl_buffer_import(void *dev, const qp_buffer_import_desc *desc, void **buf) {
    qp_cl_device *d = dev;
    qp_cl_api *api = &d->be->api;
    *buf = NULL;
    if (!desc->cl_mem)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import takes cl_mem on an OpenCL device");
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    cl_mem parent = desc->cl_mem;
    cl_context mctx = NULL;
    size_t msize = 0;
    cl_int err = api->clGetMemObjectInfo(parent, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL);
    if (err == CL_SUCCESS) err = api->clGetMemObjectInfo(parent, CL_MEM_SIZE, sizeof msize, &msize, NULL);
    if (err != CL_SUCCESS)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: clGetMemObjectInfo failed: %s (%d): "
                         "not a valid cl_mem", qp_cl_strerror(err), (int)err);
    if (mctx != d->context)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: the cl_mem belongs to another context");
    if (desc->offset > msize || desc->size > msize - desc->offset)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: %zu bytes at offset %zu outside a "
                         "%zu-byte cl_mem", desc->size, desc->offset, msize);
    cl_uint align_bits = 0;
    api->clGetDeviceInfo(d->id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    size_t align = align_bits / 8 ? align_bits / 8 : 1;
    if (desc->offset % align)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: offset %zu is not a multiple of "
                         "CL_DEVICE_MEM_BASE_ADDR_ALIGN (%zu bytes)", desc->offset, align);
    qp_cl_buffer *b = calloc(1, sizeof *b);
    if (!b) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    if (desc->offset == 0 && desc->size == msize) {
        api->clRetainMemObject(parent);
        b->mem = parent;
    } else {
        cl_buffer_region reg = {desc->offset, desc->size};
        b->mem = api->clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
        if (!b->mem) {
            free(b);
            return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "qp_buffer_import: clCreateSubBuffer(%zu bytes at "
                             "%zu) failed: %s (%d)", desc->size, desc->offset, qp_cl_strerror(err), (int)err);
        }
    }
    b->bytes = desc->size;
    b->parent = parent;
    b->offset = desc->offset;
    *buf = b;
    return QP_OK;
}

void qp_cl_buffer_unimport(void *dev, void *buf) {
    qp_cl_device *d = dev;
    qp_cl_buffer *b = buf;
    if (!b) return;
    if (b->mem) d->be->api.clReleaseMemObject(b->mem); /* the retain or the sub-buffer */
    free(b);
}

qp_status qp_cl_buffer_native(void *dev, void *buf, qp_buffer_native *o) {
    (void)dev;
    qp_cl_buffer *b = buf;
    o->api = QP_NATIVE_OPENCL;
    o->cl_mem = b->parent ? b->parent : b->mem;
    o->offset = b->parent ? b->offset : 0;
    return QP_OK;
}

qp_status qp_cl_device_stats(void *dev, qp_device_stats *out) {
    return qp_backend_stats_copy(&((const qp_cl_device *)dev)->stats, out);
}
