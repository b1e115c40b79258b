/* <backend>-block-float (vk-, cl-, cuda-block-float and the emulated
 * cuda-emulated-sm*-block-float): OCP-MX, W4A8-MXFP4-FP8, NVFP4 and
 * unquantized layers (and fp8 per-block on Vulkan), each backend's list
 * (vk_block_float.c, cl_block_float.c, cuda_block_float.c): selection
 * weights bit for bit, random layers within the bound. Before them, the
 * descriptors every backend is probed with, each a layer the core's binder
 * built with one thing wrong -- a forced int-dot path on a float GEMM, K
 * not whole MX blocks, no code table, an NVFP4 global scale of 0, fp8
 * per-block K not a multiple of 128, unquantized without its weights --
 * judged by the backend's entry (backends.c). */
#include "backends.h"

#include "backend_harness.h"
#include "backend_layers.h"

/* a layer of kind (N 64, K 128: whole blocks of every kind) */
static bool probe_layer(bh_layer *L, bh_fw_kind kind, qp_dtype w_elem, qp_ocp_mx_act act) {
    bh_fw_spec s;
    bh_fw_spec_init(&s, kind, QP_DTYPE_F16, w_elem, act, 64, 128, BH_SEL_NONE, false);
    if (bh_fw_layer(L, &s)) return true;
    bh_layer_free(L);
    return false;
}

static void block_float_probes(void) {
    bh_layer L;
    if (probe_layer(&L, BH_FW_MX, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_MXFP4)) {
        qp_lin_desc d = L.d;
        d.layer = "probe.mx";
        bh_probe("mx-int-dot", &d, QP_PATH_INT_DOT);
        d.K = 48; /* one and a half blocks of 32 */
        bh_probe("mx-k48", &d, QP_PATH_AUTO);
        d.K = L.d.K;
        d.w_lut = NULL;
        bh_probe("mx-no-lut", &d, QP_PATH_AUTO);
        bh_layer_free(&L);
    }
    if (probe_layer(&L, BH_FW_NVFP4, QP_DTYPE_F4_E2M1, QP_OCP_MX_ACT_NONE)) {
        qp_lin_desc d = L.d;
        d.layer = "probe.nvfp4";
        d.input_global_scale = d.input_global_scale_inv = 0.0f;
        bh_probe("nvfp4-no-global-scale", &d, QP_PATH_AUTO);
        bh_layer_free(&L);
    }
    if (probe_layer(&L, BH_FW_UNQ, QP_DTYPE_NONE, QP_OCP_MX_ACT_NONE)) {
        qp_lin_desc d = L.d;
        d.layer = "probe.unquantized";
        d.w_act = NULL;
        bh_probe("unquantized-no-w-act", &d, QP_PATH_AUTO);
        bh_layer_free(&L);
    }
    bh_fp8_block_layer(&L, QP_DTYPE_F16, 0, false, BH_SEL_NONE, 64, 128);
    qp_lin_desc d = L.d;
    d.layer = "probe.fp8-block";
    d.K = 64; /* half a 128-wide block */
    bh_probe("fp8-block-k64", &d, QP_PATH_AUTO);
    bh_layer_free(&L);
}

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "block_float", block_float_probes); }
