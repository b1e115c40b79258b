/* compressed-tensors MoE checkpoints written by llm-compressor's own
 * oneshot (tests/ct_exports/moe-fp16 and moe-bf16, made by
 * make_moe_fixtures.py: llm-compressor 0.14.0.1, compressed-tensors 0.19.0,
 * transformers 5.17.0; a tiny one-layer Mixtral, H 128, I 256, 4 experts,
 * top-2, in fp16 and again in bf16 (the same seeds), its
 * experts linearized by llm-compressor's linearize_moe and saved per expert
 * as model.layers.0.block_sparse_moe.experts.<e>.{gate,up,down}_proj.*)
 * bind as vLLM 0.34.0's FusedMoE loads them, and the block computes what
 * the exporter's fake-quantized experts compute, on every device.
 *
 * Per export (the table `presets`, which gives each its model dtype D:
 * the dtype of x, y, the checkpoint's scales, the fixture's intermediates
 * and qp_moe_options.act_dtype; the bound sums a13 ... w2 are fp16, rounded
 * up, in both):
 *  - qp_model_bind_moe resolves the block to vLLM's MoE method
 *    (CompressedTensorsWNA16MoEMethod, CompressedTensorsW8A8Fp8MoEMethod,
 *    CompressedTensorsW8A8Int8MoEMethod) with E 4, H 128, I 256; the router
 *    model.layers.0.block_sparse_moe.gate is unquantized;
 *  - routing: qp_model_moe_options (Mixtral: top-2, renormalized) and
 *    qp_moe_route over the fixture's router logits choose the model's
 *    top-k ids, in its order, with its weights within 2^-20 relative;
 *  - the block runs with the fixture's ids and weights
 *    (qp_moe_forward_topk) on every device of this build, against the
 *    cpu: the int8 experts bit for bit (exact int32 sums, the same
 *    quantizers and epilogues); the float paths (W4A16: D weights
 *    decoded exactly, fp32 fma sums in the kernel's order, where the cpu
 *    sums in double; fp8: e4m3 products summed in fp32) within the same
 *    chain of stages as below with only the two sums' orders differing
 *    (d1 = 2 (K + 8) u32 1.01 (a13 + d13 + hs), each side's rounding of
 *    every stage to D, and each side quantizing its own h: a code may
 *    move a whole step where h moved); the outputs that are bit for bit
 *    the cpu's are counted and printed (measured: fp8 and int8 all of
 *    them on Vulkan, OpenCL and the emulated CUDA device; W4A16 all on
 *    Vulkan, 639 of 640 on OpenCL, 632 of 640 on CUDA, worst 0.022 of the
 *    bound; bf16: every output of every preset on all three);
 *  - the cpu against the exporter's y (make_moe_fixtures.py's docstring:
 *    per expert the fake-quantized gate/up/down modules on per-token
 *    activations, silu(gate) * up in D, y = D(D(w0 o0) + D(w1 o1))) within
 *    a per-element bound carried through the block's stages, with the
 *    fixture's intermediates and sums (u the unit roundoff of D: 2^-11
 *    fp16, 2^-8 bf16; u32 = 2^-24; tiny D's smallest subnormal: 2^-24
 *    fp16, 2^-133 bf16; every "|r(a) - r(b)| <= |a - b| + u |a| + u |b|" is
 *    one rounding to D on each side; "fp16" below is D. The constants are
 *    re-derived for bf16: every 1.01 stands for (1 + u)^2 or 1 / (1 - u)
 *    <= 1.0079 at u = 2^-8, every 2.01 u for 2 u (1 + u) <= 2.0079 u; the
 *    rest (1.1 for silu', the e4m3 half step 2^-4 and its subnormal 2^-10
 *    s_x, s_x / 2 for int8) is not the model dtype's. The exporter's
 *    double roundings in bf16 (x / s rounded to bf16 before the fp8 or
 *    int8 cast: bf16 has a 0.5 step in [64, 128), so an int8 code may move
 *    by one) are inside its own xq and hq, so inside the fixture's d13 and
 *    d2;
 *    for row r = (token m, slot j), expert e, K = H for w13, I for w2):
 *      1. w13 output n (gate, then up): the pre-rounding values differ by
 *           weight-only (W4A16: both sides dequantize (q - 8) s once into
 *           fp16; fp32 sums, K u32 each):
 *             d1 = (u + (K + 2) u32) 1.01 a13
 *           dynamic activations (each side quantizes x itself: vLLM's
 *           step s_x = amax/448 (fp8) or amax/127 (int8), the exporter's
 *           xq is its own; |aq - xq| <= |aq - x| + |x - xq|, the second
 *           summed over |w| is the fixture's d13, the first at most half a
 *           step: fp8 2^-4 |x| + 2^-10 s_x (e4m3 has 3 mantissa bits;
 *           subnormal steps 2^-9 s_x), int8 s_x / 2; the exporter rounds
 *           its weights and activations to fp16 (2u), both sum in fp32):
 *             d1 = d13 + hs + (3u + (K + 8) u32) 1.01 (2 a13 + d13 + hs),
 *             hs = 2^-4 (a13 + d13) + 2^-10 s_x w13  (fp8),
 *                  s_x / 2 w13                        (int8);
 *         rounded to fp16: D1 = 1.01 d1 + 2.01 u |c1| + 3 tiny;
 *      2. s = fp16(silu(g)): silu' <= 1.1, so
 *         Ds = 1.1 Dg + 2.01 u (|silu(g)| + 1.1 Dg) + 3 tiny;
 *      3. h = fp16(s up): Dh = 1.01 (Ds (|up| + Du) + (|s| + tiny) Du) + 2.01 u |h| + 3 tiny;
 *      4. down's input: weight-only h itself; dynamic: each side quantizes
 *         its own h per row (vLLM's step s_h from max(|h| + Dh) / 448 or
 *         / 127), so summed over |w2[e][n]|, with S = 1.01 sum_i Dh_i
 *         |w2[e][n][i]| (|w2| decoded here from the checkpoint's own
 *         tensors, its row sums checked against the fixture's w2 within
 *         4u: the exporter's weights are the products rounded to D, u, its
 *         sums rounded up to fp16, 2^-11; 1.01 covers the exporter's D
 *         weights being within u of the decoded ones):
 *             D4 = d2 + S (1 + 2^-4) + 2^-4 (a2 + d2) + 2^-10 s_h w2  (fp8)
 *             D4 = d2 + S + s_h / 2 w2                                 (int8)
 *             D4 = S                                                  (W4A16)
 *         (d2 = sum |h - hq| |w2|, a2 = sum |hq| |w2|, w2 = sum |w2|: the
 *         fixture's);
 *      5. the w2 output before rounding: d5 = D4 + (c u + (I + 8) u32) 1.01
 *         (2 a2 + d2 + D4), c = 3 (dynamic) or 1; times the routing weight
 *         w: vLLM rounds w o_pre once, the exporter rounds o then w o:
 *         D5 = 1.01 (w d5 + 1.01 u w |o|) + 2.01 u w |o| + 3 tiny;
 *      6. y = fp16(c3_0 + c3_1) on both sides (0 + a is exact; the sum of
 *         two is order-free): Dy = 1.01 (D5_0 + D5_1) + 2.01 u |y| + 3 tiny.
 *    The worst |y - y_e| / Dy is printed (measured: W4A16 0.018, fp8
 *    0.0012, int8 0.0082; bf16: 0.012, 0.0032, 0.0042: worst cases, the
 *    half-step terms above all; the
 *    two routing weights of a token swapped go 10x past the W4A16 bound,
 *    and 50x past every NMSE ceiling), and the NMSE
 *    of the cpu's y against y_e is held to a ceiling: W4A16 (x itself,
 *    each output within ~2u |y| of the exporter's) (2u)^2 = 2^-20 fp16,
 *    2^-14 bf16 (measured 1.2e-7, 454 of 640 outputs equal; bf16 9.9e-6,
 *    463 of 640); fp8 dynamic: the
 *    exporter rounds x / s to fp16 before its e4m3 cast (a double
 *    rounding: a code may move a step) and rounds its scales to fp16,
 *    at x and at h: 2^-10 as the dense fp8 layers (measured 6.2e-5; bf16
 *    5.5e-4: bf16's 8-bit x / s lands on an e4m3 tie far more often than
 *    fp16's 11-bit one, so more codes move a step, and its scales are
 *    rounded to bf16; the ceiling is the dense layers' for bf16 too);
 *    int8 dynamic: the two sides' codes differ (steps amax/127.5 and
 *    amax/127), each within half a step, at x and at h: with amax <= 8
 *    rms, two independent noises of step amax/127 per stage, 2 x 2
 *    (8/127)^2 / 12 = 1.3e-3 <= 2^-9 (measured 7.3e-4; bf16 8.1e-4: where
 *    the exporter's x / s, rounded to bf16, lands on a half-integer its
 *    code moves by one, but such an x / s was within half a bf16 ulp,
 *    eps <= 2^-8 |x / s|, of that half-integer: its error is 1/2 + eps of
 *    a step instead of 1/2 - eps, so the noise stays that of a step and
 *    the ceiling stands). (The
 *    exporter's own block forward, which scales each expert's activations
 *    per tensor over the tokens routed to it, is 8.8e-4 (fp8) / 1.8e-3
 *    (int8) from y, bf16 1.4e-3 / 1.5e-3: moe_versions.json.)
 *
 * argv[2] (optional): a backend that must run every block (the
 * cuda-emulated-ct-moe-exports test: the CUDA backend on an emulated sm_90). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static const char *want_backend;
static int n_exports, n_on_backend, n_dev_runs;

enum fam { F_W4A16, F_FP8, F_INT8 };

typedef struct preset {
    const char *dir;
    qp_dtype dt; /* the model dtype: x, y, the scales, the intermediates */
    qp_scheme_kind kind;
    const char *method; /* vLLM 0.34.0's FusedMoE method */
    enum fam fam;
    double nmse_max;
} preset;

static const preset presets[] = {
    {"moe-fp16/W4A16", QP_DTYPE_F16, QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16MoEMethod", F_W4A16, 0x1p-20},
    {"moe-fp16/FP8_DYNAMIC", QP_DTYPE_F16, QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8MoEMethod", F_FP8, 0x1p-10},
    {"moe-fp16/W8A8", QP_DTYPE_F16, QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8MoEMethod", F_INT8, 0x1p-9},
    {"moe-bf16/W4A16", QP_DTYPE_BF16, QP_SCHEME_W4A16_INT4, "CompressedTensorsWNA16MoEMethod", F_W4A16, 0x1p-14},
    {"moe-bf16/FP8_DYNAMIC", QP_DTYPE_BF16, QP_SCHEME_W8A8_FP8, "CompressedTensorsW8A8Fp8MoEMethod", F_FP8, 0x1p-10},
    {"moe-bf16/W8A8", QP_DTYPE_BF16, QP_SCHEME_W8A8_INT8, "CompressedTensorsW8A8Int8MoEMethod", F_INT8, 0x1p-9},
};

static double unit_of(qp_dtype d) { return d == QP_DTYPE_BF16 ? 0x1p-8 : 0x1p-11; }
static double tiny_of(qp_dtype d) { return d == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24; }

static const char *const BLOCK = "model.layers.0.block_sparse_moe";
enum { E = 4, H = 128, I = 256, K = 2 };

static const qp_tensor *ref_t(qp_safetensors *ref, const char *sfx, qp_dtype dt, int64_t d0, int64_t d1, qp_tensor *t,
                              const char *where) {
    char nm[300];
    snprintf(nm, sizeof nm, "%s.%s", BLOCK, sfx);
    int ok = !qp_safetensors_find(ref, nm, t) && t->dtype == dt && t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1;
    CHECK(ok, "%s: reference tensor %s missing or not %s [%lld, %lld]", where, nm, qp_dtype_name(dt), (long long)d0,
          (long long)d1);
    return ok ? t : NULL;
}

/* element i of a reference / checkpoint tensor in its own dtype (ref_t checked it) */
static double rv(const qp_tensor *t, size_t i) { return tu_get(t->dtype, t->data, i); }

/* |w2[e]| [H][I] dequantized from the checkpoint's own tensors (int4
 * weight_packed, 8 codes a word from the low bits, q - 8, times the group's
 * fp16 scale; fp8 / int8 weight times the channel's scale); the fixture's
 * row sums w2 check the decoding. NULL if a tensor is missing. */
static double *abs_w2(qp_model *m, qp_dtype dt, enum fam f, int e, const qp_tensor *w2sum, const char *where) {
    char nw[300], ns[300];
    snprintf(nw, sizeof nw, "%s.experts.%d.down_proj.%s", BLOCK, e, f == F_W4A16 ? "weight_packed" : "weight");
    snprintf(ns, sizeof ns, "%s.experts.%d.down_proj.weight_scale", BLOCK, e);
    qp_tensor w, sc;
    if (qp_model_find_tensor(m, nw, &w) || qp_model_find_tensor(m, ns, &sc) || sc.dtype != dt) {
        CHECK(0, "%s: %s / %s", where, nw, ns);
        return NULL;
    }
    double *a = malloc(sizeof(double) * H * I), worst = 0;
    int G = (int)sc.shape[1];
    for (int n = 0; n < H; n++) {
        double sum = 0;
        for (int i = 0; i < I; i++) {
            double q, s = tu_get(dt, sc.data, (size_t)n * G + (size_t)i / (I / G));
            if (f == F_W4A16) q = (double)((((const uint32_t *)w.data)[(size_t)n * I / 8 + i / 8] >> (4 * (i % 8))) & 15u) - 8;
            else if (f == F_FP8) q = qp_format_decode(QP_DTYPE_F8_E4M3FN, ((const uint8_t *)w.data)[(size_t)n * I + i]);
            else q = ((const int8_t *)w.data)[(size_t)n * I + i];
            a[(size_t)n * I + i] = fabs(q * s);
            sum += a[(size_t)n * I + i];
        }
        worst = fmax(worst, fabs(sum - rv(w2sum, (size_t)e * H + n)) / sum);
    }
    /* the exporter's weights are the products rounded to dt (u each), its
     * sum rounded up to fp16 (2^-11): 4u covers both (2^-9 fp16, 2^-6 bf16) */
    CHECK(worst <= 4 * unit_of(dt), "%s: expert %d's down_proj decoded: row sums %.3g from the exporter's", where, e, worst);
    return a;
}
static double silu(double g) { return g / (1.0 + exp(-g)); }

/* The bound Dy of every output (the header), from the fixture. */
static void bounds(qp_model *mdl, qp_dtype dt, enum fam f, int dev, int M, const qp_tensor *x, const float *w, qp_safetensors *ref,
                   double *Dy, const qp_tensor *y, const int32_t *ids, const char *where) {
    const double u = unit_of(dt), u32 = 0x1p-24, tiny = tiny_of(dt);
    int act = f != F_W4A16, MK = M * K;
    qp_tensor c1, h, hq, o, a13, d13, w13, a2, d2, w2;
    if (!ref_t(ref, "c1", dt, MK, 2 * I, &c1, where) || !ref_t(ref, "h", dt, MK, I, &h, where) ||
        !ref_t(ref, "o", dt, MK, H, &o, where) || !ref_t(ref, "a13", QP_DTYPE_F16, MK, 2 * I, &a13, where) ||
        !ref_t(ref, "w13", QP_DTYPE_F16, E, 2 * I, &w13, where) || !ref_t(ref, "a2", QP_DTYPE_F16, MK, H, &a2, where) ||
        !ref_t(ref, "w2", QP_DTYPE_F16, E, H, &w2, where) ||
        (act && (!ref_t(ref, "hq", dt, MK, I, &hq, where) ||
                 !ref_t(ref, "d13", QP_DTYPE_F16, MK, 2 * I, &d13, where) ||
                 !ref_t(ref, "d2", QP_DTYPE_F16, MK, H, &d2, where)))) {
        for (int i = 0; i < M * H; i++) Dy[i] = 0;
        return;
    }
    double *D1 = malloc(sizeof(double) * 2 * I), *Dh = malloc(sizeof(double) * I), *D5 = malloc(sizeof(double) * MK * H);
    double *aw2[E] = {0};
    for (int e = 0; e < E; e++)
        if (!(aw2[e] = abs_w2(mdl, dt, f, e, &w2, where))) {
            for (int i = 0; i < M * H; i++) Dy[i] = 0;
            goto out;
        }
    for (int r = 0; r < MK; r++) {
        int m = r / K, e = ids[r];
        double amax = 0;
        for (int k = 0; k < H; k++) amax = fmax(amax, fabs(rv(x, (size_t)m * H + k)));
        double sx = amax / (f == F_FP8 ? 448.0 : 127.0) * (1 + 0x1p-20);
        /* 1 */
        for (int n = 0; n < 2 * I; n++) {
            size_t i = (size_t)r * 2 * I + n;
            double A = rv(&a13, i), ws = rv(&w13, (size_t)e * 2 * I + n), d1;
            if (dev) { /* the same codes and scales on both; two fp32 sums of |aq| |w| <= a13 + d13 + hs */
                double dd = act ? rv(&d13, i) : 0, hs = f == F_FP8 ? 0x1p-4 * (A + dd) + 0x1p-10 * sx * ws : 0;
                d1 = 2 * (H + 8) * u32 * 1.01 * (A + dd + hs);
            } else if (!act) d1 = (u + (H + 2) * u32) * 1.01 * A;
            else {
                double dd = rv(&d13, i), hs = f == F_FP8 ? 0x1p-4 * (A + dd) + 0x1p-10 * sx * ws : sx / 2 * ws;
                d1 = dd + hs + (3 * u + (H + 8) * u32) * 1.01 * (2 * A + dd + hs);
            }
            D1[n] = 1.01 * d1 + 2.01 * u * fabs(rv(&c1, i)) + 3 * tiny;
        }
        /* 2, 3 */
        double hmax = 0;
        for (int k = 0; k < I; k++) {
            double gv = rv(&c1, (size_t)r * 2 * I + k), up = rv(&c1, (size_t)r * 2 * I + I + k);
            double Dg = D1[k], Du = D1[I + k], sv = fabs(silu(gv));
            double Ds = 1.1 * Dg + 2.01 * u * (sv + 1.1 * Dg) + 3 * tiny;
            double hv = fabs(rv(&h, (size_t)r * I + k));
            Dh[k] = 1.01 * (Ds * (fabs(up) + Du) + (sv * (1 + u) + tiny) * Du) + 2.01 * u * hv + 3 * tiny;
            hmax = fmax(hmax, hv + Dh[k]);
        }
        double sh = hmax / (f == F_FP8 ? 448.0 : 127.0) * (1 + 0x1p-20);
        /* 4, 5 */
        for (int n = 0; n < H; n++) {
            size_t i = (size_t)r * H + n;
            double A = rv(&a2, i), ws = rv(&w2, (size_t)e * H + n), dd = act ? rv(&d2, i) : 0, D4;
            /* sum_i Dh_i |w2[e][n][i]| (the exporter's fp16 weights within u of the decoded ones) */
            double mdh = 0;
            for (int k = 0; k < I; k++) mdh += Dh[k] * aw2[e][(size_t)n * I + k];
            mdh *= 1.01;
            double wo = w[r] * fabs(rv(&o, i));
            if (dev) { /* each side quantizes its own h: a code may move a whole step where h moved */
                D4 = f == F_FP8 ? mdh * (1 + 0x1p-4) + 2 * (0x1p-4 * (A + dd) + 0x1p-10 * sh * ws) : mdh;
                double d5 = D4 + 2 * (I + 8) * u32 * 1.01 * (A + dd + D4);
                D5[i] = 1.01 * w[r] * d5 + 2.01 * u * wo + 3 * tiny;
                continue;
            }
            if (f == F_FP8) D4 = dd + mdh * (1 + 0x1p-4) + 0x1p-4 * (A + dd) + 0x1p-10 * sh * ws;
            else if (f == F_INT8) D4 = dd + mdh + sh / 2 * ws;
            else D4 = mdh;
            double d5 = D4 + ((act ? 3 : 1) * u + (I + 8) * u32) * 1.01 * (2 * A + dd + D4);
            D5[i] = 1.01 * (w[r] * d5 + 1.01 * u * wo) + 2.01 * u * wo + 3 * tiny;
        }
    }
    /* 6 */
    for (int m = 0; m < M; m++)
        for (int n = 0; n < H; n++) {
            double s = 0;
            for (int j = 0; j < K; j++) s += D5[(size_t)(m * K + j) * H + n];
            Dy[(size_t)m * H + n] = 1.01 * s + 2.01 * u * fabs(rv(y, (size_t)m * H + n)) + 3 * tiny;
        }
out:
    for (int e = 0; e < E; e++) free(aw2[e]);
    free(D1); free(Dh); free(D5);
}

static void run_export(const char *root, const preset *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, p->dir);
    const char *where = p->dir;
    qp_model *m = NULL;
    qp_status st = qp_model_open(ctx, path, &m);
    CHECK(!st, "%s: open: %s", where, qp_last_error(ctx));
    if (st) return;
    snprintf(path, sizeof path, "%s/%s/ct_reference/outputs.safetensors", root, p->dir);
    qp_safetensors *ref = NULL;
    st = qp_safetensors_open(ctx, path, &ref);
    CHECK(!st, "%s: %s", where, qp_last_error(ctx));
    if (st) { qp_model_close(m); return; }
    char prefix[300], router[300];
    snprintf(prefix, sizeof prefix, "%s.experts", BLOCK);
    snprintf(router, sizeof router, "%s.gate", BLOCK);
    CHECK(qp_model_layer_unquantized(m, router), "%s: the router %s is not unquantized", where, router);

    qp_bind_options bo;
    qp_bind_options_init(&bo);
    qp_resolve_options ro;
    qp_resolve_options_init(&ro);
    ro.capability = 90; /* the emulated sm_90 of cuda-emulated-ct-moe-exports */
    bo.resolve = &ro;
    qp_moe_binding b;
    st = qp_model_bind_moe(m, prefix, &bo, &b);
    CHECK(!st, "%s: bind %s: %s", where, prefix, qp_last_error(ctx));
    if (st) { qp_safetensors_close(ref); qp_model_close(m); return; }
    CHECK(b.scheme.kind == p->kind && !strcmp(b.scheme.method, p->method) && b.E == E && b.H == H && b.I == I &&
              !strcmp(b.router, router),
          "%s: bound %s (%s, %s) E %d H %d I %d router '%s'", where, qp_scheme_kind_name(b.scheme.kind),
          b.scheme.method, b.scheme.scheme_class, b.E, b.H, b.I, b.router);

    qp_moe_options o;
    st = qp_model_moe_options(m, prefix, &o);
    CHECK(!st && o.top_k == K && o.renormalize, "%s: moe options: %s", where, qp_last_error(ctx));
    o.act_dtype = p->dt;
    o.layer = prefix;

    qp_tensor x, y, lg, idt, wt;
    int M = 0;
    if (!qp_safetensors_find(ref, "model.layers.0.block_sparse_moe.x", &x)) M = (int)x.shape[0];
    if (!ref_t(ref, "x", p->dt, M, H, &x, where) || !ref_t(ref, "y", p->dt, M, H, &y, where) ||
        !ref_t(ref, "router_logits", p->dt, M, E, &lg, where) ||
        !ref_t(ref, "topk_ids", QP_DTYPE_I32, M, K, &idt, where) ||
        !ref_t(ref, "topk_weights", QP_DTYPE_F32, M, K, &wt, where) || M < 1) {
        qp_moe_binding_free(&b); qp_safetensors_close(ref); qp_model_close(m);
        return;
    }
    const int32_t *ids = idt.data;
    const float *w = wt.data;
    /* routing: vLLM's fused_topk over the model's logits */
    {
        float *lf = malloc(sizeof(float) * (size_t)M * E), *tw = malloc(sizeof(float) * (size_t)M * K);
        int32_t *ti = malloc(sizeof(int32_t) * (size_t)M * K);
        for (int i = 0; i < M * E; i++) lf[i] = (float)rv(&lg, (size_t)i);
        st = qp_moe_route(ctx, lf, M, E, &o, ti, tw);
        CHECK(!st, "%s: route: %s", where, qp_last_error(ctx));
        int same = !st;
        double wrel = 0;
        for (int i = 0; !st && i < M * K; i++) {
            same &= ti[i] == ids[i];
            wrel = fmax(wrel, fabs(tw[i] - w[i]) / w[i]);
        }
        CHECK(same && wrel <= 0x1p-20, "%s: vLLM's routing: other ids than the model's, or weights %.3g apart", where,
              wrel);
        free(lf); free(tw); free(ti);
    }

    size_t n = (size_t)M * H, nd = 0, dev_out = 0, dev_exact = 0;
    uint16_t *ycpu = calloc(n, 2), *yd = calloc(n, 2);
    double *Dd = malloc(sizeof(double) * n), worst_dev = 0;
    bounds(m, p->dt, p->fam, 1, M, &x, w, ref, Dd, &y, ids, where);
    qp_device_count(ctx, &nd);
    int ran = 0, cpu_ok = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t d = 0; d < nd; d++) {
            qp_device *dev;
            qp_device_get(ctx, d, &dev);
            qp_device_info info = {.struct_size = sizeof info};
            qp_device_get_info(dev, &info);
            int is_cpu = !strcmp(info.backend, "cpu");
            if (is_cpu != (pass == 0) || (!is_cpu && !cpu_ok)) continue;
            qp_moe *moe = NULL;
            st = qp_moe_create(dev, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &o, &moe);
            if (st == QP_ERR_UNSUPPORTED && !is_cpu) {
                printf("  %s: %s:%d does not run these experts: %s\n", where, info.backend, info.index, qp_last_error(ctx));
                continue;
            }
            CHECK(!st, "%s: %s:%d: create: %s", where, info.backend, info.index, qp_last_error(ctx));
            if (!st) {
                st = qp_moe_forward_topk(moe, x.data, M, ids, w, is_cpu ? ycpu : yd);
                CHECK(!st, "%s: %s:%d: forward: %s", where, info.backend, info.index, qp_last_error(ctx));
            }
            qp_moe_destroy(moe);
            if (st) continue;
            ran++;
            if (want_backend && !strcmp(info.backend, want_backend)) n_on_backend++;
            if (is_cpu) { cpu_ok = 1; continue; }
            size_t differ = 0, outside = 0;
            for (size_t i = 0; i < n; i++) {
                double e = fabs(tu_get(p->dt, yd, i) - tu_get(p->dt, ycpu, i));
                differ += yd[i] != ycpu[i];
                outside += !(e <= Dd[i]);
                worst_dev = fmax(worst_dev, e / Dd[i]);
            }
            if (p->fam == F_INT8) /* exact int32 sums, the same epilogues */
                CHECK(differ == 0, "%s: %s:%d: %zu of %zu outputs differ from the cpu's (integer path)", where,
                      info.backend, info.index, differ, n);
            else
                CHECK(outside == 0, "%s: %s:%d: %zu of %zu outputs outside the device bound", where, info.backend,
                      info.index, outside, n);
            printf("  %s: %s:%d: %zu of %zu outputs bit for bit the cpu's\n", where, info.backend, info.index,
                   n - differ, n);
            dev_out += n;
            dev_exact += n - differ;
            n_dev_runs++;
        }
    if (cpu_ok) {
        double *Dy = malloc(sizeof(double) * n), worst = 0, se = 0, sr = 0, mx = 0;
        bounds(m, p->dt, p->fam, 0, M, &x, w, ref, Dy, &y, ids, where);
        size_t outside = 0, equal = 0;
        for (size_t i = 0; i < n; i++) {
            double a = tu_get(p->dt, ycpu, i), r = rv(&y, i), e = fabs(a - r);
            outside += !(e <= Dy[i]);
            worst = fmax(worst, e / Dy[i]);
            se += (a - r) * (a - r);
            sr += r * r;
            mx = fmax(mx, e);
            equal += a == r;
        }
        double nm = se / fmax(sr, 1e-300);
        CHECK(outside == 0, "%s: %zu of %zu cpu outputs outside the bound against the exporter (worst %.3f)", where,
              outside, n, worst);
        CHECK(nm <= p->nmse_max, "%s: NMSE %.3g against the exporter over the ceiling %.3g", where, nm, p->nmse_max);
        printf("%-22s %s: %d device(s), %zu of %zu device outputs the cpu's (worst %.3g of the device bound); cpu vs "
               "exporter: worst %.3g of the bound, NMSE %.3g (ceiling %.3g), max |dy| %.3g, %zu of %zu outputs equal\n",
               where, b.scheme.method, ran, dev_exact, dev_out, worst_dev, worst, nm, p->nmse_max, mx, equal, n);
        free(Dy);
    }
    n_exports++;
    free(ycpu); free(yd); free(Dd);
    qp_moe_binding_free(&b);
    qp_safetensors_close(ref);
    qp_model_close(m);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: test_ct_moe_exports DIR [BACKEND]\n"); return 2; }
    want_backend = argc > 2 ? argv[2] : NULL;
    if (qp_context_create(&ctx)) return 1;
    int np = (int)(sizeof presets / sizeof *presets);
    for (int i = 0; i < np; i++) run_export(argv[1], &presets[i]);
    CHECK(n_exports == np, "%d of %d MoE exports ran", n_exports, np);
    CHECK(!want_backend || n_on_backend == np, "%d of %d MoE blocks ran on %s", n_on_backend, np,
          want_backend ? want_backend : "");
    printf("%d llm-compressor MoE exports; %d device runs besides the cpu\n", n_exports, n_dev_runs);
    qp_context_destroy(ctx);
    return tu_finish("ct-moe-exports");
}
