#!/usr/bin/env python3
"""Prints api/scheme.c's key_reprs table: str(QuantKey) of every QuantKey
constant of vLLM 0.34.0's quant_utils.py (shared/reference/vllm-0.34.0),
by running that file with torch (torch.fx's dtype abbreviations) and stubs
for the vLLM modules it imports. ScalarType names follow vLLM's
ScalarType.__str__ (uint4b8, uint4, uint8b128, float6_e3m2f, float6_e2m3f).
Run in a venv with torch:  python3 tests/golden/gen_quant_key_reprs.py
"""
import sys, types, torch
# minimal stubs for what quant_utils.py imports
def mod(name, **kw):
    m = types.ModuleType(name); m.__dict__.update(kw); sys.modules[name] = m; return m
class ScalarType:
    # vLLM's ScalarType.__str__ naming (ml_dtypes style): uint4b8, uint4, float6_e3m2f, uint8b128
    def __init__(self, s): self.s = s
    def __str__(self): return self.s
st = types.SimpleNamespace(uint4b8=ScalarType("uint4b8"), uint8b128=ScalarType("uint8b128"), uint4=ScalarType("uint4"),
                           float6_e3m2f=ScalarType("float6_e3m2f"), float6_e2m3f=ScalarType("float6_e2m3f"))
mod("vllm"); mod("vllm.distributed"); mod("vllm.distributed.parallel_state", get_ep_group=None, get_tp_group=None)
mod("vllm.platforms", current_platform=types.SimpleNamespace(fp8_dtype=lambda: torch.float8_e4m3fn, is_fp8_fnuz=lambda: False))
mod("vllm.scalar_type", ScalarType=ScalarType, scalar_types=st)
src = open("/work/shared/reference/vllm-0.34.0/utils/quant_utils.py.txt").read()
g = {"__name__": "quant_utils"}
exec(compile(src, "quant_utils.py", "exec"), g)
for k in sorted(g):
    if k.startswith("k") and type(g[k]).__name__ == "QuantKey":
        print(f'    {{"{k}", "{g[k]}"}},')
