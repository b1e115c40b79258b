/* 4/6-bit weight quantizers: W4A16 int4/uint4 with Quark packing
 * (docs/semantics.md §17), OCP-MX and W4A8-MXFP4-FP8 (§5-§7), NVFP4 (§8) and
 * QQQ (§9-§10). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qweights.h"

#define MX_BLOCK 32
#define NVFP4_BLOCK 16

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* W4A16: per group of g along K and output column n, the scale in the
 * model dtype (checkpoint weight_scale, docs/semantics.md §17) and codes from it.
 * Symmetric int4: s = max|w|/7, codes in [-8, 7] stored two's complement;
 * uint4: s = (max - min)/15 over a range holding 0, zp = rne(-min/s). The
 * spec fixes the layout and dequant (code - zp) * s, not Quark's
 * calibration; this is the plain min/max one. */
qp_status qp_qw_w4a16(qp_qw_job *j) {
    const qp_scheme *s = j->scheme;
    int N = j->N, K = j->K;
    int g = s->weight.granularity == QP_GRAN_GROUP ? s->weight.group_size : K;
    bool sym = s->weight.dtype != QP_DTYPE_U4;
    qp_dtype pd = j->opts->params_dtype;
    if (g <= 0 || K % g)
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight_scale", NULL,
                            "input size %d is not divisible by the group size %d", K, g);
    if (s->pack_method != QP_PACK_ORDER && s->pack_method != QP_PACK_REORDER)
        return qp_error_set(j->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL,
                            "W4A16 needs Quark's pack_method order or reorder");
    int G = K / g, C = (N + 7) / 8;
    uint8_t *codes = malloc((size_t)K * N), *zc = malloc((size_t)G * N);
    int32_t *wq = qp_qw_add(j, "weight", QP_DTYPE_I32, 2, K, C);
    uint16_t *sc = wq ? qp_qw_add(j, "weight_scale", pd, 2, G, N) : NULL;
    /* Quark writes the zero point of symmetric layers too, all zero */
    int32_t *zq = sc && (!sym || j->opts->sym_zero_points) ? qp_qw_add(j, "weight_zero_point", QP_DTYPE_I32, 2, G, C) : NULL;
    qp_status st = QP_OK;
    if (!codes || !zc || !sc || (!sym && !zq)) {
        st = qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
        goto done;
    }
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) {
            const float *col = j->w + (size_t)n * K + (size_t)gi * g;
            float mn = 0.0f, mx = 0.0f;
            for (int k = 0; k < g; k++) { mn = fminf(mn, col[k]); mx = fmaxf(mx, col[k]); }
            /* max/15 - min/15: the range itself can pass FLT_MAX; max|w|
             * through fabsf: fmaxf(-0.0, 0.0) may return either zero
             * (clang: -0.0), and an all-zero group's scale is +0 */
            float raw = sym ? fabsf(fmaxf(-mn, mx)) / 7.0f : mx / 15.0f - mn / 15.0f;
            uint16_t sb = (uint16_t)qp_format_encode(pd, raw);
            float sv = qp_format_decode(pd, sb);
            if (isinf(sv)) {
                st = qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight_scale", NULL,
                                  "scale %g of group %d, column %d overflows %s", (double)raw, gi, n, qp_dtype_name(pd));
                goto done;
            }
            sc[(size_t)gi * N + n] = sb;
            /* a scale that is 0 in the model dtype (a zero or tiny group)
             * keeps every code at the zero point */
            float zp = sym || sv == 0.0f ? 0.0f : clampf(nearbyintf(-mn / sv), 0.0f, 15.0f);
            if (!sym) zc[(size_t)gi * N + n] = (uint8_t)zp;
            for (int k = 0; k < g; k++) {
                float v = sv == 0.0f ? zp : nearbyintf(col[k] / sv) + zp;
                v = sym ? clampf(v, -8.0f, 7.0f) : clampf(v, 0.0f, 15.0f);
                codes[(size_t)(gi * g + k) * N + n] = (uint8_t)((int)v & 0xF);
            }
        }
    st = qp_pack_int4_quark(codes, K, N, s->pack_method, wq);
    if (st == QP_OK && !sym) st = qp_pack_int4_quark(zc, G, N, s->pack_method, zq);
    if (st != QP_OK) st = qp_error_set(j->ctx, st, NULL, "weight", NULL, "int4 packing failed");
done:
    free(codes); free(zc);
    return st;
}

/* OCP-MX weights (docs/semantics.md §5, §6): Quark's even shared scale per 32 along K
 * (per R x 32 for MXFP8 per_block checkpoints), packed as vLLM loads them;
 * W4A8-MXFP4-FP8 adds the static fp8 input_scale (§7). */
qp_status qp_qw_mx(qp_qw_job *j) {
    const qp_scheme *s = j->scheme;
    int N = j->N, K = j->K;
    qp_dtype e = s->kind == QP_SCHEME_W4A8_MXFP4_FP8 ? QP_DTYPE_F4_E2M1 : s->weight.dtype;
    int R = s->weight.granularity == QP_GRAN_BLOCK && s->weight.block[0] > 0 ? s->weight.block[0] : 1;
    if (e != QP_DTYPE_F4_E2M1 && e != QP_DTYPE_F6_E2M3 && e != QP_DTYPE_F6_E3M2 && e != QP_DTYPE_F8_E4M3FN)
        return qp_error_set(j->ctx, QP_ERR_UNSUPPORTED, NULL, "weight", NULL, "%s is not an OCP MX weight format",
                            qp_dtype_name(e));
    if (K % MX_BLOCK) /* QuarkOCP_MX.create_weights (docs/semantics.md §7) */
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", K);
    int nb = K / MX_BLOCK, NR = (N + R - 1) / R;
    size_t rowb = e == QP_DTYPE_F4_E2M1 ? (size_t)K / 2 : e == QP_DTYPE_F8_E4M3FN ? (size_t)K : (size_t)K * 3 / 4;
    uint8_t *codes = malloc((size_t)N * K);
    uint8_t *wq = qp_qw_add(j, "weight", QP_DTYPE_U8, 2, N, (int)rowb);
    uint8_t *sc = wq ? qp_qw_add(j, "weight_scale", QP_DTYPE_U8, 2, NR, nb) : NULL;
    qp_status st = QP_OK;
    if (!codes || !sc) { st = qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory"); goto done; }
    if (R == 1) {
        st = qp_quant_mx(j->ctx, e, j->w, (size_t)N, (size_t)K, codes, sc);
        if (st != QP_OK) goto done;
    } else {
        for (int rb = 0; rb < NR; rb++)
            for (int b = 0; b < nb; b++) {
                float a = 0.0f;
                for (int r = rb * R; r < (rb + 1) * R && r < N; r++)
                    for (int k = b * MX_BLOCK; k < (b + 1) * MX_BLOCK; k++) a = fmaxf(a, fabsf(j->w[(size_t)r * K + k]));
                uint8_t code;
                qp_mx_shared_scale(e, a, &code);
                sc[(size_t)rb * nb + b] = code;
                for (int r = rb * R; r < (rb + 1) * R && r < N; r++)
                    for (int k = b * MX_BLOCK; k < (b + 1) * MX_BLOCK; k++)
                        codes[(size_t)r * K + k] = (uint8_t)qp_format_encode(e, ldexpf(j->w[(size_t)r * K + k], 127 - (int)code));
            }
    }
    if (e == QP_DTYPE_F4_E2M1) st = qp_pack_fp4(codes, (size_t)N * K, wq);
    else if (e == QP_DTYPE_F8_E4M3FN) memcpy(wq, codes, (size_t)N * K);
    else st = qp_pack_fp6(codes, (size_t)N * K, wq);
    if (st != QP_OK) { st = qp_error_set(j->ctx, st, NULL, "weight", NULL, "MX packing failed"); goto done; }
    if (s->kind == QP_SCHEME_W4A8_MXFP4_FP8) {
        float amax;
        if ((st = qp_qw_calib_absmax(j, &amax)) != QP_OK) goto done;
        void *is = qp_qw_add_scale(j, "input_scale", 1);
        if (!is) { st = QP_ERR_OUT_OF_MEMORY; goto done; }
        if (isnan(qp_qw_put_scale(j, is, 0, amax / 448.0f))) st = QP_ERR_VALUE;
    }
done:
    free(codes);
    return st;
}

static float absmax(const float *v, size_t n) {
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(v[i]));
    return a;
}

/* NVFP4 (docs/semantics.md §8): the global scale maps max|w| to 448*6 (the e4m3
 * block scale times the fp4 maximum); the blocks are quantized like
 * activations (qp_quant_nvfp4) with g = 1/weight_scale_2, so that
 * value * e4m3(sf) * weight_scale_2 is the dequantized weight. An all-zero
 * weight gets weight_scale_2 = 1 and zero codes. input_scale_2 is the
 * activations' absmax / (448*6), the reciprocal of docs/semantics.md §8's g; both are kept
 * >= FLT_MIN. */
qp_status qp_qw_nvfp4(qp_qw_job *j) {
    int N = j->N, K = j->K;
    if (K % NVFP4_BLOCK)
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "Input size per partition (%d) must be divisible by group size (16)", K);
    float amax_x;
    qp_status st = qp_qw_calib_absmax(j, &amax_x);
    if (st != QP_OK) return st;
    float amax = absmax(j->w, (size_t)N * K);
    /* at least FLT_MIN, so that the reciprocal the quantizer and vLLM's
     * input_global_scale_inv use stays finite (subnormal weights) */
    float ws2 = amax == 0.0f ? 1.0f : fmaxf(amax / (448.0f * 6.0f), FLT_MIN);
    uint8_t *codes = malloc((size_t)N * K);
    uint8_t *wq = qp_qw_add(j, "weight", QP_DTYPE_U8, 2, N, K / 2);
    uint8_t *sf = wq ? qp_qw_add(j, "weight_scale", QP_DTYPE_F8_E4M3FN, 2, N, K / NVFP4_BLOCK) : NULL;
    float *w2 = sf ? qp_qw_add(j, "weight_scale_2", QP_DTYPE_F32, 1, 1) : NULL;
    float *i2 = w2 ? qp_qw_add(j, "input_scale_2", QP_DTYPE_F32, 1, 1) : NULL;
    if (!codes || !i2) { free(codes); return qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory"); }
    st = qp_quant_nvfp4(j->ctx, j->w, (size_t)N, (size_t)K, 1.0f / ws2, codes, sf);
    if (st == QP_OK) st = qp_pack_fp4(codes, (size_t)N * K, wq);
    w2[0] = ws2;
    i2[0] = fmaxf(amax_x / (448.0f * 6.0f), FLT_MIN);
    free(codes);
    return st;
}

/* QQQ (docs/semantics.md §9, §10): qp_qqq_quantize_weight on w^T, then
 * the Marlin layout and scale permutations. Per-channel checkpoints carry
 * no s_group (vLLM creates an empty fp16 tensor). */
qp_status qp_qw_qqq(qp_qw_job *j) {
    int N = j->N, K = j->K, gs = j->scheme->weight.granularity == QP_GRAN_GROUP ? 128 : -1;
    int G = gs == 128 ? K / 128 : 0;
    float *wt = malloc(sizeof(float) * (size_t)K * N), *sch = malloc(sizeof(float) * (size_t)N);
    int8_t *q = malloc((size_t)K * N);
    uint16_t *sg = malloc(sizeof(uint16_t) * (size_t)(G ? G : 1) * N);
    qp_status st = QP_OK;
    if (!wt || !sch || !q || !sg) { st = qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "B", NULL, "out of memory"); goto done; }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            float v = j->w[(size_t)n * K + k];
            /* QQQ quantizes fp16 weights (docs/semantics.md §9): a value fp16
             * cannot hold would become inf and poison its scales */
            if (isinf(qp_fp16_round(v))) {
                st = qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                                  "weight [%d][%d] = %g overflows fp16; QQQ quantizes fp16 weights", n, k, (double)v);
                goto done;
            }
            wt[(size_t)k * N + n] = v;
        }
    st = qp_qqq_quantize_weight(j->ctx, wt, K, N, gs, q, sch, gs == 128 ? sg : NULL);
    if (st != QP_OK) goto done;
    int32_t *B = qp_qw_add(j, "B", QP_DTYPE_I32, 2, K / 16, 2 * N);
    float *sc = B ? qp_qw_add(j, "s_channel", QP_DTYPE_F32, 2, 1, N) : NULL;
    uint16_t *sgo = sc && gs == 128 ? qp_qw_add(j, "s_group", QP_DTYPE_F16, 2, G, N) : NULL;
    if (!sc || (gs == 128 && !sgo)) { st = QP_ERR_OUT_OF_MEMORY; goto done; }
    st = qp_qqq_pack_weight(j->ctx, q, K, N, gs, B);
    if (st == QP_OK) st = qp_qqq_permute_scales(j->ctx, sch, gs == 128 ? sg : NULL, K, N, gs, sc, sgo);
done:
    free(wt); free(sch); free(q); free(sg);
    return st;
}
