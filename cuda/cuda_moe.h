/*
 * Interface between the fused MoE host code (cuda_moe.c, C) and its kernels
 * (cuda_moe.cu, compiled inside cuda_kernels.cu's translation unit so that
 * it shares the linear layers' quantizers, mma wrappers and weight decoders).
 * Plain C types only.
 */
#ifndef QP_CU_MOE_H
#define QP_CU_MOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Slots per sorted block: decode (GEMV, M <= 16) and tensor-core tiles. */
#define QP_CU_MOE_BMD 16
#define QP_CU_MOE_BMT 64
#define QP_CU_MOE_DECODE_MAX_M 16

typedef enum qp_cu_moe_kp {
    QP_CU_MOE_GEMV = 0, /* one warp per output row of the expert, 16 slots  */
    QP_CU_MOE_TC        /* 64 slots x 64 outputs, mma.sync                  */
} qp_cu_moe_kp;

/* One forward (the layer and the scratch of this call). Weights of expert e
 * start at row e * N13p (w13) / e * N2p (w2) of [rows][Kp] (padded with
 * zeros); codes per qp_cu_wkind (QP_CU_W_I8, F8, F8B, H, LUT, LUT4). */
typedef struct qp_cu_moe_fwd {
    int M, k, E, off, H, I, Hp, Ip, N13p, N2p;
    int wkind, act, bf16, kpath, sm;
    /* activation quantization (qp_cu_act): static scales / NVFP4 g = 1/gs */
    float s13, s2, g13, g2;
    int act_mbits, act_emin, act_emax, act_e4m3;
    float act_maxv;
    int blk;
    /* layer */
    const void *w13, *w2;
    const float *ws13, *ws2;   /* [E][2I], [E][H] per-row weight scales      */
    const float *b13, *b2;     /* LUT kinds, F8B: [E][N13p][Hp/blk], [E][N2p][Ip/blk] */
    const float *lut;          /* [256] on the device                       */
    const void *zrow;          /* max(Hp, Ip) * 2 zero bytes                */
    /* call */
    const uint16_t *x;         /* [M][H] act bits                           */
    const int32_t *ids;        /* [M][k] global expert ids                  */
    const float *rw;           /* [M][k] routing weights                    */
    uint16_t *y;               /* [M][H]                                    */
    /* scratch */
    void *xa, *ha;             /* [M][Hp], [M*k][Ip]: codes or act bits     */
    float *xs, *hs;            /* row scales [M], [M*k] (F8B: [M][H/128],
                                * [M*k][I/128], one per group of 128)       */
    int32_t *zp;               /* [max(M, M*k)] (unused: symmetric)         */
    uint32_t *amax;            /* [2]                                       */
    uint16_t *h;               /* [M*k][I] act bits                         */
    void *p1, *p2;             /* raw sums [M*k][N13p], [M*k][N2p]          */
    int32_t *cnt, *eblk, *sorted, *bexp, *nblk;
    int nbmax;                 /* blocks the routing can make at most       */
    void *stream;
} qp_cu_moe_fwd;

/* Launches the whole layer on f->stream. 0 or a cudaError_t; `what` names
 * the failed step. */
int qp_cu_moe_forward_launch(const qp_cu_moe_fwd *f, const char **what);
/* Routing on the device (api/moe_route.c's arithmetic), enqueued. */
int qp_cu_moe_route_launch(const float *lg, int M, int G, int k, int flags, int ng, int topk_group, float scale,
                   const float *bias, float *sc, int32_t *ids, float *rw, void *stream);

#ifdef __cplusplus
}
#endif
#endif
