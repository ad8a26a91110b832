"""Readers of LMDB databases: ``readers.caffe`` (Caffe's Datum records: an image, encoded or raw,
and a label) and ``readers.caffe2`` (Caffe2's TensorProtos records: an image, labels and further
tensors). The samples are the records of the databases in order, each database's in the order of
its keys, as DALI's; they share readers.file's epochs, shards and shuffling (readers.ShardedReader).

The databases are read with py-lmdb (``pip install lmdb``), imported when a reader is built. The
records are protobuf messages, decoded here from their wire format: the two messages need little
more than varints and length-delimited fields, which protobuf itself is not needed for."""
from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.shared.readers import READER_ARGS, ShardedReader, sharded_epochs
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

# ---- protobuf's wire format ------------------------------------------------------------------------
VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = range(6)
WIRE_OF = {"int32": VARINT, "int64": VARINT, "bool": VARINT, "enum": VARINT, "float": FIXED32,
           "double": FIXED64, "bytes": LENGTH, "message": LENGTH}
# the arrays repeated numbers are read into; floats and doubles as stored (little-endian)
NUMBER_DTYPES = {"int32": np.dtype(np.int32), "int64": np.dtype(np.int64), "bool": np.dtype(bool),
                 "enum": np.dtype(np.int32), "float": np.dtype("<f4"), "double": np.dtype("<f8")}


class Field(NamedTuple):
    name: str
    kind: str  # a key of WIRE_OF
    repeated: bool = False
    values: frozenset | None = None  # an enum's values: others are unknown fields, as in proto2


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """(the unsigned 64-bit value of the varint at ``position``, where the next field starts)."""
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError("it ends inside a varint")
        if shift >= 70:
            raise ValueError(f"a varint at byte {position} runs past 10 bytes")
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position, shift = position + 1, shift + 7
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, position


def _fields(data: bytes, position: int = 0, group: int | None = None) -> tuple[list, int]:
    """([(field number, wire type, value), ...], where they end) of the fields from ``position``: an
    int for a varint, bytes for the others. Groups (an old form no field here has) are skipped, as
    protobuf skips any field it does not know; ``group``: the number of the group being skipped,
    whose end closes the list."""
    fields = []
    while position < len(data):
        start = position
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if number == 0 or number > 0x1FFFFFFF:
            raise ValueError(f"field number {number} at byte {start}")
        if wire == VARINT:
            value, position = _varint(data, position)
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if position + size > len(data):
                raise ValueError(f"it ends inside the {size}-byte field at byte {start}")
            value, position = data[position:position + size], position + size
        elif wire == LENGTH:
            size, position = _varint(data, position)
            if size > len(data) - position:
                raise ValueError(f"the field at byte {start} claims {size:,} bytes, {len(data) - position:,} follow")
            value, position = data[position:position + size], position + size
        elif wire == START_GROUP:
            _, position = _fields(data, position, number)
            continue
        elif wire == END_GROUP:
            if number != group:
                raise ValueError(f"a group end at byte {start} closes no group")
            return fields, position
        else:
            raise ValueError(f"wire type {wire} (not one of protobuf's) at byte {start}")
        fields.append((number, wire, value))
    if group is not None:
        raise ValueError(f"it ends inside the group of field {group}")
    return fields, position


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _numbers(kind: str, wire: int, value) -> np.ndarray:
    """The numbers of one occurrence of a numeric field: one, or a packed run of them."""
    dtype = NUMBER_DTYPES[kind]
    if wire == LENGTH and kind in ("float", "double"):
        if len(value) % dtype.itemsize:
            raise ValueError(f"a packed run of {kind} values of {len(value)} bytes")
        return np.frombuffer(value, dtype)
    if wire == LENGTH:  # a packed run of varints
        values, position = [], 0
        while position < len(value):
            number, position = _varint(value, position)
            values.append(number)
    else:
        values = [value if wire == VARINT else int.from_bytes(value, "little")]
    if kind == "bool":
        return np.array([number != 0 for number in values], bool)
    if kind in ("float", "double"):
        return np.frombuffer(b"".join(number.to_bytes(dtype.itemsize, "little") for number in values), dtype)
    return np.array([_signed(number, dtype.itemsize * 8) for number in values], dtype)


def decode_message(data: bytes, fields: dict[int, Field]) -> dict:
    """The fields of a protobuf message (proto2) that ``fields`` names, by name, read as protobuf's
    parser reads them: a singular field's last value (a message's occurrences merged), a repeated
    number's values, packed or not, as an array, a repeated string's as a list; fields it does not
    name, or whose wire type is not their kind's, are skipped. Raises ValueError for data that is
    not a protobuf message."""
    found: dict = {}
    for number, wire, value in _fields(data)[0]:
        field = fields.get(number)
        if field is None:
            continue
        packed = field.repeated and wire == LENGTH and field.kind in NUMBER_DTYPES
        if wire != WIRE_OF[field.kind] and not packed:
            continue
        if field.kind in NUMBER_DTYPES:
            value = _numbers(field.kind, wire, value)
            if field.values is not None:
                value = value[np.isin(value, list(field.values))]
            if field.repeated:
                found.setdefault(field.name, []).append(value)
            elif len(value):
                found[field.name] = value[-1].item()
        elif field.repeated:
            found.setdefault(field.name, []).append(value)
        else:  # the occurrences of a message merge as their concatenation parses
            found[field.name] = found.get(field.name, b"") + value if field.kind == "message" else value
    for field in fields.values():
        if field.repeated and field.kind in NUMBER_DTYPES and field.name in found:
            found[field.name] = np.concatenate(found[field.name]).astype(NUMBER_DTYPES[field.kind].newbyteorder("="))
    return found


# ---- the databases ---------------------------------------------------------------------------------
# py-lmdb opens an environment once per process (a second open of its files is refused), and the
# forked worker processes read through the one they inherit: every reader of a database shares its
# environment, kept open. Keyed by the identity of the database's data file, which a rewritten
# database changes.
_ENVIRONMENTS: dict[tuple[int, int], object] = {}
_ENVIRONMENTS_LOCK = threading.Lock()


def open_database(path: str, name: str):
    """The LMDB environment of the database at ``path`` (a folder holding data.mdb), opened read-only
    without its lock file, as DALI opens it."""
    try:
        import lmdb
    except ImportError:
        raise ImportError(f"{name} reads LMDB databases with the lmdb package: pip install lmdb") from None
    if not os.path.isdir(path):
        problem = "is not a folder (an LMDB database is a folder holding data.mdb)" if os.path.exists(path) \
            else "does not exist"
        raise FileNotFoundError(f"{name}: the database '{path}' {problem}")
    try:
        status = os.stat(os.path.join(path, "data.mdb"))
    except OSError:
        raise FileNotFoundError(f"{name}: the database folder '{path}' holds no data.mdb") from None
    with _ENVIRONMENTS_LOCK:
        environment = _ENVIRONMENTS.get((status.st_dev, status.st_ino))
        if environment is None:
            try:
                environment = lmdb.open(path, readonly=True, lock=False, readahead=False)
            except lmdb.Error as error:
                raise ValueError(f"{name}: cannot open '{path}' as an LMDB database: {error}") from None
            _ENVIRONMENTS[status.st_dev, status.st_ino] = environment
    return environment


class RecordNames(Sequence):
    """The source info of each record, '<database> at key <key>' (as DALI's), made when asked for:
    a database may hold millions of records."""

    def __init__(self, databases: list[str], keys: list[tuple[int, bytes]]):
        self.databases, self.keys = databases, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> str:
        number, key = self.keys[index]
        return f"{self.databases[number]} at key {key.decode('utf-8', 'backslashreplace')}"


class LMDBReader(ShardedReader):
    """A reader of the records of LMDB databases (``path``), one sample each: the databases one after
    the other, each in the order of its keys. ``parse(record, where)`` turns a record into the
    outputs; what they hold is declared from the first record's (the outputs of every record must
    hold the same element types and numbers of dimensions, as a batch's must in DALI)."""

    def __init__(self, args, context):
        super().__init__(args, context)
        self.databases = list(args.path)
        self.environments = [open_database(path, self.name) for path in self.databases]
        self.keys: list[tuple[int, bytes]] = []  # (database number, key) of each sample
        for number, environment in enumerate(self.environments):
            with environment.begin() as transaction:
                self.keys.extend((number, key) for key in transaction.cursor().iternext(values=False))
        if not self.keys:
            raise ValueError(f"{self.name}: no records in {self.databases}")
        self.paths = RecordNames(self.databases, self.keys)
        self.epochs = sharded_epochs(args, context, len(self.keys), self.name)
        self.specs = None  # what load checks every record's outputs against, once known
        try:
            self.specs = tuple((output.dtype, output.ndim) for output in self.load(0, None))
        except ValueError:  # a bad first record fails when it is read, as in DALI; the others tell nothing yet
            pass

    def parse(self, record: bytes, where: str) -> tuple:
        raise NotImplementedError

    def record(self, index: int) -> bytes:
        number, key = self.keys[index]
        with self.environments[number].begin() as transaction:
            record = transaction.get(key)
        if record is None:
            raise ValueError(f"{self.name}: {self.paths[index]}: the record is no longer in the database")
        return record

    def load(self, index, sample: SampleContext | None) -> tuple:
        where = self.paths[index]
        outputs = self.parse(self.record(index), where)
        if self.specs is not None:
            for number, (output, (dtype, ndim)) in enumerate(zip(outputs, self.specs)):
                if output.dtype != dtype or output.ndim != ndim:
                    raise ValueError(f"{self.name}: {where}: output {number} is {output.ndim}-D {output.dtype}, "
                                     f"that of the first record ({self.paths[0]}) {ndim}-D {dtype}: every record's "
                                     "outputs must hold one element type and number of dimensions")
        return outputs

    def declare_outputs(self, inputs):
        count = self.schema.outputs_for(self.args)
        if self.specs is None:
            return tuple(OutputSpec() for _ in range(count))
        return tuple(OutputSpec(np.dtype(dtype), ndim, "") for dtype, ndim in self.specs)


def _failed(name: str, where: str, what: str, problem) -> ValueError:
    return ValueError(f"{name}: {where}: cannot parse the record as {what}: {problem}")


# ---- readers.caffe ---------------------------------------------------------------------------------
DATUM = {1: Field("channels", "int32"), 2: Field("height", "int32"), 3: Field("width", "int32"),
         4: Field("data", "bytes"), 5: Field("label", "int32"), 7: Field("encoded", "bool")}

registry.register_schema(OpSchema(
    name="readers.caffe",
    class_name="readers.Caffe",
    doc="Reads (image, label) pairs from Caffe LMDB databases: each record a Caffe Datum. The image is "
        "the Datum's data as it is stored: encoded bytes (uint8, 1-D) for the decoders, or, where the "
        "Datum says it is not encoded, its raw pixels as a uint8 array of shape (height, width, channels) "
        "(the bytes in the order stored, as DALI gives them). The label is int32 of shape (1,), or (0,) "
        "for a Datum without one. The samples are the records of the databases in order, each "
        "database's in the order of its keys.",
    args=(
        Arg("path", "paths", REQUIRED, "The LMDB databases (folders holding data.mdb)."),
        Arg("image_available", "bool", True, "Whether the records hold images: the image output."),
        Arg("label_available", "bool", True, "Whether the records hold labels: the label output."),
        *READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=lambda static: static.image_available + static.label_available,
    input_names=(),
    is_source=True,
))


@registry.register("readers.caffe", "cpu")
class CaffeReader(LMDBReader):
    def parse(self, record: bytes, where: str) -> tuple:
        try:
            datum = decode_message(record, DATUM)
        except ValueError as error:
            raise _failed(self.name, where, f"a Caffe Datum ({len(record)} bytes)", error) from None
        outputs = []
        if self.args.image_available:
            data = np.frombuffer(datum.get("data", b""), np.uint8)
            if datum.get("encoded", True) is False:  # without the field the data is taken as encoded, as DALI's
                shape = tuple(datum.get(name, 0) for name in ("height", "width", "channels"))
                if min(shape) < 0 or shape[0] * shape[1] * shape[2] != data.size:
                    raise ValueError(f"{self.name}: {where}: the raw image's size, {data.size} bytes, is not its "
                                     f"height x width x channels = {' x '.join(map(str, shape))}")
                data = data.reshape(shape)
            outputs.append(data.copy())
        if self.args.label_available:
            outputs.append(np.array([datum["label"]] if "label" in datum else [], np.int32))
        return tuple(outputs)


# ---- readers.caffe2 --------------------------------------------------------------------------------
FLOAT, INT32, BYTE, STRING, INT64 = 1, 2, 3, 4, 10  # TensorProto.DataType values the reader reads
DATA_TYPES = frozenset((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13))  # every value of Caffe2's enum
TYPE_NAMES = {0: "UNDEFINED", 1: "FLOAT", 2: "INT32", 3: "BYTE", 4: "STRING", 5: "BOOL", 6: "UINT8", 7: "INT8",
              8: "UINT16", 9: "INT16", 10: "INT64", 12: "FLOAT16", 13: "DOUBLE"}
TENSOR_PROTO = {1: Field("dims", "int64", True), 2: Field("data_type", "enum", values=DATA_TYPES),
                3: Field("float_data", "float", True), 4: Field("int32_data", "int32", True),
                5: Field("byte_data", "bytes"), 6: Field("string_data", "bytes", True),
                10: Field("int64_data", "int64", True), 11: Field("segment", "message")}
SEGMENT = {1: Field("begin", "int64"), 2: Field("end", "int64")}
TENSOR_PROTOS = {1: Field("protos", "message", True)}
# the values of a tensor of each numeric data type, and their element type
VALUES_OF = {FLOAT: ("float_data", np.float32), INT32: ("int32_data", np.int32), INT64: ("int64_data", np.int64)}
SINGLE_LABEL, MULTI_LABEL_SPARSE, MULTI_LABEL_DENSE, MULTI_LABEL_WEIGHTED_SPARSE, NO_LABEL = range(5)


def _caffe2_outputs(static: dict) -> int:
    label_type = static.label_type
    labels = 0 if label_type == NO_LABEL else 2 if label_type in (MULTI_LABEL_SPARSE, MULTI_LABEL_WEIGHTED_SPARSE) \
        else 1
    return static.image_available + labels + static.additional_inputs + static.bbox


def _sparse_needs_labels(static: dict, per_sample: frozenset) -> None:
    if static.label_type in (MULTI_LABEL_SPARSE, MULTI_LABEL_WEIGHTED_SPARSE) and static.num_labels < 1:
        raise ArgError(f"sparse labels (label_type {static.label_type}) are spread over 'num_labels' classes, "
                       f"got {static.num_labels}")


registry.register_schema(OpSchema(
    name="readers.caffe2",
    class_name="readers.Caffe2",
    doc="Reads samples from Caffe2 LMDB databases: each record a Caffe2 TensorProtos, whose tensors are, "
        "in order, the image (if ``image_available``), the label (unless label_type is 4) and, for "
        "weighted sparse labels, their weights, then ``additional_inputs`` tensors and a bounding box. "
        "Outputs, in that order: the image, as stored: a STRING tensor's bytes (uint8, 1-D, encoded) or "
        "a BYTE tensor's pixels (uint8, (H, W, C) from its dims, C 1 when it has two); the label "
        "(int32 or float32 as stored); one output more for the sparse label types; the additional "
        "tensors (FLOAT, INT32 or INT64 values, 1-D); the bounding box (4 int32 values), taken from a "
        "record that holds one tensor after the additional ones. Where the tensors are fewer than the "
        "outputs, those left are not filled and the record is refused, as in DALI (whose reader fills "
        "the sparse types' extra output only from that last tensor, and skips the tensor after a "
        "MULTI_LABEL_SPARSE label). The samples are the records of the databases in order, each "
        "database's in the order of its keys.",
    args=(
        Arg("path", "paths", REQUIRED, "The LMDB databases (folders holding data.mdb)."),
        Arg("image_available", "bool", True, "Whether the records start with an image tensor."),
        Arg("label_type", "int", SINGLE_LABEL, "What the label tensor holds: 0 SINGLE_LABEL (one class "
            "index); 1 MULTI_LABEL_SPARSE (the indices of the classes present: the output is num_labels "
            "values, 1 at those); 2 MULTI_LABEL_DENSE (a vector, given as it is); 3 MULTI_LABEL_WEIGHTED_SPARSE "
            "(indices, with their weights in the next tensor: num_labels float32 values, the weights at "
            "those indices); 4 NO_LABEL.", choices=(0, 1, 2, 3, 4)),
        Arg("num_labels", "int", 1, "The number of classes; the length of the sparse label types' outputs."),
        Arg("additional_inputs", "int", 0, "How many further tensors each record holds after the labels, an "
                                           "output each.", min=0),
        Arg("bbox", "bool", False, "Whether the records end with a bounding box tensor: its output."),
        *READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=_caffe2_outputs,
    input_names=(),
    is_source=True,
    checks=(_sparse_needs_labels,),
))


def _tensor(data: bytes) -> dict:
    tensor = decode_message(data, TENSOR_PROTO)
    if "segment" in tensor and not {"begin", "end"} <= set(decode_message(tensor["segment"], SEGMENT)):
        raise ValueError("a tensor's segment lacks its begin or end (required fields)")
    return tensor


@registry.register("readers.caffe2", "cpu")
class Caffe2Reader(LMDBReader):
    def parse(self, record: bytes, where: str) -> tuple:
        try:
            tensors = [_tensor(data) for data in decode_message(record, TENSOR_PROTOS).get("protos", [])]
        except ValueError as error:
            raise _failed(self.name, where, f"a Caffe2 TensorProtos ({len(record)} bytes)", error) from None
        args, name = self.args, self.name
        outputs = [None] * _caffe2_outputs(args)

        def tensor(number: int, what: str) -> dict:
            if number >= len(tensors):
                raise ValueError(f"{name}: {where}: the record holds {len(tensors)} tensors, no tensor {number} for "
                                 f"the {what}")
            return tensors[number]

        def data_type(tensor: dict) -> int:
            return tensor.get("data_type", FLOAT)

        def values(tensor: dict, what: str, types=tuple(VALUES_OF)) -> np.ndarray:
            if data_type(tensor) not in types:
                raise ValueError(f"{name}: {where}: the {what} is a {TYPE_NAMES[data_type(tensor)]} tensor, not "
                                 f"{' or '.join(TYPE_NAMES[kind] for kind in types)}")
            field, dtype = VALUES_OF[data_type(tensor)]
            return tensor.get(field, np.zeros(0)).astype(dtype)

        def put(number: int, array: np.ndarray, what: str) -> None:
            if number >= len(outputs):
                raise ValueError(f"{name}: {where}: the record's {what} goes to output {number}, of {len(outputs)} "
                                 "(more tensors than image_available, label_type, additional_inputs and bbox call for)")
            outputs[number] = array

        consumed = 0
        if args.image_available:
            outputs[0] = self._image(tensor(0, "image"), where)
            consumed = 1
        label_type = args.label_type
        if label_type != NO_LABEL:
            labels = tensor(consumed, "label")
            indices = values(labels, "label", (FLOAT, INT32))
            if label_type == SINGLE_LABEL and indices.size != 1:
                raise ValueError(f"{name}: {where}: a SINGLE_LABEL label tensor holds {indices.size} values, not 1")
            if label_type in (MULTI_LABEL_SPARSE, MULTI_LABEL_WEIGHTED_SPARSE):
                weighted = label_type == MULTI_LABEL_WEIGHTED_SPARSE
                dense = np.zeros(args.num_labels, np.float32 if weighted else indices.dtype)
                positions = indices.astype(np.int64)  # floats truncated, as a C cast does
                if positions.size and not 0 <= positions.min() <= positions.max() < dense.size:
                    raise ValueError(f"{name}: {where}: sparse label indices {positions.tolist()} outside 0.."
                                     f"{dense.size - 1} (num_labels {dense.size})")
                if weighted:
                    weights = tensor(consumed + 1, "label weights").get("float_data", np.zeros(0, np.float32))
                    if weights.size < positions.size:
                        raise ValueError(f"{name}: {where}: {positions.size} sparse label indices and {weights.size} "
                                         "weights")
                    dense[positions] = weights[:positions.size]
                else:
                    dense[positions] = 1
                indices = dense
            outputs[consumed] = indices
            consumed += 1
        # DALI's reader skips one tensor after a MULTI_LABEL_SPARSE label (and not after the weights
        # of a weighted one, which it then reads again as the first additional tensor)
        start = consumed + (label_type == MULTI_LABEL_SPARSE)
        end = start + args.additional_inputs
        for number in range(start, end):
            put(consumed, values(tensor(number, f"additional tensor {number - start}"),
                                 f"additional tensor {number - start}", (FLOAT, INT32, INT64)), "additional tensor")
            consumed += 1
        if len(tensors) == end + 1:
            box = tensors[end]
            if data_type(box) != INT32 or box.get("int32_data", np.zeros(0)).size != 4:
                raise ValueError(f"{name}: {where}: the tensor after the additional ones, the bounding box, is not "
                                 "4 INT32 values")
            put(consumed, box["int32_data"], "bounding box")
        unset = [number for number, output in enumerate(outputs) if output is None]
        if unset:
            raise ValueError(f"{name}: {where}: the record's {len(tensors)} tensors leave outputs {unset} of "
                             f"{len(outputs)} without data (image_available, label_type, additional_inputs and "
                             "bbox call for them)")
        return tuple(outputs)

    def _image(self, image: dict, where: str) -> np.ndarray:
        kind = image.get("data_type", FLOAT)
        if kind == STRING:
            strings = image.get("string_data", [])
            if not strings:
                raise ValueError(f"{self.name}: {where}: the image tensor (STRING) holds no string")
            return np.frombuffer(strings[0], np.uint8).copy()
        if kind == BYTE:
            dims = image.get("dims", np.zeros(0, np.int64))
            data = np.frombuffer(image.get("byte_data", b""), np.uint8)
            if dims.size < 2:
                raise ValueError(f"{self.name}: {where}: the raw image tensor (BYTE) has dims {dims.tolist()}, not "
                                 "(H, W) or (H, W, C)")
            shape = (int(dims[0]), int(dims[1]), int(dims[2]) if dims.size == 3 else 1)
            if min(shape) < 0 or shape[0] * shape[1] * shape[2] != data.size:
                raise ValueError(f"{self.name}: {where}: the raw image's size, {data.size} bytes, is not its dims' "
                                 f"{' x '.join(map(str, shape))}")
            return data.reshape(shape).copy()
        raise ValueError(f"{self.name}: {where}: the image tensor is {TYPE_NAMES[kind]}, not STRING (encoded) or "
                         "BYTE (raw pixels)")
