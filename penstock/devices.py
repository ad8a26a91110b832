"""Where GPU work runs: whether this machine can run it, and the emulated GPU.

The GPU operators need PyTorch with a CUDA GPU and Triton; the 'mixed' decoders also need
nvImageCodec. Each check runs when first needed, not at import (they import PyTorch and load CUDA
libraries).

The emulated GPU runs the GPU operators over CPU tensors (the Triton kernels in Triton's
interpreter, which needs ``TRITON_INTERPRET=1`` before Triton is first imported; mixed decoders
decode on the CPU). It is how tests exercise the GPU path on a machine without one: switch it with
``emulate_gpu(True)`` or ``with emulated_gpu(): ...``, or start the process with
``PENSTOCK_GPU_ON_CPU=1``.
"""
from __future__ import annotations

import contextlib
import functools
import os

_emulated = os.environ.get("PENSTOCK_GPU_ON_CPU") == "1"


def emulating_gpu() -> bool:
    """Whether 'gpu' and 'mixed' operators run on the emulated GPU (CPU tensors)."""
    return _emulated


def emulate_gpu(enabled: bool) -> None:
    """Runs pipelines built from now on on the emulated GPU (or on the real one again)."""
    global _emulated
    _emulated = bool(enabled)


@contextlib.contextmanager
def emulated_gpu(enabled: bool = True):
    """``emulate_gpu`` for the pipelines built inside the block."""
    previous = _emulated
    emulate_gpu(enabled)
    try:
        yield
    finally:
        emulate_gpu(previous)


@functools.lru_cache(maxsize=None)
def _torch_and_triton_problem(need_cuda: bool) -> str | None:
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if need_cuda and not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed (pip install triton)"
    return None


def gpu_problem() -> str | None:
    """Why 'gpu' operators (and moving data to the GPU) cannot run here, or None."""
    return _torch_and_triton_problem(need_cuda=not _emulated)


@functools.lru_cache(maxsize=None)
def _decoder_library_problem() -> str | None:
    try:
        from penstock.kernels.nvimgcodec_decode import library
        library()
    except ImportError as error:
        return str(error)
    return None


def decoder_problem() -> str | None:
    """Why 'mixed' decoders cannot run here: what 'gpu' operators need, and nvImageCodec."""
    return gpu_problem() or (None if _emulated else _decoder_library_problem())


def torch_device(device_id: int | None):
    """The torch device a pipeline's GPU work goes to (the CPU when emulated)."""
    import torch
    if _emulated:
        return torch.device("cpu")
    if device_id in (None, -1):  # not given: the local rank's GPU in a distributed job, else the current one
        from penstock import distributed
        device_id = distributed.device_id()
        if device_id is None:
            device_id = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return torch.device("cuda", device_id)
