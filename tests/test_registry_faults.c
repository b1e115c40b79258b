/* Plugins that are broken, empty or whose runtime refuses to start: each
 * is a backend with zero devices and a reason, never a failure of the
 * library, and the cpu reference still works. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char logbuf[4096];
static void logfn(void *u, qp_log_level l, const char *m) {
    (void)u; (void)l;
    strncat(logbuf, m, sizeof logbuf - strlen(logbuf) - 2);
    strcat(logbuf, "\n");
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    setenv("QPORT_BACKEND_PATH", argv[1], 1);
    qp_context *ctx;
    qp_context_create(&ctx);
    qp_set_log(ctx, logfn, NULL, QP_LOG_DEBUG);
    size_t n = 0;
    CHECK(!qp_device_count(ctx, &n) && n == 1, "devices %zu: %s", n, qp_last_error(ctx));
    int seen = 0;
    qp_backend_status bs;
    for (size_t i = 0; !qp_backend_get_status(ctx, i, &bs); i++) {
        if (!strcmp(bs.name, "vulkan")) {
            seen++;
            CHECK(!bs.loaded && strstr(bs.note, "not a qport vulkan backend of ABI 5"), "vulkan: %s", bs.note);
        } else if (!strcmp(bs.name, "opencl")) {
            seen++;
            CHECK(bs.loaded && bs.n_devices == 0 && strstr(bs.note, "fake: no driver here"), "opencl: %s", bs.note);
        } else if (!strcmp(bs.name, "cuda")) {
            seen++;
            CHECK(!bs.loaded && strstr(bs.note, "init failed") && strstr(bs.note, "driver refused"), "cuda: %s", bs.note);
        }
    }
    CHECK(seen == 3, "backends seen %d", seen);
    CHECK(strstr(logbuf, "fake: no driver here") != NULL, "plugin log reached the callback: %s", logbuf);
    qp_device *d;
    CHECK(!qp_device_pick(ctx, NULL, &d), "the cpu reference still picks");
    CHECK(qp_device_find(ctx, "cuda", &d) == QP_ERR_NOT_FOUND, "no cuda device");
    qp_context_destroy(ctx);

    /* one GPU through two APIs: listed twice, the Vulkan entry ranks first
     * (discrete Vulkan > discrete OpenCL > the reference), the OpenCL one
     * is marked same_as and never picked */
    if (argc > 2) {
        setenv("QPORT_BACKEND_PATH", argv[2], 1);
        qp_context_create(&ctx);
        CHECK(!qp_device_count(ctx, &n) && n == 3, "twin devices %zu", n);
        qp_device_info di[3];
        for (size_t i = 0; i < 3 && i < n; i++) {
            qp_device_get(ctx, i, &d);
            di[i].struct_size = sizeof di[i];
            qp_device_get_info(d, &di[i]);
        }
        CHECK(n == 3 && !strcmp(di[0].backend, "vulkan") && !strcmp(di[1].backend, "opencl") && !strcmp(di[2].backend, "cpu"),
              "order %s %s %s", di[0].backend, di[1].backend, di[2].backend);
        CHECK(n == 3 && !di[0].same_as[0] && !strcmp(di[1].same_as, "vulkan:0"), "same_as '%s'", di[1].same_as);
        qp_scheme s_int8 = {.struct_size = sizeof s_int8, .kind = QP_SCHEME_W8A8_INT8};
        qp_scheme s_qqq = {.struct_size = sizeof s_qqq, .kind = QP_SCHEME_QQQ_W4A8};
        qp_device_info pi = {.struct_size = sizeof pi};
        CHECK(!qp_device_pick(ctx, &s_int8, &d) && !qp_device_get_info(d, &pi) && !strcmp(pi.backend, "vulkan"), "pick int8: %s", pi.backend);
        qp_scheme s_fp8 = {.struct_size = sizeof s_fp8, .kind = QP_SCHEME_W8A8_FP8};
        CHECK(!qp_device_pick(ctx, &s_fp8, &d) && !qp_device_get_info(d, &pi) && !strcmp(pi.backend, "vulkan"),
              "an emulating GPU before the cpu reference: %s", pi.backend);
        CHECK(!qp_device_pick(ctx, &s_qqq, &d) && !qp_device_get_info(d, &pi) && !strcmp(pi.backend, "cpu"), "pick qqq (fake says unsupported): %s", pi.backend);
        CHECK(!qp_device_find(ctx, "twin", &d) && !qp_device_get_info(d, &pi) && !strcmp(pi.backend, "vulkan"), "substring");
        qp_context_destroy(ctx);
        /* a visible-device filter hides the rest */
        setenv("QPORT_VISIBLE_DEVICES", "opencl:0", 1);
        setenv("QPORT_BACKENDS", "opencl,vulkan", 1);
        qp_context_create(&ctx);
        CHECK(!qp_device_count(ctx, &n) && n == 1, "visible: %zu", n);
        CHECK(!qp_device_pick(ctx, &s_int8, &d) && !qp_device_get_info(d, &pi) && !strcmp(pi.backend, "opencl") && !pi.same_as[0],
              "only opencl visible: %s", pi.backend);
        qp_context_destroy(ctx);
        unsetenv("QPORT_VISIBLE_DEVICES");
        unsetenv("QPORT_BACKENDS");
    }
    /* a plugin whose scheme-kind table leaves out a linear kind is refused
     * at load with the kind named, and the reference still works */
    if (argc > 3) {
        setenv("QPORT_BACKEND_PATH", argv[3], 1);
        qp_context_create(&ctx);
        CHECK(!qp_device_count(ctx, &n) && n == 1, "nokinds devices %zu", n);
        int found = 0;
        for (size_t i = 0; !qp_backend_get_status(ctx, i, &bs); i++) {
            if (strcmp(bs.name, "opencl")) continue;
            found = 1;
            CHECK(!bs.loaded && strstr(bs.note, "does not say whether it runs scheme kind nvfp4"), "opencl: %s", bs.note);
        }
        CHECK(found, "opencl slot listed");
        qp_context_destroy(ctx);
    }
    /* every linear kind of the table is described, the others are not linear */
    for (int k = 0; k < QP_SCHEME_KIND_COUNT_; k++) {
        qp_scheme_kind_info ki = {.struct_size = sizeof ki};
        CHECK(!qp_scheme_kind_describe((qp_scheme_kind)k, &ki) && ki.name && !strcmp(ki.name, qp_scheme_kind_name(k)),
              "kind %d described", k);
        /* from QP_SCHEME_WNA16 on, compressed-tensors kinds: the weight-only
         * ones are bound (lowered to dense weights), the rest resolved only */
        int ct_bound = k == QP_SCHEME_WNA16 || k == QP_SCHEME_W8A16_FP8 || k == QP_SCHEME_NVFP4_A16 || k == QP_SCHEME_CT_MXFP4;
        CHECK(ki.linear == (k != QP_SCHEME_KV_CACHE && k != QP_SCHEME_NONE && k != QP_SCHEME_W4A8_INT4_FP8 &&
                            (k < QP_SCHEME_WNA16 || ct_bound)),
              "kind %s linear %d", ki.name, ki.linear);
        CHECK(ki.exact == (k == QP_SCHEME_W8A8_INT8 || k == QP_SCHEME_QQQ_W4A8), "kind %s exact %d", ki.name, ki.exact);
        CHECK(ki.moe == !ki.moe_refusal, "kind %s moe %d", ki.name, ki.moe);
        CHECK(ki.classes && ki.tensors && ki.family, "kind %s: classes, tensors and family named", ki.name);
    }
    qp_scheme_kind_info bad = {.struct_size = sizeof bad};
    CHECK(qp_scheme_kind_describe(QP_SCHEME_KIND_COUNT_, &bad) == QP_ERR_INVALID_ARGUMENT, "out of range");
    bad.struct_size = 4;
    CHECK(qp_scheme_kind_describe(QP_SCHEME_NVFP4, &bad) == QP_ERR_INVALID_ARGUMENT, "small struct");
    return tu_finish("registry-faults");
}
