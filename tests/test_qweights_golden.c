/* qp_quantize_weights against golden tensors made by an independent
 * implementation (tests/golden/gen_qweights.py: numpy fp32 / fp16 and
 * ml_dtypes, written from docs/semantics.md and qport.h's documented rules),
 * bit for bit: every tensor's name, dtype, shape and bytes, for W8A8-INT8
 * per-channel / per-tensor with static sym/asym input scales, FP8 per
 * tensor / channel / 128x128 blocks (fp32 and e8m0 scales), HF fp8, W4A16
 * int4/uint4 with order/reorder packing, OCP-MX fp4/fp6/fp8 (per_block
 * rows), W4A8-MXFP4-FP8, NVFP4 and QQQ per-channel / group 128 with the
 * Marlin layout. The script says which rules vLLM fixes and which are
 * qport's documented choices. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int cases, mismatching;

/* base64 (RFC 4648) -> bytes; returns the byte count, or -1 */
static long b64_decode(const char *s, uint8_t *out, size_t cap) {
    static const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (; *s && *s != '\n' && *s != '='; s++) {
        const char *p = strchr(al, *s);
        if (!p || !*p) return -1;
        acc = acc << 6 | (uint32_t)(p - al);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= cap) return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)n;
}

typedef struct want {
    char name[32], dtype[16];
    int ndim;
    long shape[4];
    size_t count, bytes;
    uint8_t *data;
} want;

typedef struct gcase {
    char name[64], scheme[16];
    int N, K;
    char keys[8][32];
    int nkeys;
    float *w, *calib;
    size_t calib_rows;
    want t[8];
    int nt;
} gcase;

static const char *key(const gcase *c, const char *k) {
    size_t n = strlen(k);
    for (int i = 0; i < c->nkeys; i++)
        if (!strncmp(c->keys[i], k, n) && c->keys[i][n] == '=') return c->keys[i] + n + 1;
    return "";
}

static qp_dtype dtype_of(const char *name) {
    for (int d = 0; d < QP_DTYPE_COUNT_; d++)
        if (!strcmp(qp_dtype_name((qp_dtype)d), name)) return (qp_dtype)d;
    return QP_DTYPE_NONE;
}

/* The qp_scheme fields qp_quantize_weights reads, from the case's keys. */
static qp_scheme scheme_of(const gcase *c, qp_quantize_options *o) {
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.weight.symmetric = 1;
    s.activation.symmetric = 1;
    s.activation.dynamic = 1;
    const char *act = key(c, "act");
    if (*key(c, "absmax")) {
        uint32_t b = (uint32_t)strtoul(key(c, "absmax"), NULL, 16);
        memcpy(&o->input_absmax, &b, 4);
    }
    if (!strcmp(c->scheme, "int8")) {
        s.kind = QP_SCHEME_W8A8_INT8;
        s.weight.dtype = QP_DTYPE_I8;
        s.weight.granularity = !strcmp(key(c, "gran"), "channel") ? QP_GRAN_CHANNEL : QP_GRAN_TENSOR;
        s.activation.dtype = QP_DTYPE_I8;
        s.activation.dynamic = !strcmp(act, "dyn");
        s.activation.symmetric = strcmp(act, "asym") != 0;
    } else if (!strcmp(c->scheme, "fp8") || !strcmp(c->scheme, "hffp8")) {
        const char *g = key(c, "gran"), *blk = key(c, "block");
        bool hf = !strcmp(c->scheme, "hffp8");
        s.weight.dtype = QP_DTYPE_F8_E4M3FN;
        s.weight.scale_dtype = atoi(key(c, "e8m0")) ? QP_DTYPE_E8M0 : QP_DTYPE_F32;
        if (hf && atoi(blk) > 0) {
            s.weight.granularity = QP_GRAN_BLOCK;
            s.weight.block[0] = atoi(blk);
            s.weight.block[1] = strchr(blk, 'x') ? atoi(strchr(blk, 'x') + 1) : atoi(blk);
        } else if (!strcmp(g, "block")) {
            s.weight.granularity = QP_GRAN_BLOCK;
            s.weight.block[0] = s.weight.block[1] = 128;
        } else {
            s.weight.granularity = !strcmp(g, "channel") ? QP_GRAN_CHANNEL : QP_GRAN_TENSOR;
        }
        s.kind = hf ? QP_SCHEME_HF_FP8 : s.weight.granularity == QP_GRAN_BLOCK ? QP_SCHEME_W8A8_FP8_BLOCK : QP_SCHEME_W8A8_FP8;
        s.activation.dtype = QP_DTYPE_F8_E4M3FN;
        s.activation.dynamic = strcmp(act, "static") != 0;
    } else if (!strcmp(c->scheme, "w4a16")) {
        int g = atoi(key(c, "group"));
        s.kind = QP_SCHEME_W4A16_INT4;
        s.weight.dtype = !strcmp(key(c, "dtype"), "uint4") ? QP_DTYPE_U4 : QP_DTYPE_I4;
        s.weight.symmetric = s.weight.dtype == QP_DTYPE_I4;
        s.weight.granularity = g > 0 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL;
        s.weight.group_size = g > 0 ? g : 0;
        s.pack_method = !strcmp(key(c, "pack"), "reorder") ? QP_PACK_REORDER : QP_PACK_ORDER;
        s.activation.dtype = QP_DTYPE_NONE;
        o->params_dtype = dtype_of(key(c, "pd"));
    } else if (!strcmp(c->scheme, "mx") || !strcmp(c->scheme, "w4a8mxfp4")) {
        bool w4a8 = !strcmp(c->scheme, "w4a8mxfp4");
        int R = w4a8 ? 1 : atoi(key(c, "rows"));
        s.kind = w4a8 ? QP_SCHEME_W4A8_MXFP4_FP8 : QP_SCHEME_OCP_MX;
        s.weight.dtype = w4a8 ? QP_DTYPE_F4_E2M1 : dtype_of(key(c, "elem"));
        s.weight.scale_dtype = QP_DTYPE_E8M0;
        s.weight.granularity = R > 1 ? QP_GRAN_BLOCK : QP_GRAN_GROUP;
        s.weight.group_size = 32;
        if (R > 1) { s.weight.block[0] = R; s.weight.block[1] = 32; }
        s.activation.dtype = w4a8 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_NONE;
        s.activation.dynamic = !w4a8;
    } else if (!strcmp(c->scheme, "nvfp4")) {
        s.kind = QP_SCHEME_NVFP4;
        s.weight.dtype = QP_DTYPE_F4_E2M1;
        s.weight.granularity = QP_GRAN_GROUP;
        s.weight.group_size = 16;
        s.activation.dtype = QP_DTYPE_F4_E2M1;
    } else if (!strcmp(c->scheme, "qqq")) {
        int g = atoi(key(c, "group"));
        s.kind = QP_SCHEME_QQQ_W4A8;
        s.weight.dtype = QP_DTYPE_I4;
        s.weight.granularity = g == 128 ? QP_GRAN_GROUP : QP_GRAN_CHANNEL;
        s.weight.group_size = g == 128 ? 128 : 0;
        s.activation.dtype = QP_DTYPE_I8;
        s.pack_method = QP_PACK_MARLIN_QQQ;
    }
    return s;
}

static void run(gcase *c) {
    qp_quantize_options o;
    qp_quantize_options_init(&o);
    qp_scheme s = scheme_of(c, &o);
    o.calib = c->calib;
    o.calib_rows = c->calib_rows;
    qp_context *ctx;
    qp_context_create(&ctx);
    qp_qweights *q = NULL;
    qp_status st = qp_quantize_weights(ctx, &s, c->w, c->N, c->K, &o, &q);
    CHECK(st == QP_OK, "%s: %s", c->name, qp_last_error(ctx));
    if (st == QP_OK) {
        cases++;
        int bad_case = 0;
        CHECK(qp_qweights_count(q) == (size_t)c->nt, "%s: %zu tensors, want %d", c->name, qp_qweights_count(q), c->nt);
        for (int i = 0; i < c->nt; i++) {
            const want *e = &c->t[i];
            qp_tensor t;
            if (qp_qweights_get(q, (size_t)i, &t) != QP_OK) { bad_case++; continue; }
            bool meta = !strcmp(t.name, e->name) && !strcmp(qp_dtype_name(t.dtype), e->dtype) && t.ndim == e->ndim;
            for (int d = 0; meta && d < e->ndim; d++) meta = t.shape[d] == e->shape[d];
            CHECK(meta, "%s tensor %d: got %s %s ndim %d, want %s %s ndim %d", c->name, i, t.name, qp_dtype_name(t.dtype),
                  t.ndim, e->name, e->dtype, e->ndim);
            if (!meta || qp_tensor_bytes(&t) != e->bytes) { bad_case++; continue; }
            size_t eb = e->bytes / (e->count ? e->count : 1), bad = 0;
            for (size_t k = 0; k < e->count; k++)
                if (memcmp((const uint8_t *)t.data + k * eb, e->data + k * eb, eb) && bad++ < 3) {
                    uint32_t g = 0, w = 0;
                    memcpy(&g, (const uint8_t *)t.data + k * eb, eb);
                    memcpy(&w, e->data + k * eb, eb);
                    fprintf(stderr, "  %s %s[%zu]: got %0*x want %0*x\n", c->name, e->name, k, (int)(2 * eb), g,
                            (int)(2 * eb), w);
                }
            CHECK(bad == 0, "%s: %zu of %zu elements of %s differ", c->name, bad, e->count, e->name);
            if (bad) bad_case++;
        }
        if (bad_case) mismatching++;
    }
    qp_qweights_destroy(q);
    qp_context_destroy(ctx);
}

/* "t NAME DTYPE NDIM D.. COUNT payload" */
static void parse_tensor(gcase *c, char *line) {
    if (c->nt >= 8) return;
    want *e = &c->t[c->nt++];
    char *save, *tok = strtok_r(line, " \n", &save);
    tok = strtok_r(NULL, " \n", &save); snprintf(e->name, sizeof e->name, "%s", tok ? tok : "");
    tok = strtok_r(NULL, " \n", &save); snprintf(e->dtype, sizeof e->dtype, "%s", tok ? tok : "");
    tok = strtok_r(NULL, " \n", &save); e->ndim = tok ? atoi(tok) : 0;
    for (int d = 0; d < e->ndim && d < 4; d++) { tok = strtok_r(NULL, " \n", &save); e->shape[d] = tok ? atol(tok) : 0; }
    tok = strtok_r(NULL, " \n", &save); e->count = tok ? strtoul(tok, NULL, 10) : 0;
    int eb = qp_format_bits(dtype_of(e->dtype)) / 8;
    if (eb <= 0) eb = 1;
    e->bytes = e->count * (size_t)eb;
    e->data = calloc(e->bytes ? e->bytes : 1, 1);
    if (eb == 1) { /* one contiguous hex string */
        tok = strtok_r(NULL, " \n", &save);
        for (size_t k = 0; tok && k < e->count && tok[2 * k] && tok[2 * k + 1]; k++) {
            char h[3] = {tok[2 * k], tok[2 * k + 1], 0};
            e->data[k] = (uint8_t)strtoul(h, NULL, 16);
        }
        return;
    }
    for (size_t k = 0; k < e->count && (tok = strtok_r(NULL, " \n", &save)); k++) {
        uint32_t v = (uint32_t)strtoul(tok, NULL, 16);
        if (eb == 2) { uint16_t h = (uint16_t)v; memcpy(e->data + 2 * k, &h, 2); }
        else memcpy(e->data + 4 * k, &v, 4);
    }
}

/* "w COUNT B64" / "c ROWS B64" -> floats */
static float *parse_floats(char *line, size_t want_n, size_t *rows_out) {
    char *save, *tok = strtok_r(line, " \n", &save);
    tok = strtok_r(NULL, " \n", &save);
    size_t lead = tok ? strtoul(tok, NULL, 10) : 0;
    if (rows_out) *rows_out = lead;
    tok = strtok_r(NULL, " \n", &save);
    size_t n = rows_out ? lead * want_n : want_n;
    float *f = calloc(n ? n : 1, sizeof(float));
    long got = tok ? b64_decode(tok, (uint8_t *)f, n * sizeof(float)) : -1;
    CHECK(got == (long)(n * sizeof(float)), "%zu floats expected, %ld bytes decoded", n, got);
    return f;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/golden/qweights.txt";
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    char *line = NULL;
    size_t cap = 0;
    gcase c;
    memset(&c, 0, sizeof c);
    float *prev_w = NULL;
    size_t prev_nk = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "case ", 5)) {
            memset(&c, 0, sizeof c);
            char *save, *tok = strtok_r(line + 5, " \n", &save);
            snprintf(c.name, sizeof c.name, "%s", tok ? tok : "");
            tok = strtok_r(NULL, " \n", &save); snprintf(c.scheme, sizeof c.scheme, "%s", tok ? tok : "");
            tok = strtok_r(NULL, " \n", &save); c.N = tok ? atoi(tok) : 0;
            tok = strtok_r(NULL, " \n", &save); c.K = tok ? atoi(tok) : 0;
            while ((tok = strtok_r(NULL, " \n", &save)) && c.nkeys < 8) snprintf(c.keys[c.nkeys++], 32, "%s", tok);
        } else if (!strncmp(line, "w same", 6)) {
            CHECK(prev_w && prev_nk == (size_t)c.N * c.K, "%s: 'w same' without a previous weight of that size", c.name);
            if (prev_w && prev_nk == (size_t)c.N * c.K) {
                c.w = malloc(sizeof(float) * prev_nk);
                memcpy(c.w, prev_w, sizeof(float) * prev_nk);
            }
        } else if (line[0] == 'w') {
            c.w = parse_floats(line, (size_t)c.N * c.K, NULL);
        } else if (line[0] == 'c') {
            c.calib = parse_floats(line, (size_t)c.K, &c.calib_rows);
        } else if (line[0] == 't') {
            parse_tensor(&c, line);
        } else if (!strncmp(line, "end", 3)) {
            if (c.w) run(&c);
            free(prev_w);
            prev_w = c.w;
            prev_nk = (size_t)c.N * c.K;
            free(c.calib);
            for (int i = 0; i < c.nt; i++) free(c.t[i].data);
            memset(&c, 0, sizeof c);
        }
    }
    free(prev_w);
    free(line);
    fclose(f);
    printf("%d weight-quantizer golden cases compared, %d with mismatches\n", cases, mismatching);
    CHECK(cases >= 25, "only %d cases read from %s", cases, path);
    return tu_finish("test_qweights_golden");
}
