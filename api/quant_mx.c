/* OCP MX (MXFP4 / MXFP6 / MXFP8) block quantization with Quark's "even"
 * shared scale (docs/semantics.md §6) and NVFP4 dynamic activation quantization
 * (docs/semantics.md §8). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define MX_BLOCK 32    /* OCP_MX_BLOCK_SIZE (docs/semantics.md §5) */
#define NVFP4_BLOCK 16 /* docs/semantics.md §8 */

/* get_dtype_params (docs/semantics.md §6): mantissa bits and emax; 0 when `elem`
 * is not an MX element format. (ebits is not needed by the rule.) */
static int mx_params(qp_dtype elem, int *mbits, int *emax) {
    switch (elem) {
    case QP_DTYPE_F4_E2M1: *mbits = 1; *emax = 2; return 1;
    case QP_DTYPE_F6_E3M2: *mbits = 2; *emax = 4; return 1;
    case QP_DTYPE_F6_E2M3: *mbits = 3; *emax = 2; return 1;
    case QP_DTYPE_F8_E4M3FN: *mbits = 3; *emax = 8; return 1;
    default: return 0;
    }
}

/* even_round (docs/semantics.md §6) on the fp32 bit pattern. */
static uint8_t even_scale(int mbits, int emax, float a) {
    a = fabsf(a);
    if (isnan(a)) return 255;                /* NaN stays NaN */
    if (a == 0.0f) a = ldexpf(1.0f, -126);   /* step 3 */
    uint32_t b;
    memcpy(&b, &a, 4);
    b += 1u << (23 - mbits - 1);             /* round-half-up of the mantissa to mbits */
    b &= 0xFF800000u;                        /* keep sign + exponent */
    int E = (int)((b >> 23) & 0xFFu);
    /* floor(log2): E - 127 for normals; exponent field 0 (a subnormal absmax
     * that did not carry) is 0.0 -> -inf; 255 (inf, or a carry past FLT_MAX)
     * -> +inf. Both are taken care of by the clamp. */
    int e = E == 0 ? -1000 : E == 255 ? 1000 : E - 127 - emax;
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return (uint8_t)(e + 127);
}

QP_API qp_status qp_mx_shared_scale(qp_dtype elem, float block_absmax, uint8_t *e8m0_out) {
    int mbits, emax;
    if (!e8m0_out) return qp_error_set(NULL, QP_ERR_INVALID_ARGUMENT, NULL, "e8m0_out", NULL, "NULL output");
    if (!mx_params(elem, &mbits, &emax))
        return qp_error_set(NULL, QP_ERR_INVALID_ARGUMENT, NULL, "elem", NULL,
                            "%s is not an MX element format (fp4_e2m1, fp6_e3m2, fp6_e2m3, fp8_e4m3fn)",
                            qp_dtype_name(elem));
    *e8m0_out = even_scale(mbits, emax, block_absmax);
    return QP_OK;
}

/* What quantizing and dequantizing check alike: the [m, k] shape, the three
 * tensors, the element format (its mantissa bits and max exponent out) and
 * whole blocks along k. */
static qp_status mx_check(qp_context *ctx, qp_dtype elem, const void *a, const void *b, const void *c, size_t m,
                          size_t k, int *mbits, int *emax) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!a || !b || !c) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    if (!mx_params(elem, mbits, emax))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "elem", NULL,
                            "%s is not an MX element format (fp4_e2m1, fp6_e3m2, fp6_e2m3, fp8_e4m3fn)",
                            qp_dtype_name(elem));
    if (k % MX_BLOCK)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL,
                            "the last dimension %zu must be a multiple of the MX block size (32)", k);
    return QP_OK;
}

QP_API qp_status qp_quant_mx(qp_context *ctx, qp_dtype elem, const float *x, size_t m, size_t k, uint8_t *codes,
                             uint8_t *scales) {
    int mbits, emax;
    qp_status st = mx_check(ctx, elem, x, codes, scales, m, k, &mbits, &emax);
    if (st != QP_OK) return st;
    size_t nb = k / MX_BLOCK;
    for (size_t r = 0; r < m; r++)
        for (size_t blk = 0; blk < nb; blk++) {
            const float *xb = x + r * k + blk * MX_BLOCK;
            uint8_t *qb = codes + r * k + blk * MX_BLOCK;
            /* torch amax: a NaN anywhere in the block makes the max NaN */
            float a = 0.0f;
            for (int i = 0; i < MX_BLOCK; i++) {
                float v = fabsf(xb[i]);
                if (isnan(v) || v > a) a = v;
                if (isnan(v)) break;
            }
            uint8_t s = even_scale(mbits, emax, a);
            scales[r * nb + blk] = s;
            for (int i = 0; i < MX_BLOCK; i++) {
                /* x / 2^e: exact except below the fp32 normal range, where
                 * every element format rounds to zero anyway; overflow to
                 * inf saturates. A NaN scale (255) makes every element NaN,
                 * which the encoder maps to +max (F8_E4M3FN: NaN 0x7F). */
                float y = s == 255 ? NAN : ldexpf(xb[i], 127 - (int)s);
                qb[i] = (uint8_t)qp_format_encode(elem, y);
            }
        }
    return QP_OK;
}

QP_API qp_status qp_dequant_mx(qp_context *ctx, qp_dtype elem, const uint8_t *codes, const uint8_t *scales, size_t m,
                               size_t k, float *out) {
    int mbits, emax;
    qp_status st = mx_check(ctx, elem, codes, scales, out, m, k, &mbits, &emax);
    if (st != QP_OK) return st;
    size_t nb = k / MX_BLOCK;
    for (size_t r = 0; r < m; r++)
        for (size_t i = 0; i < k; i++) {
            uint8_t s = scales[r * nb + i / MX_BLOCK];
            double v = (double)qp_format_decode(elem, codes[r * k + i]);
            /* docs/semantics.md §6: value * 2^(e-127) in fp32/double; the product is exact
             * in double and in fp32 unless it passes FLT_MAX (-> inf) */
            out[r * k + i] = s == 255 ? NAN : (float)ldexp(v, (int)s - 127);
        }
    return QP_OK;
}

QP_API qp_status qp_quant_nvfp4(qp_context *ctx, const float *x, size_t m, size_t k, float global_scale_inv,
                                uint8_t *codes, uint8_t *block_scales) {
    if (qp_check_mk(ctx, m, k)) return QP_ERR_INVALID_ARGUMENT;
    if (!x || !codes || !block_scales)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "x", NULL, "NULL tensor");
    if (k % NVFP4_BLOCK) /* docs/semantics.md §8: QuarkNVFP4.create_weights raises ValueError */
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, "x", NULL,
                            "Input size per partition (%zu) must be divisible by group size (16)", k);
    const float g = global_scale_inv;
    if (!(g > 0.0f) || isinf(g))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "input_global_scale_inv", NULL,
                            "the global scale inverse must be finite and > 0 (got %g)", (double)g);
    /* Exact fp32 reciprocals as in vLLM's torch reference (ref_nvfp4_quant,
     * get_reciprocal). The CUDA kernel uses rcp.approx.ftz.f32 for 1/6, 1/g
     * and the final reciprocal, so its out_scale can differ by 1 ulp and
     * flip a tie in step 4. */
    const float inv6 = 1.0f / 6.0f;
    const float inv_g = 1.0f / g;
    size_t nb = k / NVFP4_BLOCK;
    for (size_t r = 0; r < m; r++)
        for (size_t blk = 0; blk < nb; blk++) {
            const float *xb = x + r * k + blk * NVFP4_BLOCK;
            uint8_t *qb = codes + r * k + blk * NVFP4_BLOCK;
            /* step 1: the kernel's __hmax2 returns the non-NaN operand, as fmaxf */
            float vmax = 0.0f;
            for (int i = 0; i < NVFP4_BLOCK; i++) vmax = fmaxf(vmax, fabsf(xb[i]));
            /* step 2: e4m3fn RNE with saturation to 448 */
            float sf = g * (vmax * inv6);
            uint8_t sfc = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, sf);
            block_scales[r * nb + blk] = sfc;
            float sf_f = qp_format_decode(QP_DTYPE_F8_E4M3FN, sfc);
            /* step 3 */
            float out_scale = sf_f == 0.0f ? 0.0f : 1.0f / (sf_f * inv_g);
            /* step 4: e2m1 RNE, saturate to +-6 */
            for (int i = 0; i < NVFP4_BLOCK; i++)
                qb[i] = (uint8_t)qp_format_encode(QP_DTYPE_F4_E2M1, xb[i] * out_scale);
        }
    return QP_OK;
}
