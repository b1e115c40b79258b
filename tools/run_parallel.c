/* qport run under mpirun: each layer across the ranks of a
 * communicator -- tensor-parallel linear layers (--tp-size N), expert-
 * parallel MoE blocks (--ep-size N) -- each rank on its own device (the
 * rank-th --device, cycling; else QPORT_DEVICE or the best device), and
 * rank 0 compares the result every rank ends with against
 *   (a) the same split on the cpu reference: each rank's shard computed by
 *       the reference and reduced in the same fixed order -- bit for bit
 *       for integer schemes, the float rule of `qport run` otherwise;
 *   (b) the single-device cpu reference: column-parallel gathers must be
 *       bit-exact; row-parallel and expert-parallel sums within the bound
 *       of their reduction order (each rank's partial rounded to the model
 *       dtype, an fp32 sum, one rounding), except where vLLM's ranks
 *       quantize activations with scales of their own slice (dynamic
 *       per-token / per-tensor scales of a row-parallel layer), which is
 *       reported, not bounded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "tool.h"

int run_moe_logits(qp_model *m, const char *router, qp_dtype dt, const void *x, int M, int H, int E, uint64_t seed,
                    float *logits);

#define ROW "%-34s %-14s %-22s %-24.24s %9s %6s %10s %-7s\n"

static size_t dsz(qp_dtype dt) { return dt == QP_DTYPE_F32 ? 4 : 2; }

static double at(qp_dtype dt, const void *p, size_t i) {
    if (dt == QP_DTYPE_F32) { float v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
    return qp_format_decode(dt, ((const uint16_t *)p)[i]);
}

/* One unit in the last place of |v| in dt (the spacing at v). */
static double ulp(qp_dtype dt, double v) {
    int mant = dt == QP_DTYPE_F16 ? 10 : dt == QP_DTYPE_BF16 ? 7 : 23;
    int emin = dt == QP_DTYPE_F16 ? -14 : -126;
    v = fabs(v);
    int e = v > 0 ? (int)floor(log2(v)) : emin;
    if (e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

/* The fixed-order sum of the parallel layers (qp_comm_allreduce_sum_ordered). */
static void ordered_sum(qp_dtype dt, void *const *parts, int n, size_t cnt, void *out) {
    for (size_t i = 0; i < cnt; i++) {
        float acc = 0.0f;
        for (int r = 0; r < n; r++) acc += (float)at(dt, parts[r], i);
        if (dt == QP_DTYPE_F32) memcpy((char *)out + 4 * i, &acc, 4);
        else ((uint16_t *)out)[i] = (uint16_t)qp_format_encode(dt, acc);
    }
}

/* The device rule of `qport run`: bit for bit for integer schemes, else
 * every element within 1e-2 * max(|ref|, 1) and NMSE <= 2^-20. */
static int dev_rule(qp_dtype dt, const void *ref, const void *got, size_t n, int exact) {
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) {
        double a = at(dt, ref, i), v = at(dt, got, i);
        if (exact) { if (memcmp((const char *)ref + i * dsz(dt), (const char *)got + i * dsz(dt), dsz(dt))) return 0; continue; }
        if (!(fabs(a - v) <= fmax(fabs(a), 1.0) * 1e-2)) return 0;
        if (isfinite(a) && isfinite(v)) { se += (a - v) * (a - v); sr += a * a; }
    }
    return exact || se <= sr * 0x1p-20 + 1e-30;
}

/* The reduction-order bound between the sliced reference's sum and the
 * single-device reference: each partial rounded (<= 1 ulp of it, two
 * roundings where the bias is added after), the fp32 sum (n * 2^-24 of the
 * sum of |partials|), the final rounding and the reference's own (1 ulp
 * each, generous). Returns the number of elements outside it. */
static long order_bound(qp_dtype dt, void *const *parts, int n, const void *ysl, const void *yref, size_t cnt,
                        double *worst_ratio) {
    long bad = 0;
    *worst_ratio = 0;
    for (size_t i = 0; i < cnt; i++) {
        double b = 0, sa = 0;
        for (int r = 0; r < n; r++) {
            double p = at(dt, parts[r], i);
            b += ulp(dt, p);
            sa += fabs(p);
        }
        double s = at(dt, ysl, i), y = at(dt, yref, i);
        b += ulp(dt, s) + ulp(dt, y) + n * 0x1p-24 * sa;
        double d = fabs(s - y);
        if (!(d <= b)) bad++;
        if (b > 0 && d / b > *worst_ratio) *worst_ratio = d / b;
    }
    return bad;
}

static double max_abs_diff(qp_dtype dt, const void *a, const void *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double x = at(dt, a, i), y = at(dt, b, i);
        if (isfinite(x) && isfinite(y)) m = fmax(m, fabs(x - y));
    }
    return m;
}

/* Activation scales a row-parallel rank computes from its own slice. */
static int slice_dependent_scales(const qp_scheme *s) {
    const qp_qtensor *a = &s->activation;
    return s->kind == QP_SCHEME_QQQ_W4A8 ||
           (a->dtype != QP_DTYPE_NONE && a->dynamic && (a->granularity == QP_GRAN_TOKEN || a->granularity == QP_GRAN_TENSOR));
}

typedef struct par_ctx {
    qp_context *ctx;
    qp_comm *comm;
    qp_model *m;
    qp_device *dev, *refdev;
    int rank, size, M;
    qp_dtype dt;
    char devs[256];   /* "vulkan:0+opencl:0" */
    uint64_t seed;
    int reps;         /* timed forwards (qport bench --tp-size: the median) */
    int n_ok, n_fail;
} par_ctx;

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* After `reps` timed forwards: the medians of the layer time and of the
 * collectives' time, as the "ms" and "comm" columns. */
static void timing_cols(const double *tot, const double *com, int reps, char *ms, size_t mcap, char *share, size_t scap) {
    double *t = malloc(sizeof(double) * (size_t)reps), *c = malloc(sizeof(double) * (size_t)reps);
    if (!t || !c) { free(t); free(c); snprintf(ms, mcap, "-"); snprintf(share, scap, "-"); return; }
    memcpy(t, tot, sizeof(double) * (size_t)reps);
    memcpy(c, com, sizeof(double) * (size_t)reps);
    qsort(t, (size_t)reps, sizeof *t, cmp_dbl);
    qsort(c, (size_t)reps, sizeof *c, cmp_dbl);
    snprintf(ms, mcap, "%.3f", t[reps / 2]);
    snprintf(share, scap, "%.0f%%", 100 * c[reps / 2] / fmax(t[reps / 2], 1e-9));
    free(t);
    free(c);
}

static void say_error(par_ctx *p, const char *layer) {
    /* every rank reports it, rank-tagged, to stdout like the rows */
    printf("rank %d: %s: error: %s\n", p->rank, layer, qp_last_error(p->ctx));
    fflush(stdout);
}

/* Either parallel layer (pl or pm) with its input and output. */
typedef struct par_layer {
    qp_par_linear *pl;
    qp_par_moe *pm;
    const void *x;
    const float *logits; /* MoE only */
    void *y;
} par_layer;

/* One forward of the layer; its info after it into `in` (if given). */
static qp_status par_forward(const par_ctx *p, const par_layer *l, qp_par_info *in) {
    qp_status st = l->pl ? qp_par_linear_forward(l->pl, l->x, p->M, l->y)
                         : qp_par_moe_forward(l->pm, l->x, p->M, l->logits, l->y);
    if (in && l->pl) qp_par_linear_info(l->pl, in);
    else if (in) qp_par_moe_info(l->pm, in);
    return st;
}

/* A warm-up forward (pipelines, caches), a barrier so that rank 0's checks
 * of the last layer do not count as collective time, then p->reps timed
 * forwards: each one's total and communication time. */
static qp_status time_layer(par_ctx *p, const par_layer *l, qp_par_info *in, double *tot, double *com) {
    qp_status st = par_forward(p, l, NULL);
    if (!st) st = qp_comm_barrier(p->comm);
    for (int r = 0; !st && r < p->reps; r++) {
        st = par_forward(p, l, in);
        tot[r] = in->compute_ms + in->comm_ms;
        com[r] = in->comm_ms;
    }
    return st;
}

/* What rank 0 found comparing a layer's result with the cpu reference. */
typedef struct verdict {
    const char *kind, *path, *ms, *share; /* the row's columns */
    char errs[16];                        /* max |y - single-device reference| */
    int pass_a;                           /* y matches the same split on the cpu reference */
    char why_b[160];                      /* how that split differs from one cpu device; "" if not */
    const char *note;                     /* why a comparison was not bounded; "" when none */
} verdict;

/* Rank 0's report on a layer: its row and a line for each failed or
 * unbounded comparison, or the cpu reference's error (ok 0); counts it and
 * frees the reference results. */
static void report(par_ctx *p, const char *layer, int ok, const verdict *v, void **parts, void *ysl, void *yref) {
    if (ok) {
        int pass = v->pass_a && !v->why_b[0];
        printf(ROW, layer, v->kind, p->devs, v->path, v->ms, v->share, v->errs, pass ? "ok" : "FAIL");
        if (!v->pass_a) printf("  %s: the ranks' result differs from the same split on the cpu reference\n", layer);
        if (v->why_b[0]) printf("  %s: %s\n", layer, v->why_b);
        if (v->note[0]) printf("  %s: %s\n", layer, v->note);
        if (pass) p->n_ok++; else p->n_fail++;
    } else {
        printf("%-34s error: the cpu reference: %s\n", layer, qp_last_error(p->ctx));
        p->n_fail++;
    }
    for (int r = 0; parts && r < p->size; r++) free(parts[r]);
    free(parts); free(ysl); free(yref);
}

/* Bind options placing rank r of n, tensor-parallel or (ep) expert-parallel. */
static qp_bind_options placed(int ep, int n, int r) {
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    if (ep) {
        bo.ep_size = n;
        bo.ep_rank = r;
    } else {
        bo.tp_size = n;
        bo.tp_rank = r;
    }
    return bo;
}

/* The cpu reference of one linear layer bound with (tp, rank): y [M][N]. */
static int ref_linear(par_ctx *p, const char *layer, int tp, int r, const void *x_full, int Kfull, void *y, int *N_out) {
    qp_bind_options bo = placed(0, tp, r);
    qp_layer_binding b;
    if (qp_model_bind_layer(p->m, layer, &bo, &b)) return 1;
    size_t es = dsz(p->dt);
    int row = tp > 1 && qp_layer_is_row_parallel(layer);
    void *xs = malloc(es * (size_t)p->M * b.K);
    int rc = 1;
    qp_linear *lin = NULL;
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = p->dt;
    lo.layer = layer;
    lo.shard_rows = b.n_shards ? b.shard_rows : NULL;
    lo.n_shards = b.n_shards;
    if (xs) {
        for (int m = 0; m < p->M; m++)
            memcpy((char *)xs + (size_t)m * b.K * es, (const char *)x_full + ((size_t)m * Kfull + (row ? (size_t)r * b.K : 0)) * es,
                   (size_t)b.K * es);
        rc = qp_linear_create(p->refdev, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, &lo, &lin) || qp_linear_forward(lin, xs, p->M, y);
    }
    *N_out = b.N;
    qp_linear_destroy(lin);
    free(xs);
    qp_layer_binding_free(&b);
    return rc;
}

static void run_linear(par_ctx *p, const char *layer) {
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = p->dt;
    /* what each rank sees first, agreed on before any data moves: 0 runs,
     * 1 the rank's device cannot run the scheme (a skip of the layer on
     * every rank, not a failure), 2 the layer is not quantized; binding
     * errors surface, collectively, in qp_par_linear_create */
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    qp_layer_binding b1;
    qp_status st = qp_model_bind_layer(p->m, layer, &bo, &b1);
    int32_t flag = 0;
    qp_scheme scheme = st ? (qp_scheme){0} : b1.scheme;
    int Kfull = st ? 0 : b1.K, Nfull = st ? 0 : b1.N;
    if (!st) qp_layer_binding_free(&b1);
    qp_support_info si = {0};
    if (st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(p->ctx), "not quantized")) flag = 2;
    else if (!st && !qp_device_supports(p->dev, &scheme, p->M, 0, 0, &si) && si.level == QP_SUPPORT_UNSUPPORTED) flag = 1;
    int32_t *flags = calloc((size_t)p->size, sizeof *flags);
    if (!flags || qp_comm_allgather(p->comm, &flag, sizeof flag, flags)) { free(flags); p->n_fail++; say_error(p, layer); return; }
    int n2 = 0, first1 = -1;
    for (int r = 0; r < p->size; r++) {
        n2 += flags[r] == 2;
        if (flags[r] == 1 && first1 < 0) first1 = r;
    }
    free(flags);
    if (n2 == p->size) {
        if (!p->rank) printf(ROW, layer, "unquantized", "-", "-", "-", "-", "-", "skip");
        return;
    }
    if (n2) {
        printf("rank %d: %s: error: ranks disagree: the layer is not quantized on %d of %d ranks\n", p->rank, layer, n2, p->size);
        p->n_fail++;
        return;
    }
    if (first1 >= 0) {
        if (!p->rank) {
            char why[300];
            snprintf(why, sizeof why, "rank %d: %s", first1, first1 == p->rank ? si.reason : "device lacks the scheme");
            printf(ROW, layer, qp_scheme_kind_name(scheme.kind), p->devs, why, "-", "-", "-", "skip");
        }
        return;
    }
    qp_par_linear *pl = NULL;
    if ((st = qp_par_linear_create(p->comm, p->dev, p->m, layer, NULL, &lo, &pl))) {
        say_error(p, layer);
        p->n_fail++;
        return;
    }
    qp_par_info in;
    qp_par_linear_info(pl, &in);
    size_t es = dsz(p->dt), oes = dsz(in.out_dtype);
    void *x = malloc(es * (size_t)p->M * in.K), *y = malloc(oes * (size_t)p->M * in.N);
    if (!x || !y) { free(x); free(y); qp_par_linear_destroy(pl); p->n_fail++; return; }
    if (p->dt == QP_DTYPE_F32) {
        uint16_t *h = malloc(2 * (size_t)p->M * in.K);
        if (h) case_activations(DIST_OUTLIERS, QP_DTYPE_F16, p->M, in.K, p->seed, h);
        for (size_t i = 0; h && i < (size_t)p->M * in.K; i++) ((float *)x)[i] = qp_format_decode(QP_DTYPE_F16, h[i]);
        free(h);
    } else {
        case_activations(DIST_OUTLIERS, p->dt, p->M, in.K, p->seed, x); /* the same x on every rank */
    }
    double tot[1000], com[1000];
    st = time_layer(p, &(par_layer){.pl = pl, .x = x, .y = y}, &in, tot, com);
    if (st) {
        say_error(p, layer);
        p->n_fail++;
        free(x); free(y); qp_par_linear_destroy(pl);
        return;
    }
    char path[64], ms[16], share[8];
    snprintf(path, sizeof path, "%s tp%d %s", in.row_parallel ? "row" : "col", p->size,
             in.row_parallel ? "fp32 sum" : "gather");
    timing_cols(tot, com, p->reps, ms, sizeof ms, share, sizeof share);
    if (p->rank == 0) {
        /* (a) the same split on the cpu reference, (b) one cpu device */
        size_t cnt = (size_t)p->M * in.N;
        void **parts = calloc((size_t)p->size, sizeof *parts);
        void *ysl = malloc(oes * cnt), *yref = malloc(oes * cnt);
        int ok = parts && ysl && yref, Nl = 0, N1 = 0;
        for (int r = 0; ok && r < p->size; r++)
            ok = (parts[r] = malloc(oes * (size_t)p->M * (in.row_parallel ? in.N : in.N_local))) &&
                 !ref_linear(p, layer, p->size, r, x, in.K, parts[r], &Nl);
        ok = ok && !ref_linear(p, layer, 1, 0, x, in.K, yref, &N1) && N1 == in.N && in.N == Nfull && in.K == Kfull;
        verdict v = {.kind = qp_scheme_kind_name(in.scheme.kind), .path = path, .ms = ms, .share = share, .note = ""};
        if (ok) {
            if (in.row_parallel) {
                ordered_sum(in.out_dtype, parts, p->size, cnt, ysl);
            } else { /* gather the cpu shards as the layer does */
                qp_bind_options b0 = placed(0, p->size, 0);
                qp_layer_binding bb;
                int nsh = 1, rows[8] = {in.N_local};
                if (!qp_model_bind_layer(p->m, layer, &b0, &bb)) {
                    if (bb.n_shards) { nsh = (int)bb.n_shards; for (int s = 0; s < nsh; s++) rows[s] = bb.shard_rows[s]; }
                    qp_layer_binding_free(&bb);
                }
                for (int r = 0; r < p->size; r++)
                    for (int m = 0; m < p->M; m++) {
                        int lo_ = 0, go = 0;
                        for (int s = 0; s < nsh; s++) {
                            memcpy((char *)ysl + ((size_t)m * in.N + go + (size_t)r * rows[s]) * oes,
                                   (char *)parts[r] + ((size_t)m * in.N_local + lo_) * oes, (size_t)rows[s] * oes);
                            lo_ += rows[s];
                            go += rows[s] * p->size;
                        }
                    }
            }
            int exact = tool_kind_exact(in.scheme.kind);
            v.pass_a = dev_rule(in.out_dtype, ysl, y, cnt, exact);
            int pass_b = 1;
            double worst = 0;
            if (!in.row_parallel) pass_b = !memcmp(ysl, yref, oes * cnt); /* gathers are exact */
            else if (slice_dependent_scales(&in.scheme)) v.note = "(rank-local act scales: not bounded)";
            else pass_b = order_bound(in.out_dtype, parts, p->size, ysl, yref, cnt, &worst) == 0;
            if (!pass_b)
                snprintf(v.why_b, sizeof v.why_b, "the cpu split differs from the single-device reference%s",
                         in.row_parallel ? " beyond the reduction-order bound" : " (a gather must be exact)");
            snprintf(v.errs, sizeof v.errs, "%.3g", max_abs_diff(in.out_dtype, yref, y, cnt));
        }
        report(p, layer, ok, &v, parts, ysl, yref);
    }
    fflush(stdout);
    free(x); free(y);
    qp_par_linear_destroy(pl);
}

static int ref_moe(par_ctx *p, const char *prefix, int ep, int r, const void *x, const float *logits, void *y) {
    qp_bind_options bo = placed(1, ep, r);
    qp_moe_binding b;
    if (qp_model_bind_moe(p->m, prefix, &bo, &b)) return 1;
    qp_moe_options mo;
    qp_moe *moe = NULL;
    int rc = qp_model_moe_options(p->m, prefix, &mo);
    if (!rc) {
        mo.act_dtype = p->dt;
        mo.global_num_experts = b.global_num_experts;
        mo.expert_offset = b.expert_offset;
        rc = qp_moe_create(p->refdev, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &mo, &moe) ||
             qp_moe_forward(moe, x, p->M, logits, y);
    }
    qp_moe_destroy(moe);
    qp_moe_binding_free(&b);
    return rc;
}

static void run_moe_par(par_ctx *p, const char *prefix) {
    if (p->dt != QP_DTYPE_F16 && p->dt != QP_DTYPE_BF16) {
        if (!p->rank) printf(ROW, prefix, "moe", "-", "MoE runs in fp16/bf16 only", "-", "-", "-", "skip");
        return;
    }
    qp_moe_options mo;
    qp_status st = qp_model_moe_options(p->m, prefix, &mo);
    if (!st) mo.act_dtype = p->dt;
    qp_par_moe *pm = NULL;
    if (!st) st = qp_par_moe_create(p->comm, p->dev, p->m, prefix, NULL, &mo, &pm);
    else st = qp_comm_agree(p->comm, st);
    if (st) { say_error(p, prefix); p->n_fail++; return; }
    qp_par_info in;
    qp_par_moe_info(pm, &in);
    size_t cnt = (size_t)p->M * in.N;
    void *x = malloc(2 * cnt), *y = malloc(2 * cnt);
    float *logits = malloc(sizeof(float) * (size_t)p->M * in.G);
    qp_moe_binding b;
    char router[256] = "";
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    if (!qp_model_bind_moe(p->m, prefix, &bo, &b)) { snprintf(router, sizeof router, "%s", b.router); qp_moe_binding_free(&b); }
    if (!x || !y || !logits) { free(x); free(y); free(logits); qp_par_moe_destroy(pm); p->n_fail++; return; }
    case_activations(DIST_OUTLIERS, p->dt, p->M, in.N, p->seed, x);
    if (run_moe_logits(p->m, router, p->dt, x, p->M, in.N, in.G, p->seed, logits)) { /* the same on every rank */
        if (p->rank == 0) printf("%-40s error: no usable router '%s'\n", prefix, router);
        free(x); free(y); free(logits); qp_par_moe_destroy(pm); p->n_fail++;
        return;
    }
    double tot[1000], com[1000];
    st = time_layer(p, &(par_layer){.pm = pm, .x = x, .logits = logits, .y = y}, &in, tot, com);
    if (st) {
        say_error(p, prefix);
        p->n_fail++;
    } else {
        char kind[32], path[64], ms[16], share[8];
        snprintf(kind, sizeof kind, "moe %s", qp_scheme_kind_name(in.scheme.kind));
        snprintf(path, sizeof path, "ep%d top-%d fp32 sum", p->size, mo.top_k);
        timing_cols(tot, com, p->reps, ms, sizeof ms, share, sizeof share);
        if (p->rank == 0) {
            void **parts = calloc((size_t)p->size, sizeof *parts);
            void *ysl = malloc(2 * cnt), *yref = malloc(2 * cnt);
            int ok = parts && ysl && yref;
            for (int r = 0; ok && r < p->size; r++) ok = (parts[r] = malloc(2 * cnt)) && !ref_moe(p, prefix, p->size, r, x, logits, parts[r]);
            ok = ok && !ref_moe(p, prefix, 1, 0, x, logits, yref);
            verdict v = {.kind = kind, .path = path, .ms = ms, .share = share, .note = ""};
            if (ok) {
                ordered_sum(p->dt, parts, p->size, cnt, ysl);
                int exact = tool_kind_exact(in.scheme.kind);
                v.pass_a = dev_rule(p->dt, ysl, y, cnt, exact);
                double worst;
                /* a per-tensor dynamic scale of the second GEMM's input is
                 * the absmax over the rank's own slot rows, as on vLLM's
                 * expert-parallel ranks: not bounded against one device */
                const qp_qtensor *a = &in.scheme.activation;
                int local = a->dtype != QP_DTYPE_NONE && a->dynamic && a->granularity == QP_GRAN_TENSOR;
                long out = local ? 0 : order_bound(p->dt, parts, p->size, ysl, yref, cnt, &worst);
                if (out)
                    snprintf(v.why_b, sizeof v.why_b,
                             "%ld elements of the cpu split beyond the reduction-order bound of the single-device reference", out);
                if (local) v.note = "(rank-local act scales: not bounded)";
                snprintf(v.errs, sizeof v.errs, "%.3g", max_abs_diff(p->dt, yref, y, cnt));
            }
            report(p, prefix, ok, &v, parts, ysl, yref);
        }
    }
    fflush(stdout);
    free(x); free(y); free(logits);
    qp_par_moe_destroy(pm);
}

int run_parallel(qp_context *ctx, qp_model *m, const char *comm_kind, const char *const *dev_specs, int nd, int tp, int ep,
                 qp_dtype dt, int M, uint64_t seed, int reps, char **layers, int nlayers, const char *const *moes, int nmoes) {
    qp_comm *comm = NULL;
    if (qp_comm_create(ctx, comm_kind, &comm)) {
        fprintf(stderr, "qport run: no communicator: %s\n", qp_last_error(ctx));
        return 1;
    }
    par_ctx p = {.ctx = ctx, .comm = comm, .m = m, .dt = dt, .M = M, .seed = seed, .reps = reps < 1 ? 1 : reps > 1000 ? 1000 : reps};
    p.rank = qp_comm_rank(comm);
    p.size = qp_comm_size(comm);
    qp_status st = QP_OK;
    if ((tp > 1 && tp != p.size) || (ep > 1 && ep != p.size) || (tp <= 1 && ep <= 1))
        st = QP_ERR_INVALID_ARGUMENT; /* the same arguments on every rank: each says it */
    if (st) {
        fprintf(stderr, "qport run: rank %d: --tp-size %d / --ep-size %d must equal the %d ranks of the job\n", p.rank, tp, ep,
                p.size);
        qp_comm_destroy(comm);
        return 2;
    }
    if (!(st = qp_device_find(ctx, "cpu", &p.refdev))) {
        if (nd) st = qp_device_find(ctx, dev_specs[p.rank % nd], &p.dev);
        else st = qp_device_pick(ctx, NULL, &p.dev);
    }
    st = qp_comm_agree(comm, st);
    if (st) {
        printf("rank %d: error: %s\n", p.rank, qp_last_error(ctx));
        qp_comm_destroy(comm);
        return 1;
    }
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(p.dev, &di);
    char mine[32] = "", *all = calloc((size_t)p.size, 32);
    snprintf(mine, sizeof mine, "%s:%d", di.backend, di.index);
    if (all && !qp_comm_allgather(comm, mine, 32, all)) {
        for (int r = 0; r < p.size; r++) {
            size_t l = strlen(p.devs);
            snprintf(p.devs + l, sizeof p.devs - l, "%s%.31s", r ? "+" : "", all + 32 * r);
        }
    }
    if (!p.rank) {
        printf("parallel: %s, %d ranks on %s (tp %d, ep %d); rank 0 checks against the cpu reference%s\n",
               qp_comm_name(comm), p.size, p.devs, tp, ep, p.reps > 1 ? "; ms and comm: medians of the timed runs" : "");
        printf("%-34s %-14s %-22s %-24s %9s %6s %10s %-7s\n", "layer", "scheme", "devices", "split", "ms", "comm", "max_err",
               "verdict");
    }
    fflush(stdout);
    free(all);
    for (int i = 0; tp > 1 && i < nlayers; i++) run_linear(&p, layers[i]);
    for (int i = 0; ep > 1 && i < nmoes; i++) run_moe_par(&p, moes[i]);
    if (tp > 1 && ep <= 1 && nmoes && !p.rank)
        printf("%d MoE block(s) not run: MoE blocks run expert-parallel (--ep-size %d); tensor-parallel experts are not "
               "implemented\n", nmoes, p.size);
    if (ep > 1 && tp <= 1 && nlayers && !p.rank)
        printf("%d linear layer(s) not run: linear layers run tensor-parallel (--tp-size %d)\n", nlayers, p.size);
    /* every rank ends with rank 0's verdict */
    int32_t counts[2] = {p.n_ok, p.n_fail};
    if (qp_comm_broadcast(comm, counts, sizeof counts, 0)) counts[1]++;
    if (!p.rank)
        printf("%d ok, %d failed (across %d ranks; integer schemes bit-exact against the same split on the cpu reference, "
               "column gathers bit-exact and reductions within their order's bound against one cpu device; "
               "docs/parallel.md)\n", counts[0], counts[1], p.size);
    qp_comm_destroy(comm);
    return counts[1] || p.n_fail ? 1 : 0;
}
