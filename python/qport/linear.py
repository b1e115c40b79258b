"""Quantized linear layers on a device (qp_linear_*)."""
from __future__ import annotations

import ctypes
from typing import Any, Mapping, Sequence

import numpy as np

from . import _abi
from ._arrays import as_host, c_tensor, returner, storage_dtype
from ._handle import Handle, context
from .config import Scheme
from .device import Device, device as _device

ACT_DTYPES = ("f16", "bf16", "f32")
_PATHS = {"auto": 0, "gemv": 1, "tiled": 2, "int-dot": 4, "no-int-dot": 8}


def act_dtype_arg(act_dtype: str, allowed: Sequence[str] = ACT_DTYPES) -> int:
    if act_dtype not in allowed:
        raise ValueError(f"act_dtype {act_dtype!r}: one of {', '.join(allowed)}")
    return _abi.DT[act_dtype]


def c_tensors(tensors: Mapping[str, Any]) -> tuple[Any, int, list]:
    if not isinstance(tensors, Mapping):
        raise TypeError(f"tensors: a dict of checkpoint name -> array, not {type(tensors).__name__}")
    arr = (_abi.Tensor * max(1, len(tensors)))()
    keep = []
    for i, (name, v) in enumerate(tensors.items()):
        if not isinstance(name, str):
            raise TypeError(f"tensor names are strings, got {name!r}")
        arr[i], a = c_tensor(name, v)
        keep.append(a)
    return arr, len(tensors), keep


def activations(x: Any, K: int, act: str, what: str = "x") -> tuple[np.ndarray, tuple[int, ...], int]:
    """x as a C buffer of rows of K elements in the layer's dtype: the
    array, its leading shape, and M (rows)."""
    a, dt = as_host(x, what, raw_as=act)
    if dt != act:
        raise TypeError(f"{what}: the layer computes {act} activations, {what} is {dt} "
                        f"(create the layer with act_dtype={dt!r} or convert {what})")
    if a.ndim < 1 or a.shape[-1] != K:
        raise ValueError(f"{what}: shape {tuple(a.shape)}, want (..., {K})")
    lead = tuple(a.shape[:-1])
    M = int(np.prod(lead, dtype=np.int64)) if lead else 1
    if M > 2**31 - 1:
        raise ValueError(f"{what}: {M} rows is more than qport takes")
    return a, lead, M


class Linear:
    """A quantized linear layer on a device: y = x W^T (+ bias) computed as
    vLLM computes it for `scheme`.

    `tensors` maps checkpoint names ("weight", "weight_scale",
    "input_scale", "B", "s_channel", "bias", ...) to numpy arrays, torch CPU
    tensors or qport.Tensors (quantize_weights gives them). The tensors are
    copied: later changes to them do not affect the layer.

    >>> cfg = qport.load_config("tests/configs/llama-w8a8-int8-kv.json")
    >>> s = cfg.resolve("model.layers.0.self_attn.qkv_proj")
    >>> w = np.random.default_rng(0).normal(size=(256, 128)).astype(np.float32)
    >>> lin = qport.Linear("cpu", s, qport.quantize_weights(w, s))
    >>> lin(np.ones((4, 128), np.float16)).shape
    (4, 256)
    """

    def __init__(self, device: Device | str | None, scheme: Scheme, tensors: Mapping[str, Any], *,
                 N: int | None = None, K: int | None = None, act_dtype: str = "f16", path: str = "auto",
                 shard_rows: Sequence[int] | None = None, layer: str | None = None, act_ue8m0: bool = False) -> None:
        """N, K: the output and input features; by default from the
        tensors (`weight` [N, K], packed weights [N, K/2], QQQ's `B`
        [K/16, 2N], W4A16's K-major weight). act_dtype: "f16", "bf16" or
        "f32" (the dtype of x, bias and y). path: force a code path ("gemv",
        "tiled", "int-dot", "no-int-dot"). shard_rows: the rows of each shard
        of a fused layer with per-shard scales."""
        if not isinstance(scheme, Scheme):
            raise TypeError(f"scheme: a qport.Scheme (Config.resolve), not {type(scheme).__name__}")
        if not isinstance(tensors, Mapping):
            raise TypeError(f"tensors: a dict of checkpoint name -> array, not {type(tensors).__name__}")
        dev = device if isinstance(device, Device) else _device(device, scheme)
        self._ctx = context()
        self.device = dev
        self.scheme = scheme
        if N is None or K is None:
            n, k = _infer_nk(scheme, tensors)
            N = n if N is None else N
            K = k if K is None else K
        if not (0 < int(N) < 2**31 and 0 < int(K) < 2**31):
            raise ValueError(f"bad layer shape N = {N}, K = {K}")
        if path not in _PATHS:
            raise ValueError(f"path {path!r}: one of {', '.join(_PATHS)}")
        o = _abi.LinearOptions()
        _abi.lib.qp_linear_options_init(ctypes.byref(o))
        o.act_dtype = act_dtype_arg(act_dtype)
        o.path = _PATHS[path]
        lname = (layer if layer is not None else scheme.layer or "").encode()
        o.layer = lname
        rows = None
        if shard_rows is not None and len(shard_rows):
            rs = [int(r) for r in shard_rows]
            # ctypes would wrap an int past 32 bits silently; the library
            # checks the rest (negative rows, a sum other than N)
            if any(not -2**31 <= r < 2**31 for r in rs):
                raise ValueError(f"shard_rows: {rs} has rows outside a C int")
            rows = (ctypes.c_int * len(rs))(*rs)
            o.shard_rows = rows
            o.n_shards = len(rs)
        o.act_ue8m0 = int(bool(act_ue8m0))
        arr, n_t, keep = c_tensors(tensors)
        p = ctypes.c_void_p()
        self._ctx.check(_abi.lib.qp_linear_create(dev.ptr, ctypes.byref(scheme._c), int(N), int(K), arr, n_t,
                                                  ctypes.byref(o), ctypes.byref(p)))
        del keep, rows
        self.N, self.K = int(N), int(K)
        self.act_dtype = act_dtype
        self._h = Handle(p.value, _abi.lib.qp_linear_destroy, "qport.Linear")
        self.out_dtype = _abi.DTYPES[_abi.lib.qp_linear_out_dtype(p.value)]

    @classmethod
    def _adopt(cls, ptr: int | None, dev: Device, scheme: Scheme, N: int, K: int, act_dtype: str) -> Linear:
        self = cls.__new__(cls)
        self._ctx = context()
        self.device, self.scheme, self.N, self.K, self.act_dtype = dev, scheme, N, K, act_dtype
        self._h = Handle(ptr, _abi.lib.qp_linear_destroy, "qport.Linear")
        self.out_dtype = _abi.DTYPES[_abi.lib.qp_linear_out_dtype(ptr)]
        return self

    def __call__(self, x: Any) -> Any:
        """y = layer(x): x [..., K] in the layer's act_dtype (numpy float16 /
        float32 / ml_dtypes.bfloat16 or uint16 bf16 bits, or a torch CPU
        tensor); y [..., N] of the same kind (QQQ: fp16)."""
        a, lead, M = activations(x, self.K, self.act_dtype)
        out = np.empty(lead + (self.N,), storage_dtype(self.out_dtype))
        if M:
            with self._h.use() as p:
                self._ctx.check(_abi.lib.qp_linear_forward(p, a.ctypes.data, M, out.ctypes.data))
        return returner(x, self.act_dtype)(out, self.out_dtype)

    forward = __call__

    def describe(self, M: int = 1) -> str:
        """The code path the backend takes for M rows ("gemv int-dot", ...)."""
        buf = ctypes.create_string_buffer(256)
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_linear_describe(p, int(M), buf, len(buf)))
        return _abi.s(buf.value)

    def close(self) -> None:
        """Frees the layer now; calling it afterwards raises ValueError."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self) -> Linear:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<qport.Linear {self.scheme.kind} N={self.N} K={self.K} on {self.device}>"


def _infer_nk(scheme: Scheme, tensors: Mapping[str, Any]) -> tuple[int, int]:
    """N and K from the checkpoint tensors' shapes (the C library checks
    them again against the scheme's rules)."""
    def shape(name: str) -> tuple[int, ...] | None:
        v = tensors.get(name)
        return tuple(v.shape) if v is not None and hasattr(v, "shape") else None
    kind = scheme.kind
    b = shape("B")
    if kind == "qqq-w4a8" and b and len(b) == 2:
        return b[1] // 2, b[0] * 16
    w = shape("weight")
    if not w or len(w) != 2:
        raise ValueError("cannot tell N and K from the tensors (no 2-D 'weight'): pass N= and K=")
    if kind == "w4a16-int4":  # int32 [K][ceil(N/8)]: N is only known up to 8
        sc = shape("weight_scale")
        if sc and len(sc) == 2:
            return sc[1], w[0]
        raise ValueError("W4A16: pass N= and K= (the packed weight holds N only up to a multiple of 8)")
    elem = scheme.weight.dtype if scheme.weight else None
    if kind == "nvfp4" or elem == "fp4_e2m1":
        return w[0], w[1] * 2
    if elem in ("fp6_e2m3", "fp6_e3m2"):
        return w[0], w[1] * 4 // 3
    return w[0], w[1]
