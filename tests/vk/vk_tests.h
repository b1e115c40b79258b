/* The Vulkan backend tests (programs tests/vk/test_vk_*.c): the
 * plugin libqport-vk.so against the cpu reference under the Khronos
 * validation layer -- any WARNING or ERROR message fails the program.
 * Seeded random layers (backend_layers.h), M in {1,2,3,5,8,16,17,64,256},
 * K and N around the tile and word edges, fp16 and bf16, the paths GEMV /
 * tiled x int-dot / plain int32, a guard band after every output. Exit 77
 * (skip) without a Vulkan device. */
#ifndef QP_TEST_VK_TESTS_H
#define QP_TEST_VK_TESTS_H
#include "backend_harness.h"
#include "backend_layers.h"

#define VK_MMAX 256
extern const int vk_Ms[];                 /* 1, 2, 3, 5, 8, 16, 17, 64, 256 */
#define VK_NM 9
extern const unsigned vk_int_paths[4];    /* GEMV / tiled x int-dot / plain; the device's share */
extern const unsigned *vk_ip;
extern int vk_nip;
extern long vk_failed;                    /* cases that failed */

/* vk_session.c: the plugin (QPORT_VK_VALIDATION, default 1; pipeline cache
 * in QPORT_CACHE_DIR), its state and device 0: 0, 77 (skip) or 1 */
int vk_open(const char *program);
/* shutdown; the pipeline cache file is there; no validation message */
int vk_close(void);

/* A comparison of one case's outputs y [M][N] (M = ms[mi]); NULL in
 * vk_run_paths: bit for bit against ref[mi]. */
typedef bool (*vk_cmp_fn)(const uint16_t *y, int M, int mi, void *ctx, const char *what);
/* Prepares desc under each path and runs every M of ms on x (rows are
 * independent: prefixes of one x), each (path, M) one case named
 * "<name> [<path>: <describe>] M=<M>". */
void vk_run_paths(const qp_lin_desc *desc, const unsigned *paths, int n_paths, const int *ms, int n_ms,
                  const uint16_t *x, uint16_t *const *ref, qp_dtype out_dt, const char *name, vk_cmp_fn cmp, void *ctx);

/* vk_linear.c: W8A8-INT8 and QQQ W4A8 bit for bit; W8A8-FP8 within the
 * bound of fp32 accumulation (identity: bit for bit, isolating the fp8
 * quantizer and the epilogue). Note the (K, N) order. */
void vk_int8(qp_dtype dt, bool is_static, bool sym, bool bias, bool per_channel, int K, int N, const unsigned *paths,
             int n_paths, const int *ms, int n_ms);
void vk_qqq(int group, bool bias, int K, int N, const unsigned *paths, int n_paths);
void vk_fp8(qp_dtype dt, qp_act_mode act, bool bias, int K, int N, bool identity, const unsigned *paths, int n_paths);
/* the vk-<topic> cases (tests/backend/test_<topic>.c); the fused MoE goes
 * through the public API, a session of its own */
void vk_linear_cases(void);
void vk_w4a16_cases(void);          /* vk_w4a16.c       */
void vk_block_float_cases(void);    /* vk_block_float.c */
void vk_ops_cases(void);            /* vk_ops.c         */
void vk_large_cases(void);          /* vk_large.c       */
void vk_faults_cases(void);         /* vk_faults.c      */
int vk_moe_run(const char *program, int argc, char **argv); /* vk_moe.c */

/* vk_w4a16.c: W4A16 from the canonical fields on auto / GEMV / tiled, M in
 * {1, 3, 16, 17, 70}, within (K + 2) u sum |x w| + 2 ulp; a forced int-dot
 * path refused. (N, K order.) */
void vk_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, bool has_bias, bool padded, int N, int K);

/* vk_block_float.c: the issue-9 layers (OCP-MX, W4A8-MXFP4-FP8, NVFP4,
 * unquantized, W8A8-FP8 per-block) on auto / GEMV / tiled, M in {1, 3, 16,
 * 17, 64}: selection weights (sel; N = K) bit for bit, random layers within
 * (K + 2) u 1.01 sum |x'| |W| + 2 ulp (fp8 per-block: tools/cases.c's
 * bound), x' from the reference itself through an identity weight. */
typedef enum vk_fl_kind { FL_MX = 0, FL_W4A8, FL_NVFP4, FL_UNQ, FL_FP8B } vk_fl_kind;
typedef struct vk_fl_case {
    vk_fl_kind kind;
    qp_dtype dt, w_elem;
    qp_ocp_mx_act act;
    int K, N;
    bool sel, bias;
    int ue8m0;
} vk_fl_case;
/* the layer of a case (N: its N, or K for selection / identity layers) */
bool vk_fl_layer(const vk_fl_case *c, int N, bh_sel sel, bh_layer *L);
void vk_fl(const vk_fl_case *c);
#endif
