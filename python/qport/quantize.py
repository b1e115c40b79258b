"""Weight quantization (qp_quantize_weights): a float weight matrix into
the tensors a checkpoint of a scheme holds."""
from __future__ import annotations

import ctypes
from typing import Any


from . import _abi
from ._arrays import Tensor, as_host, tensor_from_c
from ._handle import context
from .config import Scheme


def quantize_weights(w: Any, scheme: Scheme, *, calib: Any = None, input_absmax: float | None = None,
                     params_dtype: str = "f16", scale_dtype: str | None = None,
                     sym_zero_points: bool = False) -> dict[str, Tensor]:
    """Quantizes w [N, K] (float32; torch Linear layout, row n = output
    feature) for `scheme` into {checkpoint name: qport.Tensor} with the
    names, dtypes and shapes vLLM loads (weight, weight_scale, input_scale,
    B, s_channel, ...), ready for qport.Linear.

    calib: calibration activations [rows, K] float32 for static activation
    scales (else input_absmax, default 1.0, is the assumed max |x|).
    params_dtype: W4A16's scale dtype ("f16" or "bf16"). scale_dtype: "f16"
    or "bf16" for AMD Quark's exporter layout (float scales in the model
    dtype), None for fp32 scales.

    >>> t = qport.quantize_weights(w, cfg.resolve("model.layers.0.mlp.down_proj"))
    >>> sorted(t), t["weight"].dtype
    (['input_scale', 'weight', 'weight_scale'], 'fp8_e4m3fn')
    """
    if not isinstance(scheme, Scheme):
        raise TypeError(f"scheme: a qport.Scheme, not {type(scheme).__name__}")
    a, dt = as_host(w, "w")
    if dt != "f32":
        raise TypeError(f"w: float32 weights, not {dt} (widen fp16/bf16 with .astype(np.float32): exact)")
    if a.ndim != 2 or not (0 < a.shape[0] < 2**31 and 0 < a.shape[1] < 2**31):
        raise ValueError(f"w: shape {tuple(a.shape)}, want a non-empty [N, K]")
    N, K = a.shape
    o = _abi.QuantizeOptions()
    _abi.lib.qp_quantize_options_init(ctypes.byref(o))
    if params_dtype not in ("f16", "bf16"):
        raise ValueError(f"params_dtype {params_dtype!r}: f16 or bf16")
    o.params_dtype = _abi.DT[params_dtype]
    if scale_dtype not in (None, "f16", "bf16", "f32"):
        raise ValueError(f"scale_dtype {scale_dtype!r}: None, f16, bf16 or f32")
    if scale_dtype:
        o.scale_dtype = _abi.DT[scale_dtype]
    o.sym_zero_points = int(bool(sym_zero_points))
    c = None
    if calib is not None:
        c, cdt = as_host(calib, "calib")
        if cdt != "f32" or c.ndim != 2 or c.shape[1] != K:
            raise ValueError(f"calib: float32 [rows, {K}], got {cdt} {tuple(c.shape)}")
        o.calib = ctypes.cast(c.ctypes.data, ctypes.POINTER(ctypes.c_float))
        o.calib_rows = c.shape[0]
    if input_absmax is not None:
        o.input_absmax = float(input_absmax)
    ctx = context()
    q = ctypes.c_void_p()
    ctx.check(_abi.lib.qp_quantize_weights(ctx.ptr, ctypes.byref(scheme._c), a.ctypes.data, N, K, ctypes.byref(o),
                                           ctypes.byref(q)))
    try:
        out = {}
        t = _abi.Tensor()
        for i in range(_abi.lib.qp_qweights_count(q.value)):
            ctx.check(_abi.lib.qp_qweights_get(q.value, i, ctypes.byref(t)))
            out[_abi.s(t.name)] = tensor_from_c(t)
        return out
    finally:
        _abi.lib.qp_qweights_destroy(q.value)
        del c
