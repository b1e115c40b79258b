/* The 4-bit integer binders: QQQ W4A8 from its Marlin layout (docs/semantics.md
 * §9, §10, §11) and Quark W4A16 (§17). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"

qp_status qp_bind_qqq(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    const qp_tensor *B, *sc, *sg;
    int K = d->K, N = d->N, g = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : -1;
    qp_status s;
    if (d->act_dtype != QP_DTYPE_F16) /* QQQLinearMethod.create_weights (docs/semantics.md §9) */
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, NULL, b->layer, "The params dtype must be float16, but got %s",
                            d->act_dtype == QP_DTYPE_BF16 ? "torch.bfloat16"
                            : d->act_dtype == QP_DTYPE_F32 ? "torch.float32" : qp_dtype_name(d->act_dtype));
    /* QQQLinearMethod.create_weights (docs/semantics.md §9), vLLM's messages */
    if (N % 64)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "B", b->layer,
                            "Weight output_size_per_partition = %d is not divisible by min_n_threads = 64.", N);
    if (K % 128)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "B", b->layer,
                            "Weight input_size_per_partition = %d is not divisible by min_k_threads = 128.", K);
    if ((s = qp_binder_find(b, "B", true, &B)) || (s = qp_binder_expect(b, B, QP_DTYPE_I32, (size_t)K / 16 * 2 * (size_t)N, "expected [K/16, 2N]")))
        return s;
    if ((s = qp_binder_find(b, "s_channel", true, &sc)) || (s = qp_binder_expect(b, sc, QP_DTYPE_F32, (size_t)N, "expected [1, N]"))) return s;
    if ((s = qp_binder_find(b, "s_group", g == 128, &sg))) return s;
    if (g == 128 && (s = qp_binder_expect(b, sg, QP_DTYPE_F16, (size_t)K / 128 * (size_t)N, "expected [K/128, N]"))) return s;
    if (g != 128 && sg && qp_tensor_count(sg))
        return qp_binder_fail(b, "s_group", "%s", "per-channel QQQ has an empty s_group");
    size_t kn = (size_t)K * N;
    int8_t *qkn = qp_binder_keep(st, malloc(kn)), *q4 = qp_binder_keep(st, malloc(kn)), *w8 = qp_binder_keep(st, malloc(kn));
    float *s_ch = qp_binder_keep(st, malloc(sizeof(float) * (size_t)N));
    uint16_t *s_g = g == 128 ? qp_binder_keep(st, malloc(sizeof(uint16_t) * (size_t)(K / 128) * N)) : NULL;
    if (!qkn || !q4 || !w8 || !s_ch || (g == 128 && !s_g)) return qp_binder_oom(b);
    if ((s = qp_qqq_unpack_weight(b->ctx, B->data, K, N, g, qkn))) return s;
    if ((s = qp_qqq_unpermute_scales(b->ctx, sc->data, g == 128 ? sg->data : NULL, K, N, g, s_ch, s_g))) return s;
    /* natural [K][N] -> canonical [N][K]; the exact int8 weight of docs/semantics.md §11 step 2 */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int8_t c = qkn[(size_t)k * N + n];
            q4[(size_t)n * K + k] = c;
            w8[(size_t)n * K + k] =
                g == 128 ? qp_ref_qqq_group_weight(c - 8, s_g[(size_t)(k / 128) * N + n]) : (int8_t)(16 * c);
        }
    d->group_size = g;
    d->q4 = q4;
    d->w8 = w8;
    d->s_channel = s_ch;
    d->s_group = s_g;
    d->marlin_B = B->data;
    d->marlin_s_channel = sc->data;
    d->marlin_s_group = g == 128 ? sg->data : NULL;
    d->act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d->act_symmetric = 1;
    return QP_OK;
}


/* W4A16 (docs/semantics.md §17): Quark's packed int32 words -> codes [N][K], scales and
 * zero points [G][N]; the scale tensor may carry vLLM's 8*ceil(N/8) pad. */
qp_status qp_bind_w4a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d) {
    (void)o;
    int K = d->K, N = d->N, gs = d->scheme.weight.group_size > 0 ? d->scheme.weight.group_size : -1;
    int g = gs > 0 ? gs : K, nc = (N + 7) / 8;
    if (K % g)
        return qp_error_set(b->ctx, QP_ERR_VALUE, NULL, "weight_scale", b->layer,
                            "input size %d is not divisible by the group size %d", K, gs);
    int G = K / g;
    bool sym = d->scheme.weight.symmetric;
    const qp_tensor *w, *sc, *zp;
    qp_status s;
    if ((s = qp_binder_find(b, "weight", true, &w)) || (s = qp_binder_expect(b, w, QP_DTYPE_I32, (size_t)K * nc, "expected [K, ceil(N/8)]")))
        return s;
    if ((s = qp_binder_find(b, "weight_scale", true, &sc))) return s;
    /* the scale parameter is [G, 8*ceil(N/8)] in the params dtype; a float
     * checkpoint scale of another dtype is copy_'d into it (rounded) */
    size_t ns = qp_tensor_count(sc);
    if (!qp_dtype_is_float(sc->dtype) || (ns != (size_t)G * N && ns != (size_t)G * 8 * nc)) {
        char sh[96], pad[32] = "", m[320];
        qp_binder_shape_str(sc, sh, sizeof sh);
        if (8 * nc != N) snprintf(pad, sizeof pad, " or [%d, %d]", G, 8 * nc);
        snprintf(m, sizeof m, "tensor 'weight_scale' must be a float tensor [%d, %d]%s (loaded into the params dtype %s), got %s %s",
                 G, N, pad, qp_dtype_name(d->act_dtype), qp_dtype_name(sc->dtype), sh);
        return qp_binder_fail(b, "weight_scale", "%s", m);
    }
    /* vLLM creates weight_zero_point for symmetric layers too and ignores
     * it (Quark writes zeros there); it must still fit the parameter */
    if ((s = qp_binder_find(b, "weight_zero_point", !sym, &zp))) return s;
    if (zp && (s = qp_binder_expect(b, zp, QP_DTYPE_I32, (size_t)G * nc, "expected [K/group_size, ceil(N/8)]"))) return s;
    size_t nk = (size_t)N * K, gn = (size_t)G * N;
    uint8_t *kn = malloc(nk > gn ? nk : gn);
    uint8_t *q4 = qp_binder_keep(st, malloc(nk)), *z = sym ? NULL : qp_binder_keep(st, malloc(gn));
    float *f = qp_binder_keep(st, malloc(sizeof(float) * gn));
    if (!kn || !q4 || !f || (!sym && !z)) { free(kn); return qp_binder_oom(b); }
    s = qp_unpack_int4_quark(w->data, K, N, d->scheme.pack_method, kn);
    for (int k = 0; !s && k < K; k++)
        for (int n = 0; n < N; n++) q4[(size_t)n * K + k] = kn[(size_t)k * N + n];
    if (!s && !sym) {
        s = qp_unpack_int4_quark(zp->data, G, N, d->scheme.pack_method, kn);
        if (!s) memcpy(z, kn, gn);
    }
    free(kn);
    if (s) return qp_binder_fail(b, "weight", "%s", "cannot unpack the int4 words (pack_method must be order or reorder)");
    size_t stride = ns == gn ? (size_t)N : (size_t)8 * nc;
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++)
            f[(size_t)gi * N + n] = qp_num_round(d->act_dtype, qp_num_load(sc->dtype, sc->data, (size_t)gi * stride + n));
    d->q4 = (const int8_t *)q4;
    d->w4_signed = sym;
    d->w4_zero = z;
    d->w4_scale = f;
    d->group_size = gs;
    d->act = QP_ACT_NONE;
    return QP_OK;
}
