/* Model directories and layer binding (internal). */
#ifndef QP_MODEL_H
#define QP_MODEL_H
#include "internal.h"

#define QP_MODEL_MAX_FILES 256

struct qp_model {
    qp_context *ctx;
    char *dir;
    qp_config *cfg;              /* NULL for an unquantized model            */
    qp_safetensors *files[QP_MODEL_MAX_FILES];
    char *file_names[QP_MODEL_MAX_FILES];
    size_t n_files;
    char **layers;
    size_t n_layers;
    char **moes;                 /* routed-expert blocks ("....mlp.experts") */
    size_t n_moes;
    int layers_listed;
    qp_dtype dtype;              /* vLLM's dtype="auto" (qp_model_dtype)     */
    char *model_type;            /* config.json's, or NULL                   */
    qp_arch_state arch;          /* its architecture (api/arch.c)            */
    /* f16/bf16 e_score_correction_bias tensors widened to fp32 at open,
     * as vLLM copies them into its fp32 parameter (bias_src: the data) */
    float **bias_f32;
    const void **bias_src;
    size_t n_bias_f32;
    /* MoE routing from config.json (qp_model_moe_options); -1: absent */
    int moe_top_k, moe_renorm, moe_groups, moe_topk_group, moe_sigmoid;
    float moe_scale;
    int moe_experts;             /* num_experts / num_local_experts / n_routed_experts */
    const char *moe_experts_key; /* which of them (a literal)                */
    const void *moe_experts_obj; /* while reading: the object it came from   */
};

/* config.json's architecture keys, each checked (model_config.c). */
qp_status qp_model_read_arch(qp_model *m, const char *path, const qj *root);
/* Copies n bytes at src to dst: bytes inside a shard's mapping are read
 * with pread, so a shard that shrank after it was opened is QP_ERR_IO
 * naming it rather than a SIGBUS (bind.c). */
qp_status qp_model_copy(const qp_model *m, void *dst, const void *src, size_t n);
#endif
