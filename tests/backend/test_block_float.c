/* <backend>-block-float (vk-, cl-, cuda-block-float and cuda-emulated-sm*-block-float): OCP-MX,
 * W4A8-MXFP4-FP8, NVFP4 and unquantized layers (and fp8 per-block on
 * Vulkan): selection weights bit for bit, random layers within the bound.
 * The cases are each backend's own (its entry in backends.c); this
 * program is the topic's one main for all of them. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "block_float", NULL); }
