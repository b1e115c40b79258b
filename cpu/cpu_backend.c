/* The `cpu` backend: the reference kernels (cpu/ref_*.c) behind the backend
 * table, so the oracle runs through exactly the path every GPU backend
 * runs (qp_linear_create -> prepare -> forward). Built in, never a plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "registry.h"

typedef struct cpu_state {
    const qp_host *host;
    int dev; /* the one device's handle is &dev */
} cpu_state;

typedef struct cpu_lin {
    qp_scheme_kind kind;
    qp_dtype dtype;
    int N, K, group;
    qp_act_mode act;
    int symmetric, ue8m0, w_per_channel, pack, w_block;
    int w_elem, mx_act, scale_rows; /* OCP-MX */
    float input_scale, weight_scale_2; /* NVFP4 reuses input_scale for input_scale_2 */
    int32_t input_zp;
    void *blob[8]; /* owned copies: weight, scales, bias, ... */
    float nv_g;    /* NVFP4 from compressed-tensors: g as stored, else 0 */
} cpu_lin;

static qp_status cpu_init(const qp_host *host, void **state) {
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return QP_ERR_OUT_OF_MEMORY;
    s->host = host;
    *state = s;
    return QP_OK;
}
static void cpu_shutdown(void *state) { free(state); }
static int cpu_device_count(void *state) { (void)state; return 1; }
static void *cpu_device_get(void *state, int i) { return i == 0 ? state : NULL; }
static const qp_host *host_of(void *dev) { return ((cpu_state *)dev)->host; }

static qp_status cpu_device_info(void *dev, qp_device_info *o) {
    (void)dev;
    snprintf(o->name, sizeof o->name, "qport reference (CPU)");
    snprintf(o->vendor, sizeof o->vendor, "qport");
    snprintf(o->driver, sizeof o->driver, "qport %s", qp_version());
    snprintf(o->api_version, sizeof o->api_version, "C11");
    o->kind = QP_DEVICE_REFERENCE;
    o->cuda_cc = -1;
    o->caps = (qp_device_caps){1, 1, 1, 1, 0, 0, 0, 0, 1, 1, -1, -1, -1};
    return QP_OK;
}

static bool cpu_runs(qp_scheme_kind k);

static qp_status cpu_supports(void *dev, const qp_scheme *s, int M, int N, int K, qp_support_info *out) {
    (void)dev; (void)M; (void)N; (void)K;
    if (cpu_runs(s->kind)) {
        out->level = QP_SUPPORT_NATIVE;
        snprintf(out->reason, sizeof out->reason, "reference loops (exact int32 / fp64 accumulation)");
    } else {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "no reference kernel for %s yet", qp_scheme_kind_name(s->kind));
    }
    return QP_OK;
}

static qp_status cpu_buffer_alloc(void *dev, size_t bytes, void **buf) {
    *buf = malloc(bytes);
    if (!*buf) return host_of(dev)->error(host_of(dev)->ctx, QP_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %zu bytes", bytes);
    return QP_OK;
}
static void cpu_buffer_free(void *dev, void *buf) { (void)dev; free(buf); }
static qp_status cpu_upload(void *dev, void *buf, size_t off, const void *src, size_t n) {
    (void)dev; memcpy((char *)buf + off, src, n); return QP_OK;
}
static qp_status cpu_download(void *dev, void *buf, size_t off, void *dst, size_t n) {
    (void)dev; memcpy(dst, (const char *)buf + off, n); return QP_OK;
}

static void *dup_mem(const void *p, size_t n) {
    if (!p) return NULL;
    void *q = malloc(n ? n : 1);
    if (q) memcpy(q, p, n);
    return q;
}

static const qp_tensor *named(const qp_lin_desc *d, const char *name) {
    for (size_t i = 0; i < d->n_tensors; i++)
        if (d->tensors[i].name && !strcmp(d->tensors[i].name, name)) return &d->tensors[i];
    return NULL;
}

static void cpu_linear_destroy(void *dev, void *lin) {
    (void)dev;
    cpu_lin *l = lin;
    if (!l) return;
    for (int i = 0; i < 8; i++) free(l->blob[i]);
    free(l);
}

/* Copies tensor `name` (required) with an exact byte count. */
static qp_status take(void *dev, const qp_lin_desc *d, cpu_lin *l, int slot, const char *name, qp_dtype dt, size_t bytes) {
    const qp_tensor *t = named(d, name);
    const qp_host *h = host_of(dev);
    if (!t) return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "layer '%s': missing checkpoint tensor '%s'", d->layer, name);
    if (t->dtype != dt || qp_tensor_bytes(t) != bytes)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "layer '%s': tensor '%s' must be %s of %zu bytes, got %s of %zu",
                        d->layer, name, qp_dtype_name(dt), bytes, qp_dtype_name(t->dtype), qp_tensor_bytes(t));
    l->blob[slot] = dup_mem(t->data, bytes);
    return l->blob[slot] ? QP_OK : h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
}

static bool is_float(qp_dtype d) { return d == QP_DTYPE_F32 || d == QP_DTYPE_F16 || d == QP_DTYPE_BF16; }

/* The largest entry of a per-shard scalar scale (max over shards, docs/semantics.md §7,
 * §8), in whichever float dtype the checkpoint holds (vLLM copies it into
 * an fp32 parameter: exact). */
static qp_status max_scale(void *dev, const qp_lin_desc *d, const char *name, float *out) {
    const qp_tensor *t = named(d, name);
    const qp_host *h = host_of(dev);
    size_t n = t && is_float(t->dtype) ? qp_tensor_bytes(t) / (size_t)(qp_format_bits(t->dtype) / 8) : 0;
    if (!n)
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "layer '%s': %s must be a float tensor (f32, f16 or bf16) with one entry per shard",
                        d->layer, name);
    *out = qp_num_load(t->dtype, t->data, 0);
    for (size_t i = 1; i < n; i++) {
        float v = qp_num_load(t->dtype, t->data, i);
        *out = v > *out ? v : *out;
    }
    return QP_OK;
}

/* W4A16 weight_scale (docs/semantics.md §17) into blob 1 as the params-dtype tensor
 * [K/g][8*ceil(N/8)] the reference reads: the checkpoint's [K/g][N] is
 * zero-padded as vLLM's loader pads it; the params dtype is act_dtype, and
 * a checkpoint scale of another float dtype is converted as vLLM's copy_
 * into the parameter converts it (exact when wider, RNE when narrower). */
static qp_status take_w4a16_scale(void *dev, const qp_lin_desc *d, cpu_lin *l, size_t ng, size_t nc) {
    const qp_tensor *t = named(d, "weight_scale");
    const qp_host *h = host_of(dev);
    size_t N = (size_t)d->N, n = 0, es = qp_num_elem_size(d->act_dtype);
    bool dt_ok = t && is_float(t->dtype); /* copy_ into the params dtype: rounded if narrower */
    if (t && dt_ok) n = qp_tensor_bytes(t) / (size_t)(qp_format_bits(t->dtype) / 8);
    if (!t || !dt_ok || (n != ng * N && n != ng * 8 * nc))
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT,
                        "layer '%s': tensor 'weight_scale' must be a float tensor [%zu, %zu] or [%zu, %zu], got %s of %zu elements",
                        d->layer, ng, N, ng, 8 * nc, t ? qp_dtype_name(t->dtype) : "none", n);
    size_t stride = n == ng * N ? N : 8 * nc;
    l->blob[1] = calloc(ng * 8 * nc, es);
    if (!l->blob[1]) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t gi = 0; gi < ng; gi++)
        for (size_t c = 0; c < N; c++)
            qp_num_store(d->act_dtype, l->blob[1], gi * 8 * nc + c, qp_num_load(t->dtype, t->data, gi * stride + c));
    return QP_OK;
}

/* A compressed-tensors W4A16 layer has no Quark tensors: the reference
 * reads the codes, zero points and params-dtype scales the binder unpacked
 * from weight_packed / weight_zero_point / weight_scale (api/bind_ct.c),
 * repacked into the Quark layout it takes (natural nibble order). The
 * exporter fixtures (tests/ct_exports) check that unpacking independently. */
static qp_status take_ct_w4a16(void *dev, const qp_lin_desc *d, cpu_lin *l) {
    const qp_host *h = host_of(dev);
    size_t N = (size_t)d->N, K = (size_t)d->K, nc = (N + 7) / 8;
    int g = d->group_size > 0 ? d->group_size : d->K;
    size_t G = K / (size_t)g, es = qp_num_elem_size(d->act_dtype);
    if (!d->q4 || !d->w4_scale || (!d->w4_signed && !d->w4_zero))
        return h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "layer '%s': the W4A16 payload is incomplete", d->layer);
    l->group = d->group_size > 0 ? g : -1;
    l->symmetric = d->w4_signed;
    l->pack = QP_PACK_ORDER;
    uint8_t *kn = malloc(K * N > G * N ? K * N : G * N + 1);
    l->blob[0] = malloc(K * nc * 4);
    l->blob[1] = calloc(G * 8 * nc, es);
    l->blob[2] = d->w4_signed ? NULL : malloc(G * nc * 4 + 1);
    qp_status st = kn && l->blob[0] && l->blob[1] && (d->w4_signed || l->blob[2]) ? QP_OK
                 : h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t n = 0; !st && n < N; n++)
        for (size_t k = 0; k < K; k++) kn[k * N + n] = (uint8_t)d->q4[n * K + k] & 15u;
    if (!st) st = qp_pack_int4_quark(kn, (int)K, (int)N, QP_PACK_ORDER, l->blob[0]);
    if (!st && !d->w4_signed) st = qp_pack_int4_quark(d->w4_zero, (int)G, (int)N, QP_PACK_ORDER, l->blob[2]);
    for (size_t gi = 0; !st && gi < G; gi++)
        for (size_t n = 0; n < N; n++) qp_num_store(d->act_dtype, l->blob[1], gi * 8 * nc + n, d->w4_scale[gi * N + n]);
    free(kn);
    return st;
}

static qp_status cpu_linear_prepare(void *dev, const qp_lin_desc *d, unsigned path, void **out) {
    const qp_host *h = host_of(dev);
    if (path & (QP_PATH_GEMV | QP_PATH_TILED | QP_PATH_INT_DOT))
        return h->error(h->ctx, QP_ERR_UNSUPPORTED, "cpu: the reference has one path (no GEMV/tiled/int-dot variants)");
    if (!cpu_runs(d->kind))
        return h->error(h->ctx, QP_ERR_UNSUPPORTED, "cpu: no reference kernel for %s yet", qp_scheme_kind_name(d->kind));
    cpu_lin *l = calloc(1, sizeof *l);
    if (!l) return h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    *l = (cpu_lin){d->kind, d->act_dtype, d->N, d->K, d->group_size, d->act, d->act_symmetric, d->ue8m0,
                   d->w_per_channel, d->scheme.pack_method, d->kind == QP_SCHEME_W8A8_FP8_BLOCK,
                   0, 0, 0, d->input_scale, 0, d->input_zp, {0}, 0.0f};
    size_t N = (size_t)d->N, K = (size_t)d->K, nb = (N + 127) / 128 * ((K + 127) / 128);
    bool ok = true;
    qp_status st = QP_OK;
    /* bias: N elements of act_dtype (4 bytes for F32, 2 for F16/BF16) */
    if (d->bias) ok = (l->blob[7] = dup_mem(d->bias, N * qp_num_elem_size(d->act_dtype))) != NULL;
    switch (d->kind) {
    case QP_SCHEME_W8A8_INT8:
        ok = ok && (l->blob[0] = dup_mem(d->w_i8, N * K)) && (l->blob[1] = dup_mem(d->w_scale, N * 4));
        break;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_W8A8_FP8_BLOCK:
        ok = ok && (l->blob[0] = dup_mem(d->w_u8, N * K)) &&
             (l->blob[1] = dup_mem(d->w_scale, (l->w_block ? nb : N) * 4));
        break;
    case QP_SCHEME_QQQ_W4A8:
        ok = ok && (l->blob[0] = dup_mem(d->marlin_B, K / 16 * 2 * N * 4)) &&
             (l->blob[1] = dup_mem(d->marlin_s_channel, N * 4)) &&
             (d->group_size != 128 || (l->blob[2] = dup_mem(d->marlin_s_group, K / 128 * N * 2)));
        break;
    case QP_SCHEME_W4A16_INT4: {
        if (!strncmp(d->scheme.method, "CompressedTensors", 17)) { st = take_ct_w4a16(dev, d, l); break; }
        int g = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : (int)K;
        l->group = d->scheme.weight.group_size > 0 ? g : -1;
        l->symmetric = d->scheme.weight.symmetric;
        if (K % (size_t)g) { st = h->error(h->ctx, QP_ERR_VALUE, "layer '%s': K = %zu is not a multiple of group_size %d", d->layer, K, g); break; }
        size_t nc = (N + 7) / 8, ng = K / (size_t)g;
        st = take(dev, d, l, 0, "weight", QP_DTYPE_I32, K * nc * 4);
        if (!st) st = take_w4a16_scale(dev, d, l, ng, nc);
        if (!st && !l->symmetric) st = take(dev, d, l, 2, "weight_zero_point", QP_DTYPE_I32, ng * nc * 4);
        break;
    }
    case QP_SCHEME_W4A8_MXFP4_FP8: {
        if (K % 32) { st = h->error(h->ctx, QP_ERR_VALUE, "layer '%s': K = %zu is not a multiple of 32", d->layer, K); break; }
        const qp_tensor *ws = named(d, "weight_scale");
        st = take(dev, d, l, 0, "weight", QP_DTYPE_U8, N * K / 2);
        if (!st) st = take(dev, d, l, 1, "weight_scale", ws && ws->dtype == QP_DTYPE_E8M0 ? QP_DTYPE_E8M0 : QP_DTYPE_U8, N * K / 32);
        if (!st) st = max_scale(dev, d, "input_scale", &l->input_scale); /* docs/semantics.md §7: max over shards */
        break;
    }
    case QP_SCHEME_OCP_MX: {
        /* docs/semantics.md §5, §7: packed elements, e8m0 scales [N/R][K/32] */
        qp_dtype we = d->scheme.weight.dtype;
        const qp_qtensor *a = &d->scheme.activation;
        l->w_elem = we;
        l->scale_rows = d->scheme.weight.granularity == QP_GRAN_BLOCK && d->scheme.weight.block[0] > 0 ? d->scheme.weight.block[0] : 1;
        l->mx_act = a->dtype == QP_DTYPE_NONE ? QP_OCP_MX_ACT_NONE
                  : a->dtype == QP_DTYPE_F4_E2M1 ? QP_OCP_MX_ACT_MXFP4
                  : a->dtype == QP_DTYPE_F6_E3M2 ? QP_OCP_MX_ACT_MXFP6_E3M2
                  : a->dtype == QP_DTYPE_F6_E2M3 ? QP_OCP_MX_ACT_MXFP6_E2M3
                  : a->granularity == QP_GRAN_GROUP ? QP_OCP_MX_ACT_MXFP8
                  : a->dynamic ? QP_OCP_MX_ACT_FP8_DYNAMIC : QP_OCP_MX_ACT_FP8_STATIC;
        if (K % 32) { st = h->error(h->ctx, QP_ERR_VALUE, "layer '%s': K = %zu is not a multiple of the OCP MX group size 32", d->layer, K); break; }
        size_t wb = we == QP_DTYPE_F4_E2M1 ? N * K / 2 : we == QP_DTYPE_F8_E4M3FN ? N * K : N * K * 3 / 4;
        size_t rows = (N + (size_t)l->scale_rows - 1) / (size_t)l->scale_rows;
        const qp_tensor *wt = named(d, "weight"), *ws = named(d, "weight_scale");
        st = take(dev, d, l, 0, "weight", wt && wt->dtype == QP_DTYPE_F8_E4M3FN ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8, wb);
        if (!st) st = take(dev, d, l, 1, "weight_scale", ws && ws->dtype == QP_DTYPE_E8M0 ? QP_DTYPE_E8M0 : QP_DTYPE_U8, rows * K / 32);
        break;
    }
    case QP_SCHEME_UNQUANTIZED:
        ok = ok && (l->blob[0] = dup_mem(d->w_act, N * K * qp_num_elem_size(d->act_dtype)));
        break;
    case QP_SCHEME_NVFP4: {
        /* docs/semantics.md §8: global scales are the max over shards */
        if (K % 16) { st = h->error(h->ctx, QP_ERR_VALUE, "Input size per partition (%zu) must be divisible by group size (16)", K); break; }
        if (!strncmp(d->scheme.method, "CompressedTensors", 17)) {
            /* the inverses (quantizing multipliers), max over shards as
             * vLLM's CompressedTensorsW4A4Fp4 keeps them */
            float wg = 0.0f;
            st = take(dev, d, l, 0, "weight_packed", QP_DTYPE_U8, N * K / 2);
            if (!st) st = take(dev, d, l, 1, "weight_scale", QP_DTYPE_F8_E4M3FN, N * K / 16);
            if (!st) st = max_scale(dev, d, "weight_global_scale", &wg);
            if (!st) st = max_scale(dev, d, "input_global_scale", &l->nv_g);
            if (!st && (!(wg > 0.0f) || !(l->nv_g > 0.0f)))
                st = h->error(h->ctx, QP_ERR_INVALID_ARGUMENT, "layer '%s': NVFP4 global scales must be > 0", d->layer);
            l->weight_scale_2 = 1.0f / wg;
            break;
        }
        st = take(dev, d, l, 0, "weight", QP_DTYPE_U8, N * K / 2);
        if (!st) st = take(dev, d, l, 1, "weight_scale", QP_DTYPE_F8_E4M3FN, N * K / 16);
        const char *gname[2] = {"weight_scale_2", "input_scale_2"};
        float *gout[2] = {&l->weight_scale_2, &l->input_scale};
        for (int g = 0; g < 2 && !st; g++) st = max_scale(dev, d, gname[g], gout[g]);
        break;
    }
    default:
        break;
    }
    if (!st && !ok) st = h->error(h->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    if (st) { cpu_linear_destroy(dev, l); return st; }
    *out = l;
    return QP_OK;
}

static qp_status cpu_linear_forward(void *dev, void *lin, void *x, int M, void *y) {
    cpu_lin *l = lin;
    qp_context *ctx = (qp_context *)host_of(dev)->ctx;
    const uint16_t *bias = l->blob[7];
    switch (l->kind) {
    case QP_SCHEME_W8A8_INT8: {
        qp_ref_int8_args a = {l->dtype, x, M, l->K, l->N, l->blob[0], l->blob[1], 1, l->act == QP_ACT_INT8_STATIC,
                              l->symmetric, l->input_scale, l->input_zp, bias};
        return qp_ref_w8a8_int8_forward(ctx, &a, y);
    }
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_W8A8_FP8_BLOCK: {
        static const qp_fp8_act map[] = {[QP_ACT_FP8_STATIC] = QP_FP8_ACT_STATIC,
                                         [QP_ACT_FP8_DYNAMIC_TENSOR] = QP_FP8_ACT_DYNAMIC_TENSOR,
                                         [QP_ACT_FP8_DYNAMIC_TOKEN] = QP_FP8_ACT_DYNAMIC_TOKEN,
                                         [QP_ACT_FP8_GROUP128] = QP_FP8_ACT_GROUP128};
        qp_ref_fp8_args a = {l->dtype, x, M, l->K, l->N, l->blob[0], l->blob[1], 1, map[l->act], l->input_scale,
                             l->ue8m0, bias};
        return qp_ref_w8a8_fp8_forward(ctx, &a, y);
    }
    case QP_SCHEME_QQQ_W4A8:
        return qp_ref_qqq_forward(ctx, x, M, l->K, l->N, l->group, l->blob[0], l->blob[1], l->blob[2], bias, y);
    case QP_SCHEME_W4A16_INT4: {
        qp_ref_w4a16_args a = {l->dtype, x, M, l->K, l->N, l->blob[0], l->blob[2], l->blob[1], l->group, l->symmetric,
                               (qp_pack_method)l->pack, bias};
        return qp_ref_w4a16_forward(ctx, &a, y);
    }
    case QP_SCHEME_W4A8_MXFP4_FP8: {
        qp_ref_w4a8_mxfp4_args a = {l->dtype, x, M, l->K, l->N, l->blob[0], l->blob[1], l->input_scale, bias};
        return qp_ref_w4a8_mxfp4_fp8_forward(ctx, &a, y);
    }
    case QP_SCHEME_OCP_MX: {
        qp_ref_ocp_mx_args a = {l->dtype, x, M, l->K, l->N, (qp_dtype)l->w_elem, l->blob[0], l->blob[1], l->scale_rows,
                                (qp_ocp_mx_act)l->mx_act, bias};
        return qp_ref_ocp_mx_forward(ctx, &a, y);
    }
    case QP_SCHEME_NVFP4: {
        qp_ref_nvfp4_args a = {l->dtype, x, M, l->K, l->N, l->blob[0], l->blob[1], l->weight_scale_2, l->input_scale, bias,
                               l->nv_g};
        return qp_ref_nvfp4_forward(ctx, &a, y);
    }
    case QP_SCHEME_UNQUANTIZED:
        return qp_ref_unquantized_forward(ctx, l->dtype, x, M, l->K, l->N, l->blob[0], bias, y);
    default:
        return host_of(dev)->error(ctx, QP_ERR_INTERNAL, "cpu: scheme %s prepared but not runnable", qp_scheme_kind_name(l->kind));
    }
}

static void cpu_describe(void *dev, void *lin, int M, char *out, size_t cap) {
    (void)dev; (void)lin; (void)M;
    snprintf(out, cap, "reference, host-timed"); /* qport bench: clock_gettime, no device */
}

/* Benchmarks: there is no device here, so the "device timers"
 * are the host's monotonic clock around each run. They measure the
 * reference loops (double / int64 accumulation, one thread), which are
 * written for exactness, not speed: not representative of any GPU. */
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static qp_status cpu_linear_time(void *dev, void *lin, void *x, int M, void *y, int reps, double *total_ms,
                                 double *gemm_ms) {
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms();
        qp_status st = cpu_linear_forward(dev, lin, x, M, y);
        double t1 = now_ms();
        if (st) return st;
        total_ms[i] = t1 - t0;
        gemm_ms[i] = -1.0; /* the reference quantizes inside its forward */
    }
    return QP_OK;
}

static qp_status cpu_buffer_copy_time(void *dev, void *src, void *dst, size_t bytes, int reps, double *ms) {
    (void)dev;
    for (int i = 0; i < reps; i++) {
        double t0 = now_ms();
        memcpy(dst, src, bytes);
        /* keeps the copy from being elided or overlapped with the clock */
        __asm__ __volatile__("" : : "r"(dst) : "memory");
        ms[i] = now_ms() - t0;
    }
    return QP_OK;
}

typedef struct cpu_rot {
    int r;
    int8_t H[];
} cpu_rot;

static qp_status cpu_rotation_prepare(void *dev, const int8_t *H, int r, float c, void **out) {
    (void)c; /* the reference recomputes qp_rotation_norm(r), the same value */
    cpu_rot *rot = malloc(sizeof *rot + (size_t)r * (size_t)r);
    if (!rot) return host_of(dev)->error(host_of(dev)->ctx, QP_ERR_OUT_OF_MEMORY, "out of memory");
    rot->r = r;
    memcpy(rot->H, H, (size_t)r * (size_t)r);
    *out = rot;
    return QP_OK;
}
static void cpu_rotation_destroy(void *dev, void *rot) { (void)dev; free(rot); }
static qp_status cpu_rotation_forward(void *dev, void *rot, qp_dtype dt, void *x, int M, int K, void *y) {
    cpu_rot *r = rot;
    return qp_ref_rotation_forward((qp_context *)host_of(dev)->ctx, dt, x, M, K, r->H, r->r, y);
}
static qp_status cpu_kv_quantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return qp_ref_kv_quantize((qp_context *)host_of(dev)->ctx, dt, src, n, scale, dst);
}
static qp_status cpu_kv_dequantize(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst) {
    return qp_ref_kv_dequantize((qp_context *)host_of(dev)->ctx, dt, src, n, scale, dst);
}
static qp_status cpu_buffer_copy(void *dev, void *src, size_t so, void *dst, size_t dof, size_t bytes) {
    (void)dev;
    memmove((char *)dst + dof, (const char *)src + so, bytes);
    return QP_OK;
}

/* Host memory is the cpu device's memory: an application's pointer is a
 * buffer as it is (offset applied), and every op completes before it
 * returns, so there is nothing to flush, wait for or signal. */
static qp_status cpu_buffer_import(void *dev, const qp_buffer_import_desc *d, void **buf) {
    if (!d->host_ptr)
        return host_of(dev)->error(host_of(dev)->ctx, QP_ERR_INVALID_ARGUMENT,
                                   "cpu: qp_buffer_import takes host_ptr (host memory) on the cpu reference device");
    *buf = (char *)d->host_ptr + d->offset;
    return QP_OK;
}
static void cpu_buffer_unimport(void *dev, void *buf) { (void)dev; (void)buf; }
static qp_status cpu_buffer_native(void *dev, void *buf, qp_buffer_native *o) {
    (void)dev;
    o->api = QP_NATIVE_HOST;
    o->ptr = buf;
    return QP_OK;
}
static qp_status cpu_device_native(void *dev, qp_device_native *o) {
    (void)dev;
    o->api = QP_NATIVE_HOST;
    return QP_OK;
}

/* The scheme kinds linear_prepare runs (the registry checks that the table
 * names every linear kind; the reference runs them all). */
static const qp_backend_kind cpu_kinds[] = {QP_BACKEND_KINDS_ABI5_RUN};

static const qp_backend_ops cpu_ops = {
    QP_BACKEND_ABI_VERSION, sizeof(qp_backend_ops), "cpu", cpu_init, cpu_shutdown, cpu_device_count, cpu_device_get,
    cpu_device_info, cpu_supports, cpu_buffer_alloc, cpu_buffer_free, cpu_upload, cpu_download, cpu_linear_prepare,
    cpu_linear_destroy, cpu_linear_forward, cpu_describe, NULL,
    .rotation_prepare = cpu_rotation_prepare, .rotation_destroy = cpu_rotation_destroy,
    .rotation_forward = cpu_rotation_forward, .kv_quantize = cpu_kv_quantize, .kv_dequantize = cpu_kv_dequantize,
    .buffer_copy = cpu_buffer_copy, .linear_time = cpu_linear_time, .buffer_copy_time = cpu_buffer_copy_time,
    .buffer_import = cpu_buffer_import, .buffer_unimport = cpu_buffer_unimport, .buffer_native = cpu_buffer_native,
    .device_native = cpu_device_native,
    .linear_kinds = cpu_kinds,
    .n_linear_kinds = sizeof cpu_kinds / sizeof *cpu_kinds,
    /* vendor_gemm_time: none (no vendor BLAS is linked; qport bench's
     * arithmetic limit on the cpu device is its fp16 layer) */
};

static bool cpu_runs(qp_scheme_kind k) {
    for (size_t i = 0; i < sizeof cpu_kinds / sizeof *cpu_kinds; i++)
        if (cpu_kinds[i].kind == k) return cpu_kinds[i].runs;
    return false;
}

const qp_backend_ops *qp_cpu_backend_ops(void) { return &cpu_ops; }
