/* qport inside a CUDA application (issue 26): the application owns the
 * stream and the memory, qport enqueues on them. One decode step (M = 1)
 * of 32 int8 (W8A8, dynamic per-token) layers of 256 x 256 and one int8
 * MoE block (8 experts, top-2) runs with a single synchronization at the
 * end, and is checked bit for bit against the same layers on the cpu
 * reference. Build against the CUDA runtime:
 *   cc embed_cuda.c $(pkg-config --cflags --libs qport) -I/usr/local/cuda/include \
 *      -L/usr/local/cuda/lib64 -lcudart -lm
 * The meson build makes it when the CUDA plugin is built (and runs it on
 * the CPU emulator, test cuda-emulated-embed-example). */
#include <math.h>
#include <qport.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

enum { LAYERS = 32, D = 256, E = 8, I = 128, TOPK = 2 };

#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); return 1; }             \
    } while (0)
#define QP(call)                                                                                                       \
    do {                                                                                                               \
        if ((call) != QP_OK) { fprintf(stderr, "%s: %s\n", #call, qp_last_error(ctx)); return 1; }                   \
    } while (0)

static uint32_t rng = 2026;
static float frand(void) { /* uniform in [-0.5, 0.5) */
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 16777216.0f - 0.5f;
}

/* a device buffer of the application, and qport's view of it */
static qp_status wrap(qp_device *dev, void *p, size_t bytes, qp_buffer **out) {
    qp_buffer_import_desc d;
    qp_buffer_import_desc_init(&d);
    d.cuda_ptr = p;
    d.size = bytes;
    return qp_buffer_import(dev, &d, out);
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx) != QP_OK) return 1;
    qp_device *cpu, *any = NULL;
    QP(qp_device_find(ctx, "cpu", &cpu));
    if (qp_device_find(ctx, "cuda", &any) != QP_OK || !any) {
        printf("embed_cuda: no CUDA device (%s)\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }

    /* the application's objects, made with the raw CUDA runtime */
    cudaStream_t stream;
    CU(cudaSetDevice(0));
    CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *act[LAYERS + 1], *ids_d, *w_d, *ymoe_d;
    for (int i = 0; i <= LAYERS; i++) CU(cudaMalloc(&act[i], D * 2));
    CU(cudaMalloc(&ids_d, TOPK * 4));
    CU(cudaMalloc(&w_d, TOPK * 4));
    CU(cudaMalloc(&ymoe_d, D * 2));

    /* qport adopts the device and stream, then the memory */
    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    id.api = QP_NATIVE_CUDA;
    id.cuda_device = 0;
    id.cuda_stream = stream;
    qp_device *dev;
    QP(qp_device_import(ctx, &id, &dev));
    qp_buffer *b[LAYERS + 1], *ids_b, *w_b, *ymoe_b;
    for (int i = 0; i <= LAYERS; i++) QP(wrap(dev, act[i], D * 2, &b[i]));
    QP(wrap(dev, ids_d, TOPK * 4, &ids_b));
    QP(wrap(dev, w_d, TOPK * 4, &w_b));
    QP(wrap(dev, ymoe_d, D * 2, &ymoe_b));

    /* 32 int8 layers (weights ~ U(-a, a), variance 1/D), on both devices */
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = QP_SCHEME_W8A8_INT8;
    s.weight.dtype = QP_DTYPE_I8;
    s.weight.granularity = QP_GRAN_CHANNEL;
    s.weight.symmetric = 1;
    s.activation.dtype = QP_DTYPE_I8;
    s.activation.dynamic = 1;
    s.activation.symmetric = 1;
    static float w[D * D];
    qp_linear *lin[LAYERS], *ref[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        for (int i = 0; i < D * D; i++) w[i] = frand() * sqrtf(12.0f / D);
        qp_qweights *q;
        QP(qp_quantize_weights(ctx, &s, w, D, D, NULL, &q));
        qp_tensor t[8];
        size_t nt = qp_qweights_count(q);
        for (size_t i = 0; i < nt && i < 8; i++) qp_qweights_get(q, i, &t[i]);
        QP(qp_linear_create(dev, &s, D, D, t, nt, NULL, &lin[l]));
        QP(qp_linear_create(cpu, &s, D, D, t, nt, NULL, &ref[l]));
        qp_qweights_destroy(q);
    }
    /* one int8 MoE block: stacked experts as vLLM's FusedMoE holds them */
    static int8_t w13[E * 2 * I * D], w2[E * D * I];
    static float s13[E * 2 * I], s2[E * D];
    for (int i = 0; i < E * 2 * I * D; i++) w13[i] = (int8_t)lrintf(frand() * 254.0f);
    for (int i = 0; i < E * D * I; i++) w2[i] = (int8_t)lrintf(frand() * 254.0f);
    for (int i = 0; i < E * 2 * I; i++) s13[i] = 0.3f / (127.0f * sqrtf(D));
    for (int i = 0; i < E * D; i++) s2[i] = 0.3f / (127.0f * sqrtf(I));
    qp_tensor mt[4] = {{"w13_weight", QP_DTYPE_I8, 3, {E, 2 * I, D}, w13},
                       {"w13_weight_scale", QP_DTYPE_F32, 3, {E, 2 * I, 1}, s13},
                       {"w2_weight", QP_DTYPE_I8, 3, {E, D, I}, w2},
                       {"w2_weight_scale", QP_DTYPE_F32, 3, {E, D, 1}, s2}};
    qp_scheme ms;
    memset(&ms, 0, sizeof ms);
    ms.struct_size = sizeof ms;
    ms.kind = QP_SCHEME_W8A8_INT8;
    snprintf(ms.activation_key, sizeof ms.activation_key, "kInt8DynamicTokenSym");
    snprintf(ms.weight_key, sizeof ms.weight_key, "kInt8StaticChannelSym");
    qp_moe_options mo;
    qp_moe_options_init(&mo);
    mo.top_k = TOPK;
    qp_moe *moe, *moe_ref;
    QP(qp_moe_create(dev, &ms, E, D, I, mt, 4, &mo, &moe));
    QP(qp_moe_create(cpu, &ms, E, D, I, mt, 4, &mo, &moe_ref));

    /* the step's input and routing (the router's logits on the host here) */
    static uint16_t x[D], y[D], yr[D], t0[D], t1[D];
    for (int i = 0; i < D; i++) x[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand() * 2.0f);
    float logits[E];
    for (int e = 0; e < E; e++) logits[e] = frand();
    int32_t ids[TOPK];
    float rw[TOPK];
    QP(qp_moe_route(ctx, logits, 1, E, &mo, ids, rw));
    CU(cudaMemcpy(act[0], x, sizeof x, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(ids_d, ids, sizeof ids, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(w_d, rw, sizeof rw, cudaMemcpyHostToDevice));

    /* the decode step: 33 enqueues, one synchronization */
    qp_device_stats st0 = {.struct_size = sizeof st0}, st1 = {.struct_size = sizeof st1};
    QP(qp_device_get_stats(dev, &st0));
    for (int l = 0; l < LAYERS; l++) QP(qp_linear_enqueue(lin[l], b[l], 1, b[l + 1], NULL));
    QP(qp_moe_enqueue(moe, b[LAYERS], 1, ids_b, w_b, ymoe_b, NULL));
    QP(qp_device_synchronize(dev));
    QP(qp_device_get_stats(dev, &st1));
    CU(cudaMemcpy(y, ymoe_d, sizeof y, cudaMemcpyDeviceToHost));

    /* the same step on the cpu reference, blocking */
    memcpy(t0, x, sizeof x);
    for (int l = 0; l < LAYERS; l++) {
        QP(qp_linear_forward(ref[l], t0, 1, t1));
        memcpy(t0, t1, sizeof t1);
    }
    QP(qp_moe_forward_topk(moe_ref, t0, 1, ids, rw, yr));
    int bad = 0;
    for (int i = 0; i < D; i++) bad += y[i] != yr[i];
    printf("embed_cuda: %d layers + 1 MoE block enqueued on the application's stream: %llu host wait, %llu "
           "allocations; y[0] = %g, %d of %d outputs differ from the cpu reference\n",
           LAYERS, (unsigned long long)(st1.host_waits - st0.host_waits),
           (unsigned long long)(st1.allocations - st0.allocations), qp_format_decode(QP_DTYPE_F16, y[0]), bad, D);
    int rc = bad || st1.host_waits - st0.host_waits != 1 || st1.allocations != st0.allocations;

    for (int l = 0; l < LAYERS; l++) { qp_linear_destroy(lin[l]); qp_linear_destroy(ref[l]); }
    qp_moe_destroy(moe);
    qp_moe_destroy(moe_ref);
    for (int i = 0; i <= LAYERS; i++) qp_buffer_destroy(b[i]);
    qp_buffer_destroy(ids_b);
    qp_buffer_destroy(w_b);
    qp_buffer_destroy(ymoe_b);
    qp_device_release(dev); /* the stream and memory stay the application's */
    for (int i = 0; i <= LAYERS; i++) cudaFree(act[i]);
    cudaFree(ids_d);
    cudaFree(w_d);
    cudaFree(ymoe_d);
    cudaStreamDestroy(stream);
    qp_context_destroy(ctx);
    return rc;
}
