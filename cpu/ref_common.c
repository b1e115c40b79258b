/* What the reference kernels share. */
#include "internal.h"

qp_status qp_ref_check_act_dtype(qp_context *ctx, qp_dtype d) {
    if (d == QP_DTYPE_F16 || d == QP_DTYPE_BF16) return QP_OK;
    return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "activations must be fp16 or bf16, got %s",
                        qp_dtype_name(d));
}
