"""Which shard of a data set a reader reads: the one it is given, else its process's in a
distributed job (penstock.distributed finds the job when the pipeline is built)."""
from __future__ import annotations

from typing import NamedTuple


class Place(NamedTuple):
    """Where a process stands in a distributed job."""

    rank: int
    world_size: int
    local_rank: int | None


def shard(shard_id: int | None, num_shards: int | None, name: str, job: Place | None) -> tuple[int, int]:
    """(shard_id, num_shards) of reader ``name``: those given, else the process's rank and the
    job's world size in distributed job ``job``, else (0, 1)."""
    if shard_id is not None and num_shards is not None:
        return shard_id, num_shards
    if job is None:
        return shard_id or 0, num_shards or 1
    if num_shards is not None and num_shards != job.world_size or shard_id is not None and num_shards is None:
        raise ValueError(f"{name}: give both shard_id and num_shards, or neither (this process is rank "
                         f"{job.rank} of {job.world_size}, which they default to)")
    return job.rank, job.world_size
