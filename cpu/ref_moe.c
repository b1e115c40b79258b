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
 *     intermediate_cache2 = dt(s * u), u the up half. expf is not correctly
 *     rounded anywhere (glibc, CUDA, OpenCL differ in the last bit), so
 *     qport fixes it: the fp32 silu is g / (1 + exp(-g)) evaluated in double
 *     and rounded once to fp32 (the correctly rounded value of vLLM's
 *     formula), which every backend can reproduce bit for bit; s * u is
 *     exact in fp32 for fp16/bf16 operands.
 *  4. intermediate_cache2 quantized as in 1, over its M*k rows.
 *  5. w2 GEMM as in 2, then times the routing weight in fp32
 *     (MUL_ROUTED_WEIGHT), rounded to dt: intermediate_cache3 [M][k][H].
 *  6. moe_sum: y = 0, then y += cache3[m][j] in the activation dtype, for
 *     j = 0 .. k-1 (each add rounded).
 * FP8 per-block experts (w_blk 128, QP_ACT_FP8_GROUP128) quantize in 1
 * and 4 per token and group of 128 (per_token_group_quant_fp8), and step 2's
 * acc is Triton's block-scaled sum: each k-block's e4m3 products summed,
 * times the group's activation scale and the weight block's scale, added
 * up; no epilogue scale follows. W4A16 experts (w_dtype I8, signed codes
 * c - z through w_lut) are the block-float form with no activation
 * quantization.
 * Triton sums the K products in blocks in an order of its tiling; qport
 * sums in index order, so float schemes agree with vLLM within the fp32
 * accumulation bound, integer products exactly.
 *
 * The emulated schemes (OCP MX, W4A8 MXFP4-FP8, NVFP4: vLLM's
 * OCP_MXQuantizationEmulationTritonExperts and
 * Nvfp4QuantizationEmulationTritonExperts) run the same steps with the
 * weights dequantized to the activation dtype, W = rnd(lut[code] * blk)
 * as their linear layers do, and steps 1 and 4 fake-quantizing (QDQ) the
 * activations in the activation dtype; the GEMMs are then float GEMMs with
 * no epilogue scale, summed in double and rounded once to fp32 as those
 * schemes' linear references sum (so an expert's w13 or w2 output with
 * routing weight 1 is bit for bit that of the same linear layer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../api/moe.h"

static float ld(qp_dtype d, const void *p, size_t i) { return qp_num_load(d, p, i); }

static float silu(float g) { return (float)((double)g / (1.0 + exp(-(double)g))); }

static bool is_int8(qp_act_mode a) { return a == QP_ACT_INT8_STATIC || a == QP_ACT_INT8_DYNAMIC_TOKEN; }
static bool is_real_quant(qp_act_mode a) {
    return is_int8(a) || a == QP_ACT_FP8_STATIC || a == QP_ACT_FP8_DYNAMIC_TENSOR || a == QP_ACT_FP8_DYNAMIC_TOKEN ||
           a == QP_ACT_FP8_GROUP128;
}

/* Quantizes rows [R][C] of fp32 values: codes and one scale per row
 * (FP8_GROUP128: one per row and group of 128, [R][C/128]). */
static qp_status quant(qp_context *ctx, qp_act_mode act, float static_scale, const float *v, size_t R, size_t C,
                       void *codes, float *rs) {
    qp_status st = QP_OK;
    switch (act) {
    case QP_ACT_FP8_STATIC:
        st = qp_quant_fp8_static(ctx, v, R * C, static_scale, codes);
        for (size_t r = 0; r < R; r++) rs[r] = static_scale;
        break;
    case QP_ACT_FP8_DYNAMIC_TENSOR: {
        float s;
        st = qp_quant_fp8_dynamic_tensor(ctx, v, R * C, codes, &s);
        for (size_t r = 0; r < R; r++) rs[r] = s;
        break;
    }
    case QP_ACT_FP8_DYNAMIC_TOKEN: st = qp_quant_fp8_dynamic_token(ctx, v, R, C, 0.0f, codes, rs); break;
    case QP_ACT_INT8_STATIC:
        st = qp_quant_int8_static(ctx, v, R, C, static_scale, 0, 1, codes);
        for (size_t r = 0; r < R; r++) rs[r] = static_scale;
        break;
    case QP_ACT_INT8_DYNAMIC_TOKEN: st = qp_quant_int8_dynamic(ctx, v, R, C, 1, codes, rs, NULL); break;
    case QP_ACT_FP8_GROUP128: st = qp_quant_fp8_group(ctx, v, R, C, 128, 0, codes, rs); break; /* per_token_group_quant_fp8 */
    default: break;
    }
    return st;
}

/* Fake-quantizes rows [R][C] in place (the emulated schemes), each value
 * rounded to the activation dtype as their linear layers do (qp_lin_desc:
 * QP_ACT_MX_QDQ, QP_ACT_FP8_STATIC_QDQ, QP_ACT_NVFP4_QDQ). */
static qp_status qdq(qp_context *ctx, const qp_moe_desc *d, float scale, float *v, size_t R, size_t C) {
    qp_dtype dt = d->act_dtype;
    if (d->act == QP_ACT_FP8_STATIC_QDQ) {
        for (size_t i = 0; i < R * C; i++) {
            float t = fmaxf(-448.0f, fminf(qp_num_round(dt, v[i] / scale), 448.0f));
            float q = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, t));
            v[i] = qp_num_round(dt, qp_num_round(dt, q) * scale);
        }
        return QP_OK;
    }
    if (d->act != QP_ACT_MX_QDQ && d->act != QP_ACT_NVFP4_QDQ) return QP_OK;
    uint8_t *codes = malloc(C), *sc = malloc(C / 16 + 1);
    qp_status st = codes && sc ? QP_OK : qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, d->layer, "out of memory");
    const float g = 1.0f / scale; /* NVFP4: input_global_scale_inv */
    for (size_t r = 0; !st && r < R; r++) {
        float *row = v + r * C;
        if (d->act == QP_ACT_MX_QDQ) {
            st = qp_quant_mx(ctx, d->act_elem, row, 1, C, codes, sc);
            if (!st) st = qp_dequant_mx(ctx, d->act_elem, codes, sc, 1, C, row);
            for (size_t c = 0; !st && c < C; c++) row[c] = qp_num_round(dt, row[c]);
        } else {
            st = qp_quant_nvfp4(ctx, row, 1, C, g, codes, sc);
            for (size_t c = 0; !st && c < C; c++) {
                float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, sc[c / 16]) / g;
                row[c] = qp_num_round(dt, qp_format_decode(QP_DTYPE_F4_E2M1, codes[c]) * s);
            }
        }
    }
    free(codes);
    free(sc);
    return st;
}

/* One output of a GEMM row: the fp32 value before the epilogue. `a` holds
 * codes (quantized schemes), act_dtype bits (unquantized) or fp32 values
 * (emulated); w row `wrow` of K elements of the stacked weight. */
static float dot(const qp_moe_desc *d, const void *a, const float *as, size_t arow, const void *w, const float *blk,
                 size_t wrow, size_t K) {
    if (d->act == QP_ACT_FP8_GROUP128) {
        /* fp8 per-block: each k-block's sum of e4m3 products (fp32, as the
         * linear PerBlock reference: in double, rounded once) times the
         * token-group scale and the weight block's scale, accumulated */
        const uint8_t *qa = (const uint8_t *)a + arow * K, *qw = (const uint8_t *)w + wrow * K;
        size_t kb = K / 128;
        double sum = 0.0;
        for (size_t g = 0; g < kb; g++) {
            double part = 0.0;
            for (size_t h = g * 128; h < (g + 1) * 128; h++)
                part += (double)qp_format_decode(QP_DTYPE_F8_E4M3FN, qa[h]) * qp_format_decode(QP_DTYPE_F8_E4M3FN, qw[h]);
            sum += (double)(float)part * as[arow * kb + g] * blk[wrow * kb + g];
        }
        return (float)sum;
    }
    if (d->w_blk > 0) {
        const float *x = (const float *)a + arow * K;
        const uint8_t *c = (const uint8_t *)w + wrow * K;
        const float *b = blk + wrow * (K / (size_t)d->w_blk);
        double acc = 0.0; /* as the emulated schemes' linear references */
        for (size_t h = 0; h < K; h++)
            acc += (double)x[h] * qp_num_round(d->act_dtype, d->w_lut[c[h]] * b[h / (size_t)d->w_blk]);
        return (float)acc;
    }
    if (d->act == QP_ACT_NONE) {
        float acc = 0.0f;
        for (size_t h = 0; h < K; h++) acc += ld(d->act_dtype, a, arow * K + h) * ld(d->act_dtype, w, wrow * K + h);
        return acc;
    }
    if (is_int8(d->act)) {
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

/* The GEMM input from fp32 values f [R][C]: quantized codes and row scales,
 * fake-quantized floats, or act_dtype bits. */
static qp_status gemm_input(qp_context *ctx, const qp_moe_desc *d, float scale, float *f, const void *bits, size_t R,
                            size_t C, void *a, float *rs) {
    if (is_real_quant(d->act)) return quant(ctx, d->act, scale, f, R, C, a, rs);
    if (d->w_blk > 0) {
        qp_status st = qdq(ctx, d, scale, f, R, C);
        if (!st) memcpy(a, f, sizeof(float) * R * C);
        return st;
    }
    memcpy(a, bits, R * C * qp_num_elem_size(d->act_dtype));
    return QP_OK;
}

qp_status qp_ref_moe_forward(qp_context *ctx, const qp_moe_desc *d, const void *x, int M, int k, const int32_t *ids,
                             const float *weights, void *y) {
    size_t H = (size_t)d->H, I = (size_t)d->I, MK = (size_t)M * (size_t)k, es = qp_num_elem_size(d->act_dtype);
    qp_dtype dt = d->act_dtype;
    bool q = is_real_quant(d->act);
    size_t cb = q ? 1 : d->w_blk > 0 ? sizeof(float) : es; /* bytes of one GEMM input element */
    size_t big = MK * 2 * I > (size_t)M * H ? MK * 2 * I : (size_t)M * H;
    size_t nrs = (MK > (size_t)M ? MK : (size_t)M) * (d->act == QP_ACT_FP8_GROUP128 ? (H > I ? H : I) / 128 + 1 : 1);
    float *f = malloc(sizeof(float) * big), *rs = malloc(sizeof(float) * nrs);
    void *a = malloc(big * cb);
    void *c1 = malloc(MK * 2 * I * es), *c2 = malloc(MK * I * es), *c3 = malloc(MK * H * es);
    qp_status st = QP_OK;
    if (!f || !rs || !a || !c1 || !c2 || !c3) {
        st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, d->layer, "out of memory for the MoE caches");
        goto out;
    }
    for (size_t i = 0; i < MK; i++)
        if (ids[i] < 0 || ids[i] >= d->G) {
            st = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "topk_ids", d->layer,
                              "topk_ids[%zu][%zu] = %d is not an expert of 0 .. %d", i / (size_t)k, i % (size_t)k,
                              (int)ids[i], d->G - 1);
            goto out;
        }
    /* 1. A */
    for (size_t i = 0; i < (size_t)M * H; i++) f[i] = ld(dt, x, i);
    if ((st = gemm_input(ctx, d, d->a13_scale, f, x, (size_t)M, H, a, rs))) goto out;
    /* 2. w13 GEMM; a slot routed to another expert-parallel rank's expert
     * is a row of zeros (the Triton kernel writes zeros for expert -1) */
    for (size_t t = 0; t < MK; t++) {
        size_t m = t / (size_t)k, e = (size_t)(ids[t] - d->expert_offset);
        bool here = ids[t] >= d->expert_offset && ids[t] < d->expert_offset + d->E;
        for (size_t n = 0; n < 2 * I; n++) {
            if (!here) { qp_num_store(dt, c1, t * 2 * I + n, 0.0f); continue; }
            size_t wrow = e * 2 * I + n;
            float v = dot(d, a, rs, m, d->w13, d->b13, wrow, H);
            if (q && d->act != QP_ACT_FP8_GROUP128) v = v * rs[m] * d->s13[wrow];
            qp_num_store(dt, c1, t * 2 * I + n, v);
        }
    }
    /* 3. silu_and_mul */
    for (size_t t = 0; t < MK; t++)
        for (size_t i = 0; i < I; i++) {
            float g = ld(dt, c1, t * 2 * I + i), u = ld(dt, c1, t * 2 * I + I + i);
            float s = qp_num_round(dt, silu(g));
            qp_num_store(dt, c2, t * I + i, s * u);
        }
    /* 4. its quantization */
    for (size_t i = 0; i < MK * I; i++) f[i] = ld(dt, c2, i);
    if ((st = gemm_input(ctx, d, d->a2_scale, f, c2, MK, I, a, rs))) goto out;
    /* 5. w2 GEMM with the routing weight */
    for (size_t t = 0; t < MK; t++) {
        size_t e = (size_t)(ids[t] - d->expert_offset);
        bool here = ids[t] >= d->expert_offset && ids[t] < d->expert_offset + d->E;
        for (size_t n = 0; n < H; n++) {
            if (!here) { qp_num_store(dt, c3, t * H + n, 0.0f); continue; }
            size_t wrow = e * H + n;
            float v = dot(d, a, rs, t, d->w2, d->b2, wrow, I);
            if (q && d->act != QP_ACT_FP8_GROUP128) v = v * rs[t] * d->s2[wrow];
            v *= weights[t];
            qp_num_store(dt, c3, t * H + n, v);
        }
    }
    /* 6. moe_sum in the activation dtype */
    for (size_t m = 0; m < (size_t)M; m++)
        for (size_t n = 0; n < H; n++) {
            float acc = 0.0f;
            for (size_t j = 0; j < (size_t)k; j++) acc = qp_num_round(dt, acc + ld(dt, c3, (m * k + j) * H + n));
            qp_num_store(dt, y, m * H + n, acc);
        }
out:
    free(f); free(rs); free(a); free(c1); free(c2); free(c3);
    return st;
}
