#!/bin/sh
# The main job: set up, build, and inspect every bundled config the way vLLM
# resolves it, for a spread of typical layer names.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh
Q=./build/tools/qport
for cfg in tests/configs/*.json; do
  echo "=================================================================="
  "$Q" inspect "$cfg"
  echo "--- layers (capability 90):"
  "$Q" inspect "$cfg" --capability 90 \
    --layer model.layers.0.self_attn.qkv_proj --layer model.layers.0.self_attn.o_proj \
    --layer model.layers.0.mlp.gate_up_proj --layer model.layers.0.mlp.down_proj \
    --layer model.layers.0.self_attn.attn:attention --layer lm_head || true
done
