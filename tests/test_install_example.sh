#!/bin/sh
# Installs to a temporary prefix and builds examples/resolve_layer.c,
# examples/run_layer.c and examples/run_moe.c with pkg-config only, then runs them against the
# installed shared library (and the plugins installed beside it).
# Then the README's "From C" section to the letter (as root, where unshare
# works): in a private mount namespace where /usr/local is a copy-on-write
# overlay of the real one, and so are /etc (the loader cache) and
# /var/cache/ldconfig (writes go to a temporary folder), a clean environment (env -i, no PKG_CONFIG_PATH or
# LD_LIBRARY_PATH) runs `meson install -C build && ldconfig`, saves the
# README's C block as example.c, `cc example.c $(pkg-config --cflags --libs
# qport)` and `./a.out`, and checks the output the README promises.
set -eu
SRC="$1"; BUILD="$2"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
DESTDIR="$T/dest" meson install -C "$BUILD" --quiet >/dev/null
PREFIX=$(meson introspect "$BUILD" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
ROOT="$T/dest$PREFIX"
PCDIR=$(dirname "$(find "$ROOT" -name qport.pc | head -n1)")
export PKG_CONFIG_SYSROOT_DIR="$T/dest"
export PKG_CONFIG_PATH="$PCDIR"
cc -std=c11 -Wall -Wextra -Werror -o "$T/resolve_layer" "$SRC/examples/resolve_layer.c" $(pkg-config --cflags --libs qport)
LIBDIR=$(dirname "$(find "$ROOT" -name 'libqport.so.0' | head -n1)")
# only qp_* symbols are exported
bad=$(nm -D --defined-only "$LIBDIR/libqport.so.0" | awk '$2 ~ /[TDBR]/ {print $3}' | grep -v '^qp_' || true)
if [ -n "$bad" ]; then echo "FAIL: non-qp_ exports: $bad"; exit 1; fi
out=$(LD_LIBRARY_PATH="$LIBDIR" "$T/resolve_layer" "$SRC/tests/configs/quark-online-preset-fp8_ptpc.json" model.layers.0.mlp.down_proj)
echo "$out"
echo "$out" | grep -q "QuarkW8A8Fp8" || { echo "FAIL: example output"; exit 1; }
# the device layer from a native app: the installed plugins are found next
# to the installed library (<libdir>/qport), without QPORT_BACKEND_PATH
cc -std=c11 -Wall -Wextra -Werror -o "$T/run_layer" "$SRC/examples/run_layer.c" $(pkg-config --cflags --libs qport) -lm
out=$(env -u QPORT_BACKEND_PATH LD_LIBRARY_PATH="$LIBDIR" QPORT_LOG=info "$T/run_layer" "$SRC/tests/configs/quark-online-preset-fp8_ptpc.json" model.layers.0.mlp.down_proj 2>&1) ||
  { echo "$out"; echo "FAIL: run_layer"; exit 1; }
echo "$out"
echo "$out" | grep -q "max |device - reference|" || { echo "FAIL: run_layer output"; exit 1; }
# an MoE block of a real Quark export (a tiny Mixtral, fp8 experts)
cc -std=c11 -Wall -Wextra -Werror -o "$T/run_moe" "$SRC/examples/run_moe.c" $(pkg-config --cflags --libs qport)
out=$(LD_LIBRARY_PATH="$LIBDIR" "$T/run_moe" "$SRC/tests/quark_exports/moe-fp16/fp8" 2>&1) || { echo "$out"; echo "FAIL: run_moe"; exit 1; }
echo "$out"
echo "$out" | grep -q "QuarkW8A8Fp8MoEMethod, 4 experts, top-2" || { echo "FAIL: run_moe output"; exit 1; }
n=$(ls "$LIBDIR/qport" 2>/dev/null | grep -c 'libqport-' || true)
echo "installed plugins: $n"
# -- the README to the letter --------------------------------------------
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "install-and-example: ok (the README's literal install was not run: it needs root and unshare -m)"
  exit 0
fi
L="$T/literal"; mkdir -p "$L/work/tests/configs"
# the README's C block (the first ```c after "## From C") and what it prints
awk '/^## From C/ {c = 1} c && /^```c$/ {p = 1; next} p && /^```$/ {exit} p' "$SRC/README.md" > "$L/work/example.c"
want=$(sed -n 's/^It prints `\(w8a8-int8: [^`]*\)`.*/\1/p' "$SRC/README.md")
[ -s "$L/work/example.c" ] && [ -n "$want" ] || { echo "FAIL: no C example or promised output in README.md"; exit 1; }
cp "$SRC/tests/configs/llama-w8a8-int8-kv.json" "$L/work/tests/configs/"
BUILD_ABS=$(cd "$BUILD" && pwd)
mkdir -p "$L/upper" "$L/ovwork"
if ! unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$1/upper,workdir=$1/ovwork" /usr/local' sh "$L" 2>/dev/null; then
  echo "install-and-example: ok (the README's literal install was not run: no overlay mount in a namespace here)"
  exit 0
fi
rm -rf "$L/upper" "$L/ovwork"
out=$(unshare -m sh -c '
  set -e
  # copy-on-write overlays: what install and ldconfig write stays in $1
  for d in /usr/local /etc /var/cache/ldconfig; do
    [ -d "$d" ] || continue
    n=$(echo "$d" | tr / _); mkdir -p "$1/up$n" "$1/wk$n"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$1/up$n,workdir=$1/wk$n" "$d"
  done
  cd "$1/work"
  exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$1" sh -c "
    set -e
    meson install -C \"$2\" --quiet >/dev/null
    ldconfig
    cc example.c \$(pkg-config --cflags --libs qport)
    ./a.out"' sh "$L" "$BUILD_ABS" 2>&1) || { echo "$out"; echo "FAIL: the README's install, cc and ./a.out in a clean environment"; exit 1; }
echo "README, From C, to the letter: $out"
[ "$out" = "$want" ] || { echo "FAIL: ./a.out printed '$out', the README promises '$want'"; exit 1; }
echo "install-and-example: ok"
