/* The backend table of the topic programs (backends.h). */
#include "backends.h"

#include <stdio.h>
#include <string.h>

#include "backend_harness.h"

#ifdef BH_HAVE_VK
#include "vk/vk_tests.h"
#endif
#ifdef BH_HAVE_CL
#include "cl/cl_tests.h"
#endif
#ifdef BH_HAVE_CUDA
#include "cuda/cuda_tests.h"
#endif

#ifdef BH_HAVE_VK
static const bh_topic vk_topics[] = {
    {"linear", vk_linear_cases, NULL},
    {"w4a16", vk_w4a16_cases, NULL},
    {"block_float", vk_block_float_cases, NULL},
    {"ops", vk_ops_cases, NULL},
    {"large", vk_large_cases, NULL},
    {"faults", vk_faults_cases, NULL},
    {"moe", NULL, vk_moe_run},
    {NULL, NULL, NULL},
};
/* Vulkan: how it answers the shared probes (its words) */
static const bh_expect vk_expect[] = {
    {"w4a16", "w4a16-no-zero-points", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w4_zero"},
    {"w4a16", "w4a16-zero-point-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[1][6]"},
    {"w4a16", "w4a16-code-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[0][5]"},
    {"w4a16", "w4a16-g48", BH_REFUSE, QP_ERR_VALUE, "not divisible by the group size 48"},
    {"w4a16", "w4a16-g16", BH_REFUSE, QP_ERR_UNSUPPORTED, "group size 16"},
    {"w4a16", "w4a16-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "forced int-dot path"},
    {"w4a16", "w4a16-no-int-dot", BH_ACCEPT, QP_OK, NULL},
    {"block_float", "mx-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "forced int-dot path"},
    {"block_float", "mx-k48", BH_REFUSE, QP_ERR_VALUE, "block size"},
    {"block_float", "mx-no-lut", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_lut"},
    {"block_float", "nvfp4-no-global-scale", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "input_global_scale"},
    {"block_float", "unquantized-no-w-act", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_act"},
    {"block_float", "fp8-block-k64", BH_REFUSE, QP_ERR_VALUE, "multiple of 128"},
    {"faults", "gemv-and-tiled", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "GEMV and TILED forced together"},
    {"faults", "int-dot-and-no-int-dot", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "INT_DOT and NO_INT_DOT forced together"},
    {"faults", "kv-cache-kind", BH_REFUSE, QP_ERR_UNSUPPORTED, "not yet implemented on vulkan"},
    {NULL, NULL, 0, QP_OK, NULL},
};
#endif
#ifdef BH_HAVE_CL
static const bh_topic cl_topics[] = {
    {"linear", cl_linear_cases, NULL},
    {"w4a16", cl_w4a16_cases, NULL},
    {"block_float", cl_block_float_cases, NULL},
    {"ops", cl_ops_cases, NULL},
    {"large", cl_large_cases, NULL},
    {"faults", cl_faults_cases, NULL},
    {"no_platform", NULL, cl_no_platform_run},
    {"moe", NULL, cl_moe_run},
    {NULL, NULL, NULL},
};
/* OpenCL: how it answers the shared probes, in its words */
static const bh_expect cl_expect[] = {
    {"w4a16", "w4a16-no-zero-points", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w4_zero"},
    {"w4a16", "w4a16-zero-point-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[1][6]"},
    {"w4a16", "w4a16-code-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[0][5]"},
    {"w4a16", "w4a16-g48", BH_REFUSE, QP_ERR_VALUE, "not divisible by the group size 48"},
    {"w4a16", "w4a16-g16", BH_REFUSE, QP_ERR_UNSUPPORTED, "multiple of 32"},
    {"w4a16", "w4a16-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "no integer dot product path"},
    {"w4a16", "w4a16-no-int-dot", BH_ACCEPT, QP_OK, NULL},
    {"block_float", "mx-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "no integer dot product path"},
    {"block_float", "mx-k48", BH_REFUSE, QP_ERR_VALUE, "multiple"},
    {"block_float", "mx-no-lut", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_lut"},
    {"block_float", "nvfp4-no-global-scale", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "input_global_scale"},
    {"block_float", "unquantized-no-w-act", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_act"},
    {"block_float", "fp8-block-k64", BH_REFUSE, QP_ERR_VALUE, "multiple of 128"},
    {"faults", "gemv-and-tiled", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "QP_PATH_GEMV and QP_PATH_TILED are exclusive"},
    {"faults", "int-dot-and-no-int-dot", BH_REFUSE, QP_ERR_INVALID_ARGUMENT,
     "QP_PATH_INT_DOT and QP_PATH_NO_INT_DOT are exclusive"},
    {"faults", "kv-cache-kind", BH_REFUSE, QP_ERR_UNSUPPORTED, "not yet implemented on opencl"},
    {NULL, NULL, 0, QP_OK, NULL},
};
#endif
#ifdef BH_HAVE_CUDA
static const bh_topic cuda_topics[] = {
    {"linear", cuda_linear_cases, NULL},
    {"w4a16", cuda_w4a16_cases, NULL},
    {"block_float", cuda_block_float_cases, NULL},
    {"ops", cuda_ops_cases, NULL},
    {"large", NULL, cuda_large_run},
    {"faults", cuda_faults_cases, NULL},
    {"moe", NULL, cuda_moe_run},
    {NULL, NULL, NULL},
};
/* CUDA: how it answers the shared probes -- the group size is checked before the shape, so g48 is a
 * refusal, not a bad value; a zero NVFP4 global scale is a bad value, not
 * a bad descriptor */
static const bh_expect cuda_expect[] = {
    {"w4a16", "w4a16-no-zero-points", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w4_zero"},
    {"w4a16", "w4a16-zero-point-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[1][6]"},
    {"w4a16", "w4a16-code-range", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "[0][5]"},
    {"w4a16", "w4a16-g48", BH_REFUSE, QP_ERR_UNSUPPORTED, "group size 48"},
    {"w4a16", "w4a16-g16", BH_REFUSE, QP_ERR_UNSUPPORTED, "group size 16"},
    {"w4a16", "w4a16-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "no int-dot path"},
    {"w4a16", "w4a16-no-int-dot", BH_ACCEPT, QP_OK, NULL},
    {"block_float", "mx-int-dot", BH_REFUSE, QP_ERR_UNSUPPORTED, "no int-dot path"},
    {"block_float", "mx-k48", BH_REFUSE, QP_ERR_VALUE, "multiple of the weight block"},
    {"block_float", "mx-no-lut", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_lut"},
    {"block_float", "nvfp4-no-global-scale", BH_REFUSE, QP_ERR_VALUE, "input_global_scale"},
    {"block_float", "unquantized-no-w-act", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "w_act"},
    {"block_float", "fp8-block-k64", BH_REFUSE, QP_ERR_VALUE, "K % 128"},
    {"faults", "gemv-and-tiled", BH_REFUSE, QP_ERR_INVALID_ARGUMENT, "QP_PATH_GEMV and QP_PATH_TILED are exclusive"},
    {"faults", "int-dot-and-no-int-dot", BH_REFUSE, QP_ERR_INVALID_ARGUMENT,
     "QP_PATH_INT_DOT and QP_PATH_NO_INT_DOT are exclusive"},
    {"faults", "kv-cache-kind", BH_REFUSE, QP_ERR_UNSUPPORTED, "not yet implemented on cuda"},
    {NULL, NULL, 0, QP_OK, NULL},
};
#endif

static const bh_backend backends[] = {
#ifdef BH_HAVE_VK
    {"vk", "libqport-vk.so", vk_open, vk_close, vk_topics, vk_expect},
#endif
#ifdef BH_HAVE_CL
    {"cl", "libqport-cl.so", cl_open, cl_close, cl_topics, cl_expect},
#endif
#ifdef BH_HAVE_CUDA
    {"cuda", "libqport-cuda.so", cuda_open, cuda_close, cuda_topics, cuda_expect},
#endif
    {NULL, NULL, NULL, NULL, NULL, NULL},
};

const bh_backend *bh_backend_find(const char *name) {
    for (const bh_backend *b = backends; b->name; b++)
        if (name && strcmp(b->name, name) == 0) return b;
    fprintf(stderr, "unknown backend \"%s\"; built here:", name ? name : "");
    for (const bh_backend *b = backends; b->name; b++) fprintf(stderr, " %s", b->name);
    fprintf(stderr, "\n");
    return NULL;
}

int bh_backend_main(int argc, char **argv, const char *topic, void (*shared)(void)) {
    const bh_backend *b = bh_backend_find(argc > 1 ? argv[1] : NULL);
    if (!b) return 2;
    const bh_topic *t = b->topics;
    while (t->name && strcmp(t->name, topic)) t++;
    if (!t->name) {
        fprintf(stderr, "%s-%s: the backend has no such topic\n", b->name, topic);
        return 2;
    }
    static char program[64];
    snprintf(program, sizeof program, "%s-%s", b->name, topic);
    for (char *p = program; *p; p++)
        if (*p == '_') *p = '-';
    if (t->run) return t->run(program, argc - 1, argv + 1);
    int rc = b->open(program);
    if (rc) return rc == 77 ? 77 : bh_finish();
    bh_expect_use(b->expect, topic);
    uint64_t rng = bh_rng; /* the backend's cases see the data they always saw */
    if (shared && bh_group("probes")) shared();
    bh_rng = rng;
    if (t->cases) t->cases();
    return b->close();
}
