/* qport run MODEL_DIR: runs the model's quantized linear layers on every
 * chosen device and compares each with the `cpu` reference. Layers are
 * bound as vLLM builds them: q/k/v and gate/up fused from their shards. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cases.h"
#include "tool.h"

#define MAX_DEV 16
#define MAX_LAYERS 512

/* The layer vLLM builds for a checkpoint tensor prefix: shards map to their
 * fused module (the packed-modules mapping resolution uses: the model
 * class's from qport's architecture table, api/arch.c), others stay. */
static void vllm_layer(const qp_config *cfg, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s", name);
    const char *dot = strrchr(name, '.');
    const char *last = dot ? dot + 1 : name;
    const qp_packed_module *pm;
    size_t npm;
    if (qp_config_packed_modules(cfg, NULL, &pm, &npm)) return;
    for (size_t f = 0; f < npm; f++)
        for (size_t i = 0; i < pm[f].n_shards; i++)
            if (!strcmp(pm[f].shards[i], last)) {
                snprintf(out, cap, "%.*s%s", (int)(last - name), name, pm[f].fused);
                return;
            }
}

/* The fp8 KV cache of one attention module on one device: K and V values
 * (seeded, the spread of real caches: N(0,1) with a few x30 outliers, some
 * past the fp8 range) quantized with the checkpoint's scales and read back,
 * both directions compared bit for bit with the reference. 0 ok, 1 failed,
 * -1 skipped (the backend has no KV kernel: printed with the reason). */
static int run_kv(qp_context *ctx, qp_device *dev, const char *dn, const char *prefix, float ks, float vs, uint64_t seed,
                  int is_ref, qp_dtype dt) {
    enum { N = 8192 };
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2), *yr = malloc(N * 2);
    uint8_t *q = malloc(N), *qr = malloc(N);
    qp_buffer *bx = NULL, *bq = NULL, *by = NULL;
    int rc = 1;
    char what[64] = "";
    double ms = 0;
    if (!x || !y || !yr || !q || !qr) goto out;
    case_activations(DIST_OUTLIERS, dt, 1, N, seed, x);
    if (qp_buffer_create(dev, N * 2, &bx) || qp_buffer_create(dev, N, &bq) || qp_buffer_create(dev, N * 2, &by) ||
        qp_buffer_upload(bx, 0, x, N * 2))
        goto err;
    rc = 0;
    for (int kv = 0; kv < 2 && !rc; kv++) {
        float sc = kv ? vs : ks;
        double t0 = tool_now_ms();
        qp_status st = qp_kv_quantize(dev, dt, bx, N, sc, bq);
        if (st == QP_ERR_UNSUPPORTED) {
            printf("%-40s %-16s %-12s %-26.26s %9s %10s %-7s\n", prefix, "kv-cache fp8", dn, qp_last_error(ctx), "-", "-", "skip");
            rc = -1;
            goto out;
        }
        if (st || qp_kv_dequantize(dev, dt, bq, N, sc, by) || qp_buffer_download(bq, 0, q, N) ||
            qp_buffer_download(by, 0, y, N * 2))
            goto err;
        ms += tool_now_ms() - t0;
        qp_ref_kv_quantize(ctx, dt, x, N, sc, qr);
        qp_ref_kv_dequantize(ctx, dt, qr, N, sc, yr);
        if (memcmp(q, qr, N) || memcmp(y, yr, N * 2)) rc = 1;
    }
    snprintf(what, sizeof what, "k %.3g, v %.3g", (double)ks, (double)vs);
    printf("%-40s %-16s %-12s %-26.26s %9.3f %10s %-7s\n", prefix, "kv-cache fp8", dn, what, ms, rc ? "differs" : "0",
           is_ref ? "(ref)" : rc ? "FAIL" : "ok");
    goto out;
err:
    printf("%-40s %-16s %-12s error: %s\n", prefix, "kv-cache fp8", dn, qp_last_error(ctx));
    rc = 1;
out:
    qp_buffer_destroy(bx); qp_buffer_destroy(bq); qp_buffer_destroy(by);
    free(x); free(y); free(yr); free(q); free(qr);
    return rc;
}

int run_parallel(qp_context *ctx, qp_model *m, const char *comm_kind, const char *const *dev_specs, int nd, int tp, int ep,
                 qp_dtype dt, int M, uint64_t seed, int reps, char **layers, int nlayers, const char *const *moes, int nmoes);

/* Launched by mpirun (Open MPI, MPICH/Hydra, PMIx): the environment says so. */
static int under_mpi_launcher(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

/* Rank 0 of the launcher's job (before a communicator exists). */
static int under_rank0(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i])) == 0;
    return 1;
}

int run_moe(qp_context *ctx, qp_model *m, const char *prefix, const qp_bind_options *bo, qp_dtype dt, int M_arg,
            qp_safetensors *inf, qp_device *refdev, qp_device **devs, int ndev, uint64_t seed, int *n_ok,
            run_outputs *outs);

int run_output_add(run_outputs *o, const char *layer, const char *dev, qp_dtype dt, int rows, int cols, const void *y) {
    size_t bytes = (dt == QP_DTYPE_F32 ? 4 : 2) * (size_t)rows * (size_t)cols;
    if (o->n >= RUN_OUTPUTS_MAX || !(o->data[o->n] = malloc(bytes ? bytes : 1))) return -1;
    memcpy(o->data[o->n], y, bytes);
    snprintf(o->names[o->n], sizeof o->names[0], "%s@%s", layer, dev);
    o->t[o->n] = (qp_tensor){o->names[o->n], dt, 2, {rows, cols}, o->data[o->n]};
    o->n++;
    return 0;
}

/* The modules qport does not run, by name: norms, embeddings, rotary
 * tables; the KV-cache and routing scales are read by their layers. */
static int not_run(const qp_tensor *t) {
    const char *dot = strrchr(t->name, '.'), *suf = dot ? dot + 1 : t->name;
    static const char *const scales[] = {"output_scale", "k_scale", "v_scale", "e_score_correction_bias", "inv_freq"};
    for (size_t i = 0; i < sizeof scales / sizeof *scales; i++)
        if (!strcmp(suf, scales[i])) return 1;
    if (strstr(t->name, "embed") || strstr(t->name, ".wte.") || strstr(t->name, ".wpe.")) return 1;
    /* a norm's module name: ...layernorm, ...norm, ln_f, ln_1, q_norm */
    char mod[256];
    size_t pl = dot ? (size_t)(dot - t->name) : 0;
    snprintf(mod, sizeof mod, "%.*s", (int)(pl < sizeof mod ? pl : sizeof mod - 1), t->name);
    const char *last = strrchr(mod, '.');
    last = last ? last + 1 : mod;
    return t->ndim <= 1 && (strstr(last, "norm") || !strncmp(last, "ln", 2));
}

/* Every checkpoint tensor is bound by a linear layer, an MoE block, the KV
 * cache or a module qport does not run (norms, embeddings: by name,
 * not_run); anything else -- 3-D fused expert tensors, a linear layer's
 * weight that is not 2-D, a scale left without its weight -- would be
 * skipped silently, so it is reported and fails the run. The
 * tensors under an MoE block are the MoE binder's, which refuses any it
 * does not bind. */
static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Whether the first `len` bytes of `name` are one of the sorted names. */
static int listed(const char **sorted, size_t n, const char *name, size_t len) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(sorted[mid], name, len);
        if (!c && sorted[mid][len]) c = 1; /* longer than the prefix */
        if (!c) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

static int report_unused(qp_model *m) {
    size_t n = qp_model_tensor_count(m), other = 0, unused = 0;
    /* the layer and MoE-block names sorted once: each tensor is then two
     * binary searches, not a scan of every layer (10^5-tensor checkpoints) */
    size_t nl = qp_model_layer_count(m), nm = qp_model_moe_count(m);
    const char **ls = malloc(sizeof(char *) * (nl + nm + 1)), **ms = ls ? ls + nl : NULL;
    if (!ls) { fprintf(stderr, "qport run: out of memory\n"); return 1; }
    for (size_t j = 0; j < nl; j++) ls[j] = qp_model_layer_name(m, j);
    for (size_t j = 0; j < nm; j++) ms[j] = qp_model_moe_name(m, j);
    qsort(ls, nl, sizeof *ls, cmp_name);
    qsort(ms, nm, sizeof *ms, cmp_name);
    for (size_t i = 0; i < n; i++) {
        qp_tensor t;
        if (qp_model_tensor_get(m, i, &t)) continue;
        const char *dot = strrchr(t.name, '.');
        size_t pl = dot ? (size_t)(dot - t.name) : 0;
        int used = listed(ls, nl, t.name, pl);
        /* under an MoE block "<...>.experts" (as qp_model_moe_name lists them) */
        for (const char *ex = strstr(t.name, ".experts."); !used && ex; ex = strstr(ex + 1, ".experts."))
            used = listed(ms, nm, t.name, (size_t)(ex + 8 - t.name));
        if (used) continue;
        if (not_run(&t)) {
            other++; /* the KV cache, routing biases, norms, embeddings */
            continue;
        }
        if (unused++ < 10) {
            const char *why = "";
            if (dot && !strcmp(dot, ".weight") && t.ndim != 2) why = " (a linear layer's weight must be 2-D)";
            else if (dot && strcmp(dot, ".weight")) why = " (its layer has no 2-D weight)";
            printf("%-40s unused: no layer binds this %dd %s tensor%s\n", t.name, t.ndim, qp_dtype_name(t.dtype), why);
        }
    }
    free(ls);
    if (unused > 10) printf("... %zu unused tensors in all\n", unused);
    printf("checkpoint: %zu tensors, %zu of modules qport does not run (norms, embeddings, KV and routing scales)%s\n", n,
           other, unused ? ", some unused (above)" : "");
    return unused ? 1 : 0;
}

static double out_at(qp_dtype od, const void *p, size_t i) {
    if (od == QP_DTYPE_F32) { float v; memcpy(&v, (const char *)p + 4 * i, 4); return v; }
    return qp_format_decode(od, ((const uint16_t *)p)[i]);
}

static int usage(void) {
    tool_usage(stderr, "run");
    return 2;
}

/* What the command line asked for. */
typedef struct run_opts {
    const char *dir, *layers_arg[MAX_LAYERS], *dev_specs[MAX_DEV], *in_path, *out_path, *dtype_arg, *comm_kind;
    int rank_given, nl_arg, nd_arg, M_arg, tp, rank, ep, ep_rank, reps, parallel;
    uint64_t seed;
    qp_dtype dt; /* NONE: the model's own */
} run_opts;

/* The model, the devices and layers it runs on, and the tallies. */
typedef struct run_state {
    const run_opts *o;
    qp_context *ctx;
    qp_model *m;
    const qp_config *cfg;
    qp_safetensors *inf;
    qp_dtype dt;
    size_t es;               /* bytes of an activation */
    qp_device *refdev, *devs[MAX_DEV];
    int ndev;
    char *layers[MAX_LAYERS];
    int nlayers;
    const char *moes[MAX_LAYERS];
    int nmoes;
    int n_ok, n_fail;
    run_outputs *outs;
} run_state;

/* The options, one by one; -1 to go on, else the exit status. */
static int run_parse_args(int argc, char **argv, run_opts *o) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layer") && i + 1 < argc && o->nl_arg < MAX_LAYERS) o->layers_arg[o->nl_arg++] = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc && o->nd_arg < MAX_DEV) o->dev_specs[o->nd_arg++] = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            o->M_arg = atoi(argv[++i]);
            if (o->M_arg <= 0 || o->M_arg > 65536) return usage();
        }
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) o->dtype_arg = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) o->seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--input") && i + 1 < argc) o->in_path = argv[++i];
        else if (!strcmp(argv[i], "--output") && i + 1 < argc) o->out_path = argv[++i];
        else if (!strcmp(argv[i], "--tp-size") && i + 1 < argc) o->tp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tp-rank") && i + 1 < argc) { o->rank = atoi(argv[++i]); o->rank_given = 1; }
        else if (!strcmp(argv[i], "--comm") && i + 1 < argc) o->comm_kind = argv[++i];
        else if (!strcmp(argv[i], "--ep-size") && i + 1 < argc) o->ep = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ep-rank") && i + 1 < argc) { o->ep_rank = atoi(argv[++i]); o->rank_given = 1; }
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            o->reps = atoi(argv[++i]);
            if (o->reps < 1 || o->reps > 1000) return usage();
        }
        else if (argv[i][0] != '-' && !o->dir) o->dir = argv[i];
        else return usage();
    }
    return -1;
}

/* argv into o; -1 to go on, else the exit status (said). */
static int run_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype_arg = "auto";
    o->tp = o->ep = 1;
    o->seed = 1;
    int rc = run_parse_args(argc, argv, o);
    if (rc >= 0) return rc;
    if (!o->dir) return usage();
    /* parallel mode: --comm, or --tp-size/--ep-size > 1 without a rank under
     * an MPI launcher (docs/parallel.md) */
    o->parallel = o->comm_kind || ((o->tp > 1 || o->ep > 1) && !o->rank_given && under_mpi_launcher());
    if (o->reps && !o->parallel) {
        fprintf(stderr, "qport run: --reps times the parallel layers: run under mpirun -n N with --tp-size/--ep-size N\n");
        return 2;
    }
    if (o->parallel && (o->rank_given || o->in_path || o->out_path)) {
        fprintf(stderr, "qport run: under a communicator the ranks come from it: no --tp-rank, --ep-rank, --input or --output\n");
        return 2;
    }
    /* vLLM's --dtype: auto is the model's own (qp_model_dtype) */
    o->dt = QP_DTYPE_NONE;
    if (strcmp(o->dtype_arg, "auto") && (o->dt = qp_dtype_from_torch_name(o->dtype_arg)) == QP_DTYPE_NONE) {
        fprintf(stderr, "qport run: --dtype must be auto, float16 (half), bfloat16 or float32 (float), got '%s'\n", o->dtype_arg);
        return 2;
    }
    return -1;
}

/* The devices named, else every device once (a second name of one is
 * skipped); none under a communicator, whose ranks choose their own. */
static int run_open_devices(run_state *s) {
    const run_opts *o = s->o;
    if (o->parallel) return 0;
    if (o->nd_arg) {
        for (int i = 0; i < o->nd_arg; i++)
            if (qp_device_find(s->ctx, o->dev_specs[i], &s->devs[s->ndev++])) { fprintf(stderr, "qport run: %s\n", qp_last_error(s->ctx)); return -1; }
        return 0;
    }
    size_t n = 0;
    qp_device_count(s->ctx, &n);
    for (size_t i = 0; i < n && s->ndev < MAX_DEV; i++) {
        qp_device *d;
        qp_device_info di = {.struct_size = sizeof di};
        if (!qp_device_get(s->ctx, i, &d) && !qp_device_get_info(d, &di) && !di.same_as[0]) s->devs[s->ndev++] = d;
    }
    return 0;
}

/* The layers to run: those named, else every one of the model, as vLLM
 * fuses them. MoE blocks ("....mlp.experts") run as fused MoE layers. */
static void run_list_layers(run_state *s) {
    const run_opts *o = s->o;
    qp_model *m = s->m;
    for (size_t i = 0; i < qp_model_moe_count(m) && s->nmoes < MAX_LAYERS; i++) {
        const char *mn = qp_model_moe_name(m, i);
        int wanted = !o->nl_arg;
        for (int j = 0; j < o->nl_arg; j++) wanted |= !strcmp(o->layers_arg[j], mn);
        if (wanted) s->moes[s->nmoes++] = mn;
    }
    if (o->nl_arg) {
        for (int i = 0; i < o->nl_arg; i++) {
            int is_moe = 0;
            for (int j = 0; j < s->nmoes; j++) is_moe |= !strcmp(s->moes[j], o->layers_arg[i]);
            if (!is_moe) s->layers[s->nlayers++] = strdup(o->layers_arg[i]);
        }
        return;
    }
    for (size_t i = 0; i < qp_model_layer_count(m) && s->nlayers < MAX_LAYERS; i++) {
        char name[1024];
        vllm_layer(s->cfg, qp_model_layer_name(m, i), name, sizeof name);
        int dup = 0;
        for (int j = 0; j < s->nlayers; j++) dup |= !strcmp(s->layers[j], name);
        if (!dup) s->layers[s->nlayers++] = strdup(name);
    }
}

/* The model, its dtype, the input file, the devices and the layers; -1
 * after saying what is wrong. */
static int run_plan(run_state *s) {
    const run_opts *o = s->o;
    qp_context *ctx = s->ctx;
    if (qp_model_open(ctx, o->dir, &s->m)) { fprintf(stderr, "qport run: %s\n", qp_last_error(ctx)); return -1; }
    s->cfg = qp_model_config(s->m);
    if (!s->cfg) { fprintf(stderr, "qport run: %s has no quantization_config (qport quantize makes one)\n", o->dir); return -1; }
    s->dt = o->dt == QP_DTYPE_NONE ? qp_model_dtype(s->m) : o->dt;
    s->es = s->dt == QP_DTYPE_F32 ? 4 : 2;
    qp_dtype dt = s->dt;
    if (!o->parallel || under_rank0()) printf("model %s: dtype %s%s\n", o->dir, dt == QP_DTYPE_F16 ? "float16" : dt == QP_DTYPE_BF16 ? "bfloat16" : "float32",
           strcmp(o->dtype_arg, "auto") ? " (--dtype)" : " (dtype=auto, as vLLM picks it)");
    if (o->in_path && qp_safetensors_open(ctx, o->in_path, &s->inf)) { fprintf(stderr, "qport run: %s\n", qp_last_error(ctx)); return -1; }
    if (qp_device_find(ctx, "cpu", &s->refdev)) { fprintf(stderr, "qport run: %s\n", qp_last_error(ctx)); return -1; }
    if (run_open_devices(s)) return -1;
    run_list_layers(s);
    return 0;
}

/* The rows of a layer's input: the --input tensor's (checked against the
 * layer), else --tokens (4). 0 with *xt set when it comes from the file or
 * NULL, 1 after printing why the layer cannot run. */
static int run_input_rows(run_state *s, int li, const qp_layer_binding *b, qp_tensor *xt, int *M, int *have_x) {
    const run_opts *o = s->o;
    const char *name = s->layers[li];
    *M = o->M_arg ? o->M_arg : 4;
    *have_x = 0;
    if (!s->inf) return 0;
    char why[400] = "";
    if (qp_safetensors_find(s->inf, name, xt))
        snprintf(why, sizeof why, "no input tensor '%s' in %s", name, o->in_path);
    else if (xt->ndim != 2 || xt->shape[1] != b->K || (xt->dtype != s->dt && xt->dtype != QP_DTYPE_F32))
        snprintf(why, sizeof why, "input tensor '%s' is %s [%lld%s%lld]; the layer takes %s or f32 [M, %d]",
                 name, qp_dtype_name(xt->dtype), xt->ndim > 0 ? (long long)xt->shape[0] : 0LL,
                 xt->ndim > 1 ? ", " : "", xt->ndim > 1 ? (long long)xt->shape[1] : 0LL, qp_dtype_name(s->dt), b->K);
    else if (xt->shape[0] < 1 || xt->shape[0] > 65536)
        snprintf(why, sizeof why, "input tensor '%s' has %lld rows (1 to 65536)", name, (long long)xt->shape[0]);
    else if (o->M_arg && xt->shape[0] != o->M_arg)
        snprintf(why, sizeof why, "input tensor '%s' is [%lld, %d] but --tokens is %d", name,
                 (long long)xt->shape[0], b->K, o->M_arg);
    if (why[0]) {
        printf("%-40s error: %s\n", name, why);
        return 1;
    }
    *M = (int)xt->shape[0];
    *have_x = 1;
    return 0;
}

/* The layer's input x in the run's dtype: the file's tensor, else seeded
 * activations; -1: out of memory. */
static int run_fill_input(const run_state *s, int li, const qp_tensor *xt, int have_x, int M, int K, void *x) {
    qp_dtype dt = s->dt;
    uint64_t seed = s->o->seed + (uint64_t)li;
    if (have_x && xt->dtype == dt) {
        memcpy(x, xt->data, s->es * (size_t)M * K);
    } else if (have_x) { /* f32 input: rounded to the model dtype, as x.to(dtype) */
        for (size_t i = 0; i < (size_t)M * K; i++) {
            float v;
            memcpy(&v, (const char *)xt->data + 4 * i, 4);
            if (dt == QP_DTYPE_F32) memcpy((char *)x + 4 * i, &v, 4);
            else ((uint16_t *)x)[i] = (uint16_t)qp_format_encode(dt, v);
        }
    } else if (dt == QP_DTYPE_F32) { /* the fp16 distribution, widened */
        uint16_t *h = malloc(2 * (size_t)M * K);
        if (!h) return -1;
        case_activations(DIST_OUTLIERS, QP_DTYPE_F16, M, K, seed, h);
        for (size_t i = 0; i < (size_t)M * K; i++) ((float *)x)[i] = qp_format_decode(QP_DTYPE_F16, h[i]);
        free(h);
    } else {
        case_activations(DIST_OUTLIERS, dt, M, K, seed, x);
    }
    return 0;
}

/* One layer's inputs and outputs: x, the reference's y and a device's. */
typedef struct layer_io { void *x, *yr, *yd; int M; } layer_io;

/* The layer on one device against the reference's output: timed over 3
 * runs after a warm-up, compared, printed and tallied. */
static void run_layer_on(run_state *s, int li, const qp_layer_binding *b, const qp_linear_options *lo,
                         const layer_io *io, int d) {
    qp_device *dev = s->devs[d];
    const char *name = s->layers[li], *kind = qp_scheme_kind_name(b->scheme.kind);
    int M = io->M, exact = tool_kind_exact(b->scheme.kind);
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(dev, &di);
    char dn[32], path[64] = "";
    snprintf(dn, sizeof dn, "%s:%d", di.backend, di.index);
    qp_support_info si;
    if (!qp_device_supports(dev, &b->scheme, M, b->N, b->K, &si) && si.level == QP_SUPPORT_UNSUPPORTED) {
        printf("%-40s %-16s %-12s %-26.26s %9s %10s %-7s\n", name, kind, dn, si.reason, "-", "-", "skip");
        return;
    }
    qp_linear *lin = NULL;
    double t0 = 0, ms = 0;
    int ok = !qp_linear_create(dev, &b->scheme, b->N, b->K, b->tensors, b->n_tensors, lo, &lin);
    if (ok) {
        qp_linear_describe(lin, M, path, sizeof path);
        ok = !qp_linear_forward(lin, io->x, M, io->yd); /* warm-up: pipelines, caches */
        t0 = tool_now_ms();
        for (int r = 0; ok && r < 3; r++) ok = !qp_linear_forward(lin, io->x, M, io->yd);
        ms = (tool_now_ms() - t0) / 3;
    }
    if (!ok) {
        printf("%-40s %-16s %-12s error: %s\n", name, kind, dn, qp_last_error(s->ctx));
        s->n_fail++;
        qp_linear_destroy(lin);
        return;
    }
    qp_dtype od = qp_linear_out_dtype(lin);
    double maxe = 0, se = 0, sr = 0;
    long bad = 0;
    size_t oes = od == QP_DTYPE_F32 ? 4 : 2;
    for (size_t i = 0; i < (size_t)M * b->N; i++) {
        double a = out_at(od, io->yr, i), v = out_at(od, io->yd, i);
        int same = !memcmp((const char *)io->yr + oes * i, (const char *)io->yd + oes * i, oes);
        if (exact ? !same : !(fabs(a - v) <= fmax(fabs(a), 1.0) * 1e-2)) bad++;
        if (isfinite(a) && isfinite(v)) { maxe = fmax(maxe, fabs(a - v)); se += (a - v) * (a - v); sr += a * a; }
    }
    int pass = !bad && (exact || se <= sr * 0x1p-20 + 1e-30), is_ref = dev == s->refdev;
    printf("%-40s %-16s %-12s %-26.26s %9.3f %10.3g %-7s\n", name, kind, dn, path[0] ? path : "-", ms, maxe,
           is_ref ? "(ref)" : pass ? "ok" : "FAIL");
    if (is_ref) {} else if (pass) s->n_ok++; else s->n_fail++;
    if (s->o->out_path) run_output_add(s->outs, name, dn, od, M, b->N, io->yd);
    qp_linear_destroy(lin);
}

/* The reference's output, then every device's; -1: out of memory. */
static int run_layer_io(run_state *s, int li, const qp_layer_binding *b, const qp_tensor *xt, int have_x,
                        layer_io *io) {
    size_t es = s->es;
    int M = io->M;
    io->x = malloc(es * (size_t)M * b->K);
    io->yr = malloc(es * (size_t)M * b->N);
    io->yd = malloc(es * (size_t)M * b->N);
    if (!io->x || !io->yr || !io->yd || run_fill_input(s, li, xt, have_x, M, b->K, io->x)) return -1;
    qp_linear_options lo;
    qp_linear_options_init(&lo);
    lo.act_dtype = s->dt;
    lo.layer = s->layers[li];
    lo.shard_rows = b->n_shards ? b->shard_rows : NULL;
    lo.n_shards = b->n_shards;
    qp_linear *ref = NULL;
    if (qp_linear_create(s->refdev, &b->scheme, b->N, b->K, b->tensors, b->n_tensors, &lo, &ref) ||
        qp_linear_forward(ref, io->x, M, io->yr)) {
        printf("%-40s %-16s %-12s error: %s\n", s->layers[li], qp_scheme_kind_name(b->scheme.kind), "cpu:0",
               qp_last_error(s->ctx));
        s->n_fail++;
        qp_linear_destroy(ref);
        return 0;
    }
    for (int d = 0; d < s->ndev; d++) run_layer_on(s, li, b, &lo, io, d);
    qp_linear_destroy(ref);
    return 0;
}

/* One linear layer, bound as vLLM builds it, on every device; -1: out of
 * memory (the run stops). */
static int run_layer(run_state *s, int li) {
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    bo.tp_size = s->o->tp;
    bo.tp_rank = s->o->rank;
    qp_layer_binding b;
    qp_status st = qp_model_bind_layer(s->m, s->layers[li], &bo, &b);
    if (st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(s->ctx), "not quantized")) {
        printf("%-40s %-16s %-12s %-26s %9s %10s %-7s\n", s->layers[li], "unquantized", "-", "-", "-", "-", "skip");
        return 0;
    }
    if (st) { printf("%-40s error: %s\n", s->layers[li], qp_last_error(s->ctx)); s->n_fail++; return 0; }
    qp_tensor xt;
    layer_io io = {0};
    int have_x, rc = 0;
    if (run_input_rows(s, li, &b, &xt, &io.M, &have_x)) s->n_fail++;
    else rc = run_layer_io(s, li, &b, &xt, have_x, &io);
    free(io.x); free(io.yr); free(io.yd);
    qp_layer_binding_free(&b);
    return rc;
}

/* The fp8 KV cache of every attention module whose config quantizes it. */
static void run_kv_all(run_state *s) {
    for (int li = 0; li < s->nlayers; li++) {
        const char *name = s->layers[li];
        size_t l = strlen(name);
        const char *suffix = l > 9 && !strcmp(name + l - 9, ".qkv_proj") ? ".qkv_proj"
                             : l > 7 && !strcmp(name + l - 7, ".k_proj") ? ".k_proj" : NULL;
        if (!suffix) continue;
        char prefix[1024];
        snprintf(prefix, sizeof prefix, "%.*s", (int)(l - strlen(suffix)), name);
        float ks, vs;
        qp_status st = qp_model_kv_scales(s->m, prefix, &ks, &vs);
        if (st == QP_ERR_NOT_FOUND) break; /* the config leaves the cache unquantized */
        if (st) { printf("%-40s error: %s\n", prefix, qp_last_error(s->ctx)); s->n_fail++; continue; }
        for (int d = 0; d < s->ndev; d++) {
            qp_device_info di = {.struct_size = sizeof di};
            qp_device_get_info(s->devs[d], &di);
            char dn[32];
            snprintf(dn, sizeof dn, "%s:%d", di.backend, di.index);
            int r = run_kv(s->ctx, s->devs[d], dn, prefix, ks, vs, s->o->seed + (uint64_t)li, s->devs[d] == s->refdev,
                           s->dt == QP_DTYPE_F32 ? QP_DTYPE_F16 : s->dt);
            if (s->devs[d] == s->refdev || r < 0) continue;
            if (r) s->n_fail++; else s->n_ok++;
        }
    }
}

/* Every layer, MoE block and KV cache on this process's devices; the exit
 * status. */
static int run_all(run_state *s) {
    const run_opts *o = s->o;
    printf("%-40s %-16s %-12s %-26s %9s %10s %-7s\n", "layer", "scheme", "device", "path", "ms", "max_err", "verdict");
    for (int li = 0; li < s->nlayers; li++)
        if (run_layer(s, li)) return 1;
    qp_bind_options mbo;
    qp_bind_options_init(&mbo);
    mbo.tp_size = o->tp;
    mbo.tp_rank = o->rank;
    mbo.ep_size = o->ep;
    mbo.ep_rank = o->ep_rank;
    for (int i = 0; i < s->nmoes; i++)
        s->n_fail += run_moe(s->ctx, s->m, s->moes[i], &mbo, s->dt, o->M_arg, s->inf, s->refdev, s->devs, s->ndev,
                             o->seed + 1000 + (uint64_t)i, &s->n_ok, o->out_path ? s->outs : NULL);
    run_kv_all(s);
    if (!o->nl_arg) s->n_fail += report_unused(s->m);
    if (o->out_path && qp_safetensors_write(s->ctx, o->out_path, s->outs->t, s->outs->n, NULL, 0)) {
        fprintf(stderr, "qport run: %s\n", qp_last_error(s->ctx));
        s->n_fail++;
    }
    printf("%d ok, %d failed (integer schemes and the fp8 KV cache bit-exact against the cpu reference; float\n"
           "schemes NMSE <= 2^-20 — "
"qport conform holds them to the format-derived bound). CPU-class devices' times say nothing about GPUs.\n",
           s->n_ok, s->n_fail);
    return s->n_fail ? 1 : 0;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = run_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    run_state s = {.o = &o};
    if (qp_context_create(&s.ctx)) return 1;
    tool_install_log(s.ctx);
    static run_outputs outs; /* --output */
    outs.n = 0;
    s.outs = &outs;
    rc = 1;
    if (!run_plan(&s)) {
        if (o.parallel)
            rc = run_parallel(s.ctx, s.m, o.comm_kind, o.dev_specs, o.nd_arg, o.tp, o.ep, s.dt, o.M_arg ? o.M_arg : 4,
                              o.seed, o.reps ? o.reps : 1, s.layers, s.nlayers, s.moes, s.nmoes);
        else
            rc = run_all(&s);
    }
    for (int i = 0; i < s.nlayers; i++) free(s.layers[i]);
    for (size_t i = 0; i < outs.n; i++) free(outs.data[i]);
    qp_safetensors_close(s.inf);
    qp_model_close(s.m);
    qp_context_destroy(s.ctx);
    return rc;
}
