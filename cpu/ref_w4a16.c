/* Reference W4A16 linear (QuarkW4A16Int4, docs/semantics.md §17): Quark-packed int4 /
 * uint4 weights dequantized per group, products summed in double, one
 * rounding to the activation dtype (the GPU's accumulation order varies). */
#include <stdlib.h>

#include "ref_args.h"

QP_API qp_status qp_ref_w4a16_forward(qp_context *ctx, const qp_ref_w4a16_args *a, void *y) {
    qp_status dst =
        QP_REF_CHECK_ARGS(ctx, "qp_ref_w4a16_forward", a, y, a->weight && a->scale && (a->symmetric || a->zero_point));
    if (dst != QP_OK) return dst;
    int K = a->K, N = a->N, g = a->group_size == -1 ? K : a->group_size;
    if (g <= 0 || K % g)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight_scale", NULL,
                            "input size %d is not divisible by the group size %d", K, a->group_size);
    int G = K / g;
    uint8_t *codes = malloc((size_t)K * (size_t)N), *zps = a->symmetric ? NULL : malloc((size_t)G * (size_t)N);
    double *wd = malloc(sizeof(double) * (size_t)K * (size_t)N);
    qp_status st = QP_OK;
    if (!codes || !wd || (!a->symmetric && !zps)) { st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory"); goto done; }
    st = qp_unpack_int4_quark(a->weight, K, N, a->pack, codes);
    if (st == QP_OK && !a->symmetric) st = qp_unpack_int4_quark(a->zero_point, G, N, a->pack, zps);
    if (st != QP_OK) { qp_error_set(ctx, st, NULL, "weight", NULL, "bad pack method or shape"); goto done; }
    int sstride = (N + 7) / 8 * 8; /* vLLM pads the scale columns to 8*ceil(N/8) */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = codes[(size_t)k * N + n];
            /* symmetric checkpoints hold two's-complement codes; asymmetric
             * ones unsigned codes and a zero point */
            int v = a->symmetric ? c - 16 * (c >= 8) : c - zps[(size_t)(k / g) * N + n];
            wd[(size_t)k * N + n] = v * (double)qp_num_load(a->dtype, a->scale, (size_t)(k / g) * sstride + n);
        }
    for (int m = 0; m < a->M; m++)
        for (int n = 0; n < N; n++) {
            double acc = a->bias ? qp_num_load(a->dtype, a->bias, (size_t)n) : 0.0;
            for (int k = 0; k < K; k++) acc += (double)qp_num_load(a->dtype, a->x, (size_t)m * K + k) * wd[(size_t)k * N + n];
            qp_num_store(a->dtype, y, (size_t)m * N + n, (float)acc);
        }
done:
    free(codes); free(zps); free(wd);
    return st;
}
