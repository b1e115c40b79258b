/* qport OpenCL kernels, part 2: activation quantization, one work-group of
 * QP_WG lanes per token row. Float operations mirror api/quant_int8.c and
 * api/quant_fp8.c one for one (docs/semantics.md §12, §13). */

/* int8 activations (W8A8-INT8 and QQQ): xq [M][K] int8, sx [M] scales,
 * szp [M] zero points (static: the given azp). */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_quant_i8(__global const ushort *x, int K, int bf16, int dynamic, int symmetric, float scale, int azp,
                 __global char *xq, __global float *sx, __global int *szp, int dm) {
    __local float red[QP_WG];
    int row = get_group_id(0), lid = get_local_id(0);
    __global const ushort *xr = x + (size_t)row * K;
    __global char *qr = xq + (size_t)row * K;
    /* The row reductions run in every mode, so that no barrier sits in a
     * branch (PoCL's work-group loops allocate for those). */
    float amax = 0.0f, mn = FLT_MAX, mx = -FLT_MAX; /* absmax starts at 0, fmax skips NaN */
    for (int k = lid; k < K; k += QP_WG) {
        float v = qp_act_load(xr, k, bf16);
        amax = fmax(amax, fabs(v));
        mn = fmin(mn, v);
        mx = fmax(mx, v);
    }
    amax = qp_wg_max(red, amax);
    mn = qp_wg_min(red, mn);
    mx = qp_wg_max(red, mx);
    float s;
    int zp = 0;
    if (!dynamic) {
        s = scale;
        if (symmetric) {
            /* static symmetric: true division x / s */
            for (int k = lid; k < K; k += QP_WG) qr[k] = (char)qp_rni_sat8(qp_div(qp_act_load(xr, k, bf16), scale, dm));
        } else {
            /* static asymmetric: multiply by the fp32 reciprocal (docs/semantics.md §12) */
            float inv = qp_div(1.0f, scale, dm);
            zp = azp;
            for (int k = lid; k < K; k += QP_WG)
                qr[k] = (char)qp_sat8(qp_add_wrap(qp_rni_sat32(qp_act_load(xr, k, bf16) * inv), azp));
        }
    } else if (symmetric) {
        s = qp_div(amax, 127.0f, dm);
        float inv = amax == 0.0f ? 0.0f : qp_div(127.0f, amax, dm);
        for (int k = lid; k < K; k += QP_WG) qr[k] = (char)qp_rni_sat8(qp_act_load(xr, k, bf16) * inv);
    } else {
        s = qp_div(mx - mn, 255.0f, dm);
        /* no guard for s == 0: a constant row gives q = -1 (docs/semantics.md §12) */
        zp = qp_rni_sat32(-128.0f - qp_div(mn, s, dm));
        float inv = qp_div(1.0f, s, dm);
        for (int k = lid; k < K; k += QP_WG)
            qr[k] = (char)qp_sat8(qp_add_wrap(qp_rni_sat32(qp_act_load(xr, k, bf16) * inv), zp));
    }
    if (lid == 0) {
        sx[row] = s;
        szp[row] = zp;
    }
}

/* Row absmax for the dynamic per-tensor fp8 scale (the max over rows is
 * taken by qp_quant_f8; max is exact, so the order does not matter). */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_rowmax(__global const ushort *x, int K, int bf16, __global float *rowmax) {
    __local float red[QP_WG];
    int row = get_group_id(0), lid = get_local_id(0);
    __global const ushort *xr = x + (size_t)row * K;
    float amax = 0.0f;
    for (int k = lid; k < K; k += QP_WG) amax = fmax(amax, fabs(qp_act_load(xr, k, bf16)));
    amax = qp_wg_max(red, amax);
    if (lid == 0) rowmax[row] = amax;
}

/* fp8 e4m3fn activations. mode 0 static (x * (1/s)), 1 dynamic per tensor
 * (absmax/448, no minimum, x * (1/s)), 2 dynamic per token (min scale
 * 1/(448*512), x / s). xf [M][K] receives the e4m3 VALUES (exact in fp32),
 * so the GEMM never decodes activations; sx [M] the scale of each row. */
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_quant_f8(__global const ushort *x, int K, int M, int bf16, int mode, float scale,
                 __global const float *rowmax, __global float *xf, __global float *sx, int dm) {
    __local float red[QP_WG];
    int row = get_group_id(0), lid = get_local_id(0);
    __global const ushort *xr = x + (size_t)row * K;
    __global float *fr = xf + (size_t)row * K;
    /* the row absmax in every mode: no barrier inside a branch */
    float ramax = 0.0f;
    for (int k = lid; k < K; k += QP_WG) ramax = fmax(ramax, fabs(qp_act_load(xr, k, bf16)));
    ramax = qp_wg_max(red, ramax);
    float s;
    if (mode == 0) {
        s = scale;
        float inv = qp_div(1.0f, scale, dm);
        for (int k = lid; k < K; k += QP_WG) fr[k] = qp_f8_decode(qp_fp8_conv(qp_act_load(xr, k, bf16) * inv));
    } else if (mode == 1) {
        float amax = 0.0f;
        for (int m = 0; m < M; m++) amax = fmax(amax, rowmax[m]);
        s = qp_div(amax, 448.0f, dm);
        float inv = qp_div(1.0f, s, dm);
        for (int k = lid; k < K; k += QP_WG) fr[k] = qp_f8_decode(qp_fp8_conv(qp_act_load(xr, k, bf16) * inv));
    } else {
        s = fmax(qp_div(ramax, 448.0f, dm), qp_div(1.0f, 448.0f * 512.0f, dm));
        for (int k = lid; k < K; k += QP_WG) fr[k] = qp_f8_decode(qp_fp8_conv(qp_div(qp_act_load(xr, k, bf16), s, dm)));
    }
    if (lid == 0) sx[row] = s;
}

/* 2^ceil(log2(s)) on the bit pattern (api/quant_fp8.c ue8m0) */
inline float qp_ue8m0(float s) {
    uint b = as_uint(fmax(fabs(s), 1e-10f));
    if (b & 0x7FFFFFu) b += 0x800000u;
    return as_float(b & 0xFF800000u);
}

/* fp8 per-token-group-128 activations (qp_quant_fp8_group, docs/semantics.md §13): one
 * work-group per (row, group), two values per lane. s = max(1e-10,
 * absmax)/448 (ue8m0: rounded up to a power of two, then x * (1/s)),
 * otherwise x / s. xf [M][K] receives the e4m3 values, sx [M][K/128]. */
#if QP_WG != 64
#error qp_quant_f8_group takes two values per lane of a 64-lane work-group
#endif
__kernel __attribute__((reqd_work_group_size(QP_WG, 1, 1)))
void qp_quant_f8_group(__global const ushort *x, int K, int bf16, int ue8m0, __global float *xf, __global float *sx,
                       int dm) {
    __local float red[QP_WG];
    int kb = K >> 7, gid = get_group_id(0), row = gid / kb, g = gid - row * kb, lid = get_local_id(0);
    size_t base = (size_t)row * K + (size_t)g * 128;
    float v0 = qp_act_load(x, base + lid, bf16), v1 = qp_act_load(x, base + QP_WG + lid, bf16);
    float a = fmax(fmax(0.0f, fabs(v0)), fabs(v1)); /* fmax skips NaN, as fmaxf does */
    a = fmax(1e-10f, qp_wg_max(red, a));
    float s = qp_div(a, 448.0f, dm);
    if (ue8m0) s = qp_ue8m0(s);
    float inv = qp_div(1.0f, s, dm);
    uint q0 = qp_fp8_conv(ue8m0 ? v0 * inv : qp_div(v0, s, dm));
    uint q1 = qp_fp8_conv(ue8m0 ? v1 * inv : qp_div(v1, s, dm));
    xf[base + lid] = qp_f8_decode(q0);
    xf[base + QP_WG + lid] = qp_f8_decode(q1);
    if (lid == 0) sx[(size_t)row * kb + g] = s;
}
