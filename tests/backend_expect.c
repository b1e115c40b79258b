/* The backends' expected refusals and failures (backend_expect.h). */
#include "backend_expect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"

#define BH_MAX_EXPECT 64

long bh_xfails, bh_xpasses, bh_probes;

static const bh_expect *entries[BH_MAX_EXPECT];
static bool used[BH_MAX_EXPECT];
static int n_entries;
static bh_expect env_entry;
static const bh_expect *open_xfail; /* the case running now, when expected to fail */
static char open_name[512];
static int open_failures;           /* tu_failures when it started */

void bh_expect_use(const bh_expect *list, const char *topic) {
    n_entries = 0;
    open_xfail = NULL;
    for (const bh_expect *e = list; e && e->name; e++)
        if (!strcmp(e->topic, topic) && n_entries < BH_MAX_EXPECT) entries[n_entries++] = e;
    const char *x = getenv("QPORT_TEST_XFAIL");
    if (x && *x && n_entries < BH_MAX_EXPECT) {
        env_entry = (bh_expect){topic, x, BH_XFAIL, QP_OK, "QPORT_TEST_XFAIL"};
        entries[n_entries++] = &env_entry;
    }
    memset(used, 0, sizeof used);
}

/* the entry of `name` of the given kind (XFAIL: `name` starts with it) */
static const bh_expect *find(const char *name, bool xfail) {
    for (int i = 0; i < n_entries; i++) {
        const bh_expect *e = entries[i];
        bool hit = xfail ? e->kind == BH_XFAIL && !strncmp(name, e->name, strlen(e->name))
                         : e->kind != BH_XFAIL && !strcmp(name, e->name);
        if (hit) {
            used[i] = true;
            return e;
        }
    }
    return NULL;
}

void bh_probe(const char *name, const qp_lin_desc *d, unsigned path) {
    const bh_expect *e = find(name, false);
    const bh_expect *x = NULL; /* a probe it should refuse and does not */
    for (int i = 0; !e && !x && i < n_entries; i++)
        if (entries[i]->kind == BH_XFAIL && !strcmp(entries[i]->name, name)) {
            used[i] = true;
            x = entries[i];
        }
    CHECK(e || x, "%s: probe '%s' has no entry for this backend (BH_REFUSE, BH_ACCEPT or BH_XFAIL: "
          "tests/backend/backends.c)", bh_program, name);
    if (!e && !x) return;
    bh_probes++;
    void *lin = NULL;
    bh_err[0] = 0;
    qp_status st = bh_ops->linear_prepare(bh_dev, d, path, &lin);
    if (x) {
        if (st == QP_OK) {
            bh_xfails++;
            printf("XFAIL probe %s: prepared, as expected (%s)\n", name, x->reason);
        } else {
            bh_xpasses++;
            tu_failures++;
            fprintf(stderr, "XPASS probe %s: refused (%d '%s'), expected to prepare (%s): make its entry a BH_REFUSE\n",
                    name, (int)st, bh_err, x->reason);
        }
    } else if (e->kind == BH_ACCEPT) {
        CHECK(st == QP_OK && lin, "probe %s: expected to prepare, got %d '%s'", name, (int)st, bh_err);
    } else {
        CHECK(st == e->status && !lin && strstr(bh_err, e->reason) && d->layer && strstr(bh_err, d->layer),
              "probe %s: expected refusal %d naming '%s' and layer '%s', got %d '%s'", name, (int)e->status, e->reason,
              d->layer ? d->layer : "", (int)st, bh_err);
    }
    if (lin) bh_ops->linear_destroy(bh_dev, lin);
}

/* the case that ran: an expected failure that failed is forgiven, one
 * that passed is an XPASS */
static void judge(void) {
    if (!open_xfail) return;
    int failed = tu_failures - open_failures;
    if (failed > 0) {
        tu_failures -= failed;
        bh_xfails++;
        printf("XFAIL %s: %d check(s) failed, as expected (%s)\n", open_name, failed, open_xfail->reason);
    } else {
        bh_xpasses++;
        tu_failures++;
        fprintf(stderr, "XPASS %s: expected to fail (%s) but passed: remove its BH_XFAIL entry\n", open_name,
                open_xfail->reason);
    }
    open_xfail = NULL;
}

void bh_expect_case(const char *name) {
    judge();
    open_xfail = find(name, true);
    if (!open_xfail) return;
    snprintf(open_name, sizeof open_name, "%s", name);
    open_failures = tu_failures;
}

int bh_expect_end(void) {
    judge();
    const char *only = getenv("QPORT_TEST_ONLY");
    if (!only || !*only) /* a part of the topic leaves entries unused */
        for (int i = 0; i < n_entries; i++)
            CHECK(used[i], "%s: entry '%s' (topic %s) matched no probe or case: stale", bh_program, entries[i]->name,
                  entries[i]->topic);
    if (bh_probes || bh_xfails || bh_xpasses)
        printf("%s: %ld probes, %ld expected failures, %ld XPASS\n", bh_program, bh_probes, bh_xfails, bh_xpasses);
    n_entries = 0;
    return (int)bh_xpasses;
}
