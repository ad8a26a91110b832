"""nvImageCodec's library, loaded once per process, and whether 'mixed' decoders can run here.

Importing this module loads nothing: the operators name ``decoder_problem`` when they register."""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import threading

from penstock import devices
from penstock.kernels import nvimgcodec_capi as capi

INSTALL_HINT = ("device='mixed' decoding needs a CUDA GPU, PyTorch with CUDA and nvImageCodec: "
                "pip install 'penstock[gpu]' (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg)")
_library: capi.Library | None = None
_library_lock = threading.Lock()


def library() -> capi.Library:
    """nvImageCodec's library, loaded once; ImportError with what to install when it cannot be."""
    global _library
    with _library_lock:
        if _library is None:
            try:
                directory = capi.wheel_folder()
                _library = capi.Library(directory, _jpeg_extensions(os.path.join(directory, "extensions")))
            except (ImportError, OSError) as error:
                raise ImportError(f"{INSTALL_HINT} ({error})") from None
        return _library


def _jpeg_extensions(folder: str) -> str:
    """A folder with only the extensions penstock decodes with (capi.jpeg_extension_names), made
    once per process and removed at exit; without an nvJPEG extension, the whole folder."""
    names = capi.jpeg_extension_names(folder)
    if not names:
        return folder
    chosen = tempfile.mkdtemp(prefix="penstock-nvimgcodec-")
    atexit.register(shutil.rmtree, chosen, ignore_errors=True)
    for name in names:
        os.symlink(os.path.join(folder, name), os.path.join(chosen, name))
    return chosen


@functools.lru_cache(maxsize=None)
def _library_problem() -> str | None:
    try:
        library()
    except ImportError as error:
        return str(error)
    return None


def decoder_problem() -> str | None:
    """Why 'mixed' decoders cannot run here: what 'gpu' operators need, and nvImageCodec."""
    return devices.gpu_problem() or (None if devices.emulating_gpu() else _library_problem())
