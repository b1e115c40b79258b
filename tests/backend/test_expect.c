/* backend-expect: the backends' expectations (backend_expect.h) judged
 * without a device: a plugin stand-in answers linear_prepare as told, and
 * each step compares the failures the harness counted with the ones it
 * must count -- an expected failure forgiven, an XPASS counted (of a case
 * and of a known gap's probe), a refusal
 * with the wrong status or words, a probe with no entry, an entry of
 * another topic ignored, a stale entry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_expect.h"
#include "backend_harness.h"

static qp_status answer;      /* what the stand-in's linear_prepare says */
static const char *answer_msg;
static int handles;           /* prepared and not destroyed */
static int wrong;

static qp_status fake_prepare(void *dev, const qp_lin_desc *d, unsigned path, void **out) {
    (void)dev; (void)d; (void)path;
    snprintf(bh_err, sizeof bh_err, "%s", answer_msg);
    *out = answer == QP_OK ? (void *)&handles : NULL;
    if (answer == QP_OK) handles++;
    return answer;
}
static void fake_destroy(void *dev, void *lin) {
    (void)dev; (void)lin;
    handles--;
}

/* the failures the step left must be `want`; the count starts again */
static void step(const char *what, int want) {
    if (tu_failures != want) {
        fprintf(stderr, "WRONG %s: %d failure(s) counted, %d expected\n", what, tu_failures, want);
        wrong++;
    }
    tu_failures = 0;
}

int main(void) {
    static const bh_expect list[] = {
        {"t", "case-a", BH_XFAIL, QP_OK, "a known bug"},
        {"t", "probe-x", BH_REFUSE, QP_ERR_UNSUPPORTED, "no kernel"},
        {"t", "probe-y", BH_ACCEPT, QP_OK, NULL},
        {"t", "stale", BH_REFUSE, QP_ERR_VALUE, "never probed"},
        {"t", "probe-gap", BH_XFAIL, QP_OK, "a known gap"},
        {"u", "case-b", BH_XFAIL, QP_OK, "another topic's"},
        {NULL, NULL, 0, QP_OK, NULL},
    };
    fprintf(stderr, "backend-expect: each FAIL and XPASS line below is one a step expects (WRONG: one it did not)\n");
    unsetenv("QPORT_TEST_ONLY"); /* the stale entry is judged on whole runs only */
    unsetenv("QPORT_TEST_XFAIL");
    static qp_backend_ops ops;
    ops.linear_prepare = fake_prepare;
    ops.linear_destroy = fake_destroy;
    bh_ops = &ops;
    bh_program = "backend-expect";
    qp_lin_desc d;
    memset(&d, 0, sizeof d);
    d.layer = "probe.layer";
    bh_expect_use(list, "t");

    bh_case("case-a M=1");                 /* expected to fail, and fails */
    tu_failures += 2;
    bh_case("plain M=1");
    step("an expected failure that fails", 0);
    bh_case("case-a M=3");                 /* expected to fail, passes */
    bh_case("plain M=3");
    step("an XPASS", 1);
    bh_case("case-b M=1");                 /* topic u's entry does not apply */
    tu_failures++;
    bh_case("plain M=5");
    step("another topic's entry", 1);

    answer = QP_ERR_UNSUPPORTED;
    answer_msg = "dev: layer 'probe.layer': unsupported: no kernel for it";
    bh_probe("probe-x", &d, 0);
    step("the refusal as registered", 0);
    answer_msg = "dev: layer 'probe.layer': unsupported: something else";
    bh_probe("probe-x", &d, 0);
    step("a refusal in other words", 1);
    answer_msg = "dev: unsupported: no kernel for it";
    bh_probe("probe-x", &d, 0);
    step("a refusal that does not name the layer", 1);
    answer = QP_ERR_VALUE;
    answer_msg = "dev: layer 'probe.layer': no kernel";
    bh_probe("probe-x", &d, 0);
    step("a refusal with another status", 1);
    answer = QP_OK;
    answer_msg = "";
    bh_probe("probe-x", &d, 0);
    step("a registered refusal that prepares", 1);
    bh_probe("probe-y", &d, 0);
    step("an accepted probe", 0);
    answer = QP_ERR_UNSUPPORTED;
    answer_msg = "dev: layer 'probe.layer': unsupported";
    bh_probe("probe-y", &d, 0);
    step("an accepted probe refused", 1);
    bh_probe("probe-z", &d, 0);
    step("a probe without an entry", 1);
    bh_probe("probe-gap", &d, 0);
    step("a known gap's probe refused: XPASS", 1);
    answer = QP_OK;
    answer_msg = "";
    bh_probe("probe-gap", &d, 0);
    step("a known gap's probe prepared", 0);
    if (handles != 0) {
        fprintf(stderr, "WRONG %d prepared handle(s) not destroyed\n", handles);
        wrong++;
    }

    bh_expect_end();
    step("the stale entry", 1);
    if (bh_xfails != 2 || bh_xpasses != 2) {
        fprintf(stderr, "WRONG tally: %ld expected failures, %ld XPASS (2, 2 expected)\n", bh_xfails, bh_xpasses);
        wrong++;
    }
    printf("backend-expect: %s\n", wrong ? "FAILED" : "all checks passed");
    return wrong ? 1 : 0;
}
