/* The harness of the backend tests (tests/cl, tests/vk, tests/cuda): each
 * program dlopens one plugin from QPORT_BACKEND_PATH and drives it through
 * its qp_backend_ops (api/backend.h) with a qp_host of its own, playing the
 * core; the layers it runs come from backend_layers.h, the cpu reference
 * judges them.
 *
 * One program is one topic of one backend (cl-linear, vk-faults, ...):
 *   bh_setup(program)   seed, verbosity, case listing
 *   bh_load(lib, name)  the plugin's ops table (NULL: not found)
 *   bh_init(&state)     a backend state; its device count
 *   bh_use_device(0)    bh_dev, bh_info
 *   ... cases ...
 *   bh_finish()         shutdown, the summary line, exit status
 *
 * Environment (tests only):
 *   QPORT_TEST_SEED=<n>        the data seed (default 20261202), printed
 *   QPORT_TEST_VERBOSE=1       every plugin log line on stderr
 *   QPORT_TEST_LIST_CASES=1    one "CASE <name>" line per compared case
 *   QPORT_TEST_ONLY=a,b        run only these groups (bh_group) */
#ifndef QP_TEST_BACKEND_HARNESS_H
#define QP_TEST_BACKEND_HARNESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "testutil.h"

/* ---- the plugin and the host it is given -------------------------------- */
extern const char *bh_program;        /* "cl-linear", for messages            */
extern const qp_backend_ops *bh_ops;
extern void *bh_state;                /* the state bh_use_device reads        */
extern void *bh_dev;                  /* its device 0                         */
extern qp_device_info bh_info;
extern qp_host bh_host;               /* cache_dir, validation: set before init */
extern char bh_cache_dir[1024];       /* bh_host.cache_dir points here        */
extern char bh_err[16384];            /* the plugin's last error message      */
extern char bh_log[65536];            /* "[level] line\n" since the last bh_init */
extern int bh_verbose;
extern bool bh_print_warnings;        /* WARN and ERROR log lines on stderr too */
/* Vulkan: "vulkan validation:" messages at WARN or above (each one fails
 * the program), and "validation requested but ..." (the layer is missing) */
extern unsigned bh_validation_msgs, bh_validation_missing;

void bh_setup(const char *program);
/* dlopen(dir/lib) for each dir of QPORT_BACKEND_PATH (RTLD_NODELETE: a leak
 * in the plugin keeps its symbols for LeakSanitizer); checks the ABI and,
 * when `name` is not NULL, the ops table's name. */
const qp_backend_ops *bh_load(const char *lib, const char *name);
/* init with bh_host (log cleared first); the device count, 0 when init
 * failed (a failed check). */
int bh_init(void **state);
/* bh_dev := device i of bh_state, bh_info filled (a failed check if not) */
bool bh_use_device(int i);
/* shuts bh_state down (if any), prints "<program>: <cases> cases, ..." and
 * the failures with the seed; the exit status (tu_finish). */
int bh_finish(void);
/* QPORT_TEST_ONLY unset, or `group` in its comma list */
bool bh_group(const char *group);

/* ---- counting ------------------------------------------------------------ */
extern long bh_cases;                 /* compared cases of this program      */
extern long bh_outputs;               /* outputs compared (where counted)    */
/* one compared case: counted, and listed under QPORT_TEST_LIST_CASES */
void bh_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- data ------------------------------------------------------------------ */
extern uint64_t bh_seed, bh_rng;      /* xorshift64 state: save / restore to repeat data */
uint64_t bh_next(void);
uint32_t bh_rand32(void);
float bh_frand(void);                 /* uniform in [-1, 1)                  */
float bh_frange(float lo, float hi);  /* uniform in [lo, hi)                 */
int bh_irand(int lo, int hi);         /* uniform in [lo, hi]                 */
uint16_t bh_enc(qp_dtype dt, float v);   /* fp16 / bf16 bits, RNE            */
float bh_dec(qp_dtype dt, uint16_t b);
/* one unit in the last place of fp16 / bf16 at |v| (subnormal ulp below) */
double bh_ulp(qp_dtype dt, double v);
double bh_now(void);                  /* monotonic seconds                    */
const char *bh_dt_name(qp_dtype dt);  /* "fp16" / "bf16"                     */

/* Activations x [M][K] (fp16 / bf16 bits), values mostly within a few
 * units, one in 32 eight times larger:
 *   bh_x_rows: rows of different magnitudes, every fourth one offset
 *     (asymmetric); row 3 all zero. special: row 2 has a NaN at K/2, row 6
 *     is constant (reductions that skip NaN, docs/semantics.md §12's s = 0 row).
 *   bh_x_blocks (the block-float qdq paths): m % 12 picks the row --
 *     0 plain, 1 blocks of 2^-8..2^7 magnitudes, 3 zero, 4 subnormal
 *     territory, 6 constant 1.5, 8 ties (multiples of 1/8), 9 negative
 *     zeros, 11 wide and narrow blocks; from level BH_X_SPECIALS also 2 a
 *     NaN of each sign, 7 +inf and -inf, 10 values near the largest finite
 *     (saturation); from BH_X_EXTREMES also 5, a block of the dtype's
 *     largest finite value with alternating signs -- for selection weights
 *     only: an fp32 sum of such products overflows where the reference's
 *     double sum need not. Other rows stay plain. */
enum { BH_X_PLAIN = 0, BH_X_SPECIALS = 1, BH_X_EXTREMES = 2 };
void bh_x_rows(qp_dtype dt, uint16_t *x, int M, int K, bool special);
void bh_x_blocks(qp_dtype dt, uint16_t *x, int M, int K, int level);

/* ---- device buffers and forwards ------------------------------------------ */
#define BH_GUARD 4096                 /* bytes checked after every output     */
void *bh_alloc(size_t bytes);         /* a failed check and NULL on failure  */
void bh_free(void *buf);              /* NULL: nothing                        */
/* Runs lin on x [M][K] -> y [M][N] (16-bit elements) through fresh device
 * buffers, the output followed by BH_GUARD bytes of 0xA5 that must stay;
 * false (and a failed check) on any failure. */
bool bh_forward(void *lin, const uint16_t *x, int M, int K, int N, uint16_t *y, const char *what);
/* Bit-for-bit comparison of M x N outputs: the first three differences on
 * stderr, one failed check naming the count; returns the count. */
int bh_compare_exact(const uint16_t *got, const uint16_t *want, int M, int N, qp_dtype dt, const char *what);
/* The float paths' bound (tools/cases.c derives it):
 *   |y - ref| <= c 2^-24 1.01 tsum[m][n] + 2 ulp(ref) (+ extra[m][n])
 * with tsum = sum_k T_k |W_k| (T_k: a bound on the activation as the
 * kernel multiplies it); a NaN in the reference must be a NaN on the
 * device, an inf the same inf. Returns the outputs outside it (three on
 * stderr, one failed check). */
int bh_check_bound(const uint16_t *y, const uint16_t *ref, const double *tsum, double c, const double *extra, int M,
                   int N, qp_dtype dt, const char *what);
/* guard bytes of `buf` (device) from `from` to `to` still 0xA5 */
bool bh_guard_intact(void *buf, size_t from, size_t to);
#endif
