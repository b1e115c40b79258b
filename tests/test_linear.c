/* The device layer over the cpu reference backend: qp_linear_create binds
 * checkpoint tensors and runs process-after-loading, and its forward equals
 * a direct call of the reference kernel on the same data; bad tensors,
 * environment values and device specs are clear errors. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cases.h"
#include "testutil.h"

static qp_context *ctx;

static void same_as_direct_int8(void) {
    /* int8 static asymmetric: exercises the rebuilt azp and azp_adj */
    const case_scheme *cs = case_scheme_find("int8-static-asym");
    int N = 24, K = 40, M = 5;
    uint16_t x[5 * 40], calib[4 * 40], y1[5 * 24], y2[5 * 24];
    case_activations(DIST_UNIFORM, QP_DTYPE_BF16, 4, K, 7, calib);
    case_activations(DIST_OUTLIERS, QP_DTYPE_BF16, M, K, 8, x);
    case_layer l;
    char err[256];
    CHECK(!case_layer_make(ctx, cs, N, K, QP_DTYPE_BF16, 3, calib, 4, &l, err, sizeof err), "%s", err);
    qp_device *cpu;
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "%s", qp_last_error(ctx));
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = QP_DTYPE_BF16;
    qp_linear *lin = NULL;
    CHECK(!qp_linear_create(cpu, &l.scheme, N, K, l.tensors, l.n_tensors, &o, &lin), "%s", qp_last_error(ctx));
    CHECK(!qp_linear_forward(lin, x, M, y1), "%s", qp_last_error(ctx));
    /* the direct call, with vLLM's process-after-loading done by hand */
    float s; int32_t zp, zp_in = *(const int8_t *)l.tensors[3].data;
    qp_int8_static_asym_rebuild(ctx, l.tensors[2].data, &zp_in, 1, &s, &zp);
    float wsc[24];
    for (int n = 0; n < N; n++) wsc[n] = *(const float *)l.tensors[1].data;
    qp_ref_int8_args a = {QP_DTYPE_BF16, x, M, K, N, l.tensors[0].data, wsc, 1, 1, 0, s, zp, l.tensors[4].data};
    CHECK(!qp_ref_w8a8_int8_forward(ctx, &a, y2), "%s", qp_last_error(ctx));
    CHECK(!memcmp(y1, y2, sizeof y1), "qp_linear differs from the direct reference call");
    CHECK(qp_linear_out_dtype(lin) == QP_DTYPE_BF16, "out dtype");
    qp_linear_destroy(lin);
    case_layer_free(&l);
}

static void bad_tensors(void) {
    const case_scheme *cs = case_scheme_find("int8-dyn-sym");
    case_layer l;
    char err[256];
    CHECK(!case_layer_make(ctx, cs, 16, 32, QP_DTYPE_F16, 1, NULL, 0, &l, err, sizeof err), "%s", err);
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear *lin = NULL;
    qp_tensor t[8];
    memcpy(t, l.tensors, sizeof t);
    /* missing weight */
    qp_status st = qp_linear_create(cpu, &l.scheme, 16, 32, t + 1, l.n_tensors - 1, NULL, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "missing checkpoint tensor 'weight'"), "%s", qp_last_error(ctx));
    /* wrong dtype */
    t[0].dtype = QP_DTYPE_U8;
    st = qp_linear_create(cpu, &l.scheme, 16, 32, t, l.n_tensors, NULL, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "'weight' must be int8, got uint8"), "%s", qp_last_error(ctx));
    t[0].dtype = QP_DTYPE_I8;
    /* wrong shape */
    st = qp_linear_create(cpu, &l.scheme, 16, 31, t, l.n_tensors, NULL, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "shape [16, 32]: expected [N, K]"), "%s", qp_last_error(ctx));
    /* a tensor the scheme does not use */
    t[l.n_tensors] = (qp_tensor){"s_group", QP_DTYPE_F16, 1, {1}, t[0].data};
    st = qp_linear_create(cpu, &l.scheme, 16, 32, t, l.n_tensors + 1, NULL, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "unexpected tensor 's_group'"), "%s", qp_last_error(ctx));
    /* weight_scale with neither 1 nor N entries */
    t[1].ndim = 1; t[1].shape[0] = 3;
    st = qp_linear_create(cpu, &l.scheme, 16, 32, t, l.n_tensors, NULL, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "weight_scale has shape [3]"), "%s", qp_last_error(ctx));
    /* options without struct_size */
    qp_linear_options o = {0};
    st = qp_linear_create(cpu, &l.scheme, 16, 32, l.tensors, l.n_tensors, &o, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT, "struct_size 0 accepted");
    /* the reference has no GEMV/tiled variants to force */
    qp_linear_options_init(&o);
    o.path = QP_PATH_GEMV;
    st = qp_linear_create(cpu, &l.scheme, 16, 32, l.tensors, l.n_tensors, &o, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "forced path on cpu: %s", qp_status_str(st));
    CHECK(lin == NULL, "no object on failure");
    case_layer_free(&l);

    /* QQQ is fp16-only, with vLLM's message */
    CHECK(!case_layer_make(ctx, case_scheme_find("qqq-g128"), 64, 128, QP_DTYPE_F16, 1, NULL, 0, &l, err, sizeof err), "%s", err);
    qp_linear_options_init(&o);
    o.act_dtype = QP_DTYPE_BF16;
    st = qp_linear_create(cpu, &l.scheme, 64, 128, l.tensors, l.n_tensors, &o, &lin);
    CHECK(st == QP_ERR_VALUE && strstr(qp_last_error(ctx), "The params dtype must be float16, but got torch.bfloat16"), "%s", qp_last_error(ctx));
    qp_linear_options_init(&o);
    CHECK(!qp_linear_create(cpu, &l.scheme, 64, 128, l.tensors, l.n_tensors, &o, &lin), "%s", qp_last_error(ctx));
    uint16_t x[3 * 128], y[3 * 64 + 1];
    case_activations(DIST_TIES, QP_DTYPE_F16, 3, 128, 2, x);
    y[3 * 64] = 0xBEEF;
    CHECK(!qp_linear_forward(lin, x, 3, y) && y[3 * 64] == 0xBEEF, "forward or guard");
    CHECK(qp_linear_forward(lin, x, -1, y) == QP_ERR_INVALID_ARGUMENT, "negative M");
    qp_linear_destroy(lin);
    case_layer_free(&l);
}

/* fp32 activations: qp_linear with act_dtype F32 equals the
 * direct reference call bit for bit (x and y of 4 bytes an element, an F32
 * bias), for int8 (the integer path), W4A16 (fp16 checkpoint scales widened
 * into the fp32 params) and NVFP4; QQQ keeps vLLM's float16 error; devices
 * other than cpu refuse F32 with QP_ERR_UNSUPPORTED. */
static void mk(qp_scheme *s, qp_scheme_kind kind, qp_dtype wd, int group, qp_dtype ad) {
    memset(s, 0, sizeof *s);
    s->struct_size = sizeof *s;
    s->kind = kind;
    s->weight.dtype = wd;
    s->weight.granularity = group > 0 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL;
    s->weight.group_size = group;
    s->weight.symmetric = 1;
    s->activation.dtype = ad;
    s->activation.dynamic = 1;
    s->activation.symmetric = 1;
}

static void fp32_layers(void) {
    enum { M = 5, N = 20, K = 64 };
    qp_device *cpu;
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "%s", qp_last_error(ctx));
    float w[N * K], x[M * K], bias[N], y1[M * N + 1], y2[M * N];
    uint32_t s = 77;
    for (int i = 0; i < N * K; i++) { s = s * 1664525u + 1013904223u; w[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.1f; }
    for (int i = 0; i < M * K; i++) { s = s * 1664525u + 1013904223u; x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 6.0f; }
    for (int n = 0; n < N; n++) bias[n] = 0.01f * (float)n - 0.1f;
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = QP_DTYPE_F32;
    for (int which = 0; which < 3; which++) {
        qp_scheme sc;
        if (which == 0) mk(&sc, QP_SCHEME_W8A8_INT8, QP_DTYPE_I8, 0, QP_DTYPE_I8);
        else if (which == 1) { mk(&sc, QP_SCHEME_W4A16_INT4, QP_DTYPE_I4, 32, QP_DTYPE_NONE); sc.pack_method = QP_PACK_REORDER; }
        else mk(&sc, QP_SCHEME_NVFP4, QP_DTYPE_F4_E2M1, 16, QP_DTYPE_F4_E2M1);
        qp_qweights *q = NULL;
        CHECK(!qp_quantize_weights(ctx, &sc, w, N, K, NULL, &q), "%s", qp_last_error(ctx));
        if (!q) continue;
        qp_tensor t[8];
        size_t nt = qp_qweights_count(q);
        for (size_t i = 0; i < nt; i++) qp_qweights_get(q, i, &t[i]);
        t[nt++] = (qp_tensor){"bias", QP_DTYPE_F32, 1, {N}, bias};
        qp_linear *lin = NULL;
        CHECK(!qp_linear_create(cpu, &sc, N, K, t, nt, &o, &lin), "scheme %d: %s", which, qp_last_error(ctx));
        if (!lin) { qp_qweights_destroy(q); continue; }
        CHECK(qp_linear_out_dtype(lin) == QP_DTYPE_F32, "out dtype");
        memcpy(&y1[M * N], "GARD", 4);
        CHECK(!qp_linear_forward(lin, x, M, y1), "%s", qp_last_error(ctx));
        CHECK(!memcmp(&y1[M * N], "GARD", 4), "scheme %d: wrote past y", which);
        qp_status st = QP_ERR_INTERNAL;
        if (which == 0) {
            float wsc[N];
            for (int n = 0; n < N; n++) wsc[n] = ((const float *)t[1].data)[n];
            qp_ref_int8_args a = {QP_DTYPE_F32, x, M, K, N, t[0].data, wsc, 1, 0, 1, 0, 0, bias};
            st = qp_ref_w8a8_int8_forward(ctx, &a, y2);
        } else if (which == 1) {
            /* vLLM's fp32 weight_scale param [K/32][8*ceil(N/8)]: the
             * checkpoint's fp16 [K/32][N] copied in, zero-padded */
            float scf[K / 32 * 24] = {0};
            for (int g = 0; g < K / 32; g++)
                for (int n = 0; n < N; n++) scf[g * 24 + n] = qp_format_decode(QP_DTYPE_F16, ((const uint16_t *)t[1].data)[g * N + n]);
            qp_ref_w4a16_args a = {QP_DTYPE_F32, x, M, K, N, t[0].data, NULL, scf, 32, 1, QP_PACK_REORDER, bias};
            st = qp_ref_w4a16_forward(ctx, &a, y2);
        } else {
            qp_ref_nvfp4_args a = {QP_DTYPE_F32, x, M, K, N, t[0].data, t[1].data, *(const float *)t[2].data,
                                   *(const float *)t[3].data, bias, 0.0f};
            st = qp_ref_nvfp4_forward(ctx, &a, y2);
        }
        CHECK(st == QP_OK, "direct %d: %s", which, qp_last_error(ctx));
        CHECK(!memcmp(y1, y2, sizeof y2), "scheme %d: qp_linear fp32 differs from the direct reference call", which);
        /* device buffers sized for 2-byte elements are too small now */
        qp_buffer *bx = NULL, *by = NULL;
        CHECK(!qp_buffer_create(cpu, (size_t)M * K * 2, &bx) && !qp_buffer_create(cpu, (size_t)M * N * 4, &by), "buffers");
        st = qp_linear_forward_buffers(lin, bx, M, by);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "buffers too small"), "2-byte x buffer: %s", qp_last_error(ctx));
        qp_buffer_destroy(bx);
        bx = NULL;
        CHECK(!qp_buffer_create(cpu, (size_t)M * K * 4, &bx) && !qp_buffer_upload(bx, 0, x, sizeof x), "x buffer");
        CHECK(!qp_linear_forward_buffers(lin, bx, M, by) && !qp_buffer_download(by, 0, y2, sizeof y2) &&
                  !memcmp(y1, y2, sizeof y2), "scheme %d: forward_buffers differs", which);
        qp_buffer_destroy(bx);
        qp_buffer_destroy(by);
        /* a bias that is no float tensor is a dtype error naming it (a float
         * one of another dtype is converted, as vLLM's copy_ converts it) */
        t[nt - 1].dtype = QP_DTYPE_I32;
        qp_linear *bad = NULL;
        st = qp_linear_create(cpu, &sc, N, K, t, nt, &o, &bad);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "'bias' must be a float tensor"), "i32 bias: %s",
              qp_last_error(ctx));
        /* every other device refuses F32 with QP_ERR_UNSUPPORTED */
        t[nt - 1].dtype = QP_DTYPE_F32;
        size_t nd = 0;
        qp_device_count(ctx, &nd);
        for (size_t i = 0; i < nd; i++) {
            qp_device *dev;
            qp_device_info info = {.struct_size = sizeof info};
            if (qp_device_get(ctx, i, &dev) || qp_device_get_info(dev, &info) || !strcmp(info.backend, "cpu")) continue;
            st = qp_linear_create(dev, &sc, N, K, t, nt, &o, &bad);
            CHECK(st == QP_ERR_UNSUPPORTED && bad == NULL && strstr(qp_last_error(ctx), "fp32 activations run on the cpu reference only"),
                  "%s: %s %s", info.backend, qp_status_str(st), qp_last_error(ctx));
            if (which == 0) printf("%s:%d refuses fp32 activations: %s\n", info.backend, info.index, qp_last_error(ctx));
        }
        qp_linear_destroy(lin);
        qp_qweights_destroy(q);
    }
    /* QQQ: vLLM's message for a float32 model */
    case_layer l;
    char err[256];
    CHECK(!case_layer_make(ctx, case_scheme_find("qqq-channel"), 64, 128, QP_DTYPE_F16, 1, NULL, 0, &l, err, sizeof err), "%s", err);
    qp_linear *lin = NULL;
    size_t nt = 0;
    qp_tensor t[8];
    for (size_t i = 0; i < l.n_tensors; i++)
        if (strcmp(l.tensors[i].name, "bias")) t[nt++] = l.tensors[i];
    qp_status st = qp_linear_create(cpu, &l.scheme, 64, 128, t, nt, &o, &lin);
    CHECK(st == QP_ERR_VALUE && strstr(qp_last_error(ctx), "The params dtype must be float16, but got torch.float32"), "%s",
          qp_last_error(ctx));
    case_layer_free(&l);
}

static void env_and_specs(void) {
    struct { const char *var, *val; } bad[] = {
        {"QPORT_BACKENDS", "cpu,vulkn"}, {"QPORT_BACKENDS", "cpu,cpu"}, {"QPORT_DEVICE", "vulkan:x"},
        {"QPORT_DEVICE", "vulkn:0"}, {"QPORT_VISIBLE_DEVICES", "cpu,:3"}, {"QPORT_VK_VALIDATION", "maybe"},
        {"QPORT_TEST_FLIP_BIT", "99"}, {"QPORT_CL_DIV", "fastest"}, {"QPORT_CL_FAKE_INT_DOT", "yes"},
        {"QPORT_VK_MAX_BINDING", "-4096"}, {"QPORT_CL_WEIGHT_CHUNK", "12k"}, {"QPORT_VK_NO_INT_DOT", "maybe"},
        {"QPORT_CUDA_QQQ_W8", "2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i].var, bad[i].val, 1);
        qp_context *c;
        qp_context_create(&c);
        size_t n = 99;
        qp_status st = qp_device_count(c, &n);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(c), bad[i].var) && n == 0, "%s=%s: %s",
              bad[i].var, bad[i].val, qp_last_error(c));
        qp_context_destroy(c);
        unsetenv(bad[i].var);
    }
    /* only the reference, from a path without plugins */
    setenv("QPORT_BACKEND_PATH", "/nonexistent", 1);
    setenv("QPORT_BACKENDS", "vulkan,cpu", 1);
    qp_context *c;
    qp_context_create(&c);
    size_t n;
    CHECK(!qp_device_count(c, &n) && n == 1, "devices: %zu", n);
    qp_backend_status bs;
    CHECK(!qp_backend_get_status(c, 0, &bs) && !strcmp(bs.name, "vulkan") && !bs.loaded &&
          strstr(bs.note, "not found in QPORT_BACKEND_PATH"), "vulkan status: %s", bs.note);
    qp_device *d;
    CHECK(qp_device_find(c, "vulkan:0", &d) == QP_ERR_NOT_FOUND && strstr(qp_last_error(c), "devices: cpu:0"), "%s", qp_last_error(c));
    CHECK(qp_device_find(c, "REFERENCE", &d) == QP_OK, "name substring, any case");
    CHECK(qp_device_find(c, "cuda:x", &d) == QP_ERR_INVALID_ARGUMENT, "bad spec");
    CHECK(!qp_device_pick(c, NULL, &d), "pick");
    qp_device_info di = {.struct_size = sizeof di};
    CHECK(!qp_device_get_info(d, &di) && !strcmp(di.backend, "cpu") && di.kind == QP_DEVICE_REFERENCE, "picked %s", di.backend);
    qp_context_destroy(c);
    /* QPORT_DEVICE wins, and a device that does not exist is an error */
    setenv("QPORT_DEVICE", "opencl:0", 1);
    qp_context_create(&c);
    CHECK(qp_device_pick(c, NULL, &d) == QP_ERR_NOT_FOUND && strstr(qp_last_error(c), "QPORT_DEVICE"), "%s", qp_last_error(c));
    qp_context_destroy(c);
    unsetenv("QPORT_DEVICE");
    /* the cpu backend left out: zero devices, not an error */
    setenv("QPORT_BACKENDS", "opencl", 1);
    qp_context_create(&c);
    CHECK(!qp_device_count(c, &n) && n == 0, "devices without cpu: %zu", n);
    CHECK(qp_device_pick(c, NULL, &d) == QP_ERR_NOT_FOUND, "pick with no devices");
    qp_context_destroy(c);
    unsetenv("QPORT_BACKENDS");
    unsetenv("QPORT_BACKEND_PATH");
}

/* docs/c-api.md (threads): forwards from several threads, on one shared layer and on
 * per-thread layers of one device, give the single-thread result. */
typedef struct job { qp_linear *lin; const uint16_t *x; const uint16_t *want; int M, N, bad; } job;
static void *worker(void *p) {
    job *j = p;
    uint16_t *y = malloc(sizeof(uint16_t) * (size_t)j->M * j->N);
    for (int it = 0; it < 50 && y; it++) {
        if (qp_linear_forward(j->lin, j->x, j->M, y) || memcmp(y, j->want, sizeof(uint16_t) * (size_t)j->M * j->N)) j->bad++;
    }
    free(y);
    return NULL;
}

static void threads(void) {
    case_layer l;
    char err[256];
    enum { M = 4, N = 64, K = 128, T = 6 };
    CHECK(!case_layer_make(ctx, case_scheme_find("qqq-channel"), N, K, QP_DTYPE_F16, 9, NULL, 0, &l, err, sizeof err), "%s", err);
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear *shared, *own[T];
    CHECK(!qp_linear_create(cpu, &l.scheme, N, K, l.tensors, l.n_tensors, NULL, &shared), "%s", qp_last_error(ctx));
    static uint16_t x[M * K], want[M * N];
    case_activations(DIST_OUTLIERS, QP_DTYPE_F16, M, K, 5, x);
    CHECK(!qp_linear_forward(shared, x, M, want), "%s", qp_last_error(ctx));
    pthread_t th[2 * T];
    job jobs[2 * T];
    for (int i = 0; i < T; i++) {
        CHECK(!qp_linear_create(cpu, &l.scheme, N, K, l.tensors, l.n_tensors, NULL, &own[i]), "%s", qp_last_error(ctx));
        jobs[i] = (job){shared, x, want, M, N, 0};
        jobs[T + i] = (job){own[i], x, want, M, N, 0};
    }
    for (int i = 0; i < 2 * T; i++) pthread_create(&th[i], NULL, worker, &jobs[i]);
    for (int i = 0; i < 2 * T; i++) { pthread_join(th[i], NULL); CHECK(!jobs[i].bad, "thread %d: %d bad forwards", i, jobs[i].bad); }
    for (int i = 0; i < T; i++) qp_linear_destroy(own[i]);
    qp_linear_destroy(shared);
    case_layer_free(&l);
}

/* Caller-supplied sizes: shard rows that do not sum to N or are
 * negative (they once overran the weight in qp_fp8_requantize_max_scale),
 * dims that are negative or whose product wraps around to N*K, bad ranks,
 * dtypes and data, and layer shapes past QP_DIM_MAX all come back as
 * QP_ERR_INVALID_ARGUMENT naming the argument; the good shards still bind. */
static void expect_arg(qp_status st, const char *want, int line) {
    if (st != QP_ERR_INVALID_ARGUMENT || !strstr(qp_last_error(ctx), want)) {
        tu_failures++;
        fprintf(stderr, "FAIL %s:%d: want INVALID_ARGUMENT '%s', got %s '%s'\n", __FILE__, line, want, qp_status_str(st),
                qp_last_error(ctx));
    }
}
#define EXPECT_ARG(st, want) expect_arg(st, want, __LINE__)

static void bad_sizes(void) {
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    case_layer l;
    char err[256];
    CHECK(!case_layer_make(ctx, case_scheme_find("fp8-dyn-tensor"), 64, 32, QP_DTYPE_F16, 3, NULL, 0, &l, err, sizeof err), "%s", err);
    qp_tensor t[8];
    memcpy(t, l.tensors, sizeof t);
    size_t iw = 9, is = 9;
    for (size_t i = 0; i < l.n_tensors; i++) {
        if (!strcmp(t[i].name, "weight")) iw = i;
        if (!strcmp(t[i].name, "weight_scale")) is = i;
    }
    CHECK(iw < 9 && is < 9, "fp8 layer tensors");
    float sc3[3] = {0.5f, 0.25f, 0.125f};
    t[is] = (qp_tensor){"weight_scale", QP_DTYPE_F32, 1, {3}, sc3}; /* one per shard (q, k, v) */
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.layer = "model.layers.0.self_attn.qkv_proj";
    qp_linear *lin = NULL;
    int bad1[2] = {100000, -99936}, bad2[3] = {32, 16, 15}, good[3] = {32, 16, 16};
    o.shard_rows = bad1; o.n_shards = 2;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, &o, &lin), "shard_rows[1] = -99936 is negative");
    CHECK(strstr(qp_last_error(ctx), "qkv_proj"), "layer named: %s", qp_last_error(ctx));
    o.shard_rows = bad2; o.n_shards = 3;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, &o, &lin), "shard_rows sum to 63 rows, not the layer's N = 64");
    o.shard_rows = NULL;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, &o, &lin), "shard_rows is NULL with n_shards = 3");
    o.shard_rows = good; o.n_shards = 1000;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, &o, &lin), "n_shards = 1000");
    o.n_shards = 3;
    CHECK(!qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, &o, &lin), "good shards: %s", qp_last_error(ctx));
    qp_linear_destroy(lin);
    lin = NULL;
    qp_linear_options_init(&o);
    /* dims: negative ones whose product wraps to N*K, overflow, rank, data, dtype, name */
    qp_tensor w = t[iw];
    t[is] = l.tensors[is];
    t[iw].ndim = 2; t[iw].shape[0] = -1; t[iw].shape[1] = -64 * 32;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "tensor 'weight': dimension 0 is -1");
    t[iw].shape[0] = (int64_t)1 << 40; t[iw].shape[1] = (int64_t)1 << 40;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "element count overflows");
    t[iw] = w; t[iw].ndim = 5;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "tensor 'weight' has rank 5");
    t[iw] = w; t[iw].data = NULL;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "tensor 'weight' has 2048 elements and no data");
    t[iw] = w; t[iw].dtype = (qp_dtype)99;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "tensor 'weight' has no qport dtype (99)");
    t[iw] = w; t[iw].name = NULL;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "has no name");
    t[iw] = w;
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, NULL, 2, NULL, &lin), "tensors is NULL with n_tensors = 2");
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, 32, t, 100, NULL, &lin), "n_tensors = 100");
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 2147483647, 32, t, l.n_tensors, NULL, &lin), "bad layer shape N = 2147483647");
    EXPECT_ARG(qp_linear_create(cpu, &l.scheme, 64, -32, t, l.n_tensors, NULL, &lin), "bad layer shape N = 64, K = -32");
    qp_scheme s = l.scheme;
    s.weight.group_size = -5;
    EXPECT_ARG(qp_linear_create(cpu, &s, 64, 32, t, l.n_tensors, NULL, &lin), "scheme weight: group_size -5");
    s = l.scheme;
    s.weight.block[0] = -128;
    EXPECT_ARG(qp_linear_create(cpu, &s, 64, 32, t, l.n_tensors, NULL, &lin), "block [-128, 0]");
    CHECK(lin == NULL, "no layer on failure");
    CHECK(!qp_linear_create(cpu, &l.scheme, 64, 32, t, l.n_tensors, NULL, &lin), "the unchanged layer: %s", qp_last_error(ctx));
    qp_linear_destroy(lin);
    /* the process-after-loading helpers themselves */
    uint8_t wq[4] = {0x38, 0x38, 0x38, 0x38};
    int neg[2] = {1, -1};
    float s2[2] = {1, 2}, smax = 0, ch[2];
    EXPECT_ARG(qp_fp8_requantize_max_scale(ctx, wq, 2, neg, 2, s2, &smax), "shard 1 has -1 rows");
    CHECK(wq[0] == 0x38, "nothing requantized before the check");
    EXPECT_ARG(qp_scale_to_channelwise(ctx, s2, neg, 2, ch, 2), "shards hold 1 rows, the output 2");
    case_layer_free(&l);

    /* MoE: shapes whose stacked counts overflow, bad tensors, routing options checked at create */
    qp_scheme us;
    memset(&us, 0, sizeof us);
    us.struct_size = sizeof us;
    us.kind = QP_SCHEME_UNQUANTIZED;
    qp_moe_options mo;
    qp_moe_options_init(&mo);
    qp_moe *moe = NULL;
    uint16_t w13[2 * 2 * 4 * 4] = {0}, w2[2 * 4 * 4] = {0};
    qp_tensor mt[2] = {{"w13_weight", QP_DTYPE_F16, 3, {2, 8, 4}, w13}, {"w2_weight", QP_DTYPE_F16, 3, {2, 4, 4}, w2}};
    CHECK(!qp_moe_create(cpu, &us, 2, 4, 4, mt, 2, &mo, &moe), "good MoE: %s", qp_last_error(ctx));
    qp_moe_destroy(moe);
    moe = NULL;
    EXPECT_ARG(qp_moe_create(cpu, &us, 1 << 20, 1 << 20, 1 << 20, mt, 2, &mo, &moe), "bad MoE shape E = 1048576");
    EXPECT_ARG(qp_moe_create(cpu, &us, 2, 4, 1 << 28, mt, 2, &mo, &moe), "bad MoE shape");
    mt[0].shape[0] = -2; mt[0].shape[2] = -16;
    EXPECT_ARG(qp_moe_create(cpu, &us, 2, 4, 4, mt, 2, &mo, &moe), "tensor 'w13_weight': dimension 0 is -2");
    mt[0].shape[0] = 2; mt[0].shape[2] = 4;
    mo.num_expert_group = 3; mo.topk_group = 1;
    EXPECT_ARG(qp_moe_create(cpu, &us, 2, 4, 4, mt, 2, &mo, &moe), "grouped top-k needs E divisible by num_expert_group");
    qp_moe_options_init(&mo);
    mo.scoring = (qp_moe_scoring)7;
    EXPECT_ARG(qp_moe_create(cpu, &us, 2, 4, 4, mt, 2, &mo, &moe), "unknown scoring function 7");
    CHECK(moe == NULL, "no MoE on failure");
}

int main(void) {
    qp_context_create(&ctx);
    same_as_direct_int8();
    bad_tensors();
    bad_sizes();
    fp32_layers();
    env_and_specs();
    threads();
    qp_context_destroy(ctx);
    return tu_finish("linear");
}
