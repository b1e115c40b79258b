/* qport bench --moe: the fused MoE layer of real models at decode and
 * prefill token counts, every MoE scheme on every device.
 *
 * Bandwidth basis: the bytes the layer must touch, which for an MoE are
 * only the selected experts' weights (w13 and w2 of each expert at least
 * one token routes to, at the scheme's storage size with its scales),
 * plus x and y. Speedup basis: the fp16 (unquantized) MoE of the same
 * shape and routing on the same device. Times are host wall times of
 * qp_moe_forward_topk (the median of --reps runs after a warm-up),
 * uploads and downloads included: the core has no device timer for MoE
 * yet. CPU-class devices' times say nothing about GPUs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases_moe.h"
#include "tool.h"

typedef struct moe_model {
    const char *name;
    int G, E, H, I, k;          /* experts of the layer, held here (EP), sizes, top-k */
    int groups, topk_group;     /* grouped top-k (0: plain)                  */
    const char *note;
} moe_model;

static const moe_model models[] = {
    {"tiny", 8, 8, 256, 128, 2, 0, 0, "a small layer for smoke runs"},
    {"mixtral-8x7b", 8, 8, 4096, 14336, 2, 0, 0, "Mixtral-8x7B: H 4096, I 14336, 8 experts, top-2"},
    {"deepseek-v3", 256, 32, 7168, 2048, 8, 8, 4,
     "DeepSeek-V3: H 7168, I 2048, 256 experts, top-8 of 4 of 8 groups; the 32 experts one rank of EP-8 holds"},
};

/* Stored bytes per weight element of a scheme (codes and scales). */
static double weight_bytes(const char *scheme) {
    if (!strcmp(scheme, "unquantized")) return 2.0;
    if (!strncmp(scheme, "int8", 4) || !strncmp(scheme, "fp8", 3)) return 1.0;
    if (!strcmp(scheme, "nvfp4")) return 0.5 + 1.0 / 16;
    if (!strncmp(scheme, "mxfp6", 5)) return 0.75 + 1.0 / 32;
    if (!strcmp(scheme, "mxfp8")) return 1.0 + 1.0 / 32;
    if (!strncmp(scheme, "w4a16", 5)) return 0.5 + 2.0 / 32 + (strstr(scheme, "uint4") ? 0.5 / 32 : 0); /* fp16 scale, uint4 zero */
    return 0.5 + 1.0 / 32; /* mxfp4, w4a8-mxfp4-fp8 */
}

static void usage(void) { tool_usage(stderr, "bench"); }

int cmd_bench_moe(int argc, char **argv) {
    const char *dev_specs[16], *schemes[32], *model_name = "tiny";
    int n_dev = 0, n_sch = 0, reps = 5, shapes = 0; /* 0 all, 1 decode, 2 prefill */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--moe")) continue;
        if (!strcmp(a, "--device") && i + 1 < argc && n_dev < 16) dev_specs[n_dev++] = argv[++i];
        else if (!strcmp(a, "--scheme") && i + 1 < argc && n_sch < 32) schemes[n_sch++] = argv[++i];
        else if (!strcmp(a, "--moe-model") && i + 1 < argc) model_name = argv[++i];
        else if (!strcmp(a, "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(a, "--shapes") && i + 1 < argc) {
            const char *s = argv[++i];
            shapes = !strcmp(s, "decode") ? 1 : !strcmp(s, "prefill") ? 2 : !strcmp(s, "all") ? 0 : -1;
            if (shapes < 0) { fprintf(stderr, "qport bench --moe: --shapes decode|prefill|all\n"); return 2; }
        } else { usage(); return 2; }
    }
    const moe_model *md = NULL;
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (!strcmp(models[i].name, model_name)) md = &models[i];
    if (!md || reps < 1 || reps > 1000) {
        fprintf(stderr, "qport bench --moe: --moe-model tiny|mixtral-8x7b|deepseek-v3, --reps 1..1000\n");
        return 2;
    }
    for (int s = 0; s < n_sch; s++) {
        int ok = 0;
        for (int i = 0; i < case_moe_scheme_count(); i++) ok |= !strcmp(schemes[s], case_moe_scheme(i));
        if (!ok) { fprintf(stderr, "qport bench --moe: unknown MoE scheme '%s' (qport conform --list: moe:*)\n", schemes[s]); return 2; }
    }
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 2;
    tool_install_log(ctx);
    qp_device *devs[16];
    int nd = 0;
    if (n_dev) {
        for (int i = 0; i < n_dev; i++)
            if (qp_device_find(ctx, dev_specs[i], &devs[nd++])) {
                fprintf(stderr, "qport bench --moe: %s\n", qp_last_error(ctx));
                qp_context_destroy(ctx);
                return 2;
            }
    } else {
        /* every device but the cpu reference, which runs only when alone */
        size_t n = 0;
        qp_device_count(ctx, &n);
        for (size_t i = 0; i < n && nd < 16; i++) {
            qp_device_info di = {.struct_size = sizeof di};
            if (qp_device_get(ctx, i, &devs[nd]) || qp_device_get_info(devs[nd], &di)) continue;
            if (di.kind != QP_DEVICE_REFERENCE || n == 1) nd++;
        }
    }
    static const int decode_m[] = {1, 8, 16}, prefill_m[] = {128, 512};
    int ms[8], nm = 0;
    if (shapes != 2) for (int i = 0; i < 3; i++) ms[nm++] = decode_m[i];
    if (shapes != 1) for (int i = 0; i < 2; i++) ms[nm++] = prefill_m[i];
    printf("%s (%s), fp16 activations; bytes: the selected experts' weights + x + y\n", md->name, md->note);
    printf("%-16s %-10s %5s %-40s %10s %9s %8s\n", "scheme", "device", "M", "path", "ms", "GB/s", "x fp16");
    qp_dtype dt = QP_DTYPE_F16;
    int failed = 0;
    /* fp16 first: the speedup basis of every scheme */
    double base[16][8];
    for (int d = 0; d < 16; d++)
        for (int m = 0; m < 8; m++) base[d][m] = -1;
    int order[32], no = 0;
    order[no++] = 0; /* "unquantized" is scheme 0 */
    for (int i = 1; i < case_moe_scheme_count(); i++) {
        int want = !n_sch;
        for (int s = 0; s < n_sch; s++) want |= !strcmp(schemes[s], case_moe_scheme(i));
        if (want) order[no++] = i;
    }
    for (int oi = 0; oi < no; oi++) {
        const char *sn = case_moe_scheme(order[oi]);
        case_moe c;
        char err[512];
        if (case_moe_make(ctx, sn, md->E, md->H, md->I, dt, 20261203, 0, &c, err, sizeof err)) {
            printf("%-16s error: %s\n", sn, err);
            failed = 1;
            continue;
        }
        qp_moe_options o;
        qp_moe_options_init(&o);
        o.act_dtype = dt;
        o.top_k = md->k;
        o.layer = md->name;
        o.global_num_experts = md->G;
        o.expert_offset = 0;
        o.renormalize = 1;
        if (md->groups) { o.num_expert_group = md->groups; o.topk_group = md->topk_group; o.scoring = QP_MOE_SIGMOID; }
        for (int d = 0; d < nd; d++) {
            qp_device_info di = {.struct_size = sizeof di};
            qp_device_get_info(devs[d], &di);
            char dn[32];
            snprintf(dn, sizeof dn, "%s:%d", di.backend, di.index);
            qp_moe *moe = NULL;
            if (qp_moe_create(devs[d], &c.scheme, md->E, md->H, md->I, c.tensors, c.n_tensors, &o, &moe)) {
                printf("%-16s %-10s %5s %s\n", sn, dn, "-", qp_last_error(ctx));
                continue;
            }
            for (int mi = 0; mi < nm; mi++) {
                int M = ms[mi];
                size_t MK = (size_t)M * md->k;
                uint16_t *x = malloc((size_t)M * md->H * 2), *y = malloc((size_t)M * md->H * 2);
                float *logits = malloc(sizeof(float) * (size_t)M * md->G), *w = malloc(sizeof(float) * MK);
                int32_t *ids = malloc(sizeof(int32_t) * MK);
                double *t = malloc(sizeof(double) * (size_t)reps);
                if (!x || !y || !logits || !w || !ids || !t) { printf("out of memory\n"); failed = 1; goto next; }
                case_activations(DIST_UNIFORM, dt, M, md->H, 7 + (uint64_t)M, x);
                uint64_t rs = 99 + (uint64_t)M;
                for (size_t i = 0; i < (size_t)M * md->G; i++) logits[i] = (float)((double)(case_rng(&rs) >> 11) * 0x1p-53 * 4 - 2);
                if (qp_moe_route(ctx, logits, M, md->G, &o, ids, w)) { printf("%s\n", qp_last_error(ctx)); failed = 1; goto next; }
                /* the experts touched: selected ones this rank holds */
                int touched = 0;
                for (int e = 0; e < md->E; e++) {
                    int hit = 0;
                    for (size_t i = 0; i < MK && !hit; i++) hit = ids[i] == e;
                    touched += hit;
                }
                double bytes = (double)touched * 3.0 * md->H * md->I * weight_bytes(sn) + 4.0 * M * md->H;
                if (qp_moe_forward_topk(moe, x, M, ids, w, y)) { /* warm-up */
                    printf("%-16s %-16s %5d error: %s\n", sn, dn, M, qp_last_error(ctx));
                    failed = 1;
                    goto next;
                }
                for (int r = 0; r < reps; r++) {
                    double t0 = tool_now_ms();
                    qp_moe_forward_topk(moe, x, M, ids, w, y);
                    t[r] = tool_now_ms() - t0;
                }
                qsort(t, (size_t)reps, sizeof *t, tool_cmp_double);
                double med = t[reps / 2];
                if (oi == 0) base[d][mi] = med;
                char path[96] = "", sp[16] = "-";
                qp_moe_describe(moe, M, path, sizeof path);
                if (base[d][mi] > 0) snprintf(sp, sizeof sp, "%.2f", base[d][mi] / med);
                printf("%-16s %-10s %5d %-40.40s %10.3f %9.2f %8s\n", sn, dn, M, path, med, bytes / med / 1e6, sp);
            next:
                free(x); free(y); free(logits); free(w); free(ids); free(t);
            }
            qp_moe_destroy(moe);
        }
        case_moe_free(&c);
    }
    printf("host-timed (uploads and downloads included); CPU-class devices' times say nothing about GPUs\n");
    qp_context_destroy(ctx);
    return failed;
}
