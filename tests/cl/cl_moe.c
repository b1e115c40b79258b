/* The OpenCL fused MoE against the cpu reference: every scheme x
 * fp16/bf16 with E = 8 or 64 and k = 1, 2 or 8 in turn, at M = 1, 3, 16
 * (decode path) and 17, 64 (tiled path), softmax and grouped top-k
 * routing, experts that get no token, every token through one expert,
 * expert parallelism -- the shared cases and bound of tests/backend_moe.c
 * (int8 bit for bit, float within a bound derived per output); fp8
 * per-block experts (H 256, I 128) the same way, and qp_device_supports_moe
 * answering for them as the linear layers do (emulated fp8 arithmetic). Then the
 * refusals: W4A16 experts (the core), and expert weights larger than one
 * device buffer (the plugin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_moe.h"
#include "cl_tests.h"
#include "testutil.h"

int cl_moe_run(const char *program, int argc, char **argv) {
    (void)argc;
    (void)argv;
    double t0 = (double)clock();
    qp_context *ctx = NULL;
    qp_device *cpu = NULL, *ocl = NULL;
    CHECK(!qp_context_create(&ctx), "context");
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu device");
    if (qp_device_find(ctx, "opencl", &ocl) || !ocl) {
        printf("%s: SKIP: no OpenCL device (%s)\n", program, qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }
    qp_device_info info;
    info.struct_size = sizeof info;
    qp_device_get_info(ocl, &info);
    printf("opencl: %s | %s\n", info.name, info.driver);
    static const int ms[] = {1, 3, 16, 17, 64};
    md_init(ctx, cpu, ocl, "opencl", ms, 5);
    md_run_matrix();
    qp_scheme fb;
    qp_config *fbc = NULL;
    qp_support_info si;
    md_fp8_block_scheme(&fb, &fbc);
    /* the linear layers' answer (fp8 arithmetic emulated in fp32), not the
     * core's refusal */
    CHECK(!qp_device_supports_moe(ocl, &fb, &si) && si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "fused MoE") &&
              strstr(si.reason, "128x128 weight blocks"),
          "fp8 per-block MoE: level %d (%s)", (int)si.level, si.reason);
    qp_config_destroy(fbc);
    md_run_fp8_block();
    md_refuse_unsupported();
    /* expert weights larger than one device buffer: refused by the plugin
     * (QPORT_CL_WEIGHT_CHUNK makes the limit small) */
    setenv("QPORT_CL_WEIGHT_CHUNK", "4096", 1);
    qp_context *c2 = NULL;
    qp_device *o2 = NULL;
    CHECK(!qp_context_create(&c2) && !qp_device_find(c2, "opencl", &o2), "second context");
    unsetenv("QPORT_CL_WEIGHT_CHUNK");
    if (o2) {
        qp_moe *m = NULL;
        qp_status st = md_create_direct(o2, 6, QP_DTYPE_BF16, 8, 2, &m);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(qp_last_error(c2), "exceeds one device buffer"), "chunk limit: %d %s",
              (int)st, qp_last_error(c2));
        printf("refusal: %s\n", qp_last_error(c2));
        if (!st) qp_moe_destroy(m);
    }
    qp_context_destroy(c2);
    md_report(program, t0);
    qp_context_destroy(ctx);
    return tu_finish(program);
}
