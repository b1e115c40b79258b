/* The OpenCL test programs' session: plugin, state, device 0, the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cl_tests.h"

const int cl_Ms[] = {1, 2, 3, 5, 8, 16, 17, 64, 256};
const unsigned cl_paths[3] = {QP_PATH_AUTO, QP_PATH_GEMV, QP_PATH_TILED};
const char *const cl_path_name[3] = {"auto", "gemv", "tiled"};
long cl_fw_exact;

int cl_open(const char *program) {
    bh_setup(program);
    if (!bh_load("libqport-cl.so", "opencl")) {
        tu_failures++;
        return 1;
    }
    const char *cd = getenv("QPORT_TEST_CACHE_DIR");
    snprintf(bh_cache_dir, sizeof bh_cache_dir, "%s", cd && *cd ? cd : "cl-test-cache");
    mkdir(bh_cache_dir, 0755);
    if (bh_init(&bh_state) == 0) {
        printf("%s: SKIP: no OpenCL device (%s)\n", program, bh_log);
        bh_ops->shutdown(bh_state);
        bh_state = NULL;
        return 77;
    }
    bh_use_device(0);
    const qp_device_info *i = &bh_info;
    printf("opencl:0: %s | %s | %s | %s | kind %d | mem %llu | int_dot %d | fp16 %d | uuid %d\n", i->name, i->vendor,
           i->driver, i->api_version, (int)i->kind, (unsigned long long)i->memory_bytes, i->caps.int_dot,
           i->caps.fp16_arith, i->has_uuid);
    CHECK(!strcmp(i->backend, "opencl") && i->index == 0 && i->name[0], "info fields");
    return 0;
}

int cl_close(void) {
    if (cl_fw_exact) printf("%s: %ld outputs bit-exact on selection weights\n", bh_program, cl_fw_exact);
    return bh_finish();
}

bool cl_reopen(void) {
    if (bh_state) bh_ops->shutdown(bh_state);
    bh_state = bh_dev = NULL;
    if (bh_init(&bh_state) <= 0) return false;
    bh_dev = bh_ops->device_get(bh_state, 0);
    return bh_dev != NULL;
}

void cl_time_forward(const qp_lin_desc *d, unsigned path, int M, const char *what) {
    void *lin = NULL;
    if (bh_ops->linear_prepare(bh_dev, d, path, &lin) != QP_OK) return;
    void *dx = bh_alloc((size_t)M * d->K * 2), *dy = bh_alloc((size_t)M * d->N * 2);
    uint16_t *x = calloc((size_t)M * d->K, 2);
    if (dx && dy && x) {
        bh_x_rows(d->act_dtype, x, M, d->K, false);
        bh_ops->buffer_upload(bh_dev, dx, 0, x, (size_t)M * d->K * 2);
        bh_ops->linear_forward(bh_dev, lin, dx, M, dy); /* warm-up: PoCL compiles per launch shape */
        double t0 = bh_now();
        bh_ops->linear_forward(bh_dev, lin, dx, M, dy);
        double dt = bh_now() - t0;
        char desc[160];
        bh_ops->linear_describe(bh_dev, lin, M, desc, sizeof desc);
        printf("  %s M=%d %dx%d: %.2f ms (%.2f GOP/s) [%s]\n", what, M, d->N, d->K, dt * 1e3,
               2.0 * M * d->N * (double)d->K / dt * 1e-9, desc);
    }
    free(x);
    bh_free(dx);
    bh_free(dy);
    bh_ops->linear_destroy(bh_dev, lin);
}

qp_lin_desc cl_small_int8_desc(int8_t *w, float *ws) {
    for (int i = 0; i < 64 * 64; i++) w[i] = (int8_t)((i * 37) % 255 - 127);
    for (int i = 0; i < 64; i++) ws[i] = 0.01f;
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = QP_SCHEME_W8A8_INT8;
    d.act_dtype = QP_DTYPE_F16;
    d.N = d.K = 64;
    d.layer = "fault.layer";
    d.act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d.act_symmetric = 1;
    d.w_i8 = w;
    d.w_scale = ws;
    d.w_per_channel = 1;
    return d;
}

qp_status cl_fresh_prepare(bool check_output) {
    void *s2 = NULL, *save = bh_dev;
    qp_status st = QP_ERR_NOT_FOUND;
    if (bh_init(&s2) > 0) {
        bh_dev = bh_ops->device_get(s2, 0);
        int8_t w[64 * 64];
        float ws[64];
        qp_lin_desc d = cl_small_int8_desc(w, ws);
        void *lin = NULL;
        st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
        if (st == QP_OK && check_output) {
            uint16_t x[3 * 64], y[3 * 64], yr[3 * 64];
            bh_x_rows(QP_DTYPE_F16, x, 3, 64, true);
            qp_ref_int8_args a = {QP_DTYPE_F16, x, 3, 64, 64, w, ws, 1, 0, 1, 0, 0, NULL};
            qp_ref_w8a8_int8_forward(NULL, &a, yr);
            if (bh_forward(lin, x, 3, 64, 64, y, "fresh state")) bh_compare_exact(y, yr, 3, 64, QP_DTYPE_F16, "fresh state");
        }
        if (lin) bh_ops->linear_destroy(bh_dev, lin);
    }
    bh_dev = save;
    bh_ops->shutdown(s2);
    return st;
}
