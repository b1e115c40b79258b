/* The backends a topic program (tests/backend/test_<topic>.c) runs on: one
 * entry per plugin, picked by the program's first argument ("vk", "cl",
 * "cuda"), so a topic is one source registered once per backend in meson.
 * An entry gives the plugin's library, its session (open: load, init,
 * device 0 -> 0, 77 skip or 1; close: shutdown and the exit status) and,
 * per topic, its case list. A backend whose runners are not built here
 * (no Vulkan loader, no OpenCL, no C++ for the CUDA programs) has no
 * entry, and its tests are not registered. */
#ifndef QP_TEST_BACKENDS_H
#define QP_TEST_BACKENDS_H

typedef struct bh_backend {
    const char *name;                 /* "vk": the test names' prefix       */
    const char *lib;                  /* the plugin file the session loads  */
    int (*open)(const char *program);
    int (*close)(void);
    void (*linear)(void);             /* topic linear: its cases            */
} bh_backend;

/* the entry called `name`; NULL (and the known names on stderr) if none */
const bh_backend *bh_backend_find(const char *name);
/* main of a topic program: argv[1] picks the backend, the program is
 * "<backend>-<topic>"; runs topic_of(entry) between open and close */
int bh_backend_main(int argc, char **argv, const char *topic, void (*(*topic_of)(const bh_backend *))(void));
#endif
