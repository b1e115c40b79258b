/* Internal: the fused MoE reference (cpu/ref_moe.c) over the canonical
 * layer description every backend prepares from (backend.h qp_moe_desc,
 * built by api/moe.c). */
#ifndef QP_MOE_H
#define QP_MOE_H

#include "registry.h"

/* y [M][H] from x [M][H] and the routing (ids, weights [M][k]). */
qp_status qp_ref_moe_forward(qp_context *ctx, const qp_moe_desc *d, const void *x, int M, int k, const int32_t *ids,
                             const float *weights, void *y);
#endif
