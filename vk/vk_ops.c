/* Optional ops: Quark's online input rotation, the fp8 KV cache,
 * device-to-device copies and their timing. Each op records one dispatch
 * (or copy) into the device's open batch with pushed descriptors, as
 * linear_forward does; only the timed copies submit and wait. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

typedef struct qp_vk_rot {
    qp_vk_buf h; /* [r][r] int32 +-1 */
    int r;
    float c;
} qp_vk_rot;

/* Grid-stride dispatch of `sh` over `items` invocations with bufs bound,
 * recorded into the device's open batch (enqueued, not waited for). */
static qp_status run_op(qp_vk_device *d, qp_vk_shader sh, uint32_t mode, const qp_vk_push *pc,
                        const qp_vk_buf *const bufs[QP_VK_BINDINGS], size_t items, const char *what) {
    qp_vk_fns *f = d->fn;
    uint32_t spec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64, [QP_VK_SPEC_MODE] = mode};
    VkPipeline p;
    qp_status st = qp_vk_pipeline_get(d, sh, spec, &p);
    if (st != QP_OK) return st;
    if ((st = qp_vk_rec_begin(d, what)) != QP_OK) return st;
    size_t groups = (items + 63) / 64;
    uint32_t gmax = d->props.limits.maxComputeWorkGroupCount[0];
    if (gmax > 65535) gmax = 65535;
    if (groups > gmax) groups = gmax;
    if (groups == 0) groups = 1;
    f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    qp_vk_push_set(d, bufs);
    f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *pc, pc);
    f->vkCmdDispatch(d->cmd, (uint32_t)groups, 1, 1);
    qp_vk_barrier(d);
    return qp_vk_rec_end(d, what, QP_OK);
}

static bool act_dt_ok(qp_dtype dt) { return dt == QP_DTYPE_F16 || dt == QP_DTYPE_BF16; }

/* In-place ops (source and destination one buffer): every output reads
 * inputs other invocations overwrite, so the op reads a device copy of the
 * source's first `bytes` instead (the device's in-place scratch, enqueued
 * before the op). */
static qp_status source_copy(qp_vk_device *d, qp_vk_buf *src, size_t bytes, qp_vk_buf **tmp, const char *what) {
    char w[96];
    snprintf(w, sizeof w, "the in-place copy of %s", what);
    qp_status st = qp_vk_buf_reserve(d, &d->inplace, bytes, w);
    if (st != QP_OK) return st;
    *tmp = &d->inplace;
    return qp_vk_buffer_copy(d, src, 0, &d->inplace, 0, bytes);
}

qp_status qp_vk_rotation_prepare(void *dev, const int8_t *H, int r, float c, void **out) {
    qp_vk_device *d = dev;
    *out = NULL;
    if (!H || r <= 0 || r > 65536)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "rotation_prepare: NULL matrix or size %d", r);
    size_t rr = (size_t)r * (size_t)r;
    int32_t *h = malloc(sizeof(int32_t) * rr);
    qp_vk_rot *rot = calloc(1, sizeof *rot);
    if (!h || !rot) {
        free(h); free(rot);
        return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "rotation_prepare: out of host memory");
    }
    for (size_t i = 0; i < rr; i++) {
        if (H[i] != 1 && H[i] != -1) {
            free(h); free(rot);
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "rotation entries must be +1 or -1 (entry %zu is %d)", i, H[i]);
        }
        h[i] = H[i];
    }
    rot->r = r;
    rot->c = c;
    qp_status st = qp_vk_buf_create(d, sizeof(int32_t) * rr, false, "the input rotation", &rot->h);
    if (st == QP_OK) st = qp_vk_upload(d, &rot->h, 0, h, sizeof(int32_t) * rr);
    free(h);
    if (st != QP_OK) {
        qp_vk_buf_destroy(d, &rot->h);
        free(rot);
        return st;
    }
    *out = rot;
    return QP_OK;
}

void qp_vk_rotation_destroy(void *dev, void *rot_) {
    qp_vk_rot *rot = rot_;
    if (!rot) return;
    if (qp_vk_busy(dev)) (void)qp_vk_idle(dev); /* work in flight may use it */
    qp_vk_buf_destroy(dev, &rot->h);
    free(rot);
}

qp_status qp_vk_rotation_forward(void *dev, void *rot_, qp_dtype dt, void *x_, int M, int K, void *y_) {
    qp_vk_device *d = dev;
    qp_vk_rot *rot = rot_;
    qp_vk_buf *x = x_, *y = y_;
    if (!rot || !x || !y || M < 0 || K <= 0)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "rotation_forward: NULL argument or bad shape");
    if (!act_dt_ok(dt))
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "rotation_forward: activations must be fp16 or bf16");
    if (K % rot->r)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "rotation_forward: K = %d is not a multiple of the "
                         "rotation size %d", K, rot->r);
    size_t total = (size_t)M * (size_t)K;
    if (total == 0) return QP_OK;
    if (x->size < 2 * total || y->size < 2 * total)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "rotation_forward: buffers too small for %d x %d", M, K);
    if (total > UINT32_MAX / 2 || 2 * total > d->max_range)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "rotation_forward: %d x %d exceeds one binding", M, K);
    qp_vk_push pc = {.M = (uint32_t)M, .K = (uint32_t)K, .N = (uint32_t)rot->r, .input_scale = rot->c, .input_zp = 0,
                     .flags = dt == QP_DTYPE_BF16 ? QP_VK_PC_BF16 : 0u};
    qp_vk_buf *tmp = x;
    qp_status st = QP_OK;
    if (x == y && (st = source_copy(d, x, 2 * total, &tmp, "the rotation input")) != QP_OK) return st;
    const qp_vk_buf *b[QP_VK_BINDINGS] = {tmp, &rot->h, NULL, y, NULL, NULL, NULL, NULL};
    return run_op(d, QP_VK_SH_ROT, 0, &pc, b, total, "the input rotation");
}

static qp_status kv_run(qp_vk_device *d, uint32_t mode, qp_dtype dt, qp_vk_buf *src, size_t n, float scale,
                        qp_vk_buf *dst) {
    const char *op = mode ? "kv_dequantize" : "kv_quantize";
    if (!src || !dst)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s: NULL buffer", op);
    if (!act_dt_ok(dt))
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "%s: the unquantized side must be fp16 or bf16", op);
    if (!(scale > 0.0f) || isinf(scale))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s: the KV-cache scale must be finite and > 0 (got %g)", op, (double)scale);
    if (n == 0) return QP_OK;
    size_t sb = mode ? n : 2 * n, db = mode ? 2 * n : n;
    if (src->size < sb || dst->size < db)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "%s: buffers too small for %zu elements (src %zu < %zu or "
                         "dst %zu < %zu bytes)", op, n, src->size, sb, dst->size, db);
    if (n > UINT32_MAX - 4 || 2 * n > d->max_range)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "%s: %zu elements exceed one binding", op, n);
    qp_vk_push pc = {.M = (uint32_t)n, .input_scale = scale, .flags = dt == QP_DTYPE_BF16 ? QP_VK_PC_BF16 : 0u};
    qp_vk_buf *s = src;
    qp_status st = QP_OK;
    if (src == dst && (st = source_copy(d, src, sb, &s, op)) != QP_OK) return st;
    const qp_vk_buf *b[QP_VK_BINDINGS] = {s, dst, s, dst, NULL, NULL, NULL, NULL};
    return run_op(d, QP_VK_SH_KV, mode, &pc, b, mode ? n : (n + 3) / 4, op);
}

qp_status qp_vk_kv_quantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return kv_run(dev, 0, dt, src, n, scale, dst);
}

qp_status qp_vk_kv_dequantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return kv_run(dev, 1, dt, src, n, scale, dst);
}

static bool range_ok(const qp_vk_buf *b, size_t off, size_t bytes) { return off <= b->size && bytes <= b->size - off; }

qp_status qp_vk_buffer_copy(void *dev, void *src_, size_t src_off, void *dst_, size_t dst_off, size_t bytes) {
    qp_vk_device *d = dev;
    qp_vk_buf *src = src_, *dst = dst_;
    if (!src || !dst) return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy: NULL buffer");
    if (!range_ok(src, src_off, bytes) || !range_ok(dst, dst_off, bytes))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy of %zu bytes overruns a buffer (src %zu at "
                         "%zu, dst %zu at %zu)", bytes, src->size, src_off, dst->size, dst_off);
    if (src == dst && src_off < dst_off + bytes && dst_off < src_off + bytes)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy: overlapping ranges of one buffer");
    if (bytes == 0) return QP_OK;
    qp_status st = qp_vk_rec_begin(d, "a device-to-device copy");
    if (st != QP_OK) return st;
    VkBufferCopy c = {.srcOffset = src->offset + src_off, .dstOffset = dst->offset + dst_off, .size = bytes};
    d->fn->vkCmdCopyBuffer(d->cmd, src->buf, dst->buf, 1, &c);
    /* the copy's writes -> the compute and transfer commands after it */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    d->fn->vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL,
                                0, NULL);
    return qp_vk_rec_end(d, "a device-to-device copy", QP_OK);
}

qp_status qp_vk_buffer_copy_time(void *dev, void *src_, void *dst_, size_t bytes, int reps, double *ms) {
    qp_vk_device *d = dev;
    qp_vk_buf *src = src_, *dst = dst_;
    qp_vk_fns *f = d->fn;
    if (!src || !dst || reps <= 0 || !ms || bytes == 0 || src == dst)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy_time: NULL or equal buffers, no bytes or "
                         "reps <= 0");
    if (!range_ok(src, 0, bytes) || !range_ok(dst, 0, bytes))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "buffer_copy_time: %zu bytes overrun a buffer",
                         bytes);
    if (!d->timestamp_bits || d->props.limits.timestampPeriod <= 0.0f)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d '%s': the queue has no timestamps (timestampValidBits 0)",
                         d->index, d->props.deviceName);
    VkQueryPool pool;
    uint64_t mask;
    qp_status st = qp_vk_timestamp_pool(d, 2, &pool, &mask);
    if (st != QP_OK) return st;
    for (int i = 0; i < reps && st == QP_OK; i++) {
        if ((st = qp_vk_cmd_begin(d)) != QP_OK) break;
        f->vkCmdResetQueryPool(d->cmd, pool, 0, 2);
        f->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0);
        VkBufferCopy c = {.srcOffset = src->offset, .dstOffset = dst->offset, .size = bytes};
        f->vkCmdCopyBuffer(d->cmd, src->buf, dst->buf, 1, &c);
        f->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, pool, 1);
        if ((st = qp_vk_cmd_submit(d, "a timed device-to-device copy")) != QP_OK) break;
        uint64_t t[2];
        if ((st = qp_vk_timestamps(d, pool, 2, t)) != QP_OK) break;
        ms[i] = (double)((t[1] - t[0]) & mask) * d->props.limits.timestampPeriod * 1e-6;
    }
    f->vkDestroyQueryPool(d->dev, pool, NULL);
    return st;
}
