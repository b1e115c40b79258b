#!/usr/bin/env python3
"""Prints the scheme vLLM would run for every layer of a Hugging Face
model, from its config.json alone (no weights needed).

    python3 examples/python/schemes_of_config.py path/to/config.json [--capability 89]

The layer names are those of a Llama / Mistral / Qwen-style decoder
(num_hidden_layers from config.json); vLLM's errors are printed in place
of the scheme, as vLLM would raise them.
"""
import argparse
import json

import qport

PROJS = ["self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--capability", help="GPU compute capability, e.g. 89 or 8.9 (default: no check)")
    a = ap.parse_args()
    with open(a.config) as f:
        hf = json.load(f)
    cfg = qport.load_config(a.config)
    n = hf.get("num_hidden_layers") or hf.get("text_config", {}).get("num_hidden_layers") or 1
    layers = [(f"model.layers.{i}.{p}", "linear") for i in range(n) for p in PROJS]
    layers += [(f"model.layers.{i}.self_attn", "attention") for i in range(n)]
    if hf.get("num_experts") or hf.get("num_local_experts") or hf.get("n_routed_experts"):
        layers += [(f"model.layers.{i}.mlp.experts", "moe") for i in range(n)]
    layers.append(("lm_head", "linear"))
    for name, kind in layers:
        try:
            s = cfg.resolve(name, kind=kind, capability=a.capability)
            what = " / ".join(x for x in (s.method, s.scheme_class) if x) or "(no quant method)"
            keys = f"  [{s.weight_key} x {s.activation_key}]" if s.weight_key else ""
            print(f"{name:48s} {kind:9s} {what}{keys}")
        except qport.Error as e:
            print(f"{name:48s} {kind:9s} {e.exception or e.status}: {e}")


if __name__ == "__main__":
    main()
