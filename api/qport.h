/*
 * qport: resolve a quantized LLM's published quantization config (AMD Quark,
 * QQQ, HF fp8, compressed-tensors) the way vLLM does, and run each scheme's
 * linear layer.
 *
 * The only public header. Every function returns a qp_status (or a value that
 * cannot fail); details of the last failure are kept per context and per
 * calling thread (qp_last_error).
 *
 * Threads: a loaded qp_config is immutable; qp_config_resolve may be called
 * on one config from many threads at once. Errors are recorded per thread, so
 * each thread reads its own qp_last_error(ctx).
 *
 * Ownership: the caller owns every buffer it passes in; strings returned by
 * the library stay valid until the object they came from is destroyed (or,
 * for qp_last_error, until the next failing call on that thread and context).
 */
#ifndef QPORT_H
#define QPORT_H

#include <stddef.h>
#include <stdint.h>

#include "qport_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(QP_BUILDING_LIBRARY)
#define QP_API __attribute__((visibility("default")))
#else
#define QP_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum qp_status {
    QP_OK = 0,
    QP_ERR_INVALID_ARGUMENT, /* a NULL handle, a bad enum, a bad size          */
    QP_ERR_IO,               /* a file could not be opened or read             */
    QP_ERR_PARSE,            /* malformed JSON, wrong JSON type, bad regex     */
    QP_ERR_UNSUPPORTED,      /* unknown quant_method, dtype, scheme, device    */
    QP_ERR_VALUE,            /* vLLM raises ValueError                         */
    QP_ERR_NOT_IMPLEMENTED,  /* vLLM raises NotImplementedError                */
    QP_ERR_CAPABILITY,       /* vLLM raises RuntimeError (capability check)    */
    QP_ERR_OUT_OF_MEMORY,
    QP_ERR_NOT_FOUND,        /* a layer, tensor, device or key does not exist  */
    QP_ERR_DEVICE,           /* a runtime or driver call failed                */
    QP_ERR_INTERNAL,
    QP_STATUS_COUNT_
} qp_status;

/* Short constant name of a status ("QP_ERR_VALUE"); never NULL. */
QP_API const char *qp_status_str(qp_status status);

/* The Python exception class vLLM raises for this status ("ValueError",
 * "NotImplementedError", "RuntimeError"), or NULL when vLLM has none. */
QP_API const char *qp_status_exception(qp_status status);

/* ------------------------------------------------------------------------ */
/* Version                                                                  */
/* ------------------------------------------------------------------------ */

/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
QP_API const char *qp_version(void);

/* ------------------------------------------------------------------------ */
/* Context, errors and logging                                              */
/* ------------------------------------------------------------------------ */

typedef struct qp_context qp_context;

typedef enum qp_log_level {
    QP_LOG_DEBUG = 0,
    QP_LOG_INFO,
    QP_LOG_WARN,
    QP_LOG_ERROR,
    QP_LOG_NONE
} qp_log_level;

typedef void (*qp_log_fn)(void *user, qp_log_level level, const char *message);

QP_API qp_status qp_context_create(qp_context **out);
QP_API void qp_context_destroy(qp_context *ctx);

/* Messages at or above `min_level` go to `fn` (default: none; the library
 * never prints). */
QP_API qp_status qp_set_log(qp_context *ctx, qp_log_fn fn, void *user, qp_log_level min_level);

/* Details of the last failure on this context and calling thread. */
typedef struct qp_error_info {
    qp_status status;
    const char *exception; /* vLLM's Python exception class, or NULL         */
    const char *message;   /* vLLM's own message where vLLM has one          */
    const char *file;      /* the config or checkpoint file, or ""           */
    const char *key_path;  /* JSON key path ("global_quant_config.weight")   */
    const char *layer;     /* the layer being resolved, or ""                */
} qp_error_info;

/* One line: "file: key: layer 'x': message". Never NULL ("" when none). */
QP_API const char *qp_last_error(const qp_context *ctx);
/* Fills `out` with pointers valid until the next failure on this thread. */
QP_API qp_status qp_last_error_info(const qp_context *ctx, qp_error_info *out);

/* ------------------------------------------------------------------------ */
/* Quantization configs                                                     */
/* ------------------------------------------------------------------------ */

typedef struct qp_config qp_config;

typedef enum qp_method {
    QP_METHOD_QUARK = 0,    /* quant_method "quark"                          */
    QP_METHOD_QUARK_ONLINE, /* "quark_online" (same schema)                  */
    QP_METHOD_QQQ,          /* "qqq", or absent with "wbits"/"bits"          */
    QP_METHOD_FP8,          /* "fp8": the HF fp8 format                       */
    QP_METHOD_COMPRESSED_TENSORS /* "compressed-tensors" (llm-compressor)      */
} qp_method;

/* Loads a whole HF config.json (its "quantization_config" is used), a bare
 * quantization_config object, or a stand-alone QQQ quant_config.json /
 * quantize_config.json. `name` labels the buffer in error messages. */
QP_API qp_status qp_config_load_file(qp_context *ctx, const char *path, qp_config **out);
QP_API qp_status qp_config_load_buffer(qp_context *ctx, const char *name, const char *json,
                                       size_t len, qp_config **out);
QP_API void qp_config_destroy(qp_config *cfg);

QP_API qp_method qp_config_method(const qp_config *cfg);
/* The method's name as it appeared ("quark", "quark_online", "qqq", "fp8",
 * "compressed-tensors"). */
QP_API const char *qp_method_name(qp_method method);

typedef enum qp_layer_kind {
    QP_LAYER_LINEAR = 0,
    QP_LAYER_ATTENTION, /* the attention module: KV-cache quantization       */
    QP_LAYER_MOE        /* routed experts (FusedMoE)                          */
} qp_layer_kind;

QP_API const char *qp_layer_kind_name(qp_layer_kind kind);
/* "linear" | "attention" | "moe" → kind. */
QP_API qp_status qp_layer_kind_parse(const char *name, qp_layer_kind *out);

typedef enum qp_dialect {
    QP_DIALECT_VLLM = 0, /* vLLM latest, quirks included (docs/semantics.md §20) */
    QP_DIALECT_SGLANG    /* SGLang's quark.py where it differs                */
} qp_dialect;

/* One fused module and the shards it is made of ("qkv_proj" → q,k,v). */
typedef struct qp_packed_module {
    const char *fused;
    const char *const *shards;
    size_t n_shards;
} qp_packed_module;

#define QP_CAPABILITY_NONE (-1)

typedef struct qp_resolve_options {
    size_t struct_size;          /* sizeof(qp_resolve_options)                  */
    int capability;              /* major*10+minor, or QP_CAPABILITY_NONE       */
    qp_dialect dialect;
    /* Packed-modules mapping. NULL: the config's own "packed_modules_mapping"
     * if it carries one, else the Llama default (qkv_proj, gate_up_proj). */
    const qp_packed_module *packed;
    size_t n_packed;
    /* HF model_type ("deepseek_v3", ...), for vLLM's per-model special cases;
     * NULL: taken from the config.json when the config was a whole one. */
    const char *model_type;
    /* The module's class name ("QKVParallelLinear"): only the sglang dialect
     * looks it up in layer_type_quant_config (vLLM never matches,
     * docs/semantics.md §3). NULL: none. */
    const char *layer_class;
} qp_resolve_options;

/* Fills defaults: no capability, vllm dialect, default mapping. */
QP_API void qp_resolve_options_init(qp_resolve_options *opts);

/* -- Scheme description (a plain value) ---------------------------------- */

typedef enum qp_scheme_kind {
    QP_SCHEME_UNQUANTIZED = 0,
    QP_SCHEME_W8A8_FP8,
    QP_SCHEME_W8A8_FP8_BLOCK,
    QP_SCHEME_W8A8_INT8,
    QP_SCHEME_W4A16_INT4,
    QP_SCHEME_OCP_MX,
    QP_SCHEME_W4A8_MXFP4_FP8,
    QP_SCHEME_NVFP4,
    QP_SCHEME_QQQ_W4A8,
    QP_SCHEME_HF_FP8,
    QP_SCHEME_KV_CACHE,   /* attention layer with a quantized KV cache       */
    QP_SCHEME_NONE,       /* vLLM assigns no quant method to this layer      */
    QP_SCHEME_W4A8_INT4_FP8, /* MoE only: int4 per-channel weights with an fp8
                              * per-tensor stage, fp8 activations
                              * (QuarkW4A8Fp8MoEMethod, ROCm AITER only)   */
    /* compressed-tensors schemes of their own: WNA16 (8-bit), W8A16_FP8 and
     * NVFP4_A16 are lowered to dense weights at bind; the rest are
     * resolution only (docs/loading.md "compressed-tensors") */
    QP_SCHEME_WNA16,         /* int weights of 2..8 bits other than the 4-bit
                              * case W4A16_INT4 covers, model-dtype acts   */
    QP_SCHEME_W8A16_FP8,     /* fp8 weights, model-dtype activations       */
    QP_SCHEME_NVFP4_A16,     /* NVFP4 weights, model-dtype activations     */
    QP_SCHEME_W4A8_INT,      /* int4 weights, dynamic per-token int8 acts  */
    QP_SCHEME_W4A8_FP8,      /* int4 group-128 weights, fp8 per-token acts */
    QP_SCHEME_CT_MXFP4,         /* "ct-mxfp4": MXFP4 weights (W4A4 or weight-only,
                              * as the platform's kernel decides)         */
    QP_SCHEME_CT_MXFP8,         /* "ct-mxfp8": MXFP8 weights and activations  */
    QP_SCHEME_CT_W4A8_MXFP4,    /* "ct-w4a8-mxfp4": MXFP4 weights, dynamic fp8
                              * token/group activations                   */
    QP_SCHEME_WNA8O8_INT,    /* int weights, static int8 input and output  */
    QP_SCHEME_WNA8_INT,      /* int weights, dynamic int8 acts (Humming)   */
    QP_SCHEME_WNA4_INT,      /* int weights, dynamic int4 acts (Humming)   */
    QP_SCHEME_KIND_COUNT_
} qp_scheme_kind;

/* Element formats of weights, activations, scales and the KV cache. */
typedef enum qp_dtype {
    QP_DTYPE_NONE = 0,
    QP_DTYPE_F32,
    QP_DTYPE_F16,
    QP_DTYPE_BF16,
    QP_DTYPE_F8_E4M3FN,
    QP_DTYPE_F8_E4M3FNUZ,
    QP_DTYPE_F8_E5M2,
    QP_DTYPE_F6_E2M3,
    QP_DTYPE_F6_E3M2,
    QP_DTYPE_F4_E2M1,
    QP_DTYPE_E8M0,
    QP_DTYPE_I8,
    QP_DTYPE_U8,
    QP_DTYPE_I4,
    QP_DTYPE_U4,
    QP_DTYPE_I32,
    QP_DTYPE_I64,         /* compressed-tensors' weight_shape               */
    QP_DTYPE_COUNT_
} qp_dtype;

QP_API const char *qp_dtype_name(qp_dtype dtype);

typedef enum qp_granularity {
    QP_GRAN_NONE = 0,
    QP_GRAN_TENSOR,   /* one scale                                          */
    QP_GRAN_CHANNEL,  /* one per output channel (weights)                   */
    QP_GRAN_TOKEN,    /* one per token row (activations)                    */
    QP_GRAN_GROUP,    /* groups of `group_size` along K                     */
    QP_GRAN_BLOCK     /* 2-D blocks `block[0] x block[1]`                   */
} qp_granularity;

QP_API const char *qp_granularity_name(qp_granularity g);

/* How one tensor (weight or activation) is quantized. */
typedef struct qp_qtensor {
    qp_dtype dtype;        /* QP_DTYPE_NONE: not quantized                  */
    qp_granularity granularity;
    int group_size;        /* GROUP: elements per group; else 0             */
    int block[2];          /* BLOCK: rows, cols; else 0                     */
    int symmetric;         /* 1: no zero point                              */
    int dynamic;           /* 1: scales computed at run time                */
    qp_dtype scale_dtype;  /* F32, F16, E8M0, F8_E4M3FN (NVFP4 blocks)      */
    qp_dtype scale2_dtype; /* second-level (global) scale, or NONE          */
} qp_qtensor;

typedef enum qp_pack_method {
    QP_PACK_NONE = 0,
    QP_PACK_ORDER,        /* Quark int4 nibbles in natural order           */
    QP_PACK_REORDER,      /* Quark int4 nibbles [0,4,1,5,2,6,3,7]          */
    QP_PACK_MARLIN_QQQ    /* QQQ's Marlin layout                            */
} qp_pack_method;

#define QP_NAME_MAX 64

typedef struct qp_scheme {
    size_t struct_size;             /* sizeof(qp_scheme), set by the library */
    qp_scheme_kind kind;
    qp_qtensor weight;
    qp_qtensor activation;          /* dtype NONE: weight-only               */
    qp_pack_method pack_method;
    int min_capability;             /* major*10+minor; 0 when none           */
    int out_dtype_fixed;            /* QP_DTYPE_F16 for QQQ; 0: the input's  */
    /* vLLM names: the quant method class ("QuarkLinearMethod"), the scheme
     * class ("QuarkW8A8Fp8"), and the QuantKey constants; "" when none. */
    char method[QP_NAME_MAX];
    char scheme_class[QP_NAME_MAX];
    char weight_key[QP_NAME_MAX];
    char activation_key[QP_NAME_MAX];
    /* Attention layers: the KV-cache format (dtype NONE when unquantized). */
    qp_qtensor kv_cache;
} qp_scheme;

QP_API const char *qp_scheme_kind_name(qp_scheme_kind kind);

/* What qport knows about a scheme kind (its row in api/scheme_table.c):
 * whether it is a linear layer qport binds and runs, whether fused MoE runs
 * its experts (else moe_refusal says why), whether the integer path makes
 * every backend's result bit-exact against the reference, and which
 * checkpoint tensors a linear layer of it takes. */
typedef struct qp_scheme_kind_info {
    size_t struct_size;
    const char *name;          /* qp_scheme_kind_name                        */
    const char *family;        /* the qp_lin_desc payload: "dense", "w8a8",
                                * "int4", "block-float", or "none"           */
    int linear;                /* qp_linear_create binds it                  */
    int moe;                   /* qp_moe_create runs its experts             */
    int exact;                 /* integer path: bit-exact on every backend   */
    const char *moe_refusal;   /* why fused MoE does not run it, or NULL     */
    const char *tensors;       /* the checkpoint tensors of one linear layer */
    const char *classes;       /* the vLLM classes resolved to this kind     */
} qp_scheme_kind_info;

/* QP_ERR_INVALID_ARGUMENT for a kind out of range or a NULL / too small out
 * (set out->struct_size = sizeof *out first). */
QP_API qp_status qp_scheme_kind_describe(qp_scheme_kind kind, qp_scheme_kind_info *out);

/* Resolves `layer_name` of the given kind exactly as vLLM's
 * get_quant_method would. On a vLLM error the status says which exception
 * (QP_ERR_VALUE, QP_ERR_NOT_IMPLEMENTED, QP_ERR_CAPABILITY) and
 * qp_last_error_info carries vLLM's message. `opts` may be NULL. */
QP_API qp_status qp_config_resolve(const qp_config *cfg, const char *layer_name,
                                   qp_layer_kind kind, const qp_resolve_options *opts,
                                   qp_scheme *out);

/* The shard names of a fused layer ("...qkv_proj" -> q_proj, k_proj,
 * v_proj) under the same packed-modules mapping resolve uses; *n_shards 0
 * when the layer is not fused. `proj` (may be NULL) gets the layer's last
 * dotted component. Pointers live as long as `cfg` / `opts`. */
QP_API qp_status qp_config_layer_shards(const qp_config *cfg, const char *layer, const qp_resolve_options *opts,
                                        const char *const **shards, size_t *n_shards, const char **proj);

/* vLLM's capability check for a resolved scheme: QP_ERR_CAPABILITY with
 * vLLM's message when `capability` < the scheme's minimum. */
QP_API qp_status qp_scheme_check_capability(qp_context *ctx, const qp_scheme *scheme,
                                            int capability);

/* -- Config-wide facts ---------------------------------------------------- */

/* KV-cache quantization of the whole config (docs/semantics.md §1): `out->dtype` NONE
 * when the cache is not quantized. */
QP_API qp_status qp_config_kv_cache(const qp_config *cfg, qp_qtensor *out);

/* Maps a checkpoint tensor name to the name vLLM loads it under
 * (".k_proj.output_scale" → ".attn.k_scale", ...). Names without a mapping
 * are copied unchanged. QP_ERR_INVALID_ARGUMENT when `cap` is too small. */
QP_API qp_status qp_config_map_scale_name(const qp_config *cfg, const char *name, char *out,
                                          size_t cap);

/* A human/JSON-friendly view of the config for `qport inspect`. */
typedef struct qp_config_summary {
    qp_method method;
    size_t n_layer_patterns; /* layer_quant_config entries                  */
    size_t n_excludes;
    const char *pack_method; /* as written, or NULL                          */
    const char *model_type;  /* from a whole config.json, or NULL           */
    const char *file;
} qp_config_summary;

QP_API qp_status qp_config_summarize(const qp_config *cfg, qp_config_summary *out);
/* The i-th layer_quant_config pattern / exclude entry (NULL past the end). */
QP_API const char *qp_config_layer_pattern(const qp_config *cfg, size_t i);
/* Quark's layer_type_quant_config keys ("Linear", ...). vLLM looks them up
 * with type(module) (a class, never a string key), so they never match
 * there (docs/semantics.md §3); the sglang dialect matches qp_resolve_options.layer_class. */
QP_API size_t qp_config_layer_type_count(const qp_config *cfg);
QP_API const char *qp_config_layer_type_key(const qp_config *cfg, size_t i);
QP_API const char *qp_config_exclude(const qp_config *cfg, size_t i);
/* Scheme of the global config / the i-th layer_quant_config entry, as a
 * linear layer that nothing else overrides would get it. */
QP_API qp_status qp_config_resolve_global(const qp_config *cfg, const qp_resolve_options *opts,
                                          qp_scheme *out);
QP_API qp_status qp_config_resolve_pattern(const qp_config *cfg, size_t i,
                                           const qp_resolve_options *opts, qp_scheme *out);

/* ------------------------------------------------------------------------ */
/* Marlin-QQQ layout (docs/semantics.md §10)                                */
/* ------------------------------------------------------------------------ */

/* Packs int4 codes q[K][N] (row k = input feature) into QQQ's checkpoint
 * tensor B, int32 [K/16][2N]. group_size -1: signed codes in [-8, 7];
 * 128: unsigned codes in [0, 15]. N % 64 == 0 and K % 128 == 0, with vLLM's
 * messages otherwise. `ctx` may be NULL (no error details). */
QP_API qp_status qp_qqq_pack_weight(qp_context *ctx, const int8_t *q, int K, int N, int group_size, int32_t *B);
/* QQQ weight quantization (docs/semantics.md §9) of w [K][N] (values
 * are first rounded to fp16, as vLLM quantizes fp16 weights): codes q
 * [K][N] (per-channel [-7, 7]; group 128: [0, 15] with the +8 offset),
 * s_channel [N] fp32 and, group 128, s_group [K/128][N] fp16 bits, in
 * natural order (pack with qp_qqq_pack_weight / qp_qqq_permute_scales).
 * An all-zero column or group gets zero codes and scales (vLLM: NaN). */
QP_API qp_status qp_qqq_quantize_weight(qp_context *ctx, const float *w, int K, int N, int group_size, int8_t *q,
                                        float *s_channel, uint16_t *s_group);
/* The inverse: B → q[K][N]. */
QP_API qp_status qp_qqq_unpack_weight(qp_context *ctx, const int32_t *B, int K, int N, int group_size, int8_t *q);
/* s_channel [N] fp32 and (group 128) s_group [K/128][N] fp16 bits, from
 * natural column order to the kernel's order, and back. */
QP_API qp_status qp_qqq_permute_scales(qp_context *ctx, const float *s_channel, const uint16_t *s_group, int K, int N,
                                       int group_size, float *s_channel_out, uint16_t *s_group_out);
QP_API qp_status qp_qqq_unpermute_scales(qp_context *ctx, const float *s_channel, const uint16_t *s_group, int K,
                                         int N, int group_size, float *s_channel_out, uint16_t *s_group_out);

/* ------------------------------------------------------------------------ */
/* int8 activation quantization (docs/semantics.md §12)                     */
/* ------------------------------------------------------------------------ */

/* x [m][k] fp32 → q int8, bit-exact with vLLM's scaled_int8_quant.
 * Static: `symmetric` → q = sat8(rne(x / scale)); otherwise
 * q = sat8(sat32(rne(x * (1/scale))) + azp). */
QP_API qp_status qp_quant_int8_static(qp_context *ctx, const float *x, size_t m, size_t k, float scale, int32_t azp,
                                      int symmetric, int8_t *q);
/* Dynamic per token: scales [m] (absmax/127, or (max-min)/255 when
 * asymmetric) and, asymmetric, azp [m] (NULL allowed when symmetric). */
QP_API qp_status qp_quant_int8_dynamic(qp_context *ctx, const float *x, size_t m, size_t k, int symmetric, int8_t *q,
                                       float *scales, int32_t *azp);

/* ------------------------------------------------------------------------ */
/* fp8 e4m3fn activation quantization (docs/semantics.md §13)              */
/* ------------------------------------------------------------------------ */

/* Static per-tensor: q = fp8(clamp(x * (1/scale))). */
QP_API qp_status qp_quant_fp8_static(qp_context *ctx, const float *x, size_t n, float scale, uint8_t *q);
/* Dynamic per-tensor: scale = absmax/448 (no minimum), q = fp8(x * (1/scale)). */
QP_API qp_status qp_quant_fp8_dynamic_tensor(qp_context *ctx, const float *x, size_t n, uint8_t *q, float *scale);
/* Dynamic per-token: s = max(min(absmax, ub)/448, 1/(448*512)), q = fp8(x / s);
 * scale_ub <= 0: no upper bound. */
QP_API qp_status qp_quant_fp8_dynamic_token(qp_context *ctx, const float *x, size_t m, size_t k, float scale_ub,
                                            uint8_t *q, float *scales);
/* Dynamic per-token-group (group 128 in vLLM): s = max(absmax, 1e-10)/448,
 * optionally rounded up to a power of two (UE8M0); scales [m][k/group]. */
QP_API qp_status qp_quant_fp8_group(qp_context *ctx, const float *x, size_t m, size_t k, size_t group,
                                    int ue8m0_scales, uint8_t *q, float *scales);

/* ------------------------------------------------------------------------ */
/* Process-after-loading (docs/semantics.md §15, §16, §18)                  */
/* ------------------------------------------------------------------------ */

/* Fused fp8 shards (rows shard_rows[i] of w [sum rows][K], in place) moved
 * to the largest scale through fp16, as vLLM does; *s_max_out gets it. */
QP_API qp_status qp_fp8_requantize_max_scale(qp_context *ctx, uint8_t *w, int K, const int *shard_rows, size_t n_shards,
                                             const float *scales, float *s_max_out);
/* e4m3fn → e4m3fnuz for ROCm gfx94x: 0x80 → 0x00, scales doubled. */
QP_API qp_status qp_fp8_normalize_fnuz(qp_context *ctx, uint8_t *w, size_t n, float *w_scale, size_t n_scale,
                                       float *input_scale, size_t n_input);
/* Per-shard scalars → one scale per output row (fused int8 layers). */
QP_API qp_status qp_scale_to_channelwise(qp_context *ctx, const float *shard_scales, const int *shard_rows,
                                         size_t n_shards, float *out, size_t out_len);

/* ------------------------------------------------------------------------ */
/* Reference kernels (cpu/): the oracle every backend is judged against     */
/* ------------------------------------------------------------------------ */

/* Activation dtypes: every reference forward but QQQ takes x,
 * bias and y in fp16 or bf16 (uint16_t bits) or fp32 (float), and returns
 * y in x.dtype as vLLM does; steps the emulations compute "in x.dtype" are
 * fp32 operations for F32, and nothing is rounded to 16 bits. QQQ is
 * fp16 only (vLLM: "The params dtype must be float16"). */

/* QQQ W4A8 linear (docs/semantics.md §11): x fp16 bits [M][K], the checkpoint tensors B
 * [K/16][2N], s_channel [N] and (group 128) s_group [K/128][N] fp16 bits in
 * Marlin order, optional fp16 bias [N]; y fp16 bits [M][N]. */
QP_API qp_status qp_ref_qqq_forward(qp_context *ctx, const uint16_t *x, int M, int K, int N, int group_size,
                                    const int32_t *B, const float *s_channel, const uint16_t *s_group,
                                    const uint16_t *bias, uint16_t *y);
/* W8A8-INT8 linear (docs/semantics.md §14, §15): the checkpoint weight int8 [N][K]. */
typedef struct qp_ref_int8_args {
    qp_dtype dtype;        /* of x, bias and y: QP_DTYPE_F16, BF16 or F32    */
    const void *x;         /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    const int8_t *w;       /* [N][K] */
    const float *w_scale;  /* [N] (per channel) or [1] */
    int w_per_channel;
    int is_static;         /* static per-tensor activations, else dynamic per token */
    int symmetric;
    float input_scale;     /* static */
    int32_t input_zp;      /* static asymmetric (after qp_int8_static_asym_rebuild) */
    const void *bias;      /* [N] in dtype, or NULL */
} qp_ref_int8_args;
/* y [M][N] in dtype: the epilogue's fp32 result, rounded to fp16/bf16 or
 * stored as is for F32 (out dtype = x.dtype, docs/semantics.md §15). */
QP_API qp_status qp_ref_w8a8_int8_forward(qp_context *ctx, const qp_ref_int8_args *args, void *y);
/* W8A8-FP8 linear (docs/semantics.md §16): e4m3fn weight [N][K]; per-block weights
 * carry w_scale [ceil(N/128)][K/128] and need QP_FP8_ACT_GROUP128. */
typedef enum qp_fp8_act {
    QP_FP8_ACT_STATIC = 0,      /* kFp8StaticTensorSym   */
    QP_FP8_ACT_DYNAMIC_TENSOR,  /* kFp8DynamicTensorSym  */
    QP_FP8_ACT_DYNAMIC_TOKEN,   /* kFp8DynamicTokenSym   */
    QP_FP8_ACT_GROUP128         /* kFp8Dynamic128Sym     */
} qp_fp8_act;
typedef struct qp_ref_fp8_args {
    qp_dtype dtype;        /* of x, bias and y: QP_DTYPE_F16, BF16 or F32    */
    const void *x;         /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    const uint8_t *w;      /* [N][K] e4m3fn codes */
    const float *w_scale;  /* [N], [1], or per-block [ceil(N/128)][K/128] */
    int w_per_channel;
    qp_fp8_act act;
    float input_scale;     /* QP_FP8_ACT_STATIC */
    int ue8m0;             /* QP_FP8_ACT_GROUP128: power-of-two activation scales */
    const void *bias;      /* [N] in dtype, or NULL */
} qp_ref_fp8_args;
/* y [M][N] in dtype (the model dtype, = x.dtype here, docs/semantics.md §16). */
QP_API qp_status qp_ref_w8a8_fp8_forward(qp_context *ctx, const qp_ref_fp8_args *args, void *y);
/* W4A16 INT4/UINT4 (docs/semantics.md §17): Quark checkpoint tensors, packed along N. */
typedef struct qp_ref_w4a16_args {
    qp_dtype dtype;             /* of x, scale, bias and y: F16, BF16 or F32 (params dtype) */
    const void *x;              /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    const int32_t *weight;      /* [K][ceil(N/8)] */
    const int32_t *zero_point;  /* [K/g][ceil(N/8)], asymmetric only */
    const void *scale;          /* [K/g][8*ceil(N/8)] in dtype */
    int group_size;             /* 32, 64, 128, or -1 (one group over K) */
    int symmetric;
    qp_pack_method pack;        /* QP_PACK_ORDER or QP_PACK_REORDER */
    const void *bias;           /* [N] in dtype, or NULL */
} qp_ref_w4a16_args;
/* y [M][N] in dtype: the fp64 sum rounded once to dtype. */
QP_API qp_status qp_ref_w4a16_forward(qp_context *ctx, const qp_ref_w4a16_args *args, void *y);
/* W4A8 MXFP4 weights + static fp8 activations (docs/semantics.md §7). */
typedef struct qp_ref_w4a8_mxfp4_args {
    qp_dtype dtype;               /* of x, bias and y: F16, BF16 or F32 */
    const void *x;                /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    const uint8_t *weight;        /* [N][K/2] fp4 pairs, element 2i low */
    const uint8_t *weight_scale;  /* [N][K/32] e8m0 */
    float input_scale;            /* max over shards (process-after-loading) */
    const void *bias;             /* [N] in dtype, or NULL */
} qp_ref_w4a8_mxfp4_args;
/* y [M][N] in dtype; "in x.dtype" steps are fp32 operations for F32. */
QP_API qp_status qp_ref_w4a8_mxfp4_fp8_forward(qp_context *ctx, const qp_ref_w4a8_mxfp4_args *args, void *y);
/* OCP-MX linear (QuarkOCP_MX emulation, docs/semantics.md §5, §6, §7): MX weights dequantized
 * to x.dtype, activations fake-quantized (qdq) per their key, y = x' @ W^T
 * + bias summed in double and rounded once to x.dtype (F.linear). */
typedef enum qp_ocp_mx_act {
    QP_OCP_MX_ACT_NONE = 0,     /* weight-only: activation key None          */
    QP_OCP_MX_ACT_MXFP4,        /* kMxfp4Dynamic                             */
    QP_OCP_MX_ACT_MXFP6_E3M2,   /* kMxfp6E3M2Dynamic (with fp4 or e3m2 weights) */
    QP_OCP_MX_ACT_MXFP6_E2M3,   /* kMxfp6E2M3Dynamic (with fp4 or e2m3 weights) */
    QP_OCP_MX_ACT_MXFP8,        /* kMxfp8Dynamic: fp8_e4m3 per_group 32      */
    /* Per-tensor fp8 activations (OCP_MX_Scheme w_*_a_fp8): QuarkOCP_MX's
     * key check refuses both for linear layers (docs/semantics.md §4), so these return
     * QP_ERR_VALUE with the resolver's message; static fp8 with MXFP4
     * weights is qp_ref_w4a8_mxfp4_fp8_forward. */
    QP_OCP_MX_ACT_FP8_DYNAMIC,  /* kFp8DynamicTensorSym                      */
    QP_OCP_MX_ACT_FP8_STATIC    /* kFp8StaticTensorSym                       */
} qp_ocp_mx_act;
typedef struct qp_ref_ocp_mx_args {
    qp_dtype dtype;               /* of x, bias and y: F16, BF16 or F32 */
    const void *x;                /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    qp_dtype w_elem;              /* F4_E2M1, F6_E2M3, F6_E3M2 or F8_E4M3FN */
    const uint8_t *weight;        /* fp4 pairs [N][K/2], fp6 quads [N][3K/4], fp8 [N][K] */
    const uint8_t *weight_scale;  /* [ceil(N/R)][K/32] e8m0 */
    int scale_rows;               /* R: MXFP8 per_block [R,32] checkpoints; 0 or 1: one row each */
    qp_ocp_mx_act act;
    const void *bias;             /* [N] in dtype, or NULL */
} qp_ref_ocp_mx_args;
/* y [M][N] in dtype; with F32 the dequant, qdq and output are fp32 (exact
 * scales: fp32 holds every e8m0 power of two, 2^-127 as a subnormal). */
QP_API qp_status qp_ref_ocp_mx_forward(qp_context *ctx, const qp_ref_ocp_mx_args *args, void *y);
/* NVFP4 linear (QuarkNVFP4 emulation, docs/semantics.md §8): fp4 weights with e4m3
 * block scales (16 along K) and a global scale, activations quantized
 * dynamically (qp_quant_nvfp4) and dequantized to x.dtype, y = x' @ W^T
 * rounded to x.dtype, then + bias in x.dtype. The global scales are the
 * values after process-after-loading: the max over fused shards. */
typedef struct qp_ref_nvfp4_args {
    qp_dtype dtype;               /* of x, bias and y: F16, BF16 or F32 */
    const void *x;                /* [M][K]: uint16_t bits (F16/BF16) or float (F32) */
    int M, K, N;
    const uint8_t *weight;        /* [N][K/2] fp4 pairs, element 2i low */
    const uint8_t *weight_scale;  /* [N][K/16] e4m3fn codes */
    float weight_scale_2;         /* weight_global_scale = max(weight_scale_2) */
    float input_scale_2;          /* input_global_scale = max(input_scale_2) */
    const void *bias;             /* [N] in dtype, or NULL */
    /* The quantizing multiplier g itself where the checkpoint stores it
     * (compressed-tensors' input_global_scale, max over shards); 0: g =
     * 1 / input_scale_2 (Quark), and input_scale_2 is then ignored when set. */
    float input_global_scale_inv;
} qp_ref_nvfp4_args;
/* y [M][N] in dtype; with F32 every "to x.dtype" cast is the identity. */
QP_API qp_status qp_ref_nvfp4_forward(qp_context *ctx, const qp_ref_nvfp4_args *args, void *y);
/* Unquantized linear (excluded layers; the fp16 baseline of `qport bench`):
 * weight [N][K] in dtype, y = x @ W^T + bias summed in double, rounded once
 * to dtype. */
QP_API qp_status qp_ref_unquantized_forward(qp_context *ctx, qp_dtype dtype, const void *x, int M, int K, int N,
                                            const void *weight, const void *bias, void *y);
/* Quark online input rotation (vLLM InputHadamardLinearMethod with
 * rotate_weight=False): x [M][K] in dtype is multiplied block-diagonally by
 * the normalized Hadamard H / sqrt(r), blocks of r along k (K % r == 0):
 *   y[m][b*r + j] = rnd( fp32(S) * c ),  S = sum_{i=0..r-1} x[m][b*r+i] * H[i][j]
 * with S accumulated in fp32 in increasing i (each term is exact, so every
 * backend gets the same bits), c = (float)(1 / sqrt(r)), rnd = RNE to dtype.
 * vLLM does not pin its rounding; qport fixes this order so the rotated
 * activations -- which feed a discontinuous MX quantizer -- are identical on
 * every device. H entries must be +-1. */
QP_API qp_status qp_ref_rotation_forward(qp_context *ctx, qp_dtype dtype, const void *x, int M, int K,
                                         const int8_t *H, int r, void *y);
/* fp32(1 / sqrt(r)): the normalization the rotation kernels multiply by. */
QP_API float qp_rotation_norm(int r);

/* fp8 e4m3 KV cache (QuarkKVCacheMethod; vLLM's reshape_and_cache with
 * kv_cache_dtype fp8_e4m3 and per-tensor k_scale / v_scale):
 *   quantize:   q = e4m3fn( fp32(x) / scale ), correctly rounded division,
 *               RNE, saturating to +-448 (__NV_SATFINITE), NaN -> NaN;
 *   dequantize: x' = rnd_dtype( value(q) * scale ).
 * dtype is the model dtype (F16, BF16 or F32); scale finite and > 0. */
QP_API qp_status qp_ref_kv_quantize(qp_context *ctx, qp_dtype dtype, const void *x, size_t n, float scale,
                                    uint8_t *q);
QP_API qp_status qp_ref_kv_dequantize(qp_context *ctx, qp_dtype dtype, const uint8_t *q, size_t n, float scale,
                                      void *x);
/* Fused static asymmetric shards (docs/semantics.md §15): one scale, one truncated azp. */
QP_API qp_status qp_int8_static_asym_rebuild(qp_context *ctx, const float *scales, const int32_t *zps, size_t n,
                                             float *scale_out, int32_t *azp_out);
/* The per-group int8 weight of docs/semantics.md §11 step 2 for t = q4 - 8 in [-8, 7]. */
QP_API int8_t qp_ref_qqq_group_weight(int t, uint16_t s_group_bits);

/* ------------------------------------------------------------------------ */
/* Named host tensors (checkpoint tensors handed to qp_linear_create)       */
/* ------------------------------------------------------------------------ */

#define QP_TENSOR_MAX_DIMS 4

/* A host tensor the caller owns: `data` holds prod(shape) elements of
 * `dtype`, row-major, packed dtypes (I4/U4/F4/F6) as the checkpoint stores
 * them (the shape is then the stored shape, e.g. uint8 [N][K/2] with dtype
 * U8). ndim 0 is a scalar. */
typedef struct qp_tensor {
    const char *name;      /* checkpoint name: "weight", "weight_scale", "B"... */
    qp_dtype dtype;
    int ndim;
    int64_t shape[QP_TENSOR_MAX_DIMS];
    const void *data;
} qp_tensor;

/* Bytes of a tensor's data (0 for an invalid dtype or shape). */
QP_API size_t qp_tensor_bytes(const qp_tensor *t);

/* ------------------------------------------------------------------------ */
/* Devices (docs/backends.md)                                               */
/* ------------------------------------------------------------------------ */

/* Devices belong to a context: the first device call of a context loads
 * the backends (the built-in `cpu` reference, and the plugins
 * libqport-vk.so, libqport-cl.so, libqport-cuda.so from the install's
 * plugin folder or QPORT_BACKEND_PATH). A missing plugin, runtime library or
 * driver means zero devices from that backend and a logged reason, never an
 * error. Device handles stay valid until qp_context_destroy.
 *
 * Threads: a device may be used from several threads; calls on one device
 * are serialised internally (one queue per device). */
typedef struct qp_device qp_device;

typedef enum qp_device_kind {
    QP_DEVICE_DISCRETE_GPU = 0,
    QP_DEVICE_INTEGRATED_GPU,
    QP_DEVICE_VIRTUAL_GPU,
    QP_DEVICE_CPU_CLASS,    /* a GPU API implemented on the CPU (lavapipe, PoCL) */
    QP_DEVICE_REFERENCE     /* qport's own `cpu` reference backend               */
} qp_device_kind;

QP_API const char *qp_device_kind_name(qp_device_kind kind);

/* What the hardware and driver offer, backend-neutral; -1 where unknown. */
typedef struct qp_device_caps {
    int int8_storage;         /* 8-bit loads/stores in kernels              */
    int int8_arith;           /* 8-bit integer arithmetic                   */
    int fp16_arith;           /* fp16 arithmetic (not only storage)         */
    int bf16;                 /* bf16 conversions or arithmetic             */
    int int_dot;              /* 4x8-bit integer dot product instructions   */
    int int_dot_accelerated;  /* ... that the driver says are fast          */
    int tensor_core_int8;     /* int8 matrix instructions (mma.sync s8)     */
    int tensor_core_fp8;      /* e4m3 matrix instructions                   */
    int subgroup_min, subgroup_max;
    int64_t shared_mem_bytes; /* per workgroup                               */
    int64_t max_buffer_bytes; /* largest single buffer binding              */
    int64_t max_alloc_bytes;  /* largest single allocation                  */
} qp_device_caps;

typedef struct qp_device_info {
    size_t struct_size;           /* set by the caller: sizeof(qp_device_info) */
    char backend[16];             /* "cpu", "vulkan", "opencl", "cuda"       */
    int index;                    /* within its backend: "vulkan:<index>"    */
    char name[128];
    char vendor[64];
    char driver[128];             /* driver name and version                 */
    char api_version[32];         /* "1.3.230", "OpenCL 3.0", "13.0", ...     */
    qp_device_kind kind;
    uint64_t memory_bytes;        /* device-local memory                     */
    uint8_t uuid[16];
    int has_uuid;
    int cuda_cc;                  /* major*10+minor on CUDA, else -1         */
    /* When this physical device is also listed through a higher-priority
     * backend (same UUID): that device's "backend:index", else "". */
    char same_as[24];
    qp_device_caps caps;
} qp_device_info;

typedef enum qp_support_level {
    QP_SUPPORT_NATIVE = 0,    /* the scheme's arithmetic runs on the device  */
    QP_SUPPORT_EMULATED,      /* runs, but through a slower generic path     */
    QP_SUPPORT_UNSUPPORTED
} qp_support_level;

QP_API const char *qp_support_level_name(qp_support_level level);

typedef struct qp_support_info {
    qp_support_level level;
    char reason[256];         /* why emulated / unsupported; "" when native */
} qp_support_info;

/* All devices of all loaded backends, in priority order (docs/backends.md). */
QP_API qp_status qp_device_count(qp_context *ctx, size_t *n);
QP_API qp_status qp_device_get(qp_context *ctx, size_t i, qp_device **out);
/* "cpu", "vulkan", "vulkan:1", "cuda:0", "opencl:2" (backend-relative
 * index), or a case-insensitive substring of the device name.
 * QP_ERR_NOT_FOUND naming the spec and listing what exists. */
QP_API qp_status qp_device_find(qp_context *ctx, const char *spec, qp_device **out);
QP_API qp_status qp_device_get_info(const qp_device *dev, qp_device_info *out);
/* Whether `scheme` runs on `dev` at shape M x N x K (M, N, K <= 0: any). */
QP_API qp_status qp_device_supports(qp_device *dev, const qp_scheme *scheme, int M, int N, int K,
                                    qp_support_info *out);
/* QPORT_DEVICE if set (an invalid or unmatched value is an error), else the
 * best device that runs `scheme` natively, then one that emulates it, in
 * the order CUDA GPU, Vulkan discrete, OpenCL discrete, integrated,
 * CPU-class; the `cpu` reference only when no other device runs it.
 * `scheme` NULL: the best device for any scheme. */
QP_API qp_status qp_device_pick(qp_context *ctx, const qp_scheme *scheme, qp_device **out);
/* The QPORT_LOG level (debug|info|warn|error|none), `dflt` when unset;
 * QP_ERR_INVALID_ARGUMENT for another value. For tools installing a log
 * callback; the library itself never prints. */
QP_API qp_status qp_log_level_from_env(qp_context *ctx, qp_log_level dflt, qp_log_level *out);
/* Waits for all queued work on the device. */
QP_API qp_status qp_device_synchronize(qp_device *dev);

/* The backends the context tried to load: name, whether it loaded, and why
 * not (or "" / a note such as "0 devices: no Vulkan driver"). i past the
 * end: QP_ERR_NOT_FOUND. */
typedef struct qp_backend_status {
    const char *name;
    const char *path;         /* plugin file, "" for the built-in cpu        */
    int loaded;
    int n_devices;
    const char *note;
} qp_backend_status;
QP_API qp_status qp_backend_get_status(qp_context *ctx, size_t i, qp_backend_status *out);

/* -- Device buffers ------------------------------------------------------ */

typedef struct qp_buffer qp_buffer;
QP_API qp_status qp_buffer_create(qp_device *dev, size_t bytes, qp_buffer **out);
QP_API void qp_buffer_destroy(qp_buffer *buf);
QP_API qp_status qp_buffer_upload(qp_buffer *buf, size_t offset, const void *src, size_t bytes);
QP_API qp_status qp_buffer_download(qp_buffer *buf, size_t offset, void *dst, size_t bytes);
QP_API size_t qp_buffer_size(const qp_buffer *buf);

/* ------------------------------------------------------------------------ */
/* Quantized linear layers                                                   */
/* ------------------------------------------------------------------------ */

typedef struct qp_linear qp_linear;

/* Code paths a backend may be forced onto (tests, `qport conform`). */
#define QP_PATH_AUTO        0u
#define QP_PATH_GEMV        (1u << 0) /* the small-M, memory-bound kernel     */
#define QP_PATH_TILED       (1u << 1) /* the tiled, shared-memory kernel      */
#define QP_PATH_INT_DOT     (1u << 2) /* integer dot-product instructions on  */
#define QP_PATH_NO_INT_DOT  (1u << 3) /* ... off (plain int32 multiply-add)   */

typedef struct qp_linear_options {
    size_t struct_size;       /* sizeof(qp_linear_options)                   */
    qp_dtype act_dtype;       /* x, bias, y: QP_DTYPE_F16 (default), BF16 or
                               * F32 (F32: the cpu reference only; QQQ: F16) */
    unsigned path;            /* QP_PATH_* mask, 0 = the backend's choice     */
    const char *layer;        /* name for messages (NULL: "")                */
    /* Fused layers (qkv_proj, gate_up_proj) with one scale per shard: the
     * rows of each shard, in order (they sum to N; none negative; at most
     * 64 -- otherwise QP_ERR_INVALID_ARGUMENT naming shard_rows). NULL or
     * n_shards 0 when not fused. */
    const int *shard_rows;
    size_t n_shards;
    /* W8A8-FP8 per-block: power-of-two (UE8M0) activation group scales, as
     * vLLM computes them where DeepGEMM's E8M0 path runs (Blackwell,
     * VLLM_USE_DEEP_GEMM_E8M0); 0 (default): fp32 scales absmax/448 as on
     * every other GPU. The checkpoint does not say which; the runtime does. */
    int act_ue8m0;
    /* Rows the layer's scratch is reserved for at creation (0: 16, a decode
     * batch): enqueues of up to max_m rows allocate nothing. */
    int max_m;
} qp_linear_options;

QP_API void qp_linear_options_init(qp_linear_options *opts);

/* Binds the checkpoint tensors of one layer (by their checkpoint names:
 * Quark `weight`, `weight_scale`, `input_scale`, `weight_zero_point`,
 * `input_zero_point`, ...; QQQ `B`, `s_channel`, `s_group`; optional
 * `bias`), checks dtypes and shapes against the scheme (errors name the
 * tensor and the rule), applies vLLM's process-after-loading and puts the
 * layer on `dev` in the backend's layout. The caller's tensors are not
 * referenced after the call. */
QP_API qp_status qp_linear_create(qp_device *dev, const qp_scheme *scheme, int N, int K,
                                  const qp_tensor *tensors, size_t n_tensors,
                                  const qp_linear_options *opts, qp_linear **out);
QP_API void qp_linear_destroy(qp_linear *lin);
/* y[M][N] = linear(x[M][K]) with host memory: x in the layer's act_dtype
 * (fp16/bf16 bits, 2 bytes, or fp32, 4 bytes), y in the output dtype
 * (qp_linear_out_dtype: act_dtype, F16 for QQQ). */
QP_API qp_status qp_linear_forward(qp_linear *lin, const void *x, int M, void *y);
/* The same on device buffers of the layer's device (no host copies); x
 * holds at least M*K and y M*N elements of their dtypes. */
QP_API qp_status qp_linear_forward_buffers(qp_linear *lin, qp_buffer *x, int M, qp_buffer *y);
QP_API qp_dtype qp_linear_out_dtype(const qp_linear *lin);
/* The code path the backend takes for M rows ("gemv int-dot", ...). */
QP_API qp_status qp_linear_describe(const qp_linear *lin, int M, char *out, size_t cap);

/* -- fp8 KV cache on a device ---------------------------------------------- */
/* The same as qp_ref_kv_quantize / qp_ref_kv_dequantize on device buffers of
 * `dev`: src holds n elements of dtype (quantize) or n fp8 codes
 * (dequantize). QP_ERR_UNSUPPORTED when the backend has no KV-cache kernel
 * (never a silent CPU fallback). */
QP_API qp_status qp_kv_quantize(qp_device *dev, qp_dtype dtype, qp_buffer *src, size_t n, float scale,
                                qp_buffer *dst);
QP_API qp_status qp_kv_dequantize(qp_device *dev, qp_dtype dtype, qp_buffer *src, size_t n, float scale,
                                  qp_buffer *dst);

/* -- Benchmarks (`qport bench`) -------------------------------------------- */
/* Timings come from the backend's device timers (CUDA events, Vulkan
 * timestamp queries, OpenCL profiling events); the `cpu` reference times on
 * the host (clock_gettime) and says so. A backend without the op gives
 * QP_ERR_UNSUPPORTED naming the backend (never a host-timed fallback).
 * Each call is serialised with the device's other work. */

/* Runs the layer `reps` times back to back on device buffers (as
 * qp_linear_forward_buffers: x holds M*K elements of the act dtype, y M*N
 * of the output dtype; M >= 1, 1 <= reps <= 100000) and writes each run's
 * device time in milliseconds to total_ms[i] (activation quantization
 * included) and to gemm_ms[i] the same run's GEMM kernels alone, or a
 * negative value when the path fuses the activation step into the GEMM.
 * gemm_ms may be NULL. A layer with an input rotation is rotated once,
 * untimed, before the timed runs (the rotation is not part of the times). */
QP_API qp_status qp_linear_time(qp_linear *lin, qp_buffer *x, int M, qp_buffer *y, int reps, double *total_ms,
                                double *gemm_ms);
/* Device-to-device copy of `bytes` between two buffers of one device
 * (ranges inside the buffers; the same buffer only with disjoint ranges). */
QP_API qp_status qp_buffer_copy(qp_buffer *src, size_t src_off, qp_buffer *dst, size_t dst_off, size_t bytes);
/* Times `reps` copies of the first `bytes` of src into dst (two distinct
 * buffers of one device, 1 <= reps <= 100000); ms[i] per copy. The copy
 * reads and writes `bytes` each: the device's bandwidth limit is 2*bytes/ms. */
QP_API qp_status qp_buffer_copy_time(qp_buffer *src, qp_buffer *dst, size_t bytes, int reps, double *ms);
/* A vendor library's GEMM of shape M x N x K (y = x W^T) as a baseline:
 * `in` is QP_DTYPE_I8, F8_E4M3FN or F16 (fp16 output; int32 / fp32
 * accumulation), on buffers the backend allocates itself; `reps` timed runs
 * after warm-up, ms each. `name` (cap bytes, may be NULL when cap is 0)
 * gets the library and variant ("cuBLASLt 12.8 int8 TN"). Only CUDA has
 * one (cuBLASLt); elsewhere QP_ERR_UNSUPPORTED naming the backend. */
QP_API qp_status qp_vendor_gemm_time(qp_device *dev, qp_dtype in, int M, int N, int K, int reps, double *ms,
                                     char *name, size_t cap);

/* ------------------------------------------------------------------------ */
/* Embedding qport in an engine: asynchronous execution, the application's  */
/* device objects and memory (docs/c-api.md, "Embedding qport in an engine") */
/* ------------------------------------------------------------------------ */

/*
 * Execution model. Every call that takes device buffers -- qp_linear_enqueue,
 * qp_moe_enqueue, qp_kv_quantize / qp_kv_dequantize, qp_buffer_copy --
 * ENQUEUES its work on the device's one queue (Vulkan VkQueue, OpenCL
 * in-order cl_command_queue, CUDA stream) in call order and returns without
 * waiting. What can be checked at enqueue is returned at once (handles,
 * shapes, dtypes, buffer sizes, buffers of another device); a fault of the
 * device itself surfaces at the next qp_device_synchronize or qp_event_wait,
 * with the layer named. qp_buffer_upload / qp_buffer_download are blocking
 * and ordered after all work enqueued before them on the device. The
 * blocking forwards (qp_linear_forward[_buffers], qp_moe_forward[_topk])
 * are an enqueue followed by a synchronize.
 *
 * Memory: a layer reserves its scratch for `max_m` rows at creation
 * (qp_linear_options.max_m, qp_moe_options.max_m); an enqueue of at most
 * that many rows allocates nothing, creates no descriptor pool and rewrites
 * no descriptor set. A larger M grows the device's scratch once (the old
 * scratch is released when the work using it has completed).
 */

/* The native API of a device or buffer. */
typedef enum qp_native_api {
    QP_NATIVE_NONE = 0,
    QP_NATIVE_HOST,      /* the cpu reference: buffers are host memory      */
    QP_NATIVE_VULKAN,
    QP_NATIVE_OPENCL,
    QP_NATIVE_CUDA
} qp_native_api;

/* The application's device objects for qp_device_import. Handles are
 * passed as void* (VkInstance, VkPhysicalDevice, VkDevice, VkQueue,
 * cl_context, cl_device_id, cl_command_queue, cudaStream_t), so this header
 * needs none of the runtimes' headers. */
typedef struct qp_device_import_desc {
    size_t struct_size;              /* qp_device_import_desc_init sets it   */
    qp_native_api api;
    /* Vulkan (1.2 or later). qport calls the application's loader through
     * vk_get_instance_proc_addr (PFN_vkGetInstanceProcAddr) and checks that
     * the device was created with what its shaders need, saying which
     * feature or extension is missing:
     *   required: storageBuffer16BitAccess, the extension
     *             VK_KHR_push_descriptor (qport records its bindings into
     *             the command buffer, so no descriptor set is ever shared
     *             with work in flight);
     *   used when enabled: shaderIntegerDotProduct (1.3 or
     *             VK_KHR_shader_integer_dot_product), shaderFloat64,
     *             timelineSemaphore (needed for qp_enqueue_sync's
     *             semaphores).
     * vk_enabled_features is the VkPhysicalDeviceFeatures2 chain (with
     * VkPhysicalDeviceVulkan11Features / 12 / 13 or the per-feature structs)
     * the device was created with, vk_enabled_extensions its extension
     * names. The queue belongs to vk_queue_family and must support compute.
     * qport submits to vk_queue from the threads that call it: the
     * application must not use that queue concurrently (Vulkan's external
     * synchronisation; serialise with qp_device_lock / qp_device_unlock). */
    void *vk_instance;
    void *vk_physical_device;
    void *vk_device;
    uint32_t vk_queue_family;
    void *vk_queue;
    void *vk_get_instance_proc_addr;
    const void *vk_enabled_features;
    const char *const *vk_enabled_extensions;
    uint32_t vk_n_enabled_extensions;
    /* OpenCL 1.2 or later: an in-order queue of that device and context
     * (out-of-order queues are refused: qport's kernels rely on queue order). */
    void *cl_context;
    void *cl_device;
    void *cl_queue;
    /* CUDA: the device ordinal and the application's stream (NULL: the legacy
     * default stream). Every call sets that device current and restores the
     * caller's current device before it returns. */
    int cuda_device;
    void *cuda_stream;
} qp_device_import_desc;

QP_API void qp_device_import_desc_init(qp_device_import_desc *d);
/* A qport device over the application's objects. qport never destroys what
 * it did not create: qp_device_release frees qport's own objects on it
 * (pipelines, command buffers, scratch) after waiting for its work; call it
 * before destroying the application's device, context or stream. The device
 * is not listed by qp_device_count / qp_device_get. Imported devices are
 * released with the context when not released before. */
QP_API qp_status qp_device_import(qp_context *ctx, const qp_device_import_desc *desc, qp_device **out);
QP_API void qp_device_release(qp_device *dev);

/* The native handles of any device (imported or created by qport), so an
 * engine can order its own work against qport's: the VkDevice and VkQueue
 * qport submits to, the cl_command_queue it enqueues on, the CUDA stream it
 * launches on. */
typedef struct qp_device_native {
    size_t struct_size;              /* set by the caller                     */
    qp_native_api api;
    int imported;                    /* 1: qp_device_import made it           */
    void *vk_instance, *vk_physical_device, *vk_device, *vk_queue;
    uint32_t vk_queue_family;
    void *cl_context, *cl_device, *cl_queue;
    int cuda_device;
    void *cuda_stream;
} qp_device_native;
QP_API qp_status qp_device_get_native(const qp_device *dev, qp_device_native *out);

/* Serialises the caller with qport's own submissions to the device's queue:
 * hold it while submitting to an imported VkQueue yourself. */
QP_API void qp_device_lock(qp_device *dev);
QP_API void qp_device_unlock(qp_device *dev);

/* Submits what qport has recorded for the device without waiting (Vulkan
 * batches the enqueued layers into command buffers; OpenCL clFlush; CUDA:
 * nothing to do). qp_device_synchronize and qp_event_record flush too. */
QP_API qp_status qp_device_flush(qp_device *dev);

/* The application's memory as a qp_buffer (no ownership taken;
 * qp_buffer_destroy releases only qport's wrapper). One of:
 *   Vulkan: vk_buffer (VkBuffer of the imported device's VkDevice, created
 *           with STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST usage), offset
 *           a multiple of minStorageBufferOffsetAlignment;
 *   OpenCL: cl_mem of the device's context, offset a multiple of
 *           CL_DEVICE_MEM_BASE_ADDR_ALIGN (a sub-buffer is made);
 *   CUDA:   cuda_ptr, device memory of the device (offset must be 0: pass
 *           the pointer you want), 16-byte aligned;
 *   host:   host_ptr on the cpu reference device.
 * size bytes from offset, which must lie inside the object. */
typedef struct qp_buffer_import_desc {
    size_t struct_size;
    void *vk_buffer;
    void *cl_mem;
    void *cuda_ptr;
    void *host_ptr;
    size_t offset;
    size_t size;
} qp_buffer_import_desc;
QP_API void qp_buffer_import_desc_init(qp_buffer_import_desc *d);
QP_API qp_status qp_buffer_import(qp_device *dev, const qp_buffer_import_desc *desc, qp_buffer **out);

/* What a buffer is natively (for DLPack export and interop): the object,
 * the byte offset of the qp_buffer's first byte in it, its size. */
typedef struct qp_buffer_native {
    size_t struct_size;
    qp_native_api api;
    int imported;
    void *vk_buffer;          /* Vulkan                                      */
    void *cl_mem;             /* OpenCL                                      */
    void *ptr;                /* CUDA device pointer / cpu host pointer,
                               * already including the offset                */
    size_t offset, size;
} qp_buffer_native;
QP_API qp_status qp_buffer_get_native(const qp_buffer *buf, qp_buffer_native *out);

/* Synchronisation with the application's own work, per enqueue. All fields
 * optional (zero: none); fields of another API than the device's are an
 * error.
 *   Vulkan: vk_wait_semaphore / vk_wait_value: a timeline semaphore the
 *     submission holding this work waits on (at compute-shader stage);
 *     vk_signal_semaphore / vk_signal_value: signalled when it completes
 *     (both end the current batch: the work is submitted at once).
 *     vk_command_buffer: record into the application's VkCommandBuffer (in
 *     the recording state, of a pool of the device's queue family) instead
 *     of qport's; the application submits it. Barrier contract: qport
 *     expects the inputs' writes made available to compute-shader reads
 *     before its first command (the application's barrier), and leaves its
 *     outputs behind a compute-shader-write -> compute-shader-read|write and
 *     transfer-read barrier; between its own dispatches it places its own
 *     barriers. The command buffer must be executed on the imported queue
 *     in recording order relative to qport's other work on the device.
 *   OpenCL: cl_wait_list / cl_n_wait: events (cl_event) the work waits for;
 *     cl_out_event: receives a cl_event completing with the work (the
 *     caller releases it with clReleaseEvent).
 *   CUDA: cuda_wait_event (cudaEvent_t) the stream waits for first;
 *     cuda_record_event recorded on the stream after the work. */
typedef struct qp_enqueue_sync {
    size_t struct_size;
    void *vk_wait_semaphore;
    uint64_t vk_wait_value;
    void *vk_signal_semaphore;
    uint64_t vk_signal_value;
    void *vk_command_buffer;
    const void *const *cl_wait_list;
    uint32_t cl_n_wait;
    void **cl_out_event;
    void *cuda_wait_event;
    void *cuda_record_event;
} qp_enqueue_sync;
QP_API void qp_enqueue_sync_init(qp_enqueue_sync *s);

/* y[M][N] = linear(x[M][K]) enqueued on device buffers of the layer's device
 * (x: M*K elements of the act dtype, y: M*N of qp_linear_out_dtype); sync
 * may be NULL. Returns once the work is enqueued. */
QP_API qp_status qp_linear_enqueue(qp_linear *lin, qp_buffer *x, int M, qp_buffer *y, const qp_enqueue_sync *sync);

/* Completion markers. qp_event_record marks everything enqueued on the
 * device so far (flushing it); qp_event_wait blocks until that work is done
 * and returns its errors (naming the layer); qp_event_query sets *done
 * without blocking. */
typedef struct qp_event qp_event;
QP_API qp_status qp_event_record(qp_device *dev, qp_event **out);
QP_API qp_status qp_event_wait(qp_event *ev);
QP_API qp_status qp_event_query(qp_event *ev, int *done);
QP_API void qp_event_destroy(qp_event *ev);

/* Per-device counters, for tests and tuning: host waits qport performed
 * (fence / event / stream waits), submissions, device allocations. */
typedef struct qp_device_stats {
    size_t struct_size;
    uint64_t host_waits, submissions, allocations;
} qp_device_stats;
QP_API qp_status qp_device_get_stats(const qp_device *dev, qp_device_stats *out);

/* ------------------------------------------------------------------------ */
/* safetensors checkpoints                                                   */
/* ------------------------------------------------------------------------ */

/* A safetensors file, memory-mapped. The header is validated completely on
 * open (QP_ERR_PARSE naming the file and tensor: header length beyond 100
 * MB or the file, bad JSON, unknown dtype, byte ranges that are reversed,
 * outside the data, overlapping, leaving holes, or not equal to dtype size
 * x shape). Tensors returned point into the mapping and stay valid until
 * close. dtypes without a qport equivalent (F64, I64, ...) come back as
 * QP_DTYPE_NONE with their safetensors name. */
typedef struct qp_safetensors qp_safetensors;
QP_API qp_status qp_safetensors_open(qp_context *ctx, const char *path, qp_safetensors **out);
/* The same over a caller's buffer (not copied; must outlive the object). */
QP_API qp_status qp_safetensors_open_buffer(qp_context *ctx, const char *name, const void *data, size_t len,
                                            qp_safetensors **out);
QP_API void qp_safetensors_close(qp_safetensors *f);
QP_API size_t qp_safetensors_count(const qp_safetensors *f);
/* The i-th tensor in header order; `dtype_name` (may be NULL) gets "F16"... */
QP_API qp_status qp_safetensors_get(const qp_safetensors *f, size_t i, qp_tensor *out, const char **dtype_name);
QP_API qp_status qp_safetensors_find(const qp_safetensors *f, const char *name, qp_tensor *out);
/* A __metadata__ string, or NULL. */
QP_API const char *qp_safetensors_metadata(const qp_safetensors *f, const char *key);
/* Writes tensors (and `n_meta` key/value string pairs, meta[2i], meta[2i+1])
 * atomically (temporary file + rename). */
QP_API qp_status qp_safetensors_write(qp_context *ctx, const char *path, const qp_tensor *tensors, size_t n,
                                      const char *const *meta, size_t n_meta);

/* ------------------------------------------------------------------------ */
/* Model architectures (api/arch.c, docs/loading.md)                        */
/* ------------------------------------------------------------------------ */

/* What kind of module vLLM's model class builds for a name, as its quant
 * config's get_quant_method sees it. */
typedef enum qp_module_class {
    QP_MODULE_LINEAR = 0,           /* LinearBase built with the quant config   */
    QP_MODULE_LINEAR_UNQUANTIZED,   /* LinearBase built with quant_config=None:
                                     * MoE routers (but Qwen3-MoE's), Qwen-MoE's
                                     * shared_expert_gate                        */
    QP_MODULE_LM_HEAD,              /* ParallelLMHead (a VocabParallelEmbedding) */
    QP_MODULE_EMBEDDING,            /* VocabParallelEmbedding (embed_tokens)    */
    QP_MODULE_ROUTED_EXPERTS,       /* FusedMoE (RoutedExperts)                 */
    QP_MODULE_ATTENTION             /* Attention (the KV cache)                 */
} qp_module_class;
QP_API const char *qp_module_class_name(qp_module_class cls);

/* Whether `method`'s get_quant_method returns a quant method for a module
 * of class `cls` at all (before any exclude list): Quark (vLLM 0.34.0)
 * LinearBase, Attention and FusedMoE; QQQ (vLLM 0.8.5) LinearBase only;
 * HF fp8 LinearBase, FusedMoE and Attention. No method quantizes
 * ParallelLMHead or embeddings (vLLM runs them with
 * UnquantizedEmbeddingMethod from their `.weight`), nor a module built
 * with quant_config=None. */
QP_API int qp_method_quantizes(qp_method method, qp_module_class cls);

/* How an MoE router scores experts (vLLM scoring_func). */
typedef enum qp_moe_scoring { QP_MOE_SOFTMAX = 0, QP_MOE_SIGMOID } qp_moe_scoring;

/* Which decoder layers hold an MoE block. */
typedef enum qp_moe_layers {
    QP_MOE_LAYERS_ALL = 0,    /* every layer (Mixtral)                        */
    QP_MOE_LAYERS_DEEPSEEK,   /* l >= first_k_dense_replace, l % moe_layer_freq == 0 */
    QP_MOE_LAYERS_STEP        /* (l + 1) % moe_layer_freq == 0 (Qwen-MoE's
                               * decoder_sparse_step, Llama-4's
                               * interleave_moe_layer_step)                  */
} qp_moe_layers;

/* One architecture as vLLM's model class builds it, for one config.json.
 * Set struct_size = sizeof(qp_arch_info) before the call. Strings are
 * static or live as long as the config. */
typedef struct qp_arch_info {
    size_t struct_size;
    int known;                      /* 0: not in the table; the Llama rules    */
    const char *name;               /* vLLM's class ("DeepseekV3ForCausalLM"),
                                     * the config's architectures[0] when
                                     * unknown, or NULL                        */
    /* packed_modules_mapping as the class builds it for this config
     * (DeepSeek's fused_qkv_a_proj only with a q_lora_rank, Qwen2-MoE's
     * gate_up_proj only with a shared expert or mlp_only_layers); NULL
     * when unknown */
    const qp_packed_module *packed;
    size_t n_packed;
    /* MoE: the block under a decoder layer ("mlp", "block_sparse_moe",
     * "feed_forward"; NULL: a dense model), its routed experts ("experts"),
     * their projections as checkpoints spell them (gate, up, down), the
     * router ("gate", "router") and whether it is built with the quant
     * config, the shared experts ("shared_experts", "shared_expert") and
     * their gate (Qwen-MoE), all siblings of "experts" */
    const char *moe_block, *experts, *expert_proj[3], *router;
    int router_quantized;
    const char *shared_experts, *shared_expert_gate;
    /* routing: the default scoring, grouped top-k (DeepSeek:
     * use_grouped_topk=True with n_group / topk_group), a
     * e_score_correction_bias (topk_method "noaux_tc": an fp32 parameter
     * of the router), renormalize (-1: config's norm_topk_prob) */
    qp_moe_scoring scoring;
    int grouped_topk, correction_bias, renormalize;
    /* the keys vLLM reads for the expert count and an expert's
     * intermediate size, and their values (-1: absent) */
    const char *num_experts_key, *moe_intermediate_key;
    long long num_experts, moe_intermediate_size;
    qp_moe_layers moe_layer_rule;
    long long first_k_dense_replace, moe_layer_freq;
    const char *note;               /* what qport does not model, or NULL     */
} qp_arch_info;

/* The architecture of a config loaded from a whole config.json
 * (architectures[0], else model_type, else text_config's model_type).
 * A bare quantization_config has none: known 0. */
QP_API qp_status qp_config_arch(const qp_config *cfg, qp_arch_info *out);
/* A table row by vLLM class and/or model_type, with the class's
 * unconditional packed entries; QP_ERR_NOT_FOUND (and the Llama rules,
 * known 0) when neither names one. */
QP_API qp_status qp_arch_lookup(const char *architecture, const char *model_type, qp_arch_info *out);
/* The table's rows: vLLM class names and their model_type values. */
QP_API size_t qp_arch_count(void);
QP_API const char *qp_arch_name(size_t i);
QP_API const char *qp_arch_model_types(size_t i);
/* The class of a module name ("model.layers.3.mlp.gate", "lm_head"). */
QP_API qp_module_class qp_arch_module_class(const qp_arch_info *arch, const char *module);
/* The same as the vLLM version `method` follows builds it (Quark and fp8:
 * 0.34.0; QQQ: 0.8.5, where Qwen3-MoE's router had quant_config=None). */
QP_API qp_module_class qp_arch_module_class_vllm(const qp_arch_info *arch, qp_method method, const char *module);
/* Whether decoder layer `layer` has an MoE block. */
QP_API int qp_arch_layer_is_moe(const qp_arch_info *arch, long layer);
/* The packed-modules mapping resolution uses with `opts` (NULL: defaults):
 * opts->packed, else the config's own packed_modules_mapping, else the
 * architecture's, else the Llama default. */
QP_API qp_status qp_config_packed_modules(const qp_config *cfg, const qp_resolve_options *opts,
                                          const qp_packed_module **mods, size_t *n);

/* ------------------------------------------------------------------------ */
/* Model directories and layer binding                                       */
/* ------------------------------------------------------------------------ */

/* A model directory: config.json (with or without quantization_config) and
 * model.safetensors, or the shards of model.safetensors.index.json (file
 * names must be plain names inside the directory), or every *.safetensors. */
typedef struct qp_model qp_model;
QP_API qp_status qp_model_open(qp_context *ctx, const char *dir, qp_model **out);
QP_API void qp_model_close(qp_model *m);
/* NULL when config.json has no quantization_config. */
QP_API const qp_config *qp_model_config(const qp_model *m);
/* The model's activation and params dtype (F16 or BF16; F32 never comes
 * back, as vLLM's dtype="auto" downcasts it) as vLLM picks it with
 * dtype="auto": config.json's "dtype" (transformers 5) or "torch_dtype"
 * (also under "text_config"); without one, the common dtype of the
 * checkpoint's float tensors; float32 becomes bfloat16 (vLLM's first
 * supported dtype on CUDA devices of capability 8.0+). Pass it as
 * qp_linear_options.act_dtype; an explicit choice (vLLM's --dtype) may
 * override it. A config dtype that is not a float dtype fails
 * qp_model_open with QP_ERR_PARSE. */
QP_API qp_dtype qp_model_dtype(const qp_model *m);
/* "float16", "torch.bfloat16", "half", "float", "float32", "bf16"... as
 * transformers and vLLM's --dtype spell them; QP_DTYPE_NONE otherwise. */
QP_API qp_dtype qp_dtype_from_torch_name(const char *name);
QP_API qp_status qp_model_find_tensor(const qp_model *m, const char *name, qp_tensor *out);
/* Every tensor of every shard file, in file then header order. */
QP_API size_t qp_model_tensor_count(const qp_model *m);
QP_API qp_status qp_model_tensor_get(const qp_model *m, size_t i, qp_tensor *out);
/* The fp8 KV cache's per-tensor scales of the attention module `prefix`
 * ("model.layers.0.self_attn"), as vLLM's QuarkKVCacheMethod ends up with
 * them: <prefix>.{k,v}_proj.output_scale (Quark), <prefix>.{k,v}_scale or
 * <prefix>.attn.{k,v}_scale; neither present: 1.0 and 1.0; only k_scale:
 * both k_scale; only v_scale: QP_ERR_VALUE (vLLM asserts). Scales with more
 * than one element: "Only support per-tensor scaling factor for fp8 KV
 * cache". QP_ERR_NOT_FOUND when the config does not quantize the cache. */
QP_API qp_status qp_model_kv_scales(const qp_model *m, const char *prefix, float *k_scale, float *v_scale);
/* Linear layers of the checkpoint (prefixes of 2-D ".weight" / ".B" /
 * ".weight_packed" tensors, embeddings and routed experts left out), in
 * checkpoint order. */
QP_API size_t qp_model_layer_count(qp_model *m);
QP_API const char *qp_model_layer_name(qp_model *m, size_t i);
/* Routed-expert blocks ("model.layers.3.mlp.experts": the prefixes of
 * "<block>.<e>.<proj>.weight" tensors), in checkpoint order. */
QP_API size_t qp_model_moe_count(qp_model *m);
QP_API const char *qp_model_moe_name(qp_model *m, size_t i);
/* The model's architecture (qp_config_arch of its config.json, also for
 * an unquantized model). */
QP_API qp_status qp_model_arch(const qp_model *m, qp_arch_info *out);

typedef struct qp_bind_options {
    size_t struct_size;
    const qp_resolve_options *resolve; /* NULL: defaults                    */
    int tp_size, tp_rank;              /* tensor parallelism (1, 0)          */
    /* expert parallelism (1, 0): qp_model_bind_moe binds the contiguous
     * experts rank ep_rank owns (vLLM's determine_expert_map: E / ep_size
     * each, the first E % ep_size ranks one more), whole (no TP slicing) */
    int ep_size, ep_rank;
} qp_bind_options;
QP_API void qp_bind_options_init(qp_bind_options *o);

/* One layer's tensors, ready for qp_linear_create (pass shard_rows and
 * n_shards in qp_linear_options). Fused layers (qkv_proj, gate_up_proj) are
 * assembled from their shards on disk. */
typedef struct qp_layer_binding {
    char layer[256];
    qp_scheme scheme;
    int N, K;
    qp_tensor tensors[16];
    size_t n_tensors;
    int shard_rows[8];
    size_t n_shards;      /* 0: not fused */
    /* private */
    void *owned_[16];
    char names_[16][48];
} qp_layer_binding;
QP_API qp_status qp_model_bind_layer(qp_model *m, const char *layer, const qp_bind_options *opts,
                                     qp_layer_binding *out);
QP_API void qp_layer_binding_free(qp_layer_binding *b);

/* === Mixture of experts (FusedMoE) ======================================= */
/* A routed-experts layer as vLLM's FusedMoE runs it: route each token to
 * top_k experts, then per (token, expert) w13 GEMM -> silu(gate) * up ->
 * the scheme's activation quantization -> w2 GEMM, weighted by the routing
 * weight, summed over the k experts. The arithmetic order is vLLM's Triton
 * fused_experts (docs/moe.md). Runs on the cpu reference; the GPU backends
 * come with the fused kernels. */
/* qp_moe_scoring: declared with the architectures above. */

typedef struct qp_moe_options {
    size_t struct_size;         /* sizeof(qp_moe_options)                       */
    qp_dtype act_dtype;         /* F16 (default) or BF16: x, y, unquantized w  */
    const char *layer;          /* for messages                                 */
    int top_k;                  /* experts per token (default 2)                */
    int renormalize;            /* 1: the k weights divided by their sum        */
    /* grouped top-k (DeepSeek): experts in num_expert_group groups, only the
     * topk_group best groups compete; 0: plain top-k */
    int num_expert_group, topk_group;
    qp_moe_scoring scoring;     /* softmax (default) or sigmoid (grouped only)  */
    float routed_scaling_factor;/* grouped: weights times it (default 1)        */
    const float *e_score_correction_bias; /* grouped: [E] or NULL            */
    /* expert parallelism: the layer holds experts expert_offset ..
     * expert_offset + E - 1 of global_num_experts (0: E, no EP); routing
     * is over all of them, and a token's slots routed elsewhere add
     * nothing here (vLLM's expert_map -1; the ranks' outputs are summed
     * by the all-reduce that follows) */
    int global_num_experts, expert_offset;
    /* Tokens the block's scratch is reserved for at creation (0: 16). */
    int max_m;
} qp_moe_options;
QP_API void qp_moe_options_init(qp_moe_options *o);

/* Routing alone (vLLM's fused_topk / grouped_topk): router logits [M][E]
 * fp32 -> topk_ids [M][top_k], topk_weights [M][top_k]. Softmax in fp32
 * (exp(x - max) * (1/sum)), the exponential evaluated in double and rounded
 * once to fp32 (so that every device routes to the same bits); top-k picks
 * the largest, the lower expert index on ties, in descending order;
 * renormalize divides by the fp32 sum. */
QP_API qp_status qp_moe_route(qp_context *ctx, const float *logits, int M, int E, const qp_moe_options *o,
                              int32_t *topk_ids, float *topk_weights);

typedef struct qp_moe qp_moe;
/* E experts, hidden size H, intermediate size I. Tensors with vLLM's
 * FusedMoE parameter names (qp_model_bind_moe stacks them from a
 * checkpoint's per-expert ones):
 *   w13_weight [E, 2I, H] (gate rows then up rows), w2_weight [E, H, I];
 *   fp8/int8: w13_weight_scale [E, 2] per tensor (one per shard) or
 *   [E, 2I(, 1)] per channel, w2_weight_scale [E] or [E, H(, 1)], static
 *   activations w13_input_scale [E], w2_input_scale [E] (float dtypes).
 * Process-after-loading as vLLM's: per-tensor fp8 w13 shards requantized
 * to the larger scale, static input scales the max over experts.
 * QP_ERR_UNSUPPORTED for schemes without an MoE reference yet and for
 * devices other than cpu. */
QP_API qp_status qp_moe_create(qp_device *dev, const qp_scheme *scheme, int E, int H, int I, const qp_tensor *tensors,
                               size_t n_tensors, const qp_moe_options *opts, qp_moe **out);
/* y [M][H] = MoE(x [M][H]) routed by router_logits [M][E] (fp32). */
QP_API qp_status qp_moe_forward(qp_moe *moe, const void *x, int M, const float *router_logits, void *y);
/* The same with explicit routing: topk_ids [M][k] in [0, E), weights. */
QP_API qp_status qp_moe_forward_topk(qp_moe *moe, const void *x, int M, const int32_t *topk_ids,
                                     const float *topk_weights, void *y);
/* The same on device buffers of the block's device, enqueued (see
 * "Embedding qport in an engine"): x [M][H] act dtype, topk_ids [M][top_k]
 * int32 global expert ids, topk_weights [M][top_k] fp32, y [M][H]. Ids are
 * on the device and cannot be checked at enqueue: a slot whose id is not
 * one of this block's experts (outside expert_offset .. expert_offset+E-1,
 * including ids outside 0 .. G-1) contributes nothing, as a slot routed to
 * another expert-parallel rank does. sync may be NULL. */
QP_API qp_status qp_moe_enqueue(qp_moe *moe, qp_buffer *x, int M, qp_buffer *topk_ids, qp_buffer *topk_weights,
                                qp_buffer *y, const qp_enqueue_sync *sync);
/* The same routed on the device: router_logits [M][G] fp32 on the block's
 * device, routed as qp_moe_route does (the block's qp_moe_options: top_k,
 * renormalize, grouped top-k, scoring, bias, scaling), bit for bit, into
 * the block's own id and weight buffers, then the block. Backends without
 * a routing kernel (or without fp64, which the exact exponential needs)
 * say QP_ERR_UNSUPPORTED: route on the host and call qp_moe_enqueue. */
QP_API qp_status qp_moe_enqueue_logits(qp_moe *moe, qp_buffer *x, int M, qp_buffer *router_logits, qp_buffer *y,
                                       const qp_enqueue_sync *sync);
/* Whether `dev` runs fused MoE experts of `scheme` (as qp_config_resolve
 * gives it for QP_LAYER_MOE): native, emulated (the block-float schemes'
 * fake-quantized activations, as their linear layers) or unsupported,
 * with the reason. */
QP_API qp_status qp_device_supports_moe(qp_device *dev, const qp_scheme *scheme, qp_support_info *out);
/* Short text of the code path the layer takes for M tokens ("reference"
 * on cpu, the backend's kernel path elsewhere). */
QP_API void qp_moe_describe(qp_moe *moe, int M, char *out, size_t cap);
QP_API void qp_moe_destroy(qp_moe *moe);

/* The routed experts of a model directory, stacked as vLLM's FusedMoE
 * weight loader stacks them: prefix "model.layers.3.mlp.experts" with
 * per-expert checkpoint tensors {prefix}.{e}.{gate_proj,up_proj,down_proj}.*
 * (Mixtral: w1, w3, w2); each expert's projections bound as qp_model_bind_layer
 * binds them (dtype rules, tensor-parallel slicing of I), then stacked into
 * w13_weight [E, 2I, H], w2_weight [E, H, I] and the scales qp_moe_create
 * takes. The scheme is the MoE method vLLM picks (QP_LAYER_MOE). `router`
 * names the gate vLLM builds unquantized ("{parent}.gate"), empty when
 * the checkpoint has none. A missing expert, or experts of different
 * shapes or dtypes, is an error naming the tensor. */
typedef struct qp_moe_binding {
    char layer[256];
    qp_scheme scheme;
    int E, H, I;               /* E: the experts bound (this EP rank's)   */
    int global_num_experts, expert_offset; /* all experts; the first bound */
    qp_tensor tensors[8];
    size_t n_tensors;
    char router[256];
    /* private */
    void *owned_[8];
} qp_moe_binding;
QP_API qp_status qp_model_bind_moe(qp_model *m, const char *prefix, const qp_bind_options *opts, qp_moe_binding *out);
QP_API void qp_moe_binding_free(qp_moe_binding *b);
/* Whether `layer` is a module the model's architecture builds without
 * quantization whatever the config says (vLLM builds MoE routers with
 * quant_config=None): the table of docs/moe.md, keyed by model_type. */
QP_API int qp_model_layer_unquantized(const qp_model *m, const char *layer);
/* The routing of an MoE block as vLLM's model class sets it from
 * config.json: top_k = num_experts_per_tok; renormalize = norm_topk_prob
 * (Mixtral: always); n_group / topk_group / scoring_func /
 * routed_scaling_factor and the router's e_score_correction_bias tensor
 * (DeepSeek) for grouped top-k; act_dtype the model dtype. The bias points
 * into the model's mapping (valid while the model is open). */
QP_API qp_status qp_model_moe_options(const qp_model *m, const char *prefix, qp_moe_options *o);

/* === MX / NVFP4 block quantization (docs/semantics.md §6, §8) ============= */
/* OCP MX: blocks of 32 consecutive elements along k share one e8m0 scale.
 * `elem` is QP_DTYPE_F4_E2M1, F6_E3M2, F6_E2M3 or F8_E4M3FN; codes are one
 * per byte (pack them with qp_pack_fp4 / qp_pack_fp6). */

/* Quark's "even" shared scale (docs/semantics.md §6) of a block whose max |x| is
 * `block_absmax` (its sign is ignored): the e8m0 code e+127, where 2^e is
 * the scale. NaN -> 255; 0 is treated as 2^-126. */
QP_API qp_status qp_mx_shared_scale(qp_dtype elem, float block_absmax, uint8_t *e8m0_out);
/* x [m][k] -> codes [m][k], scales [m][k/32] (e8m0). k % 32 != 0 ->
 * QP_ERR_INVALID_ARGUMENT. q = encode(x / 2^e), RNE with saturation; a NaN
 * in a block gives that block scale 255 (NaN). */
QP_API qp_status qp_quant_mx(qp_context *ctx, qp_dtype elem, const float *x, size_t m, size_t k, uint8_t *codes,
                             uint8_t *scales);
/* out [m][k] = value(code) * 2^(e-127), exact (inf past FLT_MAX; scale 255 or
 * an e4m3fn NaN code gives NaN). */
QP_API qp_status qp_dequant_mx(qp_context *ctx, qp_dtype elem, const uint8_t *codes, const uint8_t *scales, size_t m,
                               size_t k, float *out);
/* NVFP4 dynamic activation quantization (docs/semantics.md §8), blocks of 16 along k:
 * x [m][k] -> fp4 codes [m][k] (one per byte), block_scales [m][k/16]
 * (e4m3fn codes). `global_scale_inv` is g = 1/input_global_scale (finite,
 * > 0). Dequantize as value(q) * e4m3(sf) / g. Uses exact fp32 reciprocals
 * like vLLM's torch reference; the CUDA kernel's rcp.approx may differ by
 * 1 ulp in the per-block multiplier and so flip ties. k % 16 != 0 ->
 * QP_ERR_VALUE "Input size per partition (k) must be divisible by group
 * size (16)". */
QP_API qp_status qp_quant_nvfp4(qp_context *ctx, const float *x, size_t m, size_t k, float global_scale_inv,
                                uint8_t *codes, uint8_t *block_scales);

/* === formats: numeric format encode/decode ================================ */
/* Element formats as vLLM's kernels produce them (docs/semantics.md §5,
 * §6, §18). A "code" is the format's bit pattern in the low
 * bits of a uint32_t (16 for F16/BF16, 8 for fp8/E8M0, 6 for fp6, 4 for fp4;
 * 32 for F32, which is a plain bit cast). Encoding rounds to nearest, ties to
 * even, from the exact fp32 value:
 *  - F16, BF16: IEEE; overflow -> inf; every NaN -> 0x7FFF (CUDA, 11.10).
 *  - F8_E4M3FN (also NVFP4 block scales): no inf; saturates, so |x| > 464
 *    and +-inf give +-448 (0x7E/0xFE); |x| <= 2^-10 gives +-0; NaN -> 0x7F
 *    with the input's sign bit (0x7F/0xFF).
 *  - F8_E4M3FNUZ: bias 8, max 240 (0x7F), saturating; the only NaN is 0x80,
 *    which every NaN encodes to; there is no -0 (negatives that round to
 *    zero give 0x00).
 *  - F8_E5M2: IEEE-like, has inf: overflow -> +-inf (0x7C/0xFC); NaN -> 0x7F
 *    with the input's sign bit (CUDA's canonical fp8 NaN).
 *  - F6_E2M3, F6_E3M2, F4_E2M1: no inf, no NaN; saturate to +-max (7.5, 28,
 *    6), sign kept (-0 possible); NaN -> +max (0x1F / 0x07), qport's choice
 *    (the formats cannot hold a NaN; it matches vLLM's fp8 quantizer clamping
 *    NaN to +max).
 *  - E8M0 (MX shared scales): unsigned; code = floor(log2|x|) + 127 clamped
 *    to 0..254 (so powers of two are exact, +-inf -> 254, 0 -> 0); NaN ->
 *    255. This is NOT Quark's "even" scale rule (docs/semantics.md §6), which rounds the
 *    block max first and is computed by the quantizer.
 * Decoding is exact. E8M0 decodes to 2^(e-127) (code 0 -> 2^-127 as vLLM's
 * e8m0_to_f32, not 0), 255 -> NaN. */

/* The code of `x` in `dtype`; 0 for a dtype that is not a float format. */
QP_API uint32_t qp_format_encode(qp_dtype dtype, float x);
/* The value of `code` (only its low qp_format_bits bits are used); NaN for a
 * dtype that is not a float format. */
QP_API float qp_format_decode(qp_dtype dtype, uint32_t code);
/* Bits per element: 32, 16, 8, 6, 4 (integer dtypes too); 0 when unknown. */
QP_API int qp_format_bits(qp_dtype dtype);
/* Largest finite value of a float format (448 for E4M3FN, 240 for FNUZ,
 * 2^127 for E8M0, FLT_MAX for F32); 0 for other dtypes. */
QP_API float qp_format_max(qp_dtype dtype);
/* x rounded to fp16 / bf16 and back (NaN stays NaN, overflow gives inf). */
QP_API float qp_fp16_round(float x);
QP_API float qp_bf16_round(float x);

/* Arrays: F16/BF16 write/read one uint16_t per element; fp8 and E8M0 one
 * byte; fp6 and fp4 one (unpacked) code per byte, the input of the pack
 * helpers below. QP_ERR_INVALID_ARGUMENT for other dtypes or NULL. */
QP_API qp_status qp_format_encode_array(qp_dtype dtype, const float *x, size_t n, void *out);
QP_API qp_status qp_format_decode_array(qp_dtype dtype, const void *in, size_t n, float *out);

/* Packing (docs/semantics.md §5). fp4: codes[2i] -> low nibble, codes[2i+1] -> high
 * nibble of out[i]; n even, out holds n/2 bytes. fp6: codes v0..v3 -> the
 * 24-bit word v3<<18|v2<<12|v1<<6|v0 stored little-endian in 3 bytes; n a
 * multiple of 4, out holds 3n/4 bytes. Codes wider than the format, a bad
 * n or a NULL give QP_ERR_INVALID_ARGUMENT and write nothing. */
QP_API qp_status qp_pack_fp4(const uint8_t *codes, size_t n, uint8_t *out);
QP_API qp_status qp_unpack_fp4(const uint8_t *in, size_t n, uint8_t *codes);
QP_API qp_status qp_pack_fp6(const uint8_t *codes, size_t n, uint8_t *out);
QP_API qp_status qp_unpack_fp6(const uint8_t *in, size_t n, uint8_t *codes);

/* Quark int4 packing along N (docs/semantics.md §17): codes is [K][N] 4-bit codes (one per
 * byte, 0..15), out is int32 [K][ceil(N/8)]; the code of column n = 8c+j
 * sits in nibble P[j] (bits 4P[j]..4P[j]+3) of out[k][c], P = 0..7 for
 * QP_PACK_ORDER and [0,4,1,5,2,6,3,7] for QP_PACK_REORDER. Padding nibbles
 * (N not a multiple of 8) are written as 0 and ignored by unpack. K, N >= 0;
 * another method, a code > 15 or a NULL gives QP_ERR_INVALID_ARGUMENT. */
QP_API qp_status qp_pack_int4_quark(const uint8_t *codes, int K, int N, qp_pack_method method,
                                    int32_t *out);
QP_API qp_status qp_unpack_int4_quark(const int32_t *in, int K, int N, qp_pack_method method,
                                      uint8_t *codes);
/* === end formats ========================================================== */

/* === weight quantization === */
/* Quantizes a weight matrix w [N][K] (fp32, torch Linear layout: row n =
 * output feature) for a resolved scheme into the tensors a checkpoint of
 * that scheme holds, under their checkpoint names, dtypes and shapes
 * (docs/semantics.md §5, §7, §8, §9, §15, §16, §17):
 *  W8A8-INT8   weight i8 [N][K], weight_scale f32 [N] (per channel; vLLM's
 *              loader unsqueezes it to [N,1]) or [1], weight_zero_point i8
 *              (zeros, same shape); static: input_scale f32 [1], and
 *              asymmetric input_zero_point i8 [1]
 *  W8A8-FP8    weight fp8_e4m3fn [N][K], weight_scale f32 [N] or [1];
 *              static: input_scale f32 [1]
 *  FP8 block   weight fp8_e4m3fn [N][K], weight_scale f32 (or e8m0 for
 *              kFp8Static128BlockE8M0Sym) [ceil(N/128)][ceil(K/128)]
 *  HF fp8      weight, weight_scale f32 [1], static: input_scale f32 [1];
 *              block: weight_scale_inv f32 [ceil(N/b0)][ceil(K/b1)]
 *  W4A16       weight i32 [K][ceil(N/8)] (Quark order/reorder),
 *              weight_scale f16/bf16 [K/g][N]; uint4: weight_zero_point
 *              i32 [K/g][ceil(N/8)]
 *  OCP-MX      weight u8 (fp4 [N][K/2], fp6 [N][3K/4], fp8 [N][K]),
 *              weight_scale u8 e8m0 [N/R][K/32]
 *  W4A8-MXFP4  the MXFP4 pair + input_scale f32 [1]
 *  NVFP4       weight u8 [N][K/2], weight_scale fp8_e4m3fn [N][K/16],
 *              weight_scale_2 f32 [1], input_scale_2 f32 [1]
 *  QQQ         B i32 [K/16][2N], s_channel f32 [1][N], group 128: s_group
 *              f16 [K/128][N] (Marlin order)
 * A compressed-tensors scheme (llm-compressor's layout, the same
 * arithmetic): W8A8 as above without weight_zero_point, per-channel
 * weight_scale [N][1]; W4A16 weight_packed i32 [N][K/8] (value i of a word
 * at bits 4i, stored + 8), weight_scale [N][K/g], asymmetric
 * weight_zero_point i32 [ceil(N/8)][K/g] (packed along N), weight_shape i64
 * [2]; NVFP4 weight_packed, weight_scale, weight_global_scale and
 * input_global_scale f32 [1] (the inverses of weight_scale_2 and
 * input_scale_2). Other compressed-tensors kinds: QP_ERR_UNSUPPORTED.
 * One layer, one shard: fused layers are quantized shard by shard (their
 * per-shard scales are what process-after-loading merges). Weight scales
 * are max|w| over the scale's block divided by the format's maximum (the
 * "even" rule for MX). Static activation scales come from calibration
 * activations when given (absmax/448 fp8, absmax/127 int8, min/max for
 * asymmetric int8 with 0 kept in range, absmax/(448*6) NVFP4), otherwise
 * from `input_absmax` (asymmetric: the range [-a, a]). Non-finite weights
 * or calibration values are refused (QP_ERR_INVALID_ARGUMENT naming the
 * element); shapes a scheme cannot hold get vLLM's message. fp16/bf16
 * weights: widen them with qp_format_decode_array first (exact). */
typedef struct qp_qweights qp_qweights;

/* The tensors are qp_tensor values (name, dtype as stored: F32, F16/BF16
 * bits, F8_E4M3FN, E8M0, U8 for packed fp4/fp6 and e8m0 MX scales, I8, I32,
 * I64;
 * shape; data valid until qp_qweights_destroy), ready for qp_linear_create
 * and qp_safetensors_write. */

typedef struct qp_quantize_options {
    size_t struct_size;   /* sizeof(qp_quantize_options)                       */
    qp_dtype params_dtype;/* F16 (default) or BF16: W4A16's weight_scale dtype */
    const float *calib;   /* optional calibration activations [calib_rows][K] */
    size_t calib_rows;
    float input_absmax;   /* without calib: assumed max|x| (default 1.0)      */
    /* The checkpoint layout of AMD Quark's exporter (what `qport quantize`
     * writes, so that its models exercise the loading paths of real
     * exports). scale_dtype F16 or BF16 (the model dtype): the float
     * scales Quark writes in the model dtype -- W8A8-FP8 per-tensor and
     * per-channel weight_scale and static input_scale, W8A8-INT8
     * per-channel weight_scale, W4A8-MXFP4-FP8 input_scale -- are rounded
     * to it (RNE) before the codes are made from them, as Quark's
     * observers compute them in the model dtype; a scale that overflows it
     * is QP_ERR_VALUE. QP_DTYPE_NONE or F32 (the default): fp32 scales.
     * sym_zero_points 1: symmetric W4A16 gets the all-zero int32
     * weight_zero_point Quark writes (vLLM loads and ignores it). */
    qp_dtype scale_dtype;
    int sym_zero_points;
} qp_quantize_options;

QP_API void qp_quantize_options_init(qp_quantize_options *opts);
/* `opts` may be NULL (defaults). *out is NULL on failure. */
QP_API qp_status qp_quantize_weights(qp_context *ctx, const qp_scheme *scheme, const float *w, int N, int K,
                                     const qp_quantize_options *opts, qp_qweights **out);
QP_API size_t qp_qweights_count(const qp_qweights *q);
/* The i-th tensor, in the order listed above; QP_ERR_NOT_FOUND past the end. */
QP_API qp_status qp_qweights_get(const qp_qweights *q, size_t i, qp_tensor *out);
/* The tensor called `name`; QP_ERR_NOT_FOUND when the scheme has none. */
QP_API qp_status qp_qweights_find(const qp_qweights *q, const char *name, qp_tensor *out);
QP_API void qp_qweights_destroy(qp_qweights *q);
/* === end weight quantization ============================================== */


/* === Communicators and parallel layers (docs/parallel.md) =============== */
/* A communicator is the job's ranks, one process each (mpirun -n N), from
 * a plugin like the backends: libqport-mpi.so (MPI, host buffers: any
 * device) or libqport-nccl.so (NCCL, bootstrapped over MPI). No plugin,
 * library or driver: qp_comm_create fails with QP_ERR_UNSUPPORTED and the
 * reason. Every function below except rank/size/name is collective: each
 * rank calls it, in the same order. */
typedef struct qp_comm qp_comm;
/* kind "mpi", "nccl" or "auto" (NULL: "auto" = nccl where it loads and
 * finds a CUDA device per rank, else mpi; QPORT_COMM overrides "auto"). */
QP_API qp_status qp_comm_create(qp_context *ctx, const char *kind, qp_comm **out);
QP_API void qp_comm_destroy(qp_comm *c);
QP_API int qp_comm_rank(const qp_comm *c);
QP_API int qp_comm_size(const qp_comm *c);
/* "mpi (Open MPI v4.1.4)"; never NULL. */
QP_API const char *qp_comm_name(const qp_comm *c);
/* Agrees on a status: every rank passes its own (with its qp_last_error
 * on this thread when not QP_OK) and every rank gets QP_OK only when all
 * passed QP_OK; otherwise the status of the lowest failing rank, and on
 * every rank the error "rank R: <that rank's message>". A rank that fails
 * so never leaves the others waiting in a later collective. */
QP_API qp_status qp_comm_agree(qp_comm *c, qp_status local);
QP_API qp_status qp_comm_barrier(qp_comm *c);
QP_API qp_status qp_comm_broadcast(qp_comm *c, void *buf, size_t bytes, int root);
/* recv [size][bytes], rank r's `send` at r * bytes. */
QP_API qp_status qp_comm_allgather(qp_comm *c, const void *send, size_t bytes, void *recv);
/* The fixed-order reduction of the parallel layers: recv[i] = rnd(sum over
 * r = 0..size-1 of send_r[i]) with the sum in fp32 in rank order and one
 * rounding to dt (F16, BF16; F32 sums and stores fp32). The same bits on
 * every rank and every run, whatever the library's allreduce would do. */
QP_API qp_status qp_comm_allreduce_sum_ordered(qp_comm *c, qp_dtype dt, const void *send, void *recv, size_t n);

/* A tensor-parallel linear layer: rank r binds its shard of `layer`
 * (qp_model_bind_layer with tp_size = qp_comm_size, tp_rank = rank:
 * column-parallel layers split N, row-parallel o_proj / down_proj split K,
 * bias on rank 0) on its own device `dev`. Binding and creation are agreed
 * on collectively (a rank that fails makes every rank fail with its
 * message), and so are the shapes (ranks that bound different layers or
 * shapes: QP_ERR_VALUE on every rank). opts: act_dtype and path as
 * qp_linear_create (the shard rows come from the binding). */
typedef struct qp_par_linear qp_par_linear;
QP_API qp_status qp_par_linear_create(qp_comm *c, qp_device *dev, qp_model *m, const char *layer,
                                      const qp_resolve_options *resolve, const qp_linear_options *opts,
                                      qp_par_linear **out);
/* y [M][N] = layer(x [M][K]), x and y whole (every rank passes the same x
 * and gets the same y). Column-parallel: each rank computes its columns,
 * then an all-gather puts them in vLLM's order (q, k, v of every rank for
 * fused layers). Row-parallel: each rank computes x[:, its K slice] times
 * its weights (activation scales from its slice, as vLLM's ranks compute
 * them), rounded to the output dtype, then the partials are summed with
 * qp_comm_allreduce_sum_ordered. M must agree across ranks. */
QP_API qp_status qp_par_linear_forward(qp_par_linear *l, const void *x, int M, void *y);
typedef struct qp_par_info {
    int row_parallel;     /* linear: 1 row-parallel (all-reduce), 0 column  */
    int N, K;             /* linear: whole layer; MoE: H, H                  */
    int N_local, K_local; /* this rank's shard                               */
    int E_local, expert_offset, G; /* MoE: this rank's experts of G          */
    qp_scheme scheme;
    qp_dtype act_dtype, out_dtype;
    double compute_ms, comm_ms; /* the last forward: local layer, collectives */
} qp_par_info;
QP_API qp_status qp_par_linear_info(const qp_par_linear *l, qp_par_info *out);
/* This rank's layer (qp_linear_describe, qp_linear_time). */
QP_API qp_linear *qp_par_linear_local(qp_par_linear *l);
QP_API void qp_par_linear_destroy(qp_par_linear *l);

/* An expert-parallel fused MoE layer: rank r binds its contiguous experts
 * (qp_model_bind_moe with ep_size = qp_comm_size, ep_rank = rank), routes
 * every token over all experts, runs its experts (slots routed elsewhere
 * give zeros) and the partial outputs are summed with
 * qp_comm_allreduce_sum_ordered. opts NULL: qp_model_moe_options of the
 * model with the model dtype. */
typedef struct qp_par_moe qp_par_moe;
QP_API qp_status qp_par_moe_create(qp_comm *c, qp_device *dev, qp_model *m, const char *prefix,
                                   const qp_resolve_options *resolve, const qp_moe_options *opts, qp_par_moe **out);
/* x [M][H], router_logits [M][G] fp32 (the same on every rank), y [M][H]. */
QP_API qp_status qp_par_moe_forward(qp_par_moe *p, const void *x, int M, const float *router_logits, void *y);
QP_API qp_status qp_par_moe_info(const qp_par_moe *p, qp_par_info *out);
QP_API void qp_par_moe_destroy(qp_par_moe *p);
/* Whether `layer` is a row-parallel layer as vLLM builds it (o_proj,
 * down_proj, out_proj, dense_4h_to_h, c_proj, w2, wo): 1, else 0. */
QP_API int qp_layer_is_row_parallel(const char *layer);
/* === end communicators ==================================================== */

#ifdef __cplusplus
}
#endif
#endif /* QPORT_H */
