/* MoE routing as vLLM's FusedMoE.select_experts: fused_topk (softmax over
 * all experts, top-k, optional renormalisation) and grouped_topk (DeepSeek:
 * softmax or sigmoid scores, an optional correction bias that chooses but
 * does not weight, the best topk_group groups, routed_scaling_factor). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "host_device.h" /* qp_moe_topk, shared with the CUDA routing kernel */
#include "internal.h"

QP_API void qp_moe_options_init(qp_moe_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->act_dtype = QP_DTYPE_F16;
    o->top_k = 2;
    o->routed_scaling_factor = 1.0f;
}

/* exp of an fp32 value, evaluated in double and rounded once: a function
 * every backend can evaluate identically (fp32 expf is not correctly
 * rounded, and differs between libm, CUDA and the shader compilers), so
 * routing on a device (qp_moe_enqueue_logits) gives these bits too. */
static float exp_rn(float x) { return (float)exp((double)x); }

qp_status qp_moe_route_check(qp_context *ctx, int M, int E, const qp_moe_options *o) {
    const char *layer = o->layer;
    if (E > QP_EXPERTS_MAX)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "E", layer, "%d experts: at most %d", E, QP_EXPERTS_MAX);
    if (M <= 0 || E <= 0 || o->top_k <= 0 || o->top_k > E)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "top_k", layer,
                            "routing needs M > 0 tokens and 0 < top_k <= E (M = %d, E = %d, top_k = %d)", M, E, o->top_k);
    if (o->scoring != QP_MOE_SOFTMAX && o->scoring != QP_MOE_SIGMOID)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "scoring", layer, "unknown scoring function %d", (int)o->scoring);
    if (o->num_expert_group) {
        int g = o->num_expert_group;
        if (g < 0 || E % g || o->topk_group <= 0 || o->topk_group > g || (long long)o->topk_group * (E / g) < o->top_k)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "num_expert_group", layer,
                                "grouped top-k needs E divisible by num_expert_group and top_k experts within topk_group "
                                "groups (E = %d, groups = %d, topk_group = %d, top_k = %d)",
                                E, g, o->topk_group, o->top_k);
        if (o->e_score_correction_bias && E / g < 2)
            return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "e_score_correction_bias", layer,
                                "a correction bias scores groups by their two best experts: groups need >= 2 experts");
    } else if (o->scoring != QP_MOE_SOFTMAX || o->e_score_correction_bias) {
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "scoring", layer,
                            "sigmoid scoring and a correction bias need grouped top-k (num_expert_group > 0)");
    }
    return QP_OK;
}

QP_API qp_status qp_moe_route(qp_context *ctx, const float *logits, int M, int E, const qp_moe_options *opts,
                              int32_t *ids, float *weights) {
    if (!ctx) return QP_ERR_INVALID_ARGUMENT;
    if (!logits || !ids || !weights || !opts || opts->struct_size < sizeof *opts)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, NULL,
                            "qp_moe_route: NULL argument or qp_moe_options not from qp_moe_options_init");
    qp_status st = qp_moe_route_check(ctx, M, E, opts);
    if (st) return st;
    int k = opts->top_k;
    float *sc = malloc(sizeof(float) * (size_t)E * 3);
    int *idx = malloc(sizeof(int) * (size_t)(E + k));
    if (!sc || !idx) { free(sc); free(idx); return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, opts->layer, "out of memory"); }
    float *biased = sc + E, *gs = sc + 2 * E;
    for (int m = 0; m < M; m++) {
        const float *x = logits + (size_t)m * E;
        if (opts->scoring == QP_MOE_SOFTMAX) { /* topk_softmax / torch.softmax in fp32 */
            float mx = -INFINITY, sum = 0.0f;
            for (int e = 0; e < E; e++) mx = fmaxf(mx, x[e]);
            for (int e = 0; e < E; e++) sum += (sc[e] = exp_rn(x[e] - mx));
            float inv = 1.0f / sum;
            for (int e = 0; e < E; e++) sc[e] *= inv;
        } else {
            for (int e = 0; e < E; e++) sc[e] = 1.0f / (1.0f + exp_rn(-x[e]));
        }
        int *sel = idx + E;
        if (opts->num_expert_group) {
            int G = opts->num_expert_group, per = E / G;
            for (int e = 0; e < E; e++)
                biased[e] = opts->e_score_correction_bias ? sc[e] + opts->e_score_correction_bias[e] : sc[e];
            for (int g = 0; g < G; g++) { /* group score: top-2 sum with a bias, else the max */
                int two[2];
                qp_moe_topk(biased + (size_t)g * per, per, opts->e_score_correction_bias ? 2 : 1, two);
                gs[g] = opts->e_score_correction_bias ? biased[g * per + two[0]] + biased[g * per + two[1]]
                                                      : biased[g * per + two[0]];
            }
            qp_moe_topk(gs, G, opts->topk_group, idx);
            for (int e = 0; e < E; e++) {
                bool keep = false;
                for (int t = 0; t < opts->topk_group; t++) keep |= idx[t] == e / per;
                if (!keep) biased[e] = -INFINITY;
            }
            qp_moe_topk(biased, E, k, sel);
        } else {
            qp_moe_topk(sc, E, k, sel);
        }
        float sum = 0.0f;
        for (int j = 0; j < k; j++) sum += sc[sel[j]]; /* the unbiased scores weight */
        for (int j = 0; j < k; j++) {
            float w = sc[sel[j]];
            if (opts->renormalize) w = w / sum;
            if (opts->num_expert_group && opts->routed_scaling_factor != 1.0f) w *= opts->routed_scaling_factor;
            ids[(size_t)m * k + j] = sel[j];
            weights[(size_t)m * k + j] = w;
        }
    }
    free(sc);
    free(idx);
    return QP_OK;
}
