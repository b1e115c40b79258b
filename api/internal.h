/* Internal declarations shared by the backend-neutral core (not installed). */
#ifndef QP_INTERNAL_H
#define QP_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <pthread.h>

#include "qport.h"
#include "json.h"

#define QP_ATTR_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* The largest layer dimension (N, K, an MoE's E, H, I) the public API
 * takes: 2^28 keeps every derived size (ceil(N/128), 2I, N*K) free of int
 * overflow; real layers stay far below it (vocabularies of 2^18). */
#define QP_DIM_MAX (1 << 28)
/* The most experts an MoE layer (and qp_moe_route) takes: 2^16 (DeepSeek-V3
 * has 256, Kimi-K2 384), so routing's per-token scratch stays small. */
#define QP_EXPERTS_MAX (1 << 16)

/* Records a failure on the calling thread's slot of `ctx` and returns
 * `status`. `file`, `key_path`, `layer` may be NULL. */
qp_status qp_error_set(const qp_context *ctx, qp_status status, const char *file,
                       const char *key_path, const char *layer, const char *fmt, ...)
    QP_ATTR_PRINTF(6, 7);
qp_status qp_error_setv(const qp_context *ctx, qp_status status, const char *file,
                        const char *key_path, const char *layer, const char *fmt, va_list ap);
void qp_log(const qp_context *ctx, qp_log_level level, const char *fmt, ...)
    QP_ATTR_PRINTF(3, 4);
/* The error service the core hands its plugins (backends, communicators):
 * qp_error_set without file, key or layer. */
qp_status qp_host_error(const qp_context *ctx, qp_status status, const char *fmt, ...) QP_ATTR_PRINTF(3, 4);
/* The host table's log for every plugin (registry.c): while a backend
 * initialises, its INFO lines also become the note `qport devices` shows. */
void qp_host_log(const qp_context *ctx, qp_log_level level, const char *fmt, ...) QP_ATTR_PRINTF(3, 4);

/* A growable string for building messages (Python reprs, key paths). */
typedef struct qp_buf {
    char *p;
    size_t len, cap;
    bool oom;
} qp_buf;
void qp_buf_puts(qp_buf *b, const char *s);
void qp_buf_putn(qp_buf *b, const char *s, size_t n);
void qp_buf_printf(qp_buf *b, const char *fmt, ...) QP_ATTR_PRINTF(2, 3);
void qp_buf_free(qp_buf *b);
const char *qp_buf_str(const qp_buf *b); /* never NULL */

/* Mapped shards that change under qport (safetensors.c): pread of bytes
 * inside f's mapping (0: not f's), and a size check. */
int qp_safetensors_pread(const qp_safetensors *f, void *dst, const void *src, size_t n, qp_status *st);
qp_status qp_safetensors_check(const qp_safetensors *f);

/* A parsed config.json, owned from the call on (config_load.c). */
qp_status qp_config_load_doc(qp_context *ctx, const char *name, qj_doc *doc, qp_config **out);

/* Files of a model directory (file_io.c): refused unless regular, before
 * anything can block (a FIFO); read whole, at most `max` bytes. */
qp_status qp_open_regular(const qp_context *ctx, const char *path, int *fd, size_t *size);
qp_status qp_read_regular(const qp_context *ctx, const char *path, size_t max, char **out, size_t *len);

/* Python repr() of a JSON value as vLLM's f-strings print it (pyrepr.c). */
void qp_pyrepr(qp_buf *b, const qj *v);

/* -- Matching (match.c) -------------------------------------------------- */

/* Python fnmatch.fnmatch on POSIX (case-sensitive, '*' crosses dots). */
bool qp_fnmatch(const char *pattern, const char *name);
bool qp_star_glob(const char *pattern, const char *name);
/* A 64-bit set of the adjacent character pairs of s[0..n): a cheap test
 * that rejects most pattern/name pairs before any matching. */
uint64_t qp_bigram_mask(const char *s, size_t n);

typedef struct qp_regex qp_regex;
/* Compiles a Python `re` pattern with PCRE2 (JIT when available). On error
 * returns NULL and writes PCRE2's message into `err`. */
qp_regex *qp_regex_compile(const char *pattern, char *err, size_t errcap);
/* re.match: anchored at the start only. */
bool qp_regex_match(const qp_regex *re, const char *name);
void qp_regex_free(qp_regex *re);

/* A set of names: exact strings plus "re:" patterns (vLLM exclude lists). */
typedef struct qp_nameset qp_nameset;
/* `items` must outlive the set. On a bad regex, returns NULL and sets the
 * index of the bad entry and PCRE2's message. */
qp_nameset *qp_nameset_create(const char *const *items, size_t n, bool regex_prefix,
                              size_t *bad_index, char *err, size_t errcap);
/* vLLM find_matching_patterns semantics for one name: any exact entry equal
 * to name, or any "re:" entry whose regex matches at the start. */
bool qp_nameset_match(const qp_nameset *s, const char *name);
/* Exact entries only: t == name or t startswith name + "." (check_children). */
bool qp_nameset_has_child(const qp_nameset *s, const char *name);
/* Exact entries only: an entry equal to name (`name in ignore`). */
bool qp_nameset_has_exact(const qp_nameset *s, const char *name);
/* SGLang's compressed-tensors check_equal_or_regex_match: a "re:" entry
 * matching at the start, or a plain entry contained in name, ignoring case. */
bool qp_nameset_match_contains(const qp_nameset *s, const char *name);
void qp_nameset_free(qp_nameset *s);

/* -- Packed-modules mapping ---------------------------------------------- */

typedef struct qp_packed_map {
    const qp_packed_module *mods;
    size_t n;
} qp_packed_map;
/* The shards of the last dotted component of `layer`, or NULL. */
const qp_packed_module *qp_packed_find(const qp_packed_map *m, const char *layer,
                                       const char **proj_out);
/* Python layer.replace(proj, shard): every occurrence. Caller frees. */
char *qp_str_replace_all(const char *s, const char *from, const char *to);

/* -- Config -------------------------------------------------------------- */

typedef struct qp_layer_pattern {
    const char *key;  /* the pattern as written */
    const qj *cfg;    /* its config object     */
    bool has_star;
    size_t prefix_len, suffix_len; /* literal head/tail for fnmatch prefilter */
    /* Character-pair fingerprints (qp_bigram_mask): `need` holds the pairs
     * any matching name must contain (glob patterns), `all` every pair of
     * the key (a substring key must contain all of the name's). */
    uint64_t need, all;
} qp_layer_pattern;

/* The architecture row of a config.json and what its values decide
 * (api/arch.c). */
typedef struct qp_arch_state {
    const struct arch_row *row; /* NULL: not in the table                   */
    int seen;                   /* architectures or model_type present      */
    char given_cls[96], given_type[64];
    qp_packed_module packed[4];
    size_t n_packed;
    int has_shared, correction_bias;
    long long first_k_dense_replace, moe_layer_freq, num_experts, moe_intermediate_size;
} qp_arch_state;
void qp_arch_from_json(const qj *root, qp_arch_state *st);
void qp_arch_fill(const qp_arch_state *st, qp_arch_info *out);

/* compressed-tensors QuantizationArgs after its validators (config_ct.c). */
typedef enum qp_ct_strategy {
    QP_CT_TENSOR = 0, QP_CT_CHANNEL, QP_CT_GROUP, QP_CT_BLOCK, QP_CT_TOKEN, QP_CT_TENSOR_GROUP, QP_CT_ATTN_HEAD
} qp_ct_strategy;
typedef struct qp_ct_args {
    long long num_bits;
    int is_float;            /* type "float" (else "int")                */
    int type_given;          /* else the default, an enum member in reprs */
    int symmetric;
    int has_group;           /* group_size not None                      */
    long long group_size;
    qp_ct_strategy strategy;
    int strategy_derived;    /* the validator chose it (group_size)      */
    int has_block;           /* block_structure's length (0: None); a string
                              * "RxC..." splits on 'x' without a length check */
    long long block[8];
    int dynamic;             /* 0, 1, 2: "local"                         */
    int actorder;            /* 0 None, 1 group, 2 weight, 3 dynamic, 4 static */
    char scale_dtype[40];    /* as written ("" when None)                */
    char zp_dtype[40];       /* as written, else the validator's default */
    char observer[48];       /* after the validator ("" when None)       */
    const struct qj *observer_kwargs; /* NULL: {}                        */
} qp_ct_args;
/* str() (sep " ") or the inside of repr() (sep ", ") of the args, as
 * pydantic prints them (config_ct.c); validated 0: as the model validator
 * sees them before its defaults. */
void qp_ct_args_str(qp_buf *b, const qp_ct_args *a, const char *sep, int validated);
/* is_activation_quantization_format */
int qp_ct_act_format(const char *format);
/* One entry of vLLM's target_scheme_map: a target and its group's args. */
typedef struct qp_ct_target {
    const char *target;
    struct qp_regex *re;     /* a "re:" target compiled, else NULL       */
    const char *format;      /* the group's format, else the config's, or NULL */
    qp_ct_args w;
    int has_in, has_out;
    qp_ct_args in, out;
} qp_ct_target;

struct qp_config {
    qp_context *ctx;
    qp_method method;
    char *file;
    qj_doc *doc;
    const qj *qc;           /* the quantization_config object */
    char *model_type;       /* from a whole config.json        */
    qp_arch_state arch;     /* its architecture (api/arch.c)   */

    /* A vLLM error raised while building the config (from_config); reported
     * by every resolve, as vLLM would refuse the whole model. */
    qp_status load_status;
    char *load_error;
    char *load_key;

    /* packed_modules_mapping carried by the config (owned) */
    qp_packed_module *cfg_packed;
    size_t n_cfg_packed;

    /* Quark */
    const qj *global;       /* global_quant_config or NULL         */
    const qj *layer_type_qc;
    qp_layer_pattern *patterns;
    size_t n_patterns;
    const char **excludes;
    size_t n_excludes;
    qp_nameset *exclude_set;
    const char *pack_method;
    qp_qtensor kv_cache;      /* resolved from kv_cache_group           */
    const qj *kv_cache_cfg;   /* output_tensors of the KV configs       */
    qp_status kv_status;      /* QuarkKVCacheMethod validation result   */
    char *kv_error;

    /* QQQ */
    long long qqq_bits, qqq_group;

    /* HF fp8 */
    bool fp8_static_act;
    const char **fp8_ignored;
    size_t n_fp8_ignored;
    qp_nameset *fp8_ignored_set;
    bool fp8_block;
    long long fp8_block_size[2];
    bool fp8_kv;

    /* compressed-tensors: target_scheme_map in dict order, the ignore list
     * (excludes / exclude_set), the global format, kv_cache_scheme */
    qp_ct_target *ct_targets;
    size_t n_ct_targets;
    const char *ct_format;
    const qj *ct_kv_scheme;
};

qp_status qp_config_parse_quark(qp_config *cfg);
/* A JSON list of strings (exclude, kv_cache_group, ignored_layers); null or
 * missing → empty. Type errors name `key`. */
qp_status qp_config_string_list(qp_config *cfg, const qj *v, const char *key, const char ***out, size_t *n);
/* The exclude list under `key` ("exclude", "ignore"): cfg->excludes and its
 * nameset of exact names and "re:" patterns; a bad regex names its entry. */
qp_status qp_config_exclude_list(qp_config *cfg, const char *key);
/* The config's own packed_modules_mapping, when it carries one. */
qp_status qp_config_packed_mapping(qp_config *cfg);
qp_status qp_config_parse_qqq(qp_config *cfg);
qp_status qp_config_parse_fp8(qp_config *cfg);
qp_status qp_config_parse_ct(qp_config *cfg);

/* Records a vLLM error raised at from_config time (see load_status). */
qp_status qp_config_defer_error(qp_config *cfg, qp_status st, const char *key,
                                const char *fmt, ...) QP_ATTR_PRINTF(4, 5);

/* Resolution internals: a per-call state carrying the error target. */
typedef struct qp_resolve_ctx {
    const qp_config *cfg;
    const char *layer;
    qp_layer_kind kind;
    qp_resolve_options opts;
    qp_packed_map packed;
} qp_resolve_ctx;

/* The class vLLM's model class builds rc->layer as (api/arch.c), as the
 * release rc's method follows sees it; *known (if given): whether the
 * architecture is in the table. */
qp_module_class qp_resolve_module_class(const qp_resolve_ctx *rc, int *known);
qp_status qp_resolve_fail(const qp_resolve_ctx *rc, qp_status st, const char *key,
                          const char *fmt, ...) QP_ATTR_PRINTF(4, 5);
qp_status qp_resolve_quark(const qp_resolve_ctx *rc, qp_scheme *out);
qp_status qp_resolve_quark_config(const qp_resolve_ctx *rc, const qj *config, const char *key,
                                  qp_scheme *out);
qp_status qp_resolve_qqq(const qp_resolve_ctx *rc, qp_scheme *out);
qp_status qp_resolve_fp8(const qp_resolve_ctx *rc, qp_scheme *out);
qp_status qp_resolve_ct(const qp_resolve_ctx *rc, qp_scheme *out);
/* The scheme target i's args give a linear layer (qp_config_resolve_pattern). */
qp_status qp_resolve_ct_target(const qp_resolve_ctx *rc, size_t i, qp_scheme *out);
/* vLLM's should_ignore_layer over cfg->exclude_set (resolve_quark.c): the
 * fused name directly, else every shard, all or none; `key` names the list
 * in the error. check_children: an entry under the name counts too. */
qp_status qp_resolve_should_ignore(const qp_resolve_ctx *rc, const char *key, bool check_children, bool *ignored);

void qp_scheme_init(qp_scheme *s, qp_scheme_kind kind);
void qp_scheme_set_names(qp_scheme *s, const char *method, const char *scheme_class,
                         const char *weight_key, const char *act_key);
/* Fills the qtensor description from a Quark QTensor config dict. */
void qp_qtensor_from_quark(qp_qtensor *t, const qj *q);
qp_status qp_capability_check(const qp_resolve_ctx *rc, int min_capability);

/* The numeric module (numeric.c): what the binder, the core's checks and
 * the reference kernels share. Activations, bias and outputs are fp16, bf16
 * (uint16_t bits) or fp32 (float), as vLLM's out_dtype = x.dtype. */
qp_status qp_num_check_act_dtype(qp_context *ctx, qp_dtype dtype);
/* A public call's M, K, N: 0 <= M and 1 <= K, N, each <= QP_DIM_MAX;
 * otherwise QP_ERR_INVALID_ARGUMENT naming `what` and the one out of range
 * (checked before anything is allocated or read from them). */
qp_status qp_check_mnk(qp_context *ctx, const char *what, int M, int K, int N);
/* m * k elements of a quantizer's arrays: QP_ERR_INVALID_ARGUMENT when the
 * count (times 4-byte elements) would wrap a size_t, else QP_OK. */
qp_status qp_check_mk(qp_context *ctx, size_t m, size_t k);
/* Bytes of one activation element: 4 for F32, 2 for F16/BF16. */
size_t qp_num_elem_size(qp_dtype d);
/* Bytes the binders count for one element of `d` (format.c): its bits / 8,
 * 1 for a sub-byte dtype. */
size_t qp_dtype_elem_bytes(qp_dtype d);
/* Element i of an activation-dtype array, widened to fp32 (exact). */
float qp_num_load(qp_dtype d, const void *p, size_t i);
/* Stores v as element i: rounded (RNE) to fp16/bf16, as is for F32. */
void qp_num_store(qp_dtype d, void *p, size_t i, float v);
/* v rounded to `d` and back (the identity for F32). */
float qp_num_round(qp_dtype d, float v);
/* An e8m0 scale as Quark's dq_mxfp4 kernel makes it in `d` for its hmul
 * (docs/semantics.md §6): fp16 saturates at 2^15 and flushes below 2^-24; 255 -> NaN. */
float qp_num_e8m0_hmul_scale(qp_dtype d, uint8_t e);
/* Whether (weight element, activation key) is an OCP_MX_Scheme pair; the
 * resolver's / QuarkOCP_MX's messages otherwise. */
qp_status qp_ocp_mx_check_pair(qp_context *ctx, qp_dtype w, qp_ocp_mx_act act);
/* The element format of an OCP MX activation mode (QP_DTYPE_NONE: none). */
qp_dtype qp_ocp_mx_act_elem(qp_ocp_mx_act a);
/* A double rounded once (RNE) to fp16: the bits (an fp16 fma rounds once). */
uint16_t qp_num_f16_bits_from_double(double v);
/* str(QuantKey) of a key constant name (vLLM 0.34.0); "None" for NULL/"". */
const char *qp_quant_key_repr(const char *name);

/* The routing options' checks of qp_moe_route (moe_route.c), also run by
 * qp_moe_create so a bad option fails at creation. */
qp_status qp_moe_route_check(qp_context *ctx, int M, int E, const qp_moe_options *o);

/* qp_safetensors_find without an error on a miss (model.c looks a name up
 * in every shard): 1 and *st (entry_tensor's status) when `name` is there,
 * 0 when it is not. */
int qp_safetensors_lookup(const qp_safetensors *f, const char *name, qp_tensor *out, qp_status *st);
/* Whether a tensor (of at most QP_TENSOR_MAX_DIMS dims) has a name that
 * starts with `prefix`: a binary search of the name index. */
int qp_safetensors_has_prefix(const qp_safetensors *f, const char *prefix);
/* The header indices (ascending: header order) of the tensors whose names
 * start with `prefix`, in a malloc'd *idx (NULL when none) of *n. */
qp_status qp_safetensors_prefixed(const qp_safetensors *f, const char *prefix, size_t **idx, size_t *n);

/* Names, dtypes, ranks, dims and data of caller-supplied tensors, at most
 * max_n of them (0: any number) (linear_desc.c). */
qp_status qp_tensors_check(qp_context *ctx, const char *layer, const qp_tensor *t, size_t n, size_t max_n);

/* The scheme came from a compressed-tensors config (its vLLM method class
 * starts with CompressedTensors): its tensors follow that layout (bind_ct.c). */
int qp_scheme_is_ct(const qp_scheme *s);
/* compressed-tensors' weight_shape ([N, K], int64 or int32 [2]) into nk;
 * 0 when the tensor is not such a pair. */
int qp_ct_weight_shape(const qp_tensor *t, int64_t nk[2]);
#endif
