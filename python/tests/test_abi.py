"""The ctypes structs of qport._abi have the C layout: a C program built
from qport.h prints every struct's size and field offsets."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import pytest

from qport import _abi
from conftest import REPO

STRUCTS = {
    "qp_error_info": _abi.ErrorInfo, "qp_packed_module": _abi.PackedModule, "qp_arch_info": _abi.ArchInfo,
    "qp_scheme_kind_info": _abi.SchemeKindInfo,
    "qp_resolve_options": _abi.ResolveOptions, "qp_qtensor": _abi.QTensor, "qp_scheme": _abi.Scheme,
    "qp_config_summary": _abi.ConfigSummary, "qp_tensor": _abi.Tensor, "qp_device_caps": _abi.DeviceCaps,
    "qp_device_info": _abi.DeviceInfo, "qp_support_info": _abi.SupportInfo,
    "qp_backend_status": _abi.BackendStatus, "qp_linear_options": _abi.LinearOptions,
    "qp_bind_options": _abi.BindOptions, "qp_layer_binding": _abi.LayerBinding,
    "qp_moe_options": _abi.MoeOptions, "qp_moe_binding": _abi.MoeBinding,
    "qp_quantize_options": _abi.QuantizeOptions, "qp_device_import_desc": _abi.DeviceImportDesc,
    "qp_device_native": _abi.DeviceNative, "qp_buffer_import_desc": _abi.BufferImportDesc,
    "qp_buffer_native": _abi.BufferNative, "qp_enqueue_sync": _abi.EnqueueSync, "qp_device_stats": _abi.DeviceStats,
}


def test_layouts_match_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    incs = os.environ.get("QPORT_INCLUDE", os.pathsep.join([os.path.join(REPO, "api"), os.path.join(REPO, "build")]))
    dirs = incs.split(os.pathsep)
    if not cc or not any(os.path.exists(os.path.join(d, "qport_version.h")) for d in dirs):
        pytest.skip("no C compiler or no configured build tree (qport_version.h)")
    lines, want = [], []
    for cname, py in STRUCTS.items():
        lines.append(f'printf("%zu\\n", sizeof({cname}));')
        want.append(ctypes.sizeof(py))
        for field, _ in py._fields_:
            lines.append(f'printf("%zu\\n", offsetof({cname}, {field}));')
            want.append(getattr(py, field).offset)
    src = tmp_path / "abi.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <qport.h>\nint main(void) {\n"
                   + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", *[f"-I{d}" for d in dirs], str(src), "-o", str(exe)], check=True)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert got == want


def test_enum_tables_match_library():
    for i, name in enumerate(_abi.DTYPES):
        assert _abi.s(_abi.lib.qp_dtype_name(i)) == name
    for i, name in enumerate(_abi.STATUS_NAMES):
        assert _abi.s(_abi.lib.qp_status_str(i)) == name
    assert _abi.s(_abi.lib.qp_status_str(len(_abi.STATUS_NAMES))) == "QP_ERR_UNKNOWN"


def test_console_script(cli):
    """`qport` of the venv (pyproject's [project.scripts]) runs the bundled tool."""
    import sys
    r = subprocess.run([sys.executable, "-m", "qport._cli", "help", "demo-model"], capture_output=True, text=True,
                       env={**os.environ, "QPORT_CLI": cli})
    assert r.returncode == 0 and "usage: qport demo-model" in r.stdout, (r.returncode, r.stdout, r.stderr)
