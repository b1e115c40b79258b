/* Embedding qport in a Vulkan engine: the engine owns the instance, device,
 * queue and memory; qport adopts them (qp_device_import, qp_buffer_import)
 * and enqueues a decode step -- 32 quantized layers and one MoE block --
 * with one wait for the whole step. Also: the step recorded into the
 * engine's own command buffer, and gated behind / signalling the engine's
 * timeline semaphore. Checked bit for bit against the cpu reference and
 * against a qport-created Vulkan device. The engine's vkGetInstanceProcAddr
 * is wrapped to count the waits and allocations qport makes through it.
 *   cc embed_vulkan.c $(pkg-config --cflags --libs qport) -lvulkan */
#include <vulkan/vulkan.h>

#include "embed_common.h"

static PFN_vkGetInstanceProcAddr real_gipa;
static PFN_vkWaitForFences real_wait;
static PFN_vkQueueWaitIdle real_qidle;
static PFN_vkDeviceWaitIdle real_didle;
static PFN_vkAllocateMemory real_alloc;
static PFN_vkQueueSubmit real_submit;
static unsigned n_waits, n_allocs, n_submits;

static VKAPI_ATTR VkResult VKAPI_CALL count_wait(VkDevice d, uint32_t n, const VkFence *f, VkBool32 all, uint64_t t) {
    n_waits++;
    return real_wait(d, n, f, all, t);
}
static VKAPI_ATTR VkResult VKAPI_CALL count_qidle(VkQueue q) { n_waits++; return real_qidle(q); }
static VKAPI_ATTR VkResult VKAPI_CALL count_didle(VkDevice d) { n_waits++; return real_didle(d); }
static VKAPI_ATTR VkResult VKAPI_CALL count_alloc(VkDevice d, const VkMemoryAllocateInfo *i,
                                                   const VkAllocationCallbacks *a, VkDeviceMemory *m) {
    n_allocs++;
    return real_alloc(d, i, a, m);
}
static VKAPI_ATTR VkResult VKAPI_CALL count_submit(VkQueue q, uint32_t n, const VkSubmitInfo *s, VkFence f) {
    n_submits++;
    return real_submit(q, n, s, f);
}
/* The dispatch the engine hands qport: its loader, with five calls counted. */
static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL counting_gipa(VkInstance inst, const char *name) {
    PFN_vkVoidFunction f = real_gipa(inst, name);
    if (!f) return f;
    if (!strcmp(name, "vkWaitForFences")) { real_wait = (PFN_vkWaitForFences)f; return (PFN_vkVoidFunction)count_wait; }
    if (!strcmp(name, "vkQueueWaitIdle")) { real_qidle = (PFN_vkQueueWaitIdle)f; return (PFN_vkVoidFunction)count_qidle; }
    if (!strcmp(name, "vkDeviceWaitIdle")) { real_didle = (PFN_vkDeviceWaitIdle)f; return (PFN_vkVoidFunction)count_didle; }
    if (!strcmp(name, "vkAllocateMemory")) { real_alloc = (PFN_vkAllocateMemory)f; return (PFN_vkVoidFunction)count_alloc; }
    if (!strcmp(name, "vkQueueSubmit")) { real_submit = (PFN_vkQueueSubmit)f; return (PFN_vkVoidFunction)count_submit; }
    return f;
}

typedef struct app {
    VkInstance inst;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t family;
    VkBuffer buf[4];        /* a, b, out, and ids + weights in one buffer */
    VkDeviceMemory mem[4];
    VkDeviceSize align;
} app;

#define VK(call) do { VkResult r_ = (call); if (r_ != VK_SUCCESS) { fprintf(stderr, "%s: %d\n", #call, r_); return 1; } } while (0)

static int make_buffer(app *a, int i, VkDeviceSize bytes) {
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = bytes,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                       VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VK(vkCreateBuffer(a->dev, &bci, NULL, &a->buf[i]));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(a->dev, a->buf[i], &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(a->phys, &mp);
    uint32_t type = UINT32_MAX;
    for (uint32_t t = 0; t < mp.memoryTypeCount && type == UINT32_MAX; t++)
        if ((req.memoryTypeBits & (1u << t)) && (mp.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
            type = t;
    if (type == UINT32_MAX) return 1;
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                .memoryTypeIndex = type};
    VK(vkAllocateMemory(a->dev, &mai, NULL, &a->mem[i]));
    VK(vkBindBufferMemory(a->dev, a->buf[i], a->mem[i], 0));
    return 0;
}

static int app_create(app *a) {
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "embed_vulkan",
                            .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &ai};
    VK(vkCreateInstance(&ici, NULL, &a->inst));
    uint32_t n = 1;
    VkResult r = vkEnumeratePhysicalDevices(a->inst, &n, &a->phys);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || !n) return fprintf(stderr, "no Vulkan device\n"), 1;
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(a->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    if (nq > 16) nq = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(a->phys, &nq, qf);
    a->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && a->family == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) a->family = i;
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    vkGetPhysicalDeviceFeatures2(a->phys, &have);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(a->phys, &props);
    a->align = props.limits.minStorageBufferOffsetAlignment;
    return 0;
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    emb_model m;
    static uint16_t ref[EMB_M * EMB_H], got[EMB_M * EMB_H], owned[EMB_M * EMB_H];
    if (emb_model_build(&m, ctx) || emb_reference(&m, ctx, ref)) return 1;

    /* the engine's Vulkan objects, with what qport needs enabled */
    app a = {0};
    if (app_create(&a)) return 1;
    VkPhysicalDeviceFeatures2 have = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    vkGetPhysicalDeviceFeatures2(a.phys, &have);
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .timelineSemaphore = VK_TRUE};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12, .storageBuffer16BitAccess = VK_TRUE};
    /* fp64 makes the MoE block's silu exact (qport rounds it once from a double) */
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    feats.features.shaderFloat64 = have.features.shaderFloat64;
    const char *exts[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = a.family,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &feats,
                              .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci, .enabledExtensionCount = 1,
                              .ppEnabledExtensionNames = exts};
    VK(vkCreateDevice(a.phys, &dci, NULL, &a.dev));
    vkGetDeviceQueue(a.dev, a.family, 0, &a.queue);
    size_t xb = sizeof m.x, ib = sizeof m.ids;
    VkDeviceSize off_w = (ib + a.align - 1) / a.align * a.align; /* weights after the ids, aligned */
    if (make_buffer(&a, 0, xb) || make_buffer(&a, 1, xb) || make_buffer(&a, 2, xb) || make_buffer(&a, 3, off_w + ib))
        return 1;

    /* adopt them: the engine's loader (wrapped to count), device, queue */
    real_gipa = vkGetInstanceProcAddr;
    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    id.api = QP_NATIVE_VULKAN;
    id.vk_instance = a.inst;
    id.vk_physical_device = a.phys;
    id.vk_device = a.dev;
    id.vk_queue_family = a.family;
    id.vk_queue = a.queue;
    id.vk_get_instance_proc_addr = (void *)counting_gipa;
    id.vk_enabled_features = &feats;
    id.vk_enabled_extensions = exts;
    id.vk_n_enabled_extensions = 1;
    qp_device *dev;
    if (qp_device_import(ctx, &id, &dev)) return emb_fail(ctx, "qp_device_import");
    qp_buffer *B[5];
    size_t offs[5] = {0, 0, 0, 0, off_w}, sizes[5] = {xb, xb, xb, ib, ib};
    int objs[5] = {0, 1, 2, 3, 3};
    for (int i = 0; i < 5; i++) {
        qp_buffer_import_desc bd;
        qp_buffer_import_desc_init(&bd);
        bd.vk_buffer = a.buf[objs[i]];
        bd.offset = offs[i];
        bd.size = sizes[i];
        if (qp_buffer_import(dev, &bd, &B[i])) return emb_fail(ctx, "qp_buffer_import");
    }
    emb_layers L;
    if (emb_layers_create(&m, dev, &L)) return 1;
    if (qp_buffer_upload(B[0], 0, m.x, xb) || qp_buffer_upload(B[3], 0, m.ids, ib) ||
        qp_buffer_upload(B[4], 0, m.rw, ib))
        return emb_fail(ctx, "upload");

    /* 1. the step enqueued, one wait at the end (a first step warms the
     * pipeline cache; the second is the one counted) */
    int rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        unsigned w0 = n_waits, a0 = n_allocs, s0 = n_submits;
        if (emb_step_enqueue(&m, &L, B[0], B[1], B[3], B[4], B[2], NULL)) return 1;
        unsigned w_enq = n_waits - w0;
        if (qp_device_synchronize(dev)) return emb_fail(ctx, "qp_device_synchronize");
        unsigned w_all = n_waits - w0, allocs = n_allocs - a0;
        printf("vulkan step %d: %d layers + 1 MoE block enqueued: %u host waits while enqueueing, %u in all, "
               "%u submissions, %u allocations\n", rep, EMB_LAYERS, w_enq, w_all, n_submits - s0, allocs);
        if (rep == 1 && (w_enq != 0 || w_all != 1 || allocs != 0)) {
            fprintf(stderr, "FAIL: expected 0 waits while enqueueing, 1 in all and no allocation\n");
            rc = 1;
        }
        /* the layers read x from B[0] and ping-pong B[0]/B[1]: put x back */
        if (qp_buffer_download(B[2], 0, got, xb) || qp_buffer_upload(B[0], 0, m.x, xb)) return emb_fail(ctx, "download");
        rc |= emb_compare("imported device, enqueued", got, ref);
    }

    /* 2. recorded into the engine's own command buffer, submitted by it */
    VkCommandPool pool;
    VkCommandBuffer cb;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = a.family};
    VK(vkCreateCommandPool(a.dev, &pci, NULL, &pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VK(vkAllocateCommandBuffers(a.dev, &cai, &cb));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VK(vkBeginCommandBuffer(cb, &bi));
    qp_enqueue_sync rec;
    qp_enqueue_sync_init(&rec);
    rec.vk_command_buffer = cb;
    qp_buffer *cur = B[0], *nxt = B[1];
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_enqueue(L.lin[l], cur, EMB_M, nxt, &rec)) return emb_fail(ctx, "record");
        qp_buffer *t = cur; cur = nxt; nxt = t;
    }
    if (qp_moe_enqueue(L.moe, cur, EMB_M, B[3], B[4], B[2], &rec)) return emb_fail(ctx, "record MoE");
    VK(vkEndCommandBuffer(cb));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    VK(vkCreateFence(a.dev, &fci, NULL, &fence));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
    qp_device_lock(dev); /* the queue is shared with qport: external synchronisation */
    VkResult vr = vkQueueSubmit(a.queue, 1, &si, fence);
    qp_device_unlock(dev);
    VK(vr);
    VK(vkWaitForFences(a.dev, 1, &fence, VK_TRUE, UINT64_MAX));
    if (qp_buffer_download(B[2], 0, got, xb) || qp_buffer_upload(B[0], 0, m.x, xb)) return emb_fail(ctx, "download");
    rc |= emb_compare("recorded into the engine's command buffer", got, ref);

    /* 3. gated behind the engine's timeline semaphore (value 1, signalled
     * from the host after the enqueue returned), signalling value 2 */
    VkSemaphoreTypeCreateInfo tci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &tci};
    VkSemaphore sem;
    VK(vkCreateSemaphore(a.dev, &sci, NULL, &sem));
    qp_enqueue_sync gate, sig;
    qp_enqueue_sync_init(&gate);
    gate.vk_wait_semaphore = sem;
    gate.vk_wait_value = 1;
    qp_enqueue_sync_init(&sig);
    sig.vk_signal_semaphore = sem;
    sig.vk_signal_value = 2;
    cur = B[0]; nxt = B[1];
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_enqueue(L.lin[l], cur, EMB_M, nxt, l == 0 ? &gate : NULL)) return emb_fail(ctx, "gated enqueue");
        qp_buffer *t = cur; cur = nxt; nxt = t;
    }
    if (qp_moe_enqueue(L.moe, cur, EMB_M, B[3], B[4], B[2], &sig)) return emb_fail(ctx, "signalling enqueue");
    uint64_t v = 0;
    VK(vkGetSemaphoreCounterValue(a.dev, sem, &v));
    printf("vulkan: after the gated enqueue the semaphore is at %llu (the step waits for 1)\n", (unsigned long long)v);
    if (v != 0) rc = 1;
    VkSemaphoreSignalInfo ssi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = sem, .value = 1};
    VK(vkSignalSemaphore(a.dev, &ssi));
    uint64_t want = 2;
    VkSemaphoreWaitInfo swi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                               .pSemaphores = &sem, .pValues = &want};
    VK(vkWaitSemaphores(a.dev, &swi, UINT64_MAX));
    if (qp_buffer_download(B[2], 0, got, xb)) return emb_fail(ctx, "download");
    rc |= emb_compare("gated by the engine's timeline semaphore", got, ref);

    /* 4. the same layers on a Vulkan device qport created itself */
    qp_device *own;
    if (qp_device_find(ctx, "vulkan", &own) == QP_OK) {
        emb_layers L2;
        if (emb_layers_create(&m, own, &L2)) return 1;
        static uint16_t s0[EMB_M * EMB_H], s1[EMB_M * EMB_H];
        memcpy(s0, m.x, xb);
        for (int l = 0; l < EMB_LAYERS; l++) {
            if (qp_linear_forward(L2.lin[l], s0, EMB_M, s1)) return emb_fail(ctx, "owned forward");
            memcpy(s0, s1, xb);
        }
        if (qp_moe_forward_topk(L2.moe, s0, EMB_M, m.ids, m.rw, owned)) return emb_fail(ctx, "owned MoE");
        rc |= emb_compare("qport-created Vulkan device", owned, got);
        emb_layers_destroy(&L2);
    }

    emb_layers_destroy(&L);
    for (int i = 0; i < 5; i++) qp_buffer_destroy(B[i]);
    qp_device_release(dev);
    vkDestroySemaphore(a.dev, sem, NULL);
    vkDestroyFence(a.dev, fence, NULL);
    vkDestroyCommandPool(a.dev, pool, NULL);
    for (int i = 0; i < 4; i++) { vkDestroyBuffer(a.dev, a.buf[i], NULL); vkFreeMemory(a.dev, a.mem[i], NULL); }
    vkDestroyDevice(a.dev, NULL);
    vkDestroyInstance(a.inst, NULL);
    emb_model_free(&m);
    qp_context_destroy(ctx);
    printf("%s\n", rc ? "embed_vulkan: FAILED" : "embed_vulkan: all results equal the cpu reference bit for bit");
    return rc;
}
