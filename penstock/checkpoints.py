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
import os

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


LARGEST = 2**63 - 1  # counts and seeds past this are not ones a pipeline makes (numpy takes 64 bits)
TOP_FIELDS = ("format", "graph", "seed", "iteration", "sources", "iterator")
ITERATOR_FIELDS = ("steps", "delivered", "epoch_done")
EPOCHS_KEPT = 2  # a reader's "ends" hold the current epoch and at most this many before it


class Checkpoint:
    """A checkpoint's content, checked: ``where`` names it in errors ("checkpoint" or
    "checkpoint '<file>'"), ``sources`` maps each source's key to its state."""

    def __init__(self, where: str, seed: int, iteration: int, sources: dict, iterator: dict | None):
        self.where, self.seed, self.iteration, self.sources, self.iterator = where, seed, iteration, sources, iterator

    def error(self, field: str, expected: str, value) -> ValueError:
        return field_error(self.where, field, expected, value)


def field_error(where: str, field: str, expected: str, value) -> ValueError:
    shown = repr(value)
    return ValueError(f"{where}: field '{field}' must be {expected}, got "
                      f"{shown if len(shown) <= 60 else shown[:57] + '...'}")


def _count(value, most: int = LARGEST) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most


def load(checkpoint, graph: str) -> Checkpoint:
    """The checkpoint (what ``dump`` gave, as str or bytes, or a path to a file holding it) after
    checking that it is one, was made by this pipeline, and that every field has its type and
    range; errors are ValueErrors naming the checkpoint (its file, when read from one) and the field."""
    if isinstance(checkpoint, Checkpoint):  # loaded by an earlier build of the same pipeline
        return checkpoint
    where = "checkpoint"
    if isinstance(checkpoint, os.PathLike):
        where = f"checkpoint '{os.fspath(checkpoint)}'"
        with open(checkpoint, "rb") as handle:
            checkpoint = handle.read()
    content = _parsed(checkpoint, where)
    missing = [name for name in TOP_FIELDS if name not in content]
    if content.get("format") != FORMAT:
        raise ValueError(f"{where}: not a penstock checkpoint (give what pipe.checkpoint() returned): field "
                         f"'format' is {content.get('format')!r}, not {FORMAT!r}")
    if missing:
        raise ValueError(f"{where}: field '{missing[0]}' is missing")
    unknown = sorted(set(content) - set(TOP_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field '{unknown[0]}' (a checkpoint has {', '.join(TOP_FIELDS)})")
    if content["graph"] != graph:
        if not isinstance(content["graph"], str):
            raise field_error(where, "graph", "a string (the pipeline's fingerprint)", content["graph"])
        raise ValueError(f"{where}: it was made by a different pipeline (other operators, arguments or batch "
                         "size); restore it into a pipeline of the same definition")
    if not _count(content["seed"], 2**64 - 1):
        raise field_error(where, "seed", "an int from 0 to 2**64-1", content["seed"])
    if not _count(content["iteration"]):
        raise field_error(where, "iteration", "an int from 0 to 2**63-1", content["iteration"])
    sources = content["sources"]
    if not isinstance(sources, dict) or not all(key.isdigit() and len(key) < 10 for key in sources):
        raise field_error(where, "sources", "an object of source states by operator number", sources)
    return Checkpoint(where, content["seed"], content["iteration"], {int(key): state for key, state in sources.items()},
                      _iterator_state(where, content["iterator"]))


def _parsed(checkpoint, where: str) -> dict:
    if isinstance(checkpoint, (bytes, bytearray)):
        try:
            checkpoint = bytes(checkpoint).decode()
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not a penstock checkpoint (not UTF-8 text; give what pipe.checkpoint() "
                             "returned)") from None
    if not isinstance(checkpoint, str):
        raise TypeError(f"{where}: give what pipe.checkpoint() returned (a str, or bytes read from its file), "
                        f"got {type(checkpoint).__name__}")
    try:
        content = json.loads(checkpoint)
    except (json.JSONDecodeError, RecursionError) as error:
        reason = f"not JSON: {error}" if isinstance(error, json.JSONDecodeError) else "nested too deep"
        raise ValueError(f"{where}: not a penstock checkpoint ({reason}; give what pipe.checkpoint() "
                         "returned)") from None
    if not isinstance(content, dict):
        raise ValueError(f"{where}: not a penstock checkpoint (a JSON {type(content).__name__}, not an object; give "
                         "what pipe.checkpoint() returned)")
    return content


def _iterator_state(where: str, state) -> dict | None:
    """An iterator's place in its epoch (penstock.plugin.pytorch), None when no iterator took it."""
    if state is None:
        return None
    if not isinstance(state, dict):
        raise field_error(where, "iterator", "an object or null", state)
    for name in ITERATOR_FIELDS:
        if name not in state:
            raise ValueError(f"{where}: field 'iterator.{name}' is missing")
    unknown = sorted(set(state) - set(ITERATOR_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field 'iterator.{unknown[0]}'")
    if not _count(state["steps"]):
        raise field_error(where, "iterator.steps", "an int from 0 to 2**63-1", state["steps"])
    delivered = state["delivered"]
    if not isinstance(delivered, list) or not all(_count(count) for count in delivered):
        raise field_error(where, "iterator.delivered", "a list of sample counts (ints >= 0)", delivered)
    if not isinstance(state["epoch_done"], bool):
        raise field_error(where, "iterator.epoch_done", "true or false", state["epoch_done"])
    return state


def restore_sources(checkpoint: Checkpoint, sources: list) -> None:
    """Checks each source's state in ``checkpoint`` against what the source keeps (the fields of
    its ``state()``, and for a reader the ranges its epochs allow), then restores it."""
    keys = {key for key, _, _ in sources}
    extra = sorted(set(checkpoint.sources) - keys)
    if extra:
        raise ValueError(f"{checkpoint.where}: field 'sources.{extra[0]}' names no source of this pipeline")
    for key, source, _ in sources:
        field = f"sources.{key}"
        if key not in checkpoint.sources:
            raise ValueError(f"{checkpoint.where}: field '{field}' is missing")
        state, template = checkpoint.sources[key], source.state()
        if template is None:
            if state is not None:
                raise checkpoint.error(field, f"null ({source.name} keeps no state)", state)
            continue
        _check_like(checkpoint, field, state, template)
        if source.lends_samples:
            _check_reader_state(checkpoint, field, state, source)
        source.restore(state)


def _check_like(checkpoint: Checkpoint, field: str, state, template: dict) -> None:
    """``state`` has ``template``'s fields: counts where it has ints, objects where it has objects."""
    if not isinstance(state, dict):
        raise checkpoint.error(field, "an object", state)
    for name, expected in template.items():
        if name not in state:
            raise ValueError(f"{checkpoint.where}: field '{field}.{name}' is missing")
        value = state[name]
        if isinstance(expected, dict) and not isinstance(value, dict):
            raise checkpoint.error(f"{field}.{name}", "an object", value)
        if isinstance(expected, int) and not _count(value):
            raise checkpoint.error(f"{field}.{name}", "an int from 0 to 2**63-1", value)
    unknown = sorted(set(state) - set(template))
    if unknown:
        raise ValueError(f"{checkpoint.where}: unknown field '{field}.{unknown[0]}'")


def _check_reader_state(checkpoint: Checkpoint, field: str, state: dict, reader) -> None:
    """A reader's place: a batch of its epoch, and the samples still in the epochs it lent from."""
    meta = reader.reader_meta()
    batches = meta["batches_per_epoch"]
    if "batch_in_epoch" in state and state["batch_in_epoch"] >= batches:
        raise checkpoint.error(f"{field}.batch_in_epoch", f"less than the epoch's {batches} batches",
                               state["batch_in_epoch"])
    epoch = state.get("epoch", 0)
    largest_shard = -(-meta["epoch_size"] // meta["number_of_shards"])
    for name, end in state.get("ends", {}).items():
        if not (name.isdigit() and epoch - EPOCHS_KEPT <= int(name) <= epoch):
            raise checkpoint.error(f"{field}.ends", f"keyed by the epochs {max(0, epoch - EPOCHS_KEPT)} to {epoch}",
                                   name)
        if not _count(end, largest_shard):
            raise checkpoint.error(f"{field}.ends.{name}", f"a sample count from 0 to {largest_shard}", end)
