#ifndef QP_TESTUTIL_H
#define QP_TESTUTIL_H
#include <stdbool.h>
#include <stdio.h>
#include "qport.h"

extern int tu_failures;
#define CHECK(cond, ...) do { if (!(cond)) { tu_failures++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* Loads a JSON text as a config (NULL on failure, error kept in ctx). */
qp_config *tu_load(qp_context *ctx, const char *json);
/* Resolves and checks the status, scheme class and keys ("" = none). */
void tu_expect(const qp_config *cfg, qp_context *ctx, const char *layer, qp_layer_kind kind,
               const qp_resolve_options *o, qp_status want_status, const char *want_method,
               const char *want_scheme, const char *want_wkey, const char *want_akey, const char *file, int line);
/* Resolves and checks an error status whose vLLM message equals `msg`
 * (or contains it when `msg` starts with '~'). */
void tu_expect_error(const qp_config *cfg, qp_context *ctx, const char *layer, qp_layer_kind kind,
                     const qp_resolve_options *o, qp_status want, const char *msg, const char *file, int line);
char *tu_read_file(const char *path, size_t *len);
int tu_finish(const char *name);

/* Activation-dtype arrays as the reference forwards take them: F16/BF16
 * as uint16_t bits, F32 as float. */
size_t tu_esize(qp_dtype d);
/* Element i := v (rounded RNE for F16/BF16). */
void tu_put(qp_dtype d, void *p, size_t i, float v);
/* Element i, exactly. */
double tu_get(qp_dtype d, const void *p, size_t i);
/* Unit roundoff of d: 2^-11 (F16), 2^-8 (BF16), 2^-24 (F32). */
double tu_unit(qp_dtype d);

/* An exporter's reference file names each module's seeded input
 * "<layer>.x": 1 (and the layer's name in out) when tensor i is one. */
int tu_ref_layer(const qp_safetensors *ref, size_t i, char *out, size_t cap);

#define EXPECT(cfg, ctx, layer, kind, o, st, m, s, wk, ak) tu_expect(cfg, ctx, layer, kind, o, st, m, s, wk, ak, __FILE__, __LINE__)
#define EXPECT_ERR(cfg, ctx, layer, kind, o, st, msg) tu_expect_error(cfg, ctx, layer, kind, o, st, msg, __FILE__, __LINE__)
#endif
