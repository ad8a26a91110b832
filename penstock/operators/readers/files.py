"""Readers: ``readers.file`` reads encoded files and integer labels from a folder tree or a list;
``readers.numpy`` reads NumPy arrays (.npy files), whole or a region of each; ``readers.sequence``
reads sequences of frames (image files in a folder per stream), decoded. The readers of record
formats are in record_readers.py."""
from __future__ import annotations

import ast
import fnmatch
import os
import re
import threading
from typing import NamedTuple

import numpy as np

from penstock import distributed, limits, registry, types
from penstock.contract import EpochInfo, OutputSpec, Reader, SampleContext, SourceBatch
from penstock.draws import keyed_stream
from penstock.kernels import image_codecs
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema, given, require_one_of

FILE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm",
                   ".webp", ".gif", ".jp2", ".flac", ".ogg", ".wav")

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


FILE_SCHEMA = registry.register_schema(OpSchema(
    name="readers.file",
    class_name="readers.File",
    doc="Reads files as encoded bytes (uint8, 1-D) with an int32 label of shape (1,).\n\n"
        "Give the data one of three ways: ``file_root`` alone, a folder with one sub-folder per class "
        "(labels 0..K-1 in sorted folder order); ``file_list``, a text file of 'path label' lines "
        "(paths relative to file_root); or ``files`` (and optionally ``labels``).",
    args=(
        Arg("file_root", "path", None, "Folder of the data, or the base of relative paths in file_list/files."),
        Arg("file_list", "path", None, "Text file with one 'relative/path label' per line."),
        Arg("files", "paths", None, "Paths of the files (relative to file_root when it is given)."),
        Arg("labels", "ints", None, "One label per entry of files; default 0, 1, 2, ..."),
        Arg("file_filters", "strs", None, "Globs the names of the files in a folder tree match, as DALI's "
            "('*.jpg'; a bare extension, '.jpg', means '*.jpg'). Default: images and audio."),
        Arg("dir_filters", "strs", None, "Globs the names of the class folders match: only those are classes "
            "(labelled in their sorted order). Default: every sub-folder."),
        Arg("case_sensitive_filter", "bool", False, "Match file_filters and dir_filters case-sensitively."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=2,
    input_names=(),
    is_source=True,
    checks=(require_one_of("file_root", "file_list", "files", what="the files to read"),
            lambda static, per_sample: _one_list(static), shuffle_after_epoch_alone),
))


def _one_list(static: dict) -> None:
    if static.file_list is not None and static.files is not None:
        raise ArgError("give either 'file_list' or 'files', not both")


def name_matcher(patterns, case_sensitive: bool):
    """A test of a file or folder name against globs (a pattern without a wildcard that starts with
    a dot is an extension: '.jpg' means '*.jpg'); None patterns: every name."""
    if patterns is None:
        return lambda name: True
    globs = [pattern if any(mark in pattern for mark in "*?[") or not pattern.startswith(".") else "*" + pattern
             for pattern in patterns]
    if not case_sensitive:
        globs = [pattern.lower() for pattern in globs]
    return lambda name: any(fnmatch.fnmatchcase(name if case_sensitive else name.lower(), pattern)
                            for pattern in globs)


def list_folder_tree(file_root: str, file_filters, case_sensitive: bool, dir_filters=None) -> tuple[list, list]:
    """(paths, labels) of a folder-per-class tree; classes are the sorted sub-folders (those
    dir_filters match), each holding its files (its own sub-folders are not read, as in DALI)."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.file: file_root '{file_root}' is not a folder")
    is_class = name_matcher(dir_filters, case_sensitive)
    classes = sorted(entry.name for entry in os.scandir(file_root) if entry.is_dir() and is_class(entry.name))
    if not classes:
        held = sum(1 for entry in os.scandir(file_root) if entry.is_file())
        matching = f" matching dir_filters {list(dir_filters)}" if dir_filters is not None else ""
        raise ValueError(f"readers.file: file_root '{file_root}' has no class sub-folders{matching} ({held} files "
                         "directly in it); it takes one sub-folder of files per class, or give the files with "
                         "files= or file_list=")
    is_wanted = name_matcher(file_filters, case_sensitive)
    paths, labels = [], []
    for label, class_name in enumerate(classes):  # each class folder's own files: DALI goes no deeper
        folder = os.path.join(file_root, class_name)
        for name in sorted(entry.name for entry in os.scandir(folder) if entry.is_file() and is_wanted(entry.name)):
            paths.append(os.path.join(folder, name))
            labels.append(label)
    return paths, labels


def read_file_list(file_list: str, file_root: str | None, labelled: bool = True) -> tuple[list, list] | list:
    """(names, labels) from a file of 'path label' lines; without ``labelled``, the names of a file
    of one path per line (readers.numpy's). Names are the paths as written; list_base() gives what
    they are relative to."""
    name = "readers.file" if labelled else "readers.numpy"
    try:
        with open(file_list) as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise FileNotFoundError(f"{name}: cannot read file_list '{file_list}': {error.strerror}") from None
    if not labelled:
        return [line for line in lines if line]  # verbatim, spaces included, as DALI reads them
    paths, labels = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        # as DALI parses a line: the digits at its end, after white space, are the label; all before
        # that white space, spaces included, is the path
        match = re.fullmatch(r"(.*\S)\s+(\d+)\s*", line)
        if match is None:
            raise ValueError(f"readers.file: line {number} of '{file_list}' should be 'path label' (a label of "
                             f"digits, after white space), got {line!r}")
        paths.append(match[1])
        labels.append(int(match[2]))
    return paths, labels


def list_base(file_list: str, file_root: str | None) -> str:
    """The folder the paths in a file_list are relative to: file_root, else the list's own."""
    return file_root or os.path.dirname(file_list)


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
    shard_id, num_shards = distributed.shard(args.shard_id, args.num_shards, name)
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


@registry.register("readers.file", "cpu")
class FileReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.sources, self.labels = self._list_files(args)
        base = list_base(args.file_list, args.file_root) if args.file_list is not None else args.file_root
        self.paths = [os.path.join(base, name) if base else name for name in self.sources]
        if not self.paths:
            where = args.file_root or args.file_list or "files"
            raise ValueError(f"readers.file: no files found in '{where}'")
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.file")

    @staticmethod
    def _list_files(args) -> tuple[list, np.ndarray]:
        """(the files as given: relative to file_root, or to a file_list's base; their labels)."""
        root, file_list, files = args.file_root, args.file_list, args.files
        if files is not None:
            paths = list(files)
            labels = list(args.labels) if args.labels is not None else list(range(len(paths)))
            if len(labels) != len(paths):
                raise ValueError(f"readers.file: {len(labels)} labels for {len(paths)} files")
        elif file_list is not None:
            paths, labels = read_file_list(file_list, root)
        elif root is not None:
            paths, labels = list_folder_tree(root, args.file_filters or FILE_EXTENSIONS,
                                             args.case_sensitive_filter, args.dir_filters)
            paths = [os.path.relpath(path, root) for path in paths]
        return paths, np.asarray(labels, dtype=np.int32).reshape(-1, 1)

    def load(self, index, sample: SampleContext) -> tuple:
        return read_bytes(self.paths[index]), self.labels[index]

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.uint8), 1, ""), OutputSpec(np.dtype(np.int32), 1, "", (1,))


# ---- readers.numpy ---------------------------------------------------------------------------------
ROI_STARTS, ROI_ENDS = ("roi_start", "rel_roi_start"), ("roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")
NUMPY_TYPES = frozenset("?bBhHiIlLqQefd")  # bool, the integers, float16/32/64: what DALI's reader takes


def _one_roi_form(static: dict, per_sample: frozenset) -> None:
    for group in (ROI_STARTS, ROI_ENDS):
        named = [name for name in group if given(static, per_sample, name)]
        if len(named) > 1:
            raise ArgError(f"arguments {' and '.join(repr(name) for name in named)} exclude each other; give one")


registry.register_schema(OpSchema(
    name="readers.numpy",
    class_name="readers.Numpy",
    doc="Reads NumPy arrays from .npy files, each with the type and shape its file holds (C order: files in "
        "Fortran order are transposed in memory, the shape kept), or only a region of each (``roi_*``).\n\n"
        "Give the files one of three ways: ``file_root`` alone, whose files and those of its immediate "
        "sub-folders that match ``file_filter`` are read (the folder's own first, then each sub-folder's, "
        "in sorted order, as in DALI); ``file_list``, a text file of one path per line; or ``files``. Every "
        "file must hold one element type and number of dimensions, that of the first. With device='gpu' the "
        "files are read on the CPU and the arrays moved to the GPU (DALI reads them through GPUDirect Storage).",
    args=(
        Arg("file_root", "path", None, "Folder of the files, or the base of relative paths in file_list/files."),
        Arg("file_filter", "str", "*.npy", "Glob that the names of the files in file_root and its immediate "
            "sub-folders match (case-sensitive); ignored with file_list or files."),
        Arg("file_list", "path", None, "Text file with one path per line, relative to file_root, else to the "
            "list's folder."),
        Arg("files", "paths", None, "Paths of the files (relative to file_root when it is given)."),
        Arg("roi_start", "ints", None, "Start of the region of interest, in elements (one value per axis of "
            "roi_axes, or of the array)."),
        Arg("rel_roi_start", "floats", None, "Start of the region, as fractions of the extents."),
        Arg("roi_end", "ints", None, "End (exclusive) of the region, in elements."),
        Arg("rel_roi_end", "floats", None, "End of the region, as fractions of the extents."),
        Arg("roi_shape", "ints", None, "Size of the region, in elements."),
        Arg("rel_roi_shape", "floats", None, "Size of the region, as fractions of the extents."),
        Arg("roi_axes", "ints", (), "The axes the roi_ values are given for, in their order (default: every "
            "axis, in order).", min=0),
        Arg("out_of_bounds_policy", "str", "error", "A region outside the array: 'error', 'pad' (with "
            "fill_value) or 'trim_to_shape'.", choices=("error", "pad", "trim_to_shape")),
        Arg("fill_value", "float", 0.0, "The padding's value under out_of_bounds_policy='pad'."),
        Arg("cache_header_information", "bool", False, "Accepted for DALI compatibility; each file's header "
            "is read with its data."),
        Arg("register_buffers", "bool", True, "Accepted for DALI compatibility (its 'gpu' form's buffers)."),
        Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility (with dont_use_mmap=True, as "
            "DALI's); files are read through the page cache."),
        *SAMPLE_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=1,
    input_names=(),
    is_source=True,
    checks=(require_one_of("file_root", "file_list", "files", what="the files to read"),
            lambda static, per_sample: _one_list(static), _one_roi_form, shuffle_after_epoch_alone,
            o_direct_without_mmap),
))


def list_numpy_files(file_root: str, file_filter: str) -> list[str]:
    """The files of ``file_root`` whose names match ``file_filter``, then those of each immediate
    sub-folder, each folder's in sorted order (DALI's discovery for its numpy reader), relative to
    file_root as DALI names them ('./name', 'folder/name')."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.numpy: file_root '{file_root}' is not a folder")
    folders = ["."] + sorted(entry.name for entry in os.scandir(file_root) if entry.is_dir())
    matches = name_matcher([file_filter], case_sensitive=True)
    paths = []
    for folder in folders:
        names = sorted(entry.name for entry in os.scandir(os.path.join(file_root, folder)) if entry.is_file())
        paths.extend(f"{folder}/{name}" for name in names if matches(name))
    return paths


NPY_MAGIC = b"\x93NUMPY"
NPY_HEADER_LIMIT = 10_000  # np.load's own limit on a header's size (its max_header_size)


class NpyHeader(NamedTuple):
    dtype: np.dtype  # as stored (its byte order)
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int
    data_bytes: int


def read_npy_header(handle, path: str) -> NpyHeader:
    """The header of the .npy file open as ``handle`` (at its start), checked: magic string and
    version, a dict literal of exactly 'descr', 'fortran_order' and 'shape', an element type
    readers.numpy takes, and a shape whose data the file holds. Any other file is a ValueError
    naming ``path`` (a SizeClaimError where a size is more than the file holds); numpy's own parser
    lets tokenizer errors through unnamed and allocates what the shape claims before reading."""
    file_size = os.fstat(handle.fileno()).st_size
    prefix = handle.read(12)
    if prefix.startswith(b"PK\x03\x04"):
        raise ValueError(f"'{path}' is an .npz archive of several arrays; readers.numpy reads .npy files")
    if not prefix.startswith(NPY_MAGIC):
        raise ValueError(f"'{path}' is not a .npy file: it starts with {prefix[:6]!r}, not {NPY_MAGIC!r}")
    if len(prefix) < 10:
        raise ValueError(f"'{path}' is cut inside its .npy header ({len(prefix)} bytes)")
    version = (prefix[6], prefix[7])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"'{path}': .npy format version {version[0]}.{version[1]}, not 1.0, 2.0 or 3.0")
    start = 10 if version[0] == 1 else 12
    if len(prefix) < start:
        raise ValueError(f"'{path}' is cut inside its .npy header ({len(prefix)} bytes)")
    length = int.from_bytes(prefix[8:start], "little")
    limits.checked_bytes(f"'{path}': its .npy header", length, 1, file_size - start)
    if length > NPY_HEADER_LIMIT:
        raise ValueError(f"'{path}': its .npy header claims {length:,} bytes, more than np.load reads "
                         f"({NPY_HEADER_LIMIT:,})")
    handle.seek(start)
    text = handle.read(length).decode("latin1" if version[0] < 3 else "utf8", errors="replace")
    header = _npy_header_dict(text, path)
    shape, descr = header["shape"], header["descr"]
    if not isinstance(shape, tuple) or not all(isinstance(extent, int) and not isinstance(extent, bool)
                                               for extent in shape):
        raise ValueError(f"'{path}': its .npy header's shape is {shape!r}, not a tuple of integers")
    fortran_order = header["fortran_order"]
    if fortran_order is not True and fortran_order is not False:
        raise ValueError(f"'{path}': its .npy header's fortran_order is {fortran_order!r}, not True or False")
    try:
        dtype = np.lib.format.descr_to_dtype(descr)
    except (TypeError, ValueError) as error:
        raise ValueError(f"'{path}': its .npy header's descr {descr!r} is not an element type ({error})") from None
    if dtype.hasobject:
        raise ValueError(f"'{path}' holds Python objects (pickled); readers.numpy takes bool, integers and floats")
    if dtype.char not in NUMPY_TYPES:
        raise ValueError(f"'{path}' holds {dtype} elements; readers.numpy takes bool, integers and floats")
    data_bytes = limits.checked_bytes(f"'{path}': its .npy header", shape, dtype.itemsize, file_size - start - length)
    return NpyHeader(dtype, shape, fortran_order, start + length, data_bytes)


def _npy_header_dict(text: str, path: str) -> dict:
    try:
        header = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        try:  # headers written by Python 2 give their integers an L suffix; np.load takes them
            header = ast.literal_eval(re.sub(r"(?<=\d)L\b", "", text))
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            raise ValueError(f"'{path}': its .npy header is not a Python dict literal: {text[:200]!r}") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        held = f"the keys {', '.join(sorted(map(repr, header)))}" if isinstance(header, dict) else \
            f"a {type(header).__name__}"
        raise ValueError(f"'{path}': its .npy header holds {held}, not a dict of exactly 'descr', 'fortran_order' "
                         "and 'shape'")
    return header


def load_npy(path: str) -> np.ndarray:
    """The array of a .npy file, C-contiguous in native byte order; a clear error naming the file
    for anything else (a pickle, an .npz archive, an element type no operator takes, a header that
    claims more data than the file holds)."""
    try:
        with open(path, "rb") as handle:
            header = read_npy_header(handle, path)
            data = np.empty(header.data_bytes, np.uint8)
            handle.seek(header.data_offset)
            read = handle.readinto(memoryview(data))
    except OSError as error:
        raise ValueError(f"cannot read '{path}' as a .npy array: {error.strerror or error}") from None
    if read != header.data_bytes:  # the file shrank since its size was taken
        raise ValueError(f"'{path}' ends {header.data_bytes - read:,} bytes into the data its .npy header claims")
    array = data.view(header.dtype).reshape(header.shape, order="F" if header.fortran_order else "C")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return np.require(array, requirements="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)


def _npy_header(path: str) -> tuple[np.dtype, int]:
    """(element type, number of dimensions) of a .npy file, from its header alone."""
    try:
        with open(path, "rb") as handle:
            header = read_npy_header(handle, path)
    except OSError as error:
        raise ValueError(f"readers.numpy: cannot read '{path}' as a .npy array: {error.strerror or error}") from None
    except ValueError as error:
        raise type(error)(f"readers.numpy: {error}") from None
    return header.dtype.newbyteorder("="), len(header.shape)


@registry.register("readers.numpy", "cpu")
class NumpyReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        root, file_list, files = args.file_root, args.file_list, args.files
        if files is not None:
            self.sources, base = list(files), root
        elif file_list is not None:
            self.sources, base = read_file_list(file_list, root, labelled=False), list_base(file_list, root)
        else:  # named as DALI's discovery names them: './name' in file_root, 'folder/name' below it
            self.sources, base = list_numpy_files(root, args.file_filter), root
        self.paths = [os.path.join(base, name) if base else name for name in self.sources]
        if not self.paths:
            where = f"'{root}' (file_filter '{args.file_filter}')" if files is None and file_list is None \
                else f"'{file_list}'" if file_list is not None else "files"
            raise ValueError(f"readers.numpy: no files found in {where}")
        self.dtype, self.ndim = _npy_header(self.paths[0])
        self.epochs = sharded_epochs(args, context, len(self.paths), "readers.numpy")
        self._region = any(args[name] is not None for name in ROI_STARTS + ROI_ENDS)

    def load(self, index, sample: SampleContext) -> tuple:
        path = self.paths[index]
        array = load_npy(path)
        if array.dtype != self.dtype or array.ndim != self.ndim:
            raise ValueError(f"Inconsistent data: '{path}' holds {array.ndim}-dimensional {array.dtype} arrays, the "
                             f"first file ('{self.paths[0]}') {self.ndim}-dimensional {self.dtype}: every file must hold "
                             "one type and number of dimensions")
        return (self._region_of(array, path) if self._region else array,)

    def _region_of(self, array: np.ndarray, path: str) -> np.ndarray:
        from penstock.operators.shared.arrays import slice_sample
        args = self.args
        window = {"axes": tuple(args.roi_axes) or tuple(range(array.ndim)), "anchor": None,
                  "window_shape": None, "start": args.roi_start, "rel_start": args.rel_roi_start,
                  "end": args.roi_end, "rel_end": args.rel_roi_end, "shape": args.roi_shape,
                  "rel_shape": args.rel_roi_shape, "out_of_bounds_policy": args.out_of_bounds_policy,
                  "fill_values": (args.fill_value,)}
        try:
            return np.require(slice_sample(np, window, array), requirements="C")
        except ValueError as error:
            raise ValueError(f"the region of interest of '{path}': {error}") from None

    def declare_outputs(self, inputs):
        return OutputSpec(self.dtype, self.ndim, "")



# ---- readers.sequence ------------------------------------------------------------------------------
IMAGE_EXTENSIONS = tuple(extension for extension in FILE_EXTENSIONS if extension not in (".flac", ".ogg", ".wav"))

registry.register_schema(OpSchema(
    name="readers.sequence",
    class_name="readers.Sequence",
    doc="Reads sequences of frames from a folder of streams: each sub-folder of ``file_root`` is a stream "
        "whose image files, in sorted order, are its frames. A sample is ``sequence_length`` frames ``stride`` "
        "apart, the samples of a stream starting every ``step`` frames while the whole sequence fits (as in "
        "DALI). The frames are decoded (``image_type``) and stacked: uint8, layout FHWC; a stream's frames "
        "must share one size.",
    args=(
        Arg("file_root", "path", REQUIRED, "The folder of streams."),
        Arg("sequence_length", "int", REQUIRED, "Frames in a sample.", min=1),
        Arg("step", "int", 1, "Frames between the starts of a stream's consecutive samples.", min=1),
        Arg("stride", "int", 1, "Frames between consecutive frames of a sample.", min=1),
        Arg("image_type", "image_type", types.RGB, "Colour space the frames are decoded to.",
            choices=(types.RGB, types.BGR, types.GRAY)),
        Arg("dtype", "dtype", types.UINT8, "Element type of the frames; only UINT8.", choices=(types.UINT8,)),
        *READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=1,
    input_names=(),
    is_source=True,
))


def frame_sequences(file_root: str, length: int, step: int, stride: int) -> list[list[str]]:
    """The frames of every sample: the image files of each sub-folder in sorted order, windows of
    ``length`` frames ``stride`` apart starting every ``step`` frames while they fit (DALI's)."""
    if not os.path.isdir(file_root):
        raise FileNotFoundError(f"readers.sequence: file_root '{file_root}' is not a folder")
    is_image = name_matcher(IMAGE_EXTENSIONS, case_sensitive=False)
    sequences = []
    for stream in sorted(entry.path for entry in os.scandir(file_root) if entry.is_dir()):
        frames = sorted(entry.path for entry in os.scandir(stream) if entry.is_file() and is_image(entry.name))
        last_start = len(frames) - 1 - (length - 1) * stride
        sequences.extend([frames[start + k * stride] for k in range(length)]
                         for start in range(0, last_start + 1, step))
    return sequences


def decode_frame(path: str, image_type) -> np.ndarray:
    """The frame at ``path``, decoded as displayed, after its header's size is checked against the
    decoders' default max_pixels (DALI's sequence reader has no max_pixels argument: a frame is
    refused where decoders.image would refuse it)."""
    data = read_bytes(path)
    try:
        header = None
        if image_codecs.image_format(data) == "jpeg":
            header = image_codecs.jpeg_header_for_cpu(data)
            height, width = header.height, header.width
        else:
            height, width = image_codecs.image_size(data)
    except ValueError as error:
        raise ValueError(f"frame '{path}': {error}") from None
    limits.checked_pixels(f"frame '{path}': its header", height, width, limits.DEFAULT_MAX_PIXELS,
                          remedy="the decoders' default, which readers.sequence applies to every frame")
    try:
        return image_codecs.decode(data, image_type, adjust_orientation=True, header=header)
    except ValueError as error:
        raise ValueError(f"frame '{path}': {error}") from None


@registry.register("readers.sequence", "cpu")
class SequenceReader(ShardedReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.sequences = frame_sequences(args.file_root, args.sequence_length, args.step, args.stride)
        if not self.sequences:
            raise ValueError(f"readers.sequence: no stream in '{args.file_root}' holds "
                             f"{(args.sequence_length - 1) * args.stride + 1} frames, what a sequence of "
                             f"{args.sequence_length} frames {args.stride} apart needs")
        self.paths = [f"{frames[0]} (a sequence of {len(frames)} frames)" for frames in self.sequences]
        self.sources = [""] * len(self.sequences)  # DALI's sequences carry no source_info
        self.epochs = sharded_epochs(args, context, len(self.sequences), "readers.sequence")

    def load(self, index, sample: SampleContext) -> tuple:
        frames = []
        for path in self.sequences[index]:
            frame = decode_frame(path, self.args.image_type)
            if frames and frame.shape != frames[0].shape:
                raise ValueError(f"frame '{path}' is {frame.shape[1]} x {frame.shape[0]}, the sequence's first "
                                 f"frame {frames[0].shape[1]} x {frames[0].shape[0]}: a sequence's frames share one "
                                 "size")
            frames.append(frame)
        return (np.stack(frames),)

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.uint8), 4, "FHWC", channels=self.args.image_type.channels)
