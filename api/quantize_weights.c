/* Weight quantization for every scheme: checks, calibration of
 * static activation scales, and dispatch to the per-family quantizers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qweights.h"
#include "scheme_table.h"

/* Static activation scales (docs/semantics.md §15, §16, §7, §8 store them; how they are
 * calibrated is Quark's business, not vLLM's): the absmax of the
 * calibration activations, or the caller's assumed `input_absmax`. */
qp_status qp_qw_calib_absmax(qp_qw_job *j, float *amax) {
    float mn, mx;
    qp_status st = qp_qw_calib_range(j, &mn, &mx);
    if (st != QP_OK) return st;
    *amax = fmaxf(-mn, mx);
    if (*amax == 0.0f)
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "input_scale", NULL,
                            "the calibration activations are all zero: no static input scale can be derived");
    return QP_OK;
}

qp_status qp_qw_calib_range(qp_qw_job *j, float *mn, float *mx) {
    const qp_quantize_options *o = j->opts;
    if (o->calib && o->calib_rows) {
        /* min/max observers keep 0 in range so that 0 is exactly representable */
        float lo = 0.0f, hi = 0.0f;
        size_t n = o->calib_rows * (size_t)j->K;
        for (size_t i = 0; i < n; i++) {
            float v = o->calib[i];
            if (!isfinite(v))
                return qp_error_set(j->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "calib", NULL,
                                    "calibration activation [%zu][%zu] is %s; static input scales need finite data",
                                    i / (size_t)j->K, i % (size_t)j->K, isnan(v) ? "NaN" : "infinite");
            lo = fminf(lo, v);
            hi = fmaxf(hi, v);
        }
        *mn = lo;
        *mx = hi;
        return QP_OK;
    }
    float a = o->input_absmax;
    if (!(a > 0.0f) || isinf(a))
        return qp_error_set(j->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_absmax", NULL,
                            "input_absmax must be finite and > 0 when no calibration data is given (got %g)", (double)a);
    *mn = -a;
    *mx = a;
    return QP_OK;
}

QP_API qp_status qp_quantize_weights(qp_context *ctx, const qp_scheme *scheme, const float *w, int N, int K,
                                     const qp_quantize_options *opts, qp_qweights **out) {
    if (out) *out = NULL;
    if (!scheme || !w || !out)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "NULL scheme, weight or output");
    if (N <= 0 || K <= 0)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL, "shape [%d][%d] must be positive", N, K);
    if (qp_check_mnk(ctx, "qp_quantize_weights", 0, K, N)) return QP_ERR_INVALID_ARGUMENT;
    qp_quantize_options def;
    qp_quantize_options_init(&def);
    if (opts) { /* fields past an older caller's struct_size keep their defaults */
        size_t n = opts->struct_size < sizeof def ? opts->struct_size : sizeof def;
        if (n < offsetof(qp_quantize_options, input_absmax) + sizeof def.input_absmax)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "opts", NULL,
                                "qp_quantize_options.struct_size %zu is too small (use qp_quantize_options_init)",
                                opts->struct_size);
        memcpy(&def, opts, n);
        def.struct_size = sizeof def;
    }
    opts = &def;
    if (opts->scale_dtype != QP_DTYPE_NONE && opts->scale_dtype != QP_DTYPE_F32 && opts->scale_dtype != QP_DTYPE_F16 &&
        opts->scale_dtype != QP_DTYPE_BF16)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "scale_dtype", NULL,
                            "scale_dtype must be f32, f16 or bf16, got %s", qp_dtype_name(opts->scale_dtype));
    if (opts->params_dtype != QP_DTYPE_F16 && opts->params_dtype != QP_DTYPE_BF16)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "params_dtype", NULL,
                            "params_dtype must be f16 or bf16, got %s", qp_dtype_name(opts->params_dtype));
    for (size_t i = 0; i < (size_t)N * (size_t)K; i++)
        if (!isfinite(w[i]))
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight", NULL,
                                "weight [%zu][%zu] is %s; checkpoint weights must be finite", i / (size_t)K,
                                i % (size_t)K, isnan(w[i]) ? "NaN" : "infinite");
    qp_qweights *q = calloc(1, sizeof *q);
    if (!q) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
    qp_qw_job j = {ctx, scheme, w, N, K, opts, q};
    qp_status (*quantize)(qp_qw_job *) = qp_scheme_row_of(scheme->kind)->quantize;
    /* compressed-tensors: the same arithmetic, llm-compressor's layout */
    qp_status st = quantize && qp_scheme_is_ct(scheme) ? qp_qw_ct(&j, quantize)
                 : quantize ? quantize(&j)
                            : qp_error_set(ctx, QP_ERR_UNSUPPORTED, NULL, "weight", NULL,
                                           "scheme %s has no quantized weights", qp_scheme_kind_name(scheme->kind));
    if (st != QP_OK) { qp_qweights_destroy(q); return st; }
    *out = q;
    return QP_OK;
}
