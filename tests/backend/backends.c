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

static const bh_backend backends[] = {
#ifdef BH_HAVE_VK
    {"vk", "libqport-vk.so", vk_open, vk_close, vk_linear_cases},
#endif
#ifdef BH_HAVE_CL
    {"cl", "libqport-cl.so", cl_open, cl_close, cl_linear_cases},
#endif
#ifdef BH_HAVE_CUDA
    {"cuda", "libqport-cuda.so", cuda_open, cuda_close, cuda_linear_cases},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

const bh_backend *bh_backend_find(const char *name) {
    for (const bh_backend *b = backends; b->name; b++)
        if (name && strcmp(b->name, name) == 0) return b;
    fprintf(stderr, "unknown backend \"%s\"; built here:", name ? name : "");
    for (const bh_backend *b = backends; b->name; b++) fprintf(stderr, " %s", b->name);
    fprintf(stderr, "\n");
    return NULL;
}

int bh_backend_main(int argc, char **argv, const char *topic, void (*(*topic_of)(const bh_backend *))(void)) {
    const bh_backend *b = bh_backend_find(argc > 1 ? argv[1] : NULL);
    if (!b) return 2;
    void (*cases)(void) = topic_of(b);
    if (!cases) {
        fprintf(stderr, "%s-%s: the backend has no such topic\n", b->name, topic);
        return 2;
    }
    static char program[64];
    snprintf(program, sizeof program, "%s-%s", b->name, topic);
    int rc = b->open(program);
    if (rc) return rc == 77 ? 77 : bh_finish();
    cases();
    return b->close();
}
