/* bench_load: how loading scales with the number of tensors. Not
 * a test (nothing is asserted, no timing is judged): it writes a synthetic
 * DeepSeek-style MoE checkpoint of about N tensors (layers x experts x
 * gate/up/down x weight + weight_scale, plus attention layers) as S shards
 * with a model.safetensors.index.json, then times qp_model_open (headers,
 * index), the layer and expert-block enumeration, a lookup of every tensor
 * by name, and binding one linear layer, and prints each per 10^5 tensors
 * with the peak RSS against the checkpoint's size (the checkpoint is
 * mmapped, never copied).
 *
 *   build/tests/bench_load [N=100000] [bytes per expert tensor=64] [shards=8] [dir]
 *
 * The folder (default: a fresh one under $TMPDIR or /tmp) is removed after. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qport.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The process's CPU time: what the load costs, whatever else the machine runs. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) { if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0; fclose(f); }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

#define DIE(...) do { fprintf(stderr, "bench_load: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

int main(int argc, char **argv) {
    long want = argc > 1 ? atol(argv[1]) : 100000;
    long tbytes = argc > 2 ? atol(argv[2]) : 64;
    int shards = argc > 3 ? atoi(argv[3]) : 8;
    if (want < 100 || tbytes < 1 || shards < 1 || shards > 256) DIE("usage: bench_load [N>=100] [bytes>=1] [shards 1..256] [dir]");
    char dir[4096];
    int own = argc <= 4;
    if (own) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/qport-bench-load-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) DIE("mkdtemp %s failed", dir);
    } else {
        snprintf(dir, sizeof dir, "%s", argv[4]);
        mkdir(dir, 0755);
    }
    /* shape: L layers of E experts, 6 tensors per expert (3 projections x
     * weight + weight_scale), plus 8 attention/norm tensors per layer */
    int E = 256;
    long per_layer = 6L * E + 8;
    long L = want / per_layer > 0 ? want / per_layer : 1;
    while (L * per_layer > want * 11 / 10 && E > 8) { E /= 2; per_layer = 6L * E + 8; L = want / per_layer > 0 ? want / per_layer : 1; }
    long n = L * per_layer;
    int H = 64, I = (int)(tbytes / 64 > 1 ? (tbytes / 64 < 4096 ? tbytes / 64 : 4096) : 1); /* int8 [I, H]: I*64 bytes */
    size_t wbytes = (size_t)I * (size_t)H;
    int8_t *zero = calloc(wbytes > 65536 ? wbytes : 65536, 1);
    float *ones = malloc(sizeof(float) * 4096);
    if (!zero || !ones) DIE("out of memory");
    for (int i = 0; i < 4096; i++) ones[i] = 1.0f / 64;
    qp_context *ctx;
    if (qp_context_create(&ctx)) DIE("context");
    /* config.json: Quark W8A8 int8 per-channel weights, dynamic per-token activations */
    char path[4600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) DIE("cannot write %s", path);
    fprintf(f, "{\"model_type\": \"deepseek_v3\", \"torch_dtype\": \"float16\", \"num_experts_per_tok\": 8,\n"
               " \"quantization_config\": {\"quant_method\": \"quark\", \"export\": {\"pack_method\": \"reorder\", \"kv_cache_group\": []},\n"
               "  \"global_quant_config\": {\"weight\": {\"dtype\": \"int8\", \"qscheme\": \"per_channel\", \"symmetric\": true,"
               " \"is_dynamic\": false}, \"input_tensors\": {\"dtype\": \"int8\", \"qscheme\": \"per_channel\", \"symmetric\": true,"
               " \"is_dynamic\": true}},\n  \"exclude\": [\"lm_head\"]}}\n");
    fclose(f);
    /* tensors, shard by shard; names of the index in one JSON object */
    static const char *const projs[3] = {"gate_proj", "up_proj", "down_proj"};
    static const char *const attn[8] = {"self_attn.q_proj.weight", "self_attn.q_proj.weight_scale", "self_attn.o_proj.weight",
                                        "self_attn.o_proj.weight_scale", "input_layernorm.weight", "post_attention_layernorm.weight",
                                        "mlp.gate.weight", "mlp.gate.e_score_correction_bias"};
    char **names = malloc(sizeof(char *) * (size_t)n);
    qp_tensor *t = malloc(sizeof(qp_tensor) * (size_t)n);
    int *shard_of = malloc(sizeof(int) * (size_t)n);
    if (!names || !t || !shard_of) DIE("out of memory");
    long k = 0;
    uint64_t total = 0;
    for (long l = 0; l < L; l++) {
        int sh = (int)(l * shards / L);
        for (int a = 0; a < 8; a++, k++) {
            if (asprintf(&names[k], "model.layers.%ld.%s", l, attn[a]) < 0) DIE("oom");
            int scale = strstr(attn[a], "scale") != NULL, w = !scale && a < 4;
            t[k] = w ? (qp_tensor){names[k], QP_DTYPE_I8, 2, {64, 64}, zero}
                     : (qp_tensor){names[k], scale ? QP_DTYPE_F32 : QP_DTYPE_F16, 1, {64}, ones};
            if (a == 6) t[k] = (qp_tensor){names[k], QP_DTYPE_F16, 2, {E, 64}, zero};
            if (a == 7) t[k] = (qp_tensor){names[k], QP_DTYPE_F32, 1, {E}, ones};
            shard_of[k] = sh;
        }
        for (int e = 0; e < E; e++)
            for (int p = 0; p < 3; p++) {
                int down = p == 2;
                if (asprintf(&names[k], "model.layers.%ld.mlp.experts.%d.%s.weight", l, e, projs[p]) < 0) DIE("oom");
                t[k] = (qp_tensor){names[k], QP_DTYPE_I8, 2, {down ? H : I, down ? I : H}, zero};
                shard_of[k++] = sh;
                if (asprintf(&names[k], "model.layers.%ld.mlp.experts.%d.%s.weight_scale", l, e, projs[p]) < 0) DIE("oom");
                t[k] = (qp_tensor){names[k], QP_DTYPE_F32, 1, {down ? H : I}, ones};
                shard_of[k++] = sh;
            }
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    f = fopen(path, "w");
    if (!f) DIE("cannot write %s", path);
    fprintf(f, "{\"metadata\": {}, \"weight_map\": {");
    for (long i = 0; i < n; i++)
        fprintf(f, "%s\n  \"%s\": \"model-%05d-of-%05d.safetensors\"", i ? "," : "", names[i], shard_of[i] + 1, shards);
    fprintf(f, "}}\n");
    fclose(f);
    double tw = now();
    for (int s = 0; s < shards; s++) {
        long b = -1, e = -1;
        for (long i = 0; i < n; i++)
            if (shard_of[i] == s) { if (b < 0) b = i; e = i + 1; }
        if (b < 0) continue;
        for (long i = b; i < e; i++) total += qp_tensor_bytes(&t[i]);
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, shards);
        if (qp_safetensors_write(ctx, path, t + b, (size_t)(e - b), NULL, 0)) DIE("%s", qp_last_error(ctx));
    }
    tw = now() - tw;
    long rss0 = rss_kib(), peak0 = peak_rss_kib();
    printf("checkpoint: %ld tensors (%ld layers x %d experts), %d shards, %.1f MiB of tensor data (written in %.2f s) in %s\n",
           n, L, E, shards, (double)total / (1 << 20), tw, dir);

    double t0 = now(), c0 = cpu_now();
    qp_model *m;
    if (qp_model_open(ctx, dir, &m)) DIE("%s", qp_last_error(ctx));
    double t_open = now() - t0, c_open = cpu_now() - c0;
    t0 = now(); c0 = cpu_now();
    size_t nl = qp_model_layer_count(m), nm = qp_model_moe_count(m);
    double t_enum = now() - t0, c_enum = cpu_now() - c0;
    t0 = now(); c0 = cpu_now();
    size_t found = 0;
    for (long i = 0; i < n; i++) {
        qp_tensor x;
        found += qp_model_find_tensor(m, names[i], &x) == QP_OK;
    }
    double t_find = now() - t0, c_find = cpu_now() - c0;
    t0 = now();
    qp_layer_binding b;
    char lname[128];
    snprintf(lname, sizeof lname, "model.layers.%ld.self_attn.o_proj", L - 1);
    qp_status bs = qp_model_bind_layer(m, lname, NULL, &b);
    double t_bind = now() - t0;
    if (!bs) qp_layer_binding_free(&b);
    long rss1 = rss_kib(), peak1 = peak_rss_kib();
    double per = 1e5 / (double)n;
    printf("%-34s %9s %9s %16s\n", "phase", "wall s", "cpu s", "cpu s per 1e5");
    printf("%-34s %9.3f %9.3f %16.3f\n", "qp_model_open (index, headers)", t_open, c_open, c_open * per);
    printf("%-34s %9.3f %9.3f %16.3f   (%zu layers, %zu MoE blocks)\n", "layer + MoE-block enumeration", t_enum, c_enum,
           c_enum * per, nl, nm);
    printf("%-34s %9.3f %9.3f %16.3f   (%zu of %ld found)\n", "qp_model_find_tensor, every name", t_find, c_find,
           c_find * per, found, n);
    printf("%-34s %9.3f %9s %16s   (%s)\n", "qp_model_bind_layer, one layer", t_bind, "", "", bs ? qp_last_error(ctx) : lname);
    printf("load total: %.3f s wall, %.3f s cpu for %ld tensors = %.3f s wall, %.3f s cpu per 1e5 tensors\n",
           t_open + t_enum + t_find, c_open + c_enum + c_find, n, (t_open + t_enum + t_find) * per,
           (c_open + c_enum + c_find) * per);
    printf("RSS: %.1f MiB before open, %.1f MiB after (+%.1f MiB), peak %.1f MiB (%.1f MiB before); checkpoint %.1f MiB "
           "(the growth is %.0f bytes per tensor: parsed headers and indexes, not tensor data)\n",
           rss0 / 1024.0, rss1 / 1024.0, (rss1 - rss0) / 1024.0, peak1 / 1024.0, peak0 / 1024.0, (double)total / (1 << 20),
           (double)(rss1 - rss0) * 1024.0 / (double)n);
    qp_model_close(m);
    qp_context_destroy(ctx);
    if (own) {
        for (int s = 0; s < shards; s++) {
            snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, shards);
            unlink(path);
        }
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/config.json", dir);
        unlink(path);
        rmdir(dir);
    }
    for (long i = 0; i < n; i++) free(names[i]);
    free(names); free(t); free(shard_of); free(zero); free(ones);
    return 0;
}
