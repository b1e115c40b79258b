/* Internal: the canonical MoE layer the cpu reference runs (api/moe.c binds
 * it, cpu/ref_moe.c computes it). */
#ifndef QP_MOE_H
#define QP_MOE_H

#include "internal.h"

typedef enum qp_moe_act {
    QP_MOE_ACT_NONE = 0,      /* unquantized: GEMMs in the activation dtype   */
    QP_MOE_ACT_FP8_STATIC,    /* one scale for every expert (max over them)   */
    QP_MOE_ACT_FP8_DYN_TENSOR,/* absmax over all rows of the GEMM's input     */
    QP_MOE_ACT_FP8_DYN_TOKEN, /* per row                                      */
    QP_MOE_ACT_INT8_STATIC,   /* symmetric, max over experts                  */
    QP_MOE_ACT_INT8_DYN_TOKEN /* scaled_int8_quant: dynamic is per row        */
} qp_moe_act;

typedef struct qp_moe_ref {
    qp_scheme_kind kind;
    qp_dtype dt;              /* activations, outputs, unquantized weights    */
    int E, H, I;
    int G, offset;            /* expert parallelism: experts offset..offset+E-1 of G */
    qp_moe_act act;
    void *w13, *w2;           /* [E][2I][H], [E][H][I]: fp8/int8 codes or dt  */
    float *s13, *s2;          /* per-row dequant scales [E][2I], [E][H]       */
    float a13, a2;            /* static activation scales                     */
} qp_moe_ref;

/* y [M][H] from x [M][H] and the routing (ids, weights [M][k]). */
qp_status qp_ref_moe_forward(qp_context *ctx, const char *layer, const qp_moe_ref *r, const void *x, int M, int k,
                             const int32_t *ids, const float *weights, void *y);
#endif
