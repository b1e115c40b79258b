/*
 * Fused MoE on CUDA: moe_prepare repacks and uploads the stacked
 * experts of a qp_moe_desc, moe_forward runs cpu/ref_moe.c's steps with the
 * kernels of cuda_moe.cu (which says what each does).
 *
 * Layouts (the linear layers' kinds, cuda_kernels.h, one expert after the
 * other): w13 [E][N13p][Hp], w2 [E][N2p][Ip], rows padded to 64 and k to 64
 * with zeros: int8 codes (QP_CU_W_I8), e4m3 codes (W8A8-FP8, QP_CU_W_F8),
 * act-dtype bits (unquantized, QP_CU_W_H), or the emulated schemes' element
 * codes with fp32 block multipliers [E][rows][Kp/blk] (QP_CU_W_LUT, fp4 two
 * per byte: QP_CU_W_LUT4), W = rnd(lut[c] * blk) as their linear layers, or
 * e4m3 codes with the fp32 scale of each (row, 128-wide k-block) in the
 * same [E][rows][Kp/128] layout (fp8 per-block, QP_CU_W_F8B: activations
 * per token and group of 128, k_quant_g128).
 *
 * Paths: M <= 16 tokens: decode (k_moe_gemv, 16-slot blocks: each selected
 * expert's rows are read once); more: tiled 64x64 on tensor cores where the
 * linear layers have them (int8 mma sm_75+, e4m3 mma sm_89+ -- fp8 per
 * tensor / token and per block --, fp16 mma sm_75+, bf16 mma sm_80+), else
 * the decode kernel over all slots.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "cuda_kernels.h"
#include "cuda_moe.h"

typedef struct qp_cu_moe {
    char layer[96];
    int E, H, I, G, off, bf16;
    int wkind, act, quant;     /* qp_cu_wkind, qp_cu_act; quant: row-scaled epilogue */
    float s13, s2, g13, g2;    /* static scales; NVFP4 g = 1 / input global scale */
    int act_mbits, act_emin, act_emax, act_e4m3;
    float act_maxv;
    int blk;
    int Hp, Ip, N13p, N2p;
    void *w13, *w2, *zrow;
    float *ws13, *ws2, *b13, *b2, *lut;
    void *scratch;
    size_t scratch_bytes;
} qp_cu_moe;

static int rup(int v, int m) { return (v + m - 1) / m * m; }
static size_t al256(size_t v) { return (v + 255) & ~(size_t)255; }

static qp_status moe_err(qp_cu_dev *d, qp_status st, const char *layer, const char *why) {
    return qp_cu_error(d, st, NULL, "MoE layer '%s': %s%s", layer,
                    st == QP_ERR_UNSUPPORTED ? "unsupported: " : "", why);
}

void qp_cu_moe_destroy_impl(void *dev, void *moe) {
    qp_cu_dev *d = dev;
    qp_cu_moe *m = moe;
    if (!m) return;
    cudaSetDevice(d->index);
    void *p[] = {m->w13, m->w2, m->zrow, m->ws13, m->ws2, m->b13, m->b2, m->lut, m->scratch};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) cudaFree(p[i]);
    free(m);
}

/* The int8 / fp8 experts' inputs: w13/w2 of w_dtype with the scales s13/s2,
 * and input scales > 0 for static activations (is_static). The refusals
 * name the family (kind) and the weights' dtype (w_name). */
static qp_status w8_check(qp_cu_dev *d, const qp_moe_desc *s, const char *layer, qp_dtype w_dtype, int is_static,
                          const char *kind, const char *w_name) {
    char why[96];
    if (s->w_dtype != w_dtype || !s->s13 || !s->s2) {
        snprintf(why, sizeof why, "%s experts need %s w13/w2 and s13/s2", kind, w_name);
        return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, why);
    }
    if (is_static && (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f))) {
        snprintf(why, sizeof why, "static %s activations need input scales > 0", kind);
        return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, why);
    }
    return QP_OK;
}

/* What the kernels run, from the desc; refusals name the reason. */
static qp_status classify(qp_cu_dev *d, const qp_moe_desc *s, qp_cu_moe *m, const char *layer) {
    if (s->E <= 0 || s->H <= 0 || s->I <= 0 || s->G < s->E || s->expert_offset < 0 || s->expert_offset > s->G - s->E)
        return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "bad shape (E, H, I, G, expert_offset)");
    if (s->act_dtype != QP_DTYPE_F16 && s->act_dtype != QP_DTYPE_BF16)
        return moe_err(d, QP_ERR_UNSUPPORTED, layer, "activations must be fp16 or bf16");
    if (!s->w13 || !s->w2) return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "missing w13 / w2");
    if ((size_t)s->E * (size_t)rup(2 * s->I, 64) > INT_MAX / 64 || (size_t)s->E * (size_t)rup(s->H, 64) > INT_MAX / 64)
        return moe_err(d, QP_ERR_UNSUPPORTED, layer, "E x 2I or E x H too large for the kernels' 32-bit row indices");
    if (s->act == QP_ACT_FP8_GROUP128) { /* fp8 per-block: b13 / b2 the (row, k-block) scales */
        if (s->w_dtype != QP_DTYPE_F8_E4M3FN || s->w_blk != 128 || !s->b13 || !s->b2)
            return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "fp8 per-block experts need e4m3 w13/w2, w_blk 128 and b13/b2");
        if (s->H % 128 || s->I % 128)
            return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "fp8 per-block experts need H and I multiples of 128");
        m->wkind = QP_CU_W_F8B;
        m->act = QP_CU_ACT_F8_GROUP128;
        m->blk = 128;
        return QP_OK; /* the scales are folded into the GEMM sums: no epilogue scale */
    }
    if (s->w_blk > 0) { /* emulated block-float experts; W4A16: signed int4 codes (I8) through w_lut */
        if (!s->b13 || !s->b2 || !s->w_lut)
            return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "block-float experts need b13, b2 and w_lut");
        if (s->w_dtype != QP_DTYPE_F4_E2M1 && s->w_dtype != QP_DTYPE_F6_E2M3 && s->w_dtype != QP_DTYPE_F6_E3M2 &&
            s->w_dtype != QP_DTYPE_F8_E4M3FN && s->w_dtype != QP_DTYPE_I8)
            return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer,
                           "w_dtype must be fp4_e2m1, fp6_e3m2, fp6_e2m3, fp8_e4m3fn or i8 (W4A16 codes)");
        if (s->w_blk != 16 && s->w_blk != 32) return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "w_blk must be 16 or 32");
        if (s->H % s->w_blk || s->I % s->w_blk)
            return moe_err(d, QP_ERR_UNSUPPORTED, layer, "H and I must be multiples of the weight block");
        m->wkind = QP_CU_W_LUT;
        m->blk = s->w_blk;
        switch (s->act) {
        case QP_ACT_NONE: m->act = QP_CU_ACT_NONE; break;
        case QP_ACT_MX_QDQ:
            m->act = QP_CU_ACT_MX_QDQ;
            switch (s->act_elem) { /* as the linear layers (cuda_backend.c) */
            case QP_DTYPE_F4_E2M1: m->act_emin = 0; m->act_maxv = 6.0f; break;
            case QP_DTYPE_F6_E3M2: m->act_emin = -2; m->act_maxv = 28.0f; break;
            case QP_DTYPE_F6_E2M3: m->act_emin = 0; m->act_maxv = 7.5f; break;
            case QP_DTYPE_F8_E4M3FN: m->act_emin = -6; m->act_maxv = 448.0f; m->act_e4m3 = 1; break;
            default: return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "MX qdq: act_elem is not an MX element format");
            }
            m->act_mbits = s->act_mbits;
            m->act_emax = s->act_emax;
            if (s->H % 32 || s->I % 32)
                return moe_err(d, QP_ERR_UNSUPPORTED, layer, "MX activations need H and I multiples of 32");
            break;
        case QP_ACT_FP8_STATIC_QDQ:
            if (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f) || s->a13_scale > 3.4e38f || s->a2_scale > 3.4e38f)
                return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "fp8 static qdq needs finite input scales > 0");
            m->act = QP_CU_ACT_F8S_QDQ;
            m->s13 = s->a13_scale;
            m->s2 = s->a2_scale;
            break;
        case QP_ACT_NVFP4_QDQ:
            if (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f) || s->a13_scale > 3.4e38f || s->a2_scale > 3.4e38f)
                return moe_err(d, QP_ERR_INVALID_ARGUMENT, layer, "nvfp4 qdq needs finite input global scales > 0");
            if (s->H % 16 || s->I % 16)
                return moe_err(d, QP_ERR_UNSUPPORTED, layer, "NVFP4 activations need H and I multiples of 16");
            m->act = QP_CU_ACT_NVFP4_QDQ;
            m->g13 = 1.0f / s->a13_scale; /* docs/semantics.md §8: one correctly rounded division */
            m->g2 = 1.0f / s->a2_scale;
            break;
        default:
            return moe_err(d, QP_ERR_UNSUPPORTED, layer, "block-float experts with an integer or dynamic fp8 activation mode");
        }
        return QP_OK;
    }
    qp_status st;
    switch (s->act) {
    case QP_ACT_NONE:
        if (s->w_dtype != s->act_dtype)
            return moe_err(d, QP_ERR_UNSUPPORTED, layer, "weight-only experts other than unquantized act-dtype weights");
        m->wkind = QP_CU_W_H;
        m->act = QP_CU_ACT_NONE;
        return QP_OK;
    case QP_ACT_INT8_STATIC:
    case QP_ACT_INT8_DYNAMIC_TOKEN:
        st = w8_check(d, s, layer, QP_DTYPE_I8, s->act == QP_ACT_INT8_STATIC, "int8", "int8");
        if (st != QP_OK) return st;
        m->wkind = QP_CU_W_I8;
        m->act = s->act == QP_ACT_INT8_STATIC ? QP_CU_ACT_I8_STATIC_SYM : QP_CU_ACT_I8_DYN_SYM;
        break;
    case QP_ACT_FP8_STATIC:
    case QP_ACT_FP8_DYNAMIC_TENSOR:
    case QP_ACT_FP8_DYNAMIC_TOKEN:
        st = w8_check(d, s, layer, QP_DTYPE_F8_E4M3FN, s->act == QP_ACT_FP8_STATIC, "fp8", "e4m3");
        if (st != QP_OK) return st;
        m->wkind = QP_CU_W_F8;
        m->act = s->act == QP_ACT_FP8_STATIC ? QP_CU_ACT_F8_STATIC
                 : s->act == QP_ACT_FP8_DYNAMIC_TENSOR ? QP_CU_ACT_F8_DYN_TENSOR : QP_CU_ACT_F8_DYN_TOKEN;
        break;
    default:
        return moe_err(d, QP_ERR_UNSUPPORTED, layer,
                       "this activation mode has no fused MoE kernel on cuda (asymmetric int8, or a qdq mode without "
                       "block-float weights)");
    }
    m->quant = 1;
    m->s13 = s->a13_scale;
    m->s2 = s->a2_scale;
    return QP_OK;
}

static qp_status upload(qp_cu_dev *d, qp_cu_moe *m, void **dst, const void *src, size_t bytes, const char *name) {
    return qp_cu_upload_new(d, dst, src, bytes, m->layer, name);
}

/* One stacked weight [E][NR][K] -> [E][NRp][Kp] in the kind's layout, and
 * its block multipliers [E][NR][K/blk] -> [E][NRp][Kp/blk]. */
static qp_status up_weight(qp_cu_dev *d, qp_cu_moe *m, const void *src, const float *bsrc, int NR, int NRp, int K, int Kp,
                           void **dst, float **bdst, const char *name) {
    size_t E = (size_t)m->E, rows = E * (size_t)NRp;
    size_t rb = m->wkind == QP_CU_W_H ? 2 * (size_t)Kp : m->wkind == QP_CU_W_LUT4 ? (size_t)Kp / 2 : (size_t)Kp;
    uint8_t *hw = calloc(rows, rb);
    if (!hw) return moe_err(d, QP_ERR_OUT_OF_MEMORY, m->layer, "out of host memory while repacking");
    for (size_t e = 0; e < E; e++)
        for (size_t r = 0; r < (size_t)NR; r++) {
            size_t si = (e * (size_t)NR + r) * (size_t)K;
            uint8_t *o = hw + (e * (size_t)NRp + r) * rb;
            if (m->wkind == QP_CU_W_H) memcpy(o, (const uint16_t *)src + si, 2 * (size_t)K);
            else if (m->wkind == QP_CU_W_LUT4)
                for (size_t c = 0; c < (size_t)K; c++) o[c / 2] |= (uint8_t)(((const uint8_t *)src)[si + c] << (4 * (c % 2)));
            else memcpy(o, (const uint8_t *)src + si, (size_t)K);
        }
    char nm[64];
    snprintf(nm, sizeof nm, "%s (repacked)", name);
    qp_status st = upload(d, m, dst, hw, rows * rb, nm);
    free(hw);
    if (st != QP_OK || !bsrc) return st;
    size_t B = (size_t)m->blk, nb = (size_t)K / B, nbp = (size_t)Kp / B;
    float *hb = calloc(rows * nbp, sizeof(float));
    if (!hb) return moe_err(d, QP_ERR_OUT_OF_MEMORY, m->layer, "out of host memory while repacking");
    for (size_t e = 0; e < E; e++)
        for (size_t r = 0; r < (size_t)NR; r++)
            memcpy(hb + (e * (size_t)NRp + r) * nbp, bsrc + (e * (size_t)NR + r) * nb, nb * sizeof(float));
    snprintf(nm, sizeof nm, "%s block scales", name);
    st = upload(d, m, (void **)bdst, hb, rows * nbp * sizeof(float), nm);
    free(hb);
    return st;
}

qp_status qp_cu_moe_prepare_impl(void *dev, const qp_moe_desc *s, void **out) {
    qp_cu_dev *d = dev;
    if (!s || !out) return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "NULL MoE desc or output");
    *out = NULL;
    const char *layer = s->layer ? s->layer : "";
    qp_cu_moe *m = QP_BACKEND_LAYER_NEW(qp_cu_moe, layer);
    if (!m) return qp_cu_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    m->E = s->E; m->H = s->H; m->I = s->I; m->G = s->G; m->off = s->expert_offset;
    m->bf16 = s->act_dtype == QP_DTYPE_BF16;
    qp_status st = classify(d, s, m, layer);
    if (st == QP_OK) st = qp_cu_runnable(d, layer);
    if (st != QP_OK) { free(m); return st; }
    cudaSetDevice(d->index);
    m->Hp = rup(s->H, QP_CU_BK);
    m->Ip = rup(s->I, QP_CU_BK);
    m->N13p = rup(2 * s->I, QP_CU_BN);
    m->N2p = rup(s->H, QP_CU_BN);
    size_t E = (size_t)s->E;
    if (m->wkind == QP_CU_W_LUT && s->w_dtype == QP_DTYPE_F4_E2M1) { /* fp4 codes two per byte */
        int packed = 1;
        for (size_t i = 0; packed && i < E * 2 * (size_t)s->I * (size_t)s->H; i++) packed = ((const uint8_t *)s->w13)[i] < 16;
        for (size_t i = 0; packed && i < E * (size_t)s->H * (size_t)s->I; i++) packed = ((const uint8_t *)s->w2)[i] < 16;
        if (packed) m->wkind = QP_CU_W_LUT4;
    }
    int lut = QP_CU_IS_FLOAT_KIND(m->wkind) && m->wkind != QP_CU_W_H, blocks = lut || m->wkind == QP_CU_W_F8B;
    st = up_weight(d, m, s->w13, blocks ? s->b13 : NULL, 2 * s->I, m->N13p, s->H, m->Hp, &m->w13, &m->b13, "w13");
    if (st == QP_OK) st = up_weight(d, m, s->w2, blocks ? s->b2 : NULL, s->H, m->N2p, s->I, m->Ip, &m->w2, &m->b2, "w2");
    if (st == QP_OK && m->quant) st = upload(d, m, (void **)&m->ws13, s->s13, E * 2 * (size_t)s->I * sizeof(float), "w13 scales");
    if (st == QP_OK && m->quant) st = upload(d, m, (void **)&m->ws2, s->s2, E * (size_t)s->H * sizeof(float), "w2 scales");
    if (st == QP_OK && lut) st = upload(d, m, (void **)&m->lut, s->w_lut, 256 * sizeof(float), "w_lut");
    if (st == QP_OK) { /* the A row of a pad slot */
        size_t zb = 2 * (size_t)(m->Hp > m->Ip ? m->Hp : m->Ip);
        void *z = calloc(zb, 1);
        st = z ? upload(d, m, &m->zrow, z, zb, "zero row") : moe_err(d, QP_ERR_OUT_OF_MEMORY, layer, "out of host memory");
        free(z);
    }
    if (st != QP_OK) {
        qp_cu_moe_destroy_impl(d, m);
        return st;
    }
    *out = m;
    return QP_OK;
}

/* tensor cores where the linear layers have them for this kind */
static int tc_ok(const qp_cu_dev *d, const qp_cu_moe *m) {
    if (m->wkind == QP_CU_W_I8) return qp_cu_cap_tensor_core_int8(d->cc);
    if (m->wkind == QP_CU_W_F8 || m->wkind == QP_CU_W_F8B) return qp_cu_cap_tensor_core_fp8(d->cc);
    return m->bf16 ? d->cc >= 80 : d->cc >= 75;
}

static int pick_path(const qp_cu_dev *d, const qp_cu_moe *m, int M) {
    return M > QP_CU_MOE_DECODE_MAX_M && tc_ok(d, m) ? QP_CU_MOE_TC : QP_CU_MOE_GEMV;
}

static int max_blocks(const qp_cu_moe *m, int MK, int bm) { return MK / bm + (m->E < MK ? m->E : MK) + 1; }

/* The scratch layout of M tokens with k slots each (byte offsets). */
typedef struct moe_plan {
    int kpath, bm, nbmax;
    size_t o_xa, o_ha, o_xs, o_hs, o_zp, o_am, o_h, o_p1, o_p2, o_cnt, o_eb, o_nb, o_so, o_be, total;
} moe_plan;

static void plan(const qp_cu_dev *d, const qp_cu_moe *m, int M, int k, moe_plan *p) {
    size_t MKz = (size_t)M * (size_t)k;
    int MK = (int)MKz;
    p->kpath = pick_path(d, m, M);
    p->bm = p->kpath == QP_CU_MOE_TC ? QP_CU_MOE_BMT : QP_CU_MOE_BMD;
    p->nbmax = max_blocks(m, MK, p->bm);
    size_t es = QP_CU_IS_FLOAT_KIND(m->wkind) ? 2 : 1, mx = (size_t)(MK > M ? MK : M);
    /* row scales: one per row, fp8 per-block one per row and group of 128 */
    size_t xg = m->wkind == QP_CU_W_F8B ? (size_t)m->H / 128 : 1, hg = m->wkind == QP_CU_W_F8B ? (size_t)m->I / 128 : 1;
    p->o_xa = 0;
    p->o_ha = al256(p->o_xa + (size_t)M * (size_t)m->Hp * es);
    p->o_xs = al256(p->o_ha + MKz * (size_t)m->Ip * es);
    p->o_hs = al256(p->o_xs + (size_t)M * xg * 4);
    p->o_zp = al256(p->o_hs + MKz * hg * 4);
    p->o_am = al256(p->o_zp + mx * 4);
    p->o_h = al256(p->o_am + 8);
    p->o_p1 = al256(p->o_h + MKz * (size_t)m->I * 2);
    p->o_p2 = al256(p->o_p1 + MKz * (size_t)m->N13p * 4);
    p->o_cnt = al256(p->o_p2 + MKz * (size_t)m->N2p * 4);
    p->o_eb = al256(p->o_cnt + (size_t)m->E * 4);
    p->o_nb = al256(p->o_eb + (size_t)m->E * 4);
    p->o_so = al256(p->o_nb + 4);
    p->o_be = al256(p->o_so + (size_t)p->nbmax * (size_t)p->bm * 4);
    p->total = al256(p->o_be + (size_t)p->nbmax * 4);
}

static qp_status shape_check(qp_cu_dev *d, const qp_cu_moe *m, int M, int k) {
    size_t MKz = (size_t)M * (size_t)k;
    int bm = pick_path(d, m, M) == QP_CU_MOE_TC ? QP_CU_MOE_BMT : QP_CU_MOE_BMD;
    if (MKz > (size_t)INT_MAX / 64 || MKz * (size_t)(m->N13p > m->N2p ? m->N13p : m->N2p) > (size_t)INT_MAX ||
        max_blocks(m, (int)MKz, bm) > 65535)
        return moe_err(d, QP_ERR_UNSUPPORTED, m->layer, "M * k slots too many for one launch grid");
    return QP_OK;
}

/* Scratch for every M in 1..max_m with k slots (the layout grows with M;
 * the decode / tiled switch is bracketed by the two sizes). Reserve time
 * only: a grown-out scratch is retired (graphs may use it). */
qp_status qp_cu_moe_reserve_impl(void *dev, void *moe, int max_m, int k) {
    qp_cu_dev *d = dev;
    qp_cu_moe *m = moe;
    if (!m || max_m < 0 || k <= 0)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_reserve: NULL layer, max_m < 0 or k <= 0");
    if (max_m == 0) return QP_OK;
    qp_status st = shape_check(d, m, max_m, k);
    if (st != QP_OK) return st;
    size_t need = 0;
    int ms[2] = {max_m < QP_CU_MOE_DECODE_MAX_M ? max_m : QP_CU_MOE_DECODE_MAX_M, max_m};
    for (int i = 0; i < 2; i++) {
        moe_plan p;
        plan(d, m, ms[i], k, &p);
        if (p.total > need) need = p.total;
    }
    if (m->scratch_bytes >= need) return QP_OK;
    void *ns = NULL;
    char what[96];
    snprintf(what, sizeof what, "MoE scratch for M = %d, k = %d", max_m, k);
    if ((st = qp_cu_malloc(d, &ns, need, m->layer, what)) != QP_OK) return st;
    if (m->scratch) qp_cu_retire(d, m->scratch);
    m->scratch = ns;
    m->scratch_bytes = need;
    return QP_OK;
}

/* Enqueued on the device's stream (nothing allocated, no wait); ids are
 * read on the device: a slot outside this block's experts adds nothing. */
qp_status qp_cu_moe_forward_impl(void *dev, void *moe, void *xbuf, int M, int k, void *idsbuf, void *wbuf, void *ybuf) {
    qp_cu_dev *d = dev;
    qp_cu_moe *m = moe;
    qp_cu_buf *xb = xbuf, *ib = idsbuf, *wb = wbuf, *yb = ybuf;
    if (!m || !xb || !ib || !wb || !yb || M < 0 || k <= 0)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE forward: NULL layer or buffer, M < 0 or k <= 0");
    if (M == 0) return QP_OK;
    size_t H = (size_t)m->H, MKz = (size_t)M * (size_t)k;
    qp_status st = shape_check(d, m, M, k);
    if (st != QP_OK) return st;
    if (xb->size < (size_t)M * H * 2 || yb->size < (size_t)M * H * 2 || ib->size < MKz * 4 || wb->size < MKz * 4)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE layer '%s': x, y, ids or weights smaller than "
                        "M = %d, k = %d, H = %d need", m->layer, M, k, m->H);
    moe_plan p;
    plan(d, m, M, k, &p);
    if (m->scratch_bytes < p.total || !d->has_stream)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE layer '%s': M = %d, k = %d needs %zu bytes of "
                        "scratch, %zu reserved: reserve it first (moe_reserve; qp_moe_options.max_m)",
                        m->layer, M, k, p.total, m->scratch_bytes);
    cudaError_t ce = cudaSetDevice(d->index);
    if (ce != cudaSuccess) return qp_cu_call_failed(d, m->layer, "cudaSetDevice", ce);
    char *ws = m->scratch;
    qp_cu_moe_fwd f;
    memset(&f, 0, sizeof f);
    f.M = M; f.k = k; f.E = m->E; f.off = m->off; f.H = m->H; f.I = m->I;
    f.Hp = m->Hp; f.Ip = m->Ip; f.N13p = m->N13p; f.N2p = m->N2p;
    f.wkind = m->wkind; f.act = m->act; f.bf16 = m->bf16; f.kpath = p.kpath; f.sm = d->cc;
    f.s13 = m->s13; f.s2 = m->s2; f.g13 = m->g13; f.g2 = m->g2;
    f.act_mbits = m->act_mbits; f.act_emin = m->act_emin; f.act_emax = m->act_emax; f.act_e4m3 = m->act_e4m3;
    f.act_maxv = m->act_maxv; f.blk = m->blk;
    f.w13 = m->w13; f.w2 = m->w2; f.ws13 = m->ws13; f.ws2 = m->ws2; f.b13 = m->b13; f.b2 = m->b2; f.lut = m->lut;
    f.zrow = m->zrow;
    f.x = xb->p; f.ids = ib->p; f.rw = wb->p; f.y = yb->p;
    f.xa = ws + p.o_xa; f.ha = ws + p.o_ha; f.xs = (float *)(ws + p.o_xs); f.hs = (float *)(ws + p.o_hs);
    f.zp = (int32_t *)(ws + p.o_zp); f.amax = (uint32_t *)(ws + p.o_am); f.h = (uint16_t *)(ws + p.o_h);
    f.p1 = ws + p.o_p1; f.p2 = ws + p.o_p2;
    f.cnt = (int32_t *)(ws + p.o_cnt); f.eblk = (int32_t *)(ws + p.o_eb); f.nblk = (int32_t *)(ws + p.o_nb);
    f.sorted = (int32_t *)(ws + p.o_so); f.bexp = (int32_t *)(ws + p.o_be);
    f.nbmax = p.nbmax;
    f.stream = d->stream;
    const char *what = "";
    int ke = qp_cu_moe_forward_launch(&f, &what);
    if (ke) {
        cudaGetLastError();
        char call[128];
        snprintf(call, sizeof call, "%s (M = %d, k = %d)", what, M, k);
        return qp_cu_call_failed(d, m->layer, call, (cudaError_t)ke);
    }
    qp_cu_enqueued(d, m->layer);
    return QP_OK;
}

void qp_cu_moe_describe(void *dev, void *moe, int M, int k, char *out, size_t cap) {
    qp_cu_dev *d = dev;
    qp_cu_moe *m = moe;
    (void)k;
    if (!out || !cap) return;
    out[0] = 0;
    if (!m) return;
    const char *kind = m->wkind == QP_CU_W_I8 ? "int8" : m->wkind == QP_CU_W_F8 ? "fp8"
                       : m->wkind == QP_CU_W_F8B ? "fp8 128x128 blocks, act groups of 128"
                       : m->wkind == QP_CU_W_H ? "unquantized" : m->wkind == QP_CU_W_LUT4 ? "block-float fp4x2" : "block-float";
    const char *act = m->act == QP_CU_ACT_MX_QDQ ? ", act mx-qdq" : m->act == QP_CU_ACT_F8S_QDQ ? ", act fp8-static-qdq"
                      : m->act == QP_CU_ACT_NVFP4_QDQ ? ", act nvfp4-qdq" : "";
    if (pick_path(d, m, M) == QP_CU_MOE_TC) {
        const char *mma = m->wkind == QP_CU_W_I8 ? (d->cc >= 80 ? "s8 m16n8k32" : "s8 m8n8k16")
                          : m->wkind == QP_CU_W_F8 || m->wkind == QP_CU_W_F8B ? "e4m3 m16n8k32"
                          : m->bf16 ? "bf16 m16n8k16" : d->cc >= 80 ? "f16 m16n8k16" : "f16 m16n8k8";
        snprintf(out, cap, "moe tiled %dx%d mma.sync %s%s %s%s, silu fp64", QP_CU_MOE_BMT, QP_CU_BN, mma,
                 d->cc >= 80 ? " cp.async" : "", kind, act);
    } else {
        const char *arith = m->wkind == QP_CU_W_I8                           ? "int-dot dp4a"
                            : m->wkind == QP_CU_W_F8 || m->wkind == QP_CU_W_F8B ? "fp8->fp32"
                                                                               : "fp32";
        snprintf(out, cap, "moe %s %d-slot blocks gemv %s %s%s, silu fp64",
                 M <= QP_CU_MOE_DECODE_MAX_M ? "decode" : "gemv (no tensor cores for this kind)", QP_CU_MOE_BMD, arith,
                 kind, act);
    }
}

/* Routing on the device (qp_moe_enqueue_logits): one thread a token. */
qp_status qp_cu_moe_route_impl(void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids,
                            void *w) {
    qp_cu_dev *d = dev;
    qp_cu_buf *lb = logits, *sb = scratch, *ib = ids, *wb = w, *bb = p ? p->bias : NULL;
    if (!p || !lb || !sb || !ib || !wb || M <= 0 || p->k <= 0 || p->k > QP_ROUTE_MAX_K || p->n_group > QP_ROUTE_MAX_K ||
        p->G <= 0)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_route: bad routing parameters");
    if (!d->has_stream)
        return qp_cu_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_route: the device has no stream yet");
    int flags = (p->renormalize ? 1 : 0) | (p->sigmoid ? 2 : 0) | (bb ? 4 : 0);
    int ke = qp_cu_moe_route_launch(lb->p, M, p->G, p->k, flags, p->n_group, p->topk_group, p->scale, bb ? bb->p : NULL,
                            sb->p, ib->p, wb->p, d->stream);
    if (ke) {
        cudaGetLastError();
        return qp_cu_call_failed(d, "MoE routing", "k_moe_route", (cudaError_t)ke);
    }
    qp_cu_enqueued(d, "MoE routing");
    return QP_OK;
}
