/* qport conform's shared state: the run, its tallies and the line every
 * compared case emits (cmd_conform.c: linear cases, conform_moe.c: MoE). */
#ifndef QPORT_CONFORM_H
#define QPORT_CONFORM_H
#include <stdio.h>

#include "progress.h"
#include "qport.h"

#define MAX_DEV 32
#define MAX_ROWS 64 /* summary rows: linear case schemes, then moe:* */

typedef struct tally { int pass, fail, skip; } tally;

typedef struct run {
    qp_context *ctx;
    FILE *json, *csv;
    int json_first;
    uint64_t seed;
    int verbose;
    tally t[MAX_DEV][MAX_ROWS];
    int n_fail;
    tool_progress prog;
} run;

void conform_emit(run *r, const char *scheme, int M, int N, int K, qp_dtype dt, const char *dist, const char *dev,
                  const char *path, const char *verdict, double max_abs, double max_rel, double nmse, long bad,
                  const char *note);

/* The MoE cases of every selected MoE scheme (names "moe:<scheme>",
 * NULL/0: all) on each device against the cpu reference; tallies go to
 * rows row0 + i. Returns the number of cases compared or skipped. */
long conform_moe(run *r, qp_device *refdev, qp_device *const *devs, const char (*devname)[64], int n_devs, int full,
                 const char *const *schemes, int n_schemes, int row0);
/* How many cases conform_moe will compare (for the progress line). */
long conform_moe_count(int full, const char *const *schemes, int n_schemes, int n_devs);
#endif
