#!/bin/sh
# qport inspect and qport run on every checkpoint AMD's quantizer wrote
# (tests/quark_exports: 16 schemes x fp16/bf16), on every device of this
# build against the cpu reference; the model dtype from config.json and
# --dtype; --input's rows set M, and a wrong --tokens, K, dtype or a
# missing tensor is an error naming the tensor and both shapes; qport
# quantize writes Quark's layout (scales in the model dtype, the zero
# points of symmetric int4).
set -u
Q="$1"; SRC="$2"; X="$SRC/tests/quark_exports"; T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
SAN=0; [ "${3:-}" = --sanitized ] && SAN=1
fail() { echo "FAIL: $*"; exit 1; }
n=0
for d in fp16 bf16; do
  want=$([ $d = fp16 ] && echo float16 || echo bfloat16)
  for m in "$X/$d"/*/; do
    m=${m%/}; s=$(basename "$m")
    if [ "$s" = int4_fp8 ]; then
      "$Q" inspect "$m/config.json" >/dev/null 2>&1 && fail "$d/$s: inspect must refuse it"
      out=$("$Q" run "$m" 2>&1) && fail "$d/$s: run must refuse it"
      echo "$out" | grep -q "Multi-entry weight or activation quantization configs are only supported for NVFP4" ||
        { echo "$out"; fail "$d/$s: vLLM's message"; }
      continue
    fi
    "$Q" inspect "$m/config.json" >/dev/null 2>&1 || fail "$d/$s: inspect"
    dev=""; [ $SAN = 1 ] && [ $d = bf16 ] && dev="--device cpu"
    out=$("$Q" run "$m" --tokens 3 $dev 2>&1) || { echo "$out"; fail "$d/$s: run"; }
    echo "$out" | grep -q "dtype $want" || { echo "$out"; fail "$d/$s: model dtype not $want"; }
    echo "$out" | grep -q "qkv_proj" || fail "$d/$s: fused qkv_proj not run"
    echo "$out" | grep -q "^lm_head .*(ref)" || { echo "$out"; fail "$d/$s: the unquantized lm_head"; }
    rows=$(echo "$out" | grep -c " ok *$")
    [ -n "$dev" ] || [ "$rows" -ge 9 ] || { echo "$out"; fail "$d/$s: only $rows device rows ok"; }
    case $s in fp8_kv) echo "$out" | grep "kv-cache fp8" | grep -q "(ref)" || fail "$d/$s: no KV-cache rows" ;; esac
    n=$((n + 1))
  done
done
[ $n -eq 30 ] || fail "$n exports run (30 expected)"
echo "ok: $n Quark exports inspected and run on every device"

# the tiny Mixtral exports: the router runs unquantized, the experts as one
# fused MoE block per layer on the reference (every MoE scheme)
for d in moe-fp16 moe-bf16; do
  for m in "$X/$d"/*/; do
    m=${m%/}; s=$(basename "$m")
    out=$("$Q" inspect "$m/config.json" --layer model.layers.0.mlp.experts:moe 2>&1) || { echo "$out"; fail "$d/$s: inspect moe"; }
    dev=""; [ $SAN = 1 ] && [ $d = moe-bf16 ] && dev="--device cpu"
    out=$("$Q" run "$m" --tokens 3 $dev 2>&1) || { echo "$out"; fail "$d/$s: run"; }
    [ "$(echo "$out" | grep -c "mlp.experts .*(ref)")" -eq 2 ] || { echo "$out"; fail "$d/$s: two MoE blocks"; }
    echo "$out" | grep -q "mlp.gate .*unquantized .*(ref)" || { echo "$out"; fail "$d/$s: the router"; }
  done
done
echo "ok: the Mixtral exports' MoE blocks"

# the architecture exports (make_arch_fixtures.py: DeepSeek-V3, Qwen2-MoE,
# Qwen3-MoE in fp8, mxfp4, nvfp4): inspect, run on every device (routers
# unquantized, DeepSeek's fused_qkv_a_proj and shared experts, the MoE
# block), and the block's rows through --input / --output on every device
na=0
for m in "$X"/arch-bf16/*/; do
  m=${m%/}; s=$(basename "$m")
  "$Q" inspect "$m/config.json" >/dev/null 2>&1 || fail "arch $s: inspect"
  dev=""; [ $SAN = 1 ] && dev="--device cpu"
  out=$("$Q" run "$m" --tokens 3 $dev 2>&1) || { echo "$out"; fail "arch $s: run"; }
  echo "$out" | grep -q "mlp.experts .*(ref)" || { echo "$out"; fail "arch $s: no MoE block"; }
  echo "$out" | grep -q "mlp.gate .*unquantized .*(ref)" || { echo "$out"; fail "arch $s: the router"; }
  case $s in
    deepseek*) echo "$out" | grep -q "self_attn.fused_qkv_a_proj .*unquantized .*(ref)" || { echo "$out"; fail "arch $s: fused_qkv_a_proj"; }
               echo "$out" | grep -q "mlp.shared_experts.gate_up_proj" || { echo "$out"; fail "arch $s: shared experts"; } ;;
    qwen2*) echo "$out" | grep -q "mlp.shared_expert_gate .*unquantized .*(ref)" || { echo "$out"; fail "arch $s: shared_expert_gate"; } ;;
  esac
  B=$(python3 - "$m/quark_reference/outputs.safetensors" "$T/arch-in.safetensors" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
k = sorted(x for x in h if x.endswith(".experts.x"))[0]
o = h[k]["data_offsets"]; data = b[8 + n + o[0]:8 + n + o[1]]; name = k[:-2]
j = json.dumps({name: {"dtype": h[k]["dtype"], "shape": h[k]["shape"], "data_offsets": [0, len(data)]}}).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + data)
print(name)
EOF
) || fail "arch $s: input"
  out=$("$Q" run "$m" --layer "$B" --input "$T/arch-in.safetensors" --output "$T/arch-out.safetensors" $dev 2>&1) ||
    { echo "$out"; fail "arch $s: run --input/--output $B"; }
  nrow=$(echo "$out" | grep -c "^$B .*\(ok\|(ref)\) *$")
  python3 - "$T/arch-out.safetensors" "$B" "$nrow" <<'EOF' || { echo "$out"; fail "arch $s: --output of $B"; }
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
rows = [k for k in h if k.startswith(sys.argv[2] + "@")]
assert rows and len(rows) == int(sys.argv[3]), (rows, sys.argv[3])
assert all(h[k]["shape"] == [4, 128] and h[k]["dtype"] == "BF16" for k in rows), h
EOF
  na=$((na + 1))
done
[ $na -eq 9 ] || fail "$na architecture exports run (9 expected)"
echo "ok: $na architecture exports inspected and run, MoE blocks through --output"

# --dtype overrides the model's; a bad one is a usage error
M="$X/bf16/fp8"
out=$("$Q" run "$M" --device cpu --dtype float16 --layer model.layers.0.mlp.down_proj 2>&1) || { echo "$out"; fail "--dtype float16"; }
echo "$out" | grep -q "dtype float16 (--dtype)" || { echo "$out"; fail "--dtype not used"; }
"$Q" run "$M" --dtype int8 >/dev/null 2>&1; [ $? -eq 2 ] || fail "--dtype int8 must be a usage error"

# --input: M from the tensor's rows, errors name the tensor and both shapes
L=model.layers.0.mlp.down_proj
mk() { # FILE NAME DTYPE ROWS COLS: a safetensors file with one tensor of zeros... and ones
  python3 - "$@" <<'EOF'
import json, struct, sys
f, name, dt, r, c = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
es = {"F16": 2, "BF16": 2, "F32": 4, "I8": 1}[dt]
one = {"F16": b"\x00\x3c", "BF16": b"\x80\x3f", "F32": struct.pack("<f", 1.0), "I8": b"\x01"}[dt]
data = b"".join(one if (i % 3) else b"\x00" * es for i in range(r * c))
h = json.dumps({name: {"dtype": dt, "shape": [r, c], "data_offsets": [0, len(data)]}}).encode()
h += b" " * (-len(h) % 8)
open(f, "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
}
mk "$T/in5.safetensors" $L BF16 5 256
out=$("$Q" run "$M" --layer $L --input "$T/in5.safetensors" --output "$T/out.safetensors" 2>&1) || { echo "$out"; fail "--input 5 rows"; }
python3 - "$T/out.safetensors" <<'EOF' || fail "--output must hold 5 rows"
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
shapes = [v["shape"] for k, v in h.items() if k != "__metadata__"]
assert shapes and all(s == [5, 128] for s in shapes), shapes
EOF
mk "$T/in5f.safetensors" $L F32 5 256
"$Q" run "$M" --layer $L --input "$T/in5f.safetensors" --device cpu >/dev/null 2>&1 || fail "--input f32"
out=$("$Q" run "$M" --layer $L --input "$T/in5.safetensors" --tokens 4 2>&1) && fail "--tokens 4 with 5 input rows must fail"
echo "$out" | grep -q "input tensor '$L' is \[5, 256\] but --tokens is 4" || { echo "$out"; fail "--tokens mismatch message"; }
mk "$T/k.safetensors" $L BF16 2 128
out=$("$Q" run "$M" --layer $L --input "$T/k.safetensors" 2>&1) && fail "wrong K must fail"
echo "$out" | grep -q "input tensor '$L' is bf16 \[2, 128\]; the layer takes bf16 or f32 \[M, 256\]" || { echo "$out"; fail "K message"; }
mk "$T/dt.safetensors" $L F16 2 256
out=$("$Q" run "$M" --layer $L --input "$T/dt.safetensors" 2>&1) && fail "f16 input to a bf16 model must fail"
echo "$out" | grep -q "input tensor '$L' is f16 \[2, 256\]; the layer takes bf16 or f32" || { echo "$out"; fail "dtype message"; }
out=$("$Q" run "$M" --layer model.layers.1.mlp.down_proj --input "$T/in5.safetensors" 2>&1) && fail "missing input tensor must fail"
echo "$out" | grep -q "no input tensor 'model.layers.1.mlp.down_proj' in" || { echo "$out"; fail "missing tensor message"; }
echo "ok: --dtype, --input rows, and its errors"

# qport quantize writes what Quark writes
"$Q" demo-model "$T/fp16" --layers 1 >/dev/null || fail "demo-model"
hdr() { python3 -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
for k in sorted(h):
    if k != "__metadata__": print(k, h[k]["dtype"], h[k]["shape"])' "$1"; }
"$Q" quantize "$T/fp16" "$T/fp8" --scheme fp8-static --kv-cache >/dev/null || fail "quantize fp8-static"
h=$(hdr "$T/fp8/model.safetensors")
echo "$h" | grep -q "k_proj.weight_scale F16 \[\]" || { echo "$h"; fail "fp8 weight_scale: 0-d f16 as Quark"; }
echo "$h" | grep -q "k_proj.input_scale F16 \[\]" || { echo "$h"; fail "fp8 input_scale: 0-d f16 as Quark"; }
echo "$h" | grep -q "k_proj.output_scale F16 \[\]" || { echo "$h"; fail "KV output_scale: 0-d f16 as Quark"; }
"$Q" quantize "$T/fp16" "$T/w4" --scheme w4a16-int4 >/dev/null || fail "quantize w4a16-int4"
h=$(hdr "$T/w4/model.safetensors")
echo "$h" | grep -q "k_proj.weight_zero_point I32" || { echo "$h"; fail "symmetric int4: Quark's zero weight_zero_point"; }
for s in fp8-static w4a16-int4; do
  d=$([ $s = fp8-static ] && echo fp8 || echo w4)
  out=$("$Q" run "$T/$d" --tokens 2 2>&1) || { echo "$out"; fail "run $s (Quark layout)"; }
done
echo "ok: qport quantize writes Quark's scale dtypes and zero points, and they run"
