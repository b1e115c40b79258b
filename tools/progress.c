/* Progress lines for `qport conform`, `bench` and `quantize` (progress.h).
 * Time left is the elapsed time per unit so far times the units left. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(tool_progress *p, const char *what, long total) {
    *p = (tool_progress){.what = what, .total = total, .t0 = now_s()};
    p->on = total > 0 && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
    progress_step(p, 0);
}

static void fmt_time(char *b, size_t cap, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(b, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(b, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(b, cap, "%lds", t);
}

void progress_step(tool_progress *p, long n) {
    p->done += n;
    if (!p->on) return;
    double t = now_s();
    if (p->drawn && t - p->shown < 0.2 && p->done < p->total) return;
    p->shown = t;
    char left[32] = "?";
    if (p->done > 0 && p->done <= p->total) fmt_time(left, sizeof left, (t - p->t0) / (double)p->done * (double)(p->total - p->done));
    fflush(stdout);
    fprintf(stderr, "\r\033[K%s %ld/%ld (%ld%%), about %s left", p->what, p->done, p->total,
            p->total ? 100 * p->done / p->total : 100, left);
    fflush(stderr);
    p->drawn = 1;
}

void progress_clear(tool_progress *p) {
    if (!p->on || !p->drawn) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = 0;
}

void progress_end(tool_progress *p) {
    progress_clear(p);
    p->on = 0;
}
