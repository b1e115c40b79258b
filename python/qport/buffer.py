"""Device memory (qp_buffer), the application's memory wrapped without a
copy (qp_buffer_import), DLPack in and out, events (qp_event_*).

A Buffer is raw device memory with a shape and a qport dtype that Python
keeps (the C library sees bytes). `as_buffer` wraps another library's
array -- anything with __dlpack__, __cuda_array_interface__, a numpy
array or a torch tensor -- as a Buffer of a device without copying; a
Buffer hands itself out with __dlpack__ / __dlpack_device__, so
numpy.from_dlpack and torch.from_dlpack take it without a copy."""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Sequence

import numpy as np

from . import _abi, _dlpack
from ._arrays import as_host, is_torch, nice_dtype, storage_dtype
from ._handle import Handle, context
from .device import Device, device as _device

_ESIZE = {"f32": 4, "f16": 2, "bf16": 2, "fp8_e4m3fn": 1, "fp8_e4m3fnuz": 1, "fp8_e5m2": 1, "e8m0": 1, "int8": 1,
          "uint8": 1, "int32": 4}


def esize(dt: str) -> int:
    try:
        return _ESIZE[dt]
    except KeyError:
        raise ValueError(f"qport dtype {dt!r} has no buffer element size (one of {sorted(_ESIZE)})") from None


def _prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


# -- pending work: what enqueued work reads or writes stays alive until the
# device has been synchronised (dropping an imported buffer's wrapper would
# otherwise wait for the device, as qp_buffer_destroy does)
_pending: dict[int, list] = {}  # device ptr -> [(sequence number, object)]
_pending_seq = 0
_pending_lock = threading.Lock()


def keep_until_sync(dev: Device, *objs: Any) -> None:
    global _pending_seq
    with _pending_lock:
        lst = _pending.setdefault(dev.ptr or 0, [])
        for o in objs:
            _pending_seq += 1
            lst.append((_pending_seq, o))


def _release_pending(dev: Device, upto: int | None = None) -> None:
    """Drops what work enqueued before sequence number `upto` (None: all)
    kept alive, once that work is known to be done."""
    with _pending_lock:
        lst = _pending.get(dev.ptr or 0)
        if not lst:
            return
        if upto is None:
            drop, _pending[dev.ptr or 0] = lst, []
        else:
            drop = [e for e in lst if e[0] <= upto]
            _pending[dev.ptr or 0] = [e for e in lst if e[0] > upto]
    del drop  # outside the lock: destroys may wait for the device


def pending_mark() -> int:
    with _pending_lock:
        return _pending_seq


class Buffer:
    """Memory of a device: `shape`, `dtype` (a qport dtype name), `nbytes`,
    `device`. Made by Buffer.empty / Buffer.from_array (qport's allocation,
    qp_buffer_create) or as_buffer (the application's memory, no copy).

    >>> b = qport.Buffer.from_array("cpu", np.ones((2, 8), np.float16))
    >>> np.from_dlpack(b).shape                         # no copy on the cpu device
    (2, 8)
    """

    def __init__(self, *a: Any, **k: Any) -> None:
        raise TypeError("use qport.Buffer.empty(device, shape, dtype), Buffer.from_array(device, array) "
                        "or qport.as_buffer(array, device)")

    @classmethod
    def _make(cls, ptr: int | None, dev: Device, shape: tuple[int, ...], dt: str, nbytes: int,
              source: Any = None, imported: bool = False, read_only: bool = False) -> Buffer:
        self = cls.__new__(cls)
        self.device = dev
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dt
        self.nbytes = int(nbytes)
        self.imported = imported
        self.read_only = read_only
        self._source = source  # the application's object whose memory this is

        def destroy(p: int, src: Any = source) -> None:
            _abi.lib.qp_buffer_destroy(p)  # waits for work using it
            if isinstance(src, _dlpack.Imported):
                src.release()
        self._h = Handle(ptr, destroy, "qport.Buffer")
        return self

    @classmethod
    def empty(cls, device: Device | str, shape: Sequence[int] | int, dtype: str) -> Buffer:
        """An uninitialised buffer of `shape` elements of qport dtype `dtype`
        ("f16", "bf16", "f32", "int32", "int8", "uint8", "fp8_e4m3fn", ...)."""
        dev = device if isinstance(device, Device) else _device(device)
        shp = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        if any(s < 0 for s in shp):
            raise ValueError(f"Buffer.empty: negative shape {shp}")
        n = _prod(shp) * esize(dtype)
        p = ctypes.c_void_p()
        context().check(_abi.lib.qp_buffer_create(dev.ptr, max(1, n), ctypes.byref(p)))
        return cls._make(p.value, dev, shp, dtype, n)

    @classmethod
    def from_array(cls, device: Device | str, array: Any, dtype: str | None = None) -> Buffer:
        """A new buffer holding a copy of a host array (numpy, torch CPU
        tensor, qport.Tensor); `dtype` names what uint16 bits are ("bf16")."""
        a, dt = as_host(array, "array", raw_as=dtype)
        b = cls.empty(device, a.shape, dt)
        b.upload(a)
        return b

    @property
    def ptr(self) -> int:
        with self._h.use() as p:
            return p

    def upload(self, array: Any) -> None:
        """Copies a host array into the buffer (blocking, after the work
        enqueued before it)."""
        a, dt = as_host(array, "array", raw_as=self.dtype)
        if a.nbytes > self.nbytes:
            raise ValueError(f"upload: {a.nbytes} bytes into a buffer of {self.nbytes}")
        if a.nbytes:
            with self._h.use() as p:
                context().check(_abi.lib.qp_buffer_upload(p, 0, a.ctypes.data, a.nbytes))

    def numpy(self) -> np.ndarray:
        """A host copy (blocking, after the work enqueued before it), in
        the buffer's shape; bf16 / fp8 as ml_dtypes types when installed,
        else raw bits."""
        out = np.empty(self.shape, storage_dtype(self.dtype))
        if out.nbytes:
            with self._h.use() as p:
                context().check(_abi.lib.qp_buffer_download(p, 0, out.ctypes.data, out.nbytes))
        return out.view(nice_dtype(self.dtype))

    download = numpy

    def native(self) -> dict[str, Any]:
        """What the buffer is natively (qp_buffer_get_native): api "host",
        "vulkan", "opencl" or "cuda", the VkBuffer / cl_mem / pointer as
        ints, the offset and size in bytes."""
        n = _abi.BufferNative()
        n.struct_size = ctypes.sizeof(n)
        with self._h.use() as p:
            context().check(_abi.lib.qp_buffer_get_native(p, ctypes.byref(n)))
        return {"api": _abi.NATIVE_APIS[n.api] if 0 <= n.api < len(_abi.NATIVE_APIS) else str(n.api),
                "imported": bool(n.imported), "vk_buffer": n.vk_buffer, "cl_mem": n.cl_mem, "ptr": n.ptr,
                "offset": n.offset, "size": n.size}

    # -- DLPack export -----------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCPU, 0) for host memory of the cpu device, (kDLCUDA, ordinal)
        for CUDA memory, (kDLOpenCL, index) for an OpenCL buffer;
        (kDLVulkan, index) for a Vulkan buffer, which __dlpack__ refuses."""
        try:
            n = self.native()
        except Exception as e:
            raise BufferError(f"{self}: the {self.device.backend} backend says nothing of its native memory "
                              f"({e})") from None
        api = n["api"]
        if api == "host":
            return (_dlpack.kDLCPU, 0)
        if api == "cuda":
            return (_dlpack.kDLCUDA, self.device.native().get("cuda_device", 0))
        if api == "opencl":
            return (_dlpack.kDLOpenCL, self.device.index)
        if api == "vulkan":
            return (_dlpack.kDLVulkan, self.device.index)
        raise BufferError(f"{self}: native api {api} has no DLPack device")

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """The buffer as a DLPack capsule, without a copy: a versioned one
        ("dltensor_versioned", DLPack 1.1) when the consumer passes
        max_version=(1, x), else the legacy "dltensor". stream (CUDA): the
        consumer's stream; unless it is qport's own stream (or -1), qport
        waits for its work on the device first, so the data is ready on
        any stream. Vulkan buffers are refused: DLPack has no portable
        form for them (kDLVulkan's data pointer is left to each framework;
        a VkBuffer means nothing without its VkDevice)."""
        if copy:
            raise BufferError("qport.Buffer.__dlpack__: copy=True is not supported (it exports without a copy; "
                              "Buffer.numpy() copies to the host)")
        dev = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != dev:
            raise BufferError(f"qport.Buffer.__dlpack__: the buffer is on DLPack device {dev}, not {tuple(dl_device)} "
                              "(Buffer.numpy() copies to the host)")
        n = self.native()
        if dev[0] == _dlpack.kDLVulkan:
            raise BufferError(f"{self}: a Vulkan buffer has no portable DLPack form (kDLVulkan leaves the meaning of "
                              "the data pointer to each framework, and a VkBuffer is nothing without its VkDevice); "
                              "Buffer.native() gives the VkBuffer and Device.native() the VkDevice, or Buffer.numpy() "
                              "copies to the host")
        if dev[0] == _dlpack.kDLCPU:
            if stream is not None and stream != -1:
                raise BufferError(f"qport.Buffer.__dlpack__: stream={stream!r} for host memory (must be None)")
            data, off = n["ptr"], 0
        elif dev[0] == _dlpack.kDLCUDA:
            if stream == 0:
                raise BufferError("qport.Buffer.__dlpack__: stream 0 is disallowed for CUDA (ambiguous)")
            data, off = n["ptr"], 0
        else:  # OpenCL: dlpack.h's data is the cl_mem handle, byte_offset the offset in it
            data, off = n["cl_mem"], n["offset"]
        if stream != -1:
            if dev[0] != _dlpack.kDLCUDA or stream_id(self.device) != (1 if stream is None else int(stream)):
                self.device.synchronize()
        versioned = max_version is not None and int(max_version[0]) >= 1
        return _dlpack.export_capsule(self, data, dev, self.shape, self.dtype, off, versioned, self.read_only)

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Frees qport's memory (or only its wrapper of imported memory)
        after the work using it; later use raises ValueError."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "imported " if self.imported else ""
        return f"<qport.Buffer {kind}{self.dtype}{list(self.shape)} on {self.device}>"


def stream_id(dev: Device) -> int | None:
    """The device's CUDA stream as DLPack and __cuda_array_interface__
    number it (1: the legacy default stream); None on other devices."""
    n = dev.native()
    if n.get("api") != "cuda":
        return None
    s = n.get("cuda_stream") or 0
    return s if s else 1


def _import(dev: Device, what: str, *, host_ptr: int = 0, cuda_ptr: int = 0, cl_mem: int = 0, vk_buffer: int = 0,
            offset: int = 0, size: int) -> int | None:
    d = _abi.BufferImportDesc()
    _abi.lib.qp_buffer_import_desc_init(ctypes.byref(d))
    d.host_ptr, d.cuda_ptr = host_ptr or None, cuda_ptr or None
    d.cl_mem, d.vk_buffer = cl_mem or None, vk_buffer or None
    d.offset, d.size = offset, size
    p = ctypes.c_void_p()
    context().check(_abi.lib.qp_buffer_import(dev.ptr, ctypes.byref(d), ctypes.byref(p)))
    return p.value


def _cuda_device_of(ordinal: int) -> Device:
    from .device import devices
    for d in devices():
        if d.backend == "cuda" and d.native().get("cuda_device") == ordinal:
            return d
    raise LookupError(f"no qport CUDA device for CUDA ordinal {ordinal} (qport.devices() lists the devices)")


def _check_target(dev: Device | None, api: str, ordinal: int, what: str) -> Device:
    if api == "host":
        d = dev if dev is not None else _device("cpu")
        if d.backend != "cpu":
            raise ValueError(f"{what}: host memory, but the device is {d} (host memory is memory of the cpu device "
                             "only; a layer on another device takes host arrays through its host path)")
        return d
    d = dev if dev is not None else _cuda_device_of(ordinal)
    if d.backend != "cuda":
        raise ValueError(f"{what}: CUDA memory of device {ordinal}, but the device is {d}")
    have = d.native().get("cuda_device")
    if have != ordinal:
        raise ValueError(f"{what}: CUDA memory of device {ordinal}, but {d} is CUDA device {have}")
    return d


def as_buffer(obj: Any, device: Device | str | None = None, *, dtype: str | None = None,
              writable: bool = False, what: str = "array") -> Buffer:
    """`obj` as a Buffer of `device` without a copy (the Buffer keeps obj
    alive): a qport.Buffer as it is; a CUDA torch tensor, an object with
    __cuda_array_interface__ (v3: its stream is waited for) or with
    __dlpack__ (asked for a versioned capsule, with the device's stream on
    CUDA) as CUDA memory (kDLOpenCL: a cl_mem of an OpenCL device's
    context, at byte_offset); a numpy array or a CPU torch tensor as host memory
    of the cpu device. device None: the cpu device for host memory, qport's
    CUDA device of the memory's ordinal for CUDA memory. `dtype` says what
    uint16 bits are ("bf16" or "f16"). Contiguous memory only (ValueError
    otherwise); read-only memory is refused where `writable`."""
    dev = None if device is None else (device if isinstance(device, Device) else _device(device))
    if isinstance(obj, Buffer):
        if dev is not None and obj.device != dev:
            raise ValueError(f"{what}: a buffer of {obj.device}, not of {dev}")
        if writable and obj.read_only:
            raise ValueError(f"{what}: the buffer is read-only")
        return obj
    if is_torch(obj) and obj.device.type == "cuda":
        return _from_torch_cuda(obj, dev, dtype, writable, what)
    if isinstance(obj, np.ndarray) or (is_torch(obj) and obj.device.type == "cpu"):
        a, dt = as_host(obj, what, raw_as=dtype)
        d = _check_target(dev, "host", 0, what)
        if writable and not a.flags.writeable:
            raise ValueError(f"{what}: the array is read-only")
        p = _import(d, what, host_ptr=a.ctypes.data, size=a.nbytes) if a.nbytes else None
        if p is None:
            return Buffer.empty(d, a.shape, dt)
        return Buffer._make(p, d, a.shape, dt, a.nbytes, source=a, imported=True)
    if hasattr(obj, "__cuda_array_interface__"):
        ptr, shape, dt, stream, ro = _dlpack.cuda_array_interface(obj, dtype, what)
        if writable and ro:
            raise ValueError(f"{what}: the array is read-only")
        ordinal = _cai_ordinal(obj, dev)
        d = _check_target(dev, "cuda", ordinal, what)
        nbytes = _prod(shape) * esize(dt)
        if stream is not None and stream != stream_id(d):
            stream_device(ordinal, stream).synchronize()  # the producer's work on its stream is done
        if not nbytes:
            return Buffer.empty(d, shape, dt)
        p = _import(d, what, cuda_ptr=ptr, size=nbytes)
        return Buffer._make(p, d, shape, dt, nbytes, source=obj, imported=True, read_only=ro)
    if hasattr(obj, "__dlpack__"):
        if not hasattr(obj, "__dlpack_device__"):
            raise TypeError(f"{what}: __dlpack__ without __dlpack_device__")
        dl_type, dl_id = obj.__dlpack_device__()
        if dl_type == _dlpack.kDLCPU:
            d = _check_target(dev, "host", 0, what)
            stream = None
        elif dl_type in (_dlpack.kDLCUDA, _dlpack.kDLCUDAManaged):
            d = _check_target(dev, "cuda", int(dl_id), what)
            stream = stream_id(d)
        elif dl_type == _dlpack.kDLOpenCL:
            d = dev if dev is not None else _device(f"opencl:{int(dl_id)}")
            if d.backend != "opencl":
                raise ValueError(f"{what}: OpenCL memory (a cl_mem), but the device is {d}")
            stream = None
        else:
            raise ValueError(f"{what}: DLPack device {_dlpack.DEVICE_NAMES.get(dl_type, dl_type)}:{dl_id}; qport "
                             "takes host (kDLCPU), CUDA and OpenCL (cl_mem) memory")
        imp = _dlpack.consume(obj, stream, what)
        try:
            dt = _dlpack.dtype_from_dl(*imp.dl_dtype, dtype, what)
            if writable and imp.read_only:
                raise ValueError(f"{what}: the tensor is read-only (DLPack flag)")
            nbytes = _prod(imp.shape) * esize(dt)
            if not nbytes:
                imp.release()
                return Buffer.empty(d, imp.shape, dt)
            if d.backend == "cpu":
                p = _import(d, what, host_ptr=imp.data, size=nbytes)
            elif d.backend == "opencl":
                p = _import(d, what, cl_mem=imp.raw, offset=imp.byte_offset, size=nbytes)
            else:
                p = _import(d, what, cuda_ptr=imp.data, size=nbytes)
        except BaseException:
            imp.release()
            raise
        return Buffer._make(p, d, imp.shape, dt, nbytes, source=imp, imported=True, read_only=imp.read_only)
    raise TypeError(f"{what}: expected a qport.Buffer, a numpy array, a torch tensor or an object with __dlpack__ "
                    f"or __cuda_array_interface__, got {type(obj).__name__}")


def _cai_ordinal(obj: Any, dev: Device | None) -> int:
    """The CUDA ordinal of a __cuda_array_interface__ array: its
    __dlpack_device__ when it has one (CuPy, Numba and torch do), else the
    target device's."""
    if hasattr(obj, "__dlpack_device__"):
        t, i = obj.__dlpack_device__()
        if t in (_dlpack.kDLCUDA, _dlpack.kDLCUDAManaged):
            return int(i)
    if dev is not None and dev.backend == "cuda":
        return int(dev.native().get("cuda_device", 0))
    return 0


def _from_torch_cuda(t: Any, dev: Device | None, dtype: str | None, writable: bool, what: str) -> Buffer:
    from ._arrays import _FROM_TORCH
    name = str(t.dtype).replace("torch.", "")
    dt = _FROM_TORCH.get(name)
    if dt is None:
        raise TypeError(f"{what}: torch dtype {t.dtype} is not one qport takes ({', '.join(sorted(_FROM_TORCH))})")
    if not t.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (.contiguous())")
    d = _check_target(dev, "cuda", t.device.index or 0, what)
    nbytes = t.numel() * esize(dt)
    if not nbytes:
        return Buffer.empty(d, tuple(t.shape), dt)
    p = _import(d, what, cuda_ptr=t.data_ptr(), size=nbytes)
    return Buffer._make(p, d, tuple(t.shape), dt, nbytes, source=t, imported=True)


# -- devices over a given CUDA stream --------------------------------------

_stream_devices: dict[tuple[int, int], Device] = {}
_stream_lock = threading.Lock()


def stream_device(ordinal: int, stream: int | None) -> Device:
    """A qport device over CUDA device `ordinal` and the application's
    stream (a cudaStream_t as an int; None or 1: the legacy default
    stream, 2: the per-thread default stream), made with qp_device_import
    once per (ordinal, stream) and kept for the process."""
    s = 0 if stream in (None, 1) else int(stream)
    key = (int(ordinal), s)
    with _stream_lock:
        d = _stream_devices.get(key)
        if d is None:
            d = import_device("cuda", cuda_device=int(ordinal), cuda_stream=s)
            _stream_devices[key] = d
        return d


def import_device(api: str, **handles: Any) -> Device:
    """A qport device over the application's objects (qp_device_import):
    api "cuda" (cuda_device, cuda_stream), "opencl" (cl_context, cl_device,
    cl_queue) or "vulkan" (vk_instance, vk_physical_device, vk_device,
    vk_queue_family, vk_queue, vk_get_instance_proc_addr,
    vk_enabled_features, vk_enabled_extensions: a list of names); handles
    as ints. qport never destroys them; the device lives as long as the
    process (release it with Device.release() before destroying them)."""
    if api not in ("vulkan", "opencl", "cuda"):
        raise ValueError(f"import_device: api {api!r}: one of vulkan, opencl, cuda")
    d = _abi.DeviceImportDesc()
    _abi.lib.qp_device_import_desc_init(ctypes.byref(d))
    d.api = _abi.NATIVE[api]
    keep = []
    fields = {f[0] for f in _abi.DeviceImportDesc._fields_} - {"struct_size", "api", "vk_n_enabled_extensions"}
    for k, v in handles.items():
        if k not in fields:
            raise TypeError(f"import_device: unknown handle {k!r} (one of {', '.join(sorted(fields))})")
        if k == "vk_enabled_extensions":
            names = [n.encode() if isinstance(n, str) else bytes(n) for n in v]
            arr = (ctypes.c_char_p * max(1, len(names)))(*names)
            keep.append(arr)
            d.vk_enabled_extensions = arr
            d.vk_n_enabled_extensions = len(names)
        else:
            setattr(d, k, v)
    ctx = context()
    p = ctypes.c_void_p()
    ctx.check(_abi.lib.qp_device_import(ctx.ptr, ctypes.byref(d), ctypes.byref(p)))
    del keep
    return Device(p.value)


class Event:
    """A completion marker (qp_event_record): everything enqueued on the
    device before it. wait() blocks until that work is done and raises its
    error (naming the layer); done says so without blocking."""

    def __init__(self, dev: Device) -> None:
        self.device = dev
        p = ctypes.c_void_p()
        context().check(_abi.lib.qp_event_record(dev.ptr, ctypes.byref(p)))
        self._mark = pending_mark()
        self._h = Handle(p.value, _abi.lib.qp_event_destroy, "qport.Event")

    def wait(self) -> None:
        with self._h.use() as p:
            context().check(_abi.lib.qp_event_wait(p))
        _release_pending(self.device, self._mark)

    @property
    def done(self) -> bool:
        v = ctypes.c_int()
        with self._h.use() as p:
            context().check(_abi.lib.qp_event_query(p, ctypes.byref(v)))
        return bool(v.value)

    query = done

    def close(self) -> None:
        self._h.close()

    def __repr__(self) -> str:
        return f"<qport.Event on {self.device}>"


def enqueue_sync(sync: dict[str, Any] | None) -> tuple[Any, list]:
    """A qp_enqueue_sync from a dict of its fields (cuda_wait_event,
    cuda_record_event, vk_wait_semaphore, vk_wait_value, ...,
    cl_wait_list: a list of cl_event ints, cl_out_event: True to get one
    back); (None, []) for None."""
    if not sync:
        return None, []
    s = _abi.EnqueueSync()
    _abi.lib.qp_enqueue_sync_init(ctypes.byref(s))
    keep: list = []
    fields = {f[0] for f in _abi.EnqueueSync._fields_} - {"struct_size", "cl_n_wait"}
    for k, v in sync.items():
        if k not in fields:
            raise TypeError(f"sync: unknown field {k!r} (one of {', '.join(sorted(fields))})")
        if k == "cl_wait_list":
            arr = (ctypes.c_void_p * max(1, len(v)))(*v)
            keep.append(arr)
            s.cl_wait_list = arr
            s.cl_n_wait = len(v)
        elif k == "cl_out_event":
            if v:
                out = ctypes.c_void_p()
                keep.append(out)
                s.cl_out_event = ctypes.pointer(out)
        else:
            setattr(s, k, v)
    return s, keep


def cl_out_event(keep: list) -> int | None:
    for k in keep:
        if isinstance(k, ctypes.c_void_p):
            return k.value
    return None


# -- torch CUDA tensors ------------------------------------------------------

_cuda_wrappers: "OrderedDict[tuple[int, int, int], int]"
from collections import OrderedDict  # noqa: E402

_cuda_wrappers = OrderedDict()
_CUDA_WRAPPERS_MAX = 256
_wrap_lock = threading.Lock()


def _cached_cuda_import(dev: Device, ptr: int, nbytes: int) -> int:
    """A qp_buffer wrapper of CUDA memory [ptr, ptr + nbytes), kept in a
    small cache: a wrapper owns nothing, and destroying one waits for the
    device, so they are not made and dropped per call."""
    key = (dev.ptr or 0, ptr, nbytes)
    with _wrap_lock:
        b = _cuda_wrappers.get(key)
        if b is not None:
            _cuda_wrappers.move_to_end(key)
            return b
    b = _import(dev, "tensor", cuda_ptr=ptr, size=nbytes)
    old = None
    with _wrap_lock:
        _cuda_wrappers[key] = b  # type: ignore[assignment]
        if len(_cuda_wrappers) > _CUDA_WRAPPERS_MAX:
            old = _cuda_wrappers.popitem(last=False)[1]
    if old:
        _abi.lib.qp_buffer_destroy(old)
    return b  # type: ignore[return-value]


def run_torch_cuda(dev: Device, ins: list, outs: list, fn: Any) -> None:
    """Runs fn(qp_buffer pointers of ins + outs, sync) on `dev` for CUDA
    torch tensors of its GPU, ordered on torch.cuda.current_stream(): when
    that is the device's own stream (a device made by qport.torch_device /
    stream_device for it), directly; otherwise qport's stream first waits
    for an event recorded on torch's stream and torch's stream then waits
    for one qport records after the work (no host wait either way)."""
    import sys
    torch = sys.modules["torch"]
    t0 = ins[0]
    for t in ins + outs:
        if t.device != t0.device:
            raise ValueError(f"tensors on {t0.device} and {t.device}")
    ordinal = t0.device.index if t0.device.index is not None else torch.cuda.current_device()
    if dev.backend != "cuda":
        raise ValueError(f"the tensor is on cuda:{ordinal}; the layer is on {dev} (create it on the GPU: "
                         "device=torch.device('cuda') or qport.torch_device())")
    have = dev.native().get("cuda_device")
    if have != ordinal:
        raise ValueError(f"the tensor is on cuda:{ordinal}; the layer is on {dev}, CUDA device {have}")
    bufs = [_cached_cuda_import(dev, t.data_ptr(), t.numel() * t.element_size()) for t in ins + outs]
    cur = torch.cuda.current_stream(t0.device)
    if (cur.cuda_stream or 1) == stream_id(dev):
        fn(bufs, None)
        return
    ev_in, ev_out = torch.cuda.Event(), torch.cuda.Event()
    ev_in.record(cur)
    ev_out.record(cur)  # makes the CUDA event; qport records it again, after its work
    s, keep = enqueue_sync({"cuda_wait_event": ev_in.cuda_event, "cuda_record_event": ev_out.cuda_event})
    fn(bufs, s)
    cur.wait_event(ev_out)
