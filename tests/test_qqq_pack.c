/* Marlin-QQQ layout: a hand-checked word, unpack(pack(w)) == w on random
 * codes, the scale permutations, and vLLM's shape errors. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static uint32_t rng_state;
static uint32_t rng(void) { rng_state = rng_state * 1664525u + 1013904223u; return rng_state >> 8; }

static int nib(int v) { return v & 0xF; }

static void hand_checked(void) {
    enum { K = 128, N = 64 };
    int8_t *q = malloc(K * N);
    int32_t *B = malloc(sizeof(int32_t) * (K / 16) * 2 * N);
    /* per-channel: distinct signed codes */
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) q[k * N + n] = (int8_t)(((k * 3 + n * 5) % 16) - 8);
#define Q(k, n) nib(q[(k) * N + (n)])
    CHECK(qp_qqq_pack_weight(NULL, q, K, N, -1, B) == QP_OK, "pack");
    /* word 0 = lane 0 of tile 0: nibbles 1,3,5,7 hold k=0..3 of column 0,
     * nibbles 0,2,4,6 the same k of column 8 (docs/semantics.md §10) */
    uint32_t want = 0;
    int order[8][2] = {{0, 8}, {0, 0}, {1, 8}, {1, 0}, {2, 8}, {2, 0}, {3, 8}, {3, 0}};
    for (int j = 0; j < 8; j++) want |= (uint32_t)Q(order[j][0], order[j][1]) << (4 * j);
    CHECK((uint32_t)B[0] == want, "word0 %08x want %08x", (uint32_t)B[0], want);
    /* word 1: the same lane in the next tile along N (n + 16) */
    want = 0;
    for (int j = 0; j < 8; j++) want |= (uint32_t)Q(order[j][0], order[j][1] + 16) << (4 * j);
    CHECK((uint32_t)B[1] == want, "word1 %08x want %08x", (uint32_t)B[1], want);
    /* word 4: lane 1 → k = 4..7 */
    want = 0;
    for (int j = 0; j < 8; j++) want |= (uint32_t)Q(order[j][0] + 4, order[j][1]) << (4 * j);
    CHECK((uint32_t)B[4] == want, "word4 %08x want %08x", (uint32_t)B[4], want);
    /* per-group: nibbles 0,4,1,5 are k = 0..3 of column 0 */
    for (int i = 0; i < K * N; i++) q[i] = (int8_t)(q[i] + 8);
    CHECK(qp_qqq_pack_weight(NULL, q, K, N, 128, B) == QP_OK, "pack g");
    int gorder[8][2] = {{0, 0}, {2, 0}, {0, 8}, {2, 8}, {1, 0}, {3, 0}, {1, 8}, {3, 8}};
    want = 0;
    for (int j = 0; j < 8; j++) want |= (uint32_t)Q(gorder[j][0], gorder[j][1]) << (4 * j);
    CHECK((uint32_t)B[0] == want, "group word0 %08x want %08x", (uint32_t)B[0], want);
    /* second row of tiles (k = 16..31) starts at word 2N */
    want = 0;
    for (int j = 0; j < 8; j++) want |= (uint32_t)Q(gorder[j][0] + 16, gorder[j][1]) << (4 * j);
    CHECK((uint32_t)B[2 * N] == want, "group row1 %08x want %08x", (uint32_t)B[2 * N], want);
#undef Q
    free(q);
    free(B);
}

static void identity(void) {
    int Ks[] = {128, 256, 384}, Ns[] = {64, 128, 192, 256};
    for (int g = 0; g < 2; g++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++) {
                int K = Ks[a], N = Ns[b], gs = g ? 128 : -1;
                int8_t *q = malloc((size_t)K * N), *r = malloc((size_t)K * N);
                int32_t *B = malloc(sizeof(int32_t) * (size_t)(K / 16) * 2 * N);
                for (int i = 0; i < K * N; i++) q[i] = (int8_t)(g ? (int)(rng() % 16) : (int)(rng() % 16) - 8);
                CHECK(qp_qqq_pack_weight(NULL, q, K, N, gs, B) == QP_OK, "pack %dx%d", K, N);
                memset(r, 0x55, (size_t)K * N);
                CHECK(qp_qqq_unpack_weight(NULL, B, K, N, gs, r) == QP_OK, "unpack");
                CHECK(!memcmp(q, r, (size_t)K * N), "identity K=%d N=%d g=%d", K, N, gs);
                /* every word carries 8 distinct elements: flipping one code changes one nibble */
                q[(K - 1) * N + N - 1] ^= 1;
                int32_t *B2 = malloc(sizeof(int32_t) * (size_t)(K / 16) * 2 * N);
                qp_qqq_pack_weight(NULL, q, K, N, gs, B2);
                int diff = 0;
                for (int i = 0; i < (K / 16) * 2 * N; i++) diff += B[i] != B2[i];
                CHECK(diff == 1, "one-code change touched %d words", diff);
                free(q); free(r); free(B); free(B2);
            }
}

static void scales(void) {
    enum { K = 256, N = 128 };
    float sc[N], sco[N], back[N];
    uint16_t sg[(K / 128) * N], sgo[(K / 128) * N], sgb[(K / 128) * N];
    for (int i = 0; i < N; i++) sc[i] = (float)i;
    for (int i = 0; i < (K / 128) * N; i++) sg[i] = (uint16_t)i;
    CHECK(qp_qqq_permute_scales(NULL, sc, sg, K, N, 128, sco, sgo) == QP_OK, "perm");
    /* scale_perm_single: [0,1,8,9,16,17,24,25, 2,3,10,11,...] per 32 */
    static const float w32[10] = {0, 1, 8, 9, 16, 17, 24, 25, 2, 3};
    for (int j = 0; j < 10; j++) CHECK(sco[j] == w32[j], "s_channel[%d] = %g", j, sco[j]);
    CHECK(sco[32] == 32 && sco[33] == 33 && sco[34] == 40, "second block");
    /* scale_perm: [0,8,16,...,56, 1,9,...] per 64 */
    CHECK(sgo[0] == 0 && sgo[1] == 8 && sgo[7] == 56 && sgo[8] == 1 && sgo[64] == 64 && sgo[65] == 72, "s_group");
    CHECK(qp_qqq_unpermute_scales(NULL, sco, sgo, K, N, 128, back, sgb) == QP_OK, "unperm");
    CHECK(!memcmp(back, sc, sizeof sc) && !memcmp(sgb, sg, sizeof sg), "scale identity");
    CHECK(qp_qqq_permute_scales(NULL, sc, NULL, K, N, -1, sco, NULL) == QP_OK, "per-channel scales");
}

static void errors(void) {
    qp_context *ctx;
    qp_context_create(&ctx);
    int8_t q[128 * 96] = {0};
    int32_t B[8 * 2 * 96];
    qp_error_info e;
    CHECK(qp_qqq_pack_weight(ctx, q, 128, 96, -1, B) == QP_ERR_VALUE, "N=96");
    qp_last_error_info(ctx, &e);
    CHECK(!strcmp(e.message, "Weight output_size_per_partition = 96 is not divisible by min_n_threads = 64."), "%s", e.message);
    CHECK(qp_qqq_pack_weight(ctx, q, 64, 64, -1, B) == QP_ERR_VALUE, "K=64");
    qp_last_error_info(ctx, &e);
    CHECK(!strcmp(e.message, "Weight input_size_per_partition = 64 is not divisible by min_k_threads = 128."), "%s", e.message);
    CHECK(qp_qqq_pack_weight(ctx, q, 128, 64, 64, B) == QP_ERR_VALUE, "group 64");
    q[5] = 9;
    CHECK(qp_qqq_pack_weight(ctx, q, 128, 64, -1, B) == QP_ERR_INVALID_ARGUMENT, "code 9 per-channel");
    CHECK(strstr(qp_last_error(ctx), "[0, 5]") != NULL, "%s", qp_last_error(ctx));
    q[5] = -1;
    CHECK(qp_qqq_pack_weight(ctx, q, 128, 64, 128, B) == QP_ERR_INVALID_ARGUMENT, "code -1 per-group");
    CHECK(qp_qqq_pack_weight(ctx, NULL, 128, 64, 128, B) == QP_ERR_INVALID_ARGUMENT, "NULL");
    CHECK(qp_qqq_pack_weight(ctx, q, -128, 64, 128, B) == QP_ERR_INVALID_ARGUMENT, "negative");
    qp_context_destroy(ctx);
}

int main(int argc, char **argv) {
    rng_state = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 20261202u;
    printf("seed %u\n", rng_state);
    hand_checked();
    identity();
    scales();
    errors();
    return tu_finish("test_qqq_pack");
}
