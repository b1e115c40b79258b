/* cl-modes: the plugin's test knobs, each on a fresh state of the plugin
 * and a subset of the cases:
 *   QPORT_CL_DIV=fp64 / fma / fma-test: the division strategies of devices
 *     without correctly rounded '/' ("fma-test" starts 2 ulp off, so the
 *     fma correction really works);
 *   QPORT_CL_FAKE_INT_DOT=1: the *_dot kernels (a plain dot where the device
 *     lacks cl_khr_integer_dot_product), forced and automatic; =ext: a
 *     driver listing the extension whose compiler rejects dot(): rebuilt
 *     without them, and a forced int-dot path then refused;
 *   QPORT_CL_WEIGHT_CHUNK: weights split in column chunks, every scheme,
 *     both kernels, a partial last chunk; a chunk smaller than a column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_tests.h"

static void div_subset(void) {
    static const int ms[] = {1, 17};
    cl_int8(QP_DTYPE_F16, 1, 1, 1, 0, 64, 160, ms, 2, 0);  /* x / s */
    cl_int8(QP_DTYPE_BF16, 0, 0, 1, 1, 33, 100, ms, 2, 0); /* (mx-mn)/255, mn/s, 1/s */
    cl_int8(QP_DTYPE_F16, 0, 1, 0, 0, 33, 100, ms, 2, 0);  /* amax/127, 127/amax */
    cl_fp8(QP_DTYPE_F16, 2, 0, 0, 1, 0, 96, ms, 2);        /* x / s, exact via identity */
    cl_fp8(QP_DTYPE_BF16, 0, 0, 1, 1, 0, 96, ms, 2);       /* 1/s */
    cl_fp8_block(QP_DTYPE_F16, 0, 0, 1, 0, 128, ms, 2);    /* amax/448, x / s, exact via identity */
    cl_fp8_block(QP_DTYPE_BF16, 1, 0, 1, 0, 128, ms, 2);   /* ue8m0: 1/s */
    /* block-float qdq on selection weights: NVFP4 1/(sf/g), sf/g; W4A8 x / s */
    cl_fw(BH_FW_NVFP4, QP_DTYPE_F16, QP_DTYPE_F4_E2M1, 0, 1, 0, 1, 48, 48, ms, 2);
    cl_fw(BH_FW_W4A8, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 1, 1, 1, 64, 64, ms, 2);
    cl_kv(QP_DTYPE_F16, 0.0173f); /* x / scale */
}

static void int_dot_subset(void) {
    static const int ms[] = {1, 5, 17, 64};
    cl_int8(QP_DTYPE_F16, 0, 0, 1, 1, 33, 100, ms, 4, QP_PATH_INT_DOT);
    cl_int8(QP_DTYPE_BF16, 1, 0, 0, 0, 64, 160, ms, 4, QP_PATH_INT_DOT);
    cl_qqq(128, 1, 64, 256, ms, 4, QP_PATH_INT_DOT);
    cl_qqq(-1, 0, 64, 128, ms, 4, 0);
}

/* QPORT_CL_WEIGHT_CHUNK=4096: 32-column chunks here */
static void chunk_subset(void) {
    static const int ms[] = {1, 17, 64};
    cl_int8(QP_DTYPE_F16, 0, 0, 1, 1, 200, 100, ms, 3, 0);
    cl_fp8(QP_DTYPE_BF16, 2, 1, 1, 0, 200, 100, ms, 3);
    cl_qqq(128, 1, 192, 256, ms, 3, 0);
    cl_w4a16(QP_DTYPE_BF16, QP_PACK_REORDER, 0, 64, 1, 0, 200, 256, ms, 3); /* 32 columns of 128 bytes a chunk */
    cl_fp8_block(QP_DTYPE_F16, 0, 1, 0, 200, 128, ms, 3);                     /* 32 columns of 128 bytes a chunk */
    cl_fw(BH_FW_NVFP4, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, 0, 0, 1, 0, 200, 256, ms, 3); /* fp4: 128 bytes a row */
    cl_fw(BH_FW_MX, QP_DTYPE_F16, QP_DTYPE_F8_E4M3FN, QP_OCP_MX_ACT_MXFP8, 0, 0, 0, 100, 128, ms, 3);
    cl_fw(BH_FW_UNQ, QP_DTYPE_F16, 0, 0, 0, 1, 0, 100, 64, ms, 3);
    int8_t w[96 * 64] = {0};
    float ws[96];
    qp_lin_desc d = cl_small_int8_desc(w, ws);
    for (int n = 64; n < 96; n++) ws[n] = 0.01f;
    d.N = 96; /* 64 columns of 64 bytes per 4096-byte chunk: 2 chunks */
    void *lin = NULL;
    char desc[160] = "";
    if (bh_ops->linear_prepare(bh_dev, &d, 0, &lin) == QP_OK) {
        bh_ops->linear_describe(bh_dev, lin, 1, desc, sizeof desc);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    CHECK(strstr(desc, "2 weight chunks") != NULL, "96x64 with 4096-byte chunks: '%s'", desc);
    printf("weight chunks: %s\n", desc);
}

/* the path a 64x64 int8 layer takes for M rows, or "" */
static void describe_small(int M, char *desc, size_t cap) {
    int8_t w[64 * 64];
    float ws[64];
    qp_lin_desc d = cl_small_int8_desc(w, ws);
    void *lin = NULL;
    desc[0] = 0;
    if (bh_ops->linear_prepare(bh_dev, &d, 0, &lin) == QP_OK) {
        bh_ops->linear_describe(bh_dev, lin, M, desc, cap);
        bh_ops->linear_destroy(bh_dev, lin);
    }
}

int main(void) {
    int rc = cl_open("cl-modes");
    if (rc) return rc == 77 ? 77 : bh_finish();
    const int int_dot = bh_info.caps.int_dot;
    char desc[160];
    /* division strategies: fp64 and fma-corrected, each on a fresh program */
    static const char *modes[] = {"fp64", "fma", "fma-test"};
    for (int i = 0; i < 3 && bh_group("div"); i++) {
        setenv("QPORT_CL_DIV", modes[i], 1);
        if (cl_reopen()) {
            div_subset();
            describe_small(1, desc, sizeof desc);
            printf("division mode %s: %s\n", modes[i], desc);
        }
        unsetenv("QPORT_CL_DIV");
    }
    if (bh_group("int-dot")) {
        /* the int-dot kernels, where the device has the extension for real or
         * through the test knob */
        if (!int_dot) setenv("QPORT_CL_FAKE_INT_DOT", "1", 1);
        if (cl_reopen()) {
            int_dot_subset();
            describe_small(64, desc, sizeof desc);
            CHECK(strstr(desc, "int-dot") != NULL, "int-dot path not taken: '%s'", desc);
            printf("int-dot kernels: %s\n", desc);
        }
        /* a driver listing the extension whose compiler rejects dot(): the
         * program is rebuilt without the int-dot kernels */
        if (!int_dot) {
            setenv("QPORT_CL_FAKE_INT_DOT", "ext", 1);
            qp_status st = cl_fresh_prepare(true);
            CHECK(st == QP_OK && strstr(bh_log, "the int-dot build failed"), "int-dot build fallback: %d '%s'", (int)st,
                  bh_log);
            /* ... and a forced int-dot path is then refused, not run plain */
            if (cl_reopen()) {
                int8_t w[64 * 64];
                float ws[64];
                qp_lin_desc d = cl_small_int8_desc(w, ws);
                void *lin = NULL;
                st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_INT_DOT, &lin);
                CHECK(st == QP_ERR_UNSUPPORTED, "forced int-dot after the fallback: %d '%s'", (int)st, bh_err);
                if (lin) bh_ops->linear_destroy(bh_dev, lin);
            }
        }
        unsetenv("QPORT_CL_FAKE_INT_DOT");
    }
    if (bh_group("chunks")) {
        setenv("QPORT_CL_WEIGHT_CHUNK", "4096", 1);
        if (cl_reopen()) chunk_subset();
        setenv("QPORT_CL_WEIGHT_CHUNK", "1000", 1); /* < 32 columns of 64 bytes */
        if (cl_reopen()) {
            int8_t w[64 * 64];
            float ws[64];
            qp_lin_desc d = cl_small_int8_desc(w, ws);
            void *lin = NULL;
            qp_status st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
            CHECK(st == QP_ERR_OUT_OF_MEMORY && strstr(bh_err, "does not fit") && strstr(bh_err, "w_i8"),
                  "chunk too small: %d '%s'", (int)st, bh_err);
            if (lin) bh_ops->linear_destroy(bh_dev, lin);
        }
        unsetenv("QPORT_CL_WEIGHT_CHUNK");
    }
    return cl_close();
}
