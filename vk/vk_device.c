/* Instance, physical devices and their feature/property chains, logical
 * device creation. Only what the shaders need is enabled:
 * storageBuffer16BitAccess always, shaderIntegerDotProduct when present
 * (the OpSDot shader variants declare it; without it enabled the validation
 * layer reports VUID-VkShaderModuleCreateInfo-pCode-01091; docs/backends.md). */
#include <dlfcn.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                       VkDebugUtilsMessageTypeFlagsEXT types,
                                                       const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    qp_vk_backend *be = user;
    if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)) {
        be->validation_messages++;
        QP_VK_LOG(be, (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? QP_LOG_ERROR : QP_LOG_WARN,
                  "vulkan validation: %s", data && data->pMessage ? data->pMessage : "(no message)");
    }
    return VK_FALSE;
}

static bool has_layer(qp_vk_backend *be, const char *name) {
    uint32_t n = 0;
    if (be->fn.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || !n) return false;
    VkLayerProperties *p = calloc(n, sizeof *p);
    bool found = false;
    if (p && be->fn.vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].layerName, name);
    free(p);
    return found;
}

static bool has_instance_ext(qp_vk_backend *be, const char *layer, const char *name) {
    uint32_t n = 0;
    if (be->fn.vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || !n) return false;
    VkExtensionProperties *p = calloc(n, sizeof *p);
    bool found = false;
    if (p && be->fn.vkEnumerateInstanceExtensionProperties(layer, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(p[i].extensionName, name);
    free(p);
    return found;
}

qp_status qp_vk_instance_create(qp_vk_backend *be) {
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (be->fn.vkEnumerateInstanceVersion) be->fn.vkEnumerateInstanceVersion(&loader_version);
    if (loader_version < VK_API_VERSION_1_2) {
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: the loader supports only Vulkan %u.%u; 1.2 is needed",
                  VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
        return QP_OK;
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "qport",
        .pEngineName = "qport",
        .apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    const char *layers[1], *exts[2];
    uint32_t n_layers = 0, n_exts = 0;
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = be,
    };
    bool debug_utils = false;
    if (be->host->validation) {
        if (has_layer(be, VALIDATION_LAYER)) {
            layers[n_layers++] = VALIDATION_LAYER;
            if (has_instance_ext(be, VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) ||
                has_instance_ext(be, NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
                exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
                debug_utils = true;
            }
            be->validation = true;
        } else {
            QP_VK_LOG(be, QP_LOG_WARN, "vulkan: validation requested but %s is not installed", VALIDATION_LAYER);
        }
    }
    /* QPORT_VK_SYNC_VALIDATION=1 (with validation on): the layer also checks
     * synchronization hazards (missing barriers). Opt-in: the layer's sync
     * state leaks at vkDestroyInstance, which fails LeakSanitizer runs. */
    VkValidationFeatureEnableEXT sync_enable = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT vfeat = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                     .enabledValidationFeatureCount = 1, .pEnabledValidationFeatures = &sync_enable};
    const char *sv = qp_host_setting(be->host, "QPORT_VK_SYNC_VALIDATION");
    bool sync_val = be->validation && sv && !strcmp(sv, "1") &&
                    has_instance_ext(be, VALIDATION_LAYER, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
    if (sync_val) exts[n_exts++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
    if (debug_utils) dbg.pNext = sync_val ? &vfeat : NULL;
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug_utils ? (const void *)&dbg : sync_val ? (const void *)&vfeat : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = be->fn.vkCreateInstance(&ci, NULL, &be->instance);
    if (r != VK_SUCCESS) {
        be->instance = VK_NULL_HANDLE;
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: vkCreateInstance failed: %s (no usable driver)", qp_vk_result_str(r));
        return QP_OK;
    }
    char why[160];
    if (!qp_vk_load_instance(&be->fn, be->instance, why, sizeof why)) {
        QP_VK_LOG(be, QP_LOG_INFO, "vulkan: %s", why);
        PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)be->fn.vkGetInstanceProcAddr(be->instance, "vkDestroyInstance");
        if (destroy) destroy(be->instance, NULL);
        be->instance = VK_NULL_HANDLE;
        return QP_OK;
    }
    if (debug_utils && be->fn.vkCreateDebugUtilsMessengerEXT) {
        dbg.pNext = NULL; /* it carried the validation features for vkCreateInstance */
        r = be->fn.vkCreateDebugUtilsMessengerEXT(be->instance, &dbg, NULL, &be->messenger);
        if (r != VK_SUCCESS) {
            be->messenger = VK_NULL_HANDLE;
            QP_VK_LOG(be, QP_LOG_WARN, "vulkan: vkCreateDebugUtilsMessengerEXT failed: %s", qp_vk_result_str(r));
        }
    }
    return QP_OK;
}

void qp_vk_instance_destroy(qp_vk_backend *be) {
    if (!be->instance) return;
    if (be->messenger && be->fn.vkDestroyDebugUtilsMessengerEXT)
        be->fn.vkDestroyDebugUtilsMessengerEXT(be->instance, be->messenger, NULL);
    be->fn.vkDestroyInstance(be->instance, NULL);
    be->instance = VK_NULL_HANDLE;
    be->messenger = VK_NULL_HANDLE;
}

static bool has_device_ext(qp_vk_fns *fn, VkPhysicalDevice p, const char *name) {
    uint32_t n = 0;
    if (fn->vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL) != VK_SUCCESS || !n) return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    bool found = false;
    if (e && fn->vkEnumerateDeviceExtensionProperties(p, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(e[i].extensionName, name);
    free(e);
    return found;
}

/* Debug knobs (docs/backends.md, "Vulkan backend"): a lower per-binding limit to test
 * weight splitting, and a device that pretends to lack integer dot product. */
static uint64_t env_u64(const qp_host *h, const char *name, uint64_t dflt) {
    const char *v = qp_host_setting(h, name);
    if (!v || !*v) return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    return *end || !x ? dflt : (uint64_t)x;
}

/* Sanitizer builds only: lavapipe keeps one process-lifetime allocation,
 * and the loader unloads the ICD at vkDestroyInstance, after which
 * LeakSanitizer cannot name the module (tests/lsan.supp lists
 * libvulkan_lvp.so). Marking the already-loaded ICD NODELETE keeps it
 * nameable; RTLD_NOLOAD never loads anything new. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QP_VK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define QP_VK_ASAN 1
#endif
static void pin_icd_for_lsan(VkDriverId id) {
#ifdef QP_VK_ASAN
    if (id == VK_DRIVER_ID_MESA_LLVMPIPE) (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
#else
    (void)id;
#endif
}

/* What an application enabled on the device it hands over (import): the
 * extension list and the VkPhysicalDeviceFeatures2 chain it created it with. */
typedef struct vk_enabled {
    bool push, dot_ext, f16storage, dot, fp64, timeline;
} vk_enabled;

static bool ext_listed(const qp_device_import_desc *imp, const char *name) {
    for (uint32_t i = 0; i < imp->vk_n_enabled_extensions; i++)
        if (imp->vk_enabled_extensions[i] && !strcmp(imp->vk_enabled_extensions[i], name)) return true;
    return false;
}

/* The features read from the application's chain: a structure type, the
 * offset of its VkBool32 member, the offset of the vk_enabled flag it sets
 * (a feature may come in a core or an extension structure, or both). */
#define QP_VK_FEATURE(type, st, member, flag) {type, offsetof(st, member), offsetof(vk_enabled, flag)}
static const struct {
    VkStructureType type;
    size_t member, flag;
} enabled_features[] = {
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, VkPhysicalDeviceFeatures2, features.shaderFloat64,
                  fp64),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, VkPhysicalDeviceVulkan11Features,
                  storageBuffer16BitAccess, f16storage),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, VkPhysicalDevice16BitStorageFeatures,
                  storageBuffer16BitAccess, f16storage),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, VkPhysicalDeviceVulkan12Features,
                  timelineSemaphore, timeline),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
                  VkPhysicalDeviceTimelineSemaphoreFeatures, timelineSemaphore, timeline),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, VkPhysicalDeviceVulkan13Features,
                  shaderIntegerDotProduct, dot),
    QP_VK_FEATURE(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
                  VkPhysicalDeviceShaderIntegerDotProductFeatures, shaderIntegerDotProduct, dot),
};
#undef QP_VK_FEATURE

static void read_enabled(const qp_device_import_desc *imp, vk_enabled *e) {
    memset(e, 0, sizeof *e);
    e->push = ext_listed(imp, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    e->dot_ext = ext_listed(imp, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    for (const VkBaseInStructure *p = imp->vk_enabled_features; p; p = p->pNext)
        for (size_t i = 0; i < sizeof enabled_features / sizeof enabled_features[0]; i++) {
            if (p->sType != enabled_features[i].type) continue;
            VkBool32 on;
            memcpy(&on, (const char *)p + enabled_features[i].member, sizeof on);
            *(bool *)((char *)e + enabled_features[i].flag) |= on != VK_FALSE;
        }
}

/* The device for a physical one: created by qport (imp NULL), or adopted
 * from the application (imp, whose objects are never destroyed). On
 * failure NULL, with the reason in why. */
static qp_vk_device *device_setup(qp_vk_backend *be, qp_vk_fns *f, VkPhysicalDevice phys, int index,
                                  const qp_device_import_desc *imp, char *why, size_t why_cap) {
    vk_enabled en_app;
    if (imp) read_enabled(imp, &en_app);
    VkPhysicalDeviceProperties props;
    f->vkGetPhysicalDeviceProperties(phys, &props);
    if (props.apiVersion < VK_API_VERSION_1_2) {
        snprintf(why, why_cap, "vulkan: device '%s' supports only Vulkan %u.%u; 1.2 is needed", props.deviceName,
                 VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion));
        return NULL;
    }
    uint32_t inst_version = VK_API_VERSION_1_2;
    if (f->vkEnumerateInstanceVersion) f->vkEnumerateInstanceVersion(&inst_version);
    bool core13 = props.apiVersion >= VK_API_VERSION_1_3 && inst_version >= VK_API_VERSION_1_3;
    bool dot_ext = !core13 && has_device_ext(f, phys, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    if (imp ? !en_app.push : !has_device_ext(f, phys, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME)) {
        snprintf(why, why_cap, "vulkan: device '%s' %s %s (qport records its bindings into the command buffer)",
                 props.deviceName, imp ? "was not created with the extension" : "lacks",
                 VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
        return NULL;
    }
    bool sgc_ext = !core13 && has_device_ext(f, phys, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);

    /* properties chain */
    VkPhysicalDeviceShaderIntegerDotProductProperties dotp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlProperties sgc = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sgp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, .pNext = &sgp};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES, .pNext = &drv};
    VkPhysicalDeviceIDProperties idp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &idp};
    if (core13 || sgc_ext) { sgc.pNext = p2.pNext; p2.pNext = &sgc; }
    if (core13 || dot_ext) { dotp.pNext = p2.pNext; p2.pNext = &dotp; }
    f->vkGetPhysicalDeviceProperties2(phys, &p2);

    /* features chain */
    VkPhysicalDeviceShaderIntegerDotProductFeatures dotf = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceVulkan12Features v12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features v11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &v12};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &v11};
    if (core13 || dot_ext) v12.pNext = &dotf;
    f->vkGetPhysicalDeviceFeatures2(phys, &f2);

    if (!v11.storageBuffer16BitAccess || (imp && !en_app.f16storage)) {
        snprintf(why, why_cap, "vulkan: device '%s' %s storageBuffer16BitAccess (fp16/bf16 activations)",
                 props.deviceName, v11.storageBuffer16BitAccess ? "was not created with the feature" : "lacks");
        return NULL;
    }
    if (imp) { /* what the application enabled, of what the device has */
        f2.features.shaderFloat64 = f2.features.shaderFloat64 && en_app.fp64;
        v12.timelineSemaphore = v12.timelineSemaphore && en_app.timeline;
        dotf.shaderIntegerDotProduct = dotf.shaderIntegerDotProduct && en_app.dot && (core13 || en_app.dot_ext);
    }
    uint32_t nq = 0;
    f->vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, NULL);
    VkQueueFamilyProperties *qf = calloc(nq ? nq : 1, sizeof *qf);
    if (!qf) return NULL;
    f->vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf);
    uint32_t qfam = UINT32_MAX, ts_bits = 0;
    if (imp) {
        if (imp->vk_queue_family < nq && (qf[imp->vk_queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT)) {
            qfam = imp->vk_queue_family;
            ts_bits = qf[qfam].timestampValidBits;
        }
    } else {
        for (uint32_t i = 0; i < nq && qfam == UINT32_MAX; i++)
            if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                qfam = i;
                ts_bits = qf[i].timestampValidBits;
            }
    }
    free(qf);
    if (qfam == UINT32_MAX) {
        if (imp)
            snprintf(why, why_cap, "vulkan: queue family %u of device '%s' %s", imp->vk_queue_family, props.deviceName,
                     imp->vk_queue_family < nq ? "has no compute capability" : "does not exist");
        else
            snprintf(why, why_cap, "vulkan: device '%s' has no compute queue", props.deviceName);
        return NULL;
    }

    qp_vk_device *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->be = be;
    d->fn = f;
    d->index = index;
    d->imported = imp != NULL;
    d->phys = phys;
    d->props = props;
    d->queue_family = qfam;
    d->timestamp_bits = ts_bits;
    pin_icd_for_lsan(drv.driverID);
    memcpy(d->driver_name, drv.driverName, sizeof d->driver_name);
    memcpy(d->driver_info, drv.driverInfo, sizeof d->driver_info);
    memcpy(d->uuid, idp.deviceUUID, VK_UUID_SIZE);
    d->has_uuid = true;
    d->storage16 = true;
    d->storage8 = v12.storageBuffer8BitAccess;
    d->int8_arith = v12.shaderInt8;
    d->fp16_arith = v12.shaderFloat16;
    d->fp64 = f2.features.shaderFloat64;
    d->int_dot = (core13 || dot_ext) && dotf.shaderIntegerDotProduct && !env_u64(be->host, "QPORT_VK_NO_INT_DOT", 0);
    d->int_dot_accel = d->int_dot && dotp.integerDotProduct4x8BitPackedSignedAccelerated;
    d->subgroup_min = (core13 || sgc_ext) ? sgc.minSubgroupSize : sgp.subgroupSize;
    d->subgroup_max = (core13 || sgc_ext) ? sgc.maxSubgroupSize : sgp.subgroupSize;
    d->max_range = props.limits.maxStorageBufferRange;
    uint64_t knob = env_u64(be->host, "QPORT_VK_MAX_BINDING", 0);
    d->weight_range = knob && knob < d->max_range ? knob & ~(uint64_t)15 : d->max_range;
    d->max_alloc = m3.maxMemoryAllocationSize;
    d->max_wg_invocations = props.limits.maxComputeWorkGroupInvocations;
    qp_vk_tuning_pick(be->host, &props, &d->tuning);

    VkPhysicalDeviceMemoryProperties mp;
    f->vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    d->mem_local = d->mem_host = UINT32_MAX;
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        VkMemoryPropertyFlags fl = mp.memoryTypes[i].propertyFlags;
        if (d->mem_local == UINT32_MAX && (fl & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) d->mem_local = i;
        if (d->mem_host == UINT32_MAX && (fl & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) &&
            (fl & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT))
            d->mem_host = i;
    }
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d->local_bytes += mp.memoryHeaps[i].size;
    if (d->mem_local == UINT32_MAX) d->mem_local = d->mem_host;
    if (d->mem_host == UINT32_MAX) {
        snprintf(why, why_cap, "vulkan: device '%s' has no host-visible coherent memory", props.deviceName);
        free(d);
        return NULL;
    }
    if (imp) {
        d->dev = (VkDevice)imp->vk_device;
        d->queue = (VkQueue)imp->vk_queue;
        d->timeline = v12.timelineSemaphore;
        goto adopted;
    }

    /* logical device: enable only what is used */
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = qfam,
                                   .queueCount = 1, .pQueuePriorities = &prio};
    VkPhysicalDeviceShaderIntegerDotProductFeatures en_dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, .shaderIntegerDotProduct = VK_TRUE};
    VkPhysicalDeviceVulkan12Features en12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                             .timelineSemaphore = v12.timelineSemaphore};
    VkPhysicalDeviceVulkan11Features en11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                             .storageBuffer16BitAccess = VK_TRUE, .pNext = &en12};
    if (d->int_dot) en12.pNext = &en_dot;
    d->timeline = v12.timelineSemaphore;
    /* fp64: the MoE silu's exp in double (ref_moe.c), so int8 MoE is exact */
    VkPhysicalDeviceFeatures2 en2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &en11};
    en2.features.shaderFloat64 = d->fp64 ? VK_TRUE : VK_FALSE;
    const char *dev_exts[2];
    uint32_t n_dev_exts = 0;
    dev_exts[n_dev_exts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    if (d->int_dot && dot_ext) dev_exts[n_dev_exts++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &en2,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_dev_exts,
        .ppEnabledExtensionNames = dev_exts,
    };
    VkResult r = f->vkCreateDevice(phys, &dci, NULL, &d->dev);
    if (r != VK_SUCCESS) {
        snprintf(why, why_cap, "vulkan: vkCreateDevice('%s') failed: %s", props.deviceName, qp_vk_result_str(r));
        free(d);
        return NULL;
    }
    f->vkGetDeviceQueue(d->dev, qfam, 0, &d->queue);
adopted:
    d->push_set = (PFN_vkCmdPushDescriptorSetKHR)f->vkGetDeviceProcAddr(d->dev, "vkCmdPushDescriptorSetKHR");
    if (!d->push_set) {
        snprintf(why, why_cap, "vulkan: device '%s': no vkCmdPushDescriptorSetKHR", props.deviceName);
        qp_vk_device_destroy(d);
        return NULL;
    }
    if (qp_vk_submission_init(d) != QP_OK || qp_vk_pipelines_init(d) != QP_OK) {
        snprintf(why, why_cap, "vulkan: device '%s': setup failed: %s", props.deviceName, "see the error");
        qp_vk_device_destroy(d);
        return NULL;
    }
    QP_VK_LOG(be, QP_LOG_DEBUG,
              "vulkan:%d '%s': int-dot %d (accelerated %d), subgroup %u..%u, max binding %" PRIu64 " bytes, weight chunks %"
              PRIu64 " bytes", index, props.deviceName, d->int_dot, d->int_dot_accel, d->subgroup_min, d->subgroup_max,
              d->max_range, d->weight_range);
    return d;
}

qp_vk_device *qp_vk_device_create(qp_vk_backend *be, VkPhysicalDevice phys, int index) {
    char why[512] = "";
    qp_vk_device *d = device_setup(be, &be->fn, phys, index, NULL, why, sizeof why);
    if (!d) QP_VK_LOG(be, QP_LOG_INFO, "%s", why);
    return d;
}

qp_status qp_vk_device_adopt(qp_vk_backend *be, const qp_device_import_desc *imp, qp_vk_device **out) {
    const qp_host *h = be->host;
    *out = NULL;
    if (!imp->vk_instance || !imp->vk_physical_device || !imp->vk_device || !imp->vk_queue ||
        !imp->vk_get_instance_proc_addr)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "vulkan: qp_device_import needs vk_instance, "
                        "vk_physical_device, vk_device, vk_queue and vk_get_instance_proc_addr");
    if (!imp->vk_enabled_features)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "vulkan: qp_device_import needs vk_enabled_features, the "
                        "VkPhysicalDeviceFeatures2 chain the device was created with (qport checks what it needs)");
    if (imp->vk_n_enabled_extensions && !imp->vk_enabled_extensions)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "vulkan: vk_n_enabled_extensions %u with NULL names",
                        imp->vk_n_enabled_extensions);
    qp_vk_fns *f = calloc(1, sizeof *f);
    if (!f) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    /* the application's loader and dispatch, never dlclosed by qport */
    memcpy(&f->vkGetInstanceProcAddr, &imp->vk_get_instance_proc_addr, sizeof f->vkGetInstanceProcAddr);
#define QP_VK_LOAD_GLOBAL(name) f->name = (PFN_##name)f->vkGetInstanceProcAddr(NULL, #name);
    QP_VK_GLOBAL_FNS(QP_VK_LOAD_GLOBAL)
#undef QP_VK_LOAD_GLOBAL
    char why[512] = "";
    if (!qp_vk_load_instance(f, (VkInstance)imp->vk_instance, why, sizeof why)) {
        free(f);
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "vulkan: qp_device_import: %s", why);
    }
    int index = be->n_devices + be->n_imported++; /* unique in messages */
    qp_vk_device *d = device_setup(be, f, (VkPhysicalDevice)imp->vk_physical_device, index, imp, why, sizeof why);
    if (!d) {
        free(f);
        return h->error(h->ctx, QP_ERR_UNSUPPORTED, "%s", why);
    }
    *out = d;
    return QP_OK;
}

void qp_vk_device_destroy(qp_vk_device *d) {
    if (!d) return;
    if (d->dev) {
        /* an imported device: only qport's own work is waited for (the
         * application may be using its queue) */
        if (d->imported) (void)qp_vk_wait(d, UINT64_MAX);
        else d->fn->vkDeviceWaitIdle(d->dev);
        qp_vk_buf_destroy(d, &d->xq);
        qp_vk_buf_destroy(d, &d->st);
        qp_vk_buf_destroy(d, &d->inplace);
        qp_vk_buf_destroy(d, &d->dummy);
        qp_vk_pipelines_destroy(d);
        qp_vk_submission_destroy(d);
        if (!d->imported) d->fn->vkDestroyDevice(d->dev, NULL);
    }
    if (d->imported) free(d->fn);
    free(d);
}

static const char *vendor_name(uint32_t id) {
    switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x10005: return "Mesa";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    default: return NULL;
    }
}

qp_status qp_vk_device_info(void *dev, qp_device_info *out) {
    const qp_vk_device *d = dev;
    snprintf(out->backend, sizeof out->backend, "vulkan");
    out->index = d->index;
    snprintf(out->name, sizeof out->name, "%.127s", d->props.deviceName);
    const char *v = vendor_name(d->props.vendorID);
    if (v) snprintf(out->vendor, sizeof out->vendor, "%s", v);
    else snprintf(out->vendor, sizeof out->vendor, "0x%04x", d->props.vendorID);
    snprintf(out->driver, sizeof out->driver, "%.60s %.60s", d->driver_name, d->driver_info);
    snprintf(out->api_version, sizeof out->api_version, "%u.%u.%u", VK_API_VERSION_MAJOR(d->props.apiVersion),
             VK_API_VERSION_MINOR(d->props.apiVersion), VK_API_VERSION_PATCH(d->props.apiVersion));
    switch (d->props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: out->kind = QP_DEVICE_DISCRETE_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: out->kind = QP_DEVICE_INTEGRATED_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: out->kind = QP_DEVICE_CPU_CLASS; break;
    default: out->kind = QP_DEVICE_VIRTUAL_GPU; break;
    }
    out->memory_bytes = d->local_bytes;
    memcpy(out->uuid, d->uuid, sizeof out->uuid);
    out->has_uuid = d->has_uuid;
    out->cuda_cc = -1;
    out->same_as[0] = '\0';
    qp_device_caps *c = &out->caps;
    c->int8_storage = d->storage8;
    c->int8_arith = d->int8_arith;
    c->fp16_arith = d->fp16_arith;
    c->bf16 = 1; /* bf16 <-> fp32 by integer ops in the shaders */
    c->int_dot = d->int_dot;
    c->int_dot_accelerated = d->int_dot_accel;
    c->tensor_core_int8 = -1;
    c->tensor_core_fp8 = -1;
    c->subgroup_min = (int)d->subgroup_min;
    c->subgroup_max = (int)d->subgroup_max;
    c->shared_mem_bytes = d->props.limits.maxComputeSharedMemorySize;
    c->max_buffer_bytes = (int64_t)d->max_range;
    c->max_alloc_bytes = (int64_t)d->max_alloc;
    return QP_OK;
}
