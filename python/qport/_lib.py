"""Finding libqport and the `qport` tool.

An installed package (pip / a wheel, built by meson-python with
-Dpython_wheel=true) holds libqport.so, the backend plugins and the `qport`
tool in this folder. libqport's registry looks for plugins beside the file
that holds its code (api/registry.c, dladdr), so they are found without any
environment variable. From a source tree (PYTHONPATH=python) the library of
the build folder is used: QPORT_LIBRARY names it (the meson test sets it),
else <repo>/build; there the registry finds the plugins in build/vk, cl/,
cuda/ beside build/libqport.so.
"""
from __future__ import annotations

import ctypes
import glob
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCE_BUILD = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build")


def library_candidates() -> list[str]:
    env = os.environ.get("QPORT_LIBRARY")
    if env:
        return [env]
    found = []
    for d in (_HERE, _SOURCE_BUILD):
        # a wheel may hold only the versioned file (no symlinks in wheels)
        found += sorted(glob.glob(os.path.join(d, "libqport.so*")), key=len)
    return found


def load_library() -> ctypes.CDLL:
    tried = library_candidates()
    errors = []
    for path in tried:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("qport: libqport.so not found or not loadable "
                      f"(looked in {_HERE} and {_SOURCE_BUILD}; QPORT_LIBRARY names another): "
                      + ("; ".join(errors) if errors else "no candidates"))


def cli_path() -> str | None:
    """The `qport` executable: QPORT_CLI, this package's copy, or the one of
    the build tree that holds the loaded library (build/tools/qport)."""
    env = os.environ.get("QPORT_CLI")
    if env:
        return env
    cands = [os.path.join(_HERE, "qport")]
    lib = os.environ.get("QPORT_LIBRARY")
    if lib:
        cands.append(os.path.join(os.path.dirname(os.path.abspath(lib)), "tools", "qport"))
    cands.append(os.path.join(_SOURCE_BUILD, "tools", "qport"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None
