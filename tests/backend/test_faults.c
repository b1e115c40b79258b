/* <backend>-faults (vk-, cl-, cuda-faults and the emulated
 * cuda-emulated-sm*-faults): what the plugin refuses and how it says so,
 * each backend's list (vk_faults.c, cl_faults.c, cuda_faults.c), after the
 * descriptors every backend is probed with -- GEMV and TILED forced
 * together, INT_DOT and NO_INT_DOT forced together, a scheme kind that is
 * no linear layer -- each judged by the backend's entry (backends.c).
 * cl-no-platform: this program with "cl --no-platform" (topic
 * no_platform: zero devices without an ICD, nothing else). */
#include "backends.h"

#include <string.h>

#include "backend_harness.h"
#include "backend_layers.h"

static void faults_probes(void) {
    /* a dynamic symmetric int8 layer of 64 x 64, which every backend runs */
    bh_layer L;
    bh_int8_layer(&L, QP_DTYPE_F16, false, true, false, false, 64, 64);
    qp_lin_desc d = L.d;
    d.layer = "probe.int8";
    bh_probe("gemv-and-tiled", &d, QP_PATH_GEMV | QP_PATH_TILED);
    bh_probe("int-dot-and-no-int-dot", &d, QP_PATH_INT_DOT | QP_PATH_NO_INT_DOT);
    d.kind = QP_SCHEME_KV_CACHE;
    d.layer = "probe.kv-cache";
    bh_probe("kv-cache-kind", &d, QP_PATH_AUTO);
    bh_layer_free(&L);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[2], "--no-platform")) return bh_backend_main(argc, argv, "no_platform", NULL);
    return bh_backend_main(argc, argv, "faults", faults_probes);
}
