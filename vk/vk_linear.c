/* Quantized linear layers on Vulkan: prepare (repack + upload) and forward
 * (activation quantization, then the GEMV or tiled GEMM with the fused
 * epilogue), issue 4. Layouts chosen here:
 *   weights  [N][Kp] bytes, Kp = K rounded up to 16, zero padded (int8 for
 *            W8A8-INT8 and QQQ's exact w8, e4m3fn codes for W8A8-FP8), in
 *            chunks of whole rows that each fit maxStorageBufferRange;
 *   xq       [M][Kp] codes written by vk_act_quant.comp, same padding, so
 *            the padding contributes exact zeros;
 *   st       per-row statistics and activation scales (vk_layout.glsl).
 * W4A16 (issue 9): the Quark-packed checkpoint tensors (desc->tensors:
 * weight i32 [K][ceil(N/8)], weight_scale [K/g][N] or [K/g][8*ceil(N/8)] in
 * the act dtype, uint4: weight_zero_point i32 [K/g][ceil(N/8)]) repacked as
 * the OpenCL backend does into 4-bit codes [N][Kp/2] bytes, Kp = K rounded
 * up to 32 (shaders/vk_gemv_w4a16.comp), fp32 scales [K/g][N] (binding 4)
 * and int32 zero points [K/g][N] (binding 5; int4: 8, codes stored c ^ 8);
 * xq holds the activations widened to fp32, [M][Kp]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* Activation modes of vk_act_quant.comp (its MODE constant). */
enum { ACT_I8_STATIC_SYM = 0, ACT_I8_STATIC_ASYM, ACT_I8_DYN_SYM, ACT_I8_DYN_ASYM, ACT_F8_STATIC, ACT_F8_DYN_TENSOR,
       ACT_F8_DYN_TOKEN };
/* Epilogues of vk_epilogue.glsl (EPI). */
enum { EPI_I8_SYM = 0, EPI_I8_ASYM_STATIC, EPI_I8_ASYM_DYN, EPI_QQQ, EPI_FP8 };

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
    bool w4a16;       /* W4A16: int4 codes [N][Kw/2] bytes, Kw = K rounded to 32 */
    int gsz;          /* W4A16 group size (K when per-channel)              */
    int N, K;
    uint32_t Kw;
    bool use_dot, force_gemv, force_tiled;
    uint32_t gemv_wg;
    float input_scale;
    int32_t input_zp;
    qp_vk_buf ws, azp, bias;
    int n_chunks;
    vk_chunk *chunks;
    VkDescriptorPool pool;
    VkDescriptorSet *sets; /* [0]: activation passes, [1 + c]: chunk c */
} qp_vk_linear;

#define GEMV_SHARED_BYTES (QP_VK_GEMV_MAX_M * QP_VK_GEMV_COLS * 4 * QP_VK_GEMV_WG + 1024)
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
    for (int c = 0; c < l->n_chunks; c++) qp_vk_buf_destroy(d, &l->chunks[c].w);
    free(l->chunks);
    qp_vk_buf_destroy(d, &l->ws);
    qp_vk_buf_destroy(d, &l->azp);
    qp_vk_buf_destroy(d, &l->bias);
    if (l->pool) d->be->fn.vkDestroyDescriptorPool(d->dev, l->pool, NULL); /* frees the sets */
    free(l->sets);
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
    size_t K = l->w4a16 ? (size_t)l->Kw / 2 : (size_t)l->K; /* bytes per row */
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
    size_t row_b = l->w4a16 ? (size_t)l->Kw / 2 : l->w4 ? (size_t)l->Kw * 2 : (size_t)l->Kw * 4;
    size_t lut_b = l->grouped ? (size_t)(l->K / 128) * 16 : 0;
    uint64_t rows = d->weight_range / (row_b + lut_b);
    if (rows == 0)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED,
                         "vulkan:%d: layer '%s': one weight row of %zu bytes exceeds the binding limit (%llu)",
                         d->index, l->layer, row_b + lut_b, (unsigned long long)d->weight_range);
    uint64_t max_groups = d->props.limits.maxComputeWorkGroupCount[0];
    if (rows > max_groups * QP_VK_GEMV_COLS) rows = max_groups * QP_VK_GEMV_COLS;
    if (rows > (uint64_t)l->N) rows = (uint64_t)l->N;
    l->n_chunks = (int)(((uint64_t)l->N + rows - 1) / rows);
    l->chunks = calloc((size_t)l->n_chunks, sizeof *l->chunks);
    uint8_t *tmp = malloc((size_t)rows * (row_b + lut_b));
    if (!l->chunks || !tmp) {
        free(tmp);
        return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY, "vulkan:%d: layer '%s': out of host memory repacking %s", d->index,
                         l->layer, tensor);
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
                return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT,
                                 "vulkan:%d: layer '%s': QQQ q4 and w8 disagree at column %zu, k %zu (q4 %d, w8 %d)",
                                 d->index, l->layer, n, k, q, w8);
        }
    }
    return QP_OK;
}

/* ---- W4A16 ---------------------------------------------------------------- */
static const qp_tensor *named(const qp_lin_desc *s, const char *name) {
    for (size_t i = 0; i < s->n_tensors; i++)
        if (s->tensors[i].name && !strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}

static size_t tensor_elems(const qp_tensor *t) {
    size_t e = 1;
    for (int i = 0; i < t->ndim; i++) e *= t->shape[i] > 0 ? (size_t)t->shape[i] : 0;
    return e;
}

/* fp16 / bf16 bits to fp32 (exact; the plugin does not link libqport) */
static float half_bits_to_float(uint16_t h, int bf16) {
    uint32_t u;
    if (bf16) {
        u = (uint32_t)h << 16;
    } else {
        uint32_t sgn = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
        if (e == 0) {
            float v = (float)m * 0x1p-24f;
            memcpy(&u, &v, 4);
            u |= sgn;
        } else if (e == 31) {
            u = sgn | 0x7F800000u | (m << 13);
        } else {
            u = sgn | ((e + 112u) << 23) | (m << 13);
        }
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Quark-packed int4/uint4 (spec 6.7) -> the shader's 4-bit layout, fp32
 * scales and int32 zero points (as cl/cl_linear.c w4a16_pack). */
static qp_status w4a16_pack(qp_vk_device *d, qp_vk_linear *l, const qp_lin_desc *s, uint8_t **wq_out, float **sc_out,
                            int32_t **zp_out) {
    static const int order[8] = {0, 1, 2, 3, 4, 5, 6, 7}, reorder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    const char *layer = l->layer;
    int N = s->N, K = s->K, g = s->scheme.weight.group_size > 0 ? s->scheme.weight.group_size : K;
    int sym = s->scheme.weight.symmetric;
    const int *P = s->scheme.pack_method == QP_PACK_ORDER ? order : s->scheme.pack_method == QP_PACK_REORDER ? reorder : NULL;
    if (!s->tensors || !s->n_tensors)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': W4A16 needs the checkpoint tensors (desc->tensors)",
                         d->index, layer);
    if (!P)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': W4A16 needs pack_method order or reorder",
                         d->index, layer);
    if (K % g)
        return QP_VK_ERR(d, QP_ERR_VALUE, "vulkan:%d: layer '%s': input size %d is not divisible by the group size %d",
                         d->index, layer, K, g);
    if (g != K && g % 32)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': unsupported: W4A16 group size %d not a multiple "
                         "of 32 (the shader takes 32/64/128/... or per-channel)", d->index, layer, g);
    size_t G = (size_t)(K / g), nc = ((size_t)N + 7) / 8, Kp = ((size_t)K + 31) & ~(size_t)31, Kb = Kp / 2;
    const qp_tensor *w = named(s, "weight"), *ws = named(s, "weight_scale"), *wz = sym ? NULL : named(s, "weight_zero_point");
    if (!w || w->dtype != QP_DTYPE_I32 || !w->data || tensor_elems(w) != (size_t)K * nc)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': tensor 'weight' must be int32 [%d, %zu] "
                         "(Quark-packed int4)", d->index, layer, K, nc);
    size_t nsc = ws && ws->data ? tensor_elems(ws) : 0;
    if (!ws || ws->dtype != s->act_dtype || (nsc != G * (size_t)N && nsc != G * 8 * nc))
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': tensor 'weight_scale' must be %s [%zu, %d] "
                         "or [%zu, %zu]", d->index, layer, s->act_dtype == QP_DTYPE_BF16 ? "bf16" : "fp16", G, N, G, 8 * nc);
    if (!sym && (!wz || wz->dtype != QP_DTYPE_I32 || !wz->data || tensor_elems(wz) != G * nc))
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': tensor 'weight_zero_point' must be int32 "
                         "[%zu, %zu] (Quark-packed uint4 zero points)", d->index, layer, G, nc);
    size_t sstride = nsc == G * (size_t)N ? (size_t)N : 8 * nc;
    uint8_t *wq = calloc((size_t)N * Kb, 1);
    int32_t *zp = malloc(sizeof(int32_t) * G * (size_t)N);
    float *sc = malloc(sizeof(float) * G * (size_t)N);
    if (!wq || !zp || !sc) {
        free(wq); free(zp); free(sc);
        return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY, "vulkan:%d: layer '%s': out of host memory packing W4A16 weights",
                         d->index, layer);
    }
    const int32_t *W = w->data;
    for (size_t k = 0; k < (size_t)K; k++)
        for (size_t n = 0; n < (size_t)N; n++) {
            uint32_t word = (uint32_t)W[k * nc + n / 8];
            unsigned u = (word >> (4 * P[n % 8])) & 15u;
            if (sym) u ^= 8u; /* two's complement c -> c + 8 (mod 16): u - 8 == c */
            size_t j = k % 32;
            wq[n * Kb + (k / 32) * 16 + (j & 15)] |= (uint8_t)(j < 16 ? u : u << 4);
        }
    const uint16_t *S = ws->data;
    const int32_t *Z = wz ? wz->data : NULL;
    for (size_t gi = 0; gi < G; gi++)
        for (size_t n = 0; n < (size_t)N; n++) {
            sc[gi * N + n] = half_bits_to_float(S[gi * sstride + n], s->act_dtype == QP_DTYPE_BF16);
            zp[gi * N + n] = sym ? 8 : (int32_t)(((uint32_t)Z[gi * nc + n / 8] >> (4 * P[n % 8])) & 15u);
        }
    l->gsz = g;
    *wq_out = wq;
    *sc_out = sc;
    *zp_out = zp;
    return QP_OK;
}

qp_status qp_vk_linear_prepare(void *dev, const qp_lin_desc *desc, unsigned path, void **out) {
    qp_vk_device *d = dev;
    *out = NULL;
    if (!desc || desc->N <= 0 || desc->K <= 0)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: linear_prepare: NULL description or bad shape", d->index);
    const char *layer = desc->layer ? desc->layer : "";
    qp_vk_linear *l = calloc(1, sizeof *l);
    if (!l) return QP_VK_ERR(d, QP_ERR_OUT_OF_MEMORY, "vulkan:%d: layer '%s': out of host memory", d->index, layer);
    snprintf(l->layer, sizeof l->layer, "%s", layer);
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
    uint8_t *w4a16_w = NULL;      /* W4A16 host repack, freed at the end */
    float *w4a16_s = NULL;
    int32_t *w4a16_z = NULL;

#define FAIL(status, ...) do { st = QP_VK_ERR(d, status, __VA_ARGS__); goto fail; } while (0)
    if (desc->act_dtype != QP_DTYPE_F16 && desc->act_dtype != QP_DTYPE_BF16)
        FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': activations must be fp16 or bf16", d->index, layer);
    switch (desc->kind) {
    case QP_SCHEME_W8A8_INT8:
        if (!desc->w_i8 || !desc->w_scale)
            FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': W8A8-INT8 needs w_i8 and w_scale", d->index, layer);
        if (desc->act == QP_ACT_INT8_STATIC) {
            l->act = desc->act_symmetric ? ACT_I8_STATIC_SYM : ACT_I8_STATIC_ASYM;
            l->epi = desc->act_symmetric ? EPI_I8_SYM : EPI_I8_ASYM_STATIC;
        } else if (desc->act == QP_ACT_INT8_DYNAMIC_TOKEN) {
            l->act = desc->act_symmetric ? ACT_I8_DYN_SYM : ACT_I8_DYN_ASYM;
            l->epi = desc->act_symmetric ? EPI_I8_SYM : EPI_I8_ASYM_DYN;
        } else {
            FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': W8A8-INT8 with activation mode %d", d->index, layer,
                 (int)desc->act);
        }
        if (!desc->act_symmetric && !desc->azp_adj)
            FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': asymmetric activations need azp_adj", d->index, layer);
        weights = (const uint8_t *)desc->w_i8;
        azp_adj = desc->act_symmetric ? NULL : desc->azp_adj;
        break;
    case QP_SCHEME_QQQ_W4A8:
        if (!desc->w8 || !desc->s_channel)
            FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': QQQ needs w8 and s_channel", d->index, layer);
        if (desc->group_size != -1 && desc->group_size != 128)
            FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': QQQ group size %d", d->index, layer, desc->group_size);
        if (desc->act_dtype != QP_DTYPE_F16)
            FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': QQQ takes fp16 activations", d->index, layer);
        l->act = ACT_I8_DYN_SYM; /* spec 5.5 step 1, errata 11.8 */
        l->epi = EPI_QQQ;
        weights = (const uint8_t *)desc->w8; /* exact per-group int8 weight (spec 5.5 step 2) */
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
            FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': W8A8-FP8 needs w_u8 and w_scale", d->index, layer);
        if (desc->act == QP_ACT_FP8_STATIC) l->act = ACT_F8_STATIC;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TENSOR) l->act = ACT_F8_DYN_TENSOR;
        else if (desc->act == QP_ACT_FP8_DYNAMIC_TOKEN) l->act = ACT_F8_DYN_TOKEN;
        else FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': unsupported: W8A8-FP8 activation mode %d not yet implemented on vulkan",
                  d->index, layer, (int)desc->act);
        l->epi = EPI_FP8;
        l->fp8 = true;
        weights = desc->w_u8;
        break;
    case QP_SCHEME_W4A16_INT4:
        l->w4a16 = true;
        l->fp8 = true; /* a float layer: no integer dot product */
        l->Kw = (uint32_t)(((size_t)desc->K + 31) / 32 * 32); /* fp32 words per xq row */
        if ((st = w4a16_pack(d, l, desc, &w4a16_w, &w4a16_s, &w4a16_z)) != QP_OK) goto fail;
        weights = w4a16_w;
        wname = "weight (int4)";
        break;
    default:
        FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': unsupported: %s not yet implemented on vulkan", d->index, layer,
             qp_vk_scheme_name(desc->kind));
    }

    /* code paths */
    if ((path & QP_PATH_GEMV) && (path & QP_PATH_TILED))
        FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': GEMV and TILED forced together", d->index, layer);
    if ((path & QP_PATH_INT_DOT) && (path & QP_PATH_NO_INT_DOT))
        FAIL(QP_ERR_INVALID_ARGUMENT, "vulkan:%d: layer '%s': INT_DOT and NO_INT_DOT forced together", d->index, layer);
    l->force_gemv = path & QP_PATH_GEMV;
    l->force_tiled = path & QP_PATH_TILED;
    if (l->force_tiled && !tiled_ok(d))
        FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d '%s': forced tiled path: needs 256 invocations and %d bytes of shared memory",
             d->index, d->props.deviceName, TILED_SHARED_BYTES);
    bool have_dot = d->int_dot && qp_vk_spirv_get(QP_VK_SH_GEMV_I8_DOT)->code;
    if (path & QP_PATH_INT_DOT) {
        if (l->fp8)
            FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': forced int-dot path: %s has no integer dot product",
                 d->index, layer, l->w4a16 ? "W4A16 (fp32 multiply-adds)" : "W8A8-FP8");
        if (!have_dot)
            FAIL(QP_ERR_UNSUPPORTED, "vulkan:%d '%s': forced int-dot path: %s", d->index, d->props.deviceName,
                 d->int_dot ? "the OpSDot shaders were not built (glslang lacks GL_EXT_spirv_intrinsics)"
                            : "the device lacks shaderIntegerDotProduct");
        l->use_dot = true;
    } else if (!(path & QP_PATH_NO_INT_DOT)) {
        l->use_dot = !l->fp8 && have_dot && d->int_dot_accel;
    }
    l->gemv_wg = d->props.limits.maxComputeSharedMemorySize >= GEMV_SHARED_BYTES ? QP_VK_GEMV_WG : QP_VK_GEMV_WG / 2;

    /* uploads */
    st = upload_weights(d, l, desc, weights, wname);
    if (st != QP_OK) goto fail;
    if (l->w4a16) {
        size_t gn = (size_t)(l->K / l->gsz) * (size_t)l->N;
        st = upload_vec(d, l, &l->ws, w4a16_s, sizeof(float) * gn, "weight_scale");
        if (st == QP_OK)
            st = upload_vec(d, l, &l->azp, w4a16_z, sizeof(int32_t) * gn,
                            desc->scheme.weight.symmetric ? "zero points (int4: 8)" : "weight_zero_point");
    } else {
        st = upload_vec(d, l, &l->ws, l->epi == EPI_QQQ ? desc->s_channel : desc->w_scale, sizeof(float) * (size_t)l->N,
                        l->epi == EPI_QQQ ? "s_channel" : "weight_scale");
    }
    if (st == QP_OK && azp_adj) st = upload_vec(d, l, &l->azp, azp_adj, sizeof(int32_t) * (size_t)l->N, "azp_adj");
    if (st == QP_OK && desc->bias) st = upload_vec(d, l, &l->bias, desc->bias, sizeof(uint16_t) * (size_t)l->N, "bias");
    if (st != QP_OK) goto fail;

    /* descriptor sets: one for the activation passes, one per weight chunk */
    uint32_t n_sets = 1 + (uint32_t)l->n_chunks;
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = n_sets * QP_VK_BINDINGS};
    VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = n_sets,
                                      .poolSizeCount = 1, .pPoolSizes = &ps};
    VkResult r = d->be->fn.vkCreateDescriptorPool(d->dev, &pci, NULL, &l->pool);
    if (r != VK_SUCCESS) {
        l->pool = VK_NULL_HANDLE;
        FAIL(QP_ERR_DEVICE, "vulkan:%d: layer '%s': vkCreateDescriptorPool failed: %s", d->index, layer, qp_vk_result_str(r));
    }
    l->sets = calloc(n_sets, sizeof *l->sets);
    VkDescriptorSetLayout *layouts = calloc(n_sets, sizeof *layouts);
    if (!l->sets || !layouts) {
        free(layouts);
        FAIL(QP_ERR_OUT_OF_MEMORY, "vulkan:%d: layer '%s': out of host memory", d->index, layer);
    }
    for (uint32_t i = 0; i < n_sets; i++) layouts[i] = d->dsl;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = l->pool,
                                      .descriptorSetCount = n_sets, .pSetLayouts = layouts};
    r = d->be->fn.vkAllocateDescriptorSets(d->dev, &ai, l->sets);
    free(layouts);
    if (r != VK_SUCCESS)
        FAIL(QP_ERR_DEVICE, "vulkan:%d: layer '%s': vkAllocateDescriptorSets failed: %s", d->index, layer, qp_vk_result_str(r));
#undef FAIL
    free(w4a16_w); free(w4a16_s); free(w4a16_z);
    *out = l;
    return QP_OK;
fail:
    free(w4a16_w); free(w4a16_s); free(w4a16_z);
    qp_vk_linear_destroy(d, l);
    return st;
}

static VkDescriptorBufferInfo bind_of(const qp_vk_device *d, const qp_vk_buf *b) {
    const qp_vk_buf *u = b->buf ? b : &d->dummy;
    VkDeviceSize range = u->alloc_size < d->max_range ? u->alloc_size : d->max_range;
    return (VkDescriptorBufferInfo){.buffer = u->buf, .offset = 0, .range = range};
}

static void write_set(qp_vk_device *d, VkDescriptorSet set, const qp_vk_buf *const bufs[QP_VK_BINDINGS]) {
    VkDescriptorBufferInfo info[QP_VK_BINDINGS];
    VkWriteDescriptorSet w[QP_VK_BINDINGS];
    for (uint32_t i = 0; i < QP_VK_BINDINGS; i++) {
        info[i] = bind_of(d, bufs[i]);
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .dstBinding = i,
                                      .descriptorCount = 1, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &info[i]};
    }
    d->be->fn.vkUpdateDescriptorSets(d->dev, QP_VK_BINDINGS, w, 0, NULL);
}

static void barrier(qp_vk_device *d) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    d->be->fn.vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                                   1, &mb, 0, NULL, 0, NULL);
}

static bool use_gemv(const qp_vk_device *d, const qp_vk_linear *l, int M) {
    if (l->force_gemv) return true;
    if (l->force_tiled) return false;
    return M <= QP_VK_GEMV_MAX_M || !tiled_ok(d);
}

static qp_vk_shader gemm_shader(const qp_vk_linear *l, bool gemv) {
    if (l->w4a16) return gemv ? QP_VK_SH_GEMV_W4A16 : QP_VK_SH_GEMM_W4A16;
    if (l->fp8) return gemv ? QP_VK_SH_GEMV_FP8 : QP_VK_SH_GEMM_FP8;
    if (l->w4 && l->use_dot) return gemv ? QP_VK_SH_GEMV_W4_DOT : QP_VK_SH_GEMM_W4_DOT;
    if (l->w4) return gemv ? QP_VK_SH_GEMV_W4 : QP_VK_SH_GEMM_W4;
    if (l->use_dot) return gemv ? QP_VK_SH_GEMV_I8_DOT : QP_VK_SH_GEMM_I8_DOT;
    return gemv ? QP_VK_SH_GEMV_I8 : QP_VK_SH_GEMM_I8;
}

static qp_status record(qp_vk_device *d, qp_vk_linear *l, int M) {
    qp_vk_fns *f = &d->be->fn;
    qp_vk_push pc = {.M = (uint32_t)M, .K = (uint32_t)l->K, .Kw = l->Kw, .N = (uint32_t)l->N,
                     .input_scale = l->input_scale, .input_zp = l->input_zp,
                     .flags = (l->bf16 ? QP_VK_PC_BF16 : 0u) | (l->has_bias ? QP_VK_PC_BIAS : 0u), .epi = l->epi};
    uint32_t spec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64, [QP_VK_SPEC_MODE] = l->act};
    VkPipeline p;
    qp_status st;
    f->vkCmdBindDescriptorSets(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &l->sets[0], 0, NULL);
    if (l->w4a16) {
        /* activations widened to fp32 once; the group size rides in input_zp */
        pc.input_zp = l->gsz;
        uint32_t sspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64};
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_F32, sspec, &p)) != QP_OK) return st;
        f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
        f->vkCmdDispatch(d->cmd, (uint32_t)M, 1, 1);
        barrier(d);
    } else if (act_is_dynamic(l->act)) {
        uint32_t sspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64}; /* one pipeline for every mode */
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_STATS, sspec, &p)) != QP_OK) return st;
        f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
        f->vkCmdDispatch(d->cmd, (uint32_t)M, 1, 1);
        barrier(d);
    }
    if (!l->w4a16) {
        if ((st = qp_vk_pipeline_get(d, QP_VK_SH_ACT_QUANT, spec, &p)) != QP_OK) return st;
        f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
        f->vkCmdDispatch(d->cmd, (uint32_t)M, 1, 1);
        barrier(d);
    }

    bool gemv = use_gemv(d, l, M);
    uint32_t gspec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = l->gemv_wg, [QP_VK_SPEC_GROUPED] = l->grouped};
    /* GEMV: rows per dispatch, the next power of two of M up to 16 */
    uint32_t rows = 1;
    while (gemv && rows < QP_VK_GEMV_MAX_M && rows < (uint32_t)M) rows *= 2;
    gspec[QP_VK_SPEC_ROWS] = gemv ? rows : 0;
    if (!gemv) gspec[QP_VK_SPEC_WG] = 256;
    if ((st = qp_vk_pipeline_get(d, gemm_shader(l, gemv), gspec, &p)) != QP_OK) return st;
    f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    for (int c = 0; c < l->n_chunks; c++) {
        vk_chunk *ch = &l->chunks[c];
        f->vkCmdBindDescriptorSets(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &l->sets[1 + c], 0, NULL);
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
    return QP_OK;
}

qp_status qp_vk_linear_forward(void *dev, void *lin, void *x_, int M, void *y_) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    qp_vk_buf *x = x_, *y = y_;
    if (!l || !x || !y || M < 0)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT, "vulkan:%d: linear_forward: NULL argument or negative M", d->index);
    if (M == 0) return QP_OK;
    size_t xb = (size_t)M * (size_t)l->K * 2, yb = (size_t)M * (size_t)l->N * 2;
    size_t qb = (size_t)M * l->Kw * 4, sb = (size_t)M * QP_VK_ST_WORDS * 4;
    if (x->size < xb || y->size < yb)
        return QP_VK_ERR(d, QP_ERR_INVALID_ARGUMENT,
                         "vulkan:%d: layer '%s': buffers too small for M=%d (x %zu < %zu or y %zu < %zu bytes)", d->index,
                         l->layer, M, x->size, xb, y->size, yb);
    if (xb > d->max_range || yb > d->max_range || qb > d->max_range)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED,
                         "vulkan:%d: layer '%s': M=%d rows of activations exceed maxStorageBufferRange (%llu bytes); "
                         "split the batch", d->index, l->layer, M, (unsigned long long)d->max_range);
    uint64_t max_y = d->props.limits.maxComputeWorkGroupCount[1];
    if ((uint64_t)M > d->props.limits.maxComputeWorkGroupCount[0] ||
        (!use_gemv(d, l, M) && ((uint64_t)M + QP_VK_TILE - 1) / QP_VK_TILE > max_y))
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d: layer '%s': M=%d exceeds the dispatch limit", d->index,
                         l->layer, M);
    qp_status st = qp_vk_buf_reserve(d, &d->xq, qb, "quantized activations");
    if (st == QP_OK) st = qp_vk_buf_reserve(d, &d->st, sb, "activation scales");
    if (st != QP_OK) return st;

    const qp_vk_buf *none = &d->dummy;
    const qp_vk_buf *act[QP_VK_BINDINGS] = {x, &d->xq, &d->st, none, none, none, none, none};
    write_set(d, l->sets[0], act);
    for (int c = 0; c < l->n_chunks; c++) {
        const qp_vk_buf *g[QP_VK_BINDINGS] = {x, &d->xq, &d->st, &l->chunks[c].w, &l->ws, &l->azp, &l->bias, y};
        write_set(d, l->sets[1 + c], g);
    }
    if ((st = qp_vk_cmd_begin(d)) != QP_OK) return st;
    st = record(d, l, M);
    if (st != QP_OK) {
        d->be->fn.vkEndCommandBuffer(d->cmd);
        return st;
    }
    char what[160];
    snprintf(what, sizeof what, "the forward of layer '%s'", l->layer);
    return qp_vk_cmd_submit(d, what);
}

void qp_vk_linear_describe(void *dev, void *lin, int M, char *out, size_t cap) {
    qp_vk_device *d = dev;
    qp_vk_linear *l = lin;
    if (!cap) return;
    bool gemv = use_gemv(d, l, M);
    const char *arith = l->w4a16 ? "int4->fp32" : l->fp8 ? "fp8->fp32" : l->use_dot ? "int-dot" : "no-int-dot";
    const char *wfmt = l->w4 ? (l->grouped ? " int4+lut" : " int4") : "";
    char chunks[40] = "";
    if (l->n_chunks > 1) snprintf(chunks, sizeof chunks, ", %d weight chunks", l->n_chunks);
    if (gemv) snprintf(out, cap, "gemv %s%s wg%u%s", arith, wfmt, l->gemv_wg, chunks);
    else snprintf(out, cap, "tiled %dx%d %s%s%s", QP_VK_TILE, QP_VK_TILE, arith, wfmt, chunks);
}
