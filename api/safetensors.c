/* safetensors files (huggingface/safetensors format): an 8-byte
 * little-endian header length, a JSON header, then the data. Read through
 * mmap; every offset, shape and size is validated before any tensor is
 * handed out, so a hostile file is an error, never a read out of bounds.
 * Rules (as the reference implementation enforces them): header length at
 * most 100 MB and inside the file; tensors' byte ranges [begin, end) are
 * ordered, do not overlap, leave no hole, and end exactly at the end of the
 * file; end - begin == dtype size x prod(shape), computed without overflow. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define ST_MAX_HEADER ((uint64_t)100 << 20)
#define ST_MAX_DIMS 8

typedef struct st_entry {
    const char *name;
    const char *dtype_str;
    qp_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

struct qp_safetensors {
    qp_context *ctx;
    char *path;
    const uint8_t *map;
    size_t map_len;
    int mapped;
    qj_doc *doc;
    st_entry *t;
    size_t n;
    size_t *by_name;   /* entry indices sorted by name: find is a binary search */
    const qj *meta;
    const uint8_t *data;
    uint64_t data_len;
    int fd;             /* kept open: bound bytes are read with pread */
};

static const struct { const char *name; qp_dtype dt; unsigned bytes; } st_dtypes[] = {
    {"F32", QP_DTYPE_F32, 4}, {"F16", QP_DTYPE_F16, 2}, {"BF16", QP_DTYPE_BF16, 2}, {"I8", QP_DTYPE_I8, 1},
    {"U8", QP_DTYPE_U8, 1}, {"I32", QP_DTYPE_I32, 4}, {"F8_E4M3", QP_DTYPE_F8_E4M3FN, 1},
    {"F8_E5M2", QP_DTYPE_F8_E5M2, 1}, {"F8_E8M0", QP_DTYPE_E8M0, 1}, {"I64", QP_DTYPE_I64, 8},
    /* stored and size-checked, but no qport dtype */
    {"F64", QP_DTYPE_NONE, 8}, {"U64", QP_DTYPE_NONE, 8}, {"I16", QP_DTYPE_NONE, 2},
    {"U16", QP_DTYPE_NONE, 2}, {"U32", QP_DTYPE_NONE, 4}, {"BOOL", QP_DTYPE_NONE, 1},
};

static qp_status st_fail(qp_safetensors *f, const char *key, const char *fmt, ...) QP_ATTR_PRINTF(3, 4);
static qp_status st_fail(qp_safetensors *f, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qp_error_setv(f->ctx, QP_ERR_PARSE, f->path, key, NULL, fmt, ap);
    va_end(ap);
    return QP_ERR_PARSE;
}

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Sorts idx[0..n) by t[idx[i]].name (a merge sort: qsort has no context). */
static void sort_by_name(const st_entry *t, size_t *idx, size_t n) {
    size_t *tmp = n > 1 ? malloc(sizeof *tmp * n) : NULL;
    if (!tmp) { /* tiny, or out of memory: insertion sort */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && strcmp(t[idx[j - 1]].name, t[idx[j]].name) > 0; j--) {
                size_t x = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = x;
            }
        return;
    }
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, o = lo;
            while (a < mid && b < hi) tmp[o++] = strcmp(t[idx[a]].name, t[idx[b]].name) <= 0 ? idx[a++] : idx[b++];
            while (a < mid) tmp[o++] = idx[a++];
            while (b < hi) tmp[o++] = idx[b++];
        }
        memcpy(idx, tmp, sizeof *idx * n);
    }
    free(tmp);
}

/* The entry called `name`, or NULL: a binary search of the name index. */
static const st_entry *lookup(const qp_safetensors *f, const char *name) {
    size_t lo = 0, hi = f->by_name ? f->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->t[f->by_name[mid]].name, name);
        if (!c) return &f->t[f->by_name[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static bool as_u64(const qj *v, uint64_t *out) {
    if (!v || v->type != QJ_INT || v->i < 0) return false;
    *out = (uint64_t)v->i;
    return true;
}

static qp_status parse(qp_safetensors *f) {
    if (f->map_len < 8) return st_fail(f, NULL, "file of %zu bytes is shorter than the 8-byte header length", f->map_len);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | f->map[i];
    if (hl > ST_MAX_HEADER) return st_fail(f, NULL, "header length %llu exceeds the 100 MB limit", (unsigned long long)hl);
    if (hl > f->map_len - 8)
        return st_fail(f, NULL, "header length %llu runs past the end of the file (%zu bytes)", (unsigned long long)hl, f->map_len);
    if (hl < 2 || f->map[8] != '{') return st_fail(f, NULL, "the header is not a JSON object");
    char err[256];
    f->doc = qj_parse((const char *)f->map + 8, (size_t)hl, err, sizeof err);
    if (!f->doc) return st_fail(f, NULL, "header JSON: %s", err);
    const qj *root = qj_root(f->doc);
    if (root->type != QJ_OBJECT) return st_fail(f, NULL, "the header is not a JSON object");
    f->data = f->map + 8 + hl;
    f->data_len = f->map_len - 8 - hl;
    f->t = calloc(root->n ? root->n : 1, sizeof *f->t);
    if (!f->t) return qp_error_set(f->ctx, QP_ERR_OUT_OF_MEMORY, f->path, NULL, NULL, "out of memory");
    for (size_t i = 0; i < root->n; i++) {
        const char *key = root->keys[i];
        const qj *v = root->items[i];
        if (!strcmp(key, "__metadata__")) {
            if (v->type != QJ_OBJECT) return st_fail(f, key, "__metadata__ must be an object of strings");
            for (size_t j = 0; j < v->n; j++)
                if (v->items[j]->type != QJ_STRING) return st_fail(f, key, "__metadata__['%s'] is not a string", v->keys[j]);
            f->meta = v;
            continue;
        }
        if (v->type != QJ_OBJECT) return st_fail(f, key, "tensor entry is not an object");
        st_entry *e = &f->t[f->n];
        e->name = key;
        const qj *dt = qj_get(v, "dtype"), *sh = qj_get(v, "shape"), *off = qj_get(v, "data_offsets");
        if (!dt || dt->type != QJ_STRING) return st_fail(f, key, "missing or non-string 'dtype'");
        unsigned esize = 0;
        for (size_t d = 0; d < sizeof st_dtypes / sizeof *st_dtypes; d++)
            if (!strcmp(dt->s, st_dtypes[d].name)) { e->dtype = st_dtypes[d].dt; esize = st_dtypes[d].bytes; }
        if (!esize) return st_fail(f, key, "unknown dtype '%s'", dt->s);
        e->dtype_str = dt->s;
        if (!sh || sh->type != QJ_ARRAY) return st_fail(f, key, "missing or non-list 'shape'");
        if (sh->n > ST_MAX_DIMS) return st_fail(f, key, "%zu dimensions (at most %d)", sh->n, ST_MAX_DIMS);
        uint64_t bytes = esize;
        for (size_t d = 0; d < sh->n; d++) {
            uint64_t x;
            if (!as_u64(sh->items[d], &x) || x > (uint64_t)INT64_MAX) return st_fail(f, key, "shape[%zu] is not a non-negative integer", d);
            e->shape[d] = (int64_t)x;
            if (x && bytes > UINT64_MAX / x) return st_fail(f, key, "shape overflows 64 bits");
            bytes *= x;
        }
        e->ndim = (int)sh->n;
        if (!off || off->type != QJ_ARRAY || off->n != 2 || !as_u64(off->items[0], &e->begin) || !as_u64(off->items[1], &e->end))
            return st_fail(f, key, "'data_offsets' must be two non-negative integers");
        if (e->begin > e->end) return st_fail(f, key, "data_offsets [%llu, %llu] are reversed", (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->end > f->data_len)
            return st_fail(f, key, "data_offsets end %llu is past the data (%llu bytes)", (unsigned long long)e->end, (unsigned long long)f->data_len);
        if (e->end - e->begin != bytes)
            return st_fail(f, key, "%llu bytes in data_offsets, but dtype %s x shape needs %llu",
                           (unsigned long long)(e->end - e->begin), dt->s, (unsigned long long)bytes);
        f->n++;
    }
    st_entry *sorted = malloc(sizeof *sorted * (f->n ? f->n : 1));
    if (!sorted) return qp_error_set(f->ctx, QP_ERR_OUT_OF_MEMORY, f->path, NULL, NULL, "out of memory");
    memcpy(sorted, f->t, sizeof *sorted * f->n);
    qsort(sorted, f->n, sizeof *sorted, cmp_begin);
    uint64_t at = 0;
    qp_status st = QP_OK;
    for (size_t i = 0; i < f->n && !st; i++) {
        if (sorted[i].begin < at) st = st_fail(f, sorted[i].name, "data overlaps the previous tensor");
        else if (sorted[i].begin > at) st = st_fail(f, sorted[i].name, "a hole of %llu bytes before this tensor's data", (unsigned long long)(sorted[i].begin - at));
        at = sorted[i].end;
    }
    if (!st && at != f->data_len)
        st = st_fail(f, NULL, "%llu bytes after the last tensor are not described by the header", (unsigned long long)(f->data_len - at));
    free(sorted);
    if (st) return st;
    /* the name index (names are unique: the JSON keeps one value a key) */
    f->by_name = malloc(sizeof *f->by_name * (f->n ? f->n : 1));
    if (!f->by_name) return qp_error_set(f->ctx, QP_ERR_OUT_OF_MEMORY, f->path, NULL, NULL, "out of memory");
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = i;
    sort_by_name(f->t, f->by_name, f->n);
    return QP_OK;
}

static qp_status open_common(qp_safetensors *f, qp_safetensors **out) {
    qp_status st = parse(f);
    if (st) { qp_safetensors_close(f); return st; }
    *out = f;
    return QP_OK;
}

QP_API qp_status qp_safetensors_open(qp_context *ctx, const char *path, qp_safetensors **out) {
    if (!ctx || !path || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    /* a FIFO or device is refused before open can block (file_io.c) */
    int fd;
    size_t size;
    qp_status ost = qp_open_regular(ctx, path, &fd, &size);
    if (ost) return ost;
    qp_safetensors *f = calloc(1, sizeof *f);
    if (!f) { close(fd); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, path, NULL, NULL, "out of memory"); }
    f->ctx = ctx;
    f->path = strdup(path);
    f->map_len = size;
    f->fd = fd;
    if (f->map_len) {
        void *m = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            qp_status st = qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "mmap: %s", strerror(errno));
            close(fd);
            free(f->path); free(f);
            return st;
        }
        f->map = m;
        f->mapped = 1;
    }
    return open_common(f, out);
}

QP_API qp_status qp_safetensors_open_buffer(qp_context *ctx, const char *name, const void *data, size_t len,
                                            qp_safetensors **out) {
    if (!ctx || (!data && len) || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_safetensors *f = calloc(1, sizeof *f);
    if (!f) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, name, NULL, NULL, "out of memory");
    f->ctx = ctx;
    f->path = strdup(name ? name : "<buffer>");
    f->map = data;
    f->map_len = len;
    f->fd = -1;
    return open_common(f, out);
}

QP_API void qp_safetensors_close(qp_safetensors *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->map, f->map_len);
    if (f->fd >= 0) close(f->fd);
    qj_free(f->doc);
    free(f->t);
    free(f->by_name);
    free(f->path);
    free(f);
}

QP_API size_t qp_safetensors_count(const qp_safetensors *f) { return f ? f->n : 0; }

static qp_status entry_tensor(const qp_safetensors *f, const st_entry *e, qp_tensor *out) {
    if (e->ndim > QP_TENSOR_MAX_DIMS)
        return qp_error_set(f->ctx, QP_ERR_UNSUPPORTED, f->path, e->name, NULL, "%d dimensions (qport takes at most %d)",
                            e->ndim, QP_TENSOR_MAX_DIMS);
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    for (int d = 0; d < e->ndim; d++) out->shape[d] = e->shape[d];
    out->data = f->data + e->begin;
    return QP_OK;
}

QP_API qp_status qp_safetensors_get(const qp_safetensors *f, size_t i, qp_tensor *out, const char **dtype_name) {
    if (!f || !out || i >= f->n) return QP_ERR_INVALID_ARGUMENT;
    if (dtype_name) *dtype_name = f->t[i].dtype_str;
    return entry_tensor(f, &f->t[i], out);
}

QP_API qp_status qp_safetensors_find(const qp_safetensors *f, const char *name, qp_tensor *out) {
    if (!f || !name || !out) return QP_ERR_INVALID_ARGUMENT;
    const st_entry *e = lookup(f, name);
    if (e) return entry_tensor(f, e, out);
    return qp_error_set(f->ctx, QP_ERR_NOT_FOUND, f->path, name, NULL, "no tensor '%s'", name);
}

/* The first position of the name index whose name is >= prefix. */
static size_t lower_bound(const qp_safetensors *f, const char *prefix) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(f->t[f->by_name[mid]].name, prefix) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

qp_status qp_safetensors_prefixed(const qp_safetensors *f, const char *prefix, size_t **idx, size_t *n) {
    *idx = NULL;
    *n = 0;
    if (!f || !prefix || !f->by_name) return QP_OK;
    size_t lo = lower_bound(f, prefix), hi = lo, len = strlen(prefix);
    while (hi < f->n && !strncmp(f->t[f->by_name[hi]].name, prefix, len)) hi++;
    if (hi == lo) return QP_OK;
    *idx = malloc(sizeof **idx * (hi - lo));
    if (!*idx) return qp_error_set(f->ctx, QP_ERR_OUT_OF_MEMORY, f->path, prefix, NULL, "out of memory");
    memcpy(*idx, f->by_name + lo, sizeof **idx * (hi - lo));
    qsort(*idx, hi - lo, sizeof **idx, cmp_size); /* header order */
    *n = hi - lo;
    return QP_OK;
}

int qp_safetensors_has_prefix(const qp_safetensors *f, const char *prefix) {
    if (!f || !prefix || !f->by_name) return 0;
    size_t lo = lower_bound(f, prefix), len = strlen(prefix);
    for (; lo < f->n && !strncmp(f->t[f->by_name[lo]].name, prefix, len); lo++)
        if (f->t[f->by_name[lo]].ndim <= QP_TENSOR_MAX_DIMS) return 1;
    return 0;
}

int qp_safetensors_lookup(const qp_safetensors *f, const char *name, qp_tensor *out, qp_status *st) {
    const st_entry *e = f && name ? lookup(f, name) : NULL;
    if (!e) return 0;
    *st = entry_tensor(f, e, out);
    return 1;
}

QP_API const char *qp_safetensors_metadata(const qp_safetensors *f, const char *key) {
    const qj *v = f && key ? qj_get(f->meta, key) : NULL;
    return v ? v->s : NULL;
}

/* A mapped file that shrank after it was opened would SIGBUS on the
 * first read of a page past its new end: the bytes a bind copies are read
 * with pread instead, and a short read is an I/O error naming the file.
 * 0: `src` is not inside this file's mapping. */
int qp_safetensors_pread(const qp_safetensors *f, void *dst, const void *src, size_t n, qp_status *st) {
    const uint8_t *p = src;
    if (!f || !f->mapped || f->fd < 0 || p < f->map || p >= f->map + f->map_len) return 0;
    size_t off = (size_t)(p - f->map), got = 0;
    *st = QP_OK;
    if (n > f->map_len - off) n = f->map_len - off; /* callers copy within a tensor */
    while (got < n) {
        ssize_t r = pread(f->fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            struct stat sb;
            long long now = fstat(f->fd, &sb) ? -1 : (long long)sb.st_size;
            *st = qp_error_set(f->ctx, QP_ERR_IO, f->path, NULL, NULL,
                               r < 0 ? "read of %zu bytes at offset %zu failed (%s)"
                                     : "read of %zu bytes at offset %zu came short: the file changed after it was opened "
                                       "(%s; %zu bytes then, %lld now)",
                               n, off + got, r < 0 ? strerror(errno) : "truncated", f->map_len, now);
            return 1;
        }
        got += (size_t)r;
    }
    return 1;
}

/* QP_ERR_IO when the file is no longer the size it was opened with (the
 * mapped tensors handed out would fault). */
qp_status qp_safetensors_check(const qp_safetensors *f) {
    struct stat sb;
    if (!f || !f->mapped || f->fd < 0) return QP_OK;
    if (fstat(f->fd, &sb) || (size_t)sb.st_size != f->map_len)
        return qp_error_set(f->ctx, QP_ERR_IO, f->path, NULL, NULL,
                            "the file changed after it was opened (%zu bytes then, %lld now)", f->map_len,
                            (long long)sb.st_size);
    return QP_OK;
}

/* -- writing ------------------------------------------------------------- */

static const char *st_name(qp_dtype d) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (st_dtypes[i].dt == d && d != QP_DTYPE_NONE) return st_dtypes[i].name;
    return NULL;
}

static int cmp_name_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void json_escape(qp_buf *b, const char *s) {
    qp_buf_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { char e[3] = {'\\', (char)c, 0}; qp_buf_puts(b, e); }
        else if (c < 0x20) qp_buf_printf(b, "\\u%04x", c);
        else qp_buf_putn(b, (const char *)&c, 1);
    }
    qp_buf_puts(b, "\"");
}

QP_API qp_status qp_safetensors_write(qp_context *ctx, const char *path, const qp_tensor *t, size_t n,
                                      const char *const *meta, size_t n_meta) {
    if (!ctx || !path || (n && !t) || (n_meta && !meta)) return QP_ERR_INVALID_ARGUMENT;
    /* shapes a reader would refuse (negative or overflowing dims, a rank
     * past 4, no data) and names given twice are refused here */
    qp_status cs = qp_tensors_check(ctx, NULL, t, n, 0);
    if (cs) return cs;
    const char **names = malloc(sizeof *names * (n ? n : 1));
    if (!names) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, path, NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) names[i] = t[i].name;
    qsort(names, n, sizeof *names, cmp_name_ptr);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) {
            cs = qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, path, names[i], NULL, "tensor '%s' given twice", names[i]);
            free(names);
            return cs;
        }
    free(names);
    qp_buf h = {0};
    qp_buf_puts(&h, "{");
    if (n_meta) {
        qp_buf_puts(&h, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (i) qp_buf_puts(&h, ",");
            json_escape(&h, meta[2 * i]);
            qp_buf_puts(&h, ":");
            json_escape(&h, meta[2 * i + 1]);
        }
        qp_buf_puts(&h, "}");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *dn = st_name(t[i].dtype);
        size_t bytes = qp_tensor_bytes(&t[i]);
        if (!dn || !t[i].name || (!t[i].data && bytes) || (bytes == 0 && qp_format_bits(t[i].dtype) <= 0)) {
            qp_buf_free(&h);
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, path, t[i].name ? t[i].name : "(null)", NULL,
                                "cannot write a tensor of dtype %s", qp_dtype_name(t[i].dtype));
        }
        qp_buf_puts(&h, i || n_meta ? "," : "");
        json_escape(&h, t[i].name);
        qp_buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", dn);
        for (int d = 0; d < t[i].ndim; d++) qp_buf_printf(&h, d ? ",%lld" : "%lld", (long long)t[i].shape[d]);
        qp_buf_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    qp_buf_puts(&h, "}");
    while (!h.oom && h.len % 8) qp_buf_puts(&h, " "); /* data 8-byte aligned, as the reference writer does */
    if (h.oom) { qp_buf_free(&h); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, path, NULL, NULL, "out of memory"); }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "wb");
    if (!fp) { qp_buf_free(&h); return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "cannot create: %s", strerror(errno)); }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    bool ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(h.p, 1, h.len, fp) == h.len;
    for (size_t i = 0; ok && i < n; i++) {
        size_t bytes = qp_tensor_bytes(&t[i]);
        ok = !bytes || fwrite(t[i].data, 1, bytes, fp) == bytes;
    }
    ok = (fclose(fp) == 0) && ok;
    qp_buf_free(&h);
    if (!ok || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return qp_error_set(ctx, QP_ERR_IO, path, NULL, NULL, "write failed: %s", strerror(e));
    }
    return QP_OK;
}
