/* The Vulkan test programs' session, and the runner every linear case of
 * theirs goes through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "vk_tests.h"

const int vk_Ms[] = {1, 2, 3, 5, 8, 16, 17, 64, 256};
const unsigned vk_int_paths[4] = {QP_PATH_GEMV | QP_PATH_INT_DOT, QP_PATH_TILED | QP_PATH_INT_DOT,
                                  QP_PATH_GEMV | QP_PATH_NO_INT_DOT, QP_PATH_TILED | QP_PATH_NO_INT_DOT};
const unsigned *vk_ip = vk_int_paths + 2;
int vk_nip = 2;
long vk_failed;
static clock_t t0;

int vk_open(const char *program) {
    bh_setup(program);
    bh_print_warnings = true;
    const char *val = getenv("QPORT_VK_VALIDATION");
    bh_host.validation = val ? atoi(val) : 1;
    const char *cd = getenv("QPORT_CACHE_DIR");
    if (cd && *cd && strcmp(cd, "off") != 0) {
        snprintf(bh_cache_dir, sizeof bh_cache_dir, "%s", cd);
        mkdir(bh_cache_dir, 0777);
    }
    if (!bh_load("libqport-vk.so", "vulkan")) {
        printf("SKIP: libqport-vk.so not found in QPORT_BACKEND_PATH\n");
        return 77;
    }
    if (bh_ops->init(&bh_host, &bh_state) != QP_OK) {
        printf("FAIL: init: %s\n", bh_err);
        tu_failures++;
        return 1;
    }
    if (bh_ops->device_count(bh_state) == 0) {
        printf("SKIP: no Vulkan device (see the logged reason)\n");
        bh_ops->shutdown(bh_state);
        bh_state = NULL;
        return 77;
    }
    bh_use_device(0);
    const qp_device_info *i = &bh_info;
    printf("device vulkan:0 '%s' (%s, %s), int-dot %d accelerated %d, subgroups %d..%d, max binding %lld\n", i->name,
           i->vendor, i->driver, i->caps.int_dot, i->caps.int_dot_accelerated, i->caps.subgroup_min,
           i->caps.subgroup_max, (long long)i->caps.max_buffer_bytes);
    CHECK(bh_validation_missing == 0 || !bh_host.validation, "validation layer missing");
    if (i->caps.int_dot) {
        vk_ip = vk_int_paths;
        vk_nip = 4;
    }
    t0 = clock();
    return 0;
}

int vk_close(void) {
    if (bh_state) bh_ops->shutdown(bh_state);
    bh_state = bh_dev = NULL;
    if (*bh_cache_dir) { /* the pipeline cache was saved under the driver's pipelineCacheUUID */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ls '%s'/vk-pipelines-*-test.bin >/dev/null 2>&1", bh_cache_dir);
        CHECK(system(cmd) == 0, "no pipeline cache file in %s", bh_cache_dir);
    }
    printf("%s: %ld forward cases, %ld failed; %u validation warnings/errors; %.1f s CPU\n", bh_program, bh_cases,
           vk_failed, bh_validation_msgs, (double)(clock() - t0) / CLOCKS_PER_SEC);
    CHECK(bh_validation_msgs == 0, "%u validation messages", bh_validation_msgs);
    return bh_finish();
}

static void path_name(unsigned p, char *out, size_t cap) {
    snprintf(out, cap, "%s%s%s", p & QP_PATH_GEMV ? "gemv" : p & QP_PATH_TILED ? "tiled" : "auto",
             p & QP_PATH_INT_DOT ? "+int-dot" : "", p & QP_PATH_NO_INT_DOT ? "+no-int-dot" : "");
}

void vk_run_paths(const qp_lin_desc *desc, const unsigned *paths, int n_paths, const int *ms, int n_ms,
                  const uint16_t *x, uint16_t *const *ref, qp_dtype out_dt, const char *name, vk_cmp_fn cmp, void *ctx) {
    int mmax = 0;
    for (int i = 0; i < n_ms; i++) mmax = ms[i] > mmax ? ms[i] : mmax;
    uint16_t *y = malloc(sizeof(uint16_t) * (size_t)mmax * desc->N);
    for (int p = 0; p < n_paths; p++) {
        char pn[64], what[256], how[96];
        path_name(paths[p], pn, sizeof pn);
        void *lin = NULL;
        qp_status st = bh_ops->linear_prepare(bh_dev, desc, paths[p], &lin);
        if (st != QP_OK) {
            CHECK(0, "%s [%s]: prepare: %s", name, pn, bh_err);
            continue;
        }
        for (int i = 0; i < n_ms; i++) {
            int M = ms[i];
            bh_ops->linear_describe(bh_dev, lin, M, how, sizeof how);
            snprintf(what, sizeof what, "%s [%s: %s] M=%d", name, pn, how, M);
            bh_case("%s", what);
            bool ok = bh_forward(lin, x, M, desc->K, desc->N, y, what) &&
                      (cmp ? cmp(y, M, i, ctx, what) : bh_compare_exact(y, ref[i], M, desc->N, out_dt, what) == 0);
            if (!ok) vk_failed++;
            if (bh_verbose) printf("%s %s\n", ok ? "ok  " : "FAIL", what);
        }
        bh_ops->linear_destroy(bh_dev, lin);
    }
    free(y);
}
