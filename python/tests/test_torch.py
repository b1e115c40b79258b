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
