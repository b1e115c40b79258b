/* Fused MoE: moe_prepare uploads the stacked experts of a
 * qp_moe_desc, moe_forward runs cpu/ref_moe.c's steps on the device
 * (shaders/cl_moe.cl):
 *
 *   qp_moe_align        slots sorted by expert into blocks of 16 (decode,
 *                       M <= 16) or 32 (prefill) slots
 *   x quantization      the linear layers' kernels (qp_quant_i8, qp_rowmax +
 *                       qp_quant_f8, qp_quant_f8_group, qp_act_qdq), over
 *                       the M token rows
 *   w13 + silu_and_mul  qp_moe_gemv_* / qp_moe_tiled_* (gemm2 = 0) -> h
 *   h quantization      the same kernels over the M*k slot rows
 *   w2 * weight         qp_moe_gemv_* / qp_moe_tiled_* (gemm2 = 1) -> cache3
 *   k-slot sum          qp_moe_sum -> y
 *
 * The GEMM grids are sized for the most blocks the routing can make
 * (M*k / BM + min(E, M*k)); work-groups past the device-computed count
 * return at once, so no count travels back to the host.
 *
 * Layouts: weights as the desc has them, w13 [E][2I][H], w2 [E][H][I]:
 * int8 codes, e4m3 codes (W8A8-FP8), act-dtype bits (unquantized), or one
 * element code per byte with fp32 block multipliers (emulated: OCP MX,
 * W4A8 MXFP4-FP8, NVFP4, W = rnd(lut[c] * blk) as the linear layers), or
 * e4m3 codes with the fp32 scale of each (row, 128-wide k-block) (fp8
 * per-block: qp_moe_gemv_f8b / qp_moe_tiled_f wfmt 4, activations per token
 * and group of 128).
 * Weights are not split in chunks: a stacked tensor larger than one device
 * allocation is refused. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"

#define WG 64
#define BM_DECODE 16 /* shaders/cl_moe.cl QP_MOE_BMD */
#define BM_TILED 32  /* QP_TM */
#define DECODE_MAX_M 16

typedef struct qp_cl_moe {
    qp_scheme_kind kind;
    qp_act_mode act;
    int bf16, E, H, I, G, off;
    float a13, a2;               /* static scales (NVFP4: input global scales) */
    int is_int8, quant;          /* int8 kernels; epilogue with row scales    */
    int wfmt, blk;               /* float kernels: 0 act bits, 2 block-float codes, 3 e4m3,
                                  * 4 e4m3 with 128 x 128 block scales (fp8 per-block) */
    int qmode, elem, mbits, emax; /* qp_act_qdq (emulated, unquantized)       */
    float g13, ig13, g2, ig2;    /* NVFP4: g = 1 / input_global_scale, 1 / g  */
    cl_mem w13, w2, s13, s2, b13, b2, lut;
    /* scratch, grown on demand */
    int cap_m, cap_mk;
    cl_mem xa, xs, xzp, xrm;     /* x quantized, row scales, zero points, row maxima */
    cl_mem h, ha, hs, hzp, hrm;  /* h (act bits), quantized, ...              */
    cl_mem c3, cnt, eblk, sorted, bexp, nblk;
    char layer[96];
} qp_cl_moe;

typedef qp_cl_karg karg;
#define A(v) QP_CL_ARG(v)

static void release_scratch(qp_cl_device *d, qp_cl_moe *m) {
    cl_mem *s[] = {&m->xa, &m->xs, &m->xzp, &m->xrm, &m->h, &m->ha, &m->hs, &m->hzp, &m->hrm,
                   &m->c3, &m->cnt, &m->eblk, &m->sorted, &m->bexp, &m->nblk};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) qp_cl_release_mem(d, s[i]);
    m->cap_m = m->cap_mk = 0;
}

void qp_cl_moe_destroy(void *dev, void *moe) {
    qp_cl_device *d = dev;
    qp_cl_moe *m = moe;
    if (!m) return;
    release_scratch(d, m);
    cl_mem *w[] = {&m->w13, &m->w2, &m->s13, &m->s2, &m->b13, &m->b2, &m->lut};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) qp_cl_release_mem(d, w[i]);
    free(m);
}

static qp_status refuse(qp_cl_device *d, const char *layer, const char *why) {
    return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE layer '%s': unsupported: %s", layer, why);
}

static qp_status bad(qp_cl_device *d, const char *layer, const char *why) {
    return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE layer '%s': %s", layer, why);
}

static int elem_id(qp_dtype e) {
    return e == QP_DTYPE_F4_E2M1 ? 1 : e == QP_DTYPE_F6_E3M2 ? 2 : e == QP_DTYPE_F6_E2M3 ? 3 : e == QP_DTYPE_F8_E4M3FN ? 4 : 0;
}

/* What the kernels run, from the desc; refusals name the reason. */
static qp_status classify(qp_cl_device *d, const qp_moe_desc *s, qp_cl_moe *m, const char *layer) {
    if (s->E <= 0 || s->H <= 0 || s->I <= 0 || s->G < s->E || s->expert_offset < 0 || s->expert_offset > s->G - s->E)
        return bad(d, layer, "bad shape (E, H, I, G, expert_offset)");
    if (s->act_dtype != QP_DTYPE_F16 && s->act_dtype != QP_DTYPE_BF16) return bad(d, layer, "activations must be fp16 or bf16");
    if (!s->w13 || !s->w2) return bad(d, layer, "missing w13 / w2");
    if ((size_t)s->E * 2 * (size_t)s->I > INT_MAX / WG || (size_t)s->H * (size_t)s->E > INT_MAX / WG)
        return refuse(d, layer, "E x 2I or E x H too large for one launch grid");
    if (s->act == QP_ACT_FP8_GROUP128) { /* fp8 per-block: b13 / b2 the (row, k-block) scales */
        if (s->w_dtype != QP_DTYPE_F8_E4M3FN || s->w_blk != 128 || !s->b13 || !s->b2)
            return bad(d, layer, "fp8 per-block experts need e4m3 w13/w2, w_blk 128 and b13/b2");
        if (s->H % 128 || s->I % 128) return bad(d, layer, "fp8 per-block experts need H and I multiples of 128");
        m->wfmt = 4;
        m->blk = 128;
        return QP_OK;
    }
    if (s->w_blk > 0) { /* emulated block-float experts; W4A16: signed int4 codes (I8) through w_lut */
        static const int mb[] = {0, 1, 2, 3, 3}, em[] = {0, 2, 4, 2, 8}; /* docs/semantics.md §6 */
        if (!s->b13 || !s->b2 || !s->w_lut) return bad(d, layer, "block-float experts need b13, b2 and w_lut");
        if (!elem_id(s->w_dtype) && s->w_dtype != QP_DTYPE_I8)
            return bad(d, layer, "w_dtype must be fp4_e2m1, fp6_e3m2, fp6_e2m3, fp8_e4m3fn or i8 (W4A16 codes)");
        if (s->w_blk != 16 && s->w_blk != 32) return bad(d, layer, "w_blk must be 16 or 32");
        if (s->H % s->w_blk || s->I % s->w_blk) return refuse(d, layer, "H and I must be multiples of the weight block");
        m->wfmt = 2;
        m->blk = s->w_blk;
        switch (s->act) {
        case QP_ACT_NONE: m->qmode = 0; break;
        case QP_ACT_MX_QDQ: {
            int e = elem_id(s->act_elem);
            if (!e || s->act_mbits != mb[e] || s->act_emax != em[e])
                return bad(d, layer, "QP_ACT_MX_QDQ needs act_elem with its act_mbits and act_emax");
            if (s->H % 32 || s->I % 32) return refuse(d, layer, "MX activations need H and I multiples of 32");
            m->qmode = 1;
            m->elem = e;
            m->mbits = s->act_mbits;
            m->emax = s->act_emax;
            break;
        }
        case QP_ACT_FP8_STATIC_QDQ:
            if (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f) || s->a13_scale > 3.4e38f || s->a2_scale > 3.4e38f)
                return bad(d, layer, "QP_ACT_FP8_STATIC_QDQ needs finite input scales > 0");
            m->qmode = 2;
            break;
        case QP_ACT_NVFP4_QDQ:
            if (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f) || s->a13_scale > 3.4e38f || s->a2_scale > 3.4e38f)
                return bad(d, layer, "QP_ACT_NVFP4_QDQ needs finite input global scales > 0");
            if (s->H % 16 || s->I % 16) return refuse(d, layer, "NVFP4 activations need H and I multiples of 16");
            m->qmode = 3;
            m->g13 = 1.0f / s->a13_scale; /* docs/semantics.md §8: one correctly rounded division */
            m->ig13 = 1.0f / m->g13;
            m->g2 = 1.0f / s->a2_scale;
            m->ig2 = 1.0f / m->g2;
            break;
        default: return refuse(d, layer, "block-float experts with an integer or dynamic fp8 activation mode");
        }
        return QP_OK;
    }
    switch (s->act) {
    case QP_ACT_NONE:
        if (s->w_dtype != s->act_dtype) return refuse(d, layer, "weight-only experts other than unquantized act-dtype weights");
        m->wfmt = 0;
        return QP_OK;
    case QP_ACT_INT8_STATIC:
    case QP_ACT_INT8_DYNAMIC_TOKEN:
        if (s->w_dtype != QP_DTYPE_I8 || !s->s13 || !s->s2) return bad(d, layer, "int8 experts need int8 w13/w2 and s13/s2");
        if (s->act == QP_ACT_INT8_STATIC && (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f)))
            return bad(d, layer, "static int8 activations need input scales > 0");
        m->is_int8 = m->quant = 1;
        return QP_OK;
    case QP_ACT_FP8_STATIC:
    case QP_ACT_FP8_DYNAMIC_TENSOR:
    case QP_ACT_FP8_DYNAMIC_TOKEN:
        if (s->w_dtype != QP_DTYPE_F8_E4M3FN || !s->s13 || !s->s2)
            return bad(d, layer, "fp8 experts need e4m3 w13/w2 and s13/s2");
        if (s->act == QP_ACT_FP8_STATIC && (!(s->a13_scale > 0.0f) || !(s->a2_scale > 0.0f)))
            return bad(d, layer, "static fp8 activations need input scales > 0");
        m->quant = 1;
        m->wfmt = 3;
        return QP_OK;
    default:
        return refuse(d, layer, "this activation mode has no fused MoE kernel (asymmetric int8)");
    }
}

/* A whole stacked tensor in one buffer (the MoE kernels do not chunk). */
static qp_status upload(qp_cl_device *d, const void *src, size_t bytes, const char *name, const char *layer, cl_mem *out) {
    if ((uint64_t)bytes > d->weight_chunk_max)
        return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "MoE layer '%s': unsupported: %s (%zu bytes) exceeds one "
                         "device buffer (%llu bytes); the MoE kernels do not split expert weights", layer,
                         name, bytes, (unsigned long long)d->weight_chunk_max);
    return qp_cl_buffer_from_host(d, src, bytes, name, layer, out);
}

qp_status qp_cl_moe_prepare(void *dev, const qp_moe_desc *s, void **out) {
    qp_cl_device *d = dev;
    if (!s || !out) return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "NULL MoE desc or output");
    *out = NULL;
    const char *layer = s->layer ? s->layer : "";
    qp_cl_moe *m = QP_BACKEND_LAYER_NEW(qp_cl_moe, layer);
    if (!m) return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "out of host memory");
    m->kind = s->kind;
    m->act = s->act;
    m->bf16 = s->act_dtype == QP_DTYPE_BF16;
    m->E = s->E; m->H = s->H; m->I = s->I; m->G = s->G; m->off = s->expert_offset;
    m->a13 = s->a13_scale;
    m->a2 = s->a2_scale;
    m->blk = 1;
    qp_status st = classify(d, s, m, layer);
    if (st == QP_OK) st = qp_cl_program_ensure(d);
    if (st == QP_OK && d->max_wg < WG)
        st = refuse(d, layer, "the device's work-groups are smaller than 64");
    size_t E = (size_t)s->E, H = (size_t)s->H, I = (size_t)s->I;
    size_t eb = m->wfmt == 0 && !m->is_int8 ? 2 : 1;
    if (st == QP_OK) st = upload(d, s->w13, E * 2 * I * H * eb, "w13", layer, &m->w13);
    if (st == QP_OK) st = upload(d, s->w2, E * H * I * eb, "w2", layer, &m->w2);
    if (st == QP_OK && m->quant) {
        st = upload(d, s->s13, E * 2 * I * sizeof(float), "w13 scales", layer, &m->s13);
        if (st == QP_OK) st = upload(d, s->s2, E * H * sizeof(float), "w2 scales", layer, &m->s2);
    }
    if (st == QP_OK && (m->wfmt == 2 || m->wfmt == 4)) {
        size_t bl = (size_t)m->blk;
        st = upload(d, s->b13, E * 2 * I * (H / bl) * sizeof(float), "w13 block scales", layer, &m->b13);
        if (st == QP_OK) st = upload(d, s->b2, E * H * (I / bl) * sizeof(float), "w2 block scales", layer, &m->b2);
        if (st == QP_OK && m->wfmt == 2) st = upload(d, s->w_lut, 256 * sizeof(float), "w_lut", layer, &m->lut);
    }
    if (st != QP_OK) {
        qp_cl_moe_destroy(d, m);
        return st;
    }
    *out = m;
    return QP_OK;
}

static qp_status launch(qp_cl_device *d, qp_cl_moe *m, int which, const char *name, const karg *args, int n,
                        cl_uint dims, const size_t *global, const size_t *local) {
    char prefix[sizeof m->layer + 16];
    snprintf(prefix, sizeof prefix, "MoE layer '%s': ", m->layer);
    return qp_cl_launch(d, which, name, args, n, dims, global, local, NULL, NULL, prefix, 1);
}

static int max_blocks(const qp_cl_moe *m, int MK, int bm) { return MK / bm + (m->E < MK ? m->E : MK) + 1; }

static qp_status ensure_scratch(qp_cl_device *d, qp_cl_moe *m, int M, int MK) {
    if (M <= m->cap_m && MK <= m->cap_mk) return QP_OK;
    release_scratch(d, m);
    int cm = M < 16 ? 16 : M, ck = MK < 16 ? 16 : MK;
    size_t H = (size_t)m->H, I = (size_t)m->I, ae = m->is_int8 ? 1 : sizeof(float);
    size_t xg = m->wfmt == 4 ? H / 128 : 1, hg = m->wfmt == 4 ? I / 128 : 1; /* scales per row */
    size_t nd = (size_t)max_blocks(m, ck, BM_DECODE) * BM_DECODE, nt = (size_t)max_blocks(m, ck, BM_TILED) * BM_TILED;
    size_t nb = nd > nt ? nd : nt; /* sorted slots of either path */
    struct { cl_mem *p; size_t bytes; const char *name; } want[] = {
        {&m->xa, (size_t)cm * H * ae, "quantized x"}, {&m->xs, (size_t)cm * xg * 4, "x scales"},
        {&m->xzp, (size_t)cm * 4, "x zero points"}, {&m->xrm, (size_t)cm * 4, "x row maxima"},
        {&m->h, (size_t)ck * I * 2, "h"}, {&m->ha, (size_t)ck * I * ae, "quantized h"},
        {&m->hs, (size_t)ck * hg * 4, "h scales"}, {&m->hzp, (size_t)ck * 4, "h zero points"},
        {&m->hrm, (size_t)ck * 4, "h row maxima"}, {&m->c3, (size_t)ck * H * 2, "cache3"},
        {&m->cnt, (size_t)m->E * 4, "expert counts"}, {&m->eblk, (size_t)m->E * 4, "expert blocks"},
        {&m->sorted, nb * 4, "sorted slots"}, {&m->bexp, nb * 4, "block experts"}, {&m->nblk, 4, "block count"},
    };
    qp_cl_api *api = &d->be->api;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cl_int err = CL_INVALID_BUFFER_SIZE;
        if ((uint64_t)want[i].bytes <= d->max_alloc)
            if ((*want[i].p = api->clCreateBuffer(d->context, CL_MEM_READ_WRITE, want[i].bytes, NULL, &err)))
                d->stats.allocations++;
        if (!*want[i].p) {
            release_scratch(d, m);
            return qp_cl_error(d, QP_ERR_OUT_OF_MEMORY, NULL, "MoE layer '%s': %s for M = %d, M*k = %d (%zu bytes): "
                             "%s (%d)", m->layer, want[i].name, M, MK, want[i].bytes, qp_cl_strerror(err),
                             (int)err);
        }
    }
    m->cap_m = cm;
    m->cap_mk = ck;
    return QP_OK;
}

/* The GEMM input from act-dtype rows src [R][K]: quantized (a, rs) per the
 * layer's mode, fake-quantized or widened to fp32. */
static qp_status quantize(qp_cl_device *d, qp_cl_moe *m, cl_mem src, int R, int K, float scale, float g, float ig,
                          cl_mem a, cl_mem rs, cl_mem zp, cl_mem rm) {
    int bf16 = m->bf16, dm = (int)d->div_mode;
    size_t qg[1] = {(size_t)R * WG}, ql[1] = {WG};
    if (m->is_int8) {
        int dynamic = m->act != QP_ACT_INT8_STATIC, sym = 1, azp = 0;
        karg k[] = {A(src), A(K), A(bf16), A(dynamic), A(sym), A(scale), A(azp), A(a), A(rs), A(zp), A(dm)};
        return launch(d, m, QP_CL_K_QUANT_I8, "qp_quant_i8", k, 11, 1, qg, ql);
    }
    if (m->wfmt == 4) { /* per token and group of 128 (per_token_group_quant_fp8, no ue8m0) */
        int ue8m0 = 0;
        size_t gg[1] = {(size_t)R * (size_t)(K / 128) * WG};
        karg k[] = {A(src), A(K), A(bf16), A(ue8m0), A(a), A(rs), A(dm)};
        return launch(d, m, QP_CL_K_QUANT_F8G, "qp_quant_f8_group", k, 7, 1, gg, ql);
    }
    if (m->quant) {
        int mode = m->act == QP_ACT_FP8_STATIC ? 0 : m->act == QP_ACT_FP8_DYNAMIC_TENSOR ? 1 : 2;
        qp_status st = QP_OK;
        if (mode == 1) {
            karg r[] = {A(src), A(K), A(bf16), A(rm)};
            st = launch(d, m, QP_CL_K_ROWMAX, "qp_rowmax", r, 4, 1, qg, ql);
        }
        karg k[] = {A(src), A(K), A(R), A(bf16), A(mode), A(scale), A(rm), A(a), A(rs), A(dm)};
        return st ? st : launch(d, m, QP_CL_K_QUANT_F8, "qp_quant_f8", k, 10, 1, qg, ql);
    }
    if ((size_t)R * (size_t)K > (size_t)INT_MAX - WG)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE layer '%s': %d x %d activations too many for one "
                         "launch", m->layer, R, K);
    int items = m->qmode == 1 ? R * (K / 32) : m->qmode == 3 ? R * (K / 16) : R * K;
    size_t gg[1] = {((size_t)items + WG - 1) / WG * WG};
    karg k[] = {A(src), A(items), A(bf16), A(m->qmode), A(m->elem), A(m->mbits), A(m->emax), A(scale), A(g), A(ig),
                A(dm), A(a)};
    return launch(d, m, QP_CL_K_ACT_QDQ, "qp_act_qdq", k, 12, 1, gg, ql);
}

/* One grouped GEMM: w13 (gemm2 0: a = x rows, adiv = k, out = h) or w2. */
static qp_status gemm(qp_cl_device *d, qp_cl_moe *m, int gemm2, int decode, int MK, int k, cl_mem rw, cl_mem out) {
    cl_mem a = gemm2 ? m->ha : m->xa, rs = gemm2 ? m->hs : m->xs, w = gemm2 ? m->w2 : m->w13;
    cl_mem ws = m->quant ? (gemm2 ? m->s2 : m->s13) : d->dummy;
    int adiv = gemm2 ? 1 : k, K = gemm2 ? m->I : m->H, NO = gemm2 ? m->H : m->I, bf16 = m->bf16;
    int nbmax = max_blocks(m, MK, decode ? BM_DECODE : BM_TILED);
    size_t gd[1] = {(size_t)nbmax * (size_t)NO * WG}, ld[1] = {WG};
    size_t gt[2] = {(size_t)((NO + 31) / 32) * 8, (size_t)nbmax * 8}, lt[2] = {8, 8};
    if (m->is_int8) {
        karg g[] = {A(a), A(adiv), A(w), A(K), A(NO), A(gemm2), A(bf16), A(rs), A(ws), A(rw), A(m->sorted),
                    A(m->bexp), A(m->nblk), A(out)};
        return decode ? launch(d, m, QP_CL_K_MOE_GEMV_I, "qp_moe_gemv_i", g, 14, 1, gd, ld)
                      : launch(d, m, QP_CL_K_MOE_TILED_I, "qp_moe_tiled_i", g, 14, 2, gt, lt);
    }
    cl_mem lut = m->lut ? m->lut : d->dummy, bs = m->wfmt == 2 || m->wfmt == 4 ? (gemm2 ? m->b2 : m->b13) : d->dummy;
    if (m->wfmt == 4 && decode) { /* the prefill kernel folds k-blocks itself (wfmt 4) */
        karg g[] = {A(a), A(adiv), A(w), A(K), A(NO), A(gemm2), A(bf16), A(rs), A(bs), A(rw), A(m->sorted),
                    A(m->bexp), A(m->nblk), A(out)};
        return launch(d, m, QP_CL_K_MOE_GEMV_F8B, "qp_moe_gemv_f8b", g, 14, 1, gd, ld);
    }
    karg g[] = {A(a), A(adiv), A(w), A(lut), A(bs), A(m->wfmt), A(m->blk), A(K), A(NO), A(gemm2), A(m->quant),
                A(bf16), A(rs), A(ws), A(rw), A(m->sorted), A(m->bexp), A(m->nblk), A(out)};
    return decode ? launch(d, m, QP_CL_K_MOE_GEMV_F, "qp_moe_gemv_f", g, 19, 1, gd, ld)
                  : launch(d, m, QP_CL_K_MOE_TILED_F, "qp_moe_tiled_f", g, 19, 2, gt, lt);
}

qp_status qp_cl_moe_forward(void *dev, void *moe, void *xbuf, int M, int k, void *idsbuf, void *wbuf, void *ybuf) {
    qp_cl_device *d = dev;
    qp_cl_moe *m = moe;
    qp_cl_buffer *xb = xbuf, *ib = idsbuf, *wb = wbuf, *yb = ybuf;
    if (!m || !xb || !ib || !wb || !yb || M < 0 || k <= 0)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE forward: NULL layer or buffer, M < 0 or k <= 0");
    if (M == 0) return QP_OK;
    size_t H = (size_t)m->H, MKz = (size_t)M * (size_t)k;
    if (MKz > (size_t)INT_MAX / WG || MKz * (size_t)(m->H > m->I ? m->H : m->I) > (size_t)INT_MAX)
        return refuse(d, m->layer, "M * k slots too many for one launch");
    if (xb->bytes < (size_t)M * H * 2 || yb->bytes < (size_t)M * H * 2 || ib->bytes < MKz * 4 || wb->bytes < MKz * 4)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "MoE layer '%s': x, y, ids or weights smaller than "
                         "M = %d, k = %d, H = %d need", m->layer, M, k, m->H);
    int MK = (int)MKz;
    qp_status st = ensure_scratch(d, m, M, MK);
    if (st != QP_OK) return st;
    int decode = M <= DECODE_MAX_M, bm = decode ? BM_DECODE : BM_TILED;
    size_t one[1] = {WG}, l1[1] = {WG};
    /* 1. slots sorted by expert (and other ranks' h rows zeroed) */
    karg al[] = {A(ib->mem), A(MK), A(m->E), A(m->off), A(bm), A(m->cnt), A(m->eblk), A(m->sorted), A(m->bexp),
                 A(m->nblk), A(m->h), A(m->I)};
    st = launch(d, m, QP_CL_K_MOE_ALIGN, "qp_moe_align", al, 12, 1, one, l1);
    /* 2. x quantized over its M rows, 3. w13 GEMM + silu_and_mul -> h */
    if (!st) st = quantize(d, m, xb->mem, M, m->H, m->a13, m->g13, m->ig13, m->xa, m->xs, m->xzp, m->xrm);
    if (!st) st = gemm(d, m, 0, decode, MK, k, wb->mem, m->h);
    /* 4. h quantized over its M*k rows, 5. w2 GEMM times the routing weight */
    if (!st) st = quantize(d, m, m->h, MK, m->I, m->a2, m->g2, m->ig2, m->ha, m->hs, m->hzp, m->hrm);
    if (!st) st = gemm(d, m, 1, decode, MK, k, wb->mem, m->c3);
    /* 6. the ordered k-slot sum */
    if (!st) {
        size_t g[1] = {(MKz / (size_t)k * H + WG - 1) / WG * WG};
        karg sa[] = {A(m->c3), A(ib->mem), A(M), A(k), A(m->H), A(m->E), A(m->off), A(m->bf16), A(yb->mem)};
        st = launch(d, m, QP_CL_K_MOE_SUM, "qp_moe_sum", sa, 9, 1, g, l1);
    }
    if (st) return st;
    char what[96];
    snprintf(what, sizeof what, "MoE '%.80s'", m->layer);
    qp_cl_enqueued(d, what);
    return QP_OK;
}

qp_status qp_cl_moe_reserve(void *dev, void *moe, int max_m, int k) {
    qp_cl_moe *m = moe;
    if (!m || max_m <= 0 || k <= 0 || (size_t)max_m * (size_t)k > (size_t)INT_MAX / WG) return QP_OK;
    return ensure_scratch(dev, m, max_m, max_m * k);
}

void qp_cl_moe_describe(void *dev, void *moe, int M, int k, char *out, size_t cap) {
    qp_cl_device *d = dev;
    qp_cl_moe *m = moe;
    (void)k;
    if (!out || !cap) return;
    if (!m) { out[0] = 0; return; }
    static const char *const q[] = {"", ", act mx-qdq", ", act fp8-static-qdq", ", act nvfp4-qdq"};
    const char *arith = m->is_int8 ? (d->int_dot_ext ? "int-dot" : "int8 plain")
                        : m->wfmt == 3 ? "fp8->fp32"
                        : m->wfmt == 4 ? "fp8->fp32 128x128 blocks, act groups of 128"
                        : m->wfmt == 0 ? "fp16/bf16->fp32"
                        : m->blk == 16 ? "block-float->fp32 blocks of 16" : "block-float->fp32 blocks of 32";
    const char *silu = d->has_fp64 ? "silu fp64" : "silu fp32 (not bit-exact: no fp64)";
    if (M <= DECODE_MAX_M)
        snprintf(out, cap, "moe decode %d-slot blocks %s, %s%s", BM_DECODE, arith, silu, q[m->qmode & 3]);
    else
        snprintf(out, cap, "moe tiled %dx32 %s, %s%s", BM_TILED, arith, silu, q[m->qmode & 3]);
}

/* Routing on the device (qp_moe_enqueue_logits): one work-item a token;
 * needs fp64 (the reference's exponential in double). */
qp_status qp_cl_moe_route(void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids, void *w) {
    qp_cl_device *d = dev;
    qp_cl_buffer *lb = logits, *sb = scratch, *ib = ids, *wb = w, *bb = p ? p->bias : NULL;
    if (!d->has_fp64 || !d->kernels[QP_CL_K_MOE_ROUTE])
        return qp_cl_error(d, QP_ERR_UNSUPPORTED, NULL, "routing on the device needs fp64 (cl_khr_fp64: the "
                         "reference's exponential in double); route on the host and pass the top-k (qp_moe_enqueue)");
    if (!p || !lb || !sb || !ib || !wb || M <= 0 || p->k <= 0 || p->k > QP_ROUTE_MAX_K || p->n_group > QP_ROUTE_MAX_K)
        return qp_cl_error(d, QP_ERR_INVALID_ARGUMENT, NULL, "moe_route: bad routing parameters");
    int flags = (p->renormalize ? 1 : 0) | (p->sigmoid ? 2 : 0) | (bb ? 4 : 0), dm = (int)d->div_mode;
    cl_mem bias = bb ? bb->mem : d->dummy;
    karg a[] = {A(lb->mem), A(M), A(p->G), A(p->k), A(flags), A(p->n_group), A(p->topk_group), A(p->scale), A(bias),
                A(sb->mem), A(ib->mem), A(wb->mem), A(dm)};
    size_t g[1] = {((size_t)M + WG - 1) / WG * WG}, l[1] = {WG};
    qp_status st = qp_cl_launch(d, QP_CL_K_MOE_ROUTE, "qp_moe_route", a, 13, 1, g, l, NULL, NULL, "", 0);
    if (st != QP_OK) return st;
    qp_cl_enqueued(d, "MoE routing");
    return QP_OK;
}
