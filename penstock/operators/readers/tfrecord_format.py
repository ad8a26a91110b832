"""TFRecord files as readers.tfrecord reads them: where each record lies, and the values of the
features asked for in each record (a tf.train.Example). The features' declarations are
``nvidia.dali.tfrecord``'s (penstock.tfrecord says what each reads)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from penstock import limits

int64, string, float32 = 0, 1, 2  # DALI's codes of the three types
DTYPES = {int64: np.dtype(np.int64), float32: np.dtype(np.float32), string: np.dtype(np.uint8)}
TYPE_NAMES = {int64: "int64", string: "string", float32: "float32"}


@dataclass(frozen=True)
class Feature:
    """One feature to read: its type, its default, and its shape (``fixed``: the whole shape;
    else ``partial``: the shape of each row of a variable number of rows, empty for 1-D)."""

    type: int
    default_value: object
    shape: tuple[int, ...] = ()
    fixed: bool = True

    def __post_init__(self):
        if self.type not in DTYPES:
            raise ValueError(f"a tfrecord feature's type is tfrecord.int64, tfrecord.float32 or tfrecord.string, "
                             f"got {self.type!r}")
        if any(not isinstance(size, (int, np.integer)) or size < 0 for size in self.shape):
            raise ValueError(f"a tfrecord feature's shape holds sizes >= 0, got {list(self.shape)}")
        if self.type == string and (not self.fixed or math.prod(self.shape) > 1):
            raise ValueError("a string feature is one value (FixedLenFeature([] or [1], tfrecord.string, ...)): "
                             "tensors of strings are not supported, as in DALI")

    @property
    def dtype(self) -> np.dtype:
        return DTYPES[self.type]

    @property
    def ndim(self) -> int:
        if self.type == string:
            return 1
        return max(len(self.shape), 1) if self.fixed else 1 + len(self.shape)

    def array(self, values, where: str) -> np.ndarray:
        """This feature's output from the record's values (None: the record lacks the feature)."""
        if self.type == string:
            if values is None or not len(values):
                default = self.default_value if values is None else b""
                value = default.encode() if isinstance(default, str) else bytes(default or b"")
            else:
                value = values[0]
            return np.frombuffer(value, np.uint8).copy()
        if not self.fixed:
            values = np.zeros(0, self.dtype) if values is None else np.asarray(values, self.dtype)
            row = math.prod(self.shape)
            if row and values.size % row:
                raise ValueError(f"{where}: {values.size} values do not make rows of shape {list(self.shape)}")
            return values.reshape((values.size // row if row else 0, *self.shape))
        shape = self.shape or (1,)
        if values is None:
            return np.full(shape, self.default_value, self.dtype)
        values = np.asarray(values, self.dtype)
        if values.size != math.prod(shape):
            raise ValueError(f"{where}: {values.size} values for a FixedLenFeature of shape {list(self.shape)}")
        return values.reshape(shape)


def FixedLenFeature(shape, type, default_value) -> Feature:  # noqa: N802 (DALI's names)
    return Feature(type, default_value, tuple(int(size) for size in shape), fixed=True)


def VarLenFeature(*args) -> Feature:  # noqa: N802
    """``VarLenFeature(type, default_value)`` or ``VarLenFeature(partial_shape, type, default_value)``."""
    if len(args) == 2:
        return Feature(args[0], args[1], (), fixed=False)
    if len(args) == 3:
        return Feature(args[1], args[2], tuple(int(size) for size in args[0]), fixed=False)
    raise TypeError("VarLenFeature(type, default_value) or VarLenFeature(partial_shape, type, default_value)")


def FixedLenSequenceFeature(partial_shape, type, default_value) -> Feature:  # noqa: N802
    return Feature(type, default_value, tuple(int(size) for size in partial_shape), fixed=False)


# ---- the records: TFRecord framing and tf.train.Example's protobuf wire format -----------------------
def record_offsets(path: str) -> list[tuple[int, int]]:
    """(offset, size) of every record of a TFRecord file (size: length, its CRC, the data and its
    CRC), found by following the length prefixes, each checked against what the file holds: what
    an index file (tfrecord2idx) lists."""
    offsets, position = [], 0
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        while position < size:
            handle.seek(position)
            head = handle.read(8)
            if len(head) < 8:
                raise ValueError(f"'{path}': a truncated record at byte {position} (inside its 8-byte length)")
            length = int.from_bytes(head, "little")
            limits.checked_bytes(f"'{path}': the record at byte {position} (its length prefix, the CRCs and "
                                 "the data)", 8 + 4 + length + 4, 1, size - position)
            offsets.append((position, 8 + 4 + length + 4))
            position += 8 + 4 + length + 4
    return offsets


def example_values(record: bytes, names: frozenset, where: str) -> dict:
    """{name: values} of the wanted features of a framed record (length, CRC, a serialized
    tf.train.Example, CRC): a list of bytes, or an array of int64 or float32 values."""
    length = int.from_bytes(record[:8], "little")
    if len(record) < 16 or length != len(record) - 16:
        raise ValueError(f"{where}: not a TFRecord record (its length prefix says {length} bytes, the index "
                         f"{max(len(record) - 16, 0)})")
    data = memoryview(record)[12:12 + length]
    try:
        found = {}
        for field, _, example in _fields(data):
            if field != 1:
                continue
            for entry_field, _, entry in _fields(example):  # Features: map<string, Feature> feature = 1
                if entry_field != 1:
                    continue
                key, feature = None, None
                for part, _, value in _fields(entry):
                    if part == 1:
                        key = bytes(value).decode()
                    elif part == 2:
                        feature = value
                if key in names and feature is not None:
                    found[key] = _feature_values(feature)
        return found
    except limits.SizeClaimError as error:
        raise limits.SizeClaimError(f"{where}: not a valid tf.train.Example: {error}") from None
    except (IndexError, ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{where}: not a valid tf.train.Example ({error})") from None


def _varint(data, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if position >= len(data):
            raise ValueError(f"a varint cut short at byte {position} of its message")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, position  # protobuf keeps the low 64 bits
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


_FIXED_SIZES = {5: 4, 1: 8}  # wire types fixed32 and fixed64


def _fields(data):
    """(field number, wire type, value) of each field of a message: value is an int (varint),
    a memoryview (length-delimited) or the raw bytes (fixed 32/64). Every length is checked
    against what the message holds."""
    position, end = 0, len(data)
    while position < end:
        key, position = _varint(data, position)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, position = _varint(data, position)
            yield field, wire, value
            continue
        if wire == 2:
            size, position = _varint(data, position)
        elif wire in _FIXED_SIZES:
            size = _FIXED_SIZES[wire]
        else:
            raise ValueError(f"wire type {wire}")
        limits.checked_bytes(f"field {field} at byte {position} of its message", size, 1, end - position)
        yield field, wire, data[position:position + size]
        position += size


def _feature_values(feature):
    """Feature's oneof: bytes_list = 1 (repeated bytes), float_list = 2 (repeated float, packed or
    not), int64_list = 3 (repeated int64, packed or not)."""
    for kind, _, payload in _fields(feature):
        if kind == 1:
            return [bytes(value) for field, _, value in _fields(payload) if field == 1]
        if kind == 2:
            chunks = [bytes(value) for field, _, value in _fields(payload) if field == 1]
            return np.frombuffer(b"".join(chunks), "<f4")  # packed runs and single fixed32 values alike
        if kind == 3:
            values = []
            for field, wire, value in _fields(payload):
                if field != 1:
                    continue
                if wire == 0:
                    values.append(value)
                else:  # packed
                    position = 0
                    while position < len(value):
                        number, position = _varint(value, position)
                        values.append(number)
            return np.array(values, np.uint64).view(np.int64)  # two's complement, as protobuf writes int64
    return []
