#!/bin/sh
# Corrupt checkpoints fail, never run: each case damages a copy
# of the MoE demo model (qport demo-model --experts 4, quantized to int8)
# and `qport run` must exit non-zero (not by a signal) naming the tensor,
# key or file. Plus the files that used to block or kill: FIFOs as
# config.json or shard, a truncated plugin, and SIGINT during quantize.
set -u
Q="$1"; D=$(dirname "$0")/damage_st.py; T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$Q" demo-model "$T/fp16" --experts 4 --topk 2 --layers 1 --hidden 64 --intermediate 64 >/dev/null || fail "demo-model"
"$Q" quantize "$T/fp16" "$T/good" --scheme int8-dyn-sym >/dev/null || fail "quantize"
out=$("$Q" run "$T/good" --device cpu:0 2>&1) || { echo "$out"; fail "the undamaged model must run"; }
# Each case: `new NAME PATTERN` then its damage (dmg: the safetensors
# file, cfg: config.json); one Python process then makes every damaged
# copy, and `qport run` must fail on each with PATTERN in its output.
i=0
SAN=${2:-}
full() { [ "$SAN" != --sanitized ]; } # the plain build runs every case, the sanitizer build one of each kind
new() { i=$((i + 1)); printf '%s\037%s\n' "$1" "$2" >> "$T/cases"; }
op() { printf '%s' "$i" >> "$T/spec"; for a in "$@"; do printf '\t%s' "$a" >> "$T/spec"; done; printf '\n' >> "$T/spec"; }
dmg() { op model.safetensors "$@"; }
cfg() { op config.json set "$@"; }
ST=model.safetensors
X=model.layers.0.mlp.experts
# experts: missing, extra, negative, huge, a stray projection or suffix
new "missing expert" "not initialized from checkpoint: {'$X.2.gate_proj.weight'"; dmg drop "experts\.2\."
full && { new "expert 3 missing" "'$X.3.gate_proj.weight'"; dmg drop "experts\.3\."; }
full && { new "missing down_proj" "'$X.1.down_proj.weight'"; dmg drop "experts\.1\.down_proj\.weight$"; }
new "extra expert 7" "$X.7.gate_proj.weight' is expert 7, but config.json's num_experts is 4"; dmg copy "experts\.0\." "experts.0." "experts.7."
new "expert -1" "'-1' is not an expert index"; dmg copy "experts\.0\." "experts.0." "experts.-1."
full && { new "expert 99999999999" "'99999999999' is not an expert index"; dmg copy "experts\.0\." "experts.0." "experts.99999999999."; }
full && { new "expert 01" "'01' is not an expert index"; dmg copy "experts\.1\." "experts.1." "experts.01."; }
new "stray projection" "$X.0.foo_proj.weight' is not one of expert 0's projections"; dmg copy "experts\.0\.up_proj\.weight$" "up_proj" "foo_proj"
new "expert bias" "$X.0.up_proj.bias' of expert 0"; dmg copy "experts\.0\.up_proj\.weight_scale$" "weight_scale" "bias"
# the router: missing, mis-shaped, with a bias
new "no router" "no router 'model.layers.0.mlp.gate.weight' in the checkpoint: .* \[4, 64\]"; dmg drop "mlp\.gate\.weight$"
new "router [3, 64]" "router 'model.layers.0.mlp.gate.weight' is f16 \[3, 64\]; expected a float tensor of \[4, 64\]"; dmg shape model.layers.0.mlp.gate.weight 3,64
full && { new "router 1-D" "router 'model.layers.0.mlp.gate.weight' is f16 \[256\]"; dmg shape model.layers.0.mlp.gate.weight 256; }
full && { new "router bias" "model.layers.0.mlp.gate.bias' of the router is not read"; dmg copy "mlp\.gate\.weight$" "weight" "bias"; }
# a linear layer whose weight is not 2-D, or gone with its scale left
O=model.layers.0.self_attn.o_proj
new "1-D weight" "$O.weight *unused: no layer binds this 1d int8 tensor (a linear layer's weight must be 2-D)"; dmg shape $O.weight 4096
full && { new "0-d weight" "$O.weight *unused: no layer binds this 0d int8 tensor"; dmg shape $O.weight ""; }
new "scale only" "$O.weight_scale *unused: no layer binds this"; dmg drop "o_proj\.weight$"
full && { new "1-D expert weight" "$X.1.up_proj"; dmg shape $X.1.up_proj.weight 4096; }
# config.json values of every JSON type, out of range, wrapping
set -f # the values below are words, never file patterns
if [ "${2:-}" = --sanitized ]; then # the sanitizer build: one value per JSON type
  V_TOPK='4294967299 "3" null [2]'; V_GROUP='4294967298 true'; V_TKG='0.5'; V_SCALE='1e308'; V_NORM='1'; V_SCORE='true'; V_NE='4.0'
else
  V_TOPK='4294967299 "3" 0 -1 2.5 null true 5 [2] {}'; V_GROUP='4294967298 "2" 0 3 1.5 true'; V_TKG='-1 "1" 0.5'
  V_SCALE='1e308 -1 0 "2.5" true [1]'; V_NORM='"true" 1 0 []'; V_SCORE='"sigmoids" 1 true'; V_NE='"4" 0 -4 4.0 99999999999 null'
fi
for v in $V_TOPK; do new "num_experts_per_tok $v" "num_experts_per_tok"; cfg num_experts_per_tok "$v"; done
new "no num_experts_per_tok" "no num_experts_per_tok"; cfg num_experts_per_tok '"DELETE"'
for v in $V_GROUP; do new "n_group $v" "n_group"; cfg n_group "$v"; done
new "topk_group > n_group" "topk_group 3 exceeds n_group 2"; cfg n_group 2; cfg topk_group 3
for v in $V_TKG; do new "topk_group $v" "topk_group"; cfg topk_group "$v"; done
for v in $V_SCALE; do new "routed_scaling_factor $v" "routed_scaling_factor"; cfg routed_scaling_factor "$v"; done
for v in $V_NORM; do new "norm_topk_prob $v" "norm_topk_prob must be true or false"; cfg norm_topk_prob "$v"; done
for v in $V_SCORE; do new "scoring_func $v" "scoring_func"; cfg scoring_func "$v"; done
for v in $V_NE; do new "num_experts $v" "num_experts"; cfg num_experts "$v"; done
full && { new "num_experts 3" "'$X.3.gate_proj.weight' is expert 3, but config.json's num_experts is 3"; cfg num_experts 3; }
new "num_experts 5" "not initialized from checkpoint: {'$X.4.gate_proj.weight'"; cfg num_experts 5
full && { new "num_local_experts disagrees" "num_local_experts is 8 but num_experts is 4"; cfg num_local_experts 8; }
full && { new "model_type 3" "model_type must be a string"; cfg model_type 3; }
full && { new "text_config 3" "text_config must be an object"; cfg text_config 3; }
new "no expert count" "gives no expert count"; cfg num_experts '"DELETE"'
set +f
python3 "$D" batch "$T/spec" "$T/good" "$T/cases.d" || fail "damaging the copies"
n=0
US=$(printf '\037')
while IFS="$US" read -r name pat; do
  n=$((n + 1))
  out=$(timeout 60 "$Q" run "$T/cases.d/$n" --device cpu:0 2>&1); rc=$?
  [ $rc -eq 1 ] || { echo "$out"; fail "$name: exit $rc, expected 1"; }
  echo "$out" | grep -q -- "$pat" || { echo "$out"; fail "$name: no '$pat' in the output"; }
done < "$T/cases"
[ $n -eq $i ] || fail "$n of $i cases run"
# files that are not regular: a FIFO as config.json or as the shard is
# refused at once (it used to block forever in open)
C="$T/f"; rm -rf "$C"; cp -r "$T/good" "$C"; rm "$C/config.json"; mkfifo "$C/config.json"
out=$(timeout 20 "$Q" run "$C" --device cpu:0 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "config.json.*not a regular file (a FIFO)" || { echo "$out"; fail "FIFO config.json: exit $rc"; }
C="$T/g"; rm -rf "$C"; cp -r "$T/good" "$C"; rm "$C/$ST"; mkfifo "$C/$ST"
out=$(timeout 20 "$Q" run "$C" --device cpu:0 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "$ST.*not a regular file (a FIFO)" || { echo "$out"; fail "FIFO shard: exit $rc"; }
out=$(timeout 20 "$Q" inspect "$T/f/config.json" 2>&1); [ $? -eq 2 ] || { echo "$out"; fail "inspect of a FIFO config"; }
C="$T/h"; rm -rf "$C"; cp -r "$T/good" "$C"; rm "$C/config.json"; mkdir "$C/config.json"
out=$(timeout 20 "$Q" run "$C" --device cpu:0 2>&1); [ $? -eq 1 ] && echo "$out" | grep -q "not a regular file (a directory)" || { echo "$out"; fail "directory config.json"; }
# a truncated plugin is that backend's status, never a SIGBUS; --device
# cpu:0 loads no plugin at all
P="$T/plugins"; mkdir "$P"
printf '\177ELF' > "$P/libqport-cl.so"
B=$(dirname "$Q")/..
for so in "$B/vk/libqport-vk.so" "$B/cuda/libqport-cuda.so"; do
  [ -f "$so" ] && head -c 65536 "$so" > "$P/$(basename "$so")"
done
out=$(QPORT_BACKEND_PATH="$P" timeout 60 "$Q" devices 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "$out"; fail "devices with truncated plugins: exit $rc"; }
echo "$out" | grep -q "opencl .*not loaded.*libqport-cl.so: not an ELF shared object (4 bytes; truncated or damaged)" || { echo "$out"; fail "truncated OpenCL plugin status"; }
if [ -f "$P/libqport-vk.so" ]; then
  echo "$out" | grep -q "vulkan .*not loaded.*libqport-vk.so: truncated: a segment ends at byte" || { echo "$out"; fail "truncated Vulkan plugin status"; }
fi
out=$(QPORT_BACKEND_PATH="$P" QPORT_LOG=info timeout 60 "$Q" run "$T/good" --device cpu:0 2>&1) || { echo "$out"; fail "run --device cpu:0 beside truncated plugins"; }
echo "$out" | grep -q "backend" && { echo "$out"; fail "--device cpu:0 must load no plugin"; }
out=$(QPORT_BACKEND_PATH="$P" timeout 60 "$Q" run "$T/good" 2>&1) || { echo "$out"; fail "run on every device beside truncated plugins"; }
# SIGINT/SIGTERM while the outputs are written (test-hook builds stop the
# process with its temporaries complete): nothing that looks like output
# is left, neither the temporaries nor the real names
stopped() { s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null); [ "$s" = T ] || [ "$s" = t ]; }
interrupt() { # SIG PID
  i=0
  while ! stopped "$2" && [ $i -lt 600 ]; do
    s=$(cut -d' ' -f3 "/proc/$2/stat" 2>/dev/null); [ -z "$s" ] || [ "$s" = Z ] && break  # ended: no hook
    sleep 0.05; i=$((i + 1))
  done
  stopped "$2" || return 1
  kill -"$1" "$2"; kill -CONT "$2"; wait "$2"; return 0
}
hooks=0
for sig in INT TERM; do
  O="$T/q$sig"
  QPORT_TEST_STOP_BEFORE_RENAME=1 "$Q" quantize "$T/fp16" "$O" --scheme int8-dyn-sym >/dev/null 2>&1 &
  pid=$!
  if interrupt $sig $pid; then
    hooks=1
    [ -e "$O" ] && { ls -la "$O"; fail "SIG$sig during quantize left $O"; }
    mkdir "$O"  # an existing folder is kept, and left without partial files
    QPORT_TEST_STOP_BEFORE_RENAME=1 "$Q" quantize "$T/fp16" "$O" --scheme int8-dyn-sym >/dev/null 2>&1 &
    pid=$!
    interrupt $sig $pid || fail "second quantize did not stop"
    [ -z "$(ls -A "$O")" ] || { ls -la "$O"; fail "SIG$sig during quantize left files in $O"; }
    J="$T/c$sig.json"
    QPORT_TEST_STOP_BEFORE_RENAME=1 "$Q" conform --quick --device cpu:0 --scheme int8-dyn-sym --no-moe --json "$J" --csv "$T/c$sig.csv" >/dev/null 2>&1 &
    pid=$!
    interrupt $sig $pid || fail "conform did not stop"
    [ -z "$(ls "$T" | grep "^c$sig\.")" ] || { ls -la "$T"; fail "SIG$sig during conform left its --json/--csv files"; }
  else
    wait $pid  # a build without -Dtest_hooks: the hook is off, the run completes
  fi
done
[ $hooks = 1 ] && echo "SIGINT/SIGTERM during quantize and conform --json/--csv left nothing"
echo "ok: $n damaged checkpoints refused, each naming its tensor or key; FIFOs and directories refused at once"
