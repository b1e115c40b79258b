"""Shared fixtures of the pytest suite: the library under test, the `qport`
tool of the same build (the oracle for resolution, and the maker of demo
checkpoints), the devices, and the schemes as their exporters write them."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import qport
from qport._lib import cli_path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.environ.get("QPORT_CONFIGS") or os.path.join(REPO, "tests", "configs")


# The schemes of `qport quantize` (tools/cases.c, tools/qconfigs.h): test
# data here, spelled as each exporter writes its quantization_config.
def _t(dt, qs, sym, dyn):
    return {"dtype": dt, "qscheme": qs, "symmetric": sym, "is_dynamic": dyn}


def _mx(dt, dyn):
    return {"dtype": dt, "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0", "is_dynamic": dyn,
            "symmetric": True}


def _w4(dt, sym, g=128):
    return {"dtype": dt, "qscheme": "per_group", "group_size": g, "symmetric": sym, "is_dynamic": False}


def _quark(w, i):
    return {"quant_method": "quark", "export": {"kv_cache_group": [], "pack_method": "reorder"},
            "global_quant_config": {"weight": w, "input_tensors": i, "output_tensors": None, "bias": None},
            "layer_quant_config": {}, "layer_type_quant_config": {}, "exclude": ["lm_head"]}


_NVFP4_W = [{"dtype": "fp4", "qscheme": "per_group", "group_size": 16, "scale_format": "fp8_e4m3", "is_dynamic": False},
            {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}]
_NVFP4_A = [{"dtype": "fp4", "qscheme": "per_group", "group_size": 16, "scale_format": "fp8_e4m3", "is_dynamic": True},
            {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}]

SCHEMES = {
    "int8-dyn-sym": _quark(_t("int8", "per_channel", True, False), _t("int8", "per_channel", True, True)),
    "int8-dyn-asym": _quark(_t("int8", "per_channel", True, False), _t("int8", "per_channel", False, True)),
    "int8-static-sym": _quark(_t("int8", "per_tensor", True, False), _t("int8", "per_tensor", True, False)),
    "int8-static-asym": _quark(_t("int8", "per_tensor", True, False), _t("int8", "per_tensor", False, False)),
    "fp8-static": _quark(_t("fp8_e4m3", "per_tensor", True, False), _t("fp8_e4m3", "per_tensor", True, False)),
    "fp8-dyn-tensor": _quark(_t("fp8_e4m3", "per_tensor", True, False), _t("fp8_e4m3", "per_tensor", True, True)),
    "fp8-dyn-token": _quark(_t("fp8_e4m3", "per_channel", True, False), _t("fp8_e4m3", "per_channel", True, True)),
    "fp8-block": _quark({"dtype": "fp8_e4m3", "qscheme": "per_block", "block_size": [128, 128], "is_dynamic": False,
                         "symmetric": True},
                        {"dtype": "fp8_e4m3", "qscheme": "per_group", "group_size": 128, "is_dynamic": True,
                         "symmetric": True}),
    "w4a16-int4": _quark(_w4("int4", True), None),
    "w4a16-uint4": _quark(_w4("uint4", False), None),
    "mxfp4": _quark(_mx("fp4", False), None),
    "mxfp4-a-mxfp4": _quark(_mx("fp4", False), _mx("fp4", True)),
    "mxfp6-e3m2": _quark(_mx("fp6_e3m2", False), _mx("fp6_e3m2", True)),
    "mxfp6-e2m3": _quark(_mx("fp6_e2m3", False), _mx("fp6_e2m3", True)),
    "w4a8-mxfp4-fp8": _quark(_mx("fp4", False), _t("fp8_e4m3", "per_tensor", True, False)),
    "nvfp4": _quark(_NVFP4_W, _NVFP4_A),
    "qqq": {"quant_method": "qqq", "wbits": 4, "group_size": 128},
    "qqq-channel": {"quant_method": "qqq", "wbits": 4, "group_size": -1},
    "hf-fp8": {"quant_method": "fp8", "activation_scheme": "dynamic", "ignored_layers": ["lm_head"]},
    "hf-fp8-static": {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]},
}
# integer arithmetic: every device must equal the reference bit for bit
EXACT = {"int8-dyn-sym", "int8-dyn-asym", "int8-static-sym", "int8-static-asym", "qqq", "qqq-channel"}

LAYER = "model.layers.0.mlp.down_proj"


def scheme(name: str) -> qport.Scheme:
    return qport.load_config(SCHEMES[name]).resolve(LAYER)


def weights(N: int, K: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=(N, K)) / np.sqrt(K)).astype(np.float32)


def acts(M: int, K: int, dtype=np.float16, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, size=(M, K)).astype(dtype)


@pytest.fixture(scope="session")
def cli() -> str:
    path = cli_path()
    if path is None:
        pytest.skip("the qport tool is not available (QPORT_CLI)")
    return path


@pytest.fixture(scope="session")
def devices() -> list:
    return qport.devices()


def run_cli(cli: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def demo_fp16(cli, tmp_path_factory) -> str:
    """A tiny Llama-style fp16 model (hidden 128, MLP 256, one layer)."""
    d = str(tmp_path_factory.mktemp("demo") / "fp16")
    r = run_cli(cli, "demo-model", d, "--hidden", "128", "--intermediate", "256", "--layers", "1")
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="session")
def demo_int8(cli, demo_fp16) -> str:
    """demo_fp16 quantized to int8-dyn-sym with an fp8 KV cache, as Quark exports it."""
    d = demo_fp16 + "-int8"
    r = run_cli(cli, "quantize", demo_fp16, d, "--scheme", "int8-dyn-sym", "--kv-cache")
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="session")
def demo_moe(cli, tmp_path_factory) -> str:
    """A tiny MoE model (4 experts, top 2, Qwen3-MoE layout), fp16."""
    d = str(tmp_path_factory.mktemp("demo") / "moe")
    r = run_cli(cli, "demo-model", d, "--hidden", "64", "--intermediate", "64", "--layers", "1",
                "--experts", "4", "--topk", "2")
    assert r.returncode == 0, r.stderr
    return d
