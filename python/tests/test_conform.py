"""qport.conform runs the C conformance tool and returns its cases."""
from __future__ import annotations

import qport


def test_conform_cases(cli):
    cases = qport.conform(devices=["cpu"], schemes=["int8-dyn-sym", "nvfp4"])
    assert cases and {c["scheme"] for c in cases} == {"int8-dyn-sym", "nvfp4"}
    keys = {"scheme", "M", "N", "K", "dtype", "dist", "device", "path", "verdict", "max_abs", "nmse", "seed", "note"}
    assert keys <= set(cases[0])
    assert {c["verdict"] for c in cases} <= {"PASS", "SKIP"}
    assert any(c["verdict"] == "PASS" for c in cases)


def test_conform_bad_scheme(cli):
    import pytest
    with pytest.raises(RuntimeError, match="unknown scheme"):
        qport.conform(devices=["cpu"], schemes=["no-such-scheme"])
