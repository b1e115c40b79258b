#define _GNU_SOURCE /* memmem */
/* Name matching as vLLM does it: Python fnmatch, Python `re.match` through
 * PCRE2, exclude sets (docs/semantics.md §2), packed-module shard names (docs/semantics.md §3). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <fnmatch.h>
#include <pcre2.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Python's fnmatch on POSIX: case-sensitive, no escapes ('\' is literal),
 * '*' matches '/' and a leading '.' too — glibc fnmatch with FNM_NOESCAPE. */
bool qp_fnmatch(const char *pattern, const char *name) {
    if (!strpbrk(pattern, "?[")) return qp_star_glob(pattern, name);
    return fnmatch(pattern, name, FNM_NOESCAPE) == 0;
}

uint64_t qp_bigram_mask(const char *s, size_t n) {
    uint64_t m = 0;
    for (size_t i = 0; i + 1 < n; i++)
        m |= 1ULL << (((unsigned char)s[i] * 31u + (unsigned char)s[i + 1]) & 63u);
    return m;
}

/* Globs made of literals and '*' only (nearly every real pattern): the
 * first segment is a prefix, the last a suffix, the middle ones are found
 * leftmost in order — exact for '*'-only patterns and much faster than
 * fnmatch's backtracking at 100k names x 300 patterns. */
bool qp_star_glob(const char *p, const char *s) {
    const char *star = strchr(p, '*');
    if (!star) return !strcmp(p, s);
    size_t n = strlen(s), head = (size_t)(star - p);
    if (n < head || memcmp(p, s, head)) return false;
    const char *last = strrchr(p, '*');
    size_t tail = strlen(last + 1);
    if (n - head < tail || memcmp(s + n - tail, last + 1, tail)) return false;
    const char *cur = s + head, *end = s + n - tail;
    const char *seg = star + 1;
    while (seg < last + 1) {
        const char *next = strchr(seg, '*');
        size_t len = (size_t)(next - seg);
        if (len) {
            const char *hit = memmem(cur, (size_t)(end - cur), seg, len);
            if (!hit) return false;
            cur = hit + len;
        }
        seg = next + 1;
    }
    return true;
}

struct qp_regex {
    pcre2_code *code;
};

/* Python `re` spellings PCRE2 reads differently: `\Z` is Python's end of
 * string (PCRE2 `\z`). Everything else used by real configs (lookahead,
 * alternation, non-capturing and named groups) is the same. */
static char *python_to_pcre2(const char *p) {
    size_t n = strlen(p);
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\' && i + 1 < n) {
            o[j++] = p[i++];
            o[j++] = p[i] == 'Z' ? 'z' : p[i];
        } else {
            o[j++] = p[i];
        }
    }
    o[j] = 0;
    return o;
}

qp_regex *qp_regex_compile(const char *pattern, char *err, size_t errcap) {
    char *conv = python_to_pcre2(pattern);
    if (!conv) { snprintf(err, errcap, "out of memory"); return NULL; }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)conv, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
    free(conv);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        snprintf(err, errcap, "invalid regular expression '%s': %s at offset %zu", pattern,
                 (const char *)msg, (size_t)eo);
        return NULL;
    }
    /* JIT is an optimisation only: a failure leaves the interpreter. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    qp_regex *re = malloc(sizeof *re);
    if (!re) { pcre2_code_free(code); snprintf(err, errcap, "out of memory"); return NULL; }
    re->code = code;
    return re;
}

bool qp_regex_match(const qp_regex *re, const char *name) {
    /* Match data per call keeps a compiled config shareable across threads. */
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return false;
    int rc = pcre2_match(re->code, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, PCRE2_ANCHORED, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

void qp_regex_free(qp_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

/* -- name sets ------------------------------------------------------------ */

struct qp_nameset {
    const char **exact;   /* open-addressed hash table of exact entries */
    size_t cap;
    qp_regex **res;
    size_t n_res;
    const char *const *items;
    size_t n_items;
};

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void set_insert(qp_nameset *s, const char *k) {
    size_t i = hash_str(k) & (s->cap - 1);
    while (s->exact[i]) {
        if (!strcmp(s->exact[i], k)) return;
        i = (i + 1) & (s->cap - 1);
    }
    s->exact[i] = k;
}

static bool set_has(const qp_nameset *s, const char *k) {
    if (!s->cap) return false;
    size_t i = hash_str(k) & (s->cap - 1);
    while (s->exact[i]) {
        if (!strcmp(s->exact[i], k)) return true;
        i = (i + 1) & (s->cap - 1);
    }
    return false;
}

qp_nameset *qp_nameset_create(const char *const *items, size_t n, bool regex_prefix,
                              size_t *bad_index, char *err, size_t errcap) {
    qp_nameset *s = calloc(1, sizeof *s);
    if (!s) { snprintf(err, errcap, "out of memory"); return NULL; }
    s->items = items;
    s->n_items = n;
    s->cap = 16;
    while (s->cap < n * 2) s->cap *= 2;
    s->exact = calloc(s->cap, sizeof *s->exact);
    s->res = calloc(n ? n : 1, sizeof *s->res);
    if (!s->exact || !s->res) { qp_nameset_free(s); snprintf(err, errcap, "out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) {
        if (regex_prefix && !strncmp(items[i], "re:", 3)) {
            qp_regex *re = qp_regex_compile(items[i] + 3, err, errcap);
            if (!re) {
                if (bad_index) *bad_index = i;
                qp_nameset_free(s);
                return NULL;
            }
            s->res[s->n_res++] = re;
        } else {
            set_insert(s, items[i]);
        }
    }
    return s;
}

bool qp_nameset_match(const qp_nameset *s, const char *name) {
    if (!s) return false;
    if (set_has(s, name)) return true;
    for (size_t i = 0; i < s->n_res; i++)
        if (qp_regex_match(s->res[i], name)) return true;
    return false;
}

bool qp_nameset_has_exact(const qp_nameset *s, const char *name) { return s && set_has(s, name); }

bool qp_nameset_match_contains(const qp_nameset *s, const char *name) {
    if (!s) return false;
    for (size_t i = 0; i < s->n_res; i++)
        if (qp_regex_match(s->res[i], name)) return true;
    size_t m = strlen(name);
    for (size_t i = 0; i < s->n_items; i++) {
        const char *t = s->items[i];
        if (!strncmp(t, "re:", 3)) continue;
        size_t n = strlen(t);
        for (size_t j = 0; n <= m && j + n <= m; j++) {
            size_t k = 0;
            while (k < n && tolower((unsigned char)name[j + k]) == tolower((unsigned char)t[k])) k++;
            if (k == n) return true;
        }
    }
    return false;
}

bool qp_nameset_has_child(const qp_nameset *s, const char *name) {
    if (!s) return false;
    if (set_has(s, name)) return true;
    size_t n = strlen(name);
    for (size_t i = 0; i < s->n_items; i++) {
        const char *t = s->items[i];
        if (!strncmp(t, "re:", 3)) continue;
        if (!strncmp(t, name, n) && t[n] == '.') return true;
    }
    return false;
}

void qp_nameset_free(qp_nameset *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_res; i++) qp_regex_free(s->res[i]);
    free(s->res);
    free(s->exact);
    free(s);
}

/* -- packed modules -------------------------------------------------------- */

const qp_packed_module *qp_packed_find(const qp_packed_map *m, const char *layer,
                                       const char **proj_out) {
    const char *dot = strrchr(layer, '.');
    const char *proj = dot ? dot + 1 : layer; /* layer_name.split(".")[-1] */
    if (proj_out) *proj_out = proj;
    for (size_t i = 0; i < m->n; i++)
        if (m->mods[i].fused && !strcmp(m->mods[i].fused, proj)) return &m->mods[i];
    return NULL;
}

/* Python str.replace(from, to): every non-overlapping occurrence, left to
 * right (docs/semantics.md §2: "model.qkv_proj_x.qkv_proj" rewrites both). */
char *qp_str_replace_all(const char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), count = 0;
    if (fl == 0) return strdup(s); /* not reachable: proj is never empty */
    for (const char *p = strstr(s, from); p; p = strstr(p + fl, from)) count++;
    char *o = malloc(strlen(s) - count * fl + count * tl + 1);
    if (!o) return NULL;
    char *w = o;
    const char *p = s;
    for (const char *q = strstr(p, from); q; q = strstr(p, from)) {
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        memcpy(w, to, tl);
        w += tl;
        p = q + fl;
    }
    strcpy(w, p);
    return o;
}
