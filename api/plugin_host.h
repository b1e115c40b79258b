/*
 * What the core's table of services for a plugin (qp_host for backends,
 * qp_comm_host for communicators) starts with: the same version check and
 * the same error and log calls, so every plugin reports the same way.
 */
#ifndef QP_PLUGIN_HOST_H
#define QP_PLUGIN_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "qport.h"

/* The leading members of a host table; read the rest only when
 * struct_size covers it. */
#define QP_PLUGIN_HOST_HEAD                                                                             \
    uint32_t abi_version;                                                                               \
    size_t struct_size;                                                                                 \
    const qp_context *ctx;                                                                              \
    /* Records an error on ctx for the calling thread; returns `status`. */                            \
    qp_status (*error)(const qp_context *ctx, qp_status status, const char *fmt, ...)                   \
        __attribute__((format(printf, 3, 4)));                                                          \
    void (*log)(const qp_context *ctx, qp_log_level level, const char *fmt, ...)                        \
        __attribute__((format(printf, 3, 4)))

#endif
