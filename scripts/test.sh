#!/bin/sh
# The whole test suite: set up, build, run every test; then a clang build
# with ASan+UBSan that reruns the suite and runs the fuzz targets (config,
# safetensors, MoE binding).
# The CUDA plugin stays out of the clang ASan build: nvcc's host compiler
# (gcc) would link gcc's ASan runtime into it, which cannot load into a
# clang-ASan process; its host code is tested in the plain build.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
# the test-hook switch lets a test prove that `qport conform` can fail
meson configure build -Dtest_hooks=true >/dev/null
meson test -C build --print-errorlogs
if [ ! -f build-asan/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dfuzz=true -Dtest_hooks=true -Dcuda=disabled \
    -Dc_args=-fno-sanitize-recover=undefined >/dev/null
fi
ninja -C build-asan > build-asan/ninja.log 2>&1 || { tail -n 60 build-asan/ninja.log; exit 1; }
# The Vulkan and OpenCL ICD loaders unload the drivers (lavapipe, and the
# ICD loader itself when the plugin closes it) before LeakSanitizer runs, so
# the drivers' own leaks would show as "<unknown module>" and could not be
# suppressed by name: keep them mapped by preloading them.
PRE=""
for l in /usr/lib/x86_64-linux-gnu/libvulkan_lvp.so /usr/lib/x86_64-linux-gnu/libOpenCL.so.1; do
  [ -f "$l" ] && PRE="$PRE $l"
done
LD_PRELOAD="$PRE" ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs
echo "qport: all tests passed"
