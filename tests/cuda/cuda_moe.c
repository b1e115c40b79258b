/* The CUDA fused MoE against the cpu reference: every scheme x
 * fp16/bf16 with E = 8 or 64 and k = 1, 2 or 8 in turn, at M = 1, 3, 16
 * (decode path) and 17, 64 (tiled path: tensor cores where the device has
 * them for the kind), softmax and grouped top-k routing, experts that get
 * no token, every token through one expert, expert parallelism -- the
 * shared cases and bound of tests/backend_moe.c (int8 bit for bit, float
 * within a bound derived per output) -- and layers with H = 96, I = 48
 * (rows and k padded in the device layout); fp8 per-block experts (H 256,
 * I 128: e4m3 tiles with the group scales folded in from sm_89, the decode
 * kernel below) the same way, and qp_device_supports_moe giving the linear
 * layers' answer for them. On the CPU emulator (QPORT_TEST_CUDA_SMALL,
 * tests/cuda_emu) fewer token counts: 1 and 17 (sm_90), 3 and 17 (sm_86,
 * sm_75) -- one decode and one tiled run of every layer. Refusals: W4A16
 * experts (the core), a descriptor the plugin has no kernel for (an MX qdq
 * activation mode without block-float weights) and malformed fp8 per-block
 * descriptors through its ops table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_moe.h"
#include "cuda_tests.h"
#include "internal.h"
#include "registry.h"
#include "testutil.h"

/* the token counts of this run: every path, fewer on the CPU emulator */
static const int *token_counts(int *n) {
    static const int all[] = {1, 3, 16, 17, 64}, emu90[] = {1, 17}, emu2[] = {3, 17};
    const char *v = getenv("QPORT_TEST_CUDA_SMALL");
    if (!v || !*v) { *n = 5; return all; }
    *n = 2;
    return atoi(v) >= 2 ? emu2 : emu90;
}

/* fp8 per-block experts: qp_device_supports_moe gives the linear layers'
 * answer (not a refusal of the MoE kernels), then the layers */
static void fp8_block(qp_device *cud) {
    qp_scheme fb;
    qp_config *fbc = NULL;
    qp_support_info si, li;
    md_fp8_block_scheme(&fb, &fbc);
    CHECK(!qp_device_supports_moe(cud, &fb, &si) && !qp_device_supports(cud, &fb, 0, 0, 0, &li), "supports: %s",
          si.reason);
    CHECK(si.level == li.level && (si.level == QP_SUPPORT_UNSUPPORTED || strstr(si.reason, "fused MoE")),
          "fp8 per-block MoE: level %d (%s), linear %d (%s)", (int)si.level, si.reason, (int)li.level, li.reason);
    printf("fp8 per-block MoE: level %d (%s)\n", (int)si.level, si.reason);
    qp_config_destroy(fbc);
    md_run_fp8_block();
}

/* ---- refusals ------------------------------------------------------------ */
static void errors(const char *program) {
    md_refuse_unsupported(); /* the core, any backend */
    /* a descriptor the plugin has no kernel for, through its ops table (the
     * core never builds one: MX qdq activations with per-tensor fp8 weights) */
    if (cuda_open(program) != 0) return;
    CHECK(bh_ops->moe_prepare && bh_ops->moe_forward && bh_ops->moe_destroy && bh_ops->moe_describe, "MoE ops present");
    if (!bh_ops->moe_prepare) return;
    static int8_t w13[8 * 64 * 64], w2[8 * 64 * 32];
    static float s13[8 * 64], s2[8 * 64];
    qp_moe_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_FP8;
    d.act_dtype = QP_DTYPE_F16;
    d.E = 8; d.H = 64; d.I = 32; d.G = 8;
    d.layer = "refused.experts";
    d.act = QP_ACT_MX_QDQ;
    d.w_dtype = QP_DTYPE_F8_E4M3FN;
    d.w13 = w13; d.w2 = w2; d.s13 = s13; d.s2 = s2;
    void *h = NULL;
    qp_status st = bh_ops->moe_prepare(bh_dev, &d, &h);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "unsupported") && strstr(bh_err, "activation mode"),
          "MX qdq MoE without block-float weights: %d %s", (int)st, bh_err);
    printf("refusal: %s\n", bh_err);
    if (!st) bh_ops->moe_destroy(bh_dev, h);
    /* fp8 per-block descriptors the kernels cannot take: invalid arguments */
    static float b13[8 * 64], b2[8 * 64];
    d.act = QP_ACT_FP8_GROUP128;
    st = bh_ops->moe_prepare(bh_dev, &d, &h); /* no w_blk / block scales */
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "w_blk 128 and b13/b2"), "fp8 per-block without blocks: %d %s",
          (int)st, bh_err);
    if (!st) bh_ops->moe_destroy(bh_dev, h);
    d.w_blk = 128;
    d.b13 = b13;
    d.b2 = b2;
    st = bh_ops->moe_prepare(bh_dev, &d, &h); /* H 64, I 32 */
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "multiples of 128"), "fp8 per-block H 64: %d %s", (int)st,
          bh_err);
    if (!st) bh_ops->moe_destroy(bh_dev, h);
    d.w_blk = 0;
    d.b13 = d.b2 = NULL;
    /* bad shapes are invalid arguments */
    d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    d.expert_offset = 4;
    st = bh_ops->moe_prepare(bh_dev, &d, &h);
    CHECK(st == QP_ERR_INVALID_ARGUMENT, "expert_offset past G - E: %d %s", (int)st, bh_err);
    if (!st) bh_ops->moe_destroy(bh_dev, h);
    bh_ops->shutdown(bh_state);
    bh_state = NULL;
}

int cuda_moe_run(const char *program, int argc, char **argv) {
    (void)argc;
    (void)argv;
    double t0 = (double)clock();
    qp_context *ctx = NULL;
    qp_device *cpu = NULL, *cud = NULL;
    CHECK(!qp_context_create(&ctx), "context");
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu device");
    if (qp_device_find(ctx, "cuda", &cud) || !cud) {
        printf("%s: SKIP: no CUDA device (%s)\n", program, qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 77;
    }
    qp_device_info info;
    info.struct_size = sizeof info;
    qp_device_get_info(cud, &info);
    printf("cuda: %s | %s | compute capability %d.%d\n", info.name, info.driver, info.cuda_cc / 10, info.cuda_cc % 10);
    int nm = 0;
    const int *ms = token_counts(&nm);
    md_init(ctx, cpu, cud, "cuda", ms, nm);
    md_run_matrix();
    /* rows and k not multiples of the 64-wide tiles */
    md_set_shape(96, 48);
    md_run_layer(5, QP_DTYPE_F16, 8, 8, 0, 2);   /* int8 static */
    md_run_layer(0, QP_DTYPE_BF16, 8, 8, 0, 2);  /* unquantized */
    md_run_layer(12, QP_DTYPE_F16, 8, 8, 0, 2);  /* nvfp4 (blocks of 16) */
    md_set_shape(64, 32);
    fp8_block(cud);
    errors(program);
    md_report(program, t0);
    qp_context_destroy(ctx);
    return tu_finish(program);
}
