/* A stand-in for libOpenCL.so.1 that qport's OpenCL plugin loads through
 * QPORT_CL_LIBRARY: it links the real ICD loader, so every entry point the
 * plugin looks up resolves to the loader, except the three it counts --
 * the host waits clFinish and clWaitForEvents and the allocation
 * clCreateBuffer -- which count and forward. examples/embed_opencl.c reads
 * the counts (qp_clshim_counts) to check qport's own counters at the API. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>

static unsigned waits, allocs;

/* a reference into the loader keeps it a dependency of this library
 * (--as-needed would drop it: the forwarding goes through dlsym) */
void *qp_clshim_keep_loader = (void *)&clGetPlatformIDs;

__attribute__((visibility("default"))) void qp_clshim_counts(unsigned *w, unsigned *a) {
    *w = waits;
    *a = allocs;
}

__attribute__((visibility("default"))) cl_int clFinish(cl_command_queue q) {
    static cl_int (*real)(cl_command_queue);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clFinish");
    waits++;
    return real(q);
}

__attribute__((visibility("default"))) cl_int clWaitForEvents(cl_uint n, const cl_event *e) {
    static cl_int (*real)(cl_uint, const cl_event *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clWaitForEvents");
    waits++;
    return real(n, e);
}

__attribute__((visibility("default"))) cl_mem clCreateBuffer(cl_context c, cl_mem_flags f, size_t n, void *h,
                                                             cl_int *err) {
    static cl_mem (*real)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "clCreateBuffer");
    allocs++;
    return real(c, f, n, h, err);
}
