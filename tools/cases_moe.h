/* MoE conformance layers: the experts of one fused MoE block
 * built from the linear case schemes (each expert's [gate; up] and down
 * quantized by cases.c into checkpoint tensors, then stacked under vLLM's
 * FusedMoE names), seeded routing, and the bound a float MoE output is
 * held to against an fp64 model of the block. Public API only. */
#ifndef QPORT_CASES_MOE_H
#define QPORT_CASES_MOE_H
#include "cases.h"

typedef struct case_moe {
    const case_scheme *cs;   /* NULL: unquantized experts                     */
    const char *name;        /* the case scheme's name, or "unquantized"      */
    qp_scheme scheme;        /* as vLLM's MoE method resolves it              */
    int E, H, I;
    qp_dtype dt;
    qp_tensor tensors[8];
    size_t n_tensors;
    void *owned[8];
    double *w13, *w2;        /* dequantized [E][2I][H], [E][H][I]             */
} case_moe;

/* The MoE case schemes: the linear case schemes that are MoE schemes too,
 * plus unquantized experts. Returns the count; name i via case_moe_scheme. */
int case_moe_scheme_count(void);
const char *case_moe_scheme(int i);
/* 1 when integer MoE outputs must match the reference bit for bit. */
int case_moe_exact(const char *scheme);

/* with_model 0 keeps no dequantized weights (w13/w2 NULL: benchmarks of
 * real model sizes); case_moe_model needs them. */
int case_moe_make(qp_context *ctx, const char *scheme, int E, int H, int I, qp_dtype dt, uint64_t seed, int with_model,
                  case_moe *out, char *err, size_t errcap);
void case_moe_free(case_moe *c);

/* Routing of M tokens to k of G experts with weights (seeded): the first
 * token's slots all go to expert `hot` when hot >= 0; expert `cold` gets
 * no slot when cold >= 0. */
void case_moe_route(int M, int k, int G, int hot, int cold, uint64_t seed, int32_t *ids, float *w);

/* The fp64 model of the block and the bound of every output: y64 and
 * bound [M][H]. Returns -1 on out of memory. */
int case_moe_model(const case_moe *c, const uint16_t *x, int M, int k, const int32_t *ids, const float *w,
                   double *y64, double *bound);
#endif
