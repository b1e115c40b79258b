/* Every environment variable qport reads, parsed in one place,
 * so every variable has one parser and one error path.
 * An invalid value is a QP_ERR_INVALID_ARGUMENT naming the variable, never
 * an exit. docs/environment.md lists the same table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry.h"

/* By default the GPU APIs are tried first and the reference last; a device
 * seen through two APIs is listed once, under the better-ranked one. */
const qp_backend_row qp_backend_rows[QP_N_BACKEND_KINDS] = {
    {"cpu", NULL, NULL, 3, 1},
    {"vulkan", "libqport-vk.so", "vk", 1, 1},
    {"opencl", "libqport-cl.so", "cl", 2, 2},
    {"cuda", "libqport-cuda.so", "cuda", 0, 0},
};

int qp_backend_name_index(const char *name, size_t n) {
    for (int i = 0; i < QP_N_BACKEND_KINDS; i++)
        if (strlen(qp_backend_rows[i].name) == n && !strncasecmp(name, qp_backend_rows[i].name, n)) return i;
    return -1;
}

const char *qp_backend_name_at(int i) {
    return i >= 0 && i < QP_N_BACKEND_KINDS ? qp_backend_rows[i].name : "?";
}

static qp_status bad(const qp_context *ctx, const char *var, const char *val, const char *rule) {
    return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, var, NULL, "invalid value '%s': %s", val, rule);
}

/* "1"/"0"/"true"/"false"/"on"/"off"/"yes"/"no"; unset -> dflt. */
static qp_status parse_bool(const qp_context *ctx, const char *var, int dflt, int *out) {
    const char *v = getenv(var);
    *out = dflt;
    if (!v || !*v) return QP_OK;
    static const char *const yes[] = {"1", "true", "on", "yes"}, *const no[] = {"0", "false", "off", "no"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) { *out = 1; return QP_OK; }
        if (!strcasecmp(v, no[i])) { *out = 0; return QP_OK; }
    }
    return bad(ctx, var, v, "expected 1/0, true/false, on/off or yes/no");
}

static qp_status parse_backends(const qp_context *ctx, qp_settings *s) {
    const char *v = getenv("QPORT_BACKENDS");
    s->n_backends = 0;
    if (!v || !*v) {
        for (int i = 0; i < QP_N_BACKEND_KINDS; i++) s->backend_order[qp_backend_rows[i].default_order] = i;
        s->n_backends = QP_N_BACKEND_KINDS;
        return QP_OK;
    }
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int b = qp_backend_name_index(p, n);
        if (b < 0) return bad(ctx, "QPORT_BACKENDS", v, "a comma-separated list of cpu, vulkan, opencl, cuda");
        for (int i = 0; i < s->n_backends; i++)
            if (s->backend_order[i] == b) return bad(ctx, "QPORT_BACKENDS", v, "a backend is listed twice");
        s->backend_order[s->n_backends++] = b;
        p = e ? e + 1 : p + n;
    }
    return QP_OK;
}

/* Checks the syntax of a device spec: backend[:index] or a name substring. */
qp_status qp_device_spec_parse(const char *spec, qp_device_spec *out) {
    memset(out, 0, sizeof *out);
    out->backend = -1;
    out->index = -1;
    if (!spec || !*spec) return QP_ERR_INVALID_ARGUMENT;
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    int b = qp_backend_name_index(spec, n);
    if (b >= 0) {
        out->backend = b;
        if (colon) {
            char *end;
            long i = strtol(colon + 1, &end, 10);
            if (!colon[1] || *end || i < 0 || i > 1 << 20) return QP_ERR_INVALID_ARGUMENT;
            out->index = (int)i;
        }
        return QP_OK;
    }
    if (colon) return QP_ERR_INVALID_ARGUMENT; /* "vulkn:0": a typo, not a name */
    out->substring = spec;
    return QP_OK;
}

/* Backend settings, for tests and debugging (docs/environment.md): read
 * and validated here, handed to plugins through qp_host.setting. */
typedef enum knob_kind { K_BOOL, K_BYTES, K_PATH, K_ENUM } knob_kind;
static const struct {
    const char *name;
    knob_kind kind;
    const char *values; /* K_ENUM: '|'-separated */
} knobs[] = {
    {"QPORT_VK_LOADER", K_PATH, NULL},
    {"QPORT_VK_MAX_BINDING", K_BYTES, NULL},
    {"QPORT_VK_NO_INT_DOT", K_BOOL, NULL},
    {"QPORT_VK_SYNC_VALIDATION", K_BOOL, NULL},
    {"QPORT_VK_GEMV_WG", K_ENUM, "16|32|64|128|256"},
    {"QPORT_VK_GEMV_MAX_M", K_ENUM, "1|2|4|8|16"},
    {"QPORT_CL_LIBRARY", K_PATH, NULL},
    {"QPORT_CL_DIV", K_ENUM, "native|fp64|fma|fma-test"},
    {"QPORT_CL_FAKE_INT_DOT", K_ENUM, "0|1|ext"},
    {"QPORT_CL_WEIGHT_CHUNK", K_BYTES, NULL},
    {"QPORT_CL_BREAK_SOURCE", K_BOOL, NULL},
    {"QPORT_CL_GEMV_MAX_M", K_ENUM, "1|2|4|8|16"},
    {"QPORT_CUDA_QQQ_W8", K_BOOL, NULL},
};
#define N_KNOBS (sizeof knobs / sizeof *knobs)

const char *qp_settings_knob(const qp_settings *s, const char *name) {
    for (size_t i = 0; name && i < N_KNOBS; i++)
        if (!strcmp(knobs[i].name, name)) return s->knobs[i];
    return NULL;
}

static qp_status read_knobs(const qp_context *ctx, qp_settings *s) {
    _Static_assert(N_KNOBS <= sizeof s->knobs / sizeof *s->knobs, "knob table larger than qp_settings.knobs");
    for (size_t i = 0; i < N_KNOBS; i++) {
        const char *v = getenv(knobs[i].name);
        if (!v || !*v) continue;
        if (knobs[i].kind == K_BOOL) {
            int b;
            qp_status st = parse_bool(ctx, knobs[i].name, 0, &b);
            if (st) return st;
            v = b ? "1" : "0";
        } else if (knobs[i].kind == K_BYTES) {
            char *end;
            unsigned long long x = strtoull(v, &end, 0);
            if (*end || !x || v[0] == '-') return bad(ctx, knobs[i].name, v, "a positive byte count");
        } else if (knobs[i].kind == K_ENUM) {
            const char *p = knobs[i].values;
            size_t n = strlen(v);
            int ok = 0;
            while (p && *p && !ok) {
                const char *e = strchr(p, '|');
                size_t l = e ? (size_t)(e - p) : strlen(p);
                ok = l == n && !strncmp(p, v, n);
                p = e ? e + 1 : NULL;
            }
            if (!ok) {
                char rule[96];
                snprintf(rule, sizeof rule, "one of %s", knobs[i].values);
                return bad(ctx, knobs[i].name, v, rule);
            }
        }
        s->knobs[i] = v;
    }
    return QP_OK;
}

qp_status qp_settings_read(const qp_context *ctx, qp_settings *s) {
    memset(s, 0, sizeof *s);
    qp_status st = parse_backends(ctx, s);
    if (st) return st;
    qp_device_spec ds;
    s->device = getenv("QPORT_DEVICE");
    if (s->device && !*s->device) s->device = NULL;
    if (s->device && qp_device_spec_parse(s->device, &ds) != QP_OK)
        return bad(ctx, "QPORT_DEVICE", s->device, "expected cpu, vulkan[:N], opencl[:N], cuda[:N] or a device-name substring");
    s->visible = getenv("QPORT_VISIBLE_DEVICES");
    if (s->visible && !*s->visible) s->visible = NULL;
    if (s->visible) {
        char buf[512];
        if (strlen(s->visible) >= sizeof buf) return bad(ctx, "QPORT_VISIBLE_DEVICES", "...", "longer than 511 characters");
        strcpy(buf, s->visible);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (qp_device_spec_parse(t, &ds) != QP_OK)
                return bad(ctx, "QPORT_VISIBLE_DEVICES", s->visible, "a comma-separated list of device specs (vulkan:0,cuda:1,...)");
    }
    s->backend_path = getenv("QPORT_BACKEND_PATH");
    if (s->backend_path && !*s->backend_path) s->backend_path = NULL;
    s->comm = getenv("QPORT_COMM");
    if (s->comm && !*s->comm) s->comm = NULL;
    if (s->comm && strcmp(s->comm, "auto") && strcmp(s->comm, "mpi") && strcmp(s->comm, "nccl"))
        return bad(ctx, "QPORT_COMM", s->comm, "expected mpi, nccl or auto");
    /* how long a collective waits for the other ranks before it fails
     * naming the ranks that did not answer (a frozen rank would otherwise
     * leave the others waiting forever) */
    s->comm_timeout = 300;
    const char *ct = getenv("QPORT_COMM_TIMEOUT");
    if (ct && *ct) {
        char *end;
        double v = strtod(ct, &end);
        if (*end || !(v > 0) || v > 1e7) return bad(ctx, "QPORT_COMM_TIMEOUT", ct, "seconds, a positive number up to 1e7");
        s->comm_timeout = v;
    }
    const char *c = getenv("QPORT_CACHE_DIR");
    if (c && *c) {
        if (!strcasecmp(c, "off")) s->cache_dir[0] = 0;
        else if (strlen(c) >= sizeof s->cache_dir) return bad(ctx, "QPORT_CACHE_DIR", c, "path too long");
        else strcpy(s->cache_dir, c);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
        if (x && *x && strlen(x) + 8 < sizeof s->cache_dir) { strcpy(s->cache_dir, x); strcat(s->cache_dir, "/qport"); }
        else if (h && *h && strlen(h) + 16 < sizeof s->cache_dir) { strcpy(s->cache_dir, h); strcat(s->cache_dir, "/.cache/qport"); }
    }
    st = parse_bool(ctx, "QPORT_VK_VALIDATION", 0, &s->validation);
    if (st) return st;
    if ((st = read_knobs(ctx, s))) return st;
    const char *f = getenv("QPORT_TEST_FLIP_BIT");
    s->flip_bit = -1;
    if (f && *f) {
        char *end;
        long v = strtol(f, &end, 10);
        if (*end || v < 0 || v > 15) return bad(ctx, "QPORT_TEST_FLIP_BIT", f, "a bit index 0..15");
#ifdef QP_TEST_HOOKS
        s->flip_bit = (int)v;
#endif
    }
    return QP_OK;
}

QP_API qp_status qp_log_level_from_env(qp_context *ctx, qp_log_level dflt, qp_log_level *out) {
    if (!out) return QP_ERR_INVALID_ARGUMENT;
    *out = dflt;
    const char *v = getenv("QPORT_LOG");
    if (!v || !*v) return QP_OK;
    static const char *const names[] = {"debug", "info", "warn", "error", "none"};
    for (int i = 0; i <= QP_LOG_NONE; i++)
        if (!strcasecmp(v, names[i])) { *out = (qp_log_level)i; return QP_OK; }
    return bad(ctx, "QPORT_LOG", v, "expected debug, info, warn, error or none");
}
