#!/bin/sh
# The whole test suite: set up, build, run every test; then a clang build
# with ASan+UBSan that reruns the suite and fuzzes config loading for 60 s.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
meson test -C build --print-errorlogs
if [ ! -f build-asan/build.ninja ]; then
  CC=clang meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true \
    -Dc_args=-fno-sanitize-recover=undefined >/dev/null
fi
ninja -C build-asan >/dev/null
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 meson test -C build-asan --print-errorlogs
echo "qport: all tests passed"
