#!/bin/sh
# Static proof for the CUDA kernels: reads the report that
# cuda/ptx_report.sh wrote at build time and checks that
#  - the sm_80+ PTX uses mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32,
#  - sm_75 uses mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32,
#  - sm_89+ (and the embedded compute_90 PTX) use the e4m3 variant
#    mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32,
#  - sm_80+ use cp.async and every target uses ldmatrix,
#  - sm_80+ and compute_90 use the f16 and bf16 m16n8k16 variants,
#    sm_75 the f16 m16n8k8 one and no bf16,
#  - ptxas -v reports 0 bytes spill stores / loads for every kernel.
set -eu
rep=$1
[ -f "$rep" ] || { echo "cuda-ptx: report $rep missing"; exit 1; }
fail=0
section() { awk -v t="== $1" '$0 ~ /^== / { on = ($0 == t) || index($0, t " ") == 1 } on' "$rep"; }
need() { # target pattern what
  if ! section "$1" | grep -q "$2"; then echo "FAIL $1: no $3 ($2)"; fail=1; else echo "ok   $1: $3"; fi
}
for t in 80 86 89 90; do
  need "target sm_$t" "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" "int8 m16n8k32 mma"
  need "target sm_$t" "cp.async.cg.shared.global" "cp.async"
done
need "target sm_75" "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32" "int8 m8n8k16 mma"
for t in 75 80 86 89 90; do need "target sm_$t" "ldmatrix.sync.aligned.m8n8.x4" "ldmatrix"; done
for t in 89 90; do
  need "target sm_$t" "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" "e4m3 mma"
done
for t in 75 80 86; do
  if section "target sm_$t" | grep -q "e4m3"; then echo "FAIL sm_$t: e4m3 mma below sm_89"; fail=1; fi
done
# the float kinds (W4A16, unquantized, MX / NVFP4 emulation)
for t in 80 86 89 90; do
  need "target sm_$t" "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "f16 m16n8k16 mma"
  need "target sm_$t" "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "bf16 m16n8k16 mma"
done
need "target sm_75" "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" "f16 m16n8k8 mma"
if section "target sm_75" | grep -q "bf16"; then echo "FAIL sm_75: bf16 mma below sm_80"; fail=1; fi
need "ptx compute_90" "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" "f16 mma in the embedded PTX"
need "ptx compute_90" "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "bf16 mma in the embedded PTX"
need "ptx compute_90" "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" "e4m3 mma in the embedded PTX"
need "ptx compute_90" "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" "int8 mma in the embedded PTX"
kernels=$(grep -c "spill stores" "$rep" || true)
spills=$(grep "spill stores" "$rep" | grep -vc "0 bytes spill stores, 0 bytes spill loads" || true)
if [ "$kernels" -lt 20 ]; then echo "FAIL: only $kernels ptxas entries in the report"; fail=1; fi
if [ "$spills" -ne 0 ]; then
  echo "FAIL: $spills kernel(s) spill:"; grep -B1 "spill stores" "$rep" | grep -v "0 bytes spill stores, 0 bytes spill loads" | head -20; fail=1
else
  echo "ok   ptxas: $kernels kernel compilations, 0 bytes spill stores/loads"
fi
exit $fail
