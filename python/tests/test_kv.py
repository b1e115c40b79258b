"""The fp8 KV cache: quantize / dequantize on the host reference and on
every device with KV kernels, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import qport


def _x(dtype=np.float16):
    x = np.random.default_rng(5).normal(scale=3, size=(4, 8, 16)).astype(np.float32)
    x[0, 0, :4] = [500, -500, 0, np.nan]  # saturation and NaN
    return x.astype(dtype)


def test_round_trip():
    x = np.array([1.0, -2.5, 0.0, 1000.0], np.float32)
    q = qport.kv_quantize(x, 0.5)
    assert q.shape == x.shape and q.dtype.itemsize == 1
    y = qport.kv_dequantize(q, 0.5, "f32")
    assert y.dtype == np.float32 and y.tolist() == [1.0, -2.5, 0.0, 224.0]  # 448 * 0.5: saturated


@pytest.mark.parametrize("dt", ["f16", "f32", "bf16"])
def test_devices_equal_reference(devices, dt):
    x = _x(np.float32 if dt != "f16" else np.float16)
    if dt == "bf16":
        x = (x.view(np.uint32) >> 16).astype(np.uint16)  # bf16 bits
    q = qport.kv_quantize(x, 0.25)
    back = qport.kv_dequantize(q, 0.25, dt)
    for d in devices:
        try:
            qd = qport.kv_quantize(x, 0.25, device=d)
            bd = qport.kv_dequantize(q, 0.25, dt, device=d)
        except qport.UnsupportedError:
            continue
        assert (np.asarray(qd).view(np.uint8) == np.asarray(q).view(np.uint8)).all(), f"{d}"
        assert (np.asarray(bd).view(np.uint8) == np.asarray(back).view(np.uint8)).all(), f"{d}"


def test_empty():
    assert qport.kv_quantize(np.zeros((0, 4), np.float16), 1.0).shape == (0, 4)
