#!/usr/bin/env python3
"""Makes the real-exporter fixtures of tests/ct_exports with llm-compressor's
own `oneshot` (compressed-tensors checkpoints, `quant_method:
"compressed-tensors"`, saved with save_compressed=True). Never needed by CI,
which only reads the committed results. Everything runs on the CPU; PyPI's
torch wheel is the CUDA build and imports only with its nvidia-* wheels
present, so they are installed too (about 6 GB; nothing of them is used):

    python3 -m venv /work/venv-ct
    /work/venv-ct/bin/pip install --no-deps torch==2.14.0   # llmcompressor pins torch <= 2.14.0
    /work/venv-ct/bin/pip install llmcompressor==0.14.0.1 compressed-tensors==0.19.0
    CUDA_VISIBLE_DEVICES= HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 \\
        /work/venv-ct/bin/python tests/ct_exports/make_fixtures.py tests/ct_exports

(the second pip resolves the same versions: llmcompressor 0.14.0.1,
compressed-tensors 0.19.0, transformers 5.17.0, torch 2.14.0.) The 16
exports take under ten seconds on one core, and a rerun reproduces every
file byte for byte.

For each export it builds a tiny random LlamaForCausalLM (hidden 128,
intermediate 256, ONE decoder layer, 2 heads of 64, 1 KV head, vocab 64,
untied lm_head, seeded; K of every quantized layer is 128 or 256, so group
128, NVFP4's 16 and FP8_BLOCK's 128x128 divide it) in the export's dtype,
saves it with an offline word-level tokenizer (nothing is fetched), and
runs `oneshot(model=..., dataset=<16 rows of 32 random token ids>,
recipe=...)` with QuantizationModifier(targets="Linear", scheme=PRESET,
ignore=["lm_head"]) -- GPTQModifier for the act-order exports -- then
`save_pretrained(..., save_compressed=True)`. The layout:

  {fp16,bf16}/NAME/config.json, model.safetensors, recipe.yaml
        the export as llm-compressor writes it (generation_config.json and
        the tokenizer are left out: qport reads neither)
  {fp16,bf16}/NAME/ct_reference/outputs.safetensors
        beside the checkpoint, not in it (a qport model folder reads every
        *.safetensors of the folder); for every Linear L but lm_head (the
        ignored ones too):
    L.x      a seeded input [4, K] in the model dtype
    L.xq     L's own input quantize-dequantize of x (compressed-tensors'
             forward_quantize with the calibrated / dynamic input qparams,
             in the model dtype; x is passed as [1, 4, K], the shape the
             model gives a module: compressed-tensors' dynamic per-token
             scales reduce every dim but the first two, so a 2-D [4, K]
             input would be quantized per tensor)
    L.y      L(x): llm-compressor's fake-quantized forward as it runs after
             calibration (status FROZEN: F.linear(xq, qdq(weight))), taken
             before saving. This is what the exporter itself computes, and
             the compressed checkpoint holds exactly its weight: after the
             save the model's compressed parameters are decompressed again
             with compressed-tensors' ModelCompressor and must equal the
             fake-quantized weight bit for bit (checked here, recorded in
             versions.json as "decompressed"; for NVFP4 / NVFP4A16
             compressed-tensors 0.19 decompresses into bfloat16 whatever
             the model dtype, so there the record is that bf16 rounding)
    L.ax     [4, N] fp16: sum_k |x_k| |w[n, k]|, w the fake-quantized weight
             (summed in double, rounded up to fp16)
    L.axq    [4, N] fp16: the same over |xq_k|
    L.wsum   [N] fp16: sum_k |w[n, k]|, rounded up
  (ax / axq / wsum are what the C test's bounds scale with; xq and axq
  are left out where L has no input quantization: they would be x and ax.)
  (ax / axq / wsum are what the C test's bounds scale with.)

Exports (fp16 unless said):
  W8A8, FP8, FP8_DYNAMIC, FP8_BLOCK, W4A16, W4A16_ASYM, W8A16, NVFP4A16,
  NVFP4, W4A8 (presets, QuantizationModifier); W4A16_actorder_weight and
  W4A16_actorder_static (GPTQModifier(scheme="W4A16", actorder=...): the
  orderings llm-compressor 0.14's GPTQ offers; "group" / "dynamic" it
  refuses ("Invalid activation ordering group. Only 'weight' and 'static'
  are supported for GPTQ."), and vLLM 0.34.0 refuses their configs too,
  which tests/configs and resolve-ct cover);
  W8A8_ignore (W8A8 with targets ["re:.*self_attn\\.[qkvo]_proj$",
  "re:.*mlp\\..*_proj$"] and ignore ["lm_head", "re:.*down_proj$",
  "re:.*self_attn\\.o_proj"]: llm-compressor keeps the regex targets in
  config.json but writes the ignore list as the module names the patterns
  matched); bf16/{W8A8, FP8_DYNAMIC, W4A16}.

versions.json records the versions, the seed, notes on what was measured
about the exporter (NOTES below), per export the file sizes
and which layers are quantized, and the checks above.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

torch.set_num_threads(1)

SEED = 20261204
M = 4
VOCAB = 64

# name -> (dtype, modifier kind, preset, extra)
EXPORTS = [
    ("fp16/W8A8", torch.float16, "qm", "W8A8", {}),
    ("fp16/FP8", torch.float16, "qm", "FP8", {}),
    ("fp16/FP8_DYNAMIC", torch.float16, "qm", "FP8_DYNAMIC", {}),
    ("fp16/FP8_BLOCK", torch.float16, "qm", "FP8_BLOCK", {}),
    ("fp16/W4A16", torch.float16, "qm", "W4A16", {}),
    ("fp16/W4A16_ASYM", torch.float16, "qm", "W4A16_ASYM", {}),
    ("fp16/W4A16_actorder_weight", torch.float16, "gptq", "W4A16", {"actorder": "weight"}),
    ("fp16/W4A16_actorder_static", torch.float16, "gptq", "W4A16", {"actorder": "static"}),
    ("fp16/W8A16", torch.float16, "qm", "W8A16", {}),
    ("fp16/NVFP4A16", torch.float16, "qm", "NVFP4A16", {}),
    ("fp16/NVFP4", torch.float16, "qm", "NVFP4", {}),
    ("fp16/W4A8", torch.float16, "qm", "W4A8", {}),
    ("fp16/W8A8_ignore", torch.float16, "qm", "W8A8",
     {"targets": ["re:.*self_attn\\.[qkvo]_proj$", "re:.*mlp\\..*_proj$"],
      "ignore": ["lm_head", "re:.*down_proj$", "re:.*self_attn\\.o_proj"]}),
    ("bf16/W8A8", torch.bfloat16, "qm", "W8A8", {}),
    ("bf16/FP8_DYNAMIC", torch.bfloat16, "qm", "FP8_DYNAMIC", {}),
    ("bf16/W4A16", torch.bfloat16, "qm", "W4A16", {}),
]


NOTES = [
    "L.y is the module's fake-quantized forward, F.linear(xq, qdq(weight)), asserted equal here bit for bit",
    "inputs are given as [1, M, K]: compressed-tensors 0.19's dynamic 'token' strategy keeps dims 0 and 1 and "
    "reduces the rest, so a 2-D [M, K] input gets one scale for the whole tensor",
    "int8 symmetric steps are amax/127.5 (bit range 255 / 2; codes may reach -128), fp8 amax/448, int4 amax/7.5",
    "GPTQModifier(actorder='group') raises 'Invalid activation ordering group. Only 'weight' and 'static' are "
    "supported for GPTQ.'; weight / static write no weight_g_idx",
    "the ignore list is saved as the module names the re: patterns matched; re: targets are kept",
    "NVFP4 / NVFP4A16: ModelCompressor.decompress_model returns bfloat16 weights (max_abs_diff: that rounding)",
    "W4A8 is saved int-quantized: int4 values in an int8 'weight' [N, K]",
]


def tiny_tokenizer(path):
    """A word-level tokenizer over VOCAB made-up words (nothing is fetched)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for i in range(3, VOCAB):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="</s>")
    fast.save_pretrained(path)
    return fast


def tiny_llama(path, dtype):
    torch.manual_seed(SEED)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=64,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    cfg.torch_dtype = dtype
    model = LlamaForCausalLM(cfg).to(dtype)
    with torch.no_grad():  # spread the weights as trained ones are (a few large channels)
        for _, p in model.named_parameters():
            if p.ndim == 2:
                p.mul_(1.0 + 3.0 * (torch.rand(p.shape[0], 1) < 0.05).to(p.dtype))
    model.save_pretrained(path)
    return tiny_tokenizer(path)


def calibration():
    from datasets import Dataset
    torch.manual_seed(SEED + 2)
    ids = [torch.randint(3, VOCAB, (32,)).tolist() for _ in range(16)]
    return Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * 32 for _ in ids]})


def recipe(kind, preset, extra):
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    ignore = extra.get("ignore", ["lm_head"])
    targets = extra.get("targets", "Linear")
    if kind == "gptq":
        return GPTQModifier(targets=targets, scheme=preset, ignore=ignore, actorder=extra["actorder"])
    return QuantizationModifier(targets=targets, scheme=preset, ignore=ignore)


def up16(v):
    """v (>= 0) rounded up to fp16: the bounds' sums, never understated."""
    h = v.to(torch.float16)
    return torch.where(h.double() < v.double(), torch.nextafter(h, torch.tensor(float("inf"), dtype=torch.float16)), h)


def reference(model, dtype):
    """Every Linear's x, xq, y (the fake-quantized forward) and the sums the
    C test's bounds use; the fake-quantized weights, kept to check the
    decompressed checkpoint against."""
    from compressed_tensors.quantization.lifecycle.forward import forward_quantize
    out, wfq, quantized = {}, {}, []
    g = torch.Generator().manual_seed(SEED + 1)
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.Linear) or name == "lm_head":
            continue
        K = mod.in_features
        x = (torch.randn(M, K, generator=g) * (1 + 7 * (torch.rand(M, K, generator=g) < 0.02))).to(dtype)
        scheme = getattr(mod, "quantization_scheme", None)
        with torch.no_grad():
            # [1, M, K], as the model runs a module (batch, sequence,
            # hidden): compressed-tensors' dynamic "token" strategy keeps
            # dims 0 and 1 and reduces the rest, so a 2-D input would get
            # one scale for the whole tensor
            y = mod(x[None])[0]
            if scheme is not None:
                quantized.append(name)
                xq = forward_quantize(mod, x[None], "input", scheme.input_activations)[0] if scheme.input_activations else x
                w = forward_quantize(mod, mod.weight.data, "weight", scheme.weights)
            else:
                xq, w = x, mod.weight.data
            assert mod.bias is None
            # the forward is exactly F.linear on the two qdq'd operands
            assert torch.equal(y, torch.nn.functional.linear(xq, w)), name
            wa = w.double().abs()
            ax = (x.double().abs() @ wa.T).float()
            axq = (xq.double().abs() @ wa.T).float()
        wfq[name] = w.clone()
        for k, v in (("x", x), ("xq", xq), ("y", y), ("ax", up16(ax)), ("axq", up16(axq)), ("wsum", up16(wa.sum(1)))):
            if k in ("xq", "axq") and xq is x:
                continue  # no input quantization: the test reads x
            out[f"{name}.{k}"] = v.contiguous()
    return out, wfq, quantized


def decompressed_equal(model, wfq):
    """The saved (compressed) parameters decompressed again by
    compressed-tensors equal the fake-quantized weights bit for bit."""
    from compressed_tensors.compressors import ModelCompressor
    mc = ModelCompressor.from_pretrained_model(model)
    mc.decompress_model(model)
    res = {}
    for name, mod in model.named_modules():
        if name in wfq:
            w, f = mod.weight.data, wfq[name]
            res[name] = {"equal": bool(torch.equal(w, f)), "dtype": str(w.dtype).replace("torch.", ""),
                         "max_abs_diff": float((w.double() - f.double()).abs().max())}
    return res


def make(root, name, dtype, kind, preset, extra):
    from llmcompressor import oneshot
    dest = os.path.join(root, name)
    with tempfile.TemporaryDirectory() as tmp:
        src, q = os.path.join(tmp, "src"), os.path.join(tmp, "q")
        tok = tiny_llama(src, dtype)
        model = LlamaForCausalLM.from_pretrained(src, dtype=dtype)
        oneshot(model=model, dataset=calibration(), recipe=recipe(kind, preset, extra), processor=tok,
                num_calibration_samples=16, max_seq_length=32)
        outs, wfq, quantized = reference(model, dtype)
        model.save_pretrained(q, save_compressed=True)
        try:
            dec = decompressed_equal(model, wfq)
        except Exception as e:  # recorded, not fatal
            dec = {"error": repr(e)}
        if os.path.isdir(dest):
            shutil.rmtree(dest)
        os.makedirs(os.path.join(dest, "ct_reference"))
        for f in ("config.json", "model.safetensors", "recipe.yaml"):
            if os.path.exists(os.path.join(q, f)):
                shutil.copy(os.path.join(q, f), os.path.join(dest, f))
    save_file(outs, os.path.join(dest, "ct_reference", "outputs.safetensors"))
    sizes = {f: os.path.getsize(os.path.join(dest, f)) for f in ("model.safetensors", "ct_reference/outputs.safetensors")}
    neq = [k for k, v in dec.items() if not isinstance(v, dict) or not v["equal"]]
    print(f"{name}: ok, {len(quantized)} quantized layers, {sizes}, decompressed != fake-quantized: {neq}", flush=True)
    return {"modifier": "GPTQModifier" if kind == "gptq" else "QuantizationModifier", "scheme": preset,
            **{k: v for k, v in extra.items()}, "quantized_layers": quantized, "bytes": sizes,
            "decompressed": dec}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    only = sys.argv[2:]
    import compressed_tensors
    import llmcompressor
    import transformers
    info = {"llmcompressor": llmcompressor.__version__, "compressed-tensors": compressed_tensors.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__, "seed": SEED, "exports": {},
            "notes": NOTES}
    vpath = os.path.join(root, "versions.json")
    if only and os.path.exists(vpath):
        with open(vpath) as f:
            info["exports"] = json.load(f).get("exports", {})
    for name, dtype, kind, preset, extra in EXPORTS:
        if only and name not in only:
            continue
        info["exports"][name] = make(root, name, dtype, kind, preset, extra)
    with open(vpath, "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
