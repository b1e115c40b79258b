/* Device buffers (device-local, storage + transfer), the staging buffer
 * that uploads and downloads go through, and the device's one command
 * buffer (the core serialises calls per device, so one is enough). */
#include <inttypes.h>
#include <string.h>

#include "vk_internal.h"

#define STAGING_BYTES ((size_t)8 << 20)

static qp_status vk_fail(qp_vk_device *d, VkResult r, const char *call, const char *what) {
    qp_status st = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) ? QP_ERR_OUT_OF_MEMORY
                                                                                            : QP_ERR_DEVICE;
    return QP_VK_ERR(d, st, "vulkan:%d: %s for %s failed: %s", d->index, call, what, qp_vk_result_str(r));
}

qp_status qp_vk_buf_create(qp_vk_device *d, size_t bytes, bool host_visible, const char *what, qp_vk_buf *out) {
    qp_vk_fns *f = &d->be->fn;
    memset(out, 0, sizeof *out);
    size_t size = bytes < 16 ? 16 : (bytes + 15) & ~(size_t)15;
    if (size < bytes) return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY, "vulkan:%d: %s: %zu bytes is too large", d->index, what, bytes);
    /* Checked here rather than left to the driver: beyond these limits
     * vkAllocateMemory is invalid usage, not an out-of-memory result. */
    if (d->max_alloc && size > d->max_alloc)
        return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY,
                         "vulkan:%d: %s: %zu bytes exceed the device's maxMemoryAllocationSize (%" PRIu64 ")",
                         d->index, what, bytes, d->max_alloc);
    if (!host_visible && d->local_bytes && size > d->local_bytes)
        return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY, "vulkan:%d: %s: %zu bytes exceed the device memory (%" PRIu64 ")",
                         d->index, what, bytes, d->local_bytes);
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = host_visible ? (VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT)
                              : (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                 VK_BUFFER_USAGE_TRANSFER_DST_BIT),
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = f->vkCreateBuffer(d->dev, &bci, NULL, &out->buf);
    if (r != VK_SUCCESS) { out->buf = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateBuffer", what); }
    VkMemoryRequirements req;
    f->vkGetBufferMemoryRequirements(d->dev, out->buf, &req);
    uint32_t type = host_visible ? d->mem_host : d->mem_local;
    if (!(req.memoryTypeBits & (1u << type))) type = d->mem_host;
    if (!(req.memoryTypeBits & (1u << type))) {
        f->vkDestroyBuffer(d->dev, out->buf, NULL);
        out->buf = VK_NULL_HANDLE;
        return QP_VK_ERR(d, QP_ERR_DEVICE, "vulkan:%d: %s: no memory type fits the buffer", d->index, what);
    }
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                .memoryTypeIndex = type};
    r = f->vkAllocateMemory(d->dev, &mai, NULL, &out->mem);
    if (r != VK_SUCCESS) {
        f->vkDestroyBuffer(d->dev, out->buf, NULL);
        out->buf = VK_NULL_HANDLE;
        out->mem = VK_NULL_HANDLE;
        return vk_fail(d, r, "vkAllocateMemory", what);
    }
    r = f->vkBindBufferMemory(d->dev, out->buf, out->mem, 0);
    if (r != VK_SUCCESS) {
        qp_vk_buf_destroy(d, out);
        return vk_fail(d, r, "vkBindBufferMemory", what);
    }
    out->size = bytes;
    out->alloc_size = size;
    return QP_OK;
}

void qp_vk_buf_destroy(qp_vk_device *d, qp_vk_buf *b) {
    if (b->buf) d->be->fn.vkDestroyBuffer(d->dev, b->buf, NULL);
    if (b->mem) d->be->fn.vkFreeMemory(d->dev, b->mem, NULL);
    memset(b, 0, sizeof *b);
}

qp_status qp_vk_buf_reserve(qp_vk_device *d, qp_vk_buf *b, size_t bytes, const char *what) {
    if (b->buf && b->size >= bytes) return QP_OK;
    size_t want = bytes;
    if (b->buf && want < 2 * b->size) want = 2 * b->size; /* grow geometrically */
    qp_vk_buf_destroy(d, b);
    qp_status st = qp_vk_buf_create(d, want, false, what, b);
    if (st != QP_OK && want > bytes) st = qp_vk_buf_create(d, bytes, false, what, b);
    return st;
}

qp_status qp_vk_submission_init(qp_vk_device *d) {
    qp_vk_fns *f = &d->be->fn;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = d->queue_family};
    VkResult r = f->vkCreateCommandPool(d->dev, &pci, NULL, &d->pool);
    if (r != VK_SUCCESS) { d->pool = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateCommandPool", "the device queue"); }
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    r = f->vkAllocateCommandBuffers(d->dev, &cai, &d->cmd);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkAllocateCommandBuffers", "the device queue");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = f->vkCreateFence(d->dev, &fci, NULL, &d->fence);
    if (r != VK_SUCCESS) { d->fence = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateFence", "the device queue"); }
    qp_status st = qp_vk_buf_create(d, STAGING_BYTES, true, "the staging buffer", &d->staging);
    if (st != QP_OK) return st;
    r = f->vkMapMemory(d->dev, d->staging.mem, 0, VK_WHOLE_SIZE, 0, &d->staging_map);
    if (r != VK_SUCCESS) { d->staging_map = NULL; return vk_fail(d, r, "vkMapMemory", "the staging buffer"); }
    /* bound to unused descriptor slots */
    return qp_vk_buf_create(d, 64, false, "a placeholder binding", &d->dummy);
}

void qp_vk_submission_destroy(qp_vk_device *d) {
    qp_vk_fns *f = &d->be->fn;
    if (d->staging_map) f->vkUnmapMemory(d->dev, d->staging.mem);
    d->staging_map = NULL;
    qp_vk_buf_destroy(d, &d->staging);
    if (d->fence) f->vkDestroyFence(d->dev, d->fence, NULL);
    if (d->pool) f->vkDestroyCommandPool(d->dev, d->pool, NULL); /* frees d->cmd */
    d->fence = VK_NULL_HANDLE;
    d->pool = VK_NULL_HANDLE;
    d->cmd = VK_NULL_HANDLE;
}

qp_status qp_vk_cmd_begin(qp_vk_device *d) {
    qp_vk_fns *f = &d->be->fn;
    VkResult r = f->vkResetCommandBuffer(d->cmd, 0);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkResetCommandBuffer", "the device queue");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = f->vkBeginCommandBuffer(d->cmd, &bi);
    return r == VK_SUCCESS ? QP_OK : vk_fail(d, r, "vkBeginCommandBuffer", "the device queue");
}

qp_status qp_vk_cmd_submit(qp_vk_device *d, const char *what) {
    qp_vk_fns *f = &d->be->fn;
    VkResult r = f->vkEndCommandBuffer(d->cmd);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkEndCommandBuffer", what);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &d->cmd};
    r = f->vkQueueSubmit(d->queue, 1, &si, d->fence);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkQueueSubmit", what);
    r = f->vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX);
    VkResult r2 = f->vkResetFences(d->dev, 1, &d->fence);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkWaitForFences", what);
    if (r2 != VK_SUCCESS) return vk_fail(d, r2, "vkResetFences", what);
    return QP_OK;
}

static qp_status copy_chunk(qp_vk_device *d, VkBuffer src, VkBuffer dst, size_t src_off, size_t dst_off, size_t n,
                            const char *what) {
    qp_status st = qp_vk_cmd_begin(d);
    if (st != QP_OK) return st;
    VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    d->be->fn.vkCmdCopyBuffer(d->cmd, src, dst, 1, &c);
    return qp_vk_cmd_submit(d, what);
}

qp_status qp_vk_upload(qp_vk_device *d, qp_vk_buf *b, size_t off, const void *src, size_t bytes) {
    if (off > b->size || bytes > b->size - off)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: upload of %zu bytes at %zu overruns a %zu-byte buffer",
                         d->index, bytes, off, b->size);
    const uint8_t *p = src;
    while (bytes) {
        size_t n = bytes < STAGING_BYTES ? bytes : STAGING_BYTES;
        memcpy(d->staging_map, p, n);
        qp_status st = copy_chunk(d, d->staging.buf, b->buf, 0, off, n, "an upload");
        if (st != QP_OK) return st;
        p += n; off += n; bytes -= n;
    }
    return QP_OK;
}

qp_status qp_vk_download(qp_vk_device *d, qp_vk_buf *b, size_t off, void *dst, size_t bytes) {
    if (off > b->size || bytes > b->size - off)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: download of %zu bytes at %zu overruns a %zu-byte buffer",
                         d->index, bytes, off, b->size);
    uint8_t *p = dst;
    while (bytes) {
        size_t n = bytes < STAGING_BYTES ? bytes : STAGING_BYTES;
        qp_status st = copy_chunk(d, b->buf, d->staging.buf, off, 0, n, "a download");
        if (st != QP_OK) return st;
        memcpy(p, d->staging_map, n);
        p += n; off += n; bytes -= n;
    }
    return QP_OK;
}
