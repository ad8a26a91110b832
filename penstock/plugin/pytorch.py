"""PyTorch iterators: batches of one or more pipelines as ``[{name: torch.Tensor}]`` per step,
exactly one epoch per pass, without copying dense CPU batches."""
from __future__ import annotations

import enum
from typing import Sequence

import torch

from penstock.batch import Batch, GpuBatch
from penstock.pipeline import Pipeline


class LastBatchPolicy(enum.Enum):
    """What happens to an epoch's short last batch.

    FILL: return it full (the reader's padding included); DROP: skip it; PARTIAL: return only the
    epoch's real samples.
    """

    FILL = "fill"
    DROP = "drop"
    PARTIAL = "partial"


RAGGED_FORMS = ("list", "pad")


def to_torch(batch: Batch | GpuBatch, ragged: str = "list", fill_value=0):
    """A batch as a tensor sharing its memory (CPU numpy via from_numpy, GPU via DLPack). A batch
    whose samples differ in shape is a list of per-sample tensors (``ragged="list"``), or one
    tensor padded to the largest shape with ``fill_value`` (``ragged="pad"``)."""
    if batch.is_dense_tensor():
        if isinstance(batch, GpuBatch):
            return torch.from_dlpack(batch)
        return _from_numpy(batch.as_array())
    samples = [sample if isinstance(sample, torch.Tensor) else _from_numpy(sample) for sample in batch]
    if ragged == "list":
        return samples
    ranks = {sample.dim() for sample in samples}
    if len(ranks) > 1:
        raise ValueError(f"{batch.name or 'an output'}: samples of {sorted(ranks)} dimensions cannot be padded "
                         "to one tensor; use ragged='list'")
    shape = [max(sizes) for sizes in zip(*(sample.shape for sample in samples))]
    padded = torch.full((len(samples), *shape), fill_value, dtype=samples[0].dtype, device=samples[0].device)
    for row, sample in zip(padded, samples):
        row[tuple(slice(0, size) for size in sample.shape)] = sample
    return padded


def _from_numpy(array):
    return torch.from_numpy(array if array.flags.writeable else array.copy())


class GenericIterator:
    """Iterates pipelines, giving per step a list (one entry per pipeline) of {output name: tensor}.

    The epoch's end comes from the pipeline's reader (``reader_name``, or its only reader), else from
    ``size`` (samples per epoch, summed over the pipelines), else from the pipeline's sources ending
    (StopIteration). ``last_batch_policy`` decides the short last batch; every sample of the epoch
    is delivered exactly once (FILL adds padding, DROP leaves the short batch out).
    ``last_batch_padded`` is accepted from DALI programs and changes nothing: the readers count
    their padding, and the iterator uses that count (docs/dali.md). An output whose samples differ
    in shape (variable crops, boxes, text) comes as a list of per-sample tensors (``ragged="list"``,
    the default) or padded to the batch's largest shape with ``fill_value`` (``ragged="pad"``), and
    then with its samples' lengths along their first axis as ``<name>_lengths`` (int64 [batch]): the
    number of boxes of each sample, for example.
    """

    def __init__(self, pipelines: Pipeline | Sequence[Pipeline], output_map: Sequence[str], size: int = -1,
                 reader_name: str | None = None, auto_reset: bool | str = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, last_batch_padded: bool = False,
                 fill_last_batch: bool | None = None, dynamic_shape: bool = False, prepare_first_batch: bool = True,
                 ragged: str = "list", fill_value=0):
        if ragged not in RAGGED_FORMS:
            raise ValueError(f"GenericIterator: ragged must be one of {RAGGED_FORMS}, got {ragged!r}")
        self._ragged, self._fill_value = ragged, fill_value
        self._pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if not self._pipes:
            raise ValueError("GenericIterator: give at least one pipeline")
        self._output_map = list(output_map)
        if len(set(self._output_map)) != len(self._output_map):
            raise ValueError(f"GenericIterator: output_map has repeated names: {self._output_map}")
        if fill_last_batch is not None:  # DALI's older spelling
            last_batch_policy = LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
        if isinstance(last_batch_policy, str):
            last_batch_policy = LastBatchPolicy[last_batch_policy.upper()]
        self._policy = last_batch_policy
        self._auto_reset = auto_reset in (True, "yes")
        self._size = size
        self._reader_name = reader_name
        if size > 0 and reader_name is not None:
            raise ValueError("GenericIterator: give size or reader_name, not both")
        for pipe in self._pipes:
            pipe.build()
        self._mode = self._choose_mode()
        self._delivered = [0] * len(self._pipes)
        self._steps = 0  # steps delivered in the current epoch
        self._epoch_done = False
        restored = self._pipes[0].restored_iterator_state
        if restored is not None:  # the pipelines resume from checkpoints this iterator's kind took
            self._take_state(restored)

    def _choose_mode(self) -> str:
        if self._reader_name is not None:
            for pipe in self._pipes:
                pipe.reader_meta(self._reader_name)  # raises if the pipeline has no such reader
            return "reader"
        if self._size > 0:
            return "size"
        readers = self._pipes[0].epoch_size()  # {name: size} of every reader
        if len(readers) > 1:  # which one ends the epoch? guessing would give epochs that never end
            raise ValueError(f"GenericIterator: the pipeline has {len(readers)} readers "
                             f"({', '.join(readers)}); name the one that sets the epoch with reader_name=")
        return "reader" if readers else "stop"

    def _shard_size(self, index: int) -> int:
        count = len(self._pipes)
        return self._size * (index + 1) // count - self._size * index // count

    def __iter__(self):
        return self

    def __next__(self) -> list[dict[str, torch.Tensor]]:
        if self._epoch_done:
            self._finish_epoch()
        if self._mode == "reader" and self._policy is LastBatchPolicy.DROP and self._steps == self._full_steps():
            # every shard has this many full batches: stop here, on every pipeline and on every
            # process reading another shard, and leave the rest of the epoch unread
            self._skip_rest_of_epoch()
            self._epoch_done = True
            self._finish_epoch()
        step = []
        lasts = []
        for index, pipe in enumerate(self._pipes):
            try:
                outputs = pipe.run()
            except StopIteration:
                self._epoch_done = True
                self._finish_epoch()
            if len(outputs) != len(self._output_map):
                raise ValueError(f"GenericIterator: the pipeline has {len(outputs)} outputs but output_map "
                                 f"names {len(self._output_map)}")
            valid, pipe_last = self._valid_samples(index, pipe, len(outputs[0]))
            lasts.append(pipe_last)
            step.append((outputs, valid))
        self._steps += 1
        # the epoch ends when every pipeline delivered its share (with `size`, shares may differ by one)
        if all(lasts):
            self._epoch_done = True
        short = any(valid < len(outputs[0]) for outputs, valid in step)
        if short and self._policy is LastBatchPolicy.DROP:
            self._finish_epoch()
        result = []
        for outputs, valid in step:
            tensors = [to_torch(batch, self._ragged, self._fill_value) for batch in outputs]
            named = dict(zip(self._output_map, tensors))
            if self._ragged == "pad":  # each padded output's true lengths along its first axis
                named.update({f"{name}_lengths": torch.tensor([len(sample) for sample in batch], dtype=torch.int64)
                              for name, batch in zip(self._output_map, outputs) if not batch.is_dense_tensor()})
            if self._policy is LastBatchPolicy.PARTIAL:
                named = {name: tensor[:valid] for name, tensor in named.items()}
            result.append(named)
        return result

    next = __next__

    def _valid_samples(self, index: int, pipe: Pipeline, length: int) -> tuple[int, bool]:
        if self._mode == "reader":
            info = pipe.last_epoch_info
            return info.valid, info.last
        if self._mode == "size":
            remaining = self._shard_size(index) - self._delivered[index]
            valid = min(length, remaining)
            self._delivered[index] += valid
            return valid, remaining <= length
        return length, False

    def _finish_epoch(self):
        if self._auto_reset:
            self.reset()
        raise StopIteration

    def _full_steps(self) -> int:
        """Reader mode: the number of full batches that every shard has in every epoch."""
        meta = self._pipes[0].reader_meta(self._reader_name)
        return meta["epoch_size"] // meta["number_of_shards"] // self._pipes[0].batch_size

    def _skip_rest_of_epoch(self) -> None:
        """Runs each pipeline to its reader's epoch end, so that the next epoch starts aligned."""
        for pipe in self._pipes:
            info = pipe.last_epoch_info if self._steps else None
            while info is None or not info.last:
                pipe.run()
                info = pipe.last_epoch_info

    def reset(self) -> None:
        """Starts the next epoch; mid-epoch, the rest of the current epoch is skipped."""
        if not self._epoch_done and self._mode == "reader" and self._steps > 0:
            self._skip_rest_of_epoch()
        for pipe in self._pipes:
            pipe.reset()
        self._delivered = [0] * len(self._pipes)
        self._steps = 0
        self._epoch_done = False

    def __len__(self) -> int:
        batch_size = self._pipes[0].batch_size
        if self._mode == "reader":
            if self._policy is LastBatchPolicy.DROP:
                return self._full_steps()
            return self._pipes[0].reader_meta(self._reader_name)["batches_per_epoch"]
        if self._mode == "size":
            shards = [self._shard_size(i) for i in range(len(self._pipes))]
            if self._policy is LastBatchPolicy.DROP:
                return min(shards) // batch_size
            return -(-max(shards) // batch_size)
        raise TypeError("GenericIterator: the length of an epoch of a source without epochs is unknown")

    @property
    def size(self) -> int:
        return self._size

    # ---- checkpoints (as DALI's iterators, and torchdata's StatefulDataLoader protocol) -------
    def checkpoints(self) -> list[str]:
        """One checkpoint per pipeline (made with enable_checkpointing=True), with this iterator's
        place in the epoch: pipelines made with ``checkpoint=`` these, and an iterator over them,
        give exactly the steps this one would give next."""
        state = {"steps": self._steps, "delivered": list(self._delivered), "epoch_done": self._epoch_done}
        return [pipe.checkpoint(iterator_state=state) for pipe in self._pipes]

    def state_dict(self) -> dict:
        return {"checkpoints": self.checkpoints()}

    def load_state_dict(self, state: dict) -> None:
        """Resumes from ``state_dict()``'s value; before the first step."""
        checkpoints = state["checkpoints"]
        if len(checkpoints) != len(self._pipes):
            raise ValueError(f"load_state_dict: {len(checkpoints)} checkpoints for {len(self._pipes)} pipelines")
        for pipe, checkpoint in zip(self._pipes, checkpoints):
            pipe.restore(checkpoint)
        self._take_state(self._pipes[0].restored_iterator_state or {})

    def _take_state(self, state: dict) -> None:
        self._steps = int(state.get("steps", 0))
        self._delivered = list(state.get("delivered", [0] * len(self._pipes)))
        self._epoch_done = bool(state.get("epoch_done", False))

    @property
    def skipped_count(self) -> int:
        """Samples that pipelines made with on_error="skip" left out in the current epoch (the
        epoch of the last batch delivered); ``pipe.skipped()`` says which and why."""
        return sum(len(pipe.skipped()) for pipe in self._pipes)


class ClassificationIterator(GenericIterator):
    """A GenericIterator over pipelines with two outputs, named "data" and "label"."""

    def __init__(self, pipelines, size: int = -1, reader_name: str | None = None, auto_reset: bool | str = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, last_batch_padded: bool = False,
                 fill_last_batch: bool | None = None, dynamic_shape: bool = False, prepare_first_batch: bool = True,
                 ragged: str = "list", fill_value=0):
        super().__init__(pipelines, ["data", "label"], size=size, reader_name=reader_name, auto_reset=auto_reset,
                         last_batch_policy=last_batch_policy, last_batch_padded=last_batch_padded,
                         fill_last_batch=fill_last_batch, dynamic_shape=dynamic_shape,
                         prepare_first_batch=prepare_first_batch, ragged=ragged, fill_value=fill_value)


__all__ = ["ClassificationIterator", "GenericIterator", "LastBatchPolicy", "to_torch"]
