/* Reference kernels of the layers around the quantized GEMMs: unquantized
 * linear, Quark's online input rotation, and the fp8 KV cache. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

QP_API qp_status qp_ref_unquantized_forward(qp_context *ctx, qp_dtype d, const void *x, int M, int K, int N,
                                            const void *w, const void *bias, void *y) {
    if (qp_check_mnk(ctx, "qp_ref_unquantized_forward", M, K, N)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !w || !y)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "NULL tensor or bad shape");
    qp_status st = qp_num_check_act_dtype(ctx, d);
    if (st) return st;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = bias ? qp_num_load(d, bias, (size_t)n) : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)qp_num_load(d, x, (size_t)m * K + k) * qp_num_load(d, w, (size_t)n * K + k);
            qp_num_store(d, y, (size_t)m * N + n, (float)acc);
        }
    return QP_OK;
}

QP_API float qp_rotation_norm(int r) { return r > 0 ? (float)(1.0 / sqrt((double)r)) : NAN; }

QP_API qp_status qp_ref_rotation_forward(qp_context *ctx, qp_dtype d, const void *x, int M, int K, const int8_t *H,
                                         int r, void *y) {
    if (qp_check_mnk(ctx, "qp_ref_rotation_forward", M, K, 1)) return QP_ERR_INVALID_ARGUMENT;
    if (r <= 0 || r > K)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation", NULL,
                            "K = %d is not a multiple of the rotation size %d", K, r);
    if (!x || !H || !y)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation", NULL, "NULL tensor or bad shape");
    qp_status st = qp_num_check_act_dtype(ctx, d);
    if (st) return st;
    if (K % r)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation", NULL,
                            "K = %d is not a multiple of the rotation size %d", K, r);
    for (size_t i = 0; i < (size_t)r * r; i++)
        if (H[i] != 1 && H[i] != -1)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_rotation", NULL,
                                "rotation entries must be +1 or -1 (entry %zu is %d)", i, H[i]);
    float c = qp_rotation_norm(r);
    float *row = malloc(sizeof(float) * (size_t)r);
    if (!row) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "input_rotation", NULL, "out of memory");
    for (int m = 0; m < M; m++)
        for (int b = 0; b < K / r; b++) {
            size_t base = (size_t)m * K + (size_t)b * r;
            for (int i = 0; i < r; i++) row[i] = qp_num_load(d, x, base + i);
            for (int j = 0; j < r; j++) {
                /* volatile: the fp32 partial sums in the order the contract fixes */
                volatile float s = 0.0f;
                for (int i = 0; i < r; i++) s = s + (H[(size_t)i * r + j] > 0 ? row[i] : -row[i]);
                qp_num_store(d, y, base + j, s * c);
            }
        }
    free(row);
    return QP_OK;
}

static qp_status kv_check(qp_context *ctx, qp_dtype d, const void *a, const void *b, size_t n, float scale) {
    if ((n && (!a || !b)))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "kv_cache", NULL, "NULL buffer");
    qp_status st = qp_num_check_act_dtype(ctx, d);
    if (st) return st;
    if (!(scale > 0.0f) || isinf(scale))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "k_scale", NULL,
                            "the KV-cache scale must be finite and > 0 (got %g)", (double)scale);
    return QP_OK;
}

QP_API qp_status qp_ref_kv_quantize(qp_context *ctx, qp_dtype d, const void *x, size_t n, float scale, uint8_t *q) {
    qp_status st = kv_check(ctx, d, x, q, n, scale);
    if (st) return st;
    for (size_t i = 0; i < n; i++)
        q[i] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, qp_num_load(d, x, i) / scale);
    return QP_OK;
}

QP_API qp_status qp_ref_kv_dequantize(qp_context *ctx, qp_dtype d, const uint8_t *q, size_t n, float scale, void *x) {
    qp_status st = kv_check(ctx, d, q, x, n, scale);
    if (st) return st;
    for (size_t i = 0; i < n; i++) qp_num_store(d, x, i, qp_format_decode(QP_DTYPE_F8_E4M3FN, q[i]) * scale);
    return QP_OK;
}
