"""Quantized linear layers on a device (qp_linear_*)."""
from __future__ import annotations

import ctypes
from typing import Any, Mapping, Sequence

import numpy as np

from . import _abi, _torch_ops
from ._arrays import Tensor, as_host, c_tensor, is_torch, nice_dtype, returner, storage_dtype
from ._handle import Handle, context
from .buffer import Buffer, as_buffer, enqueue_sync, keep_until_sync, cl_out_event, run_torch_cuda, _import
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
                 shard_rows: Sequence[int] | None = None, layer: str | None = None, act_ue8m0: bool = False,
                 max_m: int = 0) -> None:
        """N, K: the output and input features; by default from the
        tensors (`weight` [N, K], packed weights [N, K/2], QQQ's `B`
        [K/16, 2N], W4A16's K-major weight). act_dtype: "f16", "bf16" or
        "f32" (the dtype of x, bias and y). path: force a code path ("gemv",
        "tiled", "int-dot", "no-int-dot"). shard_rows: the rows of each shard
        of a fused layer with per-shard scales. max_m: the rows the layer's
        scratch is reserved for at creation (0: 16); enqueues of up to that
        many rows allocate nothing. device may also be a torch.device
        ("cuda:0"): qport's device over that GPU and torch's current stream
        (qport.torch_device)."""
        if not isinstance(scheme, Scheme):
            raise TypeError(f"scheme: a qport.Scheme (Config.resolve), not {type(scheme).__name__}")
        if not isinstance(tensors, Mapping):
            raise TypeError(f"tensors: a dict of checkpoint name -> array, not {type(tensors).__name__}")
        dev = device if isinstance(device, Device) else _device(_torch_ops.device_spec(device), scheme)
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
        if not 0 <= int(max_m) <= 1 << 24:
            raise ValueError(f"max_m {max_m}: 0 (16) .. {1 << 24}")
        o.max_m = int(max_m)
        arr, n_t, keep = c_tensors(tensors)
        p = ctypes.c_void_p()
        self._ctx.check(_abi.lib.qp_linear_create(dev.ptr, ctypes.byref(scheme._c), int(N), int(K), arr, n_t,
                                                  ctypes.byref(o), ctypes.byref(p)))
        del keep, rows
        self.N, self.K = int(N), int(K)
        self.act_dtype = act_dtype
        self._h = Handle(p.value, _abi.lib.qp_linear_destroy, "qport.Linear")
        self.out_dtype = _abi.DTYPES[_abi.lib.qp_linear_out_dtype(p.value)]
        self.op_id = _torch_ops.track(self)

    @classmethod
    def _adopt(cls, ptr: int | None, dev: Device, scheme: Scheme, N: int, K: int, act_dtype: str) -> Linear:
        self = cls.__new__(cls)
        self._ctx = context()
        self.device, self.scheme, self.N, self.K, self.act_dtype = dev, scheme, N, K, act_dtype
        self._h = Handle(ptr, _abi.lib.qp_linear_destroy, "qport.Linear")
        self.out_dtype = _abi.DTYPES[_abi.lib.qp_linear_out_dtype(ptr)]
        self.op_id = _torch_ops.track(self)
        return self

    def __call__(self, x: Any) -> Any:
        """y = layer(x): x [..., K] in the layer's act_dtype; y [..., N] of
        the same kind (QQQ: fp16), after the work is done.
        x: a numpy array (float16 / float32 / ml_dtypes.bfloat16 or uint16
        bf16 bits) or qport.Tensor -> numpy; a torch tensor -> torch,
        through the custom op torch.ops.qport.linear (CPU tensors; CUDA
        tensors of the layer's GPU without a copy, ordered on
        torch.cuda.current_stream()); a qport.Buffer or an object with
        __dlpack__ / __cuda_array_interface__: host memory (any layer) -> a
        numpy array; memory of the layer's device -> a qport.Buffer."""
        if is_torch(x):
            return _torch_ops.linear(self, x)
        if not isinstance(x, (np.ndarray, Tensor)) and (
                isinstance(x, Buffer) or hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__")):
            if not hasattr(x, "__cuda_array_interface__") and x.__dlpack_device__()[0] == 1:
                return self._forward_host_memory(x)
            y = self.enqueue(x)
            self.device.synchronize()
            return y
        return self._forward_host(x)

    def _forward_host_memory(self, x: Any) -> np.ndarray:
        """Host memory that comes through DLPack (a cpu-device Buffer
        included), wrapped without a copy; y as a numpy array."""
        bx = as_buffer(x, _device("cpu"), dtype=self.act_dtype, what="x")
        _check_act(bx.shape, self.K, bx.dtype, self.act_dtype)
        lead = bx.shape[:-1]
        M = int(np.prod(lead, dtype=np.int64)) if lead else 1
        out = np.empty(lead + (self.N,), storage_dtype(self.out_dtype))
        if M:
            if self.device.backend == "cpu":
                self.enqueue(bx, out)
                self.device.synchronize()
            else:
                with bx._h.use(), self._h.use() as p:
                    self._ctx.check(_abi.lib.qp_linear_forward(p, bx.native()["ptr"], M, out.ctypes.data))
        return out.view(nice_dtype(self.out_dtype))

    forward = __call__

    def _forward_host(self, x: Any) -> Any:
        a, lead, M = activations(x, self.K, self.act_dtype)
        out = np.empty(lead + (self.N,), storage_dtype(self.out_dtype))
        if M:
            if self.device.backend == "cpu":
                # the cpu device's memory is host memory: x and y wrapped, no copies
                bx = _import(self.device, "x", host_ptr=a.ctypes.data, size=a.nbytes)
                try:
                    by = _import(self.device, "y", host_ptr=out.ctypes.data, size=out.nbytes)
                    try:
                        with self._h.use() as p:
                            self._ctx.check(_abi.lib.qp_linear_enqueue(p, bx, M, by, None))
                        self._ctx.check(_abi.lib.qp_device_synchronize(self.device.ptr))
                    finally:
                        _abi.lib.qp_buffer_destroy(by)
                finally:
                    _abi.lib.qp_buffer_destroy(bx)
            else:
                with self._h.use() as p:
                    self._ctx.check(_abi.lib.qp_linear_forward(p, a.ctypes.data, M, out.ctypes.data))
        return returner(x, self.act_dtype)(out, self.out_dtype)

    def _forward_torch(self, x: Any) -> Any:
        """The custom op's kernel: a torch tensor in, a new one out."""
        if x.device.type == "cuda":
            torch = _torch_ops.torch_module()
            y = torch.empty(tuple(x.shape[:-1]) + (self.N,), dtype=_torch_ops.torch_dtype(self.out_dtype),
                            device=x.device)
            _check_act(x.shape, self.K, _torch_ops.qport_dtype(x, self.act_dtype), self.act_dtype)
            M = int(np.prod(x.shape[:-1], dtype=np.int64)) if x.dim() > 1 else 1
            if M:
                run_torch_cuda(self.device, [x], [y], lambda bufs, sync: self._enqueue_raw(bufs[0], M, bufs[1], sync))
            return y
        return self._forward_host(x)

    def _enqueue_raw(self, bx: int, M: int, by: int, sync: Any) -> None:
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_linear_enqueue(p, bx, M, by, ctypes.byref(sync) if sync is not None else None))

    def enqueue(self, x: Any, y: Any = None, *, M: int | None = None, sync: Mapping[str, Any] | None = None) -> Any:
        """Enqueues y = layer(x) on device memory and returns y without
        waiting (qp_linear_enqueue); Device.synchronize() or an Event waits.
        x: a qport.Buffer of the layer's device, or memory as_buffer wraps
        without a copy (a CUDA tensor, __dlpack__ / __cuda_array_interface__,
        host arrays on the cpu device), x.shape[-1] == K (or M rows given);
        y: the same, or None for a new Buffer [..., N] of out_dtype. What is
        wrapped here is kept alive until the device is synchronised. sync:
        the fields of qp_enqueue_sync ({"cuda_wait_event": ev, ...,
        "cl_out_event": True}); with cl_out_event the call returns (y,
        cl_event)."""
        dev = self.device
        bx = as_buffer(x, dev, dtype=self.act_dtype, what="x")
        if bx.dtype != self.act_dtype:
            raise TypeError(f"x: the layer computes {self.act_dtype} activations, x is {bx.dtype}")
        if M is None:
            _check_act(bx.shape, self.K, bx.dtype, self.act_dtype)
            lead = bx.shape[:-1]
            M = int(np.prod(lead, dtype=np.int64)) if lead else 1
        else:
            M = int(M)
            lead = (M,)
        if not 0 < M < 2**31:
            raise ValueError(f"x: M = {M} rows")
        if y is None:
            by = Buffer.empty(dev, tuple(lead) + (self.N,), self.out_dtype)
        else:
            by = as_buffer(y, dev, dtype=self.out_dtype, writable=True, what="y")
            if by.dtype != self.out_dtype:
                raise TypeError(f"y: the layer writes {self.out_dtype}, y is {by.dtype}")
        s, keep = enqueue_sync(sync)
        with bx._h.use() as px, by._h.use() as py:
            self._enqueue_raw(px, M, py, s)
        keep_until_sync(dev, bx, by, self)
        ev = cl_out_event(keep)
        return (by, ev) if sync and sync.get("cl_out_event") else by

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


def _check_act(shape: Sequence[int], K: int, dt: str, act: str, what: str = "x") -> None:
    if dt != act:
        raise TypeError(f"{what}: the layer computes {act} activations, {what} is {dt} "
                        f"(create the layer with act_dtype={dt!r} or convert {what})")
    if len(shape) < 1 or shape[-1] != K:
        raise ValueError(f"{what}: shape {tuple(shape)}, want (..., {K})")


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
    ws = tensors.get("weight_shape")  # compressed-tensors: [N, K] itself
    if ws is not None and hasattr(ws, "shape") and tuple(ws.shape) == (2,):
        n, k = (int(v) for v in np.asarray(ws.numpy() if hasattr(ws, "numpy") else ws).reshape(-1))
        return n, k
    wp = shape("weight_packed")  # compressed-tensors without weight_shape
    if wp and len(wp) == 2:
        elem = scheme.weight.dtype if scheme.weight else None
        if kind == "nvfp4" or kind == "nvfp4-a16" or elem == "fp4_e2m1":
            return wp[0], wp[1] * 2
        bits = 8 if elem in ("int8", "uint8") else 4
        return wp[0], wp[1] * (32 // bits)
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
