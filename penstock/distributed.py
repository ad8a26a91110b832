"""Where a pipeline stands among the processes of a distributed job (torch.distributed, torchrun).

When a reader is given no ``shard_id``/``num_shards`` and the process belongs to a distributed job,
it reads the shard of this process's rank among the job's world size (penstock.sharding); and a
pipeline whose ``device_id`` is left at -1 uses the GPU of the process's local rank. A pipeline
reads these once, when it is built, and hands them to its operators (contract.BuildContext).
Explicit arguments always win; ``PENSTOCK_AUTO_SHARD=0`` in the environment turns the defaults off
(every process then reads the whole data set, as without a distributed job).

A job is recognised by an initialized torch.distributed process group (its rank and world size),
or else by the environment torchrun and other launchers set (RANK, WORLD_SIZE, LOCAL_RANK).
PyTorch is not imported for this: a process that has not imported it has no process group.
"""
from __future__ import annotations

import os
import sys

from penstock.sharding import Place


def auto_shard_enabled() -> bool:
    return os.environ.get("PENSTOCK_AUTO_SHARD", "1").strip().lower() not in ("0", "false", "no", "off")


def place() -> Place | None:
    """This process's rank, the job's world size and the local rank, or None outside a
    distributed job of more than one process (or with the defaults turned off)."""
    if not auto_shard_enabled():
        return None
    local_rank = _int_env("LOCAL_RANK")
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        rank, world_size = distributed.get_rank(), distributed.get_world_size()
    else:
        rank, world_size = _int_env("RANK"), _int_env("WORLD_SIZE")
        if rank is None or world_size is None:
            return None
    if world_size <= 1:
        return None
    return Place(rank, world_size, local_rank)


def default_threads() -> int:
    """A pipeline's CPU threads when it is given none: this machine's cores, divided among the
    processes of a distributed job that run on it (torchrun's LOCAL_WORLD_SIZE), so that one
    pipeline per GPU does not start as many workers as there are cores in every process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    local = _int_env("LOCAL_WORLD_SIZE") if auto_shard_enabled() else None
    return max(1, cores // max(1, local or 1))


def device_id() -> int | None:
    """The GPU of this process in a distributed job (its local rank), or None."""
    job = place()
    return None if job is None else job.local_rank


def gpu_of(given: int | None) -> int | None:
    """A pipeline's GPU: the ``device_id`` given, else (None or -1) this process's local rank in a
    distributed job, else None (the current GPU)."""
    return given if given not in (None, -1) else device_id()


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
