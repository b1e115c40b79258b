/* One loaded config resolved from many threads at once (qport.h contract):
 * every thread gets the same answers and its own last error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;
static qp_config *cfg;
static int bad[8];

static void *worker(void *arg) {
    int id = (int)(size_t)arg;
    char name[128];
    for (int i = 0; i < 20000; i++) {
        qp_scheme s;
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.down_proj", i % 61, (i * 7 + id) % 256);
        qp_status st = qp_config_resolve(cfg, name, QP_LAYER_LINEAR, NULL, &s);
        bool want_unq = i % 61 == 60;
        if (st != QP_OK || strcmp(s.method, want_unq ? "UnquantizedLinearMethod" : "QuarkLinearMethod")) bad[id]++;
        /* an error in this thread is reported to this thread only */
        snprintf(name, sizeof name, "t%d.layers.3.self_attn.qkv_proj", id);
        st = qp_config_resolve(cfg, name, QP_LAYER_LINEAR, NULL, &s);
        qp_error_info e;
        qp_last_error_info(ctx, &e);
        if (st != QP_ERR_VALUE || strcmp(e.layer, name)) bad[id]++;
    }
    return NULL;
}

int main(void) {
    if (qp_context_create(&ctx) != QP_OK) return 1;
    cfg = tu_load(ctx,
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[]},"
        "\"global_quant_config\":{\"weight\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"symmetric\":true},"
        "\"input_tensors\":{\"dtype\":\"int8\",\"qscheme\":\"per_channel\",\"is_dynamic\":true,\"symmetric\":true}},"
        "\"exclude\":[\"re:model\\\\.layers\\\\.60\\\\.\",\"re:t\\\\d\\\\.layers\\\\.3\\\\.self_attn\\\\.q_proj\"]}");
    CHECK(cfg != NULL, "%s", qp_last_error(ctx));
    pthread_t th[8];
    for (int i = 0; i < 8; i++) pthread_create(&th[i], NULL, worker, (void *)(size_t)i);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) CHECK(bad[i] == 0, "thread %d: %d wrong answers", i, bad[i]);
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return tu_finish("test_threads");
}
