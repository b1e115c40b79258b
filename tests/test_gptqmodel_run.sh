#!/bin/sh
# qport inspect and qport run on GPTQModel's QQQ exports
# (tests/gptqmodel_exports) on every device of this build: lm_head runs
# unquantized, the per-channel export's layers (fused qkv_proj and
# gate_up_proj too) all run bit-exact against the cpu reference; the
# group-128 export warns at load about the down_proj groups vLLM's kernel
# wraps, runs those layers, and refuses its K = 128 layers (an empty
# s_group where vLLM creates [K/128, N]) with a non-zero exit.
set -u
Q="$1"; X="$2/tests/gptqmodel_exports"
fail() { echo "FAIL: $*"; exit 1; }
out=$("$Q" inspect "$X/pc/config.json" --layer lm_head 2>&1) || { echo "$out"; fail "inspect lm_head"; }
echo "$out" | grep -q "lm_head (linear): UnquantizedEmbeddingMethod" || { echo "$out"; fail "lm_head's method"; }
out=$("$Q" run "$X/pc" --tokens 3 2>&1) || { echo "$out"; fail "pc: run"; }
echo "$out" | grep -q "dtype float16" || { echo "$out"; fail "pc: model dtype"; }
echo "$out" | grep -q "^lm_head .*unquantized .*(ref)" || { echo "$out"; fail "pc: the unquantized lm_head"; }
# 8 QQQ layers and lm_head, each on the reference and every other device
refs=$(echo "$out" | grep -c "(ref) *$"); oks=$(echo "$out" | grep -c " ok *$")
[ "$refs" -eq 9 ] && [ $((oks % 9)) -eq 0 ] && echo "$out" | grep -q "^$oks ok, 0 failed" ||
  { echo "$out"; fail "pc: $refs reference rows, $oks device rows"; }
echo "$out" | grep -q "qkv_proj .*qqq-w4a8" && echo "$out" | grep -q "gate_up_proj .*qqq-w4a8" || fail "pc: fused layers"
out=$("$Q" run "$X/g128" --tokens 3 2>&1) && { echo "$out"; fail "g128: run must fail on the K = 128 layers"; }
for L in 0 1; do
  echo "$out" | grep -q "model.layers.$L.mlp.down_proj: [0-9]* of 256 QQQ weight groups have (code - 8) \* s_group outside int8" ||
    { echo "$out"; fail "g128: no wrap warning for layer $L"; }
  echo "$out" | grep -q "^model.layers.$L.mlp.down_proj .*(ref) *$" || { echo "$out"; fail "g128: layer $L down_proj"; }
  for P in self_attn.qkv_proj self_attn.o_proj mlp.gate_up_proj; do
    echo "$out" | grep "^model.layers.$L.$P " | grep -q "tensor 's_group' has shape \[0\]: expected \[K/128, N\]" ||
      { echo "$out"; fail "g128: layer $L $P must be refused naming s_group"; }
  done
done
echo "ok: GPTQModel's QQQ exports inspected and run on every device"
