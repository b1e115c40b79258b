"""Devices of the loaded backends (qp_device_*): the `cpu` reference and
the plugins' Vulkan / OpenCL / CUDA devices."""
from __future__ import annotations

import ctypes
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from . import _abi
from ._handle import context
from ._lib import cli_path
from .config import Scheme


@dataclass(frozen=True)
class Support:
    """Whether a scheme runs on a device: level "native", "emulated" or
    "unsupported", and why (empty when native)."""
    level: str
    reason: str

    def __bool__(self) -> bool:
        return self.level != "unsupported"


@dataclass(frozen=True)
class Backend:
    """A backend the context tried to load (qp_backend_get_status)."""
    name: str
    path: str
    loaded: bool
    n_devices: int
    note: str


class Device:
    """One device (qp_device). Devices live as long as the process.

    >>> [str(d) for d in qport.devices()]
    ['vulkan:0', 'opencl:0', 'cpu:0']
    >>> qport.device("cpu").kind
    'reference'
    """

    def __init__(self, ptr: int | None) -> None:
        self._ctx = context()
        self._ptr = ptr
        info = _abi.DeviceInfo()
        info.struct_size = ctypes.sizeof(info)
        self._ctx.check(_abi.lib.qp_device_get_info(ptr, ctypes.byref(info)))
        self._info = info

    @property
    def ptr(self) -> int | None:
        return self._ptr

    @property
    def backend(self) -> str:
        return _abi.s(self._info.backend)

    @property
    def index(self) -> int:
        return self._info.index

    @property
    def name(self) -> str:
        return _abi.s(self._info.name)

    @property
    def kind(self) -> str:
        """"discrete-gpu", "integrated-gpu", "virtual-gpu", "cpu-class" (a
        GPU API on the CPU: lavapipe, PoCL) or "reference" (qport's cpu)."""
        return _abi.s(_abi.lib.qp_device_kind_name(self._info.kind))

    @property
    def info(self) -> dict[str, Any]:
        """Everything qp_device_info says, with the same keys as
        `qport devices --json` (caps included)."""
        i = self._info
        uuid = bytes(i.uuid).hex() if i.has_uuid else None
        caps = {f[0]: getattr(i.caps, f[0]) for f in _abi.DeviceCaps._fields_}
        return {"device": str(self), "name": self.name, "vendor": _abi.s(i.vendor), "driver": _abi.s(i.driver),
                "api_version": _abi.s(i.api_version), "kind": self.kind, "memory_bytes": i.memory_bytes,
                "uuid": uuid, "cuda_cc": i.cuda_cc, "same_as": _abi.s(i.same_as) or None, "caps": caps}

    @property
    def caps(self) -> dict[str, int]:
        """Capabilities (int8/fp16/bf16 arithmetic, integer dot product,
        tensor cores, subgroups, memory limits); -1 where unknown."""
        return self.info["caps"]

    def supports(self, scheme: Scheme, M: int = 0, N: int = 0, K: int = 0) -> Support:
        """Whether `scheme` runs here (at shape M x N x K; 0: any)."""
        if not isinstance(scheme, Scheme):
            raise TypeError(f"supports: a qport.Scheme, not {type(scheme).__name__}")
        si = _abi.SupportInfo()
        self._ctx.check(_abi.lib.qp_device_supports(self._ptr, ctypes.byref(scheme._c), int(M), int(N), int(K),
                                                    ctypes.byref(si)))
        return Support(_abi.s(_abi.lib.qp_support_level_name(si.level)), _abi.s(si.reason))

    def supports_moe(self, scheme: Scheme) -> Support:
        """Whether fused MoE experts of `scheme` (resolved with kind="moe")
        run here (qp_device_supports_moe)."""
        if not isinstance(scheme, Scheme):
            raise TypeError(f"supports_moe: a qport.Scheme, not {type(scheme).__name__}")
        si = _abi.SupportInfo()
        self._ctx.check(_abi.lib.qp_device_supports_moe(self._ptr, ctypes.byref(scheme._c), ctypes.byref(si)))
        return Support(_abi.s(_abi.lib.qp_support_level_name(si.level)), _abi.s(si.reason))

    def support_table(self, schemes: dict[str, Scheme] | None = None) -> dict[str, Support]:
        """supports() for each named scheme: {name: Support}. None: every
        scheme `qport quantize` knows by name ("int8-dyn-sym", "nvfp4", ...),
        as `qport devices` lists them (the table is the tool's: this runs
        `qport devices --json` once per process)."""
        if schemes is not None:
            return {n: self.supports(s) for n, s in schemes.items()}
        for d in _devices_report()["devices"]:
            if d["device"] == str(self):
                return {s["scheme"]: Support(s["support"], s["reason"]) for s in d["schemes"]}
        raise LookupError(f"`qport devices` does not list {self}")

    def synchronize(self) -> None:
        """Waits for everything enqueued on the device (qp_device_synchronize)
        and raises the first error of that work, naming the layer."""
        from .buffer import _release_pending
        self._ctx.check(_abi.lib.qp_device_synchronize(self._ptr))
        _release_pending(self)

    def flush(self) -> None:
        """Submits what qport has recorded for the device without waiting."""
        self._ctx.check(_abi.lib.qp_device_flush(self._ptr))

    def record_event(self) -> Any:
        """A qport.Event marking everything enqueued on the device so far."""
        from .buffer import Event
        return Event(self)

    @property
    def stats(self) -> dict[str, int]:
        """qport's counters of the device: host_waits (fence / event /
        stream waits qport made), submissions, allocations."""
        st = _abi.DeviceStats()
        st.struct_size = ctypes.sizeof(st)
        self._ctx.check(_abi.lib.qp_device_get_stats(self._ptr, ctypes.byref(st)))
        return {"host_waits": st.host_waits, "submissions": st.submissions, "allocations": st.allocations}

    def native(self) -> dict[str, Any]:
        """The handles qport uses (qp_device_get_native): api ("host",
        "vulkan", "opencl", "cuda"), imported, and the VkInstance /
        VkPhysicalDevice / VkDevice / VkQueue / queue family, cl_context /
        cl_device / cl_queue, cuda_device / cuda_stream, as ints."""
        n = _abi.DeviceNative()
        n.struct_size = ctypes.sizeof(n)
        self._ctx.check(_abi.lib.qp_device_get_native(self._ptr, ctypes.byref(n)))
        out: dict[str, Any] = {"api": _abi.NATIVE_APIS[n.api] if 0 <= n.api < len(_abi.NATIVE_APIS) else str(n.api),
                               "imported": bool(n.imported)}
        for f, _ in _abi.DeviceNative._fields_:
            if f not in ("struct_size", "api", "imported"):
                out[f] = getattr(n, f)
        return out

    @property
    def imported(self) -> bool:
        """Whether qp_device_import made the device (the application's objects)."""
        try:
            return bool(self.native()["imported"])
        except Exception:
            return False

    def __str__(self) -> str:
        return f"{self.backend}:{self.index}"

    def __repr__(self) -> str:
        return f"<qport.Device {self}: {self.name} ({self.kind})>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._ptr == self._ptr

    def __hash__(self) -> int:
        return hash(self._ptr)


_report: dict[str, Any] | None = None


def _devices_report() -> dict[str, Any]:
    global _report
    if _report is None:
        exe = cli_path()
        if exe is None:
            raise FileNotFoundError("the `qport` tool is not installed with this package (QPORT_CLI names one)")
        r = subprocess.run([exe, "devices", "--json"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"qport devices failed ({r.returncode}): {r.stderr.strip()}")
        _report = json.loads(r.stdout)
    return _report


def devices() -> list[Device]:
    """Every device of every loaded backend, best first (CUDA, Vulkan and
    OpenCL GPUs, CPU implementations of GPU APIs, the `cpu` reference
    last). The first call loads the backends."""
    ctx = context()
    n = ctypes.c_size_t()
    ctx.check(_abi.lib.qp_device_count(ctx.ptr, ctypes.byref(n)))
    out = []
    for i in range(n.value):
        p = ctypes.c_void_p()
        ctx.check(_abi.lib.qp_device_get(ctx.ptr, i, ctypes.byref(p)))
        out.append(Device(p.value))
    return out


def device(spec: str | Device | None = None, scheme: Scheme | None = None) -> Device:
    """A device by spec ("cpu", "vulkan", "vulkan:1", "opencl:0", or a
    substring of its name); spec None: the best device for `scheme` (or for
    any scheme), as qp_device_pick chooses (QPORT_DEVICE is honoured)."""
    if isinstance(spec, Device):
        return spec
    ctx = context()
    p = ctypes.c_void_p()
    if spec is None:
        if scheme is not None and not isinstance(scheme, Scheme):
            raise TypeError(f"device: scheme must be a qport.Scheme, not {type(scheme).__name__}")
        ctx.check(_abi.lib.qp_device_pick(ctx.ptr, ctypes.byref(scheme._c) if scheme else None, ctypes.byref(p)))
    else:
        if not isinstance(spec, str):
            raise TypeError(f"device: a spec string or a qport.Device, not {type(spec).__name__}")
        ctx.check(_abi.lib.qp_device_find(ctx.ptr, spec.encode(), ctypes.byref(p)))
    return Device(p.value)


def backends() -> list[Backend]:
    """The backends tried: loaded or not, and why (qport devices' first table)."""
    ctx = context()
    ctx_ptr = ctx.ptr
    n = ctypes.c_size_t()
    ctx.check(_abi.lib.qp_device_count(ctx_ptr, ctypes.byref(n)))  # loads them
    out, i = [], 0
    bs = _abi.BackendStatus()
    while _abi.lib.qp_backend_get_status(ctx_ptr, i, ctypes.byref(bs)) == _abi.QP_OK:
        out.append(Backend(_abi.s(bs.name), _abi.s(bs.path) or "", bool(bs.loaded), bs.n_devices,
                           _abi.s(bs.note) or ""))
        i += 1
    return out
