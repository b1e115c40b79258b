"""Bad input raises a Python exception and never reaches C unchecked:
wrong dtypes, shapes, non-contiguous arrays, closed objects, bad files."""
from __future__ import annotations

import gc
import os

import numpy as np
import pytest

import qport
from conftest import CONFIGS, acts, scheme, weights

N, K = 64, 128


@pytest.fixture
def lin():
    s = scheme("int8-dyn-sym")
    return qport.Linear("cpu", s, qport.quantize_weights(weights(N, K), s))


def test_activation_dtype_shape_layout(lin):
    with pytest.raises(TypeError, match="f16 activations"):
        lin(acts(2, K, np.float32))
    with pytest.raises(TypeError, match="float64"):
        lin(np.zeros((2, K)))
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        lin([[0.0] * K])
    with pytest.raises(ValueError, match=r"want \(\.\.\., 128\)"):
        lin(acts(2, K + 1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        lin(acts(K, 4).T)
    with pytest.raises(ValueError, match="not C-contiguous"):
        lin(acts(2, 2 * K)[:, ::2])
    with pytest.raises(ValueError):
        lin(np.array(1.0, np.float16))  # 0-d: no K axis


def test_tensor_dtype_shape_layout():
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    good = {k: v.data for k, v in t.items()}
    with pytest.raises(TypeError, match="float64"):
        qport.Linear("cpu", s, {**good, "weight_scale": good["weight_scale"].astype(np.float64)})
    with pytest.raises(ValueError, match="not C-contiguous"):
        qport.Linear("cpu", s, {**good, "weight": np.asfortranarray(good["weight"])})
    # a wrong shape or a missing tensor: the C library's message, naming the tensor
    with pytest.raises(qport.Error, match="weight_scale"):
        qport.Linear("cpu", s, {**good, "weight_scale": good["weight_scale"][:10]})
    with pytest.raises(qport.Error, match="weight_scale"):
        qport.Linear("cpu", s, {"weight": good["weight"]})
    with pytest.raises(qport.Error):
        qport.Linear("cpu", s, {**good, "weight": good["weight"].view(np.uint8)})
    with pytest.raises(ValueError, match="5 dimensions"):
        qport.Linear("cpu", s, {**good, "bias": np.zeros((1, 1, 1, 1, N), np.float16)})
    with pytest.raises(TypeError, match="qport.Scheme"):
        qport.Linear("cpu", "int8", good)
    with pytest.raises(TypeError, match="dict"):
        qport.Linear("cpu", s, [good["weight"]])
    with pytest.raises(TypeError, match="1 byte"):
        qport.Tensor(np.zeros(4, np.float32), "fp8_e4m3fn")
    with pytest.raises(ValueError):
        qport.Linear("cpu", s, good, act_dtype="f8")
    with pytest.raises(ValueError):
        qport.Linear("cpu", s, good, path="fast")


def test_closed_layer_raises(lin):
    x = acts(2, K)
    lin(x)
    lin.close()
    assert lin.closed
    with pytest.raises(ValueError, match="closed"):
        lin(x)
    lin.close()  # twice is fine
    with qport.Linear("cpu", lin.scheme, qport.quantize_weights(weights(N, K), lin.scheme)) as l2:
        l2(x)
    with pytest.raises(ValueError, match="closed"):
        l2(x)


def test_closed_model_raises(demo_int8):
    m = qport.Model(demo_int8)
    lin = m.layer("model.layers.0.mlp.down_proj", "cpu")
    cfg = m.config
    m.close()
    for f in (lambda: m.layers, lambda: m.layer("model.layers.0.mlp.down_proj"), lambda: m.kv_scales("x"),
              lambda: m.tensor("lm_head.weight"), lambda: cfg.resolve("lm_head"), lambda: m.dtype):
        with pytest.raises(ValueError, match="closed"):
            f()
    # a layer made from the model holds its own copy
    assert lin(acts(2, 256)).shape == (2, 128)


def test_garbage_collected_owners(demo_int8):
    """Objects keep what they need alive: a layer outlives its model,
    config and tensors."""
    m = qport.Model(demo_int8)
    lin = m.layer("model.layers.0.self_attn.qkv_proj", "cpu")
    del m
    gc.collect()
    assert lin(acts(1, 128)).shape == (1, lin.N)


def test_config_errors(tmp_path):
    with pytest.raises(OSError) as e:
        qport.load_config(tmp_path / "missing.json")
    assert isinstance(e.value, qport.QportIOError)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(qport.ParseError):
        qport.load_config(bad)
    with pytest.raises(qport.UnsupportedError):
        qport.load_config({"quant_method": "awq"})
    with pytest.raises(TypeError):
        qport.load_config(42)
    cfg = qport.load_config(os.path.join(CONFIGS, "llama-w8a8-int8-kv.json"))
    with pytest.raises(ValueError, match="capability"):
        cfg.resolve("lm_head", capability=-3)
    cfg.close()
    with pytest.raises(ValueError, match="closed"):
        cfg.resolve("lm_head")


def test_model_errors(tmp_path, demo_int8):
    with pytest.raises(qport.Error):
        qport.Model(tmp_path / "nothing-here")
    m = qport.Model(demo_int8)
    with pytest.raises(LookupError):
        m.layer("model.layers.9.mlp.down_proj")
    with pytest.raises(LookupError):
        m.tensor("nope")


def test_device_errors():
    with pytest.raises(ValueError, match="invalid device 'tpu:7'"):
        qport.device("tpu:7")
    with pytest.raises(LookupError):
        qport.device("no such device name")
    with pytest.raises(TypeError):
        qport.device(3)


def test_kv_and_moe_inputs():
    with pytest.raises(ValueError):
        qport.kv_quantize(np.ones(4, np.float32), 0.0)
    with pytest.raises(ValueError):
        qport.kv_quantize(np.ones(4, np.float32), float("nan"))
    with pytest.raises(TypeError):
        qport.kv_quantize(np.ones(4, np.int32), 1.0)
    with pytest.raises(TypeError):
        qport.kv_dequantize(np.ones(4, np.float32), 1.0)
    with pytest.raises(TypeError):
        qport.moe_route(np.ones((2, 4), np.float16))
    with pytest.raises(ValueError):
        qport.moe_route(np.ones((2, 4), np.float32), top_k=5)
