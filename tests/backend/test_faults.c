/* <backend>-faults (vk-, cl-, cuda-faults, cl-no-platform and cuda-emulated-sm*-faults): what the plugin
 * refuses and how it says so (cl: --no-platform, zero devices without an ICD).
 * The cases are each backend's own (its entry in backends.c); this
 * program is the topic's one main for all of them. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "faults", NULL); }
