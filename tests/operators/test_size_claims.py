"""Every place where a size read from a file becomes an allocation refuses a claim the file cannot
back before allocating anything for it (penstock.limits): decoded images and frames, readers.coco's
pixelwise masks, .npy headers, TFRecord records and their protobuf fields, RecordIO parts and label
counts, tar member and extended headers, and the index files of the record readers.

Each case writes a small file (a few hundred bytes) that claims hundreds of megabytes (or more
pixels than max_pixels), builds the reader as a pipeline builds it and loads its first sample
(the decoders run in a pipeline, which names the file): the error is a SizeClaimError, or is caused
by one, and names the file; tracemalloc's peak over the failing call stays under 4 MiB, and the
call takes well under a second. The claims stay below a gigabyte, so that a regression fails here
without taking the machine's memory."""
from __future__ import annotations

import json
import os
import time
import tracemalloc

import pytest

import hostile_files as hostile
import penstock
from penstock import fn, limits, pipeline_def, registry
from penstock.contract import BuildContext, SampleContext

CLAIM = 200 << 20  # bytes claimed by the record, array and archive headers below
PEAK_LIMIT = 4 << 20
SECONDS = 1.0


def _build(name: str, **kwargs):
    """The reader's implementation, built as a pipeline builds it."""
    args, _ = registry.get_schema(name).validate(kwargs)
    context = BuildContext(batch_size=1, num_threads=1, device_id=None, seed=7)
    return registry.implementations()[(name, "cpu")](args, context)


def _first_sample(name: str, **kwargs):
    """(build the reader, load its first sample with what the build made)."""
    def load(reader):
        try:
            return reader.load(0, SampleContext(0, reader.paths[0]))
        finally:
            reader.shutdown()
    return lambda: _build(name, **kwargs), load


def _write(path, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    return str(path)


# ---- the places: each returns (build, load) and the file the error names (or files, any of them) ------
def decoded_image(tmp_path):
    path = _write(tmp_path / "bomb.jpg", hostile.jpeg_bomb(12000, 12000).tobytes())

    @pipeline_def(batch_size=1, num_threads=1, seed=1, device_id=None)
    def decode():
        data, _ = fn.readers.file(files=[path])
        return fn.decoders.image(data)
    def build():
        pipe = decode()
        pipe.build()
        return pipe

    def run(pipe):
        try:
            pipe.run()
        finally:
            pipe.close()
    return (build, run), "bomb.jpg"


def sequence_frame(tmp_path):
    _write(tmp_path / "streams" / "s" / "frame_0.jpg", hostile.jpeg_bomb(12000, 12000).tobytes())
    return _first_sample("readers.sequence", file_root=str(tmp_path / "streams"), sequence_length=1), \
        "frame_0.jpg"


def sequence_png_frame(tmp_path):
    _write(tmp_path / "streams" / "s" / "frame_0.png", hostile.png_bomb(12000, 12000).tobytes())
    return _first_sample("readers.sequence", file_root=str(tmp_path / "streams"), sequence_length=1), \
        "frame_0.png"


def coco_pixelwise_mask(tmp_path):
    _write(tmp_path / "images" / "a.jpg", hostile.pillow_encoded(hostile.photo(16, 16), "JPEG").tobytes())
    document = {"images": [{"id": 1, "file_name": "a.jpg", "width": 60000, "height": 60000}],
                "annotations": [], "categories": [{"id": 1, "name": "thing"}]}
    (tmp_path / "instances.json").write_text(json.dumps(document))
    return _first_sample("readers.coco", file_root=str(tmp_path / "images"),
                               annotations_file=str(tmp_path / "instances.json"), pixelwise_masks=True), \
        ("instances.json", "a.jpg")


def npy_shape(tmp_path):
    path = _write(tmp_path / "a.npy", hostile.npy_claiming((CLAIM // 4,)))
    return _first_sample("readers.numpy", files=[path]), "a.npy"


def npy_shape_of_a_later_file(tmp_path):
    first = _write(tmp_path / "a.npy", hostile.npy_claiming((4,), held=16))
    second = _write(tmp_path / "b.npy", hostile.npy_claiming((CLAIM // 64, 4, 4)))
    return (lambda: _build("readers.numpy", files=[first, second]),
            lambda reader: reader.load(1, SampleContext(1, second))), "b.npy"


def npy_header_length(tmp_path):
    data = hostile.npy_claiming((4,), held=16)
    path = _write(tmp_path / "a.npy", data[:8] + (0xFFFF).to_bytes(2, "little") + data[10:])  # version 1: 2 bytes
    return _first_sample("readers.numpy", files=[path]), "a.npy"


def npy_header_length_of_a_later_file(tmp_path):
    first = _write(tmp_path / "a.npy", hostile.npy_claiming((4,), held=16))
    data = hostile.npy_file({"descr": "<f4", "fortran_order": False, "shape": (4,)}, bytes(16), version=(2, 0))
    second = _write(tmp_path / "b.npy", data[:8] + (CLAIM).to_bytes(4, "little") + data[12:])
    return (lambda: _build("readers.numpy", files=[first, second]),
            lambda reader: reader.load(1, SampleContext(1, second))), "b.npy"


TFRECORD_FEATURES = {"n": penstock.tfrecord.VarLenFeature(penstock.tfrecord.int64, 0)}


def tfrecord_length(tmp_path):
    path = _write(tmp_path / "a.tfrecord", hostile.tfrecord_record(b"\x00" * 40, length=CLAIM))
    return _first_sample("readers.tfrecord", path=[path], features=TFRECORD_FEATURES), "a.tfrecord"


def tfrecord_index_entry(tmp_path):
    path = _write(tmp_path / "a.tfrecord", hostile.tfrecord_record(b""))
    (tmp_path / "a.idx").write_text(f"0 {CLAIM}\n")
    return _first_sample("readers.tfrecord", path=[path], index_path=[str(tmp_path / "a.idx")],
                               features=TFRECORD_FEATURES), "a.tfrecord"


def tfrecord_feature_length(tmp_path):
    path = _write(tmp_path / "a.tfrecord", hostile.tfrecord_record(hostile.example_field_claiming(CLAIM)))
    return _first_sample("readers.tfrecord", path=[path], features=TFRECORD_FEATURES), "a.tfrecord"


def recordio_length(tmp_path):
    path = _write(tmp_path / "a.rec", hostile.recordio_part(b"\x00" * 40, length=(1 << 29) - 1))
    return _first_sample("readers.mxnet", path=[path]), "a.rec"


def recordio_label_count(tmp_path):
    payload = hostile.image_record_payload(b"jpeg", label_count=CLAIM // 4)
    path = _write(tmp_path / "a.rec", hostile.recordio_part(payload))
    return _first_sample("readers.mxnet", path=[path]), "a.rec"


def tar_member_size(tmp_path):
    data = hostile.tar_member("a.jpg", b"jpeg") + hostile.tar_header("a.cls", CLAIM) + b"3" + bytes(1535)
    path = _write(tmp_path / "a.tar", data)
    return _first_sample("readers.webdataset", paths=[path], ext=["jpg", "cls"]), "a.tar"


def tar_extended_header_size(tmp_path):
    data = hostile.tar_header("././@PaxHeader", CLAIM, kind=b"x") + b"20 path=a/long.jpg\n" + bytes(1024)
    path = _write(tmp_path / "a.tar", data)
    return _first_sample("readers.webdataset", paths=[path], ext=["jpg"]), "a.tar"


def webdataset_index_entry(tmp_path):
    path = _write(tmp_path / "a.tar", hostile.tar_archive([("a.jpg", b"jpeg"), ("a.cls", b"3")]))
    (tmp_path / "a.idx").write_text(f"v1.1 1\njpg 512 4 cls 1536 {CLAIM}\n")
    return _first_sample("readers.webdataset", paths=[path], index_paths=[str(tmp_path / "a.idx")],
                               ext=["jpg", "cls"]), "a.idx"


PLACES = {place.__name__: place for place in (
    decoded_image, sequence_frame, sequence_png_frame, coco_pixelwise_mask, npy_shape, npy_shape_of_a_later_file,
    npy_header_length, npy_header_length_of_a_later_file, tfrecord_length, tfrecord_index_entry,
    tfrecord_feature_length, recordio_length, recordio_label_count, tar_member_size, tar_extended_header_size,
    webdataset_index_entry)}


def _size_claim_in(error: BaseException) -> limits.SizeClaimError | None:
    while error is not None:
        if isinstance(error, limits.SizeClaimError):
            return error
        error = error.__cause__ or error.__context__
    return None


def _traced(call) -> tuple[object, BaseException | None, int, float]:
    """(what ``call`` returned, what it raised, tracemalloc's peak while it ran, its seconds)."""
    result, raised = None, None
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = call()
    except Exception as error:  # which error: the caller checks it, with its causes
        raised = error
    finally:
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result, raised, peak, seconds


@pytest.mark.parametrize("place", list(PLACES))
def test_a_size_claim_the_file_cannot_back_is_refused_before_allocating(tmp_path, place):
    """Traced: the step that refuses, the build where the claim is found at build (readers that walk
    or index their files then), else the load."""
    (build, load), file_name = PLACES[place](tmp_path)
    made, raised, peak, seconds = _traced(build)
    if raised is None:
        _, raised, peak, seconds = _traced(lambda: load(made))
    assert raised is not None, f"{place}: nothing refused"
    claim = _size_claim_in(raised)
    assert claim is not None, f"{place}: {type(raised).__name__}: {raised}"
    names = (file_name,) if isinstance(file_name, str) else file_name
    assert any(name in str(raised) for name in names), str(raised)
    assert "claims" in str(claim)
    assert peak < PEAK_LIMIT, f"{place}: {peak / 2**20:.1f} MiB allocated before the error"
    assert seconds < SECONDS, f"{place}: {seconds:.2f} s"


def test_claims_the_file_backs_are_read():
    """The limits are no tighter than the files: a claim of exactly what the file holds passes."""
    assert limits.checked_bytes("a header", (3, 4), 4, 48) == 48
    assert limits.checked_bytes("a header", 0, 1, 0) == 0
    assert limits.checked_pixels("a header", 9459, 9459) == 9459 * 9459  # just under the default max_pixels
    with pytest.raises(limits.SizeClaimError, match=r"a header claims shape \(3, 4\) = 48 bytes, more than the 47"):
        limits.checked_bytes("a header", (3, 4), 4, 47)
    with pytest.raises(limits.SizeClaimError, match="negative"):
        limits.checked_bytes("a header", (-1, 4), 4, 100)
