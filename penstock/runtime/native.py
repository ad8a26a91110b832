"""penstock's small C helpers (runtime/csrc): built on first use with the machine's C compiler
(``$CC``, else ``cc``: the one Triton needs to run its GPU kernels) and kept in penstock's cache
folder, one build per source text. Where there is no compiler, the build fails, or
``PENSTOCK_NATIVE=0`` is set, ``built`` returns None and ``problem`` says why: each caller then
keeps its Python path, which does the same work with the interpreter lock."""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading

from penstock.paths import default_work_dir

SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc")
# -O3: the loops over anchors and pixels run in vector instructions (-O2 leaves most of them scalar:
# the box encoder took 3x as long); -ffp-contract=off: float arithmetic rounds as written (the warp
# matches DALI's to the bit, vectorized or not: no option here reorders a sum)
FLAGS = ("-O3", "-ffp-contract=off", "-shared", "-fPIC", "-pthread")
_built: dict[str, str | None] = {}
_problems: dict[str, str] = {}
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("PENSTOCK_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def built(name: str) -> str | None:
    """The path of the helper ``csrc/<name>.c`` built as a shared library (loadable), or None."""
    with _lock:
        if name not in _built:
            try:
                path = _build(name)
                ctypes.CDLL(path)  # a library that does not load is a problem reported here
                _built[name] = path
            except (OSError, RuntimeError, subprocess.SubprocessError) as error:
                _built[name], _problems[name] = None, str(error)
        return _built[name]


def problem(name: str) -> str | None:
    """Why ``built(name)`` gave None (None where it was built or was not asked for)."""
    return _problems.get(name)


def _compiler() -> list[str]:
    command = shlex.split(os.environ.get("CC", "")) or ["cc"]
    if shutil.which(command[0]) is None:
        raise RuntimeError(f"no C compiler ('{command[0]}' is not on PATH; set CC to one)")
    return command


def _build(name: str) -> str:
    """The path of the built library, building it where the cache has none for this source."""
    if not enabled():
        raise RuntimeError("PENSTOCK_NATIVE=0 is set")
    with open(os.path.join(SOURCES, f"{name}.c"), "rb") as file:
        source = file.read()
    key = hashlib.sha256(source + f"{sys.platform} {platform.machine()} {' '.join(FLAGS)}".encode()).hexdigest()[:16]
    folder = os.path.join(default_work_dir(), "native")
    built = os.path.join(folder, f"{name}-{key}.so")
    if os.path.exists(built):
        return built
    compiler = _compiler()
    os.makedirs(folder, exist_ok=True)
    # built under a temporary name and renamed: processes building at once each get a whole file
    handle, partial = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(handle)
    try:
        result = subprocess.run([*compiler, *FLAGS, "-o", partial,
                                 os.path.join(SOURCES, f"{name}.c")], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"building {name}.c failed: {result.stderr.strip()[-2000:]}")
        os.replace(partial, built)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return built


_functions: dict[str, object] = {}  # "library.symbol" -> the loaded function (None where it cannot be built)


def _function(name: str, symbol: str, argtypes: list):
    """csrc/<name>.c's function ``symbol``, loaded once, or None where it cannot be built."""
    key = f"{name}.{symbol}"
    if key not in _functions:
        path = built(name)
        function = None
        if path is not None:
            function = getattr(ctypes.CDLL(path), symbol)
            function.argtypes, function.restype = argtypes, None
        _functions[key] = function
    return _functions[key]


_POINTER, _INT, _FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_float


def affine_warp():
    """csrc/affine_warp.c's bilinear warp (cpu_image.affine_sample's native_warp), or None where it
    cannot be built (the numpy path then does the same float32 operations)."""
    return _function("affine_warp", "penstock_affine_linear",
                     [_POINTER, _INT, _INT, _INT, _POINTER, _INT, _INT, _POINTER, _POINTER])


def audio_resample():
    """csrc/audio_resample.c's resampling of a float32 signal (kernels.audio_resampling.resample's
    native path), or None where it cannot be built (the numpy path then filters the same taps)."""
    return _function("audio_resample", "penstock_audio_resample",
                     [_POINTER, ctypes.c_int64, _INT, _POINTER, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                      ctypes.c_double, _POINTER, _INT, _FLOAT, _FLOAT])


def box_encode():
    """csrc/box_encoder.c's matching of one sample's boxes to the anchors (box_encoder's CPU form),
    or None where it cannot be built (the numpy path then does the same float32 operations)."""
    return _function("box_encoder", "penstock_box_encode",
                     [_POINTER, _INT, _POINTER, _POINTER, _POINTER, _POINTER, _INT, _INT, _FLOAT, _INT, _FLOAT,
                      _POINTER, _POINTER, _POINTER, _POINTER, _POINTER])


def lookup_planes():
    """csrc/lookup_planes.c's table lookup of a uint8 HWC image into CHW planes, mirrored when
    asked (cpu_image.lookup_planes' native path), or None where it cannot be built (OpenCV's
    lookups then give the same values)."""
    return _function("lookup_planes", "penstock_lookup_planes",
                     [_POINTER, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _POINTER, _INT,
                      _POINTER, _INT])


def resample_axis():
    """csrc/resample.c's resampling along one axis by taps and weights, a uint8 output rounded
    (cpu_image.resample's native_axis), or None where it cannot be built (the numpy path then does
    the same float32 operations)."""
    return _function("resample", "penstock_resample_axis",
                     [_POINTER, _INT, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _POINTER, _POINTER,
                      ctypes.c_int64, ctypes.c_int64, _POINTER, _INT])


def score_windows():
    """csrc/box_crop.c's scoring of random_bbox_crop's candidate windows (BoxCropper.evaluate), or
    None where it cannot be built (the numpy path then does the same float64 operations)."""
    return _function("box_crop", "penstock_score_windows",
                     [_POINTER, _POINTER, _POINTER, _POINTER, _INT, _INT, _POINTER, _POINTER, _INT, _INT, _INT, _INT,
                      ctypes.c_double, _POINTER, _POINTER])
