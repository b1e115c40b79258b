/* <backend>-ops (vk-, cl-, cuda-ops and cuda-emulated-sm*-ops): rotation, the fp8 KV cache,
 * buffer copies and timers, bit for bit where the op is exact.
 * The cases are each backend's own (its entry in backends.c); this
 * program is the topic's one main for all of them. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "ops", NULL); }
