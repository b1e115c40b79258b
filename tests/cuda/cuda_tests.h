/* The CUDA backend tests (programs tests/cuda/test_cuda_*.c): the
 * plugin libqport-cuda.so (QPORT_TEST_CUDA_PLUGIN: another file name, to
 * test the tests) against the cpu reference on cuda:0 -- W8A8-INT8 and
 * QQQ bit for bit, the float paths within their bounds, every path, guard
 * bands; exit 77 (skip) without a device. The same programs run on the CPU
 * emulator of tests/cuda_emu (sm_90 / 86 / 75), where
 * QPORT_TEST_CUDA_SMALL=1 keeps M in {1, 17, 64} (and big shapes at M <=
 * 17), =2 M in {3, 17}. */
#ifndef QP_TEST_CUDA_TESTS_H
#define QP_TEST_CUDA_TESTS_H
#include "backend_harness.h"
#include "backend_layers.h"

extern int cuda_is_cuda;                  /* the plugin is "cuda" (not another one under test) */
extern const int cuda_Ms[];               /* 1, 2, 3, 5, 8, 16, 17, 64, 256 */
#define CUDA_NM 9
extern long cuda_exact, cuda_exact_bad;   /* bit-exact comparisons, and mismatching ones */
extern long cuda_f_cases, cuda_f_exact;   /* float-path cases; of them, selection cases */
extern double cuda_f_worst;               /* worst error / bound of the last group */

/* cuda_session.c: plugin and state (load failures are failed checks) */
bool cuda_load(const char *program);
/* ... and cuda:0 (0; 77: no device, skip) */
int cuda_open(const char *program);
/* "cuda: N exact comparisons, M mismatching, T s" and the end */
int cuda_close(void);
/* the cuda-<topic> cases (tests/backend/test_<topic>.c); large (not on the
 * emulator) and the fused MoE (the public API) keep sessions of their own */
void cuda_linear_cases(void);       /* cuda_linear.c      */
void cuda_w4a16_cases(void);        /* cuda_w4a16.c       */
void cuda_block_float_cases(void);  /* cuda_block_float.c */
void cuda_ops_cases(void);          /* cuda_ops.c         */
void cuda_faults_cases(void);       /* cuda_faults.c      */
int cuda_large_run(const char *program, int argc, char **argv); /* cuda_large.c */
int cuda_moe_run(const char *program, int argc, char **argv);   /* cuda_moe.c   */

/* QPORT_TEST_CUDA_SMALL: M rows this run leaves out (linear layers of N x K;
 * the float paths' lists ignore the size) */
bool cuda_skip_m(int M, int N, int K);
bool cuda_f_skip_m(int M);
/* Prepares d on path, runs M rows of x into y, destroys it; false when
 * prepare refused (a failed check unless another plugin is under test and
 * it said QP_ERR_UNSUPPORTED). desc_out [128]: linear_describe's words. */
bool cuda_run_layer(const qp_lin_desc *d, unsigned path, int M, const uint16_t *x, uint16_t *y, char *desc_out);
/* one bit-exact comparison case */
void cuda_compare_exact(const char *what, qp_dtype dt, const uint16_t *ref, const uint16_t *got, int M, int N);
/* The float paths (W4A16, unquantized, block float): every row count of
 * {1, 3, 16, 17, 64} up to MM, on auto / GEMV / tiled (forced tiled
 * refused below sm_75, and for bf16 below sm_80); ref [MM][N] serves every
 * prefix. exact: bit for bit; else within (K + 2) u 1.01 sum_k |xs_k W_k|
 * + u |bias| + 2 ulp, xs [MM][K] the activations as the kernel multiplies
 * them, wd [N][K] the weights. */
void cuda_f_run(const qp_lin_desc *d, int MM, const uint16_t *x, const uint16_t *ref, const float *xs,
                const double *wd, bool exact);
#endif
