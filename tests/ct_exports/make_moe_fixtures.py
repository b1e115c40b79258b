#!/usr/bin/env python3
"""Makes the MoE fixtures of tests/ct_exports (moe-fp16/<PRESET>/ and
moe-bf16/<PRESET>/) with
llm-compressor's own `oneshot`, beside the dense ones of make_fixtures.py
(same venv, same versions: llmcompressor 0.14.0.1, compressed-tensors
0.19.0, transformers 5.17.0, torch 2.14.0, CPU only; see make_fixtures.py
for the venv). Never needed by CI, which only reads the committed results:

    CUDA_VISIBLE_DEVICES= HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 \\
        /work/venv-ct/bin/python tests/ct_exports/make_moe_fixtures.py tests/ct_exports

A rerun reproduces every file byte for byte (seeded; one CPU thread).

The model: a tiny random MixtralForCausalLM in fp16, and again in bf16
(DTYPES: moe-fp16 and moe-bf16, the same seeds, so the same fp32 draws
rounded to the other dtype; hidden 128,
intermediate 256, 4 local experts, top-2, ONE decoder layer, 2 heads of 64,
1 KV head, vocab 64, untied lm_head; the same few large channels as the
dense fixtures). transformers 5 builds Mixtral's experts as one fused
MixtralExperts module (3-D gate_up_proj / down_proj parameters), which no
Linear-targeted recipe quantizes; llm-compressor's
`llmcompressor.modeling.moe.linearize.linearize_moe(model)` (oneshot calls
it itself when it finds such a module, with a warning; it is called here
explicitly) replaces it by LinearExperts2D: per expert an nn.Linear
gate_proj, up_proj, down_proj. Then
oneshot(QuantizationModifier(targets="Linear", scheme=PRESET,
ignore=["lm_head", "re:.*mlp.gate$"])) and save_pretrained(...,
save_compressed=True). (The router, MixtralTopKRouter, is no nn.Linear and
is never a target; the ignore entry is what people write.) What
llm-compressor writes: transformers' Mixtral save mapping renames
`.mlp.` back to `.block_sparse_moe.`, and the linearized experts keep
their Llama-style names, so the experts are saved as
`model.layers.0.block_sparse_moe.experts.<e>.{gate_proj,up_proj,down_proj}.*`
(NOT Mixtral's original w1/w3/w2) and the router as
`model.layers.0.block_sparse_moe.gate.weight`; `ignore` in config.json
lists "model.layers.0.block_sparse_moe.gate" and "lm_head".

Presets (in each dtype): W4A16 (int4 sym, group 128), FP8_DYNAMIC (fp8
channel weights, dynamic per-token fp8 activations), W8A8 (int8 channel
weights, dynamic per-token int8 activations).

Dtypes: below "fp16" names the model dtype D: in moe-bf16 every tensor
written as fp16 below but the bound sums is bf16 (x, router_logits, y, c1,
h, hq, o; the checkpoint's weight_scale too), and every rounding described
as "to fp16" is to bf16 (torch does the same ops in bf16: F.silu in fp32
rounded to bf16, the products rounded to bf16). The bound sums (a13, d13,
w13, a2, d2, w2) are fp16 in both, rounded up (make_fixtures.up16, as the
dense bf16 fixtures): fp16 keeps 3 more bits than bf16 and these sums stay
far inside its range.

Layout, per preset (DT = fp16 or bf16):
  moe-DT/NAME/config.json, model.safetensors, recipe.yaml   (the export)
  moe-DT/NAME/ct_reference/outputs.safetensors              (not in the
        model folder's *.safetensors set qport reads: a sub-folder)
with, for the block B = model.layers.0.block_sparse_moe (M = 5 tokens,
k = 2, E = 4, H = 128, I = 256; rows r = m * k + j, slot j of token m):
  B.x             [M, H] fp16, a seeded input (the first of seeds SEED + 1,
                  SEED + 2, ... whose routing reaches all 4 experts;
                  recorded as block_forward.x_seed)
  B.router_logits [M, E] fp16, the router's F.linear(x, gate.weight)
  B.topk_ids      [M, k] int32, B.topk_weights [M, k] fp32: the model's
                  MixtralTopKRouter on x (softmax in fp32, top-2,
                  renormalized), slot 0 the larger
  B.y             [M, H] fp16: the exporter's block output, formed as
                  below from its own fake-quantized expert modules
  per row r (expert e = topk_ids[m, j]), the intermediates of y:
  B.c1   [M*k, 2I] fp16  gate_proj(x_m) then up_proj(x_m): the expert's
                         fake-quantized modules (status FROZEN) called on
                         x as [1, M, H] (per-token dynamic scales, as vLLM
                         quantizes; see below), row m taken
  B.h    [M*k, I] fp16   silu(gate) * up in fp16 (torch: F.silu in fp32
                         rounded to fp16, the product rounded to fp16)
  B.hq   [M*k, I] fp16   down_proj's own input quantize-dequantize of h
                         (forward_quantize, h given as [1, M*k, I]: per row);
                         left out for W4A16 (hq = h)
  B.o    [M*k, H] fp16   down_proj(h): F.linear(hq, qdq(w2)) in fp16
  and y[m] = fp16(fp16(w_0 * o_0) + fp16(w_1 * o_1)), w_j the fp32
  routing weight of slot j (fp16 * fp32 product in fp32, rounded to fp16:
  exactly what LinearExperts2D.forward computes: expert_output *
  top_k_weights, .to(fp16), index_add_ into fp16 zeros, in expert order;
  the sum of two is order-free).
  Sums the C test's bound scales with (summed in double over the fake-
  quantized weights wq, rounded up to fp16; xq = gate_proj's input
  quantize-dequantize of x, = x for W4A16):
  B.a13  [M*k, 2I]  sum_h |xq_m,h| |w13[e][n][h]|
  B.d13  [M*k, 2I]  sum_h |x_m,h - xq_m,h| |w13[e][n][h]|   (act presets)
  B.w13  [E, 2I]    sum_h |w13[e][n][h]|
  B.a2   [M*k, H]   sum_i |hq_r,i| |w2[e][n][i]|
  B.d2   [M*k, H]   sum_i |h_r,i - hq_r,i| |w2[e][n][i]|    (act presets)
  B.w2   [E, H]     sum_i |w2[e][n][i]|
  (w13 = gate rows then up rows, as vLLM stacks them. The sums over |x|
  and |h| the bounds also need are at most a13 + d13 and a2 + d2.)

Why not the model's own block forward: LinearExperts2D runs each expert on
hidden_states[token_indices], a 2-D [n, H] tensor, and compressed-tensors
0.19's dynamic "token" strategy keeps dims 0 and 1 and reduces the rest,
so there an expert's activations get ONE scale over the tokens routed to
it (per tensor), which no serving engine does (vLLM's fused MoE quantizes
per token). y above calls the same modules on [1, M, H]; the block's own
output on x is compared with it here and recorded in versions.json
("block_forward": bit-equal for W4A16, where nothing is quantized
dynamically; its NMSE against y for the dynamic presets).

moe_versions.json records versions, the seed, per export its dtype, the
file sizes, the quantized layers, the saved expert names, the routing, the
decompression check (each expert weight decompressed by compressed-
tensors' ModelCompressor equals the fake-quantized one bit for bit) and
the block-forward comparison above.
"""
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import MixtralConfig, MixtralForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (tokenizer, calibration set, up16, decompression check)

torch.set_num_threads(1)

SEED = 20261211
M, H, I, E, TOPK = 5, 128, 256, 4, 2
BLOCK = "model.layers.0.block_sparse_moe"  # as saved; the module is model.layers.0.mlp
PRESETS = ["W4A16", "FP8_DYNAMIC", "W8A8"]
# (folder, model dtype): the same presets and seeds in each
DTYPES = [("moe-fp16", torch.float16), ("moe-bf16", torch.bfloat16)]


def tiny_mixtral(path, dtype):
    torch.manual_seed(SEED)
    cfg = MixtralConfig(vocab_size=mf.VOCAB, hidden_size=H, intermediate_size=I, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=64, num_local_experts=E,
                        num_experts_per_tok=TOPK, max_position_embeddings=64, tie_word_embeddings=False,
                        bos_token_id=1, eos_token_id=2, pad_token_id=2)
    cfg.torch_dtype = dtype
    model = MixtralForCausalLM(cfg).to(dtype)
    with torch.no_grad():  # a few large output channels, as the dense fixtures
        for _, p in model.named_parameters():
            if p.ndim >= 2:
                p.mul_(1.0 + 3.0 * (torch.rand(*p.shape[:-1], 1) < 0.05).to(p.dtype))
    model.save_pretrained(path)
    return mf.tiny_tokenizer(path)


def qdq_input(mod, v):
    """mod's own input quantize-dequantize of v ([1, R, K]); v if none."""
    from compressed_tensors.quantization.lifecycle.forward import forward_quantize
    s = mod.quantization_scheme
    return forward_quantize(mod, v, "input", s.input_activations) if s.input_activations else v


def qdq_weight(mod):
    from compressed_tensors.quantization.lifecycle.forward import forward_quantize
    return forward_quantize(mod, mod.weight.data, "weight", mod.quantization_scheme.weights)


def nmse(a, b):
    a, b = a.double(), b.double()
    return float(((a - b) ** 2).sum() / (b ** 2).sum())


@torch.no_grad()
def reference(model, act_quant, dtype):
    block = model.model.layers[0].mlp
    experts = block.experts
    for xseed in range(SEED + 1, SEED + 100):  # the first seeded x whose routing reaches every expert
        g = torch.Generator().manual_seed(xseed)
        x = (torch.randn(M, H, generator=g) * (1 + 7 * (torch.rand(M, H, generator=g) < 0.02))).to(dtype)
        logits, wts, ids = block.gate(x)
        if len(set(ids.flatten().tolist())) == E:
            break
    assert logits.dtype == dtype and wts.dtype == torch.float32
    out = {"x": x, "router_logits": logits, "topk_ids": ids.to(torch.int32), "topk_weights": wts}
    wfq = {}
    rows = {k: [] for k in ("c1", "h", "hq", "o", "a13", "d13", "a2", "d2")}
    w13s, w2s = [], []
    per_e = {}
    for e in range(E):
        ex = experts[e]
        wg, wu, wd = qdq_weight(ex.gate_proj), qdq_weight(ex.up_proj), qdq_weight(ex.down_proj)
        for p, w in (("gate_proj", wg), ("up_proj", wu), ("down_proj", wd)):
            wfq[f"model.layers.0.mlp.experts.{e}.{p}"] = w.clone()
        xq = qdq_input(ex.gate_proj, x[None])
        assert torch.equal(xq, qdq_input(ex.up_proj, x[None]))
        gate, up = ex.gate_proj(x[None]), ex.up_proj(x[None])
        # the modules' forward is F.linear on the two qdq'd operands
        assert torch.equal(gate, F.linear(xq, wg)) and torch.equal(up, F.linear(xq, wu))
        per_e[e] = (xq[0], gate[0], up[0])
        w13 = torch.cat([wg, wu]).double().abs()
        w13s.append(w13.sum(1))
        w2s.append(wd.double().abs().sum(1))
        per_e[e] += (w13, wd)
    # rows r = m * k + j
    hs = []
    for m in range(M):
        for j in range(TOPK):
            e = int(ids[m, j])
            xq, gate, up, w13, wd = per_e[e]
            ex = experts[e]
            c1 = torch.cat([gate[m], up[m]])
            h = F.silu(gate[m]) * up[m]
            assert h.dtype == dtype
            rows["c1"].append(c1)
            rows["h"].append(h)
            xqa = xq[m].double().abs()
            rows["a13"].append(w13 @ xqa)
            rows["d13"].append(w13 @ (x[m].double() - xq[m].double()).abs())
            hs.append(h)
    h_all = torch.stack(hs)[None]  # [1, M*k, I]: per-row dynamic scales
    for r in range(M * TOPK):
        m, j = divmod(r, TOPK)
        e = int(ids[m, j])
        ex = experts[e]
        hq_all = qdq_input(ex.down_proj, h_all)
        o_all = ex.down_proj(h_all)
        wd = per_e[e][4]
        assert torch.equal(o_all, F.linear(hq_all, wd))
        hq, o = hq_all[0, r], o_all[0, r]
        wa = wd.double().abs()
        h = h_all[0, r]
        rows["hq"].append(hq)
        rows["o"].append(o)
        rows["a2"].append(wa @ hq.double().abs())
        rows["d2"].append(wa @ (h.double() - hq.double()).abs())
    o = torch.stack(rows["o"]).view(M, TOPK, H)
    y = torch.zeros(M, H, dtype=dtype)
    for j in range(TOPK):
        y = y + (o[:, j] * wts[:, j, None]).to(dtype)
    # the module's own block forward (per-tensor activation scales per expert)
    yb = block(x[None])[0]
    out["y"] = y
    for k, v in rows.items():
        if not act_quant and k in ("hq", "d13", "d2"):
            continue
        t = torch.stack(v)
        out[k] = mf.up16(t) if k.startswith(("a", "d")) else t
    out["w13"] = mf.up16(torch.stack(w13s))
    out["w2"] = mf.up16(torch.stack(w2s))
    bf = {"equal": bool(torch.equal(yb, y)), "nmse": nmse(yb, y), "max_abs_diff": float((yb.double() - y.double()).abs().max())}
    bf["x_seed"] = xseed
    return {f"{BLOCK}.{k}": v.contiguous() for k, v in out.items()}, wfq, bf, ids


def make(root, folder, dtype, preset):
    from llmcompressor import oneshot
    from llmcompressor.modeling.moe.linearize import linearize_moe
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from safetensors import safe_open
    name = f"{folder}/{preset}"
    dest = os.path.join(root, name)
    with tempfile.TemporaryDirectory() as tmp:
        src, q = os.path.join(tmp, "src"), os.path.join(tmp, "q")
        tok = tiny_mixtral(src, dtype)
        model = MixtralForCausalLM.from_pretrained(src, dtype=dtype)
        linearize_moe(model)
        oneshot(model=model, dataset=mf.calibration(), processor=tok, num_calibration_samples=16, max_seq_length=32,
                recipe=QuantizationModifier(targets="Linear", scheme=preset, ignore=["lm_head", "re:.*mlp.gate$"]))
        quantized = [n for n, mod in model.named_modules()
                     if isinstance(mod, torch.nn.Linear) and getattr(mod, "quantization_scheme", None) is not None]
        act_quant = model.model.layers[0].mlp.experts[0].gate_proj.quantization_scheme.input_activations is not None
        outs, wfq, bf, ids = reference(model, act_quant, dtype)
        if preset == "W4A16":
            assert bf["equal"], bf
        model.save_pretrained(q, save_compressed=True)
        with safe_open(os.path.join(q, "model.safetensors"), "pt") as f:
            expert_names = sorted(k for k in f.keys() if ".experts.0." in k)
        try:
            dec = mf.decompressed_equal(model, wfq)
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
    used = sorted({int(i) for i in ids.flatten()})
    print(f"{name}: {len(quantized)} quantized layers, {sizes}, experts routed {used}, block forward {bf}, "
          f"decompressed != fake-quantized: {neq}", flush=True)
    return {"modifier": "QuantizationModifier", "scheme": preset, "dtype": str(dtype).replace("torch.", ""),
            "quantized_layers": quantized, "bytes": sizes,
            "expert_0_tensors": expert_names, "topk_ids": ids.tolist(), "experts_routed": used,
            "decompressed_all_equal": not neq, "decompressed_not_equal": neq, "block_forward": bf}


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    import compressed_tensors
    import llmcompressor
    import transformers
    info = {"llmcompressor": llmcompressor.__version__, "compressed-tensors": compressed_tensors.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__, "seed": SEED,
            "shape": {"M": M, "H": H, "I": I, "E": E, "top_k": TOPK}, "exports": {}}
    for folder, dtype in DTYPES:
        for preset in PRESETS:
            info["exports"][f"{folder}/{preset}"] = make(root, folder, dtype, preset)
    with open(os.path.join(root, "moe_versions.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
