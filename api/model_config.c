/* The architecture keys qport reads from a model's config.json:
 * the model dtype's keys are read in model.c; here the MoE ones. Every key
 * is checked for its JSON type and range, and a wrong one is an error
 * naming the file and the key, as vLLM's and transformers' config classes
 * fail, never a silent default: an (int) cast of 4294967299 would run
 * top-3, a string "3" the default top-2, 1e308 an infinite scale.
 * `null` means "absent" only for the optional keys (transformers writes
 * null for unset ones); the expert count and num_experts_per_tok of a
 * model with experts are required (api/bind_moe.c asks for them). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

#define MAX_EXPERTS 65536 /* far above any released model (DeepSeek: 256) */

static qp_status bad(qp_model *m, const char *path, const char *key, const qj *v, const char *want) {
    char got[96];
    if (!v) snprintf(got, sizeof got, "nothing");
    else if (v->type == QJ_INT) snprintf(got, sizeof got, "%lld", v->i);
    else if (v->type == QJ_FLOAT) snprintf(got, sizeof got, "%.17g", v->d);
    else if (v->type == QJ_STRING) snprintf(got, sizeof got, "the string \"%.60s\"", v->s);
    else if (v->type == QJ_BOOL) snprintf(got, sizeof got, "%s", v->b ? "true" : "false");
    else snprintf(got, sizeof got, "%s", v->type == QJ_NULL ? "null" : qj_type_name(v));
    return qp_error_set(m->ctx, QP_ERR_PARSE, path, key, NULL, "config.json: %s must be %s, got %s", key, want, got);
}

/* An integer key in [lo, hi]: *out, or -1 when absent (or null, if
 * nullable). JSON floats (2.5, 3.0), bools and strings are refused, as
 * transformers' type hints and vLLM's uses of them would fail; integers past
 * int64 arrive as QJ_FLOAT and are refused too. */
static qp_status get_int(qp_model *m, const char *path, const qj *obj, const char *key, long long lo, long long hi,
                         bool nullable, int *out) {
    const qj *v = qj_get(obj, key);
    if (!v || (nullable && v->type == QJ_NULL)) return QP_OK;
    char want[96];
    snprintf(want, sizeof want, "an integer from %lld to %lld", lo, hi);
    if (v->type != QJ_INT || v->i < lo || v->i > hi) return bad(m, path, key, v, want);
    *out = (int)v->i;
    return QP_OK;
}

/* The keys of one config object (the root, or text_config: the root wins,
 * so it is read last). */
static qp_status read_keys(qp_model *m, const char *path, const qj *c) {
    qp_status st = QP_OK;
    static const char *const counts[] = {"num_experts", "num_local_experts", "n_routed_experts"};
    for (size_t i = 0; i < sizeof counts / sizeof *counts && !st; i++) {
        int e = -1;
        if ((st = get_int(m, path, c, counts[i], 1, MAX_EXPERTS, true, &e)) || e < 0) continue;
        if (m->moe_experts > 0 && m->moe_experts != e && m->moe_experts_key && strcmp(m->moe_experts_key, counts[i]) &&
            m->moe_experts_obj == c)
            return qp_error_set(m->ctx, QP_ERR_PARSE, path, counts[i], NULL,
                                "config.json: %s is %d but %s is %d: the expert count is ambiguous", counts[i], e,
                                m->moe_experts_key, m->moe_experts);
        if (m->moe_experts_obj != c || m->moe_experts < 0) {
            m->moe_experts = e;
            m->moe_experts_key = counts[i];
            m->moe_experts_obj = c;
        }
    }
    if (st) return st;
    if ((st = get_int(m, path, c, "num_experts_per_tok", 1, MAX_EXPERTS, false, &m->moe_top_k))) return st;
    if ((st = get_int(m, path, c, "n_group", 1, MAX_EXPERTS, true, &m->moe_groups))) return st;
    if ((st = get_int(m, path, c, "topk_group", 1, MAX_EXPERTS, true, &m->moe_topk_group))) return st;
    const qj *v;
    if ((v = qj_get(c, "norm_topk_prob")) && v->type != QJ_NULL) {
        if (v->type != QJ_BOOL) return bad(m, path, "norm_topk_prob", v, "true or false");
        m->moe_renorm = v->b;
    }
    if ((v = qj_get(c, "scoring_func")) && v->type != QJ_NULL) {
        if (v->type != QJ_STRING || (strcmp(v->s, "softmax") && strcmp(v->s, "sigmoid")))
            return bad(m, path, "scoring_func", v, "\"softmax\" or \"sigmoid\"");
        m->moe_sigmoid = !strcmp(v->s, "sigmoid");
    }
    if ((v = qj_get(c, "routed_scaling_factor")) && v->type != QJ_NULL) {
        /* a float32 multiplier in vLLM's grouped_topk: finite there too */
        if ((v->type != QJ_INT && v->type != QJ_FLOAT) || !(v->d > 0) || !(v->d <= FLT_MAX))
            return bad(m, path, "routed_scaling_factor", v, "a positive number within float32's range");
        m->moe_scale = (float)v->d;
    }
    if ((v = qj_get(c, "model_type")) && v->type != QJ_NULL && v->type != QJ_STRING)
        return bad(m, path, "model_type", v, "a string");
    return QP_OK;
}

qp_status qp_model_read_arch(qp_model *m, const char *path, const qj *root) {
    if (root->type != QJ_OBJECT)
        return qp_error_set(m->ctx, QP_ERR_PARSE, path, NULL, NULL, "config.json must be a JSON object, got %s",
                            qj_type_name(root));
    const qj *tc = qj_get(root, "text_config");
    if (tc && tc->type != QJ_NULL && tc->type != QJ_OBJECT) return bad(m, path, "text_config", tc, "an object");
    qp_status st = QP_OK;
    if (tc && tc->type == QJ_OBJECT) st = read_keys(m, path, tc);
    if (!st) st = read_keys(m, path, root);
    if (st) return st;
    const qj *mt = qj_get(root, "model_type");
    if (mt && mt->type == QJ_STRING && !(m->model_type = strdup(mt->s)))
        return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, path, NULL, NULL, "out of memory");
    /* ranges that depend on each other (vLLM's grouped_topk asserts them) */
    int E = m->moe_experts;
    if (E > 0 && m->moe_top_k > E)
        return qp_error_set(m->ctx, QP_ERR_PARSE, path, "num_experts_per_tok", NULL,
                            "config.json: num_experts_per_tok %d exceeds the %d experts (%s)", m->moe_top_k, E,
                            m->moe_experts_key);
    if (m->moe_groups > 0 && E > 0 && E % m->moe_groups)
        return qp_error_set(m->ctx, QP_ERR_PARSE, path, "n_group", NULL,
                            "config.json: the %d experts (%s) do not split into n_group %d groups", E, m->moe_experts_key,
                            m->moe_groups);
    if (m->moe_topk_group > 0 && m->moe_groups > 0 && m->moe_topk_group > m->moe_groups)
        return qp_error_set(m->ctx, QP_ERR_PARSE, path, "topk_group", NULL,
                            "config.json: topk_group %d exceeds n_group %d", m->moe_topk_group, m->moe_groups);
    return QP_OK;
}
