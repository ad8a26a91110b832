"""readers.file: where files and labels come from, epochs, shuffling, shards, padding, and errors."""
from __future__ import annotations

import io
import os
import pathlib
import tarfile

import numpy as np
import pytest

from helpers_data import make_class_tree, make_flat_files, write_jpeg
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from penstock import fn, pipeline_def

SEED = 1234


def reader_pipeline(batch_size: int = 4, seed: int = SEED, **reader_args):
    """A pipeline that returns the reader's (encoded bytes, label) as they are."""

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=seed)
    def pipeline():
        return fn.readers.file(name="Reader", **reader_args)

    return pipeline()


def read_epochs(pipe, epochs: int = 1) -> list[list[int]]:
    """Per epoch, the labels of the real (not padding) samples, in the order they came."""
    result = []
    for _ in range(epochs):
        labels = []
        while True:
            _, label_batch = pipe.run()
            info = pipe.last_epoch_info
            labels.extend(int(label[0]) for label in label_batch.as_array()[:info.valid])
            if info.last:
                break
        result.append(labels)
    return result


@pytest.fixture(scope="module")
def flat_root(tmp_path_factory):
    """10 distinct JPEGs in one folder; the id of a file is its position in the sorted names."""
    root = str(tmp_path_factory.mktemp("flat"))
    return root, make_flat_files(root, 10, height=8, width=8)


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


# ---- where the data comes from -------------------------------------------------------------------
def test_folder_tree_labels_follow_sorted_class_folders(tmp_path):
    tree = make_class_tree(str(tmp_path), {"zebra": 2, "ant": 3, "moose": 1}, height=8, width=8)
    pipe = reader_pipeline(batch_size=6, file_root=str(tmp_path))
    jpegs, labels = pipe.run()
    pipe.close()

    expected = {file_bytes(path): label for label, name in enumerate(sorted(tree)) for path in tree[name]}
    got = {bytes(jpegs.at(i)): int(labels.at(i)[0]) for i in range(6)}
    assert got == expected  # ant -> 0, moose -> 1, zebra -> 2, every file once
    assert labels.at(0).dtype == np.int32 and labels.at(0).shape == (1,)
    assert jpegs.at(0).dtype == np.uint8 and jpegs.at(0).ndim == 1


def test_folder_tree_reads_each_class_folder_s_own_images(tmp_path):
    """As DALI's discovery: neither the files beside the class folders nor those in folders below
    them, nor other files than images."""
    write_jpeg(str(tmp_path / "a" / "one.jpg"), 8, 8)
    write_jpeg(str(tmp_path / "a" / "two.JPG"), 8, 8, seed=3)
    write_jpeg(str(tmp_path / "a" / "deeper" / "two.jpg"), 8, 8, seed=1)
    (tmp_path / "a" / "notes.txt").write_text("not an image")
    write_jpeg(str(tmp_path / "b" / "three.jpeg"), 8, 8, seed=2)
    write_jpeg(str(tmp_path / "top.jpg"), 8, 8, seed=4)
    pipe = reader_pipeline(batch_size=3, file_root=str(tmp_path))
    assert pipe.epoch_size("Reader") == 3
    jpegs, labels = pipe.run()
    pipe.close()
    assert [int(np.asarray(label)[0]) for label in labels] == [0, 0, 1]
    assert [bytes(jpegs.at(i)) for i in range(3)] == [file_bytes(str(tmp_path / name))
                                                      for name in ("a/one.jpg", "a/two.JPG", "b/three.jpeg")]


def test_file_list_gives_paths_and_labels(tmp_path):
    for name, seed in (("x.jpg", 0), ("sub/y.jpg", 1), ("z.jpg", 2)):
        write_jpeg(str(tmp_path / name), 8, 8, seed=seed)
    listing = tmp_path / "list.txt"
    listing.write_text("x.jpg 7\nsub/y.jpg 3\n\nz.jpg 11\n")  # blank lines are skipped
    pipe = reader_pipeline(batch_size=3, file_list=str(listing))  # paths relative to the list's folder
    jpegs, labels = pipe.run()
    pipe.close()
    assert [int(np.asarray(label)[0]) for label in labels] == [7, 3, 11]
    assert bytes(jpegs.at(1)) == file_bytes(str(tmp_path / "sub" / "y.jpg"))


def test_file_list_paths_are_relative_to_file_root(tmp_path):
    write_jpeg(str(tmp_path / "images" / "a.jpg"), 8, 8)
    listing = tmp_path / "lists" / "train.txt"
    listing.parent.mkdir()
    listing.write_text("a.jpg 5\n")
    pipe = reader_pipeline(batch_size=1, file_list=str(listing), file_root=str(tmp_path / "images"))
    jpegs, labels = pipe.run()
    pipe.close()
    assert int(labels.at(0)[0]) == 5
    assert bytes(jpegs.at(0)) == file_bytes(str(tmp_path / "images" / "a.jpg"))


def test_files_with_labels_and_default_labels(flat_root):
    root, names = flat_root
    pipe = reader_pipeline(batch_size=3, file_root=root, files=names[:3], labels=[30, 10, 20])
    jpegs, labels = pipe.run()
    pipe.close()
    assert [int(np.asarray(label)[0]) for label in labels] == [30, 10, 20]
    assert bytes(jpegs.at(2)) == file_bytes(os.path.join(root, names[2]))

    pipe = reader_pipeline(batch_size=3, files=[os.path.join(root, name) for name in names[:3]])
    _, labels = pipe.run()
    pipe.close()
    assert [int(np.asarray(label)[0]) for label in labels] == [0, 1, 2]  # default: the position in files


def test_file_filters_choose_the_extensions(tmp_path):
    write_jpeg(str(tmp_path / "c" / "a.jpg"), 8, 8)
    write_jpeg(str(tmp_path / "c" / "b.jpg"), 8, 8, seed=1)
    (tmp_path / "c" / "c.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (tmp_path / "c" / "D.PNG").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert reader_pipeline(file_root=str(tmp_path)).epoch_size("Reader") == 4
    assert reader_pipeline(file_root=str(tmp_path), file_filters=["*.png"]).epoch_size("Reader") == 2
    assert reader_pipeline(file_root=str(tmp_path), file_filters=["*.png"],
                           case_sensitive_filter=True).epoch_size("Reader") == 1
    assert reader_pipeline(file_root=str(tmp_path), file_filters=[".jpg"]).epoch_size("Reader") == 2


def test_file_and_dir_filters_are_globs_as_in_dali(tmp_path):
    for folder in ("cats", "dogs", "extra"):
        write_jpeg(str(tmp_path / folder / "img_1.jpg"), 8, 8)
        write_jpeg(str(tmp_path / folder / "thumb_1.jpg"), 8, 8, seed=1)
    pipe = reader_pipeline(batch_size=8, file_root=str(tmp_path), dir_filters=["cats", "d*"],
                           file_filters=["img_*.JPG"])
    assert pipe.epoch_size("Reader") == 2
    assert read_epochs(pipe) == [[0, 1]]  # the classes are the folders kept, labelled in sorted order
    pipe.close()
    assert reader_pipeline(file_root=str(tmp_path), dir_filters=["?ogs"]).epoch_size("Reader") == 2
    with pytest.raises(ValueError, match="no class sub-folders matching dir_filters"):
        reader_pipeline(file_root=str(tmp_path), dir_filters=["birds"]).build()


def test_epoch_size_and_reader_meta(flat_root):
    root, names = flat_root
    pipe = reader_pipeline(batch_size=4, file_root=root, files=names, num_shards=3, shard_id=1)
    assert pipe.epoch_size("Reader") == 10  # the whole data set, all shards
    assert pipe.epoch_size() == {"Reader": 10}
    meta = pipe.reader_meta("Reader")
    assert pipe.reader_meta() == {"Reader": meta}  # every reader's, by name
    assert meta["number_of_shards"] == 3 and meta["shard_id"] == 1
    assert meta["shard_size"] == 3  # shards of 3, 3 and 4 samples
    assert meta["batches_per_epoch"] == 1  # the largest shard (4) fits one batch of 4
    assert meta["epoch_size_padded"] == 10  # DALI's: the data set, padded only under pad_last_batch
    padded = reader_pipeline(batch_size=4, file_root=root, files=names, num_shards=3, shard_id=1, pad_last_batch=True)
    assert padded.reader_meta("Reader")["epoch_size_padded"] == 12  # 3 shards of the largest's 4 samples
    pipe.close()


# ---- epochs and shuffling ------------------------------------------------------------------------
def read_batches(pipe, count: int) -> list[list[int]]:
    """The labels of ``count`` batches, padding included."""
    batches = []
    for _ in range(count):
        _, labels = pipe.run()
        batches.append([int(np.asarray(label)[0]) for label in labels])
    return batches


def test_without_shuffle_the_reader_goes_round_the_data_set(flat_root):
    """As DALI's readers: a short last batch is filled with the next epoch's first samples, and the
    next epoch goes on from there."""
    root, names = flat_root
    pipe = reader_pipeline(batch_size=4, file_root=root, files=names)
    batches = read_batches(pipe, 6)
    pipe.close()
    assert batches == np.resize(np.arange(10), (6, 4)).tolist()


def test_random_shuffle_permutes_each_epoch_differently_and_per_seed(flat_root):
    root, names = flat_root

    def shuffled(seed):
        pipe = reader_pipeline(batch_size=5, seed=seed, file_root=root, files=names, random_shuffle=True)
        epochs = read_epochs(pipe, 3)
        pipe.close()
        return epochs

    epochs = shuffled(7)
    for order in epochs:
        assert sorted(order) == list(range(10))  # a permutation: nothing lost or repeated
    assert len({tuple(order) for order in epochs}) == 3  # a new order each epoch
    assert tuple(epochs[0]) != tuple(range(10))
    assert shuffled(7) == epochs  # the same seed, the same orders
    assert shuffled(8) != epochs


@pytest.mark.parametrize("pad_last_batch", [False, True])
def test_short_last_batch_is_padded_and_marked(flat_root, pad_last_batch):
    root, names = flat_root
    pipe = reader_pipeline(batch_size=4, file_root=root, files=names, pad_last_batch=pad_last_batch)
    infos, batches = [], []
    for _ in range(4):
        _, labels = pipe.run()
        infos.append(pipe.last_epoch_info)
        batches.append([int(np.asarray(label)[0]) for label in labels])
    pipe.close()
    assert [(info.epoch, info.valid, info.last) for info in infos] == [
        (0, 4, False), (0, 4, False), (0, 2, True), (1, 4, False)]
    # padding repeats the epoch's last sample, and the next epoch starts at its beginning; or else the
    # batch is filled with the next epoch's first samples, and the next epoch goes on after them
    assert batches[2] == ([8, 9, 9, 9] if pad_last_batch else [8, 9, 0, 1])
    assert batches[3] == ([0, 1, 2, 3] if pad_last_batch else [2, 3, 4, 5])


# ---- shards ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("stick_to_shard", [False, True])
@pytest.mark.parametrize("num_shards", [1, 2, 3, 4])
def test_padded_shards_partition_the_data_every_epoch(flat_root, num_shards, stick_to_shard):
    """With pad_last_batch (without it a shard's short last batch reads on into the next shard, as in
    DALI: tests/operators/readers/test_readers_dali.py)."""
    root, names = flat_root
    per_shard = []
    for shard_id in range(num_shards):
        pipe = reader_pipeline(batch_size=3, file_root=root, files=names, num_shards=num_shards,
                               shard_id=shard_id, stick_to_shard=stick_to_shard, pad_last_batch=True)
        per_shard.append(read_epochs(pipe, 2))
        pipe.close()
    for epoch in range(2):
        together = [label for shard in per_shard for label in shard[epoch]]
        assert sorted(together) == list(range(10)), f"epoch {epoch}: samples lost or read twice"
        # shards are contiguous parts of the data set of nearly equal size
        sizes = sorted(len(shard[epoch]) for shard in per_shard)
        assert sizes[-1] - sizes[0] <= 1
    for shard in per_shard:
        if stick_to_shard or num_shards == 1:
            assert shard[0] == shard[1]  # the same part each epoch
        else:
            assert set(shard[0]).isdisjoint(shard[1])  # shard k reads part (k + epoch) % num_shards


@pytest.mark.parametrize("num_shards", [1, 3])
def test_shuffle_after_epoch_permutes_the_whole_data_set_the_same_on_every_shard(flat_root, num_shards):
    """As DALI's: every epoch a permutation of the whole data set (the first one too), of which
    each shard takes its own part (so the shards still partition it)."""
    root, names = flat_root
    per_shard = []
    for shard_id in range(num_shards):
        pipe = reader_pipeline(batch_size=2, file_root=root, files=names, num_shards=num_shards, shard_id=shard_id,
                               shuffle_after_epoch=True, shuffle_after_epoch_seed=11, pad_last_batch=True)
        per_shard.append(read_epochs(pipe, 3))
        pipe.close()
    epochs = [[label for shard in per_shard for label in shard[epoch]] for epoch in range(3)]
    for epoch in epochs:
        assert sorted(epoch) == list(range(10))
    assert len({tuple(epoch) for epoch in epochs + [list(range(10))]}) == 4
    with pytest.raises(ValueError, match="readers.file.*'shuffle_after_epoch' and 'stick_to_shard' exclude"):
        reader_pipeline(file_root=root, files=names, shuffle_after_epoch=True, stick_to_shard=True)


# ---- errors: clear messages that name the path or the argument -------------------------------------
def test_missing_file_root_names_the_folder(tmp_path):
    missing = str(tmp_path / "no_such_folder")
    with pytest.raises(FileNotFoundError, match="no_such_folder"):
        reader_pipeline(file_root=missing).build()


def test_empty_folder_names_the_folder(tmp_path):
    (tmp_path / "empty_class").mkdir()
    with pytest.raises(ValueError, match=f"no files found in '{tmp_path}'"):
        reader_pipeline(file_root=str(tmp_path)).build()


def test_shard_id_must_be_less_than_num_shards(flat_root):
    root, names = flat_root
    with pytest.raises(ValueError, match=r"shard_id \(2\) must be less than num_shards \(2\)"):
        reader_pipeline(file_root=root, files=names, num_shards=2, shard_id=2).build()


def test_more_shards_than_samples_is_an_error(flat_root):
    root, names = flat_root
    with pytest.raises(ValueError, match="3 samples cannot be split into 4 shards"):
        reader_pipeline(file_root=root, files=names[:3], num_shards=4).build()


def test_bad_file_list_line_names_the_file_and_line(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("a.jpg 1\nb.jpg one\n")
    with pytest.raises(ValueError, match=r"line 2 of '.*list\.txt' should be 'path label'"):
        reader_pipeline(file_list=str(listing)).build()


def test_missing_file_list_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.txt"):
        reader_pipeline(file_list=str(tmp_path / "absent.txt")).build()


def test_inconsistent_sources_of_files_are_errors(flat_root):
    root, names = flat_root
    with pytest.raises(ValueError, match="2 labels for 3 files"):
        reader_pipeline(file_root=root, files=names[:3], labels=[0, 1]).build()
    with pytest.raises(ValueError, match="readers.file: give either 'file_list' or 'files'"):
        reader_pipeline(file_list="list.txt", files=names).build()
    with pytest.raises(ValueError, match="readers.file: give the files to read: file_root or file_list or files"):
        reader_pipeline().build()


def test_reader_arguments_are_checked_where_called(flat_root):
    root, names = flat_root
    with pytest.raises(ValueError, match="readers.file: argument 'num_shards'"):
        reader_pipeline(file_root=root, num_shards=0)
    with pytest.raises(TypeError, match="did you mean 'random_shuffle'"):
        reader_pipeline(file_root=root, random_shufle=True)


# ---- paths as pathlib.Path -----------------------------------------------------------------------
PATH_ARGUMENTS = {"readers.file": ("file_root", "file_list", "files"),
                  "readers.numpy": ("file_root", "file_list", "files"),
                  "readers.tfrecord": ("path", "index_path"), "readers.webdataset": ("paths", "index_paths"),
                  "readers.mxnet": ("path", "index_path"),
                  "readers.coco": ("file_root", "annotations_file", "preprocessed_annotations",
                                   "save_preprocessed_annotations_dir", "images")}


@pytest.mark.parametrize("name, argument", [(name, argument) for name, arguments in PATH_ARGUMENTS.items()
                                            for argument in arguments])
def test_every_file_and_folder_argument_takes_a_pathlib_path(name, argument):
    from penstock import registry
    schema = registry.get_schema(name)
    plural = schema.all_args[argument].kind == "paths"
    for given in (pathlib.Path("/data/x"), "/data/x", [pathlib.Path("/data/x"), "y"]):
        if isinstance(given, list) and not plural:
            continue
        value = schema.all_args[argument].convert(given)
        expected = [os.fspath(item) for item in given] if isinstance(given, list) else os.fspath(given)
        assert value == (tuple(expected) if plural and isinstance(given, list) else
                         (expected,) if plural else expected)
    with pytest.raises(TypeError, match="expected a path"):
        schema.all_args[argument].convert(b"/data/x")


def test_file_reader_reads_the_same_through_paths(tmp_path):
    names = make_flat_files(str(tmp_path), 4, height=8, width=8)
    expected = [file_bytes(str(tmp_path / name)) for name in names]
    (tmp_path / "list.txt").write_text("".join(f"{name} {i}\n" for i, name in enumerate(names)))
    make_class_tree(str(tmp_path / "tree"), {"only": 4}, height=8, width=8)
    tree = sorted((tmp_path / "tree" / "only").iterdir())
    forms = [(dict(file_root=tmp_path / "tree"), [path.read_bytes() for path in tree]),
             (dict(file_root=tmp_path, file_list=tmp_path / "list.txt"), expected),
             (dict(file_root=tmp_path, files=[pathlib.Path(name) for name in names]), expected),
             (dict(files=[tmp_path / name for name in names], labels=[0, 1, 2, 3]), expected)]
    for form, want in forms:
        pipe = reader_pipeline(**form)
        data, _ = pipe.run()
        assert [bytes(np.asarray(sample)) for sample in data] == want
        pipe.close()


def test_numpy_and_webdataset_readers_read_through_paths(tmp_path):
    arrays = [np.arange(6, dtype=np.int16).reshape(2, 3) + i for i in range(2)]
    for i, array in enumerate(arrays):
        np.save(tmp_path / f"a{i}.npy", array)
    archive = tmp_path / "shard.tar"
    with tarfile.open(archive, "w") as tar:
        for i in range(2):
            payload = bytes([i, i + 1])
            member = tarfile.TarInfo(f"sample{i}.bin")
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        return (fn.readers.numpy(file_root=tmp_path, files=[pathlib.Path("a0.npy"), "a1.npy"]),
                fn.readers.webdataset(paths=archive, ext="bin"))

    pipe = pipeline()
    read, archived = pipe.run()
    for got, array in zip(read, arrays):
        np.testing.assert_array_equal(np.asarray(got), array)
    assert [bytes(np.asarray(sample)) for sample in archived] == [bytes([0, 1]), bytes([1, 2])]
    pipe.close()
