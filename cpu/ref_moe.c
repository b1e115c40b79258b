/* The fused MoE reference: vLLM's fused_experts (Triton path) for one
 * chunk of tokens, in its order and precision:
 *
 *  1. A [M][H] quantized once for the w13 GEMM (moe_kernel_quantize_input:
 *     static per-tensor with the experts' max input scale, dynamic
 *     per-tensor over all M rows, dynamic per-token; int8 dynamic is
 *     scaled_int8_quant, per token).
 *  2. For each (token m, slot j), expert e = ids[m][j], output n of w13:
 *     acc = sum_h a[m][h] * w13[e][n][h] (fp32; int8: exact int32, then
 *     fp32), then acc * a_scale * b_scale (left to right, fp32), rounded to
 *     the activation dtype: intermediate_cache1 [M*k][2I].
 *  3. silu_and_mul (csrc/activation_kernels.cu): s = dt(g / (1 + expf(-g))),
 *     intermediate_cache2 = dt(s * u), u the up half.
 *  4. intermediate_cache2 quantized as in 1, over its M*k rows.
 *  5. w2 GEMM as in 2, then times the routing weight in fp32
 *     (MUL_ROUTED_WEIGHT), rounded to dt: intermediate_cache3 [M][k][H].
 *  6. moe_sum: y = 0, then y += cache3[m][j] in the activation dtype, for
 *     j = 0 .. k-1 (each add rounded).
 * Triton sums the K products in blocks in an order of its tiling; qport
 * sums in index order, so float schemes agree with vLLM within the fp32
 * accumulation bound, integer products exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../api/moe.h"

static float ld(qp_dtype d, const void *p, size_t i) { return qp_ref_load(d, p, i); }

/* Quantizes rows [R][C] of fp32 values: codes and one scale per row. */
static qp_status quant(qp_context *ctx, qp_moe_act act, float static_scale, const float *v, size_t R, size_t C,
                       void *codes, float *rs) {
    qp_status st = QP_OK;
    switch (act) {
    case QP_MOE_ACT_FP8_STATIC:
        st = qp_quant_fp8_static(ctx, v, R * C, static_scale, codes);
        for (size_t r = 0; r < R; r++) rs[r] = static_scale;
        break;
    case QP_MOE_ACT_FP8_DYN_TENSOR: {
        float s;
        st = qp_quant_fp8_dynamic_tensor(ctx, v, R * C, codes, &s);
        for (size_t r = 0; r < R; r++) rs[r] = s;
        break;
    }
    case QP_MOE_ACT_FP8_DYN_TOKEN: st = qp_quant_fp8_dynamic_token(ctx, v, R, C, 0.0f, codes, rs); break;
    case QP_MOE_ACT_INT8_STATIC:
        st = qp_quant_int8_static(ctx, v, R, C, static_scale, 0, 1, codes);
        for (size_t r = 0; r < R; r++) rs[r] = static_scale;
        break;
    case QP_MOE_ACT_INT8_DYN_TOKEN: st = qp_quant_int8_dynamic(ctx, v, R, C, 1, codes, rs, NULL); break;
    default: break;
    }
    return st;
}

/* One output of a GEMM row: the fp32 epilogue value before rounding. */
static float dot(const qp_moe_ref *r, const void *a, size_t arow, const void *w, size_t wrow, size_t K) {
    if (r->act == QP_MOE_ACT_NONE) {
        float acc = 0.0f;
        for (size_t h = 0; h < K; h++) acc += ld(r->dt, a, arow * K + h) * ld(r->dt, w, wrow * K + h);
        return acc;
    }
    if (r->act == QP_MOE_ACT_INT8_STATIC || r->act == QP_MOE_ACT_INT8_DYN_TOKEN) {
        const int8_t *qa = (const int8_t *)a + arow * K, *qw = (const int8_t *)w + wrow * K;
        int64_t acc = 0;
        for (size_t h = 0; h < K; h++) acc += (int32_t)qa[h] * qw[h];
        return (float)(int32_t)acc;
    }
    const uint8_t *qa = (const uint8_t *)a + arow * K, *qw = (const uint8_t *)w + wrow * K;
    float acc = 0.0f;
    for (size_t h = 0; h < K; h++)
        acc += qp_format_decode(QP_DTYPE_F8_E4M3FN, qa[h]) * qp_format_decode(QP_DTYPE_F8_E4M3FN, qw[h]);
    return acc;
}

qp_status qp_ref_moe_forward(qp_context *ctx, const char *layer, const qp_moe_ref *r, const void *x, int M, int k,
                             const int32_t *ids, const float *weights, void *y) {
    size_t H = (size_t)r->H, I = (size_t)r->I, MK = (size_t)M * (size_t)k, es = qp_ref_elem_size(r->dt);
    bool q = r->act != QP_MOE_ACT_NONE;
    size_t cb = q ? 1 : es; /* bytes of one GEMM input element */
    size_t big = MK * 2 * I > (size_t)M * H ? MK * 2 * I : (size_t)M * H;
    float *f = malloc(sizeof(float) * big), *rs = malloc(sizeof(float) * (MK > (size_t)M ? MK : (size_t)M));
    void *a = malloc(big * cb);
    void *c1 = malloc(MK * 2 * I * es), *c2 = malloc(MK * I * es), *c3 = malloc(MK * H * es);
    qp_status st = QP_OK;
    if (!f || !rs || !a || !c1 || !c2 || !c3) {
        st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory for the MoE caches");
        goto out;
    }
    for (size_t i = 0; i < MK; i++)
        if (ids[i] < 0 || ids[i] >= r->G) {
            st = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "topk_ids", layer,
                              "topk_ids[%zu][%zu] = %d is not an expert of 0 .. %d", i / (size_t)k, i % (size_t)k,
                              (int)ids[i], r->G - 1);
            goto out;
        }
    /* 1. A */
    if (q) {
        for (size_t i = 0; i < (size_t)M * H; i++) f[i] = ld(r->dt, x, i);
        if ((st = quant(ctx, r->act, r->a13, f, (size_t)M, H, a, rs))) goto out;
    } else {
        memcpy(a, x, (size_t)M * H * es);
    }
    /* 2. w13 GEMM; a slot routed to another expert-parallel rank's expert
     * is a row of zeros (the Triton kernel writes zeros for expert -1) */
    for (size_t t = 0; t < MK; t++) {
        size_t m = t / (size_t)k, e = (size_t)(ids[t] - r->offset);
        bool here = ids[t] >= r->offset && ids[t] < r->offset + r->E;
        for (size_t n = 0; n < 2 * I; n++) {
            if (!here) { qp_ref_store(r->dt, c1, t * 2 * I + n, 0.0f); continue; }
            size_t wrow = e * 2 * I + n;
            float v = dot(r, a, m, r->w13, wrow, H);
            if (q) v = v * rs[m] * r->s13[wrow];
            qp_ref_store(r->dt, c1, t * 2 * I + n, v);
        }
    }
    /* 3. silu_and_mul */
    for (size_t t = 0; t < MK; t++)
        for (size_t i = 0; i < I; i++) {
            float g = ld(r->dt, c1, t * 2 * I + i), u = ld(r->dt, c1, t * 2 * I + I + i);
            float s = qp_ref_round(r->dt, g / (1.0f + expf(-g)));
            qp_ref_store(r->dt, c2, t * I + i, s * u);
        }
    /* 4. its quantization */
    if (q) {
        for (size_t i = 0; i < MK * I; i++) f[i] = ld(r->dt, c2, i);
        if ((st = quant(ctx, r->act, r->a2, f, MK, I, a, rs))) goto out;
    } else {
        memcpy(a, c2, MK * I * es);
    }
    /* 5. w2 GEMM with the routing weight */
    for (size_t t = 0; t < MK; t++) {
        size_t e = (size_t)(ids[t] - r->offset);
        bool here = ids[t] >= r->offset && ids[t] < r->offset + r->E;
        for (size_t n = 0; n < H; n++) {
            if (!here) { qp_ref_store(r->dt, c3, t * H + n, 0.0f); continue; }
            size_t wrow = e * H + n;
            float v = dot(r, a, t, r->w2, wrow, I);
            if (q) v = v * rs[t] * r->s2[wrow];
            v *= weights[t];
            qp_ref_store(r->dt, c3, t * H + n, v);
        }
    }
    /* 6. moe_sum in the activation dtype */
    for (size_t m = 0; m < (size_t)M; m++)
        for (size_t n = 0; n < H; n++) {
            float acc = 0.0f;
            for (size_t j = 0; j < (size_t)k; j++) acc = qp_ref_round(r->dt, acc + ld(r->dt, c3, (m * k + j) * H + n));
            qp_ref_store(r->dt, y, m * H + n, acc);
        }
out:
    free(f); free(rs); free(a); free(c1); free(c2); free(c3);
    return st;
}
