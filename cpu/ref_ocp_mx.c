/* Reference OCP-MX linear (QuarkOCP_MX with the emulation kernel,
 * docs/semantics.md §5-§7): W = dequant(weight, weight_scale) in x.dtype, x' = qdq(x) per
 * the activation key, y = F.linear(x', W, bias) -- products summed in double
 * with the bias, one rounding to x.dtype (cuBLAS sums in fp32 in an order of
 * its own, so other backends are judged with bounds). */
#include <math.h>
#include <stdlib.h>

#include "ref_args.h"

#define MX_BLOCK 32 /* OCP_MX_BLOCK_SIZE, docs/semantics.md §5 */

/* One weight row, dequantized to x.dtype (docs/semantics.md §6):
 *  fp4: Quark's dq_mxfp4, value * scale multiplied in x.dtype (hmul) with
 *       the kernel's saturating e8m0 -> fp16 conversion;
 *  fp6: dequant_mxfp6, scale = 2**(e-127) computed in x.dtype (fp16
 *       overflows to inf, underflows to 0), product in fp32, cast;
 *  fp8: docs/semantics.md §5 does not describe QuarkW8A8Mxfp8's dequant; qport takes the
 *       exact fp32 product value * 2^(e-127) and casts (255 -> NaN). */
static void dequant_row(qp_dtype d, qp_dtype w, const uint8_t *codes, const uint8_t *scales, int K, float *out) {
    for (int k = 0; k < K; k++) {
        uint8_t e = scales[k / MX_BLOCK];
        float v = qp_format_decode(w, codes[k]);
        float r;
        if (w == QP_DTYPE_F4_E2M1)
            r = v * qp_num_e8m0_hmul_scale(d, e);
        else if (w == QP_DTYPE_F8_E4M3FN)
            r = e == 255 ? NAN : (float)ldexp((double)v, (int)e - 127);
        else
            r = v * qp_num_round(d, ldexpf(1.0f, (int)e - 127));
        out[k] = qp_num_round(d, r);
    }
}

QP_API qp_status qp_ref_ocp_mx_forward(qp_context *ctx, const qp_ref_ocp_mx_args *a, void *y) {
    qp_status st = QP_REF_CHECK_ARGS(ctx, "qp_ref_ocp_mx_forward", a, y, a->weight && a->weight_scale);
    if (st != QP_OK) return st;
    st = qp_ocp_mx_check_pair(ctx, a->w_elem, a->act);
    if (st != QP_OK) return st;
    int M = a->M, K = a->K, N = a->N, R = a->scale_rows <= 0 ? 1 : a->scale_rows;
    if (K % MX_BLOCK) /* QuarkOCP_MX.create_weights (docs/semantics.md §7) */
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX "
                            "group size 32", K);
    if (R > 1 && a->w_elem != QP_DTYPE_F8_E4M3FN) /* docs/semantics.md §5: per_block only for unpacked dtypes */
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL,
                            "scale_rows %d > 1 needs mxfp8_e4m3 weights (per_block)", R);
    qp_dtype d = a->dtype, w = a->w_elem, ae = qp_ocp_mx_act_elem(a->act);
    /* packed row width (docs/semantics.md §5): fp4 K/2, fp6 3K/4 (K % 32 == 0 makes both whole), fp8 K */
    size_t rowb = w == QP_DTYPE_F4_E2M1 ? (size_t)K / 2 : w == QP_DTYPE_F8_E4M3FN ? (size_t)K : (size_t)K * 3 / 4;
    size_t nk = (size_t)N * K;
    float *wd = malloc(sizeof(float) * nk), *xr = malloc(sizeof(float) * (size_t)K),
          *xd = malloc(sizeof(float) * (size_t)K);
    uint8_t *codes = malloc((size_t)K), *sc = malloc((size_t)K / MX_BLOCK);
    if (!wd || !xr || !xd || !codes || !sc) {
        st = qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
        goto done;
    }
    for (int n = 0; n < N; n++) {
        const uint8_t *row = a->weight + (size_t)n * rowb;
        if (w == QP_DTYPE_F4_E2M1) st = qp_unpack_fp4(row, (size_t)K, codes);
        else if (w == QP_DTYPE_F8_E4M3FN) { for (int k = 0; k < K; k++) codes[k] = row[k]; }
        else st = qp_unpack_fp6(row, (size_t)K, codes);
        if (st != QP_OK) { st = qp_error_set(ctx, st, NULL, "weight", NULL, "cannot unpack row %d", n); goto done; }
        dequant_row(d, w, codes, a->weight_scale + (size_t)(n / R) * (K / MX_BLOCK), K, wd + (size_t)n * K);
    }
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < K; k++) xr[k] = qp_num_load(d, a->x, (size_t)m * K + k);
        if (ae == QP_DTYPE_NONE) {
            for (int k = 0; k < K; k++) xd[k] = xr[k];
        } else {
            /* qdq (docs/semantics.md §6): the even scale of the block max, elements
             * x / 2^e rounded to the format, back as value * 2^e, the result
             * in x.dtype. The fp16 kernel's x / scale is exact wherever the
             * element rounding can see it; qport keeps 2^e exact where the
             * kernel's fp16 scale would flush (blocks below ~2^-22), as
             * docs/semantics.md §6 advises for zero blocks (the python even_round reference). */
            st = qp_quant_mx(ctx, ae, xr, 1, (size_t)K, codes, sc);
            if (st == QP_OK) st = qp_dequant_mx(ctx, ae, codes, sc, 1, (size_t)K, xd);
            if (st != QP_OK) goto done;
            for (int k = 0; k < K; k++) xd[k] = qp_num_round(d, xd[k]);
        }
        for (int n = 0; n < N; n++) {
            double acc = a->bias ? qp_num_load(d, a->bias, (size_t)n) : 0.0;
            const float *wr = wd + (size_t)n * K;
            for (int k = 0; k < K; k++) acc += (double)xd[k] * wr[k];
            qp_num_store(d, y, (size_t)m * N + n, (float)acc);
        }
    }
done:
    free(wd); free(xr); free(xd); free(codes); free(sc);
    return st;
}
