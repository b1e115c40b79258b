"""Model architectures as vLLM's model classes build them (qp_arch_* of
qport.h): packed modules, which modules are never quantized, where the
experts live, routing. Every answer is the C library's table.

>>> a = qport.arch("DeepseekV3ForCausalLM")
>>> a.router, a.router_quantized, a.grouped_topk, a.moe_layer_rule
('gate', False, True, 'deepseek')
>>> a.module_class("model.layers.3.mlp.gate")
'linear_unquantized'
>>> qport.Model("path/to/deepseek").arch.packed["fused_qkv_a_proj"]
['q_a_proj', 'kv_a_proj_with_mqa']
"""
from __future__ import annotations

import ctypes
from typing import Any

from . import _abi
from ._handle import context

# qp_module_class, in enum order
MODULE_CLASSES = ("linear", "linear_unquantized", "lm_head", "embedding", "routed_experts", "attention")


def _method_index(method: str) -> int:
    if method not in _abi.METHODS:
        raise ValueError(f"method {method!r}: one of {', '.join(_abi.METHODS)}")
    return _abi.METHODS.index(method)


class Arch:
    """One architecture as vLLM builds it for one config.json. `known` is
    False for an architecture outside the table: then the Llama rules
    apply (`name` is the config's architectures[0], or None)."""

    known: bool
    name: str | None
    packed: dict[str, list[str]]
    moe_block: str | None
    experts: str | None
    expert_proj: tuple[str | None, str | None, str | None]
    router: str | None
    router_quantized: bool
    shared_experts: str | None
    shared_expert_gate: str | None
    scoring: str  # the class's default; the config's scoring_func wins (Model.moe)
    grouped_topk: bool
    correction_bias: bool
    renormalize: bool | None
    num_experts_key: str | None
    moe_intermediate_key: str | None
    num_experts: int | None
    moe_intermediate_size: int | None
    moe_layer_rule: str
    first_k_dense_replace: int
    moe_layer_freq: int
    note: str | None

    def __init__(self, info: _abi.ArchInfo) -> None:
        s = _abi.s
        self.known = bool(info.known)
        self.name = s(info.name) if info.name else None
        self.packed = {s(info.packed[i].fused): [s(info.packed[i].shards[j]) for j in range(info.packed[i].n_shards)]
                       for i in range(info.n_packed)} if info.packed else {}
        self.moe_block = s(info.moe_block) if info.moe_block else None
        self.experts = s(info.experts) if info.experts else None
        self.expert_proj = tuple(s(p) if p else None for p in info.expert_proj)  # type: ignore[assignment]
        self.router = s(info.router) if info.router else None
        self.router_quantized = bool(info.router_quantized)
        self.shared_experts = s(info.shared_experts) if info.shared_experts else None
        self.shared_expert_gate = s(info.shared_expert_gate) if info.shared_expert_gate else None
        self.scoring = _abi.MOE_SCORING[info.scoring]
        self.grouped_topk = bool(info.grouped_topk)
        self.correction_bias = bool(info.correction_bias)
        self.renormalize = None if info.renormalize < 0 else bool(info.renormalize)
        self.num_experts_key = s(info.num_experts_key) if info.num_experts_key else None
        self.moe_intermediate_key = s(info.moe_intermediate_key) if info.moe_intermediate_key else None
        self.num_experts = None if info.num_experts < 0 else int(info.num_experts)
        self.moe_intermediate_size = None if info.moe_intermediate_size < 0 else int(info.moe_intermediate_size)
        self.moe_layer_rule = _abi.MOE_LAYER_RULES[info.moe_layer_rule]
        self.first_k_dense_replace = int(info.first_k_dense_replace)
        self.moe_layer_freq = int(info.moe_layer_freq)
        self.note = s(info.note) if info.note else None
        # the struct the qp_arch_* calls read, holding its own strings: the
        # one filled points into the config or model it came from, which
        # may be closed before this object goes
        c = _abi.ArchInfo()
        ctypes.memmove(ctypes.byref(c), ctypes.byref(info), ctypes.sizeof(c))
        for f in ("name", "moe_block", "experts", "router", "shared_experts", "shared_expert_gate",
                  "num_experts_key", "moe_intermediate_key", "note"):
            v = getattr(info, f)
            setattr(c, f, bytes(v) if v is not None else None)
        for i in range(3):
            c.expert_proj[i] = bytes(info.expert_proj[i]) if info.expert_proj[i] is not None else None
        c.packed, c.n_packed = None, 0  # the calls do not read it; self.packed has it
        self._c = c

    def module_class(self, module: str, method: str | None = None) -> str:
        """What vLLM's model class builds for `module` ("lm_head",
        "model.layers.3.mlp.gate"), one of MODULE_CLASSES; with `method`
        ("quark", "qqq", "fp8", ...) as the vLLM release that method
        follows builds it (QQQ: 0.8.5)."""
        if method is None:
            c = _abi.lib.qp_arch_module_class(ctypes.byref(self._c), module.encode())
        else:
            c = _abi.lib.qp_arch_module_class_vllm(ctypes.byref(self._c), _method_index(method), module.encode())
        return MODULE_CLASSES[c]

    def quantizes(self, module: str, method: str) -> bool:
        """Whether `method`'s get_quant_method gives `module` a quant
        method at all, before any exclude list (False: vLLM runs it
        unquantized from its .weight)."""
        m = _method_index(method)
        c = _abi.lib.qp_arch_module_class_vllm(ctypes.byref(self._c), m, module.encode())
        return bool(_abi.lib.qp_method_quantizes(m, c))

    def layer_is_moe(self, layer: int) -> bool:
        """Whether decoder layer `layer` holds an MoE block."""
        return bool(_abi.lib.qp_arch_layer_is_moe(ctypes.byref(self._c), int(layer)))

    def __repr__(self) -> str:
        return f"<qport.Arch {self.name or '(none)'}{'' if self.known else ' unknown'}>"


def _new_info() -> _abi.ArchInfo:
    info = _abi.ArchInfo()
    info.struct_size = ctypes.sizeof(_abi.ArchInfo)
    return info


def arch(architecture: str | None = None, model_type: str | None = None) -> Arch:
    """The table's row for a vLLM class ("Qwen3MoeForCausalLM") and/or an
    HF model_type ("qwen3_moe"), with the class's unconditional packed
    modules (config-dependent ones need the config: Config.arch). Neither
    in the table: an Arch with known False and the Llama rules."""
    info = _new_info()
    st = _abi.lib.qp_arch_lookup(architecture.encode() if architecture is not None else None,
                                 model_type.encode() if model_type is not None else None, ctypes.byref(info))
    if st not in (_abi.QP_OK, _abi.STATUS_NAMES.index("QP_ERR_NOT_FOUND")):
        context().check(st)
    return Arch(info)


def architectures() -> dict[str, list[str]]:
    """Every row of the table: vLLM class name -> its HF model_type values."""
    out: dict[str, list[str]] = {}
    for i in range(_abi.lib.qp_arch_count()):
        out[_abi.s(_abi.lib.qp_arch_name(i))] = _abi.s(_abi.lib.qp_arch_model_types(i)).split()
    return out


def from_handle(fn: Any, ptr: int) -> Arch:
    """qp_config_arch / qp_model_arch of a live handle."""
    info = _new_info()
    context().check(fn(ptr, ctypes.byref(info)))
    return Arch(info)
