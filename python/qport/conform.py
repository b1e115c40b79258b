"""`qport conform` from Python: every scheme on every device against the
cpu reference. The cases, shapes and bounds live in the C tool
(tools/cases.c, docs/conformance.md); this runs that tool and returns its
JSON, so there is one implementation of the checks."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from typing import Any, Sequence

from ._lib import cli_path


def conform(devices: Sequence[str] | str | None = None, schemes: Sequence[str] | str | None = None, *,
            full: bool = False, seed: int | None = None, timeout: float | None = None) -> list[dict[str, Any]]:
    """Runs `qport conform` and returns every case as a dict with the keys
    scheme, M, N, K, dtype, dist, device, path, verdict ("PASS", "FAIL",
    "SKIP"), max_abs, max_rel, nmse, mismatches, seed and note.
    devices / schemes: specs and names as `qport conform --device/--scheme`
    take them (None: all). A failing case is a verdict, not an exception.

    >>> cases = qport.conform(devices=["vulkan"], schemes=["int8-dyn-sym"])
    >>> {c["verdict"] for c in cases}
    {'PASS'}
    """
    exe = cli_path()
    if exe is None:
        raise FileNotFoundError("qport.conform: the `qport` tool is not installed with this package "
                                "(QPORT_CLI names one)")
    args = [exe, "conform", "--full" if full else "--quick"]
    for d in [devices] if isinstance(devices, str) else devices or []:
        args += ["--device", str(d)]
    for s in [schemes] if isinstance(schemes, str) else schemes or []:
        args += ["--scheme", str(s)]
    if seed is not None:
        args += ["--seed", str(int(seed))]
    with tempfile.TemporaryDirectory(prefix="qport-conform-") as tmp:
        path = os.path.join(tmp, "cases.json")
        r = subprocess.run(args + ["--json", path], capture_output=True, text=True, timeout=timeout)
        # exit 1: some case failed (the verdicts say which); 2: bad usage
        if r.returncode not in (0, 1) or not os.path.exists(path):
            raise RuntimeError(f"qport conform failed ({r.returncode}): {(r.stderr or r.stdout).strip()}")
        with open(path) as f:
            return json.load(f)
