/* cuBLASLt through dlopen (cuda_blaslt.c): vendor_gemm_time's baselines. */
#ifndef QP_CU_BLASLT_H
#define QP_CU_BLASLT_H
#include <stddef.h>

#include <cuda_runtime_api.h>

enum { QP_CU_BLAS_I8 = 0, QP_CU_BLAS_F8, QP_CU_BLAS_F16 };

/* 1 when libcublasLt could be loaded with every symbol, else 0 and why. */
int qp_cu_blaslt_available(char *why, size_t cap);
/* Times `reps` GEMMs D[M][N] = A=X[M][K] . W[N][K]^T on device buffers
 * (B = W [N][K], A = X [M][K], D [M][N]: int32 for int8, else fp16) after
 * one warm-up; 0 or 1 with the failing step in err. */
int qp_cu_blaslt_time(int in, int M, int N, int K, int reps, double *ms, void *X, void *W, void *D, void *ws,
                     size_t ws_bytes, cudaStream_t st, char *name, size_t cap, char *err, size_t ecap);
#endif
