#!/bin/sh
# The demo flow of the README: generate the demo model, quantize it into
# schemes, `qport run` every layer on every device against the reference;
# plus the CLI's error paths.
set -u
Q="$1"; T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$Q" demo-model "$T/fp16" --layers 1 >/dev/null || fail "demo-model"
# an existing model is never overwritten silently: exit 1 naming --force, the files unchanged
sum0=$(cksum < "$T/fp16/model.safetensors")
out=$("$Q" demo-model "$T/fp16" --layers 2 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "already exists; pass --force" || fail "demo-model over a model: rc $rc: $out"
[ "$(cksum < "$T/fp16/model.safetensors")" = "$sum0" ] || fail "demo-model changed the model it refused to overwrite"
"$Q" demo-model "$T/fp16" --layers 1 --force >/dev/null || fail "demo-model --force"
[ "$(cksum < "$T/fp16/model.safetensors")" = "$sum0" ] || fail "demo-model --force: not the same deterministic model"
for s in int8-dyn-sym int8-static-asym fp8-static qqq qqq-channel w4a16-uint4 nvfp4 ct-w8a8-int8 ct-w4a16-asym ct-nvfp4; do
  "$Q" quantize "$T/fp16" "$T/$s" --scheme "$s" >/dev/null || fail "quantize $s"
  grep -q '"quantization_config"' "$T/$s/config.json" || fail "$s: no quantization_config"
  out=$("$Q" run "$T/$s" --tokens 3 --output "$T/$s.out.safetensors" 2>&1) || { echo "$out"; fail "run $s"; }
  echo "$out" | grep -q "qkv_proj" || fail "$s: fused qkv_proj not run"
  [ -s "$T/$s.out.safetensors" ] || fail "$s: no --output file"
done
echo "$out" | tail -4
# errors: unknown scheme, already quantized, bad group size, not a model, bad device
"$Q" quantize "$T/fp16" "$T/x" --scheme nope 2>/dev/null; [ $? -eq 2 ] || fail "unknown scheme"
"$Q" quantize "$T/qqq" "$T/x" --scheme qqq 2>&1 | grep -q "already quantized" || fail "already quantized"
"$Q" quantize "$T/fp16" "$T/x" --scheme int8-dyn-sym --group-size 64 2>&1 | grep -q "no group size" || fail "group size"
"$Q" run "$T/nowhere" 2>&1 | grep -q "cannot open\|No such\|no \*.safetensors" || fail "missing dir"
"$Q" run "$T/qqq" --device vulkan:99 2>&1 | grep -q "no device matches 'vulkan:99'" || fail "bad device"
"$Q" quantize "$T/fp16" "$T/g64" --scheme w4a16-int4 --group-size 64 >/dev/null || fail "w4a16 g64"
grep -q '"group_size":64' "$T/g64/config.json" || fail "group size not written"
# fp8 KV cache: the config gains kv_cache_group, k/v output scales are
# written, and run checks the cache kernels bit for bit on every device
"$Q" quantize "$T/fp16" "$T/kv" --scheme fp8-dyn-token --kv-cache >/dev/null || fail "quantize --kv-cache"
grep -q '"kv_cache_group":\["\*k_proj","\*v_proj"\]' "$T/kv/config.json" || fail "no kv_cache_group"
out=$("$Q" run "$T/kv" --tokens 2 2>&1) || { echo "$out"; fail "run kv"; }
echo "$out" | grep "kv-cache fp8" | grep -q "(ref)" || { echo "$out"; fail "no kv-cache rows"; }
echo "$out" | grep "kv-cache fp8" | grep -v "(ref)" | grep -q "FAIL" && { echo "$out"; fail "kv-cache differs"; }
"$Q" quantize "$T/fp16" "$T/x" --scheme qqq --kv-cache 2>&1 | grep -q "needs a Quark scheme" || fail "kv on qqq"
echo "ok: demo model quantized into 8 schemes (one with an fp8 KV cache) and run on every device"
