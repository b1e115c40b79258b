#!/bin/sh
# qport bench: argument errors (exit 2, a message naming the
# problem), the tiny mode on the cpu reference and on every device of this
# build, SKIP rows with reasons, and the baseline/ratio plumbing on two fake
# GPUs (tests/bench_plugins: one with synthetic timers and vendor GEMMs, one
# without any timer). The JSON is validated; timing values never are.
#   test_bench_cli.sh QPORT FAKE_TIMED_DIR FAKE_NOTIMER_DIR
set -u
Q="$1"; TIMED="$2"; NOTIMER="$3"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

# ---- bad arguments: exit 2 and a message ------------------------------------
bad() { # expected-message-substring, args...
  want="$1"; shift
  "$Q" bench "$@" > "$T/out" 2> "$T/err"; rc=$?
  check "exit 2 for: bench $* (rc=$rc)" '[ $rc -eq 2 ]'
  check "message for: bench $* says '$want'" 'grep -q -- "$want" "$T/err"'
}
bad "--shapes must be decode, prefill, all or tiny" --shapes huge
bad "--reps must be a whole number" --reps 0
bad "--reps must be a whole number" --reps 3x
bad "--reps needs a value" --reps
bad "unknown scheme 'nope'" --scheme nope
bad "no device matches 'nosuchdevice'" --device nosuchdevice --shapes tiny
bad "unknown argument '--bogus'" --bogus
bad "--size must be KxN" --size 4096
bad "--max-seconds must be a number > 0" --max-seconds -1
bad "--jobs must be a whole number" --jobs 0
bad "--warmup must be a whole number" --warmup -2
bad "--rotate-mib must be a whole number" --rotate-mib lots
bad "--shapes tiny has its own size" --shapes tiny --size 64x64
bad "cannot write $T/no/such/dir/b.json" --device cpu --shapes tiny --json "$T/no/such/dir/b.json"
"$Q" bench --list > "$T/list"; rc=$?
check "--list (rc=$rc)" '[ $rc -eq 0 ] && grep -q "^fp16" "$T/list" && grep -q "^qqq$" "$T/list" && grep -q "^int8-dyn-sym$" "$T/list"'
"$Q" help | grep -qE "^ +bench( |$)"
check "qport help lists bench (scripts/gpu-check looks for it)" '[ $? -eq 0 ]'

# ---- the JSON validator ------------------------------------------------------
cat > "$T/v.py" <<'PY'
import json, math, sys
path, mode = sys.argv[1], sys.argv[2]
d = json.load(open(path))
errs = []
def need(c, msg):
    if not c: errs.append(msg)
def num(v): return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
def opt(v): return v is None or num(v)
for k in ("qport_version", "shapes", "reps", "warmup", "devices", "cases", "summary", "vendor_baselines"):
    need(k in d, "top-level key %s" % k)
devs = {x["device"]: x for x in d["devices"]}
for dv in d["devices"]:
    need(isinstance(dv.get("representative"), bool), "device representative flag")
    if not dv["representative"]:
        need("not representative of GPUs" in (dv.get("note") or ""), "%s: CPU-class caveat" % dv["device"])
    cl = dv.get("copy_limit", {})
    need(("GBps" in cl and num(cl["GBps"]) and "median_ms" in cl and "spread" in cl) or cl.get("skip"),
         "%s: copy limit measured or skipped with a reason" % dv["device"])
ok = skip = 0
seen = set()
for c in d["cases"]:
    for k in ("device", "scheme", "N", "K", "M", "phase", "verdict"):
        need(k in c, "case key %s in %s" % (k, c))
    need(c["device"] in devs, "case device listed")
    need(c["phase"] == ("decode" if c["M"] <= 16 else "prefill"), "phase of M=%d" % c["M"])
    seen.add((c["device"], c["scheme"], c["M"]))
    if c["verdict"] == "OK":
        ok += 1
        need(num(c.get("median_ms")) and c["median_ms"] >= 0, "median of %s" % c["scheme"])
        sp = c.get("spread", {})
        for k in ("min_ms", "max_ms", "p10_ms", "p90_ms"):
            need(num(sp.get(k)), "spread %s of %s M=%d" % (k, c["scheme"], c["M"]))
        need(sp.get("min_ms", 0) <= c["median_ms"] <= sp.get("max_ms", 0), "median inside the spread")
        r = c.get("ratios")
        need(isinstance(r, dict), "ratios of %s" % c["scheme"])
        for k in ("bandwidth", "arithmetic", "speedup_vs_fp16", "speedup_vs_vendor_fp16", "arithmetic_limit"):
            need(k in r, "ratio %s of %s" % (k, c["scheme"]))
            if k != "arithmetic_limit": need(opt(r.get(k)), "ratio %s is a number or null" % k)
        need(num(c.get("GBps")) and num(c.get("TFLOPs")), "rates of %s" % c["scheme"])
        need(c.get("judged_on") == ("bandwidth" if c["M"] <= 16 else "arithmetic"), "judged_on of M=%d" % c["M"])
        need(opt(c.get("efficiency")), "efficiency")
        need(c.get("representative") == devs[c["device"]]["representative"], "case representative flag")
        for k in ("weights", "activations", "outputs"):
            need(num(c.get("bytes", {}).get(k)), "bytes.%s" % k)
        need(c.get("reps", 0) >= 1 and c.get("layer_copies", 0) >= 1, "reps and copies")
        need("gemm_only" in c and "baselines" in c and "fp16_layer_ms" in c["baselines"], "gemm_only and baselines")
    elif c["verdict"] == "SKIP":
        skip += 1
        need(isinstance(c.get("reason"), str) and len(c["reason"]) > 5, "SKIP row has a reason: %s" % c)
    else:
        errs.append("verdict %s: %s" % (c["verdict"], c.get("reason")))
need(d["summary"]["ok"] == ok and d["summary"]["skip"] == skip and d["summary"]["fail"] == 0, "summary counts")
bys = {(b["device"], b["scheme"]): b for b in d.get("by_scheme", [])}
for (dv, sc) in {(c["device"], c["scheme"]) for c in d["cases"] if c["verdict"] == "OK"}:
    b = bys.get((dv, sc))
    need(b is not None, "by_scheme entry for %s %s" % (dv, sc))
    if b:
        for ph in ("decode", "prefill"):
            need(opt(b[ph]["geomean_speedup_vs_fp16"]) and opt(b[ph]["geomean_efficiency"]), "by_scheme %s figures" % ph)

def cases(**kw): return [c for c in d["cases"] if all(c.get(k) == v for k, v in kw.items())]
if mode == "cpu-all":
    import subprocess
    need(len(devs) == 1 and "cpu:0" in devs and not devs["cpu:0"]["representative"], "cpu device only")
    schemes = [s for s in sys.argv[3].split(",")]
    for s in schemes:
        for m in (1, 4, 32):
            need(("cpu:0", s, m) in seen, "case %s M=%d present" % (s, m))
    need(ok == len(schemes) * 3 and skip == 0, "every cpu case measured (%d ok, %d skip)" % (ok, skip))
    for c in cases(scheme="fp16"):
        need(abs(c["ratios"]["speedup_vs_fp16"] - 1) < 1e-9, "fp16 speedup over itself is 1")
        need(c["ratios"]["arithmetic_limit"] == "fp16 layer, same backend", "arithmetic limit named")
    need(any(c["scheme"] == "qqq" for c in d["cases"]), "qqq present")
elif mode == "cpu-skip":
    sk = [c for c in d["cases"] if c["verdict"] == "SKIP"]
    need(len(sk) >= 1 and all("--max-seconds" in c["reason"] for c in sk), "SKIP rows name --max-seconds")
    need(any("one run only" in (c.get("note") or "") for c in d["cases"] if c["verdict"] == "OK"), "one-run note")
elif mode == "devices":
    pass
elif mode == "fake-timed":
    need(devs.get("cuda:0", {}).get("representative") is True, "fake GPU is representative")
    need(num(devs["cuda:0"]["copy_limit"].get("GBps")), "copy limit on the fake GPU")
    need(d["vendor_baselines"][0]["available"] is True, "vendor baselines found")
    for c in cases(scheme="nvfp4"):
        need(c["verdict"] == "SKIP" and "not yet implemented on the fake GPU" in c["reason"], "nvfp4 skipped with the reason")
    for c in cases(verdict="OK"):
        v = {x["dtype"]: x for x in c["baselines"]["vendor"]}
        need(v.get("f16", {}).get("name") == "fake BLAS fp16 TN" and num(v["f16"]["median_ms"]), "vendor fp16 baseline")
        need(v.get("int8", {}).get("name") == "fake BLAS int8 TN", "vendor int8 baseline")
        need("unavailable" in v.get("fp8_e4m3fn", {}).get("name", "") and v["fp8_e4m3fn"]["median_ms"] is None, "fp8 unavailable, said")
        need(num(c["ratios"]["speedup_vs_vendor_fp16"]), "speedup over the vendor fp16 GEMM")
        need(num(c["ratios"]["bandwidth"]) and num(c["ratios"]["arithmetic"]), "both ratios on the fake GPU")
        need((c["gemm_only"] is None) == (c["M"] <= 16), "gemm-only time absent exactly where fused")
        need(c["path"] == ("fake gemv" if c["M"] <= 16 else "fake tiled"), "path described")
        need(c["layer_copies"] >= 1 and c["io_buffers"] >= 2, "rotation recorded")
    for c in cases(scheme="int8-dyn-sym", verdict="OK"):
        need(c["ratios"]["arithmetic_limit"] == "fake BLAS int8 TN", "int8 judged against the int8 vendor GEMM: %s" % c["ratios"]["arithmetic_limit"])
    for c in cases(scheme="fp8-dyn-token", verdict="OK"):
        need(c["ratios"]["arithmetic_limit"] == "fake BLAS fp16 TN", "fp8 without a vendor fp8 GEMM: the fp16 one")
    need(ok == 9 and skip == 3, "fake: 9 measured, 3 skipped (%d, %d)" % (ok, skip))
elif mode == "fake-notimer":
    need(ok == 0 and skip == 6, "every case skipped (%d ok, %d skip)" % (ok, skip))
    need(all("linear_time" in c["reason"] for c in d["cases"]), "SKIP reason names linear_time")
    need("buffer_copy_time" in devs["cuda:0"]["copy_limit"].get("skip", ""), "copy limit skipped with the reason")
    need("linear_time" in devs["cuda:0"].get("timer", ""), "device timer note")
    need(d["vendor_baselines"][0]["available"] is False, "no vendor baselines")
for e in errs: print("  json:", e)
sys.exit(1 if errs else 0)
PY
validate() { python3 "$T/v.py" "$@" > "$T/verr" 2>&1; r=$?; cat "$T/verr"; return $r; }

# ---- the cpu reference, every scheme ----------------------------------------
ALL=fp16,$("$Q" bench --list | grep -v "^fp16" | paste -sd, -)
"$Q" bench --device cpu --shapes tiny --reps 3 --max-seconds 120 --json "$T/cpu.json" > "$T/cpu.txt" 2>&1; rc=$?
tail -n 4 "$T/cpu.txt"
check "cpu tiny run (rc=$rc)" '[ $rc -eq 0 ]'
check "cpu JSON: every scheme and M measured, with median, spread, ratios" 'validate "$T/cpu.json" cpu-all "$ALL"'
check "cpu text carries the caveat" 'grep -q "NOT REPRESENTATIVE OF GPUS" "$T/cpu.txt" && grep -q "not representative of GPUs" "$T/cpu.txt"'
check "cpu text names the missing vendor baseline" 'grep -q "no vendor GEMM baselines: the cpu backend has no vendor GEMM library baseline" "$T/cpu.txt"'

# ---- SKIP rows from the per-case time cap -----------------------------------
"$Q" bench --device cpu --shapes tiny --scheme int8-dyn-sym --max-seconds 0.000001 --json "$T/skip.json" > "$T/skip.txt" 2>&1; rc=$?
check "cpu run under a tiny --max-seconds (rc=$rc)" '[ $rc -eq 0 ]'
check "SKIP rows with reasons" 'validate "$T/skip.json" cpu-skip'

# ---- every device of this build (plugins from QPORT_BACKEND_PATH) ------------
"$Q" bench --shapes tiny --reps 3 --scheme int8-dyn-sym --scheme fp8-dyn-token --scheme qqq --scheme w4a16-int4 \
  --scheme mxfp4 --json "$T/dev.json" > "$T/dev.txt" 2>&1; rc=$?
grep "^device\|^  \|^bench" "$T/dev.txt"
check "every device, tiny (rc=$rc)" '[ $rc -eq 0 ]'
check "devices JSON valid" 'validate "$T/dev.json" devices'

# ---- fake GPUs: baselines and ratios; no timers at all -------------------------
QPORT_BACKEND_PATH="$TIMED" "$Q" bench --shapes tiny --scheme int8-dyn-sym --scheme fp8-dyn-token --scheme nvfp4 \
  --json "$T/fake.json" > "$T/fake.txt" 2>&1; rc=$?
check "fake timed GPU (rc=$rc)" '[ $rc -eq 0 ]'
check "fake timed GPU: vendor baselines, limits, SKIP of a refused scheme" 'validate "$T/fake.json" fake-timed'
check "fake GPU figures are not marked CPU-class" '! grep -q "NOT REPRESENTATIVE" "$T/fake.txt"'
QPORT_BACKEND_PATH="$NOTIMER" "$Q" bench --shapes tiny --scheme int8-dyn-sym --json "$T/nt.json" > "$T/nt.txt" 2>&1; rc=$?
check "fake GPU without timers: no crash, exit 0 (rc=$rc)" '[ $rc -eq 0 ]'
check "fake GPU without timers: SKIP rows say why" 'validate "$T/nt.json" fake-notimer'
# ---- the fused MoE: every device, one scheme, decode; fp16 the basis ------------
"$Q" bench --moe --scheme int8-dyn-sym --shapes decode --reps 1 > "$T/moe.txt" 2>&1; rc=$?
check "bench --moe (rc=$rc)" '[ $rc -eq 0 ]'
check "bench --moe: fp16 rows are the basis (x fp16 = 1.00)" 'grep -Eq "^unquantized +vulkan:0 +1 .* 1\.00$" "$T/moe.txt"'
check "bench --moe: int8 rows on every GPU device with a ratio" \
  '[ $(grep -Ec "^int8-dyn-sym +(vulkan|opencl):0 +(1|8|16) .*[0-9]\.[0-9][0-9]$" "$T/moe.txt") -eq 6 ]'
"$Q" bench --moe --moe-model gpt5 > /dev/null 2>&1; rc=$?
check "bench --moe: an unknown model is a usage error" '[ $rc -eq 2 ]'
# ---- the chain: one wait per chain vs one per layer ------------------
"$Q" bench --chain 4 --size 256x256 --reps 2 > "$T/chain.txt" 2>&1; rc=$?
check "bench --chain (rc=$rc)" '[ $rc -eq 0 ]'
check "bench --chain: both ratios for M = 1, 4, 16 on every device" \
  '[ $(grep -Ec "^(cpu|vulkan|opencl):0 +(1|4|16) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$T/chain.txt") -ge 3 ]'
"$Q" bench --chain 4 --size 256x512 > /dev/null 2>&1; rc=$?
check "bench --chain: K != N is a usage error" '[ $rc -eq 2 ]'
[ $fail -ne 0 ] && { echo "--- chain.txt"; cat "$T/chain.txt"; }
[ $fail -ne 0 ] && { echo "--- moe.txt"; cat "$T/moe.txt"; }
[ $fail -ne 0 ] && { echo "--- cpu.txt"; cat "$T/cpu.txt"; echo "--- fake.txt"; cat "$T/fake.txt"; echo "--- nt.txt"; cat "$T/nt.txt"; }
exit $fail
