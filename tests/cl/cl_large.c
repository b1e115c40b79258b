/* cl-large: one 4096x4096 layer per kind (int8 at M 1 and 17, fp8,
 * W4A16, fp8 per-block and MXFP4 at M 1) against the reference, then
 * forward times on this device for int8, fp8, QQQ, unquantized fp16 and
 * NVFP4 (PoCL: CPU threads; for the record only). */
#include <stdlib.h>

#include "cl_tests.h"

/* an fp16 layer's shape and modes: each timed layer sets the weight fields
 * of its own family only */
static qp_lin_desc timing_desc(qp_scheme_kind kind, qp_act_mode act, int N, int K) {
    qp_lin_desc d = {0};
    d.struct_size = sizeof d;
    d.act_dtype = QP_DTYPE_F16;
    d.N = N;
    d.K = K;
    d.layer = "timing";
    d.kind = kind;
    d.act = act;
    return d;
}

static void timings(void) {
    int N = 4096, K = 4096;
    int8_t *w = malloc((size_t)N * K), *q4 = malloc((size_t)N * K), *w8 = malloc((size_t)N * K);
    float *ws = malloc(sizeof(float) * N);
    uint8_t *wf = malloc((size_t)N * K);
    uint16_t *wa = malloc(2 * (size_t)N * K);
    float *bs = malloc(sizeof(float) * (size_t)N * (K / 16)), lut[256] = {0};
    if (w && ws && wf && q4 && w8 && wa && bs) {
        for (size_t i = 0; i < (size_t)N * K; i++) {
            w[i] = (int8_t)bh_irand(-127, 127);
            wf[i] = (uint8_t)bh_irand(0, 0x7E);
            q4[i] = (int8_t)bh_irand(-8, 7);
            w8[i] = (int8_t)(16 * q4[i]);
        }
        for (int n = 0; n < N; n++) ws[n] = 0.01f;
        qp_lin_desc d = timing_desc(QP_SCHEME_W8A8_INT8, QP_ACT_INT8_DYNAMIC_TOKEN, N, K);
        d.act_symmetric = 1;
        d.w_i8 = w;
        d.w_scale = ws;
        d.w_per_channel = 1;
        cl_time_forward(&d, 0, 1, "int8");
        cl_time_forward(&d, 0, 16, "int8");
        d.kind = QP_SCHEME_W8A8_FP8; /* the same weight family */
        d.act = QP_ACT_FP8_DYNAMIC_TOKEN;
        d.w_u8 = wf;
        cl_time_forward(&d, 0, 1, "fp8");
        cl_time_forward(&d, 0, 16, "fp8");
        qp_lin_desc q = timing_desc(QP_SCHEME_QQQ_W4A8, QP_ACT_INT8_DYNAMIC_TOKEN, N, K);
        q.act_symmetric = 1;
        q.group_size = -1;
        q.q4 = q4;
        q.w8 = w8;
        q.s_channel = ws;
        cl_time_forward(&q, 0, 1, "qqq");
        cl_time_forward(&q, 0, 16, "qqq");
        /* the fp16 baseline of qport bench and NVFP4 (fp4 codes, blocks of 16) */
        for (size_t i = 0; i < (size_t)N * K; i++) wa[i] = bh_enc(QP_DTYPE_F16, bh_frand() * 0.05f);
        for (size_t i = 0; i < (size_t)N * (K / 16); i++) bs[i] = 0.01f;
        for (int i = 0; i < 16; i++) lut[i] = qp_format_decode(QP_DTYPE_F4_E2M1, (uint32_t)i);
        qp_lin_desc u = timing_desc(QP_SCHEME_UNQUANTIZED, QP_ACT_NONE, N, K);
        u.w_act = wa;
        cl_time_forward(&u, 0, 1, "unquantized");
        cl_time_forward(&u, 0, 16, "unquantized");
        qp_lin_desc v = timing_desc(QP_SCHEME_NVFP4, QP_ACT_NVFP4_QDQ, N, K);
        v.w_elem = QP_DTYPE_F4_E2M1;
        v.w_codes = (const uint8_t *)wf;
        v.w_lut = lut;
        v.w_blk = 16;
        v.w_blk_scale = bs;
        v.input_global_scale = 100.0f;
        v.input_global_scale_inv = 1.0f / 100.0f;
        v.bias_after_round = 1;
        cl_time_forward(&v, 0, 1, "nvfp4");
        cl_time_forward(&v, 0, 16, "nvfp4");
    }
    free(w); free(ws); free(wf); free(q4); free(w8); free(wa); free(bs);
}

void cl_large_cases(void) {
    static const int m1[] = {1}, m2[] = {1, 17};
    cl_int8(QP_DTYPE_F16, 0, 1, 1, 1, 4096, 4096, m2, 2, 0);
    cl_fp8(QP_DTYPE_BF16, 2, 1, 1, 0, 4096, 4096, m1, 1);
    cl_w4a16(QP_DTYPE_F16, QP_PACK_REORDER, 0, 128, 1, 0, 4096, 4096, m1, 1);
    cl_fp8_block(QP_DTYPE_BF16, 0, 1, 0, 4096, 4096, m1, 1);
    cl_fw(BH_FW_MX, QP_DTYPE_BF16, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4, 0, 1, 0, 4096, 4096, m1, 1);
    if (bh_group("timings")) timings();
}
