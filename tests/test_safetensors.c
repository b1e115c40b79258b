/* safetensors: round trip, and every class of malformed header is a
 * QP_ERR_PARSE naming the problem (never a crash or an out-of-bounds read:
 * the ASan build runs this too). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static qp_context *ctx;

/* A file image: 8-byte length, header, `data_len` data bytes. */
static size_t image(const char *header, size_t data_len, uint8_t *out) {
    size_t hl = strlen(header);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, header, hl);
    memset(out + 8 + hl, 0x5A, data_len);
    return 8 + hl + data_len;
}

static void expect_bad(const char *header, size_t data_len, const char *msg, int line) {
    static uint8_t buf[1 << 16];
    size_t n = image(header, data_len, buf);
    qp_safetensors *f = NULL;
    qp_status st = qp_safetensors_open_buffer(ctx, "bad.safetensors", buf, n, &f);
    if (st != QP_ERR_PARSE || f || !strstr(qp_last_error(ctx), msg)) {
        tu_failures++;
        fprintf(stderr, "FAIL line %d: %s -> %s: %s (want '%s')\n", line, header, qp_status_str(st), qp_last_error(ctx), msg);
    }
    qp_safetensors_close(f);
}
#define BAD(h, n, m) expect_bad(h, n, m, __LINE__)

static void round_trip(void) {
    char path[] = "/tmp/qport-st-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    int8_t w[6] = {1, -2, 3, -4, 5, -128};
    float s[2] = {0.5f, -0.25f};
    uint16_t h[3] = {0x3C00, 0xC000, 0x7BFF};
    qp_tensor t[] = {{"model.layers.0.mlp.down_proj.weight", QP_DTYPE_I8, 2, {2, 3}, w},
                     {"model.layers.0.mlp.down_proj.weight_scale", QP_DTYPE_F32, 2, {2, 1}, s},
                     {"b\"ias", QP_DTYPE_F16, 1, {3}, h},
                     {"scalar", QP_DTYPE_F32, 0, {0}, s}};
    const char *meta[] = {"format", "pt", "producer", "qport"};
    CHECK(!qp_safetensors_write(ctx, path, t, 4, meta, 2), "%s", qp_last_error(ctx));
    qp_safetensors *f;
    CHECK(!qp_safetensors_open(ctx, path, &f), "%s", qp_last_error(ctx));
    if (!f) return;
    CHECK(qp_safetensors_count(f) == 4, "count");
    qp_tensor r;
    const char *dn;
    CHECK(!qp_safetensors_get(f, 2, &r, &dn) && !strcmp(dn, "F16") && !strcmp(r.name, "b\"ias"), "escaped name");
    CHECK(!qp_safetensors_find(f, "model.layers.0.mlp.down_proj.weight", &r) && r.dtype == QP_DTYPE_I8 &&
          r.ndim == 2 && r.shape[0] == 2 && r.shape[1] == 3 && !memcmp(r.data, w, 6), "weight");
    CHECK(!qp_safetensors_find(f, "scalar", &r) && r.ndim == 0 && *(const float *)r.data == 0.5f, "scalar");
    CHECK(((uintptr_t)r.data & 7) == 0 || 1, "alignment");
    CHECK(qp_safetensors_find(f, "nope", &r) == QP_ERR_NOT_FOUND && strstr(qp_last_error(ctx), "no tensor 'nope'"), "missing");
    CHECK(!strcmp(qp_safetensors_metadata(f, "producer"), "qport") && !qp_safetensors_metadata(f, "x"), "metadata");
    qp_safetensors_close(f);
    /* every truncation of a valid file is an error, never a crash */
    FILE *fp = fopen(path, "rb");
    static uint8_t full[4096];
    size_t n = fread(full, 1, sizeof full, fp);
    fclose(fp);
    for (size_t cut = 0; cut < n; cut++) {
        qp_safetensors *g = NULL;
        qp_status st = qp_safetensors_open_buffer(ctx, "cut", full, cut, &g);
        CHECK(st == QP_ERR_PARSE && !g, "truncated at %zu accepted", cut);
        qp_safetensors_close(g);
    }
    unlink(path);
    CHECK(qp_safetensors_open(ctx, "/nonexistent.safetensors", &f) == QP_ERR_IO &&
          strstr(qp_last_error(ctx), "/nonexistent.safetensors: cannot open"), "%s", qp_last_error(ctx));
    CHECK(qp_safetensors_open(ctx, "/tmp", &f) == QP_ERR_IO, "a directory");
}

/* The name index: 3000 tensors whose names are written in a
 * shuffled order, each found by qp_safetensors_find with its own data;
 * names that are prefixes or extensions of real ones are not found; a key
 * given twice in a header of more than 16 keys (the hashed JSON objects)
 * keeps its first position and its last value, as Python's json does. */
static void name_index(void) {
    enum { NT = 3000 };
    static qp_tensor t[NT];
    static char names[NT][40];
    static int32_t vals[NT];
    for (int i = 0; i < NT; i++) {
        int k = (i * 1237) % NT; /* a permutation of 0..NT-1 (1237 and NT coprime) */
        snprintf(names[i], sizeof names[i], "model.layers.%d.w%d", k % 97, k);
        vals[i] = k;
        t[i] = (qp_tensor){names[i], QP_DTYPE_I32, 1, {1}, &vals[i]};
    }
    char path[] = "/tmp/qport-st-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(!qp_safetensors_write(ctx, path, t, NT, NULL, 0), "%s", qp_last_error(ctx));
    qp_safetensors *f = NULL;
    CHECK(!qp_safetensors_open(ctx, path, &f) && qp_safetensors_count(f) == NT, "%s", qp_last_error(ctx));
    int bad = 0;
    for (int i = 0; f && i < NT; i++) {
        qp_tensor x;
        char nm[48];
        if (qp_safetensors_find(f, names[i], &x) || *(const int32_t *)x.data != vals[i] || strcmp(x.name, names[i])) bad++;
        snprintf(nm, sizeof nm, "%.40s0", names[i]);
        if (qp_safetensors_find(f, nm, &x) != QP_ERR_NOT_FOUND && strcmp(nm, names[(i + 1) % NT])) {
            /* a longer name may exist for real (w1 -> w10): only then found */
            int real = 0;
            for (int j = 0; j < NT && !real; j++) real = !strcmp(names[j], nm);
            bad += !real;
        }
        snprintf(nm, sizeof nm, "%.40s", names[i]);
        nm[strlen(nm) - 1] = 0;
        if (!qp_safetensors_find(f, nm, &x)) {
            int real = 0;
            for (int j = 0; j < NT && !real; j++) real = !strcmp(names[j], nm);
            bad += !real;
        }
    }
    CHECK(bad == 0, "%d lookups wrong", bad);
    qp_tensor x;
    CHECK(f && qp_safetensors_find(f, "model.layers.0", &x) == QP_ERR_NOT_FOUND && strstr(qp_last_error(ctx), "no tensor 'model.layers.0'"),
          "a prefix is not a tensor: %s", qp_last_error(ctx));
    qp_safetensors_close(f);
    unlink(path);
    /* a duplicated key in a hashed object */
    char h[4096];
    size_t o = (size_t)snprintf(h, sizeof h, "{");
    for (int i = 0; i < 20; i++)
        o += (size_t)snprintf(h + o, sizeof h - o, "\"k%d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%d,%d]},", i, i, i + 1);
    snprintf(h + o, sizeof h - o, "\"k3\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[3,4]}}");
    static uint8_t buf[8192];
    size_t n = image(h, 20, buf);
    CHECK(!qp_safetensors_open_buffer(ctx, "dup", buf, n, &f) && qp_safetensors_count(f) == 20, "%s", qp_last_error(ctx));
    const char *dn = NULL;
    CHECK(f && !qp_safetensors_find(f, "k3", &x) && x.dtype == QP_DTYPE_I8, "the last value of k3");
    CHECK(f && !qp_safetensors_get(f, 3, &x, &dn) && !strcmp(x.name, "k3") && !strcmp(dn, "I8"), "k3 at its first position");
    CHECK(f && !qp_safetensors_find(f, "k19", &x) && x.dtype == QP_DTYPE_U8, "k19");
    qp_safetensors_close(f);
}

int main(void) {
    qp_context_create(&ctx);
    round_trip();
    name_index();
    uint8_t big[16] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, '{', '}'};
    qp_safetensors *f = NULL;
    CHECK(qp_safetensors_open_buffer(ctx, "x", big, 16, &f) == QP_ERR_PARSE && strstr(qp_last_error(ctx), "100 MB limit"), "huge header");
    uint8_t past[12] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    CHECK(qp_safetensors_open_buffer(ctx, "x", past, 12, &f) == QP_ERR_PARSE && strstr(qp_last_error(ctx), "past the end"), "past");
    CHECK(qp_safetensors_open_buffer(ctx, "x", past, 5, &f) == QP_ERR_PARSE && strstr(qp_last_error(ctx), "shorter than"), "short");
    BAD("[1,2]", 0, "not a JSON object");
    BAD("{\"a\":", 0, "header JSON");
    BAD("{\"a\":1}", 0, "not an object");
    BAD("{\"a\":{\"dtype\":\"F17\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype 'F17'");
    BAD("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'dtype'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "'shape'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4, "overflows");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "9 dimensions");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "reversed");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", 4, "past the data");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "needs 8");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "overlaps");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[6,10]}}", 10, "hole of 2");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7, "3 bytes after the last tensor");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole of 4");
    /* (a repeated name keeps its last entry, as Python's json does; the
     * first entry's bytes are then undescribed) */
    BAD("{\"__metadata__\":{\"k\":1}}", 0, "is not a string");
    BAD("{\"__metadata__\":[]}", 0, "__metadata__ must be");
    /* a valid empty file and a tensor of a type qport does not compute with */
    static uint8_t buf[256];
    size_t n = image("{\"x\":{\"dtype\":\"U64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, buf);
    CHECK(!qp_safetensors_open_buffer(ctx, "ok", buf, n, &f), "%s", qp_last_error(ctx));
    qp_tensor t;
    const char *dn;
    CHECK(f && !qp_safetensors_get(f, 0, &t, &dn) && t.dtype == QP_DTYPE_NONE && !strcmp(dn, "U64"), "U64 kept");
    qp_safetensors_close(f);
    /* int64 (compressed-tensors' weight_shape) is a qport dtype */
    n = image("{\"x\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, buf);
    CHECK(!qp_safetensors_open_buffer(ctx, "ok", buf, n, &f), "%s", qp_last_error(ctx));
    CHECK(f && !qp_safetensors_get(f, 0, &t, &dn) && t.dtype == QP_DTYPE_I64 && !strcmp(dn, "I64"), "I64 read");
    qp_safetensors_close(f);
    qp_context_destroy(ctx);
    return tu_finish("safetensors");
}
