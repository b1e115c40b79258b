/* libFuzzer target: the MoE binding and forward on the cpu reference with
 * tensors of fuzzed names, dtypes, shapes and contents (NaN, inf and
 * subnormal scales included), fuzzed routing options and logits, and
 * explicit expert ids that may be out of range. Every tensor's buffer holds
 * what its shape promises (the API's contract); everything else must come
 * back as a status, never a crash or a sanitizer report.
 *
 * Inputs whose first byte has its top bit set take the checkpoint path:
 * a model directory written from the input -- experts present,
 * missing, extra, at negative, huge or zero-padded indices, weights of
 * the wrong shape or rank, a router missing or mis-shaped, and config.json
 * MoE keys given values of every JSON type, experts in int8 (Quark) or in
 * compressed-tensors' weight_packed with a weight_shape that may lie -- then qp_model_open,
 * qp_model_bind_moe, qp_model_moe_options, the fused MoE and every linear
 * layer's binding: each must be a status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* config.json values of every JSON type, in range and not */
static const char *const jvals[] = {"0", "1", "2", "3", "4", "-1", "4294967299", "99999999999999999999", "2.5", "1e308",
                                    "\"3\"", "null", "true", "false", "[]", "{}", "[2]", "\"sigmoid\"", "\"softmax\"", "0.5"};
static const char *const jkeys[] = {"num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_group",
                                    "topk_group", "norm_topk_prob", "routed_scaling_factor", "scoring_func", "model_type",
                                    "torch_dtype", "text_config"};
static const char *const qcfgs[] = {
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},\"global_quant_config\":{"
    "\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false},"
    "\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true},"
    "\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}",
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},\"global_quant_config\":{"
    "\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false},"
    "\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true},"
    "\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[\"re:.*experts.*\"]}",
    /* compressed-tensors W4A16 per channel: weight_packed / weight_shape experts */
    "{\"quant_method\":\"compressed-tensors\",\"format\":\"pack-quantized\",\"ignore\":[\"re:.*mlp.gate$\"],"
    "\"config_groups\":{\"g\":{\"targets\":[\"Linear\"],\"format\":\"pack-quantized\",\"input_activations\":null,"
    "\"weights\":{\"num_bits\":4,\"type\":\"int\",\"strategy\":\"channel\",\"group_size\":null,"
    "\"symmetric\":true,\"dynamic\":false,\"actorder\":null}}}}",
};

static int fuzz_checkpoint(qp_context *ctx, qp_device *cpu, const uint8_t *d, size_t n) {
    static char dir[64];
    if (!dir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/qp_fuzz_ckpt_%ld", t && strlen(t) < 30 ? t : "/tmp", (long)getpid());
        mkdir(dir, 0700);
    }
    size_t pos = 1;
#define B() at(d, n, pos++)
    int E = 1 + B() % 4, H = 8 * (1 + B() % 3), I = 8 * (1 + B() % 3), qc = B() % 3, ct = qc == 2;
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f, "{\"model_type\":\"qwen3_moe\",\"quantization_config\":%s,\"num_experts\":%d,\"num_experts_per_tok\":%d", qcfgs[qc],
            E, 1 + (E > 1));
    int nk = B() % 4;
    for (int k = 0; k < nk; k++) {
        uint8_t a = B(), v = B();
        fprintf(f, ",\"%s\":%s", jkeys[a % (sizeof jkeys / sizeof *jkeys)], jvals[v % (sizeof jvals / sizeof *jvals)]);
    }
    fputs("}", f);
    fclose(f);
    /* the tensors: per expert gate/up [I, H] and down [H, I] in int8 with
     * per-channel f32 scales, the router [E, H] f16; damage by bytes */
    enum { MAXT = 64 };
    qp_tensor t[MAXT];
    char names[MAXT][96];
    void *bufs[MAXT];
    size_t nt = 0;
    static const char *const proj[] = {"gate_proj", "up_proj", "down_proj", "foo_proj"};
    static const char *const idx_fmt[] = {"%d", "%d", "%d", "%d", "%d", "-%d", "0%d", "9999999999%d"};
    uint8_t seed = B();
    for (int e = 0; e < E + 1 && nt + 3 < MAXT; e++)
        for (int p = 0; p < 3 && nt + 3 < MAXT; p++) {
            uint8_t c = B();
            if (e == E && !(c & 0x80)) continue;     /* an extra expert now and then */
            if ((c & 0x07) == 0x07) continue;        /* a missing projection */
            char idx[32];
            snprintf(idx, sizeof idx, idx_fmt[(c >> 3) % 8], e);
            int pi = (c & 0x40) && (c & 0x20) ? 3 : p;
            int64_t rows = p == 2 ? H : I, cols = p == 2 ? I : H;
            int nd = (c & 0x18) == 0x18 ? 1 : 2;    /* rank damage */
            if (c & 0x01 && c & 0x02) cols++;        /* shape damage */
            size_t cnt = (size_t)(rows * (nd == 2 ? cols : 1));
            int8_t *w = malloc(cnt);
            float *sc = malloc(sizeof(float) * (size_t)rows);
            if (!w || !sc) { free(w); free(sc); break; }
            for (size_t i = 0; i < cnt; i++) w[i] = (int8_t)(seed + i * 31);
            for (int64_t i = 0; i < rows; i++) sc[i] = 0.01f * (float)(1 + (seed + i) % 7);
            if (ct) {
                /* int32 words of 8 codes along K (cnt / 4 of them) and a
                 * weight_shape that may lie */
                int64_t *shape = malloc(16);
                if (!shape) { free(w); free(sc); break; }
                shape[0] = (c & 0x04) ? (int64_t)seed - 100 : rows;
                shape[1] = (c & 0x20) ? (int64_t)cols * 8 + 1 : cols;
                snprintf(names[nt], sizeof names[nt], "model.layers.0.mlp.experts.%s.%s.weight_packed", idx, proj[pi]);
                t[nt] = (qp_tensor){names[nt], QP_DTYPE_I32, nd, {nd == 2 ? rows : (int64_t)cnt / 4, nd == 2 ? cols / 8 : 0, 0, 0}, w};
                bufs[nt++] = w;
                snprintf(names[nt], sizeof names[nt], "model.layers.0.mlp.experts.%s.%s.weight_shape", idx, proj[pi]);
                t[nt] = (qp_tensor){names[nt], QP_DTYPE_I64, 1, {2, 0, 0, 0}, shape};
                bufs[nt++] = shape;
            } else {
                snprintf(names[nt], sizeof names[nt], "model.layers.0.mlp.experts.%s.%s.weight", idx, proj[pi]);
                t[nt] = (qp_tensor){names[nt], QP_DTYPE_I8, nd, {rows, nd == 2 ? cols : 0, 0, 0}, w};
                bufs[nt++] = w;
            }
            snprintf(names[nt], sizeof names[nt], "model.layers.0.mlp.experts.%s.%s.weight_scale", idx, proj[pi]);
            t[nt] = (qp_tensor){names[nt], QP_DTYPE_F32, 1, {rows, 0, 0, 0}, sc};
            bufs[nt++] = sc;
        }
    uint8_t r = B();
    if ((r & 3) != 3 && nt < MAXT) { /* the router, maybe mis-shaped */
        int64_t re = E + ((r & 4) ? 1 : 0), rh = H - ((r & 8) ? 1 : 0);
        int nd = (r & 0x30) == 0x30 ? 1 : 2;
        size_t cnt = (size_t)(re * (nd == 2 ? rh : 1));
        uint16_t *g = malloc(2 * cnt);
        if (g) {
            for (size_t i = 0; i < cnt; i++) g[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)((seed + i) % 13) * 0.05f - 0.3f);
            t[nt] = (qp_tensor){"model.layers.0.mlp.gate.weight", QP_DTYPE_F16, nd, {re, nd == 2 ? rh : 0, 0, 0}, g};
            bufs[nt++] = g;
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    qp_status st = qp_safetensors_write(ctx, path, t, nt, NULL, 0);
    for (size_t i = 0; i < nt; i++) free(bufs[i]);
    if (st) return 0;
    qp_model *m = NULL;
    if (qp_model_open(ctx, dir, &m)) return 0;
    for (size_t i = 0; i < qp_model_moe_count(m); i++) {
        const char *mn = qp_model_moe_name(m, i);
        qp_moe_binding b;
        if (qp_model_bind_moe(m, mn, NULL, &b)) continue;
        qp_moe_options o;
        qp_moe *moe = NULL;
        if (!qp_model_moe_options(m, mn, &o) && !qp_moe_create(cpu, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &o, &moe)) {
            uint16_t x[2 * 24], y[2 * 24];
            float logits[2 * 4];
            for (int k = 0; k < 2 * b.H; k++) x[k] = (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)(k % 5) * 0.1f);
            for (int k = 0; k < 2 * b.E; k++) logits[k] = (float)((seed + k) % 9);
            (void)qp_moe_forward(moe, x, 2, logits, y);
            qp_moe_destroy(moe);
        }
        qp_moe_binding_free(&b);
    }
    for (size_t i = 0; i < qp_model_layer_count(m); i++) {
        qp_layer_binding lb;
        if (!qp_model_bind_layer(m, qp_model_layer_name(m, i), NULL, &lb)) qp_layer_binding_free(&lb);
    }
    qp_model_close(m);
#undef B
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static qp_context *ctx;
    static qp_device *cpu;
    if (!ctx && (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu))) return 0;
    if (n >= 1 && d[0] & 0x80) return fuzz_checkpoint(ctx, cpu, d, n);
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
