#!/bin/sh
# The whole test suite: install the packages, build the test configuration
# in build-test/ (-Dtest_hooks=true, which lets conform-can-fail prove that
# `qport conform` can fail; it stays out of the user's build/, which a later
# `meson install` installs), run every test; then a clang build with
# ASan+UBSan in build-asan/ that reruns the suite and runs the fuzz targets
# (config, safetensors, MoE binding, the public API's sizes).
# The CUDA plugin stays out of the clang ASan build: nvcc's host compiler
# (gcc) would link gcc's ASan runtime into it, which cannot load into a
# clang-ASan process; its host code is tested in the plain build.
# One line per phase; skipped tests are listed with their reasons at the end
# of each suite. On a 2-core machine: ~35 min in all the first time.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh --packages
[ -x /usr/local/cuda/bin/nvcc ] && PATH="/usr/local/cuda/bin:$PATH" && export PATH
# Each skipped test of a suite with the reason it printed (exit status 77).
skipped() {
  python3 - "$1/meson-logs/testlog.json" <<'PY' || true
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") == "SKIP":
        out = [l.strip() for l in ((t.get("stdout") or "") + (t.get("stderr") or "")).splitlines() if l.strip()]
        at = [i for i, l in enumerate(out) if "skip" in l.lower()]
        why = " ".join(out[at[0]:] if at else out[-1:])[:300] or "(no reason printed)"
        print("qport test: skipped %s: %s" % (t["name"], why))
PY
}
if [ ! -f build-test/build.ninja ]; then
  echo "qport test: [1/4] configuring build-test/ (gcc, -Dtest_hooks=true)"
  meson setup build-test -Dtest_hooks=true >/dev/null
fi
echo "qport test: [1/4] building build-test/ (~3 min the first time on 2 cores, log in build-test/ninja.log)"
ninja -C build-test > build-test/ninja.log 2>&1 || { tail -n 60 build-test/ninja.log; exit 1; }
echo "qport test: [2/4] the plain suite (meson test -C build-test, ~14 min)"
rc=0
meson test -C build-test --print-errorlogs || rc=$?
skipped build-test
[ $rc -eq 0 ] || exit $rc
if [ ! -f build-asan/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true -Dtest_hooks=true -Dcuda=disabled \
    -Dc_args=-fno-sanitize-recover=undefined >/dev/null
fi
echo "qport test: [3/4] building build-asan/ (clang, ASan+UBSan, libFuzzer; ~5 min the first time, log in build-asan/ninja.log)"
ninja -C build-asan > build-asan/ninja.log 2>&1 || { tail -n 60 build-asan/ninja.log; exit 1; }
# The Vulkan and OpenCL ICD loaders unload the drivers (lavapipe, and the
# ICD loader itself when the plugin closes it) before LeakSanitizer runs, so
# the drivers' own leaks would show as "<unknown module>" and could not be
# suppressed by name: keep them mapped by preloading them.
PRE=""
for l in /usr/lib/x86_64-linux-gnu/libvulkan_lvp.so /usr/lib/x86_64-linux-gnu/libOpenCL.so.1; do
  [ -f "$l" ] && PRE="$PRE $l"
done
echo "qport test: [4/4] the sanitized suite and the fuzzers (meson test -C build-asan, ~12 min)"
rc=0
LD_PRELOAD="$PRE" ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs || rc=$?
skipped build-asan
[ $rc -eq 0 ] || exit $rc
echo "qport: all tests passed"
