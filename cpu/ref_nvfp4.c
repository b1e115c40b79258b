/* Reference NVFP4 linear (QuarkNVFP4 with the emulation path, docs/semantics.md §8):
 * activations quantized per 16 elements with e4m3 block scales
 * (qp_quant_nvfp4) and dequantized to x.dtype, weights dequantized to
 * x.dtype, y = matmul(x', W^T) rounded to x.dtype, then + bias in x.dtype
 * (the emulation adds the bias after the matmul, two roundings). Products
 * are summed in double. */
#include <math.h>
#include <stdlib.h>

#include "ref_args.h"

#define NVFP4_BLOCK 16 /* docs/semantics.md §8 */

QP_API qp_status qp_ref_nvfp4_forward(qp_context *ctx, const qp_ref_nvfp4_args *a, void *y) {
    qp_status st = QP_REF_CHECK_ARGS(ctx, "qp_ref_nvfp4_forward", a, y, a->weight && a->weight_scale);
    if (st != QP_OK) return st;
    int M = a->M, K = a->K, N = a->N;
    if (K % NVFP4_BLOCK) /* QuarkNVFP4.create_weights (docs/semantics.md §8) */
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "Input size per partition (%d) must be divisible by group size (16)", K);
    if (a->input_global_scale_inv != 0.0f) {
        if (!(a->input_global_scale_inv > 0.0f) || isinf(a->input_global_scale_inv))
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_global_scale", NULL,
                                "the input global scale must be finite and > 0 (got %g)", (double)a->input_global_scale_inv);
    } else if (!(a->input_scale_2 > 0.0f) || isinf(a->input_scale_2))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_scale_2", NULL,
                            "the input global scale must be finite and > 0 (got %g)", (double)a->input_scale_2);
    if (isnan(a->weight_scale_2))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale_2", NULL, "weight_scale_2 is NaN");
    qp_dtype d = a->dtype;
    /* docs/semantics.md §8: input_global_scale_inv = 1 / input_global_scale (fp32), the
     * quantization multiplier g of §8 */
    const float g = a->input_global_scale_inv != 0.0f ? a->input_global_scale_inv : 1.0f / a->input_scale_2;
    int nb = K / NVFP4_BLOCK;
    size_t nk = (size_t)N * K;
    float *wd = malloc(sizeof(float) * nk), *xr = malloc(sizeof(float) * (size_t)K),
          *xd = malloc(sizeof(float) * (size_t)K);
    uint8_t *codes = malloc((size_t)K), *sf = malloc((size_t)nb);
    if (!wd || !xr || !xd || !codes || !sf) {
        st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
        goto done;
    }
    /* W[n,k] = e2m1(code) * (fp32(weight_scale) * weight_global_scale), the
     * block factor formed first as dequantize_to_dtype does, in fp32, then
     * cast to x.dtype */
    for (int n = 0; n < N; n++) {
        qp_unpack_fp4(a->weight + (size_t)n * (K / 2), (size_t)K, codes);
        for (int k = 0; k < K; k++) {
            float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, a->weight_scale[(size_t)n * nb + k / NVFP4_BLOCK]);
            wd[(size_t)n * K + k] = qp_num_round(d, qp_format_decode(QP_DTYPE_F4_E2M1, codes[k]) * (s * a->weight_scale_2));
        }
    }
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) xr[k] = qp_num_load(d, a->x, (size_t)m * K + k);
        st = qp_quant_nvfp4(ctx, xr, 1, (size_t)K, g, codes, sf);
        if (st != QP_OK) goto done;
        /* docs/semantics.md §8: x' = value(q) * (sf_f / g), in fp32, cast to x.dtype */
        for (int k = 0; k < K; k++) {
            float s = qp_format_decode(QP_DTYPE_F8_E4M3FN, sf[k / NVFP4_BLOCK]) / g;
            xd[k] = qp_num_round(d, qp_format_decode(QP_DTYPE_F4_E2M1, codes[k]) * s);
        }
        for (int n = 0; n < N; n++) {
            double acc = 0.0;
            const float *wr = wd + (size_t)n * K;
            for (int k = 0; k < K; k++) acc += (double)xd[k] * wr[k];
            float v = qp_num_round(d, (float)acc);
            if (a->bias) v = v + qp_num_load(d, a->bias, (size_t)n); /* out + bias in x.dtype */
            qp_num_store(d, y, (size_t)m * N + n, v);
        }
    }
done:
    free(wd); free(xr); free(xd); free(codes); free(sf);
    return st;
}
