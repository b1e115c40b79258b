/* cuda-large: layers of 4096x4096 -- int8 at M 1, 16, 64 and QQQ group
 * 128 at M 16, bit for bit -- and timings on the device: forward on device
 * buffers (20 after a warm-up) and linear_time's cudaEvent figures for
 * int8, QQQ, fp8, W4A16 and fp16 at M 1, 16, 256, 2048, then the cuBLASLt
 * baselines of the same shape. Skipped (77) on the emulator
 * (QPORT_TEST_CUDA_SMALL). */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_tests.h"

static void exact_big(const bh_layer *L, int M, const char *name) {
    int N = L->N, K = L->K;
    uint16_t *x = malloc(2 * (size_t)M * K), *yr = malloc(2 * (size_t)M * N), *yg = malloc(2 * (size_t)M * N);
    bh_x_rows(QP_DTYPE_F16, x, M, K, false);
    CHECK(bh_layer_ref(L, x, M, yr) == QP_OK, "%s: reference", name);
    char dsc[128] = "", what[200];
    if (cuda_run_layer(&L->d, 0, M, x, yg, dsc)) {
        snprintf(what, sizeof what, "%s M=%d [%s]", name, M, dsc);
        cuda_compare_exact(what, QP_DTYPE_F16, yr, yg, M, N);
    }
    free(x); free(yr); free(yg);
}

int cuda_large_run(const char *program, int argc, char **argv) {
    (void)argc;
    (void)argv;
    if (getenv("QPORT_TEST_CUDA_SMALL")) {
        printf("SKIP: cuda-large does not run on the emulator (QPORT_TEST_CUDA_SMALL)\n");
        return 77;
    }
    int rc = cuda_open(program);
    if (rc) return rc == 77 ? 77 : bh_finish();
    const int N = 4096, K = 4096;
    const qp_dtype H = QP_DTYPE_F16;
    bh_layer li, lq, lf, lw, lh;
    bh_int8_layer(&li, H, false, true, true, false, N, K);
    li.d.layer = "int8 4096x4096";
    static const int Mb[] = {1, 16, 64};
    for (int i = 0; i < 3; i++) exact_big(&li, Mb[i], "int8 4096x4096");
    bh_qqq_layer(&lq, 128, false, N, K);
    lq.d.layer = "qqq-g128 4096x4096";
    exact_big(&lq, 16, "qqq 4096x4096");
    /* timings: int8, QQQ, fp8, W4A16 int4 g128 and the unquantized fp16 baseline */
    bh_fp8_layer(&lf, H, QP_FP8_ACT_DYNAMIC_TOKEN, true, false, false, N, K);
    lf.d.layer = "fp8 4096x4096";
    bh_w4a16_layer(&lw, H, QP_PACK_ORDER, true, 128, false, N, K);
    lw.d.layer = "w4a16 4096x4096";
    bh_fw_spec s;
    bh_fw_spec_init(&s, BH_FW_UNQ, H, QP_DTYPE_NONE, QP_OCP_MX_ACT_NONE, N, K, BH_SEL_NONE, false);
    s.wact_amp = 1.0f;
    bool have_h = bh_fw_layer(&lh, &s);
    lh.d.layer = "fp16 4096x4096";
    const qp_lin_desc *descs[5] = {&li.d, &lq.d, &lf.d, &lw.d, &lh.d};
    const char *names[5] = {"int8", "qqq-g128", "fp8", "w4a16", "fp16"};
    static const int Mt[] = {1, 16, 256, 2048};
    for (int li_ = 0; li_ < (have_h ? 5 : 4); li_++) {
        void *lin = NULL;
        if (bh_ops->linear_prepare(bh_dev, descs[li_], 0, &lin) != QP_OK) {
            printf("TIME %s: prepare failed: %s\n", names[li_], bh_err);
            continue;
        }
        for (int i = 0; i < 4; i++) {
            int M = Mt[i];
            void *bx, *by;
            if (bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * K, &bx) != QP_OK) continue;
            if (bh_ops->buffer_alloc(bh_dev, 2 * (size_t)M * N, &by) != QP_OK) {
                bh_ops->buffer_free(bh_dev, bx);
                continue;
            }
            uint16_t *x = calloc((size_t)M * K, 2);
            bh_x_rows(H, x, M, K, false);
            bh_ops->buffer_upload(bh_dev, bx, 0, x, 2 * (size_t)M * K);
            CHECK(bh_ops->linear_reserve(bh_dev, lin, M) == QP_OK && bh_ops->linear_forward(bh_dev, lin, bx, M, by) == QP_OK &&
                  bh_ops->synchronize(bh_dev) == QP_OK, "timed forward %s M=%d: %s", names[li_], M, bh_err);
            double t0 = bh_now();
            for (int it = 0; it < 20; it++) bh_ops->linear_forward(bh_dev, lin, bx, M, by);
            bh_ops->synchronize(bh_dev); /* enqueued: wait for the 20 */
            double us = (bh_now() - t0) / 20 * 1e6;
            char dsc[128] = "";
            bh_ops->linear_describe(bh_dev, lin, M, dsc, sizeof dsc);
            printf("TIME %-8s 4096x4096 M=%-5d %9.1f us %7.1f TOPS  [%s]\n", names[li_], M, us,
                   2.0 * M * N * K / us * 1e-6, dsc);
            double ev[3] = {0}, gm[3] = {0};
            if (bh_ops->linear_time && bh_ops->linear_time(bh_dev, lin, bx, M, by, 3, ev, gm) == QP_OK)
                printf("TIME %-8s 4096x4096 M=%-5d %9.1f us device (cudaEvent), GEMM+epilogue %9.1f us\n", names[li_],
                       M, ev[2] * 1e3, gm[2] * 1e3);
            free(x);
            bh_ops->buffer_free(bh_dev, bx);
            bh_ops->buffer_free(bh_dev, by);
        }
        bh_ops->linear_destroy(bh_dev, lin);
    }
    /* vendor baselines (cuBLASLt) for the same shape */
    const qp_dtype vin[3] = {QP_DTYPE_F16, QP_DTYPE_I8, QP_DTYPE_F8_E4M3FN};
    for (int vi = 0; vi < 3 && bh_ops->vendor_gemm_time; vi++)
        for (int i = 0; i < 4; i++) {
            double vm[3] = {0};
            char vname[128] = "";
            if (bh_ops->vendor_gemm_time(bh_dev, vin[vi], Mt[i], N, K, 3, vm, vname, sizeof vname) == QP_OK)
                printf("TIME vendor   4096x4096 M=%-5d %9.1f us %7.1f TOPS  [%s]\n", Mt[i], vm[2] * 1e3,
                       2.0 * Mt[i] * N * K / (vm[2] * 1e3) * 1e-6, vname);
            else
                printf("TIME vendor   4096x4096 M=%-5d unavailable: %s\n", Mt[i], bh_err);
        }
    bh_layer_free(&li);
    bh_layer_free(&lq);
    bh_layer_free(&lf);
    bh_layer_free(&lw);
    bh_layer_free(&lh);
    return cuda_close();
}
