/* Vulkan backend internals: one header shared by the vk_*.c files
 * of libqport-vk.so. The plugin talks to the core only through qp_host. */
#ifndef QP_VK_INTERNAL_H
#define QP_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan_core.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "vk_shader_ids.h" /* generated: vk/gen_shader_table.py */

/* ---- vk_loader.c: libvulkan.so.1 through dlopen ------------------------ */
#define QP_VK_GLOBAL_FNS(X) \
    X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumerateInstanceVersion)

#define QP_VK_INSTANCE_FNS(X) \
    X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
    X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) \
    X(vkMapMemory) X(vkUnmapMemory) X(vkCreateCommandPool) X(vkDestroyCommandPool) \
    X(vkAllocateCommandBuffers) X(vkResetCommandBuffer) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) \
    X(vkCmdCopyBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) \
    X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) \
    X(vkWaitForFences) X(vkResetFences) X(vkCreateShaderModule) X(vkDestroyShaderModule) \
    X(vkCreatePipelineCache) X(vkDestroyPipelineCache) X(vkGetPipelineCacheData) \
    X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorSetLayout) \
    X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) \
    X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) \
    X(vkUpdateDescriptorSets) X(vkDeviceWaitIdle) \
    X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp) X(vkGetQueryPoolResults) \
    X(vkGetFenceStatus) X(vkGetDeviceProcAddr)

/* Present only with VK_EXT_debug_utils (validation runs); push descriptors
 * are loaded per device (vkGetDeviceProcAddr). */
#define QP_VK_OPTIONAL_FNS(X) X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)

typedef struct qp_vk_fns {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define QP_VK_DECL(name) PFN_##name name;
    QP_VK_GLOBAL_FNS(QP_VK_DECL)
    QP_VK_INSTANCE_FNS(QP_VK_DECL)
    QP_VK_OPTIONAL_FNS(QP_VK_DECL)
#undef QP_VK_DECL
} qp_vk_fns;

/* Opens the loader; false with a reason when it is absent. */
bool qp_vk_load_library(qp_vk_fns *f, const char *name, char *why, size_t cap);
/* Instance-level entry points (false and the first missing name). */
bool qp_vk_load_instance(qp_vk_fns *f, VkInstance inst, char *why, size_t cap);
void qp_vk_unload(qp_vk_fns *f);
const char *qp_vk_result_str(VkResult r);

/* ---- objects ------------------------------------------------------------ */
typedef struct qp_vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem; /* VK_NULL_HANDLE for an application's buffer      */
    size_t size;       /* the size asked for                              */
    size_t alloc_size; /* the bound range (rounded up to 16 bytes)         */
    size_t offset;     /* in buf: an application's buffer may start inside */
    bool imported;
} qp_vk_buf;

/* Shaders embedded by vk_shader_table.c: enum qp_vk_shader (QP_VK_SH_*)
 * comes from vk_shader_ids.h, both generated from the one shader list in
 * vk/meson.build. */

typedef struct qp_vk_spirv {
    const char *name;
    const uint32_t *code; /* NULL: not built (no OpSDot support in glslang) */
    size_t bytes;
} qp_vk_spirv;
const qp_vk_spirv *qp_vk_spirv_get(qp_vk_shader id);

/* Specialization constants (ids match the shaders' constant_id). */
#define QP_VK_SPEC_WG 0
#define QP_VK_SPEC_MODE 1
/* ids 2-4 are retired (dtype, bias and epilogue are push constants) */
#define QP_VK_SPEC_GROUPED 5
#define QP_VK_SPEC_ROWS 6 /* GEMV rows per dispatch */
#define QP_VK_SPEC_WFMT 7 /* float-weight format of vk_g*_wf.comp (WF_*) */
#define QP_VK_SPEC_COUNT 8

/* Push constants: the PC block of shaders/vk_layout.glsl. */
typedef struct qp_vk_push {
    uint32_t M, K, Kw, N, n_base, n_count;
    float input_scale;
    int32_t input_zp;
    uint32_t m_base;
    uint32_t flags; /* QP_VK_PC_BF16 | QP_VK_PC_BIAS */
    uint32_t epi;
    uint32_t aux0, aux1;
    float aux2, aux3;
} qp_vk_push;
#define QP_VK_PC_BF16 1u
#define QP_VK_PC_BIAS 2u
#define QP_VK_PC_BIAS_AFTER 4u

#define QP_VK_BINDINGS 8
#define QP_VK_ST_WORDS 8 /* per-row statistics words (vk_layout.glsl) */
#define QP_VK_GEMV_MAX_M 16
#define QP_VK_GEMV_COLS 4 /* NC of vk_gemv_*.comp */
#define QP_VK_GEMV_WG 64

/* The per-device tuning row (vk_tuning.c): the GEMV work-group size and
 * the largest M the GEMV path takes (<= QP_VK_GEMV_MAX_M, the shaders'
 * MMAX). */
typedef struct qp_vk_tuning {
    uint32_t gemv_wg;
    int gemv_max_m;
    const char *row;
} qp_vk_tuning;
#define QP_VK_TILE 64

typedef struct qp_vk_pipe {
    qp_vk_shader shader;
    uint32_t spec[QP_VK_SPEC_COUNT];
    VkPipeline pipeline;
} qp_vk_pipe;

struct qp_vk_backend;

#define QP_VK_RING 8
#define QP_VK_BATCH_OPS 16
#define QP_VK_MAX_WAITS 8

typedef struct qp_vk_slot {
    VkCommandBuffer cmd;
    VkFence fence;
    bool pending;              /* submitted, fence not yet seen signalled    */
    uint64_t serial;
    uint32_t n_ops;
    char first[64], last[64];  /* what it holds, for device-fault messages   */
} qp_vk_slot;

typedef struct qp_vk_device {
    struct qp_vk_backend *be;
    int index;
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    uint32_t timestamp_bits; /* timestampValidBits of the queue family (0: none) */
    VkPhysicalDeviceProperties props;
    char driver_name[VK_MAX_DRIVER_NAME_SIZE];
    char driver_info[VK_MAX_DRIVER_INFO_SIZE];
    uint8_t uuid[VK_UUID_SIZE];
    bool has_uuid;
    /* capabilities */
    bool storage16, storage8, int8_arith, fp16_arith;
    bool int_dot;          /* shaderIntegerDotProduct (enabled at creation) */
    bool int_dot_accel;    /* integerDotProduct4x8BitPackedSignedAccelerated */
    bool fp64;             /* shaderFloat64 (enabled at creation): MoE silu */
    uint32_t subgroup_min, subgroup_max;
    uint64_t max_range;    /* maxStorageBufferRange: any one binding          */
    uint64_t weight_range; /* weight chunks: max_range or QPORT_VK_MAX_BINDING */
    uint64_t max_alloc;
    uint64_t local_bytes;
    uint32_t max_wg_invocations;
    qp_vk_tuning tuning;   /* vk_tuning.c's row for this device            */
    uint32_t mem_local, mem_host; /* memory type indices                     */
    bool host_coherent;
    /* submission: a ring of command buffers that enqueued work is recorded
     * into (one open at a time, submitted when QP_VK_BATCH_OPS ops are in it,
     * at flush, at an event or a synchronize), each with its fence; plus one
     * command buffer for the blocking copies and timed runs */
    VkCommandPool pool;
    VkCommandBuffer cmd;       /* the command buffer being recorded into    */
    qp_vk_slot ring[QP_VK_RING];
    int open;                  /* the ring slot being recorded, or -1        */
    int next;                  /* the slot to open next                      */
    uint64_t serial;           /* of the last submitted batch                */
    VkCommandBuffer once;
    VkFence once_fence;
    VkFence fence;             /* unused (kept for the one-shot path)        */
    /* the application's command buffer while an enqueue records into it */
    VkCommandBuffer ext_cmd;
    /* timeline waits of the open batch (qp_enqueue_sync) */
    VkSemaphore wait_sem[QP_VK_MAX_WAITS];
    uint64_t wait_val[QP_VK_MAX_WAITS];
    uint32_t n_waits;
    /* buffers replaced while work in flight may use them: freed at the next
     * synchronize */
    qp_vk_buf *retired;
    size_t n_retired, cap_retired;
    qp_device_stats stats;
    bool imported;             /* the application's VkDevice and VkQueue     */
    bool timeline;             /* timelineSemaphore enabled                  */
    qp_vk_fns *fn;             /* the backend's, or the application's loader */
    PFN_vkCmdPushDescriptorSetKHR push_set; /* vkGetDeviceProcAddr        */
    qp_vk_buf staging;
    void *staging_map;
    /* forward scratch: quantized activations and row statistics */
    qp_vk_buf xq, st, dummy;
    qp_vk_buf inplace;         /* the source copy of in-place rotations / KV */
    /* pipelines */
    VkPipelineCache cache;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkShaderModule modules[QP_VK_SH_COUNT];
    qp_vk_pipe *pipes;
    size_t n_pipes, cap_pipes;
} qp_vk_device;

typedef struct qp_vk_backend {
    const qp_host *host;
    qp_vk_fns fn;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    bool validation;
    unsigned validation_messages; /* WARNING + ERROR seen                   */
    int n_devices;
    qp_vk_device **devices;
    int n_imported;            /* indices of imported devices              */
} qp_vk_backend;

#define QP_VK_ERR(d, st, ...) ((d)->be->host->error((d)->be->host->ctx, (st), __VA_ARGS__))
/* An error of device d: "vulkan:<i>: [layer '<layer>': ]" and the message */
qp_status qp_vk_error(const qp_vk_device *d, qp_status st, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define QP_VK_LOG(be, lvl, ...) ((be)->host->log((be)->host->ctx, (lvl), __VA_ARGS__))

/* The MX activation qdq of vk_act_qdq.comp (linear and MoE layers): aux0
 * the element code, aux1 mbits | emax << 8; false (nothing set) for an
 * element format, mbits or emax the shader does not take. */
bool qp_vk_mx_qdq(qp_dtype elem, int mbits, int emax, uint32_t *aux0, uint32_t *aux1);

/* Scheme names for messages (the plugin does not link libqport). */
const char *qp_vk_scheme_name(qp_scheme_kind k);

/* ---- vk_device.c ---------------------------------------------------------- */
qp_status qp_vk_instance_create(qp_vk_backend *be);
void qp_vk_instance_destroy(qp_vk_backend *be);
/* Creates the logical device for a physical one; NULL (logged) when the
 * device lacks what the shaders need. */
qp_vk_device *qp_vk_device_create(qp_vk_backend *be, VkPhysicalDevice phys, int index);
/* A device over the application's objects (qp_device_import). */
qp_status qp_vk_device_adopt(qp_vk_backend *be, const qp_device_import_desc *desc, qp_vk_device **out);
void qp_vk_device_destroy(qp_vk_device *d);
/* the ops of api/backend.h (QP_BACKEND_GPU_OPS), as qp_vk_<op> */
QP_BACKEND_OPS_DECLARE(qp_vk)

/* ---- vk_memory.c ----------------------------------------------------------- */
qp_status qp_vk_buf_create(qp_vk_device *d, size_t bytes, bool host_visible, const char *what, qp_vk_buf *out);
void qp_vk_buf_destroy(qp_vk_device *d, qp_vk_buf *b);
qp_status qp_vk_upload(qp_vk_device *d, qp_vk_buf *b, size_t off, const void *src, size_t bytes);
qp_status qp_vk_download(qp_vk_device *d, qp_vk_buf *b, size_t off, void *dst, size_t bytes);
/* Grows a scratch buffer to at least `bytes`. */
qp_status qp_vk_buf_reserve(qp_vk_device *d, qp_vk_buf *b, size_t bytes, const char *what);
/* Room for item n of a host array of `elem`-byte items and capacity *cap:
 * once n reaches it, *cap doubles (the first time to `first`). Returns the
 * array, moved or not; NULL out of host memory (the old array kept). */
void *qp_vk_grow(void *items, size_t n, size_t *cap, size_t elem, size_t first);
/* The blocking path (uploads, downloads, timed runs): waits for all
 * enqueued work, then one command buffer: begin, then submit and wait. */
qp_status qp_vk_cmd_begin(qp_vk_device *d);
qp_status qp_vk_cmd_submit(qp_vk_device *d, const char *what);
/* The timed runs' queries: a timestamp pool of n queries with *mask the
 * valid bits of a timestamp, and the n timestamps of a submitted run. */
qp_status qp_vk_timestamp_pool(qp_vk_device *d, uint32_t n, VkQueryPool *pool, uint64_t *mask);
qp_status qp_vk_timestamps(qp_vk_device *d, VkQueryPool pool, uint32_t n, uint64_t *t);
/* The enqueue path: d->cmd is the open batch (or the application's command
 * buffer) after rec_begin; rec_end counts the op and submits a full batch.
 * `what` names the op in device-fault messages. */
qp_status qp_vk_rec_begin(qp_vk_device *d, const char *what);
qp_status qp_vk_rec_end(qp_vk_device *d, const char *what, qp_status st);
/* Submits the open batch (and pending semaphore waits; `signal` may be
 * VK_NULL_HANDLE) without waiting. */
qp_status qp_vk_submit(qp_vk_device *d, VkSemaphore signal, uint64_t signal_value);
/* Waits for every submitted batch with serial <= upto (UINT64_MAX: all), in
 * one wait; frees the retired buffers when all are done. */
qp_status qp_vk_wait(qp_vk_device *d, uint64_t upto);
/* Frees `b` once the work in flight no longer uses it (now when idle). */
qp_status qp_vk_buf_retire(qp_vk_device *d, qp_vk_buf *b);
bool qp_vk_busy(const qp_vk_device *d);
/* Submits the open batch and waits for everything (before freeing). */
qp_status qp_vk_idle(qp_vk_device *d);
qp_status qp_vk_submission_init(qp_vk_device *d);
void qp_vk_submission_destroy(qp_vk_device *d);

/* ---- vk_pipeline.c ------------------------------------------------------------ */
qp_status qp_vk_pipelines_init(qp_vk_device *d);
void qp_vk_pipelines_destroy(qp_vk_device *d);
qp_status qp_vk_pipeline_get(qp_vk_device *d, qp_vk_shader sh, const uint32_t spec[QP_VK_SPEC_COUNT],
                             VkPipeline *out);

/* ---- vk_linear.c ---------------------------------------------------------------- */
/* Pushes the 8 bindings (NULL: the dummy buffer) into d->cmd
 * (VK_KHR_push_descriptor: nothing shared with work in flight). */
void qp_vk_push_set(qp_vk_device *d, const qp_vk_buf *const bufs[QP_VK_BINDINGS]);
/* compute -> compute memory barrier on d->cmd */
void qp_vk_barrier(qp_vk_device *d);

/* ---- vk_ops.c: rotation, fp8 KV cache, copies ---------------------------------- */

/* ---- vk_moe.c: fused MoE ----------------------------------------------------------- */

/* The tuning row of a device, QPORT_VK_GEMV_* applied. */
void qp_vk_tuning_pick(const qp_host *h, const VkPhysicalDeviceProperties *p, qp_vk_tuning *out);
#endif
