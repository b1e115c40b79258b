/* The qp_qweights container: named checkpoint tensors a weight quantizer
 * made, and their accessors. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qweights.h"

size_t qp_qw_elem_bytes(qp_dtype d) {
    switch (d) {
    case QP_DTYPE_I64: return 8;
    case QP_DTYPE_F32: case QP_DTYPE_I32: return 4;
    case QP_DTYPE_F16: case QP_DTYPE_BF16: return 2;
    default: return 1;
    }
}

static qp_dtype scale_dtype(const qp_qw_job *j) {
    qp_dtype d = j->opts->scale_dtype;
    return d == QP_DTYPE_F16 || d == QP_DTYPE_BF16 ? d : QP_DTYPE_F32;
}

/* Quark writes a per-tensor scale as a 0-d tensor in the model dtype; the
 * fp32 default keeps qport's [1]. */
void *qp_qw_add_scale(qp_qw_job *j, const char *name, int n) {
    qp_dtype d = scale_dtype(j);
    if (d != QP_DTYPE_F32 && n == 1) return qp_qw_add(j, name, d, 0);
    return qp_qw_add(j, name, d, 1, n);
}

float qp_qw_put_scale(qp_qw_job *j, void *arr, size_t i, float s) {
    qp_dtype d = scale_dtype(j);
    if (d == QP_DTYPE_F32) { ((float *)arr)[i] = s; return s; }
    uint16_t b = (uint16_t)qp_format_encode(d, s);
    float v = qp_format_decode(d, b);
    if (isinf(v) && !isinf(s)) {
        qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "weight_scale", NULL, "scale %g overflows the scale dtype %s", (double)s,
                     qp_dtype_name(d));
        return NAN;
    }
    ((uint16_t *)arr)[i] = b;
    return v;
}

void *qp_qw_add(qp_qw_job *j, const char *name, qp_dtype dtype, int ndim, ...) {
    qp_qweights *q = j->out;
    if (q->n >= QP_QW_MAX || ndim < 0 || ndim > 4) {
        qp_error_set(j->ctx, QP_ERR_INTERNAL, NULL, name, NULL, "too many tensors or dims");
        return NULL;
    }
    qp_qw_tensor *t = &q->t[q->n];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    size_t count = 1;
    va_list ap;
    va_start(ap, ndim);
    for (int i = 0; i < ndim; i++) {
        int v = va_arg(ap, int);
        t->shape[i] = v;
        count *= (size_t)(v > 0 ? v : 0);
    }
    va_end(ap);
    t->bytes = count * qp_qw_elem_bytes(dtype);
    t->data = calloc(t->bytes ? t->bytes : 1, 1);
    if (!t->data) {
        qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, name, NULL, "out of memory");
        return NULL;
    }
    q->n++;
    return t->data;
}

QP_API void qp_quantize_options_init(qp_quantize_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->params_dtype = QP_DTYPE_F16;
    o->input_absmax = 1.0f;
}

QP_API size_t qp_qweights_count(const qp_qweights *q) { return q ? q->n : 0; }

static void view(const qp_qw_tensor *t, qp_tensor *out) {
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof out->shape);
    out->data = t->data;
}

QP_API qp_status qp_qweights_get(const qp_qweights *q, size_t i, qp_tensor *out) {
    if (!q || !out) return QP_ERR_INVALID_ARGUMENT;
    if (i >= q->n) return QP_ERR_NOT_FOUND;
    view(&q->t[i], out);
    return QP_OK;
}

QP_API qp_status qp_qweights_find(const qp_qweights *q, const char *name, qp_tensor *out) {
    if (!q || !name || !out) return QP_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < q->n; i++)
        if (!strcmp(q->t[i].name, name)) { view(&q->t[i], out); return QP_OK; }
    return QP_ERR_NOT_FOUND;
}

QP_API void qp_qweights_destroy(qp_qweights *q) {
    if (!q) return;
    for (size_t i = 0; i < q->n; i++) free(q->t[i].data);
    free(q);
}
