"""qport.arch / Config.arch / Model.arch: the architecture table as vLLM's
model classes build the models, through the binding (the C table's own
tests are tests/test_arch.c; here: the facts arrive intact in Python)."""
from __future__ import annotations

import json
import os

import pytest

import qport
from conftest import REPO

CONFIGS = os.path.join(REPO, "tests", "configs")


def test_table_lists_the_architectures_people_deploy():
    t = qport.architectures()
    for cls, mt in [("LlamaForCausalLM", "llama"), ("MixtralForCausalLM", "mixtral"),
                    ("Qwen2MoeForCausalLM", "qwen2_moe"), ("Qwen3MoeForCausalLM", "qwen3_moe"),
                    ("DeepseekV3ForCausalLM", "deepseek_v3"), ("DeepseekV3ForCausalLM", "kimi_k2")]:
        assert mt in t[cls], (cls, t.get(cls))
    # a lookup by model_type alone finds the same row
    assert qport.arch(model_type="kimi_k2").name == "DeepseekV3ForCausalLM"


def test_deepseek_v3_config():
    a = qport.load_config(os.path.join(CONFIGS, "deepseek-v3-fp8-config.json")).arch
    assert a.known and a.name == "DeepseekV3ForCausalLM"
    # q_lora_rank set: the class packs q_a_proj and kv_a_proj_with_mqa
    assert a.packed["fused_qkv_a_proj"] == ["q_a_proj", "kv_a_proj_with_mqa"]
    assert a.packed["gate_up_proj"] == ["gate_proj", "up_proj"] and "qkv_proj" not in a.packed
    assert (a.moe_block, a.experts, a.router, a.shared_experts) == ("mlp", "experts", "gate", "shared_experts")
    assert a.grouped_topk and a.correction_bias and not a.router_quantized
    assert (a.num_experts_key, a.num_experts, a.moe_intermediate_size) == ("n_routed_experts", 8, 32)
    # first_k_dense_replace 1, moe_layer_freq 1: layer 0 dense, the others MoE
    assert (a.first_k_dense_replace, a.moe_layer_freq) == (1, 1)
    assert [a.layer_is_moe(i) for i in range(3)] == [False, True, True]
    assert a.module_class("model.layers.1.mlp.gate") == "linear_unquantized"
    assert a.module_class("model.layers.0.mlp.gate") == "linear"  # a dense layer has no router
    assert a.module_class("model.layers.1.mlp.experts") == "routed_experts"
    assert a.module_class("lm_head") == "lm_head" and a.module_class("model.embed_tokens") == "embedding"


def test_what_each_method_quantizes():
    llama = qport.arch("LlamaForCausalLM")
    for method in ("quark", "qqq", "fp8"):
        assert llama.quantizes("model.layers.0.mlp.down_proj", method)
        assert not llama.quantizes("lm_head", method)  # ParallelLMHead is no LinearBase
    mixtral = qport.arch("MixtralForCausalLM")
    experts = "model.layers.0.block_sparse_moe.experts"
    assert mixtral.quantizes(experts, "quark") and mixtral.quantizes(experts, "fp8")
    assert not mixtral.quantizes(experts, "qqq")  # vLLM 0.8.5's QQQConfig: LinearBase only
    assert not mixtral.quantizes("model.layers.0.block_sparse_moe.gate", "quark")
    # Qwen3-MoE's router: GateLinear with the quant config in 0.34.0 (Quark),
    # ReplicatedLinear(quant_config=None) in 0.8.5 (QQQ)
    q3 = qport.arch("Qwen3MoeForCausalLM")
    assert q3.module_class("model.layers.0.mlp.gate", "quark") == "linear"
    assert q3.module_class("model.layers.0.mlp.gate", "qqq") == "linear_unquantized"
    assert q3.module_class("model.layers.0.mlp.shared_expert_gate") == "linear_unquantized"
    with pytest.raises(ValueError, match="method 'gptq'"):
        llama.quantizes("lm_head", "gptq")


def test_unknown_architecture_falls_back_with_a_note(tmp_path):
    a = qport.arch("FooForCausalLM")
    assert not a.known and a.name == "FooForCausalLM" and "Llama rules" in a.note
    # the Llama rules: an MoE block under mlp / block_sparse_moe / feed_forward
    assert a.module_class("model.layers.0.mlp.gate") == "linear_unquantized"
    assert a.module_class("model.layers.0.self_attn.q_proj") == "linear"
    b = qport.arch()
    assert not b.known and b.name is None and b.note
    # a bare quantization_config has no architecture
    whole = json.load(open(os.path.join(CONFIGS, "deepseek-v3-fp8-config.json")))
    bare = tmp_path / "quantization_config.json"
    bare.write_text(json.dumps(whole["quantization_config"]))
    c = qport.load_config(str(bare)).arch
    assert not c.known and c.packed == {}


def test_model_arch(demo_moe):
    m = qport.Model(demo_moe)
    a = m.arch
    assert a.known and a.moe_block is not None, a
    # an unquantized model too (the demo MoE has no quantization_config)
    assert m.config is None or (m.config.arch.name, m.config.arch.packed) == (a.name, a.packed)
    blocks = m.moe_blocks
    assert blocks
    m.close()
    # the facts and the calls outlive the model they came from
    for blk in blocks:
        assert a.module_class(blk) == "routed_experts", blk
    assert a.module_class(blocks[0].rsplit(".", 1)[0] + "." + a.router) == (
        "linear" if a.router_quantized else "linear_unquantized")
