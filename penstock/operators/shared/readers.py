"""What every reader shares: the sharding and epoch arguments (documented once), their checks, the
shard's epochs (ShardedEpochs), the reader base class (ShardedReader) and a file's bytes."""
from __future__ import annotations

import os
import threading

import numpy as np

from penstock import sharding
from penstock.contract import EpochInfo, Reader, SourceBatch
from penstock.draws import keyed_stream
from penstock.schema import Arg, ArgError


# Sharding and epoch arguments shared by every reader, documented once.
READER_ARGS = (
    Arg("random_shuffle", "bool", False, "Shuffle the samples of each epoch (a new permutation per epoch, "
        "derived from the seed)."),
    Arg("initial_fill", "int", 1024, "Accepted for DALI compatibility: penstock shuffles the whole "
        "shard each epoch instead of through a buffer of this size.", min=1),
    Arg("shard_id", "int", None, "Which shard this pipeline reads. Default: this process's rank in a "
        "distributed job (torch.distributed or torchrun; penstock.distributed), else 0.", min=0),
    Arg("num_shards", "int", None, "Into how many contiguous parts the data set is split. Default: the "
        "distributed job's world size, else 1.", min=1),
    Arg("stick_to_shard", "bool", False, "Read the same shard every epoch; otherwise, as DALI's readers, "
        "go on to the next shard after each (shard k reads part (k + epoch) % num_shards)."),
    Arg("pad_last_batch", "bool", False, "Pad each epoch's shard, by repeating its last sample, to the "
        "largest shard's size and then to whole batches. Otherwise, as in DALI, a short last batch is "
        "filled with the next epoch's first samples, and the next epoch goes on after them (with shuffling, "
        "it starts at its beginning). Either way the samples past the shard's are marked as padding, and "
        "iterators drop or keep them by their last_batch_policy."),
    Arg("skip_cached_images", "bool", False, "Accepted for DALI compatibility; has no effect."),
    Arg("dont_use_mmap", "bool", False, "Accepted for DALI compatibility; files are read with plain reads."),
    Arg("read_ahead", "bool", False, "Accepted for DALI compatibility; the OS reads ahead."),
    Arg("prefetch_queue_depth", "int", 1, "Accepted for DALI compatibility; see the pipeline's own.", min=1),
    Arg("lazy_init", "bool", False, "Accepted for DALI compatibility; the file list is made at build."),
    Arg("tensor_init_bytes", "int", 1048576, "Accepted for DALI compatibility (its first allocation per "
        "sample).", min=0),
)


SHUFFLE_AFTER_EPOCH_SEED = Arg("shuffle_after_epoch_seed", "int", 0, "Seed of those permutations (the same on "
                               "every shard).")


# readers of files, one sample each (readers.file, numpy, coco)
SAMPLE_READER_ARGS = READER_ARGS + (
    Arg("shuffle_after_epoch", "bool", False, "Permute the whole data set before each epoch (the same "
        "permutation on every shard, so that the shards still partition it); the reader keeps to its "
        "shard. Excludes random_shuffle and stick_to_shard, as in DALI."),
    SHUFFLE_AFTER_EPOCH_SEED,
)


# readers of a few files of many samples each (readers.mxnet, tfrecord, webdataset)
RECORD_READER_ARGS = READER_ARGS + (
    Arg("shuffle_after_epoch", "bool", False, "Permute the order of the files before each epoch, each "
        "file's samples kept in their order (the same permutation on every shard, so that the shards "
        "still partition the samples); the reader keeps to its shard. Goes with random_shuffle; excludes "
        "stick_to_shard, as in DALI."),
    SHUFFLE_AFTER_EPOCH_SEED,
)


def shuffle_after_epoch_alone(static: dict, per_sample: frozenset) -> None:
    """A check of the readers of SAMPLE_READER_ARGS: shuffle_after_epoch permutes the whole data set,
    which neither a shuffle within the shard nor a shard kept every epoch goes with."""
    if static.shuffle_after_epoch:
        for other in ("random_shuffle", "stick_to_shard"):
            if static[other]:
                raise ArgError(f"'shuffle_after_epoch' and '{other}' exclude each other")


def o_direct_without_mmap(static: dict, per_sample: frozenset) -> None:
    """A check of the readers that take use_o_direct (readers.numpy, tfrecord): DALI's reads with
    O_DIRECT only where it was told not to map the files."""
    if static.use_o_direct and not static.dont_use_mmap:
        raise ArgError("'use_o_direct' needs 'dont_use_mmap=True', as in DALI")


def shuffle_after_epoch_moving(static: dict, per_sample: frozenset) -> None:
    """A check of the readers of RECORD_READER_ARGS: shuffle_after_epoch moves files between shards."""
    if static.shuffle_after_epoch and static.stick_to_shard:
        raise ArgError("'shuffle_after_epoch' and 'stick_to_shard' exclude each other")


class ShardedEpochs:
    """Which samples each batch holds: DALI's sample stream, cut into epochs of batches.

    A reader goes through its shard, then (unless it sticks to it) the next shard, the one after
    that and so on, wrapping around the data set, as DALI's readers do. With ``pad_last_batch`` each
    pass over a shard is padded, by repeating its last sample, to the largest shard's size and then
    to whole batches, and is one epoch. Without it the passes follow one another with no gap, so a
    short last batch is filled with the next pass's first samples, and the next epoch goes on after
    them (shuffled passes excepted: each epoch is then one whole pass). An epoch is
    ``batches_per_epoch`` batches (enough for the largest shard): its first samples, as many as its
    shard holds, are its real data, and the rest are marked as padding, for iterators to keep, drop
    or trim.
    """

    def __init__(self, total: int, batch_size: int, shard_id: int, num_shards: int, stick_to_shard: bool,
                 shuffle: bool, pad_last_batch: bool, seed: int, name: str, data_set_order=None):
        if shard_id >= num_shards:
            raise ValueError(f"{name}: shard_id ({shard_id}) must be less than num_shards ({num_shards})")
        if total < num_shards:
            raise ValueError(f"{name}: {total} samples cannot be split into {num_shards} shards")
        self.total, self.batch_size = total, batch_size
        self.shard_id, self.num_shards, self.stick_to_shard = shard_id, num_shards, stick_to_shard
        self.shuffle, self.pad_last_batch, self.seed = shuffle, pad_last_batch, seed
        # shuffle_after_epoch: pass -> the data set's order in that pass (the same on every shard,
        # so that the shards still partition it); None: the data set's own order
        self.data_set_order = data_set_order
        self.largest_shard = -(-total // num_shards)  # DALI's num_samples: what pad_last_batch pads to
        self.batches_per_epoch = -(-self.largest_shard // batch_size)
        self.epoch, self.batch_in_epoch = 0, 0
        self._orders = {0: self._epoch_samples(0)}  # of this epoch and the two before it, which batches in
        self._order = self._orders[0]               # flight may be of: (samples, how many are real)
        self._ends: dict[int, int] = {}  # epoch -> samples of its order still in it, once some were lent out
        self._lock = threading.Lock()  # lend() is called by another thread than next_batch()

    def shard_bounds(self, shard: int) -> tuple[int, int]:
        return self.total * shard // self.num_shards, self.total * (shard + 1) // self.num_shards

    def _shard_of_pass(self, number: int) -> int:
        return self.shard_id if self.stick_to_shard else (self.shard_id + number) % self.num_shards

    def _pass_samples(self, number: int) -> np.ndarray:
        """The samples of the reader's ``number``-th pass over a shard, in reading order."""
        start, stop = self.shard_bounds(self._shard_of_pass(number))
        order = np.arange(start, stop) if self.data_set_order is None else self.data_set_order(number)[start:stop]
        if self.shuffle:
            keyed_stream([self.seed & (2**64 - 1), number]).shuffle(order)
        return order

    def _epoch_samples(self, epoch: int) -> tuple[np.ndarray, int]:
        """(the samples of the epoch's batches, how many of them are the epoch's own)."""
        length = self.batches_per_epoch * self.batch_size
        if self.pad_last_batch:
            order = self._pass_samples(epoch)
            return np.concatenate([order, np.full(length - len(order), order[-1], order.dtype)]), len(order)
        if self.shuffle or self.data_set_order is not None:
            # a shuffled epoch is a whole permutation of its shard: the next one's first samples fill
            # its last batch, and that epoch still starts at its beginning
            number, start = epoch, 0
        else:  # the passes back to back, each epoch `length` samples of them after the one before
            number, start = self._pass_at(epoch * length)
        parts, held = [], 0
        while held < start + length:
            parts.append(self._pass_samples(number))
            held += len(parts[-1])
            number += 1
        return np.concatenate(parts)[start:start + length], min(self._pass_size(epoch), length)

    def _pass_at(self, position: int) -> tuple[int, int]:
        """(the pass that holds the stream's ``position``-th sample, where in that pass it is)."""
        passes = 1 if self.stick_to_shard else self.num_shards  # the passes after which shard sizes repeat
        cycle = sum(self._pass_size(number) for number in range(passes))
        number, position = passes * (position // cycle), position % cycle
        while position >= self._pass_size(number):
            number, position = number + 1, position - self._pass_size(number)
        return number, position

    def _pass_size(self, number: int) -> int:
        start, stop = self.shard_bounds(self._shard_of_pass(number))
        return stop - start

    def next_batch(self) -> tuple[np.ndarray, EpochInfo]:
        with self._lock:
            samples, own = self._order
            begin = self.batch_in_epoch * self.batch_size
            indices = samples[begin:begin + self.batch_size]
            valid = max(0, min(own - begin, self.batch_size))
            info = EpochInfo(self.epoch, valid, self.batch_in_epoch + 1 == self.batches_per_epoch, self.batch_in_epoch)
            self.batch_in_epoch += 1
            if info.last:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
                self._orders = {epoch: order for epoch, order in self._orders.items() if epoch >= self.epoch - 2}
                self._ends = {epoch: end for epoch, end in self._ends.items() if epoch >= self.epoch - 2}
                self._order = self._orders[self.epoch] = self._epoch_samples(self.epoch)
            return indices, info

    def lend(self, epoch: int, position: int) -> int | None:
        """The last sample still in ``epoch`` when it comes after ``position``, taken out of the
        epoch (see Reader.lend). Batches keep their samples as the order gave them: the batches
        that hold samples lent out pad them out (``epoch_end``)."""
        with self._lock:
            if epoch not in self._orders:
                raise RuntimeError(f"the order of epoch {epoch} is no longer kept")
            samples, own = self._orders[epoch]
            end = self._ends.get(epoch, own)
            if end - 1 < position:
                return None
            self._ends[epoch] = end - 1
            return None if end - 1 == position else int(samples[end - 1])

    def epoch_end(self, epoch: int) -> int | None:
        with self._lock:
            return self._ends.get(epoch)

    def state(self) -> dict:
        with self._lock:
            return {"epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch, **self.lent()}

    def lent(self) -> dict:
        return {"ends": {str(epoch): end for epoch, end in self._ends.items()}}

    def restore(self, state: dict) -> None:
        with self._lock:
            self.epoch, self.batch_in_epoch = int(state["epoch"]), int(state["batch_in_epoch"])
            self._ends = {int(epoch): int(end) for epoch, end in state.get("ends", {}).items()}
            self._orders = {epoch: self._epoch_samples(epoch) for epoch in {self.epoch, *self._ends}}
            self._order = self._orders[self.epoch]

    def shard_size(self) -> int:
        start, stop = self.shard_bounds(self.shard_id)
        return stop - start


def read_bytes(path: str) -> np.ndarray:
    """The file's bytes as a uint8 array (os-level calls: the fewest GIL hand-offs per file)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError as error:
        raise OSError(f"cannot read '{path}': {error.strerror}") from None
    try:
        chunks = []
        size = os.fstat(descriptor).st_size
        while True:
            chunk = os.read(descriptor, max(size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            size = 1 << 16
    except OSError as error:
        raise OSError(f"cannot read '{path}': {error.strerror}") from None
    finally:
        os.close(descriptor)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    return np.frombuffer(data, dtype=np.uint8)


class ShardedReader(Reader):
    """A reader of ``self.paths`` (one sample each) whose batches ``self.epochs`` (ShardedEpochs)
    chooses: sharding, shuffling, padding and lending are the same for every such reader. Each
    sample's source_info is its entry of ``self.sources``, DALI's form of where the sample came from
    (a path as the reader was given it, say), else of ``self.paths``."""

    paths: list
    sources: list | None = None
    epochs: ShardedEpochs

    def next_batch(self, iteration: int) -> SourceBatch:
        indices, info = self.epochs.next_batch()
        indices = np.asarray(indices).tolist()  # Python ints: cheaper to hand to worker processes
        sources = self.paths if self.sources is None else self.sources
        return SourceBatch(indices, info, [sources[i] for i in indices])

    def lend(self, epoch: int, position: int) -> tuple | None:
        index = self.epochs.lend(epoch, position)
        return None if index is None else (index, (self.paths if self.sources is None else self.sources)[index])

    def epoch_end(self, epoch: int) -> int | None:
        return self.epochs.epoch_end(epoch)

    def state(self) -> dict:
        return self.epochs.state()

    def lent(self) -> dict:
        return self.epochs.lent()

    def restore(self, state: dict) -> None:
        self.epochs.restore(state)

    def epoch_size(self) -> int:
        return len(self.paths)

    def reader_meta(self) -> dict:
        return {"epoch_size": len(self.paths),
                "epoch_size_padded": self.epochs.largest_shard * self.epochs.num_shards if self.epochs.pad_last_batch
                else len(self.paths),
                "number_of_shards": self.epochs.num_shards, "shard_id": self.epochs.shard_id,
                # 0 or 1, as DALI gives them (stick_to_shard also where shuffle_after_epoch implies it)
                "pad_last_batch": int(self.epochs.pad_last_batch), "stick_to_shard": int(self.epochs.stick_to_shard),
                "shard_size": self.epochs.shard_size(), "batches_per_epoch": self.epochs.batches_per_epoch}


def sharded_epochs(args: dict, context, total: int, name: str, file_of=None) -> ShardedEpochs:
    """The ShardedEpochs of a reader from its READER_ARGS. shuffle_after_epoch permutes the data set
    before each pass, and keeps the reader on its shard (the permutation moves the samples between
    shards), as DALI's: the samples, or with ``file_of`` (the file of each sample, the samples of a
    file adjacent) the files, each file's samples kept in order."""
    shard_id, num_shards = sharding.shard(args.shard_id, args.num_shards, name, context.job)
    permuted = args.get("shuffle_after_epoch", False)
    seed = args.get("shuffle_after_epoch_seed", 0) & (2**64 - 1)
    files = None
    if permuted and file_of is not None:  # each file's samples, a run of adjacent ones
        file_of = np.asarray(file_of)
        starts = np.searchsorted(file_of, np.arange(int(file_of.max()) + 2))
        files = [np.arange(start, stop) for start, stop in zip(starts[:-1], starts[1:])]

    def data_set_order(number: int) -> np.ndarray:
        if files is None:
            return keyed_stream([seed, number]).permutation(total)
        return np.concatenate([files[k] for k in keyed_stream([seed, number]).permutation(len(files))])

    return ShardedEpochs(total, context.batch_size, shard_id, num_shards, args.stick_to_shard or permuted,
                         args.random_shuffle, args.pad_last_batch, context.seed, name,
                         data_set_order if permuted else None)
