"""torch integration: the layers as torch custom ops (qport::linear,
qport::moe, qport::moe_topk) with fake implementations, so that they run
under torch.compile; torch devices and dtypes.

torch is never imported here unless the caller has imported it already
(qport imports without torch). The ops are registered the first time a
layer is made or called while torch is imported, or by
qport.register_torch_ops()."""
from __future__ import annotations

import itertools
import sys
import threading
import weakref
from typing import Any

_layers: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_ids = itertools.count(1)
_lock = threading.Lock()
_registered = False


def torch_module() -> Any:
    return sys.modules.get("torch")


def track(layer: Any) -> int:
    """An id for the layer that the custom ops take (an int: ops cannot take
    Python objects); registers the ops when torch is imported."""
    i = next(_ids)
    _layers[i] = layer
    if torch_module() is not None:
        register()
    return i


def layer_of(i: int) -> Any:
    lay = _layers.get(int(i))
    if lay is None:
        raise ValueError(f"qport custom op: layer {i} does not exist any more (it was closed or collected)")
    return lay


def torch_dtype(dt: str) -> Any:
    torch = torch_module()
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "int32": torch.int32}[dt]


def qport_dtype(t: Any, raw_as: str | None = None) -> str:
    from ._arrays import _FROM_TORCH
    name = str(t.dtype).replace("torch.", "")
    if name == "int16" and raw_as in ("bf16", "f16"):
        return raw_as
    dt = _FROM_TORCH.get(name)
    if dt is None:
        raise TypeError(f"torch dtype {t.dtype} is not one qport takes ({', '.join(sorted(_FROM_TORCH))})")
    return dt


def device_spec(device: Any) -> Any:
    """A torch.device given where qport wants a device: qport's device over
    that GPU and torch's current stream (torch_device); anything else as is."""
    torch = torch_module()
    if torch is not None and isinstance(device, torch.device):
        return torch_device(device)
    return device


def torch_device(device: Any = None) -> Any:
    """The qport device for a torch device: "cpu" -> qport's cpu device;
    CUDA -> a device over that GPU and torch.cuda.current_stream() of it
    (qp_device_import, made once per (GPU, stream)), so layers created on it
    run on that stream."""
    torch = torch_module()
    if torch is None:
        raise RuntimeError("qport.torch_device: torch is not imported")
    from .buffer import stream_device
    from .device import device as _device
    d = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if d.type == "cpu":
        return _device("cpu")
    if d.type != "cuda":
        raise ValueError(f"qport.torch_device: {d}: qport takes cpu and cuda torch devices")
    idx = d.index if d.index is not None else torch.cuda.current_device()
    return stream_device(idx, torch.cuda.current_stream(idx).cuda_stream)


def register() -> bool:
    """Registers qport::linear, qport::moe and qport::moe_topk (once);
    False when torch is not imported or too old for torch.library.custom_op."""
    global _registered
    torch = torch_module()
    if torch is None:
        return False
    with _lock:
        if _registered:
            return True
        lib = getattr(torch, "library", None)
        if lib is None or not hasattr(lib, "custom_op"):
            return False
        Tensor = torch.Tensor  # annotations are strings here (from __future__): the schemas are explicit

        @lib.custom_op("qport::linear", mutates_args=(), schema="(Tensor x, int layer) -> Tensor")
        def linear_op(x: Tensor, layer: int) -> Tensor:
            return layer_of(layer)._forward_torch(x.contiguous())

        @linear_op.register_fake
        def _linear_fake(x: Tensor, layer: int) -> Tensor:
            lay = layer_of(layer)
            return x.new_empty((*x.shape[:-1], lay.N), dtype=torch_dtype(lay.out_dtype))

        @lib.custom_op("qport::moe", mutates_args=(), schema="(Tensor x, Tensor router_logits, int layer) -> Tensor")
        def moe_op(x: Tensor, router_logits: Tensor, layer: int) -> Tensor:
            return layer_of(layer)._forward_torch(x.contiguous(), router_logits.contiguous(), None, None)

        @moe_op.register_fake
        def _moe_fake(x: Tensor, router_logits: Tensor, layer: int) -> Tensor:
            return x.new_empty(x.shape, dtype=torch_dtype(layer_of(layer).act_dtype))

        @lib.custom_op("qport::moe_topk", mutates_args=(),
                       schema="(Tensor x, Tensor topk_ids, Tensor topk_weights, int layer) -> Tensor")
        def moe_topk_op(x: Tensor, topk_ids: Tensor, topk_weights: Tensor, layer: int) -> Tensor:
            return layer_of(layer)._forward_torch(x.contiguous(), None, topk_ids.contiguous(),
                                                  topk_weights.contiguous())

        @moe_topk_op.register_fake
        def _moe_topk_fake(x: Tensor, topk_ids: Tensor, topk_weights: Tensor, layer: int) -> Tensor:
            return x.new_empty(x.shape, dtype=torch_dtype(layer_of(layer).act_dtype))

        _registered = True
        return True


def _ops() -> Any:
    # no lock once registered: torch.compile traces this (layers are made,
    # so the ops registered, before anything is compiled)
    if not _registered and not register():
        raise RuntimeError("qport: torch.library.custom_op is not available (torch 2.4 or later is needed)")
    return torch_module().ops.qport


def _check(x: Any, what: str) -> None:
    if not x.is_contiguous():
        raise ValueError(f"{what}: the tensor is not contiguous (.contiguous())")


def linear(layer: Any, x: Any) -> Any:
    """torch.ops.qport.linear(x, layer.op_id), after the checks that give
    plain Python errors (dtype, shape, contiguity)."""
    _check(x, "x")
    from .linear import _check_act
    _check_act(tuple(x.shape), layer.K, qport_dtype(x, layer.act_dtype), layer.act_dtype)
    return _ops().linear(x, layer.op_id)


def moe(layer: Any, x: Any, router_logits: Any = None, topk_ids: Any = None, topk_weights: Any = None) -> Any:
    _check(x, "x")
    if router_logits is not None:
        if topk_ids is not None or topk_weights is not None:
            raise TypeError("give router_logits or topk_ids and topk_weights, not both")
        _check(router_logits, "router_logits")
        return _ops().moe(x, router_logits, layer.op_id)
    if topk_ids is None or topk_weights is None:
        raise TypeError("give router_logits, or topk_ids and topk_weights")
    _check(topk_ids, "topk_ids")
    _check(topk_weights, "topk_weights")
    return _ops().moe_topk(x, topk_ids, topk_weights, layer.op_id)
