"""The readers against DALI itself: the samples each batch holds over several epochs (shards,
sticking, padding), reader_meta, and the arguments each reader takes."""
from __future__ import annotations

import io
import os
import tarfile

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
from nvidia.dali import fn as dali_fn  # noqa: E402
from nvidia.dali import pipeline_def as dali_pipeline_def  # noqa: E402

from penstock.compat.dali import fn, pipeline_def  # noqa: E402

SAMPLES = 7


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """7 samples holding their own number: files, .npy files, and webdataset archives of 2, 3, 1 and
    1 samples."""
    root = tmp_path_factory.mktemp("readers")
    files, archives = [], []
    for number in range(SAMPLES):
        files.append(str(root / f"file{number}.bin"))
        with open(files[-1], "wb") as handle:
            handle.write(bytes([number]) * (number + 1))
        os.makedirs(root / "npy", exist_ok=True)
        np.save(root / "npy" / f"array{number}.npy", np.full((1,), number, np.int32))
    first = 0
    for part, count in enumerate((2, 3, 1, 1)):
        archives.append(str(root / f"part{part}.tar"))
        with tarfile.open(archives[-1], "w", format=tarfile.USTAR_FORMAT) as tar:
            for number in range(first, first + count):
                info = tarfile.TarInfo(f"sample{number}.bin")
                info.size = 1
                tar.addfile(info, io.BytesIO(bytes([number])))
        first += count
    return {"files": files, "npy": str(root / "npy"), "archives": archives}


def reader(library, kind: str, data: dict, **args):
    if kind == "file":
        return library.readers.file(files=data["files"], labels=list(range(SAMPLES)), name="Reader", **args)[1]
    if kind == "numpy":
        return library.readers.numpy(file_root=data["npy"], name="Reader", **args)
    return library.readers.webdataset(paths=data["archives"], ext=["bin"], name="Reader", **args)


def batches(library, kind: str, data: dict, batch_size: int, count: int, **args) -> tuple[list, dict]:
    """The sample numbers of ``count`` batches, and the reader's epoch_size and epoch_size_padded."""
    define = dali_pipeline_def if library is dali_fn else pipeline_def

    @define(batch_size=batch_size, num_threads=1, device_id=None, seed=5)
    def pipeline():
        return reader(library, kind, data, **args)

    pipe = pipeline()
    pipe.build()
    numbers = []
    for _ in range(count):
        (out,) = pipe.run()
        numbers.append([int(np.asarray(out[i]).ravel()[0]) for i in range(batch_size)])
    meta = pipe.reader_meta("Reader")
    return numbers, {key: meta[key] for key in ("epoch_size", "epoch_size_padded")}


SHARDINGS = [(1, 0), (2, 0), (2, 1), (3, 0), (3, 2)]


@pytest.mark.parametrize("kind", ["file", "numpy", "webdataset"])
@pytest.mark.parametrize("batch_size", [1, 3, 4])
@pytest.mark.parametrize("num_shards,shard_id", SHARDINGS)
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("pad_last_batch", [False, True])
def test_the_samples_of_each_batch_over_epochs_are_dalis(data, kind, batch_size, num_shards, shard_id,
                                                         stick_to_shard, pad_last_batch):
    args = {"num_shards": num_shards, "shard_id": shard_id, "stick_to_shard": stick_to_shard,
            "pad_last_batch": pad_last_batch}
    count = 3 * -(-SAMPLES // batch_size) + 1  # three epochs and more
    assert batches(fn, kind, data, batch_size, count, **args) == batches(dali_fn, kind, data, batch_size, count,
                                                                        **args)


@pytest.mark.parametrize("kind", ["file", "numpy", "webdataset"])
def test_every_reader_takes_tensor_init_bytes(data, kind):
    assert batches(fn, kind, data, 3, 1, tensor_init_bytes=1024) == \
        batches(dali_fn, kind, data, 3, 1, tensor_init_bytes=1024)


@pytest.mark.parametrize("pad_last_batch", [False, True])
def test_shuffle_after_epoch_of_webdataset_permutes_archives_and_goes_with_random_shuffle(data, pad_last_batch):
    """Each pass of a shard reads its part of the archives in a new order, each archive's samples in
    theirs; random_shuffle may shuffle them further (DALI takes both)."""
    archives = [[0, 1], [2, 3, 4], [5], [6]]
    for shard_id in range(2):
        numbers, _ = batches(fn, "webdataset", data, 4, 6, shuffle_after_epoch=True, num_shards=2, shard_id=shard_id,
                             pad_last_batch=pad_last_batch)
        passes = [numbers[k] + numbers[k + 1] for k in range(0, 6, 2)]
        for read in passes:
            own = read[:3 + shard_id]  # shards of 3 and 4 samples
            for archive in archives:  # an archive's samples in order, those of the shard's part together
                held = [number for number in own if number in archive]
                assert held == sorted(held)
        assert len({tuple(read) for read in passes}) > 1
    shuffled, _ = batches(fn, "webdataset", data, 7, 2, shuffle_after_epoch=True, random_shuffle=True)
    assert all(sorted(batch) == list(range(SAMPLES)) for batch in shuffled)
    for library in (fn, dali_fn):
        with pytest.raises(Exception, match="stick_to_shard"):
            batches(library, "webdataset", data, 3, 1, shuffle_after_epoch=True, stick_to_shard=True)


@pytest.mark.parametrize("kind", ["file", "numpy"])
def test_shuffle_after_epoch_of_files_excludes_random_shuffle(data, kind):
    for library in (fn, dali_fn):
        with pytest.raises(Exception, match="random_shuffle"):
            batches(library, kind, data, 3, 1, shuffle_after_epoch=True, random_shuffle=True)


@pytest.mark.parametrize("argument", ["shuffle_after_epoch", "shuffle_after_epoch_seed"])
def test_readers_sequence_has_no_shuffle_after_epoch(argument):
    value = True if argument == "shuffle_after_epoch" else 7
    for library in (fn, dali_fn):
        with pytest.raises((TypeError, KeyError), match=argument):
            library.readers.sequence(file_root="/nonexistent", sequence_length=2, **{argument: value})


def build(library, make, batch_size=1):
    define = dali_pipeline_def if library is dali_fn else pipeline_def

    @define(batch_size=batch_size, num_threads=1, device_id=None)
    def pipeline():
        return make(library)

    pipe = pipeline()
    pipe.build()
    return pipe


@pytest.mark.parametrize("dont_use_mmap", [False, True])
def test_readers_numpy_takes_use_o_direct_only_without_mmap(data, dont_use_mmap):
    def make(library):
        return library.readers.numpy(file_root=data["npy"], use_o_direct=True, dont_use_mmap=dont_use_mmap)
    if dont_use_mmap:
        assert int(np.asarray(build(fn, make).run()[0][0])[0]) == int(np.asarray(build(dali_fn, make).run()[0][0])[0])
        return
    with pytest.raises(Exception, match="use_o_direct"):
        build(dali_fn, make)
    with pytest.raises(ValueError, match="readers.numpy.*'use_o_direct' needs 'dont_use_mmap=True'"):
        build(fn, make)


@pytest.fixture(scope="module")
def coco_set(tmp_path_factory):
    import json

    from helpers_data import write_jpeg
    root = tmp_path_factory.mktemp("coco")
    write_jpeg(str(root / "a.jpg"), 8, 8)
    with open(root / "annotations.json", "w") as handle:
        json.dump({"images": [{"id": 1, "file_name": "a.jpg", "height": 8, "width": 8}],
                   "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 4], "iscrowd": 0,
                                    "area": 16}],
                   "categories": [{"id": 1, "name": "one"}]}, handle)
    return str(root)


@pytest.mark.parametrize("args,named", [
    ({"skip_cached_images": True}, "skip_cached_images"),
    ({"save_preprocessed_annotations_dir": "index"}, "save_preprocessed_annotations"),
    ({"save_preprocessed_annotations": True}, "save_preprocessed_annotations"),
    ({"preprocessed_annotations": "index"}, "annotations_file"),
])
def test_readers_coco_refuses_what_dali_refuses(coco_set, args, named):
    args = {name: os.path.join(coco_set, value) if isinstance(value, str) else value for name, value in args.items()}

    def make(library):
        return library.readers.coco(file_root=coco_set, annotations_file=os.path.join(coco_set, "annotations.json"),
                                    **args)[0]
    with pytest.raises(Exception, match=named):
        build(dali_fn, make)
    with pytest.raises(ValueError, match=f"readers.coco.*{named}"):
        build(fn, make)


def source_infos(library, make, count: int = 2) -> list[str]:
    define = dali_pipeline_def if library is dali_fn else pipeline_def

    @define(batch_size=count, num_threads=1, device_id=None)
    def pipeline():
        return library.get_property(make(library), key="source_info")

    pipe = pipeline()
    pipe.build()
    (out,) = pipe.run()
    return [bytes(np.asarray(out[i])).decode() for i in range(count)]


@pytest.mark.parametrize("form", ["files", "absolute", "file_list", "tree", "numpy_root", "numpy_files", "numpy_list",
                                  "webdataset", "webdataset_index"])
def test_source_info_names_the_sample_as_dali(data, tmp_path, form):
    """As the reader was given it: relative to file_root, or as listed; './name' for arrays found in
    file_root; archive:offset:name of a webdataset sample's (first) file."""
    root = os.path.dirname(data["files"][0])
    names = [os.path.basename(path) for path in data["files"]]
    (tmp_path / "class").mkdir()
    for name in names[:2]:
        os.link(os.path.join(root, name), tmp_path / "class" / name)
    (tmp_path / "list.txt").write_text("".join(f"{name} {k}\n" for k, name in enumerate(names)))
    (tmp_path / "arrays.txt").write_text("array0.npy\narray1.npy\n")
    with open(tmp_path / "part.idx", "w") as index:  # wds2idx's v1.2 form, names given
        index.write("v1.2 2\n")
        for number, offset in ((0, 0), (1, 1024)):
            index.write(f"bin {offset} 1 sample{number}.bin\n")
    makes = {
        "files": lambda library: library.readers.file(files=names, file_root=root)[0],
        "absolute": lambda library: library.readers.file(files=data["files"])[0],
        "file_list": lambda library: library.readers.file(file_list=str(tmp_path / "list.txt"), file_root=root)[0],
        "tree": lambda library: library.readers.file(file_root=str(tmp_path), file_filters=["*.bin"])[0],
        "numpy_root": lambda library: library.readers.numpy(file_root=data["npy"]),
        "numpy_files": lambda library: library.readers.numpy(file_root=data["npy"], files=["array1.npy", "array2.npy"]),
        "numpy_list": lambda library: library.readers.numpy(file_root=data["npy"],
                                                            file_list=str(tmp_path / "arrays.txt")),
        "webdataset": lambda library: library.readers.webdataset(paths=data["archives"][:1], ext=["bin"]),
        "webdataset_index": lambda library: library.readers.webdataset(
            paths=data["archives"][:1], ext=["bin"], index_paths=[str(tmp_path / "part.idx")]),
    }
    assert source_infos(fn, makes[form]) == source_infos(dali_fn, makes[form])


def test_source_info_of_readers_coco_is_the_annotations_file_name(coco_set):
    def make(library):
        return library.readers.coco(file_root=coco_set, annotations_file=os.path.join(coco_set, "annotations.json"))[0]
    assert source_infos(fn, make, 1) == source_infos(dali_fn, make, 1) == ["a.jpg"]


def test_folder_tree_is_each_class_folder_s_own_files(tmp_path):
    for name, size in (("a/one.jpg", 1), ("a/deeper/two.jpg", 2), ("b/three.jpg", 3), ("b/Four.JPG", 4),
                       ("top.jpg", 5), ("a/notes.txt", 6)):
        os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
        (tmp_path / name).write_bytes(bytes(size))

    def make(library):
        return library.readers.file(file_root=str(tmp_path))[0]
    assert source_infos(fn, make, 4) == source_infos(dali_fn, make, 4) == ["a/one.jpg", "b/Four.JPG", "b/three.jpg",
                                                                           "a/one.jpg"]


@pytest.mark.parametrize("behavior", ["Skip", "EMPTY", "Error", "bad"])
def test_webdataset_takes_missing_component_behavior_in_any_letter_case(data, behavior):
    def make(library):
        return library.readers.webdataset(paths=data["archives"], ext=["bin"], missing_component_behavior=behavior)
    if behavior == "bad":
        with pytest.raises(Exception, match="missing_component_behavior"):
            build(dali_fn, make)
        with pytest.raises(ValueError, match="readers.webdataset.*'missing_component_behavior' takes one of"):
            build(fn, make)
        return
    assert [int(np.asarray(build(library, make).run()[0][0])[0]) for library in (fn, dali_fn)] == [0, 0]


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint64", "bool"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
def test_readers_numpy_reads_arrays_of_every_dimension_as_dali(tmp_path, dtype, shape):
    for number in range(3):
        np.save(tmp_path / f"array{number}.npy", (np.arange(int(np.prod(shape))) + number).reshape(shape).astype(dtype))

    def make(library):
        return library.readers.numpy(file_root=str(tmp_path))
    ours, theirs = (np.asarray(build(library, make).run()[0][0]) for library in (fn, dali_fn))
    assert ours.shape == theirs.shape == shape and ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_readers_numpy_refuses_inconsistent_data_as_dali(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((2, 2), np.int32))
    np.save(tmp_path / "b.npy", np.zeros((2, 2), np.float32))

    def make(library):
        return library.readers.numpy(file_root=str(tmp_path))
    for library in (fn, dali_fn):
        built = build(library, make, batch_size=2)
        with pytest.raises(RuntimeError, match="Inconsistent data"):
            built.run()


@pytest.mark.parametrize("kind", ["file", "numpy", "webdataset"])
@pytest.mark.parametrize("args", [{}, {"num_shards": 3, "shard_id": 1, "pad_last_batch": True, "stick_to_shard": True},
                                  {"num_shards": 2, "shard_id": 1, "shuffle_after_epoch": True}])
def test_reader_meta_is_dalis(data, kind, args):
    metas = []
    for library in (fn, dali_fn):
        meta = build(library, lambda library: reader(library, kind, data, **args)).reader_meta("Reader")
        metas.append({key: (meta[key], type(meta[key])) for key in ("epoch_size", "epoch_size_padded", "number_of_shards",
                                                                     "shard_id", "pad_last_batch", "stick_to_shard")})
    assert metas[0] == metas[1]


@pytest.mark.parametrize("text,labels", [("x.bin\t3\ny.bin 4\n", [3, 4]), ("x.bin  3 \r\n\ny.bin   4\n", [3, 4]),
                                         ("x.bin\ny.bin 4\n", None), ("x.bin -3\ny.bin 4\n", None)])
def test_file_list_lines_are_parsed_as_dali(tmp_path, text, labels):
    (tmp_path / "x.bin").write_bytes(b"x")
    (tmp_path / "y.bin").write_bytes(b"yy")
    (tmp_path / "list.txt").write_bytes(text.encode())

    def make(library):
        return tuple(library.readers.file(file_list=str(tmp_path / "list.txt")))
    if labels is None:
        with pytest.raises(Exception, match="Incorrect format of the list file"):
            build(dali_fn, make)
        with pytest.raises(ValueError, match=r"readers.file: line 1 of '.*list.txt' should be 'path label'"):
            build(fn, make)
        return
    for library in (fn, dali_fn):
        files, read = build(library, make, batch_size=2).run()
        assert [int(np.asarray(read[i])[0]) for i in range(2)] == labels
        assert [len(np.asarray(files[i])) for i in range(2)] == [1, 2]


@pytest.mark.parametrize("text", ["array0.npy\narray1.npy\n", "array0.npy  \narray1.npy\n", " array0.npy\narray1.npy\n"])
def test_numpy_file_list_lines_are_paths_verbatim_as_dali(data, tmp_path, text):
    (tmp_path / "list.txt").write_text(text)

    def make(library):
        return library.readers.numpy(file_list=str(tmp_path / "list.txt"), file_root=data["npy"])
    if text.startswith("array0.npy\n"):
        assert [int(np.asarray(build(library, make).run()[0][0])[0]) for library in (fn, dali_fn)] == [0, 0]
        return
    for library in (fn, dali_fn):  # the path with its spaces names no file
        with pytest.raises(Exception, match="array0.npy"):
            build(library, make).run()
