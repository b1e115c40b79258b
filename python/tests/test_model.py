"""Model directories: layers bound from a checkpoint as vLLM binds them,
checked against the same tensors read by the `safetensors` package (when
installed) and against `qport run`'s own outputs; KV-cache scales."""
from __future__ import annotations

import os

import numpy as np
import pytest

import qport
from conftest import acts, run_cli

FUSED = {"model.layers.0.self_attn.qkv_proj": ["q_proj", "k_proj", "v_proj"],
         "model.layers.0.mlp.gate_up_proj": ["gate_proj", "up_proj"]}
LAYERS = ["model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
          "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj"]


def test_model_facts(demo_int8):
    m = qport.Model(demo_int8)
    assert m.dtype == "f16"
    assert "model.layers.0.self_attn.q_proj" in m.layers and m.moe_blocks == []
    assert m.config.method == "quark"
    s = m.scheme("model.layers.0.mlp.down_proj")
    assert s.scheme_class == "QuarkW8A8Int8"
    k, v = m.kv_scales("model.layers.0.self_attn")
    assert k > 0 and v > 0
    w = m.tensor("model.layers.0.self_attn.k_proj.output_scale")
    assert w.dtype in ("f16", "f32") and float(np.asarray(w.numpy(), np.float32).reshape(-1)[0]) == pytest.approx(k)
    assert "model.embed_tokens.weight" in m.tensor_names


def test_layers_on_every_device_equal_reference(demo_int8, devices):
    m = qport.Model(demo_int8)
    for name in LAYERS:
        ref = m.layer(name, "cpu")
        x = acts(3, ref.K)
        y = ref(x)
        for d in devices:
            if d.backend != "cpu" and d.supports(ref.scheme):
                got = m.layer(name, d)(x)
                assert (got.view(np.uint16) == y.view(np.uint16)).all(), f"{name} on {d}"


def _shard_tensors(st: dict, layer: str) -> tuple[dict, list]:
    """The tensors of a (possibly fused) layer from a flat checkpoint dict,
    concatenated shard by shard as vLLM's loader stacks them."""
    parent, proj = layer.rsplit(".", 1)
    shards = FUSED.get(layer, [proj])
    out, rows = {}, []
    for suffix in ("weight", "weight_scale", "weight_zero_point"):
        parts = [st[f"{parent}.{sh}.{suffix}"] for sh in shards]
        out[suffix] = np.concatenate([p.reshape(p.shape[0], -1) if suffix == "weight" else p.reshape(-1)
                                      for p in parts])
    rows = [st[f"{parent}.{sh}.weight"].shape[0] for sh in shards]
    return out, rows


def test_same_as_safetensors_package(demo_int8):
    st_numpy = pytest.importorskip("safetensors.numpy")
    st = st_numpy.load_file(os.path.join(demo_int8, "model.safetensors"))
    m = qport.Model(demo_int8)
    for name in LAYERS:
        t, rows = _shard_tensors(st, name)
        # the checkpoint's fp16 scales, as Quark writes them; the layer takes them as they are
        lin = qport.Linear("cpu", m.scheme(name), t, shard_rows=rows if len(rows) > 1 else None)
        x = acts(2, lin.K)
        assert (lin(x) == m.layer(name, "cpu")(x)).all(), name
        # the bytes qport maps are the bytes safetensors reads
        for sh in FUSED.get(name, [name.rsplit(".", 1)[1]]):
            key = f"{name.rsplit('.', 1)[0]}.{sh}.weight"
            assert (m.tensor(key).numpy() == st[key]).all()


def test_same_as_qport_run(cli, demo_int8, tmp_path):
    """Python's outputs equal the C tool's (`qport run --input/--output`),
    both read back with qport's own safetensors reader."""
    name = "model.layers.0.mlp.down_proj"
    m = qport.Model(demo_int8)
    lin = m.layer(name, "cpu")
    x = acts(4, lin.K)
    # the activations file: a one-tensor "model" written by the safetensors package when present
    st_numpy = pytest.importorskip("safetensors.numpy")
    inp, out = tmp_path / "x.safetensors", tmp_path / "y.safetensors"
    st_numpy.save_file({name: x}, str(inp))
    r = run_cli(cli, "run", demo_int8, "--layer", name, "--device", "cpu", "--input", str(inp), "--output", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    ys = st_numpy.load_file(str(out))
    (key,) = [k for k in ys if k.startswith(name + "@")]
    assert (ys[key] == lin(x)).all()


def test_tensor_parallel_partitions(demo_int8):
    m = qport.Model(demo_int8)
    full = m.layer("model.layers.0.mlp.down_proj", "cpu")
    parts = [m.layer("model.layers.0.mlp.down_proj", "cpu", tp_size=2, tp_rank=r) for r in (0, 1)]
    assert [p.K for p in parts] == [full.K // 2] * 2 and parts[0].N == full.N
