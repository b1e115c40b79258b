#!/bin/sh
# Parallel layers under `mpirun -n 2` (meson suite mpi): the demo
# models, dense and MoE, run across two ranks on different devices (cpu,
# lavapipe's vulkan:0, PoCL's opencl:0) for a scheme of each family and
# compared by rank 0 with the cpu reference; then the faults: a rank that
# fails to bind, ranks that bound different shapes or pass different token
# counts -- every rank reports the error and nobody hangs (each run is
# under `timeout`). Skips (77) without mpirun or libqport-mpi.so.
set -u
Q="$1"; T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
found=""
for d in $(echo "${QPORT_BACKEND_PATH:-}" | tr ':' ' '); do [ -f "$d/libqport-mpi.so" ] && found=1; done
[ -n "$found" ] || { echo "SKIP: libqport-mpi.so not built (no MPI at configure time)"; exit 77; }
# root in CI; two ranks on a two-core machine; no busy-waiting while a rank works;
# no cross-memory-attach copies (containers often forbid process_vm_readv)
MPI="mpirun -n 2 --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none"
run() { timeout 60 $MPI "$@" 2>&1; }
"$Q" demo-model "$T/fp16" --hidden 256 --intermediate 512 --layers 1 >/dev/null || fail "demo-model"
"$Q" demo-model "$T/fp16-small" --hidden 128 --intermediate 512 --layers 1 >/dev/null || fail "demo-model small"
"$Q" demo-model "$T/moe16" --experts 8 --topk 2 --layers 1 --hidden 128 --intermediate 128 >/dev/null || fail "demo-model --experts"
for s in int8-dyn-sym fp8-static w4a16-int4 mxfp4; do
  "$Q" quantize "$T/fp16" "$T/$s" --scheme "$s" >/dev/null || fail "quantize $s"
done
"$Q" quantize "$T/fp16-small" "$T/int8-small" --scheme int8-dyn-sym >/dev/null || fail "quantize small"
for s in int8-dyn-sym nvfp4; do "$Q" quantize "$T/moe16" "$T/moe-$s" --scheme "$s" >/dev/null || fail "quantize moe $s"; done
# unquantized: the fp16 weights with a config that excludes every layer
python3 - "$T/int8-dyn-sym/config.json" "$T/fp16/config.json" "$T/unq" <<'PY' || fail "unquantized config"
import json, os, shutil, sys
q = json.load(open(sys.argv[1]))["quantization_config"]
c = json.load(open(sys.argv[2]))
q["exclude"] = ["model.layers.0." + p for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
    "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
c["quantization_config"] = q
shutil.copytree(os.path.dirname(sys.argv[2]), sys.argv[3])
json.dump(c, open(os.path.join(sys.argv[3], "config.json"), "w"))
PY
L="--layer model.layers.0.self_attn.qkv_proj --layer model.layers.0.self_attn.o_proj --tokens 3"
# scheme, the two ranks' devices: every pair of cpu, vulkan:0, opencl:0 appears
for c in "int8-dyn-sym vulkan:0 opencl:0" "fp8-static opencl:0 cpu:0" "w4a16-int4 cpu:0 vulkan:0" "mxfp4 vulkan:0 opencl:0" \
         "unq opencl:0 vulkan:0"; do
  set -- $c
  # int8 also runs down_proj: its per-token scales come from each rank's
  # slice (vLLM's ranks do the same), which the run says instead of bounding
  X=""; n=2; [ "$1" = int8-dyn-sym ] && X="--layer model.layers.0.mlp.down_proj" && n=3
  out=$(run "$Q" run "$T/$1" --tp-size 2 --device "$2" --device "$3" $L $X) || { echo "$out"; fail "$1 on $2+$3"; }
  echo "$out" | grep -q "^parallel: mpi (.*), 2 ranks on $2+$3 (tp 2" || { echo "$out"; fail "$1: header"; }
  # int8: bit-exact on any device; float schemes: the device's own error
  z=" 0"; case $1 in int8*) ;; *) z="";; esac
  echo "$out" | grep -q "self_attn.qkv_proj .* $2+$3 .*col tp2 gather .*$z ok" || { echo "$out"; fail "$1: column-parallel"; }
  echo "$out" | grep -q "self_attn.o_proj .* $2+$3 .*row tp2 fp32 sum .* ok" || { echo "$out"; fail "$1: row-parallel"; }
  echo "$out" | grep -q "^$n ok, 0 failed" || { echo "$out"; fail "$1: summary"; }
  [ -z "$X" ] || echo "$out" | grep -q "down_proj: (rank-local act scales: not bounded)" || { echo "$out"; fail "rank-local scales note"; }
  [ "$(echo "$out" | grep -c '^parallel:')" = 1 ] || { echo "$out"; fail "$1: only rank 0 prints the table"; }
done
# MoE, expert parallel: int8 top-2 is bit-exact against one cpu device
out=$(run "$Q" run "$T/moe-int8-dyn-sym" --ep-size 2 --device vulkan:0 --device opencl:0 --tokens 5) || { echo "$out"; fail "moe int8"; }
echo "$out" | grep -q "mlp.experts .*moe w8a8-int8 .*vulkan:0+opencl:0 .*ep2 top-2 fp32 sum .* 0 ok" || { echo "$out"; fail "moe int8 row"; }
out=$(run "$Q" run "$T/moe-nvfp4" --ep-size 2 --device cpu --device vulkan:0 --tokens 4) || { echo "$out"; fail "moe nvfp4"; }
echo "$out" | grep -q "mlp.experts .*moe nvfp4 .*cpu:0+vulkan:0 .*ep2 .* ok" || { echo "$out"; fail "moe nvfp4 row"; }
# qport bench --tp-size: the same run timed, medians of --reps runs with the collectives' share
out=$(run "$Q" bench "$T/int8-dyn-sym" --tp-size 2 --device vulkan:0 --device opencl:0 --reps 3 $L) || { echo "$out"; fail "bench --tp-size"; }
echo "$out" | grep -q "ms and comm: medians of the timed runs" || { echo "$out"; fail "bench --tp-size: medians"; }
echo "$out" | grep -Eq "self_attn.o_proj .*row tp2 fp32 sum +[0-9.]+ +[0-9]+% .* ok" || { echo "$out"; fail "bench --tp-size: the comm share"; }
"$Q" bench "$T/int8-dyn-sym" --tp-size 2 --reps 3 >/dev/null 2>&1; [ $? -eq 2 ] || fail "bench --tp-size outside mpirun must be a usage error"
# faults (MPMD: each rank its own arguments). A rank that fails to bind:
python3 - "$T/int8-dyn-sym/model.safetensors" "$T/broken" <<'PY' || fail "broken model"
import json, os, shutil, struct, sys
d = sys.argv[2]; shutil.copytree(os.path.dirname(sys.argv[1]), d)
p = os.path.join(d, "model.safetensors"); b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); h["model.layers.0.self_attn.o_proj.weight_scalx"] = h.pop("model.layers.0.self_attn.o_proj.weight_scale")
j = json.dumps(h).encode(); j += b" " * (-len(j) % 8); open(p, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
MPMD="timeout 60 mpirun --oversubscribe --allow-run-as-root --mca mpi_yield_when_idle 1 --mca btl_vader_single_copy_mechanism none"
O="--tp-size 2 --device cpu --layer model.layers.0.self_attn.o_proj"
out=$($MPMD -n 1 "$Q" run "$T/int8-dyn-sym" $O : -n 1 "$Q" run "$T/broken" $O 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "$out"; fail "a rank that fails to bind must fail the job, not hang (rc $rc)"; }
for r in 0 1; do
  echo "$out" | grep -q "^rank $r: model.layers.0.self_attn.o_proj: error: rank 1: .*weight_scale" || { echo "$out"; fail "rank $r must report rank 1's bind error"; }
done
# ranks that bound different shapes
out=$($MPMD -n 1 "$Q" run "$T/int8-dyn-sym" $O : -n 1 "$Q" run "$T/int8-small" $O 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "$out"; fail "mismatched shapes (rc $rc)"; }
[ "$(echo "$out" | grep -c "error: .*ranks disagree: rank 0 bound .*shard N 256 x K 128), rank 1 .*shard N 128 x K 64)")" = 2 ] ||
  { echo "$out"; fail "both ranks must report the shape mismatch"; }
# ranks that pass different token counts
out=$($MPMD -n 1 "$Q" run "$T/int8-dyn-sym" $O --tokens 2 : -n 1 "$Q" run "$T/int8-dyn-sym" $O --tokens 3 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "$out"; fail "mismatched M (rc $rc)"; }
[ "$(echo "$out" | grep -c "ranks disagree on the rows: rank 0 has M = 2, rank 1 M = 3")" = 2 ] || { echo "$out"; fail "both ranks must report M"; }
# NCCL without a GPU (or without NCCL) says why
out=$(run "$Q" run "$T/int8-dyn-sym" --comm nccl --tp-size 2 --device cpu); [ $? -ne 0 ] || echo "note: NCCL is usable here"
echo "$out" | grep -q "no communicator: .*nccl" || echo "$out" | grep -q "^parallel: nccl" || { echo "$out"; fail "nccl: no reason"; }
echo "ok: two-rank MPI runs of dense (int8, fp8, w4a16, mxfp4, unquantized) and MoE (int8, nvfp4) layers on cpu, vulkan and opencl ranks match the cpu reference; bind, shape and token mismatches fail every rank"
