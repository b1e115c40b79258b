"""Resolution from Python equals `qport inspect --json` for every config
under tests/configs, layer kind and capability: the same method, scheme,
keys, formats, or the same exception class and vLLM message."""
from __future__ import annotations

import glob
import json
import os

import pytest

import qport
from conftest import CONFIGS, run_cli

# Layers every config is asked about: attention projections (fused and
# not), MLP, lm_head, the attention module (KV cache), MoE experts, and
# DeepSeek-style names the exporters' configs exclude or override.
LAYERS = [
    ("model.layers.0.self_attn.qkv_proj", "linear"),
    ("model.layers.0.self_attn.q_proj", "linear"),
    ("model.layers.0.self_attn.o_proj", "linear"),
    ("model.layers.0.mlp.gate_up_proj", "linear"),
    ("model.layers.0.mlp.down_proj", "linear"),
    ("model.layers.1.mlp.down_proj", "linear"),
    ("model.layers.3.self_attn.kv_a_proj_with_mqa", "linear"),
    ("model.layers.61.mlp.shared_experts.down_proj", "linear"),
    ("lm_head", "linear"),
    ("model.layers.0.self_attn", "attention"),
    ("model.layers.0.self_attn.attn", "attention"),
    ("model.layers.0.mlp.experts", "moe"),
    ("model.layers.3.mlp.experts", "moe"),
]
CAPABILITIES = [None, 75, 80, 89, 90, 100]
CONFIG_FILES = sorted(glob.glob(os.path.join(CONFIGS, "*.json")))


def python_result(cfg: qport.Config, layer: str, kind: str, cap) -> dict:
    try:
        s = cfg.resolve(layer, kind=kind, capability=cap)
    except qport.Error as e:
        vllm = {"QP_ERR_VALUE": ValueError, "QP_ERR_NOT_IMPLEMENTED": NotImplementedError,
                "QP_ERR_CAPABILITY": RuntimeError}.get(e.status)
        if vllm:
            assert isinstance(e, vllm)
        return {"result": "error", "error_type": vllm.__name__ if vllm else e.status, "error": e.message,
                "key_path": e.key_path or None}
    return {"result": "ok", **s.as_dict()}


def test_configs_found():
    assert len(CONFIG_FILES) >= 9, CONFIGS


@pytest.mark.parametrize("path", CONFIG_FILES, ids=os.path.basename)
def test_resolve_equals_cli(cli, path):
    cfg = qport.load_config(path)
    compared = 0
    for cap in CAPABILITIES:
        args = ["inspect", path, "--json"] + (["--capability", str(cap)] if cap is not None else [])
        for layer, kind in LAYERS:
            args += ["--layer", f"{layer}:{kind}"]
        r = run_cli(cli, *args)
        assert r.returncode in (0, 1), r.stderr
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(lines) == len(LAYERS)
        for (layer, kind), want in zip(LAYERS, lines):
            got = python_result(cfg, layer, kind, cap)
            for k, v in got.items():
                assert want.get(k) == v, f"{layer}:{kind} capability {cap}: {k}: cli {want.get(k)!r}, python {v!r}"
            compared += 1
    assert compared == len(CAPABILITIES) * len(LAYERS)


@pytest.mark.parametrize("path", CONFIG_FILES, ids=os.path.basename)
def test_global_equals_cli(cli, path):
    cfg = qport.load_config(path)
    want = json.loads(run_cli(cli, "inspect", path, "--json").stdout)["global"]
    try:
        got = {"result": "ok", **cfg.resolve_global().as_dict()}
    except qport.Error as e:
        got = {"result": "error", "error": e.message}
    for k, v in got.items():
        assert want.get(k) == v, k


def test_dict_equals_file():
    path = os.path.join(CONFIGS, "llama-w8a8-int8-kv.json")
    with open(path) as f:
        d = json.load(f)
    a, b = qport.load_config(path), qport.load_config(d)
    for layer, kind in LAYERS:
        try:
            sa = a.resolve(layer, kind=kind).as_dict()
        except qport.Error as e:
            sa = str(e)
        try:
            sb = b.resolve(layer, kind=kind).as_dict()
        except qport.Error as e:
            sb = str(e)
        assert sa == sb


def test_vllm_exceptions_and_messages():
    cfg = qport.load_config(os.path.join(CONFIGS, "llama-w8a8-int8-kv.json"))
    with pytest.raises(RuntimeError, match=r"^Quantization scheme is not supported for the current GPU. "
                                          r"Min capability: 89. Current capability: 80.$"):
        cfg.resolve("model.layers.0.mlp.down_proj", capability=80)
    assert cfg.resolve("model.layers.0.mlp.down_proj", capability="8.9").min_capability == 89
    s = cfg.resolve("model.layers.0.self_attn.qkv_proj", capability=(8, 0))
    assert (s.method, s.scheme_class, s.weight_key, s.activation_key) == \
        ("QuarkLinearMethod", "QuarkW8A8Int8", "kInt8StaticChannelSym", "kInt8DynamicTokenSym")
    with pytest.raises(RuntimeError):
        s.check_capability(70)
    s.check_capability(75)
    assert cfg.resolve("lm_head").method == "UnquantizedEmbeddingMethod"  # ParallelLMHead
    # a mixed exclude of a fused layer's shards: vLLM's ValueError
    d = {"quant_method": "quark", "global_quant_config": {
        "weight": {"dtype": "int8", "qscheme": "per_channel", "symmetric": True, "is_dynamic": False},
        "input_tensors": None, "output_tensors": None, "bias": None},
        "layer_quant_config": {}, "exclude": ["model.layers.0.self_attn.q_proj"]}
    with pytest.raises(ValueError) as ei:
        qport.load_config(d).resolve("model.layers.0.self_attn.qkv_proj")
    assert isinstance(ei.value, qport.VllmValueError) and ei.value.status == "QP_ERR_VALUE"


def test_packed_and_dialect():
    cfg = qport.load_config(os.path.join(CONFIGS, "llama-w8a8-int8-kv.json"))
    s = cfg.resolve("model.layers.0.self_attn.wqkv", packed={"wqkv": ["q_proj", "k_proj", "v_proj"]})
    assert s.scheme_class == "QuarkW8A8Int8"
    # SGLang's quark.py has no dynamic int8 scheme (vLLM's has)
    with pytest.raises(NotImplementedError, match="^No quark compatible scheme was found"):
        cfg.resolve("model.layers.0.self_attn.qkv_proj", dialect="sglang")
    # compressed-tensors: SGLang serves NVFP4 W4A4 weight-only below sm_100
    # (compressed_tensors.py _get_scheme_from_parts, sglang 0104cc50)
    ct = qport.load_config(os.path.join(CONFIGS, "ct-nvfp4.json"))
    s = ct.resolve("model.layers.0.mlp.down_proj", capability=90, dialect="sglang")
    assert s.scheme_class == "CompressedTensorsW4A16Fp4" and s.min_capability == 80
    assert ct.resolve("model.layers.0.mlp.down_proj", capability=90).scheme_class == "CompressedTensorsW4A4Fp4"
    with pytest.raises(ValueError):
        cfg.resolve("x", dialect="tgi")
    with pytest.raises(ValueError):
        cfg.resolve("x", kind="conv")
    assert cfg.kv_cache is not None and cfg.kv_cache.dtype == "fp8_e4m3fn"
    assert cfg.method == "quark" and isinstance(cfg.excludes, list) and isinstance(cfg.layer_patterns, list)


def test_compressed_tensors_dict():
    """A compressed-tensors config as a dict, as llm-compressor writes it:
    the class names, the kind, the capability fallback and vLLM's errors."""
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel"}
    tok = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}
    cfg = qport.load_config({"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["lm_head"],
                             "config_groups": {
                                 "a": {"targets": ["re:.*mlp.*"], "weights": w4, "format": "pack-quantized"},
                                 "b": {"targets": ["Linear"], "weights": fp8, "input_activations": tok,
                                       "format": "float-quantized"}}})
    assert cfg.method == "compressed-tensors"
    s = cfg.resolve("model.layers.0.mlp.down_proj")
    assert (s.method, s.scheme_class, s.kind, s.weight_key) == (
        "CompressedTensorsLinearMethod", "CompressedTensorsWNA16", "w4a16-int4", "kInt4Static")
    assert cfg.resolve("model.layers.0.self_attn.qkv_proj", capability=90).scheme_class == "CompressedTensorsW8A8Fp8"
    s = cfg.resolve("model.layers.0.self_attn.qkv_proj", capability=80)
    assert s.scheme_class == "CompressedTensorsW8A16Fp8" and s.kind == "w8a16-fp8" and s.kind_info.linear  # lowered to a dense weight at bind
    assert cfg.resolve("lm_head").method == "UnquantizedEmbeddingMethod"
    assert cfg.resolve("model.layers.0.mlp.experts", kind="moe").method == "CompressedTensorsWNA16MoEMethod"
    bad = qport.load_config({"quant_method": "compressed-tensors", "format": "pack-quantized",
                             "config_groups": {"a": {"targets": ["Linear"], "weights": {**w4, "actorder": "group"}}}})
    with pytest.raises(ValueError, match=r"\(actorder='group'\) is no longer supported"):
        bad.resolve("model.layers.0.mlp.down_proj")
