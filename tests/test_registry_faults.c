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
            CHECK(!bs.loaded && strstr(bs.note, "not a qport vulkan backend of ABI 1"), "vulkan: %s", bs.note);
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
    return tu_finish("registry-faults");
}
