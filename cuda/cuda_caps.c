/* Capability logic of the CUDA backend (docs/semantics.md §19), pure functions. */
#include "cuda_caps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls fn(target) for each comma-separated target; stops when fn != 0. */
static int each_target(const char *list, int (*fn)(int t, void *u), void *u) {
    const char *p = list ? list : "";
    while (*p) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p) break;
        int r = fn((int)t, u);
        if (r) return r;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

typedef struct { int cc, best; } sass_q;

static int sass_fit(int t, void *u) {
    sass_q *q = u;
    if (t / 10 == q->cc / 10 && t <= q->cc && t > q->best) q->best = t;
    return 0;
}

static int ptx_fit(int t, void *u) { return t <= *(int *)u; }
static int min_of(int t, void *u) { int *m = u; if (*m < 0 || t < *m) *m = t; return 0; }

int qp_cu_arch_sass_target(int cc, const char *sass) {
    sass_q q = { cc, -1 };
    each_target(sass, sass_fit, &q);
    return q.best;
}

qp_cu_arch_fit qp_cu_arch_check(int cc, const char *sass, const char *ptx, char *why, size_t cap) {
    if (why && cap) why[0] = 0;
    if (qp_cu_arch_sass_target(cc, sass) >= 0) return QP_CU_ARCH_SASS;
    if (each_target(ptx, ptx_fit, &cc)) return QP_CU_ARCH_PTX;
    int lo = -1;
    each_target(sass, min_of, &lo);
    each_target(ptx, min_of, &lo);
    if (why && cap) {
        if (lo >= 0 && cc < lo)
            snprintf(why, cap, "unsupported: compute capability %d.%d is older than the oldest compiled target sm_%d",
                     cc / 10, cc % 10, lo);
        else
            snprintf(why, cap,
                     "unsupported: compute capability %d.%d is newer than every compiled target (sm %s) and the "
                     "plugin carries no PTX it can JIT (ptx: %s); rebuild libqport-cuda.so with a -gencode for it",
                     cc / 10, cc % 10, sass && *sass ? sass : "none", ptx && *ptx ? ptx : "none");
    }
    return QP_CU_ARCH_NONE;
}

int qp_cu_scheme_min_capability(qp_scheme_kind kind) {
    /* docs/semantics.md §19: QuarkConfig 70; per scheme below. */
    switch (kind) {
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_W8A8_FP8_BLOCK: return 89;
    case QP_SCHEME_W8A8_INT8: return 75;
    case QP_SCHEME_NVFP4: return 75;
    case QP_SCHEME_QQQ_W4A8: return 80;
    case QP_SCHEME_HF_FP8: return 80;
    case QP_SCHEME_W4A16_INT4:
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8: return 70;
    default: return 0;
    }
}

int qp_cu_cap_int_dot(int cc) { return cc >= 61; }
int qp_cu_cap_tensor_core_int8(int cc) { return cc >= 75; }
int qp_cu_cap_tensor_core_fp8(int cc) { return cc >= 89; }

static void set(qp_support_info *out, qp_support_level lvl, const char *fmt, int a, int b) {
    out->level = lvl;
    if (fmt) snprintf(out->reason, sizeof out->reason, fmt, a, b);
    else out->reason[0] = 0;
}

void qp_cu_scheme_support(const qp_scheme *s, int cc, const char *sass, const char *ptx, qp_support_info *out) {
    char why[256];
    if (qp_cu_arch_check(cc, sass, ptx, why, sizeof why) == QP_CU_ARCH_NONE) {
        out->level = QP_SUPPORT_UNSUPPORTED;
        snprintf(out->reason, sizeof out->reason, "%s", why);
        return;
    }
    int min = qp_cu_scheme_min_capability(s->kind);
    if (s->min_capability > min) min = s->min_capability;
    if (cc < min) {
        /* vLLM's RuntimeError text (api/scheme.c, docs/semantics.md §19) */
        set(out, QP_SUPPORT_UNSUPPORTED,
            "Quantization scheme is not supported for the current GPU. Min capability: %d. Current capability: %d.",
            min, cc);
        return;
    }
    switch (s->kind) {
    case QP_SCHEME_W8A8_INT8:
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    case QP_SCHEME_QQQ_W4A8:
        if (s->weight.group_size != -1 && s->weight.group_size != 128 && s->weight.group_size != 0) {
            set(out, QP_SUPPORT_UNSUPPORTED, "unsupported: QQQ group size %d (only -1 and 128)", s->weight.group_size, 0);
            return;
        }
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    case QP_SCHEME_W8A8_FP8_BLOCK: /* min 89 above: e4m3 tensor cores */
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    case QP_SCHEME_W8A8_FP8:
    case QP_SCHEME_HF_FP8:
        if (s->activation.dtype == QP_DTYPE_NONE) {
            set(out, QP_SUPPORT_UNSUPPORTED, "unsupported: not yet implemented on cuda (fp8 weight-only W8A16)", 0, 0);
            return;
        }
        if (cc < 89) {
            /* only reachable for HF fp8 on 80..88, where vLLM uses Marlin W8A16 */
            set(out, QP_SUPPORT_UNSUPPORTED,
                "unsupported: not yet implemented on cuda (vLLM runs fp8 on compute capability %d.%d through its "
                "Marlin W8A16 fallback; W8A8 e4m3 needs 8.9)", cc / 10, cc % 10);
            return;
        }
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    case QP_SCHEME_W4A16_INT4: {
        int g = s->weight.group_size;
        if (g != 0 && g != -1 && (g < 32 || g % 32)) {
            set(out, QP_SUPPORT_UNSUPPORTED,
                "unsupported: W4A16 group size %d on cuda (the kernels take -1 or multiples of 32)", g, 0);
            return;
        }
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    }
    case QP_SCHEME_UNQUANTIZED:
        set(out, QP_SUPPORT_NATIVE, NULL, 0, 0);
        return;
    case QP_SCHEME_OCP_MX:
    case QP_SCHEME_W4A8_MXFP4_FP8:
    case QP_SCHEME_NVFP4:
        /* vLLM runs these as emulations too (dequantize, fake-quantize the
         * activations, fp16/bf16 GEMM); so does this backend */
        set(out, QP_SUPPORT_EMULATED,
            "emulated: weights dequantized in registers and activations fake-quantized (qdq) on the device, then an "
            "fp16/bf16 GEMM with fp32 accumulation (tensor cores from compute capability %d.%d); no native MX / "
            "NVFP4 tensor-core instructions are used",
            cc >= 80 ? cc / 10 : 7, cc >= 80 ? cc % 10 : 5);
        return;
    default:
        set(out, QP_SUPPORT_UNSUPPORTED, "unsupported: not yet implemented on cuda", 0, 0);
        return;
    }
}

void qp_cu_pack_q4(const int8_t *q4, int N, int K, int Np, int Kp, uint32_t *out) {
    for (int n = 0; n < Np; n++)
        for (int k8 = 0; k8 < Kp; k8 += 8) {
            uint32_t word = 0;
            for (int j = 0; j < 4 && n < N; j++) {
                int ka = k8 + j, kb = k8 + 4 + j;
                uint32_t ca = ka < K ? (uint32_t)(q4[(size_t)n * K + ka] & 0xF) : 0;
                uint32_t cb = kb < K ? (uint32_t)(q4[(size_t)n * K + kb] & 0xF) : 0;
                word |= ((ca << 4) | cb) << (8 * j);
            }
            out[((size_t)n * Kp + k8) / 8] = word;
        }
}
