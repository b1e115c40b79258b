/* Files that change or are not files: a shard truncated after
 * qp_model_open is an I/O error naming it when a layer is bound or a
 * tensor looked up (the bytes are read with pread, never touched through
 * the now-short mapping: no SIGBUS); FIFOs given as config, shard or
 * safetensors file are refused at once instead of blocking in open. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static const char *const CFG =
    "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[],\"pack_method\":\"reorder\"},"
    "\"global_quant_config\":{\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":false},"
    "\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true,\"is_dynamic\":true},"
    "\"output_tensors\":null,\"bias\":null},\"layer_quant_config\":{},\"layer_type_quant_config\":{},\"exclude\":[]}";

static void write_model(qp_context *ctx, const char *dir, int N, int K) {
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model_type\":\"llama\",\"quantization_config\":%s}", CFG);
    fclose(f);
    int8_t *w = malloc((size_t)N * K);
    uint16_t *s = malloc(2 * (size_t)N);
    for (int i = 0; i < N * K; i++) w[i] = (int8_t)(i * 37 % 255 - 127);
    for (int i = 0; i < N; i++) s[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, 0.01f);
    qp_tensor t[2] = {{"model.layers.0.mlp.down_proj.weight", QP_DTYPE_I8, 2, {N, K, 0, 0}, w},
                      {"model.layers.0.mlp.down_proj.weight_scale", QP_DTYPE_F16, 1, {N, 0, 0, 0}, s}};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(!qp_safetensors_write(ctx, path, t, 2, NULL, 0), "%s", qp_last_error(ctx));
    free(w);
    free(s);
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    char dir[64] = "/tmp/qp_corruptXXXXXX", path[256];
    CHECK(mkdtemp(dir), "mkdtemp");
    enum { N = 256, K = 4096 }; /* 1 MiB of weights: pages past the cut */
    write_model(ctx, dir, N, K);
    const char *layer = "model.layers.0.mlp.down_proj";
    qp_model *m = NULL;
    qp_layer_binding b;
    /* the undamaged model binds */
    CHECK(!qp_model_open(ctx, dir, &m), "%s", qp_last_error(ctx));
    CHECK(m && !qp_model_bind_layer(m, layer, NULL, &b) && b.N == N && b.K == K, "bind: %s", qp_last_error(ctx));
    qp_layer_binding_free(&b);
    /* truncated after open: every read of the shard is an I/O error naming it */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct stat sb;
    stat(path, &sb);
    CHECK(!truncate(path, sb.st_size / 3), "truncate");
    qp_status st = qp_model_bind_layer(m, layer, NULL, &b);
    CHECK(st == QP_ERR_IO && strstr(qp_last_error(ctx), "model.safetensors") &&
              strstr(qp_last_error(ctx), "changed after it was opened"),
          "bind of a truncated shard: %s: %s", qp_status_str(st), qp_last_error(ctx));
    qp_tensor t;
    st = qp_model_find_tensor(m, "model.layers.0.mlp.down_proj.weight_scale", &t);
    CHECK(st == QP_ERR_IO && strstr(qp_last_error(ctx), "changed after it was opened"), "find_tensor: %s: %s",
          qp_status_str(st), qp_last_error(ctx));
    /* grown back to its size but other bytes: what pread returns is what
     * binds (no stale mapping is trusted for the copy) */
    CHECK(!truncate(path, sb.st_size), "grow back");
    st = qp_model_bind_layer(m, layer, NULL, &b);
    CHECK(!st && b.N == N, "bind after regrowth: %s", qp_last_error(ctx));
    qp_layer_binding_free(&b);
    qp_model_close(m);
    /* a shard shorter than its header says, at open: the parse error */
    CHECK(!truncate(path, sb.st_size / 3), "truncate");
    CHECK(qp_model_open(ctx, dir, &m) == QP_ERR_PARSE && !m, "open of a short shard: %s", qp_last_error(ctx));
    /* a config.json of tiny values is refused before its tree is built
     * (about 100 bytes a value): one value per 8 bytes beyond 65,536 */
    write_model(ctx, dir, 16, 16);
    snprintf(path, sizeof path, "%s/config.json", dir);
    for (int dense = 1; dense >= 0; dense--) {
        FILE *f = fopen(path, "w");
        fprintf(f, "{\"model_type\":\"llama\",\"quantization_config\":%s,\"junk\":[", CFG);
        for (int i = 0; i < 400000; i++) fputs(dense ? "0," : "\"abcdefgh\",", f);
        fputs("0]}", f);
        fclose(f);
        st = qp_model_open(ctx, dir, &m);
        if (dense)
            CHECK(st == QP_ERR_PARSE && !m && strstr(qp_last_error(ctx), "config.json") &&
                      strstr(qp_last_error(ctx), "JSON values in"),
                  "a config of 400,000 zeros: %s", qp_last_error(ctx));
        else
            CHECK(!st && m, "a config of 400,000 short strings (12 bytes each): %s", qp_last_error(ctx));
        qp_model_close(m);
        m = NULL;
    }
    /* FIFOs: refused at once, naming the file */
    write_model(ctx, dir, 16, 16);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    CHECK(!mkfifo(path, 0600), "mkfifo");
    st = qp_model_open(ctx, dir, &m);
    CHECK(st == QP_ERR_IO && strstr(qp_last_error(ctx), "not a regular file (a FIFO)"), "FIFO shard: %s",
          qp_last_error(ctx));
    qp_safetensors *sf = NULL;
    st = qp_safetensors_open(ctx, path, &sf);
    CHECK(st == QP_ERR_IO && !sf && strstr(qp_last_error(ctx), "model.safetensors"), "FIFO safetensors: %s",
          qp_last_error(ctx));
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    CHECK(!mkfifo(path, 0600), "mkfifo");
    qp_config *cfg = NULL;
    st = qp_config_load_file(ctx, path, &cfg);
    CHECK(st == QP_ERR_IO && !cfg && strstr(qp_last_error(ctx), "config.json") &&
              strstr(qp_last_error(ctx), "not a regular file (a FIFO)"),
          "FIFO config: %s", qp_last_error(ctx));
    CHECK(qp_config_load_file(ctx, "/dev/zero", &cfg) == QP_ERR_IO && strstr(qp_last_error(ctx), "a device"), "/dev/zero: %s",
          qp_last_error(ctx));
    unlink(path);
    rmdir(dir);
    qp_context_destroy(ctx);
    return tu_finish("corrupt");
}
