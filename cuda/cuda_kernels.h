/*
 * Interface between the host code (cuda_backend.c, C) and the kernels
 * (cuda_kernels.cu). Plain C types only.
 */
#ifndef QPCU_KERNELS_H
#define QPCU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tile of the tensor-core kernel; K and N of every weight are padded to it. */
#define QPCU_BM 64
#define QPCU_BN 64
#define QPCU_BK 64
/* GEMV rows per launch (row chunks above). */
#define QPCU_GEMV_MAX_ROWS 16

typedef enum qpcu_wkind {
    QPCU_W_I8 = 0,  /* int8 [Np][Kp]                                        */
    QPCU_W_Q4CH,    /* QQQ per-channel: packed nibbles [Np][Kp/2], w8 = 16q */
    QPCU_W_Q4G,     /* QQQ group 128: packed codes + s_group [Kp/128][Np]   */
    QPCU_W_F8       /* e4m3fn codes [Np][Kp]                                 */
} qpcu_wkind;

typedef enum qpcu_act {
    QPCU_ACT_I8_STATIC_SYM = 0,
    QPCU_ACT_I8_STATIC_ASYM,
    QPCU_ACT_I8_DYN_SYM,
    QPCU_ACT_I8_DYN_ASYM,
    QPCU_ACT_F8_STATIC,
    QPCU_ACT_F8_DYN_TENSOR,
    QPCU_ACT_F8_DYN_TOKEN
} qpcu_act;

typedef enum qpcu_kpath {
    QPCU_KP_GEMV_DP4A = 0, /* gemv, __dp4a (int) / fp32 decode (fp8)        */
    QPCU_KP_GEMV_PLAIN,    /* gemv, plain int32 multiply-add                */
    QPCU_KP_TILED          /* tensor cores (mma.sync), split-K              */
} qpcu_kpath;

typedef struct qpcu_fwd {
    int M, N, K, Kp, Np, Mp;
    int wkind, qqq, act, kpath, bf16, splits; /* qqq: QQQ epilogue */
    int sm;                 /* compute capability of the device            */
    const void *x;          /* [M][K] fp16/bf16 bits                        */
    void *y;                /* [M][N]                                       */
    /* layer */
    const void *w;          /* see qpcu_wkind                               */
    const uint16_t *s_group;
    const float *w_scale;   /* [Np]: int8/fp8 weight scales, QQQ s_channel  */
    const int32_t *azp_adj; /* [Np] or NULL                                 */
    const uint16_t *bias;   /* [N] act dtype bits or NULL                   */
    float in_scale;
    int32_t in_zp;
    /* workspace */
    void *xq;               /* [Mp][Kp] int8 / e4m3 codes                   */
    float *xs;              /* [Mp] per-token scales ([0]: per tensor)      */
    int32_t *xzp;           /* [Mp]                                         */
    uint32_t *amax;         /* 1 word: dynamic per-tensor absmax bits       */
    void *partial;          /* [splits][Mp][Np] int32 / fp32                */
    void *stream;           /* cudaStream_t                                 */
} qpcu_fwd;

/* Launches activation quantization, the GEMM and the epilogue on
 * f->stream. Returns 0 or a cudaError_t; `what` names the failed step. */
int qpcu_forward(const qpcu_fwd *f, const char **what);

/* 0 when the kernels have an image for the current device, else the
 * cudaError_t of cudaFuncGetAttributes (cudaErrorNoKernelImageForDevice). */
int qpcu_kernel_probe(void);

#ifdef __cplusplus
}
#endif
#endif
