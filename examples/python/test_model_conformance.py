"""A pytest-style conformance check: one layer of a model directory on
every device of this machine against qport's cpu reference.

    QPORT_MODEL=path/to/model pytest examples/python/test_model_conformance.py
    QPORT_MODEL=... QPORT_LAYER=model.layers.3.mlp.down_proj pytest ...

Copy it into your own suite: integer schemes (int8, QQQ) must be bit-exact;
float schemes are held to a normalised mean squared error of 2^-20 (the
format-derived per-element bounds are `qport conform`'s).
"""
import os

import numpy as np
import pytest

import qport

MODEL = os.environ.get("QPORT_MODEL")
LAYER = os.environ.get("QPORT_LAYER", "model.layers.0.mlp.down_proj")
EXACT = {"w8a8-int8", "qqq-w4a8"}

pytestmark = pytest.mark.skipif(not MODEL, reason="set QPORT_MODEL to a model directory")


@pytest.fixture(scope="module")
def model():
    with qport.Model(MODEL) as m:
        yield m


@pytest.fixture(scope="module")
def reference(model):
    ref = model.layer(LAYER, "cpu")
    rng = np.random.default_rng(0)
    bits = rng.uniform(-1, 1, (4, ref.K)).astype(np.float32)
    # the model's dtype: fp16 directly, bf16 as its top 16 bits (numpy has no bfloat16)
    x = bits.astype(np.float16) if ref.act_dtype == "f16" else (bits.view(np.uint32) >> 16).astype(np.uint16)
    return ref, x, ref(x)


def as_f32(y, dtype):
    y = np.asarray(y)
    if dtype == "bf16" and y.dtype == np.uint16:
        return (y.astype(np.uint32) << 16).view(np.float32)
    return y.astype(np.float32)


@pytest.mark.parametrize("dev", [str(d) for d in qport.devices() if d.backend != "cpu"])
def test_layer_matches_reference(model, reference, dev):
    ref, x, want = reference
    if not qport.device(dev).supports(ref.scheme):
        pytest.skip(f"{dev} does not run {ref.scheme.kind}")
    got = model.layer(LAYER, dev)(x)
    if ref.scheme.kind in EXACT:
        assert (np.asarray(got) == np.asarray(want)).all()
    else:
        g, w = as_f32(got, ref.out_dtype), as_f32(want, ref.out_dtype)
        nmse = float(((g - w) ** 2).sum() / max((w ** 2).sum(), 1e-30))
        assert nmse <= 2.0 ** -20, f"NMSE {nmse}"
