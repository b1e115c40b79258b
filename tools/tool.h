/* Shared helpers of the qport command (public API only). */
#ifndef QPORT_TOOL_H
#define QPORT_TOOL_H
#include <stdio.h>
#include "qport.h"

int cmd_inspect(int argc, char **argv);
int cmd_bench_resolve(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_moe(int argc, char **argv);
int cmd_bench_chain(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_conform(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_demo_model(int argc, char **argv);

/* The schemes `qport quantize`, `qport bench` and `qport devices` know by
 * name: the rows of the case table (cases.h) that have a tool_name. */
struct case_scheme;
const struct case_scheme *quant_scheme_find(const char *name);
void quant_scheme_list(FILE *f);
const struct case_scheme *quant_scheme_at(size_t i); /* NULL past the end */

/* Help (help.c): one command's full help (-1: no such command), its usage
 * lines for an argument error, and the list of commands. */
int tool_help(FILE *f, const char *cmd);
/* the kind's integer path is bit-exact on every backend (qp_scheme_kind_describe) */
int tool_kind_exact(qp_scheme_kind kind);
/* a monotonic clock in ms; qsort's comparator of doubles (timing.c) */
double tool_now_ms(void);
int tool_cmp_double(const void *a, const void *b);
void tool_usage(FILE *f, const char *cmd);
void tool_help_commands(FILE *f);

/* A stderr log callback at the QPORT_LOG level (default warn). */
void tool_install_log(qp_context *ctx);

/* Temporaries renamed over the output last (tmpfiles.c): removed on
 * SIGINT/SIGTERM/SIGHUP. add returns an id (-1: none free); commit renames
 * to final_path (0 on success; the temporary is removed on failure); drop
 * forgets one, removing it when asked. A dir is removed only if empty. */
int tool_tmp_add(const char *path);
int tool_tmp_add_dir(const char *path);
int tool_tmp_commit(int id, const char *final_path);
void tool_tmp_drop(int id, int remove_it);
void tool_tmp_test_stop(void); /* QPORT_TEST_STOP_BEFORE_RENAME (test hooks) */

/* JSON output helpers */
void json_str(FILE *f, const char *s); /* quoted, escaped; NULL → null */
/* Parses "FUSED=SHARD,SHARD" into a qp_packed_module (strings leaked on
 * purpose: they live until exit). 0 on success. */
int parse_packed(const char *spec, qp_packed_module *out);
/* qport run --output: every device's result of every layer and MoE
 * block, as "<layer>@<device>" tensors [rows, cols]. */
#define RUN_OUTPUTS_MAX 2048
typedef struct run_outputs {
    qp_tensor t[RUN_OUTPUTS_MAX];
    char names[RUN_OUTPUTS_MAX][160];
    void *data[RUN_OUTPUTS_MAX];
    size_t n;
} run_outputs;
/* Copies `y` (rows x cols elements of dt); 0 ok, -1 out of room/memory. */
int run_output_add(run_outputs *o, const char *layer, const char *dev, qp_dtype dt, int rows, int cols, const void *y);

#endif
