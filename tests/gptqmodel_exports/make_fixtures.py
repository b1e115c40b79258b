#!/usr/bin/env python3
"""Makes the real-exporter fixtures of tests/gptqmodel_exports with
GPTQModel's own QQQ quantizer (PyPI; never needed by CI, which only reads the
committed results). GPTQModel 7.7.0 is a pure-Python sdist (its kernels are
compiled on first use, and none is needed here: QQQTorchLinear is plain
torch); it quantizes on the CPU. PyPI's torch wheel is the CUDA build; with
--no-deps the nvidia-* wheels come only from what the other requirements
pull in:

    python3 -m venv /tmp/venv27
    /tmp/venv27/bin/pip install --no-deps torch
    tar xzf gptqmodel-7.7.0.tar.gz
    grep -v torch gptqmodel-7.7.0/requirements.txt > req.txt
    /tmp/venv27/bin/pip install -r req.txt torchao sympy networkx fsspec typing-extensions
    /tmp/venv27/bin/pip install --no-deps --no-build-isolation ./gptqmodel-7.7.0
    GPTQMODEL_CPU_WORKERS=2 OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES= \
        /tmp/venv27/bin/python tests/gptqmodel_exports/make_fixtures.py tests/gptqmodel_exports

(GPTQMODEL_CPU_WORKERS=1 fails: its model loader's pool asks for two CPU
workers.) Both exports take a minute or two on one core, and a rerun
reproduces every file byte for byte but for the temporary
offload_to_disk_path GPTQModel records in config.json and
quantize_config.json.

For group 128 (g128/) and per-channel (pc/) it builds a tiny random
LlamaForCausalLM (hidden 128, intermediate 256, 2 layers, fp16, seeded) with
an offline word-level tokenizer in the model folder, quantizes it with
GPTQModel (QQQConfig, format qqq, random calibration token ids) and saves it.
Into NAME/{config.json,quantize_config.json,model.safetensors} goes the
export; into NAME/gptqmodel_reference/outputs.safetensors (beside the
checkpoint, not in it: a loader reads every *.safetensors of the folder) go
the numbers of GPTQModel's own CPU QQQ module (QQQTorchLinear, loaded back
from the export) for every quantized layer L:

  L.x      a seeded input [4, K] fp16
  L.y      L(x), GPTQModel's output (fp16; GPTQModel runs it with the
           checkpoint's fp32 s_channel rounded to fp16, as it loads every
           float tensor in the model dtype)
  L.yvllm  an independent model of vLLM's Marlin-QQQ arithmetic on the
           same checkpoint: x quantized per token as vLLM does (fp32
           amax/127 and 127/amax), the int8 weight rebuilt as vLLM's kernel does (group
           scales: through fp16, wrapping where (code - 8) * s_group leaves
           int8; GPTQModel rounds and saturates), the exact int32 sum, two
           fp32 multiplies (s_channel, then the token scale), fp16
  L.wsum   s_channel[n] * sum_k |w8[k, n]| over GPTQModel's int8 weight
           and the checkpoint's s_channel (stored f32): how far one
           activation step moves y[., n]
  L.wraps  [1] int32: in how many (group, column) pairs of L the wrapped
           weight differs from GPTQModel's

versions.json records what made the files and, per export, the NMSE between
y and yvllm over the layers whose groups wrap.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")  # its model loader pool asks for two
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

torch.set_num_threads(1)

SEED = 20261204
M = 4
VOCAB = 64
EXPORTS = {"g128": 128, "pc": -1}


def tiny_tokenizer(path):
    """A word-level tokenizer over VOCAB made-up words: GPTQModel loads a
    tokenizer from the model folder, and nothing may be fetched."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(3, VOCAB):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="</s>")
    fast.save_pretrained(path)


def tiny_llama(path):
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=64,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    cfg.torch_dtype = torch.float16
    model = LlamaForCausalLM(cfg).to(torch.float16)
    with torch.no_grad():  # spread the weights as trained ones are (a few large channels)
        for _, p in model.named_parameters():
            if p.ndim == 2:
                p.mul_(1.0 + 3.0 * (torch.rand(p.shape[0], 1) < 0.05).to(p.dtype))
    model.save_pretrained(path)
    tiny_tokenizer(path)


def wrap_weight(mod, saturated):
    """The int8 weight [K, N] as vLLM's Marlin-QQQ builds it from the same
    codes and scales: per channel code * 16 (exact in int8); per group
    h = fp16(t * s_group + 1152), t = code - 8 (one rounding: the product is
    exact in double), and the weight is h's low byte XOR 0x80, which wraps
    where t * s_group leaves int8. Also the count of (group, column) pairs
    where that differs from GPTQModel's saturated weight."""
    codes = mod._unpack_weight_codes().to(torch.int64)
    if mod.group_size == mod.in_features:
        signed = torch.where(codes >= 8, codes - 16, codes)
        return (signed * 16).to(torch.float64), 0
    s_group = mod._unpermute_scales(mod.s_group, mod._scale_perm_i).to(torch.float64)
    gidx = torch.arange(mod.in_features) // mod.group_size
    h = ((codes - 8).to(torch.float64) * s_group[gidx] + 1152.0).to(torch.float16)
    low = (h.view(torch.int16).to(torch.int64) & 0xFF) ^ 0x80
    wrapped = torch.where(low >= 128, low - 256, low)
    differs = (wrapped != saturated.to(torch.int64)).reshape(-1, mod.group_size, mod.out_features).any(1)
    return wrapped.to(torch.float64), int(differs.sum().item())


def vllm_int8_per_token(x):
    """vLLM's dynamic per-token int8 quantization of fp16 rows: scale
    amax/127 and multiplier 127/amax, each one correctly rounded fp32
    division (numpy's; torch's CPU scalar-by-tensor division is not always
    correctly rounded), codes rne(x * multiplier) saturated to int8 (a zero
    row: scale 0, codes 0)."""
    xf = x.float().numpy()
    amax = np.abs(xf).max(axis=1, keepdims=True).astype(np.float32)
    scale = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        mult = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint((xf * mult).astype(np.float32)), -128, 127)
    return q.astype(np.float64), scale


def module_outputs(model, checkpoint):
    """checkpoint: the export's tensors. GPTQModel loads the fp32 s_channel
    into the model dtype (fp16) and back, so its module runs with rounded
    channel scales; vLLM keeps the checkpoint's fp32 values, and so does the
    model of vLLM's arithmetic here."""
    from gptqmodel.nn_modules.qlinear.qqq import QQQTorchLinear
    out, stats = {}, []
    g = torch.Generator().manual_seed(SEED + 1)
    for name, mod in model.named_modules():
        if not isinstance(mod, QQQTorchLinear):
            continue
        name = name[len("model."):] if name.startswith("model.model.") else name
        K = mod.in_features
        x = (torch.randn(M, K, generator=g) * (1 + 7 * (torch.rand(M, K, generator=g) < 0.02))).to(torch.float16)
        with torch.no_grad():
            y = mod(x)
            w, s_ch_module = mod._dequantize_weight_for_torch()
            s_file = checkpoint[name + ".s_channel"].to(torch.float32)
            s_ch = mod._unpermute_scales(s_file, mod._scale_perm_single_i)
            assert torch.equal(s_ch.half().float(), s_ch_module.float()), name
            ww, wraps = wrap_weight(mod, w)
            # vLLM's arithmetic on the wrapped weight: the int32 sum is
            # exact in double (|acc| < 2^24), then two fp32 multiplies
            xq, s_tok = vllm_int8_per_token(x)
            acc = (xq @ ww.numpy()).astype(np.float32)
            s_c = s_ch.float().reshape(1, -1).numpy()
            yv = torch.from_numpy(((acc * s_c).astype(np.float32) * s_tok).astype(np.float32).astype(np.float16))
            assert mod.bias is None
            wsum = (w.double().abs().sum(0) * s_ch.double().reshape(-1)).float()
        out[name + ".x"] = x.contiguous()
        out[name + ".y"] = y.contiguous()
        out[name + ".yvllm"] = yv.contiguous()
        out[name + ".wsum"] = wsum.contiguous()
        out[name + ".wraps"] = torch.tensor([wraps], dtype=torch.int32)
        if wraps:
            d = (y.double() - yv.double()).pow(2).sum() / yv.double().pow(2).sum()
            stats.append((name, wraps, float(d)))
    return out, stats


def make(root, name, group_size):
    from gptqmodel import BACKEND, GPTQModel
    from gptqmodel.quantization.config import QQQConfig
    dest = os.path.join(root, name)
    with tempfile.TemporaryDirectory() as tmp:
        src, q = os.path.join(tmp, "fp16"), os.path.join(tmp, "q")
        tiny_llama(src)
        torch.manual_seed(SEED + 2)
        calib = []
        for _ in range(16):
            ids = torch.randint(3, VOCAB, (32,)).tolist()
            calib.append({"input_ids": ids, "attention_mask": [1] * len(ids)})
        qcfg = QQQConfig(bits=4, group_size=group_size, desc_act=False, sym=True)
        model = GPTQModel.load(src, qcfg, device="cpu", dtype=torch.float16)  # vLLM runs QQQ in fp16 only
        model.quantize(calib, batch_size=1)
        model.save(q)
        del model
        os.makedirs(dest, exist_ok=True)
        for f in ("config.json", "quantize_config.json", "model.safetensors"):
            shutil.copy(os.path.join(q, f), os.path.join(dest, f))
        qm = GPTQModel.load(q, device="cpu", backend=BACKEND.QQQ_TORCH, dtype=torch.float16)
        outs, stats = module_outputs(qm.model, load_file(os.path.join(q, "model.safetensors")))
    if not outs:
        raise SystemExit(f"{name}: no QQQ module found")
    os.makedirs(os.path.join(dest, "gptqmodel_reference"), exist_ok=True)
    save_file(outs, os.path.join(dest, "gptqmodel_reference", "outputs.safetensors"))
    print(f"{name}: ok, layers whose groups wrap: {stats}", flush=True)
    return stats


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    import gptqmodel
    import transformers
    os.makedirs(root, exist_ok=True)
    info = {"gptqmodel": gptqmodel.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "seed": SEED, "wrap_nmse": {}}
    for name, gs in EXPORTS.items():
        stats = make(root, name, gs)
        info["wrap_nmse"][name] = {layer: {"groups": n, "nmse": d} for layer, n, d in stats}
    with open(os.path.join(root, "versions.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
