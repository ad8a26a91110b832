"""readers.caffe and readers.caffe2 over LMDB databases written here (Caffe Datum and Caffe2
TensorProtos records encoded by the conformance tier's small protobuf writer), against the values
written and against DALI's own readers on the same databases."""
import importlib
import struct
import sys

import numpy as np
import pytest

lmdb = pytest.importorskip("lmdb")

from conformance.cases_readers import datum, proto_field, varint  # noqa: E402
from conformance.cases_readers import lmdb_database as database  # noqa: E402
from conformance.cases_readers import tensor_proto as tensor  # noqa: E402
from conformance.cases_readers import tensor_protos as protos  # noqa: E402
from penstock.compat.dali import fn, ops, pipeline_def  # noqa: E402
from penstock.operators.readers.lmdb_readers import TENSOR_PROTO, Field, decode_message  # noqa: E402
from penstock import PipelineError  # noqa: E402


def pixels(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


STRING, BYTE, FLOAT, INT32, INT64 = 4, 3, 1, 2, 10
JPEG_LIKE = [b"\xff\xd8encoded-%d" % k for k in range(4)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("lmdb")
    raw = [pixels((2 + k, 3, 3 - k % 2 * 2), k) for k in range(4)]
    return {
        # keys written out of order: the reader takes them in LMDB's (byte) order
        "encoded": database(str(root / "encoded"), {
            b"03": datum(3, 4, 5, JPEG_LIKE[3], label=7, encoded=True),
            b"01": datum(data=JPEG_LIKE[1], label=-2),  # no 'encoded' field: encoded
            b"02": datum(data=JPEG_LIKE[2]),  # no label
            b"00": datum(label=5, encoded=1),  # no data
            b"0\x00x": datum(data=JPEG_LIKE[0], label=2**31 - 1)}),
        "raw": database(str(root / "raw"), {b"%02d" % k: datum(image.shape[2], image.shape[0], image.shape[1],
                                                         data=image.tobytes(), label=k, encoded=False)
                                      for k, image in enumerate(raw)}),
        "raw_images": raw,
        "c2": database(str(root / "c2"), {b"k%d" % k: protos(
            tensor(dims=raw[k].shape if k else raw[k].shape[:2], data_type=BYTE,
                   raw=(raw[k] if k else raw[k][..., :1]).tobytes()),
            tensor(data_type=INT32, ints=[k, 4 - k] if k % 2 else [k]),
            tensor(data_type=FLOAT, floats=[0.5 * k, 1.5]),
            tensor(data_type=INT64, longs=[2**40 + k]),
            tensor(data_type=INT32, ints=[k, k + 1, k + 2, k + 3])) for k in range(4)}),
        "c2_encoded": database(str(root / "c2_encoded"), {b"k%d" % k: protos(
            tensor(data_type=STRING, strings=[JPEG_LIKE[k]]), tensor(floats=[k + 0.25])) for k in range(3)}),
        "bad": database(str(root / "bad"), {b"a": datum(data=b"x", label=1), b"b": b"\x22\x05ab"}),
        "bad_raw": database(str(root / "bad_raw"), {b"a": datum(3, 2, 2, b"x", encoded=False)}),
        "mixed": database(str(root / "mixed"), {b"a": datum(data=b"x"), b"b": datum(1, 1, 1, b"y", encoded=False)}),
        "empty": database(str(root / "empty"), {}),
        "root": root,
    }


def run(library, reader, batch_size=4, iterations=1, **kwargs):
    """Each iteration's outputs, as lists of numpy arrays, of a pipeline of one reader."""
    module = importlib.import_module(library)

    @module.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        outputs = getattr(importlib.import_module(f"{library}.fn").readers, reader)(**kwargs)
        return tuple(outputs) if isinstance(outputs, list) else outputs
    built = pipe()
    built.build()
    results = []
    for _ in range(iterations):
        outputs = built.run()
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results.append([[np.array(batch[k]) for k in range(len(batch))] for batch in outputs])
    return results


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for our_iteration, their_iteration in zip(ours, theirs):
        assert len(our_iteration) == len(their_iteration)
        for our_batch, their_batch in zip(our_iteration, their_iteration):
            for our, their in zip(our_batch, their_batch, strict=True):
                assert our.dtype == their.dtype and our.shape == their.shape
                np.testing.assert_array_equal(our, their)


# ---- readers.caffe -----------------------------------------------------------------------------------
def test_caffe_reads_encoded_images_and_labels_in_key_order(data):
    (images, labels), = run("penstock.compat.dali", "caffe", batch_size=5, path=data["encoded"])
    assert [image.tobytes() for image in images] == [JPEG_LIKE[0], b"", JPEG_LIKE[1], JPEG_LIKE[2], JPEG_LIKE[3]]
    assert all(image.dtype == np.uint8 and image.ndim == 1 for image in images)
    assert [label.tolist() for label in labels] == [[2**31 - 1], [5], [-2], [], [7]]
    assert all(label.dtype == np.int32 for label in labels)


def test_caffe_gives_raw_datums_as_height_width_channels(data):
    (images, labels), = run("penstock.compat.dali", "caffe", path=data["raw"])
    for image, expected in zip(images, data["raw_images"]):
        assert image.shape == expected.shape
        np.testing.assert_array_equal(image, expected)
    assert [label.tolist() for label in labels] == [[0], [1], [2], [3]]


@pytest.mark.parametrize("kwargs", [
    {"path": "encoded", "batch_size": 5},
    {"path": "raw", "iterations": 3, "batch_size": 3},
    {"path": ["raw", "raw"], "label_available": False, "iterations": 2, "batch_size": 3},
    {"path": "raw", "image_available": False},
    {"path": "raw", "num_shards": 3, "shard_id": 1, "pad_last_batch": True, "iterations": 3, "batch_size": 2},
    {"path": "raw", "num_shards": 2, "shard_id": 1, "stick_to_shard": True, "iterations": 3, "batch_size": 3},
])
def test_caffe_matches_dali(data, kwargs):
    pytest.importorskip("nvidia.dali")
    paths = kwargs.pop("path")
    kwargs["path"] = [data[path] for path in paths] if isinstance(paths, list) else data[paths]
    assert_same(run("penstock.compat.dali", "caffe", **kwargs), run("nvidia.dali", "caffe", **kwargs))


def test_caffe_reader_meta_is_dalis(data):
    dali = pytest.importorskip("nvidia.dali")
    metas = []
    for module in (importlib.import_module("penstock.compat.dali"), dali):
        @module.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            images, _ = module.fn.readers.caffe(path=data["raw"], num_shards=3, shard_id=2, pad_last_batch=True,
                                                name="Reader")
            return images
        built = pipe()
        built.build()
        metas.append({key: int(value) for key, value in built.reader_meta("Reader").items()
                      if key in ("epoch_size", "epoch_size_padded", "number_of_shards", "shard_id",
                                 "pad_last_batch", "stick_to_shard")})
    assert metas[0] == metas[1]


def test_the_older_names_and_the_ops_form_are_the_readers(data):
    assert fn.caffe_reader is fn.readers.caffe and fn.caffe2_reader is fn.readers.caffe2
    assert ops.CaffeReader is ops.readers.Caffe and ops.Caffe2Reader is ops.readers.Caffe2

    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        return tuple(ops.CaffeReader(path=data["raw"])())
    built = pipe()
    built.build()
    images, labels = built.run()
    np.testing.assert_array_equal(np.array(images[2]), data["raw_images"][2])


def test_a_corrupt_record_names_the_reader_the_database_and_the_key(data):
    with pytest.raises(PipelineError, match=r"readers\.caffe: .*bad at key b: cannot parse the record as a Caffe "
                                            r"Datum \(4 bytes\)"):
        run("penstock.compat.dali", "caffe", batch_size=2, path=data["bad"])
    with pytest.raises(PipelineError, match=r"bad_raw at key a: the raw image's size, 1 bytes, is not its height x "
                                            r"width x channels = 2 x 2 x 3"):
        run("penstock.compat.dali", "caffe", batch_size=1, path=data["bad_raw"])
    with pytest.raises(PipelineError, match=r"mixed at key b: output 0 is 3-D uint8, that of the first record "
                                            r"\(.*mixed at key a\) 1-D uint8"):
        run("penstock.compat.dali", "caffe", batch_size=2, path=data["mixed"])


def test_a_missing_or_empty_database_is_refused_at_build(data):
    with pytest.raises(FileNotFoundError, match=r"readers\.caffe: the database '.*nope' does not exist"):
        run("penstock.compat.dali", "caffe", path=str(data["root"] / "nope"))
    with pytest.raises(FileNotFoundError, match=r"readers\.caffe2: the database '.*data\.mdb' is not a folder"):
        run("penstock.compat.dali", "caffe2", path=data["raw"] + "/data.mdb")
    (data["root"] / "folder").mkdir(exist_ok=True)
    with pytest.raises(FileNotFoundError, match=r"readers\.caffe: the database folder '.*folder' holds no data\.mdb"):
        run("penstock.compat.dali", "caffe", path=str(data["root"] / "folder"))
    with pytest.raises(ValueError, match=r"readers\.caffe: no records in \['.*empty'\]"):
        run("penstock.compat.dali", "caffe", path=data["empty"])
    with pytest.raises(TypeError, match=r"readers\.caffe: unknown argument 'shuffle_after_epoch'"):
        fn.readers.caffe(path=data["raw"], shuffle_after_epoch=True)


def test_without_the_lmdb_package_the_error_says_how_to_install_it(data, monkeypatch):
    monkeypatch.setitem(sys.modules, "lmdb", None)
    with pytest.raises(ImportError, match=r"readers\.caffe reads LMDB databases with the lmdb package: pip install "
                                          "lmdb"):
        run("penstock.compat.dali", "caffe", path=data["raw"])


# ---- readers.caffe2 ----------------------------------------------------------------------------------
CAFFE2_CASES = [
    {"label_type": 2, "batch_size": 4},
    {"label_type": 2, "additional_inputs": 1, "bbox": True},
    {"label_type": 2, "additional_inputs": 2},
    {"label_type": 1, "num_labels": 6, "additional_inputs": 1},  # the box fills the sparse type's extra output
    {"label_type": 1, "num_labels": 6},  # the extra output left without data
    {"label_type": 3, "num_labels": 5, "additional_inputs": 2},  # the weights are read again as a further tensor
    {"label_type": 3, "num_labels": 5, "additional_inputs": 1},
    {"label_type": 2, "additional_inputs": 1, "iterations": 3, "batch_size": 3, "num_shards": 2, "shard_id": 1},
    {"label_type": 4, "additional_inputs": 3, "image_available": False},  # the image tensor is no additional one
    {"label_type": 0},  # labels of two values
    {"label_type": 2, "bbox": True},  # no tensor for the box
    {"label_type": 2, "additional_inputs": 1},  # one tensor more than the outputs
    {"label_type": 1, "num_labels": 2},  # an index past num_labels
]


def _caffe2(library, data, case):
    case = dict(case)
    return run(library, "caffe2", path=data["c2"], batch_size=case.pop("batch_size", 2),
               iterations=case.pop("iterations", 1), **case)


@pytest.mark.parametrize("case", CAFFE2_CASES)
def test_caffe2_matches_dali(data, case):
    pytest.importorskip("nvidia.dali")
    try:
        theirs = _caffe2("nvidia.dali", data, case)
    except RuntimeError:
        with pytest.raises(PipelineError, match=r"readers\.caffe2: .*c2 at key k\d"):
            _caffe2("penstock.compat.dali", data, case)
        return
    assert_same(_caffe2("penstock.compat.dali", data, case), theirs)


def test_caffe2_images_labels_and_further_tensors(data):
    (images, labels, floats, longs, boxes), = run("penstock.compat.dali", "caffe2", batch_size=4, path=data["c2"],
                                                  label_type=2, additional_inputs=2, bbox=True)
    raw = data["raw_images"]
    np.testing.assert_array_equal(images[0], raw[0][..., :1])
    np.testing.assert_array_equal(images[2], raw[2])
    np.testing.assert_array_equal(images[1], raw[1])
    assert [label.tolist() for label in labels] == [[0], [1, 3], [2], [3, 1]]
    assert labels[0].dtype == np.int32 and floats[1].dtype == np.float32 and longs[0].dtype == np.int64
    assert floats[3].tolist() == [1.5, 1.5] and longs[2].tolist() == [2**40 + 2]
    assert boxes[1].tolist() == [1, 2, 3, 4] and boxes[1].dtype == np.int32


def test_caffe2_sparse_labels_spread_over_num_labels(data):
    (_, labels, longs, boxes), = run("penstock.compat.dali", "caffe2", batch_size=4, path=data["c2"], label_type=1,
                                     num_labels=6, additional_inputs=1)
    assert longs[1].tolist() == [2**40 + 1] and boxes[2].tolist() == [2, 3, 4, 5]
    expected = np.zeros((4, 6), np.int32)
    for k in range(4):
        expected[k, [k, 4 - k] if k % 2 else [k]] = 1
    np.testing.assert_array_equal(np.stack(labels), expected)
    (_, weighted, weights, _, _), = run("penstock.compat.dali", "caffe2", batch_size=4, path=data["c2"],
                                        label_type=3, num_labels=5, additional_inputs=2)
    assert weighted[1].dtype == np.float32 and weighted[1].tolist() == [0, 0.5, 0, 1.5, 0]
    assert weights[1].tolist() == [0.5, 1.5]


def test_caffe2_encoded_images_and_float_labels(data):
    (images, labels), = run("penstock.compat.dali", "caffe2", batch_size=3, path=data["c2_encoded"])
    assert [image.tobytes() for image in images] == JPEG_LIKE[:3] and images[0].ndim == 1
    assert [label.tolist() for label in labels] == [[0.25], [1.25], [2.25]] and labels[0].dtype == np.float32
    pytest.importorskip("nvidia.dali")
    assert_same([[images, labels]], run("nvidia.dali", "caffe2", batch_size=3, path=data["c2_encoded"]))


def test_caffe2_arguments_are_checked_where_called(data):
    with pytest.raises(ValueError, match=r"readers\.caffe2: argument 'label_type'"):
        fn.readers.caffe2(path=data["c2"], label_type=5)
    with pytest.raises(ValueError, match=r"readers\.caffe2: .*'num_labels'"):
        fn.readers.caffe2(path=data["c2"], label_type=1, num_labels=0)
    with pytest.raises(ValueError, match=r"readers\.caffe2: argument 'additional_inputs'"):
        fn.readers.caffe2(path=data["c2"], additional_inputs=-1)


# ---- the wire format ---------------------------------------------------------------------------------
FIELDS = {1: Field("count", "int32"), 2: Field("big", "int64"), 3: Field("flag", "bool"),
          4: Field("values", "float", True), 5: Field("name", "bytes"), 6: Field("ints", "int32", True)}


def test_decode_message_reads_packed_and_unpacked_values_and_skips_others():
    message = (proto_field(1, 0, -3) + proto_field(2, 0, -(2**40)) + proto_field(3, 0, 2)
               + proto_field(4, 5, struct.pack("<f", 1.5)) + proto_field(4, 2, struct.pack("<2f", 2.5, -1))
               + proto_field(6, 0, 7) + proto_field(6, 2, varint(-1) + varint(300))
               + proto_field(9, 2, b"unknown") + proto_field(5, 0, 4)  # a known number with another wire type: skipped
               + varint(8 << 3 | 3) + proto_field(1, 0, 99) + varint(8 << 3 | 4)  # a group: skipped
               + proto_field(5, 2, b"first") + proto_field(5, 2, b"last") + proto_field(1, 0, 2**32 + 12))
    decoded = decode_message(message, FIELDS)
    assert decoded["count"] == 12 and decoded["big"] == -(2**40) and decoded["flag"] is True
    np.testing.assert_array_equal(decoded["values"], np.float32([1.5, 2.5, -1]))
    np.testing.assert_array_equal(decoded["ints"], np.int32([7, -1, 300]))
    assert decoded["name"] == b"last"


@pytest.mark.parametrize("message, problem", [
    (proto_field(5, 2, b"abcdef")[:-2], "claims 6 bytes, 4 follow"),
    (b"\x08\x80", "ends inside a varint"),
    (b"\x08" + b"\xff" * 11, "runs past 10 bytes"),
    (b"\x00\x01", "field number 0"),
    (b"\x0f", "wire type 7"),
    (varint(8 << 3 | 4), "closes no group"),
    (varint(8 << 3 | 3) + proto_field(1, 0, 1), "ends inside the group of field 8"),
    (proto_field(4, 2, b"abc"), "a packed run of float values of 3 bytes"),
])
def test_decode_message_refuses_what_is_not_a_message(message, problem):
    with pytest.raises(ValueError, match=problem):
        decode_message(message, FIELDS)


def test_an_unknown_data_type_leaves_the_default():
    """proto2 keeps an enum value it does not know out of the field (Caffe2's data_type stays FLOAT)."""
    assert "data_type" not in decode_message(proto_field(2, 0, 11), TENSOR_PROTO)
    assert decode_message(proto_field(2, 0, 4) + proto_field(2, 0, 11), TENSOR_PROTO)["data_type"] == 4
