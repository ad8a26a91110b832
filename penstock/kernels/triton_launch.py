"""Launching Triton kernels, compiled on a GPU or interpreted on the CPU (``TRITON_INTERPRET=1``).

Triton's interpreter replaces triton.language's functions for the length of a launch and puts them
back after it. Two interpreted launches at once in one process (two emulated pipelines, or a
pipeline beside eager operators) see each other's replacements and fail ("Did you forget to add
@triton.jit?"), so interpreted launches take turns; compiled launches never wait.
"""
from __future__ import annotations

import os
import threading

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
_INTERPRETER_TURN = threading.Lock()


def launch(kernel, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)``, one interpreted launch at a time."""
    if not INTERPRETED:
        return kernel[grid](*args, **kwargs)
    with _INTERPRETER_TURN:
        return kernel[grid](*args, **kwargs)
