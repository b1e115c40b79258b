"""DLPack (1.x and the legacy capsule) and __cuda_array_interface__ (v3)
in ctypes: reading what another library hands over, and handing qport
buffers out.

The structs mirror dlpack.h 1.1 (the data type codes of its fp8 formats
included). A capsule named "dltensor_versioned" holds a
DLManagedTensorVersioned, one named "dltensor" the legacy DLManagedTensor;
the consumer renames it "used_..." and calls the deleter when done. Nothing
here talks to a device: qport.buffer decides what the memory is."""
from __future__ import annotations

import ctypes as C
import threading
from typing import Any

# DLDeviceType
kDLCPU, kDLCUDA, kDLCUDAHost, kDLOpenCL, kDLVulkan, kDLCUDAManaged = 1, 2, 3, 4, 7, 13
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda-host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                11: "rocm-host", 13: "cuda-managed", 14: "oneapi", 15: "webgpu"}
# DLDataTypeCode
kDLInt, kDLUInt, kDLFloat, kDLBfloat = 0, 1, 2, 4
READ_ONLY, IS_COPIED = 1, 2
VERSION = (1, 1)  # what qport produces and reads (a larger minor is read: only enum values are added)

# (code, bits) <-> qport dtype
_TO_QP = {(kDLFloat, 32): "f32", (kDLFloat, 16): "f16", (kDLBfloat, 16): "bf16", (kDLInt, 8): "int8",
          (kDLUInt, 8): "uint8", (kDLInt, 32): "int32", (10, 8): "fp8_e4m3fn", (11, 8): "fp8_e4m3fnuz",
          (12, 8): "fp8_e5m2", (14, 8): "e8m0"}
_FROM_QP = {v: k for k, v in _TO_QP.items()}
RAW16 = (kDLUInt, 16)  # uint16: bf16 / fp16 bits, where the layer's dtype says which


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLPackVersion(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32)]


DELETER = C.CFUNCTYPE(None, C.c_void_p)


class DLManagedTensor(C.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(C.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", C.c_void_p), ("deleter", DELETER),
                ("flags", C.c_uint64), ("dl_tensor", DLTensor)]


# Capsule names: static C strings (a capsule keeps the pointer, not a copy)
NAME_V = C.c_char_p(b"dltensor_versioned")
NAME_LEGACY = C.c_char_p(b"dltensor")
USED_V = C.c_char_p(b"used_dltensor_versioned")
USED_LEGACY = C.c_char_p(b"used_dltensor")

_api = C.pythonapi
# borrowed-pointer variants (the capsule destructor gets a dying object: no refcounting there)
_IsValid = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p)(("PyCapsule_IsValid", _api))
_GetPointer = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", _api))
_GetName = C.PYFUNCTYPE(C.c_char_p, C.c_void_p)(("PyCapsule_GetName", _api))
_SetName = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_char_p)(("PyCapsule_SetName", _api))
CAPSULE_DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
_New = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_char_p, CAPSULE_DESTRUCTOR)(("PyCapsule_New", _api))


def dtype_to_dl(dt: str) -> tuple[int, int]:
    try:
        return _FROM_QP[dt]
    except KeyError:
        raise BufferError(f"qport dtype {dt} has no DLPack data type") from None


def dtype_from_dl(code: int, bits: int, lanes: int, raw_as: str | None, what: str) -> str:
    if lanes != 1:
        raise TypeError(f"{what}: DLPack vector type ({lanes} lanes); qport takes scalars")
    if (code, bits) == RAW16 and raw_as in ("bf16", "f16"):
        return raw_as
    dt = _TO_QP.get((code, bits))
    if dt is None:
        names = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
        raise TypeError(f"{what}: DLPack dtype {names.get(code, f'code {code}')}{bits} is not one qport takes "
                        f"({', '.join(sorted(_FROM_QP))})")
    return dt


# -- export --------------------------------------------------------------

# managed tensor address -> what it keeps alive (the buffer, the shape array,
# the struct itself); the deleter drops the entry
_live: dict[int, tuple[Any, ...]] = {}
_live_lock = threading.Lock()


@DELETER
def _deleter(addr: int | None) -> None:
    if addr:
        with _live_lock:
            _live.pop(addr, None)


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule: int | None) -> None:
    # an unconsumed capsule (still "dltensor[_versioned]") frees its tensor
    for name in (NAME_V, NAME_LEGACY):
        if _IsValid(capsule, name):
            p = _GetPointer(capsule, name)
            if p:
                _deleter(p)
            return


def export_capsule(owner: Any, data: int | None, device: tuple[int, int], shape: tuple[int, ...], dt: str,
                   byte_offset: int = 0, versioned: bool = True, read_only: bool = False) -> Any:
    """A capsule over `data` (compact row-major `shape` of qport dtype dt)
    that keeps `owner` alive until the consumer's deleter runs."""
    code, bits = dtype_to_dl(dt)
    nd = len(shape)
    shp = (C.c_int64 * max(1, nd))(*shape)
    m: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = m.dl_tensor
    n = 1
    for s in shape:
        n *= s
    t.data = data if n else None
    t.device = DLDevice(device[0], device[1])
    t.ndim = nd
    t.dtype = DLDataType(code, bits, 1)
    t.shape = C.cast(shp, C.POINTER(C.c_int64))
    t.strides = None  # compact, row-major
    t.byte_offset = byte_offset
    m.deleter = _deleter
    if versioned:
        m.version = DLPackVersion(*VERSION)
        m.flags = READ_ONLY if read_only else 0
    addr = C.addressof(m)
    with _live_lock:
        _live[addr] = (owner, shp, m)
    return _New(addr, NAME_V if versioned else NAME_LEGACY, _capsule_destructor)


# -- import --------------------------------------------------------------

class Imported:
    """A consumed DLPack tensor: the memory and its description. release()
    (or collection) calls the producer's deleter once."""

    __slots__ = ("data", "raw", "byte_offset", "device", "shape", "dl_dtype", "read_only", "_addr", "_deleter", "_obj",
                 "__weakref__")

    def __init__(self) -> None:
        self._addr = None
        self._deleter = None
        self._obj = None

    def release(self) -> None:
        addr, fn = self._addr, self._deleter
        self._addr = self._deleter = None
        self._obj = None
        if addr and fn:
            fn(addr)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass


def _compact(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> bool:
    if strides is None:
        return True
    want = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def consume(obj: Any, stream: Any, what: str) -> Imported:
    """Calls obj.__dlpack__ (asking for a versioned capsule first, as the
    array API standard says: max_version=(1, 1); a producer that does not
    take the keyword gets the legacy call) and takes ownership of the
    tensor. Non-compact strides raise ValueError (after releasing)."""
    kw = {} if stream is None else {"stream": stream}
    try:
        cap = obj.__dlpack__(max_version=VERSION, **kw)
    except TypeError:
        cap = obj.__dlpack__(**kw)
    if type(cap).__name__ != "PyCapsule":
        raise TypeError(f"{what}: __dlpack__ returned {type(cap).__name__}, not a capsule")
    cap_addr = id(cap)
    imp = Imported()
    if _IsValid(cap_addr, NAME_V):
        p = _GetPointer(cap_addr, NAME_V)
        m = DLManagedTensorVersioned.from_address(p)
        if m.version.major != VERSION[0]:
            # the layout past the version is unknown: only the deleter may be called
            fn = m.deleter
            _SetName(cap, USED_V)
            if fn:
                fn(p)
            raise BufferError(f"{what}: DLPack {m.version.major}.{m.version.minor} tensor; qport reads 1.x")
        _SetName(cap, USED_V)
        imp.read_only = bool(m.flags & READ_ONLY)
    elif _IsValid(cap_addr, NAME_LEGACY):
        p = _GetPointer(cap_addr, NAME_LEGACY)
        m = DLManagedTensor.from_address(p)
        _SetName(cap, USED_LEGACY)
        imp.read_only = False
    else:
        name = _GetName(cap_addr)
        raise BufferError(f"{what}: a capsule named {name!r} (consumed already, or not DLPack)")
    imp._addr = p
    imp._deleter = m.deleter if m.deleter else None
    t = m.dl_tensor
    nd = t.ndim
    shape = tuple(t.shape[i] for i in range(nd))
    strides = tuple(t.strides[i] for i in range(nd)) if nd and t.strides else None
    imp.shape = shape
    imp.device = (t.device.device_type, t.device.device_id)
    imp.dl_dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
    imp.raw, imp.byte_offset = t.data or 0, t.byte_offset  # OpenCL: a cl_mem and the offset in it
    imp.data = (t.data or 0) + t.byte_offset
    if not _compact(shape, strides):
        imp.release()
        raise ValueError(f"{what}: the tensor is not C-contiguous (strides {strides} for shape {shape}; "
                         "use .contiguous() / np.ascontiguousarray)")
    return imp


# -- __cuda_array_interface__ ---------------------------------------------

_CAI_TYPES = {"<f4": "f32", "<f2": "f16", "|i1": "int8", "<i1": "int8", "|u1": "uint8", "<u1": "uint8",
              "<i4": "int32"}


def cuda_array_interface(obj: Any, raw_as: str | None, what: str) -> tuple[int, tuple[int, ...], str, int | None, bool]:
    """(pointer, shape, qport dtype, stream or None, read_only) of
    obj.__cuda_array_interface__ (versions 0..3; strides must be compact)."""
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict) or "shape" not in cai or "typestr" not in cai or "data" not in cai:
        raise TypeError(f"{what}: __cuda_array_interface__ without shape, typestr and data")
    shape = tuple(int(n) for n in cai["shape"])
    ts = cai["typestr"]
    if ts in ("<u2", "|u2") and raw_as in ("bf16", "f16"):
        dt = raw_as
    else:
        dt = _CAI_TYPES.get(ts)  # type: ignore[assignment]
    if dt is None:
        raise TypeError(f"{what}: __cuda_array_interface__ typestr {ts!r} is not one qport takes "
                        f"({', '.join(sorted(set(_CAI_TYPES)))})")
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked __cuda_array_interface__ arrays are not taken")
    ptr, ro = cai["data"]
    strides = cai.get("strides")
    if strides is not None:
        isz = int(ts[2:])
        el = tuple(int(s) // isz if int(s) % isz == 0 else -1 for s in strides)
        if not _compact(shape, el):
            raise ValueError(f"{what}: the array is not C-contiguous (strides {tuple(strides)} bytes)")
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream == 0:
        raise ValueError(f"{what}: __cuda_array_interface__ stream 0 is disallowed (ambiguous) by the protocol")
    return int(ptr or 0), shape, dt, stream, bool(ro)
