/* qport devices: every device qport can use, what it offers, and for each
 * scheme whether it runs natively, emulated, or not (and why). */
#include <string.h>

#include "cases.h"
#include "tool.h"

static void log_stderr(void *user, qp_log_level level, const char *msg) {
    (void)user;
    static const char *const n[] = {"debug", "info", "warn", "error"};
    fprintf(stderr, "qport [%s] %s\n", level <= QP_LOG_ERROR ? n[level] : "?", msg);
}

void tool_install_log(qp_context *ctx) {
    qp_log_level lv;
    if (qp_log_level_from_env(ctx, QP_LOG_WARN, &lv)) {
        fprintf(stderr, "qport: %s (using warn)\n", qp_last_error(ctx));
        lv = QP_LOG_WARN;
    }
    qp_set_log(ctx, log_stderr, NULL, lv);
}

int tool_kind_exact(qp_scheme_kind kind) {
    qp_scheme_kind_info ki = {.struct_size = sizeof ki};
    return !qp_scheme_kind_describe(kind, &ki) && ki.exact;
}

static const char *tri(int v) { return v < 0 ? "unknown" : v ? "yes" : "no"; }

static void caps_json(FILE *f, const qp_device_caps *c) {
    fprintf(f, "{\"int8_storage\":%d,\"int8_arith\":%d,\"fp16_arith\":%d,\"bf16\":%d,\"int_dot\":%d,"
               "\"int_dot_accelerated\":%d,\"tensor_core_int8\":%d,\"tensor_core_fp8\":%d,\"subgroup_min\":%d,"
               "\"subgroup_max\":%d,\"shared_mem_bytes\":%lld,\"max_buffer_bytes\":%lld,\"max_alloc_bytes\":%lld}",
            c->int8_storage, c->int8_arith, c->fp16_arith, c->bf16, c->int_dot, c->int_dot_accelerated,
            c->tensor_core_int8, c->tensor_core_fp8, c->subgroup_min, c->subgroup_max, (long long)c->shared_mem_bytes,
            (long long)c->max_buffer_bytes, (long long)c->max_alloc_bytes);
}

/* Every scheme qport knows (64 at most), resolved once from its exporter
 * config for `layer` of `kind`; for a FusedMoE (QP_LAYER_MOE) only the
 * quantized ones. The count. */
static int resolve_schemes(qp_context *ctx, const char *layer, qp_layer_kind kind, qp_scheme sch[64],
                           const char *name[64]) {
    int n = 0;
    for (size_t s = 0; quant_scheme_at(s) && n < 64; s++) {
        const case_scheme *q = quant_scheme_at(s);
        qp_config *cfg = NULL;
        if (!qp_config_load_buffer(ctx, q->tool_name, q->config, strlen(q->config), &cfg) &&
            !qp_config_resolve(cfg, layer, kind, NULL, &sch[n]) &&
            (kind != QP_LAYER_MOE || sch[n].kind != QP_SCHEME_UNQUANTIZED))
            name[n++] = q->tool_name;
        qp_config_destroy(cfg);
    }
    return n;
}

/* One scheme of a device's linear or MoE list; `s` its index there (the
 * JSON comma before all but the first). */
static void support_row(int json, int s, const char *name, const qp_support_info *si) {
    if (json) {
        printf("%s{\"scheme\":\"%s\",\"support\":\"%s\",\"reason\":", s ? "," : "", name,
               qp_support_level_name(si->level));
        json_str(stdout, si->reason);
        putchar('}');
    } else {
        printf("    %-18s %-11s %s\n", name, qp_support_level_name(si->level), si->reason);
    }
}

int cmd_devices(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else { tool_usage(stderr, "devices"); return 2; }
    }
    qp_context *ctx;
    if (qp_context_create(&ctx)) return 2;
    tool_install_log(ctx);
    size_t n;
    if (qp_device_count(ctx, &n)) {
        fprintf(stderr, "qport devices: %s\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 2;
    }
    /* every scheme qport knows, and the MoE schemes among them */
    qp_scheme sch[64], msch[64];
    const char *sname[64], *mname[64];
    int ns = resolve_schemes(ctx, "model.layers.0.mlp.down_proj", QP_LAYER_LINEAR, sch, sname);
    int nms = resolve_schemes(ctx, "model.layers.0.mlp.experts", QP_LAYER_MOE, msch, mname);
    if (json) fputs("{\"backends\":[", stdout);
    else printf("backends:\n");
    qp_backend_status bs;
    for (size_t i = 0; !qp_backend_get_status(ctx, i, &bs); i++) {
        if (json) {
            printf("%s{\"name\":\"%s\",\"loaded\":%s,\"devices\":%d,\"path\":", i ? "," : "", bs.name,
                   bs.loaded ? "true" : "false", bs.n_devices);
            json_str(stdout, bs.path);
            fputs(",\"note\":", stdout);
            json_str(stdout, bs.note);
            putchar('}');
        } else {
            printf("  %-7s %-10s %d device(s)  %s%s%s\n", bs.name, bs.loaded ? "loaded" : "not loaded", bs.n_devices,
                   bs.path, *bs.path && *bs.note ? "  " : "", bs.note);
        }
    }
    if (json) fputs("],\"devices\":[", stdout);
    for (size_t i = 0; i < n; i++) {
        qp_device *d;
        qp_device_info di = {.struct_size = sizeof di};
        if (qp_device_get(ctx, i, &d) || qp_device_get_info(d, &di)) continue;
        char uuid[40] = "";
        for (int b = 0; di.has_uuid && b < 16; b++) sprintf(uuid + 2 * b, "%02x", di.uuid[b]);
        if (json) {
            printf("%s{\"device\":\"%s:%d\",\"name\":", i ? "," : "", di.backend, di.index);
            json_str(stdout, di.name);
            fputs(",\"vendor\":", stdout); json_str(stdout, di.vendor);
            fputs(",\"driver\":", stdout); json_str(stdout, di.driver);
            fputs(",\"api_version\":", stdout); json_str(stdout, di.api_version);
            printf(",\"kind\":\"%s\",\"memory_bytes\":%llu,\"uuid\":", qp_device_kind_name(di.kind),
                   (unsigned long long)di.memory_bytes);
            json_str(stdout, di.has_uuid ? uuid : NULL);
            printf(",\"cuda_cc\":%d,\"same_as\":", di.cuda_cc);
            json_str(stdout, di.same_as[0] ? di.same_as : NULL);
            fputs(",\"caps\":", stdout);
            caps_json(stdout, &di.caps);
            fputs(",\"schemes\":[", stdout);
        } else {
            printf("\n%s:%d  %s\n  vendor %s, driver %s, API %s, %s, %.1f GiB%s%s\n", di.backend, di.index, di.name,
                   di.vendor, di.driver, di.api_version, qp_device_kind_name(di.kind),
                   (double)di.memory_bytes / (1024.0 * 1024 * 1024), di.same_as[0] ? ", same GPU as " : "", di.same_as);
            if (di.cuda_cc >= 0) printf("  compute capability %d.%d\n", di.cuda_cc / 10, di.cuda_cc % 10);
            if (di.has_uuid) printf("  uuid %s\n", uuid);
            const qp_device_caps *c = &di.caps;
            printf("  int8 storage %s, int8 arith %s, fp16 arith %s, bf16 %s, int-dot %s (accelerated %s),\n"
                   "  tensor cores int8 %s fp8 %s, subgroup %d..%d, shared %lld B, max buffer %lld B\n",
                   tri(c->int8_storage), tri(c->int8_arith), tri(c->fp16_arith), tri(c->bf16), tri(c->int_dot),
                   tri(c->int_dot_accelerated), tri(c->tensor_core_int8), tri(c->tensor_core_fp8), c->subgroup_min,
                   c->subgroup_max, (long long)c->shared_mem_bytes, (long long)c->max_buffer_bytes);
            printf("  schemes:\n");
        }
        for (int s = 0; s < ns; s++) {
            qp_support_info si;
            if (!qp_device_supports(d, &sch[s], 0, 0, 0, &si)) support_row(json, s, sname[s], &si);
        }
        if (json) fputs("],\"moe\":[", stdout);
        else printf("  MoE experts (fused):\n");
        for (int s = 0; s < nms; s++) {
            qp_support_info si;
            if (!qp_device_supports_moe(d, &msch[s], &si)) support_row(json, s, mname[s], &si);
        }
        if (json) fputs("]}", stdout);
    }
    if (json) fputs("]}\n", stdout);
    qp_context_destroy(ctx);
    return 0;
}
