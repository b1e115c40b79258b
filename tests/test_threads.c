/* One loaded config resolved from many threads at once (qport.h contract):
 * every thread gets the same answers and its own last error. And one MoE
 * layer run from many threads on every device: each call's output is the
 * single-threaded one, bit for bit. */
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

enum { TE = 8, TH = 64, TI = 32, TM = 5, TK = 2 };
static qp_moe *tmoe;
static uint16_t tx[TM * TH], ty0[TM * TH];
static int32_t tids[TM * TK];
static float tw[TM * TK];
static int moe_bad[4];

static void *moe_worker(void *arg) {
    int id = (int)(size_t)arg;
    for (int r = 0; r < 20; r++) {
        uint16_t y[TM * TH];
        if (qp_moe_forward_topk(tmoe, tx, TM, tids, tw, y) || memcmp(y, ty0, sizeof y)) moe_bad[id]++;
    }
    return NULL;
}

static void moe_threads(void) {
    static uint16_t w13[TE * 2 * TI * TH], w2[TE * TH * TI];
    uint64_t s = 12345;
    for (size_t i = 0; i < sizeof w13 / 2; i++) { s = s * 6364136223846793005ull + 1; tu_put(QP_DTYPE_F16, w13, i, (float)((int)(s >> 40) % 200 - 100) / 1000.0f); }
    for (size_t i = 0; i < sizeof w2 / 2; i++) { s = s * 6364136223846793005ull + 1; tu_put(QP_DTYPE_F16, w2, i, (float)((int)(s >> 40) % 200 - 100) / 1000.0f); }
    for (int i = 0; i < TM * TH; i++) tu_put(QP_DTYPE_F16, tx, (size_t)i, (float)(i % 13 - 6) / 4.0f);
    for (int i = 0; i < TM * TK; i++) { tids[i] = (i * 3 + i / TK) % TE; tw[i] = 0.5f; }
    qp_tensor t[2] = {{"w13_weight", QP_DTYPE_F16, 3, {TE, 2 * TI, TH}, w13}, {"w2_weight", QP_DTYPE_F16, 3, {TE, TH, TI}, w2}};
    qp_scheme sc;
    memset(&sc, 0, sizeof sc);
    sc.kind = QP_SCHEME_UNQUANTIZED;
    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = TK;
    size_t n = 0;
    qp_device_count(ctx, &n);
    for (size_t d = 0; d < n; d++) {
        qp_device *dev;
        if (qp_device_get(ctx, d, &dev) || qp_moe_create(dev, &sc, TE, TH, TI, t, 2, &o, &tmoe)) continue;
        CHECK(!qp_moe_forward_topk(tmoe, tx, TM, tids, tw, ty0), "%s", qp_last_error(ctx));
        pthread_t th[4];
        for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, moe_worker, (void *)(size_t)i);
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 4; i++) CHECK(moe_bad[i] == 0, "device %zu, thread %d: %d MoE outputs differ", d, i, moe_bad[i]);
        qp_moe_destroy(tmoe);
        qp_device_info di = {.struct_size = sizeof di};
        qp_device_get_info(dev, &di);
        printf("MoE from 4 threads on %s:%d: 80 forwards equal the single-threaded one\n", di.backend, di.index);
    }
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
    moe_threads();
    qp_context_destroy(ctx);
    return tu_finish("test_threads");
}
