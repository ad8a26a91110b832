"""``readers.webdataset``: samples of files grouped by name in tar archives (the archives walked here,
without tarfile: their members, PAX records and checksums)."""
from __future__ import annotations

import os

import numpy as np

from penstock import limits, registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.record_files import RecordFileReader, one_index_each
from penstock.operators.shared.readers import RECORD_READER_ARGS, sharded_epochs, shuffle_after_epoch_moving
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


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
