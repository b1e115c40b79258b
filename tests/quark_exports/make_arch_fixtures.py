#!/usr/bin/env python3
"""Real-exporter fixtures of the MoE architectures vLLM builds differently
from Llama (tests/quark_exports/arch-bf16/ARCH-SCHEME/), with amd-quark
from PyPI (CI only reads the committed results):

    python3 -m venv venv && venv/bin/pip install amd-quark==0.13 torch transformers safetensors accelerate
    venv/bin/python tests/quark_exports/make_arch_fixtures.py tests/quark_exports [ARCH-SCHEME...]

Tiny random models in bf16 (hidden 128, seeded; DeepSeek-V3 2 decoder
layers, the Qwen models 1):

  deepseek_v3  MLA attention with q_lora_rank (fused_qkv_a_proj in vLLM),
               first_k_dense_replace 1 (layer 0 dense), 8 routed experts in
               2 groups (topk_group 1, top-2), one shared expert, sigmoid
               scoring with a non-zero e_score_correction_bias (noaux_tc),
               routed_scaling_factor 2.5, norm_topk_prob
  qwen2_moe    4 experts top-2, a shared expert and its sigmoid gate, q/k/v
               biases
  qwen3_moe    4 experts top-2, q/k norms, no shared expert

each quantized with Quark's own template for the architecture
(LLMTemplate.get(model_type): its exclude list, routers and
shared_expert_gate included) into fp8, mxfp4 and nvfp4 and exported as
make_fixtures.py does. quark_reference/outputs.safetensors holds, beside
the per-module numbers of make_fixtures.py (L.x, L.y, L.xq, L.yabs,
L.wsum), for every MoE block B (B = "model.layers.1.mlp.experts"):

  B.x     the block's input [4, H]: the hidden states the model feeds the
          experts on 4 held-out tokens (bf16)
  B.y     Quark's routed-expert output on it (the fake-quantized experts,
          weighted by the model's own routing; shared experts not added)
  B.ids   the experts the model's router chose [4, top_k] (i32)
  B.x8, B.y8  (nvfp4) the same with rows 1 and 3 times 8, past the
          calibrated global input scale, and the same routing
"""
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (module_outputs, the CPU MXFP4 patch)
# versions-arch.json records what made the files

from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors  # noqa: E402
from quark.torch.utils.llm.model_preparation import preprocess_for_quantization  # noqa: E402

SEED = mf.SEED + 100
M = 4
SCHEMES = ["fp8", "mxfp4", "nvfp4"]


def tiny(arch):
    torch.manual_seed(SEED)
    # DeepSeek-V3: a dense layer 0 (first_k_dense_replace) and an MoE layer
    # 1; the Qwen models: one MoE layer says it all (and keeps files small)
    common = dict(vocab_size=64, hidden_size=128, num_hidden_layers=2 if arch == "deepseek_v3" else 1,
                  num_attention_heads=2, max_position_embeddings=64, tie_word_embeddings=False)
    if arch == "deepseek_v3":
        from transformers import DeepseekV3Config as C, DeepseekV3ForCausalLM as F
        cfg = C(**common, num_key_value_heads=2, intermediate_size=256, moe_intermediate_size=64,
                n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1,
                topk_method="noaux_tc", scoring_func="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
                first_k_dense_replace=1, q_lora_rank=64, kv_lora_rank=32, qk_rope_head_dim=16,
                qk_nope_head_dim=32, v_head_dim=32)
    elif arch == "qwen2_moe":
        from transformers import Qwen2MoeConfig as C, Qwen2MoeForCausalLM as F
        cfg = C(**common, num_key_value_heads=1, intermediate_size=256, moe_intermediate_size=64,
                shared_expert_intermediate_size=128, num_experts=4, num_experts_per_tok=2, norm_topk_prob=False,
                decoder_sparse_step=1, qkv_bias=True)
    else:
        from transformers import Qwen3MoeConfig as C, Qwen3MoeForCausalLM as F
        cfg = C(**common, num_key_value_heads=1, head_dim=64, intermediate_size=256, moe_intermediate_size=64,
                num_experts=4, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1)
    cfg.torch_dtype = torch.bfloat16
    model = F(cfg).to(torch.bfloat16).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("bias") and p.ndim == 1:  # q/k/v biases: not all zero
                p.normal_(0, 0.02)
        for n, b in model.named_buffers():
            if n.endswith("e_score_correction_bias"):  # a bias that changes the choice
                b.copy_(torch.randn(b.shape, generator=torch.Generator().manual_seed(SEED + 3)) * 0.05)
    preprocess_for_quantization(model)
    return model


def moe_outputs(model, scheme):
    """Each MoE block's routed-expert output on M tokens of a held-out
    sequence, as the model computes it: the block's input is the hidden
    state the decoder feeds it (in the calibrated range, so that static
    activation scales fit it), routed by the model's own router; hooks on
    the experts module capture its (hidden, ids, weights) and output."""
    out, seen = {}, {}
    hooks = []
    for name, mod in model.named_modules():
        if name.endswith(".mlp") and hasattr(mod, "experts"):
            b = name + ".experts"
            hooks.append(mod.experts.register_forward_pre_hook(lambda m, a, b=b: seen.setdefault(b, {}).setdefault("a", a)))
            hooks.append(mod.experts.register_forward_hook(lambda m, a, o, b=b: seen.setdefault(b, {}).setdefault("y", o)))
    torch.manual_seed(SEED + 4)
    with torch.no_grad():
        model(torch.randint(0, 64, (1, M)))
    for h in hooks:
        h.remove()
    H = model.config.hidden_size
    for b, s in seen.items():
        args = s["a"]
        ids = [a for a in args[1:] if torch.is_tensor(a) and not a.is_floating_point()][0]
        out[b + ".x"] = args[0].reshape(M, H).to(torch.bfloat16).contiguous()
        out[b + ".y"] = s["y"].reshape(M, H).to(torch.bfloat16).contiguous()
        out[b + ".ids"] = ids.reshape(M, -1).to(torch.int32).contiguous()
        if scheme == "nvfp4":  # past the calibrated range: rows 1 and 3 times 8, the same routing
            mod = dict(model.named_modules())[b]
            x8 = args[0].clone()
            x8.view(M, H)[1::2] *= 8
            with torch.no_grad():
                y8 = mod(x8, *args[1:])
            out[b + ".x8"] = x8.reshape(M, H).to(torch.bfloat16).contiguous()
            out[b + ".y8"] = y8.reshape(M, H).to(torch.bfloat16).contiguous()
    return out


def make(root, arch, scheme):
    model = tiny(arch)
    template = LLMTemplate.get(arch)
    config = template.get_config(scheme=scheme)
    torch.manual_seed(SEED + 2)
    calib = [torch.randint(0, 64, (1, 32)) for _ in range(16)]  # every expert sees tokens
    quantizer = ModelQuantizer(config)
    model = quantizer.quantize_model(model, calib)
    model = quantizer.freeze(model)
    dest = os.path.join(root, "arch-bf16", f"{arch}-{scheme}")
    outs = mf.module_outputs(model, torch.bfloat16)
    outs.update(moe_outputs(model, scheme))
    with tempfile.TemporaryDirectory() as tmp:
        export_safetensors(model, tmp, custom_mode="quark", weight_format="real_quantized", pack_method="reorder")
        os.makedirs(dest, exist_ok=True)
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(tmp, f), os.path.join(dest, f))
    os.makedirs(os.path.join(dest, "quark_reference"), exist_ok=True)
    save_file(outs, os.path.join(dest, "quark_reference", "outputs.safetensors"))
    print(f"arch-bf16/{arch}-{scheme}: ok", flush=True)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    only = sys.argv[2:]
    import quark
    import transformers
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "versions-arch.json"), "w") as f:
        json.dump({"amd-quark": quark.__version__, "torch": torch.__version__,
                   "transformers": transformers.__version__, "seed": SEED}, f, indent=1)
        f.write("\n")
    for arch in ("deepseek_v3", "qwen2_moe", "qwen3_moe"):
        for scheme in SCHEMES:
            if only and f"{arch}-{scheme}" not in only:
                continue
            try:
                make(root, arch, scheme)
            except Exception as e:
                import traceback
                traceback.print_exc()
                print(f"arch-bf16/{arch}-{scheme}: FAILED: {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()
