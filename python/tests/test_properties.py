"""Property tests of the public API's arguments: whatever sizes,
counts, shapes, dtypes and options a caller passes, qport.Linear and
qport.MoE either build a layer that computes or raise a qport.Error (or a
TypeError / ValueError from the Python checks) -- never a crash. A crash
here takes the pytest process down, which fails the suite. Needs
hypothesis (Debian: python3-hypothesis); skipped without it."""
from __future__ import annotations

import numpy as np
import pytest

import qport
from conftest import SCHEMES, acts, weights

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
N, K = 64, 32
BAD = (qport.Error, TypeError, ValueError, OverflowError)
INT = st.one_of(st.integers(-3, 70), st.integers(-2**63, 2**63 - 1), st.sampled_from([2**31 - 1, -2**31, 2**31, 2**32]))


@pytest.fixture(scope="module")
def fused():
    """An fp8 per-tensor qkv_proj of N = 64 with one weight scale per shard
    (q 32, k 16, v 16): the layer of the issue's heap overflow."""
    s = qport.load_config(SCHEMES["fp8-dyn-tensor"]).resolve("model.layers.0.self_attn.qkv_proj")
    parts = [qport.quantize_weights(weights(n, K, seed=n), s) for n in (32, 16, 16)]
    t = {"weight": qport.Tensor(np.concatenate([p["weight"].data for p in parts]), "fp8_e4m3fn"),
         "weight_scale": np.concatenate([p["weight_scale"].data.reshape(-1) for p in parts])}
    return s, t


def test_issue_shard_rows_overflow(fused):
    s, t = fused
    with pytest.raises(qport.InvalidArgumentError, match="shard_rows"):
        qport.Linear("cpu", s, t, shard_rows=[100000, -99936])


@SETTINGS
@given(rows=st.lists(INT, max_size=6))
def test_shard_rows(fused, rows):
    s, t = fused
    ok = len(rows) == 3 and all(0 <= r < 2**31 for r in rows) and sum(rows) == N
    try:
        lin = qport.Linear("cpu", s, t, shard_rows=rows)
    except BAD as e:
        assert not ok or len(rows) != 3, (rows, e)
        return
    # accepted: the rows fit the weight, and the layer computes
    assert not rows or (all(r >= 0 for r in rows) and sum(rows) == N), rows
    assert lin(acts(2, K)).shape == (2, N)


_DT = ["f32", "f16", "bf16", "int8", "uint8", "int32", "fp8_e4m3fn"]


@st.composite
def tensor(draw):
    shape = tuple(draw(st.lists(st.integers(0, 70), max_size=5)))
    dt = draw(st.sampled_from(_DT))
    raw = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "int8": np.int8, "uint8": np.uint8,
           "int32": np.int32, "fp8_e4m3fn": np.uint8}[dt]
    if int(np.prod(shape, dtype=np.int64)) > 1 << 16:
        shape = shape[:1]
    a = np.frombuffer(draw(st.binary(min_size=0, max_size=64)).ljust(64, b"\0"), np.uint8)
    a = np.resize(a, int(np.prod(shape, dtype=np.int64)) * np.dtype(raw).itemsize).view(raw).reshape(shape)
    return a if dt in ("f32", "f16", "int8", "uint8", "int32") else qport.Tensor(a, dt)


@SETTINGS
@given(name=st.sampled_from(["int8-dyn-sym", "fp8-static", "w4a16-uint4", "mxfp4-a-mxfp4", "nvfp4", "qqq",
                             "fp8-block"]),
       n=INT, k=INT, replace=st.dictionaries(st.sampled_from(["weight", "weight_scale", "input_scale", "bias",
                                                              "weight_zero_point", "B", "s_channel", "extra"]),
                                             tensor(), max_size=3))
def test_linear_tensors_and_shape(name, n, k, replace):
    s = qport.load_config(SCHEMES[name]).resolve("model.layers.0.mlp.down_proj")
    t = dict(qport.quantize_weights(weights(64, 128), s))
    t.update(replace)
    try:
        lin = qport.Linear("cpu", s, t, N=n if n > 0 or n < -2 else None, K=k if k > 0 or k < -2 else None)
    except BAD:
        return
    assert lin(acts(1, lin.K)).shape == (1, lin.N)


CREATED: list[int] = []
OR_NONE = st.one_of(st.none(), st.none(), st.none(), INT)  # None: the tensors' own size
ERRS: list[str] = []


@SETTINGS
@given(E=OR_NONE, H=OR_NONE, I=OR_NONE, top_k=st.sampled_from([1, 2]) | INT, groups=INT, topk_group=st.just(0) | INT, offset=INT, G=INT,
       scoring=st.sampled_from(["softmax", "sigmoid"]), shape=st.lists(st.integers(1, 9) | st.integers(-1, 0), min_size=3, max_size=3))
def test_moe_sizes_and_options(E, H, I, top_k, groups, topk_group, offset, G, scoring, shape):  # noqa: E741
    s = qport.load_config(SCHEMES["int8-dyn-sym"]).resolve("lm_head", kind="moe")  # excluded: unquantized experts
    e, h, i = (max(v, 0) for v in shape)
    E, H, I = (d if v is None else v for v, d in ((E, e), (H, h), (I, i)))  # noqa: E741
    t = {"w13_weight": np.zeros((e, 2 * i, h), np.float16), "w2_weight": np.zeros((e, h, i), np.float16)}
    try:
        moe = qport.MoE("cpu", s, E, H, I, t, top_k=top_k, num_expert_group=groups, topk_group=topk_group,
                        scoring=scoring, global_num_experts=G, expert_offset=offset)
    except BAD as ex:
        ERRS.append(str(ex))
        return
    assert (moe.E, moe.H, moe.I) == (E, H, I) and (e, h, i) == (E, H, I)
    CREATED.append(1)
    x = acts(3, H)
    logits = np.random.default_rng(0).normal(size=(3, moe.global_num_experts)).astype(np.float32)
    assert moe(x, logits).shape == (3, H)
    ids = np.full((3, moe.top_k), moe.global_num_experts, np.int32)  # one past the last expert
    with pytest.raises(BAD):
        moe(x, topk_ids=ids, topk_weights=np.ones((3, moe.top_k), np.float32))


def test_moe_some_created():
    """The property above built real layers, not only errors."""
    assert len(CREATED) >= 2, "\n".join(ERRS[:40])
