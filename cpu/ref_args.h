/* The checks every reference forward over a qp_ref_*_args struct starts
 * with, in one order: the shape (when the struct is there), the tensors the
 * forward cannot run without, the activation dtype. */
#ifndef QP_REF_ARGS_H
#define QP_REF_ARGS_H
#include "internal.h"

static inline qp_status qp_ref_check_args(qp_context *ctx, const char *fn, int has_args, int M, int K, int N,
                                          int have_tensors, qp_dtype dtype) {
    if (has_args && qp_check_mnk(ctx, fn, M, K, N)) return QP_ERR_INVALID_ARGUMENT;
    if (!have_tensors)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "NULL tensor or bad shape");
    return qp_num_check_act_dtype(ctx, dtype);
}

/* `have`: the struct's own required pointers (a->w && a->w_scale ...) */
#define QP_REF_CHECK_ARGS(ctx, fn, a, y, have)                                                                \
    qp_ref_check_args((ctx), (fn), (a) != NULL, (a) ? (a)->M : 0, (a) ? (a)->K : 1, (a) ? (a)->N : 1,      \
                      (a) && (y) && (a)->x && (have), (a) ? (a)->dtype : QP_DTYPE_NONE)
#endif
