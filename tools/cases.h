/* Test layers for conformance and tests: a scheme (resolved from a small
 * config, as a user's would be), seeded random weights quantized into the
 * checkpoint tensors, activations from several distributions, and the
 * error bound each float path is judged by. Public API only. */
#ifndef QPORT_CASES_H
#define QPORT_CASES_H
#include <stdint.h>
#include "qport.h"

typedef struct case_scheme {
    const char *name;    /* the conformance case: "int8-dyn-sym", ...        */
    const char *tool_name; /* its name in qport quantize / bench / devices, or
                            * NULL (a conformance-only variant)            */
    const char *config;  /* a quantization_config JSON                       */
    int exact;           /* integer path: bit-exact against the reference    */
    int f16_only;        /* QQQ: fp16 activations only                       */
    int k_multiple;      /* K must be a multiple of this                     */
    int n_multiple;
    int act_ue8m0;       /* qp_linear_options.act_ue8m0 (fp8 per-block)      */
    int moe_only;        /* only the experts of moe:NAME (the linear sweep has the scheme in another group size) */
} case_scheme;

/* The conformance rows (n_case_schemes, in sweep order); the tools' names
 * are quant_scheme_find / quant_scheme_at (tool.h) over the same rows. */
extern const case_scheme case_schemes[];
extern const int n_case_schemes;
const case_scheme *case_scheme_find(const char *name);

typedef enum case_dist {
    DIST_UNIFORM = 0,   /* U(-1, 1)                                          */
    DIST_OUTLIERS,      /* N(0, 1) with 1% of values x30                     */
    DIST_ZERO_ROWS,     /* uniform with every third row all zero            */
    DIST_CONST_ROWS,    /* each row one constant                             */
    DIST_TIES,          /* k/2 steps: values at rounding ties of the grids   */
    DIST_SATURATE,      /* wide range: saturates int8/fp8 static scales      */
    DIST_COUNT
} case_dist;
const char *case_dist_name(case_dist d);

/* One layer: scheme + checkpoint tensors (owned) + the float weights they
 * came from (for error bounds). */
typedef struct case_layer {
    const case_scheme *cs;
    qp_scheme scheme;
    int N, K;
    qp_dtype act_dtype;
    qp_tensor tensors[8];
    size_t n_tensors;
    void *owned[10];
    float *w_deq;        /* [N][K] dequantized weights                       */
    int8_t *rotation;    /* [r][r] Hadamard of rotated cases, or NULL        */
    int rotation_size;
    /* case_bound's cache: the row (x, m) fake-quantized as the scheme's
     * activation step does it */
    float *xq;
    const uint16_t *xq_src;
    int xq_m;
} case_layer;

/* Builds the layer with seed `seed`; `calib` (M x K act_dtype bits, may be
 * NULL) sets static activation scales. Errors print into err. */
int case_layer_make(qp_context *ctx, const case_scheme *cs, int N, int K, qp_dtype act_dtype, uint64_t seed,
                    const uint16_t *calib, int calib_m, case_layer *out, char *err, size_t errcap);
void case_layer_free(case_layer *l);

/* x [M][K] in act_dtype bits. */
void case_activations(case_dist d, qp_dtype act_dtype, int M, int K, uint64_t seed, uint16_t *x);

/* Float paths: the bound |y - ref| may not exceed for element (m, n).
 * Derivation in cases.c. */
double case_bound(const case_layer *l, const uint16_t *x, int m, double ref, qp_dtype out_dtype, int n);

uint64_t case_rng(uint64_t *state);
/* Sylvester's Hadamard matrix of order r (a power of two), r x r of +-1:
 * H[i][j] = (-1)^popcount(i & j) (symmetric, H H = r I). */
void case_hadamard(int r, int8_t *H);
#endif
