/* CUDA backend, host side: the capability rules against a table
 * of devices (docs/semantics.md §19), the arch/target check, the scalar math the kernels
 * share (cuda/cu_math.h) against api/format.c, the quantizers and the cpu
 * reference, and the QQQ repacking. Needs no GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/cu_math.h"
#include "../cuda/cuda_caps.h"
#include "qport.h"
#include "testutil.h"

#define SASS "75,80,86,89,90"
#define PTX "90"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() % 1000003) / 1000003.0f; }

static const char *VLLM_MSG = "Quantization scheme is not supported for the current GPU. Min capability: %d. Current capability: %d.";

static void test_caps(void) {
    struct { const char *name; int cc; } devs[] = {
        { "V100", 70 }, { "T4", 75 }, { "A100", 80 }, { "A10", 86 }, { "Orin", 87 },
        { "L4", 89 }, { "RTX 4090", 89 }, { "H100", 90 }, { "H200", 90 }, { "B200", 100 }, { "RTX 5090", 120 },
    };
    struct { qp_scheme_kind kind; int min; int impl; } sch[] = {
        { QP_SCHEME_W8A8_INT8, 75, 1 }, { QP_SCHEME_W8A8_FP8, 89, 1 }, { QP_SCHEME_QQQ_W4A8, 80, 1 },
        { QP_SCHEME_W4A16_INT4, 70, 1 }, { QP_SCHEME_OCP_MX, 70, 2 }, { QP_SCHEME_NVFP4, 75, 2 },
        { QP_SCHEME_W4A8_MXFP4_FP8, 70, 2 }, { QP_SCHEME_UNQUANTIZED, 0, 1 },
    };
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        for (size_t j = 0; j < sizeof sch / sizeof sch[0]; j++) {
            qp_scheme s;
            memset(&s, 0, sizeof s);
            s.kind = sch[j].kind;
            s.activation.dtype = QP_DTYPE_F8_E4M3FN;
            s.activation.granularity = QP_GRAN_TOKEN;
            s.weight.group_size = sch[j].kind == QP_SCHEME_QQQ_W4A8 ? 128 : 0;
            qp_support_info out;
            qp_cu_scheme_support(&s, devs[i].cc, SASS, PTX, &out);
            int cc = devs[i].cc;
            if (cc < 75) {
                CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strstr(out.reason, "older than the oldest compiled target sm_75"),
                      "%s %s: %s", devs[i].name, qp_scheme_kind_name(s.kind), out.reason);
            } else if (cc < sch[j].min) {
                char want[256];
                snprintf(want, sizeof want, VLLM_MSG, sch[j].min, cc);
                CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strcmp(out.reason, want) == 0, "%s %s: '%s' want '%s'",
                      devs[i].name, qp_scheme_kind_name(s.kind), out.reason, want);
            } else if (sch[j].impl == 2) { /* emulated, with the reason */
                CHECK(out.level == QP_SUPPORT_EMULATED && strstr(out.reason, "emulated: ") && strstr(out.reason, "qdq"),
                      "%s %s: level %d %s", devs[i].name, qp_scheme_kind_name(s.kind), (int)out.level, out.reason);
            } else if (!sch[j].impl) {
                CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strcmp(out.reason, "unsupported: not yet implemented on cuda") == 0,
                      "%s %s: %s", devs[i].name, qp_scheme_kind_name(s.kind), out.reason);
            } else {
                CHECK(out.level == QP_SUPPORT_NATIVE && out.reason[0] == 0, "%s %s: level %d %s", devs[i].name,
                      qp_scheme_kind_name(s.kind), (int)out.level, out.reason);
            }
        }
    /* the scheme's own minimum wins when larger */
    qp_scheme s;
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_W8A8_INT8;
    s.min_capability = 80;
    qp_support_info out;
    qp_cu_scheme_support(&s, 75, SASS, PTX, &out);
    char want[256];
    snprintf(want, sizeof want, VLLM_MSG, 80, 75);
    CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strcmp(out.reason, want) == 0, "min_capability 80 on T4: %s", out.reason);
    /* HF fp8 (min 80) on an A100: vLLM would use Marlin W8A16 */
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_HF_FP8;
    s.activation.dtype = QP_DTYPE_F8_E4M3FN;
    qp_cu_scheme_support(&s, 80, SASS, PTX, &out);
    CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strstr(out.reason, "Marlin W8A16") && strstr(out.reason, "8.0"), "hf fp8 on A100: %s", out.reason);
    qp_cu_scheme_support(&s, 89, SASS, PTX, &out);
    CHECK(out.level == QP_SUPPORT_NATIVE, "hf fp8 on L4: %s", out.reason);
    /* fp8 per-block: native from 8.9, vLLM's message below */
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_W8A8_FP8_BLOCK;
    qp_cu_scheme_support(&s, 90, SASS, PTX, &out);
    CHECK(out.level == QP_SUPPORT_NATIVE, "block on H100: %s", out.reason);
    qp_cu_scheme_support(&s, 86, SASS, PTX, &out);
    snprintf(want, sizeof want, VLLM_MSG, 89, 86);
    CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strcmp(out.reason, want) == 0, "block on A10: %s", out.reason);
    s.kind = QP_SCHEME_HF_FP8;
    s.activation.dtype = QP_DTYPE_F8_E4M3FN;
    s.weight.granularity = QP_GRAN_BLOCK;
    s.activation.granularity = QP_GRAN_GROUP;
    qp_cu_scheme_support(&s, 89, SASS, PTX, &out);
    CHECK(out.level == QP_SUPPORT_NATIVE, "hf fp8 block on L4: %s", out.reason);
    s.kind = QP_SCHEME_KV_CACHE;
    qp_cu_scheme_support(&s, 90, SASS, PTX, &out);
    CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strstr(out.reason, "not yet implemented on cuda"), "kv-cache kind: %s", out.reason);

    /* caps bits */
    CHECK(qp_cu_cap_tensor_core_int8(75) && !qp_cu_cap_tensor_core_int8(70), "tc int8");
    CHECK(qp_cu_cap_tensor_core_fp8(89) && !qp_cu_cap_tensor_core_fp8(86), "tc fp8");
    CHECK(qp_cu_cap_int_dot(61) && !qp_cu_cap_int_dot(60), "dp4a");

    /* arch fit */
    char why[256];
    CHECK(qp_cu_arch_check(75, SASS, PTX, why, sizeof why) == QP_CU_ARCH_SASS, "T4 sass");
    CHECK(qp_cu_arch_sass_target(87, SASS) == 86, "Orin runs sm_86: %d", qp_cu_arch_sass_target(87, SASS));
    CHECK(qp_cu_arch_sass_target(89, SASS) == 89 && qp_cu_arch_sass_target(90, SASS) == 90, "exact targets");
    CHECK(qp_cu_arch_check(100, SASS, PTX, why, sizeof why) == QP_CU_ARCH_PTX, "B200 via PTX");
    CHECK(qp_cu_arch_check(120, SASS, PTX, why, sizeof why) == QP_CU_ARCH_PTX, "sm_120 via PTX");
    CHECK(qp_cu_arch_check(100, SASS, "", why, sizeof why) == QP_CU_ARCH_NONE &&
          strstr(why, "newer than every compiled target") && strstr(why, "no PTX"), "no PTX: %s", why);
    CHECK(qp_cu_arch_check(70, SASS, PTX, why, sizeof why) == QP_CU_ARCH_NONE && strstr(why, "older"), "V100: %s", why);
    CHECK(qp_cu_arch_check(86, "75,80", "", why, sizeof why) == QP_CU_ARCH_SASS, "A10 runs sm_80 SASS");
    memset(&s, 0, sizeof s);
    s.kind = QP_SCHEME_W8A8_INT8;
    qp_cu_scheme_support(&s, 100, SASS, "", &out);
    CHECK(out.level == QP_SUPPORT_UNSUPPORTED && strstr(out.reason, "newer than every compiled target"), "B200 no PTX: %s", out.reason);
}

static int same_f(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

static void test_formats(void) {
    /* fp16/bf16 decode: all codes */
    for (uint32_t c = 0; c < 65536; c++) {
        CHECK(same_f(qp_cu_f16_to_f32((uint16_t)c), qp_format_decode(QP_DTYPE_F16, c)), "f16 decode %04x", c);
        CHECK(same_f(qp_cu_bf16_to_f32((uint16_t)c), qp_format_decode(QP_DTYPE_BF16, c)), "bf16 decode %04x", c);
        if (tu_failures > 20) return;
    }
    for (uint32_t c = 0; c < 256; c++)
        CHECK(same_f(qp_cu_e4m3_decode((uint8_t)c), qp_format_decode(QP_DTYPE_F8_E4M3FN, c)), "e4m3 decode %02x", c);
    /* encoders: a stride over all 2^32 patterns plus every fp16/e4m3 midpoint */
    int bad = 0;
    for (uint64_t u = 0; u < (1ull << 32) && bad < 10; u += 4093) {
        float x = qp_cu_u2f((uint32_t)u);
        uint16_t a = qp_cu_f32_to_f16(x), b = (uint16_t)qp_format_encode(QP_DTYPE_F16, x);
        uint16_t c = qp_cu_f32_to_bf16(x), d = (uint16_t)qp_format_encode(QP_DTYPE_BF16, x);
        uint8_t e = qp_cu_e4m3_encode(x), f = (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, x);
        if (a != b || c != d || e != f) {
            bad++;
            CHECK(0, "encode %08x: f16 %04x/%04x bf16 %04x/%04x e4m3 %02x/%02x", (uint32_t)u, a, b, c, d, e, f);
        }
    }
    for (uint32_t c = 0; c < 65535 && bad < 10; c++) { /* fp16 midpoints and neighbours */
        float lo = qp_format_decode(QP_DTYPE_F16, c), hi = qp_format_decode(QP_DTYPE_F16, c + 1);
        if (!isfinite(lo) || !isfinite(hi) || (c & 0x7FFF) == 0x7BFF) continue;
        double mid = ((double)lo + (double)hi) / 2;
        float xs[3] = { (float)mid, nextafterf((float)mid, -INFINITY), nextafterf((float)mid, INFINITY) };
        for (int i = 0; i < 3; i++)
            if (qp_cu_f32_to_f16(xs[i]) != (uint16_t)qp_format_encode(QP_DTYPE_F16, xs[i])) {
                bad++;
                CHECK(0, "f16 near midpoint of %04x: %a", c, xs[i]);
            }
        /* the double path of the QQQ bias add: exact midpoints too */
        if (qp_cu_f64_to_f16(mid) != (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)mid) && (float)mid == mid) {
            bad++;
            CHECK(0, "f64->f16 midpoint of %04x", c);
        }
    }
    for (uint32_t c = 0; c < 255; c++) { /* e4m3 midpoints */
        float lo = qp_format_decode(QP_DTYPE_F8_E4M3FN, c), hi = qp_format_decode(QP_DTYPE_F8_E4M3FN, c + 1);
        if (isnan(lo) || isnan(hi) || c == 0x7F) continue;
        float mid = (lo + hi) / 2;
        float xs[3] = { mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY) };
        for (int i = 0; i < 3; i++)
            CHECK(qp_cu_e4m3_encode(xs[i]) == (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, xs[i]), "e4m3 mid %02x %a",
                  c, xs[i]);
    }
    float specials[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 448.0f, 464.0f, 465.0f, -464.0f, 1e-10f,
                         0x1p-10f, 0x1.000002p-10f, 65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        float x = specials[i];
        CHECK(qp_cu_f32_to_f16(x) == (uint16_t)qp_format_encode(QP_DTYPE_F16, x), "f16 special %a", x);
        CHECK(qp_cu_f32_to_bf16(x) == (uint16_t)qp_format_encode(QP_DTYPE_BF16, x), "bf16 special %a", x);
        CHECK(qp_cu_e4m3_encode(x) == (uint8_t)qp_format_encode(QP_DTYPE_F8_E4M3FN, x), "e4m3 special %a", x);
    }
    /* QQQ group reconstruction: every code and every finite fp16 scale */
    bad = 0;
    for (uint32_t sb = 0; sb < 65536 && bad < 10; sb++) {
        if (((sb >> 10) & 0x1F) == 0x1F) continue;
        for (int c = 0; c < 16; c++)
            if (qp_cu_qqq_group_w8(c, (uint16_t)sb) != qp_ref_qqq_group_weight(c - 8, (uint16_t)sb)) {
                bad++;
                CHECK(0, "qqq group weight c=%d s=%04x: %d vs %d", c, sb, qp_cu_qqq_group_w8(c, (uint16_t)sb),
                      qp_ref_qqq_group_weight(c - 8, (uint16_t)sb));
            }
    }
}

/* The k_quant kernel's per-row sequence, with the same cu_math helpers. */
static void quant_row(const float *x, int K, int act, float in_scale, int32_t in_zp, float amax_tensor, uint8_t *q,
                      float *s_out, int32_t *zp_out) {
    float inv = 0, s = 0, a = 0;
    int32_t zp = 0;
    switch (act) {
    case 0: break;                                   /* static sym */
    case 1: case 4: inv = 1.0f / in_scale; break;    /* static asym, fp8 static */
    case 2:
        for (int k = 0; k < K; k++) a = fmaxf(a, fabsf(x[k]));
        s = a / 127.0f;
        inv = a == 0.0f ? 0.0f : 127.0f / a;
        break;
    case 3: {
        float mn = 3.402823466e38f, mx = -3.402823466e38f;
        for (int k = 0; k < K; k++) { mn = fminf(mn, x[k]); mx = fmaxf(mx, x[k]); }
        s = (mx - mn) / 255.0f;
        zp = qp_rni_sat32(-128.0f - mn / s);
        inv = 1.0f / s;
        break;
    }
    case 5: s = amax_tensor / 448.0f; inv = 1.0f / s; break;
    case 6:
        for (int k = 0; k < K; k++) a = fmaxf(a, fabsf(x[k]));
        s = fmaxf(a / 448.0f, 1.0f / (448.0f * 512.0f));
        break;
    }
    for (int k = 0; k < K; k++) {
        float v = x[k];
        switch (act) {
        case 0: q[k] = (uint8_t)qp_rni_sat8(v / in_scale); break;
        case 1: q[k] = (uint8_t)qp_sat8(qp_add_wrap(qp_rni_sat32(v * inv), in_zp)); break;
        case 2: q[k] = (uint8_t)qp_rni_sat8(v * inv); break;
        case 3: q[k] = (uint8_t)qp_sat8(qp_add_wrap(qp_rni_sat32(v * inv), zp)); break;
        case 4: case 5: q[k] = qp_cu_fp8_conv(v * inv); break;
        case 6: q[k] = qp_cu_fp8_conv(v / s); break;
        }
    }
    *s_out = s;
    *zp_out = zp;
}

static void fill_row(float *x, int K, int kind) {
    for (int k = 0; k < K; k++) {
        switch (kind) {
        case 0: x[k] = frand(-3, 3); break;
        case 1: x[k] = 0.0f; break;
        case 2: x[k] = 1.5f; break;                            /* constant row (docs/semantics.md §12) */
        case 3: x[k] = k == 3 ? NAN : frand(-1, 1); break;
        case 4: x[k] = frand(-1e-6f, 1e-6f); break;
        case 5: x[k] = frand(-60000, 60000); break;
        default: x[k] = k % 7 == 0 ? -frand(0, 5) : frand(-0.01f, 0.01f); break;
        }
        x[k] = qp_fp16_round(x[k]);
    }
}

static void test_quant(void) {
    enum { K = 333 };
    float x[K], s_ref = 0, s_me = 0;
    int8_t qr[K];
    uint8_t qm[K], qf[K];
    int32_t zr = 0, zm = 0;
    for (int kind = 0; kind < 7; kind++)
        for (int rep = 0; rep < 20; rep++) {
            fill_row(x, K, kind);
            float scale = frand(0.001f, 0.1f);
            int32_t azp = (int32_t)(rnd() % 200) - 100;
            for (int act = 0; act < 4; act++) {
                qp_status st;
                if (act < 2) st = qp_quant_int8_static(NULL, x, 1, K, scale, azp, act == 0, qr);
                else st = qp_quant_int8_dynamic(NULL, x, 1, K, act == 2, qr, &s_ref, &zr);
                CHECK(st == QP_OK, "quant");
                quant_row(x, K, act, scale, azp, 0, qm, &s_me, &zm);
                CHECK(memcmp(qr, qm, K) == 0, "int8 act %d kind %d differs", act, kind);
                if (act >= 2) CHECK(same_f(s_ref, s_me), "int8 scale act %d kind %d", act, kind);
                if (act == 3) CHECK(zr == zm, "azp kind %d: %d vs %d", kind, zr, zm);
            }
            CHECK(qp_quant_fp8_static(NULL, x, K, scale, qf) == QP_OK, "fp8 static");
            quant_row(x, K, 4, scale, 0, 0, qm, &s_me, &zm);
            CHECK(memcmp(qf, qm, K) == 0, "fp8 static kind %d", kind);
            CHECK(qp_quant_fp8_dynamic_tensor(NULL, x, K, qf, &s_ref) == QP_OK, "fp8 tensor");
            float a = 0;
            for (int k = 0; k < K; k++) a = fmaxf(a, fabsf(x[k]));
            quant_row(x, K, 5, 0, 0, a, qm, &s_me, &zm);
            CHECK(memcmp(qf, qm, K) == 0 && same_f(s_ref, s_me), "fp8 dynamic tensor kind %d", kind);
            CHECK(qp_quant_fp8_dynamic_token(NULL, x, 1, K, 0.0f, qf, &s_ref) == QP_OK, "fp8 token");
            quant_row(x, K, 6, 0, 0, 0, qm, &s_me, &zm);
            CHECK(memcmp(qf, qm, K) == 0 && same_f(s_ref, s_me), "fp8 dynamic token kind %d", kind);
        }
}

/* Host emulation of the whole int8 / QQQ forward with the kernels' helpers
 * (quantize, int32 sum, epilogue) and the backend's QQQ packing, against
 * the cpu reference. */
static void test_forward_emulated(void) {
    const int M = 5, K = 256, N = 64;
    uint16_t *x = malloc(sizeof(uint16_t) * M * K), *yr = malloc(2 * M * N), *ym = malloc(2 * M * N), bias[64];
    int8_t *w = malloc((size_t)N * K);
    float ws[64], xf[256], sx;
    uint8_t xq[256];
    int32_t zp;
    for (int i = 0; i < M * K; i++) x[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand(-2, 2));
    for (int i = 0; i < N * K; i++) w[i] = (int8_t)(rnd() % 255 - 127);
    for (int n = 0; n < N; n++) { ws[n] = frand(0.001f, 0.01f); bias[n] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand(-1, 1)); }
    for (int act = 0; act < 4; act++)
        for (int hb = 0; hb < 2; hb++) {
            int is_static = act < 2, sym = act == 0 || act == 2;
            float in_scale = 0.02f;
            int32_t in_zp = 7;
            qp_ref_int8_args a = { QP_DTYPE_F16, x, M, K, N, w, ws, 1, is_static, sym, in_scale, in_zp, hb ? bias : NULL };
            CHECK(qp_ref_w8a8_int8_forward(NULL, &a, yr) == QP_OK, "ref int8");
            int32_t adj[64];
            for (int n = 0; n < N; n++) {
                int32_t s = 0;
                for (int k = 0; k < K; k++) s += w[n * K + k];
                adj[n] = is_static ? (int32_t)((uint32_t)s * (uint32_t)in_zp) : s;
            }
            for (int m = 0; m < M; m++) {
                for (int k = 0; k < K; k++) xf[k] = qp_cu_f16_to_f32(x[m * K + k]);
                quant_row(xf, K, act, in_scale, in_zp, 0, xq, &sx, &zp);
                for (int n = 0; n < N; n++) {
                    int32_t acc = 0;
                    for (int k = 0; k < K; k++) acc += (int8_t)xq[k] * w[n * K + k];
                    if (!sym) acc = qp_cu_azp_correct(acc, is_static, zp, adj[n]);
                    ym[m * N + n] = qp_cu_epi_int8(acc, is_static ? in_scale : sx, ws[n], !sym || hb,
                                                  hb ? qp_cu_f16_to_f32(bias[n]) : 0.0f, 0);
                }
            }
            CHECK(memcmp(yr, ym, 2 * M * N) == 0, "emulated int8 act %d bias %d", act, hb);
        }
    /* QQQ: both group sizes, through the packed layout and the expansion */
    for (int gi = 0; gi < 2; gi++) {
        int gs = gi ? 128 : -1, G = K / 128;
        int8_t *qkn = malloc((size_t)K * N), *qnk = malloc((size_t)K * N);
        float sch[64], schp[64];
        uint16_t sg[2 * 64], sgp[2 * 64];
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                int8_t q = gi ? (int8_t)(rnd() % 16) : (int8_t)(rnd() % 15 - 7);
                qkn[k * N + n] = q;
                qnk[n * K + k] = q;
            }
        for (int n = 0; n < N; n++) sch[n] = frand(1e-4f, 1e-3f);
        for (int i = 0; i < G * N; i++) sg[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, frand(1, 24)); /* some wrap */
        int32_t *B = malloc(sizeof(int32_t) * (size_t)(K / 16) * 2 * N);
        CHECK(qp_qqq_pack_weight(NULL, qkn, K, N, gs, B) == QP_OK, "pack");
        CHECK(qp_qqq_permute_scales(NULL, sch, gi ? sg : NULL, K, N, gs, schp, gi ? sgp : NULL) == QP_OK, "perm");
        for (int hb = 0; hb < 2; hb++) {
            CHECK(qp_ref_qqq_forward(NULL, x, M, K, N, gs, B, schp, gi ? sgp : NULL, hb ? bias : NULL, yr) == QP_OK, "ref qqq");
            uint32_t *pk = malloc((size_t)N * K / 2);
            qp_cu_pack_q4(qnk, N, K, N, K, pk);
            for (int m = 0; m < M; m++) {
                for (int k = 0; k < K; k++) xf[k] = qp_cu_f16_to_f32(x[m * K + k]);
                quant_row(xf, K, 2, 0, 0, 0, xq, &sx, &zp);
                for (int n = 0; n < N; n++) {
                    int32_t acc = 0;
                    for (int k8 = 0; k8 < K; k8 += 8) {
                        uint32_t lo, hi, wd = pk[(n * K + k8) / 8];
                        if (gi) qp_cu_expand_g_host(wd, sg[(k8 / 128) * N + n], &lo, &hi);
                        else qp_cu_expand_ch(wd, &lo, &hi);
                        for (int j = 0; j < 4; j++) {
                            acc += (int8_t)xq[k8 + j] * (int8_t)(lo >> (8 * j));
                            acc += (int8_t)xq[k8 + 4 + j] * (int8_t)(hi >> (8 * j));
                        }
                    }
                    ym[m * N + n] = qp_cu_epi_qqq(acc, sch[n], sx, hb, bias[n]);
                }
            }
            CHECK(memcmp(yr, ym, 2 * M * N) == 0, "emulated qqq group %d bias %d", gs, hb);
            free(pk);
        }
        free(qkn); free(qnk); free(B);
    }
    free(x); free(yr); free(ym); free(w);
}


/* ---- the tensor-core tile maps against the PTX ISA fragment tables ------ */
/* Written from the ISA's formulas (groupID g = lane>>2, t = lane%4),
 * independently of cu_math.h's maps:
 *  mma.m16n8k32 (8-bit): A element i (0..15), register i/4 byte i%4:
 *    row = g + 8 for 4<=i<8 or 12<=i<16, else g; col = 4t + (i&3) + 16 (i>=8)
 *  B element i (0..7): k = 4t + (i&3) + 16 (i>=4), n = g
 *  C element i (0..3): row = g + 8 (i>=2), col = 2t + (i&1)
 *  mma.m8n8k16 (8-bit): A: row g, col 4t+i; B: k 4t+i, n g; C: row g, col 2t+i
 *  ldmatrix.x4: lanes 8j..8j+7 address the rows of matrix j; lane l gets
 *    the 32-bit word l%4 of row l/4 of matrix j in register j. */
static void emu_ldsm_x4(const uint8_t *sm, const int addr[32], uint32_t regs[32][4]) {
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++) {
            const uint8_t *p = sm + addr[8 * j + l / 4] + 4 * (l % 4);
            regs[l][j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        }
}

static int8_t byte_of(uint32_t r, int b) { return (int8_t)(r >> (8 * b)); }

static void emu_mma16832(int32_t c[32][4], uint32_t a[32][4], uint32_t b[32][2]) {
    int A[16][32], B[32][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 16; i++) {
            int row = ((i >= 4 && i < 8) || i >= 12) ? g + 8 : g, col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
            A[row][col] = byte_of(a[l][i / 4], i % 4);
        }
        for (int i = 0; i < 8; i++) B[4 * t + (i & 3) + (i >= 4 ? 16 : 0)][g] = byte_of(b[l][i / 4], i % 4);
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) {
            int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
            for (int k = 0; k < 32; k++) c[l][i] += A[row][k] * B[k][col];
        }
    }
}

static void emu_mma8816(int32_t c[32][4], int c0, uint32_t a[32][4], int ai, uint32_t b[32][2], int bi) {
    int A[8][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 4; i++) { A[g][4 * t + i] = byte_of(a[l][ai], i); B[4 * t + i][g] = byte_of(b[l][bi], i); }
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l & 3;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 16; k++) c[l][c0 + i] += A[g][k] * B[k][2 * t + i];
    }
}

static void test_tile_maps(void) {
    static uint8_t sA[64 * QP_CU_SROW], sB[64 * QP_CU_SROW];
    static int cover[64][64];
    memset(cover, 0, sizeof cover);
    for (int c = 0; c < 256; c++)
        for (int b = 0; b < 16; b++) cover[qp_cu_tc_chunk_row(c)][qp_cu_tc_chunk_col(c) + b]++;
    for (int r = 0; r < 64; r++)
        for (int k = 0; k < 64; k++) CHECK(cover[r][k] == 1, "loader covers [%d][%d] %d times", r, k, cover[r][k]);
    for (int variant = 0; variant < 2; variant++) {
        for (size_t i = 0; i < sizeof sA; i++) { sA[i] = (uint8_t)rnd(); sB[i] = (uint8_t)rnd(); }
        int32_t out[64][64];
        memset(cover, 0, sizeof cover);
        for (int wm = 0; wm < 2; wm++)
            for (int wn = 0; wn < 2; wn++) {
                static int32_t acc[2][4][32][4];
                memset(acc, 0, sizeof acc);
                for (int kk = 0; kk < 64; kk += 32) {
                    uint32_t af[2][32][4], bf[4][32][2];
                    int addr[32];
                    for (int mi = 0; mi < 2; mi++) {
                        for (int l = 0; l < 32; l++) addr[l] = qp_cu_tc_a_addr(l, wm, mi, kk);
                        emu_ldsm_x4(sA, addr, af[mi]);
                    }
                    for (int np = 0; np < 2; np++) {
                        uint32_t r[32][4];
                        for (int l = 0; l < 32; l++) addr[l] = qp_cu_tc_b_addr(l, wn, np, kk);
                        emu_ldsm_x4(sB, addr, r);
                        for (int l = 0; l < 32; l++) {
                            bf[np * 2][l][0] = r[l][0]; bf[np * 2][l][1] = r[l][1];
                            bf[np * 2 + 1][l][0] = r[l][2]; bf[np * 2 + 1][l][1] = r[l][3];
                        }
                    }
                    for (int mi = 0; mi < 2; mi++)
                        for (int ni = 0; ni < 4; ni++) {
                            if (variant == 0) {
                                emu_mma16832(acc[mi][ni], af[mi], bf[ni]);
                            } else { /* the sm_75 decomposition of cuda_kernels.cu mma_s8 */
                                emu_mma8816(acc[mi][ni], 0, af[mi], 0, bf[ni], 0);
                                emu_mma8816(acc[mi][ni], 0, af[mi], 2, bf[ni], 1);
                                emu_mma8816(acc[mi][ni], 2, af[mi], 1, bf[ni], 0);
                                emu_mma8816(acc[mi][ni], 2, af[mi], 3, bf[ni], 1);
                            }
                        }
                }
                for (int mi = 0; mi < 2; mi++)
                    for (int ni = 0; ni < 4; ni++)
                        for (int l = 0; l < 32; l++)
                            for (int e = 0; e < 4; e++) {
                                int r = qp_cu_tc_c_row(l, wm, mi, e), c = qp_cu_tc_c_col(l, wn, ni, e);
                                out[r][c] = acc[mi][ni][l][e];
                                cover[r][c]++;
                            }
            }
        int bad = 0;
        for (int r = 0; r < 64; r++)
            for (int c = 0; c < 64; c++) {
                int32_t want = 0;
                for (int k = 0; k < 64; k++) want += (int8_t)sA[r * QP_CU_SROW + k] * (int8_t)sB[c * QP_CU_SROW + k];
                if ((cover[r][c] != 1 || out[r][c] != want) && bad++ < 5)
                    CHECK(0, "%s tile: C[%d][%d] = %d (written %d times), want %d", variant ? "m8n8k16" : "m16n8k32", r, c,
                          out[r][c], cover[r][c], want);
            }
    }
}

int main(void) {
    test_caps();
    test_formats();
    test_quant();
    test_forward_emulated();
    test_tile_maps();
    return tu_finish("cuda-caps");
}
