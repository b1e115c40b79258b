/* Device buffers: cl_mem objects addressed by byte offsets. Sizes past the
 * device's CL_DEVICE_MAX_MEM_ALLOC_SIZE are refused up front with a clear
 * message (drivers differ in what they report for those). */
#include <stdio.h>
#include <stdlib.h>

#include "cl_internal.h"

static qp_status mem_error(qp_cl_device *d, cl_int err, const char *call, size_t bytes, const char *what) {
    qp_status st = (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
                    err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
                       ? QP_ERR_OUT_OF_MEMORY
                       : QP_ERR_DEVICE;
    return qp_cl_error(d, st, NULL, "%s%s of %zu bytes failed: %s (%d)", what, call, bytes,
                     qp_cl_strerror(err), (int)err);
}

/* `what` prefixes messages ("layer 'x': tensor w: " or ""). */
static qp_status create_mem(qp_cl_device *d, size_t bytes, const char *what, cl_mem *out) {
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    if (bytes == 0) bytes = 1;
    if ((uint64_t)bytes > d->max_alloc)
        return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL,
                         "%sbuffer of %zu bytes exceeds the device's largest allocation "
                         "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = %llu)", what, bytes, (unsigned long long)d->max_alloc);
    cl_int err = CL_SUCCESS;
    *out = d->be->api.clCreateBuffer(d->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!*out) return mem_error(d, err, "clCreateBuffer", bytes, what);
    d->stats.allocations++;
    return QP_OK;
}

qp_status qp_cl_buffer_alloc(void *dev, size_t bytes, void **buf) {
    qp_cl_device *d = dev;
    qp_cl_buffer *b = calloc(1, sizeof *b);
    if (!b) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    qp_status st = create_mem(d, bytes, "", &b->mem);
    if (st != QP_OK) {
        free(b);
        return st;
    }
    b->bytes = bytes;
    *buf = b;
    return QP_OK;
}

void qp_cl_buffer_free(void *dev, void *buf) {
    qp_cl_buffer *b = buf;
    if (!b) return;
    qp_cl_release_mem(dev, &b->mem);
    free(b);
}

static qp_status check_range(qp_cl_device *d, const qp_cl_buffer *b, size_t offset, size_t bytes, const char *what) {
    if (!b || offset > b->bytes || bytes > b->bytes - offset)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s of %zu bytes at offset %zu outside a %zu-byte buffer", what, bytes, offset, b ? b->bytes : 0);
    return QP_OK;
}

/* bytes at offset of b from src (upload) or into dst (download): blocking,
 * and after the work enqueued before it (in-order queue) */
static qp_status transfer(qp_cl_device *d, const qp_cl_buffer *b, int upload, size_t offset, size_t bytes,
                          const void *src, void *dst) {
    qp_status st = check_range(d, b, offset, bytes, upload ? "upload" : "download");
    if (st != QP_OK || !bytes) return st;
    const qp_cl_api *api = &d->be->api;
    cl_int err = upload ? api->clEnqueueWriteBuffer(d->queue, b->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL)
                        : api->clEnqueueReadBuffer(d->queue, b->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return mem_error(d, err, upload ? "clEnqueueWriteBuffer" : "clEnqueueReadBuffer", bytes, "");
    return QP_OK;
}

qp_status qp_cl_buffer_upload(void *dev, void *buf, size_t offset, const void *src, size_t bytes) {
    return transfer(dev, buf, 1, offset, bytes, src, NULL);
}

qp_status qp_cl_buffer_download(void *dev, void *buf, size_t offset, void *dst, size_t bytes) {
    return transfer(dev, buf, 0, offset, bytes, NULL, dst);
}

qp_status qp_cl_buffer_from_host(qp_cl_device *d, const void *src, size_t bytes, const char *what, const char *layer,
                                 cl_mem *out) {
    char pre[200];
    snprintf(pre, sizeof pre, "layer '%s': tensor %s: ", layer, what);
    qp_status st = create_mem(d, bytes, pre, out);
    if (st != QP_OK) return st;
    cl_int err = d->be->api.clEnqueueWriteBuffer(d->queue, *out, CL_TRUE, 0, bytes, src, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        qp_cl_release_mem(d, out);
        return qp_cl_error(d, QP_ERR_DEVICE, layer, "upload of %s (%zu bytes): %s (%d)",
                         what, bytes, qp_cl_strerror(err), (int)err);
    }
    return QP_OK;
}
