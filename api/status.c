/* Status names, the vLLM exception each maps to, version, growable strings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* each name is its enumerator's spelling */
#define NAME(s) [s] = #s
static const char *const status_names[QP_STATUS_COUNT_] = {
    NAME(QP_OK),
    NAME(QP_ERR_INVALID_ARGUMENT),
    NAME(QP_ERR_IO),
    NAME(QP_ERR_PARSE),
    NAME(QP_ERR_UNSUPPORTED),
    NAME(QP_ERR_VALUE),
    NAME(QP_ERR_NOT_IMPLEMENTED),
    NAME(QP_ERR_CAPABILITY),
    NAME(QP_ERR_OUT_OF_MEMORY),
    NAME(QP_ERR_NOT_FOUND),
    NAME(QP_ERR_DEVICE),
    NAME(QP_ERR_INTERNAL),
};
#undef NAME

QP_API const char *qp_status_str(qp_status status) {
    if ((unsigned)status >= QP_STATUS_COUNT_) return "QP_ERR_UNKNOWN";
    return status_names[status];
}

QP_API const char *qp_status_exception(qp_status status) {
    switch (status) {
    case QP_ERR_VALUE: return "ValueError";
    case QP_ERR_NOT_IMPLEMENTED: return "NotImplementedError";
    case QP_ERR_CAPABILITY: return "RuntimeError";
    default: return NULL;
    }
}

#define QP_STR2(x) #x
#define QP_STR(x) QP_STR2(x)
QP_API const char *qp_version(void) {
    return QP_STR(QP_VERSION_MAJOR) "." QP_STR(QP_VERSION_MINOR) "." QP_STR(QP_VERSION_PATCH);
}

static void buf_reserve(qp_buf *b, size_t extra) {
    if (b->oom) return;
    if (b->len + extra + 1 <= b->cap) return;
    size_t nc = b->cap ? b->cap : 64;
    while (nc < b->len + extra + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) { b->oom = true; return; }
    b->p = np;
    b->cap = nc;
}

void qp_buf_putn(qp_buf *b, const char *s, size_t n) {
    buf_reserve(b, n);
    if (b->oom) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void qp_buf_puts(qp_buf *b, const char *s) { qp_buf_putn(b, s, strlen(s)); }

void qp_buf_printf(qp_buf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        buf_reserve(b, (size_t)n);
        if (!b->oom) {
            vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap2);
            b->len += (size_t)n;
        }
    }
    va_end(ap2);
}

void qp_buf_free(qp_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *qp_buf_str(const qp_buf *b) { return b->p && !b->oom ? b->p : ""; }
