/* Quantized linear layers on Vulkan: prepare (repack + upload) and forward
 * (activation quantization, then the GEMV or tiled GEMM with the fused
 * epilogue). Layouts chosen here:
 *   weights  [N][Kp] bytes, Kp = K rounded up to 16, zero padded (int8 for
 *            W8A8-INT8 and QQQ's exact w8, e4m3fn codes for W8A8-FP8), in
 *            chunks of whole rows that each fit maxStorageBufferRange;
 *   xq       [M][Kp] codes written by vk_act_quant.comp, same padding, so
 *            the padding contributes exact zeros;
 *   st       per-row statistics and activation scales (vk_layout.glsl).
 * Float-weight layers (W4A16, OCP-MX, W4A8-MXFP4-FP8, NVFP4,
 * unquantized): the canonical qp_lin_desc fields repacked by wf_pack below
 * (layouts in shaders/vk_wdeq.glsl); vk_act_qdq.comp writes x' as fp32 rows
 * [M][Kw] into xq, then vk_gemv_wf.comp / vk_gemm_wf.comp dequantize the
 * weights in registers. W8A8-FP8 per-block: e4m3 codes [N][K], block scales
 * [ceil(N/128)][K/128] (binding 4), vk_act_fp8g.comp writes the activation
 * codes to xq and the per-group scales to st, vk_g*_fp8b.comp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* Activation modes of vk_act_quant.comp (its MODE constant). */
enum { ACT_I8_STATIC_SYM = 0, ACT_I8_STATIC_ASYM, ACT_I8_DYN_SYM, ACT_I8_DYN_ASYM, ACT_F8_STATIC, ACT_F8_DYN_TENSOR,
       ACT_F8_DYN_TOKEN };
/* Epilogues of vk_epilogue.glsl (EPI). */
enum { EPI_I8_SYM = 0, EPI_I8_ASYM_STATIC, EPI_I8_ASYM_DYN, EPI_QQQ, EPI_FP8 };
/* Weight formats of shaders/vk_wdeq.glsl (WFMT) and modes of vk_act_qdq.comp. */
enum { WF_W4 = 0, WF_NIB, WF_BYTE, WF_HALF };
enum { QDQ_NONE = 0, QDQ_MX, QDQ_FP8_STATIC, QDQ_NVFP4 };

typedef struct vk_chunk {
    qp_vk_buf w;
    uint32_t n0, nc;
} vk_chunk;

typedef struct qp_vk_linear {
    char layer[96];
    qp_scheme_kind kind;
    uint32_t act, epi;
    bool bf16, has_bias, fp8;
    bool w4, grouped; /* QQQ from packed int4 codes (+ per-group tables) */
    bool wf;          /* float-weight layer (vk_wdeq.glsl), Kw = K rounded to 32 */
    uint32_t wfmt;    /* WF_*                                                */
    uint32_t qdq;     /* QDQ_*: the activation pass                          */
    bool fp8b;        /* W8A8-FP8 per-block                                  */
    bool bias_after;  /* y = rnd(rnd(sum) + bias)                            */
    uint32_t aux0, aux1;
    float aux2, aux3;
    size_t src_row;   /* float-weight layers: bytes per repacked row         */
    int gsz;          /* W4A16 group size (K when per-channel) or block size */
    int N, K;
    uint32_t Kw;
    bool use_dot, force_gemv, force_tiled;
    uint32_t gemv_wg;
    float input_scale;
    int32_t input_zp;
    qp_vk_buf ws, azp, bias;
    int n_chunks;
    vk_chunk *chunks;
} qp_vk_linear;

/* The bindings of one forward: the activation passes' and each weight
 * chunk's, pushed into the command buffer as it is recorded. */
typedef struct vk_binds {
    const qp_vk_buf *x, *y;
} vk_binds;

#define TILED_SHARED_BYTES (2 * 32 * QP_VK_TILE * 4 + 1024)

static bool act_is_dynamic(uint32_t act) {
    return act == ACT_I8_DYN_SYM || act == ACT_I8_DYN_ASYM || act == ACT_F8_DYN_TENSOR || act == ACT_F8_DYN_TOKEN;
}

static bool tiled_ok(const qp_vk_device *d) {
    return d->max_wg_invocations >= 256 && d->props.limits.maxComputeWorkGroupSize[0] >= 256 &&
           d->props.limits.maxComputeSharedMemorySize >= TILED_SHARED_BYTES;
}

void qp_vk_linear_destroy(void *dev, void *lin_) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin_;
    if (!l) return;
    if (qp_vk_busy(d)) (void)qp_vk_idle(d); /* work in flight may use it */
    for (int c = 0; c < l->n_chunks; c++) qp_vk_buf_destroy(d, &l->chunks[c].w);
    free(l->chunks);
    qp_vk_buf_destroy(d, &l->ws);
    qp_vk_buf_destroy(d, &l->azp);
    qp_vk_buf_destroy(d, &l->bias);
    free(l);
}

static qp_status upload_vec(qp_vk_device *d, qp_vk_linear *l, qp_vk_buf *b, const void *src, size_t bytes,
                            const char *tensor) {
    char what[160];
    snprintf(what, sizeof what, "layer '%s' tensor %s", l->layer, tensor);
    qp_status st = qp_vk_buf_create(d, bytes, false, what, b);
    return st == QP_OK ? qp_vk_upload(d, b, 0, src, bytes) : st;
}

/* Weights -> chunks of whole rows within the binding limit. 8-bit layout:
 * [rows][Kp] bytes. QQQ int4 layout (l->w4): [rows][Kp/2] bytes of packed
 * codes (vk_dot.glsl: word j holds k = 8j..8j+3 in the low nibbles of its
 * bytes, 8j+4..8j+7 in the high ones), then, grouped, [rows][K/128] tables
 * of 16 bytes mapping each code to its exact int8 weight. */
static void fill_row(const qp_vk_linear *l, const qp_lin_desc *desc, const uint8_t *w, uint32_t n, uint8_t *row,
                     uint8_t *lut) {
    size_t K = l->wf ? l->src_row : (size_t)l->K; /* bytes per row */
    if (!l->w4) {
        memcpy(row, w + (size_t)n * K, K);
        return;
    }
    const int8_t *q = desc->q4 + (size_t)n * K;
    for (size_t j = 0; j < (size_t)l->Kw / 2; j++)
        for (size_t b = 0; b < 4; b++) {
            size_t klo = 8 * j + b, khi = 8 * j + 4 + b;
            uint8_t lo = klo < K ? (uint8_t)(q[klo] & 15) : 0, hi = khi < K ? (uint8_t)(q[khi] & 15) : 0;
            row[4 * j + b] = (uint8_t)(lo | hi << 4);
        }
    if (l->grouped)
        for (size_t k = 0; k < K; k++) lut[(k / 128) * 16 + (uint8_t)(q[k] & 15)] = (uint8_t)desc->w8[(size_t)n * K + k];
}

static qp_status upload_weights(qp_vk_device *d, qp_vk_linear *l, const qp_lin_desc *desc, const uint8_t *w,
                                const char *tensor) {
    size_t row_b = l->wf ? l->src_row : l->w4 ? (size_t)l->Kw * 2 : (size_t)l->Kw * 4;
    size_t lut_b = l->grouped ? (size_t)(l->K / 128) * 16 : 0;
    uint64_t rows = d->weight_range / (row_b + lut_b);
    if (rows == 0)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, l->layer,
                         "one weight row of %zu bytes exceeds the binding limit (%llu)", row_b + lut_b, (unsigned long long)d->weight_range);
    uint64_t max_groups = d->props.limits.maxComputeWorkGroupCount[0];
    if (rows > max_groups * QP_VK_GEMV_COLS) rows = max_groups * QP_VK_GEMV_COLS;
    if (rows > (uint64_t)l->N) rows = (uint64_t)l->N;
    l->n_chunks = (int)(((uint64_t)l->N + rows - 1) / rows);
    l->chunks = calloc((size_t)l->n_chunks, sizeof *l->chunks);
    uint8_t *tmp = malloc((size_t)rows * (row_b + lut_b));
    if (!l->chunks || !tmp) {
        free(tmp);
        return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, l->layer, "out of host memory repacking %s", tensor);
    }
    qp_status st = QP_OK;
    for (int c = 0; c < l->n_chunks && st == QP_OK; c++) {
        vk_chunk *ch = &l->chunks[c];
        ch->n0 = (uint32_t)((uint64_t)c * rows);
        ch->nc = (uint32_t)((uint64_t)l->N - ch->n0 < rows ? (uint64_t)l->N - ch->n0 : rows);
        size_t bytes = (size_t)ch->nc * (row_b + lut_b);
        memset(tmp, 0, bytes);
        for (uint32_t r = 0; r < ch->nc; r++)
            fill_row(l, desc, w, ch->n0 + r, tmp + r * row_b, tmp + (size_t)ch->nc * row_b + r * lut_b);
        char what[160];
        snprintf(what, sizeof what, "layer '%s' tensor %s (chunk %d of %d)", l->layer, tensor, c + 1, l->n_chunks);
        st = qp_vk_buf_create(d, bytes, false, what, &ch->w);
        if (st == QP_OK) st = qp_vk_upload(d, &ch->w, 0, tmp, bytes);
    }
    free(tmp);
    return st;
}

/* QQQ int4 layout preconditions: q4 and w8 agree (per-channel w8 = 16*q4;
 * grouped, one int8 weight per code within a (column, group)). */
static qp_status check_qqq_codes(qp_vk_device *d, const qp_vk_linear *l, const qp_lin_desc *desc) {
    size_t K = (size_t)l->K;
    for (size_t n = 0; n < (size_t)l->N; n++) {
        int16_t seen[16];
        for (size_t k = 0; k < K; k++) {
            if (l->grouped && k % 128 == 0)
                for (int c = 0; c < 16; c++) seen[c] = INT16_MIN;
            int8_t q = desc->q4[n * K + k], w8 = desc->w8[n * K + k];
            bool ok;
            if (!l->grouped) {
                ok = q >= -8 && q <= 7 && w8 == (int8_t)(uint8_t)(16 * q);
            } else {
                ok = q >= 0 && q <= 15 && (seen[q] == INT16_MIN || seen[q] == w8);
                if (ok) seen[q] = w8;
            }
            if (!ok)
                return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, l->layer,
                                 "QQQ q4 and w8 disagree at column %zu, k %zu (q4 %d, w8 %d)", n, k, q, w8);
        }
    }
    return QP_OK;
}

/* ---- float-weight layers -------------------------------------------
 * W4A16, OCP-MX, W4A8-MXFP4-FP8, NVFP4 and unquantized layers from the
 * canonical qp_lin_desc fields, repacked into the layouts of
 * shaders/vk_wdeq.glsl: rows of Kw/32 chunks (Kw = K rounded up to 32, the
 * padding codes 0), k = 32c + 8j + b in nibble b of word j (4-bit formats),
 * byte k (8-bit codes) or half k (act-dtype weights); per-row scales [G][N]
 * (W4A16: w4_scale, zero points w4_zero or 8 for int4, codes stored c ^ 8)
 * or block multipliers [N][Kw / w_blk] (padding 1.0) with the 256-entry
 * value table w_lut. */
typedef struct wf_host {
    uint8_t *w;   /* [N][src_row] */
    float *sc;    /* W4A16 [G][N]; LUT formats [N][Kw / blk] */
    int32_t *aux; /* W4A16 zero points [G][N]; LUT formats the table's bits */
    size_t n_sc, n_aux;
} wf_host;

static void wf_free(wf_host *h) {
    free(h->w); free(h->sc); free(h->aux);
    memset(h, 0, sizeof *h);
}

static qp_status wf_pack(qp_vk_device *d, qp_vk_linear *l, const qp_lin_desc *s, wf_host *h) {
    const char *layer = l->layer;
    size_t N = (size_t)s->N, K = (size_t)s->K, Kw = l->Kw;
    l->src_row = l->wfmt == WF_HALF ? 2 * Kw : l->wfmt == WF_BYTE ? Kw : Kw / 2;
    h->w = calloc(N * l->src_row, 1);
    if (!h->w) goto oom;
    if (l->wfmt == WF_W4 || l->wfmt == WF_NIB) {
        const uint8_t *codes = l->wfmt == WF_W4 ? (const uint8_t *)s->q4 : s->w_codes;
        uint8_t flip = l->wfmt == WF_W4 && s->w4_signed ? 8 : 0;
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) {
                uint8_t u = (uint8_t)((codes[n * K + k] & 15) ^ flip);
                size_t c = k / 32, j = (k % 32) / 8, b = k % 8;
                h->w[n * l->src_row + (c * 4 + j) * 4 + b / 2] |= (uint8_t)(u << (4 * (b % 2)));
            }
    } else if (l->wfmt == WF_BYTE) {
        uint8_t mask = s->w_elem == QP_DTYPE_F8_E4M3FN ? 0xFF : 0x3F;
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) h->w[n * l->src_row + k] = s->w_codes[n * K + k] & mask;
    } else {
        for (size_t n = 0; n < N; n++) memcpy(h->w + n * l->src_row, s->w_act + n * K, 2 * K);
    }
    if (l->wfmt == WF_W4) {
        size_t G = K / (size_t)l->gsz;
        h->n_sc = h->n_aux = G * N;
        h->sc = malloc(sizeof(float) * h->n_sc);
        h->aux = malloc(sizeof(int32_t) * h->n_aux);
        if (!h->sc || !h->aux) goto oom;
        for (size_t i = 0; i < G * N; i++) {
            h->sc[i] = s->w4_scale[i];
            h->aux[i] = s->w4_signed ? 8 : (int32_t)(s->w4_zero[i] & 15);
        }
    } else if (l->wfmt != WF_HALF) {
        size_t blk = (size_t)l->gsz, nb = K / blk, nbw = Kw / blk;
        h->n_sc = N * nbw;
        h->n_aux = 256;
        h->sc = malloc(sizeof(float) * h->n_sc);
        h->aux = malloc(sizeof(int32_t) * h->n_aux);
        if (!h->sc || !h->aux) goto oom;
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < nbw; i++) h->sc[n * nbw + i] = i < nb ? s->w_blk_scale[n * nb + i] : 1.0f;
        memcpy(h->aux, s->w_lut, sizeof(float) * 256);
    }
    return QP_OK;
oom:
    wf_free(h);
    return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory repacking the weights");
}

/* Activation element formats of vk_act_qdq.comp (pc.aux0), -1 for none. */
static int qdq_elem(qp_dtype e) {
    switch (e) {
    case QP_DTYPE_F4_E2M1: return 0;
    case QP_DTYPE_F6_E3M2: return 1;
    case QP_DTYPE_F6_E2M3: return 2;
    case QP_DTYPE_F8_E4M3FN: return 3;
    default: return -1;
    }
}

bool qp_vk_mx_qdq(qp_dtype elem, int mbits, int emax, uint32_t *aux0, uint32_t *aux1) {
    int e = qdq_elem(elem);
    if (e < 0 || mbits < 1 || mbits > 22 || emax < 0 || emax > 255) return false;
    *aux0 = (uint32_t)e;
    *aux1 = (uint32_t)mbits | (uint32_t)emax << 8;
    return true;
}

/* Checks and float-weight setup of the issue-9 schemes; sets l->wf. */
static qp_status prepare_wf(qp_vk_device *d, qp_vk_linear *l, const qp_lin_desc *s) {
    const char *layer = l->layer, *sn = qp_vk_scheme_name(s->kind);
    int K = s->K;
    l->wf = true;
    l->fp8 = true; /* a float layer: no integer dot product */
    l->Kw = (uint32_t)(((size_t)K + 31) / 32 * 32); /* fp32 words per x' row */
    l->qdq = QDQ_NONE;
    switch (s->kind) {
    case QP_SCHEME_W4A16_INT4: {
        int g = s->group_size > 0 ? s->group_size : K;
        if (!s->q4 || !s->w4_scale || (!s->w4_signed && !s->w4_zero))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "W4A16 needs q4, w4_scale and (uint4) "
                             "w4_zero");
        if (K % g)
            return qp_vk_error(d, QP_ERR_VALUE, layer, "input size %d is not divisible by the group size %d", K, g);
        if (g != K && g % 32)
            return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: W4A16 group size %d not a "
                             "multiple of 32 (the shader takes 32/64/128/... or per-channel)", g);
        if (s->act != QP_ACT_NONE)
            return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "W4A16 with activation mode %d", (int)s->act);
        char why[160];
        if (qp_lin_w4_range_error(s, why, sizeof why)) return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "%s", why);
        l->wfmt = WF_W4;
        l->gsz = g;
        return QP_OK;
    }
    case QP_SCHEME_UNQUANTIZED:
        if (!s->w_act)
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "unquantized layer needs w_act");
        if (s->act != QP_ACT_NONE)
            return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "unquantized layer with activation mode %d", (int)s->act);
        l->wfmt = WF_HALF;
        l->gsz = 32;
        return QP_OK;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
        break;
    default:
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "unsupported: %s not yet implemented on vulkan", sn);
    }
    if (!s->w_codes || !s->w_lut || !s->w_blk_scale || (s->w_blk != 16 && s->w_blk != 32))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "%s needs w_codes, w_lut, w_blk_scale and "
                         "w_blk 16 or 32 (got %d)", sn, s->w_blk);
    if (K % s->w_blk)
        return qp_vk_error(d, QP_ERR_VALUE, layer, "input size %d is not a multiple of the block size %d", K, s->w_blk);
    if (s->w_elem == QP_DTYPE_F4_E2M1) l->wfmt = WF_NIB;
    else if (s->w_elem == QP_DTYPE_F6_E2M3 || s->w_elem == QP_DTYPE_F6_E3M2 || s->w_elem == QP_DTYPE_F8_E4M3FN)
        l->wfmt = WF_BYTE;
    else
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "%s weight element format %d", sn,
                         (int)s->w_elem);
    l->gsz = s->w_blk;
    switch (s->act) {
    case QP_ACT_NONE: l->qdq = QDQ_NONE; break;
    case QP_ACT_MX_QDQ:
        if (!qp_vk_mx_qdq(s->act_elem, s->act_mbits, s->act_emax, &l->aux0, &l->aux1))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "MX activation element %d (mbits %d, "
                             "emax %d)", (int)s->act_elem, s->act_mbits, s->act_emax);
        l->qdq = QDQ_MX;
        break;
    case QP_ACT_FP8_STATIC_QDQ:
        if (!(s->input_scale > 0.0f) || isinf(s->input_scale))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "input_scale must be finite and > 0");
        l->qdq = QDQ_FP8_STATIC;
        break;
    case QP_ACT_NVFP4_QDQ: {
        if (!(s->input_global_scale_inv > 0.0f) || isinf(s->input_global_scale_inv))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, layer, "input_global_scale_inv must be finite and > 0");
        if (K % 16)
            return qp_vk_error(d, QP_ERR_VALUE, layer, "NVFP4 input size %d not a multiple of 16", K);
        volatile float one = 1.0f, six = 6.0f; /* correctly rounded fp32 divisions at run time */
        float g = s->input_global_scale_inv;
        l->qdq = QDQ_NVFP4;
        l->input_scale = g;
        l->aux2 = one / g;
        l->aux3 = one / six;
        break;
    }
    default:
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, layer, "%s with activation mode %d", sn,
                         (int)s->act);
    }
    l->bias_after = s->bias_after_round != 0;
    return QP_OK;
}

qp_status qp_vk_linear_prepare(void *dev, const qp_lin_desc *desc, unsigned path, void **out) {
    qp_vk_device *d = dev;
    *out = NULL;
    if (!desc || desc->N <= 0 || desc->K <= 0)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "linear_prepare: NULL description or bad shape");
    const char *layer = desc->layer ? desc->layer : "";
    qp_vk_linear *l = QP_BACKEND_LAYER_NEW(qp_vk_linear, layer);
    if (!l) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory");
    l->kind = desc->kind;
    l->N = desc->N;
    l->K = desc->K;
    l->Kw = (uint32_t)(((size_t)desc->K + 15) / 16 * 4);
    l->bf16 = desc->act_dtype == QP_DTYPE_BF16;
    l->has_bias = desc->bias != NULL;
    l->input_scale = desc->input_scale;
    l->input_zp = desc->input_zp;
    qp_status st = QP_OK;
    const uint8_t *weights = NULL;
    const char *wname = "weight";
    const int32_t *azp_adj = NULL;
    wf_host wfh = {0}; /* float-weight host repack, freed at the end */

#define FAIL(status, ...) do { st = qp_vk_error(d, status, layer, __VA_ARGS__); goto fail; } while (0)
/* a refusal of the device itself (its name, not the layer) */
#define FAIL_DEV(status, ...) do { st = QP_VK_ERR(d, status, __VA_ARGS__); goto fail; } while (0)
    if (desc->act_dtype != QP_DTYPE_F16 && desc->act_dtype != QP_DTYPE_BF16)
        FAIL(QP_ERR_INVALID_ARGUMENT, "activations must be fp16 or bf16");
    switch (desc->kind) {
    case QP_SCHEME_W8A8_INT8:
        if (!desc->w_i8 || !desc->w_scale)
            FAIL(QP_ERR_INVALID_ARGUMENT, "W8A8-INT8 needs w_i8 and w_scale");
        if (desc->act == QP_ACT_INT8_STATIC) {
            l->act = desc->act_symmetric ? ACT_I8_STATIC_SYM : ACT_I8_STATIC_ASYM;
            l->epi = desc->act_symmetric ? EPI_I8_SYM : EPI_I8_ASYM_STATIC;
        } else if (desc->act == QP_ACT_INT8_DYNAMIC_TOKEN) {
            l->act = desc->act_symmetric ? ACT_I8_DYN_SYM : ACT_I8_DYN_ASYM;
            l->epi = desc->act_symmetric ? EPI_I8_SYM : EPI_I8_ASYM_DYN;
        } else {
            FAIL(QP_ERR_UNSUPPORTED, "W8A8-INT8 with activation mode %d",
                 (int)desc->act);
        }
        if (!desc->act_symmetric && !desc->azp_adj)
            FAIL(QP_ERR_INVALID_ARGUMENT, "asymmetric activations need azp_adj");
        weights = (const uint8_t *)desc->w_i8;
        azp_adj = desc->act_symmetric ? NULL : desc->azp_adj;
        break;
    case QP_SCHEME_QQQ_W4A8:
        if (!desc->w8 || !desc->s_channel)
            FAIL(QP_ERR_INVALID_ARGUMENT, "QQQ needs w8 and s_channel");
        if (desc->group_size != -1 && desc->group_size != 128)
            FAIL(QP_ERR_UNSUPPORTED, "QQQ group size %d", desc->group_size);
        if (desc->act_dtype != QP_DTYPE_F16)
            FAIL(QP_ERR_UNSUPPORTED, "QQQ takes fp16 activations");
        l->act = ACT_I8_DYN_SYM; /* docs/semantics.md §11 step 1, docs/semantics.md §11 */
        l->epi = EPI_QQQ;
        weights = (const uint8_t *)desc->w8; /* exact per-group int8 weight (docs/semantics.md §11 step 2) */
        wname = "w8";
        /* int4 codes halve the weight traffic; without q4 (or K not whole
         * groups) the 8-bit w8 layout serves */
        l->w4 = desc->q4 && (desc->group_size == -1 || desc->K % 128 == 0);
        l->grouped = l->w4 && desc->group_size == 128;
        if (l->w4) {
            wname = "q4";
            if ((st = check_qqq_codes(d, l, desc)) != QP_OK) goto fail;
        }
        break;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
        if (!desc->w_u8 || !desc->w_scale)
            FAIL(QP_ERR_INVALID_ARGUMENT, "W8A8-FP8 needs w_u8 and w_scale");
        if (desc->act == QP_ACT_FP8_STATIC) l->act = ACT_F8_STATIC;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TENSOR) l->act = ACT_F8_DYN_TENSOR;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TOKEN) l->act = ACT_F8_DYN_TOKEN;
        else FAIL(QP_ERR_UNSUPPORTED, "unsupported: W8A8-FP8 activation mode %d not yet implemented on vulkan", (int)desc->act);
        l->epi = EPI_FP8;
        l->fp8 = true;
        weights = desc->w_u8;
        break;
    case QP_SCHEME_W8A8_FP8_BLOCK:
        if (!desc->w_u8 || !desc->w_scale)
            FAIL(QP_ERR_INVALID_ARGUMENT, "W8A8-FP8 per-block needs w_u8 and w_scale");
        if (desc->act != QP_ACT_FP8_GROUP128)
            FAIL(QP_ERR_UNSUPPORTED, "W8A8-FP8 per-block with activation mode %d",
                 (int)desc->act);
        if (desc->K % 128)
            FAIL(QP_ERR_VALUE, "per-block fp8 needs K (%d) to be a multiple of 128", desc->K);
        l->fp8 = l->fp8b = true;
        l->aux0 = (uint32_t)(desc->K / 128);
        l->aux1 = desc->ue8m0 != 0;
        weights = desc->w_u8;
        break;
    case QP_SCHEME_W4A16_INT4:
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
    case QP_SCHEME_UNQUANTIZED:
        if ((st = prepare_wf(d, l, desc)) != QP_OK || (st = wf_pack(d, l, desc, &wfh)) != QP_OK) goto fail;
        if (sizeof(float) * wfh.n_sc > d->max_range)
            FAIL(QP_ERR_UNSUPPORTED, "%zu weight scales exceed one binding "
                 "(maxStorageBufferRange %llu bytes)", wfh.n_sc, (unsigned long long)d->max_range);
        weights = wfh.w;
        wname = desc->kind == QP_SCHEME_UNQUANTIZED ? "weight" : "weight codes";
        break;
    default:
        FAIL(QP_ERR_UNSUPPORTED, "unsupported: %s not yet implemented on vulkan",
             qp_vk_scheme_name(desc->kind));
    }

    /* code paths */
    if ((path & QP_PATH_GEMV) && (path & QP_PATH_TILED))
        FAIL(QP_ERR_INVALID_ARGUMENT, "GEMV and TILED forced together");
    if ((path & QP_PATH_INT_DOT) && (path & QP_PATH_NO_INT_DOT))
        FAIL(QP_ERR_INVALID_ARGUMENT, "INT_DOT and NO_INT_DOT forced together");
    l->force_gemv = path & QP_PATH_GEMV;
    l->force_tiled = path & QP_PATH_TILED;
    if (l->force_tiled && !tiled_ok(d))
        FAIL_DEV(QP_ERR_UNSUPPORTED, "vulkan:%d '%s': forced tiled path: needs 256 invocations and %d bytes of shared memory",
             d->index, d->props.deviceName, TILED_SHARED_BYTES);
    bool have_dot = d->int_dot && qp_vk_spirv_get(QP_VK_SH_GEMV_I8_DOT)->code;
    if (path & QP_PATH_INT_DOT) {
        if (l->fp8)
            FAIL(QP_ERR_UNSUPPORTED, "forced int-dot path: %s has no integer dot product", l->wf ? "this float-weight layer (fp32 multiply-adds)" : "W8A8-FP8");
        if (!have_dot)
            FAIL_DEV(QP_ERR_UNSUPPORTED, "vulkan:%d '%s': forced int-dot path: %s", d->index, d->props.deviceName,
                 d->int_dot ? "the OpSDot shaders were not built (glslang lacks GL_EXT_spirv_intrinsics)"
                            : "the device lacks shaderIntegerDotProduct");
        l->use_dot = true;
    } else if (!(path & QP_PATH_NO_INT_DOT)) {
        l->use_dot = !l->fp8 && have_dot && d->int_dot_accel;
    }
    /* the tuning row's size, halved while the GEMV's shared rows do not fit */
    l->gemv_wg = d->tuning.gemv_wg;
    while (l->gemv_wg > 16 && (uint64_t)QP_VK_GEMV_MAX_M * QP_VK_GEMV_COLS * 4 * l->gemv_wg + 1024 >
                                  d->props.limits.maxComputeSharedMemorySize)
        l->gemv_wg /= 2;

    /* uploads */
    st = upload_weights(d, l, desc, weights, wname);
    if (st != QP_OK) goto fail;
    if (l->wf) {
        if (wfh.sc) st = upload_vec(d, l, &l->ws, wfh.sc, sizeof(float) * wfh.n_sc, "weight scales");
        if (st == QP_OK && wfh.aux)
            st = upload_vec(d, l, &l->azp, wfh.aux, sizeof(int32_t) * wfh.n_aux,
                            l->wfmt == WF_W4 ? "zero points" : "code values (w_lut)");
    } else if (l->fp8b) {
        size_t nb = (size_t)(desc->N + 127) / 128 * (size_t)(desc->K / 128);
        st = upload_vec(d, l, &l->ws, desc->w_scale, sizeof(float) * nb, "weight_scale (blocks)");
    } else {
        st = upload_vec(d, l, &l->ws, l->epi == EPI_QQQ ? desc->s_channel : desc->w_scale, sizeof(float) * (size_t)l->N,
                        l->epi == EPI_QQQ ? "s_channel" : "weight_scale");
    }
    if (st == QP_OK && azp_adj) st = upload_vec(d, l, &l->azp, azp_adj, sizeof(int32_t) * (size_t)l->N, "azp_adj");
    if (st == QP_OK && desc->bias) st = upload_vec(d, l, &l->bias, desc->bias, sizeof(uint16_t) * (size_t)l->N, "bias");
    if (st != QP_OK) goto fail;

#undef FAIL
#undef FAIL_DEV
    wf_free(&wfh);
    *out = l;
    return QP_OK;
fail:
    wf_free(&wfh);
    qp_vk_linear_destroy(d, l);
    return st;
}

static VkDescriptorBufferInfo bind_of(const qp_vk_device *d, const qp_vk_buf *b) {
    const qp_vk_buf *u = b && b->buf ? b : &d->dummy;
    VkDeviceSize range = u->alloc_size < d->max_range ? u->alloc_size : d->max_range;
    return (VkDescriptorBufferInfo){.buffer = u->buf, .offset = u->offset, .range = range};
}

void qp_vk_push_set(qp_vk_device *d, const qp_vk_buf *const bufs[QP_VK_BINDINGS]) {
    VkDescriptorBufferInfo info[QP_VK_BINDINGS];
    VkWriteDescriptorSet w[QP_VK_BINDINGS];
    for (uint32_t i = 0; i < QP_VK_BINDINGS; i++) {
        info[i] = bind_of(d, bufs[i]);
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = i,
                                      .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &info[i]};
    }
    d->push_set(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, QP_VK_BINDINGS, w);
}

void qp_vk_barrier(qp_vk_device *d) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    d->fn->vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                                   1, &mb, 0, NULL, 0, NULL);
}

static bool use_gemv(const qp_vk_device *d, const qp_vk_linear *l, int M) {
    if (l->force_gemv) return true;
    if (l->force_tiled) return false;
    return M <= d->tuning.gemv_max_m || !tiled_ok(d);
}

static qp_vk_shader gemm_shader(const qp_vk_linear *l, bool gemv) {
    if (l->wf) return gemv ? QP_VK_SH_GEMV_WF : QP_VK_SH_GEMM_WF;
    if (l->fp8b) return gemv ? QP_VK_SH_GEMV_FP8B : QP_VK_SH_GEMM_FP8B;
    if (l->fp8) return gemv ? QP_VK_SH_GEMV_FP8 : QP_VK_SH_GEMM_FP8;
    if (l->w4 && l->use_dot) return gemv ? QP_VK_SH_GEMV_W4_DOT : QP_VK_SH_GEMM_W4_DOT;
    if (l->w4) return gemv ? QP_VK_SH_GEMV_W4 : QP_VK_SH_GEMM_W4;
    if (l->use_dot) return gemv ? QP_VK_SH_GEMV_I8_DOT : QP_VK_SH_GEMM_I8_DOT;
    return gemv ? QP_VK_SH_GEMV_I8 : QP_VK_SH_GEMM_I8;
}

static void dispatch(qp_vk_device *d, VkPipeline p, const qp_vk_push *pc, uint32_t gx, uint32_t gy) {
    qp_vk_fns *f = d->fn;
    f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *pc, pc);
    f->vkCmdDispatch(d->cmd, gx, gy, 1);
    qp_vk_barrier(d);
}

/* Records the forward. With a query pool, timestamps q0 (start), q0 + 1
 * (after the activation passes) and q0 + 2 (end) bracket the GEMM. */
static qp_status record(qp_vk_device *d, qp_vk_linear *l, int M, const vk_binds *b, VkQueryPool qp, uint32_t q0) {
    qp_vk_fns *f = d->fn;
    qp_vk_push pc = {.M = (uint32_t)M, .K = (uint32_t)l->K, .Kw = l->Kw, .N = (uint32_t)l->N,
                     .input_scale = l->input_scale, .input_zp = l->wf ? l->gsz : l->input_zp,
                     .flags = (l->bf16 ? QP_VK_PC_BF16 : 0u) | (l->has_bias ? QP_VK_PC_BIAS : 0u) |
                              (l->bias_after ? QP_VK_PC_BIAS_AFTER : 0u),
                     .epi = l->epi, .aux0 = l->aux0, .aux1 = l->aux1, .aux2 = l->aux2, .aux3 = l->aux3};
    uint32_t spec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64, [QP_VK_SPEC_MODE] = l->act};
    VkPipeline p;
    qp_status st;
    if (qp) f->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, q0);
    const qp_vk_buf *none = &d->dummy;
    const qp_vk_buf *act[QP_VK_BINDINGS] = {b->x, &d->xq, &d->st, none, none, none, none, none};
    qp_vk_push_set(d, act);
    if (l->wf) {
        /* x' as fp32 rows (plain or fake-quantized) */
        uint32_t sspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64, [QP_VK_SPEC_MODE] = l->qdq};
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_QDQ, sspec, &p)) != QP_OK) return st;
        dispatch(d, p, &pc, (uint32_t)M, 1);
    } else if (l->fp8b) {
        uint32_t sspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 32};
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_FP8G, sspec, &p)) != QP_OK) return st;
        dispatch(d, p, &pc, l->aux0, (uint32_t)M);
    } else {
        if (act_is_dynamic(l->act)) {
            uint32_t sspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64}; /* one pipeline for every mode */
            if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_STATS, sspec, &p)) != QP_OK) return st;
            dispatch(d, p, &pc, (uint32_t)M, 1);
        }
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_QUANT, spec, &p)) != QP_OK) return st;
        dispatch(d, p, &pc, (uint32_t)M, 1);
    }
    if (qp) f->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, q0 + 1);

    bool gemv = use_gemv(d, l, M);
    uint32_t gspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = l->gemv_wg, [QP_VK_SPEC_GROUPED] = l->grouped,
                                        [QP_VK_SPEC_WFMT] = l->wf ? l->wfmt : 0};
    /* GEMV: rows per dispatch, the next power of two of M up to 16 */
    uint32_t rows = 1;
    while (gemv && rows < QP_VK_GEMV_MAX_M && rows < (uint32_t)M) rows *= 2;
    gspec[QP_VK_SPEC_ROWS] = gemv ? rows : 0;
    if (!gemv) gspec[QP_VK_SPEC_WG] = 256;
    if ((st = qp_vk_pipeline_get(d, gemm_shader(l, gemv), gspec, &p)) != QP_OK) return st;
    f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    for (int c = 0; c < l->n_chunks; c++) {
        vk_chunk *ch = &l->chunks[c];
        const qp_vk_buf *g[QP_VK_BINDINGS] = {b->x, &d->xq, &d->st, &ch->w, &l->ws, &l->azp, &l->bias, b->y};
        qp_vk_push_set(d, g);
        pc.n_base = ch->n0;
        pc.n_count = ch->nc;
        if (gemv) {
            for (int m0 = 0; m0 < M; m0 += (int)rows) {
                pc.M = (uint32_t)M - (uint32_t)m0 < rows ? (uint32_t)M - (uint32_t)m0 : rows;
                pc.m_base = (uint32_t)m0;
                f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
                f->vkCmdDispatch(d->cmd, (ch->nc + QP_VK_GEMV_COLS - 1) / QP_VK_GEMV_COLS, 1, 1);
            }
        } else {
            pc.M = (uint32_t)M;
            pc.m_base = 0;
            f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
            f->vkCmdDispatch(d->cmd, (ch->nc + QP_VK_TILE - 1) / QP_VK_TILE, ((uint32_t)M + QP_VK_TILE - 1) / QP_VK_TILE, 1);
        }
    }
    if (qp) f->vkCmdWriteTimestamp(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qp, q0 + 2);
    return QP_OK;
}

/* The scratch (quantized activations and row statistics, shared by the
 * device's layers: one queue, a barrier between consecutive ops) for M rows. */
static qp_status reserve_scratch(qp_vk_device *d, qp_vk_linear *l, int M) {
    size_t qb = (size_t)M * l->Kw * 4, sb = (size_t)M * QP_VK_ST_WORDS * 4;
    if (l->fp8b && l->aux0 > QP_VK_ST_WORDS) sb = (size_t)M * l->aux0 * 4; /* per-group scales */
    qp_status st = qp_vk_buf_reserve(d, &d->xq, qb, "quantized activations");
    return st == QP_OK ? qp_vk_buf_reserve(d, &d->st, sb, "activation scales") : st;
}

qp_status qp_vk_linear_reserve(void *dev, void *lin, int max_m) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    if (!l || max_m <= 0) return QP_OK;
    if ((size_t)max_m * l->Kw * 4 > d->max_range) max_m = (int)(d->max_range / 4 / l->Kw); /* forward refuses more */
    return max_m > 0 ? reserve_scratch(d, l, max_m) : QP_OK;
}

/* Checks the buffers and grows the scratch for M rows. */
static qp_status forward_bind(qp_vk_device *d, qp_vk_linear *l, qp_vk_buf *x, int M, qp_vk_buf *y) {
    size_t xb = (size_t)M * (size_t)l->K * 2, yb = (size_t)M * (size_t)l->N * 2;
    size_t qb = (size_t)M * l->Kw * 4, sb = (size_t)M * QP_VK_ST_WORDS * 4;
    if (l->fp8b && l->aux0 > QP_VK_ST_WORDS) sb = (size_t)M * l->aux0 * 4; /* per-group scales */
    if (x->size < xb || y->size < yb)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, l->layer,
                         "buffers too small for M=%d (x %zu < %zu or y %zu < %zu bytes)", M, x->size, xb, y->size, yb);
    if (xb > d->max_range || yb > d->max_range || qb > d->max_range)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, l->layer,
                         "M=%d rows of activations exceed maxStorageBufferRange (%llu bytes); "
                         "split the batch", M, (unsigned long long)d->max_range);
    uint64_t max_y = d->props.limits.maxComputeWorkGroupCount[1];
    if ((uint64_t)M > d->props.limits.maxComputeWorkGroupCount[0] || (l->fp8b && (uint64_t)M > max_y) ||
        (!use_gemv(d, l, M) && ((uint64_t)M + QP_VK_TILE - 1) / QP_VK_TILE > max_y))
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, l->layer, "M=%d exceeds the dispatch limit", M);
    (void)sb;
    return reserve_scratch(d, l, M);
}

qp_status qp_vk_linear_forward(void *dev, void *lin, void *x_, int M, void *y_) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    qp_vk_buf *x = x_, *y = y_;
    if (!l || !x || !y || M < 0)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "linear_forward: NULL argument or negative M");
    if (M == 0) return QP_OK;
    qp_status st = forward_bind(d, l, x, M, y);
    if (st != QP_OK) return st;
    char what[120];
    snprintf(what, sizeof what, "layer '%.100s'", l->layer);
    if ((st = qp_vk_rec_begin(d, what)) != QP_OK) return st;
    vk_binds b = {x, y};
    return qp_vk_rec_end(d, what, record(d, l, M, &b, VK_NULL_HANDLE, 0));
}

void qp_vk_linear_describe(void *dev, void *lin, int M, char *out, size_t cap) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    if (!cap) return;
    bool gemv = use_gemv(d, l, M);
    static const char *const wf_names[] = {"int4->fp32", "fp4->fp32", "fp6/fp8->fp32", "fp16/bf16->fp32"};
    static const char *const qdq_names[] = {"", " qdq-mx", " qdq-fp8", " qdq-nvfp4"};
    const char *arith = l->wf ? wf_names[l->wfmt] : l->fp8b ? "fp8-block->fp32" : l->fp8 ? "fp8->fp32"
                        : l->use_dot ? "int-dot" : "no-int-dot";
    const char *wfmt = l->wf ? qdq_names[l->qdq] : l->w4 ? (l->grouped ? " int4+lut" : " int4") : "";
    char chunks[40] = "";
    if (l->n_chunks > 1) snprintf(chunks, sizeof chunks, ", %d weight chunks", l->n_chunks);
    if (gemv) snprintf(out, cap, "gemv %s%s wg%u%s", arith, wfmt, l->gemv_wg, chunks);
    else snprintf(out, cap, "tiled %dx%d %s%s%s", QP_VK_TILE, QP_VK_TILE, arith, wfmt, chunks);
}

/* linear_time: `reps` forwards, each its own submission, with
 * timestamps at the start, after the activation passes and at the end
 * (VkQueryPool, timestampPeriod ns a tick): total_ms[i] = end - start,
 * gemm_ms[i] = end - after-activations. */
qp_status qp_vk_linear_time(void *dev, void *lin, void *x_, int M, void *y_, int reps, double *total_ms,
                            double *gemm_ms) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    qp_vk_fns *f = d->fn;
    if (!l || !x_ || !y_ || M <= 0 || reps <= 0 || !total_ms)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "linear_time: NULL argument, M <= 0 or reps <= 0");
    if (!d->timestamp_bits || d->props.limits.timestampPeriod <= 0.0f)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d '%s': the compute queue has no timestamps "
                         "(timestampValidBits 0)", d->index, d->props.deviceName);
    qp_status st = forward_bind(d, l, x_, M, y_);
    if (st != QP_OK) return st;
    VkQueryPool pool;
    uint64_t mask;
    if ((st = qp_vk_timestamp_pool(d, 3, &pool, &mask)) != QP_OK) return st;
    double ns = d->props.limits.timestampPeriod;
    for (int i = 0; i < reps && st == QP_OK; i++) {
        if ((st = qp_vk_cmd_begin(d)) != QP_OK) break;
        f->vkCmdResetQueryPool(d->cmd, pool, 0, 3);
        vk_binds b = {x_, y_};
        st = record(d, l, M, &b, pool, 0);
        if (st != QP_OK) {
            f->vkEndCommandBuffer(d->cmd);
            break;
        }
        char what[160];
        snprintf(what, sizeof what, "the timed forward of layer '%s'", l->layer);
        if ((st = qp_vk_cmd_submit(d, what)) != QP_OK) break;
        uint64_t t[3];
        if ((st = qp_vk_timestamps(d, pool, 3, t)) != QP_OK) break;
        total_ms[i] = (double)((t[2] - t[0]) & mask) * ns * 1e-6;
        if (gemm_ms) gemm_ms[i] = (double)((t[2] - t[1]) & mask) * ns * 1e-6;
    }
    f->vkDestroyQueryPool(d->dev, pool, NULL);
    return st;
}
