#include "backend_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_expect.h"
#include "plugin_host.h"

const char *bh_program = "backend-test";
const qp_backend_ops *bh_ops;
void *bh_state, *bh_dev;
qp_device_info bh_info;
char bh_cache_dir[1024];
char bh_err[16384];
char bh_log[65536];
int bh_verbose;
bool bh_print_warnings;
unsigned bh_validation_msgs, bh_validation_missing;
long bh_cases, bh_outputs;
uint64_t bh_seed = 20261202ull, bh_rng = 20261202ull;
static bool list_cases;

/* ---- the host table --------------------------------------------------------- */
static qp_status h_error(const qp_context *ctx, qp_status st, const char *fmt, ...) {
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bh_err, sizeof bh_err, fmt, ap);
    va_end(ap);
    return st;
}

static void h_log(const qp_context *ctx, qp_log_level lvl, const char *fmt, ...) {
    (void)ctx;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t n = strlen(bh_log);
    snprintf(bh_log + n, sizeof bh_log - n, "[%d] %s\n", (int)lvl, line);
    if (strstr(line, "vulkan validation:") && lvl >= QP_LOG_WARN) {
        bh_validation_msgs++;
        fprintf(stderr, "VALIDATION: %s\n", line);
    } else if (strstr(line, "validation requested but")) {
        bh_validation_missing++;
        fprintf(stderr, "%s\n", line);
    } else if (bh_verbose || (bh_print_warnings && lvl >= QP_LOG_WARN)) {
        fprintf(stderr, "log[%d]: %s\n", (int)lvl, line);
    }
}

qp_host bh_host = {
    .abi_version = QP_BACKEND_ABI_VERSION,
    .struct_size = sizeof(qp_host),
    .error = h_error,
    .log = h_log,
    .cache_dir = bh_cache_dir,
    .version = "test",
    .validation = 0,
    .setting = tu_host_setting,
};

void bh_setup(const char *program) {
    bh_program = program;
    bh_verbose = getenv("QPORT_TEST_VERBOSE") != NULL;
    list_cases = getenv("QPORT_TEST_LIST_CASES") != NULL;
    const char *s = getenv("QPORT_TEST_SEED");
    if (s && *s) bh_seed = strtoull(s, NULL, 0);
    bh_rng = bh_seed ? bh_seed : 1;
    printf("%s: seed %llu (QPORT_TEST_SEED)\n", program, (unsigned long long)bh_seed);
}

const qp_backend_ops *bh_load(const char *lib, const char *name) {
    const char *paths = getenv("QPORT_BACKEND_PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", paths ? paths : ".");
    void *h = NULL;
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir && !h; dir = strtok_r(NULL, ":", &save)) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s", dir, lib);
        h = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    }
    if (!h) {
        fprintf(stderr, "%s: cannot dlopen %s from QPORT_BACKEND_PATH=%s: %s\n", bh_program, lib, paths ? paths : "",
                dlerror());
        return NULL;
    }
    qp_backend_entry_fn entry;
    void *sym = dlsym(h, QP_BACKEND_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof sym);
    CHECK(entry != NULL, "%s: no %s", lib, QP_BACKEND_ENTRY_SYMBOL);
    const qp_backend_ops *ops = entry ? entry() : NULL;
    CHECK(ops && ops->abi_version == QP_BACKEND_ABI_VERSION && ops->struct_size == sizeof(qp_backend_ops) &&
              (!name || !strcmp(ops->name, name)),
          "%s: ops table (abi %u, name '%s')", lib, ops ? ops->abi_version : 0u, ops && ops->name ? ops->name : "");
    if (!ops || ops->abi_version != QP_BACKEND_ABI_VERSION) return NULL;
    bh_ops = ops;
    return ops;
}

int bh_init(void **state) {
    bh_log[0] = 0;
    *state = NULL;
    qp_status st = bh_ops->init(&bh_host, state);
    CHECK(st == QP_OK, "init: %s", bh_err);
    return st == QP_OK ? bh_ops->device_count(*state) : 0;
}

bool bh_use_device(int i) {
    bh_dev = bh_ops->device_get(bh_state, i);
    memset(&bh_info, 0, sizeof bh_info);
    bh_info.struct_size = sizeof bh_info;
    CHECK(bh_dev && bh_ops->device_info(bh_dev, &bh_info) == QP_OK, "device %d: device_info: %s", i, bh_err);
    return bh_dev != NULL;
}

int bh_finish(void) {
    bh_expect_end();
    if (bh_state) bh_ops->shutdown(bh_state);
    bh_state = bh_dev = NULL;
    printf("%s: %ld cases compared", bh_program, bh_cases);
    if (bh_outputs) printf(", %ld outputs", bh_outputs);
    printf("\n");
    if (tu_failures) fprintf(stderr, "%s: failed with seed %llu (QPORT_TEST_SEED)\n", bh_program,
                             (unsigned long long)bh_seed);
    return tu_finish(bh_program);
}

bool bh_group(const char *group) {
    const char *only = getenv("QPORT_TEST_ONLY");
    if (!only || !*only) return true;
    size_t n = strlen(group);
    for (const char *p = only; (p = strstr(p, group)); p += n)
        if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

void bh_case(const char *fmt, ...) {
    bh_cases++;
    char name[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    bh_expect_case(name); /* the backend's expected failures start and end at cases */
    if (list_cases) printf("CASE %s\n", name);
}

/* ---- data ------------------------------------------------------------------ */
uint64_t bh_next(void) {
    bh_rng ^= bh_rng << 13;
    bh_rng ^= bh_rng >> 7;
    bh_rng ^= bh_rng << 17;
    return bh_rng;
}
uint32_t bh_rand32(void) { return (uint32_t)(bh_next() >> 32); }
float bh_frand(void) { return (float)((bh_next() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }
float bh_frange(float lo, float hi) { return lo + (hi - lo) * (float)((bh_next() >> 40) * (1.0 / 16777216.0)); }
int bh_irand(int lo, int hi) { return lo + (int)(bh_next() % (unsigned long long)(hi - lo + 1)); }
uint16_t bh_enc(qp_dtype dt, float v) { return (uint16_t)qp_format_encode(dt, v); }
float bh_dec(qp_dtype dt, uint16_t b) { return qp_format_decode(dt, b); }
const char *bh_dt_name(qp_dtype dt) { return dt == QP_DTYPE_BF16 ? "bf16" : dt == QP_DTYPE_F16 ? "fp16" : "fp32"; }

double bh_ulp(qp_dtype dt, double v) {
    int e;
    frexp(fabs(v), &e); /* |v| = f 2^e, f in [0.5, 1) */
    int mant = dt == QP_DTYPE_BF16 ? 8 : 11, emin = dt == QP_DTYPE_BF16 ? -125 : -13;
    if (v == 0 || e < emin) e = emin;
    return ldexp(1.0, e - mant);
}

double bh_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bh_x_rows(qp_dtype dt, uint16_t *x, int M, int K, bool special) {
    for (int m = 0; m < M; m++) {
        float mag = (m == 3) ? 0.0f : 0.05f + 4.0f * (float)((m * 7) % 11) / 11.0f;
        float off = (m % 4 == 1) ? 0.5f * mag : 0.0f;
        for (int k = 0; k < K; k++) {
            float v = bh_frand() * mag + off;
            if ((bh_rand32() & 31) == 0) v *= 8.0f;
            x[(size_t)m * K + k] = bh_enc(dt, v);
        }
        if (special && m == 2) x[(size_t)m * K + K / 2] = 0x7FFF; /* a NaN in fp16 and bf16 */
        if (special && m == 6)
            for (int k = 0; k < K; k++) x[(size_t)m * K + k] = bh_enc(dt, 1.5f);
    }
}

void bh_x_blocks(qp_dtype dt, uint16_t *x, int M, int K, int level) {
    const bool bf = dt == QP_DTYPE_BF16;
    const float big = bf ? 3.0e38f : 65504.0f;
    for (int m = 0; m < M; m++) {
        uint16_t *r = x + (size_t)m * K;
        int pat = m % 12;
        if ((level < BH_X_SPECIALS && (pat == 2 || pat == 7 || pat == 10)) || (level < BH_X_EXTREMES && pat == 5)) pat = 0;
        float mag = 0.05f + 4.0f * (float)((m * 7) % 11) / 11.0f;
        for (int k = 0; k < K; k++) {
            float v = bh_frand() * mag;
            switch (pat) {
            case 1: v = bh_frand() * ldexpf(1.0f, (k / 32) % 16 - 8); break; /* blocks of mixed magnitudes */
            case 3: v = 0.0f; break;
            case 4: v = bh_frand() * (bf ? 0x1p-128f : 0x1p-18f); break;   /* subnormal territory */
            case 5: if (k / 16 == 1) v = (k % 2 ? -1.0f : 1.0f) * big; break; /* a huge block */
            case 6: v = 1.5f; break;
            case 8: v = (float)(bh_irand(0, 96) - 48) / 8.0f; break;        /* ties of the fp4/fp6 grids */
            case 9: v = -0.0f; break;
            case 10: v = bh_frand() * (bf ? 1e30f : 60000.0f); break;       /* saturation */
            case 11:
                v = bh_frand() * 2.0f;
                if ((k / 32) % 3 == 1) v *= 40.0f;
                if ((k / 32) % 5 == 2) v *= 0.001f;
                if ((bh_rand32() & 31) == 0) v *= 16.0f;
                break;
            default: break;
            }
            r[k] = bh_enc(dt, v);
        }
        if (pat == 2) {
            r[K > 40 ? 40 : K - 1] = bf ? 0x7FC0 : 0x7E00;
            if (K > 2) r[1] = bf ? 0xFFC0 : 0xFE00; /* a negative NaN */
        }
        if (pat == 7) {
            r[K > 3 ? 3 : 0] = bf ? 0x7F80 : 0x7C00;
            if (K > 4) r[K - 1] = bf ? 0xFF80 : 0xFC00;
        }
    }
}

/* ---- device buffers and forwards ------------------------------------------ */
void *bh_alloc(size_t bytes) {
    void *b = NULL;
    qp_status st = bh_ops->buffer_alloc(bh_dev, bytes, &b);
    CHECK(st == QP_OK, "buffer_alloc(%zu): %s", bytes, bh_err);
    return st == QP_OK ? b : NULL;
}

void bh_free(void *buf) {
    if (buf) bh_ops->buffer_free(bh_dev, buf);
}

bool bh_guard_intact(void *buf, size_t from, size_t to) {
    unsigned char *tmp = malloc(to - from + 1);
    bool ok = tmp && bh_ops->buffer_download(bh_dev, buf, from, tmp, to - from) == QP_OK;
    for (size_t i = 0; ok && i < to - from; i++) ok = tmp[i] == 0xA5;
    free(tmp);
    return ok;
}

bool bh_forward(void *lin, const uint16_t *x, int M, int K, int N, uint16_t *y, const char *what) {
    size_t xb = (size_t)M * K * 2, yb = (size_t)M * N * 2;
    void *dx = bh_alloc(xb ? xb : 2), *dy = bh_alloc(yb + BH_GUARD);
    unsigned char *tmp = malloc(yb + BH_GUARD);
    bool ok = false;
    if (!dx || !dy || !tmp) goto out;
    memset(tmp, 0xA5, yb + BH_GUARD);
    if (bh_ops->buffer_upload(bh_dev, dy, 0, tmp, yb + BH_GUARD) != QP_OK ||
        (xb && bh_ops->buffer_upload(bh_dev, dx, 0, x, xb) != QP_OK)) {
        CHECK(0, "%s: upload: %s", what, bh_err);
        goto out;
    }
    /* ABI 3: scratch is reserved before the forward (the core does it at
     * creation and for a larger M) */
    qp_status st = bh_ops->linear_reserve ? bh_ops->linear_reserve(bh_dev, lin, M) : QP_OK;
    if (st == QP_OK) st = bh_ops->linear_forward(bh_dev, lin, dx, M, dy);
    if (st != QP_OK) {
        CHECK(0, "%s: forward M=%d: %s", what, M, bh_err);
        goto out;
    }
    if (bh_ops->buffer_download(bh_dev, dy, 0, tmp, yb + BH_GUARD) != QP_OK) {
        CHECK(0, "%s: download: %s", what, bh_err);
        goto out;
    }
    int bad = 0;
    for (size_t i = yb; i < yb + BH_GUARD; i++) bad += tmp[i] != 0xA5;
    CHECK(!bad, "%s M=%d: %d guard bytes after y overwritten", what, M, bad);
    memcpy(y, tmp, yb);
    ok = !bad;
out:
    free(tmp);
    bh_free(dx);
    bh_free(dy);
    return ok;
}

int bh_compare_exact(const uint16_t *got, const uint16_t *want, int M, int N, qp_dtype dt, const char *what) {
    int bad = 0;
    for (int i = 0; i < M * N; i++)
        if (got[i] != want[i]) {
            if (bad < 3)
                fprintf(stderr, "  %s: y[%d][%d] = 0x%04x (%g), reference 0x%04x (%g)\n", what, i / N, i % N, got[i],
                        (double)bh_dec(dt, got[i]), want[i], (double)bh_dec(dt, want[i]));
            bad++;
        }
    CHECK(!bad, "%s: %d of %d outputs differ from the reference", what, bad, M * N);
    return bad;
}

int bh_check_bound(const uint16_t *y, const uint16_t *ref, const double *tsum, double c, const double *extra, int M,
                   int N, qp_dtype dt, const char *what) {
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)m * N + n;
            double r = bh_dec(dt, ref[i]), g = bh_dec(dt, y[i]);
            double tol = c * ldexp(1.0, -24) * 1.01 * tsum[i] + 2.0 * bh_ulp(dt, fabs(r)) + (extra ? extra[i] : 0.0);
            bool ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : fabs(g - r) <= tol;
            if (!ok && bad++ < 3)
                fprintf(stderr, "  %s: y[%d][%d] = %.9g, reference %.9g, bound %.3g\n", what, m, n, g, r, tol);
        }
    CHECK(!bad, "%s: %d outputs outside the bound", what, bad);
    return bad;
}
