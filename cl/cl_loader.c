/* dlopen of the OpenCL ICD loader (ncnn does the same for Vulkan): a
 * missing libOpenCL.so.1 means zero devices, never a plugin load failure. */
#include "cl_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int qp_cl_load(qp_cl_api *api, const char *library, char *why, size_t why_cap) {
    memset(api, 0, sizeof *api);
    const char *names[] = {library, "libOpenCL.so.1", "libOpenCL.so"};
    const char *err = "no library name";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!names[i] || !names[i][0]) continue;
        /* RTLD_NODELETE: a driver unmapped by dlclose leaves its process-
         * lifetime state dangling (and unattributable to LSan); the loader
         * and the drivers it opened stay mapped once loaded */
        api->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (api->lib) break;
        err = dlerror();
        if (i == 0) break; /* an explicit override is not second-guessed */
    }
    if (!api->lib) {
        snprintf(why, why_cap, "no OpenCL ICD loader: %s", err ? err : "dlopen failed");
        return 0;
    }
#define QP_CL_RESOLVE(name)                                                                                            \
    *(void **)(&api->name) = dlsym(api->lib, #name);                                                                 \
    if (!api->name) {                                                                                                  \
        snprintf(why, why_cap, "the OpenCL loader lacks %s", #name);                                                   \
        qp_cl_unload(api);                                                                                             \
        return 0;                                                                                                      \
    }
    QP_CL_FUNCS(QP_CL_RESOLVE)
#undef QP_CL_RESOLVE
    return 1;
}

void qp_cl_unload(qp_cl_api *api) {
    if (api->lib) dlclose(api->lib);
    memset(api, 0, sizeof *api);
}

const char *qp_cl_strerror(cl_int err) {
    switch (err) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
    E(CL_INVALID_CONTEXT) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_BINARY)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_BUFFER_SIZE)
    E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_OPERATION) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
    }
}
