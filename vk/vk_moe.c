/* Fused MoE on Vulkan: cpu/ref_moe.c's steps as one command
 * buffer of seven passes:
 *   align   vk_moe_misc.comp STAGE 0: slots sorted by local expert into
 *           padded blocks of BM (vLLM's moe_align_block_size);
 *   A       x quantized by the linear layers' activation kernels
 *           (vk_act_stats + vk_act_quant: fp8 / int8 codes and row scales;
 *           vk_act_fp8g: e4m3 codes and a scale per group of 128 (fp8
 *           per-block); vk_act_qdq: fp32 x', plain or fake-quantized);
 *   w13     vk_moe_gemm.comp over (block, 64 columns) -> c1 [M*k][2I];
 *   silu    vk_moe_misc.comp STAGE 1 -> c2 [M*k][I];
 *   A2      c2 quantized as x was (dynamic per-tensor: over all M*k rows);
 *   w2      vk_moe_gemm.comp with the routing weight -> c3 [M*k][H];
 *   sum     vk_moe_misc.comp STAGE 2 -> y [M][H].
 * Paths: M <= 16 tokens "decode" blocks of 16 slots (an expert receives at
 * most M slots, so one block, its weights read once per column tile);
 * larger M 64-slot tiles. The grid covers the most blocks M*k slots can
 * need (M*k/BM + min(E, M*k)); blocks past the count the align pass wrote
 * exit at once, so the host never reads the routing back.
 * Weight layouts: int8 / e4m3 codes [E*rows][Kw words] (K padded to 32
 * bytes with zero codes, as the activation rows are), with a scale per row
 * or (fp8 per-block) per row and k-block of 128 [E*rows][K/128];
 * float-weight schemes the layouts of shaders/vk_wdeq.glsl with the
 * expert's rows stacked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* vk_act_quant.comp MODE, vk_act_qdq.comp MODE, vk_wdeq.glsl WFMT, GEMM ARITH */
enum { ACT_I8_STATIC_SYM = 0, ACT_I8_DYN_SYM = 2, ACT_F8_STATIC = 4, ACT_F8_DYN_TENSOR = 5, ACT_F8_DYN_TOKEN = 6 };
enum { QDQ_NONE = 0, QDQ_MX, QDQ_FP8_STATIC, QDQ_NVFP4 };
enum { WF_NIB = 1, WF_BYTE = 2, WF_HALF = 3 };
enum { AR_I8 = 0, AR_FP8, AR_WF, AR_FP8B };
enum { S_ALIGN = 0, S_ACT1, S_GEMM1, S_SILU, S_ACT2, S_GEMM2, S_SUM, S_COUNT };
#define MOE_EMAX 1024 /* experts per rank: vk_moe_misc.comp's shared counts */

typedef struct qp_vk_moe {
    char layer[96];
    int E, H, I, off;
    bool bf16;
    uint32_t arith;          /* AR_*                                       */
    bool f64;                /* emulated, fp8 per-block: double GEMM sums  */
    uint32_t wfmt;           /* AR_WF: WF_*                                 */
    int blk;                 /* AR_WF: block size (32 for WF_HALF)          */
    bool quant, dynamic;     /* act_stats/act_quant passes (else act_qdq)   */
    uint32_t mode;           /* ACT_* or QDQ_*                              */
    float scale[2];          /* per GEMM: static scale; NVFP4 g             */
    float inv_g[2], inv6;    /* NVFP4: 1/g, fp32(1/6)                       */
    uint32_t aux0, aux1;     /* MX: element format, mbits | emax << 8       */
    uint32_t kw[2];          /* words (codes) or floats (x') per A row      */
    qp_vk_buf w[2], s[2], lut;
    qp_vk_buf info, xq, st, c1, c2, c3;
    /* the bindings of each pass for the forward being recorded */
    const qp_vk_buf *b[S_COUNT][QP_VK_BINDINGS];
} qp_vk_moe;

void qp_vk_moe_destroy(void *dev, void *moe) {
    qp_vk_device *d = dev;
    qp_vk_moe *m = moe;
    if (!m) return;
    if (qp_vk_busy(d)) (void)qp_vk_idle(d); /* work in flight may use it */
    qp_vk_buf *bufs[] = {&m->w[0], &m->w[1], &m->s[0], &m->s[1], &m->lut, &m->info, &m->xq, &m->st, &m->c1, &m->c2, &m->c3};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) qp_vk_buf_destroy(d, bufs[i]);
    free(m);
}

/* The activation passes and GEMM arithmetic of the desc's scheme. */
static qp_status choose(qp_vk_device *d, qp_vk_moe *m, const qp_moe_desc *s) {
    const char *layer = m->layer;
    m->scale[0] = s->a13_scale;
    m->scale[1] = s->a2_scale;
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8:
    case QP_SCHEME_W8A8_FP8: {
        bool i8 = s->kind == QP_SCHEME_W8A8_INT8;
        if (s->w_dtype != (i8 ? QP_DTYPE_I8 : QP_DTYPE_F8_E4M3FN) || !s->s13 || !s->s2)
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': %s experts need %s codes and row scales", layer, i8 ? "W8A8-INT8" : "W8A8-FP8", i8 ? "int8" : "e4m3");
        m->arith = i8 ? AR_I8 : AR_FP8;
        m->quant = true;
        switch (s->act) {
        case QP_ACT_INT8_STATIC: m->mode = ACT_I8_STATIC_SYM; break;
        case QP_ACT_INT8_DYNAMIC_TOKEN: m->mode = ACT_I8_DYN_SYM; m->dynamic = true; break;
        case QP_ACT_FP8_STATIC: m->mode = ACT_F8_STATIC; break;
        case QP_ACT_FP8_DYNAMIC_TENSOR: m->mode = ACT_F8_DYN_TENSOR; m->dynamic = true; break;
        case QP_ACT_FP8_DYNAMIC_TOKEN: m->mode = ACT_F8_DYN_TOKEN; m->dynamic = true; break;
        default:
            return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': unsupported: %s experts with activation mode %d", layer, i8 ? "W8A8-INT8" : "W8A8-FP8", (int)s->act);
        }
        if ((i8 && m->mode == ACT_F8_STATIC) || (!i8 && m->mode <= ACT_I8_DYN_SYM))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': activation mode %d does not match the "
                             "weights", layer, (int)s->act);
        if (!m->dynamic)
            for (int g = 0; g < 2; g++)
                if (!(m->scale[g] > 0.0f) || isinf(m->scale[g]))
                    return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': static input scale %g", layer, (double)m->scale[g]);
        return QP_OK;
    }
    case QP_SCHEME_W8A8_FP8_BLOCK: /* b13 / b2: the scale of each (row, k-block of 128) */
        if (s->w_dtype != QP_DTYPE_F8_E4M3FN || s->w_blk != 128 || s->act != QP_ACT_FP8_GROUP128 || !s->b13 || !s->b2)
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': fp8 per-block experts need e4m3 codes, "
                             "block scales of 128 (b13 / b2) and per-token-group fp8 activations", layer);
        if (s->H % 128 || s->I % 128)
            return qp_vk_error(d, QP_ERR_VALUE, NULL, "MoE '%s': fp8 per-block experts need H = %d and I = %d "
                             "multiples of 128", layer, s->H, s->I);
        m->arith = AR_FP8B;
        m->f64 = d->fp64; /* the k-block sums exact, as the reference's */
        m->blk = 128;
        m->quant = true;
        return QP_OK;
    case QP_SCHEME_UNQUANTIZED:
        if (s->w_dtype != s->act_dtype || s->act != QP_ACT_NONE)
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': unquantized experts need act-dtype "
                             "weights and no activation quantization", layer);
        m->arith = AR_WF;
        m->wfmt = WF_HALF;
        m->blk = 32;
        m->mode = QDQ_NONE;
        return QP_OK; /* fp32 sum of exact products in k order: the reference's own */
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
    case QP_SCHEME_W4A16_INT4: /* signed codes c - z through w_lut, group scales as block multipliers */
        break;
    default:
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': unsupported: no fused MoE for %s experts on vulkan", layer, qp_vk_scheme_name(s->kind));
    }
    if (!s->w_lut || !s->b13 || !s->b2 || (s->w_blk != 16 && s->w_blk != 32))
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': %s experts need codes, w_lut, block "
                         "multipliers and a block of 16 or 32 (got %d)", layer, qp_vk_scheme_name(s->kind),
                         s->w_blk);
    if (s->H % s->w_blk || s->I % s->w_blk)
        return qp_vk_error(d, QP_ERR_VALUE, NULL, "MoE '%s': H = %d and I = %d must be multiples of the block size %d", layer, s->H, s->I, s->w_blk);
    m->arith = AR_WF;
    m->f64 = d->fp64;
    m->blk = s->w_blk;
    if (s->w_dtype == QP_DTYPE_F4_E2M1) m->wfmt = WF_NIB;
    else if (s->w_dtype == QP_DTYPE_F6_E2M3 || s->w_dtype == QP_DTYPE_F6_E3M2 || s->w_dtype == QP_DTYPE_F8_E4M3FN ||
             s->w_dtype == QP_DTYPE_I8)
        m->wfmt = WF_BYTE;
    else
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': weight element format %d", layer,
                         (int)s->w_dtype);
    switch (s->act) {
    case QP_ACT_NONE: m->mode = QDQ_NONE; break;
    case QP_ACT_MX_QDQ:
        if (!qp_vk_mx_qdq(s->act_elem, s->act_mbits, s->act_emax, &m->aux0, &m->aux1))
            return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': MX activation element %d (mbits %d, "
                             "emax %d)", layer, (int)s->act_elem, s->act_mbits, s->act_emax);
        m->mode = QDQ_MX;
        break;
    case QP_ACT_FP8_STATIC_QDQ:
    case QP_ACT_NVFP4_QDQ:
        for (int g = 0; g < 2; g++)
            if (!(m->scale[g] > 0.0f) || isinf(m->scale[g]))
                return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': input scale %g must be finite and "
                                 "> 0", layer, (double)m->scale[g]);
        m->mode = s->act == QP_ACT_FP8_STATIC_QDQ ? QDQ_FP8_STATIC : QDQ_NVFP4;
        if (m->mode == QDQ_NVFP4) { /* as ref_moe.c: g = 1 / input global scale, correctly rounded at run time */
            volatile float one = 1.0f, six = 6.0f;
            for (int g = 0; g < 2; g++) {
                m->scale[g] = one / m->scale[g];
                m->inv_g[g] = one / m->scale[g];
            }
            m->inv6 = one / six;
        }
        break;
    default:
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': unsupported: %s experts with activation mode %d", layer, qp_vk_scheme_name(s->kind), (int)s->act);
    }
    return QP_OK;
}

/* Packs and uploads GEMM g's weights (0: w13 [E*2I][H], 1: w2 [E*H][I]). */
static qp_status upload_gemm(qp_vk_device *d, qp_vk_moe *m, const qp_moe_desc *s, int g) {
    size_t rows = (size_t)m->E * (g ? (size_t)m->H : 2 * (size_t)m->I), K = g ? (size_t)m->I : (size_t)m->H;
    const uint8_t *src = g ? s->w2 : s->w13;
    const float *sc = g ? s->s2 : s->s13, *bl = g ? s->b2 : s->b13;
    size_t Kw = m->arith == AR_WF ? (K + 31) / 32 * 32 : (K + 31) / 32 * 8; /* x' floats or code words */
    m->kw[g] = (uint32_t)Kw;
    size_t row_b = m->arith != AR_WF ? 4 * Kw : m->wfmt == WF_HALF ? 2 * Kw : m->wfmt == WF_BYTE ? Kw : Kw / 2;
    size_t nbw = m->arith == AR_FP8B ? K / 128 : m->arith == AR_WF && m->wfmt != WF_HALF ? Kw / (size_t)m->blk : 0;
    char what[160];
    snprintf(what, sizeof what, "MoE '%s' %s", m->layer, g ? "w2" : "w13");
    if (rows * row_b > d->max_range || rows * (nbw ? nbw : 1) * 4 > d->max_range)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "%s: %zu bytes of weights exceed one binding "
                         "(maxStorageBufferRange %llu bytes)", what, rows * row_b,
                         (unsigned long long)d->max_range);
    uint8_t *w = calloc(rows, row_b);
    float *f = malloc(sizeof(float) * rows * (nbw ? nbw : 1));
    qp_status st = QP_OK;
    if (!w || !f) {
        st = qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "%s: out of host memory repacking", what);
        goto out;
    }
    for (size_t n = 0; n < rows; n++) {
        uint8_t *row = w + n * row_b;
        if (m->arith != AR_WF || m->wfmt == WF_BYTE) {
            uint8_t mask = m->arith == AR_WF && (s->w_dtype == QP_DTYPE_F6_E2M3 || s->w_dtype == QP_DTYPE_F6_E3M2) ? 0x3F : 0xFF;
            for (size_t k = 0; k < K; k++) row[k] = src[n * K + k] & mask;
        } else if (m->wfmt == WF_HALF) {
            memcpy(row, src + 2 * n * K, 2 * K);
        } else { /* fp4: k = 32c + 8j + b in nibble b of word 4c + j */
            for (size_t k = 0; k < K; k++) {
                size_t c = k / 32, j = (k % 32) / 8, b = k % 8;
                row[(c * 4 + j) * 4 + b / 2] |= (uint8_t)((src[n * K + k] & 15) << (4 * (b % 2)));
            }
        }
        if (nbw)
            for (size_t i = 0; i < nbw; i++) f[n * nbw + i] = i < K / (size_t)m->blk ? bl[n * (K / (size_t)m->blk) + i] : 1.0f;
        else if (m->arith != AR_WF)
            f[n] = sc[n];
    }
    if ((st = qp_vk_buf_create(d, rows * row_b, false, what, &m->w[g])) == QP_OK)
        st = qp_vk_upload(d, &m->w[g], 0, w, rows * row_b);
    if (st == QP_OK && (nbw || m->arith != AR_WF)) {
        size_t nb = sizeof(float) * rows * (nbw ? nbw : 1);
        if ((st = qp_vk_buf_create(d, nb, false, what, &m->s[g])) == QP_OK) st = qp_vk_upload(d, &m->s[g], 0, f, nb);
    }
out:
    free(w);
    free(f);
    return st;
}

qp_status qp_vk_moe_prepare(void *dev, const qp_moe_desc *s, void **out) {
    qp_vk_device *d = dev;
    *out = NULL;
    if (!s || s->E <= 0 || s->H <= 0 || s->I <= 0 || !s->w13 || !s->w2)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_prepare: NULL description, weights or bad shape");
    qp_vk_moe *m = QP_BACKEND_LAYER_NEW(qp_vk_moe, s->layer);
    if (!m) return qp_vk_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "MoE: out of host memory");
    m->E = s->E; m->H = s->H; m->I = s->I; m->off = s->expert_offset;
    m->bf16 = s->act_dtype == QP_DTYPE_BF16;
    qp_status st = QP_OK;
    if (s->act_dtype != QP_DTYPE_F16 && s->act_dtype != QP_DTYPE_BF16)
        st = qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': activations must be fp16 or bf16",
                       m->layer);
    else if (s->E > MOE_EMAX)
        st = qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': unsupported: %d local experts (the align pass "
                       "takes at most %d; use expert parallelism)", m->layer, s->E, MOE_EMAX);
    else if (d->max_wg_invocations < 256 || d->props.limits.maxComputeWorkGroupSize[0] < 256 ||
             d->props.limits.maxComputeSharedMemorySize < 2 * 32 * 64 * 4 + 2048 + 8 * MOE_EMAX)
        st = QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d '%s': the MoE kernels need 256 invocations and %d bytes of "
                       "shared memory", d->index, d->props.deviceName, 2 * 32 * 64 * 4 + 2048 + 8 * MOE_EMAX);
    if (st == QP_OK) st = choose(d, m, s);
    if (st == QP_OK) st = upload_gemm(d, m, s, 0);
    if (st == QP_OK) st = upload_gemm(d, m, s, 1);
    if (st == QP_OK && m->arith == AR_WF && m->wfmt != WF_HALF) {
        char what[128];
        snprintf(what, sizeof what, "MoE '%s' code values", m->layer);
        if ((st = qp_vk_buf_create(d, 256 * sizeof(float), false, what, &m->lut)) == QP_OK)
            st = qp_vk_upload(d, &m->lut, 0, s->w_lut, 256 * sizeof(float));
    }
    if (st != QP_OK) {
        qp_vk_moe_destroy(d, m);
        return st;
    }
    if (!d->fp64)
        QP_VK_LOG(d->be, QP_LOG_WARN, "vulkan:%d: MoE '%s': the device has no shaderFloat64: silu runs in fp32, outputs "
                  "are not bit-exact with the reference", d->index, m->layer);
    *out = m;
    return QP_OK;
}

static uint32_t block_rows(int M) { return M <= QP_VK_GEMV_MAX_M ? 16u : 64u; }

static uint32_t max_blocks(const qp_vk_moe *m, int M, int k) {
    size_t mk = (size_t)M * (size_t)k, bm = block_rows(M);
    return (uint32_t)(mk / bm + (mk < (size_t)m->E ? mk : (size_t)m->E));
}

static void dispatch(qp_vk_device *d, VkPipeline p, const qp_vk_buf *const *set, const qp_vk_push *pc, uint32_t gx,
                     uint32_t gy) {
    qp_vk_fns *f = d->fn;
    f->vkCmdBindPipeline(d->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    qp_vk_push_set(d, set);
    f->vkCmdPushConstants(d->cmd, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof *pc, pc);
    f->vkCmdDispatch(d->cmd, gx, gy, 1);
    qp_vk_barrier(d);
}

static qp_status pass(qp_vk_device *d, qp_vk_shader sh, uint32_t mode, uint32_t rows, const qp_vk_buf *const *set,
                      const qp_vk_push *pc, uint32_t gx, uint32_t gy) {
    /* GEMMs: ROWS = BM, MODE = the weight format (WFMT of vk_wdeq.glsl) */
    uint32_t spec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64, [QP_VK_SPEC_MODE] = rows ? 0 : mode, [QP_VK_SPEC_ROWS] = rows,
                                       [QP_VK_SPEC_WFMT] = rows ? mode : 0};
    VkPipeline p;
    qp_status st = qp_vk_pipeline_get(d, sh, spec, &p);
    if (st == QP_OK) dispatch(d, p, set, pc, gx, gy);
    return st;
}

/* The activation passes of GEMM g on `rows` rows of K act-dtype values. */
static qp_status act_pass(qp_vk_device *d, qp_vk_moe *m, int g, uint32_t rows, uint32_t K, const qp_vk_buf *const *set) {
    qp_vk_push pc = {.M = rows, .K = K, .Kw = m->kw[g], .input_scale = m->scale[g], .flags = m->bf16 ? QP_VK_PC_BF16 : 0u,
                     .aux0 = m->aux0, .aux1 = m->aux1, .aux2 = m->inv_g[g], .aux3 = m->inv6};
    qp_status st = QP_OK;
    if (!m->quant) return pass(d, QP_VK_SH_ACT_QDQ, m->mode, 0, set, &pc, rows, 1);
    if (m->arith == AR_FP8B) { /* per_token_group_quant_fp8: one work-group a (group, row), no UE8M0 */
        pc.aux0 = K / 128;
        pc.aux1 = 0;
        return pass(d, QP_VK_SH_ACT_FP8G, 0, 0, set, &pc, K / 128, rows);
    }
    if (m->dynamic) st = pass(d, QP_VK_SH_ACT_STATS, 0, 0, set, &pc, rows, 1);
    if (st == QP_OK) st = pass(d, QP_VK_SH_ACT_QUANT, m->mode, 0, set, &pc, rows, 1);
    return st;
}

static qp_vk_shader gemm_shader(const qp_vk_moe *m) {
    if (m->arith == AR_FP8B) return m->f64 ? QP_VK_SH_MOE_GEMM_FP8B64 : QP_VK_SH_MOE_GEMM_FP8B;
    return m->arith == AR_I8 ? QP_VK_SH_MOE_GEMM_I8 : m->arith == AR_FP8 ? QP_VK_SH_MOE_GEMM_FP8
           : m->f64 ? QP_VK_SH_MOE_GEMM_WF64 : QP_VK_SH_MOE_GEMM_WF;
}

static qp_status record(qp_vk_device *d, qp_vk_moe *m, int M, int k) {
    uint32_t mk = (uint32_t)M * (uint32_t)k, bm = block_rows(M), maxb = max_blocks(m, M, k);
    uint32_t E = (uint32_t)m->E, H = (uint32_t)m->H, I = (uint32_t)m->I, bf = m->bf16 ? QP_VK_PC_BF16 : 0u;
    qp_status st;
    qp_vk_push pa = {.M = mk, .N = E, .input_zp = m->off, .aux0 = bm, .aux1 = maxb};
    if ((st = pass(d, QP_VK_SH_MOE_ALIGN, 0, 0, m->b[S_ALIGN], &pa, 1, 1)) != QP_OK) return st;
    if ((st = act_pass(d, m, 0, (uint32_t)M, H, m->b[S_ACT1])) != QP_OK) return st;
    qp_vk_push pg = {.M = mk, .K = H, .Kw = m->kw[0], .N = 2 * I, .n_count = 2 * I, .input_zp = m->blk, .flags = bf,
                     .epi = (uint32_t)k, .aux1 = maxb};
    if ((st = pass(d, gemm_shader(m), m->wfmt, bm, m->b[S_GEMM1], &pg, (2 * I + 63) / 64, maxb)) != QP_OK) return st;
    qp_vk_push ps = {.M = mk, .K = I, .N = E, .input_zp = m->off, .flags = bf};
    if ((st = pass(d, d->fp64 ? QP_VK_SH_MOE_SILU64 : QP_VK_SH_MOE_SILU, 0, 0, m->b[S_SILU], &ps, (I + 63) / 64, mk)))
        return st;
    if ((st = act_pass(d, m, 1, mk, I, m->b[S_ACT2])) != QP_OK) return st;
    pg = (qp_vk_push){.M = mk, .K = I, .Kw = m->kw[1], .N = H, .n_count = H, .input_zp = m->blk, .flags = bf | 8u,
                      .epi = 1, .aux1 = maxb};
    if ((st = pass(d, gemm_shader(m), m->wfmt, bm, m->b[S_GEMM2], &pg, (H + 63) / 64, maxb)) != QP_OK) return st;
    qp_vk_push pu = {.M = (uint32_t)M, .K = (uint32_t)k, .N = H, .input_zp = m->off, .flags = bf, .aux0 = E};
    return pass(d, QP_VK_SH_MOE_SUM, 0, 0, m->b[S_SUM], &pu, (H + 63) / 64, (uint32_t)M);
}

/* The block's scratch for M tokens of k slots (grown buffers that work in
 * flight may use are retired, not freed). */
static void scratch_sizes(const qp_vk_moe *m, int M, int k, size_t sizes[6]) {
    size_t mk = (size_t)M * (size_t)k, H = (size_t)m->H, I = (size_t)m->I, bm = block_rows(M);
    size_t maxb = max_blocks(m, M, k);
    size_t xqb = 4 * ((size_t)M * m->kw[0] > mk * m->kw[1] ? (size_t)M * m->kw[0] : mk * m->kw[1]);
    /* row statistics, or (fp8 per-block) a scale per row and group of 128 */
    size_t stw = m->arith == AR_FP8B ? (H > I ? H : I) / 128 : 0;
    if (stw < QP_VK_ST_WORDS) stw = QP_VK_ST_WORDS;
    size_t v[6] = {4 * (1 + maxb + maxb * bm), xqb, 4 * stw * mk, mk * 4 * I, mk * 2 * I, mk * 2 * H};
    memcpy(sizes, v, sizeof v);
}

static qp_status reserve(qp_vk_device *d, qp_vk_moe *m, int M, int k) {
    size_t sizes[6];
    scratch_sizes(m, M, k, sizes);
    qp_vk_buf *scr[] = {&m->info, &m->xq, &m->st, &m->c1, &m->c2, &m->c3};
    static const char *const names[] = {"MoE block list", "MoE activations", "MoE activation scales",
                                        "MoE w13 output", "MoE silu output", "MoE w2 output"};
    qp_status st = QP_OK;
    for (int i = 0; i < 6 && st == QP_OK; i++) st = qp_vk_buf_reserve(d, scr[i], sizes[i], names[i]);
    return st;
}

qp_status qp_vk_moe_reserve(void *dev, void *moe, int max_m, int k) {
    qp_vk_device *d = dev;
    qp_vk_moe *m = moe;
    if (!m || max_m <= 0 || k <= 0) return QP_OK;
    /* the decode path (<= 16 tokens) and, above it, the tiled path's sizes */
    qp_status st = reserve(d, m, max_m < 16 ? max_m : 16, k);
    return st == QP_OK && max_m > 16 ? reserve(d, m, max_m, k) : st;
}

qp_status qp_vk_moe_forward(void *dev, void *moe, void *x_, int M, int k, void *ids_, void *w_, void *y_) {
    qp_vk_device *d = dev;
    qp_vk_moe *m = moe;
    qp_vk_buf *x = x_, *ids = ids_, *rw = w_, *y = y_;
    if (!m || !x || !ids || !rw || !y || M <= 0 || k <= 0)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_forward: NULL argument, M = %d or k = %d",
                         M, k);
    size_t mk = (size_t)M * (size_t)k, H = (size_t)m->H;
    size_t maxb = max_blocks(m, M, k);
    if (x->size < (size_t)M * H * 2 || y->size < (size_t)M * H * 2 || ids->size < mk * 4 || rw->size < mk * 4)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE '%s': buffers too small for M = %d, k = %d", m->layer, M, k);
    size_t sizes[6];
    scratch_sizes(m, M, k, sizes);
    const uint32_t *lim = d->props.limits.maxComputeWorkGroupCount;
    bool big = mk > lim[1] || (size_t)M > lim[0] || maxb > lim[1];
    for (int i = 0; i < 6; i++) big |= sizes[i] > d->max_range;
    if (big)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE '%s': unsupported: M = %d tokens x k = %d exceed one "
                         "binding or the dispatch limits; split the batch", m->layer, M, k);
    qp_status st = reserve(d, m, M, k);
    if (st != QP_OK) return st;
    const qp_vk_buf *N = NULL;
    const qp_vk_buf *b[S_COUNT][QP_VK_BINDINGS] = {
        [S_ALIGN] = {&m->info, ids, N, N, N, N, N, N},
        [S_ACT1] = {x, &m->xq, &m->st, N, N, N, N, N},
        [S_GEMM1] = {&m->info, &m->xq, &m->st, &m->w[0], &m->s[0], &m->lut, rw, &m->c1},
        [S_SILU] = {&m->c1, ids, N, N, N, N, N, &m->c2},
        [S_ACT2] = {&m->c2, &m->xq, &m->st, N, N, N, N, N},
        [S_GEMM2] = {&m->info, &m->xq, &m->st, &m->w[1], &m->s[1], &m->lut, rw, &m->c3},
        [S_SUM] = {&m->c3, ids, N, N, N, N, N, y},
    };
    memcpy(m->b, b, sizeof b);
    char what[120];
    snprintf(what, sizeof what, "MoE '%.96s'", m->layer);
    if ((st = qp_vk_rec_begin(d, what)) != QP_OK) return st;
    return qp_vk_rec_end(d, what, record(d, m, M, k));
}

void qp_vk_moe_describe(void *dev, void *moe, int M, int k, char *out, size_t cap) {
    qp_vk_device *d = dev;
    qp_vk_moe *m = moe;
    (void)k;
    if (!cap || !m) return;
    static const char *const wf[] = {"", "fp4", "fp6/fp8", "fp16/bf16"};
    static const char *const qdq[] = {"", " qdq-mx", " qdq-fp8", " qdq-nvfp4"};
    char arith[64];
    if (m->arith == AR_I8) snprintf(arith, sizeof arith, "int8 int32-sum");
    else if (m->arith == AR_FP8) snprintf(arith, sizeof arith, "fp8->fp32");
    else if (m->arith == AR_FP8B)
        snprintf(arith, sizeof arith, "fp8->%s 128x128 blocks, act groups of 128", m->f64 ? "fp64" : "fp32");
    else snprintf(arith, sizeof arith, "%s->%s%s", wf[m->wfmt], m->f64 ? "fp64" : "fp32", qdq[m->mode]);
    uint32_t bm = block_rows(M);
    snprintf(out, cap, "moe %s %ux64 %s, silu %s", bm == 16 ? "decode" : "tiled", bm, arith,
             d->fp64 ? "fp64" : "fp32 (not bit-exact)");
}

/* Routing on the device (qp_moe_enqueue_logits): one invocation a token,
 * recorded into the open batch; the exponential needs fp64 (shaderFloat64)
 * to be the reference's. */
qp_status qp_vk_moe_route(void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids, void *w) {
    qp_vk_device *d = dev;
    if (!d->fp64)
        return QP_VK_ERR(d, QP_ERR_UNSUPPORTED, "vulkan:%d '%s': routing on the device needs shaderFloat64 (the "
                         "reference's exponential in double); route on the host and pass the top-k (qp_moe_enqueue)",
                         d->index, d->props.deviceName);
    if (!p || M <= 0 || p->k <= 0 || p->k > QP_ROUTE_MAX_K || p->n_group > QP_ROUTE_MAX_K || p->G <= 0)
        return qp_vk_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_route: bad routing parameters");
    if ((uint64_t)M > d->props.limits.maxComputeWorkGroupCount[0] * 64ull)
        return qp_vk_error(d, QP_ERR_UNSUPPORTED, NULL, "moe_route: M = %d exceeds the dispatch limit", M);
    qp_vk_push pc = {.M = (uint32_t)M, .N = (uint32_t)p->G, .K = (uint32_t)p->k,
                     .flags = (p->renormalize ? 1u : 0u) | (p->sigmoid ? 2u : 0u) | (p->bias ? 4u : 0u),
                     .aux0 = (uint32_t)p->n_group, .aux1 = (uint32_t)p->topk_group, .aux2 = p->scale};
    uint32_t spec[QP_VK_SPEC_COUNT] = {[QP_VK_SPEC_WG] = 64};
    VkPipeline pipe;
    qp_status st = qp_vk_pipeline_get(d, QP_VK_SH_MOE_ROUTE, spec, &pipe);
    if (st != QP_OK) return st;
    if ((st = qp_vk_rec_begin(d, "MoE routing")) != QP_OK) return st;
    const qp_vk_buf *b[QP_VK_BINDINGS] = {logits, ids, w, scratch, p->bias, NULL, NULL, NULL};
    dispatch(d, pipe, b, &pc, ((uint32_t)M + 63u) / 64u, 1);
    return qp_vk_rec_end(d, "MoE routing", QP_OK);
}
