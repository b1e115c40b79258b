#!/usr/bin/env python3
"""qport's Quark resolution against vLLM 0.34.0's own code, run.

Loads shared/reference/vllm-0.34.0/quark/{quark,quark_moe,utils}.py and
schemes/, utils/{quant_utils,ocp_mx_utils}.py as real modules under their
vllm names, with every other vllm import a stub (classes, enums and
functions that do nothing: the kernel and backend selection, which decide
no resolution). Then, for a matrix of weight x input_tensors specs, asks
vLLM's QuarkConfig what it builds for a linear layer (get_quant_method ->
_get_scheme_cls_from_config + init_scheme, no GPU: no capability check) and
for a RoutedExperts layer (get_moe_method_target + get_moe_method and the
method's __init__), and `qport inspect --json` the same, and compares the
class, the weight/activation keys (constant names), the exception type and
its message. Needs torch (a venv: /work/venv-28); not run in CI.

    python3 tests/vllm_oracle/oracle.py build/tools/qport [REFERENCE_DIR]
"""
import enum
import importlib.abc
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import types

import torch

REF = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "../../../shared/reference/vllm-0.34.0")
if not os.path.isdir(REF):
    REF = "/work/shared/reference/vllm-0.34.0"
Q = sys.argv[1]
P = "vllm.model_executor.layers.quantization."
REAL = {  # module name -> reference file
    P + "utils.quant_utils": "utils/quant_utils.py.txt",
    P + "utils.ocp_mx_utils": "utils/ocp_mx_utils.py.txt",
    P + "quark.utils": "quark/utils.py.txt",
    P + "quark.quark_moe": "quark/quark_moe.py.txt",
    P + "quark.quark": "quark/quark.py.txt",
    P + "quark.schemes.quark_scheme": "quark/schemes/quark_scheme.py.txt",
    P + "quark.schemes.quark_ocp_mx": "quark/schemes/quark_ocp_mx.py.txt",
    P + "quark.schemes.quark_w4a16_int4": "quark/schemes/quark_w4a16_int4.py.txt",
    P + "quark.schemes.quark_w8a8_fp8": "quark/schemes/quark_w8a8_fp8.py.txt",
    P + "quark.schemes.quark_w8a8_int8": "quark/schemes/quark_w8a8_int8.py.txt",
    P + "quark.schemes.quark_nvfp4": "quark/schemes/quark_nvfp4.py.txt",
    P + "quark.schemes.quark_w4a8_mxfp4_fp8": "quark/schemes/quark_w4a8_mxfp4_fp8.py.txt",
}


class _Meta(type):
    def __getattr__(cls, name):  # enum-like members: Mxfp4MoeBackend.NONE, ...
        if name.startswith("__"):
            raise AttributeError(name)
        v = Anything(f"{cls.__name__}.{name}")
        setattr(cls, name, v)
        return v


class Stub(metaclass=_Meta):
    def __init__(self, *a, **k):
        if a:  # FusedMoEMethodBase.__init__(moe)
            self.moe = a[0]

    def __init_subclass__(cls, **k):
        pass


class Anything:
    """A value any attribute, call or unpacking works on."""

    def __init__(self, name="x"):
        self._n = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Anything(self._n + "." + name)

    def __call__(self, *a, **k):
        return Anything(self._n + "()")

    def __iter__(self):
        return iter((Anything(self._n + "[0]"), Anything(self._n + "[1]")))

    def __getitem__(self, i):
        return Anything(f"{self._n}[{i}]")

    def __bool__(self):
        return False

    def __str__(self):
        return self._n

    __format__ = lambda self, spec: self._n


class StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "current_platform":
            v = types.SimpleNamespace(fp8_dtype=lambda: torch.float8_e4m3fn, is_fp8_fnuz=lambda: False,
                                      get_device_capability=lambda: None, supports_mx=lambda: False,
                                      is_rocm=lambda: False, is_cuda=lambda: True)
        elif name == "init_logger":
            v = lambda n: types.SimpleNamespace(**{k: (lambda *a, **kw: None) for k in
                                                   ("debug", "info", "warning", "info_once", "warning_once", "error")})
        elif name == "rocm_aiter_ops":
            v = types.SimpleNamespace(is_fused_moe_enabled=lambda: False)
        elif name == "scalar_types":
            class ST(getattr(self, "ScalarType")):
                def __init__(self, s): self.s = s
                def __str__(self): return self.s
            v = types.SimpleNamespace(**{n: ST(n) for n in ("uint4b8", "uint8b128", "uint4", "float6_e3m2f", "float6_e2m3f")})
        elif name == "ScalarType":
            v = type("ScalarType", (), {})
        elif name[0].isupper():
            v = type(name, (Stub,), {})
        else:
            v = Anything(name)
        setattr(self, name, v)
        return v


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "vllm" or name.startswith("vllm."):
            # real files are modules (their relative imports resolve in the
            # parent package); everything else a package of stubs
            return importlib.util.spec_from_loader(name, self, is_package=name not in REAL)
        return None

    def create_module(self, spec):
        return StubModule(spec.name)

    def exec_module(self, m):
        if m.__name__ not in REAL:
            m.__path__ = []
        if m.__name__ in REAL:
            src = open(os.path.join(REF, REAL[m.__name__])).read()
            exec(compile(src, REAL[m.__name__], "exec"), m.__dict__)
        if m.__name__ == P + "quark.schemes":
            for sub in ("quark_ocp_mx", "quark_w4a16_int4", "quark_w8a8_fp8", "quark_w8a8_int8", "quark_nvfp4",
                        "quark_w4a8_mxfp4_fp8", "quark_scheme"):
                mod = importlib.import_module(P + "quark.schemes." + sub)
                for k, v in vars(mod).items():
                    if k.startswith("Quark"):
                        setattr(m, k, v)
        if m.__name__ == P + "utils.config_utils":
            m.find_matching_patterns = lambda name, pats, mapping: [
                {p for p in pats if (p.startswith("re:") and __import__("re").match(p[3:], name)) or p == name}]


sys.meta_path.insert(0, Finder())
quark = importlib.import_module(P + "quark.quark")
qmoe = importlib.import_module(P + "quark.quark_moe")
qu = importlib.import_module(P + "utils.quant_utils")
KEYNAME = {id(v): k for k, v in vars(qu).items() if k.startswith("k") and type(v).__name__ == "QuantKey"}
RoutedExperts = sys.modules["vllm.model_executor.layers.fused_moe"].RoutedExperts
LinearBase = sys.modules["vllm.model_executor.layers.linear"].LinearBase


def vllm_answer(cfg_dict, layer, moe):
    cfg = quark.QuarkConfig.from_config(json.loads(json.dumps(cfg_dict)))
    try:
        if moe:
            wk, ak, cls = qmoe.QuarkMoEMethod.get_moe_method_target(cfg, RoutedExperts, layer)
            module = types.SimpleNamespace(moe_config=types.SimpleNamespace(has_bias=False))
            m = qmoe.QuarkMoEMethod.get_moe_method(cfg, module=module, method_cls=cls, weight_quant_key=wk,
                                                   activation_quant_key=ak, layer_name=layer)
            return {"result": "ok", "scheme": type(m).__name__, "wk": KEYNAME.get(id(wk)),
                    "ak": KEYNAME.get(id(m.activation_quant_key)) if m.activation_quant_key is not None else None}
        wk, ak, scheme_cls = cfg.get_scheme_cls(LinearBase, layer)
        cfg.init_scheme(scheme_cls, weight_quant_key=wk, activation_quant_key=ak,
                        scale_block_rows=cfg._scale_block_rows(layer, LinearBase) if scheme_cls is quark.QuarkOCP_MX else 1,
                        weight_config=cfg._find_matched_config(layer, LinearBase).get("weight"))
        return {"result": "ok", "scheme": scheme_cls.__name__, "wk": KEYNAME.get(id(wk)),
                "ak": KEYNAME.get(id(ak)) if ak is not None else None}
    except (ValueError, NotImplementedError, RuntimeError, AssertionError) as e:
        return {"result": "error", "type": type(e).__name__, "msg": str(e)}


def T(dtype, qscheme, **kw):
    d = {"dtype": dtype, "qscheme": qscheme}
    d.update(kw)
    return d


WEIGHTS = [
    T("fp8_e4m3", "per_tensor", is_dynamic=False, symmetric=True),
    T("fp8_e4m3", "per_channel", ch_axis=0, is_dynamic=False, symmetric=True),
    T("fp8_e4m3", "per_block", block_size=[128, 128], is_dynamic=False, symmetric=True),
    T("fp8_e4m3", "per_block", block_size=[128, 128], is_dynamic=False, symmetric=True, scale_type="float8_e8m0fnu"),
    T("fp8_e4m3", "per_block", block_size=[32, 32], is_dynamic=False, symmetric=True, scale_type="float8_e8m0fnu"),
    T("fp8_e4m3", "per_block", block_size=[1, 32], is_dynamic=False, symmetric=True, scale_type="float8_e8m0fnu"),
    T("fp8_e4m3", "per_group", group_size=32, scale_format="e8m0", is_dynamic=False),
    T("int8", "per_tensor", is_dynamic=False, symmetric=True),
    T("int8", "per_channel", ch_axis=0, is_dynamic=False, symmetric=True),
    T("int4", "per_group", group_size=128, symmetric=True, is_dynamic=False),
    T("int4", "per_group", group_size=32, symmetric=True, is_dynamic=False),
    T("uint4", "per_group", group_size=128, symmetric=False, is_dynamic=False),
    T("uint4", "per_group", group_size=32, symmetric=False, is_dynamic=False),
    T("int4", "per_channel", group_size=-1, symmetric=True, is_dynamic=False),
    T("fp4", "per_group", group_size=32, scale_format="e8m0", is_dynamic=False),
    T("fp6_e3m2", "per_group", group_size=32, scale_format="e8m0", is_dynamic=False),
    T("fp6_e2m3", "per_group", group_size=32, scale_format="e8m0", is_dynamic=False),
    T("fp4", "per_block", block_size=[32, 32], scale_type="float8_e8m0fnu", symmetric=True, is_dynamic=False),
]
INPUTS = [
    None,
    T("fp8_e4m3", "per_tensor", is_dynamic=False, symmetric=True),
    T("fp8_e4m3", "per_tensor", is_dynamic=True, symmetric=True),
    T("fp8_e4m3", "per_channel", ch_axis=1, is_dynamic=True, symmetric=True),
    T("fp8_e4m3", "per_group", group_size=128, is_dynamic=True, symmetric=True),
    T("fp8_e4m3", "per_group", group_size=32, is_dynamic=True, symmetric=True),
    T("int8", "per_tensor", is_dynamic=False, symmetric=True),
    T("int8", "per_tensor", is_dynamic=False, symmetric=False),
    T("int8", "per_channel", ch_axis=1, is_dynamic=True, symmetric=True),
    T("int8", "per_channel", ch_axis=1, is_dynamic=True, symmetric=False),
    T("fp4", "per_group", group_size=32, scale_format="e8m0", is_dynamic=True),
    T("fp6_e3m2", "per_group", group_size=32, scale_format="e8m0", is_dynamic=True),
    T("fp6_e2m3", "per_group", group_size=32, scale_format="e8m0", is_dynamic=True),
    T("fp4", "per_group", group_size=32, scale_format="e8m0", is_dynamic=False),
]
LISTS = [  # multi-entry weights / inputs: NVFP4, W4A8-FP8 (int4)
    ([T("fp4", "per_group", group_size=16, is_dynamic=False), T("fp8_e4m3", "per_tensor", is_dynamic=False)],
     [T("fp4", "per_group", group_size=16, is_dynamic=True), T("fp8_e4m3", "per_tensor", is_dynamic=False)]),
    ([T("fp8_e4m3", "per_tensor", is_dynamic=False), T("int4", "per_channel", ch_axis=0, symmetric=True, is_dynamic=False)],
     T("fp8_e4m3", "per_tensor", is_dynamic=True, symmetric=True)),
    ([T("fp8_e4m3", "per_tensor", is_dynamic=False), T("int8", "per_channel", ch_axis=0, symmetric=True, is_dynamic=False)],
     T("fp8_e4m3", "per_tensor", is_dynamic=False, symmetric=True)),
]
EXC = {"QP_ERR_VALUE": "ValueError", "QP_ERR_NOT_IMPLEMENTED": "NotImplementedError", "QP_ERR_CAPABILITY": "RuntimeError"}


def main():
    pairs = list(itertools.product(WEIGHTS, INPUTS)) + LISTS
    layers = [("model.layers.0.mlp.down_proj", False), ("model.layers.0.mlp.experts", True)]
    n = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, (w, a) in enumerate(pairs):
            cfg = {"quant_method": "quark", "export": {"kv_cache_group": [], "pack_method": "reorder"},
                   "global_quant_config": {"weight": w, "input_tensors": a, "output_tensors": None, "bias": None},
                   "layer_quant_config": {}, "layer_type_quant_config": {}, "exclude": ["lm_head"]}
            path = os.path.join(tmp, f"c{i}.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            args = [Q, "inspect", path, "--json"]
            for l, moe in layers:
                args += ["--layer", l + (":moe" if moe else "")]
            r = subprocess.run(args, capture_output=True, text=True)
            got = [json.loads(x) for x in r.stdout.splitlines()]
            for (l, moe), q in zip(layers, got):
                v = vllm_answer(cfg, l, moe)
                n += 1
                if v["result"] == "ok":
                    same = q["result"] == "ok" and q["scheme"] == v["scheme"] and q["weight_key"] == v["wk"] and \
                        q["activation_key"] == v["ak"]
                else:
                    et = q.get("error_type")
                    vt = v["type"]
                    same = q["result"] == "error" and (et == vt or (vt == "AssertionError" and et == "QP_ERR_UNSUPPORTED")) \
                        and (q["error"] == v["msg"] or q["error"] == "AssertionError: " + v["msg"])
                if not same:
                    bad += 1
                    print(f"DIFF {'moe' if moe else 'linear'} w={json.dumps(w)} in={json.dumps(a)}\n  vllm  {v}\n  qport "
                          f"{ {k: q.get(k) for k in ('result', 'scheme', 'weight_key', 'activation_key', 'error_type', 'error')} }")
    print(f"{n - bad}/{n} answers equal to vLLM 0.34.0's ({len(pairs)} configs x linear, moe)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
