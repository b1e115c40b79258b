"""Quantization configs and the schemes vLLM resolves from them
(qp_config_load_*, qp_config_resolve)."""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from . import _abi
from ._errors import check
from ._handle import Handle, context


@dataclass(frozen=True)
class QuantSpec:
    """How one tensor (weight, activation or KV cache) is quantized
    (qp_qtensor); `dtype` "none" when it is not."""
    dtype: str
    granularity: str
    group_size: int
    block: tuple[int, int]
    symmetric: bool
    dynamic: bool
    scale_dtype: str
    scale2_dtype: str | None

    @classmethod
    def _from_c(cls, q: _abi.QTensor) -> QuantSpec | None:
        if q.dtype == 0:
            return None
        return cls(_abi.DTYPES[q.dtype], _abi.s(_abi.lib.qp_granularity_name(q.granularity)), q.group_size,
                   (q.block[0], q.block[1]), bool(q.symmetric), bool(q.dynamic), _abi.DTYPES[q.scale_dtype],
                   _abi.DTYPES[q.scale2_dtype] if q.scale2_dtype else None)

    def as_dict(self) -> dict[str, Any]:
        """The same keys as `qport inspect --json`."""
        return {"dtype": self.dtype, "granularity": self.granularity, "group_size": self.group_size,
                "block": list(self.block), "symmetric": self.symmetric, "dynamic": self.dynamic,
                "scale_dtype": self.scale_dtype, "scale2_dtype": self.scale2_dtype}


@dataclass(frozen=True)
class SchemeKind:
    """What qport knows about a scheme kind (qp_scheme_kind_describe): its
    `qp_lin_desc` payload `family`, whether qport runs it as a `linear`
    layer and its experts as fused `moe` (else `moe_refusal` says why),
    whether its integer path is `exact` on every backend, the checkpoint
    `tensors` one linear layer takes, and the vLLM `classes` resolved to it.

    >>> [k.name for k in qport.scheme_kinds() if k.exact]
    ['w8a8-int8', 'qqq-w4a8']
    """
    name: str
    family: str
    linear: bool
    moe: bool
    exact: bool
    moe_refusal: str | None
    tensors: str
    classes: str

    @staticmethod
    def _of(kind: int) -> "SchemeKind":
        c = _abi.SchemeKindInfo(struct_size=ctypes.sizeof(_abi.SchemeKindInfo))
        check(_abi.lib.qp_scheme_kind_describe(kind, ctypes.byref(c)), None)
        return SchemeKind(_abi.s(c.name), _abi.s(c.family), bool(c.linear), bool(c.moe), bool(c.exact),
                          _abi.s(c.moe_refusal) if c.moe_refusal else None, _abi.s(c.tensors),
                          _abi.s(c.classes))


def scheme_kinds() -> list[SchemeKind]:
    """Every scheme kind, in the order of qport.h's qp_scheme_kind."""
    out, k = [], 0
    while _abi.s(_abi.lib.qp_scheme_kind_name(k)) != "unknown":
        out.append(SchemeKind._of(k))
        k += 1
    return out


class Scheme:
    """What vLLM runs for one layer (a qp_scheme value).

    `method` and `scheme_class` are vLLM's class names ("QuarkLinearMethod",
    "QuarkW8A8Int8"), `weight_key` / `activation_key` its QuantKey names,
    `min_capability` major*10+minor (None when the scheme has none), `kind`
    qport's scheme kind ("w8a8-int8"), and `weight`, `activation`,
    `kv_cache` QuantSpecs (None when not quantized).

    >>> s = qport.load_config("tests/configs/llama-w8a8-int8-kv.json").resolve(
    ...     "model.layers.0.self_attn.qkv_proj", capability=80)
    >>> s.method, s.scheme_class, s.min_capability
    ('QuarkLinearMethod', 'QuarkW8A8Int8', 75)
    """

    __slots__ = ("_c", "layer", "layer_kind")

    def __init__(self, c: _abi.Scheme, layer: str = "", layer_kind: str = "linear") -> None:
        self._c = c
        self.layer = layer
        self.layer_kind = layer_kind

    @property
    def kind(self) -> str:
        return _abi.s(_abi.lib.qp_scheme_kind_name(self._c.kind))

    @property
    def kind_info(self) -> SchemeKind:
        """The kind's description (qport.scheme_kinds())."""
        return SchemeKind._of(self._c.kind)

    def _name(self, field: str) -> str | None:
        v = getattr(self._c, field).decode()
        return v or None

    @property
    def method(self) -> str | None:
        return self._name("method")

    @property
    def scheme_class(self) -> str | None:
        return self._name("scheme_class")

    @property
    def weight_key(self) -> str | None:
        return self._name("weight_key")

    @property
    def activation_key(self) -> str | None:
        return self._name("activation_key")

    @property
    def min_capability(self) -> int | None:
        return self._c.min_capability or None

    @property
    def weight(self) -> QuantSpec | None:
        return QuantSpec._from_c(self._c.weight)

    @property
    def activation(self) -> QuantSpec | None:
        return QuantSpec._from_c(self._c.activation)

    @property
    def kv_cache(self) -> QuantSpec | None:
        return QuantSpec._from_c(self._c.kv_cache)

    @property
    def pack_method(self) -> str | None:
        return _abi.PACK_METHODS[self._c.pack_method]

    def check_capability(self, capability: int) -> None:
        """vLLM's capability check: RuntimeError with vLLM's message when
        `capability` (major*10+minor) is below min_capability."""
        ctx = context()
        ctx.check(_abi.lib.qp_scheme_check_capability(ctx.ptr, ctypes.byref(self._c), int(capability)))

    def as_dict(self) -> dict[str, Any]:
        """The keys of `qport inspect --json` for a resolved layer."""
        q = lambda v: v.as_dict() if v else None  # noqa: E731
        return {"method": self.method, "scheme": self.scheme_class, "scheme_kind": self.kind,
                "weight_key": self.weight_key, "activation_key": self.activation_key,
                "min_capability": self.min_capability, "weight": q(self.weight), "activation": q(self.activation),
                "kv_cache": q(self.kv_cache), "pack_method": self.pack_method}

    def __repr__(self) -> str:
        names = " / ".join(n for n in (self.method, self.scheme_class) if n) or "no quant method"
        return f"<qport.Scheme {self.kind}: {names}>"


def _resolve_options(capability: Any, packed: Mapping[str, Sequence[str]] | None, dialect: str,
                     model_type: str | None, layer_class: str | None) -> tuple[_abi.ResolveOptions, list]:
    o = _abi.ResolveOptions()
    _abi.lib.qp_resolve_options_init(ctypes.byref(o))
    keep: list = []
    if capability is not None:
        if isinstance(capability, str):  # "8.9" or "89", as `qport inspect --capability`
            capability = round(float(capability) * 10) if "." in capability else int(capability)
        elif isinstance(capability, float):
            capability = round(capability * 10)
        elif isinstance(capability, tuple):
            capability = capability[0] * 10 + capability[1]
        if not 0 <= int(capability) <= 1000:
            raise ValueError(f"capability {capability}: want major*10+minor (89), '8.9' or (8, 9)")
        o.capability = int(capability)
    if dialect not in _abi.DIALECTS:
        raise ValueError(f"dialect {dialect!r}: one of {', '.join(_abi.DIALECTS)}")
    o.dialect = _abi.DIALECTS.index(dialect)
    if packed is not None:
        mods = (_abi.PackedModule * max(1, len(packed)))()
        for i, (fused, shards) in enumerate(packed.items()):
            if isinstance(shards, str):
                raise TypeError(f"packed[{fused!r}]: a list of shard names, not a string")
            arr = (ctypes.c_char_p * max(1, len(shards)))(*[str(x).encode() for x in shards])
            mods[i].fused = str(fused).encode()
            mods[i].shards = arr
            mods[i].n_shards = len(shards)
            keep.append(arr)
        o.packed = mods
        o.n_packed = len(packed)
        keep.append(mods)
    if model_type is not None:
        o.model_type = model_type.encode()
    if layer_class is not None:
        o.layer_class = layer_class.encode()
    return o, keep


class Config:
    """A loaded quantization config (immutable; resolve from any thread).
    Made by load_config()."""

    def __init__(self, ptr: int | None, owner: Any = None) -> None:
        self._ctx = context()
        self._owner = owner  # a Model whose config this is: keeps it open
        self._h: Any = Handle(ptr, None if owner is not None else _abi.lib.qp_config_destroy, "qport config")

    def close(self) -> None:
        """Frees the config now (later calls raise ValueError)."""
        self._h.close()

    def __enter__(self) -> Config:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def method(self) -> str:
        """quant_method as written: "quark", "quark_online", "qqq", "fp8",
        "compressed-tensors"."""
        with self._h.use() as p:
            return _abi.s(_abi.lib.qp_method_name(_abi.lib.qp_config_method(p)))

    def resolve(self, layer: str, kind: str = "linear", capability: int | str | None = None,
                packed: Mapping[str, Sequence[str]] | None = None, dialect: str = "vllm",
                model_type: str | None = None, layer_class: str | None = None) -> Scheme:
        """The scheme vLLM's get_quant_method picks for `layer` of `kind`
        ("linear", "attention" or "moe") on a GPU of `capability`
        (major*10+minor, "8.9", or None: no GPU check). `packed` maps fused
        modules to their shards ({"qkv_proj": ["q_proj", "k_proj",
        "v_proj"]}; None: the config's own mapping or Llama's). Raises
        ValueError / NotImplementedError / RuntimeError with vLLM's message
        where vLLM raises.

        >>> cfg.resolve("model.layers.0.mlp.down_proj", capability=80)
        Traceback (most recent call last):
        RuntimeError: Quantization scheme is not supported for the current GPU. Min capability: 89. ...
        """
        if kind not in _abi.LAYER_KINDS:
            raise ValueError(f"kind {kind!r}: one of {', '.join(_abi.LAYER_KINDS)}")
        o, keep = _resolve_options(capability, packed, dialect, model_type, layer_class)
        out = _abi.Scheme()
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_config_resolve(p, str(layer).encode(), _abi.LAYER_KINDS.index(kind),
                                                       ctypes.byref(o), ctypes.byref(out)))
        del keep
        return Scheme(out, str(layer), kind)

    def resolve_global(self, capability: int | str | None = None, dialect: str = "vllm") -> Scheme:
        """The global config's scheme, as a linear layer nothing overrides gets it."""
        o, _ = _resolve_options(capability, None, dialect, None, None)
        out = _abi.Scheme()
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_config_resolve_global(p, ctypes.byref(o), ctypes.byref(out)))
        return Scheme(out)

    @property
    def arch(self) -> Any:
        """The model architecture of a whole config.json as vLLM's model
        class builds it (qport.Arch; known False for a bare
        quantization_config or a class outside the table)."""
        from .arch import from_handle
        with self._h.use() as p:
            return from_handle(_abi.lib.qp_config_arch, p)

    @property
    def layer_patterns(self) -> list[str]:
        """The layer_quant_config patterns, in order."""
        with self._h.use() as p:
            return _strings(lambda i: _abi.lib.qp_config_layer_pattern(p, i))

    @property
    def excludes(self) -> list[str]:
        with self._h.use() as p:
            return _strings(lambda i: _abi.lib.qp_config_exclude(p, i))

    @property
    def kv_cache(self) -> QuantSpec | None:
        """The config's KV-cache quantization (None: not quantized)."""
        q = _abi.QTensor()
        with self._h.use() as p:
            self._ctx.check(_abi.lib.qp_config_kv_cache(p, ctypes.byref(q)))
        return QuantSpec._from_c(q)

    def __repr__(self) -> str:
        return "<qport.Config closed>" if self._h.closed else f"<qport.Config {self.method}>"


def _strings(get: Any) -> list[str]:
    out: list[str] = []
    i = 0
    while True:
        v = get(i)
        if v is None:
            return out
        out.append(_abi.s(v))
        i += 1


def load_config(source: str | os.PathLike | Mapping[str, Any]) -> Config:
    """Loads a quantization config: a path to a whole HF config.json, a bare
    quantization_config, or a QQQ quant_config.json; or the same as a dict.

    >>> cfg = qport.load_config({"quant_method": "fp8", "activation_scheme": "dynamic"})
    >>> cfg.resolve("model.layers.0.mlp.down_proj").method
    'Fp8LinearMethod'
    """
    ctx = context()
    p = ctypes.c_void_p()
    if isinstance(source, Mapping):
        buf = json.dumps(source).encode()
        ctx.check(_abi.lib.qp_config_load_buffer(ctx.ptr, b"<dict>", buf, len(buf), ctypes.byref(p)))
    elif isinstance(source, (str, os.PathLike)):
        ctx.check(_abi.lib.qp_config_load_file(ctx.ptr, os.fsencode(source), ctypes.byref(p)))
    else:
        raise TypeError(f"load_config: a path or a dict, not {type(source).__name__}")
    return Config(p.value)
