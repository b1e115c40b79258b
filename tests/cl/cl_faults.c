/* The cl-faults cases: what the OpenCL plugin refuses, and how it says so.
 * An allocation past the device limit; forced paths the device lacks;
 * short buffers; schemes it does not run; W4A16 / fp8 per-block and
 * block-float descriptors with out-of-range fields (the shapes, paths and
 * missing tensors every backend refuses: the probes of
 * tests/backend/test_{w4a16,block_float,faults}.c); the device_supports
 * answers; QQQ with a K the 4-bit layout cannot pack or q4 / w8 that
 * disagree; a kernel compile failure with the driver's build log; the
 * program cache written, reused, and its flipped, truncated or well-formed
 * garbage entries rebuilt; the cache off; no ICD loader (zero devices and
 * the reason).
 * cl-no-platform (meson: OCL_ICD_VENDORS pointing at an empty folder):
 * zero devices and the reason, nothing else. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cl_tests.h"

static int count_cache_files(char *first, size_t cap) {
    DIR *dir = opendir(bh_cache_dir);
    int n = 0;
    if (!dir) return 0;
    for (struct dirent *e; (e = readdir(dir));)
        if (!strncmp(e->d_name, "opencl-", 7) && strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
            if (!n && first) snprintf(first, cap, "%s/%s", bh_cache_dir, e->d_name);
            n++;
        }
    closedir(dir);
    return n;
}

static void clear_cache(void) {
    DIR *dir = opendir(bh_cache_dir);
    if (!dir) return;
    for (struct dirent *e; (e = readdir(dir));)
        if (!strncmp(e->d_name, "opencl-", 7)) {
            char p[2200];
            snprintf(p, sizeof p, "%s/%s", bh_cache_dir, e->d_name);
            remove(p);
        }
    closedir(dir);
}

/* W4A16 / fp8 per-block: refused tensors, shapes and paths (W4A16's
 * missing or out-of-range tensors, group sizes and forced paths: the
 * probes of tests/backend/test_w4a16.c) */
static void w4a16_fp8b_faults(void) {
    bh_layer L;
    bh_w4a16_layer(&L, QP_DTYPE_F16, QP_PACK_REORDER, false, 32, false, 64, 64);
    L.d.layer = "fault.w4a16";
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, &L.d, QP_PATH_NO_INT_DOT, &lin);
    CHECK(st == QP_OK, "w4a16 no-int-dot: %s", bh_err);
    if (lin) {
        char desc[160];
        bh_ops->linear_describe(bh_dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "gemv") && strstr(desc, "int4->fp32"), "describe w4a16: '%s'", desc);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    bh_layer_free(&L);
    /* fp8 per-block: a non-group activation mode, forced int-dot;
     * per-token-group activations on per-channel weights (K % 128: a probe
     * of tests/backend/test_block_float.c) */
    uint8_t w8[64 * 128] = {0};
    float ws[2] = {1.0f, 1.0f};
    qp_lin_desc f = {0};
    f.struct_size = sizeof f;
    f.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    f.act_dtype = QP_DTYPE_BF16;
    f.N = 64;
    f.K = 128;
    f.layer = "fault.fp8block";
    f.w_u8 = w8;
    f.w_scale = ws;
    f.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    st = bh_ops->linear_prepare(bh_dev, &f, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "fp8-block per-token: %d '%s'", (int)st, bh_err);
    f.act = QP_ACT_FP8_GROUP128;
    st = bh_ops->linear_prepare(bh_dev, &f, QP_PATH_INT_DOT, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "no integer dot product path"), "fp8-block int-dot: %d '%s'",
          (int)st, bh_err);
    f.kind = QP_SCHEME_W8A8_FP8;
    st = bh_ops->linear_prepare(bh_dev, &f, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "per-block weights"), "fp8 group act: %d '%s'", (int)st,
          bh_err);
    f.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    lin = NULL;
    st = bh_ops->linear_prepare(bh_dev, &f, QP_PATH_TILED, &lin);
    CHECK(st == QP_OK, "fp8-block tiled: %s", bh_err);
    if (lin) {
        char desc[160];
        bh_ops->linear_describe(bh_dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "tiled") && strstr(desc, "128x128"), "describe fp8-block: '%s'", desc);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    /* device_supports: what runs and how (PoCL: no fp8 arithmetic) */
    qp_device_info info = {0};
    info.struct_size = sizeof info;
    bh_ops->device_info(bh_dev, &info);
    qp_scheme sch = {0};
    qp_support_info si;
    sch.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    sch.weight.granularity = QP_GRAN_BLOCK;
    bh_ops->device_supports(bh_dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no fp8 arithmetic") && strstr(si.reason, "128x128"),
          "supports fp8-block: %d %s", (int)si.level, si.reason);
    sch.kind = QP_SCHEME_HF_FP8;
    bh_ops->device_supports(bh_dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "128x128"), "supports hf-fp8 block: %s", si.reason);
    memset(&sch, 0, sizeof sch);
    sch.kind = QP_SCHEME_W4A16_INT4;
    sch.weight.group_size = 128;
    bh_ops->device_supports(bh_dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == (info.caps.fp16_arith ? QP_SUPPORT_NATIVE : QP_SUPPORT_EMULATED) && strstr(si.reason, "int4"),
          "supports w4a16: %d %s", (int)si.level, si.reason);
    printf("supports: w4a16 %s (%s)\n", si.level == QP_SUPPORT_NATIVE ? "native" : "emulated", si.reason);
    sch.weight.group_size = 16;
    bh_ops->device_supports(bh_dev, &sch, 1, 256, 256, &si);
    CHECK(si.level == QP_SUPPORT_UNSUPPORTED, "supports w4a16 g16: %d %s", (int)si.level, si.reason);
}

/* block-float / unquantized: refused descs, paths, describe, device_supports */
static void fw_faults(void) {
    static uint8_t codes[64 * 64];
    static float bs[64 * 4], lut[256];
    for (int i = 0; i < 64 * 4; i++) bs[i] = 1.0f;
    for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.kind = d.scheme.kind = QP_SCHEME_OCP_MX;
    d.act_dtype = QP_DTYPE_BF16;
    d.N = 64;
    d.K = 64;
    d.layer = "fault.mx";
    d.w_elem = QP_DTYPE_F4_E2M1;
    d.w_codes = codes;
    d.w_blk = 32;
    d.w_blk_scale = bs;
    d.act = QP_ACT_MX_QDQ;
    d.act_elem = QP_DTYPE_F6_E3M2;
    d.act_mbits = 2;
    d.act_emax = 4;
    /* no w_lut, K not whole blocks, a forced int-dot path, NVFP4's global
     * scale 0, unquantized without w_act: the probes of
     * tests/backend/test_block_float.c */
    d.w_lut = lut;
    lut[3] = 1.25f; /* not the e2m1 table */
    void *lin = NULL;
    qp_status st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "e2m1 table"), "mx bad w_lut: %d '%s'", (int)st, bh_err);
    lut[3] = 1.5f;
    d.act_emax = 2; /* not e3m2's */
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "act_emax"), "mx emax: %d '%s'", (int)st, bh_err);
    d.act_emax = 4;
    d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED, "mx with dynamic fp8 activations: %d '%s'", (int)st, bh_err);
    d.act = QP_ACT_MX_QDQ;
    const char *want[] = {"gemv", "tiled"};
    for (int p = 0; p < 2; p++) {
        lin = NULL;
        st = bh_ops->linear_prepare(bh_dev, &d, cl_paths[p + 1], &lin);
        CHECK(st == QP_OK, "mx %s: %s", want[p], bh_err);
        if (lin) {
            char desc[160];
            bh_ops->linear_describe(bh_dev, lin, 1, desc, sizeof desc);
            CHECK(strstr(desc, want[p]) && strstr(desc, "fp4->fp32") && strstr(desc, "mx-qdq"), "describe mx: '%s'", desc);
            bh_ops->linear_destroy(bh_dev, lin);
        }
    }
    d.kind = QP_SCHEME_W4A8_MXFP4_FP8;
    d.w_blk = 32;
    d.act = QP_ACT_FP8_STATIC_QDQ;
    d.input_scale = -1.0f;
    st = bh_ops->linear_prepare(bh_dev, &d, 0, &lin);
    CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "input_scale"), "w4a8 scale: %d '%s'", (int)st, bh_err);
    qp_scheme sch = {0};
    qp_support_info si;
    static const qp_scheme_kind kinds[] = {QP_SCHEME_OCP_MX, QP_SCHEME_W4A8_MXFP4_FP8, QP_SCHEME_NVFP4};
    for (int i = 0; i < 3; i++) {
        sch.kind = kinds[i];
        bh_ops->device_supports(bh_dev, &sch, 1, 64, 64, &si);
        CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no native"), "supports %d: %d %s", (int)kinds[i],
              (int)si.level, si.reason);
        if (i == 0) printf("supports: ocp-mx emulated (%s)\n", si.reason);
        bh_ops->device_supports(bh_dev, &sch, 1, 64, 40, &si);
        CHECK(si.level == QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "multiple of"), "supports %d K=40: %d %s",
              (int)kinds[i], (int)si.level, si.reason);
    }
    sch.kind = QP_SCHEME_UNQUANTIZED;
    bh_ops->device_supports(bh_dev, &sch, 1, 64, 40, &si);
    CHECK(si.level != QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "fp32 multiply-adds"), "supports unquantized: %s",
          si.reason);
}

static void faults(void) {
    qp_device_info info = {0};
    info.struct_size = sizeof info;
    bh_ops->device_info(bh_dev, &info);
    /* an allocation past the device limit: a clear error, nothing leaked */
    void *b = NULL;
    qp_status st = bh_ops->buffer_alloc(bh_dev, (size_t)info.caps.max_alloc_bytes + 1, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY && strstr(bh_err, "CL_DEVICE_MAX_MEM_ALLOC_SIZE"),
          "huge alloc: status %d, '%s'", (int)st, bh_err);
    st = bh_ops->buffer_alloc(bh_dev, (size_t)1 << 62, &b);
    CHECK(st == QP_ERR_OUT_OF_MEMORY, "2^62-byte alloc: status %d", (int)st);
    /* a layer whose weights cannot be allocated names the layer and tensor */
    /* forced paths the device lacks */
    int8_t w[64 * 64];
    float ws[64];
    qp_lin_desc d = cl_small_int8_desc(w, ws);
    void *lin = NULL;
    if (!info.caps.int_dot) {
        st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_INT_DOT, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "cl_khr_integer_dot_product"),
              "forced int-dot without the extension: status %d, '%s'", (int)st, bh_err);
    }
    /* GEMV|TILED: a probe of tests/backend/test_faults.c */
    lin = NULL;
    st = bh_ops->linear_prepare(bh_dev, &d, QP_PATH_NO_INT_DOT, &lin);
    CHECK(st == QP_OK, "NO_INT_DOT: %s", bh_err);
    if (lin) {
        char desc[128];
        bh_ops->linear_describe(bh_dev, lin, 1, desc, sizeof desc);
        CHECK(strstr(desc, "gemv") && strstr(desc, "plain"), "describe M=1: '%s'", desc);
        bh_ops->linear_describe(bh_dev, lin, 64, desc, sizeof desc);
        CHECK(strstr(desc, "tiled"), "describe M=64: '%s'", desc);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    /* forward argument checks: M = 0 is a no-op, short buffers are refused */
    lin = NULL;
    if (bh_ops->linear_prepare(bh_dev, &d, 0, &lin) == QP_OK) {
        void *bx = bh_alloc(10), *by = bh_alloc(64 * 64 * 2);
        if (bx && by) {
            CHECK(bh_ops->linear_forward(bh_dev, lin, bx, 0, by) == QP_OK, "M = 0: %s", bh_err);
            st = bh_ops->linear_forward(bh_dev, lin, bx, 2, by);
            CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "fault.layer"), "short x: %d '%s'", (int)st,
                  bh_err);
            st = bh_ops->linear_forward(bh_dev, lin, by, 64, bx);
            CHECK(st == QP_ERR_INVALID_ARGUMENT, "short y: %d", (int)st);
            st = bh_ops->buffer_upload(bh_dev, bx, 8, w, 4);
            CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "outside"), "upload past the end: %d", (int)st);
        }
        bh_free(bx);
        bh_free(by);
        bh_ops->linear_destroy(bh_dev, lin);
    }
    /* unsupported schemes say so */
    qp_lin_desc u = d;
    u.kind = QP_SCHEME_KV_CACHE;
    lin = NULL;
    st = bh_ops->linear_prepare(bh_dev, &u, 0, &lin);
    CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "not yet implemented on opencl"), "kv-cache linear: %d '%s'",
          (int)st, bh_err);
    w4a16_fp8b_faults();
    fw_faults();
    qp_scheme sch = {0};
    sch.kind = QP_SCHEME_KV_CACHE;
    qp_support_info si;
    bh_ops->device_supports(bh_dev, &sch, 1, 64, 64, &si);
    CHECK(si.level == QP_SUPPORT_UNSUPPORTED && strstr(si.reason, "not yet implemented on opencl"), "supports kv-cache");
    sch.kind = QP_SCHEME_QQQ_W4A8;
    bh_ops->device_supports(bh_dev, &sch, 1, 64, 64, &si);
    /* PoCL has no cl_khr_integer_dot_product: int8 arithmetic is emulated
     * with int32 multiply-adds, and says so */
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "cl_khr_integer_dot_product"), "supports qqq: %s", si.reason);
    sch.kind = QP_SCHEME_W8A8_FP8;
    bh_ops->device_supports(bh_dev, &sch, 1, 64, 64, &si);
    CHECK(si.level == QP_SUPPORT_EMULATED && strstr(si.reason, "no fp8 arithmetic"), "supports fp8: %s", si.reason);

    /* QQQ: a K the 4-bit layout cannot pack, and q4 / w8 that disagree */
    {
        int8_t q4[64 * 96], w8[64 * 96];
        float sc[64];
        for (int i = 0; i < 64 * 96; i++) { q4[i] = (int8_t)(i % 15 - 7); w8[i] = (int8_t)(16 * q4[i]); }
        for (int i = 0; i < 64; i++) sc[i] = 0.01f;
        qp_lin_desc qd = {0};
        qd.struct_size = sizeof qd;
        qd.kind = QP_SCHEME_QQQ_W4A8;
        qd.act_dtype = QP_DTYPE_F16;
        qd.N = 64;
        qd.K = 80;
        qd.layer = "fault.qqq";
        qd.act = QP_ACT_INT8_DYNAMIC_TOKEN;
        qd.act_symmetric = 1;
        qd.group_size = -1;
        qd.q4 = q4;
        qd.w8 = w8;
        qd.s_channel = sc;
        lin = NULL;
        st = bh_ops->linear_prepare(bh_dev, &qd, 0, &lin);
        CHECK(st == QP_ERR_UNSUPPORTED && strstr(bh_err, "multiple of 32"), "qqq K=80: %d '%s'", (int)st, bh_err);
        qd.K = 96;
        w8[5 * 96 + 40] ^= 1; /* column 5: one weight off its code's value */
        st = bh_ops->linear_prepare(bh_dev, &qd, 0, &lin);
        CHECK(st == QP_ERR_INVALID_ARGUMENT && strstr(bh_err, "q4 and w8 disagree") && strstr(bh_err, "fault.qqq"),
              "qqq q4/w8: %d '%s'", (int)st, bh_err);
        w8[5 * 96 + 40] ^= 1;
        lin = NULL;
        st = bh_ops->linear_prepare(bh_dev, &qd, 0, &lin);
        CHECK(st == QP_OK, "qqq K=96: %s", bh_err);
        if (lin) bh_ops->linear_destroy(bh_dev, lin);
    }

    /* a kernel compile failure carries the driver's build log */
    setenv("QPORT_CL_BREAK_SOURCE", "1", 1);
    st = cl_fresh_prepare(false);
    unsetenv("QPORT_CL_BREAK_SOURCE");
    CHECK(st == QP_ERR_DEVICE && strstr(bh_err, "clBuildProgram failed") && strstr(bh_err, "build log") &&
              strstr(bh_err, "qp_injected_syntax_error"),
          "compile failure: status %d, message '%.600s'", (int)st, bh_err);

    /* program cache: written, reused, and corrupt entries rebuilt */
    clear_cache();
    st = cl_fresh_prepare(true);
    char path[2200] = "";
    CHECK(st == QP_OK && count_cache_files(path, sizeof path) == 1, "cache not written (%s)", bh_err);
    if (path[0]) {
        bh_host.validation = 0;
        st = cl_fresh_prepare(true);
        CHECK(st == QP_OK && !strstr(bh_log, "rejected"), "cached load: %s", bh_log);
        /* 1: flip a payload byte -> checksum mismatch */
        FILE *f = fopen(path, "r+b");
        if (f) {
            fseek(f, 100, SEEK_SET);
            int c = fgetc(f);
            fseek(f, 100, SEEK_SET);
            fputc(c ^ 0x5A, f);
            fclose(f);
        }
        st = cl_fresh_prepare(true);
        CHECK(st == QP_OK && strstr(bh_log, "rejected (size, key or checksum mismatch)"),
              "corrupt (checksum) entry not rebuilt: %s", bh_log);
        /* 2: truncated file */
        struct stat sb;
        if (stat(path, &sb) == 0 && truncate(path, sb.st_size / 2) == 0) {
            st = cl_fresh_prepare(true);
            CHECK(st == QP_OK && strstr(bh_log, "rejected"), "truncated entry not rebuilt: %s", bh_log);
        }
        /* 3: a well-formed entry (valid checksum) whose payload is garbage:
         * the driver refuses the binary, and it is rebuilt */
        f = fopen(path, "r+b");
        unsigned char hdr[40];
        if (f && fread(hdr, 1, 40, f) == 40) {
            uint64_t size;
            memcpy(&size, hdr + 8, 8);
            unsigned char *junk = malloc(size);
            for (uint64_t i = 0; junk && i < size; i++) junk[i] = (unsigned char)(i * 13 + 7);
            uint64_t h = 0xcbf29ce484222325ull;
            for (uint64_t i = 0; junk && i < size; i++) h = (h ^ junk[i]) * 0x100000001b3ull;
            memcpy(hdr + 16, &h, 8);
            fseek(f, 0, SEEK_SET);
            fwrite(hdr, 1, 40, f);
            if (junk) fwrite(junk, 1, size, f);
            free(junk);
        }
        if (f) fclose(f);
        st = cl_fresh_prepare(true);
        CHECK(st == QP_OK && strstr(bh_log, "rejected (clCreateProgramWithBinary") ,
              "garbage binary not rebuilt: %s", bh_log);
        st = cl_fresh_prepare(true);
        CHECK(st == QP_OK && !strstr(bh_log, "rejected"), "rebuilt entry not reused: %s", bh_log);
    }
    /* QPORT_CACHE_DIR=off (bh_cache_dir ""): built, nothing written */
    clear_cache();
    bh_host.cache_dir = "";
    st = cl_fresh_prepare(true);
    bh_host.cache_dir = bh_cache_dir;
    CHECK(st == QP_OK && count_cache_files(NULL, 0) == 0, "cache off: %d, %d files", (int)st, count_cache_files(NULL, 0));
    /* the ICD loader missing: zero devices and a logged reason */
    setenv("QPORT_CL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
    void *s3 = NULL;
    int n = bh_init(&s3);
    unsetenv("QPORT_CL_LIBRARY");
    CHECK(n == 0 && strstr(bh_log, "0 devices: no OpenCL ICD loader"), "no loader: %d devices, log '%s'", n, bh_log);
    bh_ops->shutdown(s3);
}

void cl_faults_cases(void) { faults(); }

int cl_no_platform_run(const char *program, int argc, char **argv) {
    (void)program; /* its own name: the test's */
    (void)argc;
    (void)argv;
    bh_setup("cl-no-platform");
    if (!bh_load("libqport-cl.so", "opencl")) {
        tu_failures++;
        return bh_finish();
    }
    int n = bh_init(&bh_state);
    CHECK(n == 0 && strstr(bh_log, "0 devices"), "no platform: %d devices, log '%s'", n, bh_log);
    printf("cl-no-platform: %s", bh_log);
    return bh_finish();
}
