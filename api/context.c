/* The context: log sink and the last error of each calling thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

typedef struct err_slot {
    pthread_t thread;
    qp_status status;
    char *message, *file, *key_path, *layer, *line;
    struct err_slot *next;
} err_slot;

struct qp_context {
    pthread_mutex_t lock;
    err_slot *slots; /* one per thread that ever failed on this context */
    qp_log_fn log_fn;
    void *log_user;
    qp_log_level log_level;
    /* Backends and devices, loaded on the first device call. */
    pthread_mutex_t reg_lock;
    qp_registry *registry;
};

qp_registry **qp_context_registry_slot(qp_context *ctx) { return &ctx->registry; }
pthread_mutex_t *qp_context_registry_lock(qp_context *ctx) { return &ctx->reg_lock; }

QP_API qp_status qp_context_create(qp_context **out) {
    if (!out) return QP_ERR_INVALID_ARGUMENT;
    qp_context *c = calloc(1, sizeof *c);
    if (!c) return QP_ERR_OUT_OF_MEMORY;
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->reg_lock, NULL);
    c->log_level = QP_LOG_NONE;
    *out = c;
    return QP_OK;
}

static void slot_clear(err_slot *s) {
    free(s->message); free(s->file); free(s->key_path); free(s->layer); free(s->line);
    s->message = s->file = s->key_path = s->layer = s->line = NULL;
}

QP_API void qp_context_destroy(qp_context *ctx) {
    if (!ctx) return;
    qp_registry_destroy(ctx->registry);
    pthread_mutex_destroy(&ctx->reg_lock);
    for (err_slot *s = ctx->slots, *n; s; s = n) {
        n = s->next;
        slot_clear(s);
        free(s);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

QP_API qp_status qp_set_log(qp_context *ctx, qp_log_fn fn, void *user, qp_log_level min_level) {
    if (!ctx || (unsigned)min_level > QP_LOG_NONE) return QP_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&ctx->lock);
    ctx->log_fn = fn;
    ctx->log_user = user;
    ctx->log_level = min_level;
    pthread_mutex_unlock(&ctx->lock);
    return QP_OK;
}

void qp_log(const qp_context *ctx, qp_log_level level, const char *fmt, ...) {
    if (!ctx || !ctx->log_fn || level < ctx->log_level) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->log_fn(ctx->log_user, level, msg);
}

/* Slots are only ever added, so a found slot stays valid for its thread. */
static err_slot *slot_for_thread(qp_context *c, bool create) {
    pthread_t me = pthread_self();
    for (err_slot *s = c->slots; s; s = s->next)
        if (pthread_equal(s->thread, me)) return s;
    if (!create) return NULL;
    err_slot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->thread = me;
    s->next = c->slots;
    c->slots = s;
    return s;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

qp_status qp_host_error(const qp_context *ctx, qp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qp_error_setv(ctx, st, NULL, NULL, NULL, fmt, ap);
    va_end(ap);
    return st;
}

qp_status qp_error_setv(const qp_context *cctx, qp_status status, const char *file,
                        const char *key_path, const char *layer, const char *fmt, va_list ap) {
    if (!cctx) return status;
    qp_context *ctx = (qp_context *)cctx; /* the error slots are the only mutable part */
    qp_buf msg = {0};
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *m = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (m) vsnprintf(m, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    qp_buf line = {0};
    if (file && *file) { qp_buf_puts(&line, file); qp_buf_puts(&line, ": "); }
    if (key_path && *key_path) { qp_buf_puts(&line, key_path); qp_buf_puts(&line, ": "); }
    if (layer && *layer) { qp_buf_printf(&line, "layer '%s': ", layer); }
    if (qp_status_exception(status)) { qp_buf_puts(&line, qp_status_exception(status)); qp_buf_puts(&line, ": "); }
    qp_buf_puts(&line, m ? m : "out of memory");
    pthread_mutex_lock(&ctx->lock);
    err_slot *s = slot_for_thread(ctx, true);
    if (s) {
        slot_clear(s);
        s->status = status;
        s->message = m ? m : strdup("out of memory");
        m = NULL;
        s->file = dup_or_empty(file);
        s->key_path = dup_or_empty(key_path);
        s->layer = dup_or_empty(layer);
        s->line = line.p ? line.p : strdup("");
        line.p = NULL;
    }
    pthread_mutex_unlock(&ctx->lock);
    free(m);
    qp_buf_free(&line);
    qp_buf_free(&msg);
    return status;
}

qp_status qp_error_set(const qp_context *ctx, qp_status status, const char *file,
                       const char *key_path, const char *layer, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    qp_status st = qp_error_setv(ctx, status, file, key_path, layer, fmt, ap);
    va_end(ap);
    return st;
}

QP_API const char *qp_last_error(const qp_context *cctx) {
    if (!cctx) return "";
    qp_context *ctx = (qp_context *)cctx;
    pthread_mutex_lock(&ctx->lock);
    err_slot *s = slot_for_thread(ctx, false);
    const char *r = s && s->line ? s->line : "";
    pthread_mutex_unlock(&ctx->lock);
    return r;
}

QP_API qp_status qp_last_error_info(const qp_context *cctx, qp_error_info *out) {
    if (!cctx || !out) return QP_ERR_INVALID_ARGUMENT;
    qp_context *ctx = (qp_context *)cctx;
    pthread_mutex_lock(&ctx->lock);
    err_slot *s = slot_for_thread(ctx, false);
    memset(out, 0, sizeof *out);
    if (s && s->message) {
        out->status = s->status;
        out->exception = qp_status_exception(s->status);
        out->message = s->message;
        out->file = s->file;
        out->key_path = s->key_path;
        out->layer = s->layer;
    } else {
        out->status = QP_OK;
        out->message = out->file = out->key_path = out->layer = "";
    }
    pthread_mutex_unlock(&ctx->lock);
    return QP_OK;
}
