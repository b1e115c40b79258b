/* Reference W4A8 MXFP4-FP8 linear (QuarkW4A8_MXFP4_FP8 emulation, docs/semantics.md §6,
 * §7): MXFP4 weights dequantized in the activation dtype, activations
 * fake-quantized to fp8 with the static per-tensor scale, the division and
 * the dequant multiply both rounded to the activation dtype. */
#include <math.h>
#include <stdlib.h>

#include "ref_args.h"

#define rnd qp_num_round

QP_API qp_status qp_ref_w4a8_mxfp4_fp8_forward(qp_context *ctx, const qp_ref_w4a8_mxfp4_args *a, void *y) {
    qp_status dst = QP_REF_CHECK_ARGS(ctx, "qp_ref_w4a8_mxfp4_fp8_forward", a, y, a->weight && a->weight_scale);
    if (dst != QP_OK) return dst;
    int K = a->K, N = a->N;
    if (K % 32)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "weight", NULL,
                            "OCP MX linear layer input size per partition of %d must be divisible by the OCP MX group size 32", K);
    qp_dtype d = a->dtype;
    float *w = malloc(sizeof(float) * (size_t)K * (size_t)N), *xd = malloc(sizeof(float) * (size_t)K);
    if (!w || !xd) { free(w); free(xd); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory"); }
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            uint8_t byte = a->weight[(size_t)n * (K / 2) + k / 2];
            uint8_t code = k % 2 ? byte >> 4 : byte & 0xF; /* element 2i in the low nibble */
            float s = qp_num_e8m0_hmul_scale(d, a->weight_scale[(size_t)n * (K / 32) + k / 32]);
            w[(size_t)n * K + k] = rnd(d, qp_format_decode(QP_DTYPE_F4_E2M1, code) * s); /* hmul */
        }
    for (int m = 0; m < a->M; m++) {
        for (int k = 0; k < K; k++) {
            float x = qp_num_load(d, a->x, (size_t)m * K + k);
            float t = fmaxf(-448.0f, fminf(rnd(d, x / a->input_scale), 448.0f)); /* x / s_in in x.dtype */
            float q = qp_format_decode(QP_DTYPE_F8_E4M3FN, qp_format_encode(QP_DTYPE_F8_E4M3FN, t));
            xd[k] = rnd(d, rnd(d, q) * a->input_scale);
        }
        for (int n = 0; n < N; n++) {
            double acc = a->bias ? qp_num_load(d, a->bias, (size_t)n) : 0.0;
            for (int k = 0; k < K; k++) acc += (double)xd[k] * w[(size_t)n * K + k];
            qp_num_store(d, y, (size_t)m * N + n, (float)acc);
        }
    }
    free(w);
    free(xd);
    return QP_OK;
}
