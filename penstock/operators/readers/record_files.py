"""What the readers of record formats (readers.tfrecord, webdataset, mxnet) share: the reader of a few
files of many samples each, with an optional index file each (RecordFileReader), on readers.file's
epochs, shards and shuffling (ShardedReader), and the checks of their files and index entries."""
from __future__ import annotations

import os
import threading

from penstock import limits
from penstock.operators.shared.readers import ShardedReader, sharded_epochs
from penstock.schema import ArgError

# guards the readers' descriptor tables: worker threads open descriptors while the pipeline's
# shutdown closes them (sources are shut down before the workers stop)
_descriptors_lock = threading.Lock()


def _new_lock_in_forked_child() -> None:
    global _descriptors_lock  # a thread of the parent may have held it at the fork
    _descriptors_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_in_forked_child)


class RecordFileReader(ShardedReader):
    """A reader of samples that lie at known places in a few large files (``self.files``): each
    process reads them with pread through a descriptor per file, opened when first needed (pread
    shares no file offset, so a descriptor inherited through fork serves as well)."""

    files: list[str]
    records: list[tuple[int, int, int]]  # (file number, offset, size) of each sample

    def list_records(self, args: dict, name: str, indexed, walked) -> None:
        """self.files, self.records and self.paths from 'path' and 'index_path': each file's records
        from its index (``indexed(index_path, path)``), else by walking it (``walked(path)``), both
        giving (offset, size) pairs; then the epochs over them."""
        self.files, self.records = list(args.path), []
        for number, path in enumerate(self.files):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{name}: '{path}' is not a file")
            index = args.index_path[number] if args.index_path is not None else None
            try:
                entries = indexed(index, path) if index is not None else walked(path)
            except OSError as error:
                raise FileNotFoundError(f"{name}: cannot read '{index or path}': {error.strerror}") from None
            if index is not None:
                check_entries(entries, path, f"{name}: index '{index}'")
            self.records.extend((number, offset, size) for offset, size in entries)
        if not self.records:
            raise ValueError(f"{name}: no records in {self.files}")
        self.paths = [f"{self.files[number]} (record at byte {offset})" for number, offset, _ in self.records]
        self.sources = [f"{self.files[number]} at index {offset}" for number, offset, _ in self.records]  # DALI's
        self.epochs = sharded_epochs(args, self.context, len(self.records), name,
                                     [number for number, _, _ in self.records])

    def read_at(self, number: int, offset: int, size: int, where: str) -> bytes:
        with _descriptors_lock:
            state = self.__dict__.setdefault("_descriptors", _Descriptors())
            descriptor = state.open.get(number)
            if descriptor is None:
                descriptor = state.open[number] = os.open(self.files[number], os.O_RDONLY)
            state.reading += 1
        try:
            # pread allocates what it is asked for: an index may claim more than the file holds
            limits.checked_bytes(where, size, 1, os.fstat(descriptor).st_size - offset)
            data = os.pread(descriptor, size, offset)
        finally:
            with _descriptors_lock:
                state.reading -= 1
                if state.closing and not state.reading:
                    state.close()
        if len(data) != size:  # the file shrank since its size was taken
            raise ValueError(f"{where}: the file ends {size - len(data)} bytes into it (a stale index?)")
        return data

    def shutdown(self) -> None:
        """Closes the descriptors, or lets the last read in flight close them."""
        with _descriptors_lock:
            state = self.__dict__.get("_descriptors")
            if state is not None:
                state.closing = True
                if not state.reading:
                    state.close()


class _Descriptors:
    """A reader's open descriptors by file number, and the reads using them."""

    def __init__(self):
        self.open: dict[int, int] = {}
        self.reading = 0
        self.closing = False

    def close(self) -> None:
        for descriptor in self.open.values():
            os.close(descriptor)
        self.open.clear()


def check_entries(entries, path: str, where: str) -> None:
    """Refuses index entries, (offset, size) in ``path``, that lie outside the file: ``where`` names
    the index."""
    file_size = os.path.getsize(path)
    for number, (offset, size) in enumerate(entries, 1):
        if not 0 <= offset <= file_size:
            raise ValueError(f"{where}, entry {number}: offset {offset} is outside '{path}' ({file_size:,} bytes)")
        limits.checked_bytes(f"{where}, entry {number}: the record at byte {offset} of '{path}'", size, 1,
                             file_size - offset)


def index_columns(path: str, columns: tuple[int, ...], name: str, form: str) -> list[tuple[int, ...]]:
    """The integers in ``columns`` of each line of an index file ('form' says what a line holds)."""
    rows = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:
                continue
            try:
                rows.append(tuple(int(fields[column]) for column in columns))
            except (ValueError, IndexError):
                raise ValueError(f"{name}: index '{path}', line {number}: expected '{form}', got {line.strip()!r}") \
                    from None
    return rows


def one_index_each(static: dict, per_sample: frozenset = frozenset(), paths: str = "path",
                   indexes: str = "index_path") -> None:
    """A check of the readers of files (argument ``paths``) with an optional index file each (``indexes``)."""
    files, index_files = static[paths], static[indexes]
    if index_files is not None and len(index_files) != len(files):
        raise ArgError(f"'{indexes}' names {len(index_files)} index files for {len(files)} files in '{paths}'; give "
                       "one per file, in the same order")
