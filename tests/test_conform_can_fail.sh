#!/bin/sh
# A kernel that is wrong by one bit must make `qport conform` fail:
# QPORT_TEST_FLIP_BIT (a test-hook build only) flips bit 0 of the first
# output element on every non-reference device.
Q="$1"
n=$("$Q" devices --json | grep -o '"device":"[a-z]*:[0-9]*"' | grep -vc '"cpu:')
if [ "$n" -eq 0 ]; then echo "skip: no device besides the cpu reference"; exit 77; fi
out=$(QPORT_TEST_FLIP_BIT=0 "$Q" conform --quick --scheme int8-dyn-sym 2>&1); rc=$?
echo "$out" | tail -5
[ $rc -eq 1 ] || { echo "FAIL: conform exited $rc with a flipped bit, want 1"; exit 1; }
echo "$out" | grep -q "conform: FAILED" || { echo "FAIL: no failure reported"; exit 1; }
echo "$out" | grep -q " FAIL .*first at \[0,0\]" || { echo "FAIL: the flipped element was not named"; exit 1; }
# and the same run without the flip passes
QPORT_TEST_FLIP_BIT= "$Q" conform --quick --scheme int8-dyn-sym >/dev/null 2>&1 || { echo "FAIL: clean run failed"; exit 1; }
echo "ok: conform fails on a one-bit error and passes without it"
