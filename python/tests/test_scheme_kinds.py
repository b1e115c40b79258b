"""qport.scheme_kinds / Scheme.kind_info: the scheme table as the C library
describes it (api/scheme_table.c)."""
from __future__ import annotations

import os

import qport
from conftest import CONFIGS


def test_every_kind_described():
    kinds = qport.scheme_kinds()
    names = [k.name for k in kinds]
    assert names[:4] == ["unquantized", "w8a8-fp8", "w8a8-fp8-block", "w8a8-int8"]
    assert len(names) == len(set(names)) == 24
    # compressed-tensors schemes: the weight-only ones are lowered to dense
    # weights at bind (linear, no fused MoE), the others resolved only
    ct = names[names.index("wna16"):]
    assert ct == ["wna16", "w8a16-fp8", "nvfp4-a16", "w4a8-int", "w4a8-fp8", "ct-mxfp4", "ct-mxfp8", "ct-w4a8-mxfp4",
                  "wna8o8-int", "wna8-int", "wna4-int"]
    by = {k.name: k for k in kinds}
    lowered = ["wna16", "w8a16-fp8", "nvfp4-a16", "ct-mxfp4"]
    assert all(by[n].linear and by[n].family == "dense" and not by[n].moe for n in lowered)
    assert not any(by[n].linear or by[n].moe for n in ct if n not in lowered)
    assert [k.name for k in kinds if k.exact] == ["w8a8-int8", "qqq-w4a8"]
    assert not by["kv-cache"].linear and not by["none"].linear and not by["w4a8-int4-fp8"].linear
    assert by["w4a8-int4-fp8"].moe_refusal == "runs only through ROCm AITER's fused MoE in vLLM"
    assert by["qqq-w4a8"].family == "int4" and by["nvfp4"].family == "block-float" and by["unquantized"].family == "dense"
    assert by["w8a8-int8"].moe and by["w8a8-int8"].moe_refusal is None and "weight_scale" in by["w8a8-int8"].tensors


def test_scheme_kind_info_of_a_resolved_layer():
    s = qport.load_config(os.path.join(CONFIGS, "llama-w8a8-int8-kv.json")).resolve("model.layers.0.self_attn.qkv_proj",
                                                                          capability=80)
    info = s.kind_info
    assert info.name == s.kind == "w8a8-int8" and info.exact and info.linear and info.family == "w8a8"
    assert s.scheme_class in info.classes.split(", ")
