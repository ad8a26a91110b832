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
import importlib.util
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
    # found, not imported: Triton is imported beside the GPU stage's start (warm_up_triton), not
    # while the user's pipeline is being defined
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed (pip install triton)"
    return None


def warm_up_triton(device) -> None:
    """Does ahead what the first Triton kernel launch of a process does before it can look in the
    kernel cache: imports Triton's language and compiler, hashes Triton itself (the cache key: it
    reads its whole library) and loads its CUDA helpers, about half a second. A GPU pipeline has
    it done on a thread of its own while its decoders are made and its first batch decoded.
    Nothing is raised here: what fails fails again at the launch, which reports it."""
    try:
        import torch
        import triton.language  # noqa: F401
        from triton.compiler.compiler import make_backend
        from triton.runtime import driver
        from triton.runtime.cache import triton_key
        torch.cuda.set_device(device)  # Triton's helpers ask for the current device
        triton_key()
        make_backend(driver.active.get_current_target())
    except Exception:
        pass


def gpu_problem() -> str | None:
    """Why 'gpu' operators (and moving data to the GPU) cannot run here, or None."""
    return _torch_and_triton_problem(need_cuda=not _emulated)


def torch_device(device_id: int | None):
    """The torch device a pipeline's GPU work goes to (the CPU when emulated): GPU ``device_id``,
    or the current one where it is None or -1 (a distributed job's pipeline is given its local
    rank's: distributed.gpu_of)."""
    import torch
    if _emulated:
        return torch.device("cpu")
    if device_id in (None, -1):
        device_id = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return torch.device("cuda", device_id)


def gpu_interrupt_cpus(table_path: str = "/proc/interrupts", irq_folder: str = "/proc/irq") -> set[int]:
    """The CPUs that service the NVIDIA driver's interrupts (Linux; an empty set where unknown):
    those its interrupts are routed to now (``effective_affinity_list``), else those that serviced
    them so far. Only interrupts that have fired count: the driver leaves most of its vectors unused."""
    try:
        with open(table_path) as table:
            lines = table.read().splitlines()
    except OSError:
        return set()
    if not lines:
        return set()
    columns = [int(name[3:]) for name in lines[0].split() if name.startswith("CPU") and name[3:].isdigit()]
    cpus: set[int] = set()
    for line in lines[1:]:
        fields = line.split()
        if len(fields) <= len(columns) or not fields[0].endswith(":") or "nvidia" not in line.lower():
            continue
        counts = fields[1:1 + len(columns)]
        if not all(count.isdigit() for count in counts) or not any(int(count) for count in counts):
            continue
        routed = _cpu_list(os.path.join(irq_folder, fields[0][:-1], "effective_affinity_list"))
        cpus |= routed or {cpu for cpu, count in zip(columns, counts) if int(count)}
    return cpus


def _cpu_list(path: str) -> set[int]:
    """A kernel CPU list file ('0-3,8'), or an empty set."""
    try:
        with open(path) as listed:
            text = listed.read().strip()
    except OSError:
        return set()
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return set()
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def cpus_off_gpu_interrupts() -> set[int] | None:
    """The CPUs the calling thread may run on less those that service the GPU's interrupts, where
    enough others are allowed; None where nothing is to change. For the threads that wait in GPU
    decode calls: nvJPEG's hardware decode took 8.3-8.4 ms a batch of 256 JPEGs on most CPUs of an
    H200 machine but 11.6-15.0 on the one its interrupts go to, and processes whose calling thread
    stayed there made every call that slowly (BENCHMARKS.md)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    away = allowed - gpu_interrupt_cpus()
    return away if away != allowed and len(away) >= max(1, len(allowed) // 2) else None


def keep_thread_off_gpu_interrupts() -> None:
    """Moves the calling thread off the CPUs that service the GPU's interrupts (cpus_off_gpu_interrupts)."""
    away = cpus_off_gpu_interrupts()
    if away is not None:
        os.sched_setaffinity(0, away)
