/* Output files written whole or not at all: a command writes
 * to temporaries registered here and renames them over the real names
 * last; SIGINT, SIGTERM or SIGHUP before then removes every registered
 * temporary (and a folder the command created) and ends the process as the
 * signal would have, so an interrupted `qport quantize` or `qport conform
 * --json` leaves nothing that looks like output. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

#define MAX_TMP 8
static char tmp_paths[MAX_TMP][4200];
static volatile sig_atomic_t tmp_used[MAX_TMP], tmp_is_dir[MAX_TMP];

static void on_signal(int sig) {
    for (int i = 0; i < MAX_TMP; i++)
        if (tmp_used[i] && !tmp_is_dir[i]) unlink(tmp_paths[i]);
    for (int i = 0; i < MAX_TMP; i++)
        if (tmp_used[i] && tmp_is_dir[i]) rmdir(tmp_paths[i]); /* only when empty */
    signal(sig, SIG_DFL);
    raise(sig);
}

static int add(const char *path, int is_dir) {
    static int installed;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        installed = 1;
    }
    for (int i = 0; i < MAX_TMP; i++)
        if (!tmp_used[i]) {
            snprintf(tmp_paths[i], sizeof tmp_paths[i], "%s", path);
            tmp_is_dir[i] = is_dir;
            tmp_used[i] = 1;
            return i;
        }
    return -1;
}

int tool_tmp_add(const char *path) { return add(path, 0); }
int tool_tmp_add_dir(const char *path) { return add(path, 1); }

void tool_tmp_drop(int id, int remove_it) {
    if (id < 0 || id >= MAX_TMP || !tmp_used[id]) return;
    tmp_used[id] = 0;
    if (remove_it) (void)(tmp_is_dir[id] ? rmdir(tmp_paths[id]) : unlink(tmp_paths[id]));
}

int tool_tmp_commit(int id, const char *final_path) {
    if (id < 0 || id >= MAX_TMP || !tmp_used[id]) return -1;
    int rc = rename(tmp_paths[id], final_path);
    tool_tmp_drop(id, rc != 0);
    return rc;
}

/* Test hook (-Dtest_hooks=true builds): QPORT_TEST_STOP_BEFORE_RENAME=1
 * stops the process (SIGSTOP) with its temporaries written, so a test can
 * deliver SIGINT at exactly that point and check nothing is left. */
void tool_tmp_test_stop(void) {
#ifdef QP_TEST_HOOKS
    const char *v = getenv("QPORT_TEST_STOP_BEFORE_RENAME");
    if (v && !strcmp(v, "1")) raise(SIGSTOP);
#endif
}
