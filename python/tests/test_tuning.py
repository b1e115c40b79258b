"""The plugins' per-device tuning tables (vk/vk_tuning.c, cl/cl_tuning.c)
and their knobs: QPORT_VK_GEMV_WG sets the Vulkan GEMV work-group size,
QPORT_VK_GEMV_MAX_M / QPORT_CL_GEMV_MAX_M the largest M the GEMV path
takes, as a layer's description shows; a value outside a knob's list is
refused. Each case runs in a fresh process (the settings are read when the
library loads)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import qport

SNIPPET = r"""
import sys
sys.path[:0] = sys.argv[1:3]
import qport
from conftest import scheme, weights
s = scheme("int8-dyn-sym")
t = qport.quantize_weights(weights(64, 256), s)
d = [d for d in qport.devices() if d.backend == sys.argv[3]][0]
l = qport.Linear(d, s, t)
print(l.describe(1) + "|" + l.describe(2) + "|" + l.describe(16))
"""


def _describe(backend: str = "vulkan", **env: str) -> subprocess.CompletedProcess:
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.path.dirname(here)
    return subprocess.run([sys.executable, "-c", SNIPPET, pkg, here, backend], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


@pytest.fixture(scope="module")
def vulkan():
    if not any(d.backend == "vulkan" for d in qport.devices()):
        pytest.skip("no Vulkan device in this build / environment")


def test_default_row(vulkan):
    r = _describe()
    assert r.returncode == 0, r.stderr
    one, two, sixteen = r.stdout.strip().split("|")
    assert one.startswith("gemv") and two.startswith("gemv") and sixteen.startswith("gemv"), r.stdout


def test_knobs(vulkan):
    r = _describe(QPORT_VK_GEMV_WG="32", QPORT_VK_GEMV_MAX_M="1")
    assert r.returncode == 0, r.stderr
    one, two, _ = r.stdout.strip().split("|")
    assert one.startswith("gemv") and "wg32" in one, one
    assert two.startswith("tiled"), two


def test_bad_knob(vulkan):
    r = _describe(QPORT_VK_GEMV_WG="7")
    assert r.returncode != 0 and "QPORT_VK_GEMV_WG: invalid value '7': one of 16|32|64|128|256" in r.stderr


def test_opencl_knob():
    if not any(d.backend == "opencl" for d in qport.devices()):
        pytest.skip("no OpenCL device in this build / environment")
    r = _describe("opencl")
    assert r.returncode == 0, r.stderr
    assert all(p.startswith("gemv") for p in r.stdout.strip().split("|")), r.stdout
    r = _describe("opencl", QPORT_CL_GEMV_MAX_M="1")
    assert r.returncode == 0, r.stderr
    one, two, _ = r.stdout.strip().split("|")
    assert one.startswith("gemv") and not two.startswith("gemv"), r.stdout
