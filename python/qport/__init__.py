"""qport: which scheme vLLM runs for each layer of a quantized model (AMD
Quark, QQQ, HF fp8 configs), and that layer computed on any device -- the
cpu reference, Vulkan, OpenCL, CUDA -- from Python.

A binding over libqport.so (ctypes); every computation is the C library's.

>>> import qport, numpy as np
>>> cfg = qport.load_config("tests/configs/llama-w8a8-int8-kv.json")
>>> s = cfg.resolve("model.layers.0.self_attn.qkv_proj", capability=80)
>>> s.method, s.scheme_class, s.weight_key
('QuarkLinearMethod', 'QuarkW8A8Int8', 'kInt8StaticChannelSym')
>>> w = np.random.default_rng(0).normal(size=(256, 128)).astype(np.float32)
>>> ref = qport.Linear("cpu", s, qport.quantize_weights(w, s))
>>> x = np.ones((4, 128), np.float16)
>>> for d in qport.devices():
...     assert (qport.Linear(d, s, qport.quantize_weights(w, s))(x) == ref(x)).all()
"""
from __future__ import annotations

from . import _abi, _torch_ops
from .arch import Arch, arch, architectures
from ._arrays import Tensor
from ._errors import (CapabilityError, DeviceError, Error, InternalError, InvalidArgumentError, NotFoundError,
                      ParseError, QportIOError, QportMemoryError, UnsupportedError, VllmNotImplementedError,
                      VllmValueError)
from ._handle import context
from .config import Config, QuantSpec, Scheme, SchemeKind, load_config, scheme_kinds
from .conform import conform
from .buffer import Buffer, Event, as_buffer, import_device, stream_device
from .device import Backend, Device, Support, backends, device, devices
from .kv import kv_dequantize, kv_quantize
from .linear import Linear
from .model import Model
from .moe import MoE
from .moe import route as moe_route
from .quantize import quantize_weights

register_torch_ops = _torch_ops.register
torch_device = _torch_ops.torch_device
if _torch_ops.torch_module() is not None:  # torch imported before qport: the custom ops now
    _torch_ops.register()

__version__: str = _abi.s(_abi.lib.qp_version())
"""The version of the libqport actually loaded."""

__all__ = [
    "Arch", "Backend", "Buffer", "CapabilityError", "Config", "Device", "DeviceError", "Error", "Event", "InternalError",
    "InvalidArgumentError", "Linear", "MoE", "Model", "NotFoundError", "ParseError", "QportIOError",
    "QportMemoryError", "QuantSpec", "Scheme", "SchemeKind", "Support", "Tensor", "UnsupportedError", "VllmNotImplementedError",
    "VllmValueError", "arch", "architectures", "as_buffer", "backends", "conform", "context", "device", "devices", "import_device",
    "kv_dequantize", "kv_quantize", "load_config", "moe_route", "quantize_weights", "register_torch_ops", "scheme_kinds",
    "stream_device", "torch_device",
]
