/* qp_quantize_weights for compressed-tensors schemes: the weights are
 * quantized with the same arithmetic as the Quark layouts (the
 * per-family quantizers), then written under the names, shapes and
 * packing llm-compressor writes and vLLM's compressed-tensors scheme
 * classes create (docs/loading.md "compressed-tensors"):
 *
 *   W8A8 int8 / fp8   weight, weight_scale ([N, 1] per channel, [1] per
 *                     tensor, blocks [N/128, K/128]), input_scale (static),
 *                     input_zero_point (static asymmetric); no weight zero
 *                     points (compressed-tensors' int8 weights are
 *                     symmetric)
 *   W4A16             weight_packed int32 [N, K/8] (value i of a word at bits
 *                     4i, stored + 8), weight_scale [N, K/g], weight_zero_point
 *                     int32 [N/8, K/g] packed along N (asymmetric only),
 *                     weight_shape int64 [2]
 *   NVFP4             weight_packed, weight_scale, weight_global_scale and
 *                     input_global_scale: the inverses of Quark's
 *                     weight_scale_2 / input_scale_2 (fp32 [1]) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qweights.h"

static const qp_qw_tensor *find(const qp_qweights *q, const char *name) {
    for (size_t i = 0; i < q->n; i++)
        if (!strcmp(q->t[i].name, name)) return &q->t[i];
    return NULL;
}

static qp_status copy_as(qp_qw_job *j, const qp_qw_tensor *t, const char *name, int ndim, int d0, int d1) {
    void *p = ndim == 2 ? qp_qw_add(j, name, t->dtype, 2, d0, d1) : ndim == 1 ? qp_qw_add(j, name, t->dtype, 1, d0)
                                                                            : qp_qw_add(j, name, t->dtype, 0);
    if (!p) return QP_ERR_OUT_OF_MEMORY;
    memcpy(p, t->data, t->bytes);
    return QP_OK;
}

static float scalar(const qp_qw_tensor *t) { return qp_num_load(t->dtype, t->data, 0); }

static qp_status w4a16(qp_qw_job *j, const qp_qweights *q) {
    const qp_qw_tensor *w = find(q, "weight"), *s = find(q, "weight_scale"), *z = find(q, "weight_zero_point");
    int N = j->N, K = j->K, g = j->scheme->weight.group_size > 0 ? j->scheme->weight.group_size : K, G = K / g;
    bool sym = j->scheme->weight.symmetric;
    if (K % 8)
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight_packed", NULL,
                            "compressed-tensors packs 8 int4 values per int32 along K: K = %d is not a multiple of 8", K);
    if (!w || !s || (!sym && !z)) return qp_error_set(j->ctx, QP_ERR_INTERNAL, NULL, "weight", NULL, "W4A16 tensors missing");
    uint8_t *codes = malloc((size_t)K * N), *zc = malloc((size_t)G * N + 1);
    int32_t *wp = qp_qw_add(j, "weight_packed", QP_DTYPE_I32, 2, N, K / 8);
    void *sc = wp ? qp_qw_add(j, "weight_scale", s->dtype, 2, N, G) : NULL;
    int32_t *zp = sc && !sym ? qp_qw_add(j, "weight_zero_point", QP_DTYPE_I32, 2, (N + 7) / 8, G) : NULL;
    int64_t *shape = sc && (sym || zp) ? qp_qw_add(j, "weight_shape", QP_DTYPE_I64, 1, 2) : NULL;
    qp_status st = codes && zc && shape ? QP_OK : qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
    if (!st) st = qp_unpack_int4_quark(w->data, K, N, QP_PACK_ORDER, codes);
    if (!st && !sym) st = qp_unpack_int4_quark(z->data, G, N, QP_PACK_ORDER, zc);
    if (!st) {
        size_t es = qp_qw_elem_bytes(s->dtype);
        shape[0] = N;
        shape[1] = K;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) {
                /* symmetric: the two's-complement code q stored as q + 8 */
                uint32_t u = codes[(size_t)k * N + n] ^ (sym ? 8u : 0u);
                wp[(size_t)n * (K / 8) + k / 8] = (int32_t)((uint32_t)wp[(size_t)n * (K / 8) + k / 8] | u << (4 * (k % 8)));
            }
        for (int gi = 0; gi < G; gi++)
            for (int n = 0; n < N; n++) {
                memcpy((uint8_t *)sc + ((size_t)n * G + gi) * es, (const uint8_t *)s->data + ((size_t)gi * N + n) * es, es);
                if (!sym)
                    zp[(size_t)(n / 8) * G + gi] =
                        (int32_t)((uint32_t)zp[(size_t)(n / 8) * G + gi] | (uint32_t)zc[(size_t)gi * N + n] << (4 * (n % 8)));
            }
    } else if (st != QP_ERR_OUT_OF_MEMORY) {
        st = qp_error_set(j->ctx, QP_ERR_INTERNAL, NULL, "weight", NULL, "int4 unpacking failed");
    }
    free(codes);
    free(zc);
    return st;
}

static qp_status nvfp4(qp_qw_job *j, const qp_qweights *q) {
    const qp_qw_tensor *w = find(q, "weight"), *s = find(q, "weight_scale"), *w2 = find(q, "weight_scale_2"),
                       *i2 = find(q, "input_scale_2");
    if (!w || !s || !w2 || !i2) return qp_error_set(j->ctx, QP_ERR_INTERNAL, NULL, "weight", NULL, "NVFP4 tensors missing");
    qp_status st;
    if ((st = copy_as(j, w, "weight_packed", 2, j->N, j->K / 2)) || (st = copy_as(j, s, "weight_scale", 2, j->N, j->K / 16)))
        return st;
    float *wg = qp_qw_add(j, "weight_global_scale", QP_DTYPE_F32, 1, 1);
    float *ig = wg ? qp_qw_add(j, "input_global_scale", QP_DTYPE_F32, 1, 1) : NULL;
    if (!ig) return QP_ERR_OUT_OF_MEMORY;
    /* compressed-tensors stores the quantizing multipliers */
    wg[0] = 1.0f / scalar(w2);
    ig[0] = 1.0f / scalar(i2);
    return QP_OK;
}

static qp_status w8a8(qp_qw_job *j, const qp_qweights *q) {
    for (size_t i = 0; i < q->n; i++) {
        const qp_qw_tensor *t = &q->t[i];
        qp_status st = QP_OK;
        if (!strcmp(t->name, "weight_zero_point")) continue;
        if (!strcmp(t->name, "weight_scale") && t->ndim == 1 && t->shape[0] == j->N && j->N > 1)
            st = copy_as(j, t, t->name, 2, j->N, 1); /* ChannelQuantScaleParameter [N, 1] */
        else if (t->ndim == 0)
            st = copy_as(j, t, t->name, 1, 1, 0); /* PerTensorScaleParameter [1] */
        else
            st = copy_as(j, t, t->name, t->ndim, (int)t->shape[0], t->ndim > 1 ? (int)t->shape[1] : 0);
        if (st) return st;
    }
    return QP_OK;
}

qp_status qp_qw_ct(qp_qw_job *j, qp_status (*quantize)(qp_qw_job *)) {
    qp_scheme s = *j->scheme;
    qp_quantize_options o = *j->opts;
    o.sym_zero_points = 0;
    if (s.kind == QP_SCHEME_W4A16_INT4) {
        s.pack_method = QP_PACK_ORDER;
        s.weight.dtype = s.weight.symmetric ? QP_DTYPE_I4 : QP_DTYPE_U4;
    } else if (s.kind != QP_SCHEME_W8A8_INT8 && s.kind != QP_SCHEME_W8A8_FP8 && s.kind != QP_SCHEME_W8A8_FP8_BLOCK &&
               s.kind != QP_SCHEME_NVFP4) {
        return qp_error_set(j->ctx, QP_ERR_UNSUPPORTED, NULL, "weight", NULL,
                            "qport does not write compressed-tensors %s weights (%s)", qp_scheme_kind_name(s.kind),
                            s.scheme_class);
    }
    qp_qweights *tmp = calloc(1, sizeof *tmp);
    if (!tmp) return qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
    qp_qw_job jq = {j->ctx, &s, j->w, j->N, j->K, &o, tmp};
    qp_status st = quantize(&jq);
    if (!st)
        st = s.kind == QP_SCHEME_W4A16_INT4 ? w4a16(j, tmp) : s.kind == QP_SCHEME_NVFP4 ? nvfp4(j, tmp) : w8a8(j, tmp);
    if (st == QP_ERR_OUT_OF_MEMORY) qp_error_set(j->ctx, st, NULL, "weight", NULL, "out of memory");
    qp_qweights_destroy(tmp);
    return st;
}
