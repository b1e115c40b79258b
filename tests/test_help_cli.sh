#!/bin/sh
# Help: `qport CMD --help` and `qport help CMD` explain every
# argument and option of every subcommand; `qport --help` lists them all.
# Each command's options are the list below plus every "--option" string in
# its source (tools/cmd_<command>.c), so an option added there without help
# fails here.
# args: QPORT SOURCE_ROOT
set -u
Q="$1"; SRC="$2"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

opts() {
  case $1 in
    inspect) echo CONFIG --layer linear attention moe --packed --capability --dialect vllm sglang --json ;;
    devices) echo --json QPORT_BACKEND_PATH ;;
    conform) echo --device --scheme --quick --full --seed --moe --no-moe --json --csv --verbose --list ;;
    bench) echo --device --scheme --shapes decode prefill all tiny --size --reps --warmup --max-seconds \
                --rotate-mib --jobs --seed --json --list --moe --moe-model tiny mixtral-8x7b deepseek-v3 --tp-size --ep-size ;;
    bench-resolve) echo CONFIG --synthetic --layers ;;
    demo-model) echo OUT_DIR --hidden --intermediate --layers --seed --force ;;
    quantize) echo IN_DIR OUT_DIR --scheme --group-size --kv-cache ;;
    run) echo MODEL_DIR --layer --device --tokens --seed --input --output --tp-size --tp-rank --dtype \
              auto float16 bfloat16 float32 --comm mpi nccl --reps ;;
  esac
}

list=$("$Q" --help) || bad "qport --help exits non-zero"
for c in inspect devices conform bench bench-resolve demo-model quantize run; do
  echo "$list" | grep -Eq "^ +$c " || bad "qport --help does not list $c"
  h=$("$Q" "$c" --help) || bad "qport $c --help exits non-zero"
  h2=$("$Q" help "$c") || bad "qport help $c exits non-zero"
  [ "$h" = "$h2" ] || bad "qport $c --help and qport help $c differ"
  echo "$h" | grep -q "^usage: qport $c" || bad "qport $c --help has no usage line"
  src="$SRC/tools/cmd_$(echo "$c" | tr - _).c"
  [ -f "$src" ] || bad "no $src"
  from_src=$(grep -o '"--[a-z0-9-]*"' "$src" | tr -d '"' | grep -vx -- "--help" | sort -u)
  n=0
  for o in $(opts "$c") $from_src; do
    n=$((n + 1))
    echo "$h" | grep -Eq -- "(^|[^A-Za-z_-])$o([^A-Za-z_-]|$)" || bad "qport $c --help does not mention $o"
  done
  # the option is explained, not only listed in the usage line
  for o in $(opts "$c") $from_src; do
    case $o in --*) echo "$h" | sed '1,/^$/d' | grep -Eq -- "(^|[^A-Za-z_-])$o([^A-Za-z_-]|$)" ||
                    bad "qport $c --help lists $o but does not explain it";; esac
  done
  echo "ok: $c: $n options and arguments in its help"
done
"$Q" help nope >/dev/null 2>&1; [ $? -eq 2 ] || bad "qport help nope should exit 2"
"$Q" 2>/dev/null; [ $? -eq 2 ] || bad "qport without a command should exit 2"
# a usage error points at the help
"$Q" devices --bogus 2>&1 | grep -q "qport help devices" || bad "a usage error does not point at qport help"
[ $fail -eq 0 ] && echo "ok: every subcommand's help explains every option"
exit $fail
