/* Parallel layers: a tensor-parallel linear layer and an
 * expert-parallel fused MoE layer across the ranks of a communicator, each
 * rank on its own device (any backend), every rank ending with the same y.
 *
 * The collectives are vLLM's for each layer kind -- an all-gather of the
 * column shards (vLLM gathers only where gather_output is set; here every
 * layer ends whole so it can be compared), an all-reduce after a
 * row-parallel layer and after expert-parallel experts -- with the
 * all-reduce done as an all-gather of the partials and an fp32 sum in rank
 * order, rounded once (qp_comm_allreduce_sum_ordered): reproducible bits,
 * where NCCL's ring/tree all-reduce sums in the model dtype in an order
 * of its own (docs/parallel.md).
 *
 * Failure is collective: binding, creation and each forward end with an
 * agreement, so a rank that fails makes every rank return its message and
 * none is left waiting in a collective. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "qp_comm_internal.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A forward's times: computing from t0 to t1, then communicating until now. */
static void note_times(qp_par_info *info, double t0, double t1) {
    info->compute_ms = t1 - t0;
    info->comm_ms = now_ms() - t1;
}

/* qp_par_*_info: the layer's description and its last forward's times. */
static qp_status info_copy(const qp_par_info *info, qp_par_info *out) {
    if (!info || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = *info;
    return QP_OK;
}

static size_t dt_size(qp_dtype dt) { return dt == QP_DTYPE_F32 ? 4 : 2; }

/* What each rank bound, compared across ranks before any data moves. */
typedef struct shape_msg {
    int32_t kind, act_dtype, row, N, K, n_shards, shard_rows[8];
    int32_t E, H, I, G, expert_offset, top_k;
    char layer[256];
} shape_msg;

/* What every rank sends of any layer: the scheme, the activation dtype and
 * the layer's name; the caller adds its kind's shapes. */
static void shape_begin(shape_msg *mine, qp_scheme_kind kind, qp_dtype act_dtype, const char *layer) {
    mine->kind = kind;
    mine->act_dtype = act_dtype;
    snprintf(mine->layer, sizeof mine->layer, "%s", layer);
}

static qp_status agree_shapes(qp_comm *c, const shape_msg *mine, int moe) {
    int n = qp_comm_size(c);
    shape_msg *all = calloc((size_t)n, sizeof *all);
    if (!all) return qp_comm_agree(c, qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, NULL, "out of memory"));
    qp_status st = qp_comm_allgather(c, mine, sizeof *mine, all);
    for (int r = 1; !st && r < n; r++) {
        const shape_msg *a = &all[0], *b = &all[r];
        int same = !strcmp(a->layer, b->layer) && a->kind == b->kind && a->act_dtype == b->act_dtype;
        if (moe) same = same && a->H == b->H && a->I == b->I && a->G == b->G && a->top_k == b->top_k;
        else same = same && a->row == b->row && a->N == b->N && a->K == b->K && a->n_shards == b->n_shards &&
                    !memcmp(a->shard_rows, b->shard_rows, sizeof a->shard_rows);
        if (!same) {
            if (moe)
                st = qp_error_set(c->ctx, QP_ERR_VALUE, NULL, NULL, mine->layer,
                                  "ranks disagree: rank 0 bound '%s' (%s, H %d, I %d, %d experts, top-%d), rank %d '%s' "
                                  "(%s, H %d, I %d, %d experts, top-%d)",
                                  a->layer, qp_scheme_kind_name((qp_scheme_kind)a->kind), a->H, a->I, a->G, a->top_k, r,
                                  b->layer, qp_scheme_kind_name((qp_scheme_kind)b->kind), b->H, b->I, b->G, b->top_k);
            else
                st = qp_error_set(c->ctx, QP_ERR_VALUE, NULL, NULL, mine->layer,
                                  "ranks disagree: rank 0 bound '%s' (%s, %s-parallel shard N %d x K %d), rank %d '%s' "
                                  "(%s, %s-parallel shard N %d x K %d)",
                                  a->layer, qp_scheme_kind_name((qp_scheme_kind)a->kind), a->row ? "row" : "column", a->N,
                                  a->K, r, b->layer, qp_scheme_kind_name((qp_scheme_kind)b->kind),
                                  b->row ? "row" : "column", b->N, b->K);
        }
    }
    if (moe && !st) { /* the experts must tile 0..G-1 in rank order */
        int next = 0;
        for (int r = 0; r < n && !st; r++) {
            if (all[r].expert_offset != next)
                st = qp_error_set(c->ctx, QP_ERR_VALUE, NULL, NULL, mine->layer,
                                  "rank %d holds experts from %d, expected %d", r, all[r].expert_offset, next);
            next += all[r].E;
        }
        if (!st && next != all[0].G)
            st = qp_error_set(c->ctx, QP_ERR_VALUE, NULL, NULL, mine->layer, "the ranks hold %d of %d experts", next,
                              all[0].G);
    }
    free(all);
    /* every rank has the same verdict (the same gathered data) */
    return st;
}

/* The M of a forward: ranks that pass different M fail together. */
static qp_status agree_rows(qp_comm *c, int M, const char *layer) {
    int n = qp_comm_size(c);
    int32_t mine = M, *all = calloc((size_t)n, sizeof *all);
    if (!all) return QP_ERR_OUT_OF_MEMORY;
    qp_status st = qp_comm_allgather(c, &mine, sizeof mine, all);
    for (int r = 1; !st && r < n; r++)
        if (all[r] != all[0])
            st = qp_error_set(c->ctx, QP_ERR_VALUE, NULL, NULL, layer, "ranks disagree on the rows: rank 0 has M = %d, rank %d M = %d",
                              (int)all[0], r, (int)all[r]);
    free(all);
    return st;
}

/* The start of a forward: a rank with bad arguments (st) or another M
 * fails them all, before any data of mismatched size moves. */
static qp_status agree_forward(qp_comm *c, qp_status st, int M, const char *layer) {
    st = qp_comm_agree(c, st);
    return st ? st : agree_rows(c, M, layer);
}

/* ---- tensor-parallel linear -------------------------------------------- */

struct qp_par_linear {
    qp_comm *comm;
    qp_linear *lin;
    qp_par_info info;
    int n_shards, shard_rows[8]; /* local rows of each fused shard */
    char layer[256];
    void *xl, *yl, *g;           /* local x slice, local y, gathered */
    size_t xl_cap, yl_cap, g_cap;
};

static void *grow(void **p, size_t *cap, size_t bytes) {
    if (*cap >= bytes) return *p;
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q) return NULL;
    *p = q;
    *cap = bytes;
    return q;
}

/* What both creates begin with: the object (zeroed), the arguments' checks
 * and the bind options placing this rank (tp for a linear layer, ep for
 * MoE experts); NULL or not, the object is returned, *st says whether to go
 * on. */
static void *par_begin(qp_comm *c, size_t size, const qp_device *dev, const qp_model *m, const char *layer,
                       const qp_resolve_options *resolve, bool ep, qp_bind_options *bo, qp_status *st) {
    void *p = calloc(1, size);
    *st = QP_OK;
    if (!p) *st = qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, layer, "out of memory");
    else if (!dev || !m || !layer) *st = qp_error_set(c->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, layer, "NULL device, model or layer");
    qp_bind_options_init(bo);
    bo->resolve = resolve;
    if (ep) {
        bo->ep_size = qp_comm_size(c);
        bo->ep_rank = qp_comm_rank(c);
    } else {
        bo->tp_size = qp_comm_size(c);
        bo->tp_rank = qp_comm_rank(c);
    }
    return p;
}

/* The collective end of a create: 1: did every rank bind and create?
 * 2: the same layer and shapes? */
static qp_status agree_created(qp_comm *c, qp_status st, const shape_msg *mine, int moe) {
    st = qp_comm_agree(c, st);
    return st ? st : agree_shapes(c, mine, moe);
}

QP_API qp_status qp_par_linear_create(qp_comm *c, qp_device *dev, qp_model *m, const char *layer,
                                      const qp_resolve_options *resolve, const qp_linear_options *opts,
                                      qp_par_linear **out) {
    if (!c || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_bind_options bo;
    qp_status st;
    qp_par_linear *l = par_begin(c, sizeof *l, dev, m, layer, resolve, false, &bo, &st);
    qp_layer_binding b;
    int bound = 0;
    if (!st) bound = !(st = qp_model_bind_layer(m, layer, &bo, &b));
    if (!st) {
        qp_linear_options lo;
        qp_linear_options_init(&lo);
        if (opts) {
            lo.act_dtype = opts->act_dtype;
            lo.path = opts->path;
            lo.act_ue8m0 = opts->act_ue8m0;
        }
        lo.layer = layer;
        lo.shard_rows = b.n_shards ? b.shard_rows : NULL;
        lo.n_shards = b.n_shards;
        st = qp_linear_create(dev, &b.scheme, b.N, b.K, b.tensors, b.n_tensors, &lo, &l->lin);
    }
    shape_msg mine;
    memset(&mine, 0, sizeof mine);
    if (!st) {
        l->comm = c;
        snprintf(l->layer, sizeof l->layer, "%s", layer);
        l->info.row_parallel = qp_layer_is_row_parallel(layer);
        l->info.scheme = b.scheme;
        l->info.N_local = b.N;
        l->info.K_local = b.K;
        l->info.act_dtype = opts && opts->act_dtype ? opts->act_dtype : QP_DTYPE_F16;
        l->info.out_dtype = qp_linear_out_dtype(l->lin);
        int size = qp_comm_size(c);
        l->info.N = l->info.row_parallel ? b.N : b.N * size;
        l->info.K = l->info.row_parallel ? b.K * size : b.K;
        l->n_shards = (int)b.n_shards;
        for (size_t s = 0; s < b.n_shards && s < 8; s++) l->shard_rows[s] = b.shard_rows[s];
        shape_begin(&mine, b.scheme.kind, l->info.act_dtype, layer);
        mine.row = l->info.row_parallel;
        mine.N = b.N;
        mine.K = b.K;
        mine.n_shards = l->n_shards;
        memcpy(mine.shard_rows, l->shard_rows, sizeof mine.shard_rows);
    }
    if (bound) qp_layer_binding_free(&b);
    if ((st = agree_created(c, st, &mine, 0))) {
        if (l) qp_linear_destroy(l->lin);
        free(l);
        return st;
    }
    *out = l;
    return QP_OK;
}

QP_API qp_status qp_par_linear_forward(qp_par_linear *l, const void *x, int M, void *y) {
    if (!l) return QP_ERR_INVALID_ARGUMENT;
    qp_comm *c = l->comm;
    qp_status st = M < 1 || !x || !y ? qp_error_set(c->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, l->layer, "M = %d, x %p, y %p", M, x, y)
                                     : QP_OK;
    if ((st = agree_forward(c, st, M, l->layer))) return st;
    int size = qp_comm_size(c), rank = qp_comm_rank(c);
    size_t ies = dt_size(l->info.act_dtype), oes = dt_size(l->info.out_dtype);
    int Nl = l->info.N_local, Kl = l->info.K_local;
    size_t ybytes = (size_t)M * Nl * oes;
    const void *xin = x;
    double t0 = now_ms();
    if (l->info.row_parallel) { /* this rank's K slice of x */
        if (!grow(&l->xl, &l->xl_cap, (size_t)M * Kl * ies)) st = qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, l->layer, "out of memory");
        for (int m = 0; !st && m < M; m++)
            memcpy((char *)l->xl + (size_t)m * Kl * ies, (const char *)x + ((size_t)m * l->info.K + (size_t)rank * Kl) * ies,
                   (size_t)Kl * ies);
        xin = l->xl;
    }
    if (!st && (!grow(&l->yl, &l->yl_cap, ybytes) || !grow(&l->g, &l->g_cap, ybytes * (size_t)size)))
        st = qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, l->layer, "out of memory");
    if (!st) st = qp_linear_forward(l->lin, xin, M, l->yl);
    double t1 = now_ms();
    st = qp_comm_agree(c, st);
    if (!st) st = qp_comm_allgather(c, l->yl, ybytes, l->g);
    if (!st && l->info.row_parallel) {
        qp_comm_sum_gathered(l->info.out_dtype, l->g, size, (size_t)M * Nl, y);
    } else if (!st) {
        /* column shards back in vLLM's order: for each fused shard s, the
         * ranks' rows of s one after the other */
        int ns = l->n_shards ? l->n_shards : 1, N = l->info.N;
        for (int r = 0; r < size; r++)
            for (int m = 0; m < M; m++) {
                const char *src = (const char *)l->g + ((size_t)r * M + m) * Nl * oes;
                int lo = 0, go = 0;
                for (int s = 0; s < ns; s++) {
                    int rows = l->n_shards ? l->shard_rows[s] : Nl;
                    memcpy((char *)y + ((size_t)m * N + go + (size_t)r * rows) * oes, src + (size_t)lo * oes, (size_t)rows * oes);
                    lo += rows;
                    go += rows * size;
                }
            }
    }
    note_times(&l->info, t0, t1);
    return st;
}

QP_API qp_status qp_par_linear_info(const qp_par_linear *l, qp_par_info *out) { return info_copy(l ? &l->info : NULL, out); }

QP_API qp_linear *qp_par_linear_local(qp_par_linear *l) { return l ? l->lin : NULL; }

QP_API void qp_par_linear_destroy(qp_par_linear *l) {
    if (!l) return;
    qp_linear_destroy(l->lin);
    free(l->xl);
    free(l->yl);
    free(l->g);
    free(l);
}

/* ---- expert-parallel MoE ------------------------------------------------- */

struct qp_par_moe {
    qp_comm *comm;
    qp_moe *moe;
    qp_par_info info;
    char layer[256];
    void *yl, *g;
    size_t yl_cap, g_cap;
};

QP_API qp_status qp_par_moe_create(qp_comm *c, qp_device *dev, qp_model *m, const char *prefix,
                                   const qp_resolve_options *resolve, const qp_moe_options *opts, qp_par_moe **out) {
    if (!c || !out) return QP_ERR_INVALID_ARGUMENT;
    *out = NULL;
    qp_bind_options bo;
    qp_status st;
    qp_par_moe *p = par_begin(c, sizeof *p, dev, m, prefix, resolve, true, &bo, &st);
    qp_moe_binding b;
    int bound = 0;
    if (!st) bound = !(st = qp_model_bind_moe(m, prefix, &bo, &b));
    qp_moe_options mo;
    if (!st) {
        if (opts) mo = *opts;
        else if (!(st = qp_model_moe_options(m, prefix, &mo))) mo.act_dtype = qp_model_dtype(m);
    }
    shape_msg mine;
    memset(&mine, 0, sizeof mine);
    if (!st) {
        mo.global_num_experts = b.global_num_experts;
        mo.expert_offset = b.expert_offset;
        if (!mo.layer) mo.layer = prefix;
        st = qp_moe_create(dev, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &mo, &p->moe);
    }
    if (!st) {
        p->comm = c;
        snprintf(p->layer, sizeof p->layer, "%s", prefix);
        p->info.scheme = b.scheme;
        p->info.N = p->info.K = p->info.N_local = p->info.K_local = b.H;
        p->info.E_local = b.E;
        p->info.expert_offset = b.expert_offset;
        p->info.G = b.global_num_experts;
        p->info.act_dtype = p->info.out_dtype = mo.act_dtype ? mo.act_dtype : QP_DTYPE_F16;
        shape_begin(&mine, b.scheme.kind, p->info.act_dtype, prefix);
        mine.E = b.E;
        mine.H = b.H;
        mine.I = b.I;
        mine.G = b.global_num_experts;
        mine.expert_offset = b.expert_offset;
        mine.top_k = mo.top_k;
    }
    if (bound) qp_moe_binding_free(&b);
    if ((st = agree_created(c, st, &mine, 1))) {
        if (p) qp_moe_destroy(p->moe);
        free(p);
        return st;
    }
    *out = p;
    return QP_OK;
}

QP_API qp_status qp_par_moe_forward(qp_par_moe *p, const void *x, int M, const float *router_logits, void *y) {
    if (!p) return QP_ERR_INVALID_ARGUMENT;
    qp_comm *c = p->comm;
    qp_status st = M < 1 || !x || !y || !router_logits
                       ? qp_error_set(c->ctx, QP_ERR_INVALID_ARGUMENT, NULL, NULL, p->layer, "M = %d or a NULL buffer", M)
                       : QP_OK;
    if ((st = agree_forward(c, st, M, p->layer))) return st;
    int size = qp_comm_size(c);
    size_t es = dt_size(p->info.act_dtype), bytes = (size_t)M * p->info.N * es;
    double t0 = now_ms();
    if (!grow(&p->yl, &p->yl_cap, bytes) || !grow(&p->g, &p->g_cap, bytes * (size_t)size))
        st = qp_error_set(c->ctx, QP_ERR_OUT_OF_MEMORY, NULL, NULL, p->layer, "out of memory");
    if (!st) st = qp_moe_forward(p->moe, x, M, router_logits, p->yl);
    double t1 = now_ms();
    st = qp_comm_agree(c, st);
    if (!st) st = qp_comm_allgather(c, p->yl, bytes, p->g);
    if (!st) qp_comm_sum_gathered(p->info.act_dtype, p->g, size, (size_t)M * p->info.N, y);
    note_times(&p->info, t0, t1);
    return st;
}

QP_API qp_status qp_par_moe_info(const qp_par_moe *p, qp_par_info *out) { return info_copy(p ? &p->info : NULL, out); }

QP_API void qp_par_moe_destroy(qp_par_moe *p) {
    if (!p) return;
    qp_moe_destroy(p->moe);
    free(p->yl);
    free(p->g);
    free(p);
}
