#!/bin/sh
# The whole test suite: set up, build, run every test; then a clang build
# with ASan+UBSan that reruns the suite and fuzzes config loading for 60 s.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
# the test-hook switch lets a test prove that `qport conform` can fail
meson configure build -Dtest_hooks=true >/dev/null
meson test -C build --print-errorlogs
if [ ! -f build-asan/build.ninja ]; then
  CC=clang meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true -Dtest_hooks=true \
    -Dc_args=-fno-sanitize-recover=undefined >/dev/null
fi
ninja -C build-asan > build-asan/ninja.log 2>&1 || { tail -n 60 build-asan/ninja.log; exit 1; }
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 meson test -C build-asan --print-errorlogs
echo "qport: all tests passed"
