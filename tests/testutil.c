#include "testutil.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int tu_failures;

qp_config *tu_load(qp_context *ctx, const char *json) {
    qp_config *cfg = NULL;
    if (qp_config_load_buffer(ctx, "test.json", json, strlen(json), &cfg) != QP_OK) return NULL;
    return cfg;
}

void tu_expect(const qp_config *cfg, qp_context *ctx, const char *layer, qp_layer_kind kind,
               const qp_resolve_options *o, qp_status want_status, const char *want_method,
               const char *want_scheme, const char *want_wkey, const char *want_akey, const char *file, int line) {
    qp_scheme s;
    if (!cfg) { tu_failures++; fprintf(stderr, "FAIL %s:%d: no config: %s\n", file, line, qp_last_error(ctx)); return; }
    qp_status st = qp_config_resolve(cfg, layer, kind, o, &s);
    if (st != want_status) {
        tu_failures++;
        fprintf(stderr, "FAIL %s:%d: %s: status %s, want %s (%s)\n", file, line, layer, qp_status_str(st),
                qp_status_str(want_status), qp_last_error(ctx));
        return;
    }
    if (st != QP_OK) return;
    const char *got[4] = {s.method, s.scheme_class, s.weight_key, s.activation_key};
    const char *want[4] = {want_method, want_scheme, want_wkey, want_akey};
    for (int i = 0; i < 4; i++) {
        if (want[i] && strcmp(got[i], want[i])) {
            tu_failures++;
            fprintf(stderr, "FAIL %s:%d: %s: field %d is '%s', want '%s'\n", file, line, layer, i, got[i], want[i]);
        }
    }
}

void tu_expect_error(const qp_config *cfg, qp_context *ctx, const char *layer, qp_layer_kind kind,
                     const qp_resolve_options *o, qp_status want, const char *msg, const char *file, int line) {
    qp_scheme s;
    if (!cfg) { tu_failures++; fprintf(stderr, "FAIL %s:%d: no config: %s\n", file, line, qp_last_error(ctx)); return; }
    qp_status st = qp_config_resolve(cfg, layer, kind, o, &s);
    qp_error_info e;
    qp_last_error_info(ctx, &e);
    bool ok = st == want && e.status == want &&
              (msg[0] == '~' ? strstr(e.message, msg + 1) != NULL : !strcmp(e.message, msg));
    if (!ok) {
        tu_failures++;
        fprintf(stderr, "FAIL %s:%d: %s: got %s '%s'\n   want %s '%s'\n", file, line, layer, qp_status_str(st),
                st == QP_OK ? "" : e.message, qp_status_str(want), msg);
    }
}

char *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; if (len) *len = (size_t)n; }
    return b;
}

int tu_finish(const char *name) {
    if (tu_failures) { fprintf(stderr, "%s: %d failure(s)\n", name, tu_failures); return 1; }
    printf("%s: all checks passed\n", name);
    return 0;
}

size_t tu_esize(qp_dtype d) { return d == QP_DTYPE_F32 ? 4 : 2; }

void tu_put(qp_dtype d, void *p, size_t i, float v) {
    if (d == QP_DTYPE_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = (uint16_t)qp_format_encode(d, v);
}

double tu_get(qp_dtype d, const void *p, size_t i) {
    return d == QP_DTYPE_F32 ? (double)((const float *)p)[i] : (double)qp_format_decode(d, ((const uint16_t *)p)[i]);
}

double tu_unit(qp_dtype d) { return d == QP_DTYPE_F16 ? 0x1p-11 : d == QP_DTYPE_BF16 ? 0x1p-8 : 0x1p-24; }

int tu_ref_layer(const qp_safetensors *ref, size_t i, char *out, size_t cap) {
    qp_tensor t;
    if (qp_safetensors_get(ref, i, &t, NULL)) return 0;
    size_t l = strlen(t.name);
    if (l < 3 || strcmp(t.name + l - 2, ".x") || l - 2 >= cap) return 0;
    snprintf(out, cap, "%.*s", (int)(l - 2), t.name);
    return 1;
}
