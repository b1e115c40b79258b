"""The fp8 e4m3 KV cache (vLLM's reshape_and_cache with kv_cache_dtype
fp8_e4m3 and per-tensor k_scale / v_scale): qp_ref_kv_* on the host, or
qp_kv_* on a device."""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _abi
from ._arrays import as_host, returner, storage_dtype
from ._handle import context
from .device import Device, device as _device

_KV_DTYPES = ("f16", "bf16", "f32")


def _scale(scale: float) -> float:
    s = float(scale)
    if not (s > 0 and np.isfinite(s)):
        raise ValueError(f"scale {scale}: want a finite value > 0")
    return s


def _on_device(dev: Device, fn: Any, dt: str, src: np.ndarray, n: int, scale: float, out: np.ndarray) -> None:
    """Upload src, run fn on the device's buffers, download into out."""
    ctx = context()
    bufs = []
    try:
        for nbytes in (src.nbytes, out.nbytes):
            handle = ctypes.c_void_p()
            ctx.check(_abi.lib.qp_buffer_create(dev.ptr, nbytes, ctypes.byref(handle)))
            bufs.append(handle.value)
        ctx.check(_abi.lib.qp_buffer_upload(bufs[0], 0, src.ctypes.data, src.nbytes))
        ctx.check(fn(dev.ptr, _abi.DT[dt], bufs[0], n, scale, bufs[1]))
        ctx.check(_abi.lib.qp_buffer_download(bufs[1], 0, out.ctypes.data, out.nbytes))
    finally:
        for b in bufs:
            _abi.lib.qp_buffer_destroy(b)


def kv_quantize(x: Any, scale: float, device: Device | str | None = None) -> Any:
    """fp8 e4m3fn codes of x / scale (correctly rounded, RNE, saturating to
    +-448): x in f16 / bf16 / f32 (numpy or torch), codes of x's shape as
    ml_dtypes float8_e4m3fn (numpy, when installed; else uint8) or
    torch.float8_e4m3fn. device None: the cpu reference on the host.

    >>> q = qport.kv_quantize(np.array([1.0, -2.5], np.float32), 0.5)
    >>> qport.kv_dequantize(q, 0.5, "f32")
    array([ 1. , -2.5], dtype=float32)
    """
    a, dt = as_host(x, "x", raw_as="bf16")
    if dt not in _KV_DTYPES:
        raise TypeError(f"x: f16, bf16 or f32, not {dt}")
    s = _scale(scale)
    out = np.empty(a.shape, np.uint8)
    n = a.size
    if n:
        if device is None:
            ctx = context()
            ctx.check(_abi.lib.qp_ref_kv_quantize(ctx.ptr, _abi.DT[dt], a.ctypes.data, n, s, out.ctypes.data))
        else:
            _on_device(_device(device), _abi.lib.qp_kv_quantize, dt, a, n, s, out)
    return returner(x, dt)(out, "fp8_e4m3fn")


def kv_dequantize(q: Any, scale: float, dtype: str = "f16", device: Device | str | None = None) -> Any:
    """value(q) * scale rounded to `dtype` ("f16", "bf16", "f32"): q the
    fp8 e4m3fn codes (uint8, ml_dtypes float8_e4m3fn, or torch), the result
    of q's kind and shape."""
    a, dt = as_host(q, "q")
    if dt not in ("uint8", "fp8_e4m3fn"):
        raise TypeError(f"q: fp8 e4m3fn codes (uint8 or float8_e4m3fn), not {dt}")
    if dtype not in _KV_DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(_KV_DTYPES)}")
    s = _scale(scale)
    out = np.empty(a.shape, storage_dtype(dtype))
    n = a.size
    if n:
        if device is None:
            ctx = context()
            ctx.check(_abi.lib.qp_ref_kv_dequantize(ctx.ptr, _abi.DT[dtype], a.ctypes.data, n, s, out.ctypes.data))
        else:
            _on_device(_device(device), _abi.lib.qp_kv_dequantize, dtype, a, n, s, out)
    return returner(q, dtype)(out, dtype)
