/* compressed-tensors checkpoints written by llm-compressor's own oneshot
 * (tests/ct_exports, made by make_fixtures.py: llm-compressor 0.14.0.1,
 * compressed-tensors 0.19.0; a tiny one-layer Llama per preset, fp16 and
 * bf16) open as models, resolve as vLLM 0.34.0 resolves them, bind, and
 * every quantized module computes what llm-compressor's own fake-quantized
 * module computes, on every device of this build.
 *
 * Per export (the table `presets` below):
 *  - the model lists its 8 linear layers (weight or weight_packed);
 *    every layer of ct_reference/outputs.safetensors resolves to the scheme
 *    class vLLM picks (CompressedTensorsW8A8Int8 / W8A8Fp8 / WNA16 /
 *    W4A4Fp4 / W4A8Int), ignored layers (W8A8_ignore: the regex targets
 *    leave them out and llm-compressor lists them in `ignore`) to
 *    UnquantizedLinearMethod, lm_head to UnquantizedEmbeddingMethod running
 *    from lm_head.weight itself;
 *  - devices against the cpu reference, on x and on xq: the integer path
 *    (W8A8 int8) bit for bit on every device; float paths within the bound
 *    the backend tests hold them to (tools/cases.c case_bound, u32 = 2^-24,
 *    T = sum_k |x_k| |w[n,k]|, the fixture's ax / axq, ulp of the output
 *    dtype at |ref|):
 *        dense, W4A16, lowered WNA16-8 / NVFP4A16:  (K + 2) u32 1.01 T + 2 ulp
 *        fp8 tensor / channel:                       K u32 1.125 T + 2 ulp
 *        fp8 128x128 blocks:  (132 + K/128) u32 1.01 (1.0625 T + 2^-10 s_g wsum) + 2 ulp,
 *                             s_g <= 2 amax_m / 448 (the row's amax bounds each group's);
 *    the outputs that are bit for bit the cpu's are counted and printed.
 *  - the cpu reference against the exporter's y = F.linear(xq, wq), xq and
 *    wq llm-compressor's quantize-dequantized activation and weight in the
 *    model dtype (u its unit roundoff: 2^-11 fp16, 2^-8 bf16; tiny its
 *    smallest subnormal; A = the fixture's ax or axq; torch's CPU GEMM sums
 *    in fp32, K u32 at most, and both sides round y once, u |y| + u |y_e|):
 *      W8A8 int8 (dynamic per token), on x: compressed-tensors' step is
 *        amax/127.5 (its codes may reach -128), vLLM's s_m = amax/127, so
 *        each side's activation is within half its step of x, and
 *        re-quantizing xq with vLLM's step would move codes; both quantize
 *        x itself:  s_m (1 + 2^-10) wsum[n] + (2u + (K+3) u32) 1.01 A_x
 *        + u (|y| + |y_e|) + 2 tiny (2u: the exporter rounds its dequantized
 *        weight and activation to the model dtype; vLLM multiplies the exact
 *        int32 sum by the two scales in fp32);
 *      FP8 (static tensor), FP8_DYNAMIC (channel, per-token), FP8_BLOCK
 *        (128x128, per-group 128), on xq: re-quantizing the exporter's xq
 *        gives its own e4m3 codes back (xq / s is within 2u of a code, far
 *        inside e4m3's half step; a dynamic scale from max|xq| is within u
 *        of the exporter's), so the terms differ by the exporter's rounding
 *        of wq and xq to the model dtype and the scale (3u):
 *        (3u + (K+8) u32) 1.01 A_xq + u (|y| + |y_e|) + 2 tiny;
 *      W4A16 (sym, asym, GPTQ act-order weight/static), x = xq: vLLM's
 *        (q - z) s is exact in fp32, the exporter's rounded once (u):
 *        (u + (K+2) u32) 1.01 A_x + u (|y| + |y_e|) + 2 tiny;
 *      W8A16 (WNA16 8-bit, lowered to a dense weight at bind: the single
 *        rounding of (q - z) s into the model dtype is exactly the
 *        exporter's wq), unquantized (ignored) layers:
 *        (2K + 4) u32 1.01 A_x + u (|y| + |y_e|) + 2 tiny;
 *      NVFP4A16 (lowered: e2m1 * (e4m3 sf * (1 / global)) rounded once; the
 *        exporter divides sf / global in fp32, so the dense weights may
 *        differ by one rounding): (u + (2K+4) u32) 1.01 A_x + ...;
 *    and on x itself for every running scheme the NMSE against y_e is
 *    printed and held to a ceiling: weight-only schemes (and ignored
 *    layers) run x = xq, each output within ~2u |y| of the exporter's:
 *    (2u)^2; W8A8 int8: the two sides' codes differ (steps amax/127.5 and
 *    amax/127), each activation within half a step of x; with the inputs'
 *    amax <= 8 rms, two independent quantization noises of step
 *    amax/127 give 2 (8/127)^2 / 12 = 6.6e-4 <= 2^-10 (measured <= 2.2e-4);
 *    fp8: the exporter rounds x / s to the model dtype before the e4m3
 *    cast (a double rounding: where the quotient rounds onto a tie, a code
 *    moves by one e4m3 step, 2^-3 of it; 0.2-0.3% of the codes here, one
 *    such code among a row's largest dominates a 4-row NMSE) and rounds
 *    its dynamic scales to the model dtype: ceiling 2^-10 (measured
 *    <= 4.3e-4).
 *  - vLLM's packed modules (check_fused): qkv_proj and gate_up_proj bound
 *    from their parts' tensors (weight_packed, weight_zero_point packed
 *    along N, weight_scale [N, groups] concatenated, weight_shape
 *    rewritten) equal, on the cpu, the parts' outputs side by side bit for
 *    bit, and every other device the cpu's (bit for bit on the integer
 *    path, NMSE <= 2^-20 on float paths, `qport run`'s criterion), for the
 *    schemes whose columns keep their parts' arithmetic; FP8_BLOCK's
 *    qkv_proj (64-row k/v shards under 128-row blocks, which vLLM's
 *    validate_fp8_block_shape refuses) must be refused.
 *      NVFP4 W4A4 (dynamic NVFP4 inputs with vLLM's g = max(input_global_scale)
 *        as stored), on xq: re-quantizing the exporter's xq gives its codes
 *        and block scales back, as for fp8: (3u + (K+8) u32) 1.01 A_xq + ...;
 *        on x both sides quantize x with the same g, block scales and
 *        codes, so the outputs differ only by the exporter's roundings of
 *        wq and xq to the model dtype: the weight-only ceiling (2u)^2
 *        (measured <= 3.8e-10, 4094 of 4096 outputs equal);
 *  - REFUSED rows (qport does not bind them yet; each row names the message
 *    qp_linear_create must give with the layer's name): W4A8 int
 *    (CompressedTensorsW4A8Int). Give such a row
 *    a bound family instead of the message once the scheme is bound.
 *  - act-order: llm-compressor 0.14's GPTQ offers only "weight" and
 *    "static" (it refuses "group"/"dynamic", whose configs vLLM 0.34.0
 *    also refuses: resolve-ct); those write no weight_g_idx and run above.
 *    A weight_g_idx added to such a layer's tensors is refused by name
 *    (check_g_idx): qport has no act-order permutation for compressed-
 *    tensors layers, and vLLM 0.34.0 registers no such parameter.
 *
 * argv[2] (optional): a backend that must run every module that runs (the
 * cuda-emulated-ct-exports test: the CUDA backend on an emulated sm_90). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static const char *want_backend;
static int n_fused, n_run, n_refused, n_ignored, n_exports, n_devices_max, n_on_backend, n_backend_unsupported;
static size_t n_dev_out, n_dev_exact;

enum fam { F_REFUSED, F_INT8, F_FP8, F_FP8_BLOCK, F_W4A16, F_DENSE8, F_NVFP4_DENSE, F_NVFP4 };

typedef struct preset {
    const char *dir;
    qp_scheme_kind kind;
    const char *cls;        /* vLLM 0.34.0's scheme class */
    enum fam fam;
    double nmse_x;          /* ceiling of NMSE(cpu(x), y_e)            */
    const char *refusal;    /* F_REFUSED: qp_linear_create's message     */
    const char *ignored[3]; /* layers that must stay unquantized         */
    int fused;              /* FUSED_*: packed modules that equal their parts */
} preset;

/* vLLM's packed modules whose output equals their parts' side by side:
 * per-channel / per-group weights and per-token (or per-K-group) dynamic
 * activations keep every column's arithmetic. Per-tensor FP8 (max weight
 * and input scale over the shards, requantized) and NVFP4A16 (1 / max of
 * the global scales) change the parts, and FP8_BLOCK's qkv_proj (k/v
 * shards of 64 rows under 128-row blocks) vLLM refuses (FUSED_QKV_REFUSED). */
enum { FUSED_QKV = 1, FUSED_GATE_UP = 2, FUSED_QKV_REFUSED = 4 };

/* NMSE ceilings on x (the header): weight-only schemes run x itself, and
 * every output is within ~2u |y| of the exporter's: (2u)^2 of the model
 * dtype (ONLY_W, resolved per dtype); int8 and fp8 activations: 2^-10. */
#define ONLY_W (-1.0)
#define ACT_Q 0x1p-10
static const preset presets[] = {
    {"fp16/W8A8", QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8", F_INT8, ACT_Q, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/W8A8_ignore", QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8", F_INT8, ACT_Q, NULL,
     {"model.layers.0.self_attn.o_proj", "model.layers.0.mlp.down_proj"}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/FP8", QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8", F_FP8, ACT_Q, NULL, {0}, 0},
    {"fp16/FP8_DYNAMIC", QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8", F_FP8, ACT_Q, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/FP8_BLOCK", QP_SCHEME_W8A8_FP8_BLOCK, "CompressedTensorsW8A8Fp8", F_FP8_BLOCK, ACT_Q, NULL, {0}, FUSED_GATE_UP | FUSED_QKV_REFUSED},
    {"fp16/W4A16", QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16", F_W4A16, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/W4A16_ASYM", QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16", F_W4A16, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/W4A16_actorder_weight", QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16", F_W4A16, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/W4A16_actorder_static", QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16", F_W4A16, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/W8A16", QP_SCHEME_WNA16, "CompressedTensorsWNA16", F_DENSE8, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"fp16/NVFP4A16", QP_SCHEME_NVFP4_A16, "CompressedTensorsW4A4Fp4", F_NVFP4_DENSE, ONLY_W, NULL, {0}, 0},
    /* NVFP4 with NVFP4 input quantization (vLLM's emulation: g = max(input_global_scale) as stored) */
    {"fp16/NVFP4", QP_SCHEME_NVFP4, "CompressedTensorsW4A4Fp4", F_NVFP4, ONLY_W, NULL, {0}, 0},
    /* REFUSED: int4 weights with dynamic int8 token activations */
    {"fp16/W4A8", QP_SCHEME_W4A8_INT, "CompressedTensorsW4A8Int", F_REFUSED, 0,
     "scheme w4a8-int is not a linear layer qport runs", {0}, 0},
    {"bf16/W8A8", QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8", F_INT8, ACT_Q, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"bf16/FP8_DYNAMIC", QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8", F_FP8, ACT_Q, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
    {"bf16/W4A16", QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16", F_W4A16, ONLY_W, NULL, {0}, FUSED_QKV | FUSED_GATE_UP},
};

/* per-export statistics, printed */
typedef struct stats {
    double worst_dev, worst_exp, max_abs, se, sr, max_abs_x;
    size_t exact_exp, n_exp;
} stats;

static double unit(qp_dtype d) { return d == QP_DTYPE_BF16 ? 0x1p-8 : 0x1p-11; }
static double tiny(qp_dtype d) { return d == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24; }
static double ulp_at(qp_dtype d, double v) { return fmax(fabs(v) * (d == QP_DTYPE_BF16 ? 0x1p-7 : 0x1p-10), tiny(d)); }

static qp_linear *make(qp_device *dev, const qp_layer_binding *b, const char *layer, qp_dtype dt, qp_status *st) {
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = dt;
    lo.layer = layer;
    lo.shard_rows = b->n_shards ? b->shard_rows : NULL;
    lo.n_shards = b->n_shards;
    qp_linear *l = NULL;
    *st = qp_linear_create(dev, &b->scheme, b->N, b->K, b->tensors, b->n_tensors, &lo, &l);
    return l;
}

static int is_ignored(const preset *p, const char *layer) {
    for (int i = 0; i < 3 && p->ignored[i]; i++)
        if (!strcmp(p->ignored[i], layer)) return 1;
    return 0;
}

static void check_lm_head(qp_model *m, qp_dtype dt, const char *where) {
    qp_layer_binding b;
    qp_status st = qp_model_bind_layer(m, "lm_head", NULL, &b);
    CHECK(!st, "%s: bind lm_head: %s", where, qp_last_error(ctx));
    if (st) return;
    CHECK(b.scheme.kind == QP_SCHEME_UNQUANTIZED && !strcmp(b.scheme.method, "UnquantizedEmbeddingMethod") &&
              b.N == 64 && b.K == 128 && b.n_tensors == 1 && !strcmp(b.tensors[0].name, "weight"),
          "%s: lm_head: %s, N %d K %d, %zu tensors", where, b.scheme.method, b.N, b.K, b.n_tensors);
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_tensor w;
    CHECK(!qp_model_find_tensor(m, "lm_head.weight", &w) && w.dtype == dt, "%s: lm_head.weight", where);
    uint16_t x[128] = {0}, y[64];
    x[7] = (uint16_t)qp_format_encode(dt, 1.0f);
    qp_linear *l = make(cpu, &b, "lm_head", dt, &st);
    CHECK(!st && !qp_linear_forward(l, x, 1, y), "%s: lm_head forward: %s", where, qp_last_error(ctx));
    for (int n = 0; !st && n < 64; n++)
        CHECK(y[n] == ((const uint16_t *)w.data)[n * 128 + 7], "%s: lm_head[%d] is not lm_head.weight's", where, n);
    qp_linear_destroy(l);
    qp_layer_binding_free(&b);
}

static const qp_tensor *find(qp_safetensors *ref, const char *layer, const char *sfx, qp_tensor *t) {
    char nm[300];
    snprintf(nm, sizeof nm, "%s.%s", layer, sfx);
    return qp_safetensors_find(ref, nm, t) ? NULL : t;
}

/* The device-vs-reference bound of output (m, n) (tools/cases.c). */
static double dev_bound(enum fam f, int K, double T, double ref, double wsum, double amax, qp_dtype dt) {
    double u32 = 0x1p-24, ulp = ulp_at(dt, ref);
    if (f == F_FP8) return K * u32 * 1.125 * T + 2 * ulp;
    if (f == F_FP8_BLOCK)
        return (132.0 + K / 128.0) * u32 * 1.01 * (1.0625 * T + 0x1p-10 * 2 * fmax(1e-10, amax) / 448 * wsum) + 2 * ulp;
    return (K + 2.0) * u32 * 1.01 * T + 2 * ulp;
}

/* The cpu-vs-exporter bound of output (m, n) (the header). */
static double exp_bound(enum fam f, int K, double A, double y, double ye, double wsum, double amax, qp_dtype dt) {
    double u = unit(dt), u32 = 0x1p-24, r = u * (fabs(y) + fabs(ye)) + 2 * tiny(dt);
    switch (f) {
    case F_INT8: return amax / 127 * (1 + 0x1p-10) * wsum + (2 * u + (K + 3) * u32) * 1.01 * A + r;
    case F_FP8:
    case F_FP8_BLOCK:
    case F_NVFP4: return (3 * u + (K + 8) * u32) * 1.01 * A + r;
    case F_W4A16: return (u + (K + 2) * u32) * 1.01 * A + r;
    case F_NVFP4_DENSE: return (u + (2 * K + 4) * u32) * 1.01 * A + r;
    default: return (2 * K + 4) * u32 * 1.01 * A + r; /* F_DENSE8, unquantized */
    }
}

static double row_amax(const qp_tensor *x, qp_dtype dt, int m, int K) {
    double a = 0;
    for (int k = 0; k < K; k++) a = fmax(a, fabs(tu_get(dt, x->data, (size_t)m * K + k)));
    return a;
}

/* Runs b on every device with input x; the cpu's output into ref, each
 * other device's checked against it. Returns the devices that ran. */
static int run_devices(const qp_layer_binding *b, const char *layer, enum fam f, qp_dtype dt, const qp_tensor *x,
                       const qp_tensor *A, const qp_tensor *ws, uint16_t *ref, stats *s, const char *where,
                       const char *input) {
    int M = (int)x->shape[0], K = b->K, N = b->N, ran = 0;
    size_t n = (size_t)M * N, nd = 0;
    uint16_t *yd = calloc(n, 2);
    qp_device_count(ctx, &nd);
    /* the cpu first: the others compare against it */
    for (int pass = 0; pass < 2 && yd; pass++)
        for (size_t d = 0; d < nd; d++) {
            qp_device *dev;
            qp_device_get(ctx, d, &dev);
            qp_device_info info = {.struct_size = sizeof info};
            qp_device_get_info(dev, &info);
            int is_cpu = !strcmp(info.backend, "cpu");
            if (is_cpu != (pass == 0)) continue;
            qp_status st;
            qp_linear *l = make(dev, b, layer, dt, &st);
            if (st == QP_ERR_UNSUPPORTED && !is_cpu) {
                if (want_backend && !strcmp(info.backend, want_backend) && !strcmp(input, "x")) n_backend_unsupported++;
                continue;
            }
            CHECK(!st, "%s: %s:%d: create %s: %s", where, info.backend, info.index, layer, qp_last_error(ctx));
            if (!st) {
                st = qp_linear_forward(l, x->data, M, is_cpu ? ref : yd);
                CHECK(!st, "%s: %s:%d: forward %s: %s", where, info.backend, info.index, layer, qp_last_error(ctx));
            }
            qp_linear_destroy(l);
            if (st) continue;
            ran++;
            if (want_backend && !strcmp(info.backend, want_backend) && !strcmp(input, "x")) n_on_backend++;
            if (is_cpu) continue;
            size_t differ = 0, outside = 0;
            for (size_t i = 0; i < n; i++) {
                int mm = (int)(i / N), nn = (int)(i % N);
                double a = tu_get(dt, yd, i), r = tu_get(dt, ref, i);
                differ += yd[i] != ref[i];
                if (f == F_INT8) continue;
                double bd = dev_bound(f, K, tu_get(QP_DTYPE_F16, A->data, i), r, tu_get(QP_DTYPE_F16, ws->data, nn),
                                      row_amax(x, dt, mm, K), dt);
                double e = fabs(a - r);
                if (!(e <= bd)) outside++;
                s->worst_dev = fmax(s->worst_dev, e / bd);
            }
            if (f == F_INT8)
                CHECK(differ == 0, "%s: %s:%d: %s on %s: %zu of %zu outputs differ from the cpu reference (integer "
                      "path)", where, info.backend, info.index, layer, input, differ, n);
            else
                CHECK(outside == 0, "%s: %s:%d: %s on %s: %zu of %zu outputs outside the bound", where, info.backend,
                      info.index, layer, input, outside, n);
            n_dev_out += n;
            n_dev_exact += n - differ;
        }
    free(yd);
    return ran;
}

/* The cpu's output y (on input xin, with A = ax or axq) against the
 * exporter's y_e: returns the worst |y - y_e| / bound. */
static double against_exporter(enum fam f, qp_dtype dt, int M, int K, int N, const uint16_t *y, const qp_tensor *ye,
                               const qp_tensor *A, const qp_tensor *ws, const qp_tensor *xin, stats *s, int count) {
    double worst = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) {
        double a = tu_get(dt, y, i), r = tu_get(dt, ye->data, i);
        double bd = exp_bound(f, K, tu_get(QP_DTYPE_F16, A->data, i), a, r, tu_get(QP_DTYPE_F16, ws->data, i % N),
                              row_amax(xin, dt, (int)(i / N), K), dt);
        worst = fmax(worst, fabs(a - r) / bd);
        if (count) {
            s->max_abs = fmax(s->max_abs, fabs(a - r));
            s->exact_exp += a == r;
            s->n_exp++;
        }
    }
    return worst;
}

static double nmse(qp_dtype dt, size_t n, const uint16_t *y, const void *ye, double *max_abs) {
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        double a = tu_get(dt, y, i), r = tu_get(dt, ye, i);
        se += (a - r) * (a - r);
        sr += r * r;
        *max_abs = fmax(*max_abs, fabs(a - r));
    }
    return se / fmax(sr, 1e-300);
}

static void run_layer(qp_model *m, qp_safetensors *ref, const preset *p, qp_dtype dt, const char *layer, stats *s) {
    const char *where = p->dir;
    qp_tensor tx, txq, ty, tax, taxq, tws;
    const qp_tensor *x = find(ref, layer, "x", &tx), *y_e = find(ref, layer, "y", &ty), *ax = find(ref, layer, "ax", &tax),
                    *ws = find(ref, layer, "wsum", &tws), *xq = find(ref, layer, "xq", &txq),
                    *axq = find(ref, layer, "axq", &taxq);
    if (!x || !y_e || !ax || !ws) { CHECK(0, "%s: %s: reference tensors missing", where, layer); return; }
    if (!xq) { xq = x; axq = ax; } /* no input quantization */
    int M = (int)x->shape[0], K = (int)x->shape[1], N = (int)y_e->shape[1];
    qp_layer_binding b;
    qp_status st = qp_model_bind_layer(m, layer, NULL, &b);
    CHECK(!st, "%s: bind %s: %s", where, layer, qp_last_error(ctx));
    if (st) return;
    int ign = is_ignored(p, layer);
    enum fam f = ign ? F_DENSE8 : p->fam;
    CHECK(b.K == K && b.N == N && x->dtype == dt && y_e->dtype == dt, "%s: %s: shapes [%d, %d] vs [%d, %d]", where,
          layer, b.N, b.K, N, K);
    if (ign)
        CHECK(b.scheme.kind == QP_SCHEME_UNQUANTIZED && !strcmp(b.scheme.method, "UnquantizedLinearMethod"),
              "%s: %s must be unquantized (ignored), got %s %s", where, layer, b.scheme.method, b.scheme.scheme_class);
    else
        CHECK(b.scheme.kind == p->kind && !strcmp(b.scheme.method, "CompressedTensorsLinearMethod") &&
                  !strcmp(b.scheme.scheme_class, p->cls),
              "%s: %s: %s / %s (%s), want %s (%s)", where, layer, b.scheme.method, b.scheme.scheme_class,
              qp_scheme_kind_name(b.scheme.kind), p->cls, qp_scheme_kind_name(p->kind));
    if (f == F_REFUSED) {
        qp_device *cpu;
        qp_device_find(ctx, "cpu", &cpu);
        qp_linear *l = make(cpu, &b, layer, dt, &st);
        const char *e = qp_last_error(ctx);
        CHECK(st != QP_OK && strstr(e, layer) && strstr(e, p->refusal), "%s: %s must be refused with '%s': %s", where,
              layer, p->refusal, st ? e : "it was created");
        qp_linear_destroy(l);
        qp_layer_binding_free(&b);
        n_refused++;
        return;
    }
    size_t n = (size_t)M * N;
    uint16_t *yx = calloc(n, 2), *yq = calloc(n, 2);
    int ran = yx && yq ? run_devices(&b, layer, f, dt, x, ax, ws, yx, s, where, "x") : 0;
    if (xq != x && ran) run_devices(&b, layer, f, dt, xq, axq, ws, yq, s, where, "xq");
    else if (yq && yx) memcpy(yq, yx, n * 2);
    if (ran > n_devices_max) n_devices_max = ran;
    if (ran) {
        /* the bound on x (int8: both quantize x) or on xq (every other) */
        double w = f == F_INT8 ? against_exporter(f, dt, M, K, N, yx, y_e, ax, ws, x, s, 1)
                               : against_exporter(f, dt, M, K, N, yq, y_e, axq, ws, xq, s, 1);
        CHECK(w <= 1.0, "%s: %s: |y - y_exporter| is %.3g x its bound (on %s)", where, layer, w,
              f == F_INT8 ? "x" : "xq");
        s->worst_exp = fmax(s->worst_exp, w);
        double mx = 0, e = nmse(dt, n, yx, y_e->data, &mx);
        double ceil = p->nmse_x == ONLY_W || ign ? 4 * unit(dt) * unit(dt) : p->nmse_x;
        CHECK(e <= ceil, "%s: %s: NMSE %.3g on x against the exporter, ceiling %.3g", where, layer, e, ceil);
        s->se += e;
        s->sr += 1;
        s->max_abs_x = fmax(s->max_abs_x, mx);
        printf("  %-28s %-34s %d device(s); vs exporter: %.3f of the bound (on %s), NMSE on x %.3g%s\n", where, layer,
               ran, w, f == F_INT8 || xq == x ? "x" : "xq", e, ign ? " (ignored: unquantized)" : "");
        n_run++;
        n_ignored += ign;
    }
    free(yx);
    free(yq);
    qp_layer_binding_free(&b);
}

/* A weight_g_idx (act-order "group") next to a WNA16 layer's tensors: no
 * compressed-tensors act-order permutation is modelled, and the tensor is
 * refused by name (it would otherwise be silently ignored). */
static void check_g_idx(qp_model *m, const char *where) {
    const char *layer = "model.layers.0.self_attn.q_proj";
    qp_layer_binding b;
    qp_status st = qp_model_bind_layer(m, layer, NULL, &b);
    CHECK(!st, "%s: bind %s: %s", where, layer, qp_last_error(ctx));
    if (st) return;
    qp_tensor t[sizeof b.tensors / sizeof *b.tensors + 1];
    memcpy(t, b.tensors, b.n_tensors * sizeof *t);
    int32_t *g = calloc((size_t)b.K, sizeof *g);
    for (int k = 0; g && k < b.K; k++) g[k] = k / 128;
    t[b.n_tensors] = (qp_tensor){.name = "weight_g_idx", .dtype = QP_DTYPE_I32, .ndim = 1, .shape = {b.K}, .data = g};
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = QP_DTYPE_F16;
    lo.layer = layer;
    qp_linear *l = NULL;
    st = qp_linear_create(cpu, &b.scheme, b.N, b.K, t, b.n_tensors + 1, &lo, &l);
    CHECK(st != QP_OK && strstr(qp_last_error(ctx), "weight_g_idx") && strstr(qp_last_error(ctx), layer),
          "%s: a weight_g_idx must be refused by name: %s", where, st ? qp_last_error(ctx) : "it was created");
    printf("  %-28s %-34s + weight_g_idx: refused (%s)\n", where, layer, qp_last_error(ctx));
    qp_linear_destroy(l);
    free(g);
    qp_layer_binding_free(&b);
}

/* A packed module (qkv_proj, gate_up_proj) bound from the parts' tensors
 * (weight_packed / weight_zero_point concatenated along N, weight_shape
 * rewritten): on the first part's x, the cpu's output equals the parts'
 * outputs side by side bit for bit; every other device's equals the cpu's
 * bit for bit on the integer path, within NMSE 2^-20 on float paths
 * (`qport run`'s criterion). */
static void check_fused(qp_model *m, qp_safetensors *ref, const preset *p, qp_dtype dt, const char *fused,
                        const char *const *parts, int np, int refused) {
    const char *where = p->dir;
    qp_tensor x;
    if (!find(ref, parts[0], "x", &x)) { CHECK(0, "%s: %s.x", where, parts[0]); return; }
    int M = (int)x.shape[0];
    qp_layer_binding fb;
    qp_status st = qp_model_bind_layer(m, fused, NULL, &fb);
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    if (refused) {
        qp_status bound = st; /* the binding is freed whatever the create says */
        qp_linear *l = st ? NULL : make(cpu, &fb, fused, dt, &st);
        CHECK(st != QP_OK && strstr(qp_last_error(ctx), fused), "%s: %s must be refused (vLLM: shards of 64 rows "
              "under 128-row blocks): %s", where, fused, st ? qp_last_error(ctx) : "it was created");
        printf("  %-28s %-34s refused: %s\n", where, fused, qp_last_error(ctx));
        qp_linear_destroy(l);
        if (!bound) qp_layer_binding_free(&fb);
        return;
    }
    CHECK(!st && fb.n_shards == (size_t)np, "%s: bind %s: %s (%zu shards)", where, fused, qp_last_error(ctx), fb.n_shards);
    if (st) return;
    size_t n = (size_t)M * fb.N, nd = 0;
    uint16_t *want = calloc(n, 2), *got = calloc(n, 2), *ref_y = calloc(n, 2);
    int off = 0, ok = want && got && ref_y;
    for (int i = 0; i < np && ok; i++) {
        qp_layer_binding pb;
        st = qp_model_bind_layer(m, parts[i], NULL, &pb);
        qp_linear *l = st ? NULL : make(cpu, &pb, parts[i], dt, &st);
        uint16_t *yp = st ? NULL : calloc((size_t)M * pb.N, 2);
        CHECK(yp && !qp_linear_forward(l, x.data, M, yp), "%s: %s: %s", where, parts[i], qp_last_error(ctx));
        for (int r = 0; yp && r < M; r++)
            memcpy(want + (size_t)r * fb.N + off, yp + (size_t)r * pb.N, (size_t)pb.N * 2);
        off += st ? 0 : pb.N;
        ok = yp != NULL;
        free(yp);
        qp_linear_destroy(l);
        if (!st) qp_layer_binding_free(&pb);
    }
    CHECK(!ok || off == fb.N, "%s: %s: parts' N sum %d, fused N %d", where, fused, off, fb.N);
    qp_device_count(ctx, &nd);
    int ran = 0;
    for (int pass = 0; pass < 2 && ok && off == fb.N; pass++)
        for (size_t d = 0; d < nd; d++) {
            qp_device *dev;
            qp_device_get(ctx, d, &dev);
            qp_device_info info = {.struct_size = sizeof info};
            qp_device_get_info(dev, &info);
            int is_cpu = !strcmp(info.backend, "cpu");
            if (is_cpu != (pass == 0)) continue;
            qp_linear *l = make(dev, &fb, fused, dt, &st);
            if (st == QP_ERR_UNSUPPORTED && !is_cpu) continue;
            CHECK(!st && !qp_linear_forward(l, x.data, M, got), "%s: %s:%d: fused %s: %s", where, info.backend,
                  info.index, fused, qp_last_error(ctx));
            qp_linear_destroy(l);
            if (st) continue;
            ran++;
            if (is_cpu) {
                CHECK(!memcmp(got, want, n * 2), "%s: cpu: fused %s != its parts", where, fused);
                memcpy(ref_y, got, n * 2);
            } else if (p->fam == F_INT8) {
                CHECK(!memcmp(got, ref_y, n * 2), "%s: %s:%d: fused %s != the cpu's", where, info.backend, info.index,
                      fused);
            } else {
                double mx = 0, e = nmse(dt, n, got, ref_y, &mx);
                CHECK(e <= 0x1p-20, "%s: %s:%d: fused %s: NMSE %.3g against the cpu", where, info.backend, info.index,
                      fused, e);
            }
        }
    printf("  %-28s %-34s = its %d parts; %d device(s)\n", where, fused, np, ran);
    n_fused += ran > 0;
    free(want);
    free(got);
    free(ref_y);
    qp_layer_binding_free(&fb);
}

static void run_export(const char *root, const preset *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, p->dir);
    qp_dtype dt = !strncmp(p->dir, "bf16", 4) ? QP_DTYPE_BF16 : QP_DTYPE_F16;
    qp_model *m = NULL;
    qp_status st = qp_model_open(ctx, path, &m);
    CHECK(!st, "%s: open: %s", p->dir, qp_last_error(ctx));
    if (st) return;
    CHECK(qp_model_dtype(m) == dt, "%s: model dtype %s", p->dir, qp_dtype_name(qp_model_dtype(m)));
    check_lm_head(m, dt, p->dir);
    /* the model lists its linear layers from weight / weight_packed */
    CHECK(qp_model_layer_count(m) == 8, "%s: %zu linear layers listed (7 and lm_head)", p->dir, qp_model_layer_count(m));
    snprintf(path, sizeof path, "%s/%s/ct_reference/outputs.safetensors", root, p->dir);
    qp_safetensors *ref = NULL;
    st = qp_safetensors_open(ctx, path, &ref);
    CHECK(!st, "%s: %s", p->dir, qp_last_error(ctx));
    stats s = {0};
    int nl = 0, r0 = n_refused;
    for (size_t i = 0; !st && i < qp_safetensors_count(ref); i++) {
        char layer[256];
        if (!tu_ref_layer(ref, i, layer, sizeof layer)) continue;
        run_layer(m, ref, p, dt, layer, &s);
        nl++;
    }
    CHECK(nl == 7, "%s: %d modules in the exporter's outputs (7 in one decoder layer)", p->dir, nl);
    if (!strcmp(p->dir, "fp16/W4A16_actorder_static")) check_g_idx(m, p->dir);
    const char *qkv[3] = {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                          "model.layers.0.self_attn.v_proj"},
               *gu[2] = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"};
    if (p->fused & (FUSED_QKV | FUSED_QKV_REFUSED))
        check_fused(m, ref, p, dt, "model.layers.0.self_attn.qkv_proj", qkv, 3, p->fused & FUSED_QKV_REFUSED);
    if (p->fused & FUSED_GATE_UP) check_fused(m, ref, p, dt, "model.layers.0.mlp.gate_up_proj", gu, 2, 0);
    if (p->fam == F_REFUSED)
        printf("%-28s REFUSED %d of %d layers: %s\n", p->dir, n_refused - r0, nl, p->refusal);
    else
        printf("%-28s devices: worst %.3f of their bound; vs exporter: worst %.3f of the bound, max |dy| %.3g, %zu of "
               "%zu outputs equal; on x: mean NMSE %.3g, max |dy| %.3g\n",
               p->dir, s.worst_dev, s.worst_exp, s.max_abs, s.exact_exp, s.n_exp, s.sr ? s.se / s.sr : 0.0,
               s.max_abs_x);
    n_exports++;
    qp_safetensors_close(ref);
    qp_model_close(m);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: test_ct_exports DIR [BACKEND]\n"); return 2; }
    want_backend = argc > 2 ? argv[2] : NULL;
    if (qp_context_create(&ctx)) return 1;
    for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) run_export(argv[1], &presets[i]);
    int want_refused = 7; /* W4A8: every layer */
    CHECK(n_exports == 16 && n_refused == want_refused && n_run == 15 * 7 && n_ignored == 2,
          "%d exports, %d layers run (%d ignored), %d refused", n_exports, n_run, n_ignored, n_refused);
    CHECK(n_fused == 11 * 2 + 1, "%d packed modules equal their parts", n_fused);
    CHECK(!want_backend || (n_on_backend == n_run && !n_backend_unsupported), "%d of %d modules ran on %s (%d not "
          "supported)", n_on_backend, n_run, want_backend ? want_backend : "", n_backend_unsupported);
    printf("%d llm-compressor exports: %d modules run on up to %d device(s) each (%d unquantized by ignore), %d "
           "refused; %zu of %zu device outputs bit for bit the cpu's; %d packed modules equal their parts%s",
           n_exports, n_run, n_devices_max, n_ignored, n_refused, n_dev_exact, n_dev_out, n_fused,
           want_backend ? "" : "\n");
    if (want_backend)
        printf("; on %s: %d modules ran, %d not supported there\n", want_backend, n_on_backend, n_backend_unsupported);
    qp_context_destroy(ctx);
    return tu_finish("ct-exports");
}
