/* qport bench --chain L: what one host wait per layer costs. L layers of
 * one shape and scheme are enqueued back to back (qp_linear_enqueue, each
 * reading the previous one's output) with one qp_device_synchronize at the
 * end, and again with a synchronize after every layer (what every layer
 * call did before qport was asynchronous). Printed per device and M:
 *   device  the layer's device time (qp_linear_time's timers, median),
 *   chained the host wall time per layer of the enqueued chain,
 *   waited  the host wall time per layer with a wait per layer,
 * and the ratios chained/device (the target on a GPU: <= 1.15 at M = 1)
 * and waited/chained. On CPU implementations of a GPU API (lavapipe,
 * PoCL) the numbers describe the CPU, not a GPU: printed, not judged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "tool.h"

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, tool_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct chain_args {
    int L, K, N, reps;
    const char *scheme;
    const char *devs[16];
    int n_dev;
} chain_args;

static int parse(int argc, char **argv, chain_args *a) {
    *a = (chain_args){.L = 32, .K = 4096, .N = 4096, .reps = 5, .scheme = "int8-dyn-sym"};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(s, "--chain") && v) {
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 4096) { fprintf(stderr, "qport bench: --chain must be 1..4096 layers, got '%s'\n", v); return 2; }
            a->L = (int)n; i++;
        } else if (!strcmp(s, "--size") && v) {
            if (sscanf(v, "%dx%d", &a->K, &a->N) != 2 || a->K < 1 || a->N < 1 || a->K > 65536 || a->N > 65536) {
                fprintf(stderr, "qport bench: --size must be KxN (input x output features), got '%s'\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(s, "--reps") && v) {
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1000) { fprintf(stderr, "qport bench: --reps must be 1..1000, got '%s'\n", v); return 2; }
            a->reps = (int)n; i++;
        } else if (!strcmp(s, "--scheme") && v) {
            if (!quant_scheme_find(v)) { fprintf(stderr, "qport bench: unknown scheme '%s' (qport quantize --list)\n", v); return 2; }
            a->scheme = v; i++;
        } else if (!strcmp(s, "--device") && v && a->n_dev < 16) {
            a->devs[a->n_dev++] = v; i++;
        } else {
            tool_usage(stderr, "bench");
            return 2;
        }
    }
    if (a->K != a->N) {
        fprintf(stderr, "qport bench --chain: the layers feed each other, so K must equal N (got %dx%d)\n", a->K, a->N);
        return 2;
    }
    return 0;
}

/* One device: the chain at M = 1, 4, 16. */
static int run_device(qp_context *ctx, qp_device *dev, const chain_args *a, const qp_scheme *s, const qp_tensor *t,
                      size_t nt) {
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(dev, &di);
    char name[32];
    snprintf(name, sizeof name, "%s:%d", di.backend, di.index);
    qp_linear **lin = calloc((size_t)a->L, sizeof *lin);
    qp_buffer *x = NULL, *y = NULL;
    int rc = 0;
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.max_m = 16;
    for (int l = 0; l < a->L && !rc; l++) rc = qp_linear_create(dev, s, a->N, a->K, t, nt, &o, &lin[l]) != QP_OK;
    if (!rc) rc = qp_buffer_create(dev, (size_t)16 * a->K * 2, &x) || qp_buffer_create(dev, (size_t)16 * a->N * 2, &y);
    if (rc) {
        printf("%-12s SKIP %s\n", name, qp_last_error(ctx));
        goto out;
    }
    uint16_t *host = calloc((size_t)16 * a->K, 2);
    for (int i = 0; i < 16 * a->K; i++) host[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)((i * 37) % 17 - 8) / 16);
    qp_buffer_upload(x, 0, host, (size_t)16 * a->K * 2);
    free(host);
    static const int ms[3] = {1, 4, 16};
    double *v = malloc(sizeof(double) * (size_t)(a->reps > 8 ? a->reps : 8));
    for (int mi = 0; mi < 3 && !rc; mi++) {
        int M = ms[mi];
        double dev_ms = -1;
        if (qp_linear_time(lin[0], x, M, y, a->reps, v, NULL) == QP_OK) dev_ms = median(v, a->reps);
        /* warm-up: pipelines, per-shape compiles */
        for (int l = 0; l < a->L && !rc; l++) rc = qp_linear_enqueue(lin[l], l % 2 ? y : x, M, l % 2 ? x : y, NULL) != QP_OK;
        if (rc || qp_device_synchronize(dev)) { rc = 1; break; }
        for (int r = 0; r < a->reps && !rc; r++) {
            double t0 = tool_now_ms();
            for (int l = 0; l < a->L && !rc; l++) rc = qp_linear_enqueue(lin[l], l % 2 ? y : x, M, l % 2 ? x : y, NULL) != QP_OK;
            if (!rc) rc = qp_device_synchronize(dev) != QP_OK;
            v[r] = (tool_now_ms() - t0) / a->L;
        }
        double chained = rc ? -1 : median(v, a->reps);
        for (int r = 0; r < a->reps && !rc; r++) {
            double t0 = tool_now_ms();
            for (int l = 0; l < a->L && !rc; l++)
                rc = qp_linear_enqueue(lin[l], l % 2 ? y : x, M, l % 2 ? x : y, NULL) || qp_device_synchronize(dev);
            v[r] = (tool_now_ms() - t0) / a->L;
        }
        if (rc) break;
        double waited = median(v, a->reps);
        char dv[16] = "-", r1[16] = "-";
        if (dev_ms > 0) {
            snprintf(dv, sizeof dv, "%.4f", dev_ms);
            snprintf(r1, sizeof r1, "%.2f", chained / dev_ms);
        }
        printf("%-12s %5d %10s %10.4f %10.4f %14s %15.2f\n", name, M, dv, chained, waited, r1, waited / chained);
    }
    free(v);
    if (rc) printf("%-12s FAIL %s\n", name, qp_last_error(ctx));
out:
    qp_buffer_destroy(x);
    qp_buffer_destroy(y);
    for (int l = 0; l < a->L; l++) qp_linear_destroy(lin[l]);
    free(lin);
    return rc;
}

int cmd_bench_chain(int argc, char **argv) {
    chain_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 2;
    tool_install_log(ctx);
    const case_scheme *q = quant_scheme_find(a.scheme);
    qp_config *cfg = NULL;
    qp_scheme s;
    qp_qweights *qw = NULL;
    float *w = malloc(sizeof(float) * (size_t)a.N * a.K);
    if (!w || qp_config_load_buffer(ctx, q->tool_name, q->config, strlen(q->config), &cfg) ||
        qp_config_resolve(cfg, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, NULL, &s)) {
        fprintf(stderr, "qport bench --chain: %s\n", qp_last_error(ctx));
        free(w);
        qp_context_destroy(ctx);
        return 2;
    }
    for (size_t i = 0; i < (size_t)a.N * a.K; i++) w[i] = (float)((int)((i * 2654435761u) >> 24) - 128) / 2048.0f;
    rc = qp_quantize_weights(ctx, &s, w, a.N, a.K, NULL, &qw) != QP_OK;
    free(w);
    if (rc) {
        fprintf(stderr, "qport bench --chain: %s\n", qp_last_error(ctx));
        qp_config_destroy(cfg);
        qp_context_destroy(ctx);
        return 2;
    }
    qp_tensor t[16];
    size_t nt = qp_qweights_count(qw);
    for (size_t i = 0; i < nt && i < 16; i++) qp_qweights_get(qw, i, &t[i]);
    printf("chain of %d layers %dx%d (K x N), %s, fp16 activations; ms per layer (medians of %d runs)\n", a.L, a.K, a.N,
           a.scheme, a.reps);
    printf("%-12s %5s %10s %10s %10s %14s %15s\n", "device", "M", "device", "chained", "waited", "chained/device",
           "waited/chained");
    qp_device *devs[16];
    int nd = 0;
    if (a.n_dev) {
        for (int i = 0; i < a.n_dev; i++)
            if (qp_device_find(ctx, a.devs[i], &devs[nd++])) {
                fprintf(stderr, "qport bench --chain: %s\n", qp_last_error(ctx));
                rc = 2;
                goto out;
            }
    } else {
        size_t n = 0;
        qp_device_count(ctx, &n);
        for (size_t i = 0; i < n && nd < 16; i++)
            if (qp_device_get(ctx, i, &devs[nd]) == QP_OK) nd++;
    }
    for (int d = 0; d < nd; d++) rc |= run_device(ctx, devs[d], &a, &s, t, nt);
out:
    qp_qweights_destroy(qw);
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return rc;
}
