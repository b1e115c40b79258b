/* qport conform: every scheme x every device x a shape matrix against the
 * `cpu` reference, with the same seeded inputs everywhere (issue 5).
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

int cmd_conform(int argc, char **argv) {
    const char *dev_specs[MAX_DEV], *schemes[64];
    int n_dev_specs = 0, n_schemes = 0, full = 0, moe = 1, linear = 1;
    const char *json_path = NULL, *csv_path = NULL;
    run r = {0};
    r.seed = 20261202;
    r.json_first = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--device") && i + 1 < argc && n_dev_specs < MAX_DEV) dev_specs[n_dev_specs++] = argv[++i];
        else if (!strcmp(a, "--scheme") && i + 1 < argc && n_schemes < 64) schemes[n_schemes++] = argv[++i];
        else if (!strcmp(a, "--quick")) full = 0;
        else if (!strcmp(a, "--full")) full = 1;
        else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) r.verbose = 1;
        else if (!strcmp(a, "--moe")) linear = 0, moe = 1;
        else if (!strcmp(a, "--no-moe")) moe = 0, linear = 1;
        else if (!strcmp(a, "--seed") && i + 1 < argc) {
            char *end;
            r.seed = strtoull(argv[++i], &end, 10);
            if (*end) { fprintf(stderr, "qport conform: bad seed '%s'\n", argv[i]); return 2; }
        } else if (!strcmp(a, "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(a, "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(a, "--list")) {
            for (int s = 0; s < n_case_schemes; s++)
                if (!case_schemes[s].moe_only) printf("%s\n", case_schemes[s].name);
            for (int s = 0; s < case_moe_scheme_count(); s++) printf("moe:%s\n", case_moe_scheme(s));
            return 0;
        } else { usage(); return 2; }
    }
    int moe_wanted = 0, lin_wanted = 0;
    for (int s = 0; s < n_schemes; s++) {
        int is_moe = 0;
        for (int i = 0; i < case_moe_scheme_count(); i++)
            is_moe |= !strncmp(schemes[s], "moe:", 4) && !strcmp(schemes[s] + 4, case_moe_scheme(i));
        moe_wanted |= is_moe;
        lin_wanted |= !is_moe;
        if (!is_moe && !case_scheme_find(schemes[s])) {
            fprintf(stderr, "qport conform: unknown scheme '%s' (qport conform --list)\n", schemes[s]);
            return 2;
        }
    }
    if (n_schemes) { moe &= moe_wanted; linear &= lin_wanted; }
    if (qp_context_create(&r.ctx)) return 2;
    tool_install_log(r.ctx);
    qp_device *refdev, *devs[MAX_DEV];
    int n_devs = 0;
    if (qp_device_find(r.ctx, "cpu", &refdev)) {
        fprintf(stderr, "qport conform: the cpu reference is needed: %s\n", qp_last_error(r.ctx));
        qp_context_destroy(r.ctx);
        return 2;
    }
    if (n_dev_specs) {
        for (int i = 0; i < n_dev_specs; i++)
            if (qp_device_find(r.ctx, dev_specs[i], &devs[n_devs++])) {
                fprintf(stderr, "qport conform: %s\n", qp_last_error(r.ctx));
                qp_context_destroy(r.ctx);
                return 2;
            }
    } else {
        size_t n = 0;
        qp_device_count(r.ctx, &n);
        for (size_t i = 0; i < n && n_devs < MAX_DEV; i++) {
            qp_device *d;
            if (!qp_device_get(r.ctx, i, &d) && d != refdev) devs[n_devs++] = d;
        }
    }
    /* --json/--csv: written to temporaries renamed at the end, removed on
     * SIGINT/SIGTERM (tools/tmpfiles.c): an interrupted run leaves no
     * truncated file behind */
    char json_tmp[4200], csv_tmp[4200];
    int t_json = -1, t_csv = -1;
    if (json_path) {
        snprintf(json_tmp, sizeof json_tmp, "%s.partial%ld", json_path, (long)getpid());
        t_json = tool_tmp_add(json_tmp);
        if (!(r.json = fopen(json_tmp, "w"))) { perror(json_tmp); tool_tmp_drop(t_json, 0); qp_context_destroy(r.ctx); return 2; }
    }
    if (csv_path) {
        snprintf(csv_tmp, sizeof csv_tmp, "%s.partial%ld", csv_path, (long)getpid());
        t_csv = tool_tmp_add(csv_tmp);
        if (!(r.csv = fopen(csv_tmp, "w"))) {
            perror(csv_tmp);
            if (r.json) { fclose(r.json); tool_tmp_drop(t_json, 1); }
            tool_tmp_drop(t_csv, 0);
            qp_context_destroy(r.ctx);
            return 2;
        }
    }
    if (r.json) fputs("[\n", r.json);
    if (r.csv) fputs("scheme,M,N,K,dtype,dist,device,path,verdict,max_abs,max_rel,nmse,mismatches,seed,note\n", r.csv);
    if (r.json) fflush(r.json);
    if (r.csv) fflush(r.csv);
    if (r.json || r.csv) tool_tmp_test_stop();
    char devname[MAX_DEV][64];
    for (int d = 0; d < n_devs; d++) {
        qp_device_info di = {.struct_size = sizeof di};
        qp_device_get_info(devs[d], &di);
        snprintf(devname[d], sizeof devname[d], "%s:%d", di.backend, di.index);
        printf("device %s: %s (%s)%s\n", devname[d], di.name, qp_device_kind_name(di.kind),
               di.kind == QP_DEVICE_CPU_CLASS ? " [CPU implementation of a GPU API]" : "");
    }
    if (!n_devs) printf("no device other than the cpu reference: nothing to compare\n");
    const shape *shapes = full ? full_shapes : quick_shapes;
    int n_shapes = full ? (int)(sizeof full_shapes / sizeof *full_shapes) : (int)(sizeof quick_shapes / sizeof *quick_shapes);
    const int *ms = full ? full_m : quick_m;
    int n_ms = full ? (int)(sizeof full_m / sizeof *full_m) : (int)(sizeof quick_m / sizeof *quick_m);
    time_t t0 = time(NULL);
    int case_no = 0;
    progress_start(&r.prog, "conform: cases",
                   (linear ? count_cases(schemes, n_schemes, shapes, n_shapes, ms, n_ms, full, n_devs) : 0) +
                       (moe ? conform_moe_count(full, schemes, n_schemes, n_devs) : 0));
    for (int si = 0; linear && si < n_case_schemes; si++) {
        const case_scheme *cs = &case_schemes[si];
        if (cs->moe_only || !scheme_wanted(cs->name, schemes, n_schemes)) continue;
        for (int sh = 0; sh < n_shapes; sh++) {
            int N = shapes[sh].N, K = shapes[sh].K;
            if (N % cs->n_multiple || K % cs->k_multiple) continue;
            int big = (size_t)N * K > 4u << 20;
            for (int dti = 0; dti < 2; dti++) {
                qp_dtype dt = dti ? QP_DTYPE_BF16 : QP_DTYPE_F16;
                if (dti && cs->f16_only) continue;
                uint64_t lseed = r.seed + (uint64_t)si * 1000003u + (uint64_t)sh * 101u + (uint64_t)dti;
                /* static scales are calibrated on a uniform batch, so other
                 * distributions exercise saturation */
                uint16_t *calib = malloc((size_t)8 * K * 2);
                if (!calib) continue;
                case_activations(DIST_UNIFORM, dt, 8, K, lseed, calib);
                case_layer l;
                char err[512];
                if (case_layer_make(r.ctx, cs, N, K, dt, lseed, calib, 8, &l, err, sizeof err)) {
                    free(calib);
                    conform_emit(&r, cs->name, 0, N, K, dt, "-", "cpu:0", "-", "FAIL", 0, 0, 0, 0, err);
                    r.n_fail++;
                    continue;
                }
                free(calib);
                qp_linear_options o;
                qp_linear_options_init(&o);
                o.act_dtype = dt;
                o.layer = cs->name;
                o.act_ue8m0 = cs->act_ue8m0;
                qp_linear *ref = NULL, *lin[MAX_DEV][N_PATHS] = {{0}};
                char skip[MAX_DEV][N_PATHS][320];
                if (qp_linear_create(refdev, &l.scheme, N, K, l.tensors, l.n_tensors, &o, &ref)) {
                    conform_emit(&r, cs->name, 0, N, K, dt, "-", "cpu:0", "-", "FAIL", 0, 0, 0, 0, qp_last_error(r.ctx));
                    r.n_fail++;
                    case_layer_free(&l);
                    continue;
                }
                for (int d = 0; d < n_devs; d++)
                    for (int p = 0; p < N_PATHS; p++) {
                        skip[d][p][0] = 0;
                        qp_support_info si2;
                        if (qp_device_supports(devs[d], &l.scheme, 0, N, K, &si2) == QP_OK && si2.level == QP_SUPPORT_UNSUPPORTED) {
                            snprintf(skip[d][p], sizeof skip[d][p], "unsupported: %s", si2.reason);
                            continue;
                        }
                        o.path = paths[p].mask;
                        qp_status st = qp_linear_create(devs[d], &l.scheme, N, K, l.tensors, l.n_tensors, &o, &lin[d][p]);
                        if (st) snprintf(skip[d][p], sizeof skip[d][p], "%s", qp_last_error(r.ctx));
                        if (st && st != QP_ERR_UNSUPPORTED) skip[d][p][0] = '!'; /* a real failure */
                    }
                for (int mi = 0; mi < n_ms; mi++) {
                    int M = ms[mi];
                    if (big && M > 64 && !full) continue;
                    case_dist dist = (case_dist)((case_no++) % DIST_COUNT);
                    uint16_t *x = malloc((size_t)M * K * 2), *yr = malloc((size_t)M * N * 2), *yd = malloc((size_t)M * N * 2);
                    if (!x || !yr || !yd) { free(x); free(yr); free(yd); progress_step(&r.prog, (long)n_devs * N_PATHS); continue; }
                    case_activations(dist, dt, M, K, lseed + (uint64_t)M, x);
                    if (qp_linear_forward(ref, x, M, yr)) {
                        conform_emit(&r, cs->name, M, N, K, dt, case_dist_name(dist), "cpu:0", "reference", "FAIL", 0, 0, 0, 0, qp_last_error(r.ctx));
                        r.n_fail++;
                        free(x); free(yr); free(yd);
                        progress_step(&r.prog, (long)n_devs * N_PATHS);
                        continue;
                    }
                    qp_dtype out = qp_linear_out_dtype(ref);
                    for (int d = 0; d < n_devs; d++)
                        for (int p = 0; p < N_PATHS; p++) {
                            tally *t = &r.t[d][si];
                            char pathdesc[96], note[400];
                            if (!lin[d][p]) {
                                int real = skip[d][p][0] == '!';
                                conform_emit(&r, cs->name, M, N, K, dt, case_dist_name(dist), devname[d], paths[p].name,
                                     real ? "FAIL" : "SKIP", 0, 0, 0, 0, skip[d][p] + real);
                                if (real) { t->fail++; r.n_fail++; } else t->skip++;
                                continue;
                            }
                            char desc[64];
                            qp_linear_describe(lin[d][p], M, desc, sizeof desc);
                            snprintf(pathdesc, sizeof pathdesc, "%s%s%s", paths[p].name, *desc ? "/" : "", desc);
                            int rc = run_forward(lin[d][p], devs[d], x, M, K, N, yd, note, sizeof note, r.ctx);
                            double ma = 0, mr = 0, nm = 0;
                            long bad = 0;
                            int ok = rc == 0 && judge(&l, x, M, yr, yd, out, &ma, &mr, &nm, &bad, note, sizeof note);
                            if (rc < 0 && strstr(note, "QP_ERR_UNSUPPORTED")) { conform_emit(&r, cs->name, M, N, K, dt, case_dist_name(dist), devname[d], pathdesc, "SKIP", 0, 0, 0, 0, note); t->skip++; continue; }
                            conform_emit(&r, cs->name, M, N, K, dt, case_dist_name(dist), devname[d], pathdesc, ok ? "PASS" : "FAIL",
                                 ma, mr, nm, bad, ok ? "" : note);
                            if (ok) t->pass++; else { t->fail++; r.n_fail++; }
                        }
                    free(x); free(yr); free(yd);
                    progress_step(&r.prog, (long)n_devs * N_PATHS);
                }
                for (int d = 0; d < n_devs; d++)
                    for (int p = 0; p < N_PATHS; p++) qp_linear_destroy(lin[d][p]);
                qp_linear_destroy(ref);
                case_layer_free(&l);
            }
        }
    }
    if (moe) conform_moe(&r, refdev, devs, (const char (*)[64])devname, n_devs, full, schemes, n_schemes, n_case_schemes);
    progress_end(&r.prog);
    if (r.json) {
        fputs("\n]\n", r.json);
        if (fclose(r.json) ? (tool_tmp_drop(t_json, 1), 1) : tool_tmp_commit(t_json, json_path)) { perror(json_path); r.n_fail++; }
    }
    if (r.csv && (fclose(r.csv) ? (tool_tmp_drop(t_csv, 1), 1) : tool_tmp_commit(t_csv, csv_path))) { perror(csv_path); r.n_fail++; }
    printf("\nsummary (pass/fail/skip), seed %llu, %lds:\n%-20s", (unsigned long long)r.seed, (long)(time(NULL) - t0), "scheme");
    for (int d = 0; d < n_devs; d++) printf(" %18s", devname[d]);
    putchar('\n');
    for (int si = 0; si < n_case_schemes + case_moe_scheme_count(); si++) {
        int any = 0;
        for (int d = 0; d < n_devs; d++) any |= r.t[d][si].pass + r.t[d][si].fail + r.t[d][si].skip;
        if (!any) continue;
        char row[48];
        snprintf(row, sizeof row, si < n_case_schemes ? "%s" : "moe:%s",
                 si < n_case_schemes ? case_schemes[si].name : case_moe_scheme(si - n_case_schemes));
        printf("%-20s", row);
        for (int d = 0; d < n_devs; d++) {
            char c[32];
            snprintf(c, sizeof c, "%d/%d/%d", r.t[d][si].pass, r.t[d][si].fail, r.t[d][si].skip);
            printf(" %18s", c);
        }
        putchar('\n');
    }
    long n_skip = 0;
    for (int d = 0; d < n_devs; d++)
        for (int si = 0; si < MAX_ROWS; si++) n_skip += r.t[d][si].skip;
    if (n_skip && !r.verbose)
        printf("%ld cases skipped (a scheme or forced path the device lacks); --verbose or --json gives each "
               "with its reason\n", n_skip);
    printf("%s\n", r.n_fail ? "conform: FAILED" : "conform: all compared cases passed");
    qp_context_destroy(r.ctx);
    return r.n_fail ? 1 : 0;
}
