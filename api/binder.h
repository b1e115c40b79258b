/* The binders' shared toolkit (binder.c): a layer's checkpoint tensors with
 * which of them a binder used, and the checks and conversions every
 * per-scheme binder (bind_*.c) applies to them, so that a message names the
 * layer, the tensor and the rule the same way for every scheme. */
#ifndef QP_BINDER_H
#define QP_BINDER_H
#include <stdbool.h>

#include "registry.h"
#include "scheme_table.h"

struct qp_binder {
    qp_context *ctx;
    const char *layer;
    const qp_tensor *t;
    size_t n;
    bool *used; /* per tensor: a binder asked for it */
};

qp_lin_desc_store *qp_lin_desc_store_new(void);
/* Keeps `p` alive as long as the qp_lin_desc (freed with the store); NULL
 * when p is NULL or the store is full (p is freed then). */
void *qp_binder_keep(qp_lin_desc_store *s, void *p);

size_t qp_tensor_count(const qp_tensor *t);  /* elements */
bool qp_dtype_is_float(qp_dtype d);           /* f32, f16 or bf16 */
void qp_binder_shape_str(const qp_tensor *t, char *out, size_t cap);

/* QP_ERR_INVALID_ARGUMENT naming the layer and `tensor`. */
qp_status qp_binder_fail(const qp_binder *b, const char *tensor, const char *fmt, const char *detail);
qp_status qp_binder_oom(const qp_binder *b);
/* The tensor called `name` (marked used); a required one missing, one given
 * twice, or one without data is an error. */
qp_status qp_binder_find(const qp_binder *b, const char *name, bool required, const qp_tensor **out);
/* dtype check plus an element count; `want` 0 skips the count. */
qp_status qp_binder_expect(const qp_binder *b, const qp_tensor *t, qp_dtype dt, size_t want, const char *rule);
/* A float tensor converted into `dt` as torch's copy_ into a parameter of
 * that dtype makes it; `accepts` says what the message asks for. */
qp_status qp_binder_convert(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                            const char *rule, const char *accepts, const void **out);
/* A float tensor as fp32 values (vLLM's fp32 scale parameters). */
qp_status qp_binder_widen(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, size_t want, const char *rule,
                          const float **out);
/* A float tensor in the params dtype `dt` (weights, biases, group scales). */
qp_status qp_binder_to_params(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *t, qp_dtype dt, size_t want,
                              const char *rule, const void **out);
/* Per-shard or per-tensor scales -> one per row (convert_to_channelwise). */
qp_status qp_binder_channelwise(const qp_binder *b, qp_lin_desc_store *st, const qp_tensor *ws, const float *v, int N,
                                const qp_linear_options *o, const float **out, int *per_channel);
/* The largest of a scalar-per-shard tensor (the max over fused shards). */
qp_status qp_binder_max_scalar(const qp_binder *b, qp_lin_desc_store *st, const char *name, float *out);
/* NVFP4's fp4 codes `wname` [N, K/2] and e4m3 block scales weight_scale
 * [N, K/16], K a multiple of 16 (QuarkNVFP4 / CompressedTensorsW4A4Fp4). */
qp_status qp_bind_nvfp4_tensors(const qp_binder *b, const qp_lin_desc *d, const char *wname, const qp_tensor **w,
                                const qp_tensor **ws);
/* The same, refused unless finite and > 0 ("<name> must be finite and > 0"). */
qp_status qp_binder_positive_scalar(const qp_binder *b, qp_lin_desc_store *st, const char *name, float *out);
/* The optional `bias`, in act_dtype. */
qp_status qp_binder_bias(const qp_binder *b, qp_lin_desc_store *st, qp_lin_desc *d);
#endif
