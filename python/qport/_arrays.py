"""numpy / torch arrays <-> the C library's host buffers.

The C library reads and writes raw row-major memory and trusts its sizes,
so everything is checked here first: the dtype (one qport dtype per array,
never guessed from raw bits), C contiguity, alignment, the shape, and the
byte count against qp_tensor_bytes. Nothing is converted silently: a wrong
dtype raises TypeError, a non-contiguous array ValueError.

bf16 and fp8 have no numpy dtype: ml_dtypes' bfloat16 / float8_* are used
when ml_dtypes is installed; otherwise pass raw bits (uint16 for bf16,
uint8 for fp8) with the format named, qport.Tensor(bits, "bf16"), or for
activations uint16 bits to a bf16 layer.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

from . import _abi

_ml: Any
try:  # optional: numpy dtypes for bf16 and fp8
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - depends on the environment
    _ml = None


def _torch():
    """torch if it is already imported (never imported here: it is slow)."""
    import sys
    return sys.modules.get("torch")


# qport dtype -> (raw numpy storage dtype, ml_dtypes attribute or None)
_STORAGE: dict[str, tuple[Any, str | None]] = {
    "f32": (np.float32, None),
    "f16": (np.float16, None),
    "bf16": (np.uint16, "bfloat16"),
    "fp8_e4m3fn": (np.uint8, "float8_e4m3fn"),
    "fp8_e4m3fnuz": (np.uint8, "float8_e4m3fnuz"),
    "fp8_e5m2": (np.uint8, "float8_e5m2"),
    "e8m0": (np.uint8, "float8_e8m0fnu"),
    "int8": (np.int8, None),
    "uint8": (np.uint8, None),
    "int32": (np.int32, None),
    "int64": (np.int64, None),
}

# numpy dtype name -> qport dtype (uint16 is absent on purpose: fp16 or bf16 bits?)
_FROM_NUMPY = {"float32": "f32", "float16": "f16", "int8": "int8", "uint8": "uint8", "int32": "int32",
               "int64": "int64", "bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fnuz": "fp8_e4m3fnuz",
               "float8_e5m2": "fp8_e5m2", "float8_e8m0fnu": "e8m0"}

# torch dtype name (str(torch.float16) minus "torch.") -> qport dtype
_FROM_TORCH = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int8": "int8", "uint8": "uint8",
               "int32": "int32", "int64": "int64", "float8_e4m3fn": "fp8_e4m3fn", "float8_e4m3fnuz": "fp8_e4m3fnuz",
               "float8_e5m2": "fp8_e5m2", "float8_e8m0fnu": "e8m0"}


def storage_dtype(dt: str) -> Any:
    try:
        return _STORAGE[dt][0]
    except KeyError:
        raise ValueError(f"qport dtype {dt!r} has no host storage here (one of {sorted(_STORAGE)})") from None


def nice_dtype(dt: str) -> Any:
    """The numpy dtype an array of `dt` is returned in: ml_dtypes' when it
    exists and is installed, else the raw storage dtype."""
    raw, ml = _STORAGE[dt]
    if ml and _ml is not None and hasattr(_ml, ml):
        return np.dtype(getattr(_ml, ml))
    return np.dtype(raw)


class Tensor:
    """An array and the qport dtype of its elements, for formats numpy has
    no dtype for: `qport.Tensor(bits_uint16, "bf16")`,
    `qport.Tensor(codes_uint8, "fp8_e4m3fn")`. `quantize_weights` returns
    these. `.numpy()` gives the array (with an ml_dtypes dtype where one
    exists and ml_dtypes is installed).

    >>> t = Tensor(np.zeros((2, 4), np.uint8), "fp8_e4m3fn")
    >>> t.shape, t.dtype
    ((2, 4), 'fp8_e4m3fn')
    """

    __slots__ = ("data", "dtype")

    def __init__(self, data: np.ndarray, dtype: str) -> None:
        if not isinstance(data, np.ndarray):
            raise TypeError(f"qport.Tensor wants a numpy array, got {type(data).__name__}")
        raw = storage_dtype(dtype)
        if data.dtype.itemsize != np.dtype(raw).itemsize:
            raise TypeError(f"qport.Tensor: {dtype} elements are {np.dtype(raw).itemsize} byte(s), "
                            f"the array's {data.dtype} are {data.dtype.itemsize}")
        self.data = data
        self.dtype = dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def numpy(self) -> np.ndarray:
        return self.data.view(nice_dtype(self.dtype))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return f"qport.Tensor(shape={self.shape}, dtype={self.dtype!r})"


def _check_layout(a: np.ndarray, what: str) -> None:
    if not a.flags.c_contiguous:
        raise ValueError(f"{what}: the array is not C-contiguous (use np.ascontiguousarray / .contiguous())")
    if not a.flags.aligned:
        raise ValueError(f"{what}: the array is not aligned")


def _from_torch(t: Any, what: str) -> tuple[np.ndarray, str]:
    name = str(t.dtype).replace("torch.", "")
    dt = _FROM_TORCH.get(name)
    if dt is None:
        raise TypeError(f"{what}: torch dtype {t.dtype} is not one qport takes ({', '.join(sorted(_FROM_TORCH))})")
    if t.device.type != "cpu":
        raise ValueError(f"{what}: the tensor is on {t.device}; qport takes CPU tensors (.cpu())")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (.contiguous())")
    torch = _torch()
    t = t.detach()
    raw = storage_dtype(dt)
    if dt == "bf16":
        a = t.view(torch.int16).numpy().view(np.uint16)
    elif np.dtype(raw).itemsize == 1 and dt not in ("int8", "uint8"):
        a = t.view(torch.uint8).numpy()
    else:
        a = t.numpy()
    return a, dt


def is_torch(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def as_host(x: Any, what: str, raw_as: str | None = None) -> tuple[np.ndarray, str]:
    """(C-contiguous numpy array in raw storage, qport dtype) of a numpy
    array, torch CPU tensor or qport.Tensor. `raw_as`: the dtype uint16 bits
    stand for (a bf16 or fp16 layer's activations)."""
    if isinstance(x, Tensor):
        a, dt = x.data, x.dtype
    elif is_torch(x):
        a, dt = _from_torch(x, what)
    elif isinstance(x, np.ndarray):
        a = x
        found = _FROM_NUMPY.get(a.dtype.name)
        if a.dtype == np.uint16 and raw_as in ("bf16", "f16"):
            found = raw_as
        if found is None:
            hint = " (bf16 bits: qport.Tensor(a, 'bf16'))" if a.dtype == np.uint16 else ""
            raise TypeError(f"{what}: numpy dtype {a.dtype} is not one qport takes "
                            f"({', '.join(sorted(_FROM_NUMPY))}){hint}")
        dt = found
    else:
        raise TypeError(f"{what}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    _check_layout(a, what)
    raw = storage_dtype(dt)
    if a.dtype != raw:
        a = a.view(raw)  # same item size: checked by dtype mapping / Tensor
    return a, dt


def c_tensor(name: str, x: Any) -> tuple[_abi.Tensor, np.ndarray]:
    """A qp_tensor over x's memory and the array that must stay alive while
    the C call runs."""
    a, dt = as_host(x, f"tensor {name!r}")
    if a.ndim > _abi.QP_TENSOR_MAX_DIMS:
        raise ValueError(f"tensor {name!r}: {a.ndim} dimensions (qport takes at most {_abi.QP_TENSOR_MAX_DIMS})")
    t = _abi.Tensor()
    t.name = name.encode()
    t.dtype = _abi.DT[dt]
    t.ndim = a.ndim
    for i, n in enumerate(a.shape):
        t.shape[i] = n
    t.data = a.ctypes.data if a.size else None
    if _abi.lib.qp_tensor_bytes(ctypes.byref(t)) != a.nbytes:
        raise ValueError(f"tensor {name!r}: {a.nbytes} bytes do not hold shape {a.shape} of {dt}")
    return t, a


def tensor_from_c(t: _abi.Tensor) -> Tensor:
    """A copy of a qp_tensor's data (the C memory belongs to its owner)."""
    dt = _abi.DTYPES[t.dtype]
    shape = tuple(t.shape[i] for i in range(t.ndim))
    raw = np.dtype(storage_dtype(dt))
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    out = np.empty(shape, raw)
    if n and t.data:
        ctypes.memmove(out.ctypes.data, t.data, n * raw.itemsize)
    return Tensor(out, dt)


def returner(x: Any, dt_in: str) -> Callable[[np.ndarray, str], Any]:
    """How to hand a result back in x's kind: torch for torch, numpy with
    x's own dtype family (ml_dtypes bf16, float16, or raw uint16 bits when
    x came as bits)."""
    if is_torch(x):
        torch = _torch()

        def back_torch(out: np.ndarray, dt: str) -> Any:
            if dt == "bf16":
                return torch.from_numpy(out.view(np.int16)).view(torch.bfloat16)
            t = torch.from_numpy(out)
            ml = _STORAGE[dt][1]
            if ml and ml != "bfloat16" and hasattr(torch, ml):
                t = t.view(getattr(torch, ml))
            return t
        return back_torch
    raw_bits = isinstance(x, np.ndarray) and x.dtype in (np.uint16, np.uint8) or isinstance(x, Tensor)

    def back_numpy(out: np.ndarray, dt: str) -> Any:
        return out if raw_bits else out.view(nice_dtype(dt))
    return back_numpy
