/* The block-float binders: OCP MX (docs/semantics.md §6), W4A8 MXFP4 with
 * static fp8 inputs (§7) and NVFP4 (§8). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"

static qp_status unpack_codes(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *w, qp_dtype elem, qp_lin_desc *d) {
    size_t N = (size_t)d->N, K = (size_t)d->K;
    uint8_t *c = qp_binder_keep(st, malloc(N * K));
    if (!c) return qp_binder_oom(b);
    const uint8_t *p = w->data;
    for (size_t n = 0; n < N; n++) {
        qp_status s = QP_OK;
        if (elem == QP_DTYPE_F4_E2M1) s = qp_unpack_fp4(p + n * (K / 2), K, c + n * K);
        else if (elem == QP_DTYPE_F8_E4M3FN) memcpy(c + n * K, p + n * K, K);
        else s = qp_unpack_fp6(p + n * (K * 3 / 4), K, c + n * K);
        if (s) return qp_binder_fail(b, "weight", "%s", "cannot unpack the weight codes");
    }
    float *lut = qp_binder_keep(st, calloc(256, sizeof(float)));
    if (!lut) return qp_binder_oom(b);
    int bits = qp_format_bits(elem);
    for (uint32_t i = 0; i < (1u << bits) && i < 256; i++) lut[i] = qp_format_decode(elem, i);
    d->w_elem = elem;
    d->w_codes = c;
    d->w_lut = lut;
    return QP_OK;
}

/* The e8m0 block scales of MX weights, [rows][K/32] as stored (E8M0 or
 * U8), one fp32 dequant multiplier per (row, block) after each element
 * format's rule (docs/semantics.md §6, ref_ocp_mx.c dequant_row). */
static qp_status mx_scales(const qp_binder *b, qp_lin_desc_store *st, qp_dtype elem, int R, qp_lin_desc *d) {
    const qp_tensor *ws;
    qp_status s;
    size_t nb = (size_t)d->K / 32, rows = ((size_t)d->N + (size_t)R - 1) / (size_t)R;
    if ((s = qp_binder_find(b, "weight_scale", true, &ws))) return s;
    if ((s = qp_binder_expect(b, ws, ws->dtype == QP_DTYPE_U8 ? QP_DTYPE_U8 : QP_DTYPE_E8M0, rows * nb,
                    R > 1 ? "expected [ceil(N/R), K/32] for per_block [R, 32] scales" : "expected [N, K/32]")))
        return s;
    float *f = qp_binder_keep(st, malloc(sizeof(float) * (size_t)d->N * nb));
    if (!f) return qp_binder_oom(b);
    const uint8_t *e = ws->data;
    for (int n = 0; n < d->N; n++)
        for (size_t j = 0; j < nb; j++) {
            uint8_t x = e[(size_t)(n / R) * nb + j];
            float m;
            if (elem == QP_DTYPE_F4_E2M1) m = qp_num_e8m0_hmul_scale(d->act_dtype, x);
            else if (elem == QP_DTYPE_F8_E4M3FN) m = x == 255 ? NAN : ldexpf(1.0f, (int)x - 127);
            else m = qp_num_round(d->act_dtype, ldexpf(1.0f, (int)x - 127));
            f[(size_t)n * nb + j] = m;
        }
    d->w_blk = 32;
    d->w_blk_scale = f;
    return QP_OK;
}

static size_t packed_row(qp_dtype elem, size_t K) {
    return elem == QP_DTYPE_F4_E2M1 ? K / 2 : elem == QP_DTYPE_F8_E4M3FN ? K : K * 3 / 4;
}

qp_status qp_bind_ocp_mx(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    qp_dtype we = d->scheme.weight.dtype;
    const qp_qtensor *a = &d->scheme.activation;
    qp_ocp_mx_act act = a->dtype == QP_DTYPE_NONE          ? QP_OCP_MX_ACT_NONE
                        : a->dtype == QP_DTYPE_F4_E2M1     ? QP_OCP_MX_ACT_MXFP4
                        : a->dtype == QP_DTYPE_F6_E3M2     ? QP_OCP_MX_ACT_MXFP6_E3M2
                        : a->dtype == QP_DTYPE_F6_E2M3     ? QP_OCP_MX_ACT_MXFP6_E2M3
                        : a->granularity == QP_GRAN_GROUP  ? QP_OCP_MX_ACT_MXFP8
                        : a->dynamic                       ? QP_OCP_MX_ACT_FP8_DYNAMIC
                                                           : QP_OCP_MX_ACT_FP8_STATIC;
    qp_status s = qp_ocp_mx_check_pair(b->ctx, we, act);
    if (s) return s;
    if (d->K % 32)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight", b->layer,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", d->K);
    int R = d->scheme.weight.granularity == QP_GRAN_BLOCK && d->scheme.weight.block[0] > 0 ? d->scheme.weight.block[0] : 1;
    const qp_tensor *w;
    qp_dtype wdt = we == QP_DTYPE_F8_E4M3FN ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8;
    if ((s = qp_binder_find(b, "weight", true, &w))) return s;
    if (w->dtype == QP_DTYPE_U8) wdt = QP_DTYPE_U8;
    if ((s = qp_binder_expect(b, w, wdt, (size_t)d->N * packed_row(we, (size_t)d->K),
                    we == QP_DTYPE_F4_E2M1 ? "expected [N, K/2] (two fp4 codes per byte)"
                    : we == QP_DTYPE_F8_E4M3FN ? "expected [N, K]" : "expected [N, 3K/4] (four fp6 codes per 3 bytes)")))
        return s;
    if ((s = unpack_codes(b, st, w, we, d)) || (s = mx_scales(b, st, we, R, d))) return s;
    static const qp_dtype ae[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3, QP_DTYPE_F8_E4M3FN};
    static const int mb[] = {0, 1, 2, 3, 3}, em[] = {0, 2, 4, 2, 8}; /* get_dtype_params, docs/semantics.md §6 */
    d->act = act == QP_OCP_MX_ACT_NONE ? QP_ACT_NONE : QP_ACT_MX_QDQ;
    d->act_elem = ae[act];
    d->act_mbits = mb[act];
    d->act_emax = em[act];
    return QP_OK;
}

qp_status qp_bind_w4a8_mxfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    if (d->K % 32)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight", b->layer,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", d->K);
    const qp_tensor *w;
    qp_status s;
    if ((s = qp_binder_find(b, "weight", true, &w)) ||
        (s = qp_binder_expect(b, w, QP_DTYPE_U8, (size_t)d->N * d->K / 2, "expected [N, K/2] (two fp4 codes per byte)")))
        return s;
    if ((s = unpack_codes(b, st, w, QP_DTYPE_F4_E2M1, d)) || (s = mx_scales(b, st, QP_DTYPE_F4_E2M1, 1, d)) ||
        (s = qp_binder_max_scalar(b, st, "input_scale", &d->input_scale)))
        return s;
    if (!(d->input_scale > 0.0f) || isinf(d->input_scale))
        return qp_binder_fail(b, "input_scale", "input_scale must be finite and > 0 (got %s)", d->input_scale != d->input_scale ? "nan" : "<= 0 or inf");
    d->act = QP_ACT_FP8_STATIC_QDQ;
    return QP_OK;
}

/* NVFP4 (QuarkNVFP4 and CompressedTensorsW4A4Fp4): fp4 codes with e4m3
 * block scales of 16 along K; `w2` the weight global scale that multiplies
 * them, `ig` and `g` the input global scale and its inverse as vLLM keeps
 * them after loading (docs/semantics.md §8). */
qp_status qp_bind_nvfp4_tensors(const qp_binder *b, const qp_lin_desc *d, const char *wname, const qp_tensor **w,
                                const qp_tensor **ws) {
    int K = d->K, N = d->N;
    qp_status s;
    if (d->K % 16) /* create_weights of both scheme classes (docs/semantics.md §8) */
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, wname, b->layer,
                            "Input size per partition (%d) must be divisible by group size (16)", d->K);
    if ((s = qp_binder_find(b, wname, true, w)) ||
        (s = qp_binder_expect(b, *w, QP_DTYPE_U8, (size_t)N * K / 2, "expected [N, K/2] (two fp4 codes per byte)")))
        return s;
    if ((s = qp_binder_find(b, "weight_scale", true, ws)) ||
        (s = qp_binder_expect(b, *ws, QP_DTYPE_F8_E4M3FN, (size_t)N * K / 16, "expected [N, K/16]")))
        return s;
    return QP_OK;
}

static qp_status nvfp4_payload(const qp_binder *b, qp_lin_desc_store *st, qp_lin_desc *d, const qp_tensor *w,
                               const qp_tensor *ws, float w2, float ig, float g) {
    int K = d->K, N = d->N;
    qp_status s;
    if ((s = unpack_codes(b, st, w, QP_DTYPE_F4_E2M1, d))) return s;
    size_t nb = (size_t)K / 16;
    float *f = qp_binder_keep(st, malloc(sizeof(float) * (size_t)N * nb));
    if (!f) return qp_binder_oom(b);
    const uint8_t *sf = ws->data;
    /* dequantize_to_dtype: the block factor e4m3(sf) * weight_global_scale in fp32 */
    for (size_t i = 0; i < (size_t)N * nb; i++) f[i] = qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[i]) * w2;
    d->w_blk = 16;
    d->w_blk_scale = f;
    d->input_global_scale = ig;
    d->input_global_scale_inv = g;
    d->act = QP_ACT_NVFP4_QDQ;
    d->bias_after_round = 1;
    return QP_OK;
}

/* Quark stores the dequantizing global scales: g = 1 / max(input_scale_2). */
static qp_status quark_nvfp4_scales(const qp_binder *b, float w2, float ig, float out[3]) {
    if (isnan(w2)) return qp_binder_fail(b, "weight_scale_2", "%s", "weight_scale_2 is NaN");
    if (!(ig > 0.0f) || isinf(ig))
        return qp_binder_fail(b, "input_scale_2", "%s", "the input global scale (input_scale_2) must be finite and > 0");
    out[0] = w2;
    out[1] = ig;
    out[2] = 1.0f / ig;
    return QP_OK;
}

/* compressed-tensors stores the quantizing multipliers (their inverses):
 * vLLM keeps weight_global_scale = 1 / max(ckpt), input_global_scale_inv =
 * max(ckpt) and input_global_scale = 1 / that. */
static qp_status ct_nvfp4_scales(const qp_binder *b, float wg, float g, float out[3]) {
    (void)b;
    out[0] = 1.0f / wg;
    out[1] = 1.0f / g;
    out[2] = g;
    return QP_OK;
}

/* Where a dialect keeps the NVFP4 codes and its two global scales, how it
 * reads a global scale (Quark: the max over the shards; compressed-tensors:
 * one positive value) and what they mean: `scales` turns them into the
 * weight's global scale, the input's and its inverse. */
typedef struct nvfp4_dialect {
    const char *weight, *weight_scale, *input_scale;
    qp_status (*scalar)(const qp_binder *b, qp_lin_desc_store *st, const char *name, float *out);
    qp_status (*scales)(const qp_binder *b, float wscale, float iscale, float out[3]);
} nvfp4_dialect;

static qp_status bind_nvfp4(const qp_binder *b, qp_lin_desc_store *st, qp_lin_desc *d, const nvfp4_dialect *dl) {
    const qp_tensor *w, *ws;
    float wscale, iscale, g[3];
    qp_status s;
    if ((s = qp_bind_nvfp4_tensors(b, d, dl->weight, &w, &ws)) || (s = dl->scalar(b, st, dl->weight_scale, &wscale)) ||
        (s = dl->scalar(b, st, dl->input_scale, &iscale)) || (s = dl->scales(b, wscale, iscale, g)))
        return s;
    return nvfp4_payload(b, st, d, w, ws, g[0], g[1], g[2]);
}

qp_status qp_bind_nvfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    static const nvfp4_dialect quark = {"weight", "weight_scale_2", "input_scale_2", qp_binder_max_scalar,
                                        quark_nvfp4_scales};
    (void)o;
    return bind_nvfp4(b, st, d, &quark);
}

qp_status qp_bind_ct_nvfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    static const nvfp4_dialect ct = {"weight_packed", "weight_global_scale", "input_global_scale",
                                     qp_binder_positive_scalar, ct_nvfp4_scales};
    (void)o;
    return bind_nvfp4(b, st, d, &ct);
}
