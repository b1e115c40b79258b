/* JSON parsing: jsmn tokenizes, this file builds an owned tree and checks
 * what jsmn leaves to its caller (escapes, number grammar, depth). */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSMN_STATIC
#define JSMN_STRICT
/* parent links: without them jsmn finds a comma's container by scanning
 * back over every token so far, quadratic in an object's size */
#define JSMN_PARENT_LINKS
#include <jsmn.h>

struct qj_doc {
    qj *root;
    /* the tree lives in zeroed blocks, freed together: no per-node malloc
     * header or bookkeeping (memory a small multiple of the text) */
    void **blocks;
    size_t n_blocks, cap_blocks;
    char *cur;
    size_t left;
};

#define QJ_BLOCK ((size_t)1 << 20)

static void *doc_alloc(qj_doc *d, size_t sz) {
    sz = (sz + 15) & ~(size_t)15;
    if (!sz) sz = 16;
    if (sz > d->left) {
        size_t bs = sz > QJ_BLOCK / 4 ? sz : QJ_BLOCK; /* a big one alone, the current block kept */
        if (d->n_blocks == d->cap_blocks) {
            size_t nc = d->cap_blocks ? d->cap_blocks * 2 : 16;
            void **nb = realloc(d->blocks, nc * sizeof *nb);
            if (!nb) return NULL;
            d->blocks = nb;
            d->cap_blocks = nc;
        }
        char *b = calloc(1, bs);
        if (!b) return NULL;
        d->blocks[d->n_blocks++] = b;
        if (bs != QJ_BLOCK) return b;
        d->cur = b;
        d->left = bs;
    }
    void *p = d->cur;
    d->cur += sz;
    d->left -= sz;
    return p;
}

typedef struct builder {
    qj_doc *doc;
    const char *text;
    jsmntok_t *tok;
    int ntok;
    int pos;
    char *err;
    size_t errcap;
} builder;

static bool fail(builder *b, int off, const char *what) {
    snprintf(b->err, b->errcap, "invalid JSON at byte %d: %s", off, what);
    return false;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_u16(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return false;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p[k]);
        if (h < 0) return false;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return true;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes a string token's escapes; JSON strings may not hold raw control
 * characters or NUL (a NUL would silently truncate C strings). */
static bool build_string(builder *b, const jsmntok_t *t, char **out, size_t *outlen) {
    const char *p = b->text + t->start, *end = b->text + t->end;
    char *o = doc_alloc(b->doc, (size_t)(end - p) + 1);
    if (!o) return fail(b, t->start, "out of memory");
    size_t n = 0;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) return fail(b, (int)(p - b->text), "control character in string");
        if (c != '\\') { o[n++] = (char)c; p++; continue; }
        p++;
        if (p >= end) return fail(b, (int)(p - b->text), "bad escape");
        char e = *p++;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (!read_u16(p, end, &cp)) return fail(b, (int)(p - b->text), "bad \\u escape");
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo;
                if (read_u16(p + 2, end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp == 0) return fail(b, (int)(p - b->text), "NUL in string");
            n += put_utf8(o + n, cp);
            break;
        }
        default: return fail(b, (int)(p - b->text), "bad escape");
        }
    }
    o[n] = 0;
    *out = o;
    *outlen = n;
    return true;
}

static bool build_primitive(builder *b, const jsmntok_t *t, qj *v) {
    const char *p = b->text + t->start;
    size_t n = (size_t)(t->end - t->start);
    if (n == 4 && !memcmp(p, "true", 4)) { v->type = QJ_BOOL; v->b = true; return true; }
    if (n == 5 && !memcmp(p, "false", 5)) { v->type = QJ_BOOL; v->b = false; return true; }
    if (n == 4 && !memcmp(p, "null", 4)) { v->type = QJ_NULL; return true; }
    /* number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    size_t i = 0;
    bool is_float = false;
    if (i < n && p[i] == '-') i++;
    if (i >= n) return fail(b, t->start, "bad number");
    if (p[i] == '0') i++;
    else if (p[i] >= '1' && p[i] <= '9') while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    else return fail(b, t->start, "bad literal");
    if (i < n && p[i] == '.') {
        is_float = true; i++;
        size_t s = i;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
        if (i == s) return fail(b, t->start, "bad number");
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        is_float = true; i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        size_t s = i;
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
        if (i == s) return fail(b, t->start, "bad number");
    }
    if (i != n) return fail(b, t->start, "bad literal");
    char tmp[64];
    char *heap = NULL;
    char *s = tmp;
    if (n >= sizeof tmp) {
        heap = malloc(n + 1);
        if (!heap) return fail(b, t->start, "out of memory");
        s = heap;
    }
    memcpy(s, p, n);
    s[n] = 0;
    if (!is_float) {
        errno = 0;
        long long x = strtoll(s, NULL, 10);
        if (errno != ERANGE) {
            v->type = QJ_INT;
            v->i = x;
            v->d = (double)x;
            free(heap);
            return true;
        }
        /* Python ints are unbounded; beyond int64 keep an approximate float. */
    }
    v->type = QJ_FLOAT;
    v->d = strtod(s, NULL);
    free(heap);
    return true;
}

/* FNV-1a: the object keys' hash (QJ_HASH_MIN keys and more). */
static size_t key_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static qj *build(builder *b, int depth) {
    if (b->pos >= b->ntok) { fail(b, 0, "unexpected end"); return NULL; }
    if (depth > QJ_MAX_DEPTH) { fail(b, b->tok[b->pos].start, "nesting deeper than 128 levels"); return NULL; }
    const jsmntok_t *t = &b->tok[b->pos++];
    qj *v = doc_alloc(b->doc, sizeof *v);
    if (!v) { fail(b, t->start, "out of memory"); return NULL; }
    switch (t->type) {
    case JSMN_STRING:
        v->type = QJ_STRING;
        if (!build_string(b, t, &v->s, &v->slen)) return NULL;
        return v;
    case JSMN_PRIMITIVE:
        return build_primitive(b, t, v) ? v : NULL;
    case JSMN_ARRAY:
    case JSMN_OBJECT: {
        bool obj = t->type == JSMN_OBJECT;
        v->type = obj ? QJ_OBJECT : QJ_ARRAY;
        size_t n = (size_t)t->size;
        v->items = doc_alloc(b->doc, n * sizeof *v->items);
        if (obj) v->keys = doc_alloc(b->doc, n * sizeof *v->keys);
        if (!v->items || (obj && !v->keys)) { fail(b, t->start, "out of memory"); return NULL; }
        if (obj && n >= QJ_HASH_MIN && n < UINT32_MAX / 4) {
            for (v->hcap = 32; v->hcap < 2 * n;) v->hcap *= 2;
            v->hidx = doc_alloc(b->doc, v->hcap * sizeof *v->hidx);
            if (!v->hidx) { fail(b, t->start, "out of memory"); return NULL; }
        }
        for (size_t k = 0; k < n; k++) {
            char *key = NULL;
            if (obj) {
                if (b->pos >= b->ntok || b->tok[b->pos].type != JSMN_STRING) {
                    fail(b, t->start, "object key is not a string");
                    return NULL;
                }
                size_t kl;
                if (!build_string(b, &b->tok[b->pos++], &key, &kl)) return NULL;
            }
            qj *item = build(b, depth + 1);
            if (!item) return NULL;
            if (obj) {
                /* Python dicts keep the last value of a duplicated key, at the
                 * position where the key first appeared. */
                size_t j = v->n;
                if (v->hidx) {
                    size_t h = key_hash(key) & (v->hcap - 1);
                    while (v->hidx[h] && strcmp(v->keys[v->hidx[h] - 1], key)) h = (h + 1) & (v->hcap - 1);
                    if (v->hidx[h]) j = v->hidx[h] - 1;
                    else v->hidx[h] = (uint32_t)(v->n + 1);
                } else {
                    for (j = 0; j < v->n; j++)
                        if (!strcmp(v->keys[j], key)) break;
                }
                if (j < v->n) { v->items[j] = item; continue; }
                v->keys[v->n] = key;
            }
            v->items[v->n++] = item;
        }
        return v;
    }
    default:
        fail(b, t->start, "unknown token");
        return NULL;
    }
}

/* A validating pass over the text before jsmn sees it: jsmn (even strict)
 * misses a missing comma and only says "unexpected character", so syntax
 * errors are found here and reported with their line, column and what was
 * expected there ("expected ',' or '}' after an object member, got '"'").
 * Iterative, with an explicit stack: nesting past QJ_MAX_DEPTH is refused
 * here too (jsmn's bracket matching is quadratic in the depth). */
typedef struct sx {
    const char *t;
    size_t n, i;
    char *err;
    size_t cap;
} sx;

static bool sx_fail(sx *s, const char *expected) {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < s->i && k < s->n; k++) {
        if (s->t[k] == '\n') { line++; col = 1; }
        else col++;
    }
    char got[48];
    unsigned char c = s->i < s->n ? (unsigned char)s->t[s->i] : 0;
    if (s->i >= s->n) snprintf(got, sizeof got, "the end of the text (truncated input)");
    else if (c < 0x20 || c >= 0x7f) snprintf(got, sizeof got, "byte 0x%02x", c);
    else snprintf(got, sizeof got, "'%c'", c);
    snprintf(s->err, s->cap, "invalid JSON at line %zu, column %zu (byte %zu): expected %s, got %s", line, col, s->i, expected,
             got);
    return false;
}

static void sx_ws(sx *s) {
    while (s->i < s->n && (s->t[s->i] == ' ' || s->t[s->i] == '\t' || s->t[s->i] == '\n' || s->t[s->i] == '\r')) s->i++;
}

static bool sx_string(sx *s) {
    s->i++; /* the opening quote */
    for (;;) {
        if (s->i >= s->n) return sx_fail(s, "a closing '\"' of the string");
        unsigned char c = (unsigned char)s->t[s->i];
        if (c == '"') { s->i++; return true; }
        if (c < 0x20) return sx_fail(s, "a string character (control characters must be escaped)");
        if (c != '\\') { s->i++; continue; }
        s->i++;
        if (s->i >= s->n) return sx_fail(s, "an escape character after '\\'");
        c = (unsigned char)s->t[s->i];
        if (strchr("\"\\/bfnrt", c) && c) { s->i++; continue; }
        if (c != 'u') return sx_fail(s, "an escape character after '\\' (one of \" \\ / b f n r t u)");
        s->i++;
        for (int k = 0; k < 4; k++, s->i++)
            if (s->i >= s->n || hexval(s->t[s->i]) < 0) return sx_fail(s, "four hex digits after '\\u'");
    }
}

static bool digits(sx *s, const char *what) {
    if (s->i >= s->n || s->t[s->i] < '0' || s->t[s->i] > '9') return sx_fail(s, what);
    while (s->i < s->n && s->t[s->i] >= '0' && s->t[s->i] <= '9') s->i++;
    return true;
}

/* One value, or the opening of a container (*opened then set). */
static bool sx_value_start(sx *s, char *stack, int *depth, bool *opened) {
    *opened = false;
    if (s->i >= s->n) return sx_fail(s, "a value");
    char c = s->t[s->i];
    if (c == '{' || c == '[') {
        if (*depth >= QJ_MAX_DEPTH) return sx_fail(s, "at most 128 levels of nesting (nesting deeper than 128 levels)");
        stack[(*depth)++] = c;
        s->i++;
        *opened = true;
        return true;
    }
    if (c == '"') return sx_string(s);
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') s->i++;
        if (s->i < s->n && s->t[s->i] == '0') {
            s->i++;
            if (s->i < s->n && s->t[s->i] >= '0' && s->t[s->i] <= '9') return sx_fail(s, "no digit after a leading 0 (bad number)");
        } else if (!digits(s, "a digit (bad number)")) {
            return false;
        }
        if (s->i < s->n && s->t[s->i] == '.') { s->i++; if (!digits(s, "a digit after '.' (bad number)")) return false; }
        if (s->i < s->n && (s->t[s->i] == 'e' || s->t[s->i] == 'E')) {
            s->i++;
            if (s->i < s->n && (s->t[s->i] == '+' || s->t[s->i] == '-')) s->i++;
            if (!digits(s, "a digit in the exponent (bad number)")) return false;
        }
        return true;
    }
    static const char *const lits[3] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if (s->n - s->i >= l && !memcmp(s->t + s->i, lits[k], l)) { s->i += l; return true; }
    }
    return sx_fail(s, "a value (an object, array, string, number, true, false or null)");
}

/* An object key and its ':', whitespace after; `want` is what the message
 * asks for where no key starts. */
static bool sx_key(sx *s, const char *want) {
    if (s->i >= s->n || s->t[s->i] != '"') return sx_fail(s, want);
    if (!sx_string(s)) return false;
    sx_ws(s);
    if (s->i >= s->n || s->t[s->i] != ':') return sx_fail(s, "':' after the object key");
    s->i++;
    sx_ws(s);
    return true;
}

static bool syntax_ok(const char *t, size_t n, char *err, size_t cap) {
    sx s = {t, n, 0, err, cap};
    char stack[QJ_MAX_DEPTH + 1];
    int depth = 0;
    bool opened;
    sx_ws(&s);
    if (!sx_value_start(&s, stack, &depth, &opened)) return false;
    for (;;) {
        sx_ws(&s);
        if (opened) {
            /* just opened: a first member, or the container closes at once */
            char close = stack[depth - 1] == '{' ? '}' : ']';
            if (s.i < n && s.t[s.i] == close) { s.i++; depth--; opened = false; continue; }
            if (stack[depth - 1] == '{' && !sx_key(&s, "a string key or '}'")) return false;
            if (!sx_value_start(&s, stack, &depth, &opened)) return false;
            continue;
        }
        /* after a complete value */
        if (!depth) {
            if (s.i < n) return sx_fail(&s, "the end of the text (extra data after the top-level value)");
            return true;
        }
        bool obj = stack[depth - 1] == '{';
        if (s.i < n && s.t[s.i] == (obj ? '}' : ']')) { s.i++; depth--; continue; }
        if (s.i >= n || s.t[s.i] != ',')
            return sx_fail(&s, obj ? "',' or '}' after an object member" : "',' or ']' after an array element");
        s.i++;
        sx_ws(&s);
        if (obj) {
            if (!sx_key(&s, "a string key after ',' (no trailing commas in JSON)")) return false;
        } else if (s.i < n && s.t[s.i] == ']') {
            return sx_fail(&s, "a value after ',' (no trailing commas in JSON)");
        }
        if (!sx_value_start(&s, stack, &depth, &opened)) return false;
    }
}

qj_doc *qj_parse(const char *text, size_t len, char *err, size_t errcap) {
    return qj_parse_bounded(text, len, 0, err, errcap);
}

qj_doc *qj_parse_bounded(const char *text, size_t len, size_t max_values, char *err, size_t errcap) {
    if (!text) { snprintf(err, errcap, "no JSON text"); return NULL; }
    if (len > QJ_MAX_BYTES) { snprintf(err, errcap, "JSON text larger than %zu bytes", QJ_MAX_BYTES); return NULL; }
    if (len == 0) { snprintf(err, errcap, "empty JSON text"); return NULL; }
    if (memchr(text, 0, len)) { snprintf(err, errcap, "NUL byte in JSON text"); return NULL; }
    if (!syntax_ok(text, len, err, errcap)) return NULL;
    jsmn_parser p;
    jsmn_init(&p);
    int ntok = jsmn_parse(&p, text, len, NULL, 0);
    if (ntok < 0) {
        snprintf(err, errcap, "invalid JSON: %s",
                 ntok == JSMN_ERROR_PART ? "truncated input" : "unexpected character");
        return NULL;
    }
    if (ntok == 0) { snprintf(err, errcap, "empty JSON text"); return NULL; }
    /* the tree costs ~100 bytes a value: counted before anything is
     * allocated, so a file of tiny values cannot take gigabytes */
    if (max_values && (size_t)ntok > max_values) {
        snprintf(err, errcap, "%d JSON values in %zu bytes: more than the %zu qport parses in a file this size "
                 "(a config holds a few per line)", ntok, len, max_values);
        return NULL;
    }
    jsmntok_t *tok = malloc((size_t)ntok * sizeof *tok);
    if (!tok) { snprintf(err, errcap, "out of memory"); return NULL; }
    jsmn_init(&p);
    int got = jsmn_parse(&p, text, len, tok, (unsigned)ntok);
    qj_doc *doc = calloc(1, sizeof *doc);
    builder b = {doc, text, tok, got, 0, err, errcap};
    if (!doc || got != ntok) {
        /* jsmn only notices unclosed containers when it stores tokens */
        snprintf(err, errcap, "invalid JSON: %s",
                 !doc ? "out of memory" : got == JSMN_ERROR_PART ? "truncated input" : "unexpected character");
        free(tok);
        qj_free(doc);
        return NULL;
    }
    doc->root = build(&b, 0);
    if (doc->root && b.pos != ntok) {
        /* jsmn accepts several top-level values; JSON allows one. */
        fail(&b, tok[b.pos].start, "extra data after the top-level value");
        doc->root = NULL;
    }
    free(tok);
    if (!doc->root) { qj_free(doc); return NULL; }
    return doc;
}

void qj_free(qj_doc *doc) {
    if (!doc) return;
    for (size_t i = 0; i < doc->n_blocks; i++) free(doc->blocks[i]);
    free(doc->blocks);
    free(doc);
}

const qj *qj_root(const qj_doc *doc) { return doc ? doc->root : NULL; }

void qj_set_null(qj *v) {
    if (!v) return;
    v->type = QJ_NULL;
    v->n = 0;
}

const qj *qj_get(const qj *obj, const char *key) {
    if (!obj || obj->type != QJ_OBJECT) return NULL;
    if (obj->hidx) {
        for (size_t h = key_hash(key) & (obj->hcap - 1); obj->hidx[h]; h = (h + 1) & (obj->hcap - 1))
            if (!strcmp(obj->keys[obj->hidx[h] - 1], key)) return obj->items[obj->hidx[h] - 1];
        return NULL;
    }
    for (size_t i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

bool qj_truthy(const qj *v) {
    if (!v) return false;
    switch (v->type) {
    case QJ_NULL: return false;
    case QJ_BOOL: return v->b;
    case QJ_INT: return v->i != 0;
    case QJ_FLOAT: return v->d != 0.0;
    case QJ_STRING: return v->slen > 0;
    default: return v->n > 0;
    }
}

bool qj_is_true(const qj *v) { return v && v->type == QJ_BOOL && v->b; }
bool qj_is_null(const qj *v) { return !v || v->type == QJ_NULL; }

bool qj_str_eq(const qj *v, const char *s) {
    return v && v->type == QJ_STRING && !strcmp(v->s, s);
}

bool qj_int_eq(const qj *v, long long x) {
    if (!v) return false;
    if (v->type == QJ_INT) return v->i == x;
    if (v->type == QJ_FLOAT) return v->d == (double)x;
    if (v->type == QJ_BOOL) return (long long)v->b == x; /* Python: True == 1 */
    return false;
}

bool qj_deep_compare(const qj *a, const qj *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return false; /* type(a) is type(b) */
    switch (a->type) {
    case QJ_NULL: return true;
    case QJ_BOOL: return a->b == b->b;
    case QJ_INT: return a->i == b->i;
    case QJ_FLOAT: return a->d == b->d;
    case QJ_STRING: return a->slen == b->slen && !memcmp(a->s, b->s, a->slen);
    case QJ_ARRAY:
        /* Latest vLLM walks len(a) by index: a longer `b` compares equal on
         * the shared prefix; a shorter `b` would raise IndexError in Python,
         * which qport treats as "different". */
        if (b->n < a->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!qj_deep_compare(a->items[i], b->items[i])) return false;
        return true;
    case QJ_OBJECT:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            const qj *bv = qj_get(b, a->keys[i]);
            if (!bv || !qj_deep_compare(a->items[i], bv)) return false;
        }
        return true;
    }
    return false;
}

const char *qj_type_name(const qj *v) {
    if (!v) return "NoneType";
    static const char *names[] = {"NoneType", "bool", "int", "float", "str", "list", "dict"};
    return names[v->type];
}
