#!/bin/sh
# MoE end to end: qport demo-model --experts (Qwen3-MoE layout), quantize
# into every MoE scheme the reference runs (the router left unquantized, as
# vLLM builds it), inspect's MoE answer, qport run on the MoE block; and a
# checkpoint with a missing expert tensor is an error naming it.
set -u
Q="$1"; T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$Q" demo-model "$T/fp16" --experts 8 --topk 2 --layers 1 --hidden 256 --intermediate 128 >/dev/null || fail "demo-model --experts"
grep -q '"num_experts_per_tok": 2' "$T/fp16/config.json" || fail "no num_experts_per_tok"
"$Q" demo-model "$T/x" --experts 4 --topk 5 2>/dev/null; [ $? -eq 2 ] || fail "topk > experts must be a usage error"
hdr() { python3 -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
for k in sorted(h):
    if k != "__metadata__": print(k, h[k]["dtype"], h[k]["shape"])' "$1"; }
SCHEMES="fp8-static fp8-dyn-token int8-dyn-sym int8-static-sym mxfp4 mxfp4-a-mxfp4 mxfp6-e2m3 w4a8-mxfp4-fp8 nvfp4 hf-fp8
  w4a16-uint4 w4a16-int4 mxfp8 fp8-block"
# sanitizer builds: one scheme per binding path (the plain build runs all)
[ "${2:-}" = --sanitized ] && SCHEMES="fp8-static int8-dyn-sym mxfp4-a-mxfp4 nvfp4 w4a16-uint4 fp8-block"
for s in $SCHEMES; do
  "$Q" quantize "$T/fp16" "$T/$s" --scheme "$s" >/dev/null || fail "quantize $s"
  hdr "$T/$s/model.safetensors" | grep -q "model.layers.0.mlp.gate.weight F16 \[8, 256\]" || fail "$s: the router must stay fp16"
  # every device for two schemes (the GPU backends' MoE kernels have their
  # own tests and conform cases), the reference for the others
  dev="--device cpu"; case $s in int8-dyn-sym|nvfp4|w4a16-uint4) dev="";; esac
  out=$("$Q" run "$T/$s" --tokens 5 $dev 2>&1) || { echo "$out"; fail "run $s"; }
  [ -z "$dev" ] && { echo "$out" | grep -q "model.layers.0.mlp.experts .*vulkan:0 .*moe .* ok" || { echo "$out"; fail "$s: vulkan MoE row"; }; }
  echo "$out" | grep "model.layers.0.mlp.experts" | grep -q "E8 top-2 reference .*(ref)" || { echo "$out"; fail "$s: no MoE row"; }
  echo "$out" | grep -q "model.layers.0.mlp.gate .*unquantized" || { echo "$out"; fail "$s: the router is not run unquantized"; }
  echo "$out" | grep -q "experts\.[0-9]" && { echo "$out"; fail "$s: expert projections listed as linear layers"; }
done
# --output writes the MoE block's rows, one tensor per device; int8 MoE
# is bit-exact across devices, so every device's rows equal the cpu's
out=$("$Q" run "$T/int8-dyn-sym" --layer model.layers.0.mlp.experts --tokens 5 --output "$T/moe-out.safetensors" 2>&1) || { echo "$out"; fail "run --output moe"; }
python3 - "$T/moe-out.safetensors" <<'PY' || fail "--output must hold the MoE block's rows"
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
rows = {k: v for k, v in h.items() if k.startswith("model.layers.0.mlp.experts@")}
assert "model.layers.0.mlp.experts@cpu:0" in rows, sorted(h)
data = b[8 + n:]
ref = rows["model.layers.0.mlp.experts@cpu:0"]
for k, v in rows.items():
    assert v["dtype"] == "F16" and v["shape"] == [5, 256], (k, v)
    o, r = v["data_offsets"], ref["data_offsets"]
    assert data[o[0]:o[1]] == data[r[0]:r[1]], k + " differs from the cpu reference"
assert any(data[ref["data_offsets"][0]:ref["data_offsets"][1]][i] for i in range(5 * 256 * 2)), "all-zero MoE output"
print(len(rows), "devices")
PY
# QQQ quantizes linear layers only: vLLM builds the experts with
# UnquantizedFusedMoEMethod, so quantize leaves them in fp16 and run runs
# them so
"$Q" quantize "$T/fp16" "$T/qqq" --scheme qqq >/dev/null || fail "quantize qqq"
hdr "$T/qqq/model.safetensors" | grep -q "model.layers.0.mlp.experts.0.up_proj.weight F16 \[128, 256\]" || fail "qqq: experts must stay fp16"
out=$("$Q" run "$T/qqq" --tokens 3 --device cpu 2>&1) || { echo "$out"; fail "run qqq"; }
echo "$out" | grep -q "model.layers.0.mlp.experts .*moe unquantized .*(ref)" || { echo "$out"; fail "qqq: unquantized experts"; }
out=$("$Q" inspect "$T/fp8-static/config.json" --layer model.layers.0.mlp.experts:moe 2>&1) || fail "inspect moe"
echo "$out" | grep -q "QuarkMoEMethod / QuarkW8A8Fp8MoEMethod" || { echo "$out"; fail "inspect moe class"; }
# vLLM 0.34.0's methods for W4A16, MXFP8 and per-block fp8 experts
for sc in w4a16-uint4:QuarkW4A16Int4MoEMethod mxfp8:QuarkW8A8Mxfp8MoEMethod fp8-block:QuarkW8A8Fp8MoEMethod; do
  [ -d "$T/${sc%%:*}" ] || continue
  out=$("$Q" inspect "$T/${sc%%:*}/config.json" --layer model.layers.0.mlp.experts:moe 2>&1) || fail "inspect ${sc%%:*}"
  echo "$out" | grep -q "QuarkMoEMethod / ${sc#*:}" || { echo "$out"; fail "inspect ${sc%%:*}: ${sc#*:}"; }
done
# qport devices: each device's fused MoE support, in text and JSON
out=$("$Q" devices 2>&1) || fail "devices"
echo "$out" | grep -q "MoE experts (fused):" || { echo "$out"; fail "devices: no MoE section"; }
echo "$out" | grep -q "nvfp4 .*native .*the fused MoE reference" || { echo "$out"; fail "devices: cpu MoE"; }
"$Q" devices --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["devices"]
cpu = [x for x in d if x["device"] == "cpu:0"][0]
assert {m["scheme"] for m in cpu["moe"]} >= {"fp8-static", "int8-dyn-sym", "mxfp4", "nvfp4", "w4a8-mxfp4-fp8"}, cpu["moe"]
assert all(m["support"] in ("native", "emulated", "unsupported") for x in d for m in x["moe"])' || fail "devices --json moe"
# a missing expert tensor is an error naming it
python3 - "$T/int8-dyn-sym/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
h["model.layers.0.mlp.experts.3.up_proj.weight_scalx"] = h.pop("model.layers.0.mlp.experts.3.up_proj.weight_scale")
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(p, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
out=$("$Q" run "$T/int8-dyn-sym" --layer model.layers.0.mlp.experts 2>&1) && fail "a missing expert scale must fail"
echo "$out" | grep -q "experts.3.up_proj.weight_scalx" || { echo "$out"; fail "the error must name the tensor"; }
# a tensor no layer binds (3-D fused experts, as some exporters write) is
# an error naming it, never skipped silently
python3 - "$T/fp8-static/model.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
data = b[8 + n:]
h["model.layers.0.mlp.experts.gate_up_proj"] = {"dtype": "F16", "shape": [8, 4, 2], "data_offsets": [len(data), len(data) + 128]}
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8)
open(p, "wb").write(struct.pack("<Q", len(j)) + j + data + bytes(128))
PY
out=$("$Q" run "$T/fp8-static" --device cpu 2>&1) && fail "an unused tensor must fail the run"
# (under an MoE block the binder refuses it, naming it)
echo "$out" | grep -q "tensor 'model.layers.0.mlp.experts.gate_up_proj' is under the experts of 'model.layers.0.mlp.experts'" || { echo "$out"; fail "unused report"; }
echo "ok: MoE demo quantized into $(echo $SCHEMES | wc -w) schemes and run, QQQ experts unquantized; router unquantized; bad experts refused; unused tensors reported"
