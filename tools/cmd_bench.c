/* qport bench: how fast each scheme's linear layer runs, against what, and
 * how far from the device's limits (issue 10).
 *
 * For every device and scheme: layers of real sizes built from seeded random
 * weights with the scheme table of `qport quantize` (schemes.c) and
 * qp_quantize_weights, timed with the backend's device timers
 * (qp_linear_time) after warm-up, rotating over several copies of the layer
 * and its buffers so caches do not flatter; the median and the spread;
 * achieved bandwidth and arithmetic rate; their ratios to limits measured in
 * the same run (a device-to-device copy; the unquantized fp16 layer of the
 * same shape on the same backend; vendor GEMMs where the backend has them);
 * the speedup over fp16. Public API only. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tool.h"

#define MAX_DEV 16
#define MAX_SCHEMES 64
#define MAX_M 8
#define MAX_COPIES 16

typedef struct bshape { int N, K; const char *what; } bshape;
/* Llama-3 8B (hidden 4096, intermediate 14336) and 70B (8192, 28672):
 * q/o_proj, gate/up_proj, down_proj, 70B gate/up_proj. K x N = in x out. */
static const bshape real_shapes[] = {
    {4096, 4096, "4096x4096 (8B q/o_proj)"},
    {14336, 4096, "4096x14336 (8B gate/up_proj)"},
    {4096, 14336, "14336x4096 (8B down_proj)"},
    {28672, 8192, "8192x28672 (70B gate/up_proj)"},
};
static const bshape tiny_shapes[] = {{128, 256, "256x128 (tiny, tests)"}};
static const int decode_m[] = {1, 4, 16}, prefill_m[] = {128, 512, 2048};
static const int tiny_m[] = {1, 4, 32};

/* Decode (M <= 16) is memory-bound: judged on bandwidth; prefill on
 * arithmetic. */
#define DECODE_MAX_M 16

typedef struct stats { double median, min, max, p10, p90; int n; } stats;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *s, int n, double p) {
    double r = p * (n - 1);
    int i = (int)r;
    return i + 1 < n ? s[i] + (s[i + 1] - s[i]) * (r - i) : s[n - 1];
}

static stats stats_of(const double *v, int n) {
    stats s = {NAN, NAN, NAN, NAN, NAN, n};
    if (n <= 0) return s;
    double *c = malloc(sizeof *c * (size_t)n);
    if (!c) return s;
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    s.median = pct(c, n, 0.5);
    s.min = c[0];
    s.max = c[n - 1];
    s.p10 = pct(c, n, 0.1);
    s.p90 = pct(c, n, 0.9);
    free(c);
    return s;
}

static double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1) */
static float rng_unit(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) * 0x1.0p-52 - 1.0); }

/* What one device offers and what we learnt about it during the run. */
typedef struct bdev {
    qp_device *dev;
    qp_device_info info;
    char name[24];          /* "cuda:0" */
    int representative;     /* 0: CPU-class or the reference */
    double copy_gbps;       /* < 0: unknown */
    char copy_note[320];
    int vendor_ok;          /* -1 unknown, 0 none, 1 has one */
    char vendor_note[320];
    char time_note[640];    /* linear_time unsupported: the reason */
    double est_s_per_flop[MAX_SCHEMES + 1]; /* last observed, per scheme; 0: none */
} bdev;

typedef struct bscheme {
    const char *name;       /* "fp16" or a schemes.c name */
    qp_scheme scheme;
    int unquantized;
    qp_dtype arith;         /* the vendor GEMM operand type its arithmetic maps to */
} bscheme;

typedef struct run {
    qp_context *ctx;
    FILE *json;
    int json_cases;
    int reps, warmup;
    double max_seconds;
    size_t rotate_bytes;
    uint64_t seed;
    int n_ok, n_skip, n_fail;
} run;

static char *fmt_pct(char b[16], double v) {
    if (isfinite(v)) snprintf(b, 16, "%.1f%%", 100 * v);
    else snprintf(b, 16, "n/a");
    return b;
}
static char *fmt_x(char b[16], double v) {
    if (isfinite(v)) snprintf(b, 16, "%.2fx", v);
    else snprintf(b, 16, "n/a");
    return b;
}

static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fputs("null", f);
}

static void json_stats(FILE *f, const stats *s) {
    fputs("\"median_ms\":", f); json_num(f, s->median);
    fputs(",\"spread\":{\"min_ms\":", f); json_num(f, s->min);
    fputs(",\"max_ms\":", f); json_num(f, s->max);
    fputs(",\"p10_ms\":", f); json_num(f, s->p10);
    fputs(",\"p90_ms\":", f); json_num(f, s->p90);
    fprintf(f, ",\"n\":%d}", s->n);
}

static void case_head(run *r, const bdev *d, const char *scheme, const bshape *sh, int M) {
    if (!r->json) return;
    fprintf(r->json, "%s\n    {\"device\":\"%s\",\"scheme\":\"%s\",\"N\":%d,\"K\":%d,\"M\":%d,\"phase\":\"%s\"",
            r->json_cases++ ? "," : "", d->name, scheme, sh->N, sh->K, M, M <= DECODE_MAX_M ? "decode" : "prefill");
}

static void emit_skip(run *r, const bdev *d, const char *scheme, const bshape *sh, int M, const char *verdict,
                      const char *reason) {
    int fail = !strcmp(verdict, "FAIL");
    printf("%-8s %-16s %6d %6d %5d  %s: %s\n", d->name, scheme, sh->N, sh->K, M, verdict, reason);
    if (fail) r->n_fail++; else r->n_skip++;
    if (r->json) {
        case_head(r, d, scheme, sh, M);
        fprintf(r->json, ",\"verdict\":\"%s\",\"reason\":", verdict);
        json_str(r->json, reason);
        fputc('}', r->json);
        fflush(r->json);
    }
}

/* Vendor baselines of one shape: [0] fp16, [1] int8, [2] fp8. */
typedef struct vendor_set { double ms[3]; char name[3][96]; } vendor_set;
static const qp_dtype vendor_dt[3] = {QP_DTYPE_F16, QP_DTYPE_I8, QP_DTYPE_F8_E4M3FN};

static void vendor_measure(run *r, bdev *d, int M, int N, int K, vendor_set *v) {
    for (int i = 0; i < 3; i++) { v->ms[i] = NAN; v->name[i][0] = 0; }
    if (d->vendor_ok == 0) return;
    double *ms = malloc(sizeof *ms * (size_t)r->reps);
    if (!ms) return;
    for (int i = 0; i < 3; i++) {
        qp_status st = qp_vendor_gemm_time(d->dev, vendor_dt[i], M, N, K, r->reps, ms, v->name[i], sizeof v->name[i]);
        if (st == QP_ERR_UNSUPPORTED && d->vendor_ok < 0 && i == 0) {
            d->vendor_ok = 0;
            snprintf(d->vendor_note, sizeof d->vendor_note, "%s", qp_last_error(r->ctx));
            break;
        }
        if (st) { /* this operand type is missing (fp8 before sm_89): noted in the name */
            snprintf(v->name[i], sizeof v->name[i], "unavailable: %.80s", qp_last_error(r->ctx));
            continue;
        }
        d->vendor_ok = 1;
        v->ms[i] = stats_of(ms, r->reps).median;
    }
    free(ms);
}

/* One layer on one device, rotated over `nc` copies. */
typedef struct placed {
    qp_linear *lin[MAX_COPIES];
    qp_buffer *x[MAX_COPIES], *y[MAX_COPIES];
    int nc;
} placed;

static void placed_free(placed *p) {
    for (int i = 0; i < p->nc; i++) {
        qp_linear_destroy(p->lin[i]);
        qp_buffer_destroy(p->x[i]);
        qp_buffer_destroy(p->y[i]);
    }
    p->nc = 0;
}

/* A failure status a benchmark reports as SKIP (the device lacks it). */
static int is_skip_status(qp_status st) {
    return st == QP_ERR_UNSUPPORTED || st == QP_ERR_CAPABILITY || st == QP_ERR_NOT_IMPLEMENTED ||
           st == QP_ERR_OUT_OF_MEMORY;
}

/* Times M rows: warm-up over every copy, then reps rotating over them.
 * Returns the status of the first failing call. */
static qp_status time_case(run *r, placed *p, int M, double est_run_s, double *tot, double *gem, int *n_done,
                           int *warm_done, char *note, size_t cap) {
    qp_status st;
    double t, g;
    note[0] = 0;
    *n_done = 0;
    int warm = r->warmup > p->nc ? r->warmup : p->nc;
    int reps = r->reps;
    /* first run (a warm-up), which also measures */
    if ((st = qp_linear_time(p->lin[0], p->x[0], M, p->y[0], 1, &t, &g))) return st;
    double one = t * 1e-3 > est_run_s ? t * 1e-3 : est_run_s;
    if (one * (warm + reps) > r->max_seconds) {
        /* fit the case into --max-seconds, keeping at least 3 timed runs */
        int fit = (int)(r->max_seconds / (one > 0 ? one : 1e-9));
        warm = fit > 6 ? (warm < fit / 3 ? warm : fit / 3) : 1;
        reps = fit - warm > 3 ? (fit - warm < reps ? fit - warm : reps) : 3;
        if (reps > r->reps) reps = r->reps;
        if (one * 3 > r->max_seconds) {
            tot[0] = t;
            gem[0] = g;
            *n_done = 1;
            *warm_done = 0;
            snprintf(note, cap, "one run only: %.3g s per run exceeds --max-seconds %g / 3", one, r->max_seconds);
            return QP_OK;
        }
        snprintf(note, cap, "reps cut to %d by --max-seconds %g", reps, r->max_seconds);
    }
    for (int i = 1; i < warm; i++)
        if ((st = qp_linear_time(p->lin[i % p->nc], p->x[i % p->nc], M, p->y[i % p->nc], 1, &t, &g))) return st;
    *warm_done = warm;
    for (int i = 0; i < reps; i++) {
        int c = (warm + i) % p->nc;
        if ((st = qp_linear_time(p->lin[c], p->x[c], M, p->y[c], 1, &tot[i], &gem[i]))) return st;
        *n_done = i + 1;
    }
    return QP_OK;
}

/* Per (device, M) results of the fp16 layer of the current shape. */
typedef struct base_row { double fp16_ms; vendor_set v; } base_row;

static void bench_layer(run *r, bdev *d, int si, const bscheme *bs, const bshape *sh, const int *ms, int nm,
                        const qp_tensor *t, size_t nt, size_t weight_bytes, const uint16_t *xh, base_row *base) {
    int maxM = 0;
    for (int i = 0; i < nm; i++) maxM = ms[i] > maxM ? ms[i] : maxM;
    double flops1 = 2.0 * sh->N * (double)sh->K; /* per row */
    /* the device cannot time layers: every case is a SKIP with that reason */
    if (d->time_note[0]) {
        for (int i = 0; i < nm; i++) emit_skip(r, d, bs->name, sh, ms[i], "SKIP", d->time_note);
        return;
    }
    qp_support_info si_;
    if (!bs->unquantized && !qp_device_supports(d->dev, &bs->scheme, 0, sh->N, sh->K, &si_) &&
        si_.level == QP_SUPPORT_UNSUPPORTED) {
        char why[400];
        snprintf(why, sizeof why, "unsupported on %s: %s", d->name, si_.reason);
        for (int i = 0; i < nm; i++) emit_skip(r, d, bs->name, sh, ms[i], "SKIP", why);
        return;
    }
    /* runs predicted to exceed --max-seconds are not attempted */
    int any = 0;
    for (int i = 0; i < nm; i++) any |= !(d->est_s_per_flop[si] * flops1 * ms[i] > r->max_seconds);
    if (!any) {
        for (int i = 0; i < nm; i++) {
            char why[200];
            snprintf(why, sizeof why, "predicted %.3g s per run (from the previous case) exceeds --max-seconds %g",
                     d->est_s_per_flop[si] * flops1 * ms[i], r->max_seconds);
            emit_skip(r, d, bs->name, sh, ms[i], "SKIP", why);
        }
        return;
    }
    /* copies: enough that their weights exceed the rotation size */
    placed p = {0};
    int want = weight_bytes ? (int)((r->rotate_bytes + weight_bytes - 1) / weight_bytes) : 1;
    want = want < 1 ? 1 : want > MAX_COPIES ? MAX_COPIES : want;
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = QP_DTYPE_F16;
    o.layer = bs->name;
    size_t xb = (size_t)maxM * sh->K * 2, yb = (size_t)maxM * sh->N * 2;
    double t0 = wall_s();
    qp_status st = QP_OK;
    for (int c = 0; c < want && !st; c++) {
        st = qp_linear_create(d->dev, &bs->scheme, sh->N, sh->K, t, nt, &o, &p.lin[c]);
        if (!st) st = qp_buffer_create(d->dev, xb, &p.x[c]);
        if (!st) st = qp_buffer_create(d->dev, yb, &p.y[c]);
        if (!st) st = qp_buffer_upload(p.x[c], 0, xh, xb);
        p.nc = c + 1;
        /* out of memory past the first copy: rotate over fewer */
        if (st == QP_ERR_OUT_OF_MEMORY && c > 0) {
            qp_linear_destroy(p.lin[c]); qp_buffer_destroy(p.x[c]); qp_buffer_destroy(p.y[c]);
            p.nc = c;
            st = QP_OK;
            break;
        }
    }
    if (!st) st = qp_device_synchronize(d->dev);
    double prep_s = wall_s() - t0;
    if (st) {
        char why[600];
        snprintf(why, sizeof why, "%s", qp_last_error(r->ctx));
        for (int i = 0; i < nm; i++) emit_skip(r, d, bs->name, sh, ms[i], is_skip_status(st) ? "SKIP" : "FAIL", why);
        placed_free(&p);
        return;
    }
    double *tot = malloc(sizeof *tot * (size_t)r->reps), *gem = malloc(sizeof *gem * (size_t)r->reps);
    for (int mi = 0; mi < nm && tot && gem; mi++) {
        int M = ms[mi];
        double flops = flops1 * M;
        double est = d->est_s_per_flop[si] * flops;
        if (est > r->max_seconds) {
            char why[200];
            snprintf(why, sizeof why, "predicted %.3g s per run (from the previous case) exceeds --max-seconds %g", est,
                     r->max_seconds);
            emit_skip(r, d, bs->name, sh, M, "SKIP", why);
            continue;
        }
        int n = 0, warm = 0;
        char note[160];
        st = time_case(r, &p, M, est, tot, gem, &n, &warm, note, sizeof note);
        if (st) {
            char why[600];
            snprintf(why, sizeof why, "%s", qp_last_error(r->ctx));
            if (st == QP_ERR_UNSUPPORTED && strstr(why, "linear_time")) { /* the whole device */
                snprintf(d->time_note, sizeof d->time_note, "%s", why);
                for (int j = mi; j < nm; j++) emit_skip(r, d, bs->name, sh, ms[j], "SKIP", why);
                break;
            }
            emit_skip(r, d, bs->name, sh, M, is_skip_status(st) ? "SKIP" : "FAIL", why);
            continue;
        }
        stats s = stats_of(tot, n);
        int fused = 0;
        for (int i = 0; i < n; i++) fused |= gem[i] < 0;
        stats sg = fused ? (stats){NAN, NAN, NAN, NAN, NAN, 0} : stats_of(gem, n);
        d->est_s_per_flop[si] = s.median * 1e-3 / flops;
        /* bytes a perfect kernel moves: the stored weights once, x, y */
        double act_b = (double)M * sh->K * 2, out_b = (double)M * sh->N * 2;
        double bytes = (double)weight_bytes + act_b + out_b;
        double gbps = bytes / (s.median * 1e-3) * 1e-9, tflops = flops / (s.median * 1e-3) * 1e-12;
        base_row *b = &base[mi];
        if (bs->unquantized) b->fp16_ms = s.median;
        /* the arithmetic limit: the fastest of the fp16 layer and the vendor
         * GEMMs of fp16 and of the scheme's own operand type */
        double lim_ms = b->fp16_ms;
        const char *lim = isfinite(lim_ms) ? "fp16 layer, same backend" : "";
        char limbuf[128];
        for (int i = 0; i < 3; i++) {
            if (vendor_dt[i] != QP_DTYPE_F16 && vendor_dt[i] != bs->arith) continue;
            if (isfinite(b->v.ms[i]) && !(b->v.ms[i] >= lim_ms)) {
                lim_ms = b->v.ms[i];
                snprintf(limbuf, sizeof limbuf, "%s", b->v.name[i]);
                lim = limbuf;
            }
        }
        double bw_ratio = d->copy_gbps > 0 ? gbps / d->copy_gbps : NAN;
        double ar_ratio = isfinite(lim_ms) ? lim_ms / s.median : NAN;
        double speedup = isfinite(b->fp16_ms) ? b->fp16_ms / s.median : NAN;
        double vs_vendor16 = isfinite(b->v.ms[0]) ? b->v.ms[0] / s.median : NAN;
        int decode = M <= DECODE_MAX_M;
        double eff = decode ? bw_ratio : ar_ratio;
        char path[96] = "";
        qp_linear_describe(p.lin[0], M, path, sizeof path);
        char pb[16], pa[16], pe[16], sp[16];
        printf("%-8s %-16s %6d %6d %5d  %10.4g  %9.4g..%-9.4g %9.4g %7s %9.4g %7s  %7s  %s %s%s%s%s\n",
               d->name, bs->name, sh->N, sh->K, M, s.median, s.p10, s.p90, gbps, fmt_pct(pb, bw_ratio), tflops,
               fmt_pct(pa, ar_ratio), fmt_x(sp, speedup), decode ? "bandwidth" : "arithmetic", fmt_pct(pe, eff),
               d->representative ? "" : " *", note[0] ? "  " : "", note);
        fflush(stdout);
        r->n_ok++;
        if (r->json) {
            FILE *f = r->json;
            case_head(r, d, bs->name, sh, M);
            fputs(",\"verdict\":\"OK\",\"path\":", f);
            json_str(f, path);
            fprintf(f, ",\"representative\":%s,\"reps\":%d,\"warmup\":%d,\"copies_rotated\":%d,\"prepare_s\":%.4g,",
                    d->representative ? "true" : "false", n, warm, p.nc, prep_s);
            json_stats(f, &s);
            fputs(",\"gemm_only\":", f);
            if (fused) fputs("null", f);
            else { fputc('{', f); json_stats(f, &sg); fputc('}', f); }
            fprintf(f, ",\"bytes\":{\"weights\":%zu,\"activations\":%.0f,\"outputs\":%.0f},\"flop\":%.0f,\"GBps\":",
                    weight_bytes, act_b, out_b, flops);
            json_num(f, gbps);
            fputs(",\"TFLOPs\":", f);
            json_num(f, tflops);
            fputs(",\"baselines\":{\"fp16_layer_ms\":", f);
            json_num(f, b->fp16_ms);
            fputs(",\"vendor\":[", f);
            int first = 1;
            for (int i = 0; i < 3; i++) {
                if (!b->v.name[i][0]) continue;
                fprintf(f, "%s{\"dtype\":\"%s\",\"name\":", first ? "" : ",", qp_dtype_name(vendor_dt[i]));
                json_str(f, b->v.name[i]);
                fputs(",\"median_ms\":", f);
                json_num(f, b->v.ms[i]);
                fputs(",\"TFLOPs\":", f);
                json_num(f, flops / (b->v.ms[i] * 1e-3) * 1e-12);
                fputc('}', f);
                first = 0;
            }
            fputs("]},\"ratios\":{\"bandwidth\":", f);
            json_num(f, bw_ratio);
            fputs(",\"arithmetic\":", f);
            json_num(f, ar_ratio);
            fputs(",\"arithmetic_limit\":", f);
            json_str(f, lim[0] ? lim : NULL);
            fputs(",\"speedup_vs_fp16\":", f);
            json_num(f, speedup);
            fputs(",\"speedup_vs_vendor_fp16\":", f);
            json_num(f, vs_vendor16);
            fprintf(f, "},\"judged_on\":\"%s\",\"efficiency\":", decode ? "bandwidth" : "arithmetic");
            json_num(f, eff);
            fputs(",\"note\":", f);
            json_str(f, note);
            fputc('}', f);
            fflush(f);
        }
    }
    free(tot);
    free(gem);
    placed_free(&p);
}

/* The device's bandwidth limit: a timed device-to-device copy. */
static void measure_copy(run *r, bdev *d, size_t bytes) {
    d->copy_gbps = -1;
    qp_buffer *a = NULL, *b = NULL;
    int reps = r->reps < 10 ? 10 : r->reps;
    double *ms = malloc(sizeof *ms * (size_t)(reps + 2));
    qp_status st = ms ? QP_OK : QP_ERR_OUT_OF_MEMORY;
    /* smaller when the device cannot hold two buffers of that size */
    for (; !st && bytes >= (1u << 20); bytes /= 2) {
        st = qp_buffer_create(d->dev, bytes, &a);
        if (!st) st = qp_buffer_create(d->dev, bytes, &b);
        if (st != QP_ERR_OUT_OF_MEMORY) break;
        qp_buffer_destroy(a); qp_buffer_destroy(b);
        a = b = NULL;
        st = QP_OK;
    }
    if (!st && !a) st = QP_ERR_OUT_OF_MEMORY;
    if (!st) {
        /* contents do not matter, but uninitialised device memory may be
         * lazily committed: one copy first (a warm-up) */
        st = qp_buffer_copy_time(a, b, bytes, 2, ms);
        if (!st) st = qp_buffer_copy_time(a, b, bytes, reps, ms);
    }
    if (st) {
        snprintf(d->copy_note, sizeof d->copy_note, "%s", st == QP_ERR_OUT_OF_MEMORY && !a ? "out of memory" : qp_last_error(r->ctx));
    } else {
        stats s = stats_of(ms, reps);
        d->copy_gbps = 2.0 * (double)bytes / (s.median * 1e-3) * 1e-9;
        snprintf(d->copy_note, sizeof d->copy_note, "%zu MiB copy, median %.4g ms of %d (p10 %.4g, p90 %.4g)",
                 bytes >> 20, s.median, reps, s.p10, s.p90);
        if (r->json) {
            fprintf(r->json, ",\"copy_limit\":{\"bytes\":%zu,\"reps\":%d,", bytes, reps);
            json_stats(r->json, &s);
            fputs(",\"GBps\":", r->json);
            json_num(r->json, d->copy_gbps);
            fputc('}', r->json);
        }
    }
    if (st && r->json) {
        fputs(",\"copy_limit\":{\"skip\":", r->json);
        json_str(r->json, d->copy_note);
        fputc('}', r->json);
    }
    qp_buffer_destroy(a);
    qp_buffer_destroy(b);
    free(ms);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: qport bench [--device SPEC]... [--scheme NAME]... [--shapes decode|prefill|all|tiny]\n"
            "                   [--reps N] [--warmup N] [--max-seconds S] [--rotate-mib N] [--seed N]\n"
            "                   [--json FILE] [--list]\n");
}

/* Whole non-negative number in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static qp_dtype arith_of(const qp_scheme *s) {
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8: case QP_SCHEME_QQQ_W4A8: return QP_DTYPE_I8;
    case QP_SCHEME_W8A8_FP8: case QP_SCHEME_W8A8_FP8_BLOCK: case QP_SCHEME_HF_FP8: return QP_DTYPE_F8_E4M3FN;
    default: return QP_DTYPE_F16;
    }
}

int cmd_bench(int argc, char **argv) {
    const char *dev_specs[MAX_DEV], *scheme_names[MAX_SCHEMES];
    int n_dev_specs = 0, n_scheme_names = 0, reps_set = 0, warm_set = 0, max_set = 0;
    const char *shapes_arg = "all", *json_path = NULL;
    run r = {0};
    r.reps = 20;
    r.warmup = 3;
    r.max_seconds = 20;
    r.rotate_bytes = (size_t)256 << 20;
    r.seed = 20261202;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--list")) {
            printf("fp16 (the baseline, always run)\n");
            for (size_t s = 0; quant_scheme_at(s); s++) printf("%s\n", quant_scheme_at(s)->name);
            return 0;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        int takes = !strcmp(a, "--device") || !strcmp(a, "--scheme") || !strcmp(a, "--shapes") || !strcmp(a, "--reps") ||
                    !strcmp(a, "--warmup") || !strcmp(a, "--max-seconds") || !strcmp(a, "--rotate-mib") ||
                    !strcmp(a, "--seed") || !strcmp(a, "--json");
        if (!takes) { fprintf(stderr, "qport bench: unknown argument '%s'\n", a); usage(stderr); return 2; }
        if (!v) { fprintf(stderr, "qport bench: %s needs a value\n", a); usage(stderr); return 2; }
        i++;
        if (!strcmp(a, "--device")) {
            if (n_dev_specs == MAX_DEV) { fprintf(stderr, "qport bench: at most %d --device\n", MAX_DEV); return 2; }
            dev_specs[n_dev_specs++] = v;
        } else if (!strcmp(a, "--scheme")) {
            if (strcmp(v, "fp16") && !quant_scheme_find(v)) {
                fprintf(stderr, "qport bench: unknown scheme '%s'; schemes: fp16 ", v);
                quant_scheme_list(stderr);
                return 2;
            }
            if (n_scheme_names == MAX_SCHEMES) { fprintf(stderr, "qport bench: too many --scheme\n"); return 2; }
            scheme_names[n_scheme_names++] = v;
        } else if (!strcmp(a, "--shapes")) {
            if (strcmp(v, "decode") && strcmp(v, "prefill") && strcmp(v, "all") && strcmp(v, "tiny")) {
                fprintf(stderr, "qport bench: --shapes must be decode, prefill, all or tiny, got '%s'\n", v);
                return 2;
            }
            shapes_arg = v;
        } else if (!strcmp(a, "--reps")) {
            if (parse_int(v, 1, 10000, &n)) { fprintf(stderr, "qport bench: --reps must be a whole number 1..10000, got '%s'\n", v); return 2; }
            r.reps = (int)n;
            reps_set = 1;
        } else if (!strcmp(a, "--warmup")) {
            if (parse_int(v, 0, 1000, &n)) { fprintf(stderr, "qport bench: --warmup must be a whole number 0..1000, got '%s'\n", v); return 2; }
            r.warmup = (int)n;
            warm_set = 1;
        } else if (!strcmp(a, "--max-seconds")) {
            char *end;
            errno = 0;
            double s = strtod(v, &end);
            if (errno || end == v || *end || !(s > 0) || s > 1e6) {
                fprintf(stderr, "qport bench: --max-seconds must be a number > 0, got '%s'\n", v);
                return 2;
            }
            r.max_seconds = s;
            max_set = 1;
        } else if (!strcmp(a, "--rotate-mib")) {
            if (parse_int(v, 0, 1 << 20, &n)) { fprintf(stderr, "qport bench: --rotate-mib must be a whole number 0..1048576, got '%s'\n", v); return 2; }
            r.rotate_bytes = (size_t)n << 20;
        } else if (!strcmp(a, "--seed")) {
            char *end;
            errno = 0;
            r.seed = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-') { fprintf(stderr, "qport bench: bad --seed '%s'\n", v); return 2; }
        } else {
            json_path = v;
        }
    }
    int tiny = !strcmp(shapes_arg, "tiny");
    if (tiny) { /* for tests: seconds, not minutes */
        if (!reps_set) r.reps = 5;
        if (!warm_set) r.warmup = 1;
        if (!max_set) r.max_seconds = 5;
    }
    /* the shape set */
    const bshape *shapes = tiny ? tiny_shapes : real_shapes;
    int n_shapes = tiny ? 1 : (int)(sizeof real_shapes / sizeof *real_shapes);
    int ms[MAX_M], nm = 0;
    if (tiny) for (int i = 0; i < 3; i++) ms[nm++] = tiny_m[i];
    if (!tiny && strcmp(shapes_arg, "prefill")) for (int i = 0; i < 3; i++) ms[nm++] = decode_m[i];
    if (!tiny && strcmp(shapes_arg, "decode")) for (int i = 0; i < 3; i++) ms[nm++] = prefill_m[i];

    if (qp_context_create(&r.ctx)) { fprintf(stderr, "qport bench: cannot create a context\n"); return 1; }
    tool_install_log(r.ctx);
    int rc = 2;
    bdev *devs = calloc(MAX_DEV, sizeof *devs);
    bscheme *sch = calloc(MAX_SCHEMES + 1, sizeof *sch);
    float *w = NULL;
    uint16_t *xh = NULL;
    base_row *base = NULL;
    int n_devs = 0, n_sch = 0;
    if (!devs || !sch) { fprintf(stderr, "qport bench: out of memory\n"); goto done; }
    /* devices: those named, else every device but the cpu reference (its
     * loops are an oracle, not an accelerator) unless it is the only one */
    if (n_dev_specs) {
        for (int i = 0; i < n_dev_specs; i++) {
            qp_device *dv;
            if (qp_device_find(r.ctx, dev_specs[i], &dv)) { fprintf(stderr, "qport bench: %s\n", qp_last_error(r.ctx)); goto done; }
            int dup = 0;
            for (int j = 0; j < n_devs; j++) dup |= devs[j].dev == dv;
            if (!dup) devs[n_devs++].dev = dv;
        }
    } else {
        size_t n = 0;
        if (qp_device_count(r.ctx, &n)) { fprintf(stderr, "qport bench: %s\n", qp_last_error(r.ctx)); goto done; }
        for (size_t i = 0; i < n && n_devs < MAX_DEV; i++) {
            qp_device *dv;
            qp_device_info di = {.struct_size = sizeof di};
            if (qp_device_get(r.ctx, i, &dv) || qp_device_get_info(dv, &di)) continue;
            if (di.same_as[0] || (di.kind == QP_DEVICE_REFERENCE && n > 1)) continue;
            devs[n_devs++].dev = dv;
        }
    }
    for (int d = 0; d < n_devs; d++) {
        bdev *b = &devs[d];
        b->info.struct_size = sizeof b->info;
        qp_device_get_info(b->dev, &b->info);
        snprintf(b->name, sizeof b->name, "%s:%d", b->info.backend, b->info.index);
        b->representative = b->info.kind != QP_DEVICE_CPU_CLASS && b->info.kind != QP_DEVICE_REFERENCE;
        b->vendor_ok = -1;
    }
    /* schemes: the fp16 baseline first, then the table's (or those named),
     * each resolved from its exporter config as `qport quantize` does */
    sch[n_sch++] = (bscheme){"fp16", {.struct_size = sizeof(qp_scheme), .kind = QP_SCHEME_UNQUANTIZED}, 1, QP_DTYPE_F16};
    for (size_t s = 0; quant_scheme_at(s); s++) {
        const quant_scheme *q = quant_scheme_at(s);
        int wanted = !n_scheme_names;
        for (int i = 0; i < n_scheme_names; i++) wanted |= !strcmp(scheme_names[i], q->name);
        if (!wanted) continue;
        qp_config *cfg = NULL;
        bscheme *b = &sch[n_sch];
        if (qp_config_load_buffer(r.ctx, q->name, q->config, strlen(q->config), &cfg) ||
            qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &b->scheme)) {
            fprintf(stderr, "qport bench: scheme %s: %s\n", q->name, qp_last_error(r.ctx));
            qp_config_destroy(cfg);
            rc = 1;
            goto done;
        }
        qp_config_destroy(cfg);
        b->name = q->name;
        b->arith = arith_of(&b->scheme);
        n_sch++;
    }
    if (json_path && !(r.json = fopen(json_path, "w"))) {
        fprintf(stderr, "qport bench: cannot write %s: %s\n", json_path, strerror(errno));
        goto done;
    }
    rc = 1;
    double t_start = wall_s();
    if (r.json) {
        fprintf(r.json, "{\n  \"qport_version\":\"%s\",\"shapes\":\"%s\",\"reps\":%d,\"warmup\":%d,\"max_seconds\":%g,"
                        "\"rotate_bytes\":%zu,\"seed\":%llu,\"act_dtype\":\"F16\",\n  \"devices\":[",
                qp_version(), shapes_arg, r.reps, r.warmup, r.max_seconds, r.rotate_bytes, (unsigned long long)r.seed);
    }
    printf("qport bench: %s shapes, %d reps after %d warm-up runs (median, p10..p90), fp16 activations, seed %llu\n",
           shapes_arg, r.reps, r.warmup, (unsigned long long)r.seed);
    if (!n_devs) printf("no device to benchmark\n");
    for (int d = 0; d < n_devs; d++) {
        bdev *b = &devs[d];
        if (r.json) {
            fprintf(r.json, "%s\n    {\"device\":\"%s\",\"name\":", d ? "," : "", b->name);
            json_str(r.json, b->info.name);
            fprintf(r.json, ",\"kind\":\"%s\",\"representative\":%s,\"note\":", qp_device_kind_name(b->info.kind),
                    b->representative ? "true" : "false");
            json_str(r.json, b->representative ? NULL
                             : b->info.kind == QP_DEVICE_REFERENCE
                                 ? "qport's cpu reference: host-timed exact loops, not representative of GPUs"
                                 : "a GPU API implemented on the CPU: not representative of GPUs");
        }
        measure_copy(&r, b, tiny ? (size_t)16 << 20 : (size_t)256 << 20);
        printf("device %s: %s (%s)%s\n  bandwidth limit: %s%s%.4g GB/s (read + write)\n", b->name, b->info.name,
               qp_device_kind_name(b->info.kind),
               b->representative ? "" : "\n  * NOT REPRESENTATIVE OF GPUS: a CPU implementation; its figures are marked *",
               b->copy_note, b->copy_gbps > 0 ? " = " : " (unknown) ", b->copy_gbps > 0 ? b->copy_gbps : 0.0);
        if (r.json) fputc('}', r.json);
    }
    if (r.json) fputs("\n  ],\n  \"cases\":[", r.json);
    printf("\n%-8s %-16s %6s %6s %5s  %10s  %-20s %9s %7s %9s %7s  %7s  %s\n", "device", "scheme", "N", "K", "M",
           "median ms", "p10..p90 ms", "GB/s", "%copy", "TFLOP/s", "%limit", "vs fp16", "judged on");
    size_t maxM = 0;
    for (int i = 0; i < nm; i++) maxM = (size_t)ms[i] > maxM ? (size_t)ms[i] : maxM;
    base = calloc((size_t)MAX_DEV * MAX_M, sizeof *base);
    if (!base) goto oom;
    for (int shi = 0; shi < n_shapes; shi++) {
        const bshape *sh = &shapes[shi];
        size_t nk = (size_t)sh->N * sh->K;
        uint64_t s = r.seed ^ (0x51ED27ull * (uint64_t)(shi + 1));
        free(w);
        free(xh);
        w = malloc(sizeof *w * nk);
        xh = malloc(sizeof *xh * maxM * (size_t)sh->K);
        if (!w || !xh) goto oom;
        for (size_t i = 0; i < nk; i++) w[i] = 0.05f * rng_unit(&s);
        for (size_t i = 0; i < maxM * (size_t)sh->K; i++) xh[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, rng_unit(&s));
        for (int i = 0; i < MAX_DEV * MAX_M; i++) {
            base[i].fp16_ms = NAN;
            for (int j = 0; j < 3; j++) { base[i].v.ms[j] = NAN; base[i].v.name[j][0] = 0; }
        }
        /* vendor GEMM baselines of this shape, per device and M */
        for (int d = 0; d < n_devs; d++)
            for (int i = 0; i < nm; i++)
                if (!devs[d].time_note[0]) vendor_measure(&r, &devs[d], ms[i], sh->N, sh->K, &base[d * MAX_M + i].v);
        for (int si = 0; si < n_sch; si++) {
            const bscheme *bs = &sch[si];
            qp_qweights *q = NULL;
            qp_tensor t[16];
            size_t nt = 0, wbytes = 0;
            uint16_t *w16 = NULL;
            if (bs->unquantized) {
                w16 = malloc(sizeof *w16 * nk);
                if (!w16 || qp_format_encode_array(QP_DTYPE_F16, w, nk, w16)) { free(w16); goto oom; }
                t[0] = (qp_tensor){"weight", QP_DTYPE_F16, 2, {sh->N, sh->K, 0, 0}, w16};
                nt = 1;
            } else {
                qp_status st = qp_quantize_weights(r.ctx, &bs->scheme, w, sh->N, sh->K, NULL, &q);
                if (st) {
                    char why[600];
                    snprintf(why, sizeof why, "quantizing the weights: %s", qp_last_error(r.ctx));
                    for (int d = 0; d < n_devs; d++)
                        for (int i = 0; i < nm; i++) emit_skip(&r, &devs[d], bs->name, sh, ms[i], is_skip_status(st) ? "SKIP" : "FAIL", why);
                    continue;
                }
                for (size_t i = 0; i < qp_qweights_count(q) && nt < 16; i++) qp_qweights_get(q, i, &t[nt++]);
            }
            for (size_t i = 0; i < nt; i++) wbytes += qp_tensor_bytes(&t[i]);
            for (int d = 0; d < n_devs; d++)
                bench_layer(&r, &devs[d], si, bs, sh, ms, nm, t, nt, wbytes, xh, &base[d * MAX_M]);
            qp_qweights_destroy(q);
            free(w16);
        }
    }
    rc = r.n_fail ? 1 : 0;
    goto finish;
oom:
    fprintf(stderr, "qport bench: out of memory\n");
    rc = 1;
finish:
    int any_cpu = 0;
    for (int d = 0; d < n_devs; d++) any_cpu |= !devs[d].representative;
    if (r.json) {
        fputs("\n  ],\n  \"vendor_baselines\":[", r.json);
        for (int d = 0; d < n_devs; d++) {
            fprintf(r.json, "%s{\"device\":\"%s\",\"available\":%s,\"note\":", d ? "," : "", devs[d].name,
                    devs[d].vendor_ok > 0 ? "true" : "false");
            json_str(r.json, devs[d].vendor_ok == 0 ? devs[d].vendor_note : devs[d].vendor_ok < 0 ? "not measured" : "");
            fputc('}', r.json);
        }
        fprintf(r.json, "],\n  \"summary\":{\"ok\":%d,\"skip\":%d,\"fail\":%d,\"seconds\":%.1f}\n}\n", r.n_ok,
                r.n_skip, r.n_fail, wall_s() - t_start);
    }
    printf("\nbench: %d measured, %d skipped, %d failed, %.1f s%s\n", r.n_ok, r.n_skip, r.n_fail, wall_s() - t_start,
           any_cpu ? "  (* = CPU implementation: not representative of GPUs)" : "");
    for (int d = 0; d < n_devs; d++) {
        if (devs[d].vendor_ok == 0) printf("  %s: no vendor GEMM baselines: %s\n", devs[d].name, devs[d].vendor_note);
        if (devs[d].time_note[0]) printf("  %s: no device timers: %s\n", devs[d].name, devs[d].time_note);
    }
done:
    if (r.json && fclose(r.json)) { fprintf(stderr, "qport bench: writing %s failed\n", json_path); rc = rc ? rc : 1; }
    free(w);
    free(xh);
    free(base);
    free(devs);
    free(sch);
    qp_context_destroy(r.ctx);
    return rc;
}
