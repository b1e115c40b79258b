/* 8-bit weight quantizers: W8A8-INT8 (docs/semantics.md §15), W8A8-FP8 and its
 * 128x128 per-block form (§16), HF fp8. A weight scale is max|w| over
 * its block divided by the format's max, the codes w / s rounded to nearest
 * even (saturating); an all-zero block gets scale 0 and zero codes. */
#include <math.h>
#include <stdlib.h>

#include "qweights.h"

#define FP8_MAX 448.0f /* e4m3fn, docs/semantics.md §18 */

static float block_absmax(const qp_qw_job *j, int r0, int r1, int c0, int c1) {
    float a = 0.0f;
    for (int r = r0; r < r1 && r < j->N; r++)
        for (int c = c0; c < c1 && c < j->K; c++) a = fmaxf(a, fabsf(j->w[(size_t)r * j->K + c]));
    return a;
}

static int8_t int8_code(float w, float s) {
    if (s == 0.0f) return 0;
    float v = nearbyintf(w / s);
    return (int8_t)(v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v);
}

static bool static_act(const qp_scheme *s) { return s->activation.dtype != QP_DTYPE_NONE && !s->activation.dynamic; }

qp_status qp_qw_int8(qp_qw_job *j) {
    int N = j->N, K = j->K, ns = j->scheme->weight.granularity == QP_GRAN_CHANNEL ? N : 1;
    int8_t *q = qp_qw_add(j, "weight", QP_DTYPE_I8, 2, N, K);
    /* Quark writes a per-channel int8 weight_scale in the model dtype and
     * the per-tensor one in fp32 */
    bool quark16 = ns > 1 && (j->opts->scale_dtype == QP_DTYPE_F16 || j->opts->scale_dtype == QP_DTYPE_BF16);
    void *sc = q ? (quark16 ? qp_qw_add_scale(j, "weight_scale", ns) : qp_qw_add(j, "weight_scale", QP_DTYPE_F32, 1, ns)) : NULL;
    /* vLLM drops weight_zero_point without looking (docs/semantics.md §15); Quark
     * exports it, zero for symmetric weights */
    void *zp = sc ? qp_qw_add(j, "weight_zero_point", QP_DTYPE_I8, 1, ns) : NULL;
    if (!zp) return qp_error_set(j->ctx, QP_ERR_OUT_OF_MEMORY, NULL, "weight", NULL, "out of memory");
    for (int i = 0; i < ns; i++) {
        int r0 = ns == 1 ? 0 : i, r1 = ns == 1 ? N : i + 1;
        float s = block_absmax(j, r0, r1, 0, K) / 127.0f;
        if (quark16) s = qp_qw_put_scale(j, sc, (size_t)i, s);
        else ((float *)sc)[i] = s;
        if (isnan(s)) return QP_ERR_VALUE;
        for (int r = r0; r < r1; r++)
            for (int c = 0; c < K; c++) q[(size_t)r * K + c] = int8_code(j->w[(size_t)r * K + c], s);
    }
    if (!static_act(j->scheme)) return QP_OK;
    float *is = qp_qw_add(j, "input_scale", QP_DTYPE_F32, 1, 1);
    if (!is) return QP_ERR_OUT_OF_MEMORY;
    qp_status st;
    if (j->scheme->activation.symmetric) {
        float amax;
        if ((st = qp_qw_calib_absmax(j, &amax)) != QP_OK) return st;
        is[0] = amax / 127.0f; /* static symmetric: q = x / s (docs/semantics.md §12) */
        return QP_OK;
    }
    /* static asymmetric (docs/semantics.md §12, §15): q = x/s + zp over [-128, 127], so
     * s = (max - min)/255 and zp = rne(-128 - min/s); stored int8 [1] */
    float mn, mx;
    if ((st = qp_qw_calib_range(j, &mn, &mx)) != QP_OK) return st;
    if (mx == mn)
        return qp_error_set(j->ctx, QP_ERR_VALUE, NULL, "input_scale", NULL,
                            "the calibration activations are all zero: no static input scale can be derived");
    float s = mx / 255.0f - mn / 255.0f, z = nearbyintf(-128.0f - mn / s); /* the range can pass FLT_MAX */
    int8_t *izp = qp_qw_add(j, "input_zero_point", QP_DTYPE_I8, 1, 1);
    if (!izp) return QP_ERR_OUT_OF_MEMORY;
    is[0] = s;
    izp[0] = (int8_t)(z < -128.0f ? -128.0f : z > 127.0f ? 127.0f : z);
    return QP_OK;
}

/* kFp8Static128BlockE8M0Sym: the scale rounded up to a power of two, so
 * that every |w| / 2^e stays <= 448 */
static uint8_t e8m0_ceil(float s) {
    if (s == 0.0f) return 0;
    int ex;
    float m = frexpf(s, &ex); /* s = m * 2^ex, m in [0.5, 1) */
    int e = m == 0.5f ? ex - 1 : ex;
    e = e < -127 ? -127 : e > 127 ? 127 : e;
    return (uint8_t)(e + 127);
}

qp_status qp_qw_fp8(qp_qw_job *j) {
    const qp_scheme *s = j->scheme;
    int N = j->N, K = j->K;
    bool block = s->kind == QP_SCHEME_W8A8_FP8_BLOCK || (s->kind == QP_SCHEME_HF_FP8 && s->weight.block[0] > 0);
    int b0 = block ? s->weight.block[0] : 0, b1 = block ? s->weight.block[1] : 0;
    if (block && (b0 <= 0 || b1 <= 0))
        return qp_error_set(j->ctx, QP_ERR_INVALID_ARGUMENT, NULL, "weight_scale", NULL,
                            "per-block scheme without a block size (%d x %d)", b0, b1);
    bool e8m0 = block && s->weight.scale_dtype == QP_DTYPE_E8M0;
    bool pc = !block && s->kind == QP_SCHEME_W8A8_FP8 && s->weight.granularity == QP_GRAN_CHANNEL;
    /* row and column blocks of one scale each */
    int rb = block ? b0 : pc ? 1 : N, cb = block ? b1 : K;
    int nr = (N + rb - 1) / rb, nc = (K + cb - 1) / cb;
    uint8_t *q = qp_qw_add(j, "weight", QP_DTYPE_F8_E4M3FN, 2, N, K);
    if (!q) return QP_ERR_OUT_OF_MEMORY;
    /* Quark's per-block scale is the dequant multiplier under the name
     * weight_scale (docs/semantics.md §16); HF fp8 block checkpoints call the same
     * multiplier weight_scale_inv (DeepSeek's name, not inverted) */
    const char *sname = block && s->kind == QP_SCHEME_HF_FP8 ? "weight_scale_inv" : "weight_scale";
    void *sc = block ? qp_qw_add(j, sname, e8m0 ? QP_DTYPE_E8M0 : QP_DTYPE_F32, 2, nr, nc)
                     : qp_qw_add_scale(j, sname, pc ? N : 1);
    if (!sc) return QP_ERR_OUT_OF_MEMORY;
    for (int bi = 0; bi < nr; bi++)
        for (int bj = 0; bj < nc; bj++) {
            float scale = block_absmax(j, bi * rb, (bi + 1) * rb, bj * cb, (bj + 1) * cb) / FP8_MAX;
            if (e8m0) {
                uint8_t code = e8m0_ceil(scale);
                ((uint8_t *)sc)[(size_t)bi * nc + bj] = code;
                scale = scale == 0.0f ? 0.0f : ldexpf(1.0f, (int)code - 127);
            } else if (block) {
                ((float *)sc)[(size_t)bi * nc + bj] = scale;
            } else if (isnan(scale = qp_qw_put_scale(j, sc, (size_t)bi * nc + bj, scale))) {
                return QP_ERR_VALUE;
            }
            for (int r = bi * rb; r < (bi + 1) * rb && r < N; r++)
                for (int c = bj * cb; c < (bj + 1) * cb && c < K; c++) {
                    float v = scale == 0.0f ? 0.0f : j->w[(size_t)r * K + c] / scale;
                    q[(size_t)r * K + c] = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, v);
                }
        }
    if (!static_act(s)) return QP_OK;
    float amax;
    qp_status st = qp_qw_calib_absmax(j, &amax);
    if (st != QP_OK) return st;
    void *is = qp_qw_add_scale(j, "input_scale", 1);
    if (!is) return QP_ERR_OUT_OF_MEMORY;
    return isnan(qp_qw_put_scale(j, is, 0, amax / FP8_MAX)) ? QP_ERR_VALUE : QP_OK;
}
