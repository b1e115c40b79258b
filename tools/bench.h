/* qport bench's linear-layer mode, shared between its phases: the command
 * line (bench_args.c) and the measurements (cmd_bench.c). */
#ifndef QPORT_BENCH_H
#define QPORT_BENCH_H
#include <stdint.h>
#include <stdio.h>

#include "qport.h"

#define MAX_DEV 16
#define MAX_SCHEMES 64
#define MAX_SIZES 16
#define MAX_M 8
#define MAX_COPIES 16

typedef struct bshape { int N, K; char what[48]; } bshape;

/* The run's settings (from the command line) and its state. */
typedef struct bench_run {
    qp_context *ctx;
    FILE *json;
    int json_cases;
    int reps, warmup, jobs, max_copies;
    double max_seconds;
    size_t rotate_bytes;
    uint64_t seed;
    int n_ok, n_skip, n_fail;
} bench_run;

/* What the command line asked for, besides the run's settings. */
typedef struct bench_opts {
    const char *dev_specs[MAX_DEV], *scheme_names[MAX_SCHEMES];
    int n_dev_specs, n_scheme_names;
    bshape sizes[MAX_SIZES];
    int n_sizes;
    const char *shapes_arg, *json_path;
    int tiny;
    int ms[MAX_M], nm;
    size_t maxM;
} bench_opts;

/* Fills o and r's settings from argv; -1 to go on, else the exit status
 * (0 after --list or --help, 2 for a bad argument, already said). */
int bench_parse(int argc, char **argv, bench_opts *o, bench_run *r);
#endif
