/* The device's program: the embedded OpenCL C (shaders/cl_*.cl) built at
 * first use with options chosen from the device, and the compiled binary
 * cached on disk.
 *
 * Cache entry: <cache_dir>/opencl-<128-bit key>.bin, the key hashing the
 * source, the build options, the device and platform names, the driver
 * version and the library version. The file carries a magic, the payload
 * size and a checksum; anything that does not verify, or a binary the
 * driver refuses, is deleted and rebuilt from source, never trusted. Writes
 * go to a temporary name first and are renamed into place (atomic). */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_internal.h"

extern const char qp_cl_source[];
extern const size_t qp_cl_source_len;

#define NAME(id, name, fp64) [QP_CL_K_##id] = #name,
#define FP64(id, name, fp64) [QP_CL_K_##id] = fp64,
static const char *const kernel_names[] = {QP_CL_KERNELS(NAME)};
static const unsigned char kernel_fp64[] = {QP_CL_KERNELS(FP64)};
#undef NAME
#undef FP64
/* Every id must reach clCreateKernel with a real name: an empty name
 * in QP_CL_KERNELS fails here, and so does a table shorter than the enum
 * (a hand-written entry that skipped the list). */
#define NAMED(id, name, fp64) _Static_assert(sizeof #name > 1, "QP_CL_K_" #id " has no kernel name");
QP_CL_KERNELS(NAMED)
#undef NAMED
_Static_assert(sizeof kernel_names / sizeof kernel_names[0] == QP_CL_K_COUNT, "a QP_CL_K_* id has no kernel name");
_Static_assert(sizeof kernel_fp64 == QP_CL_K_COUNT, "a QP_CL_K_* id has no fp64 flag");

#define CACHE_MAGIC "QPCLBIN1"
#define LOG_MAX 3000

typedef struct { uint64_t a, b; } key128;

static void fnv(key128 *k, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        k->a = (k->a ^ p[i]) * 0x100000001b3ull;
        k->b = (k->b ^ p[i]) * 0x100000001b3ull;
        k->b ^= k->b >> 29;
    }
    /* separator, so that ("ab","c") and ("a","bc") differ */
    k->a = (k->a ^ 0xFF) * 0x100000001b3ull;
    k->b = (k->b ^ 0xFF) * 0x100000001b3ull;
}

static uint64_t checksum(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static void build_options(qp_cl_device *d, char *out, size_t cap) {
    /* never -cl-mad-enable / -cl-fast-relaxed-math: the epilogues must round
     * like the reference; -cl-std=CL1.2 only where the compiler has it */
    /* -w: the compiler's warnings stay out of the build entirely -- PoCL's
     * clang printed its "36 warnings generated." summary to the process's
     * stderr on a fresh machine, above the first `qport run` table; errors
     * still fail the build and come back in the build log (the error
     * message), and a successful build's log goes to the debug log */
    snprintf(out, cap, "-w %s%s-DQP_WG=64 -DQP_HAS_FP64=%d -DQP_INT_DOT=%d",
             (d->cl_c_major > 1 || d->cl_c_minor >= 2) ? "-cl-std=CL1.2 " : "",
             d->has_cr_div ? "-cl-fp32-correctly-rounded-divide-sqrt " : "", d->has_fp64, d->int_dot_ext);
}

/* The source, or (debug knob QPORT_CL_BREAK_SOURCE=1, for the compile
 * failure test) the source with a syntax error appended. */
static char *make_source(const qp_host *host, size_t *len) {
    const char *brk = qp_host_setting(host, "QPORT_CL_BREAK_SOURCE");
    const char *tail = (brk && brk[0] && strcmp(brk, "0")) ? "\nkernel void qp_broken(void) { qp_injected_syntax_error; }\n" : "";
    size_t n = qp_cl_source_len + strlen(tail);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, qp_cl_source, qp_cl_source_len);
    memcpy(s + qp_cl_source_len, tail, strlen(tail) + 1);
    *len = n;
    return s;
}

static char *build_log(qp_cl_device *d, cl_program prog) {
    qp_cl_api *api = &d->be->api;
    size_t n = 0;
    if (api->clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return NULL;
    char *log = calloc(n + 1, 1);
    if (log && api->clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, n, log, NULL) != CL_SUCCESS) log[0] = 0;
    if (log && strlen(log) > LOG_MAX) strcpy(log + LOG_MAX - 4, "...");
    return log;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n))) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                *len = (size_t)n;
            }
        }
    }
    fclose(f);
    return buf;
}

/* Loads a verified cache entry; NULL (and `why`) when absent or bad. */
static cl_program load_cached(qp_cl_device *d, const char *path, const key128 *key, const char *opts, char *why,
                              size_t why_cap) {
    qp_cl_api *api = &d->be->api;
    size_t len = 0;
    unsigned char *buf = read_file(path, &len);
    why[0] = 0;
    if (!buf) return NULL; /* no entry: not an error */
    cl_program prog = NULL;
    uint64_t size, sum, ka, kb;
    if (len < 40 || memcmp(buf, CACHE_MAGIC, 8)) {
        snprintf(why, why_cap, "bad header");
        goto out;
    }
    memcpy(&size, buf + 8, 8);
    memcpy(&sum, buf + 16, 8);
    memcpy(&ka, buf + 24, 8);
    memcpy(&kb, buf + 32, 8);
    if (size != len - 40 || ka != key->a || kb != key->b || checksum(buf + 40, len - 40) != sum) {
        snprintf(why, why_cap, "size, key or checksum mismatch");
        goto out;
    }
    const unsigned char *bin = buf + 40;
    size_t bin_len = len - 40;
    cl_int bst = CL_SUCCESS, err = CL_SUCCESS;
    prog = api->clCreateProgramWithBinary(d->context, 1, &d->id, &bin_len, &bin, &bst, &err);
    if (!prog || err != CL_SUCCESS || bst != CL_SUCCESS) {
        snprintf(why, why_cap, "clCreateProgramWithBinary: %s", qp_cl_strerror(err != CL_SUCCESS ? err : bst));
        if (prog) api->clReleaseProgram(prog);
        prog = NULL;
        goto out;
    }
    err = api->clBuildProgram(prog, 1, &d->id, opts, NULL, NULL);
    if (err != CL_SUCCESS) {
        snprintf(why, why_cap, "clBuildProgram of the binary: %s", qp_cl_strerror(err));
        api->clReleaseProgram(prog);
        prog = NULL;
    }
out:
    free(buf);
    return prog;
}

/* mkdir -p of the cache folder (the default ~/.cache/qport may not exist). */
static void make_dirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void store_cached(qp_cl_device *d, cl_program prog, const char *path, const key128 *key) {
    qp_cl_api *api = &d->be->api;
    make_dirs(d->be->host->cache_dir);
    size_t bin_len = 0;
    if (api->clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_len, &bin_len, NULL) != CL_SUCCESS ||
        !bin_len)
        return;
    unsigned char *buf = malloc(40 + bin_len);
    if (!buf) return;
    unsigned char *bin = buf + 40;
    if (api->clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        free(buf);
        return;
    }
    uint64_t size = bin_len, sum = checksum(bin, bin_len);
    memcpy(buf, CACHE_MAGIC, 8);
    memcpy(buf + 8, &size, 8);
    memcpy(buf + 16, &sum, 8);
    memcpy(buf + 24, &key->a, 8);
    memcpy(buf + 32, &key->b, 8);
    char tmp[4200];
    /* unique per process and device: two identical GPUs share the key */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%d", path, (long)getpid(), d->index);
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(buf, 1, 40 + bin_len, f) == 40 + bin_len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) == 0) {
        QP_CL_LOG(d->be, QP_LOG_DEBUG, "opencl:%d: program binary cached in %s", d->index, path);
    } else {
        QP_CL_LOG(d->be, QP_LOG_WARN, "opencl:%d: cannot write the program cache %s: %s", d->index, path,
                  strerror(errno));
        remove(tmp);
    }
    free(buf);
}

/* The program for the device's current options: from the cache or built
 * from source (and cached). */
static qp_status build_program(qp_cl_device *d, cl_program *out) {
    qp_cl_api *api = &d->be->api;
    const qp_host *host = d->be->host;
    qp_status st = QP_OK;
    char opts[256];
    build_options(d, opts, sizeof opts);
    size_t src_len = 0;
    char *src = make_source(host, &src_len);
    if (!src) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of memory for the kernel source");

    key128 key = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    fnv(&key, src, src_len);
    fnv(&key, opts, strlen(opts));
    fnv(&key, d->info.name, strlen(d->info.name));
    fnv(&key, d->platform_name, strlen(d->platform_name));
    fnv(&key, d->driver_version, strlen(d->driver_version));
    const char *ver = host->version ? host->version : "";
    fnv(&key, ver, strlen(ver));
    char path[4096] = "";
    if (host->cache_dir && host->cache_dir[0])
        snprintf(path, sizeof path, "%s/opencl-%016llx%016llx.bin", host->cache_dir, (unsigned long long)key.a,
                 (unsigned long long)key.b);

    cl_program prog = NULL;
    if (path[0]) {
        char why[160];
        prog = load_cached(d, path, &key, opts, why, sizeof why);
        if (prog) {
            snprintf(d->build_note, sizeof d->build_note, "cached");
        } else if (why[0]) {
            QP_CL_LOG(d->be, QP_LOG_WARN, "opencl:%d: program cache entry %s rejected (%s); rebuilding", d->index,
                      path, why);
            remove(path);
        }
    }
    if (!prog) {
        cl_int err = CL_SUCCESS;
        const char *srcs[1] = {src};
        prog = api->clCreateProgramWithSource(d->context, 1, srcs, &src_len, &err);
        if (!prog) {
            free(src);
            return qp_cl_error(d, QP_ERR_DEVICE, NULL, "clCreateProgramWithSource failed: %s (%d)",
                             qp_cl_strerror(err), (int)err);
        }
        err = api->clBuildProgram(prog, 1, &d->id, opts, NULL, NULL);
        if (err != CL_SUCCESS) {
            char *log = build_log(d, prog);
            api->clReleaseProgram(prog);
            free(src);
            st = QP_CL_ERR(d, QP_ERR_DEVICE, "opencl:%d (%s): clBuildProgram failed: %s (%d), options \"%s\"; build log:\n%s",
                           d->index, d->info.name, qp_cl_strerror(err), (int)err, opts, log ? log : "(empty)");
            free(log);
            return st;
        }
        snprintf(d->build_note, sizeof d->build_note, "built");
        char *log = build_log(d, prog);
        size_t ll = log ? strlen(log) : 0;
        while (ll && (log[ll - 1] == '\n' || log[ll - 1] == ' ')) log[--ll] = 0;
        if (ll) QP_CL_LOG(d->be, QP_LOG_DEBUG, "opencl:%d: build log:\n%s", d->index, log);
        free(log);
        if (path[0]) store_cached(d, prog, path, &key);
    }
    free(src);
    QP_CL_LOG(d->be, QP_LOG_DEBUG, "opencl:%d: program %s, options \"%s\"", d->index, d->build_note, opts);
    *out = prog;
    return QP_OK;
}

qp_status qp_cl_program_ensure(qp_cl_device *d) {
    if (d->program) return QP_OK;
    qp_status st = qp_cl_device_open(d);
    if (st != QP_OK) return st;
    qp_cl_api *api = &d->be->api;
    cl_program prog = NULL;
    st = build_program(d, &prog);
    if (st == QP_ERR_DEVICE && d->int_dot_ext) {
        /* a driver that lists cl_khr_integer_dot_product but cannot compile
         * dot(): keep the backend, without the int-dot kernels */
        QP_CL_LOG(d->be, QP_LOG_WARN, "opencl:%d: the int-dot build failed; rebuilding with plain int8 kernels",
                  d->index);
        d->int_dot_ext = 0;
        d->has_int_dot = d->int_dot_emulated;
        d->info.caps.int_dot = d->info.caps.int_dot_accelerated = 0;
        st = build_program(d, &prog);
    }
    if (st != QP_OK) return st;
    for (int i = 0; i < QP_CL_K_COUNT; i++) {
        cl_int err = CL_SUCCESS;
        /* fp64-only kernels (the exact routing) are not in the program
         * built without cl_khr_fp64 (cl_moe.cl) */
        if (kernel_fp64[i] && !d->has_fp64) continue;
        d->kernels[i] = api->clCreateKernel(prog, kernel_names[i], &err);
        if (!d->kernels[i]) {
            st = qp_cl_error(d, QP_ERR_DEVICE, NULL, "clCreateKernel(%s) failed: %s (%d)",
                           kernel_names[i], qp_cl_strerror(err), (int)err);
            d->program = prog;
            qp_cl_program_release(d);
            return st;
        }
    }
    d->program = prog;
    return QP_OK;
}

void qp_cl_program_release(qp_cl_device *d) {
    qp_cl_api *api = &d->be->api;
    for (int i = 0; i < QP_CL_K_COUNT; i++) {
        if (d->kernels[i]) api->clReleaseKernel(d->kernels[i]);
        d->kernels[i] = NULL;
    }
    if (d->program) api->clReleaseProgram(d->program);
    d->program = NULL;
}

qp_status qp_cl_launch(qp_cl_device *d, int which, const char *name, const qp_cl_karg *args, int n, cl_uint dims,
                       const size_t *global, const size_t *local, cl_event *ev, const char *layer, const char *prefix,
                       int oom) {
    qp_cl_api *api = &d->be->api;
    cl_kernel k = d->kernels[which];
    for (int i = 0; i < n; i++) {
        cl_int err = api->clSetKernelArg(k, (cl_uint)i, args[i].size, args[i].ptr);
        if (err != CL_SUCCESS)
            return qp_cl_error(d, QP_ERR_INTERNAL, layer, "%sclSetKernelArg(%s, %d) failed: %s (%d)", prefix, name, i,
                               qp_cl_strerror(err), (int)err);
    }
    cl_int err = api->clEnqueueNDRangeKernel(d->queue, k, dims, NULL, global, local, 0, NULL, ev);
    if (err != CL_SUCCESS)
        return qp_cl_error(d, oom && (err == CL_OUT_OF_RESOURCES || err == CL_MEM_OBJECT_ALLOCATION_FAILURE)
                                  ? QP_ERR_OUT_OF_MEMORY : QP_ERR_DEVICE, layer,
                           "%sclEnqueueNDRangeKernel(%s) failed: %s (%d)", prefix, name, qp_cl_strerror(err), (int)err);
    return QP_OK;
}
