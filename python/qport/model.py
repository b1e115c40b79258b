"""Model directories (qp_model_*): config.json + safetensors checkpoints,
their layers bound as vLLM's loader binds them."""
from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from . import _abi, _torch_ops
from .arch import Arch, from_handle
from ._arrays import Tensor, tensor_from_c
from ._handle import Handle, context
from .config import Config, Scheme, _resolve_options
from .device import Device, device as _device
from .linear import _PATHS, Linear, act_dtype_arg
from .moe import MoE


class _Borrowed:
    """The handle of an object the model owns (its config): alive while the
    model is open."""

    def __init__(self, ptr: int, parent: Handle) -> None:
        self._ptr, self._parent = ptr, parent

    @contextmanager
    def use(self) -> Iterator[int]:
        with self._parent.use():
            yield self._ptr

    @property
    def closed(self) -> bool:
        return self._parent.closed

    def close(self) -> None:
        pass


class Model:
    """A model directory: config.json (with or without a
    quantization_config) and model.safetensors, the shards of
    model.safetensors.index.json, or every *.safetensors.

    >>> m = qport.Model("build/demo/int8")
    >>> m.layers[:2]
    ['model.layers.0.self_attn.q_proj', ...]
    >>> y = m.layer("model.layers.0.self_attn.qkv_proj", "vulkan")(x)
    >>> m.kv_scales("model.layers.0.self_attn")
    (0.0123, 0.0456)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self._ctx = context()
        p = ctypes.c_void_p()
        self._ctx.check(_abi.lib.qp_model_open(self._ctx.ptr, os.fsencode(path), ctypes.byref(p)))
        self.path = os.fspath(path)
        self._h = Handle(p.value, _abi.lib.qp_model_close, f"qport.Model({self.path!r})")
        # qp_model_* calls on one model are not documented as thread-safe:
        # serialise them (layers, once created, run concurrently)
        self._lock = threading.Lock()

    @contextmanager
    def _use(self) -> Iterator[int]:
        with self._h.use() as p, self._lock:
            yield p

    def close(self) -> None:
        """Unmaps the checkpoint; later calls raise ValueError. Layers made
        from the model stay usable (they hold their own copies)."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def config(self) -> Config | None:
        """The quantization config (None when config.json has none)."""
        with self._use() as p:
            c = _abi.lib.qp_model_config(p)
        if not c:
            return None
        cfg = Config.__new__(Config)
        cfg._ctx, cfg._owner, cfg._h = self._ctx, self, _Borrowed(c, self._h)
        return cfg

    @property
    def arch(self) -> Arch:
        """The architecture of config.json as vLLM's model class builds it
        (qport.Arch; also for an unquantized model)."""
        with self._use() as p:
            return from_handle(_abi.lib.qp_model_arch, p)

    @property
    def dtype(self) -> str:
        """The activation / params dtype vLLM picks with dtype="auto": "f16" or "bf16"."""
        with self._use() as p:
            return _abi.DTYPES[_abi.lib.qp_model_dtype(p)]

    @property
    def layers(self) -> list[str]:
        """Linear layers of the checkpoint (fused shards listed as on disk)."""
        with self._use() as p:
            return [_abi.s(_abi.lib.qp_model_layer_name(p, i)) for i in range(_abi.lib.qp_model_layer_count(p))]

    @property
    def moe_blocks(self) -> list[str]:
        """Routed-expert blocks ("model.layers.3.mlp.experts")."""
        with self._use() as p:
            return [_abi.s(_abi.lib.qp_model_moe_name(p, i)) for i in range(_abi.lib.qp_model_moe_count(p))]

    @property
    def tensor_names(self) -> list[str]:
        out = []
        t = _abi.Tensor()
        with self._use() as p:
            for i in range(_abi.lib.qp_model_tensor_count(p)):
                self._ctx.check(_abi.lib.qp_model_tensor_get(p, i, ctypes.byref(t)))
                out.append(_abi.s(t.name))
        return out

    def tensor(self, name: str) -> Tensor:
        """A copy of one checkpoint tensor (qport.Tensor: .numpy(), .dtype)."""
        t = _abi.Tensor()
        with self._use() as p:
            self._ctx.check(_abi.lib.qp_model_find_tensor(p, name.encode(), ctypes.byref(t)))
            return tensor_from_c(t)

    def _bind_options(self, tp_size: int, tp_rank: int, ep_size: int, ep_rank: int, capability: Any,
                      dialect: str) -> tuple[_abi.BindOptions, list]:
        r, keep = _resolve_options(capability, None, dialect, None, None)
        o = _abi.BindOptions()
        _abi.lib.qp_bind_options_init(ctypes.byref(o))
        o.resolve = ctypes.pointer(r)
        o.tp_size, o.tp_rank, o.ep_size, o.ep_rank = int(tp_size), int(tp_rank), int(ep_size), int(ep_rank)
        return o, keep + [r]

    def scheme(self, layer: str, kind: str = "linear", capability: Any = None) -> Scheme:
        """What vLLM runs for `layer` of this model (its config; an
        unquantized layer when the model has no quantization_config)."""
        cfg = self.config
        if cfg is None:
            raise LookupError(f"{self.path}: config.json has no quantization_config")
        return cfg.resolve(layer, kind=kind, capability=capability)

    def layer(self, name: str, device: Device | str | None = None, *, act_dtype: str | None = None,
              tp_size: int = 1, tp_rank: int = 0, capability: Any = None, dialect: str = "vllm",
              path: str = "auto") -> Linear:
        """The linear layer `name` bound as vLLM's loader binds it (fused
        qkv_proj / gate_up_proj assembled from their shards, tensor-parallel
        slicing) and created on `device` (None: the best device for its
        scheme). act_dtype: the model's dtype unless given."""
        o, keep = self._bind_options(tp_size, tp_rank, 1, 0, capability, dialect)
        if path not in _PATHS:
            raise ValueError(f"path {path!r}: one of {', '.join(_PATHS)}")
        b = _abi.LayerBinding()
        act = act_dtype or self.dtype
        lo = _abi.LinearOptions()
        _abi.lib.qp_linear_options_init(ctypes.byref(lo))
        lo.act_dtype = act_dtype_arg(act)
        lo.path = _PATHS[path]
        lb = name.encode()
        lo.layer = lb
        q = ctypes.c_void_p()
        with self._use() as p:
            self._ctx.check(_abi.lib.qp_model_bind_layer(p, lb, ctypes.byref(o), ctypes.byref(b)))
            try:
                scheme = Scheme(_abi.Scheme.from_buffer_copy(b.scheme), name, "linear")
                dev = device if isinstance(device, Device) else _device(_torch_ops.device_spec(device), scheme)
                if b.n_shards:
                    lo.shard_rows = ctypes.cast(b.shard_rows, ctypes.POINTER(ctypes.c_int))
                    lo.n_shards = b.n_shards
                # the binding's tensors point into the mapping: qp_linear_create copies them
                self._ctx.check(_abi.lib.qp_linear_create(dev.ptr, ctypes.byref(b.scheme), b.N, b.K, b.tensors,
                                                          b.n_tensors, ctypes.byref(lo), ctypes.byref(q)))
                N, K = b.N, b.K
            finally:
                _abi.lib.qp_layer_binding_free(ctypes.byref(b))
        del keep
        return Linear._adopt(q.value, dev, scheme, N, K, act)

    def moe(self, name: str, device: Device | str | None = "cpu", *, act_dtype: str | None = None,
            ep_size: int = 1, ep_rank: int = 0, tp_size: int = 1, tp_rank: int = 0, dialect: str = "vllm") -> MoE:
        """The routed experts `name` ("model.layers.0.mlp.experts") stacked
        as vLLM's FusedMoE loads them, with the routing config.json sets
        (top_k, renormalize, grouped top-k). `.router` on the result names
        the gate layer (bind it with .layer(); it is unquantized)."""
        o, keep = self._bind_options(tp_size, tp_rank, ep_size, ep_rank, None, dialect)
        b = _abi.MoeBinding()
        mo = _abi.MoeOptions()
        _abi.lib.qp_moe_options_init(ctypes.byref(mo))
        act = act_dtype or self.dtype
        with self._use() as p:
            self._ctx.check(_abi.lib.qp_model_bind_moe(p, name.encode(), ctypes.byref(o), ctypes.byref(b)))
            try:
                self._ctx.check(_abi.lib.qp_model_moe_options(p, name.encode(), ctypes.byref(mo)))
                mo.act_dtype = act_dtype_arg(act, ("f16", "bf16"))
                mo.global_num_experts, mo.expert_offset = b.global_num_experts, b.expert_offset
                lb = name.encode()
                mo.layer = lb
                scheme = Scheme(_abi.Scheme.from_buffer_copy(b.scheme), name, "moe")
                dev = device if isinstance(device, Device) else _device(
                    _torch_ops.device_spec(device) if device is not None else "cpu")
                q = ctypes.c_void_p()
                # the tensors and the correction bias point into the model's
                # mapping and the binding: qp_moe_create copies both
                self._ctx.check(_abi.lib.qp_moe_create(dev.ptr, ctypes.byref(b.scheme), b.E, b.H, b.I, b.tensors,
                                                       b.n_tensors, ctypes.byref(mo), ctypes.byref(q)))
                E, H, I, G, router = b.E, b.H, b.I, b.global_num_experts or b.E, _abi.s(b.router)  # noqa: E741
                bias = (np.ctypeslib.as_array(mo.e_score_correction_bias, (G,)).copy()
                        if mo.e_score_correction_bias else None)
                routing = dict(renormalize=bool(mo.renormalize), num_expert_group=mo.num_expert_group,
                               topk_group=mo.topk_group, scoring=_abi.MOE_SCORING[mo.scoring],
                               routed_scaling_factor=mo.routed_scaling_factor, e_score_correction_bias=bias)
            finally:
                _abi.lib.qp_moe_binding_free(ctypes.byref(b))
        del keep
        m = MoE.__new__(MoE)
        m._init(q.value, dev, scheme, E, H, I, G, mo.top_k, act, routing)
        m.router = router or None
        return m

    def kv_scales(self, prefix: str) -> tuple[float, float]:
        """(k_scale, v_scale) of the fp8 KV cache of the attention module
        `prefix` ("model.layers.0.self_attn"), as vLLM's QuarkKVCacheMethod
        ends up with them; LookupError when the config does not quantize
        the cache."""
        k, v = ctypes.c_float(), ctypes.c_float()
        with self._use() as p:
            self._ctx.check(_abi.lib.qp_model_kv_scales(p, prefix.encode(), ctypes.byref(k), ctypes.byref(v)))
        return k.value, v.value

    def is_unquantized(self, layer: str) -> bool:
        """Whether the architecture builds `layer` without quantization
        whatever the config says (MoE routers)."""
        with self._use() as p:
            return bool(_abi.lib.qp_model_layer_unquantized(p, layer.encode()))

    def __repr__(self) -> str:
        return f"<qport.Model {self.path!r}{' closed' if self.closed else ''}>"
