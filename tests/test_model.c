/* Checkpoints end to end: quantize -> write -> load -> bind -> forward
 * equals quantize -> forward; fused layers assembled from shards equal
 * the shards run one by one (per-channel schemes: exactly); tensor-
 * parallel column slices equal the matching columns; hostile index files
 * and missing tensors are errors. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/cases.h"
#include "testutil.h"

static qp_context *ctx;
static qp_device *cpu;
static char dir[64];

static const char *const QQQ_CFG = "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":128}";
static const char *const INT8_CFG =
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
    "\"global_quant_config\":{\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false},"
    "\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true},"
    "\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}";

typedef struct shard { const char *name; int N; qp_qweights *q; } shard;

/* Writes config.json and model.safetensors with q/k/v shards of one layer. */
static void write_model(const char *qcfg, shard *sh, int ns, int K) {
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model_type\":\"llama\",\"quantization_config\":%s}", qcfg);
    fclose(f);
    qp_config *cfg;
    qp_config_load_buffer(ctx, "cfg", qcfg, strlen(qcfg), &cfg);
    qp_tensor t[32];
    char names[32][128];
    size_t n = 0;
    for (int s = 0; s < ns; s++) {
        qp_scheme sc;
        CHECK(!qp_config_resolve(cfg, sh[s].name, QP_LAYER_LINEAR, NULL, &sc), "%s", qp_last_error(ctx));
        float *w = malloc(sizeof(float) * (size_t)sh[s].N * K);
        uint64_t r = 77 + (uint64_t)s;
        for (int i = 0; i < sh[s].N * K; i++) w[i] = (float)((double)(case_rng(&r) >> 11) * 0x1p-53 - 0.5) * 0.1f;
        CHECK(!qp_quantize_weights(ctx, &sc, w, sh[s].N, K, NULL, &sh[s].q), "%s", qp_last_error(ctx));
        free(w);
        for (size_t j = 0; j < qp_qweights_count(sh[s].q); j++) {
            qp_qweights_get(sh[s].q, j, &t[n]);
            snprintf(names[n], sizeof names[n], "%s.%s", sh[s].name, t[n].name);
            t[n].name = names[n];
            n++;
        }
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, path, t, n, NULL, 0), "%s", qp_last_error(ctx));
    qp_config_destroy(cfg);
}

/* Forward of one shard straight from its quantized tensors. */
static void forward_shard(const char *qcfg, shard *s, int K, const uint16_t *x, int M, uint16_t *y) {
    qp_config *cfg;
    qp_config_load_buffer(ctx, "cfg", qcfg, strlen(qcfg), &cfg);
    qp_scheme sc;
    qp_config_resolve(cfg, s->name, QP_LAYER_LINEAR, NULL, &sc);
    qp_tensor t[8];
    size_t n = qp_qweights_count(s->q);
    for (size_t j = 0; j < n; j++) qp_qweights_get(s->q, j, &t[j]);
    qp_linear *l;
    CHECK(!qp_linear_create(cpu, &sc, s->N, K, t, n, NULL, &l), "%s: %s", s->name, qp_last_error(ctx));
    CHECK(!qp_linear_forward(l, x, M, y), "%s", qp_last_error(ctx));
    qp_linear_destroy(l);
    qp_config_destroy(cfg);
}

static void fused_and_tp(const char *qcfg, int K, int nq, int nkv) {
    shard sh[3] = {{"model.layers.0.self_attn.q_proj", nq, NULL}, {"model.layers.0.self_attn.k_proj", nkv, NULL},
                   {"model.layers.0.self_attn.v_proj", nkv, NULL}};
    write_model(qcfg, sh, 3, K);
    enum { M = 3 };
    int N = nq + 2 * nkv;
    uint16_t *x = malloc(2u * M * K), *yf = malloc(2u * M * N), *ys = malloc(2u * M * N);
    case_activations(DIST_OUTLIERS, QP_DTYPE_F16, M, K, 5, x);
    /* the shards one by one, columns side by side */
    for (int s = 0, c0 = 0; s < 3; c0 += sh[s].N, s++) {
        uint16_t *y = malloc(2u * M * sh[s].N);
        forward_shard(qcfg, &sh[s], K, x, M, y);
        for (int m = 0; m < M; m++) memcpy(ys + (size_t)m * N + c0, y + (size_t)m * sh[s].N, 2u * sh[s].N);
        free(y);
    }
    qp_model *mo;
    CHECK(!qp_model_open(ctx, dir, &mo), "%s", qp_last_error(ctx));
    qp_layer_binding b;
    CHECK(!qp_model_bind_layer(mo, "model.layers.0.self_attn.qkv_proj", NULL, &b), "%s", qp_last_error(ctx));
    CHECK(b.N == N && b.K == K && b.n_shards == 3 && b.shard_rows[1] == nkv, "fused shape %d x %d, %zu shards", b.N, b.K, b.n_shards);
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.shard_rows = b.shard_rows;
    o.n_shards = b.n_shards;
    qp_linear *l;
    CHECK(!qp_linear_create(cpu, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, &o, &l), "%s", qp_last_error(ctx));
    CHECK(!qp_linear_forward(l, x, M, yf), "%s", qp_last_error(ctx));
    CHECK(!memcmp(yf, ys, 2u * M * N), "%s: fused qkv differs from the shards", qcfg);
    qp_linear_destroy(l);
    qp_layer_binding_free(&b);
    /* tensor parallel, column-parallel: rank r holds its slice of each shard */
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    bo.tp_size = 2;
    for (int r = 0; r < 2; r++) {
        bo.tp_rank = r;
        CHECK(!qp_model_bind_layer(mo, "model.layers.0.self_attn.qkv_proj", &bo, &b), "%s", qp_last_error(ctx));
        CHECK(b.N == N / 2, "tp N %d", b.N);
        o.shard_rows = b.shard_rows;
        CHECK(!qp_linear_create(cpu, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, &o, &l), "tp: %s", qp_last_error(ctx));
        uint16_t *yp = malloc(2u * M * b.N);
        CHECK(!qp_linear_forward(l, x, M, yp), "%s", qp_last_error(ctx));
        int bad = 0;
        for (int m = 0; m < M; m++)
            for (int s = 0, c0 = 0, p0 = 0; s < 3; c0 += sh[s].N, p0 += sh[s].N / 2, s++)
                bad += memcmp(yp + (size_t)m * b.N + p0, yf + (size_t)m * N + c0 + r * sh[s].N / 2, sh[s].N) != 0;
        CHECK(!bad, "%s: tp rank %d columns differ", qcfg, r);
        free(yp);
        qp_linear_destroy(l);
        qp_layer_binding_free(&b);
    }
    /* a partition the scheme cannot hold: vLLM's message */
    bo.tp_size = 3;
    bo.tp_rank = 0;
    CHECK(qp_model_bind_layer(mo, "model.layers.0.self_attn.qkv_proj", &bo, &b) == QP_ERR_VALUE &&
          strstr(qp_last_error(ctx), "is not divisible by 3"), "%s", qp_last_error(ctx));
    CHECK(qp_model_bind_layer(mo, "model.layers.0.mlp.down_proj", NULL, &b) == QP_ERR_NOT_FOUND, "missing layer");
    CHECK(qp_model_layer_count(mo) == 3 && !strcmp(qp_model_layer_name(mo, 0), "model.layers.0.self_attn.q_proj"), "layers");
    qp_model_close(mo);
    for (int s = 0; s < 3; s++) qp_qweights_destroy(sh[s].q);
    free(x); free(yf); free(ys);
}

/* The same layer split over two shard files with an index: binding reads
 * across files and gives the tensors of the single-file checkpoint. */
static void sharded(void) {
    shard sh[1] = {{"model.layers.0.mlp.down_proj", 64, NULL}};
    write_model(INT8_CFG, sh, 1, 128);
    char a[256], b2[256], idx[256];
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    qp_model *m1;
    CHECK(!qp_model_open(ctx, dir, &m1), "%s", qp_last_error(ctx));
    qp_layer_binding one;
    CHECK(!qp_model_bind_layer(m1, "model.layers.0.mlp.down_proj", NULL, &one), "%s", qp_last_error(ctx));
    /* rewrite as two shards: weight in file 1, scales in file 2 */
    qp_tensor t1[1], t2[4];
    size_t n2 = 0;
    char names[8][128];
    for (size_t i = 0; i < one.n_tensors; i++) {
        qp_tensor *dst = !strcmp(one.tensors[i].name, "weight") ? &t1[0] : &t2[n2++];
        *dst = one.tensors[i];
        snprintf(names[i], sizeof names[i], "model.layers.0.mlp.down_proj.%s", one.tensors[i].name);
        dst->name = names[i];
    }
    snprintf(a, sizeof a, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(b2, sizeof b2, "%s/model-00002-of-00002.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, a, t1, 1, NULL, 0) && !qp_safetensors_write(ctx, b2, t2, n2, NULL, 0), "%s", qp_last_error(ctx));
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(idx, "w");
    fprintf(f, "{\"metadata\":{},\"weight_map\":{\"%s\":\"model-00001-of-00002.safetensors\"", t1[0].name);
    for (size_t i = 0; i < n2; i++) fprintf(f, ",\"%s\":\"model-00002-of-00002.safetensors\"", t2[i].name);
    fputs("}}", f);
    fclose(f);
    qp_model *m2;
    CHECK(!qp_model_open(ctx, dir, &m2), "%s", qp_last_error(ctx));
    qp_layer_binding two;
    CHECK(m2 && !qp_model_bind_layer(m2, "model.layers.0.mlp.down_proj", NULL, &two), "%s", qp_last_error(ctx));
    CHECK(two.n_tensors == one.n_tensors && two.N == 64 && two.K == 128, "sharded binding: %zu tensors", two.n_tensors);
    for (size_t i = 0; i < two.n_tensors; i++) {
        qp_tensor x;
        int found = 0;
        for (size_t j = 0; j < one.n_tensors; j++)
            if (!strcmp(one.tensors[j].name, two.tensors[i].name)) { x = one.tensors[j]; found = 1; }
        CHECK(found && qp_tensor_bytes(&x) == qp_tensor_bytes(&two.tensors[i]) &&
              !memcmp(x.data, two.tensors[i].data, qp_tensor_bytes(&x)), "tensor %s differs", two.tensors[i].name);
    }
    qp_layer_binding_free(&one);
    qp_layer_binding_free(&two);
    qp_model_close(m1);
    qp_model_close(m2);
    unlink(a); unlink(b2); unlink(idx);
    snprintf(a, sizeof a, "%s/model.safetensors", dir);
    unlink(a);
    qp_qweights_destroy(sh[0].q);
}

/* Row-parallel (o_proj, down_proj): each rank holds a K slice of the
 * weight, replicated per-channel scales, and the bias on rank 0 only. */
static void row_parallel(void) {
    shard sh[1] = {{"model.layers.0.mlp.down_proj", 32, NULL}};
    write_model(INT8_CFG, sh, 1, 256);
    /* add a bias to the checkpoint */
    qp_model *m;
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    qp_layer_binding full;
    CHECK(!qp_model_bind_layer(m, "model.layers.0.mlp.down_proj", NULL, &full), "%s", qp_last_error(ctx));
    qp_tensor t[10];
    char names[10][128];
    size_t n = 0;
    uint16_t bias[32];
    for (int i = 0; i < 32; i++) bias[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, 0.01f * (float)i);
    for (size_t i = 0; i < full.n_tensors; i++, n++) {
        t[n] = full.tensors[i];
        snprintf(names[n], sizeof names[n], "model.layers.0.mlp.down_proj.%s", full.tensors[i].name);
        t[n].name = names[n];
    }
    t[n++] = (qp_tensor){"model.layers.0.mlp.down_proj.bias", QP_DTYPE_F16, 1, {32}, bias};
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    qp_model_close(m);
    CHECK(!qp_safetensors_write(ctx, path, t, n, NULL, 0), "%s", qp_last_error(ctx));
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    qp_bind_options bo;
    qp_bind_options_init(&bo);
    bo.tp_size = 2;
    const qp_tensor *fw = NULL;
    for (size_t i = 0; i < full.n_tensors; i++)
        if (!strcmp(full.tensors[i].name, "weight")) fw = &full.tensors[i];
    for (int r = 0; r < 2; r++) {
        bo.tp_rank = r;
        qp_layer_binding b;
        CHECK(!qp_model_bind_layer(m, "model.layers.0.mlp.down_proj", &bo, &b), "%s", qp_last_error(ctx));
        CHECK(b.N == 32 && b.K == 128, "row-parallel shape %d x %d", b.N, b.K);
        int has_bias = 0, ok_w = 0, ok_s = 0;
        for (size_t i = 0; i < b.n_tensors; i++) {
            const qp_tensor *x = &b.tensors[i];
            if (!strcmp(x->name, "bias")) has_bias = 1;
            if (!strcmp(x->name, "weight_scale")) ok_s = x->shape[0] == 32; /* replicated */
            if (!strcmp(x->name, "weight") && fw && x->shape[0] == 32 && x->shape[1] == 128) {
                ok_w = 1;
                for (int row = 0; row < 32; row++)
                    ok_w &= !memcmp((const int8_t *)x->data + row * 128, (const int8_t *)fw->data + row * 256 + r * 128, 128);
            }
        }
        CHECK(ok_w && ok_s, "rank %d: weight slice / scales", r);
        CHECK(has_bias == (r == 0), "rank %d: bias %s", r, has_bias ? "present" : "absent");
        qp_layer_binding_free(&b);
    }
    qp_layer_binding_free(&full);
    qp_model_close(m);
    qp_qweights_destroy(sh[0].q);
    unlink(path);
}

static void hostile_index(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    const char *bad[] = {"{\"weight_map\":{\"a\":\"../../etc/passwd\"}}", "{\"weight_map\":{\"a\":\"/etc/passwd\"}}",
                         "{\"weight_map\":{\"a\":5}}", "{\"weight_map\":[]}", "{\"weight_map\":{\"a\":\"missing.safetensors\"}}", "{"};
    const char *msg[] = {"not a plain file name", "not a plain file name", "not a file name", "not an object", "cannot open", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        qp_model *m = NULL;
        qp_status st = qp_model_open(ctx, dir, &m);
        CHECK(st != QP_OK && !m && strstr(qp_last_error(ctx), msg[i]), "index %s: %s", bad[i], qp_last_error(ctx));
    }
    unlink(path);
}


/* Writes config.json (the given quantization_config) and model.safetensors
 * with the given scalar fp32 tensors. */
static void write_scalars(const char *qcfg, const char *const *names, const float *vals, int n, int elems) {
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model_type\":\"llama\",\"quantization_config\":%s}", qcfg);
    fclose(f);
    qp_tensor t[8];
    float data[8][2];
    for (int i = 0; i < n; i++) {
        data[i][0] = data[i][1] = vals[i];
        t[i] = (qp_tensor){names[i], QP_DTYPE_F32, 1, {elems, 0, 0, 0}, data[i]};
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, path, t, (size_t)n, NULL, 0), "%s", qp_last_error(ctx));
}

/* fp8 KV-cache scales as vLLM's BaseKVCacheMethod settles them. */
static void kv_scales(void) {
    const char *KV = "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\",\"*v_proj\"],\"pack_method\":\"reorder\"},"
                     "\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false},"
                     "\"input_tensors\":null,\"output_tensors\":null,\"bias\":null},"
                     "\"layer_quant_config\":{\"*k_proj\":{\"weight\":null,\"input_tensors\":null,\"output_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false},\"bias\":null},"
                     "\"*v_proj\":{\"weight\":null,\"input_tensors\":null,\"output_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"symmetric\":true,\"is_dynamic\":false},\"bias\":null}},"
                     "\"layer_type_quant_config\":{},\"exclude\":[]}";
    const char *P = "model.layers.0.self_attn";
    const char *quark[] = {"model.layers.0.self_attn.k_proj.output_scale", "model.layers.0.self_attn.v_proj.output_scale"};
    const char *plain[] = {"model.layers.0.self_attn.k_scale"};
    const char *vonly[] = {"model.layers.0.self_attn.attn.v_scale"};
    float kv[2] = {0.25f, 0.0625f}, k, v;
    qp_model *m = NULL;

    write_scalars(KV, quark, kv, 2, 1);
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && !qp_model_kv_scales(m, P, &k, &v) && k == 0.25f && v == 0.0625f, "quark output scales: %s", qp_last_error(ctx));
    qp_model_close(m);

    write_scalars(KV, plain, kv, 1, 1); /* one scale: duplicated */
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && !qp_model_kv_scales(m, P, &k, &v) && k == 0.25f && v == 0.25f, "k only: %s", qp_last_error(ctx));
    CHECK(!qp_model_kv_scales(m, "model.layers.1.self_attn", &k, &v) && k == 1.0f && v == 1.0f, "none: defaults 1.0");
    qp_model_close(m);

    write_scalars(KV, vonly, kv, 1, 1);
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && qp_model_kv_scales(m, P, &k, &v) == QP_ERR_VALUE && strstr(qp_last_error(ctx), "no k_scale"), "%s", qp_last_error(ctx));
    qp_model_close(m);

    write_scalars(KV, quark, kv, 2, 2); /* two elements */
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && qp_model_kv_scales(m, P, &k, &v) == QP_ERR_VALUE &&
              strstr(qp_last_error(ctx), "Only support per-tensor scaling factor for fp8 KV cache"), "%s", qp_last_error(ctx));
    qp_model_close(m);

    float neg[2] = {-1.0f, 0.5f};
    write_scalars(KV, quark, neg, 2, 1);
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && qp_model_kv_scales(m, P, &k, &v) == QP_ERR_VALUE, "a negative scale");
    qp_model_close(m);

    write_scalars(INT8_CFG, quark, kv, 2, 1); /* the config does not quantize the cache */
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && qp_model_kv_scales(m, P, &k, &v) == QP_ERR_NOT_FOUND, "no kv quantization");
    qp_model_close(m);
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    remove(path);
}

int main(void) {
    qp_context_create(&ctx);
    qp_device_find(ctx, "cpu", &cpu);
    snprintf(dir, sizeof dir, "/tmp/qport-model-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    fused_and_tp(INT8_CFG, 96, 64, 32);
    fused_and_tp(QQQ_CFG, 256, 128, 128);
    sharded();
    row_parallel();
    hostile_index();
    kv_scales();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    qp_context_destroy(ctx);
    return tu_finish("model");
}
