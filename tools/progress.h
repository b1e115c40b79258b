/* Progress of long work on a terminal: "what: done/total, time left" on
 * stderr, overwritten with \r. Silent unless stdout and stderr are both
 * terminals, so logs, pipes and tests never see it. */
#ifndef QPORT_PROGRESS_H
#define QPORT_PROGRESS_H

typedef struct tool_progress {
    const char *what;
    long done, total;
    double t0, shown; /* start; last redraw (seconds) */
    int on, drawn;
} tool_progress;

void progress_start(tool_progress *p, const char *what, long total);
/* n more units done; redraws at most 5 times a second */
void progress_step(tool_progress *p, long n);
/* erases the line, so the next line on stdout starts clean */
void progress_clear(tool_progress *p);
/* erases the line for good */
void progress_end(tool_progress *p);
#endif
