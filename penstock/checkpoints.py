"""Checkpoints of a pipeline (``enable_checkpointing=True``, ``pipe.checkpoint()``,
``Pipeline(checkpoint=...)``), as in DALI: a string that a new pipeline of the same definition
resumes from, giving exactly the batches the old one would have given next.

A pipeline's random choices depend only on (seed, operator, iteration), so a checkpoint holds the
seed, the next iteration and what each source needs to go on from there (a reader's epoch and
position in it, a source callable's epoch and iteration): a few hundred bytes of JSON. It
describes the state after the last batch the caller received; batches prepared ahead of it are
prepared again after a restore.
"""
from __future__ import annotations

import enum
import hashlib
import json

FORMAT = "penstock checkpoint 1"


def fingerprint(nodes, batch_size: int) -> str:
    """A digest of what a checkpoint must be restored into: the operators in graph order, their
    devices and plain arguments, and the batch size (the seed is the checkpoint's own)."""
    description = [batch_size]
    for node in nodes:
        arguments = sorted((name, _plain(value)) for name, value in node.static_args.items() if name != "seed")
        description.append((node.schema.name, node.device, arguments))
    return hashlib.sha256(repr(description).encode()).hexdigest()[:16]


def _plain(value):
    """A value's stable description: callables and other objects by their type only (their repr
    holds addresses that differ between runs)."""
    if isinstance(value, enum.Enum):
        return value.name
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(_plain(item) for item in value)
    return type(value).__name__


def dump(seed: int, iteration: int, graph: str, sources: dict, iterator: dict | None = None) -> str:
    """The checkpoint string; ``iterator``: the state of the iterator that took it (its steps in
    the epoch), which an iterator over the restored pipeline takes up."""
    return json.dumps({"format": FORMAT, "graph": graph, "seed": seed, "iteration": iteration,
                       "sources": {str(key): state for key, state in sources.items()}, "iterator": iterator},
                      sort_keys=True)


def load(checkpoint, graph: str) -> dict:
    """The checkpoint's content, after checking that it is one and was made by this pipeline."""
    if isinstance(checkpoint, (bytes, bytearray)):
        checkpoint = checkpoint.decode()
    try:
        content = json.loads(checkpoint) if isinstance(checkpoint, str) else checkpoint
    except json.JSONDecodeError:
        content = None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ValueError("checkpoint: not a penstock checkpoint (give what pipe.checkpoint() returned)")
    if content["graph"] != graph:
        raise ValueError("checkpoint: it was made by a different pipeline (other operators, arguments or batch "
                         "size); restore it into a pipeline of the same definition")
    content["sources"] = {int(key): state for key, state in content["sources"].items()}
    return content
