/* qport bench: how fast each scheme's linear layer runs, against what, and
 * how far from the device's limits (issue 10).
 *
 * For every device and scheme: layers of real sizes built from seeded random
 * weights with the scheme table of `qport quantize` (schemes.c) and
 * qp_quantize_weights, timed with the backend's device timers
 * (qp_linear_time) after warm-up, rotating over several input/output
 * buffers (and copies of the layer, or a cache-flushing device copy between
 * runs) so caches do not flatter; the median and the spread; achieved
 * bandwidth and arithmetic rate; their ratios to limits measured in the same
 * run (a device-to-device copy; the unquantized fp16 layer of the same shape
 * on the same backend; vendor GEMMs where the backend has them); the speedup
 * over fp16. Public API only. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "tool.h"

#define MAX_DEV 16
#define MAX_SCHEMES 64
#define MAX_SIZES 16
#define MAX_M 8
#define MAX_COPIES 16
#define NX 4                 /* input/output buffers rotated over          */
#define COPY_PREP_S 1.0      /* extra layer copies only while this cheap   */
#define DECODE_MAX_M 16      /* decode: memory-bound, judged on bandwidth  */

typedef struct bshape { int N, K; char what[48]; } bshape;
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

typedef struct stats { double median, min, max, p10, p90; int n; } stats;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between order statistics. */
static double pct(const double *s, int n, double p) {
    double r = p * (n - 1);
    int i = (int)r;
    return i + 1 < n ? s[i] + (s[i + 1] - s[i]) * (r - i) : s[n - 1];
}

static stats stats_of(const double *v, int n) {
    stats s = {NAN, NAN, NAN, NAN, NAN, n};
    double *c = n > 0 ? malloc(sizeof *c * (size_t)n) : NULL;
    if (!c) return s;
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    s = (stats){pct(c, n, 0.5), c[0], c[n - 1], pct(c, n, 0.1), pct(c, n, 0.9), n};
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
/* fp32 -> fp16 bits, round to nearest even, for the finite values this
 * tool makes (|x| <= 1): a fast path for hundreds of millions of weights,
 * checked against qp_format_encode on the first elements of every size. */
static uint16_t f16_rne(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504 (no NaN here) */
    if (a < 0x38800000u) { /* fp16 subnormal or zero: scale so the ulp is 1, round */
        float f;
        memcpy(&f, &a, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(f * 16777216.0f));
    }
    uint32_t r = a + 0xFFFu + ((a >> 13) & 1u) - 0x38000000u; /* rebias 127 -> 15, RNE on 13 bits */
    return (uint16_t)(sign | (r >> 13));
}

static float rng_unit(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) * 0x1.0p-52 - 1.0); } /* [-1, 1) */

/* One device and what the run learnt about it. */
typedef struct bdev {
    qp_device *dev;
    qp_device_info info;
    char name[24];          /* "cuda:0" */
    int representative;     /* 0: CPU-class or the reference */
    double copy_gbps;       /* < 0: unknown */
    char copy_note[320];
    qp_buffer *fa, *fb;     /* the copy's buffers, reused to flush caches */
    size_t flush_bytes;
    int vendor_ok;          /* -1 unknown, 0 none, 1 has one */
    char vendor_note[320];
    char time_note[640];    /* linear_time unsupported: the reason */
    double est_s_per_flop[MAX_SCHEMES + 1]; /* last observed, per scheme; 0: none */
    /* per scheme and phase (0 decode, 1 prefill): sums of logs of the
     * speedup over fp16 and of the judged efficiency, for geometric means */
    double lsp[MAX_SCHEMES + 1][2], leff[MAX_SCHEMES + 1][2];
    int nsp[MAX_SCHEMES + 1][2], neff[MAX_SCHEMES + 1][2];
} bdev;

typedef struct bscheme {
    const char *name;       /* "fp16" or a schemes.c name */
    qp_scheme scheme;
    int unquantized;
    qp_dtype arith;         /* the vendor GEMM operand type its arithmetic maps to */
} bscheme;

/* One scheme's checkpoint tensors for the current shape. */
typedef struct prep_job {
    const bscheme *bs;
    int needed;
    const float *w;
    int N, K;
    qp_context *ctx;
    qp_qweights *q;
    uint16_t *w16;
    qp_tensor t[16];
    size_t nt, wbytes;
    qp_status st;
    char err[600];
    double seconds;
} prep_job;

typedef struct run {
    qp_context *ctx;
    FILE *json;
    int json_cases;
    int reps, warmup, jobs, max_copies;
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
    printf("%-8s %-16s %6d %6d %5d  %s: %s\n", d->name, scheme, sh->N, sh->K, M, verdict, reason);
    fflush(stdout);
    if (!strcmp(verdict, "FAIL")) r->n_fail++;
    else r->n_skip++;
    if (r->json) {
        case_head(r, d, scheme, sh, M);
        fprintf(r->json, ",\"verdict\":\"%s\",\"reason\":", verdict);
        json_str(r->json, reason);
        fputc('}', r->json);
        fflush(r->json);
    }
}

static void emit_skip_all(run *r, const bdev *d, const char *scheme, const bshape *sh, const int *ms, int nm,
                          const char *verdict, const char *reason) {
    for (int i = 0; i < nm; i++) emit_skip(r, d, scheme, sh, ms[i], verdict, reason);
}

/* A failure status a benchmark reports as SKIP (the device lacks it). */
static int is_skip_status(qp_status st) {
    return st == QP_ERR_UNSUPPORTED || st == QP_ERR_CAPABILITY || st == QP_ERR_NOT_IMPLEMENTED ||
           st == QP_ERR_OUT_OF_MEMORY;
}

/* Vendor baselines of one shape and M: fp16, int8, fp8. */
typedef struct vendor_set { double ms[3]; char name[3][96]; } vendor_set;
static const qp_dtype vendor_dt[3] = {QP_DTYPE_F16, QP_DTYPE_I8, QP_DTYPE_F8_E4M3FN};

static void vendor_measure(run *r, bdev *d, int M, int N, int K, vendor_set *v) {
    for (int i = 0; i < 3; i++) { v->ms[i] = NAN; v->name[i][0] = 0; }
    if (d->vendor_ok == 0 || d->time_note[0]) return;
    double *ms = malloc(sizeof *ms * (size_t)r->reps);
    if (!ms) return;
    for (int i = 0; i < 3; i++) {
        qp_status st = qp_vendor_gemm_time(d->dev, vendor_dt[i], M, N, K, r->reps, ms, v->name[i], sizeof v->name[i]);
        /* the core's answer for a backend without the op: none at all (a
         * backend's own refusal of one operand type or shape is per case) */
        if (st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(r->ctx), "has no vendor GEMM library baseline")) {
            d->vendor_ok = 0;
            snprintf(d->vendor_note, sizeof d->vendor_note, "%s", qp_last_error(r->ctx));
            v->name[i][0] = 0;
            break;
        }
        if (st) { /* this operand type is missing (fp8 before sm_89): said in the name */
            snprintf(v->name[i], sizeof v->name[i], "unavailable: %.80s", qp_last_error(r->ctx));
            continue;
        }
        d->vendor_ok = 1;
        v->ms[i] = stats_of(ms, r->reps).median;
    }
    free(ms);
}

/* One layer on one device: copies of it and NX input/output buffers. */
typedef struct placed {
    qp_linear *lin[MAX_COPIES];
    int nc;
    qp_buffer *x[NX], *y[NX];
    int flush;              /* flush caches with a device copy before each timed run */
} placed;

static void placed_free(placed *p) {
    for (int i = 0; i < p->nc; i++) qp_linear_destroy(p->lin[i]);
    for (int i = 0; i < NX; i++) { qp_buffer_destroy(p->x[i]); qp_buffer_destroy(p->y[i]); }
    memset(p, 0, sizeof *p);
}

/* Run i: layer copy i % nc on buffers i % NX; `flush` first evicts the
 * caches with an untimed copy. */
static qp_status run_one(bdev *d, placed *p, int i, int M, int flush, double *t, double *g) {
    qp_status st;
    if (flush && ((st = qp_buffer_copy(d->fa, 0, d->fb, 0, d->flush_bytes)) || (st = qp_device_synchronize(d->dev))))
        return st;
    return qp_linear_time(p->lin[i % p->nc], p->x[i % NX], M, p->y[i % NX], 1, t, g);
}

/* Warm-up over every copy and buffer, then the timed runs; fits the case
 * into --max-seconds (at least 3 timed runs, or 1 when one run is longer
 * than a third of it). */
static qp_status time_case(run *r, bdev *d, placed *p, int M, double est_run_s, double *tot, double *gem, int *n_done,
                           int *warm_done, char *note, size_t cap) {
    qp_status st;
    double t, g;
    note[0] = 0;
    *n_done = *warm_done = 0;
    int warm = r->warmup, need = p->nc > NX ? p->nc : NX;
    warm = warm > need ? warm : need;
    int reps = r->reps;
    if ((st = run_one(d, p, 0, M, 0, &t, &g))) return st; /* the first warm-up run also measures */
    double one = t * 1e-3 > est_run_s ? t * 1e-3 : est_run_s;
    if (one * (warm + reps) > r->max_seconds) {
        if (one * 3 > r->max_seconds) {
            tot[0] = t;
            gem[0] = g;
            *n_done = 1;
            snprintf(note, cap, "one run only: %.3g s per run exceeds --max-seconds %g / 3", one, r->max_seconds);
            return QP_OK;
        }
        int fit = (int)(r->max_seconds / one);
        warm = fit > 6 ? (warm < fit / 3 ? warm : fit / 3) : 1;
        reps = fit - warm > 3 ? (fit - warm < reps ? fit - warm : reps) : 3;
        if (reps > r->reps) reps = r->reps;
        snprintf(note, cap, "%d warm-up and %d timed runs to fit --max-seconds %g", warm, reps, r->max_seconds);
    }
    for (int i = 1; i < warm; i++)
        if ((st = run_one(d, p, i, M, 0, &t, &g))) return st;
    *warm_done = warm;
    for (int i = 0; i < reps; i++) {
        if ((st = run_one(d, p, warm + i, M, p->flush, &tot[i], &gem[i]))) return st;
        *n_done = i + 1;
    }
    return QP_OK;
}

/* Per (device, M) baselines of the current shape. */
typedef struct base_row { double fp16_ms; vendor_set v; } base_row;

/* Creates the layer (and cheap copies) and the buffers. */
static qp_status place(run *r, bdev *d, const bscheme *bs, const bshape *sh, const prep_job *j, int maxM,
                       const uint16_t *xh, placed *p, double *prep_s) {
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = QP_DTYPE_F16;
    o.layer = bs->name;
    int want = j->wbytes && r->rotate_bytes ? (int)((r->rotate_bytes + j->wbytes - 1) / j->wbytes) : 1;
    want = want < 1 ? 1 : want > r->max_copies ? r->max_copies : want;
    double t0 = wall_s(), first = 0;
    qp_status st = QP_OK;
    for (int c = 0; c < want; c++) {
        /* more copies only while they are cheap to prepare */
        if (c > 0 && (wall_s() - t0) + first > COPY_PREP_S) break;
        st = qp_linear_create(d->dev, &bs->scheme, sh->N, sh->K, j->t, j->nt, &o, &p->lin[c]);
        if (st == QP_ERR_OUT_OF_MEMORY && c > 0) { st = QP_OK; break; } /* rotate over fewer */
        if (st) break;
        p->nc = c + 1;
        if (c == 0) first = wall_s() - t0;
    }
    size_t xb = (size_t)maxM * sh->K * 2, yb = (size_t)maxM * sh->N * 2;
    for (int i = 0; i < NX && !st; i++) {
        st = qp_buffer_create(d->dev, xb, &p->x[i]);
        if (!st) st = qp_buffer_create(d->dev, yb, &p->y[i]);
        if (!st) st = qp_buffer_upload(p->x[i], 0, xh, xb);
    }
    if (!st) st = qp_device_synchronize(d->dev);
    p->flush = d->fa && (size_t)p->nc * j->wbytes < r->rotate_bytes;
    *prep_s = wall_s() - t0;
    return st;
}

static void bench_layer(run *r, bdev *d, int si, const bscheme *bs, const bshape *sh, const int *ms, int nm,
                        const prep_job *j, const uint16_t *xh, base_row *base) {
    int maxM = 0;
    for (int i = 0; i < nm; i++) maxM = ms[i] > maxM ? ms[i] : maxM;
    double flops1 = 2.0 * sh->N * (double)sh->K; /* per row */
    if (d->time_note[0]) { emit_skip_all(r, d, bs->name, sh, ms, nm, "SKIP", d->time_note); return; }
    qp_support_info si_;
    if (!bs->unquantized && !qp_device_supports(d->dev, &bs->scheme, 0, sh->N, sh->K, &si_) &&
        si_.level == QP_SUPPORT_UNSUPPORTED) {
        char why[400];
        snprintf(why, sizeof why, "unsupported on %s: %s", d->name, si_.reason);
        emit_skip_all(r, d, bs->name, sh, ms, nm, "SKIP", why);
        return;
    }
    if (j->st) {
        emit_skip_all(r, d, bs->name, sh, ms, nm, is_skip_status(j->st) ? "SKIP" : "FAIL", j->err);
        return;
    }
    /* runs predicted to exceed --max-seconds are not attempted */
    int any = 0;
    for (int i = 0; i < nm; i++) any |= !(d->est_s_per_flop[si] * flops1 * ms[i] > r->max_seconds);
    placed p = {0};
    double prep_s = 0;
    qp_status st = any ? place(r, d, bs, sh, j, maxM, xh, &p, &prep_s) : QP_OK;
    if (st) {
        char why[600];
        snprintf(why, sizeof why, "%s", qp_last_error(r->ctx));
        emit_skip_all(r, d, bs->name, sh, ms, nm, is_skip_status(st) ? "SKIP" : "FAIL", why);
        placed_free(&p);
        return;
    }
    double *tot = malloc(sizeof *tot * (size_t)r->reps), *gem = malloc(sizeof *gem * (size_t)r->reps);
    if (!tot || !gem) emit_skip_all(r, d, bs->name, sh, ms, nm, "FAIL", "out of memory");
    for (int mi = 0; mi < nm && tot && gem; mi++) {
        int M = ms[mi];
        double flops = flops1 * M, est = d->est_s_per_flop[si] * flops;
        if (est > r->max_seconds) {
            char why[200];
            snprintf(why, sizeof why, "predicted %.3g s per run (from the previous case) exceeds --max-seconds %g", est,
                     r->max_seconds);
            emit_skip(r, d, bs->name, sh, M, "SKIP", why);
            continue;
        }
        int n = 0, warm = 0;
        char note[160];
        st = time_case(r, d, &p, M, est, tot, gem, &n, &warm, note, sizeof note);
        if (st) {
            char why[600];
            snprintf(why, sizeof why, "%s", qp_last_error(r->ctx));
            if (st == QP_ERR_UNSUPPORTED && strstr(why, "linear_time")) { /* the whole device */
                snprintf(d->time_note, sizeof d->time_note, "%s", why);
                emit_skip_all(r, d, bs->name, sh, ms + mi, nm - mi, "SKIP", why);
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
        /* the bytes a perfect kernel moves: the stored weights once, x, y */
        double act_b = (double)M * sh->K * 2, out_b = (double)M * sh->N * 2;
        double bytes = (double)j->wbytes + act_b + out_b;
        double gbps = bytes / (s.median * 1e-3) * 1e-9, tflops = flops / (s.median * 1e-3) * 1e-12;
        base_row *b = &base[mi];
        if (bs->unquantized) b->fp16_ms = s.median;
        /* the arithmetic limit: the fastest of the fp16 layer and the vendor
         * GEMMs in fp16 and in the scheme's own operand type */
        double lim_ms = b->fp16_ms;
        char lim[128];
        snprintf(lim, sizeof lim, "%s", isfinite(lim_ms) ? "fp16 layer, same backend" : "");
        for (int i = 0; i < 3; i++) {
            if (vendor_dt[i] != QP_DTYPE_F16 && vendor_dt[i] != bs->arith) continue;
            if (isfinite(b->v.ms[i]) && !(b->v.ms[i] >= lim_ms)) {
                lim_ms = b->v.ms[i];
                snprintf(lim, sizeof lim, "%s", b->v.name[i]);
            }
        }
        double bw_ratio = d->copy_gbps > 0 ? gbps / d->copy_gbps : NAN;
        double ar_ratio = isfinite(lim_ms) ? lim_ms / s.median : NAN;
        double speedup = isfinite(b->fp16_ms) ? b->fp16_ms / s.median : NAN;
        double vs_vendor16 = isfinite(b->v.ms[0]) ? b->v.ms[0] / s.median : NAN;
        int decode = M <= DECODE_MAX_M;
        double eff = decode ? bw_ratio : ar_ratio;
        char path[96] = "", pb[16], pa[16], pe[16], sp[16];
        qp_linear_describe(p.lin[0], M, path, sizeof path);
        char gm[24];
        if (fused) snprintf(gm, sizeof gm, "fused");
        else snprintf(gm, sizeof gm, "%.4g", sg.median);
        printf("%-8s %-16s %6d %6d %5d  %10.4g  %9.4g..%-9.4g %9s %9.4g %7s %9.4g %7s  %7s  %s %s%s%s%s\n", d->name,
               bs->name, sh->N, sh->K, M, s.median, s.p10, s.p90, gm, gbps, fmt_pct(pb, bw_ratio), tflops,
               fmt_pct(pa, ar_ratio), fmt_x(sp, speedup), decode ? "bandwidth" : "arithmetic", fmt_pct(pe, eff),
               d->representative ? "" : " *", note[0] ? "  " : "", note);
        fflush(stdout);
        r->n_ok++;
        if (isfinite(speedup) && speedup > 0) { d->lsp[si][!decode] += log(speedup); d->nsp[si][!decode]++; }
        if (isfinite(eff) && eff > 0) { d->leff[si][!decode] += log(eff); d->neff[si][!decode]++; }
        if (!r->json) continue;
        FILE *f = r->json;
        case_head(r, d, bs->name, sh, M);
        fputs(",\"verdict\":\"OK\",\"path\":", f);
        json_str(f, path);
        fprintf(f, ",\"representative\":%s,\"reps\":%d,\"warmup\":%d,\"layer_copies\":%d,\"io_buffers\":%d,"
                   "\"cache_flush_bytes\":%zu,\"prepare_s\":%.4g,\"quantize_s\":%.4g,",
                d->representative ? "true" : "false", n, warm, p.nc, NX, p.flush ? d->flush_bytes : 0, prep_s,
                j->seconds);
        json_stats(f, &s);
        fputs(",\"gemm_only\":", f);
        if (fused) fputs("null", f);
        else { fputc('{', f); json_stats(f, &sg); fputc('}', f); }
        fprintf(f, ",\"bytes\":{\"weights\":%zu,\"activations\":%.0f,\"outputs\":%.0f},\"flop\":%.0f,\"GBps\":",
                j->wbytes, act_b, out_b, flops);
        json_num(f, gbps);
        fputs(",\"TFLOPs\":", f);
        json_num(f, tflops);
        fputs(",\"baselines\":{\"fp16_layer_ms\":", f);
        json_num(f, b->fp16_ms);
        fputs(",\"vendor\":[", f);
        for (int i = 0, first = 1; i < 3; i++) {
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
    free(tot);
    free(gem);
    placed_free(&p);
}

/* The device's bandwidth limit: a timed device-to-device copy. Its buffers
 * are kept to flush caches between timed runs. */
static void measure_copy(run *r, bdev *d, size_t bytes) {
    d->copy_gbps = -1;
    int reps = r->reps < 10 ? 10 : r->reps;
    double *ms = malloc(sizeof *ms * (size_t)reps);
    qp_status st = ms ? QP_OK : QP_ERR_OUT_OF_MEMORY;
    /* halved while the device cannot hold two buffers of that size */
    for (; !st && bytes >= (1u << 20); bytes /= 2) {
        st = qp_buffer_create(d->dev, bytes, &d->fa);
        if (!st) st = qp_buffer_create(d->dev, bytes, &d->fb);
        if (st != QP_ERR_OUT_OF_MEMORY) break;
        qp_buffer_destroy(d->fa);
        qp_buffer_destroy(d->fb);
        d->fa = d->fb = NULL;
        st = QP_OK;
    }
    if (!st && !d->fa) st = QP_ERR_OUT_OF_MEMORY;
    /* a warm-up copy first: fresh device memory may be committed lazily */
    if (!st) st = qp_buffer_copy_time(d->fa, d->fb, bytes, 2, ms);
    if (!st) st = qp_buffer_copy_time(d->fa, d->fb, bytes, reps, ms);
    if (st) {
        snprintf(d->copy_note, sizeof d->copy_note, "%s", !d->fa ? "out of memory" : qp_last_error(r->ctx));
        qp_buffer_destroy(d->fa);
        qp_buffer_destroy(d->fb);
        d->fa = d->fb = NULL;
        if (r->json) {
            fputs(",\"copy_limit\":{\"skip\":", r->json);
            json_str(r->json, d->copy_note);
            fputc('}', r->json);
        }
    } else {
        stats s = stats_of(ms, reps);
        d->copy_gbps = 2.0 * (double)bytes / (s.median * 1e-3) * 1e-9;
        d->flush_bytes = bytes < r->rotate_bytes ? bytes : r->rotate_bytes;
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
    free(ms);
}

/* Whether the device can time a layer at all (a 64 x 64 fp16 layer). */
static void probe_timer(run *r, bdev *d) {
    static uint16_t w[64 * 64], x[64];
    qp_tensor t = {"weight", QP_DTYPE_F16, 2, {64, 64, 0, 0}, w};
    qp_scheme s = {.struct_size = sizeof s, .kind = QP_SCHEME_UNQUANTIZED};
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.layer = "timer probe";
    qp_linear *l = NULL;
    qp_buffer *xb = NULL, *yb = NULL;
    double ms, g;
    if (!qp_linear_create(d->dev, &s, 64, 64, &t, 1, &o, &l) && !qp_buffer_create(d->dev, sizeof x, &xb) &&
        !qp_buffer_create(d->dev, sizeof x, &yb) && !qp_buffer_upload(xb, 0, x, sizeof x) &&
        qp_linear_time(l, xb, 1, yb, 1, &ms, &g) == QP_ERR_UNSUPPORTED && strstr(qp_last_error(r->ctx), "linear_time"))
        snprintf(d->time_note, sizeof d->time_note, "%s", qp_last_error(r->ctx));
    qp_linear_destroy(l);
    qp_buffer_destroy(xb);
    qp_buffer_destroy(yb);
}

/* ---- host-side preparation: checkpoint tensors of every scheme, in parallel */

static void prep_run(prep_job *j) {
    double t0 = wall_s();
    size_t nk = (size_t)j->N * j->K;
    j->st = QP_OK;
    if (j->bs->unquantized) {
        j->w16 = malloc(sizeof *j->w16 * nk);
        for (size_t i = 0; j->w16 && i < nk; i++) j->w16[i] = f16_rne(j->w[i]);
        if (!j->w16) {
            j->st = QP_ERR_OUT_OF_MEMORY;
            snprintf(j->err, sizeof j->err, "out of memory");
            return;
        }
        j->t[0] = (qp_tensor){"weight", QP_DTYPE_F16, 2, {j->N, j->K, 0, 0}, j->w16};
        j->nt = 1;
    } else {
        j->st = qp_quantize_weights(j->ctx, &j->bs->scheme, j->w, j->N, j->K, NULL, &j->q);
        if (j->st) {
            snprintf(j->err, sizeof j->err, "quantizing the weights: %s", qp_last_error(j->ctx));
            return;
        }
        for (size_t i = 0; i < qp_qweights_count(j->q) && j->nt < 16; i++) qp_qweights_get(j->q, i, &j->t[j->nt++]);
    }
    for (size_t i = 0; i < j->nt; i++) j->wbytes += qp_tensor_bytes(&j->t[i]);
    j->seconds = wall_s() - t0;
}

static void prep_free(prep_job *j) {
    qp_qweights_destroy(j->q);
    free(j->w16);
    j->q = NULL;
    j->w16 = NULL;
    j->nt = j->wbytes = 0;
}

typedef struct prep_pool { prep_job *jobs; int n, next; pthread_mutex_t mu; } prep_pool;

static void *prep_worker(void *arg) {
    prep_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int i = p->next;
        while (i < p->n && !p->jobs[i].needed) i++;
        p->next = i + 1;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n) return NULL;
        prep_run(&p->jobs[i]);
    }
}

static void prep_all(prep_job *jobs, int n, int threads) {
    prep_pool p = {jobs, n, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < threads && i < 64; i++)
        if (!pthread_create(&th[started], NULL, prep_worker, &p)) started++;
    prep_worker(&p);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

/* ---- the command ---------------------------------------------------------- */

static int parse_long(const char *s, long lo, long hi, long *out) {
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--moe")) return cmd_bench_moe(argc, argv); /* bench_moe.c */
        if (!strcmp(argv[i], "--chain")) return cmd_bench_chain(argc, argv); /* bench_chain.c */
        /* across ranks: qport run's parallel mode, timed (the medians of
         * --reps runs, 20 by default, with the collectives' share) */
        if (!strcmp(argv[i], "--tp-size") || !strcmp(argv[i], "--ep-size")) {
            char **av = malloc(sizeof(char *) * (size_t)(argc + 3));
            if (!av) return 1;
            int n = 0, has_reps = 0;
            av[n++] = "run";
            for (int j = 1; j < argc; j++) { has_reps |= !strcmp(argv[j], "--reps"); av[n++] = argv[j]; }
            if (!has_reps) { av[n++] = "--reps"; av[n++] = "20"; }
            av[n] = NULL;
            int rc = cmd_run(n, av);
            free(av);
            return rc;
        }
    }
    const char *dev_specs[MAX_DEV], *scheme_names[MAX_SCHEMES];
    int n_dev_specs = 0, n_scheme_names = 0, reps_set = 0, warm_set = 0, max_set = 0;
    bshape sizes[MAX_SIZES];
    int n_sizes = 0;
    const char *shapes_arg = "all", *json_path = NULL;
    run r = {0};
    r.reps = 20;
    r.warmup = 3;
    r.max_seconds = 20;
    r.rotate_bytes = (size_t)256 << 20;
    r.seed = 20261202;
    r.max_copies = MAX_COPIES;
    int rot_set = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    r.jobs = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--list")) {
            printf("fp16 (the baseline, always run)\n");
            for (size_t s = 0; quant_scheme_at(s); s++) printf("%s\n", quant_scheme_at(s)->name);
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
        } else if (!strcmp(a, "--size")) {
            int k, nn, used = 0;
            if (sscanf(v, "%dx%d%n", &k, &nn, &used) != 2 || v[used] || k < 1 || nn < 1 || k > 1 << 20 || nn > 1 << 20) {
                fprintf(stderr, "qport bench: --size must be KxN (input x output features), got '%s'\n", v);
                return 2;
            }
            if (n_sizes == MAX_SIZES) { fprintf(stderr, "qport bench: at most %d --size\n", MAX_SIZES); return 2; }
            sizes[n_sizes++] = (bshape){nn, k, ""};
        } else if (!strcmp(a, "--reps")) {
            if (parse_long(v, 1, 10000, &n)) { fprintf(stderr, "qport bench: --reps must be a whole number 1..10000, got '%s'\n", v); return 2; }
            r.reps = (int)n;
            reps_set = 1;
        } else if (!strcmp(a, "--warmup")) {
            if (parse_long(v, 0, 1000, &n)) { fprintf(stderr, "qport bench: --warmup must be a whole number 0..1000, got '%s'\n", v); return 2; }
            r.warmup = (int)n;
            warm_set = 1;
        } else if (!strcmp(a, "--jobs")) {
            if (parse_long(v, 1, 64, &n)) { fprintf(stderr, "qport bench: --jobs must be a whole number 1..64, got '%s'\n", v); return 2; }
            r.jobs = (int)n;
        } else if (!strcmp(a, "--max-seconds")) {
            char *end;
            errno = 0;
            double sec = strtod(v, &end);
            if (errno || end == v || *end || !(sec > 0) || sec > 1e6) {
                fprintf(stderr, "qport bench: --max-seconds must be a number > 0, got '%s'\n", v);
                return 2;
            }
            r.max_seconds = sec;
            max_set = 1;
        } else if (!strcmp(a, "--rotate-mib")) {
            if (parse_long(v, 0, 1 << 20, &n)) { fprintf(stderr, "qport bench: --rotate-mib must be a whole number 0..1048576, got '%s'\n", v); return 2; }
            r.rotate_bytes = (size_t)n << 20;
            rot_set = 1;
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
        if (!rot_set) r.rotate_bytes = (size_t)1 << 20;
        r.max_copies = 2; /* both ways of defeating caches, cheaply */
        if (n_sizes) { fprintf(stderr, "qport bench: --shapes tiny has its own size; drop --size\n"); return 2; }
        sizes[n_sizes++] = tiny_shape;
    }
    if (!n_sizes)
        for (size_t i = 0; i < sizeof real_shapes / sizeof *real_shapes; i++) sizes[n_sizes++] = real_shapes[i];
    int ms[MAX_M], nm = 0;
    if (tiny) for (int i = 0; i < 3; i++) ms[nm++] = tiny_m[i];
    if (!tiny && strcmp(shapes_arg, "prefill")) for (int i = 0; i < 3; i++) ms[nm++] = decode_m[i];
    if (!tiny && strcmp(shapes_arg, "decode")) for (int i = 0; i < 3; i++) ms[nm++] = prefill_m[i];
    size_t maxM = 0;
    for (int i = 0; i < nm; i++) maxM = (size_t)ms[i] > maxM ? (size_t)ms[i] : maxM;

    if (qp_context_create(&r.ctx)) { fprintf(stderr, "qport bench: cannot create a context\n"); return 1; }
    tool_install_log(r.ctx);
    int rc = 2;
    bdev *devs = calloc(MAX_DEV, sizeof *devs);
    bscheme *sch = calloc(MAX_SCHEMES + 1, sizeof *sch);
    prep_job *jobs = calloc(MAX_SCHEMES + 1, sizeof *jobs);
    base_row *base = calloc((size_t)MAX_DEV * MAX_M, sizeof *base);
    float *w = NULL;
    uint16_t *xh = NULL;
    int n_devs = 0, n_sch = 0;
    double t_start = wall_s();
    if (!devs || !sch || !jobs || !base) { fprintf(stderr, "qport bench: out of memory\n"); goto done; }
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
    if (r.json)
        fprintf(r.json, "{\n  \"qport_version\":\"%s\",\"shapes\":\"%s\",\"reps\":%d,\"warmup\":%d,\"max_seconds\":%g,"
                        "\"rotate_bytes\":%zu,\"seed\":%llu,\"act_dtype\":\"F16\",\n  \"devices\":[",
                qp_version(), shapes_arg, r.reps, r.warmup, r.max_seconds, r.rotate_bytes, (unsigned long long)r.seed);
    printf("qport bench: %s shapes, %d timed runs after %d+ warm-up (median, p10..p90), fp16 activations, seed %llu\n",
           shapes_arg, r.reps, r.warmup, (unsigned long long)r.seed);
    if (!n_devs) printf("no device to benchmark\n");
    for (int d = 0; d < n_devs; d++) {
        bdev *b = &devs[d];
        b->info.struct_size = sizeof b->info;
        qp_device_get_info(b->dev, &b->info);
        snprintf(b->name, sizeof b->name, "%s:%d", b->info.backend, b->info.index);
        b->representative = b->info.kind != QP_DEVICE_CPU_CLASS && b->info.kind != QP_DEVICE_REFERENCE;
        b->vendor_ok = -1;
        const char *caveat = b->representative ? NULL
                           : b->info.kind == QP_DEVICE_REFERENCE
                               ? "qport's cpu reference: exact loops timed on the host (clock_gettime); "
                                 "not representative of GPUs"
                               : "a GPU API implemented on the CPU: not representative of GPUs";
        if (r.json) {
            fprintf(r.json, "%s\n    {\"device\":\"%s\",\"name\":", d ? "," : "", b->name);
            json_str(r.json, b->info.name);
            fprintf(r.json, ",\"kind\":\"%s\",\"representative\":%s,\"note\":", qp_device_kind_name(b->info.kind),
                    b->representative ? "true" : "false");
            json_str(r.json, caveat);
        }
        measure_copy(&r, b, tiny ? (size_t)16 << 20 : (size_t)256 << 20);
        probe_timer(&r, b);
        if (r.json) {
            fputs(",\"timer\":", r.json);
            json_str(r.json, b->time_note[0] ? b->time_note : "");
            fputc('}', r.json);
        }
        printf("device %s: %s (%s)\n", b->name, b->info.name, qp_device_kind_name(b->info.kind));
        if (caveat) printf("  * NOT REPRESENTATIVE OF GPUS (%s): its figures are marked *\n", caveat);
        printf("  bandwidth limit: %s", b->copy_note);
        if (b->copy_gbps > 0) printf(" = %.4g GB/s (read + write)", b->copy_gbps);
        printf("\n%s%s%s", b->time_note[0] ? "  no timings: " : "", b->time_note, b->time_note[0] ? "\n" : "");
    }
    if (r.json) fputs("\n  ],\n  \"cases\":[", r.json);
    printf("\n%-8s %-16s %6s %6s %5s  %10s  %-20s %9s %9s %7s %9s %7s  %7s  %s\n", "device", "scheme", "N", "K", "M",
           "median ms", "p10..p90 ms", "GEMM ms", "GB/s", "%copy", "TFLOP/s", "%limit", "vs fp16", "judged on");
    tool_progress prog;
    progress_start(&prog, "bench: cases", (long)n_sizes * n_sch * n_devs * nm);
    for (int shi = 0; shi < n_sizes; shi++) {
        const bshape *sh = &sizes[shi];
        size_t nk = (size_t)sh->N * sh->K;
        uint64_t s = r.seed ^ (0x51ED27ull * (uint64_t)(shi + 1));
        free(w);
        free(xh);
        w = malloc(sizeof *w * nk);
        xh = malloc(sizeof *xh * maxM * (size_t)sh->K);
        if (!w || !xh) goto oom;
        for (size_t i = 0; i < nk; i++) w[i] = 0.05f * rng_unit(&s);
        for (size_t i = 0; i < maxM * (size_t)sh->K; i++) xh[i] = f16_rne(rng_unit(&s));
        for (size_t i = 0; i < 4096 && i < nk; i++) /* the fast encoder is the library's */
            if (f16_rne(w[i]) != (uint16_t)qp_format_encode(QP_DTYPE_F16, w[i])) {
                fprintf(stderr, "qport bench: internal error: fp16 encoder differs at %.9g\n", (double)w[i]);
                goto oom;
            }
        /* baselines of this shape: vendor GEMMs now, the fp16 layer first */
        for (int d = 0; d < n_devs; d++)
            for (int i = 0; i < MAX_M; i++) {
                base[d * MAX_M + i].fp16_ms = NAN;
                if (i < nm) vendor_measure(&r, &devs[d], ms[i], sh->N, sh->K, &base[d * MAX_M + i].v);
            }
        /* checkpoint tensors of every scheme some device can time and run */
        double tq = wall_s();
        for (int si = 0; si < n_sch; si++) {
            prep_job *j = &jobs[si];
            *j = (prep_job){.bs = &sch[si], .w = w, .N = sh->N, .K = sh->K, .ctx = r.ctx};
            for (int d = 0; d < n_devs; d++) {
                qp_support_info su;
                j->needed |= !devs[d].time_note[0] &&
                             (sch[si].unquantized || qp_device_supports(devs[d].dev, &sch[si].scheme, 0, sh->N, sh->K, &su) ||
                              su.level != QP_SUPPORT_UNSUPPORTED);
            }
        }
        prep_all(jobs, n_sch, tiny ? 1 : r.jobs);
        progress_clear(&prog);
        printf("-- layer %dx%d (K x N)%s%s: weights quantized in %.1f s\n", sh->K, sh->N, sh->what[0] ? ", " : "",
               sh->what, wall_s() - tq);
        for (int si = 0; si < n_sch; si++) {
            for (int d = 0; d < n_devs; d++) {
                progress_clear(&prog);
                bench_layer(&r, &devs[d], si, &sch[si], sh, ms, nm, &jobs[si], xh, &base[d * MAX_M]);
                progress_step(&prog, nm);
            }
            prep_free(&jobs[si]);
        }
    }
    progress_end(&prog);
    rc = r.n_fail ? 1 : 0;
    goto finish;
oom:
    progress_end(&prog);
    fprintf(stderr, "qport bench: out of memory\n");
    rc = 1;
finish: {
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
        fputs("],\n  \"by_scheme\":[", r.json);
        int first = 1;
        for (int d = 0; d < n_devs; d++)
            for (int si = 0; si < n_sch; si++) {
                const bdev *b = &devs[d];
                if (!b->nsp[si][0] && !b->nsp[si][1] && !b->neff[si][0] && !b->neff[si][1]) continue;
                fprintf(r.json, "%s\n    {\"device\":\"%s\",\"scheme\":\"%s\"", first ? "" : ",", b->name, sch[si].name);
                static const char *const ph[2] = {"decode", "prefill"};
                for (int k = 0; k < 2; k++) {
                    fprintf(r.json, ",\"%s\":{\"cases\":%d,\"geomean_speedup_vs_fp16\":", ph[k], b->neff[si][k]);
                    json_num(r.json, b->nsp[si][k] ? exp(b->lsp[si][k] / b->nsp[si][k]) : NAN);
                    fputs(",\"geomean_efficiency\":", r.json);
                    json_num(r.json, b->neff[si][k] ? exp(b->leff[si][k] / b->neff[si][k]) : NAN);
                    fputc('}', r.json);
                }
                fputc('}', r.json);
                first = 0;
            }
        fprintf(r.json, "],\n  \"summary\":{\"ok\":%d,\"skip\":%d,\"fail\":%d,\"seconds\":%.1f}\n}\n", r.n_ok,
                r.n_skip, r.n_fail, wall_s() - t_start);
    }
    printf("\nbench: %d measured, %d skipped, %d failed, %.1f s%s\n", r.n_ok, r.n_skip, r.n_fail, wall_s() - t_start,
           any_cpu ? "  (* = CPU implementation: not representative of GPUs)" : "");
    for (int d = 0; d < n_devs; d++)
        if (devs[d].vendor_ok == 0) printf("  %s: no vendor GEMM baselines: %s\n", devs[d].name, devs[d].vendor_note);
    /* the headline: per device and scheme, geometric means over sizes and M */
    int any_row = 0;
    for (int d = 0; d < n_devs; d++)
        for (int si = 0; si < n_sch; si++) {
            const bdev *b = &devs[d];
            if (!b->neff[si][0] && !b->neff[si][1] && !b->nsp[si][0] && !b->nsp[si][1]) continue;
            if (!any_row++)
                printf("\ngeometric means over each phase's cases (sizes x M): speedup vs fp16 and efficiency "
                       "(decode: %%copy, prefill: %%limit)\n");
            char a[16], bb[16], c[16], e[16];
            printf("  %-8s %-16s  decode %7s %7s   prefill %7s %7s%s\n", b->name, sch[si].name,
                   fmt_x(a, b->nsp[si][0] ? exp(b->lsp[si][0] / b->nsp[si][0]) : NAN),
                   fmt_pct(bb, b->neff[si][0] ? exp(b->leff[si][0] / b->neff[si][0]) : NAN),
                   fmt_x(c, b->nsp[si][1] ? exp(b->lsp[si][1] / b->nsp[si][1]) : NAN),
                   fmt_pct(e, b->neff[si][1] ? exp(b->leff[si][1] / b->neff[si][1]) : NAN), b->representative ? "" : " *");
        }
}
done:
    if (r.json && fclose(r.json)) { fprintf(stderr, "qport bench: writing %s failed\n", json_path); rc = rc ? rc : 1; }
    for (int d = 0; devs && d < n_devs; d++) { qp_buffer_destroy(devs[d].fa); qp_buffer_destroy(devs[d].fb); }
    for (int si = 0; jobs && si < n_sch; si++) prep_free(&jobs[si]);
    free(w);
    free(xh);
    free(base);
    free(jobs);
    free(devs);
    free(sch);
    qp_context_destroy(r.ctx);
    return rc;
}
