/* <backend>-w4a16 (vk-w4a16, cl-w4a16, cuda-w4a16 and the emulated
 * cuda-emulated-sm*-w4a16): W4A16 and the other float-weight layers each
 * backend lists (w4a16 in vk_w4a16.c, cl_w4a16.c, cuda_w4a16.c), after the
 * descriptors every backend is probed with -- uint4 without its zero
 * points, a zero point or a code outside 0..15, a group size that does not divide K, one that divides K but is
 * not a multiple of 32, a forced int-dot path (a float GEMM has none) and
 * a forced plain path -- each judged by the backend's entry (backends.c):
 * refused with its status and words, naming the layer, or prepared. */
#include "backends.h"

#include <string.h>

#include "backend_harness.h"
#include "backend_layers.h"

static void w4a16_probes(void) {
    /* N = K = 64, uint4 in groups of 32 (every backend runs it) */
    bh_layer L;
    bh_w4a16_layer(&L, QP_DTYPE_F16, QP_PACK_REORDER, false, 32, false, 64, 64);
    qp_lin_desc d = L.d;
    d.layer = "probe.w4a16";
    static uint8_t zero[2 * 64];
    static int8_t q4[64 * 64];
    memcpy(zero, L.w4_zero, sizeof zero);
    memcpy(q4, L.q4, sizeof q4);
    d.w4_zero = NULL;
    bh_probe("w4a16-no-zero-points", &d, QP_PATH_AUTO);
    d.w4_zero = zero;
    zero[1 * 64 + 6] = 16; /* [1][6]: outside 0..15 */
    bh_probe("w4a16-zero-point-range", &d, QP_PATH_AUTO);
    zero[1 * 64 + 6] = L.w4_zero[1 * 64 + 6];
    d.q4 = q4;
    q4[5] = 16; /* [0][5]: a code outside 0..15 */
    bh_probe("w4a16-code-range", &d, QP_PATH_AUTO);
    d.q4 = L.d.q4;
    d.group_size = 48; /* K = 64 is not a multiple */
    bh_probe("w4a16-g48", &d, QP_PATH_AUTO);
    d.group_size = 16; /* divides K = 32, not a multiple of 32 */
    d.K = 32;
    bh_probe("w4a16-g16", &d, QP_PATH_AUTO);
    d.group_size = 32;
    d.K = 64;
    bh_probe("w4a16-int-dot", &d, QP_PATH_INT_DOT);
    bh_probe("w4a16-no-int-dot", &d, QP_PATH_NO_INT_DOT);
    bh_layer_free(&L);
}

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "w4a16", w4a16_probes); }
