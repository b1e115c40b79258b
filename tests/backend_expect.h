/* What a backend is known to do differently, per topic: the entries a
 * backend registers (tests/backend/backends.c) for the topic program that
 * runs on it, so a topic's cases are written once and each backend says
 * where it refuses and where it is known to fail.
 *
 *   BH_REFUSE   a probe (bh_probe) the backend refuses: the status, and a
 *               part of the message (which also names the layer);
 *   BH_ACCEPT   a probe the backend prepares;
 *   BH_XFAIL    compared cases (bh_case names starting with `name`) known
 *               to fail, with the reason: their failed checks are counted
 *               as expected, and one that passes is an XPASS -- reported,
 *               and a failure, so a fixed bug gets its entry removed; or a
 *               probe (the whole name) the backend should refuse but
 *               prepares: refusing it is the XPASS.
 *
 * Every probe needs an entry of its backend (a new probe or backend is
 * stated, never assumed), and an entry no probe or case used fails the
 * program (a renamed case leaves no stale entry behind).
 * QPORT_TEST_XFAIL=<name>: one more BH_XFAIL entry (tests the XPASS path). */
#ifndef QP_TEST_BACKEND_EXPECT_H
#define QP_TEST_BACKEND_EXPECT_H
#include "backend.h"

typedef enum bh_expect_kind { BH_REFUSE = 1, BH_ACCEPT, BH_XFAIL } bh_expect_kind;

typedef struct bh_expect {
    const char *topic;      /* "w4a16": the topic program it belongs to */
    const char *name;       /* a probe, or the start of compared cases' names */
    bh_expect_kind kind;
    qp_status status;       /* BH_REFUSE: what linear_prepare answers */
    const char *reason;     /* BH_REFUSE: in the message; BH_XFAIL: why */
} bh_expect;

/* the entries of `topic` in list (NULL-name terminated) apply from now */
void bh_expect_use(const bh_expect *list, const char *topic);
/* prepares d on path and checks the answer against the backend's entry
 * `name` (BH_REFUSE: status, reason and layer name in bh_err, no handle;
 * BH_ACCEPT: QP_OK, destroyed again; BH_XFAIL: prepares, else XPASS) */
void bh_probe(const char *name, const qp_lin_desc *d, unsigned path);
/* a compared case starts (bh_case calls it): the one before is judged */
void bh_expect_case(const char *name);
/* the last case judged, unused entries failed, the tally printed (bh_finish
 * calls it); the number of XPASS cases */
int bh_expect_end(void);
/* the tally so far: expected failures seen, XPASS cases, probes judged */
extern long bh_xfails, bh_xpasses, bh_probes;
#endif
