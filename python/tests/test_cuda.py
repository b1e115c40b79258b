"""The CUDA paths of the package without torch: buffers of a CUDA device
exported as kDLCUDA, imported back through DLPack (with qport's stream
passed to the producer) and through __cuda_array_interface__, a chain of
enqueued layers on them against the cpu reference. Runs on a real GPU and
on the CUDA emulator (the meson test python-cuda-emu); skipped without a
CUDA device or while the backend cannot import or describe its memory."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import qport
from qport import _dlpack
from qport.buffer import stream_id
from conftest import acts, scheme, weights

N, K = 64, 128


@pytest.fixture(scope="module")
def cuda():
    devs = [d for d in qport.devices() if d.backend == "cuda"]
    if not devs:
        pytest.skip("no CUDA device")
    d = devs[0]
    try:
        d.native()
        qport.Buffer.empty(d, 4, "f32").native()
    except qport.UnsupportedError as e:
        pytest.skip(f"the CUDA backend does not describe its memory yet: {e}")
    return d


class Producer:
    def __init__(self, b):
        self.b, self.calls = b, []

    def __dlpack_device__(self):
        return self.b.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return self.b.__dlpack__(**kw)


class CAI:
    def __init__(self, ptr, shape, typestr="<f2", stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": stream}


def test_export_and_import(cuda):
    ordinal = cuda.native()["cuda_device"]
    x = acts(4, K)
    b = qport.Buffer.from_array(cuda, x)
    n = b.native()
    assert n["api"] == "cuda" and n["ptr"] and b.__dlpack_device__() == (2, ordinal)
    cap = b.__dlpack__(max_version=(1, 1), stream=stream_id(cuda))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    mt = _dlpack.DLManagedTensorVersioned.from_address(get(cap, b"dltensor_versioned"))
    assert mt.dl_tensor.data == n["ptr"] and mt.dl_tensor.device.device_type == 2
    assert mt.dl_tensor.device.device_id == ordinal
    with pytest.raises(BufferError, match="stream 0"):
        b.__dlpack__(stream=0)
    p = Producer(b)
    b2 = qport.as_buffer(p)
    assert b2.device == cuda and b2.native()["ptr"] == n["ptr"] and (b2.numpy() == x).all()
    assert p.calls[0]["stream"] == stream_id(cuda)  # the consumer's (qport's) stream
    b3 = qport.as_buffer(CAI(n["ptr"], (4, K)))
    assert b3.native()["ptr"] == n["ptr"] and (b3.numpy() == x).all()
    with pytest.raises(ValueError, match="host memory"):
        qport.as_buffer(x, cuda)


def test_chain_on_imported_memory(cuda):
    s = scheme("int8-dyn-sym")
    ts = [qport.quantize_weights(weights(K, K, seed=i), s) for i in range(3)]
    x = acts(4, K)
    ref = x
    for t in ts:
        ref = qport.Linear("cpu", s, t)(ref)
    layers = [qport.Linear(cuda, s, t, max_m=4) for t in ts]
    src = qport.Buffer.from_array(cuda, x)
    outs = [qport.Buffer.empty(cuda, (4, K), "f16") for _ in ts]
    # x through __cuda_array_interface__ (legacy-stream field: waited for), the rest through DLPack
    h = qport.as_buffer(CAI(src.native()["ptr"], (4, K), stream=1))
    for lay, o in zip(layers, outs):
        h = lay.enqueue(qport.as_buffer(Producer(h)), qport.as_buffer(Producer(o), writable=True))
    cuda.synchronize()
    assert (outs[-1].numpy() == ref).all()
    assert (np.asarray(h.numpy()) == ref).all()
