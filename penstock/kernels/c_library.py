"""Loading a C library whose functions return a status (the codec bindings, the built C code)."""
from __future__ import annotations

import ctypes
from ctypes import c_int


def load_twice(path: str, signatures: dict) -> tuple:
    """(quick, slow): a C library whose functions return a status, loaded as PyDLL, whose calls keep
    the interpreter lock (each release costs the caller a wait for the lock when the call returns),
    and as CDLL, whose calls release it (for calls that work for milliseconds)."""
    quick, slow = ctypes.PyDLL(path), ctypes.CDLL(path)
    for handle in (quick, slow):
        for name, arguments in signatures.items():
            function = getattr(handle, name)
            function.argtypes, function.restype = arguments, c_int
    return quick, slow
