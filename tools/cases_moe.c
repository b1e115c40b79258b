/* MoE conformance layers and their bound. The experts come from the
 * linear case layers of cases.c (so every MoE scheme's weights are the
 * ones its linear layers are proven on), stacked under vLLM's FusedMoE
 * names as qp_model_bind_moe stacks a checkpoint's.
 *
 * The bound. A device's fused MoE and the reference follow the same steps
 * (cpu/ref_moe.c) and differ in the order of the fp32 GEMM sums and in
 * what follows from that: an intermediate one ulp apart, and a second
 * activation quantization that may land on the neighbouring code. Rather
 * than compare the two directly, both are held to an fp64 model of the
 * block on unquantized activations (case_moe_model), with a bound built
 * step by step:
 *   - a quantized activation differs from the exact value v by at most
 *     e(v): its format's rounding at its scale (fp8: 2^-4 |v| and half the
 *     smallest subnormal step, the scale from the max of the tensor, the
 *     token or, per-block experts, the token's group of 128 along k;
 *     int8: half a step; MX: one ulp of the
 *     block's top binade, doubled for a scale that moves; NVFP4: 0.3 of
 *     the block max, all of it where the block scale underflows), plus
 *     what the value itself may be off by (|v' - v| <= vb), and the
 *     saturation of static scales;
 *   - a GEMM output: sum |W| e + (K 2^-24 + 3 2^-24) sum |W| (|v| + e)
 *     (any fp32 summation order, the epilogue's multiplies), then one
 *     rounding to the activation dtype (u |c|);
 *   - silu: slope within [-0.1, 1.1], the fp32 and dtype roundings;
 *     silu * up: the product rule and one rounding;
 *   - the weighted w2 output as a GEMM output times |w|, one more rounding;
 *     the k-slot sum: k roundings of the running sum, and a subnormal step
 *     per rounding.
 * It is valid for any summation order, so the reference passes it as well
 * (checked by every conform run). Where activations are 4-bit (MXFP4,
 * NVFP4) the quantization term dominates and the bound is loose: those
 * kernels' exactness rests on the activation quantizers being bit-exact
 * (the linear cases) and on the backends' own MoE tests. */
#include "cases_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const moe_schemes[] = {
    "unquantized", "int8-dyn-sym", "int8-static-sym", "fp8-static", "fp8-dyn-tensor", "fp8-dyn-token",
    "mxfp4-w-only", "mxfp4", "mxfp6-e3m2", "mxfp6-e2m3", "w4a8-mxfp4-fp8", "nvfp4",
    /* vLLM 0.34.0's QuarkW8A8Mxfp8MoEMethod and QuarkW4A16Int4MoEMethod */
    "mxfp8", "w4a16-int4-g32", "w4a16-uint4-g32",
    /* QuarkW8A8Fp8MoEMethod per_block: 128 x 128 weight blocks, activations
     * per token and group of 128 (H, I multiples of 128) */
    "fp8-block",
};
int case_moe_scheme_count(void) { return (int)(sizeof moe_schemes / sizeof *moe_schemes); }
const char *case_moe_scheme(int i) { return i >= 0 && i < case_moe_scheme_count() ? moe_schemes[i] : NULL; }
int case_moe_exact(const char *scheme) { return !strncmp(scheme, "int8", 4); }

void case_moe_free(case_moe *c) {
    for (int i = 0; i < 8; i++) free(c->owned[i]);
    free(c->w13);
    free(c->w2);
    memset(c, 0, sizeof *c);
}

static void *own(case_moe *c, size_t bytes) {
    for (int i = 0; i < 8; i++)
        if (!c->owned[i]) return c->owned[i] = calloc(1, bytes ? bytes : 1);
    return NULL;
}

static size_t nel(const qp_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static size_t esize(qp_dtype d) {
    int b = qp_format_bits(d);
    return b >= 8 ? (size_t)b / 8 : 1;
}

static const qp_tensor *find(const case_layer *l, const char *name) {
    for (size_t i = 0; i < l->n_tensors; i++)
        if (!strcmp(l->tensors[i].name, name)) return &l->tensors[i];
    return NULL;
}

/* Stacks tensor `src` of every expert's layer into `name` [E, ...]; `dup`
 * copies a scalar into two slots per expert ([E, 2], the two w13 shards). */
static int stack(case_moe *c, const case_layer *ls, const char *src, const char *name, int dup) {
    const qp_tensor *t0 = find(&ls[0], src);
    if (!t0) return 0;
    size_t n = nel(t0), b = n * esize(t0->dtype), reps = dup && n == 1 ? 2 : 1;
    unsigned char *p = own(c, b * (size_t)c->E * reps);
    if (!p) return -1;
    for (int e = 0; e < c->E; e++) {
        const qp_tensor *t = find(&ls[e], src);
        for (size_t r = 0; r < reps; r++) memcpy(p + ((size_t)e * reps + r) * b, t->data, b);
    }
    qp_tensor s = {name, t0->dtype, 1, {c->E, 0, 0, 0}, p};
    if (reps == 2) { s.ndim = 2; s.shape[1] = 2; }
    else if (n > 1) {
        for (int d = 0; d < t0->ndim; d++) s.shape[d + 1] = t0->shape[d];
        s.ndim = t0->ndim + 1;
    }
    c->tensors[c->n_tensors++] = s;
    return 0;
}

/* W4A16 experts: each expert's Quark words [K, N/8] (its [gate; up] layer
 * for w13) as QuarkW4A16Int4MoEMethod loads them (qp_model_bind_moe does
 * the same per projection): codes two per byte along K (symmetric ones
 * ^ 8), scales [N, K/g] as stored, uint4 zero points two rows per byte. */
static int stack_w4(case_moe *c, const case_layer *ls, int N, int K, int w2) {
    const qp_scheme *s = &ls[0].scheme;
    int g = s->weight.group_size, G = K / g, nc = (N + 7) / 8, sym = s->weight.symmetric;
    size_t E = (size_t)c->E;
    uint8_t *w = own(c, E * (size_t)N * K / 2), *z = sym ? NULL : own(c, E * (size_t)N / 2 * G);
    uint16_t *sc = own(c, 2 * E * (size_t)N * G);
    uint8_t *kn = malloc((size_t)K * N);
    if (!w || !sc || (!sym && !z) || !kn) { free(kn); return -1; }
    for (size_t e = 0; e < E; e++) {
        const qp_tensor *tw = find(&ls[e], "weight"), *ts = find(&ls[e], "weight_scale"), *tz = find(&ls[e], "weight_zero_point");
        if (!tw || !ts || (!sym && !tz) || nel(tw) != (size_t)K * nc || qp_unpack_int4_quark(tw->data, K, N, s->pack_method, kn)) {
            free(kn);
            return -1;
        }
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                w[(e * N + n) * (K / 2) + k / 2] |= (uint8_t)((kn[(size_t)k * N + n] ^ (sym ? 8 : 0)) << (4 * (k % 2)));
        for (int gi = 0; gi < G; gi++)
            for (int n = 0; n < N; n++) sc[(e * N + n) * G + gi] = ((const uint16_t *)ts->data)[(size_t)gi * N + n];
        if (sym) continue;
        if (qp_unpack_int4_quark(tz->data, G, N, s->pack_method, kn)) { free(kn); return -1; }
        for (int gi = 0; gi < G; gi++)
            for (int n = 0; n < N; n++) z[(e * N + n) / 2 * G + gi] |= (uint8_t)(kn[(size_t)gi * N + n] << (4 * (n % 2)));
    }
    free(kn);
    c->tensors[c->n_tensors++] = (qp_tensor){w2 ? "w2_weight" : "w13_weight", QP_DTYPE_U8, 3, {c->E, N, K / 2, 0}, w};
    c->tensors[c->n_tensors++] = (qp_tensor){w2 ? "w2_weight_scale" : "w13_weight_scale", find(&ls[0], "weight_scale")->dtype, 3,
                                             {c->E, N, G, 0}, sc};
    if (!sym)
        c->tensors[c->n_tensors++] = (qp_tensor){w2 ? "w2_weight_zero_point" : "w13_weight_zero_point", QP_DTYPE_U8, 3,
                                                 {c->E, N / 2, G, 0}, z};
    return 0;
}

int case_moe_make(qp_context *ctx, const char *scheme, int E, int H, int I, qp_dtype dt, uint64_t seed, int with_model,
                  case_moe *c, char *err, size_t errcap) {
    memset(c, 0, sizeof *c);
    c->E = E; c->H = H; c->I = I; c->dt = dt;
    c->name = scheme;
    if (with_model) {
        c->w13 = malloc(sizeof(double) * (size_t)E * 2 * I * H);
        c->w2 = malloc(sizeof(double) * (size_t)E * H * I);
        if (!c->w13 || !c->w2) { snprintf(err, errcap, "out of memory"); case_moe_free(c); return -1; }
    }
    if (!strcmp(scheme, "unquantized")) {
        uint16_t *a = own(c, 2 * (size_t)E * 2 * I * H), *b = own(c, 2 * (size_t)E * H * I);
        uint64_t s = seed;
        for (size_t i = 0; i < (size_t)E * 2 * I * H; i++) {
            a[i] = (uint16_t)qp_format_encode(dt, (float)((double)(case_rng(&s) >> 11) / 9007199254740992.0 - 0.5) * 0.1f);
            if (c->w13) c->w13[i] = qp_format_decode(dt, a[i]);
        }
        for (size_t i = 0; i < (size_t)E * H * I; i++) {
            b[i] = (uint16_t)qp_format_encode(dt, (float)((double)(case_rng(&s) >> 11) / 9007199254740992.0 - 0.5) * 0.1f);
            if (c->w2) c->w2[i] = qp_format_decode(dt, b[i]);
        }
        c->tensors[0] = (qp_tensor){"w13_weight", dt, 3, {E, 2 * I, H, 0}, a};
        c->tensors[1] = (qp_tensor){"w2_weight", dt, 3, {E, H, I, 0}, b};
        c->n_tensors = 2;
        memset(&c->scheme, 0, sizeof c->scheme);
        c->scheme.kind = QP_SCHEME_UNQUANTIZED;
        snprintf(c->scheme.method, sizeof c->scheme.method, "UnquantizedFusedMoEMethod");
        return 0;
    }
    const case_scheme *cs = case_scheme_find(scheme);
    qp_config *cfg = NULL;
    if (!cs) { snprintf(err, errcap, "no case scheme %s", scheme); case_moe_free(c); return -1; }
    c->cs = cs;
    if (qp_config_load_buffer(ctx, cs->name, cs->config, strlen(cs->config), &cfg) ||
        qp_config_resolve(cfg, "model.layers.0.mlp.experts", QP_LAYER_MOE, NULL, &c->scheme)) {
        snprintf(err, errcap, "%s", qp_last_error(ctx));
        qp_config_destroy(cfg);
        case_moe_free(c);
        return -1;
    }
    qp_config_destroy(cfg);
    case_layer *l13 = calloc((size_t)E, sizeof *l13), *l2 = calloc((size_t)E, sizeof *l2);
    int rc = l13 && l2 ? 0 : -1;
    /* static activation scales from one calibration range for every expert:
     * x within +-2.5 (case_activations' scale), silu(g) * up within +-0.25 */
    uint16_t *c13 = calloc((size_t)H, 2), *c2 = calloc((size_t)I, 2);
    if (!c13 || !c2) rc = -1;
    else {
        c13[0] = (uint16_t)qp_format_encode(dt, -2.5f); c13[1] = (uint16_t)qp_format_encode(dt, 2.5f);
        c2[0] = (uint16_t)qp_format_encode(dt, -0.25f); c2[1] = (uint16_t)qp_format_encode(dt, 0.25f);
    }
    for (int e = 0; !rc && e < E; e++) {
        rc = case_layer_make(ctx, cs, 2 * I, H, dt, seed + 2 * (uint64_t)e, c13, 1, &l13[e], err, errcap);
        if (!rc) rc = case_layer_make(ctx, cs, H, I, dt, seed + 2 * (uint64_t)e + 1, c2, 1, &l2[e], err, errcap);
        if (rc) break;
        for (size_t i = 0; c->w13 && i < (size_t)2 * I * H; i++) c->w13[(size_t)e * 2 * I * H + i] = l13[e].w_deq[i];
        for (size_t i = 0; c->w2 && i < (size_t)H * I; i++) c->w2[(size_t)e * H * I + i] = l2[e].w_deq[i];
    }
    int nv = c->scheme.kind == QP_SCHEME_NVFP4;
    if (!rc && c->scheme.kind == QP_SCHEME_W4A16_INT4) {
        rc = stack_w4(c, l13, 2 * I, H, 0) || stack_w4(c, l2, H, I, 1);
        /* the wna16 kernels round each dequantized weight to the dtype */
        for (size_t i = 0; c->w13 && i < (size_t)E * 2 * I * H; i++) c->w13[i] = qp_format_decode(dt, qp_format_encode(dt, (float)c->w13[i]));
        for (size_t i = 0; c->w2 && i < (size_t)E * H * I; i++) c->w2[i] = qp_format_decode(dt, qp_format_encode(dt, (float)c->w2[i]));
    } else if (!rc)
        rc = stack(c, l13, "weight", "w13_weight", 0) || stack(c, l13, "weight_scale", "w13_weight_scale", 1) ||
             stack(c, l2, "weight", "w2_weight", 0) || stack(c, l2, "weight_scale", "w2_weight_scale", 0) ||
             stack(c, l13, nv ? "input_scale_2" : "input_scale", nv ? "w13_input_scale_2" : "w13_input_scale", nv) ||
             stack(c, l2, nv ? "input_scale_2" : "input_scale", nv ? "w2_input_scale_2" : "w2_input_scale", 0) ||
             stack(c, l13, "weight_scale_2", "w13_weight_scale_2", 1) || stack(c, l2, "weight_scale_2", "w2_weight_scale_2", 0);
    free(c13);
    free(c2);
    if (rc && !err[0]) snprintf(err, errcap, "out of memory");
    for (int e = 0; l13 && l2 && e < E; e++) { case_layer_free(&l13[e]); case_layer_free(&l2[e]); }
    free(l13);
    free(l2);
    if (rc) case_moe_free(c);
    return rc;
}

/* Expert ids distinct within a token, as top-k gives them. */
static int pick(uint64_t *s, int G, int cold, const int32_t *taken, int n) {
    for (;;) {
        int e = (int)(case_rng(s) % (uint64_t)G), dup = e == cold;
        for (int q = 0; q < n; q++) dup |= taken[q] == e;
        if (!dup) return e;
    }
}

void case_moe_route(int M, int k, int G, int hot, int cold, uint64_t seed, int32_t *ids, float *w) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int m = 0; m < M; m++) {
        int32_t *id = ids + (size_t)m * k;
        double sum = 0;
        for (int j = 0; j < k; j++) {
            id[j] = j == 0 && hot >= 0 ? hot : pick(&s, G, cold, id, j);
            w[m * k + j] = (float)(0.1 + (double)(case_rng(&s) >> 11) / 9007199254740992.0);
            sum += w[m * k + j];
        }
        for (int j = 0; j < k; j++) w[m * k + j] = (float)(w[m * k + j] / sum);
    }
}

/* ---- the model ---------------------------------------------------------- */

typedef enum { A_NONE, A_FP8, A_FP8_QDQ, A_INT8, A_MX, A_NVFP4 } amode;

typedef struct qparams {
    amode mode;
    int dynamic, per_token, mbits;
    int group;         /* dynamic fp8 per token and group of this many k  */
    double scale;      /* static scale; NVFP4: the input global scale       */
} qparams;

static double max_scalar(const case_moe *c, const char *name) {
    double m = 0;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const qp_tensor *t = &c->tensors[i];
        if (strcmp(t->name, name)) continue;
        for (size_t j = 0; j < nel(t); j++)
            m = fmax(m, t->dtype == QP_DTYPE_F32 ? ((const float *)t->data)[j]
                                                 : qp_format_decode(t->dtype, ((const uint16_t *)t->data)[j]));
    }
    return m;
}

static qparams params(const case_moe *c, int second) {
    qparams p = {A_NONE, 0, 0, 0, 0, 0};
    const qp_scheme *s = &c->scheme;
    const char *sn = second ? "w2_input_scale" : "w13_input_scale";
    switch (s->kind) {
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
        p.mode = A_FP8;
        p.dynamic = !strstr(s->activation_key, "Static");
        p.per_token = strstr(s->activation_key, "Token") != NULL;
        if (!p.dynamic) p.scale = max_scalar(c, sn);
        break;
    case QP_SCHEME_W8A8_FP8_BLOCK: /* per_token_group_quant_fp8, groups of 128 */
        p.mode = A_FP8;
        p.dynamic = 1;
        p.group = 128;
        break;
    case QP_SCHEME_W8A8_INT8:
        p.mode = A_INT8;
        p.dynamic = !strstr(s->activation_key, "Static");
        p.per_token = 1;
        if (!p.dynamic) p.scale = max_scalar(c, sn);
        break;
    case QP_SCHEME_OCP_MX:
        p.mode = s->activation.dtype == QP_DTYPE_NONE ? A_NONE : A_MX;
        p.mbits = s->activation.dtype == QP_DTYPE_F4_E2M1 ? 1 : s->activation.dtype == QP_DTYPE_F6_E3M2 ? 2 : 3;
        break;
    case QP_SCHEME_W4A8_MXFP4_FP8:
        p.mode = A_FP8_QDQ;
        p.scale = max_scalar(c, sn);
        break;
    case QP_SCHEME_NVFP4:
        p.mode = A_NVFP4;
        p.scale = max_scalar(c, second ? "w2_input_scale_2" : "w13_input_scale_2");
        break;
    default: break;
    }
    return p;
}

/* The largest |v| + vb over the block of `bs` values holding i. */
static double block_max(const double *v, const double *vb, size_t C, size_t i, size_t bs) {
    size_t b0 = i / bs * bs;
    double bm = 0;
    for (size_t j = b0; j < b0 + bs && j < C; j++) bm = fmax(bm, fabs(v[j]) + vb[j]);
    return bm;
}

/* e[i] >= |Q(v') - v[i]| for every v' within vb[i] of v[i], for one row of
 * C values; `tmax` is the dynamic per-tensor max (values plus bounds). */
static void qerr(const qparams *p, qp_dtype dt, const double *v, const double *vb, size_t C, double tmax, double *e) {
    double u = dt == QP_DTYPE_BF16 ? 0x1p-8 : 0x1p-11;
    double rmax = 0;
    for (size_t i = 0; i < C; i++) rmax = fmax(rmax, fabs(v[i]) + vb[i]);
    for (size_t i = 0; i < C; i++) {
        double a = fabs(v[i]) + vb[i], q = 0;
        switch (p->mode) {
        case A_NONE: break;
        case A_FP8:
        case A_FP8_QDQ: {
            /* per group: the quantizer's floor of 1e-10 on the group max */
            double s = p->group ? fmax(block_max(v, vb, C, i, (size_t)p->group), 1e-10) / 448.0
                       : p->dynamic ? (p->per_token ? rmax : tmax) / 448.0 : p->scale;
            q = fmax(0x1p-4 * a, 0x1p-10 * s) * (1 + 0x1p-20);
            if (!p->dynamic && a > 448.0 * s) q += a - 448.0 * s;
            if (p->mode == A_FP8_QDQ) q += 3 * u * a + 0x1p-10 * s; /* x/s and q*s rounded to the dtype */
            break;
        }
        case A_INT8: {
            double s = p->dynamic ? rmax / 127.0 : p->scale;
            q = 0.5 * s * (1 + 0x1p-20);
            if (!p->dynamic && a > 127.0 * s) q += a - 127.0 * s;
            break;
        }
        case A_MX:
        case A_NVFP4: {
            double bm = block_max(v, vb, C, i, p->mode == A_MX ? 32 : 16);
            if (p->mode == A_MX) q = bm > 0 ? ldexp(1.0, (int)floor(log2(bm)) - p->mbits + 1) : 0;
            else q = bm / 6.0 / p->scale >= 0x1p-6 ? 0.3 * bm : bm;
            q += u * a;
            break;
        }
        }
        e[i] = vb[i] + q;
    }
}

int case_moe_model(const case_moe *c, const uint16_t *x, int M, int k, const int32_t *ids, const float *w, double *y64,
                   double *bound) {
    if (!c->w13 || !c->w2) return -1;
    int H = c->H, I = c->I;
    size_t MK = (size_t)M * (size_t)k;
    double u = c->dt == QP_DTYPE_BF16 ? 0x1p-8 : 0x1p-11, tiny = c->dt == QP_DTYPE_BF16 ? 0x1p-133 : 0x1p-24;
    double *xv = calloc((size_t)M * H, sizeof(double)), *xe = calloc((size_t)M * H, sizeof(double));
    double *zero = calloc((size_t)(H > I ? H : I), sizeof(double));
    double *h = calloc(MK * I, sizeof(double)), *hb = calloc(MK * I, sizeof(double)), *he = calloc(MK * I, sizeof(double));
    if (!xv || !xe || !zero || !h || !hb || !he) { free(xv); free(xe); free(zero); free(h); free(hb); free(he); return -1; }
    qparams p1 = params(c, 0), p2 = params(c, 1);
    double tmax = 0;
    for (size_t i = 0; i < (size_t)M * H; i++) tmax = fmax(tmax, fabs(xv[i] = qp_format_decode(c->dt, x[i])));
    for (int m = 0; m < M; m++) qerr(&p1, c->dt, xv + (size_t)m * H, zero, (size_t)H, tmax, xe + (size_t)m * H);
    const double g32 = 0x1p-24;
    /* w13, silu_and_mul */
    for (size_t t = 0; t < MK; t++) {
        int m = (int)(t / (size_t)k), e = ids[t];
        const double *a = xv + (size_t)m * H, *ae = xe + (size_t)m * H;
        for (int i = 0; i < I; i++) {
            double g = 0, up = 0, eg = 0, eu = 0, sg = 0, su = 0;
            const double *wg = c->w13 + ((size_t)e * 2 * I + i) * H, *wu = c->w13 + ((size_t)e * 2 * I + I + i) * H;
            for (int q = 0; q < H; q++) {
                g += wg[q] * a[q]; up += wu[q] * a[q];
                eg += fabs(wg[q]) * ae[q]; eu += fabs(wu[q]) * ae[q];
                sg += fabs(wg[q]) * (fabs(a[q]) + ae[q]); su += fabs(wu[q]) * (fabs(a[q]) + ae[q]);
            }
            eg += (H + 3) * g32 * sg; eu += (H + 3) * g32 * su;
            eg += u * (fabs(g) + eg) + tiny; eu += u * (fabs(up) + eu) + tiny;
            double s = g / (1 + exp(-g));
            double es = 1.1 * eg + (g32 + u) * (fabs(s) + 1.1 * eg) + tiny;
            double hv = s * up, eh = es * (fabs(up) + eu) + fabs(s) * eu;
            eh += u * (fabs(hv) + eh) + tiny;
            h[t * I + i] = hv;
            hb[t * I + i] = eh;
        }
    }
    double hmax = 0;
    for (size_t i = 0; i < MK * I; i++) hmax = fmax(hmax, fabs(h[i]) + hb[i]);
    for (size_t t = 0; t < MK; t++) qerr(&p2, c->dt, h + t * I, hb + t * I, (size_t)I, hmax, he + t * I);
    /* w2 with the routing weight, then the k-slot sum */
    for (int m = 0; m < M; m++)
        for (int n = 0; n < H; n++) {
            double y = 0, b = 0, sa = 0;
            for (int j = 0; j < k; j++) {
                size_t t = (size_t)m * k + j;
                const double *w2 = c->w2 + ((size_t)ids[t] * H + n) * I;
                double acc = 0, ea = 0, sab = 0;
                for (int i = 0; i < I; i++) {
                    acc += w2[i] * h[t * I + i];
                    ea += fabs(w2[i]) * he[t * I + i];
                    sab += fabs(w2[i]) * (fabs(h[t * I + i]) + he[t * I + i]);
                }
                double wt = fabs((double)w[t]);
                double c3 = w[t] * acc, e3 = wt * (ea + (I + 4) * g32 * sab);
                e3 += u * (fabs(c3) + e3) + tiny;
                y += c3;
                b += e3;
                sa += fabs(c3) + e3;
            }
            y64[(size_t)m * H + n] = y;
            bound[(size_t)m * H + n] = b + k * u * (sa + b) + (2.0 * k + 4) * tiny;
        }
    free(xv); free(xe); free(zero); free(h); free(hb); free(he);
    return 0;
}
