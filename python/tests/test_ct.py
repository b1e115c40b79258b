"""compressed-tensors (llm-compressor) layers through the Python package:
quantize_weights writes llm-compressor's layout for a compressed-tensors
scheme, qport.Linear binds it (N and K from weight_shape), and the layer
equals, bit for bit on every device, the same arithmetic bound from Quark's
layout; a real llm-compressor export (tests/ct_exports) opens as a model
whose weight_packed layers are listed and run."""
from __future__ import annotations

import os

import numpy as np
import pytest

import qport
from conftest import REPO, acts, weights, scheme

LAYER = "model.layers.0.mlp.down_proj"


def _ct(fmt: str, w: dict, i: dict | None) -> qport.Config:
    return qport.load_config({"quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"],
                              "config_groups": {"group_0": {"targets": ["Linear"], "format": fmt, "weights": w,
                                                            "input_activations": i}}})


def _args(t: str, bits: int, strategy: str, group: int | None, sym: bool, dyn=False) -> dict:
    return {"num_bits": bits, "type": t, "strategy": strategy, "group_size": group, "symmetric": sym,
            "dynamic": dyn, "actorder": None}


CASES = {
    # preset: (compressed-tensors config, the Quark scheme of the same arithmetic, tensors written)
    "W4A16": (_ct("pack-quantized", _args("int", 4, "group", 128, True), None), "w4a16-int4",
              {"weight_packed", "weight_scale", "weight_shape"}),
    "W4A16_ASYM": (_ct("pack-quantized", _args("int", 4, "group", 128, False), None), None,
                   {"weight_packed", "weight_scale", "weight_zero_point", "weight_shape"}),
    "W8A8": (_ct("int-quantized", _args("int", 8, "channel", None, True),
                 _args("int", 8, "token", None, True, True)), "int8-dyn-sym", {"weight", "weight_scale"}),
    "NVFP4": (_ct("nvfp4-pack-quantized", _args("float", 4, "tensor_group", 16, True),
                  _args("float", 4, "tensor_group", 16, True, "local")), "nvfp4",
              {"weight_packed", "weight_scale", "weight_global_scale", "input_global_scale"}),
}


@pytest.mark.parametrize("preset", sorted(CASES))
def test_ct_layout_runs_everywhere(preset, devices):
    cfg, quark_name, names = CASES[preset]
    s = cfg.resolve(LAYER, capability=100)
    assert s.method == "CompressedTensorsLinearMethod"
    w = weights(64, 256, seed=7)
    t = qport.quantize_weights(w, s)
    assert set(t) == names, sorted(t)
    if "weight_shape" in t:
        assert t["weight_shape"].dtype == "int64" and list(t["weight_shape"].numpy()) == [64, 256]
        assert t["weight_packed"].dtype == "int32" and tuple(t["weight_packed"].shape) == (64, 32)
    x = acts(5, 256)
    ref = qport.Linear("cpu", s, t)
    assert (ref.N, ref.K) == (64, 256)
    y = ref(x)
    if quark_name:  # the same arithmetic from Quark's layout
        q = qport.Linear("cpu", scheme(quark_name), qport.quantize_weights(w, scheme(quark_name)), N=64, K=256)
        assert (q(x).view(np.uint16) == y.view(np.uint16)).all()
    for d in devices:
        if d.backend != "cpu" and d.supports(s):
            got = qport.Linear(d, s, t)(x)
            assert (got.view(np.uint16) == y.view(np.uint16)).all(), f"{preset} on {d}"


def test_ct_bad_weight_shape():
    cfg = CASES["W4A16"][0]
    s = cfg.resolve(LAYER)
    t = dict(qport.quantize_weights(weights(64, 256), s))
    t["weight_shape"] = np.array([64, 264], dtype=np.int64)
    with pytest.raises(qport.Error, match=r"'weight_shape' says \[64, 264\], the layer is \[64, 256\]"):
        qport.Linear("cpu", s, t, N=64, K=256)


EXPORT = os.path.join(REPO, "tests", "ct_exports", "fp16", "W4A16")


@pytest.mark.skipif(not os.path.isdir(EXPORT), reason="tests/ct_exports not in this tree")
def test_llm_compressor_export(devices):
    m = qport.Model(EXPORT)
    assert m.config.method == "compressed-tensors"
    assert "model.layers.0.self_attn.q_proj" in m.layers and len(m.layers) == 8
    assert m.scheme(LAYER).scheme_class == "CompressedTensorsWNA16"
    ref = m.layer(LAYER, "cpu")
    x = acts(3, ref.K)
    y = ref(x)
    for d in devices:
        if d.backend != "cpu" and d.supports(ref.scheme):
            got = m.layer(LAYER, d)(x)
            # float path: each device within the W4A16 kernels' fp32 summation bound
            assert np.allclose(got.astype(np.float32), y.astype(np.float32), rtol=2**-9, atol=2**-12), str(d)
