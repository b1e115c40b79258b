/* Hostile sizes, counts and offsets through the public API: each
 * call below gets a size that is negative, zero, past QP_DIM_MAX, inconsistent
 * with another, or out of range, and must return an error status naming the
 * argument -- never crash, read out of bounds or overflow (the ASan+UBSan
 * build runs this too). Every buffer holds what a well-formed call of the
 * same shape would need, so a finding is the library's. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;

static void want(qp_status st, qp_status expect, const char *needle, const char *what, int line) {
    if (st != expect || (needle && !strstr(qp_last_error(ctx), needle))) {
        tu_failures++;
        fprintf(stderr, "FAIL %s:%d: %s: got %s '%s', want %s '%s'\n", __FILE__, line, what, qp_status_str(st),
                qp_last_error(ctx), qp_status_str(expect), needle ? needle : "");
    }
}
#define WANT(call, st, needle) want(call, st, needle, #call, __LINE__)
#define BADARG(call, needle) WANT(call, QP_ERR_INVALID_ARGUMENT, needle)

static uint8_t buf[1 << 16];
static float fbuf[1 << 14];

static void reference_forwards(void) {
    memset(buf, 0, sizeof buf);
    /* shapes past QP_DIM_MAX: refused before anything is allocated from them */
    qp_ref_int8_args i8 = {QP_DTYPE_F16, buf, 1, 32, INT_MAX, (const int8_t *)buf, fbuf, 1, 0, 1, 1.0f, 0, NULL};
    BADARG(qp_ref_w8a8_int8_forward(ctx, &i8, buf), "N = 2147483647");
    i8.N = 16; i8.K = -32;
    BADARG(qp_ref_w8a8_int8_forward(ctx, &i8, buf), "K = -32");
    qp_ref_fp8_args f8 = {QP_DTYPE_F16, buf, 1, INT_MAX, 16, buf, fbuf, 1, QP_FP8_ACT_DYNAMIC_TOKEN, 1.0f, 0, NULL};
    BADARG(qp_ref_w8a8_fp8_forward(ctx, &f8, buf), "K = 2147483647");
    qp_ref_w4a16_args w4 = {QP_DTYPE_F16, buf, 1, 32, INT_MAX, (const int32_t *)buf, NULL, buf, 32, 1, QP_PACK_ORDER, NULL};
    BADARG(qp_ref_w4a16_forward(ctx, &w4, buf), "N = 2147483647");
    w4.N = 16;
    w4.group_size = -7;
    WANT(qp_ref_w4a16_forward(ctx, &w4, buf), QP_ERR_VALUE, "group size -7");
    w4.group_size = 0;
    WANT(qp_ref_w4a16_forward(ctx, &w4, buf), QP_ERR_VALUE, "group size 0");
    qp_ref_nvfp4_args nv = {QP_DTYPE_F16, buf, 1, 32, 1 << 29, buf, buf, 1.0f, 1.0f, NULL, 0.0f};
    BADARG(qp_ref_nvfp4_forward(ctx, &nv, buf), "N = 536870912");
    qp_ref_ocp_mx_args mx = {QP_DTYPE_F16, buf, 1, 32, 16, QP_DTYPE_F4_E2M1, buf, buf, 4, QP_OCP_MX_ACT_NONE, NULL};
    BADARG(qp_ref_ocp_mx_forward(ctx, &mx, buf), "scale_rows 4 > 1 needs mxfp8_e4m3 weights");
    mx.w_elem = QP_DTYPE_F8_E4M3FN;
    mx.scale_rows = INT_MAX; /* one scale row for every output row: reads row 0 only */
    WANT(qp_ref_ocp_mx_forward(ctx, &mx, buf), QP_OK, NULL);
    mx.scale_rows = 1; mx.M = -1;
    BADARG(qp_ref_ocp_mx_forward(ctx, &mx, buf), "M = -1");
    qp_ref_w4a8_mxfp4_args wm = {QP_DTYPE_F16, buf, 1, 32, -16, buf, buf, 1.0f, NULL};
    BADARG(qp_ref_w4a8_mxfp4_fp8_forward(ctx, &wm, buf), "N = -16");
    BADARG(qp_ref_unquantized_forward(ctx, QP_DTYPE_F16, buf, 1, 1 << 30, 4, buf, NULL, buf), "K = 1073741824");
    int8_t H[4] = {1, 1, 1, -1};
    BADARG(qp_ref_rotation_forward(ctx, QP_DTYPE_F16, buf, 1, 4, H, INT_MAX, buf), "rotation size");
    BADARG(qp_ref_rotation_forward(ctx, QP_DTYPE_F16, buf, 1, 4, H, 8, buf), "rotation size 8");
    /* QQQ: negative and off-grid shapes keep vLLM's messages or name the shape */
    BADARG(qp_ref_qqq_forward(ctx, (const uint16_t *)buf, 1, -128, 64, -1, (const int32_t *)buf, fbuf, NULL, NULL,
                              (uint16_t *)buf),
           "K = -128");
    BADARG(qp_ref_qqq_forward(ctx, (const uint16_t *)buf, 1, 128, -64, -1, (const int32_t *)buf, fbuf, NULL, NULL,
                              (uint16_t *)buf),
           "N = -64");
}

static void packing_and_quantizers(void) {
    int32_t B[64];
    BADARG(qp_qqq_pack_weight(ctx, (const int8_t *)buf, -128, 64, -1, B), NULL);
    WANT(qp_qqq_unpack_weight(ctx, B, 128, INT_MAX, -1, (int8_t *)buf), QP_ERR_VALUE, "is not divisible by min_n_threads = 64");
    BADARG(qp_pack_int4_quark(buf, -1, 8, QP_PACK_ORDER, B), NULL);
    BADARG(qp_pack_int4_quark(buf, 1, -8, QP_PACK_ORDER, B), NULL);
    BADARG(qp_unpack_int4_quark(B, 1, INT_MAX, QP_PACK_ORDER, buf), NULL);
    BADARG(qp_quant_fp8_group(ctx, fbuf, 1, 128, 0, 0, buf, fbuf), NULL);
    BADARG(qp_quant_fp8_group(ctx, fbuf, 1, 128, 256, 0, buf, fbuf), NULL);
    /* m * k past SIZE_MAX: no wrapped index */
    BADARG(qp_quant_int8_dynamic(ctx, fbuf, SIZE_MAX / 2, 4, 1, (int8_t *)buf, fbuf, NULL), "m * k");
    BADARG(qp_quant_fp8_dynamic_token(ctx, fbuf, SIZE_MAX / 2, 4, 0, buf, fbuf), "m * k");
    BADARG(qp_quant_mx(ctx, QP_DTYPE_F4_E2M1, fbuf, SIZE_MAX / 16, 64, buf, buf), "m * k");
    /* quantize_weights: shapes */
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.kind = QP_SCHEME_W8A8_INT8;
    qp_qweights *q = NULL;
    BADARG(qp_quantize_weights(ctx, &s, fbuf, -4, 8, NULL, &q), NULL);
    BADARG(qp_quantize_weights(ctx, &s, fbuf, 4, INT_MAX, NULL, &q), "K = 2147483647");
    CHECK(q == NULL, "no weights on failure");
}

static void devices_buffers_and_routing(void) {
    qp_device *cpu = NULL;
    CHECK(!qp_device_find(ctx, "cpu", &cpu), "cpu");
    qp_buffer *b = NULL;
    CHECK(!qp_buffer_create(cpu, 64, &b), "buffer");
    BADARG(qp_buffer_upload(b, 60, buf, 8), "outside a buffer of 64 bytes");
    BADARG(qp_buffer_upload(b, SIZE_MAX, buf, 2), "outside");
    BADARG(qp_buffer_download(b, 8, buf, SIZE_MAX - 4), "outside");
    qp_buffer_destroy(b);
    qp_moe_options o;
    qp_moe_options_init(&o);
    int32_t ids[8];
    float w[8];
    BADARG(qp_moe_route(ctx, fbuf, 1, INT_MAX, &o, ids, w), "at most 65536");
    o.top_k = 9;
    BADARG(qp_moe_route(ctx, fbuf, 1, 8, &o, ids, w), "top_k = 9");
    qp_moe_options_init(&o);
    o.num_expert_group = -2;
    BADARG(qp_moe_route(ctx, fbuf, 1, 8, &o, ids, w), "num_expert_group");
    /* the KV cache on a device: n past the buffers */
    qp_buffer *src = NULL, *dst = NULL;
    CHECK(!qp_buffer_create(cpu, 16, &src) && !qp_buffer_create(cpu, 16, &dst), "kv buffers");
    BADARG(qp_kv_quantize(cpu, QP_DTYPE_F16, src, 9, 1.0f, dst), "buffers too small for 9 elements");
    BADARG(qp_kv_quantize(cpu, QP_DTYPE_F16, src, SIZE_MAX, 1.0f, dst), "buffers too small");
    qp_buffer_destroy(src);
    qp_buffer_destroy(dst);
    /* scale-name mapping into a short buffer */
    qp_config *cfg = tu_load(ctx, "{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\"}");
    char small[4];
    CHECK(cfg != NULL, "config");
    BADARG(qp_config_map_scale_name(cfg, "model.layers.0.self_attn.k_proj.output_scale", small, sizeof small), NULL);
    BADARG(qp_config_map_scale_name(cfg, "x", small, 0), NULL);
    qp_config_destroy(cfg);
}

static void safetensors_write(void) {
    char path[] = "/tmp/qport-args-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    qp_tensor t = {"w", QP_DTYPE_F32, 1, {-4}, fbuf};
    BADARG(qp_safetensors_write(ctx, path, &t, 1, NULL, 0), "tensor 'w': dimension 0 is -4");
    t.ndim = 7;
    BADARG(qp_safetensors_write(ctx, path, &t, 1, NULL, 0), "rank 7");
    t = (qp_tensor){"w", QP_DTYPE_F32, 2, {(int64_t)1 << 40, (int64_t)1 << 40}, fbuf};
    BADARG(qp_safetensors_write(ctx, path, &t, 1, NULL, 0), "overflows");
    qp_tensor two[2] = {{"w", QP_DTYPE_F32, 1, {2}, fbuf}, {"w", QP_DTYPE_F32, 1, {2}, fbuf}};
    BADARG(qp_safetensors_write(ctx, path, two, 2, NULL, 0), "tensor 'w' given twice");
    remove(path);
}

int main(void) {
    if (qp_context_create(&ctx)) return 1;
    reference_forwards();
    packing_and_quantizers();
    devices_buffers_and_routing();
    safetensors_write();
    qp_context_destroy(ctx);
    return tu_finish("api-args");
}
