"""Device buffers, DLPack in and out (versioned and legacy capsules),
__cuda_array_interface__ parsing, the enqueue path and events, with numpy
only (CI has no torch): zero-copy wrapping on the cpu device, chains of
enqueued layers on every device against the reference, and the error
paths (dtype, contiguity, size, device, read-only, consumed capsules)."""
from __future__ import annotations

import ctypes
import gc
import os

import numpy as np
import pytest

import qport
from qport import _dlpack
from conftest import EXACT, acts, run_cli, scheme, weights

N, K = 64, 128
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


class Producer:
    """Another library's array: only __dlpack__ / __dlpack_device__, the
    DLPack 1.x signature (max_version) or the legacy one."""

    def __init__(self, a, versioned=True):
        self.a, self.versioned, self.calls = a, versioned, []

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, *, stream=None, **kw):
        self.calls.append(dict(stream=stream, **kw))
        if not self.versioned and kw:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        return self.a.__dlpack__(stream=stream, **kw)


class Legacy:
    """A numpy-1.22-style producer (no max_version keyword)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, *, stream=None):
        return self.a.__dlpack__(stream=stream)


class _Wrap:
    def __init__(self, b):
        self.b = b

    def __dlpack_device__(self):
        return self.b.__dlpack_device__()

    def __dlpack__(self, **kw):
        return self.b.__dlpack__(**kw)


@pytest.fixture(scope="module")
def int8():
    s = scheme("int8-dyn-sym")
    return s, qport.quantize_weights(weights(N, K), s)


def test_export_cpu_buffer_without_copy():
    a = acts(3, 8)
    b = qport.Buffer.from_array("cpu", a)
    assert b.__dlpack_device__() == (1, 0) and b.shape == (3, 8) and b.dtype == "f16" and not b.imported
    v = np.from_dlpack(b)
    assert v.ctypes.data == b.native()["ptr"] and (v == a).all() and v.dtype == np.float16
    # the capsule kinds: versioned when asked with max_version, legacy otherwise
    cap = b.__dlpack__(max_version=(1, 0))
    assert _is_valid(cap, b"dltensor_versioned") and not _is_valid(cap, b"dltensor")
    cap = b.__dlpack__()
    assert _is_valid(cap, b"dltensor")
    live = len(_dlpack._live)
    del cap  # never consumed: the capsule's destructor frees the tensor
    gc.collect()
    assert len(_dlpack._live) == live - 1
    with pytest.raises(BufferError, match="stream"):
        b.__dlpack__(stream=5)
    with pytest.raises(BufferError, match="copy=True"):
        b.__dlpack__(copy=True)
    with pytest.raises(BufferError, match=r"not \(2, 0\)"):
        b.__dlpack__(dl_device=(2, 0))


@pytest.mark.parametrize("kind", ["versioned", "legacy", "numpy-legacy", "numpy"])
def test_import_without_copy(kind):
    a = acts(4, 16)
    src = qport.Buffer.from_array("cpu", a)
    if kind == "versioned":
        p = Producer(src)
    elif kind == "legacy":
        p = Producer(src, versioned=False)
    elif kind == "numpy-legacy":
        p = Legacy(a)  # numpy's own legacy capsule
    else:
        p = Producer(a)  # numpy >= 2.1: its versioned capsule; 1.24 refuses max_version: the legacy call
    live = len(_dlpack._live)
    b = qport.as_buffer(p)
    assert b.imported and b.device.backend == "cpu" and b.shape == (4, 16) and b.dtype == "f16"
    want_ptr = a.ctypes.data if kind.startswith("numpy") else src.native()["ptr"]
    assert b.native()["ptr"] == want_ptr
    assert (b.numpy() == a).all()
    if kind == "numpy":
        assert p.calls[0].get("max_version") == (1, 1)
    elif kind != "numpy-legacy":
        assert p.calls[0].get("max_version") == (1, 1) and p.calls[0]["stream"] is None
        assert len(_dlpack._live) == live + 1  # the consumer holds the producer's tensor
        b.close()
        gc.collect()
        assert len(_dlpack._live) == live  # ... and called its deleter once
    # a numpy array and a read-only view are wrapped as they are
    c = qport.as_buffer(a)
    assert c.native()["ptr"] == a.ctypes.data
    ro = a.copy()
    ro.flags.writeable = False
    assert (qport.as_buffer(ro).numpy() == a).all()
    with pytest.raises(ValueError, match="read-only"):
        qport.as_buffer(ro, writable=True)


def test_import_bf16_and_raw_bits():
    bits = np.arange(32, dtype=np.uint16).reshape(4, 8)
    b = qport.Buffer.from_array("cpu", bits, dtype="bf16")
    assert b.dtype == "bf16" and b.__dlpack__(max_version=(1, 1)) is not None
    c = qport.as_buffer(Producer(b))
    assert c.dtype == "bf16" and c.numpy().view(np.uint16).tolist() == bits.tolist()
    # uint16 through DLPack: bits of whatever the layer says
    assert qport.as_buffer(Legacy(bits), dtype="f16").dtype == "f16"
    with pytest.raises(TypeError, match="uint16"):
        qport.as_buffer(Legacy(bits))


def test_import_errors():
    with pytest.raises(TypeError, match="float64"):
        qport.as_buffer(Legacy(np.zeros((2, 2))))
    with pytest.raises(ValueError, match="not C-contiguous"):
        qport.as_buffer(Legacy(acts(8, 4)[:, ::2]))
    with pytest.raises(ValueError, match="not C-contiguous"):
        qport.as_buffer(Legacy(acts(8, 4).T))
    # a capsule consumed once cannot be consumed again
    cap = np.zeros(4, np.float32).__dlpack__()

    class Once:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kw):
            return cap
    qport.as_buffer(Once())
    with pytest.raises(BufferError, match="used_dltensor"):
        qport.as_buffer(Once())

    class Metal(Legacy):
        def __dlpack_device__(self):
            return (8, 0)
    with pytest.raises(ValueError, match="metal"):
        qport.as_buffer(Metal(np.zeros(4, np.float32)))
    with pytest.raises(TypeError, match="expected a qport.Buffer"):
        qport.as_buffer([1.0, 2.0])


class CAI:
    def __init__(self, ptr=0x1000, shape=(2, 8), typestr="<f2", strides=None, stream=None, version=3):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": version, "stream": stream}


def test_cuda_array_interface_parsing():
    ptr, shape, dt, stream, ro = _dlpack.cuda_array_interface(CAI(stream=7), None, "x")
    assert (ptr, shape, dt, stream, ro) == (0x1000, (2, 8), "f16", 7, False)
    assert _dlpack.cuda_array_interface(CAI(stream=7, version=2), None, "x")[3] is None  # v2: no stream field
    assert _dlpack.cuda_array_interface(CAI(typestr="<u2"), "bf16", "x")[2] == "bf16"
    assert _dlpack.cuda_array_interface(CAI(strides=(16, 2)), None, "x")[1] == (2, 8)  # compact strides
    with pytest.raises(TypeError, match="<f8"):
        _dlpack.cuda_array_interface(CAI(typestr="<f8"), None, "x")
    with pytest.raises(ValueError, match="not C-contiguous"):
        _dlpack.cuda_array_interface(CAI(strides=(2, 16)), None, "x")
    with pytest.raises(ValueError, match="stream 0"):
        _dlpack.cuda_array_interface(CAI(stream=0), None, "x")
    if not any(d.backend == "cuda" for d in qport.devices()):
        with pytest.raises(LookupError, match="no qport CUDA device"):
            qport.as_buffer(CAI())
    # CUDA memory for a cpu-device target
    with pytest.raises(ValueError, match="the device is cpu:0"):
        qport.as_buffer(CAI(), "cpu")


def test_linear_on_dlpack_and_enqueue_cpu(int8):
    s, t = int8
    lin = qport.Linear("cpu", s, t)
    x = acts(5, K)
    want = lin(x)
    for src in (Producer(qport.Buffer.from_array("cpu", x)), Legacy(x), qport.Buffer.from_array("cpu", x)):
        got = lin(src)  # host memory through DLPack: a numpy array back
        assert isinstance(got, np.ndarray) and (got == want).all()
    # enqueue into the caller's own numpy array: written in place
    y = np.zeros((5, N), np.float16)
    out = lin.enqueue(x, y)
    lin.device.synchronize()
    assert out.native()["ptr"] == y.ctypes.data and (y == want).all()
    # M rows of a flat buffer; a new buffer when y is None
    flat = qport.Buffer.from_array("cpu", x.reshape(-1))
    from qport import buffer as qb
    yb = lin.enqueue(flat, M=5)
    ev = lin.device.record_event()
    lin.enqueue(x)  # after the event
    kept = lambda: [o for _, o in qb._pending.get(lin.device.ptr, [])]  # noqa: E731
    assert yb in kept() and flat in kept()
    ev.wait()  # what the work before the event kept alive is dropped, not what came after
    assert ev.done and yb.shape == (5, N) and (yb.numpy() == want).all()
    assert yb not in kept() and len(kept()) == 3  # x's wrapper, the new y, the layer
    lin.device.synchronize()
    assert kept() == []


def test_enqueue_errors(int8, devices):
    s, t = int8
    lin = qport.Linear("cpu", s, t)
    with pytest.raises(TypeError, match="f16 activations"):
        lin.enqueue(acts(2, K, np.float32))
    with pytest.raises(ValueError, match=r"want \(\.\.\., 128\)"):
        lin.enqueue(acts(2, K + 1))
    with pytest.raises(ValueError, match="not C-contiguous"):
        lin.enqueue(acts(K, 2).T)
    with pytest.raises(TypeError, match="writes f16"):
        lin.enqueue(acts(2, K), np.zeros((2, N), np.float32))
    # too small: the C library's check at enqueue, naming y
    with pytest.raises(qport.InvalidArgumentError, match="too small"):
        lin.enqueue(acts(2, K), np.zeros((1, N), np.float16))
    ro = np.zeros((2, N), np.float16)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        lin.enqueue(acts(2, K), ro)
    for d in devices:
        if d.backend == "cpu":
            continue
        other = qport.Linear(d, s, t)
        hx = acts(3, K)
        assert (other(Legacy(hx)) == other(hx)).all()  # host memory through DLPack into a GPU layer
        with pytest.raises(ValueError, match="host memory"):
            other.enqueue(acts(2, K))
        with pytest.raises(ValueError, match="a buffer of cpu:0"):
            other.enqueue(qport.Buffer.from_array("cpu", acts(2, K)))
        with pytest.raises(ValueError, match="not of cpu:0"):
            lin.enqueue(qport.Buffer.from_array(d, acts(2, K)))


def test_chain_of_enqueues_on_every_device(int8, devices):
    """8 layers enqueued back to back on device buffers, one synchronize:
    the result equals the reference bit for bit (int8 scheme), and where
    the backend counts them, at most one host wait for the chain."""
    s, t = int8
    assert "int8-dyn-sym" in EXACT
    L = 8
    layers_t = [qport.quantize_weights(weights(K, K, seed=i), s) for i in range(L)]
    x = acts(4, K)
    ref = x
    for lt in layers_t:
        ref = qport.Linear("cpu", s, lt)(ref)
    for d in devices:
        if not d.supports(s):
            continue
        layers = [qport.Linear(d, s, lt, max_m=4) for lt in layers_t]
        try:
            bx = qport.Buffer.from_array(d, x)
        except qport.Error as e:
            pytest.fail(f"{d}: {e}")
        gc.collect()  # objects of earlier tests freed now: a destroy waits for its device
        d.synchronize()
        before = d.stats["host_waits"]
        h, outs = bx, []
        for lay in layers:
            h = lay.enqueue(h)
            outs.append(h)  # kept: freeing a buffer waits for its device (qp_buffer_destroy)
        d.synchronize()
        waits = d.stats["host_waits"] - before
        assert waits <= 1, f"{d}: {waits} host waits for a chain of {L}"
        assert (h.numpy() == ref).all(), d
        if d.backend == "opencl":  # dlpack.h: data is the cl_mem, byte_offset the offset in it
            assert h.__dlpack_device__() == (4, d.index)
            cap = h.__dlpack__(max_version=(1, 1))
            get = ctypes.pythonapi.PyCapsule_GetPointer
            get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
            mt = _dlpack.DLManagedTensorVersioned.from_address(get(cap, b"dltensor_versioned"))
            n = h.native()
            assert mt.dl_tensor.data == n["cl_mem"] and mt.dl_tensor.byte_offset == n["offset"]
            assert mt.dl_tensor.device.device_type == 4 and (mt.version.major, mt.version.minor) == (1, 1)
            assert [mt.dl_tensor.shape[i] for i in range(mt.dl_tensor.ndim)] == [4, K]
            back = qport.as_buffer(_Wrap(h))  # the cl_mem wrapped again (a sub-buffer), no copy
            assert back.device == d and back.native()["api"] == "opencl" and (back.numpy() == ref).all()
            with pytest.raises(ValueError, match="OpenCL memory"):
                qport.as_buffer(_Wrap(h), "cpu")
        if d.backend == "vulkan":
            with pytest.raises(BufferError, match="Vulkan buffer has no portable DLPack form"):
                h.__dlpack__()


def test_moe_enqueue(cli, demo_moe, devices):
    """MoE.enqueue with explicit routing equals the blocking forward, on
    the cpu device (host arrays wrapped) and on devices with MoE kernels
    (buffers)."""
    d8 = demo_moe + "-int8"
    if not os.path.isdir(d8):
        r = run_cli(cli, "quantize", demo_moe, d8, "--scheme", "int8-dyn-sym")
        assert r.returncode == 0, r.stderr
    m = qport.Model(d8)
    (block,) = m.moe_blocks
    moe = m.moe(block, "cpu")
    H, E = moe.H, moe.E
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (3, H)).astype(np.float16)
    ids, w = qport.moe_route(rng.normal(size=(3, E)).astype(np.float32), top_k=2)
    want = moe(x, topk_ids=ids, topk_weights=w)
    y = moe.enqueue(x, ids, w)
    moe.device.synchronize()
    assert (y.numpy() == want).all()
    with pytest.raises(ValueError, match="topk_ids: int32"):
        moe.enqueue(x, ids.astype(np.uint8), w)
    with pytest.raises(ValueError, match="topk_weights: float32"):
        moe.enqueue(x, ids, w[:2].copy())
    lg = rng.normal(size=(3, E)).astype(np.float32)
    want_lg = moe(x, lg)
    s = m.scheme(block, kind="moe")
    routed = 0
    for d in devices:
        if not d.supports_moe(s):
            continue
        dm = moe if d.backend == "cpu" else m.moe(block, d)
        if d.backend != "cpu":
            yd = dm.enqueue(qport.Buffer.from_array(d, x), qport.Buffer.from_array(d, ids),
                            qport.Buffer.from_array(d, w))
            d.synchronize()
            assert (yd.numpy() == want).all(), d
        # routed on the device (qp_moe_enqueue_logits), bit for bit as the host routing
        try:
            yl = dm.enqueue(qport.Buffer.from_array(d, x), router_logits=qport.Buffer.from_array(d, lg))
        except qport.UnsupportedError as e:
            assert "routing kernel" in str(e) or "route" in str(e)
            continue
        d.synchronize()
        assert (yl.numpy() == want_lg).all(), d
        routed += 1
    assert routed >= 1  # the cpu reference routes
    with pytest.raises(TypeError, match="not both"):
        moe.enqueue(x, ids, w, router_logits=lg)
    with pytest.raises(ValueError, match="router_logits: float32"):
        moe.enqueue(x, router_logits=lg[:, :2].copy())


def test_device_native_and_stats(devices):
    for d in devices:
        try:
            n = d.native()
        except qport.UnsupportedError:
            continue  # the backend does not hand out its handles (yet)
        assert n["api"] == {"cpu": "host"}.get(d.backend, d.backend) and n["imported"] is False
        st = d.stats
        assert set(st) == {"host_waits", "submissions", "allocations"}
    with pytest.raises(ValueError, match="api 'metal'"):
        qport.import_device("metal")
    with pytest.raises(TypeError, match="unknown handle"):
        qport.import_device("cuda", cuda_queue=1)


def test_import_does_not_import_torch():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import sys, qport; print('torch' in sys.modules, "
                        "qport._torch_ops._registered)"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]
