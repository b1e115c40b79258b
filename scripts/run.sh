#!/bin/sh
# The main job: set up, build, list every device qport finds on this
# machine, run every scheme on every one of them against the cpu reference
# (qport conform), and show how vLLM resolves every bundled config.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
Q=./build/tools/qport
# the plugins of this build tree (an installed qport finds them by itself)
QPORT_BACKEND_PATH="$PWD/build/vk:$PWD/build/cl:$PWD/build/cuda"
export QPORT_BACKEND_PATH
echo "=== qport devices"
"$Q" devices
echo "=== qport conform --quick (failures and skips are listed; the table is at the end)"
"$Q" conform --quick || echo "(conform reported failures)"
for cfg in tests/configs/*.json; do
  echo "=================================================================="
  "$Q" inspect "$cfg"
  echo "--- layers (capability 90):"
  "$Q" inspect "$cfg" --capability 90 \
    --layer model.layers.0.self_attn.qkv_proj --layer model.layers.0.self_attn.o_proj \
    --layer model.layers.0.mlp.gate_up_proj --layer model.layers.0.mlp.down_proj \
    --layer model.layers.0.self_attn.attn:attention --layer lm_head || true
done
