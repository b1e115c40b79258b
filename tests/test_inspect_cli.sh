#!/bin/sh
# qport inspect: JSON keys, exit statuses, human summary.
set -u
Q="$1"; SRC="$2"; C="$SRC/tests/configs"
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi; }

out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" --json --capability 80 \
  --layer model.layers.0.self_attn.qkv_proj --layer model.layers.0.mlp.down_proj \
  --layer lm_head --layer model.layers.0.self_attn.attn:attention)
rc=$?
check "exit 1 when a layer errors (rc=$rc)" '[ $rc -eq 1 ]'
check "four lines" '[ $(printf "%s\n" "$out" | wc -l) -eq 4 ]'
check "int8 qkv" 'printf "%s\n" "$out" | grep -q "\"layer\":\"model.layers.0.self_attn.qkv_proj\",\"kind\":\"linear\",\"result\":\"ok\",\"method\":\"QuarkLinearMethod\",\"scheme\":\"QuarkW8A8Int8\""'
check "keys" 'printf "%s\n" "$out" | grep -q "\"weight_key\":\"kInt8StaticChannelSym\",\"activation_key\":\"kInt8DynamicTokenSym\",\"min_capability\":75"'
check "fp8 down_proj refused at cc 80" 'printf "%s\n" "$out" | grep -q "\"error_type\":\"RuntimeError\",\"error\":\"Quantization scheme is not supported for the current GPU. Min capability: 89. Current capability: 80.\""'
check "lm_head unquantized (ParallelLMHead)" 'printf "%s\n" "$out" | grep -q "\"layer\":\"lm_head\",\"kind\":\"linear\",\"result\":\"ok\",\"method\":\"UnquantizedEmbeddingMethod\",\"scheme\":null"'
check "kv cache" 'printf "%s\n" "$out" | grep "QuarkKVCacheMethod" | grep -q "\"kv_cache\":{\"dtype\":\"fp8_e4m3fn\""'
out=$("$Q" inspect "$C/qqq-exporter-derived-g128.quant.json")
check "qqq: 0.34.0 refuses it, resolved as 0.8.5" 'printf "%s\n" "$out" | grep -q "^note: .*Unknown quantization method: qqq. Must be one of \[...\]).*as vLLM 0.8.5 did"'
out=$("$Q" inspect "$C/qqq-exporter-derived-g128.quant.json" --json)
check "qqq note in the JSON" 'printf "%s\n" "$out" | grep -q "\"note\":\"vLLM 0.34.0 refuses this config"'
out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" --json)
check "no note for quark" 'printf "%s\n" "$out" | grep -q "\"note\":null}$"'

"$Q" inspect "$C/llama-w8a8-int8-kv.json" --json --layer model.layers.0.self_attn.qkv_proj >/dev/null
check "exit 0 when all resolve" '[ $? -eq 0 ]'
"$Q" inspect "$C/does-not-exist.json" 2>/dev/null; rc=$?
check "exit 2 for unreadable config (rc=$rc)" '[ $rc -eq 2 ]'
"$Q" inspect "$C/llama-w8a8-int8-kv.json" --capability abc 2>/dev/null; rc=$?
check "exit 2 for bad usage (rc=$rc)" '[ $rc -eq 2 ]'
"$Q" inspect "$C/llama-w8a8-int8-kv.json" --dialect tgi 2>/dev/null; rc=$?
check "exit 2 for bad dialect" '[ $rc -eq 2 ]'
"$Q" inspect 2>/dev/null; rc=$?
check "exit 2 without config" '[ $rc -eq 2 ]'
out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" --json --capability 8.9 --layer x.mlp.down_proj)
check "capability 8.9 form" 'printf "%s" "$out" | grep -q "\"scheme\":\"QuarkW8A8Fp8\""'
out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" --json --packed "wqkv=k_proj,q_proj" --layer m.wqkv)
check "--packed" 'printf "%s" "$out" | grep -q "\"result\":\"ok\""'
out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" --json --packed "wkv=k_proj,down_proj" --layer m.wkv)
check "--packed mismatch error" 'printf "%s" "$out" | grep -q "Found a different quantization configuration for \[.k_proj., .down_proj.\] in m.wkv"'

sum=$("$Q" inspect "$C/gh-amd-DeepSeek-V3.2-MXFP4-export.quant.json")
check "summary method" 'printf "%s" "$sum" | grep -q "quant_method: quark"'
check "summary global" 'printf "%s" "$sum" | grep -q "QuarkOCP_MX"'
check "summary excludes" 'printf "%s" "$sum" | grep -q "re:.\*self_attn.\*"'
# compressed-tensors, sglang dialect: NVFP4 W4A4 below sm_100 is SGLang's weight-only W4A16Fp4
out=$("$Q" inspect "$C/ct-nvfp4.json" --json --dialect sglang --capability 90 --layer model.layers.0.mlp.down_proj)
check "ct sglang nvfp4 at sm_90" 'printf "%s" "$out" | grep -q "\"method\":\"CompressedTensorsLinearMethod\",\"scheme\":\"CompressedTensorsW4A16Fp4\""'
out=$("$Q" inspect "$C/ct-nvfp4.json" --json --capability 90 --layer model.layers.0.mlp.down_proj)
check "ct vllm nvfp4 at sm_90" 'printf "%s" "$out" | grep -q "\"scheme\":\"CompressedTensorsW4A4Fp4\""'
# compressed-tensors: the class names, and the exact-sm_90 W4AFP8 branch
out=$("$Q" inspect "$C/ct-w4afp8.json" --json --capability 90 --layer model.layers.0.mlp.down_proj \
  --layer model.layers.0.mlp.experts:moe --layer lm_head)
check "ct W4A8Fp8 at sm_90" 'printf "%s\n" "$out" | grep -q "\"method\":\"CompressedTensorsLinearMethod\",\"scheme\":\"CompressedTensorsW4A8Fp8\",\"scheme_kind\":\"w4a8-fp8\""'
check "ct W4A8Fp8 experts" 'printf "%s\n" "$out" | grep -q "\"method\":\"CompressedTensorsW4A8Fp8MoEMethod\""'
check "ct lm_head ignored" 'printf "%s\n" "$out" | grep -q "\"layer\":\"lm_head\",\"kind\":\"linear\",\"result\":\"ok\",\"method\":\"UnquantizedEmbeddingMethod\""'
sum=$("$Q" inspect "$C/ct-mixed-ignore-kv.json")
check "ct summary targets" 'printf "%s" "$sum" | grep -q "pattern re:.\*mlp.*CompressedTensorsWNA16"'
check "ct summary ignore" 'printf "%s" "$sum" | grep -q "re:model\\\\.layers\\\\.1"'

# every shipped config resolves, except those vLLM itself refuses (no
# export key, ...): the summary prints the refusal and exits 1
for f in "$C"/*.json; do
  "$Q" inspect "$f" >/dev/null 2>&1; rc=$?
  case "$f" in
    *nvfp4-two-stage*) check "refused config $f exits 1 (rc=$rc)" '[ $rc -eq 1 ]' ;;
    # compressed-tensors exports vLLM refuses: act-order groups, W4AFP8
    # off sm_90
    *ct-w4a16-actorder-group*|*ct-w4afp8*) check "refused config $f exits 1 (rc=$rc)" '[ $rc -eq 1 ]' ;;
    *) check "summary of $f (rc=$rc)" '[ $rc -eq 0 ]' ;;
  esac
done
"$Q" inspect --json "$C/fixture-quarkparser-nvfp4-two-stage.quant.json" >/dev/null 2>&1; rc=$?
check "refused config exits 1 with --json too (rc=$rc)" '[ $rc -eq 1 ]'
# a real Quark export that vLLM refuses (int4_fp8: two weight specs)
X="$SRC/tests/quark_exports/fp16/int4_fp8/config.json"
out=$("$Q" inspect "$X" 2>&1); rc=$?
check "int4_fp8 export refused, exit 1 (rc=$rc)" '[ $rc -eq 1 ]'
check "int4_fp8 refusal names vLLM's error" 'printf "%s" "$out" | grep -q "NotImplementedError: Multi-entry weight or activation quantization configs are only supported for NVFP4"'
"$Q" inspect "$SRC/tests/quark_exports/bf16/fp8_kv/config.json" >/dev/null 2>&1; rc=$?
check "fp8_kv export resolves (rc=$rc)" '[ $rc -eq 0 ]'

# the architecture table: DeepSeek-V3 packs q_a_proj and kv_a_proj_with_mqa
# into fused_qkv_a_proj, so with both excluded it is unquantized (vLLM's
# UnquantizedLinearMethod); the router is built with quant_config=None
D="$C/deepseek-v3-fp8-config.json"
out=$("$Q" inspect "$D" --layer model.layers.0.self_attn.fused_qkv_a_proj --layer model.layers.1.self_attn.fused_qkv_a_proj \
      --layer model.layers.1.mlp.gate 2>&1); rc=$?
check "deepseek-v3 layers resolve (rc=$rc)" '[ $rc -eq 0 ]'
check "fused_qkv_a_proj of excluded parts: UnquantizedLinearMethod" 'printf "%s" "$out" | grep -q "^model.layers.0.self_attn.fused_qkv_a_proj (linear): UnquantizedLinearMethod$"'
check "fused_qkv_a_proj elsewhere: the global scheme" 'printf "%s" "$out" | grep -q "^model.layers.1.self_attn.fused_qkv_a_proj (linear): QuarkLinearMethod / QuarkW8A8Fp8"'
check "the DeepSeek router: UnquantizedLinearMethod" 'printf "%s" "$out" | grep -q "^model.layers.1.mlp.gate (linear): UnquantizedLinearMethod$"'
out=$("$Q" inspect "$D" 2>&1)
check "summary: architecture" 'printf "%s" "$out" | grep -q "^architecture: DeepseekV3ForCausalLM$"'
check "summary: packed modules" 'printf "%s" "$out" | grep -q "fused_qkv_a_proj=q_a_proj,kv_a_proj_with_mqa"'
check "summary: experts of the first MoE layer (first_k_dense_replace 1)" 'printf "%s" "$out" | grep -q "^experts: *(model.layers.1.mlp.experts) QuarkMoEMethod"'
check "summary: dead layer_type_quant_config reported" 'printf "%s" "$out" | grep -q "^layer types:  1 (Linear): never matched"'
out=$("$Q" inspect "$C/llama-w8a8-int8-kv.json" 2>&1)
check "a dense model has no experts line" '! printf "%s" "$out" | grep -q "^experts:"'
check "llama: architecture and packed" 'printf "%s" "$out" | grep -q "^architecture: LlamaForCausalLM$"'

# the bundled copies are the published configs, byte for byte, where ../shared is present
if [ -d "$SRC/../shared/configs" ]; then
  for f in "$SRC/../shared/configs"/*.json; do
    check "bundled copy of $(basename "$f")" 'cmp -s "$f" "$C/$(basename "$f")"'
  done
fi
exit $fail
