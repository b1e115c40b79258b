/* The Marlin-QQQ weight and scale layouts (docs/semantics.md §10) and their inverses.
 * Codes in: per-channel signed int4 in [-8, 7] (stored as two's-complement
 * nibbles), per-group unsigned in [0, 15] (the +8 offset of docs/semantics.md §9). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TILE 16
#define PERM_LEN 1024

/* get_qqq_weight_perm: 32 lanes x 4 tiles x 8 values, each group of 8
 * reordered by the interleave the kernel's nibble extraction expects. */
static void weight_perm(bool per_group, int perm[PERM_LEN]) {
    static const int il_channel[8] = {4, 0, 5, 1, 6, 2, 7, 3};
    static const int il_group[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    const int *il = per_group ? il_group : il_channel;
    int n = 0;
    for (int i = 0; i < 32; i++) {
        int lane[8], k = 0;
        int col = i / 4;
        for (int block = 0; block < 2; block++)
            for (int r = 0; r < 4; r++) lane[k++] = 16 * (4 * (i % 4) + r) + col + 8 * block;
        for (int j = 0; j < 4; j++)
            for (int e = 0; e < 8; e++) perm[n++] = lane[il[e]] + 256 * j;
    }
}

/* vLLM's QQQLinearMethod.create_weights shape checks, with its messages. */
static qp_status check_shape(qp_context *ctx, const char *tensor, int K, int N, int group_size) {
    if (K <= 0 || N <= 0)
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, tensor, NULL, "K=%d and N=%d must be positive", K, N);
    if (group_size != -1 && group_size != 128)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, tensor, NULL,
                            "QQQ does not support group_size = %d. Only group_sizes = [-1, 128] are supported.", group_size);
    if (N % 64)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, tensor, NULL,
                            "Weight output_size_per_partition = %d is not divisible by min_n_threads = 64.", N);
    if (K % 128)
        return qp_error_set(ctx, QP_ERR_VALUE, NULL, tensor, NULL,
                            "Weight input_size_per_partition = %d is not divisible by min_k_threads = 128.", K);
    return QP_OK;
}

/* Index in the tiled [K/16][N*16] matrix of element (k, n) (docs/semantics.md §10). */
static size_t tiled_index(int N, int k, int n) {
    return (size_t)(k / TILE) * (size_t)N * TILE + (size_t)(n / TILE) * 256 + (size_t)(k % TILE) * TILE + (size_t)(n % TILE);
}

/* What pack and unpack share: argument checks, the tiled scratch matrix and
 * the permutation. */
static qp_status layout_begin(qp_context *ctx, const void *a, const void *b, int K, int N, int group_size,
                              uint8_t **tiled, int perm[PERM_LEN]) {
    if (!a || !b) return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "B", NULL, "NULL tensor");
    qp_status st = check_shape(ctx, "B", K, N, group_size);
    if (st != QP_OK) return st;
    size_t total = (size_t)K * (size_t)N;
    *tiled = malloc(total);
    if (!*tiled) return qp_error_set(ctx, QP_ERR_OUT_OF_MEMORY, NULL, "B", NULL, "out of memory (%zu bytes)", total);
    weight_perm(group_size == 128, perm);
    return QP_OK;
}

/* Codes [K, N] into the tiled matrix (range-checked: signed nibbles per
 * channel, the +8 offset per group) or back out of it (to_tiles false: the
 * per-channel nibble sign-extended). */
static qp_status walk_codes(qp_context *ctx, const int8_t *q, int8_t *q_out, int K, int N, bool grouped, uint8_t *tiled,
                            bool to_tiles) {
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) {
            size_t i = (size_t)k * N + n;
            uint8_t *t = &tiled[tiled_index(N, k, n)];
            if (!to_tiles) {
                q_out[i] = (int8_t)(grouped ? *t : (*t ^ 8) - 8); /* sign-extend the nibble */
                continue;
            }
            int v = q[i];
            if (grouped ? (v < 0 || v > 15) : (v < -8 || v > 7))
                return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "B", NULL, "code %d at [%d, %d] is outside %s", v,
                                    k, n, grouped ? "[0, 15]" : "[-8, 7]");
            *t = (uint8_t)(v & 0xF);
        }
    return QP_OK;
}

/* The tiled matrix and the words: each 1024-chunk permuted, 8 nibbles per
 * word, value j in bits 4j; to_words packs B_out from the tiles, else the
 * tiles are unpacked from B. */
static void walk_words(const int32_t *B, int32_t *B_out, size_t total, const int perm[PERM_LEN], uint8_t *tiled,
                       bool to_words) {
    for (size_t c = 0; c < total; c += PERM_LEN)
        for (int w = 0; w < PERM_LEN / 8; w++) {
            size_t at = c / 8 + (size_t)w;
            uint32_t word = to_words ? 0 : (uint32_t)B[at];
            for (int j = 0; j < 8; j++) {
                uint8_t *t = &tiled[c + (size_t)perm[w * 8 + j]];
                if (to_words) word |= (uint32_t)*t << (4 * j);
                else *t = (word >> (4 * j)) & 0xF;
            }
            if (to_words) B_out[at] = (int32_t)word;
        }
}

/* Pack (codes q -> words B_out) or unpack (words B -> codes q_out): one walk
 * through the tiled matrix, in either direction. */
static qp_status weights(qp_context *ctx, const int8_t *q, const int32_t *B, int K, int N, int group_size, int8_t *q_out,
                         int32_t *B_out, bool pack) {
    uint8_t *tiled;
    int perm[PERM_LEN];
    qp_status st = pack ? layout_begin(ctx, q, B_out, K, N, group_size, &tiled, perm)
                        : layout_begin(ctx, B, q_out, K, N, group_size, &tiled, perm);
    if (st != QP_OK) return st;
    bool grouped = group_size == 128;
    if (pack) st = walk_codes(ctx, q, NULL, K, N, grouped, tiled, true);
    if (st == QP_OK) walk_words(B, B_out, (size_t)K * (size_t)N, perm, tiled, pack);
    if (st == QP_OK && !pack) walk_codes(ctx, NULL, q_out, K, N, grouped, tiled, false);
    free(tiled);
    return st;
}

QP_API qp_status qp_qqq_pack_weight(qp_context *ctx, const int8_t *q, int K, int N, int group_size, int32_t *B) {
    return weights(ctx, q, NULL, K, N, group_size, NULL, B, true);
}

QP_API qp_status qp_qqq_unpack_weight(qp_context *ctx, const int32_t *B, int K, int N, int group_size, int8_t *q) {
    return weights(ctx, NULL, B, K, N, group_size, q, NULL, false);
}

/* get_qqq_scale_perms (docs/semantics.md §10). */
static void scale_perms(int perm64[64], int perm32[32]) {
    int n = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) perm64[n++] = i + 8 * j;
    static const int off[8] = {0, 1, 8, 9, 16, 17, 24, 25};
    n = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) perm32[n++] = 2 * i + off[j];
}

static qp_status scales(qp_context *ctx, const float *sc, const uint16_t *sg, int K, int N, int group_size,
                        float *sc_out, uint16_t *sg_out, bool inverse) {
    if (!sc || !sc_out || (group_size == 128 && (!sg || !sg_out)))
        return qp_error_set(ctx, QP_ERR_INVALID_ARGUMENT, NULL, "s_channel", NULL, "NULL tensor");
    qp_status st = check_shape(ctx, "s_channel", K, N, group_size);
    if (st != QP_OK) return st;
    int p64[64], p32[32];
    scale_perms(p64, p32);
    for (int c = 0; c < N; c += 32)
        for (int j = 0; j < 32; j++) {
            if (inverse) sc_out[c + p32[j]] = sc[c + j];
            else sc_out[c + j] = sc[c + p32[j]];
        }
    if (group_size == 128)
        for (size_t c = 0; c < (size_t)(K / 128) * (size_t)N; c += 64)
            for (int j = 0; j < 64; j++) {
                if (inverse) sg_out[c + (size_t)p64[j]] = sg[c + (size_t)j];
                else sg_out[c + (size_t)j] = sg[c + (size_t)p64[j]];
            }
    return QP_OK;
}

QP_API qp_status qp_qqq_permute_scales(qp_context *ctx, const float *s_channel, const uint16_t *s_group, int K, int N,
                                       int group_size, float *s_channel_out, uint16_t *s_group_out) {
    return scales(ctx, s_channel, s_group, K, N, group_size, s_channel_out, s_group_out, false);
}

QP_API qp_status qp_qqq_unpermute_scales(qp_context *ctx, const float *s_channel, const uint16_t *s_group, int K, int N,
                                         int group_size, float *s_channel_out, uint16_t *s_group_out) {
    return scales(ctx, s_channel, s_group, K, N, group_size, s_channel_out, s_group_out, true);
}
