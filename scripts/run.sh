#!/bin/sh
# The main job: set up and build; list every device qport finds on this
# machine; generate the demo model (a small Llama-style fp16 model), quantize
# it into every scheme and `qport run` each across every device against the
# cpu reference; then prove the kernels with `qport conform --quick`.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
Q=./build/tools/qport
# the plugins of this build tree (an installed qport finds them by itself)
QPORT_BACKEND_PATH="$PWD/build/vk:$PWD/build/cl:$PWD/build/cuda"
export QPORT_BACKEND_PATH
D=build/demo
echo "=== qport devices"
"$Q" devices
echo "=== the demo model: $D/fp16"
[ -f "$D/fp16/model.safetensors" ] || "$Q" demo-model "$D/fp16"
status=0
for s in int8-dyn-sym int8-dyn-asym int8-static-sym int8-static-asym fp8-static fp8-dyn-tensor fp8-dyn-token \
         fp8-block qqq qqq-channel w4a16-int4 w4a16-uint4 mxfp4 mxfp4-a-mxfp4 mxfp6-e3m2 w4a8-mxfp4-fp8 nvfp4 hf-fp8; do
  [ -f "$D/$s/model.safetensors" ] || "$Q" quantize "$D/fp16" "$D/$s" --scheme "$s" >/dev/null
  echo "=== qport run $D/$s"
  "$Q" run "$D/$s" --tokens 4 || status=1
done
echo "=== qport conform --quick"
"$Q" conform --quick || status=1
exit $status
