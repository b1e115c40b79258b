/* Routed experts from a checkpoint (FusedMoE.weight_loader): each expert's
 * gate, up and down projections bound like linear layers, then stacked into
 * w13 [E, 2I, H] (gate rows, then up rows) and w2 [E, H, I] with their
 * scales, as vLLM's FusedMoE parameters. And the architecture table: which
 * modules a model class builds unquantized, and what its experts' tensors
 * are called. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binder.h"
#include "model.h"

/* The spellings of the experts' projections (gate, up, down): the
 * Llama/Qwen/DeepSeek names, which transformers 5 and Quark's exports also
 * give Mixtral, and Mixtral's original w1/w3/w2 (block_sparse_moe). Every
 * MoE model class of vLLM builds its router, the sibling "gate" module of
 * the experts, as ReplicatedLinear(..., quant_config=None): never
 * quantized, whatever the config says. */
static const struct arch {
    const char *gate, *up, *down;
} arches[] = {
    {"gate_proj", "up_proj", "down_proj"},
    {"w1", "w3", "w2"},
};
#define ROUTER "gate"

static int lookup(const qp_model *m, const char *name, qp_tensor *out);

/* The spelling whose expert 0 exists under `prefix` (the first otherwise). */
static const struct arch *arch_of(const qp_model *m, const char *prefix) {
    for (size_t i = 0; i < sizeof arches / sizeof *arches; i++) {
        char nm[1100];
        qp_tensor t;
        snprintf(nm, sizeof nm, "%s.0.%s.weight", prefix, arches[i].gate);
        if (lookup(m, nm, &t)) return &arches[i];
        snprintf(nm, sizeof nm, "%s.0.%s.weight_packed", prefix, arches[i].gate); /* compressed-tensors */
        if (lookup(m, nm, &t)) return &arches[i];
    }
    return &arches[0];
}

/* A look-up that records no error (qp_model_find_tensor does). */
static int lookup(const qp_model *m, const char *name, qp_tensor *out) {
    qp_status st; /* each shard's name index (no scan of every tensor) */
    for (size_t i = 0; i < m->n_files; i++)
        if (qp_safetensors_lookup(m->files[i], name, out, &st) && st == QP_OK) return 1;
    return 0;
}

/* Whether some tensor's name starts with `prefix` (an expert projection
 * of any scheme: weight, B, qweight, ...). */
static int has_prefix(const qp_model *m, const char *prefix) {
    for (size_t i = 0; i < m->n_files; i++)
        if (qp_safetensors_has_prefix(m->files[i], prefix)) return 1;
    return 0;
}

/* A known architecture: the modules its class builds with
 * quant_config=None (api/arch.c). Otherwise "<block>.<router>" where
 * <block>.experts.0.<gate>.* exists. */
QP_API int qp_model_layer_unquantized(const qp_model *m, const char *layer) {
    if (!m || !layer) return 0;
    if (m->arch.row) {
        qp_arch_info a = {.struct_size = sizeof a};
        qp_arch_fill(&m->arch, &a);
        return qp_arch_module_class_vllm(&a, m->cfg ? m->cfg->method : QP_METHOD_QUARK, layer) == QP_MODULE_LINEAR_UNQUANTIZED;
    }
    const char *dot = strrchr(layer, '.');
    if (!dot || strcmp(dot + 1, ROUTER)) return 0;
    for (size_t i = 0; i < sizeof arches / sizeof *arches; i++) {
        char probe[1024];
        snprintf(probe, sizeof probe, "%.*s.experts.0.%s.", (int)(dot - layer), layer, arches[i].gate);
        if (has_prefix(m, probe)) return 1;
    }
    return 0;
}

QP_API void qp_moe_binding_free(qp_moe_binding *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_tensors; i++) free(b->owned_[i]);
    memset(b, 0, sizeof *b);
}

static qp_status oom(qp_model *m, const char *layer) {
    return qp_error_set(m->ctx, QP_ERR_OUT_OF_MEMORY, m->dir, NULL, layer, "out of memory");
}

/* Appends an owned tensor of `bytes`. */
static void *add(qp_moe_binding *b, const char *name, qp_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2,
                 size_t bytes) {
    if (b->n_tensors >= 8) return NULL;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) return NULL;
    b->owned_[b->n_tensors] = p;
    b->tensors[b->n_tensors++] = (qp_tensor){name, dt, ndim, {d0, d1, d2, 0}, p};
    return p;
}

static const qp_tensor *find(const qp_layer_binding *l, const char *name) {
    for (size_t i = 0; i < l->n_tensors; i++)
        if (!strcmp(l->tensors[i].name, name)) return &l->tensors[i];
    return NULL;
}

/* The block-scaled experts (OCP MX, W4A8 MXFP4-FP8, NVFP4), one GEMM
 * (pass 0: w13 from gate and up, 1: w2 from down): the block scales
 * stacked as stored, [E, rows, K / block]; NVFP4's per-shard
 * weight_scale_2 into w13_weight_scale_2 [E, 2] / w2_weight_scale_2 [E];
 * input scales per expert, where FusedMoE's weight loader writes every
 * name containing "input_scale" with _load_single_value: one value per
 * expert, the shard loaded last (up) filling both of NVFP4's
 * w13_input_scale_2 slots. */
static qp_status stack_blocked(qp_model *m, qp_moe_binding *b, const qp_layer_binding *lb, int E, int pass, size_t rows) {
    int shards = pass ? 1 : 2;
    const qp_layer_binding *l0 = &lb[pass ? 2 : 0];
    const qp_tensor *s0 = find(l0, "weight_scale");
    if (!s0) return qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, "weight_scale", l0->layer, "missing weight_scale");
    size_t per = qp_tensor_count(s0), es = qp_dtype_elem_bytes(s0->dtype);
    char *sc = add(b, pass ? "w2_weight_scale" : "w13_weight_scale", s0->dtype, 3, E, (int64_t)rows,
                   (int64_t)(per / (rows / (size_t)shards)), (size_t)E * (size_t)shards * per * es);
    if (!sc) return oom(m, b->layer);
    for (int e = 0; e < E; e++)
        for (int s = 0; s < shards; s++) {
            const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : s)];
            const qp_tensor *t = find(l, "weight_scale");
            if (!t || t->dtype != s0->dtype || qp_tensor_count(t) != per)
                return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_scale", l->layer,
                                    "weight_scale is %s of %zu elements; expert 0's is %s of %zu",
                                    t ? qp_dtype_name(t->dtype) : "missing", t ? qp_tensor_count(t) : 0, qp_dtype_name(s0->dtype), per);
            memcpy(sc + ((size_t)e * (size_t)shards + (size_t)s) * per * es, t->data, per * es);
        }
    bool nv = b->scheme.kind == QP_SCHEME_NVFP4;
    const char *names[2] = {nv ? "weight_scale_2" : NULL, nv ? "input_scale_2" : b->scheme.kind == QP_SCHEME_W4A8_MXFP4_FP8 ? "input_scale" : NULL};
    for (int i = 0; i < 2; i++) {
        if (!names[i]) continue;
        char nm[40];
        snprintf(nm, sizeof nm, "%s_%s", pass ? "w2" : "w13", names[i]);
        int cols = nv ? shards : 1;
        float *v = add(b, i ? (pass ? (nv ? "w2_input_scale_2" : "w2_input_scale") : (nv ? "w13_input_scale_2" : "w13_input_scale"))
                            : (pass ? "w2_weight_scale_2" : "w13_weight_scale_2"),
                       QP_DTYPE_F32, cols > 1 ? 2 : 1, E, cols > 1 ? cols : 0, 0, (size_t)E * (size_t)cols * sizeof(float));
        if (!v) return oom(m, b->layer);
        for (int e = 0; e < E; e++)
            for (int s = 0; s < shards; s++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : s)];
                const qp_tensor *t = find(l, names[i]);
                if (!t || qp_tensor_count(t) != 1 || (t->dtype != QP_DTYPE_F32 && t->dtype != QP_DTYPE_F16 && t->dtype != QP_DTYPE_BF16))
                    return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, names[i], l->layer, "missing, non-scalar or non-float %s",
                                        names[i]);
                float x = qp_num_load(t->dtype, t->data, 0);
                if (i == 0) v[(size_t)e * (size_t)cols + (size_t)s] = x;                /* per shard */
                else for (int c = 0; c < cols; c++) v[(size_t)e * (size_t)cols + (size_t)c] = x; /* last wins */
            }
    }
    return QP_OK;
}

/* Whether `s` is one of the suffixes the fused MoE of `kind` consumes
 * (zero points: Quark writes them for symmetric schemes, all zero;
 * compressed-tensors W4A16 experts hold weight_packed and weight_shape). */
static int known_suffix(const char *s, qp_scheme_kind kind, bool blocked, const char *wname) {
    static const char *const q[] = {"weight_scale", "input_scale", "weight_zero_point", "input_zero_point"};
    if (!strcmp(s, wname) || (strcmp(wname, "weight") && !strcmp(s, "weight_shape"))) return 1;
    if (kind == QP_SCHEME_UNQUANTIZED) return 0;
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        if (!strcmp(s, q[i])) return 1;
    return blocked && (!strcmp(s, "weight_scale_2") || !strcmp(s, "input_scale_2"));
}

/* The block's tensors against config.json's expert count E: each name is
 * "<prefix>.<e>.<proj>.<suffix>" with a decimal e in [0, E), proj one of
 * the spelling's three and a suffix the scheme consumes; each expert has
 * the weight of all three projections (vLLM: "Following weights were not
 * initialized from checkpoint"). Anything else is an error naming the
 * tensor: an extra, negative or huge expert index would otherwise be
 * dropped, and a missing expert shrink the block. */
static qp_status check_block(qp_model *m, const char *prefix, const struct arch *a, int E, qp_scheme_kind kind, bool blocked,
                             const char *wname) {
    size_t pl = strlen(prefix);
    const char *proj[3] = {a->gate, a->up, a->down};
    unsigned char *seen = calloc((size_t)E * 3, 1);
    if (!seen) return oom(m, prefix);
    qp_status st = QP_OK;
    char dotted[1100];
    snprintf(dotted, sizeof dotted, "%s.", prefix);
    for (size_t i = 0; i < m->n_files && !st; i++) {
        /* "<prefix>.*" from the shard's name index, in header order */
        size_t *idx = NULL, ni = 0;
        st = qp_safetensors_prefixed(m->files[i], dotted, &idx, &ni);
        for (size_t k = 0; k < ni && !st; k++) {
            size_t j = idx[k];
            qp_tensor t;
            if (qp_safetensors_get(m->files[i], j, &t, NULL) || strncmp(t.name, prefix, pl) || t.name[pl] != '.') continue;
            const char *p = t.name + pl + 1, *dot = strchr(p, '.');
            size_t il = dot ? (size_t)(dot - p) : strlen(p);
            long long e = 0;
            bool num = il > 0 && il <= 9 && (il == 1 || p[0] != '0');
            for (size_t k = 0; num && k < il; k++) {
                num = p[k] >= '0' && p[k] <= '9';
                e = e * 10 + (p[k] - '0');
            }
            if (!num) {
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, t.name, prefix,
                                  "tensor '%s' is under the experts of '%s' but '%.*s' is not an expert index (0 to %d)",
                                  t.name, prefix, (int)(il > 40 ? 40 : il), p, E - 1);
                break;
            }
            if (e >= E) {
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, t.name, prefix,
                                  "tensor '%s' is expert %lld, but config.json's %s is %d (experts 0 to %d)", t.name, e,
                                  m->moe_experts_key ? m->moe_experts_key : "num_experts", E, E - 1);
                break;
            }
            const char *pn = dot ? dot + 1 : "", *d2 = strchr(pn, '.');
            int pi = -1;
            for (int k = 0; k < 3 && d2; k++)
                if (strlen(proj[k]) == (size_t)(d2 - pn) && !strncmp(pn, proj[k], (size_t)(d2 - pn))) pi = k;
            if (pi < 0 || strchr(d2 + 1, '.') || !known_suffix(d2 + 1, kind, blocked, wname)) {
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, t.name, prefix,
                                  pi < 0 ? "tensor '%s' is not one of expert %lld's projections (%s, %s, %s): no layer binds it"
                                         : "tensor '%s' of expert %lld (%s, %s, %s) is not a tensor the fused MoE of this "
                                           "scheme reads: no layer binds it",
                                  t.name, e, a->gate, a->up, a->down);
                break;
            }
            if (!strcmp(d2 + 1, wname)) seen[e * 3 + pi] = 1;
        }
        free(idx);
    }
    for (int e = 0; e < E && !st; e++)
        for (int k = 0; k < 3; k++)
            if (!seen[e * 3 + k]) {
                int more = 0;
                for (int f = e * 3 + k + 1; f < E * 3; f++) more += !seen[f];
                st = qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, NULL, prefix,
                                  "Following weights were not initialized from checkpoint: {'%s.%d.%s.%s'%s} "
                                  "(config.json's %s is %d; %d more missing)",
                                  prefix, e, proj[k], wname, more ? ", ..." : "", m->moe_experts_key ? m->moe_experts_key : "num_experts",
                                  E, more);
                break;
            }
    free(seen);
    return st;
}

/* The router "<block>.gate": a [E, H] float weight (its only tensor but
 * the grouped routing's e_score_correction_bias), as run_moe and vLLM's
 * ReplicatedLinear use it. A missing or mis-shaped one is an error. */
static qp_status check_router(qp_model *m, const char *prefix, int G, int H, char *router, size_t cap) {
    const char *dot = strrchr(prefix, '.');
    int bl = dot ? (int)(dot - prefix) : 0;
    char rn[1100];
    snprintf(rn, sizeof rn, "%.*s%s%s.weight", bl, prefix, bl ? "." : "", ROUTER);
    qp_tensor t;
    if (!lookup(m, rn, &t))
        return qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, rn, prefix,
                            "no router '%s' in the checkpoint: the experts of '%s' need one of [%d, %d] (experts, hidden)", rn,
                            prefix, G, H);
    if (t.ndim != 2 || t.shape[0] != G || t.shape[1] != H ||
        (t.dtype != QP_DTYPE_F16 && t.dtype != QP_DTYPE_BF16 && t.dtype != QP_DTYPE_F32)) {
        char sh[96] = "";
        for (int d = 0; d < t.ndim && d < 4; d++)
            snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", d ? ", " : "", (long long)t.shape[d]);
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, rn, prefix,
                            "router '%s' is %s [%s]; expected a float tensor of [%d, %d] (experts, hidden)", rn,
                            qp_dtype_name(t.dtype), sh, G, H);
    }
    /* the router's other tensors: only the correction bias is read */
    size_t rl = strlen(rn) - strlen("weight");
    for (size_t i = 0; i < m->n_files; i++)
        for (size_t j = 0; j < qp_safetensors_count(m->files[i]); j++) {
            qp_tensor o;
            if (qp_safetensors_get(m->files[i], j, &o, NULL) || strncmp(o.name, rn, rl)) continue;
            if (!strcmp(o.name + rl, "weight") || !strcmp(o.name + rl, "e_score_correction_bias")) continue;
            return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, o.name, prefix,
                                "tensor '%s' of the router is not read: the router is a weight without bias", o.name);
        }
    snprintf(router, cap, "%.*s", (int)(strlen(rn) - strlen(".weight")), rn);
    return QP_OK;
}

/* W4A16 int4/uint4 experts (QuarkW4A16Int4MoEMethod's weight loader,
 * convert_quark_tensor): each projection's Quark words [K, N/8] unpacked
 * as the linear binding reads them (qp_unpack_int4_quark, order/reorder),
 * symmetric codes ^ 8 (uint4b8), then transposed to [N, K] and packed two
 * per byte along K (low nibble the even k): w13_weight [E, 2I, H/2] and
 * w2_weight [E, H, I/2] U8; scales transposed to [N, K/g] as stored
 * (w13_weight_scale [E, 2I, H/g]); zero points [K/g, N/8] words unpacked,
 * transposed and packed two per byte along N: w13_weight_zero_point
 * [E, I, H/g] (gate's rows, then up's), w2_weight_zero_point [E, H/2, I/g]
 * (asymmetric only; vLLM ignores them otherwise). */
/* One compressed-tensors W4A16 shard into the stacked layout of
 * stack_w4a16: weight_packed [N, K/8] holds u = code + 8 along K (value i
 * of a word at bits 4i), which is the uint4b8 code itself; weight_scale is
 * already [N, K/g]; weight_zero_point [N/8, K/g] words packed along N. */
static qp_status ct_w4a16_shard(qp_model *m, const qp_layer_binding *l, bool sym, size_t N, size_t K, size_t G, qp_dtype sdt,
                                size_t r0, uint8_t *we, uint8_t *se, uint8_t *ze) {
    const qp_tensor *t = find(l, "weight_packed"), *ts = find(l, "weight_scale"), *tz = find(l, "weight_zero_point");
    size_t kw = K / 8, nw = (N + 7) / 8, ses = qp_dtype_elem_bytes(sdt);
    if (K % 8 || !t || t->dtype != QP_DTYPE_I32 || qp_tensor_count(t) != N * kw || !ts || ts->dtype != sdt || qp_tensor_count(ts) != N * G ||
        (!sym && (!tz || tz->dtype != QP_DTYPE_I32 || qp_tensor_count(tz) != nw * G)))
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_packed", l->layer,
                            "compressed-tensors W4A16 expert tensors must be weight_packed I32 [%zu, %zu], weight_scale "
                            "[%zu, %zu]%s as expert 0's", N, kw, N, G, sym ? "" : " and weight_zero_point I32 [N/8, K/g]");
    /* the layer binding's tensors are its own heap copies */
    const uint8_t *wp = t->data, *zw = sym ? NULL : tz->data;
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++) {
            uint32_t w;
            memcpy(&w, wp + (n * kw + k / 8) * 4, 4);
            we[(r0 + n) * K / 2 + k / 2] |= (uint8_t)(((w >> (4 * (k % 8))) & 15u) << (4 * (k % 2)));
        }
    memcpy(se + r0 * G * ses, ts->data, N * G * ses);
    for (size_t gi = 0; !sym && gi < G; gi++)
        for (size_t n = 0; n < N; n++) {
            uint32_t z;
            memcpy(&z, zw + ((n / 8) * G + gi) * 4, 4);
            ze[((r0 + n) / 2) * G + gi] |= (uint8_t)(((z >> (4 * (n % 8))) & 15u) << (4 * ((r0 + n) % 2)));
        }
    return QP_OK;
}

static qp_status stack_w4a16(qp_model *m, qp_moe_binding *b, const qp_layer_binding *lb, int E, int H, int I) {
    qp_pack_method pk = b->scheme.pack_method;
    bool sym = b->scheme.weight.symmetric;
    int gs = b->scheme.weight.group_size;
    if (gs <= 0 || H % gs || I % gs || I % 2 || H % 2)
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_scale", b->layer,
                            "W4A16 experts: H = %d and I = %d must be even multiples of the group size %d", H, I, gs);
    for (int pass = 0; pass < 2; pass++) {
        size_t rows = pass ? (size_t)H : 2 * (size_t)I, K = pass ? (size_t)I : (size_t)H, N = pass ? (size_t)H : (size_t)I;
        size_t G = K / (size_t)gs, nc = (N + 7) / 8;
        const qp_tensor *s0 = find(&lb[pass ? 2 : 0], "weight_scale");
        if (!s0) return qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, "weight_scale", lb[pass ? 2 : 0].layer, "missing weight_scale");
        size_t ses = qp_dtype_elem_bytes(s0->dtype);
        bool ct = qp_scheme_is_ct(&b->scheme);
        uint8_t *w = add(b, pass ? "w2_weight" : "w13_weight", QP_DTYPE_U8, 3, E, (int64_t)rows, (int64_t)K / 2,
                         (size_t)E * rows * K / 2);
        uint8_t *sc = add(b, pass ? "w2_weight_scale" : "w13_weight_scale", s0->dtype, 3, E, (int64_t)rows, (int64_t)G,
                          (size_t)E * rows * G * ses);
        uint8_t *zp = sym ? NULL
                          : add(b, pass ? "w2_weight_zero_point" : "w13_weight_zero_point", QP_DTYPE_U8, 3, E,
                                (int64_t)rows / 2, (int64_t)G, (size_t)E * rows / 2 * G);
        uint8_t *kn = malloc(K * N > G * N ? K * N : G * N);
        if (!w || !sc || (!sym && !zp) || !kn) { free(kn); return oom(m, b->layer); }
        for (int e = 0; e < E; e++)
            for (int s = 0; s < (pass ? 1 : 2); s++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : s)];
                const qp_tensor *t = find(l, "weight"), *ts = find(l, "weight_scale"), *tz = find(l, "weight_zero_point");
                size_t r0 = (size_t)s * N; /* first row of this shard */
                if (ct) {
                    qp_status cs = ct_w4a16_shard(m, l, sym, N, K, G, s0->dtype, r0, w + (size_t)e * rows * K / 2,
                                                  sc + (size_t)e * rows * G * ses, sym ? NULL : zp + (size_t)e * rows / 2 * G);
                    if (cs) { free(kn); return cs; }
                    continue;
                }
                if (!t || t->dtype != QP_DTYPE_I32 || qp_tensor_count(t) != K * nc || !ts || ts->dtype != s0->dtype ||
                    (qp_tensor_count(ts) != G * N && qp_tensor_count(ts) != G * 8 * nc) || (!sym && (!tz || tz->dtype != QP_DTYPE_I32 || qp_tensor_count(tz) != G * nc))) {
                    free(kn);
                    return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight", l->layer,
                                        "W4A16 expert tensors must be weight I32 [%zu, %zu], weight_scale [%zu, %zu]%s as "
                                        "expert 0's", K, nc, G, N, sym ? "" : " and weight_zero_point I32");
                }
                if (qp_unpack_int4_quark(t->data, (int)K, (int)N, pk, kn)) {
                    free(kn);
                    return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight", l->layer,
                                        "cannot unpack the int4 words (pack_method must be order or reorder)");
                }
                uint8_t *we = w + (size_t)e * rows * K / 2;
                for (size_t n = 0; n < N; n++)
                    for (size_t k = 0; k < K; k++) {
                        uint8_t c = kn[k * N + n] ^ (sym ? 8 : 0);
                        we[(r0 + n) * K / 2 + k / 2] |= (uint8_t)(c << (4 * (k % 2)));
                    }
                size_t stride = qp_tensor_count(ts) == G * N ? N : 8 * nc;
                uint8_t *se = sc + (size_t)e * rows * G * ses;
                for (size_t gi = 0; gi < G; gi++)
                    for (size_t n = 0; n < N; n++)
                        memcpy(se + ((r0 + n) * G + gi) * ses, (const uint8_t *)ts->data + (gi * stride + n) * ses, ses);
                if (sym) continue;
                if (qp_unpack_int4_quark(tz->data, (int)G, (int)N, pk, kn)) {
                    free(kn);
                    return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_zero_point", l->layer,
                                        "cannot unpack the int4 zero points");
                }
                uint8_t *ze = zp + (size_t)e * rows / 2 * G;
                for (size_t gi = 0; gi < G; gi++)
                    for (size_t n = 0; n < N; n++)
                        ze[((r0 + n) / 2) * G + gi] |= (uint8_t)(kn[gi * N + n] << (4 * ((r0 + n) % 2)));
            }
        free(kn);
    }
    return QP_OK;
}

/* FP8 per-block (128 x 128) experts: the block scales of gate and up
 * stacked along the rows, w13_weight_scale [E, 2I/128, H/128], and down's
 * as w2_weight_scale [E, H/128, I/128] (f32, as FusedMoE's BLOCK scales).
 * vLLM's validate_fp8_block_shape_moe needs I % 128 == 0. */
static qp_status stack_fp8_block(qp_model *m, qp_moe_binding *b, const qp_layer_binding *lb, int E, int H, int I) {
    if (I % 128)
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight", b->layer,
                            "The output_size of gate's and up's weight = %d is not divisible by weight quantization "
                            "block_n = 128.", I);
    for (int pass = 0; pass < 2; pass++) {
        size_t N = pass ? (size_t)H : (size_t)I, K = pass ? (size_t)I : (size_t)H;
        size_t nb = (N + 127) / 128, kb = (K + 127) / 128, shards = pass ? 1 : 2;
        float *sc = add(b, pass ? "w2_weight_scale" : "w13_weight_scale", QP_DTYPE_F32, 3, E, (int64_t)(nb * shards),
                        (int64_t)kb, (size_t)E * shards * nb * kb * sizeof(float));
        if (!sc) return oom(m, b->layer);
        for (int e = 0; e < E; e++)
            for (size_t s = 0; s < shards; s++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : (int)s)];
                const qp_tensor *t = find(l, "weight_scale");
                if (!t || qp_tensor_count(t) != nb * kb || (t->dtype != QP_DTYPE_F32 && t->dtype != QP_DTYPE_F16 && t->dtype != QP_DTYPE_BF16))
                    return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_scale", l->layer,
                                        "weight_scale must be a float tensor [%zu, %zu] (one per 128 x 128 block)", nb, kb);
                for (size_t i = 0; i < nb * kb; i++)
                    sc[((size_t)e * shards + s) * nb * kb + i] = qp_num_load(t->dtype, t->data, i);
            }
    }
    return QP_OK;
}

QP_API qp_status qp_model_bind_moe(qp_model *m, const char *prefix, const qp_bind_options *opts, qp_moe_binding *b) {
    if (!m || !prefix || !b) return QP_ERR_INVALID_ARGUMENT;
    memset(b, 0, sizeof *b);
    snprintf(b->layer, sizeof b->layer, "%s", prefix);
    if (!m->cfg)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, "quantization_config", prefix,
                            "the model has no quantization_config (quantize it with `qport quantize`)");
    const struct arch *a = arch_of(m, prefix);
    qp_bind_options o;
    qp_bind_options_init(&o);
    if (opts) memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    if (o.ep_size < 1 || o.ep_rank < 0 || o.ep_rank >= o.ep_size)
        return qp_error_set(m->ctx, QP_ERR_INVALID_ARGUMENT, m->dir, NULL, prefix, "expert-parallel rank %d of size %d",
                            o.ep_rank, o.ep_size);
    qp_status st = qp_config_resolve(m->cfg, prefix, QP_LAYER_MOE, o.resolve, &b->scheme);
    if (st) return st;
    qp_scheme_kind kind = b->scheme.kind;
    if (kind == QP_SCHEME_HF_FP8 && b->scheme.weight.block[0] <= 0) kind = QP_SCHEME_W8A8_FP8; /* Fp8MoEMethod */
    bool blocked = kind == QP_SCHEME_OCP_MX || kind == QP_SCHEME_W4A8_MXFP4_FP8 || kind == QP_SCHEME_NVFP4;
    bool w4 = kind == QP_SCHEME_W4A16_INT4, fp8blk = kind == QP_SCHEME_W8A8_FP8_BLOCK;
    if (kind != QP_SCHEME_UNQUANTIZED && kind != QP_SCHEME_W8A8_FP8 && kind != QP_SCHEME_W8A8_INT8 && !blocked && !w4 &&
        !fp8blk)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, NULL, prefix,
                            kind == QP_SCHEME_W4A8_INT4_FP8 ? "%s experts (%s) run only through ROCm AITER's fused MoE in vLLM"
                                                             : "qport has no fused MoE for %s experts (%s)",
                            qp_scheme_kind_name(kind), b->scheme.scheme_class);
    /* how many experts: config.json's count, every one present, nothing
     * else under the block */
    int E = m->moe_experts;
    if (E < 1)
        return qp_error_set(m->ctx, QP_ERR_PARSE, m->dir, "num_experts", prefix,
                            "config.json gives no expert count (num_experts, num_local_experts or n_routed_experts) for "
                            "the experts of '%s'", prefix);
    /* compressed-tensors experts: the integer ones are weight_packed; the
     * block-float ones (NVFP4's inverted global scales) are not bound yet */
    bool ct = qp_scheme_is_ct(&b->scheme);
    if (ct && blocked)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, NULL, prefix,
                            "compressed-tensors %s experts (%s) are resolved but not bound yet", qp_scheme_kind_name(kind),
                            b->scheme.scheme_class);
    if ((st = check_block(m, prefix, a, E, kind, blocked, ct && w4 ? "weight_packed" : "weight"))) return st;
    /* expert parallelism: this rank's contiguous experts, unsliced */
    int base = E / o.ep_size, rem = E % o.ep_size, first = o.ep_rank * base + (o.ep_rank < rem ? o.ep_rank : rem);
    int local = base + (o.ep_rank < rem);
    if (!local)
        return qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, NULL, prefix,
                            "expert-parallel rank %d of %d owns none of the %d experts", o.ep_rank, o.ep_size, E);
    if (o.ep_size > 1) o.tp_size = 1, o.tp_rank = 0;
    b->global_num_experts = E;
    b->expert_offset = first;
    E = local;
    b->E = E;
    if (kind == QP_SCHEME_UNQUANTIZED && o.tp_size > 1)
        return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, NULL, prefix,
                            "tensor-parallel slicing of unquantized experts is not implemented (tp_size %d)", o.tp_size);
    const char *proj[3] = {a->gate, a->up, a->down};
    qp_layer_binding *lb = calloc((size_t)E * 3, sizeof *lb);
    if (!lb) return oom(m, prefix);
    for (int e = 0; e < E && !st; e++)
        for (int p = 0; p < 3 && !st; p++) {
            char nm[1100];
            snprintf(nm, sizeof nm, "%s.%d.%s", prefix, first + e, proj[p]);
            /* unquantized experts (an excluded block, a config that quantizes
             * linear layers only) load plain weights whatever the linear
             * resolution of their names says */
            st = kind == QP_SCHEME_UNQUANTIZED ? QP_ERR_UNSUPPORTED : qp_model_bind_layer(m, nm, &o, &lb[e * 3 + p]);
            if (st == QP_ERR_UNSUPPORTED && kind == QP_SCHEME_UNQUANTIZED) {
                qp_tensor t;
                char wn[1200];
                snprintf(wn, sizeof wn, "%s.weight", nm);
                st = qp_model_find_tensor(m, wn, &t);
                if (!st && t.ndim == 2) {
                    qp_layer_binding *l = &lb[e * 3 + p];
                    memset(l, 0, sizeof *l);
                    l->N = (int)t.shape[0];
                    l->K = (int)t.shape[1];
                    l->tensors[0] = t;
                    l->tensors[0].name = "weight";
                    l->n_tensors = 1;
                }
            }
        }
    int I = 0, H = 0;
    if (!st) {
        I = lb[0].N;
        H = lb[0].K;
        for (int e = 0; e < E && !st; e++) {
            const qp_layer_binding *g = &lb[e * 3], *u = &lb[e * 3 + 1], *d = &lb[e * 3 + 2];
            if (g->N != I || u->N != I || g->K != H || u->K != H || d->N != H || d->K != I)
                st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight", g->layer,
                                  "expert %d has gate/up [%d, %d]/[%d, %d] and down [%d, %d]; expert 0 has gate/up "
                                  "[%d, %d] and down [%d, %d]",
                                  e, g->N, g->K, u->N, u->K, d->N, d->K, I, H, H, I);
        }
    }
    b->H = H;
    b->I = I;
    if (!st && w4) st = stack_w4a16(m, b, lb, E, H, I);
    /* stack: weights, then the scales of the scheme */
    for (int pass = 0; pass < 2 && !st && !w4; pass++) { /* 0: w13 (gate, up), 1: w2 */
        const qp_tensor *w0 = find(&lb[pass ? 2 : 0], "weight");
        /* K counts stored elements: packed fp4/fp6 rows are bytes */
        size_t rows = pass ? (size_t)H : 2 * (size_t)I, K = qp_tensor_count(w0) / (rows / (pass ? 1 : 2)), es = qp_dtype_elem_bytes(w0->dtype);
        char *w = add(b, pass ? "w2_weight" : "w13_weight", w0->dtype, 3, E, (int64_t)rows, (int64_t)K, (size_t)E * rows * K * es);
        if (!w) { st = oom(m, prefix); break; }
        for (int e = 0; e < E && !st; e++)
            for (int s = 0; s < (pass ? 1 : 2) && !st; s++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : s)];
                const qp_tensor *t = find(l, "weight");
                size_t n = (pass ? rows : rows / 2) * K;
                if (!t || t->dtype != w0->dtype || qp_tensor_count(t) != n) {
                    st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight", l->layer, "expert weight is %s, expert 0's is %s",
                                      t ? qp_dtype_name(t->dtype) : "missing", qp_dtype_name(w0->dtype));
                    break;
                }
                /* unquantized experts point into the shard: read, not mapped */
                st = qp_model_copy(m, w + ((size_t)e * rows + (size_t)s * rows / 2) * K * es, t->data, n * es);
            }
        if (st || kind == QP_SCHEME_UNQUANTIZED) continue;
        if (blocked) { st = stack_blocked(m, b, lb, E, pass, rows); continue; }
        if (fp8blk) { if (pass) st = stack_fp8_block(m, b, lb, E, H, I); continue; }
        /* weight scales: one per shard ([E, 2] / [E]) or per channel */
        const qp_tensor *s0 = find(&lb[pass ? 2 : 0], "weight_scale");
        if (!s0) { st = qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, "weight_scale", lb[pass ? 2 : 0].layer, "missing weight_scale"); break; }
        bool pc = qp_tensor_count(s0) > 1;
        size_t per = pc ? (pass ? rows : rows / 2) : 1, total = (size_t)E * (pass ? 1 : 2) * per;
        float *sc = add(b, pass ? "w2_weight_scale" : "w13_weight_scale", QP_DTYPE_F32, pc ? 2 : (pass ? 1 : 2), E,
                        pc ? (int64_t)rows : 2, 0, total * sizeof(float));
        if (!sc) { st = oom(m, prefix); break; }
        if (!pc && pass) b->tensors[b->n_tensors - 1].ndim = 1;
        for (int e = 0; e < E && !st; e++)
            for (int s = 0; s < (pass ? 1 : 2); s++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : s)];
                const qp_tensor *t = find(l, "weight_scale");
                if (!t || qp_tensor_count(t) != per) {
                    st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_scale", l->layer,
                                      "weight_scale has %zu elements; expert 0's has %zu", t ? qp_tensor_count(t) : 0, per);
                    break;
                }
                if (t->dtype != QP_DTYPE_F32 && t->dtype != QP_DTYPE_F16 && t->dtype != QP_DTYPE_BF16) {
                    st = qp_error_set(m->ctx, QP_ERR_VALUE, m->dir, "weight_scale", l->layer,
                                      "weight_scale must be a float tensor, got %s", qp_dtype_name(t->dtype));
                    break;
                }
                for (size_t i = 0; i < per; i++)
                    sc[((size_t)e * (pass ? 1 : 2) + (size_t)s) * per + i] = qp_num_load(t->dtype, t->data, i);
            }
        /* static input scales: [E]; for w13 the shard loaded last wins, as
         * FusedMoE's _load_single_value writes one slot per expert (the
         * up projection, which follows the gate in a sorted checkpoint) */
        if (!st && strstr(b->scheme.activation_key, "Static")) {
            float *is = add(b, pass ? "w2_input_scale" : "w13_input_scale", QP_DTYPE_F32, 1, E, 0, 0, (size_t)E * sizeof(float));
            if (!is) { st = oom(m, prefix); break; }
            for (int e = 0; e < E && !st; e++) {
                const qp_layer_binding *l = &lb[e * 3 + (pass ? 2 : 1)];
                const qp_tensor *t = find(l, "input_scale");
                if (!t || qp_tensor_count(t) != 1) {
                    st = qp_error_set(m->ctx, QP_ERR_NOT_FOUND, m->dir, "input_scale", l->layer, "missing or non-scalar input_scale");
                    break;
                }
                is[e] = qp_num_load(t->dtype, t->data, 0);
            }
        }
    }
    /* the router, built unquantized: present and [E, H] */
    if (!st) st = check_router(m, prefix, b->global_num_experts, H, b->router, sizeof b->router);
    for (int i = 0; i < E * 3; i++) qp_layer_binding_free(&lb[i]);
    free(lb);
    if (st) qp_moe_binding_free(b);
    return st;
}

QP_API qp_status qp_model_moe_options(const qp_model *m, const char *prefix, qp_moe_options *o) {
    if (!m || !prefix || !o) return QP_ERR_INVALID_ARGUMENT;
    qp_moe_options_init(o);
    o->act_dtype = m->dtype;
    o->layer = prefix;
    if (m->moe_top_k < 1) /* vLLM's MoE models read it unconditionally */
        return qp_error_set(m->ctx, QP_ERR_PARSE, m->dir, "num_experts_per_tok", prefix,
                            "config.json has no num_experts_per_tok for the experts of '%s'", prefix);
    o->top_k = m->moe_top_k;
    /* vLLM's models: Mixtral renormalizes always, the others follow
     * norm_topk_prob (Qwen2/3-MoE, DeepSeek; absent: false) */
    o->renormalize = m->moe_renorm >= 0 ? m->moe_renorm : m->model_type && !strcmp(m->model_type, "mixtral");
    if (m->moe_groups > 0) {
        o->num_expert_group = m->moe_groups;
        o->topk_group = m->moe_topk_group > 0 ? m->moe_topk_group : m->moe_groups;
        o->scoring = m->moe_sigmoid == 1 ? QP_MOE_SIGMOID : QP_MOE_SOFTMAX;
        o->routed_scaling_factor = m->moe_scale;
        const char *dot = strrchr(prefix, '.');
        char bn[1100];
        snprintf(bn, sizeof bn, "%.*s.%s.e_score_correction_bias", dot ? (int)(dot - prefix) : 0, prefix, ROUTER);
        qp_tensor t;
        if (lookup(m, bn, &t)) {
            /* vLLM's fp32 parameter, copy_'d from the checkpoint's dtype
             * (transformers and Quark keep it in the model dtype): exact */
            if ((t.dtype != QP_DTYPE_F32 && t.dtype != QP_DTYPE_F16 && t.dtype != QP_DTYPE_BF16) || t.ndim != 1)
                return qp_error_set(m->ctx, QP_ERR_UNSUPPORTED, m->dir, bn, prefix,
                                    "e_score_correction_bias must be a 1-D float tensor (f32, f16 or bf16), got %dd %s",
                                    t.ndim, qp_dtype_name(t.dtype));
            o->e_score_correction_bias = t.data;
            for (size_t i = 0; t.dtype != QP_DTYPE_F32 && i < m->n_bias_f32; i++)
                if (m->bias_src[i] == t.data) o->e_score_correction_bias = m->bias_f32[i]; /* widened at open */
        }
    }
    return QP_OK;
}
