#include "backend_layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"

int bh_sel_k(bh_sel s, int n, int K) { return s == BH_SEL_PERM ? (7 * n + 3) % K : n % K; }

static void begin(bh_layer *L, qp_dtype dt, bool bias, int N, int K, const char *layer) {
    memset(L, 0, sizeof *L);
    L->dt = dt;
    L->N = N;
    L->K = K;
    L->has_bias = bias;
    L->bias = malloc(2 * (size_t)N);
    for (int n = 0; n < N; n++) L->bias[n] = bh_enc(dt, bh_frand() * 2.0f);
    snprintf(L->layer, sizeof L->layer, "%s", layer);
    L->d.struct_size = sizeof L->d;
    L->d.act_dtype = dt;
    L->d.N = N;
    L->d.K = K;
    L->d.layer = L->layer;
    L->d.bias = bias ? L->bias : NULL;
}

/* an e4m3fn code that is not NaN */
static uint8_t fp8_code(void) {
    uint8_t c = (uint8_t)bh_rand32();
    return (c & 0x7F) == 0x7F ? 0x7E : c;
}

void bh_int8_layer(bh_layer *L, qp_dtype dt, bool is_static, bool sym, bool per_channel, bool bias, int N, int K) {
    begin(L, dt, bias, N, K, "test.int8");
    size_t nk = (size_t)N * K;
    L->w_i8 = malloc(nk);
    L->w_scale = malloc(sizeof(float) * (size_t)N);
    L->adj = malloc(sizeof(int32_t) * (size_t)N);
    for (size_t i = 0; i < nk; i++) L->w_i8[i] = (int8_t)bh_irand(-128, 127);
    float ws0 = 0.002f + 0.001f * fabsf(bh_frand());
    for (int n = 0; n < N; n++) L->w_scale[n] = per_channel ? 0.001f + 0.01f * fabsf(bh_frand()) : ws0;
    L->is_static = is_static;
    L->sym = sym;
    L->per_channel = per_channel;
    L->in_scale = 0.011f + 0.02f * fabsf(bh_frand());
    L->in_zp = is_static && !sym ? bh_irand(-20, 20) : 0;
    /* azp_adj[n] = sum_k w[n][k], times input_zp when static (docs/semantics.md §15 step 5) */
    for (int n = 0; n < N; n++) {
        int64_t s = 0;
        for (int k = 0; k < K; k++) s += L->w_i8[(size_t)n * K + k];
        L->adj[n] = is_static ? (int32_t)((uint32_t)s * (uint32_t)L->in_zp) : (int32_t)s;
    }
    qp_lin_desc *d = &L->d;
    d->kind = d->scheme.kind = QP_SCHEME_W8A8_INT8;
    d->act = is_static ? QP_ACT_INT8_STATIC : QP_ACT_INT8_DYNAMIC_TOKEN;
    d->act_symmetric = sym;
    d->input_scale = L->in_scale;
    d->input_zp = L->in_zp;
    d->w_i8 = L->w_i8;
    d->w_scale = L->w_scale;
    d->w_per_channel = per_channel;
    d->azp_adj = sym ? NULL : L->adj;
}

void bh_fp8_layer(bh_layer *L, qp_dtype dt, qp_fp8_act act, bool per_channel, bool bias, bool identity, int N, int K) {
    if (identity) N = K;
    begin(L, dt, bias, N, K, "test.fp8");
    size_t nk = (size_t)N * K;
    L->w_u8 = malloc(nk);
    L->w_scale = malloc(sizeof(float) * (size_t)N);
    L->wd = malloc(sizeof(double) * nk);
    for (size_t i = 0; i < nk; i++) L->w_u8[i] = identity ? (i / K == i % K ? 0x38 : 0x00) : fp8_code();
    float ws0 = identity ? 1.0f : 0.001f + 0.002f * fabsf(bh_frand());
    for (int n = 0; n < N; n++) L->w_scale[n] = per_channel && !identity ? 0.0005f + 0.003f * fabsf(bh_frand()) : ws0;
    for (size_t i = 0; i < nk; i++)
        L->wd[i] = (double)qp_format_decode(QP_DTYPE_F8_E4M3FN, L->w_u8[i]) * L->w_scale[i / K];
    L->per_channel = per_channel;
    L->fp8_act = act;
    L->in_scale = 0.01f + 0.01f * fabsf(bh_frand());
    qp_lin_desc *d = &L->d;
    d->kind = d->scheme.kind = QP_SCHEME_W8A8_FP8;
    d->act = act == QP_FP8_ACT_STATIC           ? QP_ACT_FP8_STATIC
             : act == QP_FP8_ACT_DYNAMIC_TENSOR ? QP_ACT_FP8_DYNAMIC_TENSOR
                                                : QP_ACT_FP8_DYNAMIC_TOKEN;
    d->input_scale = L->in_scale;
    d->w_u8 = L->w_u8;
    d->w_scale = L->w_scale;
    d->w_per_channel = per_channel;
}

void bh_qqq_layer(bh_layer *L, int group, bool bias, int N, int K) {
    begin(L, QP_DTYPE_F16, bias, N, K, "test.qqq");
    size_t kn = (size_t)K * N;
    int G = K / 128;
    int8_t *q = malloc(kn); /* [K][N], as qp_qqq_pack_weight takes it */
    L->group = group;
    L->q4 = malloc(kn);
    L->w8 = malloc(kn);
    L->s_ch = malloc(sizeof(float) * (size_t)N);
    L->s_ch_perm = malloc(sizeof(float) * (size_t)N);
    L->s_grp = malloc(2 * (size_t)(G + 1) * N);
    L->s_grp_perm = malloc(2 * (size_t)(G + 1) * N);
    L->B = malloc(sizeof(int32_t) * (size_t)(K / 16) * 2 * N);
    for (size_t i = 0; i < kn; i++) q[i] = (int8_t)(group == 128 ? bh_irand(0, 15) : bh_irand(-8, 7));
    for (int n = 0; n < N; n++) L->s_ch[n] = bh_frange(1e-4f, 1e-3f);
    /* group scales up to ~20: |t s| passes 127.5, the wrap of docs/semantics.md §11 step 2 */
    for (int i = 0; i < G * N; i++) L->s_grp[i] = bh_enc(QP_DTYPE_F16, bh_frange(0.5f, 20.5f));
    int wraps = 0;
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = q[(size_t)k * N + n];
            L->q4[(size_t)n * K + k] = (int8_t)c;
            if (group == 128) {
                uint16_t sg = L->s_grp[(size_t)(k / 128) * N + n];
                L->w8[(size_t)n * K + k] = qp_ref_qqq_group_weight(c - 8, sg);
                wraps += fabs((c - 8) * (double)bh_dec(QP_DTYPE_F16, sg)) > 127.5;
            } else {
                L->w8[(size_t)n * K + k] = (int8_t)(16 * c);
            }
        }
    CHECK(group != 128 || wraps > 0, "qqq: the test data has no wrapping weights");
    qp_status st = qp_qqq_pack_weight(NULL, q, K, N, group, L->B);
    if (st == QP_OK)
        st = qp_qqq_permute_scales(NULL, L->s_ch, group == 128 ? L->s_grp : NULL, K, N, group, L->s_ch_perm,
                                   group == 128 ? L->s_grp_perm : NULL);
    CHECK(st == QP_OK, "qqq: pack / permute: %s", qp_status_str(st));
    free(q);
    qp_lin_desc *d = &L->d;
    d->kind = d->scheme.kind = QP_SCHEME_QQQ_W4A8;
    d->act = QP_ACT_INT8_DYNAMIC_TOKEN;
    d->act_symmetric = 1;
    d->group_size = group;
    d->q4 = L->q4;
    d->w8 = L->w8;
    d->s_channel = L->s_ch;
    d->s_group = group == 128 ? L->s_grp : NULL;
    d->marlin_B = L->B;
    d->marlin_s_channel = L->s_ch_perm;
    d->marlin_s_group = group == 128 ? L->s_grp_perm : NULL;
}

void bh_w4a16_layer(bh_layer *L, qp_dtype dt, qp_pack_method pack, bool sym, int group, bool bias, int N, int K) {
    begin(L, dt, bias, N, K, "test.w4a16");
    int g = group > 0 ? group : K, G = K / g, nc = (N + 7) / 8;
    uint8_t *codes = malloc((size_t)K * N); /* [K][N] */
    L->w4_zero = malloc((size_t)G * N);
    L->W4 = calloc((size_t)K * nc, 4);
    L->Z4 = calloc((size_t)G * nc, 4);
    L->sc16 = calloc((size_t)G * 8 * nc, 2);
    L->w4_scale = malloc(sizeof(float) * (size_t)G * N);
    L->q4 = malloc((size_t)K * N);
    L->wd = malloc(sizeof(double) * (size_t)K * N);
    for (size_t i = 0; i < (size_t)K * N; i++) codes[i] = (uint8_t)bh_irand(0, 15);
    for (size_t i = 0; i < (size_t)G * N; i++) L->w4_zero[i] = (uint8_t)bh_irand(0, 15);
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) /* a few negative and tiny scales too */
            L->sc16[(size_t)gi * 8 * nc + n] =
                bh_enc(dt, (n % 13 == 5 ? -1.0f : 1.0f) * (n % 17 == 3 ? 1e-6f : 0.002f + 0.02f * fabsf(bh_frand())));
    qp_status st = qp_pack_int4_quark(codes, K, N, pack, L->W4);
    if (st == QP_OK && !sym) st = qp_pack_int4_quark(L->w4_zero, G, N, pack, L->Z4);
    CHECK(st == QP_OK, "w4a16: pack failed");
    /* the canonical fields (api/linear_desc.c): q4 [N][K] stored codes,
     * w4_zero / w4_scale [G][N]; W = v * scale is exact in fp32 */
    for (int gi = 0; gi < G; gi++)
        for (int n = 0; n < N; n++) L->w4_scale[(size_t)gi * N + n] = bh_dec(dt, L->sc16[(size_t)gi * 8 * nc + n]);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            int c = codes[(size_t)k * N + n], v = sym ? c - 16 * (c >= 8) : c - L->w4_zero[(size_t)(k / g) * N + n];
            L->q4[(size_t)n * K + k] = (int8_t)c;
            L->wd[(size_t)n * K + k] = (double)v * L->w4_scale[(size_t)(k / g) * N + n];
        }
    free(codes);
    L->group = group;
    L->sym = sym;
    L->pack = pack;
    qp_lin_desc *d = &L->d;
    d->kind = d->scheme.kind = QP_SCHEME_W4A16_INT4;
    d->scheme.weight.group_size = group;
    d->scheme.weight.symmetric = sym;
    d->scheme.pack_method = pack;
    d->act = QP_ACT_NONE;
    d->group_size = group;
    d->q4 = L->q4;
    d->w4_signed = sym;
    d->w4_zero = sym ? NULL : L->w4_zero;
    d->w4_scale = L->w4_scale;
}

void bh_fp8_block_layer(bh_layer *L, qp_dtype dt, int ue8m0, bool bias, bh_sel sel, int N, int K) {
    begin(L, dt, bias, N, K, "test.fp8block");
    int kb = K / 128, nbr = (N + 127) / 128;
    size_t nk = (size_t)N * K;
    L->w_u8 = malloc(nk);
    L->w_scale = malloc(sizeof(float) * (size_t)nbr * kb);
    L->wd = malloc(sizeof(double) * nk);
    for (size_t i = 0; i < nk; i++) {
        int n = (int)(i / K), k = (int)(i % K);
        L->w_u8[i] = sel ? (k == bh_sel_k(sel, n, K) ? 0x38 : 0x00) : fp8_code();
    }
    for (int i = 0; i < nbr * kb; i++)
        L->w_scale[i] = sel ? 1.0f : ue8m0 ? ldexpf(1.0f, bh_irand(-12, -6)) : 0.0005f + 0.003f * fabsf(bh_frand());
    for (size_t i = 0; i < nk; i++) {
        int n = (int)(i / K), k = (int)(i % K);
        L->wd[i] = (double)qp_format_decode(QP_DTYPE_F8_E4M3FN, L->w_u8[i]) * L->w_scale[(size_t)(n / 128) * kb + k / 128];
    }
    L->ue8m0 = ue8m0;
    qp_lin_desc *d = &L->d;
    d->kind = d->scheme.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    d->act = QP_ACT_FP8_GROUP128;
    d->ue8m0 = ue8m0;
    d->w_u8 = L->w_u8;
    d->w_scale = L->w_scale;
    d->w_per_channel = 1;
}

void bh_fw_spec_init(bh_fw_spec *s, bh_fw_kind kind, qp_dtype dt, qp_dtype w_elem, qp_ocp_mx_act act, int N, int K,
                     bh_sel sel, bool bias) {
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->dt = dt;
    s->w_elem = w_elem;
    s->act = act;
    s->N = N;
    s->K = K;
    s->sel = sel;
    s->bias = bias;
    s->e8m0_lo = 121;
    s->e8m0_hi = 130;
    s->e4m3_lo = 0x30;
    s->e4m3_hi = 0x40;
    s->wact_amp = 0.5f;
    s->in_scale = 0.013f;
    s->in_gscale = 0.37f;
    s->w2 = 0.75f;
}

bool bh_fw_layer(bh_layer *L, const bh_fw_spec *s) {
    static const qp_dtype aes[] = {QP_DTYPE_NONE, QP_DTYPE_F4_E2M1, QP_DTYPE_F6_E3M2, QP_DTYPE_F6_E2M3,
                                   QP_DTYPE_F8_E4M3FN};
    int N = s->N, K = s->K;
    qp_dtype dt = s->dt;
    begin(L, dt, s->bias, N, K, "test.fw");
    L->fw = *s;
    bh_fw_spec *f = &L->fw;
    if (f->kind != BH_FW_MX) f->act = QP_OCP_MX_ACT_NONE;
    if (f->kind == BH_FW_W4A8 || f->kind == BH_FW_NVFP4) f->w_elem = QP_DTYPE_F4_E2M1;
    if (f->kind == BH_FW_UNQ) f->w_elem = QP_DTYPE_NONE;
    qp_dtype we = f->w_elem, ae = aes[f->act];
    int blk = f->kind == BH_FW_NVFP4 ? 16 : 32, nb = K / blk;
    size_t nk = (size_t)N * K;
    L->codes = calloc(nk, 1);
    L->packed = calloc(nk, 1);
    L->bsc = malloc((size_t)N * (nb ? nb : 1));
    L->wact = malloc(2 * nk);
    L->wd = malloc(sizeof(double) * nk);
    uint8_t one = f->kind == BH_FW_UNQ ? 0 : (uint8_t)qp_format_encode(we, 1.0f);
    int bits = f->kind == BH_FW_UNQ ? 8 : qp_format_bits(we);
    for (int n = 0; n < N; n++) {
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)n * K + k;
            if (f->sel) {
                bool on = k == bh_sel_k(f->sel, n, K);
                L->codes[i] = on ? one : 0;
                L->wact[i] = bh_enc(dt, on ? 1.0f : 0.0f);
            } else {
                unsigned c = (unsigned)bh_irand(0, (1 << bits) - 1);
                if (we == QP_DTYPE_F8_E4M3FN && (c & 0x7F) == 0x7F) c = 0x7E; /* no NaN weights */
                L->codes[i] = (uint8_t)c;
                L->wact[i] = bh_enc(dt, bh_frand() * f->wact_amp);
            }
        }
        for (int j = 0; j < nb; j++) {
            uint8_t *b = &L->bsc[(size_t)n * nb + j];
            if (f->kind == BH_FW_NVFP4) *b = f->sel ? 0x38 : (uint8_t)bh_irand(f->e4m3_lo, f->e4m3_hi);
            else if (f->sel) *b = 127;
            else if (f->e8m0_far && n % 11 == 4 && j < 2) *b = (uint8_t)(j ? 100 : 150);
            else *b = (uint8_t)bh_irand(f->e8m0_lo, f->e8m0_hi);
        }
    }
    if (f->kind != BH_FW_UNQ)
        for (int n = 0; n < N; n++) {
            const uint8_t *c = L->codes + (size_t)n * K;
            if (we == QP_DTYPE_F4_E2M1) qp_pack_fp4(c, (size_t)K, L->packed + (size_t)n * (K / 2));
            else if (we == QP_DTYPE_F8_E4M3FN) memcpy(L->packed + (size_t)n * K, c, (size_t)K);
            else qp_pack_fp6(c, (size_t)K, L->packed + (size_t)n * (K * 3 / 4));
        }
    int64_t wcols = we == QP_DTYPE_F4_E2M1 ? K / 2 : we == QP_DTYPE_F8_E4M3FN ? K : K * 3 / 4;
    L->in_scale = f->in_scale;
    L->w2 = f->sel ? 1.0f : f->w2;
    /* the checkpoint tensors, named as the binder looks them up */
    qp_scheme sch = {0};
    qp_tensor *t = L->t;
    size_t nt = 0;
    if (f->kind == BH_FW_UNQ) {
        sch.kind = QP_SCHEME_UNQUANTIZED;
        t[nt++] = (qp_tensor){"weight", dt, 2, {N, K}, L->wact};
    } else {
        sch.kind = f->kind == BH_FW_MX ? QP_SCHEME_OCP_MX : f->kind == BH_FW_W4A8 ? QP_SCHEME_W4A8_MXFP4_FP8 : QP_SCHEME_NVFP4;
        sch.weight.dtype = we;
        sch.activation.dtype = ae;
        if (ae == QP_DTYPE_F8_E4M3FN) {
            sch.activation.granularity = QP_GRAN_GROUP;
            sch.activation.group_size = 32;
            sch.activation.dynamic = 1;
        }
        t[nt++] = (qp_tensor){"weight", we == QP_DTYPE_F8_E4M3FN ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8, 2, {N, wcols}, L->packed};
        t[nt++] = (qp_tensor){"weight_scale", f->kind == BH_FW_NVFP4 ? QP_DTYPE_F8_E4M3FN : QP_DTYPE_U8, 2, {N, nb}, L->bsc};
        if (f->kind == BH_FW_W4A8) t[nt++] = (qp_tensor){"input_scale", QP_DTYPE_F32, 0, {0}, &L->in_scale};
        if (f->kind == BH_FW_NVFP4) {
            t[nt++] = (qp_tensor){"weight_scale_2", QP_DTYPE_F32, 0, {0}, &L->w2};
            t[nt++] = (qp_tensor){"input_scale_2", QP_DTYPE_F32, 0, {0}, &L->fw.in_gscale};
        }
    }
    if (f->bias) t[nt++] = (qp_tensor){"bias", dt, 1, {N}, L->bias};
    L->nt = nt;
    qp_linear_options o;
    qp_linear_options_init(&o);
    o.act_dtype = dt;
    o.layer = L->layer;
    qp_status st = qp_lin_desc_build(NULL, &sch, N, K, L->t, nt, &o, &L->d, &L->store);
    CHECK(st == QP_OK, "%s: qp_lin_desc_build: %s", L->layer, qp_last_error(NULL));
    if (st != QP_OK) return false;
    /* W[n][k] as the reference dequantizes it: rnd(lut[code] * blk_scale) */
    const qp_lin_desc *d = &L->d;
    for (size_t i = 0; i < nk; i++) {
        int n = (int)(i / K), k = (int)(i % K);
        L->wd[i] = f->kind == BH_FW_UNQ
                       ? bh_dec(dt, L->wact[i])
                       : bh_dec(dt, bh_enc(dt, d->w_lut[d->w_codes[i]] * d->w_blk_scale[(size_t)n * nb + k / blk]));
    }
    return true;
}

void bh_layer_free(bh_layer *L) {
    void *p[] = {L->bias,  L->wd,   L->w_i8,   L->w_u8,    L->w_scale,    L->adj,     L->q4,
                 L->w8,    L->s_ch, L->s_ch_perm, L->s_grp, L->s_grp_perm, L->B,      L->W4,
                 L->Z4,    L->sc16, L->w4_zero, L->w4_scale, L->codes,   L->packed,   L->bsc, L->wact};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    if (L->store) qp_lin_desc_free(L->store);
    memset(L, 0, sizeof *L);
}

qp_status bh_layer_ref(const bh_layer *L, const uint16_t *x, int M, uint16_t *y) {
    const void *b = L->has_bias ? L->bias : NULL;
    int N = L->N, K = L->K;
    switch (L->d.kind) {
    case QP_SCHEME_W8A8_INT8: {
        qp_ref_int8_args a = {L->dt, x, M, K, N, L->w_i8, L->w_scale, L->per_channel, L->is_static, L->sym,
                              L->in_scale, L->in_zp, b};
        return qp_ref_w8a8_int8_forward(NULL, &a, y);
    }
    case QP_SCHEME_W8A8_FP8: {
        qp_ref_fp8_args a = {L->dt, x, M, K, N, L->w_u8, L->w_scale, L->per_channel, L->fp8_act, L->in_scale, 0, b};
        return qp_ref_w8a8_fp8_forward(NULL, &a, y);
    }
    case QP_SCHEME_W8A8_FP8_BLOCK: {
        qp_ref_fp8_args a = {L->dt, x, M, K, N, L->w_u8, L->w_scale, 1, QP_FP8_ACT_GROUP128, 0.0f, L->ue8m0, b};
        return qp_ref_w8a8_fp8_forward(NULL, &a, y);
    }
    case QP_SCHEME_QQQ_W4A8:
        return qp_ref_qqq_forward(NULL, x, M, K, N, L->group, L->B, L->s_ch_perm, L->group == 128 ? L->s_grp_perm : NULL,
                                  b, y);
    case QP_SCHEME_W4A16_INT4: {
        qp_ref_w4a16_args a = {L->dt, x, M, K, N, L->W4, L->sym ? NULL : L->Z4, L->sc16, L->group, L->sym, L->pack, b};
        return qp_ref_w4a16_forward(NULL, &a, y);
    }
    case QP_SCHEME_OCP_MX: {
        qp_ref_ocp_mx_args a = {L->dt, x, M, K, N, L->fw.w_elem, L->packed, L->bsc, 1, L->fw.act, b};
        return qp_ref_ocp_mx_forward(NULL, &a, y);
    }
    case QP_SCHEME_W4A8_MXFP4_FP8: {
        qp_ref_w4a8_mxfp4_args a = {L->dt, x, M, K, N, L->packed, L->bsc, L->in_scale, b};
        return qp_ref_w4a8_mxfp4_fp8_forward(NULL, &a, y);
    }
    case QP_SCHEME_NVFP4: {
        qp_ref_nvfp4_args a = {L->dt, x, M, K, N, L->packed, L->bsc, L->w2, L->fw.in_gscale, b, 0.0f};
        return qp_ref_nvfp4_forward(NULL, &a, y);
    }
    case QP_SCHEME_UNQUANTIZED: return qp_ref_unquantized_forward(NULL, L->dt, x, M, K, N, L->wact, b, y);
    default: return QP_ERR_UNSUPPORTED;
    }
}
