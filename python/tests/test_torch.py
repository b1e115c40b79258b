"""torch CPU tensors in, torch tensors out (skipped where torch is not
installed: CI does not install it)."""
from __future__ import annotations

import numpy as np
import pytest

import qport
from conftest import acts, scheme, weights

torch = pytest.importorskip("torch")
N, K = 64, 128


def test_linear_with_torch_tensors():
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    tt = {k: torch.from_numpy(v.data.copy()) for k, v in t.items()}
    x = acts(3, K)
    want = qport.Linear("cpu", s, t)(x)
    lin = qport.Linear("cpu", s, tt)
    y = lin(torch.from_numpy(x))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float16
    assert (y.numpy() == want).all()
    # bf16 through torch's own dtype
    lb = qport.Linear("cpu", s, tt, act_dtype="bf16")
    xb = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    yb = lb(xb)
    assert yb.dtype == torch.bfloat16 and yb.shape == (3, N)
    bits = xb.view(torch.int16).numpy().view(np.uint16)
    assert (yb.view(torch.int16).numpy().view(np.uint16) == lb(bits)).all()
    with pytest.raises(ValueError, match="contiguous"):
        lin(torch.from_numpy(acts(K, 3)).t())


def test_fp8_torch_tensors():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch without float8")
    s = scheme("fp8-dyn-token")
    t = qport.quantize_weights(weights(N, K), s)
    tt = {k: torch.from_numpy(v.data.copy()) for k, v in t.items()}
    tt["weight"] = tt["weight"].view(torch.float8_e4m3fn)
    x = acts(2, K)
    assert (qport.Linear("cpu", s, tt)(x) == qport.Linear("cpu", s, t)(x)).all()
    q = qport.kv_quantize(torch.from_numpy(x), 0.5)
    assert q.dtype == torch.float8_e4m3fn and q.shape == x.shape


# -- DLPack, custom ops, torch.compile -----------------------------------------

def test_from_dlpack_round_trips():
    x = acts(3, 16)
    b = qport.Buffer.from_array("cpu", x)
    t = torch.from_dlpack(b)  # torch asks for a versioned capsule
    assert t.data_ptr() == b.native()["ptr"] and t.dtype == torch.float16 and (t.numpy() == x).all()
    t[0, 0] = 7.0  # the same memory
    assert b.numpy()[0, 0] == 7.0
    # torch's own capsule into qport (DLPack path, not the torch-tensor one)
    src = torch.from_numpy(x.copy())

    class P:
        def __dlpack_device__(self):
            return src.__dlpack_device__()

        def __dlpack__(self, **kw):
            return src.__dlpack__(**kw)
    q = qport.as_buffer(P())
    assert q.native()["ptr"] == src.data_ptr() and (q.numpy() == x).all()
    # bf16 and fp8 keep their DLPack type codes
    xb = torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
    bb = qport.as_buffer(xb)
    assert bb.dtype == "bf16"
    back = torch.from_dlpack(bb)
    assert back.dtype == torch.bfloat16 and torch.equal(back, xb) and back.data_ptr() == xb.data_ptr()
    if hasattr(torch, "float8_e4m3fn"):
        f8 = torch.from_numpy(np.arange(16, dtype=np.uint8)).view(torch.float8_e4m3fn)
        b8 = qport.as_buffer(f8)
        assert b8.dtype == "fp8_e4m3fn"
        try:
            t8 = torch.from_dlpack(b8)
        except (BufferError, RuntimeError, TypeError) as e:  # an older torch without DLPack fp8
            pytest.skip(f"torch {torch.__version__} does not import fp8 through DLPack: {e}")
        assert t8.dtype == torch.float8_e4m3fn and torch.equal(t8.view(torch.uint8), f8.view(torch.uint8))
    with pytest.raises(ValueError, match="contiguous"):
        qport.as_buffer(torch.from_numpy(acts(4, 8)).t())


def _int8_layer(seed=0, n=N, k=K, device="cpu"):
    s = scheme("int8-dyn-sym")
    return qport.Linear(device, s, qport.quantize_weights(weights(n, k, seed=seed), s))


def test_custom_op_schema_and_fake():
    lin = _int8_layer()
    x = torch.from_numpy(acts(3, K))
    torch.library.opcheck(torch.ops.qport.linear.default, (x, lin.op_id),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    y = torch.ops.qport.linear(x, lin.op_id)
    assert (y.numpy() == lin(x.numpy())).all()
    assert qport.Linear(torch.device("cpu"), scheme("int8-dyn-sym"),
                        qport.quantize_weights(weights(N, K), scheme("int8-dyn-sym"))).device.backend == "cpu"
    # CPU tensors into a layer of another device: the host path, through the op too
    for d in qport.devices():
        if d.backend != "cpu":
            other = _int8_layer(device=d)
            assert (other(x).numpy() == other(x.numpy())).all() and (other(x).numpy() == y.numpy()).all()


def test_linear_under_torch_compile():
    a, b = _int8_layer(0, K, K), _int8_layer(1, N, K)
    x = acts(4, K)

    def f(t):
        return b(torch.relu(a(t)) * 0.5)
    want = b(np.maximum(a(x), 0) * np.float16(0.5))
    eager = f(torch.from_numpy(x))
    assert (eager.numpy() == want).all()
    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True)  # fullgraph: the layers are ops in the graph, no graph breaks
    for m in (4, 7, 1):  # new shapes recompile against the fake implementation
        xm = acts(m, K, seed=m)
        got = cf(torch.from_numpy(xm))
        assert got.shape == (m, N) and got.dtype == torch.float16
        assert (got.numpy() == b(np.maximum(a(xm), 0) * np.float16(0.5))).all()


def test_moe_under_torch_compile(cli, demo_moe):
    import os
    from conftest import run_cli
    d8 = demo_moe + "-int8"
    if not os.path.isdir(d8):
        r = run_cli(cli, "quantize", demo_moe, d8, "--scheme", "int8-dyn-sym")
        assert r.returncode == 0, r.stderr
    m = qport.Model(d8)
    moe = m.moe(m.moe_blocks[0], "cpu")
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (5, moe.H)).astype(np.float16)
    lg = rng.normal(size=(5, moe.E)).astype(np.float32)
    want = moe(x, lg)
    ids, w = qport.moe_route(lg, top_k=moe.top_k, renormalize=True)
    torch._dynamo.reset()
    cf = torch.compile(lambda t, g: moe(t, g), fullgraph=True)
    got = cf(torch.from_numpy(x), torch.from_numpy(lg))
    assert got.dtype == torch.float16 and (got.numpy() == want).all()
    ct = torch.compile(lambda t, i, ww: moe(t, topk_ids=i, topk_weights=ww), fullgraph=True)
    got = ct(torch.from_numpy(x), torch.from_numpy(ids), torch.from_numpy(w))
    assert (got.numpy() == moe(x, topk_ids=ids, topk_weights=w)).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU for torch")
def test_cuda_tensors_without_copy():
    cuda = [d for d in qport.devices() if d.backend == "cuda"]
    if not cuda:
        pytest.skip("no qport CUDA device")
    lin_ref = _int8_layer()
    x = acts(4, K)
    want = lin_ref(x)
    s = scheme("int8-dyn-sym")
    t = qport.quantize_weights(weights(N, K), s)
    xt = torch.from_numpy(x).cuda()
    for dev in (cuda[0], torch.device("cuda")):  # qport's stream (events order it) / torch's stream
        lin = qport.Linear(dev, s, t)
        y = lin(xt)
        assert y.device == xt.device and (y.cpu().numpy() == want).all()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            y2 = lin(xt)
        side.synchronize()
        assert (y2.cpu().numpy() == want).all()
    b = qport.as_buffer(xt)
    assert b.native()["ptr"] == xt.data_ptr() and b.__dlpack_device__() == (2, xt.device.index or 0)
    back = torch.from_dlpack(b)
    assert back.data_ptr() == xt.data_ptr()
