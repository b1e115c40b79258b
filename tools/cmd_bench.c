/* qport bench: how fast each scheme's linear layer runs, against what, and
 * how far from the device's limits.
 *
 * For every device and scheme: layers of real sizes built from seeded random
 * weights with the scheme table of `qport quantize` (cases.c) and
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

#include "bench.h"
#include "progress.h"
#include "cases.h"
#include "tool.h"

#define NX 4                 /* input/output buffers rotated over          */
#define COPY_PREP_S 1.0      /* extra layer copies only while this cheap   */
#define DECODE_MAX_M 16      /* decode: memory-bound, judged on bandwidth  */

typedef struct stats { double median, min, max, p10, p90; int n; } stats;

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
    qsort(c, (size_t)n, sizeof *c, tool_cmp_double);
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
    const char *name;       /* "fp16" or a tool name of cases.c */
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

static void case_head(bench_run *r, const bdev *d, const char *scheme, const bshape *sh, int M) {
    if (!r->json) return;
    fprintf(r->json, "%s\n    {\"device\":\"%s\",\"scheme\":\"%s\",\"N\":%d,\"K\":%d,\"M\":%d,\"phase\":\"%s\"",
            r->json_cases++ ? "," : "", d->name, scheme, sh->N, sh->K, M, M <= DECODE_MAX_M ? "decode" : "prefill");
}

static void emit_skip(bench_run *r, const bdev *d, const char *scheme, const bshape *sh, int M, const char *verdict,
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

static void emit_skip_all(bench_run *r, const bdev *d, const char *scheme, const bshape *sh, const int *ms, int nm,
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

static void vendor_measure(bench_run *r, bdev *d, int M, int N, int K, vendor_set *v) {
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
static qp_status time_case(bench_run *r, bdev *d, placed *p, int M, double est_run_s, double *tot, double *gem, int *n_done,
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
static qp_status place(bench_run *r, bdev *d, const bscheme *bs, const bshape *sh, const prep_job *j, int maxM,
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

/* One case's figures: its timings, the bytes and arithmetic a perfect
 * kernel needs, and their ratios to the limits of the same shape. */
typedef struct figures {
    int M, n, warm, fused, decode;
    stats s, sg;
    double flops, act_b, out_b, gbps, tflops, bw_ratio, ar_ratio, speedup, vs_vendor16, eff;
    char lim[128], path[96], note[160];
} figures;

/* The fp16 layer's median of this M is kept in b when bs is it: the later
 * schemes' speedups are over it. */
static void figures_of(const bdev *d, const bscheme *bs, const bshape *sh, const prep_job *j, const double *tot,
                       const double *gem, base_row *b, figures *f) {
    f->s = stats_of(tot, f->n);
    f->fused = 0;
    for (int i = 0; i < f->n; i++) f->fused |= gem[i] < 0;
    f->sg = f->fused ? (stats){NAN, NAN, NAN, NAN, NAN, 0} : stats_of(gem, f->n);
    double median = f->s.median;
    f->flops = 2.0 * sh->N * (double)sh->K * f->M;
    /* the bytes a perfect kernel moves: the stored weights once, x, y */
    f->act_b = (double)f->M * sh->K * 2;
    f->out_b = (double)f->M * sh->N * 2;
    double bytes = (double)j->wbytes + f->act_b + f->out_b;
    f->gbps = bytes / (median * 1e-3) * 1e-9;
    f->tflops = f->flops / (median * 1e-3) * 1e-12;
    if (bs->unquantized) b->fp16_ms = median;
    /* the arithmetic limit: the fastest of the fp16 layer and the vendor
     * GEMMs in fp16 and in the scheme's own operand type */
    double lim_ms = b->fp16_ms;
    snprintf(f->lim, sizeof f->lim, "%s", isfinite(lim_ms) ? "fp16 layer, same backend" : "");
    for (int i = 0; i < 3; i++) {
        if (vendor_dt[i] != QP_DTYPE_F16 && vendor_dt[i] != bs->arith) continue;
        if (isfinite(b->v.ms[i]) && !(b->v.ms[i] >= lim_ms)) {
            lim_ms = b->v.ms[i];
            snprintf(f->lim, sizeof f->lim, "%s", b->v.name[i]);
        }
    }
    f->bw_ratio = d->copy_gbps > 0 ? f->gbps / d->copy_gbps : NAN;
    f->ar_ratio = isfinite(lim_ms) ? lim_ms / median : NAN;
    f->speedup = isfinite(b->fp16_ms) ? b->fp16_ms / median : NAN;
    f->vs_vendor16 = isfinite(b->v.ms[0]) ? b->v.ms[0] / median : NAN;
    f->decode = f->M <= DECODE_MAX_M;
    f->eff = f->decode ? f->bw_ratio : f->ar_ratio;
}

static void print_case(const bdev *d, const bscheme *bs, const bshape *sh, const figures *f) {
    char pb[16], pa[16], pe[16], sp[16], gm[24];
    if (f->fused) snprintf(gm, sizeof gm, "fused");
    else snprintf(gm, sizeof gm, "%.4g", f->sg.median);
    printf("%-8s %-16s %6d %6d %5d  %10.4g  %9.4g..%-9.4g %9s %9.4g %7s %9.4g %7s  %7s  %s %s%s%s%s\n", d->name,
           bs->name, sh->N, sh->K, f->M, f->s.median, f->s.p10, f->s.p90, gm, f->gbps, fmt_pct(pb, f->bw_ratio),
           f->tflops, fmt_pct(pa, f->ar_ratio), fmt_x(sp, f->speedup), f->decode ? "bandwidth" : "arithmetic",
           fmt_pct(pe, f->eff), d->representative ? "" : " *", f->note[0] ? "  " : "", f->note);
    fflush(stdout);
}

static void json_vendor(FILE *out, const base_row *b, double flops) {
    fputs(",\"vendor\":[", out);
    for (int i = 0, first = 1; i < 3; i++) {
        if (!b->v.name[i][0]) continue;
        fprintf(out, "%s{\"dtype\":\"%s\",\"name\":", first ? "" : ",", qp_dtype_name(vendor_dt[i]));
        json_str(out, b->v.name[i]);
        fputs(",\"median_ms\":", out);
        json_num(out, b->v.ms[i]);
        fputs(",\"TFLOPs\":", out);
        json_num(out, flops / (b->v.ms[i] * 1e-3) * 1e-12);
        fputc('}', out);
        first = 0;
    }
    fputs("]}", out);
}

static void json_case(bench_run *r, const bdev *d, const bscheme *bs, const bshape *sh, const prep_job *j,
                      const placed *p, double prep_s, const base_row *b, const figures *f) {
    FILE *out = r->json;
    case_head(r, d, bs->name, sh, f->M);
    fputs(",\"verdict\":\"OK\",\"path\":", out);
    json_str(out, f->path);
    fprintf(out, ",\"representative\":%s,\"reps\":%d,\"warmup\":%d,\"layer_copies\":%d,\"io_buffers\":%d,"
                 "\"cache_flush_bytes\":%zu,\"prepare_s\":%.4g,\"quantize_s\":%.4g,",
            d->representative ? "true" : "false", f->n, f->warm, p->nc, NX, p->flush ? d->flush_bytes : 0, prep_s,
            j->seconds);
    json_stats(out, &f->s);
    fputs(",\"gemm_only\":", out);
    if (f->fused) fputs("null", out);
    else { fputc('{', out); json_stats(out, &f->sg); fputc('}', out); }
    fprintf(out, ",\"bytes\":{\"weights\":%zu,\"activations\":%.0f,\"outputs\":%.0f},\"flop\":%.0f,\"GBps\":",
            j->wbytes, f->act_b, f->out_b, f->flops);
    json_num(out, f->gbps);
    fputs(",\"TFLOPs\":", out);
    json_num(out, f->tflops);
    fputs(",\"baselines\":{\"fp16_layer_ms\":", out);
    json_num(out, b->fp16_ms);
    json_vendor(out, b, f->flops);
    fputs(",\"ratios\":{\"bandwidth\":", out);
    json_num(out, f->bw_ratio);
    fputs(",\"arithmetic\":", out);
    json_num(out, f->ar_ratio);
    fputs(",\"arithmetic_limit\":", out);
    json_str(out, f->lim[0] ? f->lim : NULL);
    fputs(",\"speedup_vs_fp16\":", out);
    json_num(out, f->speedup);
    fputs(",\"speedup_vs_vendor_fp16\":", out);
    json_num(out, f->vs_vendor16);
    fprintf(out, "},\"judged_on\":\"%s\",\"efficiency\":", f->decode ? "bandwidth" : "arithmetic");
    json_num(out, f->eff);
    fputs(",\"note\":", out);
    json_str(out, f->note);
    fputc('}', out);
    fflush(out);
}

/* The i-th M of a placed layer: timed, printed, added to the means. 1 when
 * the device turned out to have no timer: its remaining cases are skipped. */
static int bench_case(bench_run *r, bdev *d, int si, const bscheme *bs, const bshape *sh, const prep_job *j,
                      placed *p, double prep_s, const int *ms, int nm, int mi, double *tot, double *gem,
                      base_row *b) {
    figures f = {.M = ms[mi]};
    double flops = 2.0 * sh->N * (double)sh->K * f.M, est = d->est_s_per_flop[si] * flops;
    if (est > r->max_seconds) {
        char why[200];
        snprintf(why, sizeof why, "predicted %.3g s per run (from the previous case) exceeds --max-seconds %g", est,
                 r->max_seconds);
        emit_skip(r, d, bs->name, sh, f.M, "SKIP", why);
        return 0;
    }
    qp_status st = time_case(r, d, p, f.M, est, tot, gem, &f.n, &f.warm, f.note, sizeof f.note);
    if (st) {
        char why[600];
        snprintf(why, sizeof why, "%s", qp_last_error(r->ctx));
        if (st == QP_ERR_UNSUPPORTED && strstr(why, "linear_time")) { /* the whole device */
            snprintf(d->time_note, sizeof d->time_note, "%s", why);
            emit_skip_all(r, d, bs->name, sh, ms + mi, nm - mi, "SKIP", why);
            return 1;
        }
        emit_skip(r, d, bs->name, sh, f.M, is_skip_status(st) ? "SKIP" : "FAIL", why);
        return 0;
    }
    figures_of(d, bs, sh, j, tot, gem, b, &f);
    d->est_s_per_flop[si] = f.s.median * 1e-3 / f.flops;
    qp_linear_describe(p->lin[0], f.M, f.path, sizeof f.path);
    print_case(d, bs, sh, &f);
    r->n_ok++;
    int ph = !f.decode;
    if (isfinite(f.speedup) && f.speedup > 0) { d->lsp[si][ph] += log(f.speedup); d->nsp[si][ph]++; }
    if (isfinite(f.eff) && f.eff > 0) { d->leff[si][ph] += log(f.eff); d->neff[si][ph]++; }
    if (r->json) json_case(r, d, bs, sh, j, p, prep_s, b, &f);
    return 0;
}

/* Why the scheme cannot be timed on the device at all, before placing it:
 * its cases are then reported; 0: go on. */
static int bench_layer_skipped(bench_run *r, const bdev *d, const bscheme *bs, const bshape *sh, const int *ms,
                               int nm, const prep_job *j) {
    if (d->time_note[0]) { emit_skip_all(r, d, bs->name, sh, ms, nm, "SKIP", d->time_note); return 1; }
    qp_support_info si_;
    if (!bs->unquantized && !qp_device_supports(d->dev, &bs->scheme, 0, sh->N, sh->K, &si_) &&
        si_.level == QP_SUPPORT_UNSUPPORTED) {
        char why[400];
        snprintf(why, sizeof why, "unsupported on %s: %s", d->name, si_.reason);
        emit_skip_all(r, d, bs->name, sh, ms, nm, "SKIP", why);
        return 1;
    }
    if (j->st) {
        emit_skip_all(r, d, bs->name, sh, ms, nm, is_skip_status(j->st) ? "SKIP" : "FAIL", j->err);
        return 1;
    }
    return 0;
}

static void bench_layer(bench_run *r, bdev *d, int si, const bscheme *bs, const bshape *sh, const int *ms, int nm,
                        const prep_job *j, const uint16_t *xh, base_row *base) {
    int maxM = 0;
    for (int i = 0; i < nm; i++) maxM = ms[i] > maxM ? ms[i] : maxM;
    double flops1 = 2.0 * sh->N * (double)sh->K; /* per row */
    if (bench_layer_skipped(r, d, bs, sh, ms, nm, j)) return;
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
    for (int mi = 0; mi < nm && tot && gem; mi++)
        if (bench_case(r, d, si, bs, sh, j, &p, prep_s, ms, nm, mi, tot, gem, &base[mi])) break;
    free(tot);
    free(gem);
    placed_free(&p);
}

/* The device's bandwidth limit: a timed device-to-device copy. Its buffers
 * are kept to flush caches between timed runs. */
static void measure_copy(bench_run *r, bdev *d, size_t bytes) {
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
static void probe_timer(bench_run *r, bdev *d) {
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

static qp_dtype arith_of(const qp_scheme *s) {
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8: case QP_SCHEME_QQQ_W4A8: return QP_DTYPE_I8;
    case QP_SCHEME_W8A8_FP8: case QP_SCHEME_W8A8_FP8_BLOCK: case QP_SCHEME_HF_FP8: return QP_DTYPE_F8_E4M3FN;
    default: return QP_DTYPE_F16;
    }
}

/* Everything one linear-layer benchmark holds, from the plan to the end. */
typedef struct bench {
    bench_opts o;
    bench_run r;
    bdev *devs;
    bscheme *sch;
    prep_job *jobs;
    base_row *base;
    float *w;
    uint16_t *xh;
    int n_devs, n_sch;
    double t_start;
} bench;

/* The other modes of qport bench, chosen by one option anywhere on the
 * line; 1 (and their exit status in rc) when one ran. */
static int bench_other_mode(int argc, char **argv, int *rc) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--moe")) { *rc = cmd_bench_moe(argc, argv); return 1; } /* bench_moe.c */
        if (!strcmp(argv[i], "--chain")) { *rc = cmd_bench_chain(argc, argv); return 1; } /* bench_chain.c */
        /* across ranks: qport run's parallel mode, timed (the medians of
         * --reps runs, 20 by default, with the collectives' share) */
        if (!strcmp(argv[i], "--tp-size") || !strcmp(argv[i], "--ep-size")) {
            char **av = malloc(sizeof(char *) * (size_t)(argc + 3));
            *rc = 1;
            if (!av) return 1;
            int n = 0, has_reps = 0;
            av[n++] = "run";
            for (int j = 1; j < argc; j++) { has_reps |= !strcmp(argv[j], "--reps"); av[n++] = argv[j]; }
            if (!has_reps) { av[n++] = "--reps"; av[n++] = "20"; }
            av[n] = NULL;
            *rc = cmd_run(n, av);
            free(av);
            return 1;
        }
    }
    return 0;
}

/* Devices: those named, else every device but the cpu reference (its
 * loops are an oracle, not an accelerator) unless it is the only one. */
static int bench_open_devices(bench *b) {
    bench_run *r = &b->r;
    if (b->o.n_dev_specs) {
        for (int i = 0; i < b->o.n_dev_specs; i++) {
            qp_device *dv;
            if (qp_device_find(r->ctx, b->o.dev_specs[i], &dv)) { fprintf(stderr, "qport bench: %s\n", qp_last_error(r->ctx)); return -1; }
            int dup = 0;
            for (int j = 0; j < b->n_devs; j++) dup |= b->devs[j].dev == dv;
            if (!dup) b->devs[b->n_devs++].dev = dv;
        }
        return 0;
    }
    size_t n = 0;
    if (qp_device_count(r->ctx, &n)) { fprintf(stderr, "qport bench: %s\n", qp_last_error(r->ctx)); return -1; }
    for (size_t i = 0; i < n && b->n_devs < MAX_DEV; i++) {
        qp_device *dv;
        qp_device_info di = {.struct_size = sizeof di};
        if (qp_device_get(r->ctx, i, &dv) || qp_device_get_info(dv, &di)) continue;
        if (di.same_as[0] || (di.kind == QP_DEVICE_REFERENCE && n > 1)) continue;
        b->devs[b->n_devs++].dev = dv;
    }
    return 0;
}

/* Schemes: the fp16 baseline first, then the table's (or those named),
 * each resolved from its exporter config as `qport quantize` does. */
static int bench_resolve_schemes(bench *b) {
    qp_context *ctx = b->r.ctx;
    b->sch[b->n_sch++] = (bscheme){"fp16", {.struct_size = sizeof(qp_scheme), .kind = QP_SCHEME_UNQUANTIZED}, 1, QP_DTYPE_F16};
    for (size_t s = 0; quant_scheme_at(s); s++) {
        const case_scheme *q = quant_scheme_at(s);
        int wanted = !b->o.n_scheme_names;
        for (int i = 0; i < b->o.n_scheme_names; i++) wanted |= !strcmp(b->o.scheme_names[i], q->tool_name);
        if (!wanted) continue;
        qp_config *cfg = NULL;
        bscheme *bs = &b->sch[b->n_sch];
        if (qp_config_load_buffer(ctx, q->tool_name, q->config, strlen(q->config), &cfg) ||
            qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &bs->scheme)) {
            fprintf(stderr, "qport bench: scheme %s: %s\n", q->tool_name, qp_last_error(ctx));
            qp_config_destroy(cfg);
            return -1;
        }
        qp_config_destroy(cfg);
        bs->name = q->tool_name;
        bs->arith = arith_of(&bs->scheme);
        b->n_sch++;
    }
    return 0;
}

/* The devices, the schemes and the JSON file; 0, or the exit status after
 * saying what is wrong. */
static int bench_plan(bench *b) {
    b->devs = calloc(MAX_DEV, sizeof *b->devs);
    b->sch = calloc(MAX_SCHEMES + 1, sizeof *b->sch);
    b->jobs = calloc(MAX_SCHEMES + 1, sizeof *b->jobs);
    b->base = calloc((size_t)MAX_DEV * MAX_M, sizeof *b->base);
    if (!b->devs || !b->sch || !b->jobs || !b->base) { fprintf(stderr, "qport bench: out of memory\n"); return 2; }
    if (bench_open_devices(b)) return 2;
    if (bench_resolve_schemes(b)) return 1;
    if (b->o.json_path && !(b->r.json = fopen(b->o.json_path, "w"))) {
        fprintf(stderr, "qport bench: cannot write %s: %s\n", b->o.json_path, strerror(errno));
        return 2;
    }
    return 0;
}

/* One device's limits, measured and printed before any case. */
static void bench_device(bench *b, int d) {
    bench_run *r = &b->r;
    bdev *dv = &b->devs[d];
    dv->info.struct_size = sizeof dv->info;
    qp_device_get_info(dv->dev, &dv->info);
    snprintf(dv->name, sizeof dv->name, "%s:%d", dv->info.backend, dv->info.index);
    dv->representative = dv->info.kind != QP_DEVICE_CPU_CLASS && dv->info.kind != QP_DEVICE_REFERENCE;
    dv->vendor_ok = -1;
    const char *caveat = dv->representative ? NULL
                       : dv->info.kind == QP_DEVICE_REFERENCE
                           ? "qport's cpu reference: exact loops timed on the host (clock_gettime); "
                             "not representative of GPUs"
                           : "a GPU API implemented on the CPU: not representative of GPUs";
    if (r->json) {
        fprintf(r->json, "%s\n    {\"device\":\"%s\",\"name\":", d ? "," : "", dv->name);
        json_str(r->json, dv->info.name);
        fprintf(r->json, ",\"kind\":\"%s\",\"representative\":%s,\"note\":", qp_device_kind_name(dv->info.kind),
                dv->representative ? "true" : "false");
        json_str(r->json, caveat);
    }
    measure_copy(r, dv, b->o.tiny ? (size_t)16 << 20 : (size_t)256 << 20);
    probe_timer(r, dv);
    if (r->json) {
        fputs(",\"timer\":", r->json);
        json_str(r->json, dv->time_note[0] ? dv->time_note : "");
        fputc('}', r->json);
    }
    printf("device %s: %s (%s)\n", dv->name, dv->info.name, qp_device_kind_name(dv->info.kind));
    if (caveat) printf("  * NOT REPRESENTATIVE OF GPUS (%s): its figures are marked *\n", caveat);
    printf("  bandwidth limit: %s", dv->copy_note);
    if (dv->copy_gbps > 0) printf(" = %.4g GB/s (read + write)", dv->copy_gbps);
    printf("\n%s%s%s", dv->time_note[0] ? "  no timings: " : "", dv->time_note, dv->time_note[0] ? "\n" : "");
}

/* The run's settings, every device's limits, and the table's header. */
static void bench_print_head(bench *b) {
    bench_run *r = &b->r;
    if (r->json)
        fprintf(r->json, "{\n  \"qport_version\":\"%s\",\"shapes\":\"%s\",\"reps\":%d,\"warmup\":%d,\"max_seconds\":%g,"
                         "\"rotate_bytes\":%zu,\"seed\":%llu,\"act_dtype\":\"F16\",\n  \"devices\":[",
                qp_version(), b->o.shapes_arg, r->reps, r->warmup, r->max_seconds, r->rotate_bytes,
                (unsigned long long)r->seed);
    printf("qport bench: %s shapes, %d timed runs after %d+ warm-up (median, p10..p90), fp16 activations, seed %llu\n",
           b->o.shapes_arg, r->reps, r->warmup, (unsigned long long)r->seed);
    if (!b->n_devs) printf("no device to benchmark\n");
    for (int d = 0; d < b->n_devs; d++) bench_device(b, d);
    if (r->json) fputs("\n  ],\n  \"cases\":[", r->json);
    printf("\n%-8s %-16s %6s %6s %5s  %10s  %-20s %9s %9s %7s %9s %7s  %7s  %s\n", "device", "scheme", "N", "K", "M",
           "median ms", "p10..p90 ms", "GEMM ms", "GB/s", "%copy", "TFLOP/s", "%limit", "vs fp16", "judged on");
}

/* The seeded weights and activations of one shape; -1: out of memory, or
 * the fast fp16 encoder disagrees with the library's (said). */
static int bench_shape_inputs(bench *b, int shi) {
    const bshape *sh = &b->o.sizes[shi];
    size_t nk = (size_t)sh->N * sh->K, nx = b->o.maxM * (size_t)sh->K;
    uint64_t s = b->r.seed ^ (0x51ED27ull * (uint64_t)(shi + 1));
    free(b->w);
    free(b->xh);
    b->w = malloc(sizeof *b->w * nk);
    b->xh = malloc(sizeof *b->xh * nx);
    if (!b->w || !b->xh) return -1;
    for (size_t i = 0; i < nk; i++) b->w[i] = 0.05f * rng_unit(&s);
    for (size_t i = 0; i < nx; i++) b->xh[i] = f16_rne(rng_unit(&s));
    for (size_t i = 0; i < 4096 && i < nk; i++) /* the fast encoder is the library's */
        if (f16_rne(b->w[i]) != (uint16_t)qp_format_encode(QP_DTYPE_F16, b->w[i])) {
            fprintf(stderr, "qport bench: internal error: fp16 encoder differs at %.9g\n", (double)b->w[i]);
            return -1;
        }
    return 0;
}

/* Every case of one shape; -1 when its inputs could not be made. */
static int bench_shape(bench *b, int shi, tool_progress *prog) {
    const bshape *sh = &b->o.sizes[shi];
    const int *ms = b->o.ms, nm = b->o.nm;
    if (bench_shape_inputs(b, shi)) return -1;
    /* baselines of this shape: vendor GEMMs now, the fp16 layer first */
    for (int d = 0; d < b->n_devs; d++)
        for (int i = 0; i < MAX_M; i++) {
            b->base[d * MAX_M + i].fp16_ms = NAN;
            if (i < nm) vendor_measure(&b->r, &b->devs[d], ms[i], sh->N, sh->K, &b->base[d * MAX_M + i].v);
        }
    /* checkpoint tensors of every scheme some device can time and run */
    double tq = wall_s();
    for (int si = 0; si < b->n_sch; si++) {
        prep_job *j = &b->jobs[si];
        const bscheme *bs = &b->sch[si];
        *j = (prep_job){.bs = bs, .w = b->w, .N = sh->N, .K = sh->K, .ctx = b->r.ctx};
        for (int d = 0; d < b->n_devs; d++) {
            qp_support_info su;
            j->needed |= !b->devs[d].time_note[0] &&
                         (bs->unquantized || qp_device_supports(b->devs[d].dev, &bs->scheme, 0, sh->N, sh->K, &su) ||
                          su.level != QP_SUPPORT_UNSUPPORTED);
        }
    }
    prep_all(b->jobs, b->n_sch, b->o.tiny ? 1 : b->r.jobs);
    progress_clear(prog);
    printf("-- layer %dx%d (K x N)%s%s: weights quantized in %.1f s\n", sh->K, sh->N, sh->what[0] ? ", " : "",
           sh->what, wall_s() - tq);
    for (int si = 0; si < b->n_sch; si++) {
        for (int d = 0; d < b->n_devs; d++) {
            progress_clear(prog);
            bench_layer(&b->r, &b->devs[d], si, &b->sch[si], sh, ms, nm, &b->jobs[si], b->xh, &b->base[d * MAX_M]);
            progress_step(prog, nm);
        }
        prep_free(&b->jobs[si]);
    }
    return 0;
}

/* Every shape; the exit status so far. */
static int bench_measure(bench *b) {
    tool_progress prog;
    progress_start(&prog, "bench: cases", (long)b->o.n_sizes * b->n_sch * b->n_devs * b->o.nm);
    for (int shi = 0; shi < b->o.n_sizes; shi++)
        if (bench_shape(b, shi, &prog)) {
            progress_end(&prog);
            fprintf(stderr, "qport bench: out of memory\n");
            return 1;
        }
    progress_end(&prog);
    return b->r.n_fail ? 1 : 0;
}

static double geomean(double sum_log, int n) { return n ? exp(sum_log / n) : NAN; }

static int has_means(const bdev *d, int si) { return d->nsp[si][0] || d->nsp[si][1] || d->neff[si][0] || d->neff[si][1]; }

static void bench_json_tail(bench *b) {
    FILE *f = b->r.json;
    fputs("\n  ],\n  \"vendor_baselines\":[", f);
    for (int d = 0; d < b->n_devs; d++) {
        const bdev *dv = &b->devs[d];
        fprintf(f, "%s{\"device\":\"%s\",\"available\":%s,\"note\":", d ? "," : "", dv->name,
                dv->vendor_ok > 0 ? "true" : "false");
        json_str(f, dv->vendor_ok == 0 ? dv->vendor_note : dv->vendor_ok < 0 ? "not measured" : "");
        fputc('}', f);
    }
    fputs("],\n  \"by_scheme\":[", f);
    int first = 1;
    for (int d = 0; d < b->n_devs; d++)
        for (int si = 0; si < b->n_sch; si++) {
            const bdev *dv = &b->devs[d];
            if (!has_means(dv, si)) continue;
            fprintf(f, "%s\n    {\"device\":\"%s\",\"scheme\":\"%s\"", first ? "" : ",", dv->name, b->sch[si].name);
            static const char *const ph[2] = {"decode", "prefill"};
            for (int k = 0; k < 2; k++) {
                fprintf(f, ",\"%s\":{\"cases\":%d,\"geomean_speedup_vs_fp16\":", ph[k], dv->neff[si][k]);
                json_num(f, geomean(dv->lsp[si][k], dv->nsp[si][k]));
                fputs(",\"geomean_efficiency\":", f);
                json_num(f, geomean(dv->leff[si][k], dv->neff[si][k]));
                fputc('}', f);
            }
            fputc('}', f);
            first = 0;
        }
    fprintf(f, "],\n  \"summary\":{\"ok\":%d,\"skip\":%d,\"fail\":%d,\"seconds\":%.1f}\n}\n", b->r.n_ok, b->r.n_skip,
            b->r.n_fail, wall_s() - b->t_start);
}

/* The counts, and the headline: per device and scheme, geometric means
 * over sizes and M. */
static void bench_print_tail(bench *b) {
    int any_cpu = 0;
    for (int d = 0; d < b->n_devs; d++) any_cpu |= !b->devs[d].representative;
    if (b->r.json) bench_json_tail(b);
    printf("\nbench: %d measured, %d skipped, %d failed, %.1f s%s\n", b->r.n_ok, b->r.n_skip, b->r.n_fail,
           wall_s() - b->t_start, any_cpu ? "  (* = CPU implementation: not representative of GPUs)" : "");
    for (int d = 0; d < b->n_devs; d++)
        if (b->devs[d].vendor_ok == 0) printf("  %s: no vendor GEMM baselines: %s\n", b->devs[d].name, b->devs[d].vendor_note);
    int any_row = 0;
    for (int d = 0; d < b->n_devs; d++)
        for (int si = 0; si < b->n_sch; si++) {
            const bdev *dv = &b->devs[d];
            if (!has_means(dv, si)) continue;
            if (!any_row++)
                printf("\ngeometric means over each phase's cases (sizes x M): speedup vs fp16 and efficiency "
                       "(decode: %%copy, prefill: %%limit)\n");
            char a[16], bb[16], c[16], e[16];
            printf("  %-8s %-16s  decode %7s %7s   prefill %7s %7s%s\n", dv->name, b->sch[si].name,
                   fmt_x(a, geomean(dv->lsp[si][0], dv->nsp[si][0])), fmt_pct(bb, geomean(dv->leff[si][0], dv->neff[si][0])),
                   fmt_x(c, geomean(dv->lsp[si][1], dv->nsp[si][1])), fmt_pct(e, geomean(dv->leff[si][1], dv->neff[si][1])),
                   dv->representative ? "" : " *");
        }
}

/* Closes the JSON file (a failed write makes rc 1 if it was 0) and frees
 * everything; rc. */
static int bench_free(bench *b, int rc) {
    if (b->r.json && fclose(b->r.json)) {
        fprintf(stderr, "qport bench: writing %s failed\n", b->o.json_path);
        rc = rc ? rc : 1;
    }
    for (int d = 0; b->devs && d < b->n_devs; d++) { qp_buffer_destroy(b->devs[d].fa); qp_buffer_destroy(b->devs[d].fb); }
    for (int si = 0; b->jobs && si < b->n_sch; si++) prep_free(&b->jobs[si]);
    void *owned[] = {b->w, b->xh, b->base, b->jobs, b->devs, b->sch};
    for (size_t i = 0; i < sizeof owned / sizeof *owned; i++) free(owned[i]);
    qp_context_destroy(b->r.ctx);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    int rc;
    if (bench_other_mode(argc, argv, &rc)) return rc;
    bench b;
    memset(&b, 0, sizeof b);
    if ((rc = bench_parse(argc, argv, &b.o, &b.r)) >= 0) return rc;
    if (qp_context_create(&b.r.ctx)) { fprintf(stderr, "qport bench: cannot create a context\n"); return 1; }
    tool_install_log(b.r.ctx);
    b.t_start = wall_s();
    rc = bench_plan(&b);
    if (!rc) {
        bench_print_head(&b);
        rc = bench_measure(&b);
        bench_print_tail(&b);
    }
    return bench_free(&b, rc);
}
