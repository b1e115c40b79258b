/* compressed-tensors checkpoints (llm-compressor): the tensors its scheme
 * classes create in vLLM, bound into the same qp_lin_desc payloads the
 * Quark binders fill, so every backend runs them unchanged
 * (docs/loading.md "compressed-tensors", docs/semantics.md §21).
 *
 * The names and layouts differ from Quark's: integer weights are
 * `weight_packed` int32 words holding 32/bits values along K (value i of a
 * word at bits [i*bits, (i+1)*bits), each stored with the offset
 * 2^(bits-1) added), zero points `weight_zero_point` are packed the same
 * way along N, scales are [N, groups] in the params dtype, `weight_shape`
 * records [N, K]; NVFP4 keeps `weight_packed` fp4 pairs with
 * `weight_global_scale` / `input_global_scale`, the *quantizing*
 * multipliers (Quark stores their inverses). Weight-only schemes that have
 * no kernel of their own here (8-bit WNA16, W8A16-FP8, NVFP4-A16) are
 * dequantized at bind time into the params dtype, as vLLM's Marlin kernels
 * dequantize them before their fp16/bf16 MMA, and run as dense layers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"

int qp_scheme_is_ct(const qp_scheme *s) { return !strncmp(s->method, "CompressedTensors", 17); }

/* The integer width of a WNA16 / W4A16 weight (4 or 8: qport has no dtype
 * for the others), or 0. */
static int int_bits(const qp_qtensor *w) {
    return w->dtype == QP_DTYPE_I4 || w->dtype == QP_DTYPE_U4 ? 4 : w->dtype == QP_DTYPE_I8 || w->dtype == QP_DTYPE_U8 ? 8 : 0;
}

/* Value `i` of a row of `bits`-wide fields packed into int32 words. */
static unsigned field(const int32_t *row, size_t i, int bits) {
    size_t per = (size_t)(32 / bits);
    return ((uint32_t)row[i / per] >> (unsigned)((i % per) * (size_t)bits)) & ((1u << bits) - 1u);
}

int qp_ct_weight_shape(const qp_tensor *t, int64_t nk[2]) {
    if ((t->dtype != QP_DTYPE_I64 && t->dtype != QP_DTYPE_I32) || qp_tensor_count(t) != 2) return 0;
    for (int i = 0; i < 2; i++) {
        if (t->dtype == QP_DTYPE_I64) memcpy(&nk[i], (const char *)t->data + 8 * i, 8);
        else { int32_t x; memcpy(&x, (const char *)t->data + 4 * i, 4); nk[i] = x; }
    }
    return 1;
}

/* `weight_shape` is optional, as vLLM's parameter is; where given it must
 * name the layer's shape. */
static qp_status check_weight_shape(const qp_binder *b, const qp_lin_desc *d) {
    const qp_tensor *t;
    qp_status s = qp_binder_find(b, "weight_shape", false, &t);
    if (s || !t) return s;
    int64_t v[2];
    if (!qp_ct_weight_shape(t, v))
        return qp_binder_fail(b, "weight_shape", "%s", "tensor 'weight_shape' must be int64 or int32 [2] ([N, K])");
    if (v[0] != d->N || v[1] != d->K) {
        char m[160];
        snprintf(m, sizeof m, "tensor 'weight_shape' says [%lld, %lld], the layer is [%d, %d]", (long long)v[0],
                 (long long)v[1], d->N, d->K);
        return qp_binder_fail(b, "weight_shape", "%s", m);
    }
    return QP_OK;
}

typedef struct ct_int {
    int bits, G, g;       /* width, groups along K, group size in K   */
    const int32_t *w;     /* weight_packed [N][ceil(K*bits/32)]        */
    const int32_t *zp;    /* weight_zero_point [ceil(N*bits/32)][G]     */
    const qp_tensor *sc;  /* weight_scale [N][G], float                 */
} ct_int;

/* The tensors of CompressedTensorsWNA16.create_weights, checked. */
static qp_status ct_int_tensors(const qp_binder *b, const qp_lin_desc *d, ct_int *c) {
    const qp_qtensor *wq = &d->scheme.weight;
    int K = d->K, N = d->N, gs = wq->granularity == QP_GRAN_GROUP && wq->group_size > 0 ? wq->group_size : -1;
    c->bits = int_bits(wq);
    if (!c->bits)
        return qp_error_set(b->ctx, QP_ERR_UNSUPPORTED, NULL, "weight_packed", b->layer,
                            "compressed-tensors integer weights of other than 4 or 8 bits are resolved but not run");
    c->g = gs > 0 ? gs : K;
    if (K % c->g) /* verify_group_size_divides_partition */
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight_scale", b->layer,
                            "input size %d is not divisible by the group size %d", K, gs);
    c->G = K / c->g;
    size_t per = (size_t)(32 / c->bits), kw = ((size_t)K + per - 1) / per, nw = ((size_t)N + per - 1) / per;
    const qp_tensor *w, *zp = NULL;
    qp_status s;
    char rule[96];
    snprintf(rule, sizeof rule, "expected [N, ceil(K / %zu)] (%d-bit values packed into int32)", per, c->bits);
    if ((s = qp_binder_find(b, "weight_packed", true, &w)) || (s = qp_binder_expect(b, w, QP_DTYPE_I32, (size_t)N * kw, rule)))
        return s;
    if ((s = qp_binder_find(b, "weight_scale", true, &c->sc))) return s;
    if (!qp_dtype_is_float(c->sc->dtype) || qp_tensor_count(c->sc) != (size_t)N * c->G) {
        char sh[96], m[320];
        qp_binder_shape_str(c->sc, sh, sizeof sh);
        snprintf(m, sizeof m, "tensor 'weight_scale' must be a float tensor [%d, %d] (loaded into the params dtype %s), got %s %s",
                 N, c->G, qp_dtype_name(d->act_dtype), qp_dtype_name(c->sc->dtype), sh);
        return qp_binder_fail(b, "weight_scale", "%s", m);
    }
    /* vLLM registers weight_zero_point for asymmetric layers only; a
     * symmetric export that carries one has it ignored */
    if ((s = qp_binder_find(b, "weight_zero_point", !wq->symmetric, &zp))) return s;
    if (zp && !wq->symmetric &&
        (s = qp_binder_expect(b, zp, QP_DTYPE_I32, nw * (size_t)c->G, "expected [ceil(N * bits / 32), K / group_size]")))
        return s;
    if ((s = check_weight_shape(b, d))) return s;
    c->w = w->data;
    c->zp = zp && !wq->symmetric ? zp->data : NULL;
    return QP_OK;
}

/* The stored (offset) value of weight [n][k] and the zero point it is
 * taken from: v = u - z, with z = 2^(bits-1) when symmetric. */
static void ct_int_at(const ct_int *c, int K, int n, int k, unsigned *u, unsigned *z) {
    size_t per = (size_t)(32 / c->bits), kw = ((size_t)K + per - 1) / per;
    *u = field(c->w + (size_t)n * kw, (size_t)k, c->bits);
    if (!c->zp) { *z = 1u << (c->bits - 1); return; }
    /* zero points packed along N: column g of the [ceil(N/per)][G] words */
    size_t g = (size_t)(k / c->g), word = (size_t)n / per;
    *z = ((uint32_t)c->zp[word * (size_t)c->G + g] >> (unsigned)(((size_t)n % per) * (size_t)c->bits)) & ((1u << c->bits) - 1u);
}

/* CompressedTensorsWNA16 with 4-bit weights -> the W4A16 payload (the
 * MPLinearKernel's uint4b8 / uint4-with-zero-points arithmetic). */
qp_status qp_bind_ct_w4a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    ct_int c;
    qp_status s = ct_int_tensors(b, d, &c);
    if (s) return s;
    int N = d->N, K = d->K;
    bool sym = c.zp == NULL;
    size_t nk = (size_t)N * K, gn = (size_t)c.G * N;
    uint8_t *q4 = qp_binder_keep(st, malloc(nk)), *z = sym ? NULL : qp_binder_keep(st, malloc(gn));
    float *f = qp_binder_keep(st, malloc(sizeof(float) * gn));
    if (!q4 || !f || (!sym && !z)) return qp_binder_oom(b);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            unsigned u, zz;
            ct_int_at(&c, K, n, k, &u, &zz);
            /* symmetric: the two's complement nibble of u - 8 (w4_signed) */
            q4[(size_t)n * K + k] = (uint8_t)(sym ? (u - 8u) & 15u : u);
            if (!sym && k % c.g == 0) z[(size_t)(k / c.g) * N + n] = (uint8_t)zz;
        }
    for (int gi = 0; gi < c.G; gi++)
        for (int n = 0; n < N; n++)
            f[(size_t)gi * N + n] = qp_num_round(d->act_dtype, qp_num_load(c.sc->dtype, c.sc->data, (size_t)n * c.G + gi));
    d->q4 = (const int8_t *)q4;
    d->w4_signed = sym;
    d->w4_zero = z;
    d->w4_scale = f;
    d->group_size = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : -1;
    d->act = QP_ACT_NONE;
    return QP_OK;
}

/* The dense weight a weight-only scheme lowers to: [N][K] in act_dtype. */
static qp_status lower_dense(const qp_binder *b, const qp_lin_desc *d, float **w) {
    *w = malloc(sizeof(float) * (size_t)d->N * (size_t)d->K);
    return *w ? QP_OK : qp_binder_oom(b);
}

static qp_status finish_dense(const qp_binder *b, qp_lin_desc_store *st, qp_lin_desc *d, float *w) {
    size_t nk = (size_t)d->N * (size_t)d->K;
    void *o = qp_binder_keep(st, malloc(qp_num_elem_size(d->act_dtype) * nk));
    if (!o) { free(w); return qp_binder_oom(b); }
    for (size_t i = 0; i < nk; i++) qp_num_store(d->act_dtype, o, i, w[i]);
    free(w);
    d->kind = QP_SCHEME_UNQUANTIZED;
    d->family = QP_LIN_DENSE;
    d->w_act = o;
    d->act = QP_ACT_NONE;
    return QP_OK;
}

/* CompressedTensorsWNA16 of other widths (8 bits here): Marlin dequantizes
 * (u - z) * s in the params dtype, one rounding, before its MMA. */
qp_status qp_bind_ct_wna16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    ct_int c;
    float *w;
    qp_status s = ct_int_tensors(b, d, &c);
    if (s || (s = lower_dense(b, d, &w))) return s;
    for (int n = 0; n < d->N; n++)
        for (int k = 0; k < d->K; k++) {
            unsigned u, z;
            ct_int_at(&c, d->K, n, k, &u, &z);
            float sc = qp_num_round(d->act_dtype, qp_num_load(c.sc->dtype, c.sc->data, (size_t)n * c.G + (size_t)(k / c.g)));
            w[(size_t)n * d->K + k] = qp_num_round(d->act_dtype, (float)((int)u - (int)z) * sc);
        }
    return finish_dense(b, st, d, w);
}

/* CompressedTensorsW8A16Fp8: fp8 weights with per-tensor (one per shard),
 * per-channel or 128x128-block scales; Marlin's fp8 path widens the codes
 * exactly and multiplies by the scale in the params dtype. A static
 * input_scale is created and ignored, as vLLM does. */
qp_status qp_bind_ct_w8a16_fp8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    const qp_tensor *w, *ws, *is;
    const float *v, *sc;
    float *dw;
    int N = d->N, K = d->K, per_channel;
    bool block = d->scheme.weight.granularity == QP_GRAN_BLOCK;
    size_t nb = (size_t)(N + 127) / 128 * (size_t)((K + 127) / 128);
    qp_status s;
    if ((s = qp_binder_find(b, "weight", true, &w)) ||
        (s = qp_binder_expect(b, w, QP_DTYPE_F8_E4M3FN, (size_t)N * K, "expected [N, K]")) ||
        (s = qp_binder_find(b, "weight_scale", true, &ws)) ||
        (s = qp_binder_widen(b, st, ws, block ? nb : 0, "expected [ceil(N/128), ceil(K/128)]", &v)) ||
        (s = qp_binder_find(b, "input_scale", false, &is)))
        return s;
    if (!block && (s = qp_binder_channelwise(b, st, ws, v, N, o, &sc, &per_channel))) return s;
    if ((s = lower_dense(b, d, &dw))) return s;
    const uint8_t *c = w->data;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            float f = block ? v[(size_t)(n / 128) * (size_t)((K + 127) / 128) + (size_t)(k / 128)] : sc[n];
            dw[(size_t)n * K + k] =
                qp_num_round(d->act_dtype, qp_format_decode(QP_DTYPE_F8_E4M3FN, c[(size_t)n * K + k]) * qp_num_round(d->act_dtype, f));
        }
    return finish_dense(b, st, d, dw);
}

/* CompressedTensorsW4A4Fp4 without input quantization (NVFP4A16): vLLM
 * takes 1 / max(weight_global_scale) over the shards; a weight is
 * value(fp4) * e4m3(sf) * that, rounded once into the params dtype. */
qp_status qp_bind_ct_nvfp4_a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    int K = d->K, N = d->N;
    const qp_tensor *w, *ws;
    float gmax, *dw;
    qp_status s;
    if ((s = qp_bind_nvfp4_tensors(b, d, "weight_packed", &w, &ws)) ||
        (s = qp_binder_positive_scalar(b, st, "weight_global_scale", &gmax)) || (s = lower_dense(b, d, &dw)))
        return s;
    float wgs = 1.0f / gmax;
    const uint8_t *p = w->data, *sf = ws->data;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            uint8_t byte = p[(size_t)n * (K / 2) + (size_t)(k / 2)];
            float e = qp_format_decode(QP_DTYPE_F4_E2M1, k % 2 ? byte >> 4 : byte & 15);
            float f = qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[(size_t)n * (K / 16) + (size_t)(k / 16)]) * wgs;
            dw[(size_t)n * K + k] = qp_num_round(d->act_dtype, e * f);
        }
    return finish_dense(b, st, d, dw);
}

/* CompressedTensorsW4A4Mxfp4 as vLLM runs it below capability 100: the
 * Marlin W4A16 path (weight-only; FlashInfer's W4A4 path of sm_100 is not
 * modelled). A weight is e2m1 * 2^(e - 127), rounded once into the params
 * dtype, as Marlin dequantizes it before its fp16/bf16 MMA. */
qp_status qp_bind_ct_mxfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    int K = d->K, N = d->N;
    if (K % 32)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight_packed", b->layer,
                            "Input size per partition (%d) must be divisible by group size (32)", K);
    const qp_tensor *w, *ws;
    float *dw;
    qp_status s;
    if ((s = qp_binder_find(b, "weight_packed", true, &w)) ||
        (s = qp_binder_expect(b, w, QP_DTYPE_U8, (size_t)N * K / 2, "expected [N, K/2] (two fp4 codes per byte)")) ||
        (s = qp_binder_find(b, "weight_scale", true, &ws)))
        return s;
    if ((ws->dtype != QP_DTYPE_U8 && ws->dtype != QP_DTYPE_E8M0) || qp_tensor_count(ws) != (size_t)N * K / 32)
        return qp_binder_fail(b, "weight_scale", "%s", "tensor 'weight_scale' must be uint8 (e8m0) [N, K/32]");
    const uint8_t *p = w->data, *sc = ws->data;
    for (size_t i = 0; i < (size_t)N * K / 32; i++)
        if (sc[i] == 255) return qp_binder_fail(b, "weight_scale", "%s", "weight_scale holds the e8m0 NaN code 255");
    if ((s = lower_dense(b, d, &dw))) return s;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            uint8_t byte = p[(size_t)n * (K / 2) + (size_t)(k / 2)];
            float e = qp_format_decode(QP_DTYPE_F4_E2M1, k % 2 ? byte >> 4 : byte & 15);
            dw[(size_t)n * K + k] =
                qp_num_round(d->act_dtype, e * qp_format_decode(QP_DTYPE_E8M0, sc[(size_t)n * (K / 32) + (size_t)(k / 32)]));
        }
    return finish_dense(b, st, d, dw);
}
