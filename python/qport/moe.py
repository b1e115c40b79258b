"""Mixture-of-experts layers (qp_moe_*): vLLM's FusedMoE, routed by
router logits or by explicit top-k ids and weights (docs/moe.md)."""
from __future__ import annotations

import ctypes
from typing import Any, Mapping

import numpy as np

from . import _abi, _torch_ops
from ._arrays import as_host, is_torch, returner, storage_dtype
from ._errors import UnsupportedError
from ._handle import Handle, context
from .buffer import Buffer, as_buffer, cl_out_event, enqueue_sync, keep_until_sync, run_torch_cuda
from .config import Scheme
from .device import Device, device as _device
from .linear import act_dtype_arg, activations, c_tensors


def _options(act_dtype: str, top_k: int, renormalize: bool, num_expert_group: int, topk_group: int,
             scoring: str, routed_scaling_factor: float, e_score_correction_bias: Any,
             global_num_experts: int, expert_offset: int,
             layer: str | None, max_m: int = 0) -> tuple[_abi.MoeOptions, list, int | None]:
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
    if not 0 <= int(max_m) <= 1 << 24:
        raise ValueError(f"max_m {max_m}: 0 (16) .. {1 << 24}")
    o.max_m = int(max_m)
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
                 act_dtype: str = "f16", layer: str | None = None, max_m: int = 0) -> None:
        if not isinstance(scheme, Scheme):
            raise TypeError(f"scheme: a qport.Scheme (Config.resolve(..., kind='moe')), not {type(scheme).__name__}")
        for n, v in (("E", E), ("H", H), ("I", I)):
            if not 0 < int(v) < 2**31:
                raise ValueError(f"{n} = {v}: want a positive size")
        dev = device if isinstance(device, Device) else _device(
            _torch_ops.device_spec(device) if device is not None else "cpu")
        self._ctx = context()
        o, keep, bl = _options(act_dtype, top_k, renormalize, num_expert_group, topk_group, scoring,
                               routed_scaling_factor, e_score_correction_bias, global_num_experts, expert_offset,
                               layer if layer is not None else scheme.layer, max_m)
        G = int(global_num_experts) or int(E)
        if bl is not None and bl != G:
            raise ValueError(f"e_score_correction_bias: {bl} values for {G} experts")
        arr, n_t, tkeep = c_tensors(tensors)
        p = ctypes.c_void_p()
        self._ctx.check(_abi.lib.qp_moe_create(dev.ptr, ctypes.byref(scheme._c), int(E), int(H), int(I), arr, n_t,
                                               ctypes.byref(o), ctypes.byref(p)))
        del keep, tkeep
        bias = None if e_score_correction_bias is None else np.array(as_host(e_score_correction_bias, "bias")[0])
        self._init(p.value, dev, scheme, int(E), int(H), int(I), G, int(top_k), act_dtype,
                   dict(renormalize=bool(renormalize), num_expert_group=int(num_expert_group),
                        topk_group=int(topk_group), scoring=scoring, routed_scaling_factor=float(routed_scaling_factor),
                        e_score_correction_bias=bias))

    def _init(self, ptr: int | None, dev: Device, scheme: Scheme, E: int, H: int, I: int, G: int, top_k: int,  # noqa: E741
              act_dtype: str, routing: dict[str, Any] | None = None) -> None:
        self._ctx = context()
        self._routing = routing or {}  # for routing router logits of CUDA tensors (qport.moe_route)
        self._device_routing: bool | None = None  # qp_moe_enqueue_logits: untried / works / unsupported
        self.device, self.scheme = dev, scheme
        self.E, self.H, self.I, self.global_num_experts, self.top_k = E, H, I, G, top_k
        self.act_dtype = act_dtype
        self._h = Handle(ptr, _abi.lib.qp_moe_destroy, "qport.MoE")
        self.op_id = _torch_ops.track(self)

    def __call__(self, x: Any, router_logits: Any = None, *, topk_ids: Any = None, topk_weights: Any = None) -> Any:
        """y [M, H] = MoE(x [M, H]) routed by router_logits [M, global E]
        (float32), or by topk_ids (int32 [M, top_k], in 0 .. global E - 1)
        and topk_weights (float32 [M, top_k]). y comes back like x: numpy,
        or torch through the custom ops torch.ops.qport.moe / moe_topk (CUDA
        tensors of the block's GPU without a copy; router logits on the GPU
        are routed on the device, qp_moe_enqueue_logits, or on the host with
        one round trip where the backend has no routing kernel)."""
        if is_torch(x):
            return _torch_ops.moe(self, x, router_logits, topk_ids, topk_weights)
        return self._forward_host(x, router_logits, topk_ids, topk_weights)

    def _forward_torch(self, x: Any, router_logits: Any, topk_ids: Any, topk_weights: Any) -> Any:
        """The custom ops' kernel."""
        if x.device.type != "cuda":
            return self._forward_host(x, router_logits, topk_ids, topk_weights)
        torch = _torch_ops.torch_module()
        y = torch.empty(tuple(x.shape), dtype=_torch_ops.torch_dtype(self.act_dtype), device=x.device)
        if router_logits is not None:
            M = self._check_topk_shapes(x, None, None)
            if tuple(router_logits.shape) != (M, self.global_num_experts) or str(router_logits.dtype) != "torch.float32":
                raise ValueError(f"router_logits: float32 of shape ({M}, {self.global_num_experts}), got "
                                 f"{router_logits.dtype} {tuple(router_logits.shape)}")
            if M and self._device_routing is not False:
                try:  # routed on the device (qp_moe_enqueue_logits), bit for bit as qp_moe_route
                    run_torch_cuda(self.device, [x, router_logits], [y],
                                   lambda b, sync: self._enqueue_logits_raw(b[0], M, b[1], b[2], sync))
                    self._device_routing = True
                    return y
                except UnsupportedError:
                    self._device_routing = False  # no routing kernel here: route on the host from now on
            ids, w = route(router_logits.detach().cpu(), self.top_k, **self._routing)
            topk_ids, topk_weights = ids.to(x.device), w.to(x.device)
        M = self._check_topk_shapes(x, topk_ids, topk_weights)
        if M:
            run_torch_cuda(self.device, [x, topk_ids, topk_weights], [y],
                           lambda b, sync: self._enqueue_raw(b[0], M, b[1], b[2], b[3], sync))
        return y

    def _check_topk_shapes(self, x: Any, ids: Any, w: Any) -> int:
        if len(x.shape) != 2 or x.shape[1] != self.H:
            raise ValueError(f"x: shape {tuple(x.shape)}, want (tokens, {self.H})")
        M = int(x.shape[0])
        if _torch_ops.qport_dtype(x, self.act_dtype) != self.act_dtype:
            raise TypeError(f"x: the block computes {self.act_dtype} activations, x is {x.dtype}")
        if ids is None:
            return M
        if str(ids.dtype) not in ("torch.int32", "int32") or tuple(ids.shape) != (M, self.top_k):
            raise ValueError(f"topk_ids: int32 of shape ({M}, {self.top_k}), got {ids.dtype} {tuple(ids.shape)}")
        if str(w.dtype) not in ("torch.float32", "float32", "f32") or tuple(w.shape) != (M, self.top_k):
            raise ValueError(f"topk_weights: float32 of shape ({M}, {self.top_k}), got {w.dtype} {tuple(w.shape)}")
        return M

    def _enqueue_raw(self, bx: int, M: int, bi: int, bw: int, by: int, sync: Any) -> None:
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_moe_enqueue(p, bx, M, bi, bw, by,
                                                    ctypes.byref(sync) if sync is not None else None))

    def _enqueue_logits_raw(self, bx: int, M: int, bl: int, by: int, sync: Any) -> None:
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_moe_enqueue_logits(p, bx, M, bl, by,
                                                           ctypes.byref(sync) if sync is not None else None))

    def enqueue(self, x: Any, topk_ids: Any = None, topk_weights: Any = None, y: Any = None, *,
                router_logits: Any = None, sync: Mapping[str, Any] | None = None) -> Any:
        """Enqueues y = MoE(x) on device memory and returns y without
        waiting: x [M, H] of act_dtype, and either topk_ids int32 [M, top_k]
        (global expert ids; an id that is not one of this block's experts
        contributes nothing: ids on the device are not checked) with
        topk_weights float32 [M, top_k] (qp_moe_enqueue), or router_logits
        float32 [M, global E], routed on the device as moe_route routes
        (qp_moe_enqueue_logits; UnsupportedError where the backend has no
        routing kernel). y None (a new Buffer) or memory of [M, H]; each a
        qport.Buffer of the block's device or memory as_buffer wraps
        without a copy, kept alive until the device is synchronised. sync:
        as Linear.enqueue."""
        dev = self.device
        bx = as_buffer(x, dev, dtype=self.act_dtype, what="x")
        if bx.dtype != self.act_dtype:
            raise TypeError(f"x: the block computes {self.act_dtype} activations, x is {bx.dtype}")
        if len(bx.shape) != 2 or bx.shape[1] != self.H:
            raise ValueError(f"x: shape {bx.shape}, want (tokens, {self.H})")
        M = bx.shape[0]
        if not M:
            raise ValueError("x: 0 tokens")
        if router_logits is not None:
            if topk_ids is not None or topk_weights is not None:
                raise TypeError("give router_logits or topk_ids and topk_weights, not both")
            bl = as_buffer(router_logits, dev, what="router_logits")
            if bl.dtype != "f32" or bl.shape != (M, self.global_num_experts):
                raise ValueError(f"router_logits: float32 of shape ({M}, {self.global_num_experts}), got "
                                 f"{bl.dtype} {bl.shape}")
            by = self._out(dev, y, M)
            s, keep = enqueue_sync(sync)
            with bx._h.use() as px, bl._h.use() as pl, by._h.use() as py:
                self._enqueue_logits_raw(px, M, pl, py, s)
            keep_until_sync(dev, bx, bl, by, self)
            ev = cl_out_event(keep)
            return (by, ev) if sync and sync.get("cl_out_event") else by
        if topk_ids is None or topk_weights is None:
            raise TypeError("give router_logits, or topk_ids and topk_weights")
        bi = as_buffer(topk_ids, dev, what="topk_ids")
        bw = as_buffer(topk_weights, dev, what="topk_weights")
        if bi.dtype != "int32" or bi.shape != (M, self.top_k):
            raise ValueError(f"topk_ids: int32 of shape ({M}, {self.top_k}), got {bi.dtype} {bi.shape}")
        if bw.dtype != "f32" or bw.shape != (M, self.top_k):
            raise ValueError(f"topk_weights: float32 of shape ({M}, {self.top_k}), got {bw.dtype} {bw.shape}")
        by = self._out(dev, y, M)
        s, keep = enqueue_sync(sync)
        with bx._h.use() as px, bi._h.use() as pi, bw._h.use() as pw, by._h.use() as py:
            self._enqueue_raw(px, M, pi, pw, py, s)
        keep_until_sync(dev, bx, bi, bw, by, self)
        ev = cl_out_event(keep)
        return (by, ev) if sync and sync.get("cl_out_event") else by

    def _out(self, dev: Device, y: Any, M: int) -> Buffer:
        if y is None:
            return Buffer.empty(dev, (M, self.H), self.act_dtype)
        by = as_buffer(y, dev, dtype=self.act_dtype, writable=True, what="y")
        if by.dtype != self.act_dtype or by.shape != (M, self.H):
            raise ValueError(f"y: {self.act_dtype} of shape ({M}, {self.H}), got {by.dtype} {by.shape}")
        return by

    def _forward_host(self, x: Any, router_logits: Any, topk_ids: Any, topk_weights: Any) -> Any:
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
