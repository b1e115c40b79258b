/* qport conform: every scheme x every device x a shape matrix against the
 * `cpu` reference, with the same seeded inputs everywhere.
 * Integer paths must match bit for bit; float paths stay within the bound
 * of cases.c; guard bytes after every output must survive; a NaN/Inf the
 * reference does not have is a failure. Exit 1 on any failure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "cases.h"
#include "cases_moe.h"
#include "conform.h"
#include "tool.h"

#define GUARD 256

typedef struct path_variant { unsigned mask; const char *name; } path_variant;
static const path_variant paths[] = {
    {QP_PATH_AUTO, "auto"}, {QP_PATH_GEMV, "gemv"}, {QP_PATH_TILED, "tiled"},
    {QP_PATH_INT_DOT, "int-dot"}, {QP_PATH_NO_INT_DOT, "no-int-dot"},
};
#define N_PATHS (int)(sizeof paths / sizeof *paths)

typedef struct shape { int N, K; } shape;
static const shape quick_shapes[] = {{64, 128}, {65, 96}, {192, 384}, {130, 272}};
static const shape full_shapes[] = {{64, 128}, {65, 96}, {192, 384}, {130, 272}, {4096, 4096}, {11008, 4096},
                                    {4096, 11008}, {28672, 8192}};
static const int quick_m[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 64};
static const int full_m[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 64, 512};

void conform_emit(run *r, const char *scheme, int M, int N, int K, qp_dtype dt, const char *dist, const char *dev,
                 const char *path, const char *verdict, double max_abs, double max_rel, double nmse, long bad,
                 const char *note) {
    int fail = !strcmp(verdict, "FAIL");
    /* SKIPs (forced paths a device lacks, ...) are counted in the summary;
     * --verbose, --json and --csv give each with its reason */
    if (fail || r->verbose) progress_clear(&r->prog);
    if (fail || r->verbose)
        printf("%-16s %5dx%-5dx%-5d %-4s %-10s %-10s %-22s %-4s abs=%.3g rel=%.3g nmse=%.3g bad=%ld seed=%llu%s%s\n",
               scheme, M, N, K, qp_dtype_name(dt), dist, dev, path, verdict, max_abs, max_rel, nmse, bad,
               (unsigned long long)r->seed, note && *note ? "  " : "", note ? note : "");
    if (r->json) {
        fprintf(r->json, "%s{\"scheme\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"dtype\":\"%s\",\"dist\":\"%s\",\"device\":",
                r->json_first ? "" : ",\n", scheme, M, N, K, qp_dtype_name(dt), dist);
        json_str(r->json, dev);
        fputs(",\"path\":", r->json); json_str(r->json, path);
        fprintf(r->json, ",\"verdict\":\"%s\",\"max_abs\":%.6g,\"max_rel\":%.6g,\"nmse\":%.6g,\"mismatches\":%ld,\"seed\":%llu,\"note\":",
                verdict, isfinite(max_abs) ? max_abs : -1, isfinite(max_rel) ? max_rel : -1, isfinite(nmse) ? nmse : -1,
                bad, (unsigned long long)r->seed);
        json_str(r->json, note ? note : "");
        fputc('}', r->json);
        r->json_first = 0;
    }
    if (r->csv)
        fprintf(r->csv, "%s,%d,%d,%d,%s,%s,\"%s\",\"%s\",%s,%.6g,%.6g,%.6g,%ld,%llu,\"%s\"\n", scheme, M, N, K,
                qp_dtype_name(dt), dist, dev, path, verdict, max_abs, max_rel, nmse, bad, (unsigned long long)r->seed,
                note ? note : "");
}

/* Compares one device result with the reference. Returns 1 on pass. */
static int judge(const case_layer *l, const uint16_t *x, int M, const uint16_t *ref, const uint16_t *got, qp_dtype out,
                 double *max_abs, double *max_rel, double *nmse, long *bad, char *note, size_t cap) {
    double se = 0, sr = 0;
    *max_abs = *max_rel = 0;
    *bad = 0;
    note[0] = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < l->N; n++) {
            size_t i = (size_t)m * l->N + n;
            double a = qp_format_decode(out, ref[i]), b = qp_format_decode(out, got[i]);
            int wrong;
            if (isnan(a) || isinf(a) || isnan(b) || isinf(b)) {
                wrong = !(isnan(a) && isnan(b)) && a != b; /* a NaN/Inf the reference lacks */
            } else {
                double d = fabs(a - b);
                *max_abs = fmax(*max_abs, d);
                if (a != 0) *max_rel = fmax(*max_rel, d / fabs(a));
                se += d * d;
                sr += a * a;
                wrong = l->cs->exact ? ref[i] != got[i] : d > case_bound(l, x, m, a, out, n);
            }
            if (wrong && (*bad)++ == 0)
                snprintf(note, cap, "first at [%d,%d]: ref %.8g (0x%04x) got %.8g (0x%04x)", m, n, a, ref[i], b, got[i]);
        }
    *nmse = sr > 0 ? se / sr : se;
    return *bad == 0;
}

static int run_forward(qp_linear *lin, qp_device *dev, const uint16_t *x, int M, int K, int N, uint16_t *y, char *note,
                       size_t cap, qp_context *ctx) {
    qp_buffer *xb = NULL, *yb = NULL;
    size_t ybytes = (size_t)M * N * 2;
    unsigned char *guard = malloc(ybytes + GUARD);
    int rc = -1;
    if (!guard) { snprintf(note, cap, "out of memory"); return -1; }
    memset(guard, 0xA5, ybytes + GUARD);
    if (qp_buffer_create(dev, (size_t)M * K * 2, &xb) || qp_buffer_create(dev, ybytes + GUARD, &yb) ||
        qp_buffer_upload(xb, 0, x, (size_t)M * K * 2) || qp_buffer_upload(yb, 0, guard, ybytes + GUARD) ||
        qp_linear_forward_buffers(lin, xb, M, yb) || qp_device_synchronize(dev) ||
        qp_buffer_download(yb, 0, guard, ybytes + GUARD)) {
        snprintf(note, cap, "%s", qp_last_error(ctx));
        goto done;
    }
    memcpy(y, guard, ybytes);
    rc = 0;
    for (size_t i = 0; i < GUARD; i++)
        if (guard[ybytes + i] != 0xA5) { snprintf(note, cap, "guard band overwritten at +%zu", i); rc = 1; break; }
done:
    qp_buffer_destroy(xb);
    qp_buffer_destroy(yb);
    free(guard);
    return rc;
}

static void usage(void) { tool_usage(stderr, "conform"); }

/* Whether --scheme (none given: every scheme) selects `name`. */
static int scheme_wanted(const char *name, const char *const *schemes, int n) {
    if (!n) return 1;
    for (int s = 0; s < n; s++)
        if (!strcmp(schemes[s], name)) return 1;
    return 0;
}

/* Cases the loops of cmd_conform will compare (for the progress line). */
static long count_cases(const char *const *schemes, int n_schemes, const shape *shapes, int n_shapes, const int *ms,
                        int n_ms, int full, int n_devs) {
    long n = 0;
    for (int si = 0; si < n_case_schemes; si++) {
        const case_scheme *cs = &case_schemes[si];
        if (cs->moe_only || !scheme_wanted(cs->name, schemes, n_schemes)) continue;
        for (int sh = 0; sh < n_shapes; sh++) {
            if (shapes[sh].N % cs->n_multiple || shapes[sh].K % cs->k_multiple) continue;
            int big = (size_t)shapes[sh].N * shapes[sh].K > 4u << 20;
            for (int mi = 0; mi < n_ms; mi++)
                if (!(big && ms[mi] > 64 && !full)) n += (cs->f16_only ? 1 : 2) * (long)n_devs * N_PATHS;
        }
    }
    return n;
}

/* What the command line asked for. */
typedef struct conform_opts {
    const char *dev_specs[MAX_DEV], *schemes[64];
    int n_dev_specs, n_schemes, full, moe, linear;
    const char *json_path, *csv_path;
} conform_opts;

/* The devices compared, the case matrix and the output files. */
typedef struct conform_plan {
    qp_device *refdev, *devs[MAX_DEV];
    char devname[MAX_DEV][64];
    int n_devs;
    const shape *shapes;
    const int *ms;
    int n_shapes, n_ms;
    int case_no;             /* cycles the input distributions */
    char json_tmp[4200], csv_tmp[4200];
    int t_json, t_csv;
} conform_plan;

/* --scheme names: linear ones must exist; moe:NAME ones select the MoE
 * cases. 0, or 2 after saying which is unknown. */
static int conform_select(conform_opts *o) {
    int moe_wanted = 0, lin_wanted = 0;
    for (int s = 0; s < o->n_schemes; s++) {
        int is_moe = 0;
        for (int i = 0; i < case_moe_scheme_count(); i++)
            is_moe |= !strncmp(o->schemes[s], "moe:", 4) && !strcmp(o->schemes[s] + 4, case_moe_scheme(i));
        moe_wanted |= is_moe;
        lin_wanted |= !is_moe;
        if (!is_moe && !case_scheme_find(o->schemes[s])) {
            fprintf(stderr, "qport conform: unknown scheme '%s' (qport conform --list)\n", o->schemes[s]);
            return 2;
        }
    }
    if (o->n_schemes) { o->moe &= moe_wanted; o->linear &= lin_wanted; }
    return 0;
}

/* argv into o and r's settings; -1 to go on, else the exit status. */
static int conform_parse(int argc, char **argv, conform_opts *o, run *r) {
    memset(o, 0, sizeof *o);
    o->moe = o->linear = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--device") && i + 1 < argc && o->n_dev_specs < MAX_DEV) o->dev_specs[o->n_dev_specs++] = argv[++i];
        else if (!strcmp(a, "--scheme") && i + 1 < argc && o->n_schemes < 64) o->schemes[o->n_schemes++] = argv[++i];
        else if (!strcmp(a, "--quick")) o->full = 0;
        else if (!strcmp(a, "--full")) o->full = 1;
        else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) r->verbose = 1;
        else if (!strcmp(a, "--moe")) o->linear = 0, o->moe = 1;
        else if (!strcmp(a, "--no-moe")) o->moe = 0, o->linear = 1;
        else if (!strcmp(a, "--seed") && i + 1 < argc) {
            char *end;
            r->seed = strtoull(argv[++i], &end, 10);
            if (*end) { fprintf(stderr, "qport conform: bad seed '%s'\n", argv[i]); return 2; }
        } else if (!strcmp(a, "--json") && i + 1 < argc) o->json_path = argv[++i];
        else if (!strcmp(a, "--csv") && i + 1 < argc) o->csv_path = argv[++i];
        else if (!strcmp(a, "--list")) {
            for (int s = 0; s < n_case_schemes; s++)
                if (!case_schemes[s].moe_only) printf("%s\n", case_schemes[s].name);
            for (int s = 0; s < case_moe_scheme_count(); s++) printf("moe:%s\n", case_moe_scheme(s));
            return 0;
        } else { usage(); return 2; }
    }
    return conform_select(o) ? 2 : -1;
}

/* The cpu reference and the devices compared with it: those named, else
 * every other one; -1 after saying what is wrong. */
static int conform_open_devices(run *r, const conform_opts *o, conform_plan *p) {
    if (qp_device_find(r->ctx, "cpu", &p->refdev)) {
        fprintf(stderr, "qport conform: the cpu reference is needed: %s\n", qp_last_error(r->ctx));
        return -1;
    }
    if (o->n_dev_specs) {
        for (int i = 0; i < o->n_dev_specs; i++)
            if (qp_device_find(r->ctx, o->dev_specs[i], &p->devs[p->n_devs++])) {
                fprintf(stderr, "qport conform: %s\n", qp_last_error(r->ctx));
                return -1;
            }
        return 0;
    }
    size_t n = 0;
    qp_device_count(r->ctx, &n);
    for (size_t i = 0; i < n && p->n_devs < MAX_DEV; i++) {
        qp_device *d;
        if (!qp_device_get(r->ctx, i, &d) && d != p->refdev) p->devs[p->n_devs++] = d;
    }
    return 0;
}

/* --json/--csv: written to temporaries renamed at the end, removed on
 * SIGINT/SIGTERM (tools/tmpfiles.c): an interrupted run leaves no
 * truncated file behind. -1 after saying which cannot be written. */
static int conform_open_outputs(run *r, const conform_opts *o, conform_plan *p) {
    if (o->json_path) {
        snprintf(p->json_tmp, sizeof p->json_tmp, "%s.partial%ld", o->json_path, (long)getpid());
        p->t_json = tool_tmp_add(p->json_tmp);
        if (!(r->json = fopen(p->json_tmp, "w"))) { perror(p->json_tmp); tool_tmp_drop(p->t_json, 0); return -1; }
    }
    if (o->csv_path) {
        snprintf(p->csv_tmp, sizeof p->csv_tmp, "%s.partial%ld", o->csv_path, (long)getpid());
        p->t_csv = tool_tmp_add(p->csv_tmp);
        if (!(r->csv = fopen(p->csv_tmp, "w"))) {
            perror(p->csv_tmp);
            if (r->json) { fclose(r->json); tool_tmp_drop(p->t_json, 1); }
            tool_tmp_drop(p->t_csv, 0);
            return -1;
        }
    }
    if (r->json) fputs("[\n", r->json);
    if (r->csv) fputs("scheme,M,N,K,dtype,dist,device,path,verdict,max_abs,max_rel,nmse,mismatches,seed,note\n", r->csv);
    if (r->json) fflush(r->json);
    if (r->csv) fflush(r->csv);
    if (r->json || r->csv) tool_tmp_test_stop();
    return 0;
}

/* The devices, named and printed, and the matrix --quick or --full asks
 * for. */
static void conform_begin(const conform_opts *o, conform_plan *p) {
    for (int d = 0; d < p->n_devs; d++) {
        qp_device_info di = {.struct_size = sizeof di};
        qp_device_get_info(p->devs[d], &di);
        snprintf(p->devname[d], sizeof p->devname[d], "%s:%d", di.backend, di.index);
        printf("device %s: %s (%s)%s\n", p->devname[d], di.name, qp_device_kind_name(di.kind),
               di.kind == QP_DEVICE_CPU_CLASS ? " [CPU implementation of a GPU API]" : "");
    }
    if (!p->n_devs) printf("no device other than the cpu reference: nothing to compare\n");
    p->shapes = o->full ? full_shapes : quick_shapes;
    p->n_shapes = o->full ? (int)(sizeof full_shapes / sizeof *full_shapes) : (int)(sizeof quick_shapes / sizeof *quick_shapes);
    p->ms = o->full ? full_m : quick_m;
    p->n_ms = o->full ? (int)(sizeof full_m / sizeof *full_m) : (int)(sizeof quick_m / sizeof *quick_m);
}

/* One layer of the matrix: made once, then placed on every device and
 * forced path (lin NULL: skip says why; a leading '!' marks a failure). */
typedef struct layer_case {
    int si, N, K;
    qp_dtype dt;
    uint64_t lseed;
    case_layer l;
    qp_linear *ref, *lin[MAX_DEV][N_PATHS];
    char skip[MAX_DEV][N_PATHS][320];
} layer_case;

static void place_paths(run *r, const conform_plan *p, layer_case *lc, qp_linear_options *o) {
    for (int d = 0; d < p->n_devs; d++)
        for (int pi = 0; pi < N_PATHS; pi++) {
            char *skip = lc->skip[d][pi];
            size_t cap = sizeof lc->skip[d][pi];
            skip[0] = 0;
            qp_support_info si2;
            if (qp_device_supports(p->devs[d], &lc->l.scheme, 0, lc->N, lc->K, &si2) == QP_OK &&
                si2.level == QP_SUPPORT_UNSUPPORTED) {
                snprintf(skip, cap, "unsupported: %s", si2.reason);
                continue;
            }
            o->path = paths[pi].mask;
            qp_status st = qp_linear_create(p->devs[d], &lc->l.scheme, lc->N, lc->K, lc->l.tensors, lc->l.n_tensors, o,
                                            &lc->lin[d][pi]);
            if (st) snprintf(skip, cap, "%s", qp_last_error(r->ctx));
            if (st && st != QP_ERR_UNSUPPORTED) skip[0] = '!'; /* a real failure */
        }
}

/* One device and path against the reference's yr on input x. */
static void compare_one(run *r, const conform_plan *p, const layer_case *lc, int d, int pi, int M, case_dist dist,
                        const uint16_t *x, const uint16_t *yr, uint16_t *yd, qp_dtype out) {
    const char *name = case_schemes[lc->si].name, *dn = case_dist_name(dist), *dev = p->devname[d];
    int N = lc->N, K = lc->K;
    qp_dtype dt = lc->dt;
    tally *t = &r->t[d][lc->si];
    char pathdesc[96], note[400];
    if (!lc->lin[d][pi]) {
        int real = lc->skip[d][pi][0] == '!';
        conform_emit(r, name, M, N, K, dt, dn, dev, paths[pi].name, real ? "FAIL" : "SKIP", 0, 0, 0, 0,
                     lc->skip[d][pi] + real);
        if (real) { t->fail++; r->n_fail++; } else t->skip++;
        return;
    }
    char desc[64];
    qp_linear_describe(lc->lin[d][pi], M, desc, sizeof desc);
    snprintf(pathdesc, sizeof pathdesc, "%s%s%s", paths[pi].name, *desc ? "/" : "", desc);
    int rc = run_forward(lc->lin[d][pi], p->devs[d], x, M, K, N, yd, note, sizeof note, r->ctx);
    double ma = 0, mr = 0, nm = 0;
    long bad = 0;
    int ok = rc == 0 && judge(&lc->l, x, M, yr, yd, out, &ma, &mr, &nm, &bad, note, sizeof note);
    if (rc < 0 && strstr(note, "QP_ERR_UNSUPPORTED")) { conform_emit(r, name, M, N, K, dt, dn, dev, pathdesc, "SKIP", 0, 0, 0, 0, note); t->skip++; return; }
    conform_emit(r, name, M, N, K, dt, dn, dev, pathdesc, ok ? "PASS" : "FAIL", ma, mr, nm, bad, ok ? "" : note);
    if (ok) t->pass++; else { t->fail++; r->n_fail++; }
}

/* One M of a placed layer: its seeded input, the reference's output, then
 * every device and path. */
static void conform_m(run *r, conform_plan *p, const layer_case *lc, int M) {
    const char *name = case_schemes[lc->si].name;
    int N = lc->N, K = lc->K;
    case_dist dist = (case_dist)((p->case_no++) % DIST_COUNT);
    uint16_t *x = malloc((size_t)M * K * 2), *yr = malloc((size_t)M * N * 2), *yd = malloc((size_t)M * N * 2);
    if (!x || !yr || !yd) { free(x); free(yr); free(yd); progress_step(&r->prog, (long)p->n_devs * N_PATHS); return; }
    case_activations(dist, lc->dt, M, K, lc->lseed + (uint64_t)M, x);
    if (qp_linear_forward(lc->ref, x, M, yr)) {
        conform_emit(r, name, M, N, K, lc->dt, case_dist_name(dist), "cpu:0", "reference", "FAIL", 0, 0, 0, 0, qp_last_error(r->ctx));
        r->n_fail++;
        free(x); free(yr); free(yd);
        progress_step(&r->prog, (long)p->n_devs * N_PATHS);
        return;
    }
    qp_dtype out = qp_linear_out_dtype(lc->ref);
    for (int d = 0; d < p->n_devs; d++)
        for (int pi = 0; pi < N_PATHS; pi++) compare_one(r, p, lc, d, pi, M, dist, x, yr, yd, out);
    free(x); free(yr); free(yd);
    progress_step(&r->prog, (long)p->n_devs * N_PATHS);
}

/* One scheme, shape and activation dtype: the layer made from seeded
 * weights, on the reference and every device, over every M. */
static void conform_layer(run *r, const conform_opts *o, conform_plan *p, int si, int sh, int dti) {
    const case_scheme *cs = &case_schemes[si];
    layer_case lc;
    memset(&lc, 0, sizeof lc);
    lc.si = si;
    lc.N = p->shapes[sh].N;
    lc.K = p->shapes[sh].K;
    int N = lc.N, K = lc.K, big = (size_t)N * K > 4u << 20;
    lc.dt = dti ? QP_DTYPE_BF16 : QP_DTYPE_F16;
    lc.lseed = r->seed + (uint64_t)si * 1000003u + (uint64_t)sh * 101u + (uint64_t)dti;
    /* static scales are calibrated on a uniform batch, so other
     * distributions exercise saturation */
    uint16_t *calib = malloc((size_t)8 * K * 2);
    if (!calib) return;
    case_activations(DIST_UNIFORM, lc.dt, 8, K, lc.lseed, calib);
    char err[512];
    if (case_layer_make(r->ctx, cs, N, K, lc.dt, lc.lseed, calib, 8, &lc.l, err, sizeof err)) {
        free(calib);
        conform_emit(r, cs->name, 0, N, K, lc.dt, "-", "cpu:0", "-", "FAIL", 0, 0, 0, 0, err);
        r->n_fail++;
        return;
    }
    free(calib);
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = lc.dt;
    lo.layer = cs->name;
    lo.act_ue8m0 = cs->act_ue8m0;
    if (qp_linear_create(p->refdev, &lc.l.scheme, N, K, lc.l.tensors, lc.l.n_tensors, &lo, &lc.ref)) {
        conform_emit(r, cs->name, 0, N, K, lc.dt, "-", "cpu:0", "-", "FAIL", 0, 0, 0, 0, qp_last_error(r->ctx));
        r->n_fail++;
        case_layer_free(&lc.l);
        return;
    }
    place_paths(r, p, &lc, &lo);
    for (int mi = 0; mi < p->n_ms; mi++)
        if (!(big && p->ms[mi] > 64 && !o->full)) conform_m(r, p, &lc, p->ms[mi]);
    for (int d = 0; d < p->n_devs; d++)
        for (int pi = 0; pi < N_PATHS; pi++) qp_linear_destroy(lc.lin[d][pi]);
    qp_linear_destroy(lc.ref);
    case_layer_free(&lc.l);
}

/* Every linear case scheme selected, over the shapes and dtypes. */
static void conform_linear(run *r, const conform_opts *o, conform_plan *p) {
    for (int si = 0; si < n_case_schemes; si++) {
        const case_scheme *cs = &case_schemes[si];
        if (cs->moe_only || !scheme_wanted(cs->name, o->schemes, o->n_schemes)) continue;
        for (int sh = 0; sh < p->n_shapes; sh++) {
            if (p->shapes[sh].N % cs->n_multiple || p->shapes[sh].K % cs->k_multiple) continue;
            for (int dti = 0; dti < 2; dti++)
                if (!(dti && cs->f16_only)) conform_layer(r, o, p, si, sh, dti);
        }
    }
}

/* Closes --json/--csv and renames them into place; a failure fails the run. */
static void conform_close_outputs(run *r, const conform_opts *o, const conform_plan *p) {
    if (r->json) {
        fputs("\n]\n", r->json);
        if (fclose(r->json) ? (tool_tmp_drop(p->t_json, 1), 1) : tool_tmp_commit(p->t_json, o->json_path)) { perror(o->json_path); r->n_fail++; }
    }
    if (r->csv && (fclose(r->csv) ? (tool_tmp_drop(p->t_csv, 1), 1) : tool_tmp_commit(p->t_csv, o->csv_path))) { perror(o->csv_path); r->n_fail++; }
}

/* pass/fail/skip per scheme row and device, and the verdict. */
static void conform_print_summary(const run *r, const conform_plan *p, time_t t0) {
    int n_devs = p->n_devs;
    printf("\nsummary (pass/fail/skip), seed %llu, %lds:\n%-20s", (unsigned long long)r->seed, (long)(time(NULL) - t0), "scheme");
    for (int d = 0; d < n_devs; d++) printf(" %18s", p->devname[d]);
    putchar('\n');
    for (int si = 0; si < n_case_schemes + case_moe_scheme_count(); si++) {
        int any = 0;
        for (int d = 0; d < n_devs; d++) any |= r->t[d][si].pass + r->t[d][si].fail + r->t[d][si].skip;
        if (!any) continue;
        char row[48];
        snprintf(row, sizeof row, si < n_case_schemes ? "%s" : "moe:%s",
                 si < n_case_schemes ? case_schemes[si].name : case_moe_scheme(si - n_case_schemes));
        printf("%-20s", row);
        for (int d = 0; d < n_devs; d++) {
            char c[32];
            snprintf(c, sizeof c, "%d/%d/%d", r->t[d][si].pass, r->t[d][si].fail, r->t[d][si].skip);
            printf(" %18s", c);
        }
        putchar('\n');
    }
    long n_skip = 0;
    for (int d = 0; d < n_devs; d++)
        for (int si = 0; si < MAX_ROWS; si++) n_skip += r->t[d][si].skip;
    if (n_skip && !r->verbose)
        printf("%ld cases skipped (a scheme or forced path the device lacks); --verbose or --json gives each "
               "with its reason\n", n_skip);
    printf("%s\n", r->n_fail ? "conform: FAILED" : "conform: all compared cases passed");
}

int cmd_conform(int argc, char **argv) {
    conform_opts o;
    run r = {0};
    r.seed = 20261202;
    r.json_first = 1;
    int rc = conform_parse(argc, argv, &o, &r);
    if (rc >= 0) return rc;
    if (qp_context_create(&r.ctx)) return 2;
    tool_install_log(r.ctx);
    conform_plan p;
    memset(&p, 0, sizeof p);
    p.t_json = p.t_csv = -1;
    if (conform_open_devices(&r, &o, &p) || conform_open_outputs(&r, &o, &p)) {
        qp_context_destroy(r.ctx);
        return 2;
    }
    conform_begin(&o, &p);
    time_t t0 = time(NULL);
    progress_start(&r.prog, "conform: cases",
                   (o.linear ? count_cases(o.schemes, o.n_schemes, p.shapes, p.n_shapes, p.ms, p.n_ms, o.full, p.n_devs) : 0) +
                       (o.moe ? conform_moe_count(o.full, o.schemes, o.n_schemes, p.n_devs) : 0));
    if (o.linear) conform_linear(&r, &o, &p);
    if (o.moe)
        conform_moe(&r, p.refdev, p.devs, (const char (*)[64])p.devname, p.n_devs, o.full, o.schemes, o.n_schemes,
                    n_case_schemes);
    progress_end(&r.prog);
    conform_close_outputs(&r, &o, &p);
    conform_print_summary(&r, &p, t0);
    qp_context_destroy(r.ctx);
    return r.n_fail ? 1 : 0;
}
