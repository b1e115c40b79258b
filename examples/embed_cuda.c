/* Embedding qport in a CUDA engine: the engine owns the stream and the
 * device memory (made with the raw CUDA runtime); qport adopts them
 * (qp_device_import with the engine's cudaStream_t, qp_buffer_import of
 * cudaMalloc'd pointers) and enqueues a decode step -- 32 quantized layers
 * and one MoE block -- with one synchronization for the whole step. Then
 * the step is ordered against the engine's own events (cuda_wait_event /
 * cuda_record_event), and captured once into a CUDA graph that the engine
 * replays: one graph launch per step. Checked bit for bit against the cpu
 * reference, and against a CUDA device qport created itself.
 *   cc embed_cuda.c $(pkg-config --cflags --libs qport) -I/usr/local/cuda/include \
 *      -L/usr/local/cuda/lib64 -lcudart
 * The meson build makes it where the CUDA plugin is built (test
 * embed-cuda), and runs the same file on the CPU emulator of tests/cuda_emu
 * (test cuda-emulated-embed-example). */
#include <cuda_runtime_api.h>

#include "embed_common.h"

#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return fprintf(stderr, "%s: %s (%d)\n", #call, cudaGetErrorString(e_), (int)e_), 1;  \
    } while (0)

static int waits_allocs(qp_device *dev, unsigned long long *w, unsigned long long *a) {
    qp_device_stats s = {.struct_size = sizeof s};
    if (qp_device_get_stats(dev, &s)) return 1;
    *w = s.host_waits;
    *a = s.allocations;
    return 0;
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    qp_device *probe;
    if (qp_device_find(ctx, "cuda", &probe) != QP_OK) {
        printf("embed_cuda: SKIP: no CUDA device (%s)\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }
    emb_model m;
    static uint16_t ref[EMB_M * EMB_H], got[EMB_M * EMB_H], owned[EMB_M * EMB_H];
    if (emb_model_build(&m, ctx) || emb_reference(&m, ctx, ref)) return 1;

    /* the engine's CUDA objects */
    CU(cudaSetDevice(0));
    cudaStream_t stream;
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    size_t xb = sizeof m.x, ib = sizeof m.ids;
    void *mem[5];
    size_t sizes[5] = {xb, xb, xb, ib, ib}; /* a, b (ping-pong), out, ids, weights */
    for (int i = 0; i < 5; i++) CU(cudaMalloc(&mem[i], sizes[i]));

    /* adopt them */
    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    id.api = QP_NATIVE_CUDA;
    id.cuda_device = 0;
    id.cuda_stream = stream;
    qp_device *dev;
    if (qp_device_import(ctx, &id, &dev)) return emb_fail(ctx, "qp_device_import");
    qp_buffer *B[5];
    for (int i = 0; i < 5; i++) {
        qp_buffer_import_desc bd;
        qp_buffer_import_desc_init(&bd);
        bd.cuda_ptr = mem[i];
        bd.size = sizes[i];
        if (qp_buffer_import(dev, &bd, &B[i])) return emb_fail(ctx, "qp_buffer_import");
    }
    emb_layers L;
    if (emb_layers_create(&m, dev, &L)) return 1;
    /* the engine writes the inputs itself, on its stream */
    CU(cudaMemcpyAsync(mem[0], m.x, xb, cudaMemcpyHostToDevice, stream));
    CU(cudaMemcpyAsync(mem[3], m.ids, ib, cudaMemcpyHostToDevice, stream));
    CU(cudaMemcpyAsync(mem[4], m.rw, ib, cudaMemcpyHostToDevice, stream));
    CU(cudaStreamSynchronize(stream));

    /* 1. the step enqueued, one wait at the end */
    int rc = 0;
    unsigned long long w0, a0, w1, a1, w2, a2;
    if (waits_allocs(dev, &w0, &a0) || emb_step_enqueue(&m, &L, B[0], B[1], B[3], B[4], B[2], NULL) ||
        waits_allocs(dev, &w1, &a1) || qp_device_synchronize(dev) || waits_allocs(dev, &w2, &a2))
        return emb_fail(ctx, "step");
    printf("cuda step: %d layers + 1 MoE block enqueued on the engine's stream: %llu host waits while enqueueing, "
           "%llu in all, %llu allocations (qport's counters)\n", EMB_LAYERS, w1 - w0, w2 - w0, a2 - a0);
    if (w1 != w0 || w2 - w0 != 1 || a2 != a0) {
        fprintf(stderr, "FAIL: expected 0 waits while enqueueing, 1 in all and no allocation\n");
        rc = 1;
    }
    CU(cudaMemcpy(got, mem[2], xb, cudaMemcpyDeviceToHost));
    rc |= emb_compare("imported device, enqueued", got, ref);

    /* 2. ordered against the engine's events: the first layer waits for
     * `ready`, the MoE block records `done`; the engine waits for `done` */
    cudaEvent_t ready = NULL, done = NULL;
    CU(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    CU(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CU(cudaMemsetAsync(mem[2], 0, xb, stream));
    CU(cudaEventRecord(ready, stream));
    qp_enqueue_sync s0, s1;
    qp_enqueue_sync_init(&s0);
    s0.cuda_wait_event = ready;
    qp_enqueue_sync_init(&s1);
    s1.cuda_record_event = done;
    qp_buffer *cur = B[0], *nxt = B[1];
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_enqueue(L.lin[l], cur, EMB_M, nxt, l == 0 ? &s0 : NULL)) return emb_fail(ctx, "ordered enqueue");
        qp_buffer *t = cur; cur = nxt; nxt = t;
    }
    if (qp_moe_enqueue(L.moe, cur, EMB_M, B[3], B[4], B[2], &s1)) return emb_fail(ctx, "ordered MoE");
    CU(cudaEventSynchronize(done));
    CU(cudaMemcpy(got, mem[2], xb, cudaMemcpyDeviceToHost));
    rc |= emb_compare("between the engine's events", got, ref);
    cudaEventDestroy(ready);
    cudaEventDestroy(done);

    /* 3. captured once into a CUDA graph, replayed by the engine: qport's
     * enqueues allocate nothing and never wait, so the capture holds */
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CU(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    int erc = emb_step_enqueue(&m, &L, B[0], B[1], B[3], B[4], B[2], NULL);
    cudaError_t ce = cudaStreamEndCapture(stream, &graph);
    if (erc || ce != cudaSuccess) return fprintf(stderr, "capture: %s\n", cudaGetErrorString(ce)), 1;
    CU(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; rep++) {
        CU(cudaMemsetAsync(mem[2], 0, xb, stream));
        CU(cudaGraphLaunch(exec, stream));
        CU(cudaStreamSynchronize(stream));
        CU(cudaMemcpy(got, mem[2], xb, cudaMemcpyDeviceToHost));
        rc |= emb_compare("CUDA graph replay", got, ref);
    }
    printf("cuda: the step captured into a CUDA graph and replayed twice\n");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    /* 4. the same layers on a CUDA device qport created itself */
    emb_layers L2;
    if (emb_layers_create(&m, probe, &L2)) return 1;
    static uint16_t t0[EMB_M * EMB_H], t1[EMB_M * EMB_H];
    memcpy(t0, m.x, xb);
    for (int l = 0; l < EMB_LAYERS; l++) {
        if (qp_linear_forward(L2.lin[l], t0, EMB_M, t1)) return emb_fail(ctx, "owned forward");
        memcpy(t0, t1, xb);
    }
    if (qp_moe_forward_topk(L2.moe, t0, EMB_M, m.ids, m.rw, owned)) return emb_fail(ctx, "owned MoE");
    rc |= emb_compare("qport-created CUDA device", owned, got);
    emb_layers_destroy(&L2);

    emb_layers_destroy(&L);
    for (int i = 0; i < 5; i++) qp_buffer_destroy(B[i]);
    qp_device_release(dev); /* the stream and the memory stay the engine's */
    for (int i = 0; i < 5; i++) cudaFree(mem[i]);
    cudaStreamDestroy(stream);
    emb_model_free(&m);
    qp_context_destroy(ctx);
    printf("%s\n", rc ? "embed_cuda: FAILED" : "embed_cuda: all results equal the cpu reference bit for bit");
    return rc;
}
