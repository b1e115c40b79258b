/* The layers the backend tests run: seeded random weights of each scheme
 * as two views of one layer --
 *   - the checkpoint-side tensors and arguments the cpu reference
 *     (qp_ref_*_forward) takes, and
 *   - the canonical qp_lin_desc fields a plugin receives, filled the way
 *     api/linear_desc.c binds them (the block-float schemes and unquantized
 *     go through the core's binder itself, qp_lin_desc_build);
 * plus, for the float paths, the weights as the reference dequantizes them
 * (wd) for the error bounds.
 *
 * "Selection" weights (sel): one weight of value 1 (block multiplier 1) per
 * output row n, at k = bh_sel_k(n), zero elsewhere, so y[m][n] = x'[m][k]
 * exactly and the activation quantizer is compared bit for bit. N = K. */
#ifndef QP_TEST_BACKEND_LAYERS_H
#define QP_TEST_BACKEND_LAYERS_H
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "registry.h"

typedef enum bh_sel {
    BH_SEL_NONE = 0,
    BH_SEL_DIAG,  /* k = n % K (the identity)   */
    BH_SEL_PERM,  /* k = (7 n + 3) % K          */
} bh_sel;
int bh_sel_k(bh_sel s, int n, int K);

typedef enum bh_fw_kind { BH_FW_MX = 0, BH_FW_W4A8, BH_FW_NVFP4, BH_FW_UNQ } bh_fw_kind;

/* A block-float or unquantized layer and the scale regimes of
 * its random weights; bh_fw_spec_init sets the defaults noted. */
typedef struct bh_fw_spec {
    bh_fw_kind kind;
    qp_dtype dt;             /* activations, bias, output                   */
    qp_dtype w_elem;         /* MX: F4_E2M1, F6_E2M3, F6_E3M2, F8_E4M3FN    */
    qp_ocp_mx_act act;       /* MX: the activation format                   */
    int N, K;
    bh_sel sel;
    bool bias;
    int e8m0_lo, e8m0_hi;    /* MX / W4A8 block exponents (127: 2^0); 121..130 */
    bool e8m0_far;           /* rows n % 11 == 4: blocks 0, 1 at 2^23, 2^-27
                              * (fp16 saturation and flush); off           */
    int e4m3_lo, e4m3_hi;    /* NVFP4 block scale codes; 0x30..0x40          */
    float wact_amp;          /* unquantized: weights in (-amp, amp); 0.5     */
    float in_scale;          /* W4A8: the static fp8 activation scale; 0.013 */
    float in_gscale;         /* NVFP4: input_scale_2; 0.37                   */
    float w2;                /* NVFP4: weight_scale_2 (selection: 1); 0.75   */
} bh_fw_spec;
void bh_fw_spec_init(bh_fw_spec *s, bh_fw_kind kind, qp_dtype dt, qp_dtype w_elem, qp_ocp_mx_act act, int N, int K,
                     bh_sel sel, bool bias);

typedef struct bh_layer {
    qp_lin_desc d;           /* the canonical fields (d.layer: "test.<kind>") */
    qp_dtype dt;
    int N, K;
    bool has_bias;
    uint16_t *bias;          /* [N] act dtype bits (d.bias when has_bias)   */
    double *wd;              /* [N][K] dequantized weights (float paths)    */
    /* W8A8-INT8, W8A8-FP8, fp8 per-block */
    int8_t *w_i8;
    uint8_t *w_u8;
    float *w_scale;
    int32_t *adj;
    bool is_static, sym, per_channel;
    qp_fp8_act fp8_act;
    float in_scale;
    int32_t in_zp;
    int ue8m0;
    /* QQQ: natural order (q4, w8, s_ch, s_grp) and Marlin's (B, *_perm) */
    int group;
    int8_t *q4, *w8;
    float *s_ch, *s_ch_perm;
    uint16_t *s_grp, *s_grp_perm;
    int32_t *B;
    /* W4A16: Quark's packed words, act-dtype scales [G][8 ceil(N/8)] */
    qp_pack_method pack;
    int32_t *W4, *Z4;
    uint16_t *sc16;
    uint8_t *w4_zero;
    float *w4_scale;
    /* block float / unquantized: the checkpoint tensors */
    bh_fw_spec fw;
    uint8_t *codes, *packed, *bsc;
    uint16_t *wact;
    float w2;
    qp_tensor t[8];
    size_t nt;
    qp_lin_desc_store *store;
    char layer[32];
} bh_layer;

/* W8A8-INT8 (docs/semantics.md §14, §15): static or dynamic per-token activations,
 * symmetric or not (azp_adj), per-tensor or per-channel weight scales. */
void bh_int8_layer(bh_layer *L, qp_dtype dt, bool is_static, bool sym, bool per_channel, bool bias, int N, int K);
/* W8A8-FP8 (docs/semantics.md §16): e4m3 weights without NaN; identity: N = K, unit
 * weights and scales (the GEMM is exact, the activation codes show). */
void bh_fp8_layer(bh_layer *L, qp_dtype dt, qp_fp8_act act, bool per_channel, bool bias, bool identity, int N, int K);
/* QQQ W4A8 (docs/semantics.md §9, §10, §11), fp16: group -1 (signed codes) or 128 (unsigned
 * codes; group scales up to ~20, so docs/semantics.md §11's int8 weight wraps). */
void bh_qqq_layer(bh_layer *L, int group, bool bias, int N, int K);
/* W4A16 (docs/semantics.md §17): random codes packed with qp_pack_int4_quark, act-dtype
 * scales (a few negative and tiny ones), uint4 zero points. */
void bh_w4a16_layer(bh_layer *L, qp_dtype dt, qp_pack_method pack, bool sym, int group, bool bias, int N, int K);
/* W8A8-FP8 per-block (docs/semantics.md §16): fp32 scales per 128x128 block (powers of
 * two with ue8m0, as e8m0 checkpoints decode), per-token-group-128
 * activations (ue8m0: power-of-two activation scales). */
void bh_fp8_block_layer(bh_layer *L, qp_dtype dt, int ue8m0, bool bias, bh_sel sel, int N, int K);
/* OCP-MX / W4A8-MXFP4-FP8 / NVFP4 / unquantized from checkpoint tensors
 * through qp_lin_desc_build; false (a failed check) when it refuses. */
bool bh_fw_layer(bh_layer *L, const bh_fw_spec *s);
void bh_layer_free(bh_layer *L);

/* The cpu reference on x [M][K]: y [M][N]. */
qp_status bh_layer_ref(const bh_layer *L, const uint16_t *x, int M, uint16_t *y);
#endif
