/* Device buffers (device-local, storage + transfer), the staging buffer
 * that uploads and downloads go through, and the device's one command
 * buffer (the core serialises calls per device, so one is enough). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define STAGING_BYTES ((size_t)8 << 20)

static qp_status vk_fail(qp_vk_device *d, VkResult r, const char *call, const char *what) {
    qp_status st = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) ? QP_ERR_OUT_OF_MEMORY
                                                                                            : QP_ERR_DEVICE;
    return qp_vk_error(d, st, NULL, "%s for %s failed: %s", call, what, qp_vk_result_str(r));
}

qp_status qp_vk_buf_create(qp_vk_device *d, size_t bytes, bool host_visible, const char *what, qp_vk_buf *out) {
    qp_vk_fns *f = d->fn;
    memset(out, 0, sizeof *out);
    size_t size = bytes < 16 ? 16 : (bytes + 15) & ~(size_t)15;
    if (size < bytes) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "%s: %zu bytes is too large", what, bytes);
    /* Checked here rather than left to the driver: beyond these limits
     * vkAllocateMemory is invalid usage, not an out-of-memory result. */
    if (d->max_alloc && size > d->max_alloc)
        return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL,
                         "%s: %zu bytes exceed the device's maxMemoryAllocationSize (%" PRIu64 ")", what, bytes, d->max_alloc);
    if (!host_visible && d->local_bytes && size > d->local_bytes)
        return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "%s: %zu bytes exceed the device memory (%" PRIu64 ")", what, bytes, d->local_bytes);
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
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "%s: no memory type fits the buffer", what);
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
    d->stats.allocations++;
    return QP_OK;
}

void qp_vk_buf_destroy(qp_vk_device *d, qp_vk_buf *b) {
    if (!b->imported) {
        if (b->buf) d->fn->vkDestroyBuffer(d->dev, b->buf, NULL);
        if (b->mem) d->fn->vkFreeMemory(d->dev, b->mem, NULL);
    }
    memset(b, 0, sizeof *b);
}

bool qp_vk_busy(const qp_vk_device *d) {
    if (d->open >= 0) return true;
    for (int i = 0; i < QP_VK_RING; i++)
        if (d->ring[i].pending) return true;
    return false;
}

void *qp_vk_grow(void *items, size_t n, size_t *cap, size_t elem, size_t first) {
    if (n < *cap) return items;
    size_t c = *cap ? 2 * *cap : first;
    void *g = realloc(items, c * elem);
    if (g) *cap = c;
    return g;
}

qp_status qp_vk_buf_retire(qp_vk_device *d, qp_vk_buf *b) {
    if (!b->buf) return QP_OK;
    if (!qp_vk_busy(d)) { qp_vk_buf_destroy(d, b); return QP_OK; }
    qp_vk_buf *g = qp_vk_grow(d->retired, d->n_retired, &d->cap_retired, sizeof *g, 8);
    if (!g) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    d->retired = g;
    d->retired[d->n_retired++] = *b;
    memset(b, 0, sizeof *b);
    return QP_OK;
}

static void free_retired(qp_vk_device *d) {
    for (size_t i = 0; i < d->n_retired; i++) qp_vk_buf_destroy(d, &d->retired[i]);
    d->n_retired = 0;
}

qp_status qp_vk_buf_reserve(qp_vk_device *d, qp_vk_buf *b, size_t bytes, const char *what) {
    if (b->buf && b->size >= bytes) return QP_OK;
    /* the application's command buffer runs when the application says: a
     * buffer it may use cannot be replaced behind it */
    if (b->buf && d->ext_cmd)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL,
                         "%s: %zu bytes needed, %zu reserved: recording into the application's command "
                         "buffer cannot grow scratch (create the layer with a larger max_m)", what, bytes,
                         b->size);
    size_t want = bytes;
    if (b->buf && want < 2 * b->size) want = 2 * b->size; /* grow geometrically */
    qp_status st = qp_vk_buf_retire(d, b);
    if (st != QP_OK) return st;
    st = qp_vk_buf_create(d, want, false, what, b);
    if (st != QP_OK && want > bytes) st = qp_vk_buf_create(d, bytes, false, what, b);
    return st;
}

qp_status qp_vk_submission_init(qp_vk_device *d) {
    qp_vk_fns *f = d->fn;
    d->open = -1;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = d->queue_family};
    VkResult r = f->vkCreateCommandPool(d->dev, &pci, NULL, &d->pool);
    if (r != VK_SUCCESS) { d->pool = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateCommandPool", "the device queue"); }
    VkCommandBuffer cmds[QP_VK_RING + 1];
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = QP_VK_RING + 1};
    r = f->vkAllocateCommandBuffers(d->dev, &cai, cmds);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkAllocateCommandBuffers", "the device queue");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    for (int i = 0; i < QP_VK_RING; i++) {
        d->ring[i].cmd = cmds[i];
        r = f->vkCreateFence(d->dev, &fci, NULL, &d->ring[i].fence);
        if (r != VK_SUCCESS) { d->ring[i].fence = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateFence", "the device queue"); }
    }
    d->once = cmds[QP_VK_RING];
    r = f->vkCreateFence(d->dev, &fci, NULL, &d->once_fence);
    if (r != VK_SUCCESS) { d->once_fence = VK_NULL_HANDLE; return vk_fail(d, r, "vkCreateFence", "the device queue"); }
    qp_status st = qp_vk_buf_create(d, STAGING_BYTES, true, "the staging buffer", &d->staging);
    if (st != QP_OK) return st;
    r = f->vkMapMemory(d->dev, d->staging.mem, 0, VK_WHOLE_SIZE, 0, &d->staging_map);
    if (r != VK_SUCCESS) { d->staging_map = NULL; return vk_fail(d, r, "vkMapMemory", "the staging buffer"); }
    /* bound to unused descriptor slots */
    return qp_vk_buf_create(d, 64, false, "a placeholder binding", &d->dummy);
}

void qp_vk_submission_destroy(qp_vk_device *d) {
    qp_vk_fns *f = d->fn;
    if (d->pool) (void)qp_vk_idle(d);
    free_retired(d);
    free(d->retired);
    d->retired = NULL;
    d->cap_retired = 0;
    if (d->staging_map) f->vkUnmapMemory(d->dev, d->staging.mem);
    d->staging_map = NULL;
    qp_vk_buf_destroy(d, &d->staging);
    for (int i = 0; i < QP_VK_RING; i++)
        if (d->ring[i].fence) f->vkDestroyFence(d->dev, d->ring[i].fence, NULL);
    if (d->once_fence) f->vkDestroyFence(d->dev, d->once_fence, NULL);
    if (d->pool) f->vkDestroyCommandPool(d->dev, d->pool, NULL); /* frees the command buffers */
    memset(d->ring, 0, sizeof d->ring);
    d->once_fence = VK_NULL_HANDLE;
    d->pool = VK_NULL_HANDLE;
    d->cmd = d->once = VK_NULL_HANDLE;
}

/* Makes earlier work (earlier submissions on the queue included: a barrier's
 * first scope is everything before it in submission order) visible to what
 * follows: compute and transfer writes -> compute reads and writes. */
static void lead_barrier(qp_vk_device *d) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    d->fn->vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Leaves qport's writes visible to the application's compute and transfer
 * commands after them (the barrier contract of qp_enqueue_sync). */
static void tail_barrier(qp_vk_device *d) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT};
    d->fn->vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                NULL, 0, NULL);
}

static uint64_t pending_upto(const qp_vk_device *d, uint64_t upto, VkFence *fences, int *idx) {
    int n = 0;
    for (int i = 0; i < QP_VK_RING; i++)
        if (d->ring[i].pending && d->ring[i].serial <= upto) { fences[n] = d->ring[i].fence; idx[n++] = i; }
    return (uint64_t)n;
}

qp_status qp_vk_wait(qp_vk_device *d, uint64_t upto) {
    VkFence fences[QP_VK_RING];
    int idx[QP_VK_RING];
    uint32_t n = (uint32_t)pending_upto(d, upto, fences, idx);
    qp_status st = QP_OK;
    if (n) {
        VkResult r = d->fn->vkWaitForFences(d->dev, n, fences, VK_TRUE, UINT64_MAX);
        d->stats.host_waits++;
        if (r != VK_SUCCESS) {
            /* name what the failed batches held */
            const char *first = "", *last = "";
            uint64_t lo = UINT64_MAX;
            for (uint32_t i = 0; i < n; i++) {
                qp_vk_slot *s = &d->ring[idx[i]];
                if (s->serial < lo) { lo = s->serial; first = s->first; }
                last = s->last;
            }
            st = qp_vk_error(d, r == VK_ERROR_DEVICE_LOST ? QP_ERR_DEVICE : QP_ERR_DEVICE, NULL,
                           "the enqueued work from %s to %s failed: vkWaitForFences: %s", first,
                           last, qp_vk_result_str(r));
        }
        for (uint32_t i = 0; i < n; i++) d->ring[idx[i]].pending = false;
        VkResult r2 = d->fn->vkResetFences(d->dev, n, fences);
        if (st == QP_OK && r2 != VK_SUCCESS) st = vk_fail(d, r2, "vkResetFences", "the device queue");
    }
    if (!qp_vk_busy(d)) free_retired(d);
    return st;
}

qp_status qp_vk_submit(qp_vk_device *d, VkSemaphore signal, uint64_t signal_value) {
    qp_vk_fns *f = d->fn;
    if (d->open < 0 && !d->n_waits && !signal) return QP_OK;
    if (d->open < 0) { /* semaphores alone: an empty batch carries them */
        qp_status st = qp_vk_rec_begin(d, "a semaphore operation");
        if (st != QP_OK) return st;
    }
    qp_vk_slot *s = &d->ring[d->open];
    d->open = -1;
    VkResult r = f->vkEndCommandBuffer(s->cmd);
    if (r != VK_SUCCESS) { d->n_waits = 0; return vk_fail(d, r, "vkEndCommandBuffer", s->last); }
    VkPipelineStageFlags stages[QP_VK_MAX_WAITS];
    for (uint32_t i = 0; i < d->n_waits; i++) stages[i] = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = d->n_waits, .pWaitSemaphoreValues = d->wait_val,
                                        .signalSemaphoreValueCount = signal ? 1u : 0u,
                                        .pSignalSemaphoreValues = &signal_value};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = (d->n_waits || signal) ? &ts : NULL,
                       .waitSemaphoreCount = d->n_waits, .pWaitSemaphores = d->wait_sem,
                       .pWaitDstStageMask = stages, .commandBufferCount = 1, .pCommandBuffers = &s->cmd,
                       .signalSemaphoreCount = signal ? 1u : 0u, .pSignalSemaphores = &signal};
    r = f->vkQueueSubmit(d->queue, 1, &si, s->fence);
    d->n_waits = 0;
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkQueueSubmit", s->last);
    d->stats.submissions++;
    s->pending = true;
    s->serial = ++d->serial;
    return QP_OK;
}

qp_status qp_vk_idle(qp_vk_device *d) {
    qp_status st = qp_vk_submit(d, VK_NULL_HANDLE, 0);
    qp_status w = qp_vk_wait(d, UINT64_MAX);
    return st ? st : w;
}

qp_status qp_vk_rec_begin(qp_vk_device *d, const char *what) {
    qp_vk_fns *f = d->fn;
    if (d->ext_cmd) {
        d->cmd = d->ext_cmd;
        lead_barrier(d);
        return QP_OK;
    }
    if (d->open < 0) {
        qp_vk_slot *s = &d->ring[d->next];
        if (s->pending) {
            qp_status st = qp_vk_wait(d, s->serial);
            if (st != QP_OK) return st;
        }
        VkResult r = f->vkResetCommandBuffer(s->cmd, 0);
        if (r != VK_SUCCESS) return vk_fail(d, r, "vkResetCommandBuffer", what);
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
        r = f->vkBeginCommandBuffer(s->cmd, &bi);
        if (r != VK_SUCCESS) return vk_fail(d, r, "vkBeginCommandBuffer", what);
        d->open = d->next;
        d->next = (d->next + 1) % QP_VK_RING;
        s->n_ops = 0;
        snprintf(s->first, sizeof s->first, "%s", what);
        snprintf(s->last, sizeof s->last, "%s", what);
        d->cmd = s->cmd;
        lead_barrier(d);
        return QP_OK;
    }
    /* each op begins with the barrier: the previous op's last dispatch may
     * still read what this one overwrites (scratch, a ping-pong buffer) */
    d->cmd = d->ring[d->open].cmd;
    lead_barrier(d);
    return QP_OK;
}

qp_status qp_vk_rec_end(qp_vk_device *d, const char *what, qp_status st) {
    if (d->ext_cmd) {
        tail_barrier(d);
        return st;
    }
    if (d->open < 0) return st;
    qp_vk_slot *s = &d->ring[d->open];
    snprintf(s->last, sizeof s->last, "%s", what);
    if (++s->n_ops >= QP_VK_BATCH_OPS) {
        qp_status fs = qp_vk_submit(d, VK_NULL_HANDLE, 0);
        if (st == QP_OK) st = fs;
    }
    return st;
}

qp_status qp_vk_cmd_begin(qp_vk_device *d) {
    qp_vk_fns *f = d->fn;
    qp_status st = qp_vk_submit(d, VK_NULL_HANDLE, 0);
    if (st == QP_OK) st = qp_vk_wait(d, UINT64_MAX);
    if (st != QP_OK) return st;
    VkResult r = f->vkResetCommandBuffer(d->once, 0);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkResetCommandBuffer", "the device queue");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = f->vkBeginCommandBuffer(d->once, &bi);
    d->cmd = d->once;
    return r == VK_SUCCESS ? QP_OK : vk_fail(d, r, "vkBeginCommandBuffer", "the device queue");
}

qp_status qp_vk_cmd_submit(qp_vk_device *d, const char *what) {
    qp_vk_fns *f = d->fn;
    VkResult r = f->vkEndCommandBuffer(d->once);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkEndCommandBuffer", what);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &d->once};
    r = f->vkQueueSubmit(d->queue, 1, &si, d->once_fence);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkQueueSubmit", what);
    d->stats.submissions++;
    r = f->vkWaitForFences(d->dev, 1, &d->once_fence, VK_TRUE, UINT64_MAX);
    d->stats.host_waits++;
    VkResult r2 = f->vkResetFences(d->dev, 1, &d->once_fence);
    if (r != VK_SUCCESS) return vk_fail(d, r, "vkWaitForFences", what);
    if (r2 != VK_SUCCESS) return vk_fail(d, r2, "vkResetFences", what);
    return QP_OK;
}

qp_status qp_vk_timestamp_pool(qp_vk_device *d, uint32_t n, VkQueryPool *pool, uint64_t *mask) {
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = n};
    VkResult r = d->fn->vkCreateQueryPool(d->dev, &qi, NULL, pool);
    if (r != VK_SUCCESS)
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkCreateQueryPool failed: %s", qp_vk_result_str(r));
    *mask = d->timestamp_bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << d->timestamp_bits) - 1);
    return QP_OK;
}

qp_status qp_vk_timestamps(qp_vk_device *d, VkQueryPool pool, uint32_t n, uint64_t *t) {
    VkResult r = d->fn->vkGetQueryPoolResults(d->dev, pool, 0, n, n * sizeof *t, t, sizeof *t,
                                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS)
        return qp_vk_error(d, QP_ERR_DEVICE, NULL, "vkGetQueryPoolResults failed: %s", qp_vk_result_str(r));
    return QP_OK;
}

static qp_status copy_chunk(qp_vk_device *d, VkBuffer src, VkBuffer dst, size_t src_off, size_t dst_off, size_t n,
                            const char *what) {
    qp_status st = qp_vk_cmd_begin(d);
    if (st != QP_OK) return st;
    VkBufferCopy c = {.srcOffset = src_off, .dstOffset = dst_off, .size = n};
    /* (offsets already include the buffers' own offsets) */
    d->fn->vkCmdCopyBuffer(d->cmd, src, dst, 1, &c);
    return qp_vk_cmd_submit(d, what);
}

qp_status qp_vk_upload(qp_vk_device *d, qp_vk_buf *b, size_t off, const void *src, size_t bytes) {
    if (off > b->size || bytes > b->size - off)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "upload of %zu bytes at %zu overruns a %zu-byte buffer", bytes, off, b->size);
    const uint8_t *p = src;
    while (bytes) {
        size_t n = bytes < STAGING_BYTES ? bytes : STAGING_BYTES;
        memcpy(d->staging_map, p, n);
        qp_status st = copy_chunk(d, d->staging.buf, b->buf, 0, b->offset + off, n, "an upload");
        if (st != QP_OK) return st;
        p += n; off += n; bytes -= n;
    }
    return QP_OK;
}

qp_status qp_vk_download(qp_vk_device *d, qp_vk_buf *b, size_t off, void *dst, size_t bytes) {
    if (off > b->size || bytes > b->size - off)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "download of %zu bytes at %zu overruns a %zu-byte buffer", bytes, off, b->size);
    uint8_t *p = dst;
    while (bytes) {
        size_t n = bytes < STAGING_BYTES ? bytes : STAGING_BYTES;
        qp_status st = copy_chunk(d, b->buf, d->staging.buf, b->offset + off, 0, n, "a download");
        if (st != QP_OK) return st;
        memcpy(p, d->staging_map, n);
        p += n; off += n; bytes -= n;
    }
    return QP_OK;
}
