/*
 * Interface between the host code (cuda_backend.c, C) and the kernels
 * (cuda_kernels.cu). Plain C types only.
 */
#ifndef QP_CU_KERNELS_H
#define QP_CU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tile of the tensor-core kernel; K and N of every weight are padded to it. */
#define QP_CU_BM 64
#define QP_CU_BN 64
#define QP_CU_BK 64
/* GEMV rows per launch (row chunks above). */
#define QP_CU_GEMV_MAX_ROWS 16

typedef enum qp_cu_wkind {
    QP_CU_W_I8 = 0,  /* int8 [Np][Kp]                                        */
    QP_CU_W_Q4CH,    /* QQQ per-channel: packed nibbles [Np][Kp/2], w8 = 16q */
    QP_CU_W_Q4G,     /* QQQ group 128: packed codes + s_group [Kp/128][Np]   */
    QP_CU_W_F8,      /* e4m3fn codes [Np][Kp]                                 */
    QP_CU_W_F8B,     /* W8A8-FP8 per-block: e4m3fn codes [Np][Kp], fp32 block
                     * scales [ceil(N/128)][K/128]; activations per token-
                     * group of 128 (xs [Mp][K/128]); the GEMM folds
                     * sx * sw into the accumulators once per group       */
    /* float kinds: x' in act dtype [Mp][Kp] (the qdq kernel's
     * output), fp32 accumulation, fp16/bf16 mma.sync on the tiled path */
    QP_CU_W_Q4F,     /* W4A16: packed codes [Np][Kp/8] words (nibble j = k+j),
                     * v = c - zero[g][n] (int4 stored as c ^ 8, zero 8),
                     * fp32 scale[g][n]; g = group (Kp when per-channel)   */
    QP_CU_W_H,       /* unquantized: act-dtype bits [Np][Kp]                  */
    QP_CU_W_LUT,     /* MX / NVFP4: codes [Np][Kp] bytes, W = rnd(lut[c] *
                     * blk_scale[n][k / blk]) (exact dequant of the core)   */
    QP_CU_W_LUT4     /* the same with fp4 codes two per byte [Np][Kp/2]
                     * (element k in the low nibble when k is even)        */
} qp_cu_wkind;

#define QP_CU_IS_FLOAT_KIND(w) ((w) >= QP_CU_W_Q4F)
/* k-tile of the fp16/bf16 tensor-core kernel (elements; 64 bytes a row) */
#define QP_CU_BKH 32

typedef enum qp_cu_act {
    QP_CU_ACT_I8_STATIC_SYM = 0,
    QP_CU_ACT_I8_STATIC_ASYM,
    QP_CU_ACT_I8_DYN_SYM,
    QP_CU_ACT_I8_DYN_ASYM,
    QP_CU_ACT_F8_STATIC,
    QP_CU_ACT_F8_DYN_TENSOR,
    QP_CU_ACT_F8_DYN_TOKEN,
    QP_CU_ACT_F8_GROUP128,  /* per token-group of 128 (opt. UE8M0 scales)   */
    /* float kinds: the activation prep kernel k_act16 writes x' */
    QP_CU_ACT_NONE,       /* x' = x                                         */
    QP_CU_ACT_MX_QDQ,     /* OCP-MX qdq, blocks of 32 (qp_quant_mx + dequant) */
    QP_CU_ACT_F8S_QDQ,    /* W4A8-MXFP4-FP8 static fp8 qdq                   */
    QP_CU_ACT_NVFP4_QDQ   /* NVFP4 qdq, blocks of 16                         */
} qp_cu_act;

typedef enum qp_cu_kpath {
    QP_CU_KP_GEMV_DP4A = 0, /* gemv, __dp4a (int) / fp32 decode (fp8)        */
    QP_CU_KP_GEMV_PLAIN,    /* gemv, plain int32 multiply-add                */
    QP_CU_KP_TILED          /* tensor cores (mma.sync), split-K              */
} qp_cu_kpath;

typedef struct qp_cu_fwd {
    int M, N, K, Kp, Np, Mp;
    int wkind, qqq, act, kpath, bf16, splits; /* qqq: QQQ epilogue */
    int sm;                 /* compute capability of the device            */
    const void *x;          /* [M][K] fp16/bf16 bits                        */
    void *y;                /* [M][N]                                       */
    /* layer */
    const void *w;          /* see qp_cu_wkind                               */
    const uint16_t *s_group;
    const float *w_scale;   /* [Np]: int8/fp8 weight scales, QQQ s_channel  */
    const int32_t *azp_adj; /* [Np] or NULL                                 */
    const uint16_t *bias;   /* [N] act dtype bits or NULL                   */
    float in_scale;
    int32_t in_zp;
    /* float kinds */
    const uint8_t *w_zero;  /* Q4F: [Gp][Np]                                */
    const float *lut;       /* LUT: [256] on the device                     */
    int group;              /* Q4F: group length along k (Kp: per-channel)  */
    int blk;                /* LUT: 16 or 32                                */
    int act_mbits, act_emax, act_e4m3; /* MX qdq element format             */
    float act_maxv;         /* its largest finite value                     */
    int act_emin;           /* exponent of its smallest normal              */
    float nv_g;             /* NVFP4: g = 1 / input_global_scale            */
    int bias_after_round;
    int ue8m0;              /* F8_GROUP128: power-of-two scales             */
    /* workspace */
    void *xq;               /* [Mp][Kp] int8 / e4m3 codes; float kinds: x'
                             * [Mp][Kp] act-dtype bits                      */
    float *xs;              /* [Mp] per-token scales ([0]: per tensor);
                             * F8B: [Mp][K/128] per-group scales            */
    int32_t *xzp;           /* [Mp]                                         */
    uint32_t *amax;         /* 1 word: dynamic per-tensor absmax bits       */
    void *partial;          /* [splits][Mp][Np] int32 / fp32                */
    void *stream;           /* cudaStream_t                                 */
    void *ev_g0, *ev_g1;    /* cudaEvent_t or NULL: recorded around the GEMM
                             * and epilogue (linear_time's gemm_ms)         */
} qp_cu_fwd;

/* Launches activation quantization, the GEMM and the epilogue on
 * f->stream. Returns 0 or a cudaError_t; `what` names the failed step. */
int qp_cu_forward(const qp_cu_fwd *f, const char **what);

/* Quark input rotation (backend.h rotation_forward): x, y [M][K] act
 * bits, H [r][r] int8 on the device, c = fp32(1/sqrt(r)). */
int qp_cu_rotate(const void *x, void *y, int M, int K, const int8_t *H, int r, float c, int bf16, void *stream);
/* fp8 KV cache (backend.h kv_quantize / kv_dequantize) */
int qp_cu_kv_quant(const void *src, uint8_t *dst, size_t n, float scale, int bf16, void *stream);
int qp_cu_kv_dequant(const uint8_t *src, void *dst, size_t n, float scale, int bf16, void *stream);

/* 0 when the kernels have an image for the current device, else the
 * cudaError_t of cudaFuncGetAttributes (cudaErrorNoKernelImageForDevice). */
int qp_cu_kernel_probe(void);
/* Kernel launches and memsets the calling thread has made (device_stats). */
unsigned long qp_cu_launch_count(void);

#ifdef __cplusplus
}
#endif
#endif
