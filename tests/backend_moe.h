/* The fused MoE of one GPU backend against the cpu reference (public API):
 * every scheme x fp16/bf16 with E 8 or 64 and k 1, 2 or 8 in turn,
 * softmax or grouped top-k routing, experts that get no token, every token
 * through one expert, expert parallelism; int8 bit for bit, float within a
 * bound derived per output (backend_moe.c). Shared by tests/cl/test_cl_moe.c
 * and tests/cuda/test_cuda_moe.c, which add their device's own refusals,
 * and by tests/vk/test_vk_moe.c for its fp8 per-block layers. */
#ifndef QP_BACKEND_MOE_H
#define QP_BACKEND_MOE_H
#include "qport.h"

/* The device under test `dev` ("opencl", "cuda" in messages) against `ref`
 * (the cpu device) of one context; each layer runs at the token counts
 * ms[0..n_ms-1] (decode M <= 16, tiled above). QPORT_TEST_SEED reseeds. */
void md_init(qp_context *ctx, qp_device *ref, qp_device *dev, const char *name, const int *ms, int n_ms);
/* Hidden and intermediate size of the following layers (64, 32). */
void md_set_shape(int H, int I);
/* One layer of case scheme ci: E local experts of G from `off`, top-k. */
void md_run_layer(int ci, qp_dtype dt, int E, int G, int off, int k);
/* Every case scheme x fp16/bf16, then three expert-parallel layers. */
void md_run_matrix(void);
/* FP8 per-block experts (H 256, I 128; E 4, top-2, one layer expert
 * parallel): the device must run them (OpenCL, Vulkan, CUDA), within the bound and
 * with at least 90% of the outputs equal to the reference's. */
void md_run_fp8_block(void);
/* Outputs compared so far and how many of them have the reference's value
 * (0 ulp: a device that claims bit-exactness asserts the two are equal). */
void md_counts(long *outputs, long *equal);
/* The resolved fp8 per-block MoE scheme (*cfg: destroy after use). */
void md_fp8_block_scheme(qp_scheme *s, qp_config **cfg);
/* Experts of a scheme with no MoE method (QQQ): QP_ERR_UNSUPPORTED from the core on the device. */
void md_refuse_unsupported(void);
/* qp_moe_create on `dev` of case scheme ci's directly built layer. */
qp_status md_create_direct(qp_device *dev, int ci, qp_dtype dt, int E, int k, qp_moe **out);
/* The kernel paths seen and the totals; t0 = clock() at the start. */
void md_report(const char *test, double t0);
#endif
