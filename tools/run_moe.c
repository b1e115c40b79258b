/* qport run, MoE blocks: bind the routed experts as vLLM's FusedMoE loads
 * them, route each token with the model's own router (an unquantized
 * linear layer, logits in the model dtype as vLLM computes them) and the
 * routing of its config.json, run the fused MoE on every device and
 * compare with the cpu reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "tool.h"

static double ms_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define ROW "%-40s %-16s %-12s %-26.26s %9s %10s %-7s\n"

/* Router logits: gate [E, H] in the model dtype, fp32 sums rounded to
 * the model dtype (ReplicatedLinear), then .float(). The same bits on
 * every rank. qp_model_bind_moe has checked the router's presence and
 * shape; anything else here is an error (-1, the message in ctx), never
 * logits made up in its place. */
int run_moe_logits(qp_model *m, const char *router, qp_dtype dt, const void *x, int M, int H_, int E_, uint64_t seed,
                   float *logits) {
    (void)seed;
    size_t H = (size_t)H_, E = (size_t)E_;
    qp_tensor g;
    char rn[300];
    snprintf(rn, sizeof rn, "%s.weight", router);
    if (!router[0] || qp_model_find_tensor(m, rn, &g)) return -1;
    if (g.ndim != 2 || g.shape[0] != (int64_t)E || g.shape[1] != (int64_t)H ||
        (g.dtype != QP_DTYPE_F16 && g.dtype != QP_DTYPE_BF16 && g.dtype != QP_DTYPE_F32))
        return -1;
    for (int i = 0; i < M; i++)
        for (size_t e = 0; e < E; e++) {
            float acc = 0;
            for (size_t h = 0; h < H; h++) {
                /* a mapped tensor may sit at any byte offset: loaded by memcpy */
                const char *p = (const char *)g.data + (e * H + h) * (g.dtype == QP_DTYPE_F32 ? 4 : 2);
                float w;
                uint16_t b16;
                if (g.dtype == QP_DTYPE_F32) memcpy(&w, p, 4);
                else {
                    memcpy(&b16, p, 2);
                    w = qp_format_decode(dt, (uint16_t)qp_format_encode(dt, qp_format_decode(g.dtype, b16)));
                }
                acc += qp_format_decode(dt, ((const uint16_t *)x)[(size_t)i * H + h]) * w;
            }
            logits[(size_t)i * E + e] = qp_format_decode(dt, (uint16_t)qp_format_encode(dt, acc));
        }
    return 0;
}

/* 0 ok (or only the reference ran), 1 failed; *n_ok counts device rows */
int run_moe(qp_context *ctx, qp_model *m, const char *prefix, const qp_bind_options *bo, qp_dtype dt, int M_arg,
            qp_safetensors *inf, qp_device *refdev, qp_device **devs, int ndev, uint64_t seed, int *n_ok,
            run_outputs *outs) {
    qp_moe_binding b;
    if (qp_model_bind_moe(m, prefix, bo, &b)) {
        printf("%-40s error: %s\n", prefix, qp_last_error(ctx));
        return 1;
    }
    char kind[32];
    snprintf(kind, sizeof kind, "moe %s", qp_scheme_kind_name(b.scheme.kind));
    qp_moe_options mo;
    int rc = 1, M = M_arg ? M_arg : 4;
    void *x = NULL, *yr = NULL, *yd = NULL;
    float *logits = NULL;
    if (qp_model_moe_options(m, prefix, &mo)) { printf("%-40s error: %s\n", prefix, qp_last_error(ctx)); goto out; }
    if (dt != QP_DTYPE_F16 && dt != QP_DTYPE_BF16) {
        printf(ROW, prefix, kind, "-", "MoE runs in fp16/bf16 only", "-", "-", "skip");
        rc = 0;
        goto out;
    }
    mo.act_dtype = dt;
    mo.global_num_experts = b.global_num_experts; /* expert parallelism: route over all */
    mo.expert_offset = b.expert_offset;
    qp_tensor xt;
    if (inf) {
        if (qp_safetensors_find(inf, prefix, &xt) || xt.dtype != dt || xt.ndim != 2 || xt.shape[1] != b.H ||
            xt.shape[0] < 1 || xt.shape[0] > 65536 || (M_arg && xt.shape[0] != M_arg)) {
            printf("%-40s error: the input needs a tensor '%s' of %s [M, %d]%s\n", prefix, prefix, qp_dtype_name(dt), b.H,
                   M_arg ? " with M = --tokens" : "");
            goto out;
        }
        M = (int)xt.shape[0];
    }
    size_t H = (size_t)b.H, E = (size_t)b.global_num_experts;
    x = malloc(2 * (size_t)M * H);
    yr = malloc(2 * (size_t)M * H);
    yd = malloc(2 * (size_t)M * H);
    logits = malloc(sizeof(float) * (size_t)M * E);
    if (!x || !yr || !yd || !logits) { printf("%-40s error: out of memory\n", prefix); goto out; }
    if (inf) memcpy(x, xt.data, 2 * (size_t)M * H);
    else case_activations(DIST_OUTLIERS, dt, M, b.H, seed, x);
    if (run_moe_logits(m, b.router, dt, x, M, b.H, (int)E, seed, logits)) {
        printf("%-40s error: router '%s': %s\n", prefix, b.router, qp_last_error(ctx));
        goto out;
    }
    qp_moe *ref = NULL;
    if (qp_moe_create(refdev, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &mo, &ref) ||
        qp_moe_forward(ref, x, M, logits, yr)) {
        printf("%-40s %-16s %-12s error: %s\n", prefix, kind, "cpu:0", qp_last_error(ctx));
        qp_moe_destroy(ref);
        goto out;
    }
    qp_moe_destroy(ref);
    int failed = 0;
    int exact = tool_kind_exact(b.scheme.kind);
    for (int d = 0; d < ndev; d++) {
        qp_device_info di = {.struct_size = sizeof di};
        qp_device_get_info(devs[d], &di);
        char dn[32], path[64];
        snprintf(dn, sizeof dn, "%s:%d", di.backend, di.index);
        if (b.E != b.global_num_experts)
            snprintf(path, sizeof path, "E%d..%d/%zu top-%d %s", b.expert_offset, b.expert_offset + b.E - 1, E, mo.top_k,
                     devs[d] == refdev ? "ref" : "fused");
        else
            snprintf(path, sizeof path, "E%zu top-%d %s", E, mo.top_k, devs[d] == refdev ? "reference" : "fused");
        qp_moe *moe = NULL;
        qp_status st = qp_moe_create(devs[d], &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &mo, &moe);
        if (st == QP_ERR_UNSUPPORTED) { /* the backend's reason, in the path column's width */
            printf(ROW, prefix, kind, dn, strstr(qp_last_error(ctx), "no fused MoE") ? "no fused MoE kernels" : qp_last_error(ctx),
                   "-", "-", "skip");
            continue;
        }
        if (!st && devs[d] != refdev) {
            char desc[40];
            qp_moe_describe(moe, M, desc, sizeof desc);
            if (desc[0]) snprintf(path + strlen(path) - strlen("fused"), sizeof path - (strlen(path) - strlen("fused")), "%s", desc);
        }
        double t0 = ms_now();
        if (st || qp_moe_forward(moe, x, M, logits, yd)) {
            printf("%-40s %-16s %-12s error: %s\n", prefix, kind, dn, qp_last_error(ctx));
            qp_moe_destroy(moe);
            failed = 1;
            continue;
        }
        double ms = ms_now() - t0, maxe = 0, se = 0, sr = 0;
        long bad = 0;
        for (size_t i = 0; i < (size_t)M * H; i++) {
            double a = qp_format_decode(dt, ((uint16_t *)yr)[i]), v = qp_format_decode(dt, ((uint16_t *)yd)[i]);
            if (exact ? ((uint16_t *)yr)[i] != ((uint16_t *)yd)[i] : !(fabs(a - v) <= fmax(fabs(a), 1.0) * 1e-2)) bad++;
            if (isfinite(a) && isfinite(v)) { maxe = fmax(maxe, fabs(a - v)); se += (a - v) * (a - v); sr += a * a; }
        }
        int pass = !bad && (exact || se <= sr * 0x1p-20 + 1e-30), is_ref = devs[d] == refdev;
        char mss[16], mes[16];
        snprintf(mss, sizeof mss, "%.3f", ms);
        snprintf(mes, sizeof mes, "%.3g", maxe);
        printf(ROW, prefix, kind, dn, path, mss, mes, is_ref ? "(ref)" : pass ? "ok" : "FAIL");
        if (outs && run_output_add(outs, prefix, dn, dt, M, b.H, yd)) failed = 1; /* --output: the block's rows */
        if (!is_ref) { if (pass) (*n_ok)++; else failed = 1; }
        qp_moe_destroy(moe);
    }
    rc = failed;
out:
    free(x); free(yr); free(yd); free(logits);
    qp_moe_binding_free(&b);
    return rc;
}
