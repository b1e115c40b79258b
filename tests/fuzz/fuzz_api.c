/* libFuzzer target: the public API's caller-supplied sizes.
 * qp_linear_create over real checkpoint tensors of seven schemes (made by
 * qp_quantize_weights) with fuzzed N and K (extremes included), shard_rows
 * and n_shards (negative, not summing to N, NULL), scheme group and block
 * sizes, and tensors whose names, dtypes, ranks, dims (negative, wrapping,
 * overflowing) and data pointers are fuzzed; then qp_moe_create with
 * fuzzed E, H, I, routing options and tensor shapes. A tensor keeps its
 * real buffer only where that buffer holds what the fuzzed shape claims;
 * otherwise its data is NULL (the library must then refuse it), so the
 * API's contract holds and every finding is the library's. Everything must
 * come back as a status -- never a crash or a sanitizer report. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Quark configs of the schemes exercised (global config only). */
#define Q(w, a) "{\"quant_method\":\"quark\",\"export\":{\"pack_method\":\"reorder\"},\"global_quant_config\":{\"weight\":" w \
                ",\"input_tensors\":" a "},\"exclude\":[]}"
#define T(dt, qs, dyn) "{\"dtype\":\"" dt "\",\"qscheme\":\"" qs "\",\"symmetric\":true,\"is_dynamic\":" dyn "}"
#define G(dt, g, fmt, dyn) "{\"dtype\":\"" dt "\",\"qscheme\":\"per_group\",\"group_size\":" g ",\"symmetric\":true," \
                           "\"scale_format\":\"" fmt "\",\"is_dynamic\":" dyn "}"
static const char *const configs[] = {
    Q(T("int8", "per_channel", "false"), T("int8", "per_tensor", "true")),
    Q(T("fp8_e4m3", "per_tensor", "false"), T("fp8_e4m3", "per_tensor", "false")),
    Q(T("fp8_e4m3", "per_tensor", "false"), T("fp8_e4m3", "per_tensor", "true")),
    Q(G("uint4", "32", "float", "false"), "null"),
    Q(G("fp4", "32", "e8m0", "false"), G("fp4", "32", "e8m0", "true")),
    Q("[" G("fp4", "16", "fp8_e4m3", "false") ",{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":null}]",
      "[" G("fp4", "16", "fp8_e4m3", "true") ",{\"dtype\":\"fp4\",\"qscheme\":\"per_group\",\"group_size\":null}]"),
    "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\",\"weight_block_size\":[128,128]}",
};
#define N_CFG (sizeof configs / sizeof *configs)

static const char *const names[] = {"weight", "weight_scale", "input_scale", "bias", "weight_zero_point",
                                    "weight_scale_2", "input_scale_2", "weight_scale_inv", "s_group", "zz"};
#define N_NAMES (sizeof names / sizeof *names)

static qp_context *ctx;
static qp_device *cpu;
static qp_scheme schemes[N_CFG];
static qp_qweights *qw[N_CFG];
static const int NS = 64, KS = 128; /* the quantized layers' shape */

static uint8_t at(const uint8_t *d, size_t n, size_t i) { return n ? d[i % n] : 0; }
static int64_t i64(const uint8_t *d, size_t n, size_t i) {
    uint64_t v = 0;
    for (int b = 0; b < 8; b++) v |= (uint64_t)at(d, n, i + (size_t)b) << (8 * b);
    return (int64_t)v;
}

/* An int from a fuzzed byte: small sizes near the layer's, or an extreme. */
static int size_of(uint8_t sel, const uint8_t *d, size_t n, size_t i, int near) {
    switch (sel % 8) {
    case 0: return near;
    case 1: return (int)(int32_t)(uint32_t)((int64_t)near + (int8_t)at(d, n, i)); /* wraps, no UB */
    case 2: return INT_MAX;
    case 3: return INT_MIN;
    case 4: return -1;
    case 5: return 1 << 28;
    case 6: return (int)(uint32_t)i64(d, n, i);
    default: return 0;
    }
}

/* The claimed byte count of a tensor; SIZE_MAX when the shape is one the
 * library must refuse by itself (a negative dim, an element count past
 * SIZE_MAX / 8, a bad rank or dtype); huge valid claims saturate. */
static size_t claimed(const qp_tensor *t, int *invalid) {
    *invalid = 1;
    if (t->ndim < 0 || t->ndim > QP_TENSOR_MAX_DIMS || (int)t->dtype <= QP_DTYPE_NONE || (int)t->dtype >= QP_DTYPE_COUNT_)
        return SIZE_MAX;
    size_t c = 1;
    for (int k = 0; k < t->ndim; k++) {
        int64_t v = t->shape[k];
        if (v < 0 || (uint64_t)v > SIZE_MAX / 8 || (v && c > SIZE_MAX / 8 / (size_t)v)) return SIZE_MAX;
        c *= (size_t)v;
    }
    *invalid = 0;
    int bits = qp_format_bits(t->dtype);
    return c > SIZE_MAX / 64 ? SIZE_MAX : (c * (size_t)bits + 7) / 8;
}

/* Keeps the real buffer where it holds the claimed bytes, or where the
 * shape is invalid (the library must refuse the shape before reading
 * through it); NULL data otherwise (the library must refuse that too). */
static void fit(qp_tensor *t, const void *buf, size_t have) {
    int invalid;
    size_t c = claimed(t, &invalid);
    t->data = invalid || c <= have ? buf : NULL;
}

static void fuzz_linear(const uint8_t *d, size_t n) {
    size_t c = d[0] % N_CFG;
    if (!qw[c]) return;
    qp_scheme s = schemes[c];
    if (d[1] & 1) s.weight.group_size = (int)(int16_t)(at(d, n, 2) | at(d, n, 3) << 8);
    if (d[1] & 2) s.weight.block[0] = (int)(int8_t)at(d, n, 4) * (d[1] & 4 ? 1 : 100000);
    int N = size_of(d[5], d, n, 6, NS), K = size_of(d[5] >> 3, d, n, 14, KS);
    size_t nt = qp_qweights_count(qw[c]);
    qp_tensor t[12];
    size_t have[12];
    for (size_t i = 0; i < nt && i < 12; i++) {
        qp_qweights_get(qw[c], i, &t[i]);
        have[i] = qp_tensor_bytes(&t[i]);
    }
    if (nt > 10) nt = 10;
    /* up to 3 tensors mutated */
    size_t pos = 22;
    for (int m = 0; m < 3; m++) {
        uint8_t op = at(d, n, pos++), which = at(d, n, pos++);
        if (!nt) break;
        size_t i = which % nt;
        const void *buf = t[i].data;
        switch (op % 10) {
        case 0: break;
        case 1: t[i].name = names[at(d, n, pos++) % N_NAMES]; break;
        case 2: t[i].dtype = (qp_dtype)(at(d, n, pos++) % (QP_DTYPE_COUNT_ + 2)); break;
        case 3: t[i].ndim = (int)(int8_t)at(d, n, pos++) % 7; break;
        case 4: t[i].shape[at(d, n, pos) % 4] = (int64_t)(int8_t)at(d, n, pos + 1); pos += 2; break;
        case 5: t[i].shape[at(d, n, pos) % 4] = i64(d, n, pos + 1); pos += 9; break;
        case 6: /* negative dims whose product wraps to the real count */
            if (t[i].ndim == 2 && t[i].shape[0] > INT64_MIN && t[i].shape[1] > INT64_MIN) { t[i].shape[0] = -t[i].shape[0]; t[i].shape[1] = -t[i].shape[1]; }
            break;
        case 7: t[i].data = NULL; break;
        case 8: t[i].name = NULL; break;
        default: if (nt < 10) { t[nt] = t[i]; have[nt] = have[i]; nt++; } break; /* a duplicate */
        }
        if (op % 10 != 7) fit(&t[i], buf, have[i]);
    }
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.layer = "fuzz.qkv_proj";
    int rows[8];
    size_t nsh = at(d, n, pos++) % 10;
    for (size_t i = 0; i < 8; i++) {
        uint8_t sel = at(d, n, pos++);
        rows[i] = sel & 0x80 ? size_of(sel, d, n, pos, NS / 2) : NS / 4;
        pos += 2;
    }
    if (nsh && nsh <= 8) { o.shard_rows = rows; o.n_shards = nsh; }
    else if (nsh == 9) { o.shard_rows = NULL; o.n_shards = 3; }
    qp_linear *lin = NULL;
    if (!qp_linear_create(cpu, &s, N, K, t, nt, &o, &lin)) {
        static uint16_t x[2 * 4096], y[2 * 4096];
        if (N <= 4096 && K <= 4096) (void)qp_linear_forward(lin, x, 2, y);
        qp_linear_destroy(lin);
    }
}

static void fuzz_moe(const uint8_t *d, size_t n) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = QP_SCHEME_UNQUANTIZED;
    int e0 = 1 + d[1] % 4, h0 = 1 + d[2] % 8, i0 = 1 + d[3] % 8;
    int E = size_of(d[4], d, n, 5, e0), H = size_of(d[4] >> 3, d, n, 13, h0), I = size_of(d[6], d, n, 21, i0);
    static uint16_t w13[4 * 16 * 8], w2[4 * 8 * 8];
    qp_tensor t[3] = {{"w13_weight", QP_DTYPE_F16, 3, {e0, 2 * i0, h0}, w13}, {"w2_weight", QP_DTYPE_F16, 3, {e0, h0, i0}, w2},
                      {"w13_weight", QP_DTYPE_F16, 3, {e0, 2 * i0, h0}, w13}};
    size_t have[3] = {sizeof w13, sizeof w2, sizeof w13};
    for (int m = 0; m < 2; m++) {
        uint8_t op = at(d, n, 30 + (size_t)m * 10);
        size_t i = op & 1;
        if (op & 2) t[i].shape[(op >> 2) % 3] = i64(d, n, 31 + (size_t)m * 10);
        if (op & 0x40) t[i].ndim = (int)(int8_t)at(d, n, 39 + (size_t)m * 10) % 7;
        fit(&t[i], i ? (const void *)w2 : (const void *)w13, have[i]);
    }
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = size_of(d[7], d, n, 50, 1);
    o.num_expert_group = d[8] & 1 ? size_of(d[8] >> 1, d, n, 58, 2) : 0;
    o.topk_group = size_of(d[9], d, n, 66, 1);
    o.global_num_experts = d[10] & 1 ? size_of(d[10] >> 1, d, n, 74, E) : 0;
    o.expert_offset = d[10] & 0x10 ? size_of(d[10] >> 5, d, n, 82, 0) : 0;
    o.scoring = (qp_moe_scoring)(d[11] % 3);
    size_t nt = 2 + (d[11] >> 7);
    qp_moe *moe = NULL;
    if (!qp_moe_create(cpu, &s, E, H, I, t, nt, &o, &moe)) {
        uint16_t x[2 * 8] = {0}, y[2 * 8];
        float logits[2 * 64] = {0};
        int G = o.global_num_experts ? o.global_num_experts : E;
        if (H <= 8 && G <= 64) (void)qp_moe_forward(moe, x, 2, logits, y);
        qp_moe_destroy(moe);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (!ctx) {
        if (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu)) return 0;
        float *w = malloc(sizeof(float) * (size_t)NS * KS);
        for (int i = 0; w && i < NS * KS; i++) w[i] = (float)((i * 37) % 19 - 9) * 0.01f;
        for (size_t c = 0; w && c < N_CFG; c++) {
            qp_config *cfg;
            if (qp_config_load_buffer(ctx, "fuzz", configs[c], strlen(configs[c]), &cfg)) continue;
            if (!qp_config_resolve(cfg, "model.layers.0.self_attn.qkv_proj", QP_LAYER_LINEAR, NULL, &schemes[c]))
                (void)qp_quantize_weights(ctx, &schemes[c], w, NS, KS, NULL, &qw[c]);
            qp_config_destroy(cfg);
        }
        free(w);
    }
    if (n < 24) return 0;
    if (d[0] & 0x80) fuzz_moe(d, n);
    else fuzz_linear(d, n);
    return 0;
}
