"""on_error="skip": a sample that cannot be read or decoded is left out and its batch refilled from
the same shard; every other sample of the epoch is delivered exactly once, and skipped() says what
was left out, where and why. The default still raises, naming the file."""
import os

import numpy as np
import pytest
from conftest import gpu_or_emulated
from helpers_data import make_class_tree

import penstock
from penstock import fn, pipeline_def, types
from penstock.plugin.pytorch import ClassificationIterator, LastBatchPolicy

BATCH = 4


@pytest.fixture()
def tree(tmp_path):
    """20 JPEGs in two classes, 3 of them broken (truncated, empty, not an image); the file name's
    number is the label's seed, so a sample is identified by its pixels' sum."""
    root = str(tmp_path)
    written = make_class_tree(root, {"a": 10, "b": 10})
    paths = [path for paths in written.values() for path in paths]
    broken = [paths[1], paths[9], paths[14]]
    with open(broken[0], "r+b") as handle:
        handle.truncate(60)
    open(broken[1], "wb").close()
    with open(broken[2], "wb") as handle:
        handle.write(b"not an image at all" * 10)
    return root, paths, broken


@pipeline_def(batch_size=BATCH, num_threads=2, seed=3)
def decode_all(root, shuffle, shard_id=0, num_shards=1):
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=shuffle, shard_id=shard_id,
                                    num_shards=num_shards, name="Reader")
    images = fn.decoders.image(jpegs, output_type=types.RGB)
    return fn.resize(images, resize_x=8, resize_y=8), labels


def test_by_default_a_broken_file_raises_naming_the_file_and_operator(tree):
    root, _, broken = tree
    pipe = decode_all(root, False)
    with pytest.raises(penstock.PipelineError, match=r"decoders\.image failed on sample from '.*img_001\.jpg'"):
        for _ in range(5):
            pipe.run()
    pipe.close()


@pytest.mark.parametrize("worker_processes", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_skip_refills_batches_and_delivers_every_good_sample_once(tree, shuffle, worker_processes):
    root, paths, broken = tree
    pipe = decode_all(root, shuffle, on_error="skip", worker_processes=worker_processes)
    pipe.build()
    by_label = {}
    for epoch in range(2):
        seen, sizes = [], []
        while True:
            images, labels = pipe.run()
            info = pipe._last_result.epoch_info
            assert len(images) == BATCH  # refilled: every batch keeps its size
            seen.extend(int(image.sum()) * 100 + int(label[0]) for image, label in
                        zip(images.as_array()[:info.valid], labels.as_array()[:info.valid]))
            if info.last:
                break
        skipped = pipe.skipped()
        assert sorted(os.path.basename(s.source) for s in skipped) == ["img_001.jpg", "img_004.jpg", "img_009.jpg"]
        assert {s.operator for s in skipped} == {"decoders.image"} and all(s.reason for s in skipped)
        assert len(seen) == len(set(seen)) == len(paths) - len(broken)
        by_label[epoch] = sorted(seen)
    assert by_label[0] == by_label[1]  # the same good samples every epoch
    pipe.close()


def test_skip_delivers_what_the_raise_policy_delivers_for_the_good_files(tree):
    root, paths, broken = tree
    good_root = os.path.join(root, "..", "good")
    for path in paths:
        if path not in broken:
            target = os.path.join(good_root, os.path.relpath(path, root))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(path, "rb") as source, open(target, "wb") as copy:
                copy.write(source.read())
    def epoch_pixels(pipe):
        found = []
        while True:
            images, _ = pipe.run()
            info = pipe._last_result.epoch_info
            found.extend(image.tobytes() for image in images.as_array()[:info.valid])
            if info.last:
                pipe.close()
                return sorted(found)
    assert epoch_pixels(decode_all(root, False, on_error="skip")) == epoch_pixels(decode_all(good_root, False))


@pytest.mark.parametrize("prefetch, threads, processes", [(1, 1, False), (4, 2, False), (2, 2, True)])
def test_the_batches_depend_on_the_failures_only_not_on_how_far_ahead_the_pipeline_reads(tree, prefetch, threads,
                                                                                       processes):
    root, _, _ = tree
    runs = []
    for depth, num_threads, worker_processes in ((2, 2, False), (prefetch, threads, processes)):
        pipe = decode_all(root, True, on_error="skip", prefetch_queue_depth=depth, num_threads=num_threads,
                          worker_processes=worker_processes)
        batches = []
        for _ in range(10):  # two epochs
            images, labels = pipe.run()
            batches.append((images.as_array().tobytes(), labels.as_array().tobytes(), pipe._last_result.epoch_info))
        runs.append(batches)
        pipe.close()
    assert runs[0] == runs[1]


def test_more_failures_than_the_last_batch_holds_and_failures_in_the_last_batch(tmp_path):
    """19 files, batch 4: the last batch holds 3; 6 broken files, two of them in the last batch."""
    root = str(tmp_path)
    paths = make_class_tree(root, {"a": 19})["a"]
    broken = [paths[i] for i in (0, 5, 6, 11, 16, 18)]
    for path in broken:
        with open(path, "r+b") as handle:
            handle.truncate(50)
    pipe = decode_all(root, False, on_error="skip")
    seen, valids = [], []
    while True:
        images, _ = pipe.run()
        info = pipe._last_result.epoch_info
        assert len(images) == BATCH
        valids.append(info.valid)
        seen.extend(image.tobytes() for image in images.as_array()[:info.valid])
        if info.last:
            break
    assert len(seen) == len(set(seen)) == 19 - 6 and valids == [4, 4, 4, 1]  # the epoch ends with its last sample
    assert len(pipe.skipped()) == 6
    pipe.close()


def test_skip_with_shards_keeps_each_shard_exactly_once(tree):
    root, paths, broken = tree
    delivered = []
    for shard in range(2):
        pipe = decode_all(root, False, shard_id=shard, num_shards=2, on_error="skip")
        while True:
            images, labels = pipe.run()
            info = pipe._last_result.epoch_info
            delivered.extend(image.tobytes() for image in images.as_array()[:info.valid])
            if info.last:
                break
        pipe.close()
    assert len(delivered) == len(set(delivered)) == len(paths) - len(broken)


def test_a_fed_batch_cannot_be_refilled_so_the_sample_is_left_out(tmp_path):
    with open(make_class_tree(str(tmp_path), {"a": 1})["a"][0], "rb") as handle:
        good = np.frombuffer(handle.read(), np.uint8)
    bad = np.frombuffer(b"garbage" * 20, np.uint8)

    @pipeline_def(batch_size=3, num_threads=1, seed=1, on_error="skip")
    def fed():
        data = fn.external_source(source=lambda: [good, bad, good], batch=True)
        return fn.decoders.image(data)
    pipe = fed()
    (images,) = pipe.run()
    assert len(images) == 2 and images.as_array().shape[0] == 2
    assert [s.operator for s in pipe.skipped()] == ["decoders.image"]
    pipe.close()


@pytest.mark.parametrize("policy", [LastBatchPolicy.PARTIAL, LastBatchPolicy.FILL, LastBatchPolicy.DROP])
def test_the_pytorch_iterator_delivers_each_good_sample_once_and_reports_the_skipped_count(tree, policy):
    root, paths, broken = tree
    pipe = decode_all(root, False, on_error="skip")
    iterator = ClassificationIterator(pipe, reader_name="Reader", last_batch_policy=policy)
    for _ in range(2):
        delivered = [tuple(image.flatten().tolist()) for batch in iterator for image in batch[0]["data"]]
        good = len(paths) - len(broken)
        if policy is LastBatchPolicy.PARTIAL:
            assert len(delivered) == len(set(delivered)) == good
        elif policy is LastBatchPolicy.FILL:  # full batches; the padding repeats delivered samples
            assert len(delivered) % BATCH == 0 and len(set(delivered)) == good
        else:  # the short last batch is left out, as without failures
            assert len(delivered) == len(set(delivered)) == good // BATCH * BATCH
        assert iterator.skipped_count == len(broken)
        iterator.reset()
    pipe.close()


def test_a_pipeline_with_two_readers_cannot_skip(tree):
    root, _, _ = tree

    @pipeline_def(batch_size=2, num_threads=1, seed=1, on_error="skip")
    def two_readers():
        first, _ = fn.readers.file(file_root=root, name="A")
        second, _ = fn.readers.file(file_root=root, name="B")
        return fn.decoders.image(first), fn.decoders.image(second)
    with pytest.raises(ValueError, match="on_error='skip' refills batches from one reader; this pipeline has 2"):
        two_readers().build()


def test_skip_on_the_gpu_path(tree):
    """'mixed' decoders read each header on the CPU workers: a file that fails there is replaced."""
    root, paths, broken = tree
    from penstock import devices
    with gpu_or_emulated():
        @pipeline_def(batch_size=BATCH, num_threads=2, seed=3, device_id=0, on_error="skip")
        def gpu_decode():
            jpegs, labels = fn.readers.file(file_root=root, name="Reader")
            images = fn.decoders.image(jpegs, device="mixed")
            return fn.resize(images, resize_x=8, resize_y=8, device="gpu"), labels
        pipe = gpu_decode()
        seen = []
        while True:
            images, labels = pipe.run()
            info = pipe._last_result.epoch_info
            assert len(images) == BATCH
            seen.extend(int(label[0]) * 1000 + i for i, label in enumerate(labels.as_array()[:info.valid]))
            if info.last:
                break
        assert sum(1 for _ in seen) == len(paths) - len(broken)
        assert sorted(os.path.basename(s.source) for s in pipe.skipped()) == \
            ["img_001.jpg", "img_004.jpg", "img_009.jpg"]
        pipe.close()


def test_on_error_takes_raise_or_skip_only():
    with pytest.raises(ValueError, match="'on_error' must be 'raise' or 'skip', got 'ignore'"):
        penstock.Pipeline(batch_size=1, on_error="ignore")


# ---- the edges: from no sample failing to every sample failing ------------------------------------
EDGE_BATCH = 3


def _bad_indices(count: int, percent: int, where: str) -> list[int]:
    bad = round(count * percent / 100)
    first = {"start": 0, "middle": (count - bad) // 2, "end": count - bad}[where]
    return list(range(first, first + bad))


@pytest.fixture()
def labelled_files(tmp_path):
    """Files whose label is their index, so that a delivered sample names its file; ``bad`` of
    them emptied."""
    def make(count: int, bad: list[int]):
        paths = make_class_tree(str(tmp_path), {"a": count})["a"]
        for index in bad:
            open(paths[index], "wb").close()
        return paths
    return make


@pipeline_def(batch_size=EDGE_BATCH, num_threads=2, seed=5, on_error="skip")
def labelled(paths, shuffle=False, shard_id=0, num_shards=1):
    jpegs, labels = fn.readers.file(files=paths, labels=list(range(len(paths))), random_shuffle=shuffle,
                                    shard_id=shard_id, num_shards=num_shards, stick_to_shard=True, name="Reader")
    return fn.resize(fn.decoders.image(jpegs), resize_x=4, resize_y=4), labels


EDGE_CASES = [(20, 0, "start"), (20, 10, "start"), (20, 10, "middle"), (20, 10, "end"), (20, 50, "start"),
              (20, 50, "middle"), (20, 50, "end"), (20, 90, "start"), (20, 90, "middle"), (20, 90, "end"),
              (100, 99, "start"), (100, 99, "middle"), (100, 99, "end")]


@pytest.mark.parametrize("count, percent, where", EDGE_CASES)
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_good_sample_once_per_epoch_and_no_batch_without_one(labelled_files, count, percent, where, shuffle):
    bad = _bad_indices(count, percent, where)
    paths = labelled_files(count, bad)
    good = sorted(set(range(count)) - set(bad))
    pipe = labelled(paths, shuffle)
    for epoch in range(2):
        delivered = []
        while True:
            images, labels = pipe.run()
            info = pipe.last_epoch_info
            assert info.epoch == epoch and len(images) == len(labels) == EDGE_BATCH
            assert 1 <= info.valid <= EDGE_BATCH  # a batch always holds a sample of its epoch
            delivered.extend(int(label[0]) for label in labels.as_array()[:info.valid])
            if info.last:
                break
        assert sorted(delivered) == good
        assert sorted(int(os.path.basename(s.source)[4:7]) for s in pipe.skipped()) == bad
    pipe.close()


@pytest.mark.parametrize("count, percent, where", EDGE_CASES[::2])
@pytest.mark.parametrize("policy", [LastBatchPolicy.PARTIAL, LastBatchPolicy.FILL, LastBatchPolicy.DROP])
def test_the_iterator_ends_the_epoch_when_no_good_sample_is_left(labelled_files, count, percent, where, policy):
    bad = _bad_indices(count, percent, where)
    good = sorted(set(range(count)) - set(bad))
    pipe = labelled(labelled_files(count, bad))
    iterator = ClassificationIterator(pipe, reader_name="Reader", last_batch_policy=policy)
    for _ in range(2):
        batches = [batch[0]["label"].flatten().tolist() for batch in iterator]
        assert all(batches)  # no batch of 0 samples
        delivered = [label for batch in batches for label in batch]
        if policy is LastBatchPolicy.PARTIAL:
            assert sorted(delivered) == good
        elif policy is LastBatchPolicy.FILL:  # full batches; padding repeats delivered samples
            assert all(len(batch) == EDGE_BATCH for batch in batches) and sorted(set(delivered)) == good
        else:
            assert all(len(batch) == EDGE_BATCH for batch in batches)
            assert len(delivered) == len(set(delivered)) == len(good) // EDGE_BATCH * EDGE_BATCH
            assert set(delivered) <= set(good)
        assert iterator.skipped_count == len(bad)
        iterator.reset()
    pipe.close()


@pytest.mark.parametrize("count", [1, 2, 7])
def test_an_epoch_whose_every_sample_fails_raises_naming_the_files(labelled_files, count):
    paths = labelled_files(count, list(range(count)))
    pipe = labelled(paths)
    with pytest.raises(penstock.PipelineError, match=r"every sample of epoch 0 of readers\.file failed.*"
                                                     rf"\({count} samples\).*img_000\.jpg.*the file is empty"):
        pipe.run()
    assert sorted(s.source for s in pipe.skipped(0)) == sorted(paths)  # each named once
    pipe.close()
    iterator = ClassificationIterator(labelled(paths), reader_name="Reader")
    with pytest.raises(penstock.PipelineError, match="every sample of epoch 0"):
        next(iterator)


def test_every_sample_of_a_fed_batch_failing_raises_naming_them():
    bad = np.frombuffer(b"garbage" * 20, np.uint8)

    @pipeline_def(batch_size=2, num_threads=1, seed=1, on_error="skip")
    def fed():
        return fn.decoders.image(fn.external_source(source=lambda: [bad, bad], batch=True))
    pipe = fed()
    with pytest.raises(penstock.PipelineError, match=r"every sample of batch 0 failed.*\(2 samples\).*decoders\.image"):
        pipe.run()
    pipe.close()


def test_a_reader_and_feed_input_cannot_skip(labelled_files):
    paths = labelled_files(4, [])

    @pipeline_def(batch_size=2, num_threads=1, seed=1, on_error="skip")
    def mixed():
        jpegs, _ = fn.readers.file(files=paths, name="Reader")
        return fn.decoders.image(jpegs), fn.external_source(name="extra")
    with pytest.raises(ValueError, match="on_error='skip' with a reader cannot take feed_input data"):
        mixed().build()


def test_two_shards_in_one_iterator_end_the_epoch_together(labelled_files):
    """Shard 0 loses most of its samples: its epoch ends first, and it is not run into its next
    epoch while shard 1 delivers the rest of its own."""
    paths = labelled_files(20, list(range(1, 9)))
    pipes = [labelled(paths, shard_id=shard, num_shards=2) for shard in range(2)]
    iterator = ClassificationIterator(pipes, reader_name="Reader", last_batch_policy=LastBatchPolicy.PARTIAL)
    for _ in range(2):
        delivered = [label for step in iterator for entry in step for label in entry["label"].flatten().tolist()]
        assert sorted(delivered) == [0] + list(range(9, 20))
        iterator.reset()
    for pipe in pipes:
        pipe.close()
