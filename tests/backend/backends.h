/* The backends a topic program (tests/backend/test_<topic>.c) runs on: one
 * entry per plugin, picked by the program's first argument ("vk", "cl",
 * "cuda"), so a topic is one source registered once per backend in meson.
 * An entry gives the plugin's library, its session (open: load, init,
 * device 0 -> 0, 77 skip or 1; close: shutdown and the exit status), per
 * topic its case list, and the backend's expected refusals and failures
 * (backend_expect.h) that the topic's shared cases are judged by. A
 * backend whose runners are not built here (no Vulkan loader, no OpenCL,
 * no C++ for the CUDA programs) has no entry, and its tests are not
 * registered. */
#ifndef QP_TEST_BACKENDS_H
#define QP_TEST_BACKENDS_H
#include "backend_expect.h"

/* One topic of one backend: cases run between the session's open and
 * close; or run, a topic that keeps its own session (the fused MoE goes
 * through the public API) and returns the exit status. */
typedef struct bh_topic {
    const char *name;                 /* "w4a16": the test names' suffix    */
    void (*cases)(void);
    int (*run)(const char *program, int argc, char **argv);
} bh_topic;

typedef struct bh_backend {
    const char *name;                 /* "vk": the test names' prefix       */
    const char *lib;                  /* the plugin file the session loads  */
    int (*open)(const char *program);
    int (*close)(void);
    const bh_topic *topics;           /* NULL-name terminated               */
    const bh_expect *expect;          /* NULL-name terminated               */
} bh_backend;

/* the entry called `name`; NULL (and the known names on stderr) if none */
const bh_backend *bh_backend_find(const char *name);
/* main of a topic program: argv[1] picks the backend, the program is
 * "<backend>-<topic>" (underscores as dashes); runs shared (the cases the
 * topic writes once, judged by the backend's entries; NULL: none) and then
 * the backend's own cases of the topic between open and close. Later
 * arguments go to a topic's run. */
int bh_backend_main(int argc, char **argv, const char *topic, void (*shared)(void));
#endif
