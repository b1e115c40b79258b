"""Mixture-of-experts layers (qp_moe_*): vLLM's FusedMoE, routed by
router logits or by explicit top-k ids and weights (docs/moe.md)."""
from __future__ import annotations

import ctypes
from typing import Any, Mapping

import numpy as np

from . import _abi
from ._arrays import as_host, is_torch, returner, storage_dtype
from ._handle import Handle, context
from .config import Scheme
from .device import Device, device as _device
from .linear import act_dtype_arg, activations, c_tensors


def _options(act_dtype: str, top_k: int, renormalize: bool, num_expert_group: int, topk_group: int,
             scoring: str, routed_scaling_factor: float, e_score_correction_bias: Any,
             global_num_experts: int, expert_offset: int,
             layer: str | None) -> tuple[_abi.MoeOptions, list, int | None]:
    """The C options, the objects they point into (keep them alive), and
    the length of the correction bias (None without one)."""
    o = _abi.MoeOptions()
    _abi.lib.qp_moe_options_init(ctypes.byref(o))
    keep: list = []
    o.act_dtype = act_dtype_arg(act_dtype, ("f16", "bf16"))
    o.top_k = int(top_k)
    o.renormalize = int(bool(renormalize))
    o.num_expert_group, o.topk_group = int(num_expert_group), int(topk_group)
    if scoring not in _abi.MOE_SCORING:
        raise ValueError(f"scoring {scoring!r}: one of {', '.join(_abi.MOE_SCORING)}")
    o.scoring = _abi.MOE_SCORING.index(scoring)
    o.routed_scaling_factor = float(routed_scaling_factor)
    o.global_num_experts, o.expert_offset = int(global_num_experts), int(expert_offset)
    if layer is not None:
        lb = layer.encode()
        o.layer = lb
        keep.append(lb)
    if e_score_correction_bias is not None:
        b, dt = as_host(e_score_correction_bias, "e_score_correction_bias")
        if dt != "f32" or b.ndim != 1:
            raise TypeError("e_score_correction_bias: a 1-D float32 array of one value per expert")
        keep.append(b)
        o.e_score_correction_bias = ctypes.cast(b.ctypes.data, ctypes.POINTER(ctypes.c_float))
        return o, keep, b.shape[0]
    return o, keep, None


def _logits(router_logits: Any, M: int, E: int) -> np.ndarray:
    a, dt = as_host(router_logits, "router_logits")
    if dt != "f32":
        raise TypeError(f"router_logits: float32, not {dt}")
    if a.shape != (M, E):
        raise ValueError(f"router_logits: shape {tuple(a.shape)}, want ({M}, {E})")
    return a


def route(router_logits: Any, top_k: int = 2, *, renormalize: bool = False, num_expert_group: int = 0,
          topk_group: int = 0, scoring: str = "softmax", routed_scaling_factor: float = 1.0,
          e_score_correction_bias: Any = None) -> tuple[Any, Any]:
    """vLLM's fused_topk / grouped_topk: router logits [M, E] float32 ->
    (topk_ids int32 [M, top_k], topk_weights float32 [M, top_k]), numpy or
    torch like the input.

    >>> ids, w = qport.moe_route(np.array([[0.1, 2.0, -1.0, 0.5]], np.float32), top_k=2)
    >>> ids.tolist()
    [[1, 3]]
    """
    a, dt = as_host(router_logits, "router_logits")
    if dt != "f32" or a.ndim != 2:
        raise TypeError("router_logits: a 2-D float32 array [tokens, experts]")
    M, E = a.shape
    o, keep, bl = _options("f16", top_k, renormalize, num_expert_group, topk_group, scoring, routed_scaling_factor,
                           e_score_correction_bias, 0, 0, None)
    if bl is not None and bl != E:
        raise ValueError(f"e_score_correction_bias: {bl} values for {E} experts")
    if not 0 < int(top_k) <= E:
        raise ValueError(f"top_k {top_k} must be in 1 .. {E}")
    ids = np.empty((M, int(top_k)), np.int32)
    w = np.empty((M, int(top_k)), np.float32)
    ctx = context()
    if M:
        ctx.check(_abi.lib.qp_moe_route(ctx.ptr, a.ctypes.data, M, E, ctypes.byref(o), ids.ctypes.data,
                                        w.ctypes.data))
    del keep
    if is_torch(router_logits):
        import torch
        return torch.from_numpy(ids), torch.from_numpy(w)
    return ids, w


class MoE:
    """A routed-experts layer (vLLM's FusedMoE) with E experts, hidden size
    H and intermediate size I. `tensors` holds vLLM's FusedMoE parameters:
    w13_weight [E, 2I, H], w2_weight [E, H, I] and the scheme's scales
    (w13_weight_scale, w2_weight_scale, w13_input_scale, w2_input_scale).
    `scheme` is resolved with kind="moe". Runs on the cpu reference and
    on devices whose backend has fused MoE kernels (Device.supports_moe).

    >>> moe = qport.MoE("cpu", cfg.resolve("model.layers.0.mlp.experts", kind="moe"), 4, 64, 32, tensors, top_k=2)
    >>> y = moe(x, router_logits)                 # routed by vLLM's fused_topk
    >>> y = moe(x, topk_ids=ids, topk_weights=w)  # explicit routing
    """

    router: str | None = None  # Model.moe(): the gate layer's name

    def __init__(self, device: Device | str | None, scheme: Scheme, E: int, H: int, I: int,  # noqa: E741
                 tensors: Mapping[str, Any], *, top_k: int = 2, renormalize: bool = False, num_expert_group: int = 0,
                 topk_group: int = 0, scoring: str = "softmax", routed_scaling_factor: float = 1.0,
                 e_score_correction_bias: Any = None, global_num_experts: int = 0, expert_offset: int = 0,
                 act_dtype: str = "f16", layer: str | None = None) -> None:
        if not isinstance(scheme, Scheme):
            raise TypeError(f"scheme: a qport.Scheme (Config.resolve(..., kind='moe')), not {type(scheme).__name__}")
        for n, v in (("E", E), ("H", H), ("I", I)):
            if not 0 < int(v) < 2**31:
                raise ValueError(f"{n} = {v}: want a positive size")
        dev = device if isinstance(device, Device) else _device(device if device is not None else "cpu")
        self._ctx = context()
        o, keep, bl = _options(act_dtype, top_k, renormalize, num_expert_group, topk_group, scoring,
                               routed_scaling_factor, e_score_correction_bias, global_num_experts, expert_offset,
                               layer if layer is not None else scheme.layer)
        G = int(global_num_experts) or int(E)
        if bl is not None and bl != G:
            raise ValueError(f"e_score_correction_bias: {bl} values for {G} experts")
        arr, n_t, tkeep = c_tensors(tensors)
        p = ctypes.c_void_p()
        self._ctx.check(_abi.lib.qp_moe_create(dev.ptr, ctypes.byref(scheme._c), int(E), int(H), int(I), arr, n_t,
                                               ctypes.byref(o), ctypes.byref(p)))
        del keep, tkeep
        self._init(p.value, dev, scheme, int(E), int(H), int(I), G, int(top_k), act_dtype)

    def _init(self, ptr: int | None, dev: Device, scheme: Scheme, E: int, H: int, I: int, G: int, top_k: int,  # noqa: E741
              act_dtype: str) -> None:
        self._ctx = context()
        self.device, self.scheme = dev, scheme
        self.E, self.H, self.I, self.global_num_experts, self.top_k = E, H, I, G, top_k
        self.act_dtype = act_dtype
        self._h = Handle(ptr, _abi.lib.qp_moe_destroy, "qport.MoE")

    def __call__(self, x: Any, router_logits: Any = None, *, topk_ids: Any = None, topk_weights: Any = None) -> Any:
        """y [M, H] = MoE(x [M, H]) routed by router_logits [M, global E]
        (float32), or by topk_ids (int32 [M, top_k], in 0 .. global E - 1)
        and topk_weights (float32 [M, top_k]). y comes back like x."""
        a, lead, M = activations(x, self.H, self.act_dtype)
        if len(lead) > 1:
            raise ValueError(f"x: shape {tuple(a.shape)}, want (tokens, {self.H})")
        out = np.empty(lead + (self.H,), storage_dtype(self.act_dtype))
        if router_logits is not None:
            if topk_ids is not None or topk_weights is not None:
                raise TypeError("give router_logits or topk_ids and topk_weights, not both")
            lg = _logits(router_logits, M, self.global_num_experts)
            if M:
                with self._h.use() as p:
                    self._ctx.check(_abi.lib.qp_moe_forward(p, a.ctypes.data, M, lg.ctypes.data, out.ctypes.data))
        else:
            if topk_ids is None or topk_weights is None:
                raise TypeError("give router_logits, or topk_ids and topk_weights")
            ids, dt = as_host(topk_ids, "topk_ids")
            if dt != "int32" or ids.shape != (M, self.top_k):
                raise ValueError(f"topk_ids: int32 of shape ({M}, {self.top_k}), got {dt} {tuple(ids.shape)}")
            if ids.size and (ids.min() < 0 or ids.max() >= self.global_num_experts):
                raise ValueError(f"topk_ids: expert ids must be in 0 .. {self.global_num_experts - 1}")
            w, dt = as_host(topk_weights, "topk_weights")
            if dt != "f32" or w.shape != (M, self.top_k):
                raise ValueError(f"topk_weights: float32 of shape ({M}, {self.top_k}), got {dt} {tuple(w.shape)}")
            if M:
                with self._h.use() as p:
                    self._ctx.check(_abi.lib.qp_moe_forward_topk(p, a.ctypes.data, M, ids.ctypes.data, w.ctypes.data,
                                                                 out.ctypes.data))
        return returner(x, self.act_dtype)(out, self.act_dtype)

    def describe(self, M: int = 1) -> str:
        """The code path the layer takes for M tokens ("reference" on cpu)."""
        buf = ctypes.create_string_buffer(256)
        with self._h.use() as p:
            _abi.lib.qp_moe_describe(p, int(M), buf, len(buf))
        return _abi.s(buf.value)

    def close(self) -> None:
        """Frees the layer now; calling it afterwards raises ValueError."""
        self._h.close()

    @property
    def closed(self) -> bool:
        return self._h.closed

    def __enter__(self) -> MoE:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<qport.MoE {self.scheme.kind} E={self.E} H={self.H} I={self.I} top_k={self.top_k} on {self.device}>"
