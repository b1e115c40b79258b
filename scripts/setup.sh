#!/bin/sh
# Installs the Debian 12 packages qport builds and tests with (only those
# missing), then configures and builds ./build. Safe to run repeatedly.
#   ./scripts/setup.sh              packages, then build/ (what run.sh uses)
#   ./scripts/setup.sh --packages   packages only (test.sh builds its own folders)
# One line per phase; the build's output goes to build/ninja.log (shown when
# it fails). First run on a 2-core machine: ~1 min of packages, ~2 min of build.
set -eu
# Vulkan: loader, lavapipe (Mesa's CPU driver), glslang, validation layers.
# OpenCL: the ICD loader, headers and PoCL (CPU). CUDA: nvcc from the machine's
# toolkit in /usr/local/cuda when present (the plugin is skipped otherwise).
# Python: numpy and pytest for the Python package's tests (python/tests),
# hypothesis for its property tests, venv and pip for `pip install .` (README).
# MPI: Open MPI (libqport-mpi.so and the two-rank tests of suite mpi).
# dpkg-dev: meson asks dpkg-architecture for Debian's multiarch libdir
# (lib/x86_64-linux-gnu, where the loader and pkg-config look); without it
# `meson install` would put libqport in /usr/local/lib64, where they do not.
PKGS="meson ninja-build pkg-config gcc clang libclang-rt-14-dev libjsmn-dev libpcre2-dev python3 valgrind dpkg-dev
 python3-numpy python3-pytest python3-hypothesis python3-venv python3-pip
 libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers vulkan-tools
 ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
 openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "qport setup: installing Debian packages (about a minute):$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
else
  echo "qport setup: Debian packages present"
fi
[ "${1:-}" = "--packages" ] && exit 0
cd "$(dirname "$0")/.."
# meson finds nvcc only on PATH (docs/backends.md, the CUDA backend)
[ -x /usr/local/cuda/bin/nvcc ] && PATH="/usr/local/cuda/bin:$PATH" && export PATH
if [ ! -f build/build.ninja ]; then
  echo "qport setup: configuring build/ (meson setup build)"
  meson setup build >/dev/null
fi
echo "qport setup: building build/ (ninja -C build; ~2 min the first time on 2 cores, log in build/ninja.log)"
ninja -C build > build/ninja.log 2>&1 || { tail -n 60 build/ninja.log; exit 1; }
echo "qport setup: build/ is ready (./build/tools/qport)"
