/* Internal: the qp_qweights container and the per-family weight quantizers
 * (not installed). */
#ifndef QP_QWEIGHTS_H
#define QP_QWEIGHTS_H

#include "internal.h"

#define QP_QW_MAX 8

typedef struct qp_qw_tensor {
    char name[32];
    qp_dtype dtype;
    int ndim;
    int64_t shape[4];
    void *data;
    size_t bytes;
} qp_qw_tensor;

struct qp_qweights {
    size_t n;
    qp_qw_tensor t[QP_QW_MAX];
};

/* One layer being quantized: the input, the options and the error target. */
typedef struct qp_qw_job {
    qp_context *ctx;
    const qp_scheme *scheme;
    const float *w; /* [N][K] */
    int N, K;
    const qp_quantize_options *opts;
    qp_qweights *out;
} qp_qw_job;

/* Appends a zeroed tensor of `ndim` dims (shape from the variadic ints) and
 * returns its data, or NULL (error recorded) when out of memory. */
void *qp_qw_add(qp_qw_job *j, const char *name, qp_dtype dtype, int ndim, ...);
/* Bytes per element of a stored dtype (U8 for packed data). */
size_t qp_qw_elem_bytes(qp_dtype d);

/* Quark-layout scales (qp_quantize_options.scale_dtype): appends tensor
 * `name` of n elements in the scale dtype (fp32 by default). */
void *qp_qw_add_scale(qp_qw_job *j, const char *name, int n);
/* Stores scale s as element i of such a tensor and returns the value the
 * codes must be made from (s rounded to the scale dtype); NAN (error
 * recorded) when it overflows that dtype. */
float qp_qw_put_scale(qp_qw_job *j, void *arr, size_t i, float s);

/* Static activation scales from the calibration data or input_absmax:
 * absmax, and for asymmetric int8 the range (min <= 0 <= max). */
qp_status qp_qw_calib_absmax(qp_qw_job *j, float *amax);
qp_status qp_qw_calib_range(qp_qw_job *j, float *mn, float *mx);

/* Families (quantize_weights_8bit.c, quantize_weights_4bit.c). */
qp_status qp_qw_int8(qp_qw_job *j);
qp_status qp_qw_fp8(qp_qw_job *j);      /* W8A8-FP8, per-block, HF fp8 */
qp_status qp_qw_w4a16(qp_qw_job *j);
qp_status qp_qw_mx(qp_qw_job *j);       /* OCP-MX and W4A8-MXFP4-FP8 */
qp_status qp_qw_nvfp4(qp_qw_job *j);
qp_status qp_qw_qqq(qp_qw_job *j);
/* compressed-tensors schemes: `quantize` (the kind's quantizer) into a
 * Quark layout, rewritten as llm-compressor writes it (api/quantize_weights_ct.c). */
qp_status qp_qw_ct(qp_qw_job *j, qp_status (*quantize)(qp_qw_job *));

#endif
