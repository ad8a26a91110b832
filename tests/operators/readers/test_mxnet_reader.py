"""readers.mxnet against RecordIO files written here to MXNet's format (dmlc-core's recordio.h and
ImageRecordIO's header): one label or several, a payload holding the magic number (split into
parts, as the writer splits it), im2rec's index files against walking the file, shards, and the
errors that name the record."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from conftest import encode, pillow_decode, smooth_image
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
import penstock
from penstock import fn, limits, pipeline_def

MAGIC = 0xCED7230A


def record(image: bytes, labels: list[float], key: int) -> bytes:
    """One ImageRecordIO record as MXNet's writer makes it: the header (flag, label, id, id2), the
    labels when there are several, the image; the payload split at every 4-byte aligned magic number
    into parts flagged 1, 2, ..., 3, each padded to 4 bytes."""
    flag = len(labels) if len(labels) > 1 else 0
    payload = struct.pack("<IfQQ", flag, labels[0] if not flag else 0.0, key, 0)
    payload += (np.float32(labels).tobytes() if flag else b"") + image
    magic = struct.pack("<I", MAGIC)
    cuts = [at for at in range(0, len(payload) - 3, 4) if payload[at:at + 4] == magic]
    pieces, start = [], 0
    for at in cuts:
        pieces.append(payload[start:at])
        start = at + 4
    pieces.append(payload[start:])
    out = b""
    for number, piece in enumerate(pieces):
        part_flag = 0 if len(pieces) == 1 else 1 if number == 0 else 3 if number == len(pieces) - 1 else 2
        out += struct.pack("<II", MAGIC, part_flag << 29 | len(piece)) + piece + bytes(-len(piece) % 4)
    return out


def write_rec(path, records: list[bytes], index_path=None) -> None:
    offsets, offset = [], 0
    with open(path, "wb") as handle:
        for data in records:
            handle.write(data)
            offsets.append(offset)
            offset += len(data)
    if index_path is not None:  # im2rec's: key, tab, offset; not in file order
        index_path.write_text("".join(f"{key}\t{offsets[key]}\n" for key in reversed(range(len(offsets)))))


def read_all(batch_size: int = 2, **reader_args) -> list[tuple]:
    return read_one_epoch(lambda: fn.readers.mxnet(name="Reader", **reader_args), batch_size)


def samples():
    images = [encode(smooth_image(12 + index, 16, seed=index), "JPEG", quality=95) for index in range(5)]
    # a payload holding the magic number at an aligned place: the writer splits it into parts
    images[2] = images[2][:8] + struct.pack("<I", MAGIC) + images[2][8:]
    labels = [[float(index)] if index % 2 else [float(index), 0.5 * index, -1.0] for index in range(5)]
    return images, labels


@pytest.mark.parametrize("indexed", [True, False])
def test_images_and_labels_read_as_written(tmp_path, indexed):
    images, labels = samples()
    records = [record(image, label, key) for key, (image, label) in enumerate(zip(images, labels))]
    assert struct.unpack("<I", records[2][4:8])[0] >> 29 == 1  # the third record was split into parts
    write_rec(tmp_path / "a.rec", records, tmp_path / "a.idx")
    read = read_all(path=[str(tmp_path / "a.rec")], index_path=[str(tmp_path / "a.idx")] if indexed else None)
    assert len(read) == len(images)
    for (image, label), want_image, want_labels in zip(read, images, labels):
        assert bytes(image) == want_image
        assert label.dtype == np.float32 and label.tolist() == want_labels


def test_dali_programs_decode_what_they_read(tmp_path):
    from penstock.compat.dali import fn as dali_fn
    images, labels = samples()
    write_rec(tmp_path / "a.rec", [record(image, [float(k)], k) for k, image in enumerate(images[:2])],
              tmp_path / "a.idx")

    @pipeline_def(batch_size=2, num_threads=2, device_id=None)
    def pipe():
        jpegs, label = dali_fn.readers.mxnet(path=[str(tmp_path / "a.rec")], index_path=[str(tmp_path / "a.idx")])
        return dali_fn.decoders.image(jpegs), label

    built = pipe()
    built.build()
    decoded, label = built.run()
    for index, image in enumerate(decoded):
        assert np.abs(np.array(image).astype(int) - pillow_decode(images[index])).max() <= 4
        assert np.array(label[index]).tolist() == [float(index)]
    built.close()
    assert dali_fn.mxnet_reader is dali_fn.readers.mxnet


def test_shards_read_every_record_once(tmp_path):
    write_rec(tmp_path / "a.rec", [record(bytes([k] * 5), [float(k)], k) for k in range(9)])
    seen = [int(label[0]) for shard in range(2)
            for _, label in read_all(path=[str(tmp_path / "a.rec")], shard_id=shard, num_shards=2, random_shuffle=True)]
    assert sorted(seen) == list(range(9))


def test_bad_files_and_indexes_are_clear_errors(tmp_path):
    write_rec(tmp_path / "a.rec", [record(b"image", [1.0], 0), record(b"image", [2.0], 1)], tmp_path / "a.idx")
    (tmp_path / "stale.idx").write_text("0\t0\n1\t43\n")  # the second record starts at byte 40
    with pytest.raises(penstock.PipelineError, match=r"a\.rec \(record at byte 43\).*no RecordIO magic number"):
        read_all(path=[str(tmp_path / "a.rec")], index_path=[str(tmp_path / "stale.idx")])
    (tmp_path / "junk.rec").write_bytes(b"not a record file at all")
    with pytest.raises(ValueError, match=r"junk\.rec.*no RecordIO magic number at byte 0"):
        read_all(path=[str(tmp_path / "junk.rec")])
    with pytest.raises(ValueError, match="readers.mxnet.*'index_path' names 1 index files for 2"):
        read_all(path=[str(tmp_path / "a.rec")] * 2, index_path=[str(tmp_path / "a.idx")])


def test_truncated_files_and_parts_out_of_place_are_refused_naming_the_file_and_the_byte(tmp_path):
    images, labels = samples()
    records = [record(image, label, key) for key, (image, label) in enumerate(zip(images, labels))]
    write_rec(tmp_path / "a.rec", records)
    data = (tmp_path / "a.rec").read_bytes()
    second = len(records[0])
    for cut, error, problem in (
            (second + 5, ValueError, rf"a RecordIO record cut short at byte {second} \(inside its 8-byte header\)"),
            (second + 20, limits.SizeClaimError, (rf"the RecordIO part at byte {second} \(padded to 4 bytes\) claims "
                                                  rf"\d+ bytes, more than the 12 bytes the file holds there")),
            (len(data) - 1, limits.SizeClaimError, r"the RecordIO part at byte \d+ \(padded to 4 bytes\) claims")):
        (tmp_path / "cut.rec").write_bytes(data[:cut])
        with pytest.raises(error, match=rf"'.*cut\.rec': {problem}"):
            read_all(path=[str(tmp_path / "cut.rec")])
    split = sum(map(len, records[:2]))  # the third record is in parts
    first_length = struct.unpack("<I", records[2][4:8])[0] & ((1 << 29) - 1)
    middle = split + 8 + (first_length + 3) // 4 * 4
    (tmp_path / "middle.idx").write_text(f"0\t0\n1\t{middle}\n")
    with pytest.raises(penstock.PipelineError, match=rf"a\.rec \(record at byte {middle}\): the RecordIO part at byte "
                                                     r"0 is flagged 3, where 0 \(whole\) or 1 \(first part\) belongs"):
        read_all(path=[str(tmp_path / "a.rec")], index_path=[str(tmp_path / "middle.idx")])
    (tmp_path / "magic.rec").write_bytes(data[:second] + b"\x0b" + data[second + 1:])
    with pytest.raises(ValueError, match=rf"magic\.rec': no RecordIO magic number at byte {second}"):
        read_all(path=[str(tmp_path / "magic.rec")])


def test_an_index_past_the_file_or_listing_a_record_twice_is_refused_naming_it(tmp_path):
    write_rec(tmp_path / "a.rec", [record(b"image", [1.0], 0), record(b"image", [2.0], 1)])
    for lines, problem in (("0\t0\n1\t4000\n", r"offset 4000 outside '.*a\.rec' \(80 bytes\)"),
                           ("0\t0\n1\t40\n2\t40\n", r"offset 40 twice")):
        (tmp_path / "a.idx").write_text(lines)
        with pytest.raises(ValueError, match=rf"readers.mxnet: index '.*a\.idx' lists {problem}"):
            read_all(path=[str(tmp_path / "a.rec")], index_path=[str(tmp_path / "a.idx")])


def test_a_label_count_past_the_record_is_refused(tmp_path):
    payload = struct.pack("<IfQQ", 1000, 0.0, 0, 0) + b"image"
    (tmp_path / "a.rec").write_bytes(struct.pack("<II", MAGIC, len(payload)) + payload + bytes(-len(payload) % 4))
    with pytest.raises(penstock.PipelineError, match=r"a\.rec \(record at byte 0\): its image header's label count "
                                                     r"claims 4,000 bytes, more than the 5 bytes") as raised:
        read_all(batch_size=1, path=[str(tmp_path / "a.rec")])
    assert isinstance(raised.value.__cause__, limits.SizeClaimError)
