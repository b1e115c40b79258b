/* One row per scheme kind: the single place that says what a kind is and
 * which pieces implement it (docs/contributing.md, "Adding a scheme").
 *
 * A kind's pieces are its resolver branch (resolve_quark.c / resolve_other.c
 * produce the kind), its binder (checkpoint tensors -> the qp_lin_desc
 * payload of its family), its weight quantizer (qp_quantize_weights, which
 * `qport quantize`, the conformance cases and the tests build layers with),
 * its MoE rule, and one entry in every backend's kind table (api/backend.h
 * qp_backend_kind): the registry refuses a plugin whose table leaves out a
 * linear kind, so a backend cannot silently miss a new one. */
#ifndef QP_SCHEME_TABLE_H
#define QP_SCHEME_TABLE_H
#include "backend.h"
#include "qweights.h"

typedef struct qp_binder qp_binder; /* linear_desc.c: the layer's tensors and which are used */
typedef struct qp_lin_desc_store qp_lin_desc_store;
typedef qp_status (*qp_lin_bind_fn)(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o,
                                    qp_lin_desc *d);

typedef struct qp_scheme_row {
    const char *name;          /* qp_scheme_kind_name                        */
    qp_lin_family family;      /* the qp_lin_desc payload its binder fills   */
    int exact;                 /* integer path: bit-exact on every backend   */
    qp_lin_bind_fn bind;       /* NULL: not a linear layer qport runs        */
    qp_status (*quantize)(qp_qw_job *j); /* NULL: no quantized weights       */
    const char *moe_refusal;   /* NULL: fused MoE runs its experts           */
    const char *tensors;       /* the checkpoint tensors, for docs and help  */
    const char *classes;       /* the vLLM classes the resolver answers with
                                * for this kind (linear scheme, MoE method) */
    qp_lin_bind_fn bind_ct;    /* the compressed-tensors layout's binder
                                * (bind_ct.c); NULL: not bound from it      */
    int lowered;               /* the binders hand backends a dense layer
                                * (kind UNQUANTIZED): no backend entry      */
} qp_scheme_row;

/* The row of `kind`; an out-of-range kind gets the row of QP_SCHEME_NONE. */
const qp_scheme_row *qp_scheme_row_of(qp_scheme_kind kind);
const char *qp_lin_family_name(qp_lin_family f);

/* The binders (linear_desc.c), one per row that runs as a linear layer. */
qp_status qp_bind_int8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_fp8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_qqq(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_w4a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ocp_mx(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_w4a8_mxfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_nvfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_unquantized(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
/* compressed-tensors (bind_ct.c) */
qp_status qp_bind_ct_nvfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ct_mxfp4(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ct_w4a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ct_wna16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ct_w8a16_fp8(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
qp_status qp_bind_ct_nvfp4_a16(const qp_binder *b, qp_lin_desc_store *st, const qp_linear_options *o, qp_lin_desc *d);
/* A kind every backend's table must name: it has a binder and is not
 * lowered to a dense layer. */
int qp_scheme_row_runs(const qp_scheme_row *r);

/* The registry's load-time check of a plugin's kind table: QP_OK, or
 * QP_ERR_UNSUPPORTED with what is missing or wrong in why[cap]. */
qp_status qp_backend_kinds_check(const qp_backend_ops *ops, char *why, size_t cap);
/* The backend's entry for `kind`, or NULL (a kind that is not linear). */
const qp_backend_kind *qp_backend_kind_of(const qp_backend_ops *ops, qp_scheme_kind kind);
#endif
