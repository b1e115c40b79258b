/* The application's CUDA runtime on the emulator: the embedding test and
 * examples/embed_cuda.c call cudaMalloc, cudaStreamCreate, stream capture
 * ... as against the real libcudart; linked with this file instead, each
 * call goes to the one emulated runtime inside the emulated plugin
 * (libqport-cuda.so of tests/cuda_emu, found on QPORT_BACKEND_PATH), so
 * the application and qport share its streams, memory, capture state and
 * counters as they share the driver on a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_runtime_api.h"

static void *plugin(void) {
    static void *h;
    if (h) return h;
    const char *path = getenv("QPORT_BACKEND_PATH");
    char buf[4096];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/libqport-cuda.so", (int)n, path);
        if ((h = dlopen(buf, RTLD_NOW | RTLD_LOCAL))) break;
        path += n + (path[n] == ':');
    }
    if (!h) {
        fprintf(stderr, "cudart_shim: no emulated libqport-cuda.so on QPORT_BACKEND_PATH (%s)\n",
                getenv("QPORT_BACKEND_PATH") ? getenv("QPORT_BACKEND_PATH") : "unset");
        abort(); /* test scaffolding only: the program cannot run at all */
    }
    return h;
}

static void *sym(const char *name) {
    void *(*lookup)(const char *) = (void *(*)(const char *))dlsym(plugin(), "qp_cu_emu_symbol");
    void *f = lookup ? lookup(name) : NULL;
    if (!f) {
        fprintf(stderr, "cudart_shim: the emulator has no %s\n", name);
        abort();
    }
    return f;
}

#define FWD(ret, name, params, args)                                                                                   \
    ret name params {                                                                                                  \
        static ret(*fp_) params;                                                                                       \
        if (!fp_) fp_ = (ret(*) params)sym(#name);                                                                     \
        return fp_ args;                                                                                               \
    }

FWD(cudaError_t, cudaGetDeviceCount, (int *n), (n))
FWD(const char *, cudaGetErrorString, (cudaError_t e), (e))
FWD(cudaError_t, cudaGetLastError, (void), ())
FWD(cudaError_t, cudaSetDevice, (int d), (d))
FWD(cudaError_t, cudaGetDevice, (int *d), (d))
FWD(cudaError_t, cudaDeviceSynchronize, (void), ())
FWD(cudaError_t, cudaMalloc, (void **p, size_t n), (p, n))
FWD(cudaError_t, cudaFree, (void *p), (p))
FWD(cudaError_t, cudaMemcpy, (void *d, const void *s, size_t n, enum cudaMemcpyKind k), (d, s, n, k))
FWD(cudaError_t, cudaStreamCreate, (cudaStream_t *s), (s))
FWD(cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t *s, unsigned f), (s, f))
FWD(cudaError_t, cudaStreamDestroy, (cudaStream_t s), (s))
FWD(cudaError_t, cudaStreamSynchronize, (cudaStream_t s), (s))
FWD(cudaError_t, cudaStreamWaitEvent, (cudaStream_t s, cudaEvent_t e, unsigned f), (s, e, f))
FWD(cudaError_t, cudaMemcpyAsync, (void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st),
    (d, s, n, k, st))
FWD(cudaError_t, cudaMemsetAsync, (void *p, int v, size_t n, cudaStream_t s), (p, v, n, s))
FWD(cudaError_t, cudaEventCreate, (cudaEvent_t *e), (e))
FWD(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t *e, unsigned f), (e, f))
FWD(cudaError_t, cudaEventDestroy, (cudaEvent_t e), (e))
FWD(cudaError_t, cudaEventRecord, (cudaEvent_t e, cudaStream_t s), (e, s))
FWD(cudaError_t, cudaEventSynchronize, (cudaEvent_t e), (e))
FWD(cudaError_t, cudaEventQuery, (cudaEvent_t e), (e))
FWD(cudaError_t, cudaStreamBeginCapture, (cudaStream_t s, enum cudaStreamCaptureMode m), (s, m))
FWD(cudaError_t, cudaStreamEndCapture, (cudaStream_t s, cudaGraph_t *g), (s, g))
FWD(cudaError_t, cudaStreamIsCapturing, (cudaStream_t s, enum cudaStreamCaptureStatus *st), (s, st))
FWD(cudaError_t, cudaGraphInstantiate, (cudaGraphExec_t *x, cudaGraph_t g, unsigned long long f), (x, g, f))
FWD(cudaError_t, cudaGraphLaunch, (cudaGraphExec_t x, cudaStream_t s), (x, s))
FWD(cudaError_t, cudaGraphExecDestroy, (cudaGraphExec_t x), (x))
FWD(cudaError_t, cudaGraphDestroy, (cudaGraph_t g), (g))

void qp_cu_emu_get_stats(qp_cu_emu_stats *out) {
    static void (*f)(qp_cu_emu_stats *);
    if (!f) f = (void (*)(qp_cu_emu_stats *))sym("qp_cu_emu_get_stats");
    f(out);
}

void qp_cu_emu_fault_after(long n) {
    static void (*f)(long);
    if (!f) f = (void (*)(long))sym("qp_cu_emu_fault_after");
    f(n);
}
