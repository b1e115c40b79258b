/* For the tests that load a plugin with a qp_host of their own (they play
 * the core): backend settings straight from the environment, as the core
 * hands them over after validating them in api/env.c. */
#ifndef QP_TEST_PLUGIN_HOST_H
#define QP_TEST_PLUGIN_HOST_H
#include <stdlib.h>

#include "backend.h"

static inline const char *tu_host_setting(const qp_host *h, const char *name) {
    (void)h;
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
#endif
