/*
 * vendor_gemm_time: cuBLASLt baselines for `qport bench`.
 * libcublasLt is loaded with dlopen at first use (never a link dependency,
 * so the plugin loads where it is absent); the few entry points are
 * declared here with the ABI of cublasLt.h (CUDA 11-13: opaque handles,
 * enums as int, cublasLtMatmulAlgo_t = 8 x uint64). Missing library or
 * symbol: QP_ERR_UNSUPPORTED with the reason.
 *
 * The GEMM: D[M][N] (row-major) = X[M][K] W[N][K]^T, i.e. in cuBLASLt's
 * column-major terms D (N x M) = op(A = W, T) (N x K) * B = X (K x M): the
 * "TN" layout int8 and fp8 require. int8: 32I compute and output; fp8
 * (e4m3, sm_89+) and fp16: 32F compute, fp16 output.
 */
#include "cuda_blaslt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int blas_st;
typedef void *lt_handle, *lt_desc, *lt_layout, *lt_pref;
typedef struct { uint64_t data[8]; } lt_algo;
typedef struct {
    lt_algo algo;
    size_t workspaceSize;
    blas_st state;
    float wavesCount;
    int reserved[4];
} lt_heur;

static struct {
    void *so;
    char why[200];
    blas_st (*create)(lt_handle *);
    blas_st (*destroy)(lt_handle);
    size_t (*version)(void);
    blas_st (*desc_create)(lt_desc *, int compute, int scale);
    blas_st (*desc_destroy)(lt_desc);
    blas_st (*desc_set)(lt_desc, int attr, const void *buf, size_t n);
    blas_st (*layout_create)(lt_layout *, int type, uint64_t rows, uint64_t cols, int64_t ld);
    blas_st (*layout_destroy)(lt_layout);
    blas_st (*pref_create)(lt_pref *);
    blas_st (*pref_destroy)(lt_pref);
    blas_st (*pref_set)(lt_pref, int attr, const void *buf, size_t n);
    blas_st (*heuristic)(lt_handle, lt_desc, lt_layout, lt_layout, lt_layout, lt_layout, lt_pref, int, lt_heur *, int *);
    blas_st (*matmul)(lt_handle, lt_desc, const void *, const void *, lt_layout, const void *, lt_layout, const void *,
                      const void *, lt_layout, void *, lt_layout, const lt_algo *, void *, size_t, cudaStream_t);
} L;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    static const char *names[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so",
                                   "/usr/local/cuda/lib64/libcublasLt.so.13", "/usr/local/cuda/lib64/libcublasLt.so.12",
                                   "/usr/local/cuda/lib64/libcublasLt.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !L.so; i++) L.so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!L.so) {
        const char *e = dlerror();
        snprintf(L.why, sizeof L.why, "cuBLASLt not found (dlopen libcublasLt.so.13/.12/.11: %s)", e ? e : "?");
        return;
    }
#define SYM(field, name)                                                                         \
    do {                                                                                         \
        *(void **)&L.field = dlsym(L.so, name);                                                  \
        if (!L.field) { snprintf(L.why, sizeof L.why, "cuBLASLt lacks %s", name); return; }     \
    } while (0)
    SYM(create, "cublasLtCreate");
    SYM(destroy, "cublasLtDestroy");
    SYM(version, "cublasLtGetVersion");
    SYM(desc_create, "cublasLtMatmulDescCreate");
    SYM(desc_destroy, "cublasLtMatmulDescDestroy");
    SYM(desc_set, "cublasLtMatmulDescSetAttribute");
    SYM(layout_create, "cublasLtMatrixLayoutCreate");
    SYM(layout_destroy, "cublasLtMatrixLayoutDestroy");
    SYM(pref_create, "cublasLtMatmulPreferenceCreate");
    SYM(pref_destroy, "cublasLtMatmulPreferenceDestroy");
    SYM(pref_set, "cublasLtMatmulPreferenceSetAttribute");
    SYM(heuristic, "cublasLtMatmulAlgoGetHeuristic");
    SYM(matmul, "cublasLtMatmul");
#undef SYM
}

int qp_cu_blaslt_available(char *why, size_t cap) {
    pthread_once(&once, load);
    if (L.why[0] || !L.so) {
        snprintf(why, cap, "%s", L.why[0] ? L.why : "cuBLASLt not loaded");
        return 0;
    }
    return 1;
}

/* cublasLt.h values */
enum { COMPUTE_32F = 68, COMPUTE_32I = 72 };
enum { R_32F = 0, R_16F = 2, R_8I = 3, R_32I = 10, R_8F_E4M3 = 28 };
enum { DESC_TRANSA = 3, DESC_TRANSB = 4, PREF_MAX_WS = 1, OP_N = 0, OP_T = 1 };

int qp_cu_blaslt_time(int in, int M, int N, int K, int reps, double *ms, void *X, void *W, void *D, void *ws,
                     size_t ws_bytes, cudaStream_t st, char *name, size_t cap, char *err, size_t ecap) {
    char why[200];
    if (!qp_cu_blaslt_available(why, sizeof why)) { snprintf(err, ecap, "%s", why); return 1; }
    const int ab = in == QP_CU_BLAS_I8 ? R_8I : in == QP_CU_BLAS_F8 ? R_8F_E4M3 : R_16F;
    const int cd = in == QP_CU_BLAS_I8 ? R_32I : R_16F;
    const int comp = in == QP_CU_BLAS_I8 ? COMPUTE_32I : COMPUTE_32F, scale = in == QP_CU_BLAS_I8 ? R_32I : R_32F;
    lt_handle h = NULL;
    lt_desc op = NULL;
    lt_layout la = NULL, lb = NULL, lc = NULL;
    lt_pref pref = NULL;
    lt_heur hr;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int ta = OP_T, tb = OP_N, got = 0;
    uint64_t wsb = ws_bytes;
    int32_t ia = 1, ib = 0;
    float fa = 1.0f, fb = 0.0f;
    const void *alpha = in == QP_CU_BLAS_I8 ? (const void *)&ia : (const void *)&fa;
    const void *beta = in == QP_CU_BLAS_I8 ? (const void *)&ib : (const void *)&fb;
    blas_st s = 0;
    const char *step = "cublasLtCreate";
    memset(&hr, 0, sizeof hr);
    if ((s = L.create(&h))) goto done;
    step = "cublasLtMatmulDescCreate";
    if ((s = L.desc_create(&op, comp, scale))) goto done;
    step = "cublasLtMatmulDescSetAttribute(TRANSA/B)";
    if ((s = L.desc_set(op, DESC_TRANSA, &ta, sizeof ta)) || (s = L.desc_set(op, DESC_TRANSB, &tb, sizeof tb))) goto done;
    step = "cublasLtMatrixLayoutCreate";
    if ((s = L.layout_create(&la, ab, (uint64_t)K, (uint64_t)N, K)) || (s = L.layout_create(&lb, ab, (uint64_t)K, (uint64_t)M, K)) ||
        (s = L.layout_create(&lc, cd, (uint64_t)N, (uint64_t)M, N)))
        goto done;
    step = "cublasLtMatmulPreference";
    if ((s = L.pref_create(&pref)) || (s = L.pref_set(pref, PREF_MAX_WS, &wsb, sizeof wsb))) goto done;
    step = "cublasLtMatmulAlgoGetHeuristic";
    if ((s = L.heuristic(h, op, la, lb, lc, lc, pref, 1, &hr, &got))) goto done;
    if (got < 1) { s = -1; goto done; }
    step = "cudaEventCreate";
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) { s = -2; goto done; }
    step = "cublasLtMatmul";
    /* A = W (K x N, transposed), B = X (K x M), D (N x M) column-major */
    if ((s = L.matmul(h, op, alpha, W, la, X, lb, beta, D, lc, D, lc, &hr.algo, ws, ws_bytes, st))) goto done; /* warm-up */
    for (int i = 0; i < reps; i++) {
        float t = 0;
        cudaEventRecord(e0, st);
        if ((s = L.matmul(h, op, alpha, W, la, X, lb, beta, D, lc, D, lc, &hr.algo, ws, ws_bytes, st))) goto done;
        cudaEventRecord(e1, st);
        if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&t, e0, e1) != cudaSuccess) {
            step = "cudaEventElapsedTime";
            s = -2;
            goto done;
        }
        ms[i] = t;
    }
    size_t v = L.version();
    snprintf(name, cap, "cuBLASLt %zu.%zu %s TN", v / 10000, (v / 100) % 100,
             in == QP_CU_BLAS_I8 ? "int8 (int32 out)" : in == QP_CU_BLAS_F8 ? "fp8 e4m3 (fp16 out)" : "fp16");
done:
    if (s)
        snprintf(err, ecap, "%s failed (%s %d)", step,
                 s == -1 ? "no algorithm for this shape/type:" : s == -2 ? "CUDA error" : "cublasStatus", s);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (pref) L.pref_destroy(pref);
    if (la) L.layout_destroy(la);
    if (lb) L.layout_destroy(lb);
    if (lc) L.layout_destroy(lc);
    if (op) L.desc_destroy(op);
    if (h) L.destroy(h);
    return s ? 1 : 0;
}
