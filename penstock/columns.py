"""The columns a batch keeps its per-sample values in when they come from the worker processes as
whole arrays (``RowColumn``, ``ArrayColumn``, ``RaggedColumn``), the per-sample preparations that
cross from a worker as rows of ints (``RowPreparation``), and a batch operator's per-sample
arguments read as columns (``BatchArgs``). Indexed per sample, each reads as the list of values it
stands for.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ArrayColumn", "BatchArgs", "BatchColumn", "RaggedColumn", "RowColumn", "RowPreparation", "address_of",
           "arg_column", "distinct_args", "is_row_bytes"]


class RowPreparation(tuple):
    """A per-sample preparation (what ``PreparesOnCpu.prepare`` returns) that crosses from a worker
    process as a row of ints: a tuple whose first item is a C-contiguous uint8 array (an encoded
    image, or decoded pixels), whose bytes go through the process's shared ring, and whose other
    items ``ring_row`` gives as ints (``from_ring_row`` gets the bytes back flat: the ints must tell
    any other shape). A worker sends the preparations of a request as one int64 array of such rows,
    and the pipeline's process makes no object per field. Subclasses stay plain tuples (no __new__
    of their own, ``__slots__ = ()``)."""

    __slots__ = ()
    ROW_FIELDS = 0  # how many ints ring_row() gives

    def ring_row(self) -> tuple:
        """Every item but the first, as ints."""
        raise NotImplementedError

    @classmethod
    def from_ring_row(cls, data, row) -> "RowPreparation":
        """The preparation again from its bytes (``data``, flat, read in place) and ``ring_row()``'s
        ints."""
        raise NotImplementedError


def address_of(data: np.ndarray) -> int:
    """Where an array's bytes are: through ctypes (a quarter of the time of the array interface,
    which counts where it runs for every image), or the array interface for read-only data, which
    ctypes does not take."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(data))
    except (TypeError, ValueError):
        return data.__array_interface__["data"][0]


def is_row_bytes(value) -> bool:
    """Whether a RowPreparation's first item can be addressed as bytes: a C-contiguous uint8 array."""
    return isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.flags.c_contiguous


class BatchColumn:
    """A batch's values of one kept slot held as columns rather than a list (RowColumn,
    ArrayColumn, RaggedColumn), indexed per sample like the list; ``others`` holds the samples whose value is
    held as itself."""

    others: dict

    def __iter__(self):
        return (self[index] for index in range(len(self)))

    def _hold_as_themselves(self, values: list) -> None:
        """Holds a list's values (None: not stored yet) in ``others``."""
        self.others = {index: value for index, value in enumerate(values) if value is not None}

    def _stored_in_columns(self, indices: list) -> None:
        """The samples of ``indices`` have their values in the columns now, not in ``others``."""
        if self.others:
            for index in indices:
                self.others.pop(index, None)

    def positions_without(self, marker) -> tuple | None:
        """The positions whose value is not ``marker`` (None: all of them)."""
        if not any(value is marker for value in self.others.values()):
            return None
        return tuple(index for index in range(len(self)) if self.others.get(index) is not marker)


class RowColumn(BatchColumn):
    """One batch's preparations of a RowPreparation class ``kind`` as columns: ``rows`` int64
    [size, 2 + k], per sample the address and size of its bytes, then its ``ring_row()`` ints.
    A sample whose value is not such a preparation (an image decoded on the worker, a sample on
    another branch of a conditional, one not stored yet) has size -1 there and its value in
    ``others``. The worker processes' replies land here as whole arrays of rows, so the
    pipeline's process makes no object per sample, and a batch operator reads the columns.
    Indexing gives a sample's preparation (made when asked); bytes addressed here belong to a
    worker's ring, or to the preparation ``held`` for them, until the batch is used."""

    ADDRESS, NBYTES = 0, 1

    def __init__(self, kind: type, size: int, row_width: int):
        self.kind = kind
        self.rows = np.zeros((size, row_width), np.int64)
        self.rows[:, self.NBYTES] = -1
        self.others: dict[int, Any] = {}  # samples without a row (absent: not stored yet, None)
        self.held: dict[int, Any] = {}  # preparations whose own arrays the rows address

    @classmethod
    def of(cls, kind: type, values) -> "RowColumn":
        """The column of a list of values (preparations made in this process, and others)."""
        if isinstance(values, RowColumn):
            return values
        column = cls(kind, len(values), 2 + kind.ROW_FIELDS)
        for index, value in enumerate(values):
            if value is not None:
                column[index] = value
        return column

    def __len__(self) -> int:
        return len(self.rows)

    def __setitem__(self, index: int, value) -> None:
        if type(value) is self.kind and is_row_bytes(value[0]):
            data = value[0]
            self.rows[index] = (address_of(data), data.nbytes, *value.ring_row())
            self.held[index] = value
            self.others.pop(index, None)
        else:
            self.rows[index, self.NBYTES] = -1
            self.others[index] = value
            self.held.pop(index, None)

    def put_rows(self, indices: list, rows: np.ndarray) -> None:
        """Stores the rows of several samples at once (their addresses absolute)."""
        self.rows[indices] = rows
        self._stored_in_columns(indices)
        if self.held:
            for index in indices:
                self.held.pop(index, None)

    def __getitem__(self, index: int):
        if index in self.held:
            return self.held[index]
        address, nbytes, *fields = self.rows[index].tolist()
        if nbytes < 0:
            return self.others.get(index)
        data = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
        return self.kind.from_ring_row(data, fields)


class ArrayColumn(BatchColumn):
    """One batch's values of a kept slot as one array, for values that came from the worker
    processes as whole arrays [n, ...] (numbers drawn per sample, a fixed-shape value of each):
    ``array`` [size, ...] holds them, a sample whose value came otherwise is held as itself in
    ``others`` (in neither: not stored yet, None). Indexing gives a sample's row (a view, 0-d for
    a column of numbers) as a list of them would; ``numpy.asarray`` of a column whose every sample
    has its row is the array itself, so a column of per-sample arguments is read at once."""

    def __init__(self, size: int, row_shape: tuple, dtype):
        self.array = np.empty((size, *row_shape), dtype)
        self.present = np.zeros(size, bool)
        self.others: dict[int, Any] = {}

    @classmethod
    def of(cls, values: list, row_shape: tuple, dtype) -> "ArrayColumn":
        """A column of the given row shape and type holding ``values`` (a list) as its others."""
        column = cls(len(values), row_shape, dtype)
        column._hold_as_themselves(values)
        return column

    @classmethod
    def over(cls, array: np.ndarray, values) -> "ArrayColumn":
        """A column whose rows are to be written into ``array`` (a batch buffer shared with the
        worker processes), holding the values a list or column ``values`` has already."""
        column = cls.__new__(cls)
        column.array, column.present, column.others = array, np.zeros(len(array), bool), {}
        if isinstance(values, ArrayColumn):
            column.present[:] = values.present
            column.array[values.present] = values.array[values.present]
            column.others = dict(values.others)
        else:
            column._hold_as_themselves(values)
        return column

    @classmethod
    def full(cls, array: np.ndarray) -> "ArrayColumn":
        """The column of a whole batch's array (a random generator's draws)."""
        column = cls.__new__(cls)
        column.array, column.present, column.others = array, np.ones(len(array), bool), {}
        return column

    @property
    def complete(self) -> bool:
        """Whether every sample has its row in ``array``."""
        return bool(self.present.all())

    def fits(self, rows: np.ndarray) -> bool:
        return rows.shape[1:] == self.array.shape[1:] and rows.dtype == self.array.dtype

    def put_rows(self, indices: list, rows: np.ndarray) -> None:
        self.array[indices] = rows
        self.present[indices] = True
        self._stored_in_columns(indices)

    def __len__(self) -> int:
        return len(self.array)

    def __setitem__(self, index: int, value) -> None:
        self.present[index] = False
        self.others[index] = value

    def __getitem__(self, index: int | slice):
        if isinstance(index, slice):  # the first samples, as a source's batch is cut to the others' size
            start, stop, _ = index.indices(len(self))
            column = ArrayColumn.__new__(ArrayColumn)
            column.array, column.present = self.array[start:stop], self.present[start:stop]
            column.others = {i - start: value for i, value in self.others.items() if start <= i < stop}
            return column
        if self.present[index]:
            return self.array[index, ...]
        return self.others.get(index)

    def __array__(self, dtype=None, copy=None):
        if not self.complete:
            return np.array(list(self), dtype=dtype)
        return self.array if dtype is None else self.array.astype(dtype, copy=False)


class RaggedColumn(BatchColumn):
    """One batch's arrays of one type and rank whose shapes differ (boxes, labels), as they came
    from the worker processes: parts of several samples each, the samples' elements back to back
    in ``flat`` with their shapes [n, rank]. A sample whose value came otherwise is held as itself
    in ``others`` (in neither: not stored yet, None). Indexing gives a sample's array (a view);
    ``packed`` gives the whole batch as the parts' elements and each sample's place in them, which
    a copy to the GPU takes without a view per sample."""

    def __init__(self, size: int, dtype, ndim: int):
        self.dtype, self.ndim = np.dtype(dtype), ndim
        self.parts: list = []  # (flat, shapes [n, ndim], starts [n])
        self.places = np.full((size, 2), -1, np.int64)  # per sample: its part, its position there
        self.others: dict[int, Any] = {}

    @classmethod
    def of(cls, values: list, dtype, ndim: int) -> "RaggedColumn":
        """A column of the given type and rank holding ``values`` (a list) as its others."""
        column = cls(len(values), dtype, ndim)
        column._hold_as_themselves(values)
        return column

    def fits(self, flat: np.ndarray, shapes: np.ndarray) -> bool:
        return flat.dtype == self.dtype and shapes.shape[1] == self.ndim

    def put_part(self, indices: list, flat: np.ndarray, shapes: np.ndarray, sizes: np.ndarray | None = None) -> None:
        """Stores the arrays of several samples: their elements back to back in ``flat``
        (``sizes``: their element counts, when the caller has them)."""
        if sizes is None:
            sizes = np.prod(shapes, axis=1)
        self.parts.append((flat, shapes, sizes.cumsum() - sizes))
        rows = np.asarray(indices)
        self.places[rows, 0] = len(self.parts) - 1
        self.places[rows, 1] = np.arange(len(rows))
        self._stored_in_columns(indices)

    def __len__(self) -> int:
        return len(self.places)

    def __setitem__(self, index: int, value) -> None:
        self.places[index] = -1
        self.others[index] = value

    def __getitem__(self, index: int):
        part, position = self.places[index].tolist()
        if part < 0:
            return self.others.get(index)
        flat, shapes, starts = self.parts[part]
        shape = shapes[position].tolist()
        start = int(starts[position])
        return flat[start:start + math.prod(shape)].reshape(shape)

    @property
    def complete(self) -> bool:
        """Whether every sample's array is in the parts."""
        return bool((self.places[:, 0] >= 0).all())

    def packed(self) -> tuple[list, np.ndarray, np.ndarray]:
        """(the parts' flat arrays, each sample's offset [size] into their concatenation, each
        sample's shape [size, rank]) of a complete column."""
        if not self.parts:
            return [], np.zeros(0, np.int64), np.zeros((0, self.ndim), np.int64)
        flats, part_shapes, part_starts = zip(*self.parts)
        bases = np.cumsum([0, *(flat.size for flat in flats)])[:-1]  # each part's first element
        firsts = np.cumsum([0, *(len(shapes) for shapes in part_shapes)])[:-1]  # each part's first row
        offsets = np.concatenate([starts + base for starts, base in zip(part_starts, bases)])
        rows = firsts[self.places[:, 0]] + self.places[:, 1]  # each sample's row among the parts' rows
        return list(flats), offsets[rows], np.concatenate(part_shapes)[rows]


class BatchArgs(Sequence):
    """Each sample's arguments for a batch operator (``run_batch``'s ``args``): reads as a list of
    dicts, each made when first asked for (samples with equal values share one), and per argument
    as a column (``column``, ``varies``), which operators that build tables for the whole batch
    read instead of hundreds of dicts. ``per_sample`` maps the arguments given per sample to their
    converted values: a list, or a float64 or int64 array for numbers; ``keys`` gives hashable
    stand-ins for values that are not (lists), by which samples share a dict."""

    def __init__(self, static: dict, size: int, per_sample: dict, keys: dict | None = None):
        self.static = static
        self.size = size
        self.per_sample = per_sample
        self._keys = keys or {}
        self._lists: dict = {}
        self._dicts: list = [None] * size
        self._shared: dict = {}

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(self.size))]
        if index < 0:
            index += self.size
        made = self._dicts[index]
        if made is None:
            key = tuple((self._keys.get(name) or self._values_of(name))[index] for name in self.per_sample)
            made = self._shared.get(key)
            if made is None:
                made = self._shared[key] = self.static.replace(**{name: self._values_of(name)[index]
                                                                  for name in self.per_sample})
            self._dicts[index] = made
        return made

    def __iter__(self):
        return (self[index] for index in range(self.size))

    def _values_of(self, name: str) -> list:
        values = self._lists.get(name)
        if values is None:
            column = self.per_sample[name]
            values = self._lists[name] = column.tolist() if isinstance(column, np.ndarray) else column
        return values

    def varies(self, name: str) -> bool:
        """Whether ``name`` is given per sample (else every sample has the operator's value)."""
        return name in self.per_sample

    def column(self, name: str):
        """The argument's value of every sample: the per-sample array or list, or the operator's
        value repeated."""
        if name in self.per_sample:
            return self.per_sample[name]
        return [self.static[name]] * self.size


def arg_column(args, name: str):
    """An argument's value of every sample, from BatchArgs or a plain list of dicts."""
    return args.column(name) if isinstance(args, BatchArgs) else [a[name] for a in args]


def distinct_args(args, names: tuple) -> list:
    """The samples' argument dicts, one of each kind, as far as ``names`` tell (at least the first
    sample's): what an operator builds its tables from when few of them differ."""
    if isinstance(args, BatchArgs) and not any(args.varies(name) for name in names):
        return [args[0]] if len(args) else []
    return list({id(a): a for a in args}.values())
