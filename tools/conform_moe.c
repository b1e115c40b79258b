/* qport conform's MoE cases: every MoE scheme on every device
 * against the cpu reference, with the same experts and routing:
 * E in {8, 64}, k in {1, 2, 8}, M tokens from 1 to 512, experts that get
 * no token, one expert in every token's first slot, grouped top-k routing
 * (DeepSeek's: sigmoid scores, 4 groups of which 2 compete) from router
 * logits. Routing is the core's (qp_moe_route, on the host), so every
 * device gets the same expert ids. int8 experts must match the reference
 * bit for bit; float experts, device and reference alike, must stay within
 * the bound of cases_moe.c around an fp64 model of the block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cases_moe.h"
#include "conform.h"

typedef struct moe_shape { int E, H, I, k; } moe_shape;
static const moe_shape quick_shapes[] = {{8, 64, 64, 2}, {8, 64, 32, 1}};
static const moe_shape full_shapes[] = {{8, 64, 64, 2}, {8, 64, 32, 1}, {64, 128, 64, 8}, {8, 256, 128, 2}};
/* fp8 per-block experts need H and I in whole 128 x 128 weight blocks */
static const moe_shape blk_quick_shapes[] = {{8, 256, 128, 2}};
static const moe_shape blk_full_shapes[] = {{8, 256, 128, 2}, {64, 128, 128, 8}};
static const int quick_m[] = {1, 3, 17};
static const int full_m[] = {1, 3, 16, 17, 64, 512};

typedef enum { R_PLAIN, R_HOT, R_COLD, R_GROUPED } routing;
static const char *const routing_name[] = {"topk", "hot-expert", "cold-expert", "grouped"};

static int wanted(const char *name, const char *const *schemes, int n) {
    if (!n) return 1;
    for (int i = 0; i < n; i++)
        if (!strncmp(schemes[i], "moe:", 4) && !strcmp(schemes[i] + 4, name)) return 1;
    return 0;
}

/* Routing variant of case number `no` for M tokens (cold and hot experts,
 * then grouped top-k where the experts split into 4 groups). */
static routing routing_of(int no, int M, const moe_shape *s) {
    routing r = (routing)(no % 4);
    if (r == R_GROUPED && (s->E % 4 || s->k > 4)) r = R_PLAIN;
    if (r == R_HOT && M < 2) r = R_PLAIN;
    return r;
}

#define N_OF(a) ((int)(sizeof a / sizeof *a))

/* The shapes MoE scheme `name` runs at, and their number in *n. */
static const moe_shape *shapes_of(const char *name, int full, int *n) {
    int blk = !strcmp(name, "fp8-block");
    *n = blk ? (full ? N_OF(blk_full_shapes) : N_OF(blk_quick_shapes)) : full ? N_OF(full_shapes) : N_OF(quick_shapes);
    return blk ? (full ? blk_full_shapes : blk_quick_shapes) : full ? full_shapes : quick_shapes;
}

long conform_moe_count(int full, const char *const *schemes, int n_schemes, int n_devs) {
    long n = 0;
    int nm = full ? N_OF(full_m) : N_OF(quick_m);
    for (int i = 0; i < case_moe_scheme_count(); i++) {
        int ns;
        shapes_of(case_moe_scheme(i), full, &ns);
        if (wanted(case_moe_scheme(i), schemes, n_schemes)) n += 2L * ns * nm * n_devs;
    }
    return n;
}

/* Device and reference outputs against the model; exact schemes bit for
 * bit against the reference. Returns 1 on pass. */
static int judge(const case_moe *c, int exact, const uint16_t *yr, const uint16_t *yd, const double *y64, const double *b,
                 size_t n, double *ma, double *nm, long *bad, char *note, size_t cap) {
    double se = 0, sr = 0, worst = 0;
    *ma = 0;
    *bad = 0;
    note[0] = 0;
    for (size_t i = 0; i < n; i++) {
        double r = qp_format_decode(c->dt, yr[i]), d = qp_format_decode(c->dt, yd[i]);
        int wrong;
        if (!isfinite(r) || !isfinite(d)) wrong = !(isnan(r) && isnan(d)) && r != d;
        else {
            *ma = fmax(*ma, fabs(d - r));
            se += (d - r) * (d - r);
            sr += r * r;
            worst = fmax(worst, fabs(d - y64[i]) / b[i]);
            wrong = exact ? yr[i] != yd[i] : fabs(d - y64[i]) > b[i];
        }
        if (wrong && (*bad)++ == 0)
            snprintf(note, cap, "first at [%zu,%zu]: ref %.8g (0x%04x) got %.8g (0x%04x), model %.8g +- %.3g", i / (size_t)c->H,
                     i % (size_t)c->H, r, yr[i], d, yd[i], y64[i], b[i]);
    }
    *nm = sr > 0 ? se / sr : se;
    if (!*bad && !exact) snprintf(note, cap, "worst %.3f of the bound", worst);
    return *bad == 0;
}

long conform_moe(run *r, qp_device *refdev, qp_device *const *devs, const char (*devname)[64], int n_devs, int full,
                 const char *const *schemes, int n_schemes, int row0) {
    const int *ms = full ? full_m : quick_m;
    int nm = full ? N_OF(full_m) : N_OF(quick_m);
    long done = 0;
    int case_no = 0;
    for (int si = 0; si < case_moe_scheme_count(); si++) {
        const char *name = case_moe_scheme(si);
        if (!wanted(name, schemes, n_schemes)) continue;
        char label[48];
        snprintf(label, sizeof label, "moe:%s", name);
        int exact = case_moe_exact(name), ns;
        const moe_shape *shapes = shapes_of(name, full, &ns);
        for (int sh = 0; sh < ns; sh++)
            for (int dti = 0; dti < 2; dti++) {
                const moe_shape *s = &shapes[sh];
                qp_dtype dt = dti ? QP_DTYPE_BF16 : QP_DTYPE_F16;
                uint64_t seed = r->seed + (uint64_t)si * 7919u + (uint64_t)sh * 31u + (uint64_t)dti;
                case_moe c;
                char err[512];
                if (case_moe_make(r->ctx, name, s->E, s->H, s->I, dt, seed, 1, &c, err, sizeof err)) {
                    conform_emit(r, label, 0, s->H, s->I, dt, "-", "cpu:0", "-", "FAIL", 0, 0, 0, 0, err);
                    r->n_fail++;
                    progress_step(&r->prog, (long)nm * n_devs);
                    continue;
                }
                qp_moe_options o;
                qp_moe_options_init(&o);
                o.act_dtype = dt;
                o.top_k = s->k;
                o.layer = label;
                qp_moe *ref = NULL, *dm[MAX_DEV] = {0};
                char skip[MAX_DEV][320];
                if (qp_moe_create(refdev, &c.scheme, s->E, s->H, s->I, c.tensors, c.n_tensors, &o, &ref)) {
                    conform_emit(r, label, 0, s->H, s->I, dt, "-", "cpu:0", "reference", "FAIL", 0, 0, 0, 0, qp_last_error(r->ctx));
                    r->n_fail++;
                    case_moe_free(&c);
                    progress_step(&r->prog, (long)nm * n_devs);
                    continue;
                }
                for (int d = 0; d < n_devs; d++) {
                    skip[d][0] = 0;
                    qp_status st = qp_moe_create(devs[d], &c.scheme, s->E, s->H, s->I, c.tensors, c.n_tensors, &o, &dm[d]);
                    if (st) snprintf(skip[d], sizeof skip[d], "%s%s", st == QP_ERR_UNSUPPORTED ? "" : "!", qp_last_error(r->ctx));
                }
                for (int mi = 0; mi < nm; mi++) {
                    int M = ms[mi];
                    routing rt = routing_of(case_no++, M, s);
                    size_t MH = (size_t)M * s->H, MK = (size_t)M * s->k;
                    uint16_t *x = malloc(MH * 2), *yr = malloc(MH * 2), *yd = malloc(MH * 2);
                    int32_t *ids = malloc(MK * sizeof(int32_t));
                    float *w = malloc(MK * sizeof(float)), *logits = malloc((size_t)M * s->E * sizeof(float));
                    double *y64 = malloc(MH * sizeof(double)), *bd = malloc(MH * sizeof(double));
                    if (!x || !yr || !yd || !ids || !w || !logits || !y64 || !bd) goto next;
                    case_activations((case_dist)(case_no % 3), dt, M, s->H, seed + (uint64_t)M, x);
                    qp_moe_options og = o;
                    if (rt == R_GROUPED) { /* DeepSeek-style: 4 groups, 2 compete, sigmoid scores */
                        og.num_expert_group = 4;
                        og.topk_group = 2;
                        og.scoring = QP_MOE_SIGMOID;
                        og.renormalize = 1;
                        uint64_t ls = seed + 77;
                        for (size_t i = 0; i < (size_t)M * s->E; i++) logits[i] = (float)((double)(case_rng(&ls) >> 11) / 4503599627370496.0 - 1.0);
                        if (qp_moe_route(r->ctx, logits, M, s->E, &og, ids, w)) goto next;
                    } else {
                        case_moe_route(M, s->k, s->E, rt == R_HOT ? 1 : -1, rt == R_COLD ? 0 : -1, seed + (uint64_t)M * 3, ids, w);
                    }
                    if (case_moe_model(&c, x, M, s->k, ids, w, y64, bd)) goto next;
                    if (qp_moe_forward_topk(ref, x, M, ids, w, yr)) {
                        conform_emit(r, label, M, s->H, s->I, dt, routing_name[rt], "cpu:0", "reference", "FAIL", 0, 0, 0, 0,
                                     qp_last_error(r->ctx));
                        r->n_fail++;
                        goto next;
                    }
                    for (int d = 0; d < n_devs; d++) {
                        tally *t = &r->t[d][row0 + si];
                        char note[400], path[96], desc[64] = "";
                        if (!dm[d]) {
                            int real = skip[d][0] == '!';
                            conform_emit(r, label, M, s->H, s->I, dt, routing_name[rt], devname[d], "moe", real ? "FAIL" : "SKIP",
                                         0, 0, 0, 0, skip[d] + real);
                            if (real) { t->fail++; r->n_fail++; } else t->skip++;
                            continue;
                        }
                        qp_moe_describe(dm[d], M, desc, sizeof desc);
                        snprintf(path, sizeof path, "E%d k%d%s%s", s->E, s->k, *desc ? " " : "", desc);
                        double ma = 0, nmse = 0;
                        long bad = 0;
                        int ok;
                        ok = !qp_moe_forward_topk(dm[d], x, M, ids, w, yd); /* routing is the core's, on the host */
                        if (!ok) snprintf(note, sizeof note, "%s", qp_last_error(r->ctx));
                        else ok = judge(&c, exact, yr, yd, y64, bd, MH, &ma, &nmse, &bad, note, sizeof note);
                        conform_emit(r, label, M, s->H, s->I, dt, routing_name[rt], devname[d], path, ok ? "PASS" : "FAIL", ma,
                                     0, nmse, bad, ok && !r->verbose ? "" : note);
                        if (ok) t->pass++; else { t->fail++; r->n_fail++; }
                    }
                    /* the reference itself within the bound (float schemes) */
                    if (!exact) {
                        double ma, nmse;
                        long bad;
                        char note[400];
                        if (!judge(&c, 0, yr, yr, y64, bd, MH, &ma, &nmse, &bad, note, sizeof note)) {
                            conform_emit(r, label, M, s->H, s->I, dt, routing_name[rt], "cpu:0", "reference vs fp64 model", "FAIL",
                                         0, 0, 0, bad, note);
                            r->n_fail++;
                        }
                    }
                next:
                    done += n_devs;
                    progress_step(&r->prog, n_devs);
                    free(x); free(yr); free(yd); free(ids); free(w); free(logits); free(y64); free(bd);
                }
                for (int d = 0; d < n_devs; d++) qp_moe_destroy(dm[d]);
                qp_moe_destroy(ref);
                case_moe_free(&c);
            }
    }
    return done;
}
