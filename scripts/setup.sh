#!/bin/sh
# Installs the Debian 12 packages qport builds and tests with (only those
# missing), then configures the build directory. Safe to run repeatedly.
set -eu
# Vulkan: loader, lavapipe (Mesa's CPU driver), glslang, validation layers.
# OpenCL: the ICD loader, headers and PoCL (CPU). CUDA: nvcc from the machine's
# toolkit in /usr/local/cuda when present (the plugin is skipped otherwise).
# Python: numpy and pytest for the Python package's tests (python/tests).
# MPI: Open MPI (libqport-mpi.so and the two-rank tests of suite mpi).
PKGS="meson ninja-build pkg-config gcc clang libclang-rt-14-dev libjsmn-dev libpcre2-dev python3 valgrind
 python3-numpy python3-pytest
 libvulkan-dev mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers vulkan-tools
 ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
 openmpi-bin libopenmpi-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "qport setup: installing$missing"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
cd "$(dirname "$0")/.."
# meson finds nvcc only on PATH (docs/backends.md, the CUDA backend)
[ -x /usr/local/cuda/bin/nvcc ] && PATH="/usr/local/cuda/bin:$PATH" && export PATH
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build > build/ninja.log 2>&1 || { tail -n 60 build/ninja.log; exit 1; }
