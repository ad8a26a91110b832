"""Readers: readers.file, coco, mxnet, numpy, webdataset and sequence over tiny data sets written to
pytest's temporary folder (samples.py), and io.file.read. Each reader's arguments are cases of one
batch of 3; its epochs, shards and shuffles run three batches over data sets of 4 to 7 samples, so
that epochs wrap and padding shows. With shuffling off, both libraries must read the same samples in
the same order; with it on, give the same statistics."""
import numpy as np

from conformance.harness import Close, Later, PerSample, Spec, Stats
from conformance.samples import (coco, f32, image_tree, numpy_files, on_disk, paths, recordio, sequences,
                                 webdataset)

SHUFFLED = Stats(mean_tol=20, std_tol=20, independent=False, shapes=False)
# arguments that tune how files are read and buffered, not what comes out
READING = {"dont_use_mmap": [True], "lazy_init": [True], "prefetch_queue_depth": [2], "read_ahead": [True],
           "skip_cached_images": [True], "tensor_init_bytes": [1024]}


def reader_specs(op, args, name=None, compare=Close(), grid=()):
    """A reader's cases: its own grid and the reading arguments; shards (with padding and sticking);
    shuffles (compared statistically)."""
    name = name or op
    return [
        Spec(op, (), args, name=name, compare=compare, batch_size=3, grid={**READING, **dict(grid)}),
        Spec(op, (), args, name=f"{name}_epochs", compare=compare, batch_size=3, iterations=3),
        Spec(op, (), {**args, "num_shards": 2, "shard_id": 1}, name=f"{name}_shards", compare=compare,
             batch_size=3, iterations=3, grid={
                 "shard_id": [0, 2], "num_shards": [3, 20], "pad_last_batch": [True], "stick_to_shard": [True],
             }, refused=("2", "20")),
        Spec(op, (), {**args, "random_shuffle": True, "initial_fill": 4}, name=f"{name}_shuffled",
             compare=SHUFFLED, batch_size=3, iterations=3, grid={
                 "initial_fill": [1, 100],
                 "random_shuffle": [False],
                 "shuffle_after_epoch": [True],
                 "shuffle_after_epoch_seed": [7],
             }),
    ]


IMAGES = on_disk(image_tree, "root")

SPECS = [
    *reader_specs("readers.file", {"file_root": IMAGES}, grid={
        "file_filters": [["*.png"], ["*.PNG"], "*.jpg"],
        "case_sensitive_filter": [True],
        "dir_filters": [["class1", "class2"]],
    }),
    Spec("readers.file", (), {"file_list": on_disk(image_tree, "list")}, name="readers.file_list", batch_size=3,
         iterations=3, grid={"file_root": {"root": IMAGES}}),
    Spec("readers.file", (), {"files": on_disk(image_tree, "names", lambda names: names[:5]), "file_root": IMAGES},
         name="readers.file_files", batch_size=3, iterations=3, grid={
             "labels": [[4, 3, 2, 1, 0], [1, 2]],
             "files": {"absolute": Later(lambda: [image_tree()["root"] + "/" + n for n in image_tree()["names"]])},
         }),
    *reader_specs("readers.mxnet", {"path": on_disk(recordio, "path"), "index_path": on_disk(recordio, "index_path")},
                  compare=Close(atol=0)),
    *reader_specs("readers.numpy", {"file_root": on_disk(numpy_files, "root")}, grid={
        "file_filter": ["array[13].npy", "*.npz.npy"],
        "cache_header_information": [True], "register_buffers": [False], "use_o_direct": [True],
    }),
    Spec("readers.numpy", (), {"files": on_disk(numpy_files, "names")}, name="readers.numpy_files", batch_size=3,
         iterations=2, grid={
             "file_list": {"list": on_disk(numpy_files, "list")},
             "file_root": {"root": on_disk(numpy_files, "root")},
         }),
    Spec("readers.numpy", (), {"file_root": on_disk(numpy_files, "root"), "file_filter": "array*.npy",
                               "roi_start": (1, 1), "roi_end": (3, 2)}, name="readers.numpy_roi", batch_size=3,
         grid={
             "roi_start": [PerSample(np.int32([0, 0]), np.int32([1, 0]), np.int32([2, 1]))],
             "roi_end": [PerSample(np.int32([2, 2]), np.int32([3, 3]), np.int32([4, 2]))],
             "roi_shape": [(2, 2), PerSample(np.int32([1, 1]), np.int32([2, 1]), np.int32([1, 2]))],
             "rel_roi_start": [(0.25, 0.0), PerSample(f32(0, 0), f32(0.5, 0.5), f32(0.2, 0.4))],
             "rel_roi_end": [(0.75, 1.0), PerSample(f32(1, 1), f32(0.8, 0.7), f32(0.5, 0.9))],
             "rel_roi_shape": [(0.5, 0.5), PerSample(f32(1, 1), f32(0.5, 0.5), f32(0.3, 0.6))],
             "roi_axes": [(1,), (1, 0)],
             "out_of_bounds_policy": ["pad", "trim_to_shape", "error"],
             "fill_value": [-1.0],
         }),
    Spec("readers.numpy", (), {"file_root": on_disk(numpy_files, "root"), "file_filter": "array*.npy",
                               "roi_start": (-1, 2), "roi_end": (3, 9), "out_of_bounds_policy": "pad"},
         name="readers.numpy_roi_out", batch_size=3, grid={
             "out_of_bounds_policy": ["trim_to_shape", "error"], "fill_value": [5.0],
         }),
    *reader_specs("readers.webdataset", {"paths": on_disk(webdataset, "path"), "ext": ["jpg", "bin"],
                                         "index_paths": on_disk(webdataset, "index_path")}, grid={
        "ext": [["cls"], ["jpg;bin", "cls"], ["JPG"]],
        "missing_component_behavior": ["skip", "fill", "error"],
        "dtypes": [["types.UINT8", "types.INT16"], ["types.UINT8", "types.UINT8"]],
        "case_sensitive_extensions": [False],
    }),
    Spec("readers.webdataset", (), {"paths": on_disk(webdataset, "path"), "ext": ["jpg"]},
         name="readers.webdataset_no_index", batch_size=3, iterations=2),
    *reader_specs("readers.sequence", {"file_root": on_disk(sequences, "root"), "sequence_length": 2}, grid={
        "sequence_length": [3, 6], "step": [2], "stride": [2],
        "image_type": ["types.GRAY", "types.BGR", "types.RGB"],
    }),
    *reader_specs("readers.coco", {"file_root": on_disk(coco, "root"),
                                   "annotations_file": on_disk(coco, "annotations")},
                  compare=Close(atol=6, rtol=1e-6), grid={
        "ltrb": [True], "ratio": [True], "image_ids": [True], "avoid_class_remapping": [True],
        "include_iscrowd": [False], "size_threshold": [0.01, 5.0], "skip_empty": [True],
        "polygon_masks": [True], "pixelwise_masks": [True],
        "images": {"two": Later(lambda: coco()["images"][1:3])},
        "save_preprocessed_annotations": [True],
        "save_preprocessed_annotations_dir": {"folder": Later(lambda: coco()["root"] + "/preprocessed")},
        "preprocessed_annotations": {"missing": Later(lambda: coco()["root"] + "/none")},
    }),
    Spec("io.file.read", (Later(lambda: paths(image_tree()["names"][:3], image_tree()["root"])),), {},
         grid={"dont_use_mmap": [True], "use_o_direct": [True],
               "@input": {"missing": (Later(lambda: paths(["nope.jpg"] * 3, image_tree()["root"])),)}}),
]


# ---- readers.caffe and readers.caffe2: LMDB databases of protobuf records written here ----------------
import os  # noqa: E402

from conformance.samples import _once, encode, folder, picture  # noqa: E402


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint (negative values as their 64-bit two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def proto_field(number: int, wire: int, payload) -> bytes:
    """One field: a varint (wire 0) of the int ``payload``, else the bytes ``payload`` (length-delimited
    for wire 2, as they are for the fixed-size wires 1 and 5)."""
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + (varint(len(payload)) + payload if wire == 2 else payload)


def datum(channels=None, height=None, width=None, data=None, label=None, encoded=None) -> bytes:
    """A Caffe Datum with the fields given."""
    numbers = [(1, channels), (2, height), (3, width), (5, label), (7, None if encoded is None else int(encoded))]
    message = b"".join(proto_field(number, 0, value) for number, value in numbers if value is not None)
    return message + (proto_field(4, 2, data) if data is not None else b"")


STRING_TENSOR, BYTE_TENSOR, FLOAT_TENSOR, INT32_TENSOR, INT64_TENSOR = 4, 3, 1, 2, 10  # TensorProto.DataType


def tensor_proto(dims=(), data_type=None, floats=None, ints=None, raw=None, strings=(), longs=None) -> bytes:
    """A Caffe2 TensorProto with the fields given (numbers packed, as Caffe2 writes them)."""
    message = b"".join(proto_field(1, 0, extent) for extent in dims)
    if data_type is not None:
        message += proto_field(2, 0, data_type)
    if floats is not None:
        message += proto_field(3, 2, np.asarray(floats, "<f4").tobytes())
    if ints is not None:
        message += proto_field(4, 2, b"".join(varint(int(value)) for value in ints))
    if raw is not None:
        message += proto_field(5, 2, raw)
    message += b"".join(proto_field(6, 2, string) for string in strings)
    if longs is not None:
        message += proto_field(10, 2, b"".join(varint(int(value)) for value in longs))
    return message


def tensor_protos(*tensors: bytes) -> bytes:
    return b"".join(proto_field(1, 2, message) for message in tensors)


def lmdb_database(path: str, records: dict) -> str:
    import pytest
    lmdb = pytest.importorskip("lmdb")  # the test extra installs it
    environment = lmdb.open(path, map_size=1 << 22)
    with environment.begin(write=True) as transaction:
        for key, value in records.items():
            transaction.put(key, value)
    environment.close()
    return path


@_once
def caffe_lmdb():
    """Caffe databases of 5 records each, keys written out of order: JPEG Datums (one without a label,
    one without its 'encoded' field) and raw ones of several sizes and channel counts."""
    root = folder("caffe")
    images = [picture(6 + key, 8 - key, 3 if key % 2 else 1, key) for key in range(5)]
    raw = lmdb_database(os.path.join(root, "raw"), {
        b"%03d" % (4 - key): datum(image.shape[2], image.shape[0], image.shape[1], image.tobytes(), label=key - 2,
                                   encoded=False) for key, image in enumerate(images)})
    encoded = lmdb_database(os.path.join(root, "encoded"), {
        b"k%d" % key: datum(3, 8, 8, encode(picture(8, 8 + key, 3, key), ".jpg").tobytes(),
                            label=None if key == 2 else 10 * key, encoded=True if key != 3 else None)
        for key in range(5)})
    return {"raw": raw, "encoded": encoded, "two": [raw, encoded]}


@_once
def caffe2_lmdb():
    """Caffe2 databases of 5 records of 5 tensors: the image (raw BYTE pixels, or an encoded STRING),
    a label (INT32, or FLOAT), FLOAT and INT64 tensors, and a box (4 INT32 values)."""
    root = folder("caffe2")

    def records(image, label):
        return {b"r%d" % key: tensor_protos(
            image(key), label(key), tensor_proto(data_type=FLOAT_TENSOR, floats=[0.5 * key, 2.0][:1 + key % 2]),
            tensor_proto(data_type=INT64_TENSOR, longs=[2**40 + key, -key]),
            tensor_proto(data_type=INT32_TENSOR, ints=[key, key + 1, 2 * key, 9])) for key in range(5)}

    def raw_image(key):
        image = picture(5 + key, 7, 3 if key else 1, key)
        return tensor_proto(dims=image.shape if key else image.shape[:2], data_type=BYTE_TENSOR, raw=image.tobytes())

    raw = lmdb_database(os.path.join(root, "raw"), records(
        raw_image, lambda key: tensor_proto(data_type=INT32_TENSOR, ints=[(3 * key) % 5])))
    encoded = lmdb_database(os.path.join(root, "encoded"), records(
        lambda key: tensor_proto(data_type=STRING_TENSOR,
                                 strings=[encode(picture(8, 6 + key, 3, key), ".jpg").tobytes()]),
        lambda key: tensor_proto(floats=[key + 0.25])))
    return {"raw": raw, "encoded": encoded}


C2 = on_disk(caffe2_lmdb, "raw")
SPECS += [
    *reader_specs("readers.caffe", {"path": on_disk(caffe_lmdb, "raw")}, compare=Close(atol=0), grid={
        "path": {"encoded": on_disk(caffe_lmdb, "encoded"), "list": Later(lambda: [caffe_lmdb()["raw"]])},
        "image_available": [False], "label_available": [False],
    }),
    Spec("readers.caffe", (), {"path": on_disk(caffe_lmdb, "encoded")}, name="readers.caffe_encoded", batch_size=3,
         iterations=3, grid={"path": {"two": on_disk(caffe_lmdb, "two")}}),
    # label_type 2 (dense): the label as stored; the two further tensors and the box after them
    *reader_specs("readers.caffe2", {"path": C2, "label_type": 2, "additional_inputs": 2, "bbox": True},
                  compare=Close(atol=0), grid={
        "path": {"encoded": on_disk(caffe2_lmdb, "encoded")}, "label_type": [0],
    }),
    Spec("readers.caffe2", (), {"path": C2, "label_type": 2, "additional_inputs": 2, "bbox": True},
         name="readers.caffe2_refused", base=False, batch_size=3, grid={
             "label_type": [4],  # the label read as the first further tensor, the box left over
             "bbox": [False],  # the box tensor goes past the outputs
             "image_available": [False],  # the image is no label
             "additional_inputs": [1],  # no box after the one further tensor
         }, refused=("4", "False", "1")),
    # sparse labels: the tensor after the label skipped, the box fills the extra output
    Spec("readers.caffe2", (), {"path": C2, "label_type": 1, "num_labels": 5, "additional_inputs": 1},
         name="readers.caffe2_sparse", batch_size=3, iterations=2, grid={
             "num_labels": [3],  # labels past it
             "additional_inputs": [2],  # the extra output left without data
         }, refused=("3", "2")),
    # weighted sparse labels: the weights are the FLOAT tensor, read again as the first further one
    Spec("readers.caffe2", (), {"path": C2, "label_type": 3, "num_labels": 5, "additional_inputs": 2},
         name="readers.caffe2_weighted", batch_size=3, iterations=2, grid={"additional_inputs": [1]},
         refused=("1",)),
]
