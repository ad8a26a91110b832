"""Readers of record formats: ``readers.tfrecord`` (tf.train.Example records in TFRecord files;
penstock.tfrecord), ``readers.webdataset`` (samples of files grouped by name in tar archives) and
``readers.mxnet`` (images and labels in MXNet's RecordIO files). They share readers.file's epochs,
shards and shuffling (readers.ShardedReader)."""
from __future__ import annotations

import os
import struct

import numpy as np

from penstock import limits, registry, tfrecord
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.shared.readers import (RECORD_READER_ARGS, ShardedReader, o_direct_without_mmap, sharded_epochs,
                                               shuffle_after_epoch_moving)
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


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
        descriptors = self.__dict__.setdefault("_descriptors", {})
        descriptor = descriptors.get(number)
        if descriptor is None:  # two worker threads may get here at once: one descriptor is kept
            opened = os.open(self.files[number], os.O_RDONLY)
            descriptor = descriptors.setdefault(number, opened)
            if descriptor != opened:
                os.close(opened)
        # pread allocates what it is asked for: an index may claim more than the file holds
        limits.checked_bytes(where, size, 1, os.fstat(descriptor).st_size - offset)
        data = os.pread(descriptor, size, offset)
        if len(data) != size:  # the file shrank since its size was taken
            raise ValueError(f"{where}: the file ends {size - len(data)} bytes into it (a stale index?)")
        return data

    def shutdown(self) -> None:
        for descriptor in self.__dict__.pop("_descriptors", {}).values():
            os.close(descriptor)


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


# ---- readers.tfrecord ------------------------------------------------------------------------------
def _features_of(static: dict) -> dict:
    features = static.features
    if not isinstance(features, dict) or not features:
        raise ArgError("'features' takes a dict of feature name -> tfrecord.FixedLenFeature / VarLenFeature, "
                       f"got {type(features).__name__}")
    for name, feature in features.items():
        if not isinstance(name, str) or not isinstance(feature, tfrecord.Feature):
            raise ArgError(f"'features': {name!r} should name a tfrecord.FixedLenFeature, VarLenFeature or "
                           f"FixedLenSequenceFeature, got {type(feature).__name__}")
    return features


def _tfrecord_files(static: dict, per_sample: frozenset) -> None:
    _features_of(static)
    one_index_each(static)


registry.register_schema(OpSchema(
    name="readers.tfrecord",
    class_name="readers.TFRecord",
    doc="Reads tf.train.Example records from TFRecord files: one output per feature of ``features`` (a dict of "
        "name -> penstock.tfrecord.FixedLenFeature / VarLenFeature / FixedLenSequenceFeature, as "
        "nvidia.dali.tfrecord's), returned as a dict by name, as in DALI. A string feature gives its bytes as a "
        "1-D uint8 array (an encoded image for the decoders), int64 and float32 features arrays of their "
        "values. Samples are the records of the files in order (``index_path``, DALI's tfrecord2idx files, "
        "say where each starts; without them the files are scanned once at build).",
    args=(
        Arg("path", "paths", REQUIRED, "The TFRecord files."),
        Arg("index_path", "paths", None, "One index file per TFRecord file ('offset size' per record, as "
            "tfrecord2idx writes)."),
        Arg("features", "any", REQUIRED, "Feature name -> what to read (penstock.tfrecord)."),
        Arg("use_o_direct", "bool", False, "Accepted for DALI compatibility (with dont_use_mmap=True, as "
            "DALI's); files are read through the page cache."),
        *RECORD_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=lambda static: len(static.features),
    output_names=lambda static: tuple(static.features),
    input_names=(),
    is_source=True,
    checks=(_tfrecord_files, shuffle_after_epoch_moving, o_direct_without_mmap),
))


@registry.register("readers.tfrecord", "cpu")
class TFRecordReader(RecordFileReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.features = _features_of(args)
        self._wanted = frozenset(self.features)
        self.list_records(args, "readers.tfrecord",
                          lambda index, path: index_columns(index, (0, 1), "readers.tfrecord", "offset size"),
                          tfrecord.record_offsets)

    def load(self, index, sample: SampleContext) -> tuple:
        number, offset, size = self.records[index]
        where = self.paths[index]
        values = tfrecord.example_values(self.read_at(number, offset, size, where), self._wanted, where)
        return tuple(feature.array(values.get(name), f"{where}, feature '{name}'")
                     for name, feature in self.features.items())

    def declare_outputs(self, inputs):
        return tuple(OutputSpec(feature.dtype, feature.ndim, "") for feature in self.features.values())


# ---- readers.webdataset ----------------------------------------------------------------------------
WDS_TYPES = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32",
             "float64")  # what DALI's webdataset reader takes


MISSING_COMPONENT_BEHAVIORS = ("", "empty", "skip", "error")


def _webdataset_args(static: dict, per_sample: frozenset) -> None:
    one_index_each(static, per_sample, "paths", "index_paths")
    behavior = static.missing_component_behavior
    if behavior.lower() not in MISSING_COMPONENT_BEHAVIORS:
        raise ArgError(f"'missing_component_behavior' takes one of {', '.join(map(repr, MISSING_COMPONENT_BEHAVIORS))} "
                       f"(in any letter case), got {behavior!r}")
    dtypes = static.dtypes
    if any(not ext or any(not option for option in ext.split(";")) for ext in static.ext):
        raise ArgError(f"'ext' takes one set of extensions per output, options separated by ';', got "
                       f"{list(static.ext)}")
    if dtypes is not None:
        if len(dtypes) != len(static.ext):
            raise ArgError(f"'dtypes' gives {len(dtypes)} types for {len(static.ext)} outputs (one per 'ext')")
        for dtype in dtypes:
            if dtype.numpy.name not in WDS_TYPES:
                raise ArgError(f"'dtypes': {dtype.numpy.name} is not one of {', '.join(WDS_TYPES)}")


registry.register_schema(OpSchema(
    name="readers.webdataset",
    class_name="readers.Webdataset",
    doc="Reads samples of the webdataset format: tar archives whose files are grouped into samples by name "
        "(a sample's files are adjacent and share the name up to the first dot of their file name; the rest "
        "is the extension). One output per entry of ``ext``, each the bytes of the sample's file with one of "
        "that entry's extensions (options separated by ';'), as uint8 or as ``dtypes`` says. Files whose "
        "name starts with a dot, and entries that are not regular files, are left out, as in DALI. "
        "``index_paths`` (DALI's wds2idx files, v1.1 or v1.2) say where each sample's files lie; without "
        "them the archives are read once at build for their members.",
    args=(
        Arg("paths", "paths", REQUIRED, "The tar archives."),
        Arg("ext", "strs", REQUIRED, "Per output, the extensions its file may have, separated by ';' (e.g. "
            "'jpg;png'; extensions may hold dots, 'left.png')."),
        Arg("index_paths", "paths", None, "One index file per archive (DALI's wds2idx)."),
        Arg("case_sensitive_extensions", "bool", True, "Whether 'jpg' matches only 'jpg' (else also 'JPG')."),
        Arg("missing_component_behavior", "str", "", "A sample without a file for an output: '' or 'empty' "
            "(an empty array), 'skip' (the sample is left out) or 'error' (refused at build, naming it), in any "
            "letter case, as DALI."),
        Arg("dtypes", "dtypes", None, "Per output, the element type its bytes are read as (default uint8); "
            "a file's size must be a multiple of the type's."),
        *RECORD_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=lambda static: len(static.ext),
    input_names=(),
    is_source=True,
    checks=(_webdataset_args, shuffle_after_epoch_moving),
))


TAR_BLOCK = 512
_TAR_ZEROS = bytes(TAR_BLOCK)
_TAR_REGULAR = frozenset(b"07") | {0}  # regular and contiguous files; '\0' is the old regular file
_TAR_NO_DATA = frozenset(b"123456")  # links, devices, folders, FIFOs: their size field holds no data (tarfile's rule)


def _tar_number(field: bytes, what: str) -> int:
    """A tar header's number: octal digits (ended by NUL or space), or base-256 (GNU's large sizes)."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[:1] == b"\xff" else value
    digits = field.split(b"\x00", 1)[0].strip()
    try:
        return int(digits or b"0", 8)
    except ValueError:
        raise ValueError(f"{what}: its size field {field!r} is not a number") from None


def _tar_checksum_ok(block: bytes) -> bool:
    try:
        stored = int(block[148:156].split(b"\x00", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return False
    unsigned = sum(block[:148]) + sum(block[156:]) + 8 * 32
    signed = unsigned - 256 * sum(1 for byte in block[:148] + block[156:] if byte >= 128)
    return stored in (unsigned, signed)  # old writers summed signed chars


def _pax_records(data: bytes, what: str) -> dict:
    """The 'length key=value\n' records of a pax extended header."""
    records, position = {}, 0
    while position < len(data) and data[position] != 0:
        space = data.find(b" ", position)
        try:
            length = int(data[position:space]) if space > position else 0
        except ValueError:
            length = 0
        record = data[position:position + length]
        if length <= space - position or len(record) != length or not record.endswith(b"\n") or b"=" not in record:
            raise ValueError(f"{what}: a malformed pax record at byte {position} of its data")
        key, _, value = record[space - position + 1:-1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        position += length
    return records


def tar_members(path: str) -> list[tuple[str, int, int, int]]:
    """(name, type flag, data offset, size) of each member of an uncompressed tar archive, in order,
    with pax and GNU long names and pax sizes applied. Every header's checksum, and every size
    against what the file holds, is checked before anything is read for it: an archive cut short
    (inside a header, inside a member's data, or before its end-of-archive block), a header that is
    not one, or data after the end is an error naming the archive and the byte, never a shorter
    archive (Python's tarfile reads an archive cut inside a header as one that ends there)."""
    try:
        with open(path, "rb") as handle:
            return _walk_tar(handle, os.fstat(handle.fileno()).st_size)
    except ValueError as error:
        raise type(error)(f"cannot read '{path}' as an uncompressed tar archive: {error}") from None


def _walk_tar(handle, file_size: int) -> list[tuple[str, int, int, int]]:
    members, position, pending, global_pax = [], 0, {}, {}
    while True:
        handle.seek(position)
        block = handle.read(TAR_BLOCK)
        if not block:
            raise ValueError(f"it ends at byte {position:,} without tar's end-of-archive block (cut short)")
        if len(block) < TAR_BLOCK:
            raise ValueError(f"it is cut inside the member header at byte {position:,} ({len(block)} of its "
                             f"{TAR_BLOCK} bytes)")
        if block == _TAR_ZEROS:
            break
        where = f"the member header at byte {position:,}"
        if not _tar_checksum_ok(block):
            raise ValueError(f"{where} is not a tar header (its checksum does not match)")
        kind, size = block[156], _tar_number(block[124:136], where)
        data_offset = position + TAR_BLOCK
        if kind in b"xgLK":  # an extended header: its data describes the next member (x, L, K) or all (g)
            limits.checked_bytes(where, size, 1, file_size - data_offset)
            position = data_offset + -(-size // TAR_BLOCK) * TAR_BLOCK
            handle.seek(data_offset)
            data = handle.read(size)
            if kind == ord("x"):
                pending.update(_pax_records(data, where))
            elif kind == ord("g"):
                global_pax.update(_pax_records(data, where))
            elif kind == ord("L"):
                pending["path"] = data.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
            continue
        name = block[:100].split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
        prefix = block[345:500].split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
        if prefix and block[257:265] == b"ustar\x0000":  # POSIX ustar: long names split in two
            name = f"{prefix}/{name}"
        name = pending.get("path", global_pax.get("path", name))
        where = f"the member header at byte {position:,} ('{name}')"
        if kind == ord("S") or any(key.startswith("GNU.sparse.") for key in pending):
            raise ValueError(f"{where}: a sparse file, which readers.webdataset does not read")
        if kind == 0 and name.endswith("/"):
            kind = ord("5")
        if kind == ord("5"):
            name = name.rstrip("/")
        if kind in _TAR_NO_DATA:
            size = 0
        elif "size" in pending or "size" in global_pax:  # pax: sizes past the header field's 8 GiB
            text = pending.get("size", global_pax.get("size"))
            if not text.isdigit():
                raise ValueError(f"{where}: its pax size {text!r} is not a number")
            size = int(text)
        limits.checked_bytes(where, size, 1, file_size - data_offset)
        position = data_offset + -(-size // TAR_BLOCK) * TAR_BLOCK
        members.append((name, kind, data_offset, size))
        pending = {}
    # past the end-of-archive block only zeros may follow (tar's padding to its record size)
    end = position
    handle.seek(position)
    while position < file_size:
        chunk = handle.read(1 << 16)
        zeros = len(chunk) - len(chunk.lstrip(b"\x00"))
        if zeros < len(chunk):
            raise ValueError(f"it holds data at byte {position + zeros:,}, after its end-of-archive block at byte "
                             f"{end:,} (archives joined end to end?)")
        if not chunk:
            break
        position += len(chunk)
    return members


def tar_components(path: str) -> list[tuple[str, str, int, int]]:
    """(sample key, extension, data offset, size) of each regular file of a tar archive, in order;
    files whose name starts with a dot are left out."""
    try:
        members = tar_members(path)
    except OSError as error:
        raise FileNotFoundError(f"readers.webdataset: cannot read '{path}': {error.strerror}") from None
    except ValueError as error:
        raise type(error)(f"readers.webdataset: {error}") from None
    components = []
    for member_name, kind, offset, size in members:
        folder, _, name = member_name.rpartition("/")
        if kind not in _TAR_REGULAR or name.startswith("."):
            continue
        stem, _, extension = name.partition(".")
        components.append((f"{folder}/{stem}" if folder else stem, extension, offset, size))
    return components


def index_components(path: str, archive: str) -> list[list[tuple[str, int, int, str]]]:
    """Per sample, its files' (extension, data offset, size, name), from a wds2idx index file: as
    many samples as its first line says, each file inside the archive (v1.1 names none: '')."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise FileNotFoundError(f"readers.webdataset: cannot read index '{path}': {error.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"readers.webdataset: index '{path}' (of '{archive}') is not a text file") from None
    header = lines[0].split() if lines else []
    if len(header) != 2 or header[0] not in ("v1.1", "v1.2") or not header[1].isdigit():
        raise ValueError(f"readers.webdataset: index '{path}' (of '{archive}') does not start with 'v1.1 N' or "
                         f"'v1.2 N' (DALI's wds2idx), got {lines[0] if lines else 'an empty file'!r}")
    width = 4 if header[0] == "v1.2" else 3  # v1.2 adds each file's name
    archive_size = os.path.getsize(archive)
    samples = []
    for number, line in enumerate(lines[1:], 2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) % width:
            raise ValueError(f"readers.webdataset: index '{path}', line {number}: expected groups of {width} "
                             f"fields, got {len(fields)}")
        try:
            files = [(fields[k], int(fields[k + 1]), int(fields[k + 2]), fields[k + 3] if width == 4 else "")
                     for k in range(0, len(fields), width)]
        except ValueError:
            raise ValueError(f"readers.webdataset: index '{path}', line {number}: offsets and sizes are "
                             f"integers, got {line!r}") from None
        for extension, offset, size, _ in files:
            if not 0 <= offset <= archive_size:
                raise ValueError(f"readers.webdataset: index '{path}', line {number}: the '{extension}' file's offset "
                                 f"{offset} is outside '{archive}' ({archive_size:,} bytes)")
            limits.checked_bytes(f"readers.webdataset: index '{path}', line {number}: the '{extension}' file at byte "
                                 f"{offset} of '{archive}'", size, 1, archive_size - offset)
        samples.append(files)
    if len(samples) != int(header[1]):
        raise ValueError(f"readers.webdataset: index '{path}' (of '{archive}') says {int(header[1])} samples and "
                         f"lists {len(samples)}")
    return samples


def _grouped(components) -> list[tuple[str, list[tuple[str, int, int, str]]]]:
    """Adjacent files of one key as one sample: (key, [(extension, offset, size, name), ...])."""
    samples = []
    for key, extension, offset, size in components:
        if not samples or samples[-1][0] != key:
            samples.append((key, []))
        samples[-1][1].append((extension, offset, size, f"{key}.{extension}"))
    return samples


@registry.register("readers.webdataset", "cpu")
class WebdatasetReader(RecordFileReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        options = [ext.split(";") for ext in args.ext]
        sensitive = args.case_sensitive_extensions
        wanted = [[option if sensitive else option.lower() for option in group] for group in options]
        behavior = args.missing_component_behavior.lower() or "empty"
        self.files, self.samples, self.paths, self.sources = list(args.paths), [], [], []
        for number, archive in enumerate(self.files):
            if not os.path.isfile(archive):
                raise FileNotFoundError(f"readers.webdataset: '{archive}' is not a file")
            if args.index_paths is not None:
                grouped = [(f"sample {position}", files) for position, files in
                           enumerate(index_components(args.index_paths[number], archive))]
            else:
                grouped = _grouped(tar_components(archive))
            for key, files in grouped:
                found = {}
                for extension, offset, size, name in files:
                    found.setdefault(extension if sensitive else extension.lower(), (offset, size, name))
                parts = [next((found[option] for option in group if option in found), None) for group in wanted]
                if None in parts and behavior != "empty":
                    if behavior == "skip":
                        continue
                    missing = [args.ext[k] for k, part in enumerate(parts) if part is None]
                    raise ValueError(f"readers.webdataset: sample '{key}' of '{archive}' has no file for ext "
                                     f"{missing} (its files: {[extension for extension, *_ in files]}); "
                                     "missing_component_behavior='empty' or 'skip' allow it")
                self.samples.append((number, parts))
                self.paths.append(f"{archive}:{key}")
                # DALI's source_info names one file of the sample (that of its first output): archive:offset:name
                offset, _, name = next(part for part in parts + [(0, 0, "")] if part is not None)
                self.sources.append(f"{archive}:{offset}:{name}")
        if not self.samples:
            raise ValueError(f"readers.webdataset: no samples in {self.files} with files for ext "
                             f"{list(args.ext)}")
        dtypes = args.dtypes
        self.dtypes = [dtype.numpy for dtype in dtypes] if dtypes is not None else [np.dtype(np.uint8)] * len(wanted)
        self.epochs = sharded_epochs(args, context, len(self.samples), "readers.webdataset",
                                     [number for number, _ in self.samples])

    def load(self, index, sample: SampleContext) -> tuple:
        number, parts = self.samples[index]
        outputs = []
        for output, (part, dtype) in enumerate(zip(parts, self.dtypes)):
            if part is None:
                outputs.append(np.zeros(0, dtype))
                continue
            offset, size, _ = part
            where = f"{self.paths[index]}, the file of ext '{self.args.ext[output]}'"
            data = self.read_at(number, offset, size, where)
            if size % dtype.itemsize:
                raise ValueError(f"{self.paths[index]}: the file of ext '{self.args.ext[output]}' holds {size} "
                                 f"bytes, not a whole number of {dtype.name} values")
            outputs.append(np.frombuffer(data, dtype))
        return tuple(outputs)

    def declare_outputs(self, inputs):
        return tuple(OutputSpec(dtype, 1, "") for dtype in self.dtypes)


# ---- readers.mxnet ---------------------------------------------------------------------------------
RECORDIO_MAGIC = 0xCED7230A
IMAGE_HEADER = np.dtype([("flag", "<u4"), ("label", "<f4"), ("id", "<u8"), ("id2", "<u8")])  # ImageRecordIO's


def _recordio_part(head: bytes, position: int, available: int, first: bool, where: str) -> tuple[int, int, int]:
    """(flag, payload length, where the next part starts) of the part whose 8-byte header ``head``
    is at ``position``, ``available`` bytes of the data following the header; ``first``: the
    record's first part (flag 0 or 1; the parts after it 2 or 3)."""
    if len(head) < 8:
        raise ValueError(f"{where}: a RecordIO record cut short at byte {position} (inside its 8-byte header)")
    magic, word = struct.unpack("<II", head)
    if magic != RECORDIO_MAGIC:
        raise ValueError(f"{where}: no RecordIO magic number at byte {position} (not a RecordIO file, or a "
                         "stale index)")
    flag, length = word >> 29, word & ((1 << 29) - 1)
    if (flag in (0, 1)) != first or flag > 3:
        expected = "0 (whole) or 1 (first part)" if first else "2 (middle part) or 3 (last part)"
        raise ValueError(f"{where}: the RecordIO part at byte {position} is flagged {flag}, where {expected} "
                         "belongs (a stale index, or a damaged file)")
    padded = length + (-length % 4)  # every part is padded to 4 bytes
    limits.checked_bytes(f"{where}: the RecordIO part at byte {position} (padded to 4 bytes)", padded, 1, available)
    return flag, length, position + 8 + padded


def _recordio_parts(data: bytes, where: str):
    """(part flag, payload) of each part of the record ``data`` starts with: one part (flag 0), or
    parts flagged 1 (first), 2 (middle) and 3 (last) where the writer split the payload at a magic number."""
    position = 0
    while True:
        flag, length, following = _recordio_part(data[position:position + 8], position, len(data) - position - 8,
                                                 position == 0, where)
        yield flag, data[position + 8:position + 8 + length]
        position = following
        if flag in (0, 3):
            return


def recordio_offsets(path: str) -> list[tuple[int, int]]:
    """(offset, size) of every record of a RecordIO file, found by walking its part headers (what
    an .idx file lists); each part's length is checked against what the file holds."""
    offsets, position = [], 0
    with open(path, "rb") as handle:
        file_size = os.fstat(handle.fileno()).st_size
        while position < file_size:
            start, flag = position, None
            while flag not in (0, 3):
                handle.seek(position)
                flag, _, position = _recordio_part(handle.read(8), position, file_size - position - 8,
                                                   position == start, f"'{path}'")
            offsets.append((start, position - start))
    return offsets


def read_recordio_index(path: str, data_file: str) -> list[tuple[int, int]]:
    """(offset, size) of each record from an im2rec index ('key offset' lines), in the order of the
    offsets; each record runs to the next one (the last to the file's end)."""
    starts = sorted(offset for (offset,) in index_columns(path, (1,), "readers.mxnet", "key offset"))
    file_size = os.path.getsize(data_file)
    for before, start in zip([None] + starts, starts):
        if start == before or not 0 <= start < file_size:
            problem = "twice" if start == before else f"outside '{data_file}' ({file_size:,} bytes)"
            raise ValueError(f"readers.mxnet: index '{path}' lists offset {start} {problem}")
    ends = starts[1:] + [file_size]
    return [(start, end - start) for start, end in zip(starts, ends)]


def image_record(record: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(encoded image, labels) of an ImageRecordIO record: its header's label, or the header's flag
    labels that follow it."""
    payload = b"".join(part if flag in (0, 1) else RECORDIO_MAGIC.to_bytes(4, "little") + part
                       for flag, part in _recordio_parts(record, where))
    if len(payload) < IMAGE_HEADER.itemsize:
        raise ValueError(f"{where}: a record of {len(payload)} bytes has no image header")
    header = np.frombuffer(payload, IMAGE_HEADER, count=1)[0]
    count = int(header["flag"])
    limits.checked_bytes(f"{where}: its image header's label count", count, 4, len(payload) - IMAGE_HEADER.itemsize)
    start = IMAGE_HEADER.itemsize + 4 * count
    labels = np.frombuffer(payload, "<f4", count, IMAGE_HEADER.itemsize).copy() if count else \
        np.array([header["label"]], np.float32)
    return np.frombuffer(payload, np.uint8, offset=start).copy(), labels


registry.register_schema(OpSchema(
    name="readers.mxnet",
    class_name="readers.MXNet",
    doc="Reads MXNet's ImageRecordIO files (im2rec's .rec): the encoded images (uint8, 1-D) and their labels "
        "(float32, 1-D: the header's label, or the several labels the header announces). ``index_path`` "
        "(im2rec's .idx files) says where each record starts; without them the files are walked once at build.",
    args=(
        Arg("path", "paths", REQUIRED, "The RecordIO files."),
        Arg("index_path", "paths", None, "One index file per RecordIO file ('key offset' per record, as im2rec "
            "writes)."),
        *RECORD_READER_ARGS,
    ),
    num_inputs=(0, 0),
    num_outputs=2,
    input_names=(),
    is_source=True,
    checks=(one_index_each, shuffle_after_epoch_moving),
))


@registry.register("readers.mxnet", "cpu")
class MXNetReader(RecordFileReader):
    def __init__(self, args, context):
        super().__init__(args, context)
        self.list_records(args, "readers.mxnet", read_recordio_index, recordio_offsets)

    def load(self, index, sample: SampleContext) -> tuple:
        number, offset, size = self.records[index]
        return image_record(self.read_at(number, offset, size, self.paths[index]), self.paths[index])

    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.uint8), 1, ""), OutputSpec(np.dtype(np.float32), 1, "")
