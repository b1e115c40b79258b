/* The OpenCL backend tests (programs tests/cl/test_cl_*.c): the
 * plugin libqport-cl.so driven through its ops table against the cpu
 * reference on PoCL, over a shape matrix (M in 1,2,3,5,8,16,17,64,256; K
 * and N off the tile and vector edges) on the automatic, GEMV and tiled
 * paths, fp16 and bf16, with a guard band after every output.
 *
 * A runner below is one layer: prepared once per path, run for every M of
 * its list, each (M, path) one case. QPORT_TEST_CACHE_DIR: the program
 * cache folder (default cl-test-cache). */
#ifndef QP_TEST_CL_TESTS_H
#define QP_TEST_CL_TESTS_H
#include "backend_harness.h"
#include "backend_layers.h"

extern const int cl_Ms[];                 /* 1, 2, 3, 5, 8, 16, 17, 64, 256 */
#define CL_NM 9
extern const unsigned cl_paths[3];        /* auto, GEMV, tiled              */
extern const char *const cl_path_name[3];
extern long cl_fw_exact;                  /* outputs compared bit for bit on selection weights */

/* cl_session.c: the plugin, its state and device 0 (0; 77 without a
 * device: skip; 1 when the plugin does not load), and the end */
int cl_open(const char *program);
int cl_close(void);
/* a fresh state of the plugin (after a QPORT_CL_* knob changed): bh_state
 * shut down and re-initialised, bh_dev its device 0; false without one */
bool cl_reopen(void);
/* forward time of a layer on the device (buffers resident), for the log */
void cl_time_forward(const qp_lin_desc *d, unsigned path, int M, const char *what);
/* prepare (and with check_output one forward against the reference) of
 * cl_small_int8_desc on a fresh state of the plugin: the program cache
 * consulted, the build log in bh_log; the prepare status */
qp_status cl_fresh_prepare(bool check_output);
/* a 64x64 (or N x 64, N <= 96) dynamic symmetric int8 layer with
 * deterministic weights, for the fault and mode checks */
qp_lin_desc cl_small_int8_desc(int8_t *w, float *ws);

/* cl_linear.c: W8A8-INT8 and QQQ bit-exact with the reference; W8A8-FP8
 * within the fp32-accumulation bound, bit-exact on identity weights (the
 * GEMM is exact: the fp8 activation codes are compared one for one);
 * W4A16 and fp8 per-block within the float-path bound of tools/cases.c,
 * fp8 per-block identity layers bit-exact. extra_path: or'ed into every
 * path (QP_PATH_INT_DOT for the int-dot kernels). */
void cl_int8(qp_dtype dt, int is_static, int sym, int per_channel, int has_bias, int N, int K, const int *ms, int nms,
             unsigned extra_path);
void cl_fp8(qp_dtype dt, int act, int per_channel, int has_bias, int identity, int N, int K, const int *ms, int nms);
void cl_qqq(int group, int has_bias, int N, int K, const int *ms, int nms, unsigned extra_path);
/* the cl-<topic> cases (tests/backend/test_<topic>.c); cl-no-platform
 * (no ICD at all) and the fused MoE (the public API) keep sessions of
 * their own */
void cl_linear_cases(void);
void cl_w4a16_cases(void);          /* cl_w4a16.c       */
void cl_block_float_cases(void);    /* cl_block_float.c */
void cl_ops_cases(void);            /* cl_ops.c         */
void cl_large_cases(void);          /* cl_large.c       */
void cl_faults_cases(void);         /* cl_faults.c      */
int cl_no_platform_run(const char *program, int argc, char **argv); /* cl_faults.c */
int cl_moe_run(const char *program, int argc, char **argv);    /* cl_moe.c    */
void cl_w4a16(qp_dtype dt, qp_pack_method pack, int sym, int group, int has_bias, int padded, int N, int K,
              const int *ms, int nms);
void cl_fp8_block(qp_dtype dt, int ue8m0, int has_bias, int identity, int N, int K, const int *ms, int nms);

/* cl_block_float.c: OCP-MX / W4A8-MXFP4-FP8 / NVFP4 / unquantized from
 * checkpoint tensors through the core's binder, on GEMV and tiled: sel,
 * selection weights compared bit for bit; otherwise random codes and
 * scales (far e8m0 ones: fp16 saturation and flush) within K 2^-24
 * sum_k |x'_k||W_k| + 2 ulp (+ the pre-bias rounding of NVFP4); stress:
 * NaN, inf and huge rows. */
void cl_fw(bh_fw_kind kind, qp_dtype dt, qp_dtype we, qp_ocp_mx_act act, int sel, int has_bias, int stress, int N,
           int K, const int *ms, int nms);

/* cl_ops.c: rotation (Sylvester's Hadamard or random signs, r | K = 3r)
 * and the fp8 KV cache (every fp16 / bf16 pattern, every code), bit-exact
 * and in place */
void cl_rotation(qp_dtype dt, int r, int hadamard, const int *ms, int nms);
void cl_kv(qp_dtype dt, float scale);
#endif
