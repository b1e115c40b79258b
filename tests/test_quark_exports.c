/* Checkpoints written by AMD's own quantizer (amd-quark, tests/quark_exports,
 * made by make_fixtures.py) load as vLLM loads them, and every quantized
 * module computes what Quark's own frozen fake-quantized module computes:
 *
 *  - MX schemes (MXFP4/MXFP6 weights, with or without MX activations, with
 *    Quark's online rotation): the same arithmetic on Quark's own input x
 *    (the dequantized weights and the qdq activations are exact in the
 *    model dtype on both sides), so the outputs differ only by the order
 *    of torch's fp32 accumulation: within K 2^-23 |xq||wq| + 2u |y| + 2 tiny;
 *    nearly all are bit for bit equal (the count is printed).
 *  - int8 with dynamic per-token activations: Quark's quantizer divides by
 *    amax/127.5 and may store code +-128, so re-quantizing its xq with
 *    vLLM's amax/127 moves codes; there both quantize x itself, each
 *    activation within half a step of x (vLLM's step s = amax/127, Quark's
 *    smaller, plus Quark's rounding of xq to the model dtype, u |x|), so
 *        |y - y_quark| <= s_m sum_k |wq[n,k]| + (2u + K 2^-23) |x||wq| + 2u |y| + 2 tiny.
 *  - every other scheme: fed Quark's own quantized activation xq (so that
 *    both sides quantize the same values), qport's output is within
 *        (u + K 2^-23) |xq| |wq| + 2u |y| + 2 tiny
 *    of Quark's, u the model dtype's unit roundoff: Quark dequantizes the
 *    weight into the model dtype (one rounding, u |w|), torch's CPU matmul
 *    accumulates K products in fp32 (K 2^-24 each side) and both round y
 *    once (u |y| each); tiny is the dtype's smallest subnormal. On x itself
 *    the two differ where the activation quantizers differ (vLLM quantizes
 *    in fp32, Quark in the model dtype; docs/loading.md): that difference
 *    is printed and held to the scheme's quantization step instead.
 *  - int4_fp8 (a list of two weight specs): refused with vLLM's message.
 *  - the W4A16 MoE exports (uint4_wo_128, int4_wo_128): the experts'
 *    FusedMoE parameters byte for byte as vLLM 0.34.0's weight loader makes
 *    them from Quark's words (check_w4a16_moe).
 * Also: the model dtype comes from config.json (fp16 and bf16 exports). */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static qp_context *ctx;
static qp_device *cpu;
static int n_layers, n_exact, n_bounded;
static size_t n_out, n_out_same;

static int has(const char *s, const char *part) { return strstr(s, part) != NULL; }

/* Schemes whose qport output equals Quark's bit for bit on x (the MX
 * emulation is the same arithmetic on both sides, docs/semantics.md §5). */
static int mx_exact(const char *scheme) {
    static const char *const mx[] = {"mxfp4", "mxfp4_weight_only", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_mxfp6_e2m3",
                                     "mxfp4_rotation"};
    for (size_t i = 0; i < sizeof mx / sizeof *mx; i++)
        if (!strcmp(scheme, mx[i])) return 1;
    return 0;
}

static double tiny(qp_dtype d) { return d == QP_DTYPE_F16 ? 0x1p-24 : d == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-149; }

static void run_layer(qp_model *m, qp_safetensors *ref, const char *scheme, const char *layer, qp_dtype dt,
                      const char *where) {
    char nx[300], ny[300], nq[300], na[300], nw[300];
    snprintf(nx, sizeof nx, "%s.x", layer);
    snprintf(ny, sizeof ny, "%s.y", layer);
    snprintf(nq, sizeof nq, "%s.xq", layer);
    snprintf(na, sizeof na, "%s.yabs", layer);
    snprintf(nw, sizeof nw, "%s.wsum", layer);
    qp_tensor x, y, xq, ya, ws;
    if (qp_safetensors_find(ref, nx, &x) || qp_safetensors_find(ref, ny, &y) || qp_safetensors_find(ref, nq, &xq) ||
        qp_safetensors_find(ref, na, &ya) || qp_safetensors_find(ref, nw, &ws)) {
        CHECK(0, "%s: %s: reference tensors missing", where, layer);
        return;
    }
    qp_layer_binding b;
    qp_status st = qp_model_bind_layer(m, layer, NULL, &b);
    CHECK(!st, "%s: bind %s: %s", where, layer, qp_last_error(ctx));
    if (st) return;
    int M = (int)x.shape[0];
    CHECK(x.dtype == dt && y.dtype == dt && x.shape[1] == b.K && y.shape[1] == b.N, "%s: %s: reference shapes", where,
          layer);
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = dt;
    lo.layer = layer;
    lo.shard_rows = b.n_shards ? b.shard_rows : NULL;
    lo.n_shards = b.n_shards;
    qp_linear *lin = NULL;
    st = qp_linear_create(cpu, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, &lo, &lin);
    CHECK(!st, "%s: create %s: %s", where, layer, qp_last_error(ctx));
    size_t es = tu_esize(dt), n = (size_t)M * b.N;
    void *yx = calloc(n, es), *yq = calloc(n, es);
    if (!st && yx && yq && x.dtype == dt && y.dtype == dt) {
        n_layers++;
        CHECK(!qp_linear_forward(lin, x.data, M, yx), "%s: forward %s: %s", where, layer, qp_last_error(ctx));
        CHECK(!qp_linear_forward(lin, xq.data, M, yq), "%s: forward(xq) %s: %s", where, layer, qp_last_error(ctx));
        double u = tu_unit(dt), worst = 0, worst_x = 0;
        size_t bits_differ = 0;
        int int8_dyn = !strcmp(scheme, "int8_pc_dyn_token");
        for (size_t i = 0; i < n; i++) {
            double r = tu_get(dt, y.data, i), a = tu_get(dt, yx, i), q = tu_get(dt, yq, i);
            double abs_acc = ((const float *)ya.data)[i], bound;
            if (mx_exact(scheme)) { /* on x: accumulation order only */
                bound = b.K * 0x1p-23 * abs_acc + 2 * u * fabs(r) + 2 * tiny(dt);
                q = a;
            } else if (int8_dyn) { /* on x: one activation step of each side */
                double amax = 0;
                for (int k = 0; k < b.K; k++) amax = fmax(amax, fabs(tu_get(dt, x.data, (i / b.N) * b.K + k)));
                bound = amax / 127 * ((const float *)ws.data)[i % b.N] + (2 * u + b.K * 0x1p-23) * abs_acc +
                        2 * u * fabs(r) + 2 * tiny(dt);
                q = a;
            } else {
                bound = (u + b.K * 0x1p-23) * abs_acc + 2 * u * fabs(r) + 2 * tiny(dt);
            }
            bits_differ += memcmp((const char *)y.data + i * es, (const char *)yx + i * es, es) != 0;
            worst = fmax(worst, fabs(q - r) / bound);
            if (!(fabs(q - r) <= bound)) worst = INFINITY;
            worst_x = fmax(worst_x, fabs(a - r) / fmax(abs_acc, 1e-30));
        }
        CHECK(worst <= 1.0, "%s: %s: |y - y_quark| is %.3g x its bound (%s)", where, layer, worst,
              mx_exact(scheme) ? "MX on x, accumulation order" : int8_dyn ? "on x, one activation step" : "on Quark's xq, rounding");
        if (mx_exact(scheme)) {
            n_exact++;
            n_out += n;
            n_out_same += n - bits_differ;
        } else {
            n_bounded++;
        }
        if (getenv("QP_TEST_VERBOSE"))
            printf("  %-44s %-8s %s: %.3f of bound; on x: %zu/%zu bits differ, max |dy|/(|xq||wq|) %.2e\n", layer,
                   mx_exact(scheme) ? "mx" : "bounded", int8_dyn || mx_exact(scheme) ? "on x" : "on xq", worst, bits_differ, n,
                   worst_x);
    }
    free(yx);
    free(yq);
    qp_linear_destroy(lin);
    qp_layer_binding_free(&b);
}

/* W4A16 experts (vLLM 0.34.0's QuarkW4A16Int4MoEMethod): qp_model_bind_moe's
 * FusedMoE parameters against an independent transcription of the
 * method's weight loader (convert_quark_tensor) on Quark's own words: the
 * int32 words viewed as bytes, low nibble first; with pack_method reorder
 * each run of 8 nibbles taken in the order [0, 4, 1, 5, 2, 6, 3, 7];
 * symmetric codes ^ 8; transposed; weights packed two per byte along K
 * (t[:, 1::2] * 16 + t[:, ::2]), zero points two per byte along N; scales
 * transposed. Every byte must agree. */
static void convert_quark(const int32_t *words, int R, int C, int reorder, int sym, uint8_t *out /* [C][R] */) {
    static const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    const uint8_t *b = (const uint8_t *)words; /* little endian, as torch's view(uint8) */
    int nb = (C + 7) / 8 * 4;                  /* bytes per row */
    for (int r = 0; r < R; r++)
        for (int c0 = 0; c0 < nb * 2; c0 += 8)
            for (int j = 0; j < 8; j++) {
                int src = c0 + (reorder ? order[j] : j), c = c0 + j;
                int v = (b[(size_t)r * nb + src / 2] >> (4 * (src % 2))) & 15;
                if (c < C) out[(size_t)c * R + r] = (uint8_t)(v ^ (sym ? 8 : 0));
            }
}

static void check_w4a16_moe(qp_model *m, const char *where, const char *scheme) {
    int sym = !strcmp(scheme, "int4_wo_128");
    qp_moe_binding b;
    qp_status st = qp_model_bind_moe(m, "model.layers.0.mlp.experts", NULL, &b);
    CHECK(!st && !strcmp(b.scheme.scheme_class, "QuarkW4A16Int4MoEMethod"), "%s: bind moe: %s", where, qp_last_error(ctx));
    if (st) return;
    int E = b.E, H = b.H, I = b.I, g = 128;
    const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    size_t bad = 0, bytes = 0;
    for (int e = 0; e < E; e++)
        for (int p = 0; p < 3; p++) {
            int N = p < 2 ? I : H, K = p < 2 ? H : I, G = K / g, rows = p < 2 ? 2 * I : H, r0 = p == 1 ? I : 0;
            char nm[200];
            qp_tensor tw, ts, tz;
            snprintf(nm, sizeof nm, "model.layers.0.mlp.experts.%d.%s.weight", e, proj[p]);
            st = qp_model_find_tensor(m, nm, &tw);
            snprintf(nm, sizeof nm, "model.layers.0.mlp.experts.%d.%s.weight_scale", e, proj[p]);
            if (!st) st = qp_model_find_tensor(m, nm, &ts);
            snprintf(nm, sizeof nm, "model.layers.0.mlp.experts.%d.%s.weight_zero_point", e, proj[p]);
            if (!st && !sym) st = qp_model_find_tensor(m, nm, &tz);
            CHECK(!st && tw.dtype == QP_DTYPE_I32, "%s: expert %d %s: %s", where, e, proj[p], qp_last_error(ctx));
            if (st) continue;
            uint8_t *t = malloc((size_t)K * N), *z = malloc((size_t)G * N);
            convert_quark(tw.data, K, N, 1, sym, t); /* [N][K] */
            const qp_tensor *w = NULL, *sc = NULL, *zp = NULL;
            for (size_t i = 0; i < b.n_tensors; i++) {
                const char *n = b.tensors[i].name;
                if (!strcmp(n, p < 2 ? "w13_weight" : "w2_weight")) w = &b.tensors[i];
                if (!strcmp(n, p < 2 ? "w13_weight_scale" : "w2_weight_scale")) sc = &b.tensors[i];
                if (!strcmp(n, p < 2 ? "w13_weight_zero_point" : "w2_weight_zero_point")) zp = &b.tensors[i];
            }
            CHECK(w && sc && (sym || zp), "%s: missing FusedMoE parameters", where);
            if (w && sc && (sym || zp)) {
                const uint8_t *wb = w->data, *zb = zp ? zp->data : NULL;
                for (int n = 0; n < N; n++)
                    for (int k = 0; k < K; k += 2) {
                        uint8_t want = (uint8_t)(t[(size_t)n * K + k + 1] * 16 + t[(size_t)n * K + k]);
                        bad += wb[((size_t)e * rows + r0 + n) * (K / 2) + k / 2] != want;
                        bytes++;
                    }
                for (int gi = 0; gi < G; gi++)
                    for (int n = 0; n < N; n++) {
                        const uint16_t *s0 = ts.data, *s1 = sc->data;
                        bad += s1[((size_t)e * rows + r0 + n) * G + gi] != s0[(size_t)gi * N + n];
                        bytes++;
                    }
                if (!sym) {
                    convert_quark(tz.data, G, N, 1, 0, z); /* [N][G] */
                    for (int n = 0; n < N; n += 2)
                        for (int gi = 0; gi < G; gi++) {
                            uint8_t want = (uint8_t)(z[(size_t)(n + 1) * G + gi] * 16 + z[(size_t)n * G + gi]);
                            bad += zb[((size_t)e * rows / 2 + (r0 + n) / 2) * G + gi] != want;
                            bytes++;
                        }
                }
            }
            free(t);
            free(z);
        }
    CHECK(bad == 0 && bytes > 0, "%s: %zu of %zu FusedMoE bytes differ from vLLM's convert_quark_tensor", where, bad, bytes);
    printf("%s: W4A16 experts stacked as QuarkW4A16Int4MoEMethod loads them (%zu bytes)\n", where, bytes);
    qp_moe_binding_free(&b);
}

static int n_moe_blocks;

static double scalar_of(const qp_tensor *t) {
    if (t->dtype == QP_DTYPE_F32) { float v; memcpy(&v, t->data, 4); return v; }
    return qp_format_decode(t->dtype, *(const uint16_t *)t->data);
}

/* Quark's experts in qport's arithmetic: each routed expert as its three
 * linear layers (each with its own activation scales, as QuarkExperts
 * runs them), silu(gate) * up in the model dtype, the routing weights
 * summed in double and rounded once. */
static void compose(qp_model *m, const char *block, const qp_moe_binding *bp, qp_dtype dt, const void *xd, int M,
                    const int32_t *tid, const float *tw, int k, void *comp, const char *where) {
    qp_moe_binding b = *bp;
    int H = b.H;
    struct { const void *data; } x = {xd};
        double *acc = calloc((size_t)M * H, sizeof(double));
        for (int i = 0; acc && comp && i < M; i++)
            for (int j = 0; j < k; j++) {
                int e = tid[i * k + j];
                void *gu[2] = {calloc((size_t)b.I, 2), calloc((size_t)b.I, 2)}, *hh = calloc((size_t)b.I, 2), *d = calloc((size_t)H, 2);
                const char *pn[3] = {"gate_proj", "up_proj", "down_proj"};
                for (int p = 0; p < 3; p++) {
                    char ln[300];
                    snprintf(ln, sizeof ln, "%s.%d.%s", block, e, pn[p]);
                    qp_layer_binding lb;
                    qp_linear *l = NULL;
                    qp_linear_options lo;
                    qp_linear_options_init(&lo);
                    lo.act_dtype = dt;
                    if (p == 2)
                        for (int c = 0; c < b.I; c++) {
                            float gv = (float)tu_get(dt, gu[0], (size_t)c), uv = (float)tu_get(dt, gu[1], (size_t)c);
                            tu_put(dt, hh, (size_t)c, (float)tu_get(dt, (uint16_t[]){(uint16_t)qp_format_encode(dt, gv / (1.0f + expf(-gv)))}, 0) * uv);
                        }
                    CHECK(!qp_model_bind_layer(m, ln, NULL, &lb) && !qp_linear_create(cpu, &lb.scheme, lb.N, lb.K, lb.tensors, lb.n_tensors, &lo, &l) &&
                              !qp_linear_forward(l, p == 2 ? hh : (const uint16_t *)x.data + (size_t)i * H, 1, p == 2 ? d : gu[p]),
                          "%s: %s: %s", where, ln, qp_last_error(ctx));
                    qp_linear_destroy(l);
                    qp_layer_binding_free(&lb);
                }
                for (int h = 0; h < H; h++) acc[(size_t)i * H + h] += (double)tw[i * k + j] * tu_get(dt, d, (size_t)h);
                free(gu[0]); free(gu[1]); free(hh); free(d);
            }
    for (size_t i = 0; acc && i < (size_t)M * H; i++) tu_put(dt, comp, i, (float)acc[i]);
    free(acc);
}


/* One MoE block of an architecture fixture (make_arch_fixtures.py): the
 * routed experts bound as vLLM's FusedMoE loads them, routed as vLLM
 * routes them (router logits: the unquantized router in the model dtype,
 * fp32 sums rounded once; the model's routing keys and its fp32
 * e_score_correction_bias), against Quark's fake-quantized experts under
 * the model's own (transformers) routing. The experts chosen must be
 * Quark's; the outputs differ where the activation quantizers do (vLLM
 * quantizes in fp32, Quark in the model dtype: a step of the activation
 * format here and there, docs/loading.md) and, for static fp8, where
 * vLLM's one activation scale per layer (the max over experts) differs
 * from each expert's own: bounds below, and docs/loading.md. */
static void run_moe_block(qp_model *m, qp_safetensors *ref, const char *scheme, const char *block, const char *where) {
    char nx[300], ny[300], ni[300];
    snprintf(nx, sizeof nx, "%s.x", block);
    snprintf(ny, sizeof ny, "%s.y", block);
    snprintf(ni, sizeof ni, "%s.ids", block);
    qp_tensor x, y, ids;
    if (qp_safetensors_find(ref, nx, &x) || qp_safetensors_find(ref, ny, &y) || qp_safetensors_find(ref, ni, &ids)) {
        CHECK(0, "%s: %s: reference tensors missing", where, block);
        return;
    }
    qp_moe_binding b;
    qp_status st = qp_model_bind_moe(m, block, NULL, &b);
    CHECK(!st, "%s: bind %s: %s", where, block, qp_last_error(ctx));
    if (st) return;
    qp_moe_options o;
    st = qp_model_moe_options(m, block, &o);
    CHECK(!st, "%s: options %s: %s", where, block, qp_last_error(ctx));
    int M = (int)x.shape[0], H = b.H, E = b.E, k = (int)ids.shape[1];
    qp_dtype dt = qp_model_dtype(m);
    CHECK(x.dtype == dt && x.shape[1] == H && k == o.top_k, "%s: %s: reference shapes", where, block);
    qp_tensor g;
    char gn[300];
    snprintf(gn, sizeof gn, "%s.weight", b.router);
    CHECK(b.router[0] && !qp_model_find_tensor(m, gn, &g) && g.ndim == 2 && g.shape[0] == E && g.shape[1] == H,
          "%s: %s: the router", where, block);
    float *logits = malloc(sizeof(float) * (size_t)M * E), *tw = malloc(sizeof(float) * (size_t)M * k);
    int32_t *tid = malloc(sizeof(int32_t) * (size_t)M * k);
    void *yq = calloc((size_t)M * H, 2);
    qp_moe *moe = NULL;
    if (!st && x.dtype == dt && x.shape[1] == H && k == o.top_k && g.ndim == 2 && g.shape[1] == H && g.shape[0] == E) {
        for (int i = 0; i < M; i++)
            for (int e = 0; e < E; e++) {
                float acc = 0;
                for (int h = 0; h < H; h++)
                    acc += (float)tu_get(dt, x.data, (size_t)i * H + h) *
                           qp_format_decode(dt, (uint16_t)qp_format_encode(dt, qp_format_decode(g.dtype, ((const uint16_t *)g.data)[e * H + h])));
                logits[(size_t)i * E + e] = (float)tu_get(dt, (uint16_t[]){(uint16_t)qp_format_encode(dt, acc)}, 0);
            }
        o.act_dtype = dt;
        CHECK(!qp_moe_route(ctx, logits, M, E, &o, tid, tw), "%s: route: %s", where, qp_last_error(ctx));
        int same = 1;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < k; j++) {
                int found = 0;
                for (int l = 0; l < k; l++) found |= ((const int32_t *)ids.data)[i * k + l] == tid[i * k + j];
                same &= found;
            }
        CHECK(same, "%s: %s: vLLM's routing chose other experts than the model's", where, block);
        st = qp_moe_create(cpu, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &o, &moe);
        CHECK(!st, "%s: create %s: %s", where, block, qp_last_error(ctx));
        if (!st) CHECK(!qp_moe_forward(moe, x.data, M, logits, yq), "%s: forward %s: %s", where, block, qp_last_error(ctx));
        double se = 0, sr = 0, worst = 0;
        for (size_t i = 0; i < (size_t)M * H; i++) {
            double r = tu_get(dt, y.data, i), a = tu_get(dt, yq, i);
            se += (a - r) * (a - r);
            sr += r * r;
            worst = fmax(worst, fabs(a - r));
        }
        double nmse = se / fmax(sr, 1e-300), bound = ldexp(1.0, -8); /* fp8: (2^-4)^2 */
        /* Quark's own semantics in qport's arithmetic: each routed expert
         * run as its three linear layers, each with its own activation
         * scales (QuarkExperts), silu(gate) * up in the model dtype, the
         * routing weights of vLLM's routing; against Quark's output it
         * differs only by where the activation quantizers round (fp32 vs
         * the model dtype), and against qport's MoE only by vLLM's one
         * static activation scale per layer (the max over experts) */
        void *comp = calloc((size_t)M * H, 2);
        compose(m, block, &b, dt, x.data, M, tid, tw, k, comp, where);
        double se_c = 0, se_m = 0;
        for (size_t i = 0; comp && i < (size_t)M * H; i++) {
            double r = tu_get(dt, y.data, i), c = tu_get(dt, comp, i), a = tu_get(dt, yq, i);
            se_c += (c - r) * (c - r);
            se_m += (a - c) * (a - c);
        }
        double nmse_c = se_c / fmax(sr, 1e-300), nmse_m = se_m / fmax(sr, 1e-300);
        double bound_c = bound;
        const char *dash = strrchr(scheme, '-'); /* "deepseek_v3-fp8" */
        if (!strcmp(dash ? dash + 1 : scheme, "fp8")) {
            /* static per-tensor fp8 activations: both sides may round a
             * value to the neighbouring code (half a step, 2^-4 relative:
             * bound_c); vLLM's one scale per layer is the max over the
             * experts' (QuarkW8A8Fp8MoEMethod), coarser than an expert's
             * own: a full step (2^-3) against Quark, and the per-expert
             * model must be the closer one -- that is whose arithmetic the
             * difference is */
            bound = ldexp(1.0, -6);
            CHECK(nmse_c < nmse, "%s: %s: Quark's per-expert scales (NMSE %.3g) must explain Quark's output better than "
                                 "vLLM's max scale (%.3g)", where, block, nmse_c, nmse);
        } else {
            /* MXFP4 / NVFP4: dynamic block quantization, the same rule on
             * both sides (bit-exact in the linear comparisons); they differ
             * by the model-dtype roundings of the intermediate (u = 2^-8)
             * and the few fp4 codes of the down projection's input those
             * move: NMSE within 2^-12 */
            bound = bound_c = ldexp(1.0, -12);
        }
        CHECK(nmse_c <= bound_c, "%s: %s: Quark's experts recomputed by qport: NMSE %.3g, over %.3g", where, block, nmse_c,
              bound_c);
        CHECK(nmse <= bound, "%s: %s: NMSE %.3g against Quark's experts, over the bound %.3g", where, block, nmse, bound);
        n_moe_blocks++;
        printf("  %s %s: experts as Quark's; NMSE against Quark: vLLM's MoE %.3g (bound %.3g), Quark's per-expert scales "
               "%.3g; vLLM's MoE against those %.3g\n", where, block, nmse, bound, nmse_c, nmse_m);
        char n8[300], m8[300];
        snprintf(n8, sizeof n8, "%s.x8", block);
        snprintf(m8, sizeof m8, "%s.y8", block);
        qp_tensor x8, y8;
        if (!qp_safetensors_find(ref, n8, &x8) && !qp_safetensors_find(ref, m8, &y8) && x8.shape[0] == M && x8.shape[1] == H) {
            /* NVFP4 past the calibrated range (rows 1 and 3 times 8, the
             * same experts and weights): vLLM's MoE, Quark's experts and
             * the per-expert model, row by row */
            void *q8 = calloc((size_t)M * H, 2), *c8 = calloc((size_t)M * H, 2);
            CHECK(!qp_moe_forward_topk(moe, x8.data, M, tid, tw, q8), "%s: forward_topk: %s", where, qp_last_error(ctx));
            compose(m, block, &b, dt, x8.data, M, tid, tw, k, c8, where);
            printf("  %s %s: rows 1, 3 x8, NMSE by row: vLLM's MoE vs Quark", where, block);
            double rows_q[64] = {0}, rows_c[64] = {0};
            for (int i = 0; i < M && i < 64; i++) {
                double e2 = 0, c2 = 0, r2 = 0;
                for (int h = 0; h < H; h++) {
                    double r = tu_get(dt, y8.data, (size_t)i * H + h), a = tu_get(dt, q8, (size_t)i * H + h),
                           c = tu_get(dt, c8, (size_t)i * H + h);
                    e2 += (a - r) * (a - r);
                    c2 += (c - r) * (c - r);
                    r2 += r * r;
                }
                rows_q[i] = e2 / fmax(r2, 1e-300);
                rows_c[i] = c2 / fmax(r2, 1e-300);
                printf(" %.3g", rows_q[i]);
            }
            for (int i = 0; i < M && i < 64; i++)
                CHECK(rows_q[i] <= 0x1p-12 && rows_c[i] <= 0x1p-12, "%s: %s: row %d x8: NMSE %.3g / %.3g over 2^-12", where,
                      block, i, rows_q[i], rows_c[i]);
            /* why vLLM's two NVFP4 MoE rules (the gate's weight_scale_2
             * for up too; one input_scale_2, the max over experts) change
             * nothing here: Quark writes equal gate/up global weight scales
             * and one input global scale for all the experts of a layer */
            float is0 = 0;
            for (int e = 0; e < E; e++) {
                float v[3][2];
                const char *pn[3] = {"gate_proj", "up_proj", "down_proj"}, *sn[2] = {"weight_scale_2", "input_scale_2"};
                for (int p = 0; p < 3; p++)
                    for (int q = 0; q < 2; q++) {
                        char tn[300];
                        qp_tensor t;
                        snprintf(tn, sizeof tn, "%s.%d.%s.%s", block, e, pn[p], sn[q]);
                        v[p][q] = qp_model_find_tensor(m, tn, &t) ? NAN : (float)scalar_of(&t);
                    }
                if (!e) is0 = v[0][1];
                CHECK(v[0][0] == v[1][0] && v[0][1] == v[1][1] && v[0][1] == is0, "%s: %s: expert %d: gate/up scales %g/%g, "
                      "input %g/%g (expert 0: %g)", where, block, e, v[0][0], v[1][0], v[0][1], v[1][1], is0);
            }
            printf("; per-expert model vs Quark");
            for (int i = 0; i < M && i < 64; i++) printf(" %.3g", rows_c[i]);
            printf("\n");
            free(q8);
            free(c8);
        }
        free(comp);
    }
    qp_moe_destroy(moe);
    free(logits); free(tw); free(tid); free(yq);
    qp_moe_binding_free(&b);
}

static void run_fixture(const char *root, const char *dname, const char *scheme) {
    char path[1024], where[128];
    snprintf(path, sizeof path, "%s/%s/%s", root, dname, scheme);
    snprintf(where, sizeof where, "%s/%s", dname, scheme);
    qp_model *m = NULL;
    qp_status st = qp_model_open(ctx, path, &m);
    CHECK(!st, "%s: open: %s", where, qp_last_error(ctx));
    if (st) return;
    qp_dtype want = strstr(dname, "bf16") ? QP_DTYPE_BF16 : QP_DTYPE_F16;
    CHECK(qp_model_dtype(m) == want, "%s: model dtype %s", where, qp_dtype_name(qp_model_dtype(m)));
    if (!strcmp(scheme, "int4_fp8")) {
        /* vLLM refuses it at scheme dispatch (docs/semantics.md §4) */
        qp_layer_binding b;
        st = qp_model_bind_layer(m, "model.layers.0.mlp.down_proj", NULL, &b);
        CHECK(st == QP_ERR_NOT_IMPLEMENTED, "%s: refused with NotImplementedError (%s)", where, qp_status_str(st));
        CHECK(has(qp_last_error(ctx), "NotImplementedError: Multi-entry weight or activation quantization configs are "
                                      "only supported for NVFP4."),
              "%s: refusal message: %s", where, qp_last_error(ctx));
        if (!st) qp_layer_binding_free(&b);
        qp_model_close(m);
        return;
    }
    snprintf(path, sizeof path, "%s/%s/%s/quark_reference/outputs.safetensors", root, dname, scheme);
    qp_safetensors *ref = NULL;
    st = qp_safetensors_open(ctx, path, &ref);
    CHECK(!st, "%s: %s", where, qp_last_error(ctx));
    if (getenv("QP_TEST_VERBOSE")) printf("%s\n", where);
    size_t nl = 0;
    for (size_t i = 0; !st && i < qp_safetensors_count(ref); i++) {
        char layer[256];
        if (!tu_ref_layer(ref, i, layer, sizeof layer)) continue;
        size_t l = strlen(layer);
        if (l > 8 && !strcmp(layer + l - 8, ".experts")) { run_moe_block(m, ref, scheme, layer, where); continue; }
        run_layer(m, ref, scheme, layer, want, where);
        nl++;
    }
    size_t want_nl = strstr(dname, "moe") ? 32 : 14; /* Mixtral: 4 attention + 4 experts x 3, twice */
    if (strstr(dname, "arch")) want_nl = nl; /* make_arch_fixtures.py: as many as Quark quantized */
    CHECK(st || nl == want_nl, "%s: %zu quantized modules in Quark's outputs (%zu expected)", where, nl, want_nl);
    if (strstr(dname, "moe") && strstr(scheme, "int4_wo")) check_w4a16_moe(m, where, scheme);
    qp_safetensors_close(ref);
    qp_model_close(m);
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: test_quark_exports DIR\n"); return 2; }
    if (qp_context_create(&ctx) || qp_device_find(ctx, "cpu", &cpu)) return 1;
    int n_fixtures = 0;
    static const char *const dtypes[] = {"fp16", "bf16", "moe-fp16", "moe-bf16", "arch-bf16"};
    for (int d = 0; d < 5; d++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", argv[1], dtypes[d]);
        DIR *dir = opendir(path);
        CHECK(dir != NULL, "no fixtures in %s", path);
        if (!dir) continue;
        char *names[64];
        int nn = 0;
        for (struct dirent *e; (e = readdir(dir)) && nn < 64;)
            if (e->d_name[0] != '.') names[nn++] = strdup(e->d_name);
        closedir(dir);
        qsort(names, (size_t)nn, sizeof *names, cmp);
        for (int i = 0; i < nn; i++) {
            run_fixture(argv[1], dtypes[d], names[i]);
            free(names[i]);
            n_fixtures++;
        }
    }
    CHECK(n_fixtures >= 57, "%d fixtures (16 dense and 8 MoE schemes x 2 dtypes, 3 architectures x 3 schemes expected)",
          n_fixtures);
    CHECK(n_moe_blocks >= 9, "%d MoE blocks against Quark's experts", n_moe_blocks);
    printf("%d fixtures, %d modules: %d MX modules within the accumulation-order bound on x (%zu of %zu outputs bit "
           "for bit equal to Quark's), %d others within their bounds (on Quark's xq; int8 per-token on x)\n",
           n_fixtures, n_layers, n_exact, n_out_same, n_out, n_bounded);
    qp_context_destroy(ctx);
    return tu_finish("quark-exports");
}
