#!/bin/sh
# Static proof for the CUDA kernels, run at build time by the
# custom target cuda-ptx-report: for every SASS target, compile the kernel
# file to PTX and assemble it with `ptxas -v` (what -Xptxas -v reports), then write one report
# that tests/test_cuda_ptx.sh checks: the PTX of each target and the ptxas
# resource lines (registers, spill stores/loads) per kernel.
# usage: ptx_report.sh NVCC KERNEL.cu OUT.txt WORKDIR "75 80 ..." "90" SRCROOT
set -eu
nvcc=$1 src=$2 out=$3 work=$4 sass=$5 ptx=$6 root=$7
mkdir -p "$work"
flags="-std=c++17 -fmad=false -prec-div=true -prec-sqrt=true -ftz=false --expt-relaxed-constexpr -I$root/cuda -I$root/api"
: > "$out.tmp"
for a in $sass; do
  "$nvcc" $flags -arch=compute_$a -ptx -o "$work/k_sm_$a.ptx" "$src"
  "$(dirname "$nvcc")/ptxas" -arch=sm_$a -v -o "$work/k_sm_$a.cubin" "$work/k_sm_$a.ptx" \
    > "$work/ptxas_sm_$a.log" 2>&1 || { cat "$work/ptxas_sm_$a.log" >&2; exit 1; }
  {
    echo "== target sm_$a"
    echo "-- mma"
    grep -o 'mma\.sync\.aligned\.[a-z0-9.]*' "$work/k_sm_$a.ptx" | sort | uniq -c || true
    echo "-- ldmatrix"
    grep -o 'ldmatrix\.sync\.aligned\.[a-z0-9.]*' "$work/k_sm_$a.ptx" | sort | uniq -c || true
    echo "-- cp.async"
    grep -o 'cp\.async\.[a-z0-9.]*' "$work/k_sm_$a.ptx" | sort | uniq -c || true
    echo "-- ptxas"
    grep -E "Compiling entry|spill stores|Used [0-9]+ registers" "$work/ptxas_sm_$a.log" | sed 's/^ptxas info *: *//'
  } >> "$out.tmp"
done
for a in $ptx; do
  echo "== ptx compute_$a (embedded PTX target)" >> "$out.tmp"
  "$nvcc" $flags -arch=compute_$a -ptx -o "$work/k_compute_$a.ptx" "$src"
  grep -o 'mma\.sync\.aligned\.[a-z0-9.]*' "$work/k_compute_$a.ptx" | sort | uniq -c >> "$out.tmp" || true
done
mv "$out.tmp" "$out"
