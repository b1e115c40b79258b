/* cuda-embed: qport inside an application's CUDA work, through
 * the public API only. The application creates its stream and memory with
 * the CUDA runtime; qport adopts them (qp_device_import, qp_buffer_import)
 * and enqueues a chain of four layers (int8 dynamic, W4A16 int4 g32, NVFP4,
 * int8 static) and one int8 MoE block on it:
 *   - un-captured: the whole chain costs one host wait (qport's counters,
 *     and on the emulator the runtime's), no allocation;
 *   - captured into a CUDA graph (global mode): no allocation, no host
 *     wait, nothing refused during the capture; the replay equals the
 *     un-captured run bit for bit, and a replay after new input equals the
 *     blocking API (qp_linear_forward / qp_moe_forward_topk) on that input;
 *   - every layer against the cpu reference on its own input: the int8
 *     layers and the int8 MoE bit for bit, W4A16 and NVFP4 within 2^-7 of
 *     the output's magnitude;
 *   - the caller's current device is restored after every call (the
 *     emulator runs two devices: qport works on 0 while the caller's
 *     current device is 1);
 *   - inside a capture, what the capture forbids (growing a layer's scratch:
 *     cudaMalloc; a synchronize; a blocking upload) comes back as an error
 *     naming the call, the capture is invalidated, and the device works on;
 *   - qp_enqueue_sync's CUDA events (wait before, record after), qp_event_*,
 *     qp_buffer_import's refusals, native handles, release leaving the
 *     application's stream alive;
 *   - emulator only: an injected kernel fault surfaces at the next
 *     synchronize with the layer named, and the device recovers.
 * Runs on the emulator (suite cuda-emu, tests/cuda_emu/cudart_shim.c) and
 * on a GPU (suite cuda, linked with libcudart). Exit 77 without a device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "qport.h"
#include "testutil.h"

enum { M = 3, MCAP = 32, H = 128, N0 = 256, I = 64, E = 8, TOPK = 2, NL = 4 };

static qp_context *ctx;
static int app_dev; /* the application's current device (1 when there are two) */
static cudaStream_t app; /* the application's stream (non-blocking) */

/* The application's host-to-device copy, ordered on its stream: a
 * legacy-stream cudaMemcpy from pageable memory may still be in flight
 * when a kernel on a non-blocking stream starts. */
static cudaError_t app_h2d(void *dst, const void *src, size_t n) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, app);
    return e != cudaSuccess ? e : cudaStreamSynchronize(app);
}

static void current_is_app(const char *after) {
    int cur = -1;
    CHECK(cudaGetDevice(&cur) == cudaSuccess && cur == app_dev, "after %s: current device %d, the caller's was %d", after,
          cur, app_dev);
}

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / 16777216.0f - 0.5f;
}

static void mk(qp_scheme *s, qp_scheme_kind kind, qp_dtype wd, int group, qp_dtype ad, int dynamic) {
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->kind = kind;
    s->weight.dtype = wd;
    s->weight.granularity = group > 0 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL;
    s->weight.group_size = group;
    s->weight.symmetric = 1;
    s->activation.dtype = ad;
    s->activation.dynamic = dynamic;
    s->activation.symmetric = 1;
}

/* the chain: layer i maps K_i -> N_i features */
static const int Ks[NL] = {H, N0, H, H}, Ns[NL] = {N0, H, H, H};
static const char *const names[NL] = {"embed.l0.int8_dyn", "embed.l1.w4a16", "embed.l2.nvfp4", "embed.l3.int8_static"};
static const int exact[NL] = {1, 0, 0, 1};

typedef struct layer_set {
    qp_linear *lin[NL];
    qp_moe *moe;
} layer_set;

static qp_qweights *qw[NL];
static qp_scheme sch[NL];
static qp_tensor mt[4];
static qp_scheme msch;
static int8_t *w13, *w2;
static float *s13, *s2;

static void make_weights(void) {
    for (int i = 0; i < NL; i++) {
        if (i == 0) mk(&sch[i], QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, 0, QP_DTYPE_I8, 1);
        else if (i == 1) { mk(&sch[i], QP_SCHEME_W4A16_INT4, QP_DTYPE_I4, 32, QP_DTYPE_NONE, 0); sch[i].pack_method = QP_PACK_REORDER; }
        else if (i == 2) mk(&sch[i], QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, 16, QP_DTYPE_F4_E2M1, 1);
        else { mk(&sch[i], QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, 0, QP_DTYPE_I8, 0); }
        size_t n = (size_t)Ns[i] * (size_t)Ks[i];
        float *w = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) w[j] = frand() * 0.2f;
        qp_quantize_options qo;
        qp_quantize_options_init(&qo);
        qo.input_absmax = 4.0f; /* static activations: the assumed max |x| */
        CHECK(!qp_quantize_weights(ctx, &sch[i], w, Ns[i], Ks[i], i == 3 ? &qo : NULL, &qw[i]), "quantize %s: %s",
              names[i], qp_last_error(ctx));
        free(w);
    }
    /* int8 experts, per-channel scales, dynamic per-token activations */
    memset(&msch, 0, sizeof msch);
    msch.struct_size = sizeof msch;
    msch.kind = QP_SCHEME_W8A8_INT8;
    snprintf(msch.activation_key, sizeof msch.activation_key, "kInt8DynamicTokenSym");
    snprintf(msch.weight_key, sizeof msch.weight_key, "kInt8StaticChannelSym");
    size_t n13 = (size_t)E * 2 * I * H, n2 = (size_t)E * H * I;
    w13 = malloc(n13);
    w2 = malloc(n2);
    s13 = malloc(sizeof(float) * E * 2 * I);
    s2 = malloc(sizeof(float) * E * H);
    for (size_t j = 0; j < n13; j++) w13[j] = (int8_t)lrintf(frand() * 254.0f);
    for (size_t j = 0; j < n2; j++) w2[j] = (int8_t)lrintf(frand() * 254.0f);
    for (int j = 0; j < E * 2 * I; j++) s13[j] = 0.0005f * (1.0f + frand());
    for (int j = 0; j < E * H; j++) s2[j] = 0.001f * (1.0f + frand());
    mt[0] = (qp_tensor){"w13_weight", QP_DTYPE_I8, 3, {E, 2 * I, H, 0}, w13};
    mt[1] = (qp_tensor){"w13_weight_scale", QP_DTYPE_F32, 3, {E, 2 * I, 1, 0}, s13};
    mt[2] = (qp_tensor){"w2_weight", QP_DTYPE_I8, 3, {E, H, I, 0}, w2};
    mt[3] = (qp_tensor){"w2_weight_scale", QP_DTYPE_F32, 3, {E, H, 1, 0}, s2};
}

static bool make_layers(qp_device *d, layer_set *L) {
    memset(L, 0, sizeof *L);
    for (int i = 0; i < NL; i++) {
        if (!qw[i]) return false;
        qp_tensor t[8];
        size_t nt = qp_qweights_count(qw[i]);
        for (size_t j = 0; j < nt && j < 8; j++) qp_qweights_get(qw[i], j, &t[j]);
        qp_linear_options o;
        qp_linear_options_init(&o);
        o.layer = names[i];
        if (qp_linear_create(d, &sch[i], Ns[i], Ks[i], t, nt, &o, &L->lin[i])) {
            CHECK(0, "create %s: %s", names[i], qp_last_error(ctx));
            return false;
        }
    }
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = TOPK;
    o.layer = "embed.moe";
    if (qp_moe_create(d, &msch, E, H, I, mt, 4, &o, &L->moe)) {
        CHECK(0, "create the MoE block: %s", qp_last_error(ctx));
        return false;
    }
    return true;
}

static void free_layers(layer_set *L) {
    for (int i = 0; i < NL; i++) qp_linear_destroy(L->lin[i]);
    qp_moe_destroy(L->moe);
}

/* the application's device memory: x, the layers' outputs, ids, weights, y */
enum { B_X, B_Y0, B_Y1, B_Y2, B_Y3, B_IDS, B_W, B_YM, NB };
static void *dptr[NB];
static qp_buffer *qb[NB];
static size_t bsize[NB];

static qp_status enqueue_chain(layer_set *L, int m) {
    qp_status st = QP_OK;
    for (int i = 0; i < NL && !st; i++) st = qp_linear_enqueue(L->lin[i], qb[B_X + i], m, qb[B_Y0 + i], NULL);
    if (!st) st = qp_moe_enqueue(L->moe, qb[B_Y3], m, qb[B_IDS], qb[B_W], qb[B_YM], NULL);
    return st;
}

typedef struct outs { uint16_t y[NL + 1][M * N0]; } outs;

static void download(outs *o) {
    for (int i = 0; i < NL; i++)
        CHECK(cudaMemcpy(o->y[i], dptr[B_Y0 + i], (size_t)M * Ns[i] * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
    CHECK(cudaMemcpy(o->y[NL], dptr[B_YM], (size_t)M * H * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "download");
}

static void poison_outputs(void) {
    static uint8_t junk[MCAP * N0 * 2];
    memset(junk, 0x7B, sizeof junk);
    for (int i = B_Y0; i <= B_YM; i++)
        if (i != B_IDS && i != B_W) app_h2d(dptr[i], junk, bsize[i] < sizeof junk ? bsize[i] : sizeof junk);
}

static int diff16(const uint16_t *a, const uint16_t *b, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += a[i] != b[i];
    return bad;
}

/* the same, +0 and -0 equal (a slot that adds +0 against one adding w * 0) */
static int diff16z(const uint16_t *a, const uint16_t *b, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += a[i] != b[i] && ((a[i] | b[i]) & 0x7FFF);
    return bad;
}

static void stats(qp_device *d, qp_device_stats *s) {
    s->struct_size = sizeof *s;
    CHECK(!qp_device_get_stats(d, s), "stats: %s", qp_last_error(ctx));
}

int main(void) {
    CHECK(!qp_context_create(&ctx), "context");
    qp_device *cpu = NULL, *any = NULL;
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu device");
    int ndev = 0;
    if (qp_device_find(ctx, "cuda", &any) || !any || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("cuda-embed: SKIP: no CUDA device (%s)\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }
    app_dev = ndev >= 2 ? 1 : 0;
    CHECK(cudaSetDevice(app_dev) == cudaSuccess, "cudaSetDevice(%d)", app_dev);
    /* the application's stream lives on device 0 */
    CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
    CHECK(cudaStreamCreateWithFlags(&app, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    uint16_t hx[MCAP * N0];
    for (int i = 0; i < MCAP * N0; i++) hx[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand() * 4.0f);
    int32_t hids[M * TOPK];
    float hw[M * TOPK];
    for (int t = 0; t < M; t++) {
        hids[t * TOPK] = (t * 3) % E;
        hids[t * TOPK + 1] = (t * 3 + 5) % E;
        hw[t * TOPK] = 0.625f;
        hw[t * TOPK + 1] = 0.375f;
    }
    /* the last slot names no expert of the block (ids on the device are not
     * checked): it adds nothing, as the host calls' valid id with weight 0 */
    int32_t hids_ref[M * TOPK];
    float hw_ref[M * TOPK];
    memcpy(hids_ref, hids, sizeof hids);
    memcpy(hw_ref, hw, sizeof hw);
    hids[TOPK * (M - 1) + 1] = E + 3;
    hw_ref[TOPK * (M - 1) + 1] = 0.0f;
    for (int i = 0; i < NB; i++) {
        bsize[i] = i == B_IDS || i == B_W ? (size_t)MCAP * TOPK * 4 : (size_t)MCAP * N0 * 2;
        CHECK(cudaMalloc(&dptr[i], bsize[i]) == cudaSuccess, "cudaMalloc");
        static uint8_t zero[MCAP * N0 * 2];
        CHECK(app_h2d(dptr[i], zero, bsize[i]) == cudaSuccess, "zero"); /* ids 0, weights 0 */
    }
    CHECK(app_h2d(dptr[B_X], hx, sizeof hx) == cudaSuccess, "x");
    CHECK(app_h2d(dptr[B_IDS], hids, sizeof hids) == cudaSuccess, "ids");
    CHECK(app_h2d(dptr[B_W], hw, sizeof hw) == cudaSuccess, "w");
    CHECK(cudaSetDevice(app_dev) == cudaSuccess, "cudaSetDevice(%d)", app_dev);

    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    id.api = QP_NATIVE_CUDA;
    id.cuda_device = 0;
    id.cuda_stream = app;
    qp_device *dev = NULL;
    CHECK(!qp_device_import(ctx, &id, &dev), "qp_device_import: %s", qp_last_error(ctx));
    current_is_app("qp_device_import");
    if (!dev) return tu_finish("cuda-embed");
    qp_device_native nat = {.struct_size = sizeof nat};
    CHECK(!qp_device_get_native(dev, &nat) && nat.api == QP_NATIVE_CUDA && nat.imported == 1 && nat.cuda_stream == (void *)app &&
          nat.cuda_device == 0, "native handles: %s", qp_last_error(ctx));
    id.cuda_device = 99;
    qp_device *bad = NULL;
    CHECK(qp_device_import(ctx, &id, &bad) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "99"),
          "ordinal 99 refused: %s", qp_last_error(ctx));

    for (int i = 0; i < NB; i++) {
        qp_buffer_import_desc bd;
        qp_buffer_import_desc_init(&bd);
        bd.cuda_ptr = dptr[i];
        bd.size = bsize[i];
        CHECK(!qp_buffer_import(dev, &bd, &qb[i]), "qp_buffer_import: %s", qp_last_error(ctx));
    }
    {
        qp_buffer_import_desc bd;
        qp_buffer_import_desc_init(&bd);
        bd.cuda_ptr = dptr[B_X];
        bd.size = 64;
        bd.offset = 32;
        qp_buffer *b = NULL;
        CHECK(qp_buffer_import(dev, &bd, &b) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "offset"),
              "offset refused: %s", qp_last_error(ctx));
        bd.offset = 0;
        bd.cuda_ptr = (char *)dptr[B_X] + 4;
        CHECK(qp_buffer_import(dev, &bd, &b) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "16-byte"),
              "misaligned pointer refused: %s", qp_last_error(ctx));
        qp_buffer_native bn = {.struct_size = sizeof bn};
        CHECK(!qp_buffer_get_native(qb[B_X], &bn) && bn.api == QP_NATIVE_CUDA && bn.ptr == dptr[B_X] && bn.imported,
              "buffer native");
    }
    current_is_app("qp_buffer_import");

    make_weights();
    layer_set L, R;
    bool ok = make_layers(dev, &L) && make_layers(cpu, &R);
    current_is_app("qp_linear_create / qp_moe_create");
    if (!ok) return tu_finish("cuda-embed");

    /* 1. the chain, un-captured: one host wait */
    qp_device_stats s0, s1;
#if defined(QP_TEST_CUDA_EMU)
    qp_cu_emu_stats e0, e1;
    qp_cu_emu_get_stats(&e0);
#endif
    stats(dev, &s0);
    CHECK(!enqueue_chain(&L, M), "enqueue the chain: %s", qp_last_error(ctx));
    CHECK(!qp_device_synchronize(dev), "synchronize: %s", qp_last_error(ctx));
    stats(dev, &s1);
#if defined(QP_TEST_CUDA_EMU)
    qp_cu_emu_get_stats(&e1);
    CHECK(e1.host_waits - e0.host_waits == 1 && e1.mallocs == e0.mallocs && e1.frees == e0.frees,
          "the runtime saw %lu host waits, %lu mallocs, %lu frees for the chain (1, 0, 0)", e1.host_waits - e0.host_waits,
          e1.mallocs - e0.mallocs, e1.frees - e0.frees);
#endif
    CHECK(s1.host_waits - s0.host_waits == 1 && s1.allocations == s0.allocations && s1.submissions > s0.submissions,
          "chain: %llu host waits, %llu allocations, %llu submissions (1, 0, > 0)",
          (unsigned long long)(s1.host_waits - s0.host_waits), (unsigned long long)(s1.allocations - s0.allocations),
          (unsigned long long)(s1.submissions - s0.submissions));
    current_is_app("the chain");
    printf("chain of %d layers + 1 MoE block: %llu host wait, %llu submissions, %llu allocations\n", NL,
           (unsigned long long)(s1.host_waits - s0.host_waits), (unsigned long long)(s1.submissions - s0.submissions),
           (unsigned long long)(s1.allocations - s0.allocations));
    static outs A, B, C, Q;
    download(&A);

    /* 2. every layer against the cpu reference on its own input */
    for (int i = 0; i <= NL; i++) {
        const uint16_t *in = i == 0 ? hx : A.y[i - 1];
        static uint16_t r[M * N0];
        int n = i < NL ? Ns[i] : H;
        qp_status st = i < NL ? qp_linear_forward(R.lin[i], in, M, r) : qp_moe_forward_topk(R.moe, in, M, hids_ref, hw_ref, r);
        CHECK(!st, "cpu %s: %s", i < NL ? names[i] : "moe", qp_last_error(ctx));
        if (i == NL || exact[i]) {
            int bad = i == NL ? diff16z(A.y[i], r, (size_t)M * n) : diff16(A.y[i], r, (size_t)M * n);
            CHECK(!bad, "%s: %d of %d outputs differ from the cpu reference", i < NL ? names[i] : "embed.moe", bad, M * n);
        } else {
            double mx = 0, worst = 0;
            for (int j = 0; j < M * n; j++) mx = fmax(mx, fabs(qp_format_decode(QP_DTYPE_F16, r[j])));
            for (int j = 0; j < M * n; j++)
                worst = fmax(worst, fabs(qp_format_decode(QP_DTYPE_F16, A.y[i][j]) - qp_format_decode(QP_DTYPE_F16, r[j])));
            CHECK(mx > 0 && worst <= mx / 128, "%s: |device - cpu| %g over 2^-7 of max |y| %g", names[i], worst, mx);
        }
    }
    /* the slot routed outside the block adds nothing: token M-1 is its
     * other slot alone (checked above through the cpu reference, which
     * takes the same ids as host memory) */

    /* 3. the chain captured into a graph and replayed */
    cudaGraph_t g = NULL;
    cudaGraphExec_t gx = NULL;
#if defined(QP_TEST_CUDA_EMU)
    qp_cu_emu_get_stats(&e0);
#endif
    stats(dev, &s0);
    CHECK(cudaStreamBeginCapture(app, cudaStreamCaptureModeGlobal) == cudaSuccess, "cudaStreamBeginCapture");
    CHECK(!enqueue_chain(&L, M), "enqueue the chain during the capture: %s", qp_last_error(ctx));
    cudaError_t ce = cudaStreamEndCapture(app, &g);
    CHECK(ce == cudaSuccess && g, "cudaStreamEndCapture: %s", cudaGetErrorString(ce));
    stats(dev, &s1);
#if defined(QP_TEST_CUDA_EMU)
    qp_cu_emu_get_stats(&e1);
    CHECK(e1.mallocs == e0.mallocs && e1.frees == e0.frees && e1.host_waits == e0.host_waits &&
          e1.capture_violations == e0.capture_violations && e1.captured > e0.captured,
          "capture: %lu mallocs, %lu frees, %lu host waits, %lu refused calls, %lu nodes (0, 0, 0, 0, > 0)",
          e1.mallocs - e0.mallocs, e1.frees - e0.frees, e1.host_waits - e0.host_waits,
          e1.capture_violations - e0.capture_violations, e1.captured - e0.captured);
    printf("captured %lu nodes\n", e1.captured - e0.captured);
#endif
    CHECK(s1.host_waits == s0.host_waits && s1.allocations == s0.allocations, "qport during the capture: %llu host waits, %llu allocations",
          (unsigned long long)(s1.host_waits - s0.host_waits), (unsigned long long)(s1.allocations - s0.allocations));
    current_is_app("the capture");
    poison_outputs();
    if (g) {
        CHECK(cudaGraphInstantiate(&gx, g, 0) == cudaSuccess, "cudaGraphInstantiate");
        CHECK(cudaGraphLaunch(gx, app) == cudaSuccess && cudaStreamSynchronize(app) == cudaSuccess, "graph launch");
        download(&B);
        for (int i = 0; i <= NL; i++) {
            int n = i < NL ? Ns[i] : H, bad = diff16(A.y[i], B.y[i], (size_t)M * n);
            CHECK(!bad, "graph replay, %s: %d of %d outputs differ from the un-captured run", i < NL ? names[i] : "embed.moe", bad, M * n);
        }
        /* new input, the same graph: equals the blocking API on it */
        for (int j = 0; j < M * H; j++) hx[j] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand() * 4.0f);
        CHECK(app_h2d(dptr[B_X], hx, (size_t)M * H * 2) == cudaSuccess, "x");
        poison_outputs();
        CHECK(cudaGraphLaunch(gx, app) == cudaSuccess && cudaStreamSynchronize(app) == cudaSuccess, "graph launch");
        download(&C);
        for (int i = 0; i <= NL; i++) {
            const uint16_t *in = i == 0 ? hx : Q.y[i - 1];
            qp_status st = i < NL ? qp_linear_forward(L.lin[i], in, M, Q.y[i])
                                  : qp_moe_forward_topk(L.moe, in, M, hids_ref, hw_ref, Q.y[i]);
            CHECK(!st, "blocking %s: %s", i < NL ? names[i] : "moe", qp_last_error(ctx));
            int n = i < NL ? Ns[i] : H;
            int bad = i < NL ? diff16(C.y[i], Q.y[i], (size_t)M * n) : diff16z(C.y[i], Q.y[i], (size_t)M * n);
            CHECK(!bad, "graph replay on new input, %s: %d of %d outputs differ from the blocking API",
                  i < NL ? names[i] : "embed.moe", bad, M * n);
        }
        CHECK(diff16(B.y[0], C.y[0], (size_t)M * N0) > 0, "the replay read the new input");
        current_is_app("the blocking API");
    }

    /* 4. what a capture forbids comes back as an error */
    CHECK(cudaStreamBeginCapture(app, cudaStreamCaptureModeGlobal) == cudaSuccess, "cudaStreamBeginCapture");
    /* 17 tokens, above max_m 16: the block's scratch must grow */
    qp_status st = qp_moe_enqueue(L.moe, qb[B_Y3], 17, qb[B_IDS], qb[B_W], qb[B_YM], NULL);
    CHECK(st == QP_ERR_DEVICE && strstr(qp_last_error(ctx), "cudaMalloc") && strstr(qp_last_error(ctx), "embed.moe"),
          "a scratch growth during a capture: %d %s", (int)st, qp_last_error(ctx));
    printf("refused in the capture: %s\n", qp_last_error(ctx));
    st = qp_device_synchronize(dev);
    CHECK(st == QP_ERR_DEVICE && strstr(qp_last_error(ctx), "cudaStreamSynchronize"), "a synchronize during a capture: %d %s",
          (int)st, qp_last_error(ctx));
    st = qp_buffer_upload(qb[B_X], 0, hx, 64);
    CHECK(st == QP_ERR_DEVICE, "a blocking upload during a capture: %d %s", (int)st, qp_last_error(ctx));
    cudaGraph_t g2 = NULL;
    ce = cudaStreamEndCapture(app, &g2);
    CHECK(ce == cudaErrorStreamCaptureInvalidated && !g2, "the refused calls invalidated the capture: %s", cudaGetErrorString(ce));
    if (g2) cudaGraphDestroy(g2);
    cudaGetLastError();
    current_is_app("the refused capture");
    /* and the device works on: the larger M grows the scratch now */
    st = qp_moe_enqueue(L.moe, qb[B_Y3], 17, qb[B_IDS], qb[B_W], qb[B_YM], NULL);
    CHECK(!st && !qp_device_synchronize(dev), "after the capture, M = 17: %s", qp_last_error(ctx));

    /* 5. events and enqueue synchronisation with the application's events */
    {
        cudaEvent_t before = NULL, after = NULL;
        CHECK(cudaEventCreateWithFlags(&before, cudaEventDisableTiming) == cudaSuccess &&
              cudaEventCreateWithFlags(&after, cudaEventDisableTiming) == cudaSuccess, "events");
        CHECK(cudaEventRecord(before, app) == cudaSuccess, "record");
        qp_enqueue_sync sy;
        qp_enqueue_sync_init(&sy);
        sy.cuda_wait_event = before;
        sy.cuda_record_event = after;
        CHECK(app_h2d(dptr[B_X], hx, (size_t)M * H * 2) == cudaSuccess, "x");
        CHECK(!qp_linear_enqueue(L.lin[0], qb[B_X], M, qb[B_Y0], &sy), "enqueue with events: %s", qp_last_error(ctx));
        CHECK(cudaEventSynchronize(after) == cudaSuccess, "the application waits for qport's event");
        static uint16_t y0[M * N0];
        CHECK(cudaMemcpy(y0, dptr[B_Y0], (size_t)M * N0 * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "y0");
        CHECK(!diff16(y0, Q.y[0], (size_t)M * N0), "the layer behind the events");
        sy.vk_wait_semaphore = (void *)1;
        CHECK(qp_linear_enqueue(L.lin[0], qb[B_X], M, qb[B_Y0], &sy) == QP_ERR_INVALID_ARGUMENT, "Vulkan fields refused");
        qp_event *ev = NULL;
        int done = -1;
        CHECK(!enqueue_chain(&L, M) && !qp_event_record(dev, &ev), "qp_event_record: %s", qp_last_error(ctx));
        CHECK(ev && !qp_event_query(ev, &done) && (done == 0 || done == 1), "qp_event_query: %s", qp_last_error(ctx));
        CHECK(ev && !qp_event_wait(ev) && !qp_event_query(ev, &done) && done == 1, "qp_event_wait: %s", qp_last_error(ctx));
        qp_event_destroy(ev);
        cudaEventDestroy(before);
        cudaEventDestroy(after);
        current_is_app("the events");
    }

#if defined(QP_TEST_CUDA_EMU)
    /* 6. a kernel fault: the next synchronize names the layers */
    qp_cu_emu_fault_after(3);
    CHECK(!enqueue_chain(&L, M), "enqueue before the fault: %s", qp_last_error(ctx));
    st = qp_device_synchronize(dev);
    CHECK(st == QP_ERR_DEVICE && strstr(qp_last_error(ctx), "embed.l0.int8_dyn") && strstr(qp_last_error(ctx), "embed.moe") &&
          strstr(qp_last_error(ctx), "since the last synchronize"), "an injected fault: %d %s", (int)st, qp_last_error(ctx));
    printf("fault: %s\n", qp_last_error(ctx));
    qp_cu_emu_fault_after(0);
    CHECK(!enqueue_chain(&L, M) && !qp_device_synchronize(dev), "after the fault: %s", qp_last_error(ctx));
#endif

    /* 7. release: the application's stream and memory stay usable */
    if (gx) cudaGraphExecDestroy(gx);
    if (g) cudaGraphDestroy(g);
    free_layers(&L);
    free_layers(&R);
    for (int i = 0; i < NB; i++) qp_buffer_destroy(qb[i]);
    qp_device_release(dev);
    current_is_app("qp_device_release");
    CHECK(cudaMemcpyAsync(dptr[B_Y0], dptr[B_X], 64, cudaMemcpyDeviceToDevice, app) == cudaSuccess &&
          cudaStreamSynchronize(app) == cudaSuccess, "the application's stream after the release");
    for (int i = 0; i < NB; i++) cudaFree(dptr[i]);
    CHECK(cudaStreamDestroy(app) == cudaSuccess, "the application destroys its stream");
    for (int i = 0; i < NL; i++) qp_qweights_destroy(qw[i]);
    free(w13); free(w2); free(s13); free(s2);
    qp_context_destroy(ctx);
    return tu_finish("cuda-embed");
}
