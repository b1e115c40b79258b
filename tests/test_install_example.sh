#!/bin/sh
# Installs to a temporary prefix and builds examples/resolve_layer.c,
# examples/run_layer.c and examples/run_moe.c with pkg-config only, then runs them against the
# installed shared library (and the plugins installed beside it).
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
echo "install-and-example: ok"
