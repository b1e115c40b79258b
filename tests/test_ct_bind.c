/* compressed-tensors layers bound from hand-packed checkpoint tensors, on
 * every device of the build (tests/configs/ct-*.json resolve the schemes):
 *
 *  - W4A16 (symmetric and asymmetric): weight_packed in compressed-tensors'
 *    pack order (value i of an int32 word at bits [4i, 4i+4), stored with
 *    +8), weight_zero_point packed the same way along N, scales [N, K/g].
 *    The layer equals, bit for bit on every device, the same values bound
 *    from Quark's names and layout ([K, N/8] words, scales [K/g, N]); on
 *    the cpu it equals this file's own fp64 sum of x (u - z) s, rounded
 *    once (s first rounded to the params dtype, as vLLM loads it).
 *  - The weight-only schemes qport lowers to dense weights (8-bit WNA16,
 *    W8A16-FP8 below capability 89, NVFP4A16): bit for bit the
 *    unquantized layer over this file's own dequantization
 *    (round((u - z) round(s)), round(e4m3(w) round(s)), round(e2m1 *
 *    (e4m3(sf) / max(weight_global_scale)))).
 *  - MXFP4 (CompressedTensorsW4A4Mxfp4 below capability 100, vLLM's Marlin
 *    W4A16 path): bit for bit the unquantized layer over e2m1 * 2^(e-127)
 *    rounded once; the e8m0 NaN code refused.
 *  - NVFP4 W4A4: with power-of-two global scales (exact inverses), bit
 *    for bit the Quark-named layer on every device; with any scales the
 *    cpu equals qp_ref_nvfp4_forward given g = max(input_global_scale)
 *    itself, not 1 / (1 / g).
 *  - MoE experts of a compressed-tensors Mixtral written to a temporary
 *    folder (W4A16 sym / asym, FP8_DYNAMIC): qp_model_bind_moe's FusedMoE
 *    parameters byte for byte this file's own stacking, and the block on
 *    every device within NMSE 2^-20 of the cpu's.
 *  - Bad tensors: weight_shape disagreeing with the layer, a missing
 *    zero point of an asymmetric layer, a weight_packed of the wrong
 *    shape, a scale of the wrong shape: clear errors naming the tensor. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static const char *configs;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static int n_compared, n_cases, n_on_want;
static const char *want_backend; /* argv[2]: every case must also run there */

static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float urand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }

static qp_scheme resolve(const char *file, const char *layer, int capability) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", configs, file);
    qp_config *cfg = NULL;
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(!qp_config_load_file(ctx, path, &cfg), "%s: %s", path, qp_last_error(ctx));
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.capability = capability;
    if (cfg) CHECK(!qp_config_resolve(cfg, layer, QP_LAYER_LINEAR, &o, &s), "%s: %s", file, qp_last_error(ctx));
    qp_config_destroy(cfg);
    return s;
}

/* compressed-tensors pack order, written independently of api/bind_ct.c:
 * rows of `cols` values of `bits` bits, value c of a row in word c / per at
 * bits (c % per) * bits. */
static void ct_pack_rows(const unsigned *v, int rows, int cols, int bits, int32_t *out) {
    int per = 32 / bits, words = (cols + per - 1) / per;
    memset(out, 0, sizeof(int32_t) * (size_t)rows * (size_t)words);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            out[(size_t)r * words + c / per] =
                (int32_t)((uint32_t)out[(size_t)r * words + c / per] | (uint32_t)v[(size_t)r * cols + c] << (c % per * bits));
}

/* Zero points z[n][g] packed along N: word (n / per, g). */
static void ct_pack_zp(const unsigned *z, int N, int G, int bits, int32_t *out) {
    int per = 32 / bits, nw = (N + per - 1) / per;
    memset(out, 0, sizeof(int32_t) * (size_t)nw * (size_t)G);
    for (int n = 0; n < N; n++)
        for (int g = 0; g < G; g++)
            out[(size_t)(n / per) * G + g] = (int32_t)((uint32_t)out[(size_t)(n / per) * G + g] |
                                                         (uint32_t)z[(size_t)n * G + g] << (n % per * bits));
}

static size_t n_devices(void) {
    size_t nd = 0;
    qp_device_count(ctx, &nd);
    return nd;
}

/* Device i of the build and its info; NULL when either cannot be had. */
static qp_device *device_at(size_t i, qp_device_info *info) {
    qp_device *dev = NULL;
    *info = (qp_device_info){.struct_size = sizeof *info};
    return qp_device_get(ctx, i, &dev) || qp_device_get_info(dev, info) ? NULL : dev;
}

/* The reference device (its position depends on QPORT_BACKENDS). */
static qp_device *cpu_device(void) {
    qp_device_info info;
    for (size_t i = 0, nd = n_devices(); i < nd; i++) {
        qp_device *dev = device_at(i, &info);
        if (dev && !strcmp(info.backend, "cpu")) return dev;
    }
    return NULL;
}

static qp_linear *make(qp_device *dev, const qp_scheme *s, int N, int K, const qp_tensor *t, size_t n, qp_status *st) {
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = QP_DTYPE_F16;
    lo.layer = "model.layers.0.mlp.down_proj";
    qp_linear *l = NULL;
    *st = qp_linear_create(dev, s, N, K, t, n, &lo, &l);
    return l;
}

/* Layer a and layer b on every device: equal bits; *cpu_y gets the cpu's. */
static void same_everywhere(const char *what, const qp_scheme *sa, const qp_tensor *ta, size_t na, const qp_scheme *sb,
                            const qp_tensor *tb, size_t nb, int N, int K, int M, const uint16_t *x, uint16_t *cpu_y) {
    uint16_t *ya = calloc((size_t)M * N, 2), *yb = calloc((size_t)M * N, 2);
    int ran = 0, cpu_y_set = 0;
    for (size_t d = 0, nd = n_devices(); d < nd && ya && yb; d++) {
        qp_device_info info;
        qp_device *dev = device_at(d, &info);
        if (!dev) continue;
        qp_status s1, s2;
        qp_linear *la = make(dev, sa, N, K, ta, na, &s1);
        if (s1 == QP_ERR_UNSUPPORTED) { /* a device without the kind */
            printf("%s: %s:%d: not run: %s\n", what, info.backend, info.index, qp_last_error(ctx));
            qp_linear_destroy(la);
            continue;
        }
        CHECK(!s1, "%s: %s:%d: create: %s", what, info.backend, info.index, qp_last_error(ctx));
        qp_linear *lb = make(dev, sb, N, K, tb, nb, &s2);
        CHECK(!s2, "%s: %s:%d: create the equivalent: %s", what, info.backend, info.index, qp_last_error(ctx));
        if (la && lb) {
            CHECK(!qp_linear_forward(la, x, M, ya) && !qp_linear_forward(lb, x, M, yb), "%s: forward: %s", what,
                  qp_last_error(ctx));
            size_t differ = 0;
            for (size_t i = 0; i < (size_t)M * N; i++) differ += ya[i] != yb[i];
            CHECK(differ == 0, "%s: %s:%d: %zu of %d outputs differ from the equivalent layer", what, info.backend,
                  info.index, differ, M * N);
            if (!strcmp(info.backend, "cpu")) {
                if (cpu_y) memcpy(cpu_y, ya, (size_t)M * N * 2);
                cpu_y_set = 1;
            }
            ran++;
            n_compared++;
            if (want_backend && !strcmp(info.backend, want_backend)) n_on_want++;
        }
        qp_linear_destroy(la);
        qp_linear_destroy(lb);
    }
    CHECK(ran >= 1 && cpu_y_set, "%s: ran on no device or not on the cpu", what);
    n_cases++;
    printf("%s: equal on %d device(s)\n", what, ran);
    free(ya);
    free(yb);
}

static uint16_t *rand_x(int M, int K) {
    uint16_t *x = malloc((size_t)M * K * 2);
    for (size_t i = 0; x && i < (size_t)M * K; i++) tu_put(QP_DTYPE_F16, x, i, urand(-2.0f, 2.0f));
    return x;
}

static qp_scheme unquantized(void) {
    qp_scheme u;
    memset(&u, 0, sizeof u);
    u.struct_size = sizeof u;
    u.kind = QP_SCHEME_UNQUANTIZED;
    return u;
}

/* W4A16 from weight_packed vs Quark names; asym adds zero points. */
static void w4a16(bool sym) {
    const int N = 40, K = 256, M = 3, g = 128, G = K / g, nc = (N + 7) / 8;
    qp_scheme ct = resolve(sym ? "ct-w4a16.json" : "ct-w4a16-asym.json", "model.layers.0.mlp.down_proj", 90);
    CHECK(ct.kind == QP_SCHEME_W4A16_INT4 && !strcmp(ct.scheme_class, "CompressedTensorsWNA16"), "w4a16 resolves: %s",
          ct.scheme_class);
    unsigned *u = malloc(sizeof(unsigned) * N * K), *z = malloc(sizeof(unsigned) * N * G);
    uint8_t *codes = malloc((size_t)N * K), *zq = malloc((size_t)G * N);
    int32_t *wp = malloc(4 * (size_t)N * K / 8), *zp = malloc(4 * (size_t)nc * G), *qw = malloc(4 * (size_t)K * nc),
            *qz = malloc(4 * (size_t)G * nc);
    uint16_t *sc = malloc(2 * (size_t)N * G), *qs = malloc(2 * (size_t)G * N), *x = rand_x(M, K);
    uint16_t *y = calloc((size_t)M * N, 2);
    for (int i = 0; i < N * K; i++) u[i] = rnd() & 15u;
    for (int i = 0; i < N * G; i++) z[i] = sym ? 8u : rnd() & 15u;
    for (int n = 0; n < N; n++)
        for (int gi = 0; gi < G; gi++) {
            tu_put(QP_DTYPE_F16, sc, (size_t)n * G + gi, urand(0.001f, 0.05f));
            qs[(size_t)gi * N + n] = sc[(size_t)n * G + gi];
            zq[(size_t)gi * N + n] = (uint8_t)z[(size_t)n * G + gi];
        }
    ct_pack_rows(u, N, K, 4, wp);
    ct_pack_zp(z, N, G, 4, zp);
    /* Quark: codes [K][N], symmetric as two's complement nibbles of u - 8 */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) codes[(size_t)k * N + n] = (uint8_t)(sym ? (u[(size_t)n * K + k] - 8u) & 15u : u[(size_t)n * K + k]);
    CHECK(!qp_pack_int4_quark(codes, K, N, QP_PACK_ORDER, qw) && !qp_pack_int4_quark(zq, G, N, QP_PACK_ORDER, qz), "pack");
    int64_t shape[2] = {N, K};
    qp_tensor t[4] = {{"weight_packed", QP_DTYPE_I32, 2, {N, K / 8}, wp},
                      {"weight_scale", QP_DTYPE_F16, 2, {N, G}, sc},
                      {"weight_shape", QP_DTYPE_I64, 1, {2}, shape},
                      {"weight_zero_point", QP_DTYPE_I32, 2, {nc, G}, zp}};
    qp_tensor q[3] = {{"weight", QP_DTYPE_I32, 2, {K, nc}, qw},
                      {"weight_scale", QP_DTYPE_F16, 2, {G, N}, qs},
                      {"weight_zero_point", QP_DTYPE_I32, 2, {G, nc}, qz}};
    qp_scheme quark = ct;
    snprintf(quark.method, sizeof quark.method, "QuarkLinearMethod");
    snprintf(quark.scheme_class, sizeof quark.scheme_class, "QuarkW4A16Int4");
    quark.pack_method = QP_PACK_ORDER;
    same_everywhere(sym ? "ct w4a16 sym" : "ct w4a16 asym", &ct, t, sym ? 3 : 4, &quark, q, sym ? 2 : 3, N, K, M, x, y);
    /* the cpu against this file's own arithmetic */
    size_t off = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += tu_get(QP_DTYPE_F16, x, (size_t)m * K + k) * ((double)u[(size_t)n * K + k] - z[(size_t)n * G + k / g]) *
                       tu_get(QP_DTYPE_F16, sc, (size_t)n * G + k / g);
            uint16_t want;
            tu_put(QP_DTYPE_F16, &want, 0, (float)acc);
            off += want != y[(size_t)m * N + n];
        }
    CHECK(off == 0, "w4a16 %s: %zu cpu outputs differ from sum x (u - z) s", sym ? "sym" : "asym", off);

    /* bad tensors name the tensor and the rule */
    qp_device *cpu = cpu_device();
    qp_status st;
    int64_t wrong[2] = {N, K + 8};
    t[2].data = wrong;
    qp_linear *l = make(cpu, &ct, N, K, t, sym ? 3 : 4, &st);
    CHECK(st && strstr(qp_last_error(ctx), "'weight_shape' says [40, 264], the layer is [40, 256]"),
          "weight_shape mismatch: %d %s", st, qp_last_error(ctx));
    qp_linear_destroy(l);
    t[2].data = shape;
    if (!sym) {
        l = make(cpu, &ct, N, K, t, 3, &st);
        CHECK(st && strstr(qp_last_error(ctx), "weight_zero_point"), "asym without zero points: %s", qp_last_error(ctx));
        qp_linear_destroy(l);
    }
    t[0].shape[1] = K / 4;
    l = make(cpu, &ct, N, K, t, sym ? 3 : 4, &st);
    CHECK(st && strstr(qp_last_error(ctx), "weight_packed") && strstr(qp_last_error(ctx), "ceil(K / 8)"),
          "weight_packed shape: %s", qp_last_error(ctx));
    qp_linear_destroy(l);
    t[0].shape[1] = K / 8;
    t[1].shape[1] = G + 1;
    l = make(cpu, &ct, N, K, t, sym ? 3 : 4, &st);
    CHECK(st && strstr(qp_last_error(ctx), "'weight_scale' must be a float tensor [40, 2]"), "scale shape: %s",
          qp_last_error(ctx));
    qp_linear_destroy(l);
    free(u); free(z); free(codes); free(zq); free(wp); free(zp); free(qw); free(qz); free(sc); free(qs); free(x); free(y);
}

/* Lowered schemes: the dense weight this file computes, run unquantized. */
static void lowered_equal(const char *what, const qp_scheme *ct, const qp_tensor *t, size_t n, const float *w, int N, int K) {
    const int M = 3;
    uint16_t *wd = malloc(2 * (size_t)N * K), *x = rand_x(M, K);
    for (size_t i = 0; i < (size_t)N * K; i++) tu_put(QP_DTYPE_F16, wd, i, w[i]);
    qp_tensor u[1] = {{"weight", QP_DTYPE_F16, 2, {N, K}, wd}};
    qp_scheme us = unquantized();
    same_everywhere(what, ct, t, n, &us, u, 1, N, K, M, x, NULL);
    free(wd);
    free(x);
}

static float r16(float v) {
    uint16_t h;
    tu_put(QP_DTYPE_F16, &h, 0, v);
    return (float)tu_get(QP_DTYPE_F16, &h, 0);
}

static void wna16_8bit(void) {
    const int N = 24, K = 256, g = 128, G = K / g;
    qp_scheme ct = resolve("ct-w8a16.json", "model.layers.0.mlp.down_proj", 90);
    CHECK(ct.kind == QP_SCHEME_WNA16, "8-bit WNA16 resolves to wna16: %s", qp_scheme_kind_name(ct.kind));
    unsigned *u = malloc(sizeof(unsigned) * N * K);
    int32_t *wp = malloc(4 * (size_t)N * K / 4);
    uint16_t *sc = malloc(2 * (size_t)N * G);
    float *w = malloc(sizeof(float) * N * K);
    for (int i = 0; i < N * K; i++) u[i] = rnd() & 255u;
    for (int i = 0; i < N * G; i++) tu_put(QP_DTYPE_F16, sc, (size_t)i, urand(0.0005f, 0.01f));
    ct_pack_rows(u, N, K, 8, wp);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            w[(size_t)n * K + k] = r16(((float)u[(size_t)n * K + k] - 128.0f) * (float)tu_get(QP_DTYPE_F16, sc, (size_t)n * G + k / g));
    qp_tensor t[2] = {{"weight_packed", QP_DTYPE_I32, 2, {N, K / 4}, wp}, {"weight_scale", QP_DTYPE_F16, 2, {N, G}, sc}};
    lowered_equal("ct wna16 8-bit", &ct, t, 2, w, N, K);
    free(u); free(wp); free(sc); free(w);
}

static void w8a16_fp8(void) {
    const int N = 24, K = 64;
    qp_scheme ct = resolve("ct-fp8.json", "model.layers.0.mlp.down_proj", 80);
    CHECK(ct.kind == QP_SCHEME_W8A16_FP8 && !strcmp(ct.scheme_class, "CompressedTensorsW8A16Fp8"),
          "fp8 below capability 89 falls back to W8A16Fp8: %s", ct.scheme_class);
    uint8_t *wq = malloc((size_t)N * K);
    float *sc = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * N * K), is = 0.5f;
    for (int i = 0; i < N * K; i++) {
        wq[i] = (uint8_t)(rnd() & 0xff);
        if ((wq[i] & 0x7f) == 0x7f) wq[i] = 0x3c; /* no NaN codes */
    }
    bool per_channel = ct.weight.granularity == QP_GRAN_CHANNEL;
    for (int n = 0; n < N; n++) sc[n] = per_channel || n == 0 ? urand(0.001f, 0.01f) : sc[0];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            w[(size_t)n * K + k] = r16(qp_format_decode(QP_DTYPE_F8_E4M3FN, wq[(size_t)n * K + k]) * r16(sc[n]));
    qp_tensor t[3] = {{"weight", QP_DTYPE_F8_E4M3FN, 2, {N, K}, wq},
                      {"weight_scale", QP_DTYPE_F32, 2, {per_channel ? N : 1, 1}, sc},
                      {"input_scale", QP_DTYPE_F32, 1, {1}, &is}};
    lowered_equal("ct w8a16-fp8", &ct, t, 3, w, N, K);
    free(wq); free(sc); free(w);
}

/* NVFP4 tensors: codes [N][K/2], block scales [N][K/16] (e4m3, > 0). */
static void nvfp4_tensors(int N, int K, uint8_t *packed, uint8_t *sf) {
    uint8_t *c = malloc((size_t)N * K);
    for (int i = 0; i < N * K; i++) c[i] = (uint8_t)(rnd() & 15u);
    qp_pack_fp4(c, (size_t)N * K, packed);
    for (int i = 0; i < N * K / 16; i++) sf[i] = (uint8_t)(0x20 + rnd() % 0x30);
    free(c);
}

static void nvfp4_a16(void) {
    const int N = 24, K = 64;
    qp_scheme ct = resolve("ct-nvfp4a16.json", "model.layers.0.mlp.down_proj", 90);
    CHECK(ct.kind == QP_SCHEME_NVFP4_A16, "NVFP4A16 resolves: %s", qp_scheme_kind_name(ct.kind));
    uint8_t *p = malloc((size_t)N * K / 2), *sf = malloc((size_t)N * K / 16);
    float *w = malloc(sizeof(float) * N * K), wgs[1] = {2688.0f / 3.0f};
    nvfp4_tensors(N, K, p, sf);
    uint8_t *c = malloc((size_t)N * K);
    qp_unpack_fp4(p, (size_t)N * K, c);
    float inv = 1.0f / wgs[0];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            w[(size_t)n * K + k] = r16(qp_format_decode(QP_DTYPE_F4_E2M1, c[(size_t)n * K + k]) *
                                       (qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[(size_t)n * (K / 16) + k / 16]) * inv));
    qp_tensor t[3] = {{"weight_packed", QP_DTYPE_U8, 2, {N, K / 2}, p},
                      {"weight_scale", QP_DTYPE_F8_E4M3FN, 2, {N, K / 16}, sf},
                      {"weight_global_scale", QP_DTYPE_F32, 1, {1}, wgs}};
    lowered_equal("ct nvfp4a16", &ct, t, 3, w, N, K);
    free(p); free(sf); free(w); free(c);
}

/* CompressedTensorsW4A4Mxfp4 below capability 100 (vLLM's Marlin W4A16
 * path): e2m1 * 2^(e - 127) rounded once, run as a dense layer. */
static void mxfp4(void) {
    const int N = 24, K = 64;
    qp_scheme ct = resolve("ct-mxfp4.json", "model.layers.0.mlp.down_proj", 90);
    CHECK(ct.kind == QP_SCHEME_CT_MXFP4 && !strcmp(ct.scheme_class, "CompressedTensorsW4A4Mxfp4"), "MXFP4 resolves: %s",
          ct.scheme_class);
    uint8_t *p = malloc((size_t)N * K / 2), *sc = malloc((size_t)N * K / 32), *c = malloc((size_t)N * K);
    float *w = malloc(sizeof(float) * N * K);
    for (int i = 0; i < N * K; i++) c[i] = (uint8_t)(rnd() & 15u);
    qp_pack_fp4(c, (size_t)N * K, p);
    for (int i = 0; i < N * K / 32; i++) sc[i] = (uint8_t)(120 + rnd() % 10); /* 2^-7 .. 2^2 */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            w[(size_t)n * K + k] = r16(qp_format_decode(QP_DTYPE_F4_E2M1, c[(size_t)n * K + k]) *
                                       ldexpf(1.0f, (int)sc[(size_t)n * (K / 32) + k / 32] - 127));
    qp_tensor t[2] = {{"weight_packed", QP_DTYPE_U8, 2, {N, K / 2}, p}, {"weight_scale", QP_DTYPE_U8, 2, {N, K / 32}, sc}};
    lowered_equal("ct mxfp4 (Marlin W4A16)", &ct, t, 2, w, N, K);
    /* the e8m0 NaN code is refused by name */
    sc[3] = 255;
    qp_status st;
    qp_linear *l = make(cpu_device(), &ct, N, K, t, 2, &st);
    CHECK(st && strstr(qp_last_error(ctx), "NaN code 255"), "e8m0 NaN refused: %s", qp_last_error(ctx));
    qp_linear_destroy(l);
    free(p); free(sc); free(c); free(w);
}

static void nvfp4_w4a4(void) {
    const int N = 24, K = 64, M = 3;
    qp_scheme ct = resolve("ct-nvfp4.json", "model.layers.0.mlp.down_proj", 100);
    CHECK(ct.kind == QP_SCHEME_NVFP4 && !strcmp(ct.scheme_class, "CompressedTensorsW4A4Fp4"), "NVFP4 resolves: %s",
          ct.scheme_class);
    uint8_t *p = malloc((size_t)N * K / 2), *sf = malloc((size_t)N * K / 16);
    uint16_t *x = rand_x(M, K), *y = calloc((size_t)M * N, 2), *yr = calloc((size_t)M * N, 2);
    nvfp4_tensors(N, K, p, sf);
    /* per shard: the max is taken; powers of two have exact inverses */
    float wg[2] = {512.0f, 1024.0f}, ig[2] = {64.0f, 32.0f}, w2 = 1.0f / 1024.0f, i2 = 1.0f / 64.0f;
    qp_tensor t[4] = {{"weight_packed", QP_DTYPE_U8, 2, {N, K / 2}, p},
                      {"weight_scale", QP_DTYPE_F8_E4M3FN, 2, {N, K / 16}, sf},
                      {"weight_global_scale", QP_DTYPE_F32, 1, {2}, wg},
                      {"input_global_scale", QP_DTYPE_F32, 1, {2}, ig}};
    qp_tensor q[4] = {{"weight", QP_DTYPE_U8, 2, {N, K / 2}, p},
                      {"weight_scale", QP_DTYPE_F8_E4M3FN, 2, {N, K / 16}, sf},
                      {"weight_scale_2", QP_DTYPE_F32, 1, {1}, &w2},
                      {"input_scale_2", QP_DTYPE_F32, 1, {1}, &i2}};
    qp_scheme quark = ct;
    snprintf(quark.method, sizeof quark.method, "QuarkLinearMethod");
    snprintf(quark.scheme_class, sizeof quark.scheme_class, "QuarkNVFP4");
    same_everywhere("ct nvfp4 (power-of-two globals)", &ct, t, 4, &quark, q, 4, N, K, M, x, NULL);
    /* g as stored: a value whose reciprocal's reciprocal is not itself */
    float g = 0;
    for (uint32_t bits = 0x42c80001u; bits < 0x42d00000u; bits++) {
        float v;
        memcpy(&v, &bits, 4);
        volatile float r = 1.0f / v;
        if (1.0f / r != v) { g = v; break; }
    }
    CHECK(g > 0, "a float whose double reciprocal differs");
    float wg1[1] = {wg[1]}, ig1[1] = {g};
    t[2].shape[0] = t[3].shape[0] = 1;
    t[2].data = wg1;
    t[3].data = ig1;
    qp_device *cpu = cpu_device();
    qp_status st;
    qp_linear *l = make(cpu, &ct, N, K, t, 4, &st);
    CHECK(!st && !qp_linear_forward(l, x, M, y), "ct nvfp4 on the cpu: %s", qp_last_error(ctx));
    qp_linear_destroy(l);
    qp_ref_nvfp4_args a = {QP_DTYPE_F16, x, M, K, N, p, sf, 1.0f / wg1[0], 0.0f, NULL, g};
    CHECK(!qp_ref_nvfp4_forward(ctx, &a, yr), "ref: %s", qp_last_error(ctx));
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) differ += y[i] != yr[i];
    CHECK(differ == 0, "ct nvfp4: %zu outputs differ from the reference with g = input_global_scale", differ);
    /* every device runs the same g (the block-float kernels are exact
     * against the reference: decoded values, fp32 products, one rounding) */
    for (size_t di = 0, nd = n_devices(); di < nd; di++) {
        qp_device_info info;
        qp_device *dev = device_at(di, &info);
        if (!dev || dev == cpu) continue;
        l = make(dev, &ct, N, K, t, 4, &st);
        CHECK(!st && !qp_linear_forward(l, x, M, yr), "ct nvfp4 on %s: %s", info.backend, qp_last_error(ctx));
        differ = 0;
        for (size_t i = 0; i < (size_t)M * N; i++) differ += y[i] != yr[i];
        CHECK(differ == 0, "ct nvfp4 (g as stored) %s:%d: %zu of %d differ from the cpu", info.backend, info.index, differ,
              M * N);
        qp_linear_destroy(l);
    }
    ig1[0] = 0.0f;
    l = make(cpu, &ct, N, K, t, 4, &st);
    CHECK(st && strstr(qp_last_error(ctx), "input_global_scale"), "zero input_global_scale refused: %s", qp_last_error(ctx));
    qp_linear_destroy(l);
    free(p); free(sf); free(x); free(y); free(yr);
}

/* A compressed-tensors Mixtral with one MoE block written to a temporary
 * folder: E experts w1 / w3 [I, H] and w2 [H, I] (their tensors `t`, named
 * by suffix) and the router; `group` the config group's JSON. */
enum { E = 4, H = 128, I = 128, MT = 5, TOPK = 2 };
static const char *const moe_proj[3] = {"w1", "w3", "w2"};
static const char *const moe_prefix = "model.layers.0.block_sparse_moe.experts";

static qp_model *moe_model(char *dir, const char *format, const char *group, qp_tensor *t, size_t n) {
    char path[300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "config.json");
    if (!f) return NULL;
    fprintf(f, "{\"architectures\": [\"MixtralForCausalLM\"], \"model_type\": \"mixtral\", \"hidden_size\": %d, "
               "\"intermediate_size\": %d, \"num_local_experts\": %d, \"num_experts_per_tok\": %d, "
               "\"num_hidden_layers\": 1, \"torch_dtype\": \"float16\", \"quantization_config\": {\"quant_method\": "
               "\"compressed-tensors\", \"format\": \"%s\", \"ignore\": [\"lm_head\", \"re:.*block_sparse_moe.gate$\"], "
               "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"format\": \"%s\", %s}}}}\n",
            H, I, E, TOPK, format, format, group);
    fclose(f);
    static uint16_t router[E * H];
    for (int i = 0; i < E * H; i++) tu_put(QP_DTYPE_F16, router, (size_t)i, urand(-1, 1));
    t[n++] = (qp_tensor){"model.layers.0.block_sparse_moe.gate.weight", QP_DTYPE_F16, 2, {E, H}, router};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, path, t, n, NULL, 0), "write: %s", qp_last_error(ctx));
    qp_model *m = NULL;
    CHECK(!qp_model_open(ctx, dir, &m), "open: %s", qp_last_error(ctx));
    return m;
}

static void moe_model_remove(qp_model *m, const char *dir) {
    qp_model_close(m);
    char path[300];
    const char *files[2] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* The bound block on every device against the cpu's output: the float
 * expert paths sum in fp32 where the reference sums in double, so outputs
 * may differ by an ulp: NMSE <= 2^-20 (`qport run`'s criterion), the
 * outputs that are bit for bit the cpu's counted and printed. */
static void moe_everywhere(const char *what, const qp_moe_binding *b) {
    uint16_t *x = rand_x(MT, H), *y = calloc((size_t)MT * H, 2), *ycpu = calloc((size_t)MT * H, 2);
    int32_t ids[MT * TOPK];
    float wts[MT * TOPK];
    for (int i = 0; i < MT * TOPK; i++) {
        ids[i] = (int32_t)((i / TOPK + i % TOPK * 3) % E);
        wts[i] = urand(0.1f, 0.9f);
    }
    qp_device *cpu = cpu_device();
    qp_moe_options mo;
    qp_moe_options_init(&mo);
    mo.act_dtype = QP_DTYPE_F16;
    mo.top_k = TOPK;
    qp_moe *moe = NULL;
    CHECK(!qp_moe_create(cpu, &b->scheme, b->E, b->H, b->I, b->tensors, b->n_tensors, &mo, &moe) &&
              !qp_moe_forward_topk(moe, x, MT, ids, wts, ycpu),
          "%s on the cpu: %s", what, qp_last_error(ctx));
    qp_moe_destroy(moe);
    for (size_t di = 0, nd = n_devices(); di < nd; di++) {
        qp_device_info info;
        qp_device *dev = device_at(di, &info);
        if (!dev || dev == cpu) continue;
        moe = NULL;
        qp_status st = qp_moe_create(dev, &b->scheme, b->E, b->H, b->I, b->tensors, b->n_tensors, &mo, &moe);
        CHECK(!st && !qp_moe_forward_topk(moe, x, MT, ids, wts, y), "%s on %s: %s", what, info.backend, qp_last_error(ctx));
        size_t same = 0;
        double se = 0, sr = 0;
        for (size_t i = 0; i < (size_t)MT * H; i++) {
            double a = tu_get(QP_DTYPE_F16, y, i), r = tu_get(QP_DTYPE_F16, ycpu, i);
            same += y[i] == ycpu[i];
            se += (a - r) * (a - r);
            sr += r * r;
        }
        CHECK(se <= 0x1p-20 * sr, "%s on %s:%d: NMSE %.3g against the cpu", what, info.backend, info.index, se / sr);
        printf("%s: %s:%d: %zu of %d outputs bit for bit the cpu's, NMSE %.3g\n", what, info.backend, info.index, same,
               MT * H, sr ? se / sr : 0.0);
        n_compared++;
        qp_moe_destroy(moe);
    }
    free(x); free(y); free(ycpu);
}

/* W4A16 experts (CompressedTensorsWNA16MoEMethod): qp_model_bind_moe
 * stacks each expert's weight_packed / weight_scale / weight_zero_point
 * into FusedMoE's parameters: codes u (uint4b8 when symmetric) two per
 * byte along K, gate rows then up rows; scales [E, 2I, K/g] as stored;
 * zero points two per byte along N. Checked byte for byte against this
 * file's own layout. */
static void w4a16_moe(bool sym) {
    char dir[] = "/tmp/qport-ct-moe-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    static unsigned u[E][3][H * I], z[E][3][128]; /* one group: K = 128 = g */
    static int32_t wp[E][3][H * I / 8], zp[E][3][128 / 8];
    static uint16_t sc[E][3][128];
    static int64_t shape[3][2] = {{I, H}, {I, H}, {H, I}};
    static char names[E * 3 * 4][96];
    qp_tensor t[E * 3 * 4 + 1];
    size_t n = 0;
    for (int e = 0; e < E; e++)
        for (int p = 0; p < 3; p++) {
            int N = p == 2 ? H : I, K = p == 2 ? I : H;
            for (int i = 0; i < N * K; i++) u[e][p][i] = rnd() & 15u;
            for (int r = 0; r < N; r++) {
                z[e][p][r] = sym ? 8u : rnd() & 15u;
                tu_put(QP_DTYPE_F16, sc[e][p], (size_t)r, urand(0.001f, 0.02f));
            }
            ct_pack_rows(u[e][p], N, K, 4, wp[e][p]);
            ct_pack_zp(z[e][p], N, 1, 4, zp[e][p]);
            const char *sfx[4] = {"weight_packed", "weight_scale", "weight_shape", "weight_zero_point"};
            for (int k = 0; k < (sym ? 3 : 4); k++) {
                snprintf(names[n], sizeof names[n], "%s.%d.%s.%s", moe_prefix, e, moe_proj[p], sfx[k]);
                t[n] = k == 0 ? (qp_tensor){names[n], QP_DTYPE_I32, 2, {N, K / 8}, wp[e][p]}
                     : k == 1 ? (qp_tensor){names[n], QP_DTYPE_F16, 2, {N, 1}, sc[e][p]}
                     : k == 2 ? (qp_tensor){names[n], QP_DTYPE_I64, 1, {2}, shape[p]}
                              : (qp_tensor){names[n], QP_DTYPE_I32, 2, {N / 8, 1}, zp[e][p]};
                n++;
            }
        }
    char group[300];
    snprintf(group, sizeof group, "\"input_activations\": null, \"weights\": {\"num_bits\": 4, \"type\": \"int\", "
             "\"strategy\": \"group\", \"group_size\": 128, \"symmetric\": %s, \"dynamic\": false, \"actorder\": null}",
             sym ? "true" : "false");
    qp_model *m = moe_model(dir, "pack-quantized", group, t, n);
    qp_moe_binding b;
    qp_status st = m ? qp_model_bind_moe(m, moe_prefix, NULL, &b) : QP_ERR_INVALID_ARGUMENT;
    CHECK(!st && !strcmp(b.scheme.method, "CompressedTensorsWNA16MoEMethod") && b.E == E && b.H == H && b.I == I,
          "bind moe: %s", qp_last_error(ctx));
    if (!st) {
        size_t bad = 0;
        for (size_t i = 0; i < b.n_tensors; i++) {
            const qp_tensor *bt = &b.tensors[i];
            const uint8_t *d = bt->data;
            int w2 = !strncmp(bt->name, "w2", 2), rows = w2 ? H : 2 * I, K = w2 ? I : H;
            for (int e = 0; e < E; e++)
                for (int r = 0; r < rows; r++) {
                    int p = w2 ? 2 : r / I, rr = w2 ? r : r % I;
                    if (strstr(bt->name, "_weight_scale"))
                        bad += memcmp(d + ((size_t)e * rows + r) * 2, &sc[e][p][rr], 2) != 0;
                    else if (strstr(bt->name, "_weight_zero_point")) {
                        if (r % 2) continue;
                        int pn = w2 ? 2 : (r + 1) / I, rn = w2 ? r + 1 : (r + 1) % I;
                        bad += d[(size_t)e * rows / 2 + r / 2] != (uint8_t)(z[e][p][rr] | z[e][pn][rn] << 4);
                    } else
                        for (int k = 0; k < K; k += 2)
                            bad += d[((size_t)e * rows + r) * K / 2 + k / 2] !=
                                   (uint8_t)(u[e][p][(size_t)rr * K + k] | u[e][p][(size_t)rr * K + k + 1] << 4);
                }
        }
        CHECK(bad == 0 && b.n_tensors == (sym ? 4u : 6u), "ct moe w4a16 %s: %zu stacked bytes differ (%zu tensors)",
              sym ? "sym" : "asym", bad, b.n_tensors);
        moe_everywhere(sym ? "ct moe w4a16 sym" : "ct moe w4a16 asym", &b);
        qp_moe_binding_free(&b);
    }
    moe_model_remove(m, dir);
}

/* FP8_DYNAMIC experts (CompressedTensorsW8A8Fp8MoEMethod): per-channel fp8
 * weights under Quark's names; the stacked weight is the experts' bytes
 * and the scale [E, 2I] / [E, H] their channels. */
static void fp8_moe(void) {
    char dir[] = "/tmp/qport-ct-moe-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    static uint8_t w[E][3][H * I];
    static float sc[E][3][128];
    static char names[E * 3 * 2][96];
    qp_tensor t[E * 3 * 2 + 1];
    size_t n = 0;
    for (int e = 0; e < E; e++)
        for (int p = 0; p < 3; p++) {
            int N = p == 2 ? H : I, K = p == 2 ? I : H;
            for (int i = 0; i < N * K; i++) {
                w[e][p][i] = (uint8_t)(rnd() & 0xff);
                if ((w[e][p][i] & 0x7f) == 0x7f) w[e][p][i] = 0x38;
            }
            for (int r = 0; r < N; r++) sc[e][p][r] = urand(0.0005f, 0.005f);
            snprintf(names[n], sizeof names[n], "%s.%d.%s.weight", moe_prefix, e, moe_proj[p]);
            t[n] = (qp_tensor){names[n], QP_DTYPE_F8_E4M3FN, 2, {N, K}, w[e][p]};
            n++;
            snprintf(names[n], sizeof names[n], "%s.%d.%s.weight_scale", moe_prefix, e, moe_proj[p]);
            t[n] = (qp_tensor){names[n], QP_DTYPE_F32, 2, {N, 1}, sc[e][p]};
            n++;
        }
    qp_model *m = moe_model(dir, "float-quantized",
                            "\"weights\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"channel\", "
                            "\"symmetric\": true, \"dynamic\": false}, \"input_activations\": {\"num_bits\": 8, "
                            "\"type\": \"float\", \"strategy\": \"token\", \"symmetric\": true, \"dynamic\": true}",
                            t, n);
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    qp_resolve_options ro;
    qp_resolve_options_init(&ro);
    ro.capability = 90;
    bo.resolve = &ro;
    qp_moe_binding b;
    qp_status st = m ? qp_model_bind_moe(m, moe_prefix, &bo, &b) : QP_ERR_INVALID_ARGUMENT;
    CHECK(!st && !strcmp(b.scheme.method, "CompressedTensorsW8A8Fp8MoEMethod"), "bind fp8 moe: %s", qp_last_error(ctx));
    if (!st) {
        size_t bad = 0;
        for (size_t i = 0; i < b.n_tensors; i++) {
            const qp_tensor *bt = &b.tensors[i];
            int w2 = !strncmp(bt->name, "w2", 2), rows = w2 ? H : 2 * I, K = w2 ? I : H;
            bool scale = strstr(bt->name, "_weight_scale") != NULL;
            for (int e = 0; e < E; e++)
                for (int r = 0; r < rows; r++) {
                    int p = w2 ? 2 : r / I, rr = w2 ? r : r % I;
                    if (scale) bad += ((const float *)bt->data)[(size_t)e * rows + r] != sc[e][p][rr];
                    else bad += memcmp((const uint8_t *)bt->data + ((size_t)e * rows + r) * K, &w[e][p][(size_t)rr * K], (size_t)K) != 0;
                }
        }
        CHECK(bad == 0 && b.n_tensors == 4, "ct moe fp8: %zu stacked rows differ (%zu tensors)", bad, b.n_tensors);
        moe_everywhere("ct moe fp8-dynamic", &b);
        qp_moe_binding_free(&b);
    }
    moe_model_remove(m, dir);
}

int main(int argc, char **argv) {
    configs = argc > 1 ? argv[1] : "tests/configs";
    want_backend = argc > 2 ? argv[2] : NULL;
    if (qp_context_create(&ctx)) return 1;
    w4a16(true);
    w4a16(false);
    wna16_8bit();
    w8a16_fp8();
    nvfp4_a16();
    nvfp4_w4a4();
    mxfp4();
    w4a16_moe(true);
    w4a16_moe(false);
    fp8_moe();
    printf("ct-bind: %d layer pairs compared on the devices of this build\n", n_compared);
    if (want_backend)
        CHECK(n_on_want == n_cases, "%d of %d cases ran on %s", n_on_want, n_cases, want_backend);
    qp_context_destroy(ctx);
    return tu_finish("ct-bind");
}
