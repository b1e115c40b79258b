/* <backend>-moe (vk-, cl-, cuda-moe and cuda-emulated-sm*-moe): the fused MoE through the public
 * API against the cpu device, every scheme (each backend keeps its session).
 * The cases are each backend's own (its entry in backends.c); this
 * program is the topic's one main for all of them. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "moe", NULL); }
