/* A small immutable JSON tree built from jsmn tokens, with the Python
 * value semantics vLLM's config code relies on (truthiness, ==, deep_compare). */
#ifndef QP_JSON_H
#define QP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum qj_type { QJ_NULL, QJ_BOOL, QJ_INT, QJ_FLOAT, QJ_STRING, QJ_ARRAY, QJ_OBJECT } qj_type;

typedef struct qj {
    qj_type type;
    bool b;
    long long i;  /* QJ_INT (Python int, range-limited to int64)   */
    double d;     /* QJ_FLOAT, and QJ_INT converted                 */
    char *s;      /* QJ_STRING (NUL-terminated UTF-8)               */
    size_t slen;
    size_t n;          /* items of an array / object                */
    char **keys;       /* object keys, insertion order              */
    struct qj **items;
    /* objects of QJ_HASH_MIN keys or more: an open-addressing table of
     * item index + 1 (0: empty), hcap a power of two >= 2n, so qj_get and
     * the parser's duplicate-key rule are O(1) (checkpoint headers and
     * shard indexes hold 10^5 keys) */
    uint32_t *hidx;
    size_t hcap;
} qj;

#define QJ_HASH_MIN 16

typedef struct qj_doc qj_doc;

#define QJ_MAX_DEPTH 128
#define QJ_MAX_BYTES ((size_t)256 << 20)

/* Parses `len` bytes. On failure returns NULL and writes a message with the
 * byte offset into `err`. */
qj_doc *qj_parse(const char *text, size_t len, char *err, size_t errcap);
/* The same, refusing more than max_values values (0: no limit) before
 * building anything: bounds the tree's memory for files of tiny values. */
qj_doc *qj_parse_bounded(const char *text, size_t len, size_t max_values, char *err, size_t errcap);
/* The bound of config files (config.json, model.safetensors.index.json):
 * one value per 8 bytes beyond the first 65,536, about 13x the file. */
#define QJ_CONFIG_MAX_VALUES(len) ((len) / 8 + 65536)
void qj_free(qj_doc *doc);
const qj *qj_root(const qj_doc *doc);
/* Sets an object member to null in place (vLLM's config mutations). */
void qj_set_null(qj *v);

const qj *qj_get(const qj *obj, const char *key);        /* NULL: missing or not an object */
bool qj_truthy(const qj *v);                              /* Python bool(); missing → False  */
bool qj_is_true(const qj *v);                             /* `is True`                       */
bool qj_str_eq(const qj *v, const char *s);               /* == "s"                          */
bool qj_int_eq(const qj *v, long long x);                 /* == x (ints, floats, bools)      */
bool qj_is_null(const qj *v);                             /* missing or null                 */
bool qj_deep_compare(const qj *a, const qj *b);           /* docs/semantics.md §3 (latest)   */
const char *qj_type_name(const qj *v);                    /* Python type name                */

#endif
