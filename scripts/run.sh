#!/bin/sh
# The main job: set up and build; list every device qport finds on this
# machine; generate the demo model (a small Llama-style fp16 model), quantize
# it into every scheme and `qport run` each across every device against the
# cpu reference; the same for a small mixture-of-experts model; then prove
# the kernels with `qport conform --quick`.
# The plugins of the build tree are found by qport itself (no
# QPORT_BACKEND_PATH). Output: about a screen per step; each scheme's full
# `qport run` table is kept in build/demo/<scheme>.run.txt.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
Q=./build/tools/qport
D=build/demo
echo "=== qport devices"
"$Q" devices
echo "=== the demo model: $D/fp16"
[ -f "$D/fp16/model.safetensors" ] || "$Q" demo-model "$D/fp16"
status=0
first=1
for s in int8-dyn-sym int8-dyn-asym int8-static-sym int8-static-asym fp8-static fp8-dyn-tensor fp8-dyn-token \
         fp8-block qqq qqq-channel w4a16-int4 w4a16-uint4 mxfp4 mxfp4-a-mxfp4 mxfp6-e3m2 w4a8-mxfp4-fp8 nvfp4 hf-fp8; do
  [ -f "$D/$s/model.safetensors" ] || "$Q" quantize "$D/fp16" "$D/$s" --scheme "$s" >/dev/null
  rc=0
  "$Q" run "$D/$s" --tokens 4 > "$D/$s.run.txt" 2>&1 || rc=1
  [ $rc -eq 0 ] || status=1
  if [ $first -eq 1 ]; then
    # the first scheme's whole table, so the shape of a run is visible
    echo "=== qport run $D/$s --tokens 4"
    cat "$D/$s.run.txt"
    echo "=== qport run on every other scheme (tables in $D/<scheme>.run.txt)"
    first=0
  else
    printf '%-18s %s\n' "$s" "$(sed -n 's/^\([0-9]* ok, [0-9]* failed\).*/\1/p' "$D/$s.run.txt")"
    # a failing scheme shows its whole table right here
    [ $rc -eq 0 ] || cat "$D/$s.run.txt"
  fi
done
echo "=== a mixture-of-experts demo (8 experts, top-2): fp8, int8, W4A16 uint4 and MXFP8 experts"
[ -f "$D/moe-fp16/model.safetensors" ] || "$Q" demo-model "$D/moe-fp16" --experts 8 --topk 2 >/dev/null
for s in fp8-static int8-dyn-sym w4a16-uint4 mxfp8; do
  [ -f "$D/moe-$s/model.safetensors" ] || "$Q" quantize "$D/moe-fp16" "$D/moe-$s" --scheme "$s" >/dev/null
  rc=0
  "$Q" run "$D/moe-$s" --tokens 4 > "$D/moe-$s.run.txt" 2>&1 || rc=1
  [ $rc -eq 0 ] || status=1
  grep "mlp.experts .*(ref)" "$D/moe-$s.run.txt" | head -n 1
  printf '%-18s %s\n' "moe-$s" "$(sed -n 's/^\([0-9]* ok, [0-9]* failed\).*/\1/p' "$D/moe-$s.run.txt")"
  [ $rc -eq 0 ] || cat "$D/moe-$s.run.txt"
done
echo "=== qport conform --quick"
"$Q" conform --quick || status=1
exit $status
