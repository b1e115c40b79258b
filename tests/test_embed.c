/* The embedding API on every device of this build (cpu, vulkan, opencl;
 * cuda where a device or the emulator is present): routing on the device
 * (qp_moe_enqueue_logits) equals the host routing's block bit for bit in
 * plain softmax, renormalized and grouped sigmoid-with-bias modes; enqueued
 * layers equal the blocking ones; zero allocations per enqueue after the
 * first at a given M; events; the errors of bad imports, buffers and
 * qp_enqueue_sync fields. The examples (examples/embed_*.c) cover adopting
 * an application's Vulkan / OpenCL objects. */
#include "../examples/embed_common.h"

static int failures;
#define EXPECT(c, ...) do { if (!(c)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static const char *name_of(qp_device *d) {
    static char buf[4][32];
    static int i;
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(d, &di);
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s:%d", di.backend, di.index);
    return buf[i];
}

/* One routing mode: the block on `dev` fed router logits on the device,
 * against the cpu block routed on the host (qp_moe_forward). */
static void check_routing(emb_model *m, qp_context *ctx, qp_device *dev, const char *mode, const qp_moe_options *o) {
    qp_device *cpu;
    qp_moe *dm = NULL, *rm = NULL;
    if (qp_device_find(ctx, "cpu", &cpu) || qp_moe_create(dev, &m->moe, EMB_E, EMB_H, EMB_I, m->moe_t, 4, o, &dm) ||
        qp_moe_create(cpu, &m->moe, EMB_E, EMB_H, EMB_I, m->moe_t, 4, o, &rm)) {
        EXPECT(0, "%s %s: create: %s", name_of(dev), mode, qp_last_error(ctx));
        goto out;
    }
    float logits[EMB_M * EMB_E];
    for (int i = 0; i < EMB_M * EMB_E; i++) logits[i] = emb_rand() * 3.0f;
    logits[3] = logits[5]; /* a tie: the lower index wins everywhere */
    static uint16_t want[EMB_M * EMB_H], got[EMB_M * EMB_H];
    EXPECT(!qp_moe_forward(rm, m->x, EMB_M, logits, want), "reference: %s", qp_last_error(ctx));
    qp_buffer *x = NULL, *l = NULL, *y = NULL;
    qp_status st = qp_buffer_create(dev, sizeof m->x, &x);
    if (!st) st = qp_buffer_create(dev, sizeof logits, &l);
    if (!st) st = qp_buffer_create(dev, sizeof want, &y);
    if (!st) st = qp_buffer_upload(x, 0, m->x, sizeof m->x);
    if (!st) st = qp_buffer_upload(l, 0, logits, sizeof logits);
    if (!st) st = qp_moe_enqueue_logits(dm, x, EMB_M, l, y, NULL);
    if (st == QP_ERR_UNSUPPORTED) {
        printf("%s %s: routing on the device refused: %s\n", name_of(dev), mode, qp_last_error(ctx));
    } else {
        if (!st) st = qp_device_synchronize(dev);
        if (!st) st = qp_buffer_download(y, 0, got, sizeof got);
        EXPECT(!st, "%s %s: %s", name_of(dev), mode, qp_last_error(ctx));
        int diff = 0;
        for (int i = 0; i < EMB_M * EMB_H && !st; i++) diff += got[i] != want[i];
        EXPECT(!st && !diff, "%s %s: %d of %d outputs differ from the host-routed reference", name_of(dev), mode, diff,
               EMB_M * EMB_H);
        if (!st && !diff) printf("%s %s: routed on the device, %d outputs equal the reference\n", name_of(dev), mode,
                                 EMB_M * EMB_H);
        /* a logits buffer too small is refused at enqueue */
        qp_buffer *sl = NULL;
        if (!qp_buffer_create(dev, 16, &sl)) {
            st = qp_moe_enqueue_logits(dm, x, EMB_M, sl, y, NULL);
            EXPECT(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "router_logits"),
                   "%s: short logits: %d %s", name_of(dev), st, qp_last_error(ctx));
            qp_buffer_destroy(sl);
        }
    }
    qp_buffer_destroy(x);
    qp_buffer_destroy(l);
    qp_buffer_destroy(y);
out:
    qp_moe_destroy(dm);
    qp_moe_destroy(rm);
}

static void check_device(emb_model *m, qp_context *ctx, qp_device *dev, const uint16_t *ref) {
    const char *dn = name_of(dev);
    emb_layers L;
    if (emb_layers_create(m, dev, &L)) { EXPECT(0, "%s: layers", dn); return; }
    size_t xb = sizeof m->x, ib = sizeof m->ids;
    qp_buffer *B[5] = {0};
    size_t sz[5] = {xb, xb, xb, ib, ib};
    for (int i = 0; i < 5; i++) EXPECT(!qp_buffer_create(dev, sz[i], &B[i]), "%s: buffer: %s", dn, qp_last_error(ctx));
    EXPECT(!qp_buffer_upload(B[3], 0, m->ids, ib) && !qp_buffer_upload(B[4], 0, m->rw, ib), "%s: upload", dn);
    static uint16_t got[EMB_M * EMB_H];
    qp_device_stats s0 = {.struct_size = sizeof s0}, s1 = {.struct_size = sizeof s1};
    for (int rep = 0; rep < 2; rep++) {
        EXPECT(!qp_buffer_upload(B[0], 0, m->x, xb), "%s: upload x", dn);
        qp_device_get_stats(dev, &s0);
        EXPECT(!emb_step_enqueue(m, &L, B[0], B[1], B[3], B[4], B[2], NULL), "%s: enqueue", dn);
        qp_event *ev = NULL;
        EXPECT(!qp_event_record(dev, &ev), "%s: event: %s", dn, qp_last_error(ctx));
        EXPECT(!qp_event_wait(ev), "%s: event wait: %s", dn, qp_last_error(ctx));
        int done = 0;
        EXPECT(!qp_event_query(ev, &done) && done, "%s: a waited event is done", dn);
        qp_event_destroy(ev);
        qp_device_get_stats(dev, &s1);
        EXPECT(!qp_buffer_download(B[2], 0, got, xb), "%s: download", dn);
        EXPECT(!emb_compare(dn, got, ref), "%s: the enqueued step differs from the reference", dn);
        if (rep == 1) {
            EXPECT(s1.allocations == s0.allocations, "%s: %llu allocations in an enqueued step after the first", dn,
                   (unsigned long long)(s1.allocations - s0.allocations));
            EXPECT(s1.host_waits - s0.host_waits <= 1, "%s: %llu host waits for one step", dn,
                   (unsigned long long)(s1.host_waits - s0.host_waits));
        }
    }
    /* errors at enqueue: a buffer too small, one of another device, a sync
     * field of another API, a bad struct_size */
    qp_status st = qp_linear_enqueue(L.lin[0], B[3], EMB_M, B[1], NULL);
    EXPECT(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "too small"), "%s: small x: %s", dn,
           qp_last_error(ctx));
    qp_device *cpu;
    qp_buffer *hb = NULL;
    qp_device_find(ctx, "cpu", &cpu);
    if (cpu != dev && !qp_buffer_create(cpu, xb, &hb)) {
        st = qp_linear_enqueue(L.lin[0], hb, EMB_M, B[1], NULL);
        EXPECT(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "another device"), "%s: foreign x: %s", dn,
               qp_last_error(ctx));
        qp_buffer_destroy(hb);
    }
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(dev, &di);
    qp_enqueue_sync sy;
    qp_enqueue_sync_init(&sy);
    if (!strcmp(di.backend, "opencl")) sy.vk_wait_semaphore = (void *)1; else sy.cl_n_wait = 1, sy.cl_wait_list = (const void *const *)&sy;
    st = qp_linear_enqueue(L.lin[0], B[0], EMB_M, B[1], &sy);
    EXPECT(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "fields set for a"), "%s: foreign sync: %d %s",
           dn, st, qp_last_error(ctx));
    sy.struct_size = 3;
    st = qp_linear_enqueue(L.lin[0], B[0], EMB_M, B[1], &sy);
    EXPECT(st == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "qp_enqueue_sync_init"), "%s: struct_size: %s",
           dn, qp_last_error(ctx));
    /* a larger M than reserved still works (grows once) */
    qp_buffer *bx = NULL, *by = NULL;
    if (!qp_buffer_create(dev, (size_t)64 * EMB_H * 2, &bx) && !qp_buffer_create(dev, (size_t)64 * EMB_H * 2, &by)) {
        EXPECT(!qp_linear_enqueue(L.lin[0], bx, 64, by, NULL) && !qp_device_synchronize(dev), "%s: M = 64: %s", dn,
               qp_last_error(ctx));
    }
    qp_buffer_destroy(bx);
    qp_buffer_destroy(by);
    qp_device_native nat = {.struct_size = sizeof nat};
    EXPECT(!qp_device_get_native(dev, &nat) && nat.api != QP_NATIVE_NONE && !nat.imported, "%s: native handles", dn);
    qp_buffer_native bn = {.struct_size = sizeof bn};
    EXPECT(!qp_buffer_get_native(B[0], &bn) && bn.api == nat.api && bn.size == xb, "%s: native buffer", dn);
    for (int i = 0; i < 5; i++) qp_buffer_destroy(B[i]);
    emb_layers_destroy(&L);

    qp_moe_options o;
    qp_moe_options_init(&o);
    o.top_k = EMB_TOPK;
    o.layer = "model.layers.0.mlp.experts";
    check_routing(m, ctx, dev, "softmax", &o);
    o.renormalize = 1;
    check_routing(m, ctx, dev, "softmax renormalized", &o);
    float bias[EMB_E];
    for (int e = 0; e < EMB_E; e++) bias[e] = emb_rand() * 0.25f;
    o.num_expert_group = 4;
    o.topk_group = 2;
    o.scoring = QP_MOE_SIGMOID;
    o.e_score_correction_bias = bias;
    o.routed_scaling_factor = 2.5f;
    check_routing(m, ctx, dev, "grouped sigmoid + bias", &o);
}

int main(void) {
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 1;
    emb_model m;
    static uint16_t ref[EMB_M * EMB_H];
    if (emb_model_build(&m, ctx) || emb_reference(&m, ctx, ref)) return 1;
    size_t n = 0;
    qp_device_count(ctx, &n);
    for (size_t i = 0; i < n; i++) {
        qp_device *d;
        if (!qp_device_get(ctx, i, &d)) check_device(&m, ctx, d, ref);
    }
    /* bad imports: every message names what is wrong */
    qp_device_import_desc id;
    qp_device_import_desc_init(&id);
    qp_device *dev;
    id.api = (qp_native_api)42;
    EXPECT(qp_device_import(ctx, &id, &dev) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "api"),
           "bad api: %s", qp_last_error(ctx));
    id.api = QP_NATIVE_VULKAN;
    qp_status st = qp_device_import(ctx, &id, &dev);
    EXPECT(st != QP_OK, "a Vulkan import without handles must fail");
    if (st == QP_ERR_INVALID_ARGUMENT) EXPECT(strstr(qp_last_error(ctx), "vk_device"), "names the handles: %s", qp_last_error(ctx));
    id.api = QP_NATIVE_OPENCL;
    st = qp_device_import(ctx, &id, &dev);
    EXPECT(st != QP_OK, "an OpenCL import without handles must fail");
    if (st == QP_ERR_INVALID_ARGUMENT) EXPECT(strstr(qp_last_error(ctx), "cl_queue"), "names the queue: %s", qp_last_error(ctx));
    id.struct_size = 8;
    EXPECT(qp_device_import(ctx, &id, &dev) == QP_ERR_INVALID_ARGUMENT &&
           strstr(qp_last_error(ctx), "qp_device_import_desc_init"), "struct_size: %s", qp_last_error(ctx));
    qp_device *cpu;
    qp_device_find(ctx, "cpu", &cpu);
    qp_buffer_import_desc bd;
    qp_buffer_import_desc_init(&bd);
    qp_buffer *b;
    bd.size = 64;
    EXPECT(qp_buffer_import(cpu, &bd, &b) == QP_ERR_INVALID_ARGUMENT && strstr(qp_last_error(ctx), "exactly one"),
           "no object: %s", qp_last_error(ctx));
    static uint8_t host[256];
    bd.host_ptr = host;
    bd.offset = 64;
    bd.size = 128;
    EXPECT(!qp_buffer_import(cpu, &bd, &b), "host import: %s", qp_last_error(ctx));
    if (!st || b) {
        uint8_t v[4] = {1, 2, 3, 4};
        EXPECT(!qp_buffer_upload(b, 0, v, 4) && host[64] == 1 && host[67] == 4, "the import writes the host memory at "
               "its offset");
        qp_buffer_native bn = {.struct_size = sizeof bn};
        EXPECT(!qp_buffer_get_native(b, &bn) && bn.ptr == host + 64 && bn.imported, "native host buffer");
        qp_buffer_destroy(b); /* the wrapper only: host stays */
    }
    emb_model_free(&m);
    qp_context_destroy(ctx);
    if (failures) fprintf(stderr, "embed: %d failure(s)\n", failures);
    else printf("embed: all checks passed\n");
    return failures != 0;
}
