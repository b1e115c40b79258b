/* Platforms and devices: every device of every platform, its capabilities
 * from exact extension tokens (a substring test would take
 * "cl_khr_fp16_foo" for "cl_khr_fp16"), and what each scheme needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

#ifndef CL_DEVICE_UUID_KHR
#define CL_DEVICE_UUID_KHR 0x106A
#endif
#ifndef CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR
#define CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR 0x1073
#define CL_DEVICE_INTEGER_DOT_PRODUCT_ACCELERATION_PROPERTIES_8BIT_KHR 0x1074
#define CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_KHR (1 << 1)
#endif
#ifndef CL_DEVICE_SUB_GROUP_SIZES_INTEL
#define CL_DEVICE_SUB_GROUP_SIZES_INTEL 0x4108
#endif

/* 1 when the space-separated list `exts` holds exactly `token`. */
static int has_token(const char *exts, const char *token) {
    size_t n = strlen(token);
    for (const char *p = exts; p && *p;) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if ((size_t)(e - p) == n && !memcmp(p, token, n)) return 1;
        p = e;
    }
    return 0;
}

static void dev_string(qp_cl_api *api, cl_device_id id, cl_device_info what, char *out, size_t cap) {
    out[0] = 0;
    if (api->clGetDeviceInfo(id, what, cap, out, NULL) != CL_SUCCESS) out[0] = 0;
    out[cap - 1] = 0;
}

static void copy_str(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src);
}

/* "OpenCL C 1.2 PoCL" -> 1, 2 */
static void parse_version(const char *s, const char *prefix, int *major, int *minor) {
    *major = 1;
    *minor = 0;
    if (!strncmp(s, prefix, strlen(prefix))) sscanf(s + strlen(prefix), "%d.%d", major, minor);
}

void qp_cl_fill_device(qp_cl_backend *be, qp_cl_device *d) {
    qp_cl_api *api = &be->api;
    qp_device_info *in = &d->info;
    memset(in, 0, sizeof *in);
    in->struct_size = sizeof *in;
    copy_str(in->backend, sizeof in->backend, "opencl");
    in->index = d->index;
    in->cuda_cc = -1;
    dev_string(api, d->id, CL_DEVICE_NAME, in->name, sizeof in->name);
    dev_string(api, d->id, CL_DEVICE_VENDOR, in->vendor, sizeof in->vendor);
    dev_string(api, d->id, CL_DRIVER_VERSION, d->driver_version, sizeof d->driver_version);
    dev_string(api, d->id, CL_DEVICE_OPENCL_C_VERSION, d->cl_c_version, sizeof d->cl_c_version);
    parse_version(d->cl_c_version, "OpenCL C ", &d->cl_c_major, &d->cl_c_minor);
    char ver[128];
    dev_string(api, d->id, CL_DEVICE_VERSION, ver, sizeof ver);
    int vmaj, vmin;
    parse_version(ver, "OpenCL ", &vmaj, &vmin);
    snprintf(in->api_version, sizeof in->api_version, "OpenCL %d.%d", vmaj, vmin);
    d->platform_name[0] = 0;
    api->clGetPlatformInfo(d->platform, CL_PLATFORM_NAME, sizeof d->platform_name, d->platform_name, NULL);
    d->platform_name[sizeof d->platform_name - 1] = 0;
    snprintf(in->driver, sizeof in->driver, "%.50s %.40s (%.30s)", d->platform_name, d->driver_version,
             d->cl_c_version);

    cl_device_type type = 0;
    api->clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    cl_bool unified = CL_FALSE;
    api->clGetDeviceInfo(d->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    /* Any OpenCL CPU device (PoCL, Intel's CPU runtime) is CPU-class. */
    cl_uint vendor_id = 0;
    api->clGetDeviceInfo(d->id, CL_DEVICE_VENDOR_ID, sizeof vendor_id, &vendor_id, NULL);
    qp_cl_tuning_pick(be->host, type, vendor_id, &d->tuning);
    if (type & CL_DEVICE_TYPE_CPU) in->kind = QP_DEVICE_CPU_CLASS;
    else if (unified) in->kind = QP_DEVICE_INTEGRATED_GPU;
    else in->kind = QP_DEVICE_DISCRETE_GPU;

    cl_ulong gmem = 0, alloc = 0, lmem = 0;
    api->clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof gmem, &gmem, NULL);
    api->clGetDeviceInfo(d->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    api->clGetDeviceInfo(d->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL);
    d->max_wg = 1;
    api->clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d->max_wg, &d->max_wg, NULL);
    in->memory_bytes = gmem;
    d->max_alloc = alloc;
    /* weights larger than one allocation are split in column chunks; the
     * test knob makes chunks small enough to test that on small layers */
    d->weight_chunk_max = alloc;
    const char *wc = qp_host_setting(be->host, "QPORT_CL_WEIGHT_CHUNK");
    if (wc && wc[0]) {
        unsigned long long v = strtoull(wc, NULL, 10);
        if (v > 0 && v < d->weight_chunk_max) d->weight_chunk_max = v;
    }

    size_t elen = 0;
    char *exts = NULL;
    if (api->clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, 0, NULL, &elen) == CL_SUCCESS && elen) {
        exts = calloc(elen + 1, 1);
        if (exts && api->clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, elen, exts, NULL) != CL_SUCCESS) exts[0] = 0;
    }
    const char *ex = exts ? exts : "";
    d->has_fp16 = has_token(ex, "cl_khr_fp16");
    d->has_fp64 = has_token(ex, "cl_khr_fp64");
    d->has_subgroups = has_token(ex, "cl_khr_subgroups") || has_token(ex, "cl_intel_subgroups");
    d->has_int_dot = 0;
    int dot_accel = 0;
    if (has_token(ex, "cl_khr_integer_dot_product")) {
        cl_bitfield caps = 0;
        if (api->clGetDeviceInfo(d->id, CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR, sizeof caps, &caps, NULL) ==
                CL_SUCCESS &&
            (caps & CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_KHR))
            d->has_int_dot = d->int_dot_ext = 1;
        cl_bool props[6] = {0};
        if (api->clGetDeviceInfo(d->id, CL_DEVICE_INTEGER_DOT_PRODUCT_ACCELERATION_PROPERTIES_8BIT_KHR, sizeof props,
                                 props, NULL) == CL_SUCCESS)
            dot_accel = props[0] ? 1 : 0; /* signed_accelerated */
    }
    /* Test knob: run the *_dot kernels with a plain-C dot on devices
     * without the extension, so their indexing is proven on PoCL too. */
    const char *fake = qp_host_setting(be->host, "QPORT_CL_FAKE_INT_DOT");
    if (!d->has_int_dot && fake && !strcmp(fake, "ext")) {
        /* pretend the extension exists: dot() then fails to compile, which
         * tests the rebuild without int-dot (cl_program.c) */
        d->has_int_dot = d->int_dot_ext = 1;
    } else if (!d->has_int_dot && fake && fake[0] && strcmp(fake, "0")) {
        d->has_int_dot = 1;
        d->int_dot_emulated = 1;
    }
    cl_device_fp_config fpc = 0;
    api->clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fpc, &fpc, NULL);
    d->has_cr_div = (fpc & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
    if (!(fpc & CL_FP_DENORM))
        QP_CL_LOG(be, QP_LOG_INFO, "opencl: %s flushes fp32 denormals: results below 2^-126 may differ from the "
                  "reference", in->name);
    /* divisions: the device's correctly rounded '/' where it has one, else
     * through double, else fma-corrected; QPORT_CL_DIV forces one (tests) */
    const char *dv = qp_host_setting(be->host, "QPORT_CL_DIV");
    if (dv && !strcmp(dv, "fp64") && d->has_fp64) d->div_mode = QP_CL_DIV_FP64;
    else if (dv && !strcmp(dv, "fma")) d->div_mode = QP_CL_DIV_FMA;
    else if (dv && !strcmp(dv, "fma-test")) d->div_mode = QP_CL_DIV_FMA_TEST;
    else if (d->has_cr_div) d->div_mode = QP_CL_DIV_NATIVE;
    else if (d->has_fp64) d->div_mode = QP_CL_DIV_FP64;
    else d->div_mode = QP_CL_DIV_FMA;

    if (has_token(ex, "cl_khr_device_uuid") &&
        api->clGetDeviceInfo(d->id, CL_DEVICE_UUID_KHR, sizeof in->uuid, in->uuid, NULL) == CL_SUCCESS)
        in->has_uuid = 1;

    qp_device_caps *c = &in->caps;
    c->int8_storage = 1; /* char loads/stores are core since OpenCL 1.1 */
    c->int8_arith = 1;
    c->fp16_arith = d->has_fp16;
    c->bf16 = 1;         /* by bit operations in the kernels */
    c->int_dot = d->has_int_dot;
    c->int_dot_accelerated = d->has_int_dot ? dot_accel : 0;
    c->tensor_core_int8 = 0;
    c->tensor_core_fp8 = 0;
    c->subgroup_min = c->subgroup_max = -1;
    if (has_token(ex, "cl_intel_subgroups")) {
        size_t sizes[8] = {0}, got = 0;
        if (api->clGetDeviceInfo(d->id, CL_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof sizes, sizes, &got) == CL_SUCCESS) {
            size_t n = got / sizeof(size_t);
            for (size_t i = 0; i < n && i < 8; i++) {
                if (c->subgroup_min < 0 || (int)sizes[i] < c->subgroup_min) c->subgroup_min = (int)sizes[i];
                if ((int)sizes[i] > c->subgroup_max) c->subgroup_max = (int)sizes[i];
            }
        }
    }
    c->shared_mem_bytes = (int64_t)lmem;
    c->max_buffer_bytes = (int64_t)alloc;
    c->max_alloc_bytes = (int64_t)alloc;
    free(exts);
}

void qp_cl_devices_enumerate(qp_cl_backend *be) {
    qp_cl_api *api = &be->api;
    cl_uint np = 0;
    cl_int err = api->clGetPlatformIDs(0, NULL, &np);
    if (err != CL_SUCCESS || np == 0) {
        QP_CL_LOG(be, QP_LOG_INFO, "opencl: 0 devices: clGetPlatformIDs found no platform (%s, %d)",
                  err == CL_SUCCESS ? "none installed" : qp_cl_strerror(err), (int)err);
        return;
    }
    cl_platform_id plats[16];
    if (np > 16) np = 16;
    if ((err = api->clGetPlatformIDs(np, plats, NULL)) != CL_SUCCESS) {
        QP_CL_LOG(be, QP_LOG_INFO, "opencl: 0 devices: clGetPlatformIDs failed (%s)", qp_cl_strerror(err));
        return;
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        err = api->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (err != CL_SUCCESS || nd == 0) {
            QP_CL_LOG(be, QP_LOG_INFO, "opencl: platform %u has no device (%s)", p, qp_cl_strerror(err));
            continue;
        }
        cl_device_id ids[QP_CL_MAX_DEVICES];
        if (nd > QP_CL_MAX_DEVICES) nd = QP_CL_MAX_DEVICES;
        if (api->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) continue;
        for (cl_uint i = 0; i < nd && be->n_devices < QP_CL_MAX_DEVICES; i++) {
            cl_bool avail = CL_TRUE, compiler = CL_TRUE;
            api->clGetDeviceInfo(ids[i], CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
            api->clGetDeviceInfo(ids[i], CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
            if (!avail || !compiler) {
                QP_CL_LOG(be, QP_LOG_INFO, "opencl: platform %u device %u skipped: %s", p, i,
                          !avail ? "not available" : "no compiler");
                continue;
            }
            qp_cl_device *d = &be->devices[be->n_devices];
            memset(d, 0, sizeof *d);
            d->be = be;
            d->index = be->n_devices;
            d->platform = plats[p];
            d->id = ids[i];
            qp_cl_fill_device(be, d);
            QP_CL_LOG(be, QP_LOG_INFO, "opencl:%d: %s (%s, %s)", d->index, d->info.name, d->info.driver,
                      d->cl_c_version);
            be->n_devices++;
        }
    }
    if (!be->n_devices) QP_CL_LOG(be, QP_LOG_INFO, "opencl: 0 devices: no usable device on %u platform(s)", np);
}

qp_status qp_cl_device_info(void *dev, qp_device_info *out) {
    qp_cl_device *d = dev;
    if (!out) return QP_ERR_INVALID_ARGUMENT;
    size_t sz = out->struct_size ? out->struct_size : sizeof *out;
    if (sz > sizeof *out) sz = sizeof *out;
    memcpy(out, &d->info, sz);
    out->struct_size = sz;
    return QP_OK;
}

static void set_support(qp_support_info *out, qp_support_level lvl, const char *reason) {
    out->level = lvl;
    snprintf(out->reason, sizeof out->reason, "%s", reason);
}

/* Block formats need K to be a multiple of their block (K <= 0: not known
 * yet): 0 with `out` set unsupported for `why` when it is not, else 1. */
static int k_fits_blocks(qp_support_info *out, int K, int block, const char *why) {
    if (K > 0 && K % block) {
        set_support(out, QP_SUPPORT_UNSUPPORTED, why);
        return 0;
    }
    return 1;
}

qp_status qp_cl_device_supports(void *dev, const qp_scheme *scheme, int M, int N, int K, qp_support_info *out) {
    (void)M; (void)N;
    if (!dev || !scheme || !out) return QP_ERR_INVALID_ARGUMENT;
    const qp_cl_device *d = dev;
    /* a scheme whose arithmetic the device lacks runs emulated, and
     * says which feature is missing */
    int int_dot = d->has_int_dot;
    switch (scheme->kind) {
    case QP_SCHEME_W8A8_INT8:
    case QP_SCHEME_QQQ_W4A8:
        if (int_dot) set_support(out, QP_SUPPORT_NATIVE, "cl_khr_integer_dot_product 4x8-bit dot");
        else set_support(out, QP_SUPPORT_EMULATED, "no cl_khr_integer_dot_product: int8 products as int32 multiply-adds");
        break;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
        if (scheme->weight.granularity == QP_GRAN_BLOCK)
            set_support(out, QP_SUPPORT_EMULATED, "no fp8 arithmetic in OpenCL C: e4m3 decoded to fp32, fp32 "
                                                  "multiply-adds, 128x128 weight blocks, activation groups of 128");
        else if (scheme->activation.granularity == QP_GRAN_GROUP)
            set_support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: fp8 per-token-group activations only with per-block weights");
        else
            set_support(out, QP_SUPPORT_EMULATED, "no fp8 arithmetic in OpenCL C: e4m3 decoded to fp32, fp32 multiply-adds");
        break;
    case QP_SCHEME_W8A8_FP8_BLOCK:
        set_support(out, QP_SUPPORT_EMULATED, "no fp8 arithmetic in OpenCL C: e4m3 decoded to fp32, fp32 "
                                              "multiply-adds, 128x128 weight blocks, activation groups of 128");
        break;
    case QP_SCHEME_W4A16_INT4:
        if (scheme->weight.group_size > 0 && scheme->weight.group_size % 32 && scheme->weight.group_size != K)
            set_support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: W4A16 group sizes other than multiples of 32 or per-channel");
        else if (d->has_fp16)
            set_support(out, QP_SUPPORT_NATIVE, "int4 dequantized in registers, fp32 multiply-adds");
        else
            set_support(out, QP_SUPPORT_EMULATED, "no cl_khr_fp16: fp16/bf16 activations widened by bit operations, "
                                                  "int4 dequantized in registers, fp32 multiply-adds");
        break;
    case QP_SCHEME_OCP_MX:
        if (!k_fits_blocks(out, K, 32, "unsupported: OCP MX needs K to be a multiple of 32"))
            break;
        if (scheme->activation.dtype == QP_DTYPE_F8_E4M3FN && scheme->activation.granularity != QP_GRAN_GROUP)
            set_support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: OCP MX weights with per-tensor fp8 activations "
                                                     "(not an OCP_MX_Scheme)");
        else
            set_support(out, QP_SUPPORT_EMULATED, "no native MX/fp4/fp6/fp8 arithmetic in OpenCL C (PoCL): activation "
                                                  "qdq by exact fp32 bit operations, fp4/fp6/fp8 weights dequantized "
                                                  "in registers, fp32 multiply-adds");
        break;
    case QP_SCHEME_W4A8_MXFP4_FP8:
        if (k_fits_blocks(out, K, 32, "unsupported: MXFP4 weights need K to be a multiple of 32"))
            set_support(out, QP_SUPPORT_EMULATED, "no native MX/fp4/fp8 arithmetic in OpenCL C (PoCL): fp8 static "
                                                  "activation qdq in fp32, fp4 weights dequantized in registers, fp32 "
                                                  "multiply-adds");
        break;
    case QP_SCHEME_NVFP4:
        if (k_fits_blocks(out, K, 16, "unsupported: NVFP4 needs K to be a multiple of 16"))
            set_support(out, QP_SUPPORT_EMULATED, "no native fp4 arithmetic in OpenCL C (PoCL): NVFP4 activation qdq "
                                                  "in fp32, fp4 weights dequantized in registers, fp32 multiply-adds");
        break;
    case QP_SCHEME_UNQUANTIZED:
        if (d->has_fp16)
            set_support(out, QP_SUPPORT_NATIVE, "fp16/bf16 weights and activations, fp32 multiply-adds");
        else
            set_support(out, QP_SUPPORT_EMULATED, "no cl_khr_fp16: fp16/bf16 widened to fp32 by bit operations, fp32 "
                                                  "multiply-adds");
        break;
    default:
        set_support(out, QP_SUPPORT_UNSUPPORTED, "unsupported: not yet implemented on opencl");
    }
    return QP_OK;
}

qp_status qp_cl_device_open(qp_cl_device *d) {
    if (d->queue) return QP_OK;
    qp_cl_api *api = &d->be->api;
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    d->context = api->clCreateContext(props, 1, &d->id, NULL, NULL, &err);
    if (!d->context)
        return qp_cl_error(d, QP_ERR_DEVICE, NULL, "clCreateContext failed: %s (%d)", qp_cl_strerror(err),
                         (int)err);
    /* profiling on (linear_time, buffer_copy_time: device timers); a driver
     * refusing it gets a plain queue and the timing ops say so */
    d->queue = api->clCreateCommandQueue(d->context, d->id, CL_QUEUE_PROFILING_ENABLE, &err);
    d->profiling = d->queue != NULL;
    if (!d->queue) d->queue = api->clCreateCommandQueue(d->context, d->id, 0, &err);
    if (!d->queue) {
        api->clReleaseContext(d->context);
        d->context = NULL;
        return qp_cl_error(d, QP_ERR_DEVICE, NULL, "clCreateCommandQueue failed: %s (%d)",
                         qp_cl_strerror(err), (int)err);
    }
    d->dummy = api->clCreateBuffer(d->context, CL_MEM_READ_WRITE, 64, NULL, &err);
    if (!d->dummy) {
        qp_cl_device_close(d);
        return qp_cl_error(d, QP_ERR_DEVICE, NULL, "clCreateBuffer (64 bytes) failed: %s (%d)",
                         qp_cl_strerror(err), (int)err);
    }
    return QP_OK;
}

void qp_cl_device_close(qp_cl_device *d) {
    qp_cl_api *api = &d->be->api;
    if (d->queue) api->clFinish(d->queue); /* qport's work may still use what it frees */
    qp_cl_program_release(d);
    qp_cl_release_mem(d, &d->dummy);
    if (d->queue) api->clReleaseCommandQueue(d->queue);
    if (d->context) api->clReleaseContext(d->context);
    d->queue = NULL;
    d->context = NULL;
}
