/* Quantized linear layers: prepare (validate the qp_lin_desc, upload the
 * weights in the kernels' layout) and forward (activation quantization on
 * the device, then the GEMV or tiled GEMM with the fused epilogue).
 *
 * Layouts: W8A8-INT8 weights int8 [N][K]; W8A8-FP8 e4m3fn codes [N][K];
 * QQQ 4-bit codes (two per byte, see shaders/cl_gemm_q4.cl) plus a 16-entry
 * table per (group, column) giving each code's exact int8 weight (docs/semantics.md §11
 * step 2, wrap included), taken from the desc's w8 so it cannot drift from
 * the core's; the QQQ epilogue follows. Scales fp32 [N] (per-tensor already
 * expanded by the core).
 *
 * W4A16: the core's canonical fields (q4 codes [N][K], w4_signed,
 * w4_zero [G][N], w4_scale [G][N] fp32) repacked into 4-bit codes [N][Kp/2]
 * (shaders/cl_gemm_w4.cl), fp32 scales [G][N] and 8-bit zero points [G][N]
 * (int4: 8, the codes stored as c ^ 8).
 * W8A8-FP8 per-block: e4m3 codes [N][K] and the core's fp32 block scales
 * [ceil(N/128)][K/128], per-token-group-128 fp8 activations. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

/* epilogue flags, as in shaders/cl_gemm_i8.cl */
#define EPI_ASYM 1
#define EPI_STATIC 2
#define EPI_BIAS 4
#define EPI_BF16 8
#define EPI_QQQ 16
#define EPI_BIAS_RND 32 /* shaders/cl_gemm_fw.cl: y = rnd(rnd(sum) + bias) */

#define GEMV_MAX_M QP_CL_GEMV_MAX_M
#define MAX_CHUNKS 64
#define WG 64
#define TILE 32

typedef struct qp_cl_linear {
    qp_scheme_kind kind;
    int N, K;
    qp_dtype act_dtype;
    qp_act_mode act;
    int symmetric;
    float input_scale;
    int32_t input_zp;
    int flags;
    unsigned path;
    int use_dot;
    cl_mem w[MAX_CHUNKS];       /* weights in column chunks nb .. ne-1      */
    int n_chunks, chunk_cols;
    cl_mem wsc, adj, bias;
    cl_mem lut;                 /* QQQ: int8 weight of each code, [G][N][16] */
    int gsz;                    /* QQQ: k per table group (128, or INT_MAX);
                                 * W4A16: the group size (K per-channel)     */
    cl_mem wz;                  /* W4A16: zero points [K/g][N] uchar         */
    int ue8m0;                  /* FP8 block: power-of-two activation scales */
    /* block-float / unquantized layers (shaders/cl_gemm_fw.cl) */
    int fw;                     /* 1: runs qp_act_qdq + qp_gemv_fw / qp_tiled_fw */
    int wfmt, blk;              /* weight format (0 act bits, 1 fp4 packed, 2 byte codes), k per block scale */
    int qmode, elem, mbits, emax; /* qp_act_qdq mode and MX element format */
    float g, inv_g;             /* NVFP4: 1 / input_global_scale and 1 / g */
    cl_mem xq, sx, szp, rowmax;
    int cap_m;
    char layer[96];
    int gemv_max_m;      /* the device's tuning row (cl_tuning.c)        */
} qp_cl_linear;

static qp_status qqq_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer);
static qp_status w4a16_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer);
static qp_status fw_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer);

/* Uploads weights of `row_bytes` per column, split in column chunks that
 * fit one device allocation (multiples of the 32-column tile). */
static qp_status upload_weights(qp_cl_device *d, qp_cl_linear *l, const void *w, size_t row_bytes, const char *name,
                                const char *layer) {
    size_t N = (size_t)l->N;
    size_t nc = (size_t)(d->weight_chunk_max / row_bytes);
    if (nc >= N) nc = N;
    else nc = nc / 32 * 32;
    if (nc == 0 || (N + nc - 1) / nc > MAX_CHUNKS)
        return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, layer, "tensor %s (%zu columns of %zu bytes) does "
                         "not fit in %d buffers of at most %llu bytes", name, N, row_bytes,
                         MAX_CHUNKS, (unsigned long long)d->weight_chunk_max);
    l->chunk_cols = (int)nc;
    l->n_chunks = (int)((N + nc - 1) / nc);
    for (int c = 0; c < l->n_chunks; c++) {
        size_t nb = (size_t)c * nc, ne = nb + nc < N ? nb + nc : N;
        qp_status st = qp_cl_buffer_from_host(d, (const unsigned char *)w + nb * row_bytes, (ne - nb) * row_bytes,
                                              name, layer, &l->w[c]);
        if (st != QP_OK) return st;
    }
    return QP_OK;
}

typedef qp_cl_karg karg;
#define A(v) QP_CL_ARG(v)

/* the activation step of a forward (quantization, qdq, widening): what
 * linear_time's gemm_ms leaves out */
static int is_act_kernel(int which) {
    return which == QP_CL_K_QUANT_I8 || which == QP_CL_K_QUANT_F8 || which == QP_CL_K_ROWMAX ||
           which == QP_CL_K_ACT_F32 || which == QP_CL_K_QUANT_F8G || which == QP_CL_K_ACT_QDQ;
}

/* keeps the first, the first GEMM and the last event of a forward */
static void record_event(qp_cl_device *d, cl_event ev, int act) {
    if (!d->rec_first) d->rec_first = ev;
    if (!act && !d->rec_gemm) d->rec_gemm = ev;
    if (d->rec_last && d->rec_last != d->rec_first && d->rec_last != d->rec_gemm) d->be->api.clReleaseEvent(d->rec_last);
    d->rec_last = ev;
}

static void release_recorded(qp_cl_device *d) {
    cl_event e[3] = {d->rec_first, d->rec_gemm, d->rec_last};
    for (int i = 0; i < 3; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= e[j] == e[i];
        if (e[i] && !dup) d->be->api.clReleaseEvent(e[i]);
    }
    d->rec_first = d->rec_gemm = d->rec_last = NULL;
    d->rec_on = 0;
}

static qp_status run_kernel(qp_cl_device *d, qp_cl_linear *l, int which, const char *name, const karg *args, int nargs,
                            cl_uint dims, const size_t *global, const size_t *local) {
    cl_event ev = NULL;
    qp_status st = qp_cl_launch(d, which, name, args, nargs, dims, global, local, d->rec_on ? &ev : NULL, l->layer, "", 1);
    if (st == QP_OK && ev) record_event(d, ev, is_act_kernel(which));
    return st;
}

void qp_cl_linear_destroy(void *dev, void *lin) {
    qp_cl_device *d = dev;
    qp_cl_linear *l = lin;
    if (!l) return;
    /* (OpenCL keeps a released cl_mem alive until the commands using it
     * complete, so nothing here waits) */
    for (int i = 0; i < MAX_CHUNKS; i++) qp_cl_release_mem(d, &l->w[i]);
    qp_cl_release_mem(d, &l->wsc); qp_cl_release_mem(d, &l->adj); qp_cl_release_mem(d, &l->bias);
    qp_cl_release_mem(d, &l->lut); qp_cl_release_mem(d, &l->wz);
    qp_cl_release_mem(d, &l->xq); qp_cl_release_mem(d, &l->sx); qp_cl_release_mem(d, &l->szp);
    qp_cl_release_mem(d, &l->rowmax);
    free(l);
}

static qp_status unsupported(qp_cl_device *d, const char *layer, const char *why) {
    return qp_cl_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: %s", why);
}

static qp_status bad_desc(qp_cl_device *d, const char *layer, const char *why) {
    return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, layer, "%s", why);
}

static int elem_id(qp_dtype e) {
    return e == QP_DTYPE_F4_E2M1 ? 1 : e == QP_DTYPE_F6_E3M2 ? 2 : e == QP_DTYPE_F6_E2M3 ? 3 : e == QP_DTYPE_F8_E4M3FN ? 4 : 0;
}

/* OCP-MX, W4A8-MXFP4-FP8, NVFP4, unquantized (the canonical fields of
 * api/backend.h) */
static qp_status check_fw(qp_cl_device *d, const qp_lin_desc *s, const char *layer) {
    static const int mb[] = {0, 1, 2, 3, 3}, em[] = {0, 2, 4, 2, 8}; /* docs/semantics.md §6 */
    if (s->kind == QP_SCHEME_UNQUANTIZED) {
        if (!s->w_act) return bad_desc(d, layer, "an unquantized layer needs w_act");
        if (s->act != QP_ACT_NONE) return unsupported(d, layer, "unquantized layer with an activation quantization mode");
        return QP_OK;
    }
    if (!s->w_codes || !s->w_lut || !s->w_blk_scale)
        return bad_desc(d, layer, "block-float weights need w_codes, w_lut and w_blk_scale");
    if (!elem_id(s->w_elem)) return bad_desc(d, layer, "w_elem must be fp4_e2m1, fp6_e3m2, fp6_e2m3 or fp8_e4m3fn");
    if (s->w_blk != 16 && s->w_blk != 32) return bad_desc(d, layer, "w_blk must be 16 or 32");
    if (s->K % s->w_blk)
        return qp_cl_error(d, QP_ERR_VALUE, layer, "K (%d) is not a multiple of the weight block %d", s->K, s->w_blk);
    switch (s->act) {
    case QP_ACT_NONE:
        return QP_OK;
    case QP_ACT_MX_QDQ: {
        int e = elem_id(s->act_elem);
        if (!e || s->act_mbits != mb[e] || s->act_emax != em[e])
            return bad_desc(d, layer, "QP_ACT_MX_QDQ needs act_elem fp4_e2m1/fp6_e3m2/fp6_e2m3/fp8_e4m3fn with its "
                                      "act_mbits and act_emax");
        if (s->K % 32)
            return qp_cl_error(d, QP_ERR_VALUE, layer, "MX activations need K (%d) to be a multiple of 32", s->K);
        return QP_OK;
    }
    case QP_ACT_FP8_STATIC_QDQ:
        if (!(s->input_scale > 0.0f) || s->input_scale > 3.4e38f)
            return bad_desc(d, layer, "QP_ACT_FP8_STATIC_QDQ needs a finite input_scale > 0");
        return QP_OK;
    case QP_ACT_NVFP4_QDQ:
        if (!(s->input_global_scale_inv > 0.0f) || s->input_global_scale_inv > 3.4e38f)
            return bad_desc(d, layer, "QP_ACT_NVFP4_QDQ needs a finite input_global_scale_inv > 0");
        if (s->K % 16)
            return qp_cl_error(d, QP_ERR_VALUE, layer, "NVFP4 activations need K (%d) to be a multiple "
                             "of 16", s->K);
        return QP_OK;
    default:
        return unsupported(d, layer, "block-float weights with an integer or dynamic fp8 activation mode");
    }
}

/* Checks the desc for the schemes this backend runs. */
static qp_status check_desc(qp_cl_device *d, const qp_lin_desc *s, const char *layer) {
    if (s->N <= 0 || s->K <= 0) return bad_desc(d, layer, "N and K must be positive");
    if (s->act_dtype != QP_DTYPE_F16 && s->act_dtype != QP_DTYPE_BF16)
        return bad_desc(d, layer, "activations must be fp16 or bf16");
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8:
        if (!s->w_i8 || !s->w_scale) return bad_desc(d, layer, "W8A8-INT8 needs w_i8 and w_scale");
        if (s->act != QP_ACT_INT8_STATIC && s->act != QP_ACT_INT8_DYNAMIC_TOKEN)
            return unsupported(d, layer, "W8A8-INT8 with a non-int8 activation mode");
        if (!s->act_symmetric && !s->azp_adj) return bad_desc(d, layer, "asymmetric activations need azp_adj");
        return QP_OK;
    case QP_SCHEME_W8A8_FP8:
        if (!s->w_u8 || !s->w_scale) return bad_desc(d, layer, "W8A8-FP8 needs w_u8 and w_scale");
        if (s->act == QP_ACT_FP8_GROUP128)
            return unsupported(d, layer, "fp8 per-token-group activations come with per-block weights "
                                         "(W8A8_FP8_BLOCK), not per-tensor/channel ones");
        if (s->act != QP_ACT_FP8_STATIC && s->act != QP_ACT_FP8_DYNAMIC_TENSOR && s->act != QP_ACT_FP8_DYNAMIC_TOKEN)
            return unsupported(d, layer, "W8A8-FP8 with a non-fp8 activation mode");
        return QP_OK;
    case QP_SCHEME_QQQ_W4A8:
        if (!s->w8 || !s->q4 || !s->s_channel) return bad_desc(d, layer, "QQQ needs q4, w8 and s_channel");
        if (s->group_size != -1 && s->group_size != 128) return unsupported(d, layer, "QQQ group size other than -1/128");
        if (s->act_dtype != QP_DTYPE_F16) return bad_desc(d, layer, "QQQ activations must be fp16");
        if (s->K % 32) return unsupported(d, layer, "QQQ with K not a multiple of 32 (the 4-bit layout packs 32 k)");
        return QP_OK;
    case QP_SCHEME_W8A8_FP8_BLOCK:
        if (!s->w_u8 || !s->w_scale) return bad_desc(d, layer, "W8A8-FP8 per-block needs w_u8 and w_scale");
        if (s->act != QP_ACT_FP8_GROUP128)
            return unsupported(d, layer, "W8A8-FP8 per-block with activations other than per-token-group-128 fp8");
        if (s->K % 128)
            return qp_cl_error(d, QP_ERR_VALUE, layer, "W8A8-FP8 per-block needs K (%d) to be a "
                             "multiple of 128", s->K);
        return QP_OK;
    case QP_SCHEME_W4A16_INT4:
        if (!s->q4 || !s->w4_scale) return bad_desc(d, layer, "W4A16 needs q4 and w4_scale");
        if (!s->w4_signed && !s->w4_zero) return bad_desc(d, layer, "uint4 W4A16 (w4_signed 0) needs w4_zero");
        return QP_OK;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
    case QP_SCHEME_UNQUANTIZED:
        return check_fw(d, s, layer);
    default:
        return unsupported(d, layer, "not yet implemented on opencl");
    }
}

static int fw_kind(qp_scheme_kind k) {
    return k == QP_SCHEME_OCP_MX || k == QP_SCHEME_W4A8_MXFP4_FP8 || k == QP_SCHEME_NVFP4 || k == QP_SCHEME_UNQUANTIZED;
}

static int float_kind(qp_scheme_kind k) {
    return k == QP_SCHEME_W8A8_FP8 || k == QP_SCHEME_W8A8_FP8_BLOCK || k == QP_SCHEME_W4A16_INT4 || fw_kind(k);
}

static qp_status check_path(qp_cl_device *d, const qp_lin_desc *s, unsigned path, const char *layer) {
    if ((path & QP_PATH_GEMV) && (path & QP_PATH_TILED))
        return bad_desc(d, layer, "QP_PATH_GEMV and QP_PATH_TILED are exclusive");
    if ((path & QP_PATH_INT_DOT) && (path & QP_PATH_NO_INT_DOT))
        return bad_desc(d, layer, "QP_PATH_INT_DOT and QP_PATH_NO_INT_DOT are exclusive");
    if (path & ~(QP_PATH_GEMV | QP_PATH_TILED | QP_PATH_INT_DOT | QP_PATH_NO_INT_DOT))
        return bad_desc(d, layer, "unknown QP_PATH_* bits");
    if (path & QP_PATH_INT_DOT) {
        if (float_kind(s->kind))
            return unsupported(d, layer, "QP_PATH_INT_DOT forced on a float layer (fp8 / W4A16 / MX / NVFP4 / "
                                         "unquantized run fp32 multiply-adds: no integer dot product path)");
        if (!d->has_int_dot)
            return unsupported(d, layer, "QP_PATH_INT_DOT forced but the device lacks cl_khr_integer_dot_product "
                                         "(4x8-bit input)");
    }
    return QP_OK;
}

qp_status qp_cl_linear_prepare(void *dev, const qp_lin_desc *s, unsigned path, void **lin) {
    qp_cl_device *d = dev;
    if (!s || !lin) return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "NULL desc or output");
    const char *layer = s->layer ? s->layer : "";
    qp_status st = check_desc(d, s, layer);
    if (st == QP_OK && d->max_wg < WG)
        st = qp_cl_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: the kernels need work-groups of %d, "
                       "the device allows %zu", WG, d->max_wg);
    /* the program first: a failed int-dot build turns has_int_dot off */
    if (st == QP_OK) st = qp_cl_program_ensure(d);
    if (st == QP_OK) st = check_path(d, s, path, layer);
    if (st != QP_OK) return st;
    qp_cl_linear *l = QP_BACKEND_LAYER_NEW(qp_cl_linear, layer);
    if (!l) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory");
    l->kind = s->kind;
    l->N = s->N;
    l->K = s->K;
    l->act_dtype = s->act_dtype;
    l->act = s->act;
    l->symmetric = s->act_symmetric;
    l->input_scale = s->input_scale;
    l->input_zp = s->input_zp;
    l->path = path;
    l->gemv_max_m = d->tuning.gemv_max_m;
    l->use_dot = !float_kind(s->kind) && d->has_int_dot && !(path & QP_PATH_NO_INT_DOT);
    size_t n = (size_t)s->N;
    if (s->act_dtype == QP_DTYPE_BF16) l->flags |= EPI_BF16;
    if (s->bias) l->flags |= EPI_BIAS;
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8:
        if (!s->act_symmetric) l->flags |= EPI_ASYM;
        if (s->act == QP_ACT_INT8_STATIC) l->flags |= EPI_STATIC;
        st = upload_weights(d, l, s->w_i8, (size_t)s->K, "w_i8", layer);
        if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->w_scale, n * sizeof(float), "w_scale", layer, &l->wsc);
        if (st == QP_OK && !s->act_symmetric)
            st = qp_cl_buffer_from_host(d, s->azp_adj, n * sizeof(int32_t), "azp_adj", layer, &l->adj);
        break;
    case QP_SCHEME_W8A8_FP8:
        st = upload_weights(d, l, s->w_u8, (size_t)s->K, "w_u8", layer);
        if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->w_scale, n * sizeof(float), "w_scale", layer, &l->wsc);
        break;
    case QP_SCHEME_W8A8_FP8_BLOCK: {
        size_t nbs = (n + 127) / 128 * (size_t)(s->K / 128);
        l->ue8m0 = s->ue8m0;
        l->act = QP_ACT_FP8_GROUP128;
        st = upload_weights(d, l, s->w_u8, (size_t)s->K, "w_u8", layer);
        if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->w_scale, nbs * sizeof(float), "w_scale (128x128 blocks)", layer, &l->wsc);
        break;
    }
    case QP_SCHEME_W4A16_INT4:
        l->act = QP_ACT_NONE;
        st = w4a16_pack(d, l, s, layer);
        break;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
    case QP_SCHEME_UNQUANTIZED:
        st = fw_pack(d, l, s, layer);
        break;
    default: /* QQQ: dynamic per-token symmetric int8 activations (docs/semantics.md §11 step 1) */
        l->flags |= EPI_QQQ;
        l->act = QP_ACT_INT8_DYNAMIC_TOKEN;
        l->symmetric = 1;
        st = qqq_pack(d, l, s, layer);
        if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->s_channel, n * sizeof(float), "s_channel", layer, &l->wsc);
        break;
    }
    if (st == QP_OK && s->bias) st = qp_cl_buffer_from_host(d, s->bias, n * sizeof(uint16_t), "bias", layer, &l->bias);
    if (st != QP_OK) {
        qp_cl_linear_destroy(d, l);
        return st;
    }
    *lin = l;
    return QP_OK;
}

/* QQQ: 4-bit codes in the kernels' layout and the per-(group, column)
 * table of int8 weights, checked against w8 for every weight. */
static qp_status qqq_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer) {
    int N = s->N, K = s->K, G = s->group_size == 128 ? (K + 127) / 128 : 1;
    size_t Kb = (size_t)K / 2; /* K % 32 == 0 (check_desc) */
    unsigned char *wq = calloc((size_t)N * Kb, 1);
    signed char *lut = calloc((size_t)G * N * 16, 1);
    uint16_t *seen = calloc((size_t)G * N, sizeof(uint16_t));
    qp_status st = QP_OK;
    if (!wq || !lut || !seen) {
        st = qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory packing QQQ weights");
        goto out;
    }
    for (int n = 0; n < N && st == QP_OK; n++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            int code = s->q4[i];
            if (s->group_size == 128 ? (code < 0 || code > 15) : (code < -8 || code > 7)) {
                st = qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, layer, "tensor q4: code %d at [%d][%d] "
                               "outside the %s range", code, n, k,
                               s->group_size == 128 ? "0..15" : "-8..7");
                break;
            }
            unsigned c = (unsigned)code & 15u;
            size_t g = (size_t)(s->group_size == 128 ? k / 128 : 0) * N + n;
            if (seen[g] & (1u << c)) {
                if (lut[g * 16 + c] != s->w8[i]) {
                    st = qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, layer, "tensors q4 and w8 disagree: "
                                   "code %d is weight %d and %d in one group of column %d", code,
                                   lut[g * 16 + c], s->w8[i], n);
                    break;
                }
            } else {
                seen[g] |= (uint16_t)(1u << c);
                lut[g * 16 + c] = s->w8[i];
            }
            int ch = k / 32, j = k % 32;
            unsigned char *byte = &wq[(size_t)n * Kb + (size_t)ch * 16 + (j & 15)];
            *byte |= (unsigned char)(j < 16 ? c : c << 4);
        }
    if (st == QP_OK) st = upload_weights(d, l, wq, Kb, "q4 (packed)", layer);
    if (st == QP_OK) st = qp_cl_buffer_from_host(d, lut, (size_t)G * N * 16, "w8 table", layer, &l->lut);
    l->gsz = s->group_size == 128 ? 128 : INT_MAX;
out:
    free(wq); free(lut); free(seen);
    return st;
}

/* ---- W4A16 ----------------------------------------------------------------
 * The core's canonical fields (api/backend.h): q4 [N][K] codes 0..15,
 * w4_signed, w4_zero [G][N], w4_scale [G][N] fp32, group_size. */
static qp_status w4a16_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer) {
    int N = s->N, K = s->K, g = s->group_size > 0 ? s->group_size : K;
    int sym = s->w4_signed;
    if (K % g)
        return qp_cl_error(d, QP_ERR_VALUE, layer, "input size %d is not divisible by the group size %d", K, g);
    if (g != K && g % 32)
        return unsupported(d, layer, "W4A16 group size not a multiple of 32 (the kernels take 32/64/128/... or per-channel)");
    char why[160];
    if (qp_lin_w4_range_error(s, why, sizeof why)) return bad_desc(d, layer, why);
    size_t G = (size_t)(K / g), Kp = ((size_t)K + 31) & ~(size_t)31, Kb = Kp / 2;
    unsigned char *wq = calloc((size_t)N * Kb, 1), *zb = malloc(G * (size_t)N);
    qp_status st = QP_OK;
    if (!wq || !zb) {
        st = qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory packing W4A16 weights");
        goto out;
    }
    const uint8_t *Q = (const uint8_t *)s->q4;
    for (size_t n = 0; n < (size_t)N; n++)
        for (size_t k = 0; k < (size_t)K; k++) {
            unsigned u = Q[n * (size_t)K + k];
            if (sym) u ^= 8u; /* two's complement c -> c + 8 (mod 16): u - 8 == c */
            size_t j = k % 32;
            wq[n * Kb + (k / 32) * 16 + (j & 15)] |= (unsigned char)(j < 16 ? u : u << 4);
        }
    for (size_t i = 0; i < G * (size_t)N; i++) zb[i] = sym ? 8 : s->w4_zero[i];
    if (st == QP_OK) st = upload_weights(d, l, wq, Kb, "q4 (packed int4)", layer);
    if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->w4_scale, sizeof(float) * G * N, "w4_scale", layer, &l->wsc);
    if (st == QP_OK) st = qp_cl_buffer_from_host(d, zb, G * N, sym ? "zero points (int4: 8)" : "w4_zero", layer, &l->wz);
    l->gsz = g;
out:
    free(wq); free(zb);
    return st;
}

/* ---- OCP-MX / W4A8-MXFP4-FP8 / NVFP4 / unquantized -------------------------
 * Weights: fp4 codes packed two per byte in the 32-chunk layout of
 * cl_gemm_w4.cl, fp6 / fp8 codes one per byte, unquantized act-dtype bits as
 * given; the code table w_lut and the fp32 block multipliers w_blk_scale
 * [N][K / w_blk] as the core made them. */
static qp_status fw_pack(qp_cl_device *d, qp_cl_linear *l, const qp_lin_desc *s, const char *layer) {
    size_t N = (size_t)s->N, K = (size_t)s->K;
    l->fw = 1;
    l->blk = 16;
    if (s->bias_after_round) l->flags |= EPI_BIAS_RND;
    switch (s->act) {
    case QP_ACT_MX_QDQ: l->qmode = 1; break;
    case QP_ACT_FP8_STATIC_QDQ: l->qmode = 2; break;
    case QP_ACT_NVFP4_QDQ: l->qmode = 3; break;
    default: l->qmode = 0; break;
    }
    l->elem = elem_id(s->act_elem);
    l->mbits = s->act_mbits;
    l->emax = s->act_emax;
    if (l->qmode == 3) {
        l->g = s->input_global_scale_inv; /* docs/semantics.md §8 */
        l->inv_g = 1.0f / l->g;
    }
    if (s->kind == QP_SCHEME_UNQUANTIZED) {
        l->wfmt = 0;
        return upload_weights(d, l, s->w_act, 2 * K, "w_act", layer);
    }
    l->blk = s->w_blk;
    qp_status st;
    if (s->w_elem == QP_DTYPE_F4_E2M1) {
        /* the GEMV builds e2m1 values from the code bits: w_lut must be them */
        for (int c = 0; c < 16; c++) {
            int e = (c >> 1) & 3, m = c & 1;
            float v = e == 0 ? 0.5f * (float)m : (1.0f + 0.5f * (float)m) * (float)(1 << (e - 1));
            if (c & 8) v = -v;
            if (memcmp(&v, &s->w_lut[c], sizeof v))
                return bad_desc(d, layer, "w_lut is not the fp4 e2m1 table for w_elem fp4_e2m1");
        }
        l->wfmt = 1;
        size_t Kb = ((K + 31) & ~(size_t)31) / 2;
        unsigned char *wq = calloc(N * Kb, 1);
        if (!wq)
            return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory packing fp4 weights");
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) {
                unsigned c = s->w_codes[n * K + k] & 15u;
                size_t j = k % 32;
                wq[n * Kb + (k / 32) * 16 + (j & 15)] |= (unsigned char)(j < 16 ? c : c << 4);
            }
        st = upload_weights(d, l, wq, Kb, "w_codes (packed fp4)", layer);
        free(wq);
    } else {
        l->wfmt = 2;
        st = upload_weights(d, l, s->w_codes, K, "w_codes", layer);
    }
    if (st == QP_OK) st = qp_cl_buffer_from_host(d, s->w_lut, 256 * sizeof(float), "w_lut", layer, &l->lut);
    if (st == QP_OK)
        st = qp_cl_buffer_from_host(d, s->w_blk_scale, N * (K / (size_t)l->blk) * sizeof(float), "w_blk_scale", layer,
                                    &l->wsc);
    return st;
}

static int use_gemv(const qp_cl_linear *l, int M) {
    if (l->path & QP_PATH_GEMV) return 1;
    if (l->path & QP_PATH_TILED) return 0;
    return M <= l->gemv_max_m;
}

static qp_status ensure_scratch(qp_cl_device *d, qp_cl_linear *l, int M) {
    if (M <= l->cap_m) return QP_OK;
    qp_cl_release_mem(d, &l->xq); qp_cl_release_mem(d, &l->sx); qp_cl_release_mem(d, &l->szp);
    qp_cl_release_mem(d, &l->rowmax);
    l->cap_m = 0;
    int cap = M < 16 ? 16 : M;
    size_t elt = float_kind(l->kind) ? sizeof(float) : 1;
    size_t ns = l->kind == QP_SCHEME_W8A8_FP8_BLOCK ? (size_t)(l->K / 128) : 1; /* scales per row */
    cl_int err = CL_SUCCESS;
    qp_cl_api *api = &d->be->api;
    struct { cl_mem *m; size_t bytes; const char *name; } want[] = {
        {&l->xq, (size_t)cap * (size_t)l->K * elt, "quantized activations"},
        {&l->sx, (size_t)cap * ns * sizeof(float), "activation scales"},
        {&l->szp, (size_t)cap * sizeof(int32_t), "activation zero points"},
        {&l->rowmax, (size_t)cap * sizeof(float), "row maxima"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if ((uint64_t)want[i].bytes > d->max_alloc) err = CL_INVALID_BUFFER_SIZE;
        else if ((*want[i].m = api->clCreateBuffer(d->context, CL_MEM_READ_WRITE, want[i].bytes, NULL, &err)))
            d->stats.allocations++;
        if (!*want[i].m)
            return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, l->layer, "%s for M = %d (%zu bytes): %s (%d)", want[i].name, M, want[i].bytes, qp_cl_strerror(err), (int)err);
    }
    l->cap_m = cap;
    return QP_OK;
}

/* The GEMM kernel families: a GEMV and a tiled kernel each (QQQ and int8
 * also int-dot ones), whose parameter lists differ only in the place. */
enum { FAM_FW, FAM_W4, FAM_Q4, FAM_I8, FAM_F8, FAM_F8B };

static const struct {
    int gemv, gemv_dot, tiled, tiled_dot;
    const char *gemv_name, *tiled_name; /* in messages, for the int-dot kernels too */
} gemm_kernels[] = {
    [FAM_FW] = {QP_CL_K_GEMV_FW, QP_CL_K_GEMV_FW, QP_CL_K_TILED_FW, QP_CL_K_TILED_FW, "qp_gemv_fw", "qp_tiled_fw"},
    [FAM_W4] = {QP_CL_K_GEMV_W4, QP_CL_K_GEMV_W4, QP_CL_K_TILED_W4, QP_CL_K_TILED_W4, "qp_gemv_w4", "qp_tiled_w4"},
    [FAM_Q4] = {QP_CL_K_GEMV_Q4, QP_CL_K_GEMV_Q4_DOT, QP_CL_K_TILED_Q4, QP_CL_K_TILED_Q4_DOT, "qp_gemv_q4",
                "qp_tiled_q4"},
    [FAM_I8] = {QP_CL_K_GEMV_I8, QP_CL_K_GEMV_I8_DOT, QP_CL_K_TILED_I8, QP_CL_K_TILED_I8_DOT, "qp_gemv_i8",
                "qp_tiled_i8"},
    [FAM_F8] = {QP_CL_K_GEMV_F8, QP_CL_K_GEMV_F8, QP_CL_K_TILED_F8, QP_CL_K_TILED_F8, "qp_gemv_f8", "qp_tiled_f8"},
    [FAM_F8B] = {QP_CL_K_GEMV_F8B, QP_CL_K_GEMV_F8B, QP_CL_K_TILED_F8B, QP_CL_K_TILED_F8B, "qp_gemv_f8b",
                 "qp_tiled_f8b"},
};

/* One GEMM launch: a GEMV's rows m0 .. m0+rows-1 or a tiled kernel's M
 * rows, of weight chunk nb .. ne-1 */
typedef struct {
    int gemv, M, K, N, nb, ne, m0, rows;
} gemm_place;

/* Launches family fam's GEMV or tiled kernel at p. The arguments in
 * parameter order: x', w, the family's weight operands, the shape (GEMV: K,
 * N, nb; tiled: M, K, N, nb, ne), the family's layout parameters, the
 * GEMV's m0 and rows, flags, the family's epilogue operands, bias, y. */
static qp_status run_gemm(qp_cl_device *d, qp_cl_linear *l, int fam, const gemm_place *p, cl_mem w, cl_mem adj,
                          cl_mem bias, cl_mem y, const size_t *g, const size_t *lo) {
    cl_mem lut = l->lut ? l->lut : d->dummy, bs = l->wsc ? l->wsc : d->dummy; /* fw: absent tables */
    karg a[16];
    int n = 0;
#define ARG(v) (a[n++] = (karg)A(v))
    ARG(l->xq);
    ARG(w);
    if (fam == FAM_FW) { ARG(lut); ARG(bs); }
    else if (fam == FAM_W4) { ARG(l->wsc); ARG(l->wz); }
    else if (fam == FAM_Q4) ARG(l->lut);
    if (!p->gemv) ARG(p->M);
    ARG(p->K); ARG(p->N); ARG(p->nb);
    if (!p->gemv) ARG(p->ne);
    if (fam == FAM_FW) { ARG(l->wfmt); ARG(l->blk); }
    else if (fam == FAM_W4 || fam == FAM_Q4) ARG(l->gsz);
    if (p->gemv) { ARG(p->m0); ARG(p->rows); }
    ARG(l->flags);
    if (fam == FAM_Q4 || fam == FAM_I8) { ARG(l->sx); ARG(l->szp); ARG(l->wsc); ARG(adj); }
    else if (fam == FAM_F8 || fam == FAM_F8B) { ARG(l->sx); ARG(l->wsc); }
    ARG(bias);
    ARG(y);
#undef ARG
    if (p->gemv)
        return run_kernel(d, l, l->use_dot ? gemm_kernels[fam].gemv_dot : gemm_kernels[fam].gemv,
                          gemm_kernels[fam].gemv_name, a, n, 1, g, lo);
    return run_kernel(d, l, l->use_dot ? gemm_kernels[fam].tiled_dot : gemm_kernels[fam].tiled,
                      gemm_kernels[fam].tiled_name, a, n, 2, g, lo);
}

qp_status qp_cl_linear_forward(void *dev, void *lin, void *xbuf, int M, void *ybuf) {
    qp_cl_device *d = dev;
    qp_cl_linear *l = lin;
    qp_cl_buffer *xb = xbuf, *yb = ybuf;
    if (!l || !xb || !yb || M < 0) return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "NULL layer or buffer, or M < 0");
    if (M == 0) return QP_OK;
    int N = l->N, K = l->K;
    if (xb->bytes < (size_t)M * (size_t)K * 2 || yb->bytes < (size_t)M * (size_t)N * 2)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, l->layer,
                         "x (%zu bytes) or y (%zu bytes) smaller than M=%d x K=%d / N=%d 16-bit values", xb->bytes, yb->bytes, M, K, N);
    qp_status st = ensure_scratch(d, l, M);
    if (st != QP_OK) return st;
    int bf16 = l->act_dtype == QP_DTYPE_BF16, dm = (int)d->div_mode;
    cl_mem adj = l->adj ? l->adj : d->dummy, bias = l->bias ? l->bias : d->dummy;
    size_t qg[1] = {(size_t)M * WG}, ql[1] = {WG};
    int fp8 = l->kind == QP_SCHEME_W8A8_FP8, qqq = l->kind == QP_SCHEME_QQQ_W4A8;
    int f8b = l->kind == QP_SCHEME_W8A8_FP8_BLOCK, w4 = l->kind == QP_SCHEME_W4A16_INT4;
    if (l->fw) {
        /* x' (fake-quantized, rounded to the act dtype) as fp32, once */
        if ((size_t)M * (size_t)K > (size_t)INT_MAX - WG)
            return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "M*K = %zu too large for one launch", (size_t)M * (size_t)K);
        int items = l->qmode == 1 ? M * (K / 32) : l->qmode == 3 ? M * (K / 16) : M * K;
        size_t g[1] = {((size_t)items + WG - 1) / WG * WG};
        karg a[] = {A(xb->mem), A(items), A(bf16), A(l->qmode), A(l->elem), A(l->mbits), A(l->emax),
                    A(l->input_scale), A(l->g), A(l->inv_g), A(dm), A(l->xq)};
        st = run_kernel(d, l, QP_CL_K_ACT_QDQ, "qp_act_qdq", a, 12, 1, g, ql);
    } else if (w4) {
        /* activations widened to fp32 once (the GEMV reads each row N times) */
        if ((size_t)M * (size_t)K > (size_t)INT_MAX - WG)
            return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, l->layer, "M*K = %zu too large for one launch", (size_t)M * (size_t)K);
        int total = M * K;
        size_t g[1] = {((size_t)total + WG - 1) / WG * WG};
        karg a[] = {A(xb->mem), A(total), A(bf16), A(l->xq)};
        st = run_kernel(d, l, QP_CL_K_ACT_F32, "qp_act_f32", a, 4, 1, g, ql);
    } else if (f8b) {
        size_t g[1] = {(size_t)M * (size_t)(K / 128) * WG};
        karg a[] = {A(xb->mem), A(K), A(bf16), A(l->ue8m0), A(l->xq), A(l->sx), A(dm)};
        st = run_kernel(d, l, QP_CL_K_QUANT_F8G, "qp_quant_f8_group", a, 7, 1, g, ql);
    } else if (!fp8) {
        int dynamic = l->act != QP_ACT_INT8_STATIC;
        karg a[] = {A(xb->mem), A(K), A(bf16), A(dynamic), A(l->symmetric), A(l->input_scale), A(l->input_zp),
                    A(l->xq), A(l->sx), A(l->szp), A(dm)};
        st = run_kernel(d, l, QP_CL_K_QUANT_I8, "qp_quant_i8", a, 11, 1, qg, ql);
    } else {
        int mode = l->act == QP_ACT_FP8_STATIC ? 0 : l->act == QP_ACT_FP8_DYNAMIC_TENSOR ? 1 : 2;
        if (mode == 1) {
            karg r[] = {A(xb->mem), A(K), A(bf16), A(l->rowmax)};
            st = run_kernel(d, l, QP_CL_K_ROWMAX, "qp_rowmax", r, 4, 1, qg, ql);
        }
        karg a[] = {A(xb->mem), A(K), A(M), A(bf16), A(mode), A(l->input_scale), A(l->rowmax), A(l->xq), A(l->sx),
                    A(dm)};
        if (st == QP_OK) st = run_kernel(d, l, QP_CL_K_QUANT_F8, "qp_quant_f8", a, 10, 1, qg, ql);
    }
    if (st != QP_OK) return st;
    int fam = l->fw ? FAM_FW : w4 ? FAM_W4 : qqq ? FAM_Q4 : f8b ? FAM_F8B : fp8 ? FAM_F8 : FAM_I8;
    for (int c = 0; c < l->n_chunks && st == QP_OK; c++) {
        /* weight chunk c holds columns nb .. ne-1 (one chunk unless the
         * layer is larger than one device allocation) */
        int nb = c * l->chunk_cols, ne = nb + l->chunk_cols < N ? nb + l->chunk_cols : N;
        gemm_place p = {use_gemv(l, M), M, K, N, nb, ne, 0, 0};
        if (p.gemv) {
            size_t g[1] = {(size_t)(ne - nb) * WG}, lo[1] = {WG};
            for (p.m0 = 0; p.m0 < M && st == QP_OK; p.m0 += GEMV_MAX_M) {
                p.rows = M - p.m0 < GEMV_MAX_M ? M - p.m0 : GEMV_MAX_M;
                st = run_gemm(d, l, fam, &p, l->w[c], adj, bias, yb->mem, g, lo);
            }
        } else {
            size_t g[2] = {(size_t)((ne - nb + TILE - 1) / TILE) * 8, (size_t)((M + TILE - 1) / TILE) * 8};
            size_t lo[2] = {8, 8};
            st = run_gemm(d, l, fam, &p, l->w[c], adj, bias, yb->mem, g, lo);
        }
    }
    if (st != QP_OK) return st;
    /* enqueued only: the kernels' errors surface at synchronize or an event */
    char what[96];
    snprintf(what, sizeof what, "layer '%.80s'", l->layer);
    qp_cl_enqueued(d, what);
    return QP_OK;
}

qp_status qp_cl_linear_reserve(void *dev, void *lin, int max_m) {
    qp_cl_linear *l = lin;
    return l && max_m > 0 ? ensure_scratch(dev, l, max_m) : QP_OK;
}

void qp_cl_linear_describe(void *dev, void *lin, int M, char *out, size_t cap) {
    qp_cl_device *d = dev;
    qp_cl_linear *l = lin;
    if (!out || !cap) return;
    if (!l) { out[0] = 0; return; }
    static const char *const divs[] = {"div native", "div fp64", "div fma", "div fma-test"};
    const char *div = divs[d->div_mode & 3];
    const char *arith = l->kind == QP_SCHEME_W8A8_FP8 ? "fp8->fp32"
                        : l->kind == QP_SCHEME_W8A8_FP8_BLOCK ? "fp8->fp32 128x128 blocks, act groups of 128"
                        : l->kind == QP_SCHEME_W4A16_INT4 ? "int4->fp32"
                        : l->kind == QP_SCHEME_UNQUANTIZED ? "fp16/bf16->fp32"
                        : l->fw ? (l->wfmt == 1 ? (l->blk == 16 ? "fp4->fp32 blocks of 16" : "fp4->fp32 blocks of 32")
                                                : "fp6/fp8->fp32 blocks of 32")
                        : l->kind == QP_SCHEME_QQQ_W4A8
                            ? (l->use_dot ? (d->int_dot_emulated ? "int4->int8 int-dot (emulated)" : "int4->int8 int-dot")
                                          : "int4->int8 plain")
                        : l->use_dot ? (d->int_dot_emulated ? "int-dot (emulated: QPORT_CL_FAKE_INT_DOT)" : "int-dot")
                                     : "int8 plain";
    char chunks[64] = "";
    if (l->n_chunks > 1) snprintf(chunks, sizeof chunks, ", %d weight chunks", l->n_chunks);
    if (l->fw && l->qmode) {
        static const char *const q[] = {"", "mx-qdq", "fp8-static-qdq", "nvfp4-qdq"};
        size_t u = strlen(chunks);
        snprintf(chunks + u, sizeof chunks - u, ", act %s", q[l->qmode & 3]);
    }
    if (use_gemv(l, M))
        snprintf(out, cap, "gemv wg%d %s, %s%s", WG, arith, div, chunks);
    else
        snprintf(out, cap, "tiled %dx%d %s, %s%s", TILE, TILE, arith, div, chunks);
}

/* Device time of `reps` forwards (profiling events): total from the first
 * kernel's start to the last one's end; gemm_ms from the first GEMM kernel's
 * start (the activation step excluded). One untimed forward first (PoCL
 * compiles per launch shape). */
qp_status qp_cl_linear_time(void *dev, void *lin, void *x, int M, void *y, int reps, double *total_ms, double *gemm_ms) {
    qp_cl_device *d = dev;
    qp_cl_linear *l = lin;
    if (!l || reps < 0 || (reps > 0 && (!total_ms || !gemm_ms)))
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "linear_time: NULL layer or output, or reps < 0");
    if (!d->profiling)
        return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "linear_time: the driver refused a profiling queue "
                         "(CL_QUEUE_PROFILING_ENABLE)");
    qp_status st = reps > 0 ? qp_cl_linear_forward(dev, lin, x, M, y) : QP_OK;
    for (int i = 0; i < reps && st == QP_OK; i++) {
        d->rec_on = 1;
        st = qp_cl_linear_forward(dev, lin, x, M, y);
        d->rec_on = 0;
        total_ms[i] = gemm_ms[i] = 0.0;
        if (st == QP_OK && d->rec_first) {
            st = qp_cl_event_ms(d, d->rec_first, d->rec_last, &total_ms[i]);
            if (st == QP_OK) {
                if (d->rec_gemm) st = qp_cl_event_ms(d, d->rec_gemm, d->rec_last, &gemm_ms[i]);
                else gemm_ms[i] = -1.0;
            }
        }
        release_recorded(d);
    }
    release_recorded(d);
    return st;
}
