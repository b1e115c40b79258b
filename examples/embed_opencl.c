/* Embedding qport in an OpenCL engine: the engine owns the context, the
 * in-order queue and the cl_mem buffers; qport adopts them
 * (qp_device_import, qp_buffer_import, one of them a sub-range of a larger
 * cl_mem) and enqueues a decode step -- 32 quantized layers and one MoE
 * block -- with one wait for the whole step. The step is also gated behind
 * the engine's user event: the enqueue returns before the event is set, and
 * the result is right after it is. Checked bit for bit against the cpu
 * reference and against a qport-created OpenCL device.
 *   cc embed_opencl.c $(pkg-config --cflags --libs qport) -lOpenCL
 * Under QPORT_CL_LIBRARY=<tests' counting shim> the waits and allocations
 * qport makes are counted at the OpenCL API itself, too. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <dlfcn.h>

#include "embed_common.h"

/* The counting shim's counters when qport loads it (QPORT_CL_LIBRARY). */
typedef void (*shim_counts_fn)(unsigned *waits, unsigned *allocs);
static shim_counts_fn shim_counts(void) {
    const char *p = getenv("QPORT_CL_LIBRARY");
    void *h = p ? dlopen(p, RTLD_NOW | RTLD_NOLOAD) : NULL;
    void *f = h ? dlsym(h, "qp_clshim_counts") : NULL;
    shim_counts_fn fn;
    memcpy(&fn, &f, sizeof fn);
    return f ? fn : NULL;
}

static int counts(qp_device *dev, unsigned *waits, unsigned *allocs) {
    qp_device_stats s = {.struct_size = sizeof s};
    if (qp_device_get_stats(dev, &s)) return 1;
    *waits = (unsigned)s.host_waits;
    *allocs = (unsigned)s.allocations;
    shim_counts_fn f = shim_counts();
    if (f) {
        unsigned w, a;
        f(&w, &a);
        waits[1] = w;
        allocs[1] = a;
    }
    return 0;
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    emb_model m;
    static uint16_t ref[EMB_M * EMB_H], got[EMB_M * EMB_H], owned[EMB_M * EMB_H];
    if (emb_model_build(&m, ctx) || emb_reference(&m, ctx, ref)) return 1;

    /* the engine's OpenCL objects */
    cl_platform_id plat;
    cl_device_id did;
    cl_int err;
    if (clGetPlatformIDs(1, &plat, NULL) != CL_SUCCESS ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &did, NULL) != CL_SUCCESS)
        return fprintf(stderr, "no OpenCL device\n"), 1;
    cl_context cl = clCreateContext(NULL, 1, &did, NULL, NULL, &err);
    cl_command_queue q = cl ? clCreateCommandQueue(cl, did, 0, &err) : NULL;
    if (!q) return fprintf(stderr, "clCreateCommandQueue: %d\n", err), 1;
    size_t xb = sizeof m.x, ib = sizeof m.ids;
    cl_uint align_bits = 1024;
    clGetDeviceInfo(did, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    size_t align = align_bits / 8, off_w = (ib + align - 1) / align * align;
    cl_mem mem[4];
    size_t sizes[4] = {xb, xb, xb, off_w + ib};
    for (int i = 0; i < 4; i++)
        if (!(mem[i] = clCreateBuffer(cl, CL_MEM_READ_WRITE, sizes[i], NULL, &err)))
            return fprintf(stderr, "clCreateBuffer: %d\n", err), 1;

    /* adopt them */
    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    id.api = QP_NATIVE_OPENCL;
    id.cl_context = cl;
    id.cl_device = did;
    id.cl_queue = q;
    qp_device *dev;
    if (qp_device_import(ctx, &id, &dev)) return emb_fail(ctx, "qp_device_import");
    qp_buffer *B[5];
    size_t offs[5] = {0, 0, 0, 0, off_w}, bsz[5] = {xb, xb, xb, ib, ib};
    int objs[5] = {0, 1, 2, 3, 3};
    for (int i = 0; i < 5; i++) {
        qp_buffer_import_desc bd;
        qp_buffer_import_desc_init(&bd);
        bd.cl_mem = mem[objs[i]];
        bd.offset = offs[i];
        bd.size = bsz[i];
        if (qp_buffer_import(dev, &bd, &B[i])) return emb_fail(ctx, "qp_buffer_import");
    }
    emb_layers L;
    if (emb_layers_create(&m, dev, &L)) return 1;
    /* the engine writes the inputs itself */
    if (clEnqueueWriteBuffer(q, mem[0], CL_TRUE, 0, xb, m.x, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(q, mem[3], CL_TRUE, 0, ib, m.ids, 0, NULL, NULL) ||
        clEnqueueWriteBuffer(q, mem[3], CL_TRUE, off_w, ib, m.rw, 0, NULL, NULL))
        return fprintf(stderr, "clEnqueueWriteBuffer failed\n"), 1;

    /* 1. the step enqueued, one wait at the end (the first step warms up
     * PoCL's per-shape compiles; the second is the one counted) */
    int rc = 0;
    for (int rep = 0; rep < 2 && !rc; rep++) {
        unsigned w0[2] = {0, 0}, a0[2] = {0, 0}, w1[2] = {0, 0}, a1[2] = {0, 0}, w2[2] = {0, 0}, a2[2] = {0, 0};
        if (counts(dev, w0, a0) || emb_step_enqueue(&m, &L, B[0], B[1], B[3], B[4], B[2], NULL) || counts(dev, w1, a1) ||
            qp_device_synchronize(dev) || counts(dev, w2, a2))
            return emb_fail(ctx, "step");
        printf("opencl step %d: %d layers + 1 MoE block enqueued: %u host waits while enqueueing, %u in all, "
               "%u allocations (qport's counters)", rep, EMB_LAYERS, w1[0] - w0[0], w2[0] - w0[0], a2[0] - a0[0]);
        if (shim_counts())
            printf("; at the API: %u waits while enqueueing, %u in all, %u clCreateBuffer", w1[1] - w0[1],
                   w2[1] - w0[1], a2[1] - a0[1]);
        printf("\n");
        if (rep == 1 && (w1[0] != w0[0] || w2[0] - w0[0] != 1 || a2[0] != a0[0] ||
                         (shim_counts() && (w1[1] != w0[1] || w2[1] - w0[1] != 1 || a2[1] != a0[1])))) {
            fprintf(stderr, "FAIL: expected 0 waits while enqueueing, 1 in all and no allocation\n");
            rc = 1;
        }
        if (clEnqueueReadBuffer(q, mem[2], CL_TRUE, 0, xb, got, 0, NULL, NULL) ||
            clEnqueueWriteBuffer(q, mem[0], CL_TRUE, 0, xb, m.x, 0, NULL, NULL))
            return fprintf(stderr, "read back failed\n"), 1;
        rc |= emb_compare("imported device, enqueued", got, ref);
    }

    /* 2. gated behind the engine's user event; the last op hands out an event */
    cl_event gate = clCreateUserEvent(cl, &err), done = NULL;
    if (!gate) return fprintf(stderr, "clCreateUserEvent: %d\n", err), 1;
    qp_enqueue_sync s0, s1;
    qp_enqueue_sync_init(&s0);
    const void *wl[1] = {gate};
    s0.cl_wait_list = wl;
    s0.cl_n_wait = 1;
    qp_enqueue_sync_init(&s1);
    s1.cl_out_event = (void **)&done;
    qp_buffer *cur = B[0], *nxt = B[1];
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_enqueue(L.lin[l], cur, EMB_M, nxt, l == 0 ? &s0 : NULL)) return emb_fail(ctx, "gated enqueue");
        qp_buffer *t = cur; cur = nxt; nxt = t;
    }
    if (qp_moe_enqueue(L.moe, cur, EMB_M, B[3], B[4], B[2], &s1) || !done) return emb_fail(ctx, "gated MoE");
    cl_int status = CL_COMPLETE;
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    printf("opencl: the gated step was enqueued and is %s before the user event is set\n",
           status == CL_COMPLETE ? "COMPLETE (wrong)" : "not complete");
    if (status == CL_COMPLETE) rc = 1;
    clSetUserEventStatus(gate, CL_COMPLETE);
    if (clWaitForEvents(1, &done) != CL_SUCCESS) return fprintf(stderr, "clWaitForEvents failed\n"), 1;
    if (clEnqueueReadBuffer(q, mem[2], CL_TRUE, 0, xb, got, 0, NULL, NULL)) return 1;
    rc |= emb_compare("gated by the engine's user event", got, ref);
    clReleaseEvent(done);
    clReleaseEvent(gate);

    /* 3. the same layers on an OpenCL device qport created itself */
    qp_device *own;
    if (qp_device_find(ctx, "opencl", &own) == QP_OK) {
        emb_layers L2;
        if (emb_layers_create(&m, own, &L2)) return 1;
        static uint16_t t0[EMB_M * EMB_H], t1[EMB_M * EMB_H];
        memcpy(t0, m.x, xb);
        for (int l = 0; l < EMB_LAYERS; l++) {
            if (qp_linear_forward(L2.lin[l], t0, EMB_M, t1)) return emb_fail(ctx, "owned forward");
            memcpy(t0, t1, xb);
        }
        if (qp_moe_forward_topk(L2.moe, t0, EMB_M, m.ids, m.rw, owned)) return emb_fail(ctx, "owned MoE");
        rc |= emb_compare("qport-created OpenCL device", owned, got);
        emb_layers_destroy(&L2);
    }

    emb_layers_destroy(&L);
    for (int i = 0; i < 5; i++) qp_buffer_destroy(B[i]);
    qp_device_release(dev);
    for (int i = 0; i < 4; i++) clReleaseMemObject(mem[i]);
    clReleaseCommandQueue(q);
    clReleaseContext(cl);
    emb_model_free(&m);
    qp_context_destroy(ctx);
    printf("%s\n", rc ? "embed_opencl: FAILED" : "embed_opencl: all results equal the cpu reference bit for bit");
    return rc;
}
