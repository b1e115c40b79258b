/* Opens the Vulkan loader with dlopen (as ncnn does) so the plugin loads on
 * machines without Vulkan: a missing libvulkan.so.1 means zero devices. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

bool qp_vk_load_library(qp_vk_fns *f, const char *name, char *why, size_t cap) {
    memset(f, 0, sizeof *f);
    /* `name`: QPORT_VK_LOADER, another loader file (tests use a missing one) */
    if (!name || !*name) name = "libvulkan.so.1";
    f->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!f->lib) {
        const char *e = dlerror();
        snprintf(why, cap, "no Vulkan loader: dlopen(%s) failed: %s", name, e ? e : "unknown error");
        return false;
    }
    /* POSIX: a data pointer from dlsym converts to a function pointer. */
    void *sym = dlsym(f->lib, "vkGetInstanceProcAddr");
    if (!sym) {
        snprintf(why, cap, "libvulkan.so.1 lacks vkGetInstanceProcAddr");
        dlclose(f->lib);
        f->lib = NULL;
        return false;
    }
    memcpy(&f->vkGetInstanceProcAddr, &sym, sizeof sym);
#define QP_VK_LOAD_GLOBAL(name) f->name = (PFN_##name)f->vkGetInstanceProcAddr(NULL, #name);
    QP_VK_GLOBAL_FNS(QP_VK_LOAD_GLOBAL)
#undef QP_VK_LOAD_GLOBAL
    if (!f->vkCreateInstance || !f->vkEnumerateInstanceExtensionProperties || !f->vkEnumerateInstanceLayerProperties) {
        snprintf(why, cap, "libvulkan.so.1 lacks the global entry points");
        dlclose(f->lib);
        f->lib = NULL;
        return false;
    }
    return true;
}

bool qp_vk_load_instance(qp_vk_fns *f, VkInstance inst, char *why, size_t cap) {
#define QP_VK_LOAD_INST(name)                                                     \
    f->name = (PFN_##name)f->vkGetInstanceProcAddr(inst, #name);                  \
    if (!f->name) {                                                               \
        snprintf(why, cap, "the Vulkan loader lacks %s", #name);                  \
        return false;                                                             \
    }
    QP_VK_INSTANCE_FNS(QP_VK_LOAD_INST)
#undef QP_VK_LOAD_INST
#define QP_VK_LOAD_OPT(name) f->name = (PFN_##name)f->vkGetInstanceProcAddr(inst, #name);
    QP_VK_OPTIONAL_FNS(QP_VK_LOAD_OPT)
#undef QP_VK_LOAD_OPT
    return true;
}

void qp_vk_unload(qp_vk_fns *f) {
    if (f->lib) dlclose(f->lib);
    memset(f, 0, sizeof *f);
}

const char *qp_vk_result_str(VkResult r) {
    switch (r) {
#define QP_VK_RES(x) case x: return #x;
    QP_VK_RES(VK_SUCCESS) QP_VK_RES(VK_NOT_READY) QP_VK_RES(VK_TIMEOUT) QP_VK_RES(VK_INCOMPLETE)
    QP_VK_RES(VK_ERROR_OUT_OF_HOST_MEMORY) QP_VK_RES(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    QP_VK_RES(VK_ERROR_INITIALIZATION_FAILED) QP_VK_RES(VK_ERROR_DEVICE_LOST)
    QP_VK_RES(VK_ERROR_MEMORY_MAP_FAILED) QP_VK_RES(VK_ERROR_LAYER_NOT_PRESENT)
    QP_VK_RES(VK_ERROR_EXTENSION_NOT_PRESENT) QP_VK_RES(VK_ERROR_FEATURE_NOT_PRESENT)
    QP_VK_RES(VK_ERROR_INCOMPATIBLE_DRIVER) QP_VK_RES(VK_ERROR_TOO_MANY_OBJECTS)
    QP_VK_RES(VK_ERROR_FORMAT_NOT_SUPPORTED) QP_VK_RES(VK_ERROR_FRAGMENTED_POOL)
    QP_VK_RES(VK_ERROR_OUT_OF_POOL_MEMORY) QP_VK_RES(VK_ERROR_INVALID_SHADER_NV)
#undef QP_VK_RES
    default: return "VkResult(unknown)";
    }
}
