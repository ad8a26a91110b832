"""``readers.mxnet``: images and labels in MXNet's RecordIO files."""
from __future__ import annotations

import os
import struct

import numpy as np

from penstock import limits, registry
from penstock.contract import OutputSpec, SampleContext
from penstock.operators.readers.record_files import RecordFileReader, index_columns, one_index_each
from penstock.operators.shared.readers import RECORD_READER_ARGS, shuffle_after_epoch_moving
from penstock.schema import REQUIRED, Arg, OpSchema


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
