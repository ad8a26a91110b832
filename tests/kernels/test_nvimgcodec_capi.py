"""The ctypes structures of penstock's nvImageCodec binding against nvImageCodec's own header:
every structure's size and every field's offset, as a C compiler lays them out. Needs the header
(it ships in the nvImageCodec wheel, the GPU extra) and a C compiler; skipped without them."""
import ctypes
import os
import shutil
import subprocess

import pytest

from penstock.kernels import nvimgcodec_capi as capi


def _include_dir():
    configured = os.environ.get("PENSTOCK_NVIMGCODEC_INCLUDE")
    if configured:
        return configured
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia.nvimgcodec")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "include")


def test_structures_match_the_header(tmp_path):
    include = _include_dir()
    compiler = shutil.which("cc") or shutil.which("gcc")
    if include is None or not os.path.exists(os.path.join(include, "nvimgcodec.h")) or compiler is None:
        pytest.skip("needs nvImageCodec's header (pip install 'penstock[gpu]') and a C compiler")
    # only cudaStream_t is used from the CUDA runtime's header
    (tmp_path / "cuda_runtime_api.h").write_text("typedef struct CUstream_st* cudaStream_t;\n")
    lines = []
    for name, structure in capi.STRUCTURES.items():
        lines.append(f'printf("{name} size %zu\\n", sizeof({name}));')
        for field, _ in structure._fields_:
            lines.append(f'printf("{name} {field} %zu\\n", offsetof({name}, {field}));')
    source = tmp_path / "layout.c"
    source.write_text("#include <stddef.h>\n#include <stdio.h>\n#include \"nvimgcodec.h\"\nint main(void) {\n"
                      + "\n".join(lines) + "\nreturn 0;\n}\n")
    binary = tmp_path / "layout"
    subprocess.run([compiler, f"-I{tmp_path}", f"-I{include}", str(source), "-o", str(binary)], check=True)
    printed = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.splitlines()
    expected = {}
    for name, structure in capi.STRUCTURES.items():
        expected[f"{name} size"] = ctypes.sizeof(structure)
        for field, _ in structure._fields_:
            expected[f"{name} {field}"] = getattr(structure, field).offset
    found = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in printed}
    assert found == expected
