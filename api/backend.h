/*
 * The backend interface (docs/backends.md): what a backend plugin
 * (libqport-vk.so, libqport-cl.so, libqport-cuda.so) or the built-in `cpu`
 * backend implements, and what the core hands it.
 *
 * A plugin exports one symbol, `qp_backend_entry`, returning its ops table.
 * It does NOT link libqport: everything it needs from the core (errors,
 * logging, settings) arrives in the qp_host table at init, so one plugin
 * binary works with the shared or the static library.
 *
 * Object model (ggml-backend in spirit, smaller):
 *   backend state (one per qp_context) -> devices -> buffers, linears.
 * Every pointer a backend returns is opaque to the core.
 *
 * Threads: the core serialises all calls on one device with a per-device
 * mutex, so a backend never sees two concurrent calls for the same device.
 * Calls for different devices of one backend may run concurrently.
 *
 * Asynchronous execution (ABI 3): every op that takes device buffers and
 * computes (linear_forward, moe_forward, rotation_forward, kv_quantize,
 * kv_dequantize, buffer_copy) ENQUEUES its work on the device's queue in
 * call order and returns; it never waits for the device, never allocates
 * once the scratch covers the shape (reserve ops), and checks what can be
 * checked before enqueueing. `synchronize` waits for all of it and returns
 * the first device error with the layer named; buffer_upload and
 * buffer_download are blocking and ordered after everything enqueued
 * before them. Between sync_begin and sync_end the enqueued work is bound
 * to the caller's qp_enqueue_sync (waits before, signals after, or the
 * caller's command buffer).
 */
#ifndef QP_BACKEND_H
#define QP_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_host.h"
#include "qport.h"

#define QP_BACKEND_ABI_VERSION 5u

/* Services of the core, valid from init until shutdown. */
typedef struct qp_host {
    QP_PLUGIN_HOST_HEAD;
    /* A writable folder for pipeline / program-binary caches ("" when
     * caching is off: QPORT_CACHE_DIR=off). No trailing slash. */
    const char *cache_dir;
    /* Library version string, part of every cache key. */
    const char *version;
    /* QPORT_VK_VALIDATION etc.: the settings table (env.c) as parsed. */
    int validation;      /* 1: enable API validation layers where available */
    /* A backend setting of the environment table (api/env.c: QPORT_VK_*,
     * QPORT_CL_*, QPORT_CUDA_* test knobs), read once when the context's
     * registry loads and already validated there (an invalid value fails
     * the load with an error naming the variable): the value, or NULL when
     * unset or not a known setting. Plugins never call getenv. */
    const char *(*setting)(const struct qp_host *host, const char *name);
} qp_host;

/* host->setting(host, name) where the core offers it (an older or test
 * host may not): NULL otherwise. */
static inline const char *qp_host_setting(const qp_host *h, const char *name) {
    if (!h || h->struct_size < offsetof(qp_host, setting) + sizeof h->setting || !h->setting) return NULL;
    return h->setting(h, name);
}

/* Activation modes a backend must implement (docs/semantics.md §12, §13). */
typedef enum qp_act_mode {
    QP_ACT_NONE = 0,             /* weight-only: x used as is               */
    QP_ACT_INT8_STATIC,          /* scale (+ azp when asymmetric)           */
    QP_ACT_INT8_DYNAMIC_TOKEN,   /* per-token absmax (or min/max when asym) */
    QP_ACT_FP8_STATIC,           /* x * (1/scale)                           */
    QP_ACT_FP8_DYNAMIC_TENSOR,   /* absmax/448 over the whole x             */
    QP_ACT_FP8_DYNAMIC_TOKEN,    /* per-token, min scale 1/(448*512)        */
    QP_ACT_FP8_GROUP128,         /* per-token-group of 128 (opt. UE8M0)     */
    /* Fake-quantized (quantize-dequantize) activations of the emulated
     * schemes; x' is rounded to act_dtype and fed to a float GEMM. */
    QP_ACT_MX_QDQ,               /* OCP-MX blocks of 32 along k, element
                                  * act_elem, Quark's even e8m0 scale
                                  * (qp_quant_mx + qp_dequant_mx)           */
    QP_ACT_FP8_STATIC_QDQ,       /* W4A8-MXFP4-FP8 (docs/semantics.md §7): t = clamp(
                                  * rnd(x / input_scale), +-448), q = e4m3(t),
                                  * x' = rnd(rnd(q) * input_scale); rnd =
                                  * round to act_dtype, / correctly rounded */
    QP_ACT_NVFP4_QDQ             /* NVFP4 (docs/semantics.md §8): qp_quant_nvfp4 with
                                  * g = 1 / input_global_scale, x' = rnd(
                                  * value(q) * (e4m3(sf) / g))              */
} qp_act_mode;

/* The weight payload families of qp_lin_desc: each scheme kind fills one
 * (qp_scheme_kind_describe's family), and a backend reads only that one. */
typedef enum qp_lin_family {
    QP_LIN_NONE = 0,         /* not a linear layer                           */
    QP_LIN_DENSE,            /* UNQUANTIZED                                  */
    QP_LIN_W8A8,             /* W8A8_INT8, W8A8_FP8, W8A8_FP8_BLOCK (HF_FP8) */
    QP_LIN_INT4,             /* QQQ_W4A8, W4A16_INT4                         */
    QP_LIN_BLOCK_FLOAT       /* OCP_MX, W4A8_MXFP4_FP8, NVFP4                */
} qp_lin_family;

/*
 * A linear layer after binding and process-after-loading, in canonical
 * host layouts. Built by the core (api/linear_desc.c) from the checkpoint
 * tensors; the backend copies what it needs in prepare_linear (the
 * pointers are valid only during that call) and may repack freely.
 *
 * Shapes: N output features, K input features. y[M][N] = x[M][K] W^T.
 */
typedef struct qp_lin_desc {
    size_t struct_size;
    qp_scheme scheme;        /* as resolved                                  */
    qp_scheme_kind kind;     /* scheme.kind, HF_FP8 folded into W8A8_FP8     */
    qp_lin_family family;    /* which member of the weight union below is
                              * filled: the kind's row (api/scheme_table.c) */
    qp_dtype act_dtype;      /* x, bias and y (QP_DTYPE_F16, BF16, or F32 --
                              * the core hands F32 to the cpu backend only);
                              * QQQ: F16 */
    int N, K;
    const char *layer;       /* for messages, never NULL                    */

    qp_act_mode act;
    int act_symmetric;       /* int8 activations                             */
    float input_scale;       /* static activations                           */
    int32_t input_zp;        /* static asymmetric int8 (after rebuild)       */
    int ue8m0;               /* FP8_GROUP128: power-of-two scales            */

    const uint16_t *bias;    /* [N] act_dtype elements, or NULL: fp16/bf16
                              * bits; for F32 the data are floats (cast)    */

    /* QP_ACT_MX_QDQ: the activation element format (F4_E2M1, F6_E3M2,
     * F6_E2M3, F8_E4M3FN); its mantissa bits and emax (docs/semantics.md §6). */
    qp_dtype act_elem;
    int act_mbits, act_emax;
    /* QP_ACT_NVFP4_QDQ: input_global_scale (max over shards) and the
     * quantizing multiplier g = input_global_scale_inv the kernels use (ABI
     * 5). Quark stores the former (g = 1.0f / it, one correctly rounded
     * division), compressed-tensors the latter (g = its max, exactly as
     * vLLM keeps it); the fused MoE builder reads input_global_scale. */
    float input_global_scale;
    float input_global_scale_inv;
    /* 0: y = rnd(sum + bias) (F.linear, bias inside the fp32/fp64 sum);
     * 1: y = rnd(rnd(sum) + bias) (NVFP4's emulation adds the bias after
     * the matmul, both in act_dtype). */
    int bias_after_round;

    /* Quark online input rotation: the core rotates x with the
     * backend's rotation ops before linear_forward; informative here. */
    const int8_t *rotation;     /* [r][r] +-1, or NULL                      */
    int rotation_size;

    /* The bound checkpoint tensors by name (every scheme; informative). */
    const qp_tensor *tensors;
    size_t n_tensors;

    /* The weights, by family (the members share storage: set and read
     * only the family's fields). */
    union {
        struct { /* QP_LIN_W8A8 */
            /* W8A8-INT8 (docs/semantics.md §14, §15) */
            const int8_t *w_i8;  /* [N][K]  */
            const float *w_scale;  /* [N], per-tensor scales already expanded;
                                      * W8A8_FP8_BLOCK: [ceil(N/128)][ceil(K/128)]  */
            int w_per_channel;  /* the checkpoint had one scale per channel  */
            /* azp_adj[n] = sum_k w[n][k] (int32, wrapping); static asymmetric:
             * already multiplied by input_zp (docs/semantics.md §15 step 5). NULL when symmetric. */
            const int32_t *azp_adj;

            /* W8A8-FP8 (docs/semantics.md §16): w_u8 e4m3fn codes [N][K], w_scale above */
            const uint8_t *w_u8;
        };
        struct { /* QP_LIN_INT4 */
            /* QQQ W4A8 (docs/semantics.md §9, §10, §11), in natural (unpermuted) order:
             *   q4 [N][K]: per-channel: signed codes -8..7 (int8 weight = 16*q4);
             *              group 128: unsigned codes 0..15 (t = q4 - 8);
             *   w8 [N][K]: the exact int8 weight of docs/semantics.md §11 step 2 (wrap included),
             *              so a backend may run QQQ as a plain int8 GEMM;
             *   s_channel [N] fp32, s_group [K/128][N] fp16 bits (group 128 only);
             *   marlin_B / marlin_s_channel / marlin_s_group: the checkpoint tensors
             *   as loaded, for a backend that runs the Marlin layout directly. */
            int group_size;  /* QQQ: -1 or 128; W4A16: 32/64/128/-1  */
            const int8_t *q4;
            const int8_t *w8;
            const float *s_channel;
            const uint16_t *s_group;
            const int32_t *marlin_B;
            const float *marlin_s_channel;
            const uint16_t *marlin_s_group;

            /* W4A16 INT4/UINT4 (docs/semantics.md §17), unpacked from Quark's order/reorder
             * int32 words (group_size above; G = K / group_size, or 1 for -1):
             *   q4 [N][K]: the stored 4-bit code, 0..15;
             *   w4_signed: 1 for int4 symmetric checkpoints (two's complement code:
             *              v = c - 16 * (c >= 8)); 0 for uint4 (v = c - w4_zero);
             *   w4_zero [G][N] 0..15 (NULL when w4_signed);
             *   w4_scale [G][N] fp32: the act_dtype scale widened exactly.
             * W[n][k] = v * w4_scale[k / g][n] is exact in fp32 (|v| <= 15, 11-bit
             * significand); the reference sums x * W in double, rounds once. */
            int w4_signed;
            const uint8_t *w4_zero;
            const float *w4_scale;
        };
        struct { /* QP_LIN_BLOCK_FLOAT */
            /* OCP-MX, W4A8-MXFP4-FP8 and NVFP4 (docs/semantics.md §5, §8): block-scaled float
             * weights as one element code per byte plus one fp32 multiplier per
             * (row, block of w_blk along k), such that the reference's weight
             * dequantization to act_dtype is exactly
             *   W[n][k] = rnd( w_lut[code] * w_blk_scale[n][k / w_blk] )
             * with the product a single fp32 multiply and rnd the RNE rounding to
             * act_dtype (NaN stays NaN; fp16 overflow gives inf). The per-block
             * multiplier folds the scale rules of each scheme (Quark's saturating
             * e8m0 -> fp16 hmul scale, fp6's 2^(e-127) in act_dtype, NVFP4's
             * e4m3(sf) * weight_global_scale), and MXFP8 per_block scale rows are
             * expanded to one row per output feature. */
            qp_dtype w_elem;  /* F4_E2M1, F6_E2M3, F6_E3M2 or F8_E4M3FN  */
            const uint8_t *w_codes;  /* [N][K], low bits of each byte  */
            int w_blk;  /* 32 (MX) or 16 (NVFP4)  */
            const float *w_blk_scale;  /* [N][K / w_blk]  */
            const float *w_lut;  /* [256]: the value of each code of w_elem  */
        };
        struct { /* QP_LIN_DENSE */
            /* Unquantized layers (QP_SCHEME_UNQUANTIZED; also the fp16 baseline of
             * `qport bench`): w_act [N][K] act_dtype bits (F32: floats);
             * y = rnd(sum + bias) with an fp32 (or wider) sum. */
            const uint16_t *w_act;
        };
    };
} qp_lin_desc;

/* An error of a backend's device, its message prefixed "<api>:<index>: "
 * and, for a layer, "layer '<name>': ": every backend's messages say the
 * device and the layer in the same words, written in one place. Each
 * backend wraps it once (qp_vk_error, qp_cl_error, qp_cu_error). */
static inline qp_status qp_backend_verror(const qp_host *h, qp_status st, const char *api, int index,
                                          const char *layer, const char *fmt, va_list ap) {
    char msg[1024];
    int n = layer ? snprintf(msg, sizeof msg, "%s:%d: layer '%s': ", api, index, layer)
                  : snprintf(msg, sizeof msg, "%s:%d: ", api, index);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    return h->error(h->ctx, st, "%s", msg);
}

/* W4A16's codes and zero points are 4-bit: 0 when every one is in 0..15,
 * else 1 with the first one outside in why ("tensor q4: code 240 at [0][5]
 * outside 0..15"), so every backend refuses the same bad desc the same way. */
static inline int qp_lin_w4_range_error(const qp_lin_desc *d, char *why, size_t cap) {
    size_t N = (size_t)d->N, K = (size_t)d->K, G = d->group_size > 0 ? K / (size_t)d->group_size : 1;
    const uint8_t *q = (const uint8_t *)d->q4;
    for (size_t i = 0; q && i < N * K; i++)
        if (q[i] > 15) {
            snprintf(why, cap, "tensor q4: code %u at [%zu][%zu] outside 0..15", q[i], i / K, i % K);
            return 1;
        }
    for (size_t i = 0; !d->w4_signed && d->w4_zero && i < G * N; i++)
        if (d->w4_zero[i] > 15) {
            snprintf(why, cap, "tensor w4_zero: zero point %u at [%zu][%zu] outside 0..15", d->w4_zero[i], i / N, i % N);
            return 1;
        }
    return 0;
}

/* Empties the weight payload, for a desc reused with another family (the
 * payloads share storage, so one family's pointers read as another's). */
static inline void qp_lin_desc_clear_weights(qp_lin_desc *d) {
    memset(&d->w_i8, 0, sizeof *d - offsetof(qp_lin_desc, w_i8));
}

/*
 * A routed-experts (fused MoE) layer after binding and each Quark MoE
 * method's process_weights_after_loading (api/moe.c), in canonical host
 * layouts: the experts of this rank, E of the layer's G, starting at global
 * expert `expert_offset` (expert parallelism; a token slot routed to an
 * expert outside them contributes zeros). w13 stacks each expert's gate
 * rows then up rows: w13 [E][2I][H], w2 [E][H][I].
 *
 * The computation every backend reproduces is cpu/ref_moe.c (vLLM's
 * fused_experts order): A quantized per `act`, w13 GEMM, the epilogue
 * acc * a_scale * w_scale rounded to act_dtype, silu_and_mul (the fp32
 * silu g / (1 + exp(-g)) evaluated in double and rounded once to fp32,
 * then to act_dtype; times up in fp32, rounded to act_dtype), the second
 * quantization over the M*k slot rows, w2 GEMM times the routing weight
 * (fp32) rounded to act_dtype, and the sum over the k slots in act_dtype.
 */
typedef struct qp_moe_desc {
    size_t struct_size;
    qp_scheme scheme;
    qp_scheme_kind kind;
    qp_dtype act_dtype;       /* F16 or BF16                                */
    int E, H, I;              /* local experts, hidden and intermediate size */
    int G, expert_offset;     /* the layer's experts; first local one       */
    const char *layer;        /* for messages, never NULL                   */

    /* Activation quantization before each GEMM: QP_ACT_NONE (GEMMs in
     * act_dtype), FP8_STATIC, FP8_DYNAMIC_TENSOR (absmax over every row of
     * the GEMM's input), FP8_DYNAMIC_TOKEN, INT8_STATIC and
     * INT8_DYNAMIC_TOKEN (symmetric), or the fake-quantized MX_QDQ,
     * FP8_STATIC_QDQ, NVFP4_QDQ of the emulated schemes (qp_lin_desc). */
    qp_act_mode act;
    float a13_scale, a2_scale; /* static scales (max over the experts);
                                * NVFP4_QDQ: the input global scales       */
    qp_dtype act_elem;         /* MX_QDQ, as in qp_lin_desc                 */
    int act_mbits, act_emax;

    /* Weights. w_dtype I8 / F8_E4M3FN: codes with one fp32 dequant scale
     * per output row (s13 [E][2I], s2 [E][H]; per-tensor scales expanded,
     * w13 shards already requantized to one scale); w_dtype == act_dtype:
     * unquantized bits; F4_E2M1 / F6_E2M3 / F6_E3M2 / F8_E4M3FN with
     * w_blk > 0: one element code per byte and one fp32 multiplier per
     * (row, block of w_blk along k), W = rnd(w_lut[code] * blk) exactly as
     * qp_lin_desc's block-scaled weights (b13 [E][2I][H/w_blk],
     * b2 [E][H][I/w_blk]). */
    qp_dtype w_dtype;
    const void *w13, *w2;
    const float *s13, *s2;
    int w_blk;
    const float *b13, *b2;
    const float *w_lut;       /* [256]                                      */
} qp_moe_desc;

/* Routing of an MoE block on the device (moe_route): qp_moe_options'
 * routing fields for G experts. */
typedef struct qp_route_params {
    int G, k;                  /* experts of the layer, slots per token      */
    int renormalize;
    int n_group, topk_group;   /* grouped top-k (0: plain)                   */
    int sigmoid;               /* scoring: 0 softmax, 1 sigmoid (grouped)    */
    float scale;               /* routed_scaling_factor (grouped)            */
    void *bias;                /* e_score_correction_bias: device buffer of
                                * G fp32, or NULL                            */
} qp_route_params;
#define QP_ROUTE_MAX_K 64      /* top_k and n_group the kernels hold          */

/* Code-path forcing for tests and `qport conform` (qp_linear_options.path). */
/* (QP_PATH_* live in qport.h.) */

/* One entry of a backend's scheme-kind table: what its linear_prepare does
 * with `kind` (descriptors arrive with qp_lin_desc.kind; device_supports
 * and the table also see QP_SCHEME_HF_FP8 as resolved). */
typedef struct qp_backend_kind {
    qp_scheme_kind kind;
    int runs;                /* 1: linear_prepare takes it; 0: refused       */
    const char *reason;      /* runs == 0: why, as qp_device_supports says it */
} qp_backend_kind;

typedef struct qp_backend_ops {
    uint32_t abi_version;    /* QP_BACKEND_ABI_VERSION                       */
    size_t struct_size;      /* sizeof(qp_backend_ops)                       */
    const char *name;        /* "cpu", "vulkan", "opencl", "cuda"            */

    /* Creates the backend's state for one context. A missing runtime or
     * driver is not an error: return QP_OK with zero devices and log the
     * reason (host->log at QP_LOG_INFO). */
    qp_status (*init)(const qp_host *host, void **state);
    void (*shutdown)(void *state);

    int (*device_count)(void *state);
    /* Device handle i (stable until shutdown). */
    void *(*device_get)(void *state, int i);
    /* Fills the backend-neutral description (struct_size already set). */
    qp_status (*device_info)(void *dev, qp_device_info *out);
    /* Whether `scheme` at shape M,N,K runs natively, emulated or not at all,
     * with a reason. NULL: the core's default (every scheme the backend's
     * prepare_linear accepts is native). */
    qp_status (*device_supports)(void *dev, const qp_scheme *scheme, int M, int N, int K, qp_support_info *out);

    /* Device memory. Buffers are addressed by byte offsets. */
    qp_status (*buffer_alloc)(void *dev, size_t bytes, void **buf);
    void (*buffer_free)(void *dev, void *buf);
    qp_status (*buffer_upload)(void *dev, void *buf, size_t offset, const void *src, size_t bytes);
    qp_status (*buffer_download)(void *dev, void *buf, size_t offset, void *dst, size_t bytes);

    /* Uploads the layer in the backend's chosen layout. `path` is the
     * QP_PATH_* mask the caller asked for (0: auto); a forced path the device
     * cannot run is QP_ERR_UNSUPPORTED with the reason. */
    qp_status (*linear_prepare)(void *dev, const qp_lin_desc *desc, unsigned path, void **lin);
    void (*linear_destroy)(void *dev, void *lin);
    /* y[M][N] (act_dtype, or F16 for QQQ) from x[M][K] (act_dtype), both
     * device buffers of this device: enqueued, completed by `synchronize`. */
    qp_status (*linear_forward)(void *dev, void *lin, void *x, int M, void *y);
    /* Short text of the code path taken for M rows ("gemv int-dot",
     * "tiled 64x64 sg16"); optional. */
    void (*linear_describe)(void *dev, void *lin, int M, char *out, size_t cap);
    qp_status (*synchronize)(void *dev);

    /* ---- Optional ops (NULL: the backend does not offer them; the core
     * then says so: QP_ERR_UNSUPPORTED naming the backend). ---- */

    /* Quark online input rotation. H is r x r of +-1 (int8,
     * host memory, valid during the call). rotation_forward writes
     *   y[m][b*r + j] = rnd( fp32( S * c ) ),  S = fp32 sum over i = 0..r-1
     *   in increasing i of fp32(x[m][b*r + i]) * H[i][j] (sequential, no
     *   reassociation; each term is exact), c = fp32(1 / sqrt(r)) as the
     *   core passes it, rnd = RNE to dt,
     * for K % r == 0 (the core checks), dt F16/BF16 (F32 on cpu). */
    qp_status (*rotation_prepare)(void *dev, const int8_t *H, int r, float c, void **rot);
    void (*rotation_destroy)(void *dev, void *rot);
    qp_status (*rotation_forward)(void *dev, void *rot, qp_dtype dt, void *x, int M, int K, void *y);

    /* fp8 e4m3 KV cache (QuarkKVCacheMethod, vLLM's scaled_convert):
     * quantize: dst[i] = e4m3fn( fp32(src[i]) / scale ) (correctly rounded
     * division, RNE, saturating to +-448, NaN -> 0x7F | sign);
     * dequantize: dst[i] = rnd_dt( value(src[i]) * scale ).
     * src/dst are device buffers of this device; n elements from offset 0;
     * dt is the dtype of the unquantized side (F16/BF16; F32 on cpu). */
    qp_status (*kv_quantize)(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst);
    qp_status (*kv_dequantize)(void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst);

    /* Benchmarks, device timers (CUDA events, Vulkan timestamp
     * queries, OpenCL profiling events). linear_time runs linear_forward
     * `reps` times back to back and writes each run's device time in
     * milliseconds to total_ms[i]; gemm_ms[i] gets the time of the same
     * run without the activation-quantization step (the GEMM kernels
     * only), or a negative value when the path fuses the two. */
    qp_status (*linear_time)(void *dev, void *lin, void *x, int M, void *y, int reps, double *total_ms,
                             double *gemm_ms);
    /* Device-to-device copy (the bandwidth limit of `qport bench`). */
    qp_status (*buffer_copy)(void *dev, void *src, size_t src_off, void *dst, size_t dst_off, size_t bytes);
    /* Times `reps` copies of `bytes` (device timers), ms each in ms[i]. */
    qp_status (*buffer_copy_time)(void *dev, void *src, void *dst, size_t bytes, int reps, double *ms);
    /* A vendor library's GEMM of the same shape as a baseline (cuBLASLt on
     * CUDA): operands of dtype `in` (I8, F8_E4M3FN or F16; fp16 output,
     * fp32 or int32 accumulation) on buffers the backend allocates itself,
     * `reps` timed runs after warm-up, ms each; `name` gets the library
     * ("cuBLASLt 12.8 int8 TN"). QP_ERR_UNSUPPORTED where there is none. */
    qp_status (*vendor_gemm_time)(void *dev, qp_dtype in, int M, int N, int K, int reps, double *ms, char *name,
                                  size_t cap);

    /* Fused MoE (qp_moe_desc above). moe_prepare copies what it needs (the
     * desc's pointers are valid only during the call). moe_forward: x [M][H]
     * act_dtype, ids [M][k] int32 global expert ids (the core checks them
     * against 0..G-1), w [M][k] fp32 routing weights, y [M][H] act_dtype;
     * all device buffers of this device. */
    qp_status (*moe_prepare)(void *dev, const qp_moe_desc *desc, void **moe);
    void (*moe_destroy)(void *dev, void *moe);
    qp_status (*moe_forward)(void *dev, void *moe, void *x, int M, int k, void *ids, void *w, void *y);
    /* Short text of the code path for M tokens and k slots; optional. */
    void (*moe_describe)(void *dev, void *moe, int M, int k, char *out, size_t cap);

    /* ---- Asynchronous execution and embedding (ABI 3) ---- */
    /* Scratch for forwards of up to max_m rows (MoE: tokens, with k slots
     * each), reserved now so that such forwards allocate nothing. */
    qp_status (*linear_reserve)(void *dev, void *lin, int max_m);
    qp_status (*moe_reserve)(void *dev, void *moe, int max_m, int k);
    /* Submits recorded work without waiting (NULL: nothing is deferred). */
    qp_status (*flush)(void *dev);
    /* An event after everything enqueued so far; wait returns the errors of
     * that work; query sets *done (1 complete, 0 not yet). */
    qp_status (*event_record)(void *dev, void **ev);
    qp_status (*event_wait)(void *dev, void *ev);
    qp_status (*event_query)(void *dev, void *ev, int *done);
    void (*event_destroy)(void *dev, void *ev);
    /* Binds the work enqueued until sync_end to `s` (the core calls them
     * around one enqueue; NULL s never reaches them). A field of `s` the
     * backend cannot honour is QP_ERR_INVALID_ARGUMENT / UNSUPPORTED. */
    qp_status (*sync_begin)(void *dev, const qp_enqueue_sync *s);
    qp_status (*sync_end)(void *dev, const qp_enqueue_sync *s, qp_status enqueue_status);
    /* A device over the application's objects (never destroyed by the
     * backend); device_release waits for its work and frees what the backend
     * made on it. device_native fills the handles of any device. */
    qp_status (*device_import)(void *state, const qp_device_import_desc *desc, void **dev);
    void (*device_release)(void *state, void *dev);
    qp_status (*device_native)(void *dev, qp_device_native *out);
    /* The application's memory as a buffer handle (not owned: buffer_unimport
     * frees the wrapper only); buffer_native describes any buffer. */
    qp_status (*buffer_import)(void *dev, const qp_buffer_import_desc *desc, void **buf);
    void (*buffer_unimport)(void *dev, void *buf);
    qp_status (*buffer_native)(void *dev, void *buf, qp_buffer_native *out);
    /* Routing on the device (qp_moe_enqueue_logits): exactly qp_moe_route
     * (api/moe_route.c) over logits [M][G] fp32 -> ids [M][k] int32 and
     * w [M][k] fp32, with the exponentials evaluated in double and rounded
     * once to fp32 (as the reference does; a device without fp64 is
     * QP_ERR_UNSUPPORTED) and every fp32 division correctly rounded.
     * scratch: 2 * M * G fp32; bias: G fp32 or NULL. Optional. */
    qp_status (*moe_route)(void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids,
                           void *w);
    /* Counters (host waits, submissions, device allocations); optional. */
    qp_status (*device_stats)(void *dev, qp_device_stats *out);
    /* Whether the MoE kernels take activations quantized as `act`
     * (qp_moe_desc.act): 0, with the reason in why[cap], when they do not,
     * so qp_device_supports_moe answers unsupported before anything is
     * prepared (moe_prepare refuses such a desc too). Per-token-group fp8
     * (fp8 per-block experts) is the mode not every backend has. NULL:
     * every mode moe_prepare documents. Optional. */
    int (*moe_takes_act)(void *dev, qp_act_mode act, char *why, size_t cap);

    /* ---- Scheme kinds (ABI 4) ---- */
    /* One entry for every kind qp_scheme_kind_describe calls linear (and
     * no other): the registry refuses a plugin whose table leaves one out
     * or names one twice, so a new scheme kind cannot reach a backend that
     * never decided about it. A refused kind is answered unsupported with
     * its reason before device_supports or linear_prepare is called. */
    const qp_backend_kind *linear_kinds;
    size_t n_linear_kinds;
} qp_backend_ops;

/* The ten linear scheme kinds of backend ABI 5, each declared run: the
 * rows of a backend that runs them all (cpu, vk, cl, cuda). Frozen: a kind
 * added later is NOT added here but written as a row of its own in every
 * backend's table, so the registry refuses each backend until it decides
 * about the new kind. */
#define QP_BACKEND_KINDS_ABI5_RUN                                                                           \
    {QP_SCHEME_UNQUANTIZED, 1, NULL}, {QP_SCHEME_W8A8_INT8, 1, NULL}, {QP_SCHEME_W8A8_FP8, 1, NULL},        \
        {QP_SCHEME_W8A8_FP8_BLOCK, 1, NULL}, {QP_SCHEME_HF_FP8, 1, NULL}, {QP_SCHEME_QQQ_W4A8, 1, NULL},    \
        {QP_SCHEME_W4A16_INT4, 1, NULL}, {QP_SCHEME_OCP_MX, 1, NULL}, {QP_SCHEME_W4A8_MXFP4_FP8, 1, NULL}, \
        {QP_SCHEME_NVFP4, 1, NULL}

/*
 * One naming pattern across the GPU backends: backend P implements op X of
 * qp_backend_ops as the function P_X (qp_vk_linear_forward,
 * qp_cl_buffer_alloc, qp_cu_event_wait). The list below is every op that
 * the Vulkan, OpenCL and CUDA backends all implement, with its signature
 * (the members' comments above say what each does):
 *   QP_BACKEND_OPS_DECLARE(P)   declares them, so a definition whose
 *                               signature drifts from the table is a
 *                               compile error;
 *   QP_BACKEND_OPS_INIT(P, nm)  fills a qp_backend_ops initializer with the
 *                               ABI version, size, name and them all; a
 *                               backend adds its optional extras (flush,
 *                               vendor_gemm_time) and its kinds table after.
 */
#define QP_BACKEND_GPU_OPS(X, P)                                                                                  \
    X(P, qp_status, init, (const qp_host *host, void **state))                                                   \
    X(P, void, shutdown, (void *state))                                                                          \
    X(P, int, device_count, (void *state))                                                                       \
    X(P, void *, device_get, (void *state, int i))                                                               \
    X(P, qp_status, device_info, (void *dev, qp_device_info *out))                                               \
    X(P, qp_status, device_supports, (void *dev, const qp_scheme *scheme, int M, int N, int K, qp_support_info *out)) \
    X(P, qp_status, buffer_alloc, (void *dev, size_t bytes, void **buf))                                         \
    X(P, void, buffer_free, (void *dev, void *buf))                                                              \
    X(P, qp_status, buffer_upload, (void *dev, void *buf, size_t offset, const void *src, size_t bytes))         \
    X(P, qp_status, buffer_download, (void *dev, void *buf, size_t offset, void *dst, size_t bytes))             \
    X(P, qp_status, linear_prepare, (void *dev, const qp_lin_desc *desc, unsigned path, void **lin))             \
    X(P, void, linear_destroy, (void *dev, void *lin))                                                           \
    X(P, qp_status, linear_forward, (void *dev, void *lin, void *x, int M, void *y))                             \
    X(P, void, linear_describe, (void *dev, void *lin, int M, char *out, size_t cap))                            \
    X(P, qp_status, synchronize, (void *dev))                                                                    \
    X(P, qp_status, rotation_prepare, (void *dev, const int8_t *H, int r, float c, void **rot))                  \
    X(P, void, rotation_destroy, (void *dev, void *rot))                                                         \
    X(P, qp_status, rotation_forward, (void *dev, void *rot, qp_dtype dt, void *x, int M, int K, void *y))       \
    X(P, qp_status, kv_quantize, (void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst))          \
    X(P, qp_status, kv_dequantize, (void *dev, qp_dtype dt, void *src, size_t n, float scale, void *dst))        \
    X(P, qp_status, linear_time,                                                                                 \
      (void *dev, void *lin, void *x, int M, void *y, int reps, double *total_ms, double *gemm_ms))              \
    X(P, qp_status, buffer_copy, (void *dev, void *src, size_t src_off, void *dst, size_t dst_off, size_t bytes)) \
    X(P, qp_status, buffer_copy_time, (void *dev, void *src, void *dst, size_t bytes, int reps, double *ms))     \
    X(P, qp_status, moe_prepare, (void *dev, const qp_moe_desc *desc, void **moe))                               \
    X(P, void, moe_destroy, (void *dev, void *moe))                                                              \
    X(P, qp_status, moe_forward, (void *dev, void *moe, void *x, int M, int k, void *ids, void *w, void *y))     \
    X(P, void, moe_describe, (void *dev, void *moe, int M, int k, char *out, size_t cap))                        \
    X(P, qp_status, linear_reserve, (void *dev, void *lin, int max_m))                                           \
    X(P, qp_status, moe_reserve, (void *dev, void *moe, int max_m, int k))                                       \
    X(P, qp_status, event_record, (void *dev, void **ev))                                                        \
    X(P, qp_status, event_wait, (void *dev, void *ev))                                                           \
    X(P, qp_status, event_query, (void *dev, void *ev, int *done))                                               \
    X(P, void, event_destroy, (void *dev, void *ev))                                                             \
    X(P, qp_status, sync_begin, (void *dev, const qp_enqueue_sync *s))                                           \
    X(P, qp_status, sync_end, (void *dev, const qp_enqueue_sync *s, qp_status enqueue_status))                   \
    X(P, qp_status, device_import, (void *state, const qp_device_import_desc *desc, void **dev))                 \
    X(P, void, device_release, (void *state, void *dev))                                                         \
    X(P, qp_status, device_native, (void *dev, qp_device_native *out))                                           \
    X(P, qp_status, buffer_import, (void *dev, const qp_buffer_import_desc *desc, void **buf))                   \
    X(P, void, buffer_unimport, (void *dev, void *buf))                                                          \
    X(P, qp_status, buffer_native, (void *dev, void *buf, qp_buffer_native *out))                                \
    X(P, qp_status, moe_route, (void *dev, const qp_route_params *p, void *logits, int M, void *scratch, void *ids, void *w)) \
    X(P, qp_status, device_stats, (void *dev, qp_device_stats *out))

#define QP_BACKEND_OP_DECLARE_(P, ret, op, params) ret P##_##op params;
#define QP_BACKEND_OP_INIT_(P, ret, op, params) .op = P##_##op,
#define QP_BACKEND_OPS_DECLARE(P) QP_BACKEND_GPU_OPS(QP_BACKEND_OP_DECLARE_, P)
#define QP_BACKEND_OPS_INIT(P, nm, kinds)                                                      \
    .abi_version = QP_BACKEND_ABI_VERSION, .struct_size = sizeof(qp_backend_ops), .name = nm,      \
    QP_BACKEND_GPU_OPS(QP_BACKEND_OP_INIT_, P).linear_kinds = kinds,                             \
    .n_linear_kinds = sizeof kinds / sizeof *kinds

/* Defines a backend's error function fn(d, st, layer, fmt, ...): d of type
 * dev_t (with an `index`), host the expression that reaches its qp_host
 * from d, api the backend's name in messages. */
#define QP_BACKEND_DEFINE_ERROR(fn, dev_t, host, api)                                           \
    qp_status fn(const dev_t *d, qp_status st, const char *layer, const char *fmt, ...) {        \
        va_list ap;                                                                             \
        va_start(ap, fmt);                                                                      \
        qp_status r = qp_backend_verror(host, st, api, d->index, layer, fmt, ap);               \
        va_end(ap);                                                                             \
        return r;                                                                               \
    }

/* A backend's layer object (linear, MoE): `size` zeroed bytes whose char
 * array at name_off (name_cap bytes) holds the layer's name, cut to fit
 * (NULL: ""), so that every later message can name it. NULL when out of
 * host memory. QP_BACKEND_LAYER_NEW(T, name) for a T with `char layer[]`. */
static inline void *qp_backend_layer_new(size_t size, size_t name_off, size_t name_cap, const char *name) {
    char *o = calloc(1, size);
    if (o) snprintf(o + name_off, name_cap, "%s", name ? name : "");
    return o;
}
#define QP_BACKEND_LAYER_NEW(T, name) \
    ((T *)qp_backend_layer_new(sizeof(T), offsetof(T, layer), sizeof(((T *)0)->layer), (name)))

/* device_stats for a backend that keeps its counters in a qp_device_stats
 * (the caller's struct_size is left as it is). */
static inline qp_status qp_backend_stats_copy(const qp_device_stats *counters, qp_device_stats *out) {
    out->host_waits = counters->host_waits;
    out->submissions = counters->submissions;
    out->allocations = counters->allocations;
    return QP_OK;
}

/* The plugin's only export. */
typedef const qp_backend_ops *(*qp_backend_entry_fn)(void);
#define QP_BACKEND_ENTRY_SYMBOL "qp_backend_entry"

#endif
