/* The OpenCL entry points the plugin uses, resolved at run time from the
 * ICD loader (libOpenCL.so.1, ocl-icd) so that the plugin loads on machines
 * without OpenCL (docs/backends.md). The CL headers are used for types only. */
#ifndef QP_CL_LOADER_H
#define QP_CL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>

#define QP_CL_FUNCS(X)                                                                                                 \
    X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)                 \
    X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) X(clReleaseMemObject)     \
    X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer) X(clCreateProgramWithSource) X(clCreateProgramWithBinary)        \
    X(clBuildProgram) X(clGetProgramBuildInfo) X(clGetProgramInfo) X(clReleaseProgram) X(clCreateKernel)            \
    X(clReleaseKernel) X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clFinish) X(clFlush)                           \
    X(clEnqueueCopyBuffer) X(clGetEventProfilingInfo) X(clReleaseEvent) X(clWaitForEvents)                         \
    X(clGetEventInfo) X(clEnqueueMarkerWithWaitList) X(clEnqueueBarrierWithWaitList) X(clGetCommandQueueInfo)        \
    X(clCreateSubBuffer) X(clRetainMemObject) X(clRetainContext) X(clRetainCommandQueue) X(clGetMemObjectInfo)      \
    X(clGetContextInfo)

typedef struct qp_cl_api {
    void *lib;
#define QP_CL_DECLARE(name) __typeof__(name) *name;
    QP_CL_FUNCS(QP_CL_DECLARE)
#undef QP_CL_DECLARE
} qp_cl_api;

/* Opens the ICD loader and resolves every entry point. On failure returns
 * 0 and writes the reason (dlerror text) into `why`. QPORT_CL_LIBRARY
 * overrides the library name (tests use it to simulate a missing runtime). */
/* `library`: QPORT_CL_LIBRARY (tests), tried first; NULL: the system loader. */
int qp_cl_load(qp_cl_api *api, const char *library, char *why, size_t why_cap);
void qp_cl_unload(qp_cl_api *api);

/* "CL_OUT_OF_RESOURCES" for a cl_int result code. */
const char *qp_cl_strerror(cl_int err);

#endif
