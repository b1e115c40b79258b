"""A linear layer per scheme on every device equals the cpu reference:
integer schemes bit for bit, float schemes within a loose relative bound
(the derived per-case bounds are `qport conform`'s job, test_conform.py).
Sizes are tiny: lavapipe and PoCL are CPU implementations."""
from __future__ import annotations

import numpy as np
import pytest

import qport
from conftest import EXACT, SCHEMES, acts, scheme, weights

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

N, K, M = 64, 128, 3  # QQQ: N % 64, K % 128; fp8 blocks: K % 128


def f32(y) -> np.ndarray:
    return np.asarray(y).astype(np.float32)


def close(got, ref, name) -> None:
    g, r = f32(got), f32(ref)
    assert np.isfinite(g).all() == np.isfinite(r).all()
    scale = float(np.abs(r).max()) or 1.0
    err = float(np.abs(g - r).max())
    assert err <= 2e-3 * scale + 1e-3, f"{name}: max error {err} against max |ref| {scale}"


@pytest.fixture(scope="module")
def layers():
    """{scheme name: (scheme, tensors, reference output)} with one set of
    fp16 activations."""
    out = {}
    x = acts(M, K)
    for name in SCHEMES:
        s = scheme(name)
        t = qport.quantize_weights(weights(N, K), s, input_absmax=2.0)
        out[name] = (s, t, qport.Linear("cpu", s, t)(x))
    return x, out


@pytest.mark.parametrize("name", sorted(SCHEMES))
def test_scheme_on_every_device(devices, layers, name):
    x, table = layers
    s, t, ref = table[name]
    assert ref.shape == (M, N) and ref.dtype == np.float16
    ran = 0
    for d in devices:
        if d.backend == "cpu" or not d.supports(s):
            continue
        y = qport.Linear(d, s, t)(x)
        assert y.dtype == ref.dtype and y.shape == ref.shape
        if name in EXACT:
            assert (y.view(np.uint16) == ref.view(np.uint16)).all(), f"{name} on {d}: not bit-exact"
        else:
            close(y, ref, f"{name} on {d}")
        ran += 1
    if not ran:
        pytest.skip("no device but the reference runs this scheme")


def test_tensors_round_trip_and_names():
    s = scheme("nvfp4")
    t = qport.quantize_weights(weights(N, K), s)
    assert sorted(t) == ["input_scale_2", "weight", "weight_scale", "weight_scale_2"]
    assert t["weight"].dtype == "uint8" and t["weight"].shape == (N, K // 2)
    assert t["weight_scale"].dtype == "fp8_e4m3fn" and t["weight_scale"].shape == (N, K // 16)
    # plain numpy arrays work where numpy has the dtype; fp8 needs its name
    plain = {k: (v if v.dtype.startswith("fp8") else v.data) for k, v in t.items()}
    x = acts(2, K)
    assert (qport.Linear("cpu", s, plain)(x) == qport.Linear("cpu", s, t)(x)).all()


def test_bf16_and_f32_activations(devices):
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    x32 = acts(M, K, np.float32)
    # bf16 as raw uint16 bits (numpy has no bfloat16): the top half of fp32
    bits = (x32.view(np.uint32) >> 16).astype(np.uint16)
    ref = qport.Linear("cpu", s, t, act_dtype="bf16")(bits)
    assert ref.dtype == np.uint16 and ref.shape == (M, N)
    for d in devices:
        if d.backend != "cpu" and d.supports(s):
            assert (qport.Linear(d, s, t, act_dtype="bf16")(bits) == ref).all(), str(d)
    if ml_dtypes is not None:
        y = qport.Linear("cpu", s, t, act_dtype="bf16")(bits.view(ml_dtypes.bfloat16))
        assert y.dtype == ml_dtypes.bfloat16 and (y.view(np.uint16) == ref).all()
    # f32 runs on the reference
    x16 = x32.astype(np.float16)
    y32 = qport.Linear("cpu", s, t, act_dtype="f32")(x16.astype(np.float32))
    assert y32.dtype == np.float32 and y32.shape == (M, N)
    close(y32, qport.Linear("cpu", s, t)(x16), "f32 against f16")


def test_leading_dims_and_empty():
    s = scheme("fp8-dyn-token")
    lin = qport.Linear("cpu", s, qport.quantize_weights(weights(N, K), s))
    x = acts(6, K)
    y = lin(x.reshape(2, 3, K))
    assert y.shape == (2, 3, N) and (y.reshape(6, N) == lin(x)).all()
    assert lin(x[:0]).shape == (0, N)
    assert lin(x[0]).shape == (N,)


def test_fused_layer_shards():
    """Per-shard scales of a fused layer (qkv_proj): shard_rows."""
    s = qport.load_config(SCHEMES["fp8-static"]).resolve("model.layers.0.self_attn.qkv_proj")
    parts = [qport.quantize_weights(weights(n, K, seed=n), s) for n in (64, 32, 32)]
    t = {"weight": qport.Tensor(np.concatenate([p["weight"].data for p in parts]), "fp8_e4m3fn"),
         "weight_scale": np.concatenate([p["weight_scale"].data.reshape(-1) for p in parts]),
         "input_scale": np.concatenate([p["input_scale"].data.reshape(-1) for p in parts])}
    lin = qport.Linear("cpu", s, t, shard_rows=[64, 32, 32])
    assert lin(acts(2, K)).shape == (2, 128)


def test_device_pick_and_describe(devices):
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    lin = qport.Linear(None, s, t)  # qp_device_pick's choice
    assert lin.device == qport.device(scheme=s)
    assert isinstance(lin.describe(4), str) and lin.describe(4)
    for d in devices:
        assert qport.device(str(d)) == d
        info = d.info
        assert info["device"] == str(d) and "caps" in info and d.caps["int8_storage"] in (-1, 0, 1)
    assert devices[-1].backend == "cpu" and devices[-1].kind == "reference"
    assert any(b.name == "cpu" and b.loaded for b in qport.backends())


def test_support_table(devices):
    """Per-scheme support of every device, for the tool's named schemes and
    for resolved ones; both say the same for the same scheme."""
    for d in devices:
        table = d.support_table()
        assert set(SCHEMES) <= set(table), set(SCHEMES) - set(table)
        assert all(v.level in ("native", "emulated", "unsupported") for v in table.values())
        mine = d.support_table({n: scheme(n) for n in ("int8-dyn-sym", "nvfp4", "qqq")})
        for n, v in mine.items():
            assert v == table[n], f"{d} {n}"
    assert all(v.level == "native" for v in devices[-1].support_table().values())
