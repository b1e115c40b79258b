/* <backend>-large (vk-, cl-, cuda-large): 4096 x 4096 layers against the reference,
 * weights past one device buffer, and the timings printed for the log.
 * The cases are each backend's own (its entry in backends.c); this
 * program is the topic's one main for all of them. */
#include "backends.h"

int main(int argc, char **argv) { return bh_backend_main(argc, argv, "large", NULL); }
