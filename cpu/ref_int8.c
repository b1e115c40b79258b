/* Reference W8A8-INT8 linear (QuarkW8A8Int8, docs/semantics.md §12,
 * §14, §15): vLLM's activation quantization, exact int32 accumulation
 * (checked in int64) and the CUTLASS epilogue order, for every shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_args.h"


QP_API qp_status qp_ref_w8a8_int8_forward(qp_context *ctx, const qp_ref_int8_args *a, void *y) {
    qp_status dst = QP_REF_CHECK_ARGS(ctx, "qp_ref_w8a8_int8_forward", a, y, a->w && a->w_scale);
    if (dst != QP_OK) return dst;
    int M = a->M, K = a->K, N = a->N;
    bool asym = !a->symmetric;
    float *xf = malloc(sizeof(float) * (size_t)K);
    int8_t *xq = malloc((size_t)K);
    int32_t *adj = asym ? malloc(sizeof(int32_t) * (size_t)N) : NULL;
    qp_status st = QP_OK;
    if (!xf || !xq || (asym && !adj)) { st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory"); goto done; }
    if (asym) {
        /* azp_adj[n] = sum_k w[k,n] (int32), times azp when static (docs/semantics.md §15) */
        for (int n = 0; n < N; n++) {
            int64_t s = 0;
            for (int k = 0; k < K; k++) s += a->w[(size_t)n * K + k];
            adj[n] = (int32_t)s;
            if (a->is_static) adj[n] = (int32_t)((uint32_t)adj[n] * (uint32_t)a->input_zp);
        }
    }
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) xf[k] = qp_num_load(a->dtype, a->x, (size_t)m * K + k);
        float s_a;
        int32_t zp = 0;
        if (a->is_static) {
            s_a = a->input_scale;
            st = qp_quant_int8_static(ctx, xf, 1, (size_t)K, a->input_scale, a->input_zp, a->symmetric, xq);
        } else {
            st = qp_quant_int8_dynamic(ctx, xf, 1, (size_t)K, a->symmetric, xq, &s_a, &zp);
        }
        if (st != QP_OK) goto done;
        for (int n = 0; n < N; n++) {
            int64_t acc = 0;
            for (int k = 0; k < K; k++) acc += (int64_t)xq[k] * a->w[(size_t)n * K + k];
            if (acc > INT32_MAX || acc < INT32_MIN) {
                st = qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                                  "int32 accumulator overflow at row %d, column %d", m, n);
                goto done;
            }
            float s_b = a->w_per_channel ? a->w_scale[n] : a->w_scale[0];
            int32_t t = (int32_t)acc;
            if (asym) {
                /* int32 arithmetic as on the GPU (wrapping) */
                uint32_t corr = a->is_static ? (uint32_t)adj[n] : (uint32_t)zp * (uint32_t)adj[n];
                t = (int32_t)((uint32_t)t - corr);
            }
            float v;
            if (asym || a->bias) {
                /* docs/semantics.md §14: one fma; the azp epilogues add +0.0 without a bias */
                float b = a->bias ? qp_num_load(a->dtype, a->bias, (size_t)n) : 0.0f;
                v = fmaf(s_a, s_b * (float)t, b);
            } else {
                v = s_a * (s_b * (float)t);
            }
            qp_num_store(a->dtype, y, (size_t)m * N + n, v); /* cvt_out; F32: v itself */
        }
    }
done:
    free(xf); free(xq); free(adj);
    return st;
}
