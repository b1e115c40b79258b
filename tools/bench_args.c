/* qport bench's command line: argv into the run's settings, the devices and
 * schemes named, and the sizes and token counts to measure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cases.h"
#include "tool.h"

/* Llama-3 8B (hidden 4096, intermediate 14336) and 70B (8192, 28672):
 * q/o_proj, gate/up_proj, down_proj, 70B gate/up_proj; K x N = in x out. */
static const bshape real_shapes[] = {
    {4096, 4096, "8B q/o_proj"},
    {14336, 4096, "8B gate/up_proj"},
    {4096, 14336, "8B down_proj"},
    {28672, 8192, "70B gate/up_proj"},
};
static const bshape tiny_shape = {128, 256, "tiny (tests)"};
static const int decode_m[] = {1, 4, 16}, prefill_m[] = {128, 512, 2048}, tiny_m[] = {1, 4, 32};

/* Which settings were given, so --shapes tiny changes only the others. */
typedef struct given { int reps, warm, max, rot; } given;

static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_size(bench_opts *o, const char *v) {
    int k, nn, used = 0;
    if (sscanf(v, "%dx%d%n", &k, &nn, &used) != 2 || v[used] || k < 1 || nn < 1 || k > 1 << 20 || nn > 1 << 20) {
        fprintf(stderr, "qport bench: --size must be KxN (input x output features), got '%s'\n", v);
        return 2;
    }
    if (o->n_sizes == MAX_SIZES) { fprintf(stderr, "qport bench: at most %d --size\n", MAX_SIZES); return 2; }
    o->sizes[o->n_sizes++] = (bshape){nn, k, ""};
    return 0;
}

/* The settings that are numbers; 0, or 2 after saying what is wrong. */
static int parse_number(bench_run *r, given *g, const char *a, const char *v) {
    long n;
    if (!strcmp(a, "--reps")) {
        if (parse_long(v, 1, 10000, &n)) { fprintf(stderr, "qport bench: --reps must be a whole number 1..10000, got '%s'\n", v); return 2; }
        r->reps = (int)n;
        g->reps = 1;
    } else if (!strcmp(a, "--warmup")) {
        if (parse_long(v, 0, 1000, &n)) { fprintf(stderr, "qport bench: --warmup must be a whole number 0..1000, got '%s'\n", v); return 2; }
        r->warmup = (int)n;
        g->warm = 1;
    } else if (!strcmp(a, "--jobs")) {
        if (parse_long(v, 1, 64, &n)) { fprintf(stderr, "qport bench: --jobs must be a whole number 1..64, got '%s'\n", v); return 2; }
        r->jobs = (int)n;
    } else if (!strcmp(a, "--max-seconds")) {
        char *end;
        errno = 0;
        double sec = strtod(v, &end);
        if (errno || end == v || *end || !(sec > 0) || sec > 1e6) {
            fprintf(stderr, "qport bench: --max-seconds must be a number > 0, got '%s'\n", v);
            return 2;
        }
        r->max_seconds = sec;
        g->max = 1;
    } else if (!strcmp(a, "--rotate-mib")) {
        if (parse_long(v, 0, 1 << 20, &n)) { fprintf(stderr, "qport bench: --rotate-mib must be a whole number 0..1048576, got '%s'\n", v); return 2; }
        r->rotate_bytes = (size_t)n << 20;
        g->rot = 1;
    } else { /* --seed */
        char *end;
        errno = 0;
        r->seed = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-') { fprintf(stderr, "qport bench: bad --seed '%s'\n", v); return 2; }
    }
    return 0;
}

/* One option with a value; 0, or 2 after saying what is wrong. */
static int parse_valued(bench_opts *o, bench_run *r, given *g, const char *a, const char *v) {
    if (!strcmp(a, "--device")) {
        if (o->n_dev_specs == MAX_DEV) { fprintf(stderr, "qport bench: at most %d --device\n", MAX_DEV); return 2; }
        o->dev_specs[o->n_dev_specs++] = v;
    } else if (!strcmp(a, "--scheme")) {
        if (strcmp(v, "fp16") && !quant_scheme_find(v)) {
            fprintf(stderr, "qport bench: unknown scheme '%s'; schemes: fp16 ", v);
            quant_scheme_list(stderr);
            return 2;
        }
        if (o->n_scheme_names == MAX_SCHEMES) { fprintf(stderr, "qport bench: too many --scheme\n"); return 2; }
        o->scheme_names[o->n_scheme_names++] = v;
    } else if (!strcmp(a, "--shapes")) {
        if (strcmp(v, "decode") && strcmp(v, "prefill") && strcmp(v, "all") && strcmp(v, "tiny")) {
            fprintf(stderr, "qport bench: --shapes must be decode, prefill, all or tiny, got '%s'\n", v);
            return 2;
        }
        o->shapes_arg = v;
    } else if (!strcmp(a, "--size")) {
        return parse_size(o, v);
    } else if (!strcmp(a, "--json")) {
        o->json_path = v;
    } else {
        return parse_number(r, g, a, v);
    }
    return 0;
}

/* The sizes and token counts the shapes asked for; -1, or 2 after saying
 * what is wrong. */
static int plan_shapes(bench_opts *o, bench_run *r, const given *g) {
    o->tiny = !strcmp(o->shapes_arg, "tiny");
    if (o->tiny) { /* for tests: seconds, not minutes */
        if (!g->reps) r->reps = 5;
        if (!g->warm) r->warmup = 1;
        if (!g->max) r->max_seconds = 5;
        if (!g->rot) r->rotate_bytes = (size_t)1 << 20;
        r->max_copies = 2; /* both ways of defeating caches, cheaply */
        if (o->n_sizes) { fprintf(stderr, "qport bench: --shapes tiny has its own size; drop --size\n"); return 2; }
        o->sizes[o->n_sizes++] = tiny_shape;
    }
    if (!o->n_sizes)
        for (size_t i = 0; i < sizeof real_shapes / sizeof *real_shapes; i++) o->sizes[o->n_sizes++] = real_shapes[i];
    o->nm = 0;
    if (o->tiny) for (int i = 0; i < 3; i++) o->ms[o->nm++] = tiny_m[i];
    if (!o->tiny && strcmp(o->shapes_arg, "prefill")) for (int i = 0; i < 3; i++) o->ms[o->nm++] = decode_m[i];
    if (!o->tiny && strcmp(o->shapes_arg, "decode")) for (int i = 0; i < 3; i++) o->ms[o->nm++] = prefill_m[i];
    o->maxM = 0;
    for (int i = 0; i < o->nm; i++) o->maxM = (size_t)o->ms[i] > o->maxM ? (size_t)o->ms[i] : o->maxM;
    return -1;
}

int bench_parse(int argc, char **argv, bench_opts *o, bench_run *r) {
    memset(o, 0, sizeof *o);
    o->shapes_arg = "all";
    memset(r, 0, sizeof *r);
    r->reps = 20;
    r->warmup = 3;
    r->max_seconds = 20;
    r->rotate_bytes = (size_t)256 << 20;
    r->seed = 20261202;
    r->max_copies = MAX_COPIES;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    r->jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    given g = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) {
            printf("fp16 (the baseline, always run)\n");
            for (size_t s = 0; quant_scheme_at(s); s++) printf("%s\n", quant_scheme_at(s)->tool_name);
            return 0;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { tool_help(stdout, "bench"); return 0; }
        static const char *const valued[] = {"--device", "--scheme", "--shapes", "--size", "--reps", "--warmup",
                                             "--max-seconds", "--rotate-mib", "--jobs", "--seed", "--json"};
        int takes = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) takes |= !strcmp(a, valued[k]);
        if (!takes) { fprintf(stderr, "qport bench: unknown argument '%s'\n", a); tool_usage(stderr, "bench"); return 2; }
        if (!v) { fprintf(stderr, "qport bench: %s needs a value\n", a); tool_usage(stderr, "bench"); return 2; }
        i++;
        if (parse_valued(o, r, &g, a, v)) return 2;
    }
    return plan_shapes(o, r, &g);
}
