"""MoE layers: a model's experts (Model.moe) against qport.MoE built from
the same checkpoint tensors stacked as vLLM's FusedMoE stacks them, and
router-logit routing against explicit top-k routing."""
from __future__ import annotations

import numpy as np
import pytest

import qport
from conftest import run_cli

E, H, I = 4, 64, 64


@pytest.fixture(scope="module")
def moe_int8(cli, demo_moe):
    d = demo_moe + "-int8"
    r = run_cli(cli, "quantize", demo_moe, d, "--scheme", "int8-dyn-sym")
    assert r.returncode == 0, r.stderr
    return d


def _x(M=5):
    rng = np.random.default_rng(3)
    return rng.uniform(-1, 1, (M, H)).astype(np.float16), rng.normal(size=(M, E)).astype(np.float32)


def test_model_moe_equals_stacked(moe_int8):
    m = qport.Model(moe_int8)
    (block,) = m.moe_blocks
    moe = m.moe(block)
    assert (moe.E, moe.H, moe.I, moe.top_k) == (E, H, I, 2) and moe.router == "model.layers.0.mlp.gate"
    assert moe.scheme.scheme_class == "QuarkW8A8Int8MoEMethod"

    def t(e, proj, what):
        return m.tensor(f"{block}.{e}.{proj}.{what}").numpy()
    w13 = np.stack([np.concatenate([t(e, "gate_proj", "weight"), t(e, "up_proj", "weight")]) for e in range(E)])
    s13 = np.stack([np.concatenate([t(e, "gate_proj", "weight_scale").reshape(-1),
                                    t(e, "up_proj", "weight_scale").reshape(-1)]) for e in range(E)])
    w2 = np.stack([t(e, "down_proj", "weight") for e in range(E)])
    s2 = np.stack([t(e, "down_proj", "weight_scale").reshape(-1) for e in range(E)])
    tensors = {"w13_weight": w13, "w2_weight": w2, "w13_weight_scale": s13.astype(np.float32),
               "w2_weight_scale": s2.astype(np.float32)}
    mine = qport.MoE("cpu", m.scheme(block, kind="moe"), E, H, I, tensors, top_k=2, renormalize=True)
    x, logits = _x()
    assert (mine(x, logits) == moe(x, logits)).all()
    # the router is an unquantized linear layer of the model: Qwen3-MoE's
    # takes the quant config in vLLM 0.34.0 (GateLinear), so it is not
    # unquantized by the architecture, and qport quantize excludes it
    assert not m.is_unquantized(moe.router)
    assert m.scheme(moe.router).method == "UnquantizedLinearMethod"
    gate = m.layer(moe.router, "cpu")
    y = moe(x, gate(x).astype(np.float32))
    assert y.shape == (5, H) and y.dtype == np.float16


def test_route_then_topk_equals_logits(moe_int8):
    moe = qport.Model(moe_int8).moe("model.layers.0.mlp.experts")
    x, logits = _x()
    ids, w = qport.moe_route(logits, top_k=2, renormalize=True)
    assert ids.dtype == np.int32 and w.dtype == np.float32 and ids.shape == (5, 2)
    assert np.allclose(w.sum(axis=1), 1.0, atol=1e-6)
    assert (ids[:, 0] == logits.argmax(axis=1)).all()
    assert (moe(x, topk_ids=ids, topk_weights=w) == moe(x, logits)).all()
    with pytest.raises(ValueError, match="expert ids"):
        moe(x, topk_ids=np.full((5, 2), 7, np.int32), topk_weights=w)
    with pytest.raises(ValueError):
        moe(x, logits[:, :3].copy())
    with pytest.raises(TypeError):
        moe(x)
    with pytest.raises(TypeError):
        moe(x, logits, topk_ids=ids, topk_weights=w)
    moe.close()
    with pytest.raises(ValueError, match="closed"):
        moe(x, logits)


def test_moe_on_other_devices(moe_int8, devices):
    """MoE runs on the cpu reference; a device without fused MoE kernels
    says so (UnsupportedError), one with them must equal the reference."""
    m = qport.Model(moe_int8)
    x, logits = _x()
    ref = m.moe("model.layers.0.mlp.experts", "cpu")(x, logits)
    s = m.scheme("model.layers.0.mlp.experts", kind="moe")
    ran = 0
    for d in devices:
        if not d.supports_moe(s):
            with pytest.raises(qport.UnsupportedError):
                m.moe("model.layers.0.mlp.experts", d)
            continue
        moe = m.moe("model.layers.0.mlp.experts", d)
        assert isinstance(moe.describe(5), str) and moe.describe(5)
        assert (moe(x, logits) == ref).all(), f"{d}: {moe.describe(5)}"
        ran += 1
    assert ran >= 1  # the reference at least
