/* A model directory as vLLM loads it: config.json (its quantization_config)
 * and the weights in model.safetensors or the shards named by
 * model.safetensors.index.json. Tensors are looked up by name across the
 * shards; the index's file names are checked so a hostile index cannot
 * point outside the directory. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"

static qp_status add_file(qp_model *m, const char *file) {
    /* an index names each shard for thousands of tensors in a row: the
     * last file first, then the (at most 256) others */
    if (m->n_files && !strcmp(m->file_names[m->n_files - 1], file)) return QP_OK;
    for (size_t i = 0; i < m->n_files; i++)
        if (!strcmp(m->file_names[i], file)) return QP_OK;
    if (!*file || strchr(file, '/') || !strcmp(file, ".") || !strcmp(file, ".."))
        return qp_error_set(m->ctx, QP_ERR_PARSE, m->dir, "weight_map", NULL,
                            "shard file name '%s' is not a plain file name in the model directory", file);
    if (m->n_files >= QP_MODEL_MAX_FILES)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, "weight_map", NULL, "more than %d shard files", QP_MODEL_MAX_FILES);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", m->dir, file);
    qp_status st = qp_safetensors_open(m->ctx, path, &m->files[m->n_files]);
    if (st) return st;
    m->file_names[m->n_files++] = strdup(file);
    return QP_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A JSON file of the model directory (at most 64 MiB read): *doc, or
 * NULL when it cannot be opened; a parse error is QP_ERR_PARSE. */
static qp_status read_json(qp_model *m, const char *path, qj_doc **doc) {
    *doc = NULL;
    char *text;
    size_t len;
    qp_status st = qp_read_regular(m->ctx, path, (size_t)64 << 20, &text, &len);
    if (st) return st;
    char err[256];
    *doc = qj_parse_bounded(text, len, QJ_CONFIG_MAX_VALUES(len), err, sizeof err);
    free(text);
    return *doc ? QP_OK : qp_error_set(m->ctx, QP_ERR_PARSE, path, NULL, NULL, "%s", err);
}

static qp_status open_weights(qp_model *m) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", m->dir);
    struct stat sb;
    if (!stat(path, &sb)) {
        qj_doc *doc;
        qp_status rs = read_json(m, path, &doc);
        if (rs) return rs;
        const qj *wm = qj_get(qj_root(doc), "weight_map");
        qp_status st = QP_OK;
        if (!wm || wm->type != QJ_OBJECT) st = qp_error_set(m->ctx, QP_ERR_PARSE, path, "weight_map", NULL, "missing or not an object");
        for (size_t i = 0; !st && i < wm->n; i++) {
            if (wm->items[i]->type != QJ_STRING)
                st = qp_error_set(m->ctx, QP_ERR_PARSE, path, wm->keys[i], NULL, "weight_map value is not a file name");
            else
                st = add_file(m, wm->items[i]->s);
        }
        qj_free(doc);
        return st;
    }
    /* no index: every *.safetensors of the folder, in name order */
    DIR *d = opendir(m->dir);
    if (!d) return qp_error_set(m->ctx, QP_ERR_IO, m->dir, NULL, NULL, "cannot open the model directory");
    char *names[QP_MODEL_MAX_FILES];
    size_t nn = 0;
    for (struct dirent *e; (e = readdir(d)) && nn < QP_MODEL_MAX_FILES;) {
        size_t l = strlen(e->d_name);
        if (l > 12 && !strcmp(e->d_name + l - 12, ".safetensors")) names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    qp_status st = nn ? QP_OK : qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, NULL, NULL, "no *.safetensors files");
    for (size_t i = 0; i < nn; i++) {
        if (!st) st = add_file(m, names[i]);
        free(names[i]);
    }
    return st;
}

/* A config dtype string as transformers writes it ("float16", "torch.float16",
 * "bfloat16", "float32", "half", "float", "bf16"...). NONE: not a float dtype. */
QP_API qp_dtype qp_dtype_from_torch_name(const char *s) {
    if (!s) return QP_DTYPE_NONE;
    if (!strncmp(s, "torch.", 6)) s += 6;
    static const struct { const char *name; qp_dtype d; } names[] = {
        {"float16", QP_DTYPE_F16}, {"half", QP_DTYPE_F16}, {"fp16", QP_DTYPE_F16},
        {"bfloat16", QP_DTYPE_BF16}, {"bf16", QP_DTYPE_BF16},
        {"float32", QP_DTYPE_F32}, {"float", QP_DTYPE_F32}, {"fp32", QP_DTYPE_F32},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(s, names[i].name)) return names[i].d;
    return QP_DTYPE_NONE;
}

/* vLLM's model dtype for dtype="auto" (ModelConfig: _find_dtype, then
 * _resolve_auto_dtype): config.json's "dtype" (transformers >= 5) or
 * "torch_dtype", also under text_config; absent, the common dtype of the
 * checkpoint's float tensors (mixed f16/bf16 broadcast to f32); absent too,
 * float32. float32 is then downcast to the platform's first supported dtype:
 * bfloat16 on CUDA devices of capability 8.0 and up, the GPUs vLLM targets. */
static qp_status find_dtype(qp_model *m, const char *path, const qj *root) {
    qp_dtype d = QP_DTYPE_NONE;
    if (root) {
        qp_status as = qp_model_read_arch(m, path, root); /* the MoE keys, each checked */
        if (as) return as;
        qp_arch_from_json(root, &m->arch); /* vLLM's model class (api/arch.c) */
        const qj *tc = qj_get(root, "text_config");
        const qj *cands[] = {qj_get(root, "dtype"), qj_get(root, "torch_dtype"), tc ? qj_get(tc, "dtype") : NULL,
                             tc ? qj_get(tc, "torch_dtype") : NULL};
        qp_status st = QP_OK;
        for (size_t i = 0; i < 4 && d == QP_DTYPE_NONE && !st; i++) {
            if (!cands[i] || cands[i]->type == QJ_NULL || (cands[i]->type == QJ_STRING && !strcmp(cands[i]->s, "auto"))) continue;
            if (cands[i]->type != QJ_STRING || (d = qp_dtype_from_torch_name(cands[i]->s)) == QP_DTYPE_NONE)
                st = qp_error_set(m->ctx, QP_ERR_PARSE, path, i % 2 ? "torch_dtype" : "dtype", NULL,
                                  "the model dtype must be float16, bfloat16 or float32, got %s",
                                  cands[i]->type == QJ_STRING ? cands[i]->s : "a non-string");
        }
        if (st) return st;
    }
    if (d == QP_DTYPE_NONE) {
        int seen16 = 0, seenbf = 0, seen32 = 0;
        for (size_t i = 0; i < m->n_files; i++)
            for (size_t j = 0; j < qp_safetensors_count(m->files[i]); j++) {
                qp_tensor t;
                if (qp_safetensors_get(m->files[i], j, &t, NULL)) continue;
                seen16 |= t.dtype == QP_DTYPE_F16;
                seenbf |= t.dtype == QP_DTYPE_BF16;
                seen32 |= t.dtype == QP_DTYPE_F32;
            }
        d = seen32 || (seen16 && seenbf) ? QP_DTYPE_F32 : seenbf ? QP_DTYPE_BF16 : seen16 ? QP_DTYPE_F16 : QP_DTYPE_F32;
    }
    m->dtype = d == QP_DTYPE_F32 ? QP_DTYPE_BF16 : d;
    return QP_OK;
}

/* vLLM's DeepSeek router owns e_score_correction_bias as an fp32
 * parameter and copy_s the checkpoint's (model-dtype) tensor into it:
 * widened once here, exactly, so MoE options can point at fp32 data. */
static qp_status widen_biases(qp_model *m) {
    static const char suffix[] = ".e_score_correction_bias";
    size_t n = qp_model_tensor_count(m);
    for (size_t i = 0; i < n; i++) {
        qp_tensor t;
        if (qp_model_tensor_get(m, i, &t)) continue;
        size_t l = strlen(t.name);
        if (l < sizeof suffix || strcmp(t.name + l - (sizeof suffix - 1), suffix) || t.ndim != 1 ||
            (t.dtype != QP_DTYPE_F16 && t.dtype != QP_DTYPE_BF16))
            continue;
        float **f = realloc(m->bias_f32, sizeof *f * (m->n_bias_f32 + 1));
        if (f) m->bias_f32 = f;
        const void **s = f ? realloc((void *)m->bias_src, sizeof *s * (m->n_bias_f32 + 1)) : NULL;
        if (s) m->bias_src = s;
        float *w = s ? malloc(sizeof(float) * (size_t)(t.shape[0] ? t.shape[0] : 1)) : NULL;
        if (!w) return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, t.name, NULL, "out of memory");
        for (int64_t k = 0; k < t.shape[0]; k++) w[k] = qp_num_load(t.dtype, t.data, (size_t)k);
        m->bias_src[m->n_bias_f32] = t.data;
        m->bias_f32[m->n_bias_f32++] = w;
    }
    return QP_OK;
}

QP_API qp_dtype qp_model_dtype(const qp_model *m) { return m ? m->dtype : QP_DTYPE_NONE; }

QP_API qp_status qp_model_arch(const qp_model *m, qp_arch_info *out) {
    if (!m || !out || out->struct_size < sizeof *out) return QP_ERR_INVALID_ARGUMENT;
    qp_arch_fill(&m->arch, out);
    return QP_OK;
}

QP_API qp_status qp_model_open(qp_context *ctx, const char *dir, qp_model **out) {
    if (!ctx || !dir || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_model *m = calloc(1, sizeof *m);
    if (!m) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, dir, NULL, NULL, "out of memory");
    m->ctx = ctx;
    m->dir = strdup(dir);
    m->moe_top_k = m->moe_renorm = m->moe_groups = m->moe_topk_group = -1;
    m->moe_scale = 1.0f;
    m->moe_experts = -1;
    qp_arch_from_json(NULL, &m->arch);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct stat sb;
    qp_status st = QP_OK;
    qj_doc *doc = NULL; /* config.json, parsed once: the quantization config, dtype and MoE keys */
    if (!lstat(path, &sb) || !stat(path, &sb)) {
        st = read_json(m, path, &doc);
        /* an unquantized model (the input of `qport quantize`) has no
         * quantization_config: then there is no config object */
        if (!st && qj_get(qj_root(doc), "quantization_config")) {
            st = qp_config_load_doc(ctx, path, doc, &m->cfg); /* owns doc now */
            doc = NULL;
        }
    }
    if (!st) st = open_weights(m);
    if (!st) st = find_dtype(m, path, m->cfg ? qj_root(m->cfg->doc) : doc ? qj_root(doc) : NULL);
    qj_free(doc);
    if (!st) st = widen_biases(m);
    if (st) { qp_model_close(m); return st; }
    *out = m;
    return QP_OK;
}

QP_API void qp_model_close(qp_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_files; i++) { qp_safetensors_close(m->files[i]); free(m->file_names[i]); }
    qp_config_destroy(m->cfg);
    free(m->model_type);
    for (size_t i = 0; i < m->n_bias_f32; i++) free(m->bias_f32[i]);
    free(m->bias_f32);
    free((void *)m->bias_src);
    for (size_t i = 0; i < m->n_layers; i++) free(m->layers[i]);
    free(m->layers);
    for (size_t i = 0; i < m->n_moes; i++) free(m->moes[i]);
    free(m->moes);
    free(m->dir);
    free(m);
}

QP_API const qp_config *qp_model_config(const qp_model *m) { return m ? m->cfg : NULL; }

QP_API qp_status qp_model_find_tensor(const qp_model *m, const char *name, qp_tensor *out) {
    if (!m || !name || !out) return QP_ERR_INVALID_ARGUMENT;
    /* the first shard that holds the name (each file's name index) */
    for (size_t i = 0; i < m->n_files; i++) {
        qp_tensor t;
        qp_status st;
        if (qp_safetensors_lookup(m->files[i], name, &t, &st) && st == QP_OK) {
            /* the caller reads the mapping in place: not past a shard's new end */
            st = qp_safetensors_check(m->files[i]);
            if (st) return st;
            *out = t;
            return QP_OK;
        }
    }
    return qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, name, NULL, "no tensor '%s' in the checkpoint", name);
}

/* A set of names being listed: an open-addressing table of list index + 1
 * over the list itself, so listing n layers is O(n), not O(n^2). */
typedef struct name_set {
    size_t *slot;
    size_t cap;
} name_set;

static size_t name_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static qp_status push_name(qp_model *m, name_set *set, char ***list, size_t *n, const char *name, size_t len) {
    if (2 * (*n + 1) > set->cap) { /* grow and rehash */
        size_t nc = set->cap ? 2 * set->cap : 64;
        size_t *ns = calloc(nc, sizeof *ns);
        if (!ns) return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, NULL, "out of memory");
        for (size_t i = 0; i < *n; i++) {
            size_t h = name_hash((*list)[i], strlen((*list)[i])) & (nc - 1);
            while (ns[h]) h = (h + 1) & (nc - 1);
            ns[h] = i + 1;
        }
        free(set->slot);
        set->slot = ns;
        set->cap = nc;
    }
    size_t h = name_hash(name, len) & (set->cap - 1);
    for (; set->slot[h]; h = (h + 1) & (set->cap - 1)) {
        const char *s = (*list)[set->slot[h] - 1];
        if (!strncmp(s, name, len) && s[len] == 0) return QP_OK;
    }
    char **g = realloc(*list, sizeof(char *) * (*n + 1));
    if (!g) return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, NULL, "out of memory");
    *list = g;
    if (!(g[*n] = strndup(name, len))) return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, NULL, "out of memory");
    set->slot[h] = ++(*n);
    return QP_OK;
}

/* Linear layers: prefixes of 2-D `.weight` (QQQ `.B`, compressed-tensors
 * `.weight_packed`) tensors, except
 * embeddings and routed experts ("<block>.experts.<e>.<proj>"), whose
 * blocks are listed apart. Listed once, in checkpoint order. */
static qp_status list_layers(qp_model *m) {
    if (m->layers_listed) return QP_OK;
    name_set ls = {0}, ms = {0};
    qp_status st = QP_OK;
    for (size_t i = 0; i < m->n_files && !st; i++)
        for (size_t j = 0; j < qp_safetensors_count(m->files[i]); j++) {
            qp_tensor t;
            if (qp_safetensors_get(m->files[i], j, &t, NULL)) continue;
            size_t l = strlen(t.name), cut;
            if (l > 7 && !strcmp(t.name + l - 7, ".weight") && t.ndim == 2) cut = l - 7;
            else if (l > 14 && !strcmp(t.name + l - 14, ".weight_packed") && t.ndim == 2) cut = l - 14; /* compressed-tensors */
            else if (l > 2 && !strcmp(t.name + l - 2, ".B") && t.ndim == 2) cut = l - 2;
            /* compressed-tensors packed int / fp4 weights (api/bind_ct.c) */
            else if (l > 14 && !strcmp(t.name + l - 14, ".weight_packed") && t.ndim == 2) cut = l - 14;
            else continue;
            if (strstr(t.name, "embed")) continue;
            /* any "<block>.experts.<x>" is the block's (qp_model_bind_moe
             * refuses an <x> that is not one of its experts: "-1", "7" of
             * 4, "99999999999"), never a linear layer of its own */
            const char *ex = strstr(t.name, ".experts.");
            st = ex ? push_name(m, &ms, &m->moes, &m->n_moes, t.name, (size_t)(ex + 8 - t.name))
                    : push_name(m, &ls, &m->layers, &m->n_layers, t.name, cut);
            if (st) break;
        }
    free(ls.slot);
    free(ms.slot);
    if (st) return st;
    m->layers_listed = 1;
    return QP_OK;
}

QP_API size_t qp_model_layer_count(qp_model *m) { return m && !list_layers(m) ? m->n_layers : 0; }
QP_API size_t qp_model_moe_count(qp_model *m) { return m && !list_layers(m) ? m->n_moes : 0; }
QP_API const char *qp_model_moe_name(qp_model *m, size_t i) {
    return m && !list_layers(m) && i < m->n_moes ? m->moes[i] : NULL;
}
QP_API const char *qp_model_layer_name(qp_model *m, size_t i) {
    return m && !list_layers(m) && i < m->n_layers ? m->layers[i] : NULL;
}

QP_API size_t qp_model_tensor_count(const qp_model *m) {
    size_t n = 0;
    for (size_t i = 0; m && i < m->n_files; i++) n += qp_safetensors_count(m->files[i]);
    return n;
}

QP_API qp_status qp_model_tensor_get(const qp_model *m, size_t i, qp_tensor *out) {
    if (!m || !out) return QP_ERR_INVALID_ARGUMENT;
    for (size_t f = 0; f < m->n_files; f++) {
        size_t n = qp_safetensors_count(m->files[f]);
        if (i < n) return qp_safetensors_get(m->files[f], i, out, NULL);
        i -= n;
    }
    return QP_ERR_NOT_FOUND;
}
