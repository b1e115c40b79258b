/* Python repr() of JSON values: vLLM formats config dicts into its error
 * messages with f-strings ("Weight config: {'dtype': 'int8', ...}"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void repr_str(qp_buf *b, const char *s, size_t n) {
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    qp_buf_putn(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == (unsigned char)q || c == '\\') { qp_buf_putn(b, "\\", 1); qp_buf_putn(b, s + i, 1); }
        else if (c == '\n') qp_buf_puts(b, "\\n");
        else if (c == '\r') qp_buf_puts(b, "\\r");
        else if (c == '\t') qp_buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) qp_buf_printf(b, "\\x%02x", c);
        else qp_buf_putn(b, s + i, 1);
    }
    qp_buf_putn(b, &q, 1);
}

/* Python's float repr: the shortest digits that round-trip, fixed notation
 * for decimal exponents in [-4, 16), scientific otherwise. */
static void repr_float(qp_buf *b, double d) {
    if (isnan(d)) { qp_buf_puts(b, "nan"); return; }
    if (isinf(d)) { qp_buf_puts(b, d < 0 ? "-inf" : "inf"); return; }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e = "[-]D.DDDDe[+-]XX" */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) qp_buf_puts(b, "-");
    if (exp10 >= 16 || exp10 < -4) {
        qp_buf_putn(b, digits, 1);
        if (nd > 1) { qp_buf_puts(b, "."); qp_buf_putn(b, digits + 1, nd - 1); }
        qp_buf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        qp_buf_puts(b, "0.");
        for (int i = -1; i > exp10; i--) qp_buf_puts(b, "0");
        qp_buf_putn(b, digits, nd);
    } else {
        size_t ip = (size_t)exp10 + 1;
        for (size_t i = 0; i < ip; i++) qp_buf_putn(b, i < nd ? digits + i : "0", 1);
        qp_buf_puts(b, ".");
        if (nd > ip) qp_buf_putn(b, digits + ip, nd - ip);
        else qp_buf_puts(b, "0");
    }
}

void qp_pyrepr(qp_buf *b, const qj *v) {
    if (!v) { qp_buf_puts(b, "None"); return; }
    switch (v->type) {
    case QJ_NULL: qp_buf_puts(b, "None"); break;
    case QJ_BOOL: qp_buf_puts(b, v->b ? "True" : "False"); break;
    case QJ_INT: qp_buf_printf(b, "%lld", v->i); break;
    case QJ_FLOAT: repr_float(b, v->d); break;
    case QJ_STRING: repr_str(b, v->s, v->slen); break;
    case QJ_ARRAY:
        qp_buf_puts(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) qp_buf_puts(b, ", ");
            qp_pyrepr(b, v->items[i]);
        }
        qp_buf_puts(b, "]");
        break;
    case QJ_OBJECT:
        qp_buf_puts(b, "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) qp_buf_puts(b, ", ");
            repr_str(b, v->keys[i], strlen(v->keys[i]));
            qp_buf_puts(b, ": ");
            qp_pyrepr(b, v->items[i]);
        }
        qp_buf_puts(b, "}");
        break;
    }
}
