/* The layers around the quantized GEMMs: the fp8 KV cache, Quark's
 * online input rotation, unquantized layers, and the core's binding of the
 * block-float schemes -- against independent oracles, on every device that
 * offers the kernels, and with the errors users get. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cases.h"
#include "testutil.h"

static qp_context *ctx;

/* Nearest e4m3fn value to q by brute force over the 256 codes (ties to the
 * even code), saturating at +-448; NaN -> 0x7F | sign. Independent of
 * qp_format_encode. */
static uint8_t e4m3_oracle(float q) {
    if (isnan(q)) return (uint8_t)(signbit(q) ? 0xFF : 0x7F);
    if (q > 448.0f) return 0x7E;
    if (q < -448.0f) return 0xFE;
    int best = -1;
    double bd = INFINITY;
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F) continue; /* NaN codes */
        int e = (c >> 3) & 0xF, m = c & 7;
        double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
        if (c & 0x80) v = -v;
        if ((c & 0x80) != (signbit(q) ? 0x80 : 0)) continue; /* keep the sign of zero */
        double d = fabs(v - (double)q);
        if (d < bd || (d == bd && (c & 1) == 0)) { bd = d; best = c; }
    }
    return (uint8_t)best;
}

static void kv_reference(void) {
    const qp_dtype dts[2] = {QP_DTYPE_F16, QP_DTYPE_BF16};
    const float scales[3] = {1.0f, 0.0371f, 3.5f};
    uint16_t *x = malloc(65536 * 2);
    uint8_t *q = malloc(65536);
    for (int i = 0; i < 65536; i++) x[i] = (uint16_t)i;
    int bad = 0;
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 3; s++) {
            CHECK(!qp_ref_kv_quantize(ctx, dts[d], x, 65536, scales[s], q), "%s", qp_last_error(ctx));
            for (int i = 0; i < 65536; i++) {
                float v = qp_format_decode(dts[d], x[i]) / scales[s];
                if (q[i] != e4m3_oracle(v) && bad++ < 5)
                    fprintf(stderr, "kv quantize %s %04x / %g: %02x, oracle %02x\n", qp_dtype_name(dts[d]), i,
                            (double)scales[s], q[i], e4m3_oracle(v));
            }
            /* dequantize: value(code) * scale rounded once to the dtype */
            uint8_t codes[256];
            uint16_t y[256];
            for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
            CHECK(!qp_ref_kv_dequantize(ctx, dts[d], codes, 256, scales[s], y), "%s", qp_last_error(ctx));
            for (int c = 0; c < 256; c++) {
                float v = qp_format_decode(QP_DTYPE_F8_E4M3FN, (uint32_t)c) * scales[s];
                uint16_t want = (uint16_t)qp_format_encode(dts[d], v);
                if (y[c] != want && !(isnan(v) && isnan(qp_format_decode(dts[d], y[c]))) && bad++ < 5)
                    fprintf(stderr, "kv dequantize %02x: %04x, want %04x\n", c, y[c], want);
            }
        }
    CHECK(bad == 0, "%d KV-cache elements differ from the oracle", bad);
    /* errors */
    CHECK(qp_ref_kv_quantize(ctx, QP_DTYPE_F16, x, 4, 0.0f, q) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "KV-cache scale must be finite and > 0"), "%s", qp_last_error(ctx));
    CHECK(qp_ref_kv_quantize(ctx, QP_DTYPE_F16, x, 4, INFINITY, q) == QP_ERR_INVALID_ARGUMENT, "inf scale");
    CHECK(qp_ref_kv_quantize(ctx, QP_DTYPE_I8, x, 4, 1.0f, q) == QP_ERR_INVALID_ARGUMENT, "int8 values");
    free(x);
    free(q);
}

/* qp_kv_quantize / dequantize on every device offering them: bit-equal to
 * the reference over every fp16 / bf16 pattern and every code. */
static void kv_devices(void) {
    size_t nd = 0;
    qp_device_count(ctx, &nd);
    uint16_t *x = malloc(65536 * 2), *y = malloc(65536 * 2), *yr = malloc(65536 * 2);
    uint8_t *q = malloc(65536), *qr = malloc(65536);
    for (int i = 0; i < 65536; i++) x[i] = (uint16_t)i;
    int with_op = 0;
    for (size_t i = 0; i < nd; i++) {
        qp_device *dev;
        qp_device_info info = {.struct_size = sizeof info};
        qp_device_get(ctx, i, &dev);
        qp_device_get_info(dev, &info);
        qp_buffer *bx = NULL, *bq = NULL, *by = NULL;
        CHECK(!qp_buffer_create(dev, 65536 * 2, &bx) && !qp_buffer_create(dev, 65536, &bq) &&
                  !qp_buffer_create(dev, 65536 * 2, &by), "%s", qp_last_error(ctx));
        qp_buffer_upload(bx, 0, x, 65536 * 2);
        qp_status st = qp_kv_quantize(dev, QP_DTYPE_F16, bx, 65536, 0.25f, bq);
        if (st == QP_ERR_UNSUPPORTED) {
            CHECK(strstr(qp_last_error(ctx), "has no fp8 KV-cache kernel") != NULL, "%s", qp_last_error(ctx));
            CHECK(strcmp(info.backend, "cpu") != 0, "the cpu reference must run the KV cache");
        } else {
            with_op++;
            for (int d = 0; d < 2; d++) {
                qp_dtype dt = d ? QP_DTYPE_BF16 : QP_DTYPE_F16;
                float sc = d ? 0.0371f : 0.25f;
                CHECK(!qp_kv_quantize(dev, dt, bx, 65536, sc, bq), "%s", qp_last_error(ctx));
                CHECK(!qp_kv_dequantize(dev, dt, bq, 65536, sc, by), "%s", qp_last_error(ctx));
                qp_buffer_download(bq, 0, q, 65536);
                qp_buffer_download(by, 0, y, 65536 * 2);
                qp_ref_kv_quantize(ctx, dt, x, 65536, sc, qr);
                qp_ref_kv_dequantize(ctx, dt, qr, 65536, sc, yr);
                CHECK(!memcmp(q, qr, 65536), "%s:%d %s KV quantize differs from the reference", info.backend,
                      info.index, qp_dtype_name(dt));
                CHECK(!memcmp(y, yr, 65536 * 2), "%s:%d %s KV dequantize differs from the reference", info.backend,
                      info.index, qp_dtype_name(dt));
            }
        }
        /* errors are checked before any kernel runs */
        CHECK(qp_kv_quantize(dev, QP_DTYPE_F16, bx, 65536, -1.0f, bq) == QP_ERR_INVALID_ARGUMENT, "negative scale");
        CHECK(qp_kv_quantize(dev, QP_DTYPE_F16, bx, 65537, 1.0f, bq) == QP_ERR_INVALID_ARGUMENT &&
                  strstr(qp_last_error(ctx), "buffers too small"), "%s", qp_last_error(ctx));
        CHECK(qp_kv_dequantize(dev, QP_DTYPE_I32, bq, 16, 1.0f, by) == QP_ERR_INVALID_ARGUMENT, "int32 values");
        qp_buffer_destroy(bx);
        qp_buffer_destroy(bq);
        qp_buffer_destroy(by);
    }
    CHECK(with_op >= 1, "no device ran the KV cache");
    free(x); free(y); free(yr); free(q); free(qr);
}

/* The reference rotation against the exact (double) product: within the
 * fp32 summation bound; and rotating twice with the symmetric Sylvester
 * matrix gives x back within that bound. */
static void rotation_reference(void) {
    int r = 64, K = 128, M = 3;
    int8_t *H = malloc((size_t)r * r);
    case_hadamard(r, H);
    uint16_t x[3 * 128], y[3 * 128];
    case_activations(DIST_OUTLIERS, QP_DTYPE_F16, M, K, 5, x);
    CHECK(!qp_ref_rotation_forward(ctx, QP_DTYPE_F16, x, M, K, H, r, y), "%s", qp_last_error(ctx));
    double c = 1.0 / sqrt((double)r), worst = 0;
    for (int m = 0; m < M; m++)
        for (int b = 0; b < K / r; b++)
            for (int j = 0; j < r; j++) {
                double s = 0, a = 0;
                for (int i = 0; i < r; i++) {
                    double v = qp_format_decode(QP_DTYPE_F16, x[m * K + b * r + i]);
                    s += v * H[i * r + j];
                    a += fabs(v);
                }
                double got = qp_format_decode(QP_DTYPE_F16, y[m * K + b * r + j]);
                double bound = r * 0x1p-24 * a * c + fabs(s * c) * 0x1p-11 * 1.01 + 0x1p-24;
                double e = fabs(got - s * c) / bound;
                if (e > worst) worst = e;
            }
    CHECK(worst <= 1.0, "rotation error %.3g of the bound", worst);
    CHECK(qp_rotation_norm(64) == 0.125f && qp_rotation_norm(2) == (float)(1.0 / sqrt(2.0)), "norm");
    H[5] = 0;
    CHECK(qp_ref_rotation_forward(ctx, QP_DTYPE_F16, x, M, K, H, r, y) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "+1 or -1"), "%s", qp_last_error(ctx));
    CHECK(qp_ref_rotation_forward(ctx, QP_DTYPE_F16, x, M, 100, H, r, y) == QP_ERR_INVALID_ARGUMENT, "K %% r");
    free(H);
}

static qp_status make(qp_device *dev, const case_layer *l, const qp_tensor *t, size_t n, qp_linear **lin) {
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = l->act_dtype;
    o.layer = "model.layers.0.mlp.down_proj";
    return qp_linear_create(dev, &l->scheme, l->N, l->K, t, n, &o, lin);
}

/* A rotated MXFP4 layer equals the same layer without the rotation fed with
 * rotated activations, bit for bit, on every device that runs both. */
static void rotation_layer(void) {
    case_layer l;
    char err[256];
    int N = 32, K = 64, M = 5;
    CHECK(!case_layer_make(ctx, case_scheme_find("mxfp4-rotated"), N, K, QP_DTYPE_F16, 4, NULL, 0, &l, err, sizeof err),
          "%s", err);
    uint16_t x[5 * 64], xr[5 * 64], y1[5 * 32], y2[5 * 32];
    case_activations(DIST_UNIFORM, QP_DTYPE_F16, M, K, 6, x);
    CHECK(!qp_ref_rotation_forward(ctx, QP_DTYPE_F16, x, M, K, l.rotation, l.rotation_size, xr), "%s", qp_last_error(ctx));
    qp_tensor plain[8];
    size_t np = 0;
    for (size_t i = 0; i < l.n_tensors; i++)
        if (strcmp(l.tensors[i].name, "input_rotation")) plain[np++] = l.tensors[i];
    size_t nd = 0;
    qp_device_count(ctx, &nd);
    int ran = 0;
    for (size_t i = 0; i < nd; i++) {
        qp_device *dev;
        qp_device_get(ctx, i, &dev);
        qp_device_info info = {.struct_size = sizeof info};
        qp_device_get_info(dev, &info);
        qp_linear *a = NULL, *b = NULL;
        qp_status st = make(dev, &l, l.tensors, l.n_tensors, &a);
        if (st == QP_ERR_UNSUPPORTED) { CHECK(strcmp(info.backend, "cpu"), "cpu: %s", qp_last_error(ctx)); continue; }
        CHECK(!st && !make(dev, &l, plain, np, &b), "%s", qp_last_error(ctx));
        if (!a || !b) { qp_linear_destroy(a); qp_linear_destroy(b); continue; }
        CHECK(!qp_linear_forward(a, x, M, y1) && !qp_linear_forward(b, xr, M, y2), "%s", qp_last_error(ctx));
        CHECK(!memcmp(y1, y2, sizeof y1), "%s:%d: rotated layer != layer(rotated x)", info.backend, info.index);
        ran++;
        qp_linear_destroy(a);
        qp_linear_destroy(b);
    }
    CHECK(ran >= 1, "no device ran the rotated layer");

    /* errors: on another scheme, a non-Hadamard, non-square, K % r */
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear *lin = NULL;
    qp_tensor t[8];
    memcpy(t, l.tensors, sizeof t);
    size_t ri = 0;
    for (size_t i = 0; i < l.n_tensors; i++) if (!strcmp(t[i].name, "input_rotation")) ri = i;
    int8_t bad[32 * 32];
    memcpy(bad, l.rotation, sizeof bad);
    bad[33] = (int8_t)-bad[33];
    t[ri].data = bad;
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "not orthogonal"),
          "%s", qp_last_error(ctx));
    bad[33] = 2;
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "+1 or -1"),
          "%s", qp_last_error(ctx));
    t[ri].data = l.rotation;
    t[ri].shape[1] = 16;
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_UNSUPPORTED &&
              strstr(qp_last_error(ctx), "only square int8 (Hadamard) input rotations are supported"),
          "%s", qp_last_error(ctx));
    t[ri].shape[1] = 32;
    t[ri].dtype = QP_DTYPE_U8;
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_UNSUPPORTED, "uint8 rotation");
    case_layer_free(&l);

    case_layer w;
    CHECK(!case_layer_make(ctx, case_scheme_find("w4a16-int4-g32"), 32, 64, QP_DTYPE_F16, 1, NULL, 0, &w, err, sizeof err), "%s", err);
    int8_t H[32 * 32];
    case_hadamard(32, H);
    memcpy(t, w.tensors, sizeof t);
    t[w.n_tensors] = (qp_tensor){"input_rotation", QP_DTYPE_I8, 2, {32, 32, 0, 0}, H};
    CHECK(make(cpu, &w, t, w.n_tensors + 1, &lin) == QP_ERR_UNSUPPORTED &&
              strstr(qp_last_error(ctx), "Quark online input rotation is only supported on MXFP4 linear layers"),
          "%s", qp_last_error(ctx));
    case_layer_free(&w);
}

/* Unquantized layers on the cpu equal the reference; the binder names bad
 * tensors of the block-float schemes. */
static void unquantized_and_binding(void) {
    case_layer l;
    char err[256];
    int N = 24, K = 48, M = 3;
    CHECK(!case_layer_make(ctx, case_scheme_find("unquantized"), N, K, QP_DTYPE_BF16, 2, NULL, 0, &l, err, sizeof err), "%s", err);
    CHECK(l.scheme.kind == QP_SCHEME_UNQUANTIZED, "the excluded layer resolves unquantized");
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear *lin = NULL;
    uint16_t x[3 * 48], y1[3 * 24], y2[3 * 24];
    case_activations(DIST_OUTLIERS, QP_DTYPE_BF16, M, K, 3, x);
    CHECK(!make(cpu, &l, l.tensors, l.n_tensors, &lin), "%s", qp_last_error(ctx));
    CHECK(!qp_linear_forward(lin, x, M, y1), "%s", qp_last_error(ctx));
    CHECK(!qp_ref_unquantized_forward(ctx, QP_DTYPE_BF16, x, M, K, N, l.tensors[0].data, l.tensors[1].data, y2), "%s",
          qp_last_error(ctx));
    CHECK(!memcmp(y1, y2, sizeof y1), "unquantized layer != reference");
    for (int i = 0; i < M * N; i++) {
        double s = qp_format_decode(QP_DTYPE_BF16, ((const uint16_t *)l.tensors[1].data)[i % N]);
        for (int k = 0; k < K; k++)
            s += (double)qp_format_decode(QP_DTYPE_BF16, x[(i / N) * K + k]) *
                 qp_format_decode(QP_DTYPE_BF16, ((const uint16_t *)l.tensors[0].data)[(i % N) * K + k]);
        CHECK(fabs(qp_format_decode(QP_DTYPE_BF16, y1[i]) - s) <= fabs(s) * 0x1p-8 + 1e-30, "y[%d]", i);
    }
    qp_linear_destroy(lin);
    qp_tensor t[8];
    memcpy(t, l.tensors, sizeof t);
    /* a weight of another float dtype is rounded into the params dtype (as
     * vLLM's copy_): the same bits read as fp16 give the bf16 of each value */
    t[0].dtype = QP_DTYPE_F16;
    CHECK(!make(cpu, &l, t, l.n_tensors, &lin), "%s", qp_last_error(ctx));
    CHECK(!qp_linear_forward(lin, x, M, y1), "%s", qp_last_error(ctx));
    {
        uint16_t *wb = malloc(sizeof(uint16_t) * (size_t)N * K);
        for (int i = 0; wb && i < N * K; i++)
            wb[i] = (uint16_t)qp_format_encode(QP_DTYPE_BF16, qp_format_decode(QP_DTYPE_F16, ((const uint16_t *)l.tensors[0].data)[i]));
        CHECK(wb && !qp_ref_unquantized_forward(ctx, QP_DTYPE_BF16, x, M, K, N, wb, l.tensors[1].data, y2) &&
                  !memcmp(y1, y2, sizeof y1), "f16 weight of a bf16 layer: not the bf16-rounded weight");
        free(wb);
    }
    qp_linear_destroy(lin);
    lin = NULL;
    t[0].dtype = QP_DTYPE_I8;
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "must be a float tensor"),
          "%s", qp_last_error(ctx));
    case_layer_free(&l);

    CHECK(!case_layer_make(ctx, case_scheme_find("nvfp4"), 16, 64, QP_DTYPE_F16, 2, NULL, 0, &l, err, sizeof err), "%s", err);
    memcpy(t, l.tensors, sizeof t);
    for (size_t i = 0; i < l.n_tensors; i++)
        if (!strcmp(t[i].name, "input_scale_2")) t[i].name = "input_scale_3";
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT &&
              strstr(qp_last_error(ctx), "missing checkpoint tensor 'input_scale_2'"), "%s", qp_last_error(ctx));
    memcpy(t, l.tensors, sizeof t);
    t[1].shape[1] = 3; /* weight_scale */
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "'weight_scale'"),
          "%s", qp_last_error(ctx));
    case_layer_free(&l);

    CHECK(!case_layer_make(ctx, case_scheme_find("mxfp6-e3m2"), 16, 64, QP_DTYPE_BF16, 2, NULL, 0, &l, err, sizeof err), "%s", err);
    memcpy(t, l.tensors, sizeof t);
    t[0].shape[1] = 32; /* fp4-sized rows for fp6 weights */
    CHECK(make(cpu, &l, t, l.n_tensors, &lin) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "3K/4"),
          "%s", qp_last_error(ctx));
    case_layer_free(&l);
}

int main(void) {
    qp_context_create(&ctx);
    kv_reference();
    kv_devices();
    rotation_reference();
    rotation_layer();
    unquantized_and_binding();
    qp_context_destroy(ctx);
    return tu_finish("layers-extra");
}
