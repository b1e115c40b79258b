/* A fake "cuda" GPU for `qport bench` tests (tests/test_bench_cli.sh): host
 * memory, a linear layer that writes zeros, and -- with FAKE_TIMED -- fixed
 * synthetic timers, a copy, and vendor GEMM baselines (fp16 and int8; fp8
 * refused), so the bench's baseline and ratio code runs without a GPU.
 * Without FAKE_TIMED it has none of the optional ops: every case must be a
 * SKIP with the reason. The numbers mean nothing; only their plumbing is
 * tested. Never installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef struct fake_lin { int N, K; } fake_lin;
typedef struct fake_buf { size_t n; unsigned char b[]; } fake_buf;

static const qp_host *host;

static qp_status init(const qp_host *h, void **state) { host = h; *state = (void *)h; return QP_OK; }
static void shutdown_(void *s) { (void)s; }
static int count1(void *s) { (void)s; return 1; }
static void *get_one(void *s, int i) { return i == 0 ? s : NULL; }
static qp_status info(void *dev, qp_device_info *o) {
    (void)dev;
#ifdef FAKE_TIMED
    snprintf(o->name, sizeof o->name, "Fake Timed GPU");
#else
    snprintf(o->name, sizeof o->name, "Fake GPU without timers");
#endif
    o->kind = QP_DEVICE_DISCRETE_GPU;
    o->memory_bytes = (uint64_t)1 << 30;
    o->cuda_cc = 90;
    return QP_OK;
}
static qp_status supports(void *dev, const qp_scheme *s, int M, int N, int K, qp_support_info *out) {
    (void)dev; (void)M; (void)N; (void)K;
    /* one scheme the fake refuses, to show the SKIP row */
    if (s->kind == QP_SCHEME_NVFP4) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "unsupported: not yet implemented on the fake GPU");
    } else {
        out->level = QP_SUPPORT_NATIVE;
    }
    return QP_OK;
}
static qp_status balloc(void *dev, size_t bytes, void **buf) {
    (void)dev;
    if (bytes > ((size_t)1 << 30)) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "fake: %zu bytes do not fit", bytes);
    fake_buf *b = calloc(1, sizeof *b + bytes);
    if (!b) return host->error(host->ctx, QP_ERR_OUT_OF_MEMORY, "fake: out of memory");
    b->n = bytes;
    *buf = b;
    return QP_OK;
}
static void bfree(void *dev, void *buf) { (void)dev; free(buf); }
static qp_status up(void *dev, void *buf, size_t off, const void *src, size_t n) {
    (void)dev; memcpy(((fake_buf *)buf)->b + off, src, n); return QP_OK;
}
static qp_status down(void *dev, void *buf, size_t off, void *dst, size_t n) {
    (void)dev; memcpy(dst, ((fake_buf *)buf)->b + off, n); return QP_OK;
}
static qp_status prepare(void *dev, const qp_lin_desc *d, unsigned path, void **lin) {
    (void)dev; (void)path;
    if (d->kind == QP_SCHEME_NVFP4) return host->error(host->ctx, QP_ERR_UNSUPPORTED, "fake: no NVFP4 kernel");
    fake_lin *l = malloc(sizeof *l);
    if (!l) return QP_ERR_OUT_OF_MEMORY;
    *l = (fake_lin){d->N, d->K};
    *lin = l;
    return QP_OK;
}
static void destroy(void *dev, void *lin) { (void)dev; free(lin); }
static qp_status forward(void *dev, void *lin, void *x, int M, void *y) {
    (void)dev; (void)x;
    fake_lin *l = lin;
    memset(((fake_buf *)y)->b, 0, (size_t)M * (size_t)l->N * 2);
    return QP_OK;
}
static void describe(void *dev, void *lin, int M, char *out, size_t cap) {
    (void)dev; (void)lin;
    snprintf(out, cap, "%s", M <= 16 ? "fake gemv" : "fake tiled");
}
static qp_status sync_(void *dev) { (void)dev; return QP_OK; }

#ifdef FAKE_TIMED
/* 1 TFLOP/s and 1 TB/s worth of "time", a fused path for M <= 16 */
static qp_status ltime(void *dev, void *lin, void *x, int M, void *y, int reps, double *tot, double *gemm) {
    fake_lin *l = lin;
    for (int i = 0; i < reps; i++) {
        qp_status st = forward(dev, lin, x, M, y);
        if (st) return st;
        tot[i] = 2.0 * M * l->N * (double)l->K * 1e-9 + 0.001 * (1 + i % 3);
        gemm[i] = M <= 16 ? -1.0 : 0.9 * tot[i];
    }
    return QP_OK;
}
static qp_status copy(void *dev, void *src, size_t so, void *dst, size_t dof, size_t n) {
    (void)dev; memmove(((fake_buf *)dst)->b + dof, ((fake_buf *)src)->b + so, n); return QP_OK;
}
static qp_status copy_time(void *dev, void *src, void *dst, size_t n, int reps, double *ms) {
    for (int i = 0; i < reps; i++) {
        copy(dev, src, 0, dst, 0, n);
        ms[i] = 2.0 * (double)n * 1e-9 * (1 + 0.01 * (i % 2));
    }
    return QP_OK;
}
static qp_status vendor(void *dev, qp_dtype in, int M, int N, int K, int reps, double *ms, char *name, size_t cap) {
    (void)dev;
    /* worded as the CUDA plugin words its refusals: one operand type only */
    if (in == QP_DTYPE_F8_E4M3FN)
        return host->error(host->ctx, QP_ERR_UNSUPPORTED, "fake: vendor_gemm_time: unsupported: no fp8 GEMM before sm_89");
    snprintf(name, cap, "fake BLAS %s TN", in == QP_DTYPE_I8 ? "int8" : "fp16");
    for (int i = 0; i < reps; i++) ms[i] = 2.0 * M * N * (double)K * (in == QP_DTYPE_I8 ? 0.25e-9 : 0.5e-9);
    return QP_OK;
}
#endif

static const qp_backend_kind kinds[] = {
    {QP_SCHEME_UNQUANTIZED, 1, NULL}, {QP_SCHEME_W8A8_FP8, 1, NULL}, {QP_SCHEME_W8A8_FP8_BLOCK, 1, NULL},
    {QP_SCHEME_W8A8_INT8, 1, NULL}, {QP_SCHEME_W4A16_INT4, 1, NULL}, {QP_SCHEME_OCP_MX, 1, NULL},
    {QP_SCHEME_W4A8_MXFP4_FP8, 1, NULL}, {QP_SCHEME_QQQ_W4A8, 1, NULL}, {QP_SCHEME_HF_FP8, 1, NULL},
    {QP_SCHEME_NVFP4, 1, NULL},
};

static const qp_backend_ops ops = {
    .abi_version = QP_BACKEND_ABI_VERSION, .struct_size = sizeof(qp_backend_ops), .name = "cuda", .init = init,
    .shutdown = shutdown_, .device_count = count1, .device_get = get_one, .device_info = info,
    .device_supports = supports, .buffer_alloc = balloc, .buffer_free = bfree, .buffer_upload = up,
    .buffer_download = down, .linear_prepare = prepare, .linear_destroy = destroy, .linear_forward = forward,
    .linear_describe = describe, .synchronize = sync_, .linear_kinds = kinds,
    .n_linear_kinds = sizeof kinds / sizeof *kinds,
#ifdef FAKE_TIMED
    .linear_time = ltime, .buffer_copy = copy, .buffer_copy_time = copy_time, .vendor_gemm_time = vendor,
#endif
};

__attribute__((visibility("default"))) const qp_backend_ops *qp_backend_entry(void) { return &ops; }
