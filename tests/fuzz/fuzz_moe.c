/* libFuzzer target: the MoE binding and forward on the cpu reference with
 * tensors of fuzzed names, dtypes, shapes and contents (NaN, inf and
 * subnormal scales included), fuzzed routing options and logits, and
 * explicit expert ids that may be out of range. Every tensor's buffer holds
 * what its shape promises (the API's contract); everything else must come
 * back as a status, never a crash or a sanitizer report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale",
                                    "w13_input_scale", "w2_input_scale", "w13_weight_scalez", "w13_weight_scale_2",
                                    "w2_weight_scale_2", "w13_input_scale_2", "w2_input_scale_2"};
#define N_NAMES (sizeof names / sizeof *names)
static const qp_dtype dtypes[] = {QP_DTYPE_F16, QP_DTYPE_BF16, QP_DTYPE_F32, QP_DTYPE_F8_E4M3FN, QP_DTYPE_I8, QP_DTYPE_U8,
                                  QP_DTYPE_E8M0};
#define N_DTYPES (sizeof dtypes / sizeof *dtypes)
static const qp_dtype elems[] = {QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E2M3, QP_DTYPE_F6_E3M2, QP_DTYPE_F8_E4M3FN, QP_DTYPE_NONE};
static const char *const akeys[] = {"kFp8StaticTensorSym", "kFp8DynamicTensorSym", "kFp8DynamicTokenSym",
                                    "kInt8StaticTensorSym", "kInt8DynamicTokenSym", ""};

/* byte i of the input, cycling (0 when empty) */
static uint8_t at(const uint8_t *d, size_t n, size_t i) { return n ? d[i % n] : 0; }

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static qp_context *ctx;
    static qp_device *cpu;
    if (!ctx && (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu))) return 0;
    if (n < 12) return 0;
    int E = 1 + d[0] % 6, H = 1 + d[1] % 24, I = 1 + d[2] % 24, M = 1 + d[3] % 5;
    qp_scheme s;
    memset(&s, 0, sizeof s);
    static const qp_scheme_kind kinds[] = {QP_SCHEME_UNQUANTIZED, QP_SCHEME_W8A8_FP8, QP_SCHEME_W8A8_INT8,
                                           QP_SCHEME_NVFP4, QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8};
    s.kind = kinds[d[4] % 6];
    snprintf(s.activation_key, sizeof s.activation_key, "%s", akeys[d[5] % 6]);
    int blocked = s.kind == QP_SCHEME_NVFP4 || s.kind == QP_SCHEME_OCP_MX || s.kind == QP_SCHEME_W4A8_MXFP4_FP8;
    if (blocked) { /* block-scaled experts: sizes of whole blocks, element formats of the scheme */
        H = 32 * (1 + d[1] % 2);
        I = 32 * (1 + d[2] % 2);
        s.weight.dtype = s.kind == QP_SCHEME_OCP_MX ? elems[d[5] % 4] : QP_DTYPE_F4_E2M1;
        s.activation.dtype = s.kind == QP_SCHEME_W4A8_MXFP4_FP8 ? QP_DTYPE_F8_E4M3FN : elems[(d[5] >> 3) % 5];
        s.activation.dynamic = s.kind != QP_SCHEME_W4A8_MXFP4_FP8;
        s.weight.group_size = s.activation.group_size = s.kind == QP_SCHEME_NVFP4 ? 16 : 32;
        s.weight.granularity = s.activation.granularity = QP_GRAN_GROUP;
        snprintf(s.weight_key, sizeof s.weight_key, "kMxfp4Static");
    }
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.act_dtype = d[6] & 1 ? QP_DTYPE_BF16 : QP_DTYPE_F16;
    o.top_k = 1 + d[7] % (E + 1); /* may exceed E: an error */
    o.renormalize = d[7] >> 7;
    o.num_expert_group = d[8] % 4;
    o.topk_group = d[9] % 4;
    o.scoring = (qp_moe_scoring)(d[9] >> 6);
    float bias[8];
    for (int e = 0; e < 8; e++) memcpy(&bias[e], (uint8_t[4]){at(d, n, 30 + e), at(d, n, 31 + e), at(d, n, 32 + e), at(d, n, 33 + e)}, 4);
    o.e_score_correction_bias = d[8] & 0x80 ? bias : NULL;
    /* tensors: up to 10, each of a fuzzed name, dtype and shape */
    qp_tensor t[10];
    void *bufs[10] = {0};
    size_t nt = 1 + d[10] % 10, pos = 11;
    for (size_t i = 0; i < nt; i++) {
        uint8_t a = at(d, n, pos++), b = at(d, n, pos++);
        int64_t dims[3] = {E, a & 1 ? 2 * I : H, a & 2 ? H : I};
        if (blocked) dims[2] /= (b & 0x40) ? 2 : (b & 0x80) ? 16 : 32; /* packed codes or block scales */
        if (b & 1) dims[2] = 1 + at(d, n, pos++) % 24; /* a wrong shape now and then */
        int nd = 1 + (b >> 1) % 3;
        qp_dtype dt = dtypes[(b >> 3) % N_DTYPES];
        size_t cnt = 1;
        for (int k = 0; k < nd; k++) cnt *= (size_t)dims[k];
        size_t bytes = cnt * (size_t)(qp_format_bits(dt) >= 8 ? qp_format_bits(dt) / 8 : 1);
        uint8_t *p = malloc(bytes ? bytes : 1);
        for (size_t k = 0; p && k < bytes; k++) p[k] = at(d, n, pos + k);
        pos += bytes / 3;
        bufs[i] = p;
        t[i] = (qp_tensor){names[(a >> 2) % N_NAMES], dt, nd, {dims[0], dims[1], dims[2], 0}, p};
    }
    qp_moe *moe = NULL;
    if (!qp_moe_create(cpu, &s, E, H, I, t, nt, &o, &moe)) {
        uint16_t x[5 * 64], y[5 * 64];
        float logits[5 * 6];
        int32_t ids[5 * 7];
        float w[5 * 7];
        for (int i = 0; i < M * H; i++) x[i] = (uint16_t)(at(d, n, 2 * i) | at(d, n, 2 * i + 1) << 8);
        for (int i = 0; i < M * E; i++)
            memcpy(&logits[i], (uint8_t[4]){at(d, n, 4 * i), at(d, n, 4 * i + 1), at(d, n, 4 * i + 2), at(d, n, 4 * i + 3)}, 4);
        (void)qp_moe_forward(moe, x, M, logits, y);
        for (int i = 0; i < M * o.top_k; i++) {
            ids[i] = (int8_t)at(d, n, 50 + i) % (E + 2); /* may be out of range or negative: an error */
            w[i] = (float)at(d, n, 60 + i) / 255.0f;
        }
        (void)qp_moe_forward_topk(moe, x, M, ids, w, y);
        qp_moe_destroy(moe);
    }
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
    return 0;
}
