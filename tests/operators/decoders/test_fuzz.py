"""Property-based tests (Hypothesis) of the decoders and the readers: mutated image files either
decode or fail with DecodeError, never another exception; mutated record files (tar archives,
TFRecord, RecordIO, .npy) are read or refused with an error naming the file, without allocating
more than the file could hold; the file reader delivers every file's bytes exactly once per epoch
and shard, whatever the batch size and shard count.

CI runs a small example budget; `PENSTOCK_FUZZ_EXAMPLES=5000 python3 -m pytest tests/operators/decoders/test_fuzz.py`
runs a longer search.
"""
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import hostile_files as hostile  # noqa: E402
from test_hostile_files import DECODERS, _run  # noqa: E402

from penstock import PipelineError, fn, pipeline_def  # noqa: E402
from penstock.kernels import image_codecs  # noqa: E402

EXAMPLES = int(os.environ.get("PENSTOCK_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="PENSTOCK_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

PHOTO = hostile.photo(40, 48, seed=11)
SEEDS = {
    "JPEG": hostile.pillow_encoded(PHOTO, "JPEG"),
    "progressive JPEG": hostile.pillow_encoded(PHOTO, "JPEG", progressive=True),
    "CMYK JPEG": hostile.pillow_encoded(PHOTO, "JPEG", "CMYK"),
    "oriented JPEG": hostile.with_orientation(PHOTO, 6),
    "PNG": hostile.pillow_encoded(PHOTO, "PNG"),
    "GIF": hostile.pillow_encoded(PHOTO, "GIF", mode="P"),
    "BMP": hostile.pillow_encoded(PHOTO, "BMP"),
    "WebP": hostile.pillow_encoded(PHOTO, "WEBP"),
    "TIFF": hostile.pillow_encoded(PHOTO, "TIFF"),
}


def mutate(draw, seed: bytes, keep: int, most: int) -> bytes:
    """``seed`` with up to ``most`` changes: a few bytes overwritten, a range deleted or repeated, or
    the file cut short (never within its first ``keep`` bytes)."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, most))):
        kind = draw(st.sampled_from(["overwrite", "delete", "repeat", "truncate"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "overwrite":
            data[at:at + 4] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        else:
            del data[max(at, keep):]
        if len(data) <= keep:
            break
    return bytes(data)


@st.composite
def mutated_files(draw):
    """A seed image file, mutated."""
    data = mutate(draw, SEEDS[draw(st.sampled_from(sorted(SEEDS)))].tobytes(), keep=3, most=4)
    return np.frombuffer(data, np.uint8).copy()


@FUZZ
@given(data=mutated_files(), name=st.sampled_from(DECODERS))
def test_mutated_files_decode_or_fail_with_a_decode_error(data, name):
    try:
        image, _ = _run(name, data)
    except image_codecs.DecodeError:
        return
    except ValueError as error:  # a fixed window outside the (mutated) size: named as such
        assert "falls outside" in str(error)
        return
    assert image.dtype == np.uint8 and image.ndim == 3 and image.size > 0


@FUZZ
@given(files=st.lists(st.binary(min_size=0, max_size=64), min_size=1, max_size=12),
       batch_size=st.integers(1, 5), num_shards=st.integers(1, 3), shuffle=st.booleans())
def test_the_file_reader_delivers_every_file_once_per_epoch_and_shard(tmp_path_factory, files, batch_size,
                                                                      num_shards, shuffle):
    if len(files) < num_shards:
        num_shards = len(files)
    root = tmp_path_factory.mktemp("fuzz")
    paths = []
    for index, content in enumerate(files):
        path = root / f"file_{index:02d}.bin"
        path.write_bytes(content)
        paths.append(str(path))

    @pipeline_def(batch_size=batch_size, num_threads=1, seed=5)
    def read(shard_id):
        # padded: each epoch of a shard ends at its last sample (without padding, DALI's readers
        # go on into the next pass to fill the last batch, and epochs do not end on a batch)
        data, labels = fn.readers.file(files=paths, random_shuffle=shuffle, shard_id=shard_id,
                                       num_shards=num_shards, pad_last_batch=True, name="Reader")
        return data, labels
    for epoch_count in (1, 2):
        delivered = []
        for shard in range(num_shards):
            pipe = read(shard)
            for _ in range(epoch_count):
                while True:
                    data, labels = pipe.run()
                    info = pipe.last_epoch_info
                    delivered.extend((int(label[0]), bytes(sample))
                                     for sample, label in zip(map(data.at, range(info.valid)),
                                                              map(labels.at, range(info.valid))))
                    if info.last:
                        break
            pipe.close()
        expected = sorted((index, content) for index, content in enumerate(files)) * epoch_count
        assert sorted(delivered) == sorted(expected)


# ---- record formats: a mutated file is read, or refused naming the file ---------------------------
def _tar_seed() -> bytes:
    import io
    import tarfile
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for index in range(4):
            for ext, data in (("jpg", bytes([index]) * (20 + index)), ("cls", str(index).encode())):
                info = tarfile.TarInfo(f"s/{index:04d}.{ext}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _tfrecord_seed() -> bytes:
    import struct
    records = b""
    for index in range(4):
        # one Example with a bytes feature "data" and an int64 feature "label", as protobuf packs them
        data = bytes([index]) * (10 + index)
        feature_data = b"\x0a" + bytes([len(data)]) + data  # BytesList.value
        feature_label = b"\x1a\x03\x0a\x01" + bytes([index])  # Int64List, packed
        features = b""
        for name, feature in ((b"data", b"\x0a" + bytes([len(feature_data)]) + feature_data),
                              (b"label", feature_label)):
            entry = b"\x0a" + bytes([len(name)]) + name + b"\x12" + bytes([len(feature)]) + feature
            features += b"\x0a" + bytes([len(entry)]) + entry
        example = b"\x0a" + bytes([len(features)]) + features
        records += struct.pack("<Q", len(example)) + bytes(4) + example + bytes(4)
    return records


def _recordio_seed() -> bytes:
    import struct
    out = b""
    for index in range(4):
        payload = struct.pack("<IfQQ", 0, float(index), index, 0) + bytes([index]) * (9 + index)
        out += struct.pack("<II", 0xCED7230A, len(payload)) + payload + bytes(-len(payload) % 4)
    return out


def _npy_seed() -> bytes:
    import io
    buffer = io.BytesIO()
    np.save(buffer, np.arange(24, dtype=np.int16).reshape(2, 3, 4))
    return buffer.getvalue()



def _read_records(kind: str, path: str):
    from penstock import tfrecord
    if kind == "webdataset":
        return fn.readers.webdataset(paths=[path], ext=["jpg", "cls"], name="Reader")
    if kind == "tfrecord":
        read = fn.readers.tfrecord(path=[path], name="Reader",
                                   features={"data": tfrecord.FixedLenFeature((), tfrecord.string, ""),
                                             "label": tfrecord.FixedLenFeature([1], tfrecord.int64, -1)})
        return read["data"], read["label"]
    if kind == "mxnet":
        return fn.readers.mxnet(path=[path], name="Reader")
    return (fn.readers.numpy(files=[path], name="Reader"),)


RECORD_SEEDS = {"webdataset": (_tar_seed, ".tar"), "tfrecord": (_tfrecord_seed, ".tfrecord"),
                "mxnet": (_recordio_seed, ".rec"), "numpy": (_npy_seed, ".npy")}


@st.composite
def mutated_records(draw):
    kind = draw(st.sampled_from(sorted(RECORD_SEEDS)))
    return kind, mutate(draw, RECORD_SEEDS[kind][0](), keep=0, most=3)


@FUZZ
@given(case=mutated_records())
def test_mutated_record_files_are_read_or_refused_naming_the_file(tmp_path_factory, case):
    import tracemalloc
    kind, data = case
    path = str(tmp_path_factory.mktemp("records") / f"mutated{RECORD_SEEDS[kind][1]}")
    with open(path, "wb") as handle:
        handle.write(data)

    @pipeline_def(batch_size=2, num_threads=1, seed=5)
    def read():
        return _read_records(kind, path)

    tracemalloc.start()
    try:
        pipe = read()
        try:
            for _ in range(4):
                pipe.run()
                if pipe.last_epoch_info.last:
                    break
        finally:
            pipe.close()
    except (ValueError, OSError, PipelineError) as error:
        assert path in str(error) or "mutated" in str(error), f"{type(error).__name__} without the file: {error}"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 << 20, f"{kind}: {peak:,} bytes allocated for a {len(data)}-byte file"
