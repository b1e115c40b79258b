/* Loading the backends of a context and ordering their devices
 * (docs/backends.md). The built-in `cpu` reference is always available unless
 * QPORT_BACKENDS leaves it out; every other backend is a plugin found in
 * QPORT_BACKEND_PATH, else next to libqport or the running program (the
 * installed <libdir>/qport, the folder itself, the build tree's vk/, cl/,
 * cuda/), else the configured plugin folder. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "scheme_table.h"

/* The slot whose init runs on this thread: what a backend logs while it
 * initialises (why it found no device) becomes the note `qport devices`
 * shows. Part of the registry's loading, never read elsewhere. */
static _Thread_local qp_backend_slot *initializing;

void qp_host_log(const qp_context *ctx, qp_log_level level, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (initializing && level >= QP_LOG_INFO) {
        size_t n = strnlen(msg, sizeof initializing->note - 1);
        memcpy(initializing->note, msg, n);
        initializing->note[n] = 0;
    }
    qp_log(ctx, level, "%s", msg);
}

/* A plugin file checked before dlopen: the loader maps every
 * PT_LOAD segment and touches it, so a truncated .so would die of SIGBUS
 * inside dlopen, taking every command with it. The file must be a regular
 * file holding an ELF header of this machine's class and every segment
 * and the program headers inside the file. 0: absent (no note), 1: fine,
 * -1: refused, *why says why. */
static int plugin_file_ok(const char *path, char *why, size_t cap) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0;
        snprintf(why, cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    ElfW(Ehdr) eh;
    int rc = 1;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        snprintf(why, cap, "%s: not a regular file", path);
        rc = -1;
    } else if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG)) {
        snprintf(why, cap, "%s: not an ELF shared object (%lld bytes; truncated or damaged)", path, (long long)sb.st_size);
        rc = -1;
    } else if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || eh.e_phentsize != sizeof(ElfW(Phdr)) ||
               eh.e_phoff > (uint64_t)sb.st_size || (uint64_t)eh.e_phnum * sizeof(ElfW(Phdr)) > (uint64_t)sb.st_size - eh.e_phoff) {
        snprintf(why, cap, "%s: the ELF header does not fit this machine or the file (%lld bytes; truncated?)", path,
                 (long long)sb.st_size);
        rc = -1;
    } else {
        for (unsigned i = 0; i < eh.e_phnum && rc > 0; i++) {
            ElfW(Phdr) ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph) { rc = -1; break; }
            if (ph.p_type == PT_LOAD && (ph.p_offset > (uint64_t)sb.st_size || ph.p_filesz > (uint64_t)sb.st_size - ph.p_offset)) {
                snprintf(why, cap, "%s: truncated: a segment ends at byte %llu of a %lld-byte file", path,
                         (unsigned long long)(ph.p_offset + ph.p_filesz), (long long)sb.st_size);
                rc = -1;
            }
        }
        if (rc < 0 && !why[0]) snprintf(why, cap, "%s: unreadable program headers", path);
    }
    close(fd);
    return rc;
}

/* Tries dir/file; on success fills the slot. */
static bool try_plugin(qp_context *ctx, qp_backend_slot *s, const char *dir, size_t dlen, const char *file) {
    char path[sizeof s->path];
    if (dlen + strlen(file) + 2 > sizeof path) return false;
    snprintf(path, sizeof path, "%.*s/%s", (int)dlen, dir, file);
    char why[sizeof s->note] = "";
    int ok = plugin_file_ok(path, why, sizeof why);
    if (ok < 0) {
        /* the backend's status, as a missing plugin's is */
        snprintf(s->note, sizeof s->note, "%s", why);
        qp_log(ctx, QP_LOG_WARN, "backend %s: %s", qp_backend_name_at(s->kind), why);
    }
    if (ok <= 0) return false;
    /* NODELETE: GPU drivers loaded by a plugin do not survive being unmapped
     * (thread-local destructors), and leak reports stay symbolised */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *e = dlerror();
        /* a file that exists but does not load is worth a line; absence is not */
        if (e && !strstr(e, "No such file") && !strstr(e, "Not a directory")) {
            qp_log(ctx, QP_LOG_WARN, "backend %s: %s", qp_backend_name_at(s->kind), e);
            snprintf(s->note, sizeof s->note, "%s", e);
        }
        return false;
    }
    qp_backend_entry_fn entry;
    *(void **)&entry = dlsym(h, QP_BACKEND_ENTRY_SYMBOL);
    const qp_backend_ops *ops = entry ? entry() : NULL;
    if (!ops || ops->abi_version != QP_BACKEND_ABI_VERSION || ops->struct_size < sizeof(qp_backend_ops) ||
        strcmp(ops->name, qp_backend_name_at(s->kind))) {
        snprintf(s->note, sizeof s->note, "%s: not a qport %s backend of ABI %u", path, qp_backend_name_at(s->kind),
                 QP_BACKEND_ABI_VERSION);
        qp_log(ctx, QP_LOG_WARN, "%s", s->note);
        dlclose(h);
        return false;
    }
    s->dl = h;
    s->ops = ops;
    snprintf(s->path, sizeof s->path, "%s", path);
    return true;
}


/* Tries the places a plugin may lie relative to a file (libqport.so, or the
 * program when libqport is linked statically): <dir>/qport, the installed
 * layout (<libdir>/qport); <dir> itself, as ggml looks beside its library;
 * <dir>/vk and <parent>/vk, the build tree (libqport.so in build/, programs
 * in build/tools/ or build/tests/, plugins in build/vk, build/cl, build/cuda).
 * `image` may be relative (dladdr gives argv[0] for the program): it is made
 * absolute first, symbolic links resolved; a bare name (a program found on
 * PATH) is no place. */
static bool try_beside(qp_context *ctx, qp_backend_slot *s, const char *image) {
    char *abs = image && strchr(image, '/') ? realpath(image, NULL) : NULL;
    const char *slash = abs ? strrchr(abs, '/') : NULL;
    bool found = false;
    if (slash) {
        const char *file = qp_backend_rows[s->kind].plugin, *sub = qp_backend_rows[s->kind].build_dir;
        size_t n = (size_t)(slash - abs), up = n;
        while (up && abs[up - 1] != '/') up--; /* abs[0..up) is the parent, '/' included */
        char dir[sizeof s->path];
        snprintf(dir, sizeof dir, "%.*s/qport", (int)n, abs);
        found = try_plugin(ctx, s, dir, strlen(dir), file) || (n && try_plugin(ctx, s, abs, n, file));
        if (!found) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)n, abs, sub);
            found = try_plugin(ctx, s, dir, strlen(dir), file);
        }
        if (!found && up) {
            snprintf(dir, sizeof dir, "%.*s%s", (int)up, abs, sub);
            found = try_plugin(ctx, s, dir, strlen(dir), file);
        }
    }
    free(abs);
    return found;
}

/* QPORT_BACKEND_PATH alone when set; else beside the file holding libqport's
 * code (dladdr), beside the running program (/proc/self/exe), and the
 * configured plugin folder, in that order. */
static void find_plugin(qp_context *ctx, qp_registry *r, qp_backend_slot *s) {
    const char *file = qp_backend_rows[s->kind].plugin;
    if (r->settings.backend_path) {
        for (const char *p = r->settings.backend_path; *p;) {
            const char *e = strchr(p, ':');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n && try_plugin(ctx, s, p, n, file)) return;
            p = e ? e + 1 : p + n;
        }
        if (!s->note[0]) snprintf(s->note, sizeof s->note, "%s not found in QPORT_BACKEND_PATH", file);
        return;
    }
    Dl_info info;
    if (dladdr((void *)&qp_registry_get, &info) && try_beside(ctx, s, info.dli_fname)) return;
    if (try_beside(ctx, s, "/proc/self/exe")) return;
    if (try_plugin(ctx, s, QP_PLUGIN_DIR, strlen(QP_PLUGIN_DIR), file)) return;
    if (!s->note[0]) snprintf(s->note, sizeof s->note, "%s not installed (not built, or its runtime was missing at build time)", file);
}

/* Lower is better (docs/backends.md). */
static int device_rank(int backend, qp_device_kind kind) {
    if (kind == QP_DEVICE_REFERENCE) return 90;
    int gpu_rank = qp_backend_rows[backend].gpu_rank;
    if (gpu_rank == 0) return kind == QP_DEVICE_CPU_CLASS ? 70 : 0;
    int api = gpu_rank - 1; /* Vulkan before OpenCL within a class */
    switch (kind) {
    case QP_DEVICE_DISCRETE_GPU: return 10 + api;
    case QP_DEVICE_INTEGRATED_GPU: return 20 + api;
    case QP_DEVICE_VIRTUAL_GPU: return 30 + api;
    default: return 70 + api;
    }
}

static bool spec_matches(const qp_device_spec *sp, const qp_device *d) {
    if (sp->substring) {
        size_t n = strlen(sp->substring);
        for (const char *p = d->info.name; *p; p++)
            if (!strncasecmp(p, sp->substring, n)) return true;
        return false;
    }
    if (sp->backend != d->backend->kind) return false;
    return sp->index < 0 || sp->index == d->info.index;
}

bool qp_device_matches_spec(const qp_device_spec *sp, const qp_device *d) { return spec_matches(sp, d); }

static bool visible(const qp_settings *s, const qp_device *d) {
    if (!s->visible) return true;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s->visible);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        qp_device_spec sp;
        if (qp_device_spec_parse(t, &sp) == QP_OK && spec_matches(&sp, d)) return true;
    }
    return false;
}

static int cmp_rank(const void *a, const void *b) {
    const qp_device *x = *(qp_device *const *)a, *y = *(qp_device *const *)b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->backend->kind != y->backend->kind) return x->backend->kind < y->backend->kind ? -1 : 1;
    return x->info.index < y->info.index ? -1 : x->info.index > y->info.index;
}

static qp_status add_devices(qp_context *ctx, qp_registry *r, qp_backend_slot *s) {
    int n = s->ops->device_count(s->state);
    s->n_devices = 0;
    for (int i = 0; i < n; i++) {
        qp_device *d = calloc(1, sizeof *d);
        qp_device **grown = realloc(r->devices, sizeof(qp_device *) * (r->n_devices + 1));
        if (!d || !grown) { free(d); if (grown) r->devices = grown; return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory"); }
        r->devices = grown;
        d->ctx = ctx;
        d->backend = s;
        d->handle = s->ops->device_get(s->state, i);
        d->info.struct_size = sizeof d->info;
        d->info.cuda_cc = -1;
        qp_status st = d->handle ? s->ops->device_info(d->handle, &d->info) : QP_ERR_INTERNAL;
        if (st) {
            qp_log(ctx, QP_LOG_WARN, "%s device %d: no description (%s); skipped", s->ops->name, i, qp_status_str(st));
            free(d);
            continue;
        }
        snprintf(d->info.backend, sizeof d->info.backend, "%s", s->ops->name);
        d->info.index = i;
        d->info.same_as[0] = 0;
        d->rank = device_rank(s->kind, d->info.kind);
        d->flip_bit = !qp_backend_rows[s->kind].plugin ? -1 : r->settings.flip_bit;
        if (!visible(&r->settings, d)) { free(d); continue; }
        pthread_mutex_init(&d->lock, NULL);
        r->devices[r->n_devices++] = d;
        s->n_devices++;
    }
    return QP_OK;
}

static const char *host_setting(const qp_host *h, const char *name) {
    const qp_registry *r = (const qp_registry *)((const char *)h - offsetof(qp_registry, host));
    return qp_settings_knob(&r->settings, name);
}

/* The settings and the slots, nothing loaded yet. */
static qp_status registry_create(qp_context *ctx, qp_registry **out) {
    qp_registry *r = calloc(1, sizeof *r);
    if (!r) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory");
    qp_status st = qp_settings_read(ctx, &r->settings);
    if (st) { free(r); return st; }
    pthread_mutex_init(&r->imported_lock, NULL);
    r->host = (qp_host){QP_BACKEND_ABI_VERSION, sizeof(qp_host), ctx, qp_host_error, qp_host_log,
                        r->settings.cache_dir, qp_version(), r->settings.validation, host_setting};
    for (int i = 0; i < r->settings.n_backends; i++) r->slots[r->n_slots++].kind = r->settings.backend_order[i];
    *out = r;
    return QP_OK;
}

/* Loads one slot and orders the devices of all loaded slots again. */
static qp_status load_slot(qp_context *ctx, qp_registry *r, qp_backend_slot *s) {
    s->tried = 1;
    if (!qp_backend_rows[s->kind].plugin) s->ops = qp_cpu_backend_ops();
    else find_plugin(ctx, r, s);
    if (!s->ops) { qp_log(ctx, QP_LOG_INFO, "backend %s: %s", qp_backend_name_at(s->kind), s->note); return QP_OK; }
    char why[sizeof s->note - 64];
    if (qp_backend_kinds_check(s->ops, why, sizeof why)) { /* an unhandled kind is a load-time error */
        snprintf(s->note, sizeof s->note, "%.200s: %.400s", s->path[0] ? s->path : "built in", why);
        qp_log(ctx, QP_LOG_WARN, "backend %s: %s", qp_backend_name_at(s->kind), s->note);
        s->ops = NULL;
        return QP_OK;
    }
    initializing = s;
    qp_status st = s->ops->init(&r->host, &s->state);
    initializing = NULL;
    if (st) {
        snprintf(s->note, sizeof s->note, "init failed: %s", qp_last_error(ctx));
        qp_log(ctx, QP_LOG_WARN, "backend %s: %s", s->ops->name, s->note);
        s->state = NULL;
        return QP_OK;
    }
    s->loaded = 1;
    if ((st = add_devices(ctx, r, s))) return st;
    if (!s->n_devices && !s->note[0]) snprintf(s->note, sizeof s->note, "0 devices (see the log at QPORT_LOG=info)");
    if (r->n_devices > 1) qsort(r->devices, r->n_devices, sizeof *r->devices, cmp_rank);
    /* one GPU seen through two APIs is one device: the better-ranked wins */
    for (size_t i = 0; i < r->n_devices; i++) r->devices[i]->info.same_as[0] = 0;
    for (size_t i = 0; i < r->n_devices; i++)
        for (size_t j = 0; j < i; j++) {
            qp_device *a = r->devices[j], *b = r->devices[i];
            if (a->info.has_uuid && b->info.has_uuid && !a->info.same_as[0] &&
                !memcmp(a->info.uuid, b->info.uuid, 16)) {
                snprintf(b->info.same_as, sizeof b->info.same_as, "%s:%d", a->info.backend, a->info.index);
                break;
            }
        }
    return QP_OK;
}

/* kind -1: every backend of the settings; else that one alone. */
static qp_status registry_get(qp_context *ctx, int kind, qp_registry **out) {
    if (!ctx || !out) return QP_ERR_INVALID_ARGUMENT;
    pthread_mutex_t *lock = qp_context_registry_lock(ctx);
    qp_registry **slot = qp_context_registry_slot(ctx);
    pthread_mutex_lock(lock);
    qp_status st = QP_OK;
    if (!*slot) st = registry_create(ctx, slot);
    qp_registry *r = *slot;
    for (int i = 0; !st && r && i < r->n_slots; i++)
        if (!r->slots[i].tried && (kind < 0 || r->slots[i].kind == kind)) st = load_slot(ctx, r, &r->slots[i]);
    if (st && r) { qp_registry_destroy(r); *slot = r = NULL; }
    *out = r;
    pthread_mutex_unlock(lock);
    return st;
}

qp_status qp_registry_get(qp_context *ctx, qp_registry **out) { return registry_get(ctx, -1, out); }
qp_status qp_registry_get_kind(qp_context *ctx, int kind, qp_registry **out) { return registry_get(ctx, kind, out); }

void qp_registry_destroy(qp_registry *r) {
    if (!r) return;
    /* imported devices first: their backends are still loaded */
    while (r->imported) {
        qp_device *d = r->imported;
        r->imported = d->next_imported;
        if (d->backend->ops->device_release) d->backend->ops->device_release(d->backend->state, d->handle);
        pthread_mutex_destroy(&d->lock);
        free(d);
    }
    pthread_mutex_destroy(&r->imported_lock);
    for (size_t i = 0; i < r->n_devices; i++) {
        pthread_mutex_destroy(&r->devices[i]->lock);
        free(r->devices[i]);
    }
    free(r->devices);
    for (int i = r->n_slots - 1; i >= 0; i--) {
        qp_backend_slot *s = &r->slots[i];
        if (s->loaded && s->ops->shutdown) s->ops->shutdown(s->state);
        if (s->dl) dlclose(s->dl);
    }
    free(r);
}
