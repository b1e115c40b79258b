#!/usr/bin/env python3
"""Makes the real-exporter fixtures of tests/quark_exports with AMD's own
quantizer, amd-quark from PyPI (never needed by CI, which only reads the
committed results):

    python3 -m venv venv && venv/bin/pip install amd-quark==0.13 torch transformers safetensors
    venv/bin/python tests/quark_exports/make_fixtures.py tests/quark_exports

For every scheme below and both model dtypes (fp16, bf16) it builds a tiny
random Llama (hidden 128, intermediate 256, 2 layers, seeded), and for the
MoE schemes a tiny Mixtral (4 experts, top-2; moe-fp16/, moe-bf16/), quantizes it
with Quark's LLMTemplate configs and ModelQuantizer (random calibration
tokens), exports it with export_safetensors(custom_mode="quark",
weight_format="real_quantized", pack_method="reorder") into
DTYPE/SCHEME/{config.json,model.safetensors}, and saves the frozen
fake-quantized modules' own numbers into
DTYPE/SCHEME/quark_reference/outputs.safetensors:
for every quantized linear module L (the names Quark keeps, q_proj/k_proj/...):

  L.x     a seeded input [4, K] in the model dtype
  L.y     L(x), Quark's output in the model dtype
  L.xq    Quark's quantized-dequantized activation (its input quantizer's
          output; x itself for weight-only schemes; after the online rotation)
  L.yabs  |xq| @ |wq|^T (fp64, stored f32): the accumulation scale, for bounds
  L.wsum  sum_k |wq[n, k]| (fp64, stored f32): how far an activation step moves y

A scheme Quark can export but vLLM refuses (int4_fp8) gets the export and no
outputs file. versions.json records what made the files.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, MixtralConfig, MixtralForCausalLM

from quark.torch.quantization.config.algo_configs import get_algo_config

import quark
from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors
from quark.torch.quantization.config.config import (
    Int8PerChannelSpec,
    QLayerConfig,
)

import quark.torch.kernel as quark_kernel


def _mxfp4_dynamic_on_cpu(ctx, x, fake_quantizer, scale_calculation_mode):
    # Quark's fp16/bf16 dynamic MXFP4 kernel (qdq_mxfp4, hip or triton) runs
    # on GPUs only; its fp32 path is the generic fake quantizer. Widening to
    # fp32 is exact, and so is the way back: a fp4 value times its power-of-
    # two block scale is representable in the model dtype for these inputs.
    return fake_quantizer.fake_quantize(x.float()).to(x.dtype)


quark_kernel.MXFP4DynamicFakeQuantizeFunction.forward = staticmethod(_mxfp4_dynamic_on_cpu)

SEED = 20261203
M = 4

def int8_per_channel_dynamic_token():
    # a per-channel int8 weight with dynamic per-token int8 activations (the
    # per-token spec is Quark's per-channel qscheme on the token axis)
    w = Int8PerChannelSpec(ch_axis=0, symmetric=True, is_dynamic=False).to_quantization_spec()
    a = Int8PerChannelSpec(ch_axis=1, symmetric=True, is_dynamic=True).to_quantization_spec()
    return QLayerConfig(weight=w, input_tensors=a)

def mxfp8():
    # OCP MXFP8: e4m3 elements in blocks of 32 with e8m0 scales, static
    # weights and dynamic activations (no LLMTemplate scheme of its own in
    # 0.13); vLLM 0.34.0 runs its experts with QuarkW8A8Mxfp8MoEMethod
    from quark.torch.quantization.config.config import OCP_MXFP8E4M3Spec
    w = OCP_MXFP8E4M3Spec(ch_axis=-1, is_dynamic=False).to_quantization_spec()
    a = OCP_MXFP8E4M3Spec(ch_axis=-1, is_dynamic=True).to_quantization_spec()
    return QLayerConfig(weight=w, input_tensors=a)

# name -> (template scheme or a function making the global QLayerConfig, kwargs for get_config)
SCHEMES = {
    "fp8": ("fp8", {}),
    "fp8_kv": ("fp8", {"kv_cache_scheme": "fp8"}),
    "ptpc_fp8": ("ptpc_fp8", {}),
    "int8": ("int8", {}),
    "int8_pc_dyn_token": (int8_per_channel_dynamic_token, {}),
    "uint4_wo_128": ("uint4_wo_128", {}),
    "int4_wo_128": ("int4_wo_128", {}),
    "mxfp4": ("mxfp4", {}),
    "mxfp4_weight_only": ("mxfp4_weight_only", {}),
    "mxfp6_e3m2": ("mxfp6_e3m2", {}),
    "mxfp6_e2m3": ("mxfp6_e2m3", {}),
    "mxfp4_mxfp6_e2m3": ("mxfp4_mxfp6_e2m3", {}),
    "mxfp4_fp8": ("mxfp4_fp8", {}),
    "nvfp4": ("nvfp4", {}),
    "mxfp4_rotation": ("mxfp4", {"algorithm": "rotation"}),
    "int4_fp8": ("int4_fp8", {}),
    "mxfp8": (mxfp8, {}),
}
REFUSED_BY_VLLM = {"int4_fp8"}


MOE_SCHEMES = ["fp8", "ptpc_fp8", "int8", "int8_pc_dyn_token", "mxfp4", "nvfp4",
               # vLLM 0.34.0's QuarkW4A16Int4MoEMethod and QuarkW8A8Mxfp8MoEMethod
               "uint4_wo_128", "int4_wo_128", "mxfp8"]


def tiny_mixtral(dtype):
    """A tiny Mixtral (4 experts, top-2): with transformers 5 its experts
    are fused 3-D tensors, which Quark's preprocess_for_quantization splits
    into per-expert linear modules (as its own get_model does) -- without
    it they would stay unquantized, silently."""
    from quark.torch.utils.llm.model_preparation import preprocess_for_quantization

    torch.manual_seed(SEED + 10)
    cfg = MixtralConfig(vocab_size=64, hidden_size=128, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=64, num_local_experts=4,
                        num_experts_per_tok=2, max_position_embeddings=64, tie_word_embeddings=False)
    cfg.torch_dtype = dtype
    model = MixtralForCausalLM(cfg).to(dtype).eval()
    preprocess_for_quantization(model)
    return model


def tiny_llama(dtype):
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=64,
                      tie_word_embeddings=False)
    cfg.torch_dtype = dtype
    model = LlamaForCausalLM(cfg).to(dtype)
    with torch.no_grad():  # spread the weights as trained ones are (a few large channels)
        for n, p in model.named_parameters():
            if p.ndim == 2:
                p.mul_(1.0 + 3.0 * (torch.rand(p.shape[0], 1) < 0.05).to(p.dtype))
    return model.eval()


def quant_config(template, scheme):
    what, kw = SCHEMES[scheme]
    kw = dict(kw)
    if kw.get("algorithm") == "rotation":
        # Quark's online R1 Hadamard rotation, 32-wide blocks (vLLM binds
        # <layer>.input_rotation on MXFP4 layers only)
        import copy
        rot = copy.deepcopy(template.algo_config.get("rotation") or get_algo_config("rotation", "llama"))
        rot.online_r1_rotation = True
        rot.rotation_size = 32
        kw["algo_configs"] = {"rotation": rot}
    if callable(what):
        if scheme not in LLMTemplate.get_supported_schemes():
            LLMTemplate.register_scheme(scheme, what())
        what = scheme
    return template.get_config(scheme=what, **kw)


def module_outputs(model, dtype):
    """Each quantized linear module's numbers on a seeded input. The input is
    [1, M, K] as in the model (Quark's per-token activation specs are
    per-channel on axis 1 of a 3-D input). y is the module's linear output
    before any output quantizer: the fp8 KV cache's k_proj/v_proj output
    quantizers belong to vLLM's attention, not to its linear layer. With
    online rotation Quark wraps the module (NAME.original_module): y and the
    names are the wrapper's, xq is the inner module's quantized input (the
    rotated x, captured on its way in)."""
    out = {}
    g = torch.Generator().manual_seed(SEED + 1)
    modules = dict(model.named_modules())
    for name, mod in modules.items():
        if not hasattr(mod, "get_quant_input") or not hasattr(mod, "get_quant_weight"):
            continue
        outer_name = name[: -len(".original_module")] if name.endswith(".original_module") else name
        outer = modules[outer_name]
        K = mod.in_features
        x = (torch.randn(1, M, K, generator=g) * (1 + 7 * (torch.rand(1, M, K, generator=g) < 0.02))).to(dtype)
        seen = {}
        hook = mod.register_forward_pre_hook(lambda m, args: seen.setdefault("x", args[0]))
        with torch.no_grad():
            outer(x)
            hook.remove()
            xin = seen["x"]
            xq = mod.get_quant_input(xin)
            wq = mod.get_quant_weight(mod.weight)
            if wq.dtype != xq.dtype:
                wq = wq.to(xq.dtype)
            y = F.linear(xq, wq, bias=mod.get_quant_bias(mod.bias))
            if outer is mod and getattr(mod, "_output_quantizer", None) is None:
                assert torch.equal(y, mod(x)), name
            yabs = F.linear(xq.abs().double(), wq.abs().double()).float()
        out[outer_name + ".x"] = x[0].contiguous()
        out[outer_name + ".y"] = y[0].contiguous()
        out[outer_name + ".xq"] = xq[0].to(dtype).clone().contiguous()
        out[outer_name + ".yabs"] = yabs[0].contiguous()
        out[outer_name + ".wsum"] = wq.abs().double().sum(1).float().contiguous()
    return out


def make(root, dtype_name, scheme):
    moe = dtype_name.startswith("moe-")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name[4:] if moe else dtype_name]
    model = tiny_mixtral(dtype) if moe else tiny_llama(dtype)
    template = LLMTemplate.get("mixtral" if moe else "llama")
    config = quant_config(template, scheme)
    torch.manual_seed(SEED + 2)
    calib = [torch.randint(0, 64, (1, 32)) for _ in range(4)]
    quantizer = ModelQuantizer(config)
    model = quantizer.quantize_model(model, calib)
    model = quantizer.freeze(model)
    dest = os.path.join(root, dtype_name, scheme)
    outs = module_outputs(model, dtype) if scheme not in REFUSED_BY_VLLM else None
    if outs is not None and not outs:
        raise SystemExit(f"{dtype_name}/{scheme}: no quantized linear module found")
    with tempfile.TemporaryDirectory() as tmp:
        export_safetensors(model, tmp, custom_mode="quark", weight_format="real_quantized", pack_method="reorder")
        os.makedirs(dest, exist_ok=True)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(tmp, f), os.path.join(dest, f))
    if outs is not None:
        # beside the checkpoint, not in it: a loader reads every *.safetensors of the folder
        os.makedirs(os.path.join(dest, "quark_reference"), exist_ok=True)
        save_file(outs, os.path.join(dest, "quark_reference", "outputs.safetensors"))
    print(f"{dtype_name}/{scheme}: ok", flush=True)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    only = sys.argv[2:]
    import transformers
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "versions.json"), "w") as f:
        json.dump({"amd-quark": quark.__version__, "torch": torch.__version__,
                   "transformers": transformers.__version__, "seed": SEED}, f, indent=1)
        f.write("\n")
    for dtype_name in ("fp16", "bf16", "moe-fp16", "moe-bf16"):
        for scheme in (MOE_SCHEMES if dtype_name.startswith("moe-") else SCHEMES):
            if only and scheme not in only and f"{dtype_name}/{scheme}" not in only:
                continue
            try:
                make(root, dtype_name, scheme)
            except Exception as e:  # report and go on: one scheme's failure says nothing of the others
                import traceback
                traceback.print_exc()
                print(f"{dtype_name}/{scheme}: FAILED: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
