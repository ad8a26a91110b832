"""PyTorch iterators: torch tensors per step without copies, and every sample of an epoch delivered
exactly as the last-batch policy promises, over shards, epochs and resets."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers_data import deadline, make_flat_files, write_jpeg
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from penstock import fn, pipeline_def
from penstock.plugin.pytorch import ClassificationIterator, GenericIterator, LastBatchPolicy, to_torch

SEED = 1234
FILL, DROP, PARTIAL = LastBatchPolicy.FILL, LastBatchPolicy.DROP, LastBatchPolicy.PARTIAL


@pytest.fixture(scope="module")
def one_file(tmp_path_factory):
    """One tiny JPEG; samples are told apart by their labels, which are unique ids."""
    return write_jpeg(str(tmp_path_factory.mktemp("one") / "only.jpg"), 8, 8)


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    return root, make_flat_files(root, 6, sizes=[(20, 28), (28, 20)])


def id_pipelines(path, total, batch_size, num_shards=1, **reader_args):
    """One pipeline per shard, each giving the ids (labels 0..total-1) of the samples it reads."""
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=SEED)
    def pipeline(shard_id):
        _, ids = fn.readers.file(files=[path] * total, labels=list(range(total)), name="Reader",
                                 shard_id=shard_id, num_shards=num_shards, **reader_args)
        return ids

    return [pipeline(shard_id) for shard_id in range(num_shards)]


def one_epoch(iterator) -> list[list[np.ndarray]]:
    """Per step, per pipeline, the ids delivered (a StopIteration ends the epoch)."""
    steps = []
    with deadline(10):
        for step in iterator:
            assert isinstance(step, list) and all(set(entry) == {"ids"} for entry in step)
            steps.append([entry["ids"].numpy().ravel().copy() for entry in step])
            assert len(steps) < 100, "the epoch does not end"
    return steps


def close_all(pipes):
    for pipe in pipes:
        pipe.close()


EPOCH_CASES = [(12, 4), (10, 4), (7, 3), (9, 2)]  # (data set size, batch size): divides, and does not


# ---- exactly once ------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("total,batch_size", EPOCH_CASES)
def test_partial_delivers_each_sample_exactly_once_per_epoch(one_file, total, batch_size, num_shards):
    pipes = id_pipelines(one_file, total, batch_size, num_shards, random_shuffle=True)
    iterator = GenericIterator(pipes, ["ids"], reader_name="Reader", last_batch_policy=PARTIAL)
    orders = []
    for epoch in range(2):
        steps = one_epoch(iterator)
        assert len(steps) == len(iterator), f"epoch {epoch}"
        ids = np.concatenate([ids for step in steps for ids in step])
        assert sorted(ids.tolist()) == list(range(total)), f"epoch {epoch}: lost or repeated samples"
        assert all(len(ids) == batch_size for step in steps[:-1] for ids in step)  # only the last is short
        orders.append(ids.tolist())
        iterator.reset()
    assert orders[0] != orders[1]  # a new shuffle each epoch
    close_all(pipes)


@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("total,batch_size", EPOCH_CASES)
def test_fill_delivers_full_batches_with_padding_only_at_the_end(one_file, total, batch_size, num_shards):
    pipes = id_pipelines(one_file, total, batch_size, num_shards)
    iterator = GenericIterator(pipes, ["ids"], reader_name="Reader", last_batch_policy=FILL)
    for epoch in range(2):
        steps = one_epoch(iterator)
        assert len(steps) == len(iterator), f"epoch {epoch}"
        assert all(len(ids) == batch_size for step in steps for ids in step)  # batch multiples
        delivered = np.concatenate([ids for step in steps for ids in step])
        assert set(delivered.tolist()) == set(range(total)), f"epoch {epoch}: samples missing"
        before_last = np.concatenate([ids for step in steps[:-1] for ids in step] or [np.array([], int)])
        assert len(set(before_last.tolist())) == len(before_last), "padding before the last batch"
        assert len(delivered) - total < num_shards * batch_size
        iterator.reset()
    close_all(pipes)


@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("total,batch_size", EPOCH_CASES)
def test_drop_delivers_only_full_batches_without_repeats(one_file, total, batch_size, num_shards):
    pipes = id_pipelines(one_file, total, batch_size, num_shards)
    iterator = GenericIterator(pipes, ["ids"], reader_name="Reader", last_batch_policy=DROP)
    expected_steps = total // num_shards // batch_size  # the full batches every shard has
    assert len(iterator) == expected_steps
    for epoch in range(2):
        steps = one_epoch(iterator)
        assert len(steps) == expected_steps, f"epoch {epoch}"
        assert all(len(ids) == batch_size for step in steps for ids in step)
        delivered = np.concatenate([ids for step in steps for ids in step]).tolist()
        assert len(set(delivered)) == len(delivered) and set(delivered) <= set(range(total))
        iterator.reset()
    close_all(pipes)


def test_drop_gives_every_shard_the_same_number_of_steps(one_file):
    """Processes that each read one shard (as in distributed training) must agree on the number of
    steps, or they wait for each other forever: shards of 3, 3 and 4 samples, batches of 2."""
    counts = []
    for shard_id in range(3):
        @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=SEED)
        def pipeline():
            _, ids = fn.readers.file(files=[one_file] * 10, labels=list(range(10)), name="Reader",
                                     shard_id=shard_id, num_shards=3)
            return ids

        pipe = pipeline()
        iterator = GenericIterator(pipe, ["ids"], reader_name="Reader", last_batch_policy=DROP)
        assert len(iterator) == 1
        steps_per_epoch = []
        for _ in range(3):  # without stick_to_shard, each process reads another part each epoch
            steps_per_epoch.append(len(one_epoch(iterator)))
            iterator.reset()
        counts.append(steps_per_epoch)
        pipe.close()
    assert counts == [[1, 1, 1]] * 3


@pytest.mark.parametrize("policy", [FILL, DROP, PARTIAL])
def test_auto_reset_starts_the_next_epoch_by_itself(one_file, policy):
    # the same data each epoch (without padding the shard's last batch reads on into its next pass, as DALI's)
    pipes = id_pipelines(one_file, 10, 4, num_shards=2, stick_to_shard=True, pad_last_batch=True)
    iterator = GenericIterator(pipes, ["ids"], reader_name="Reader", last_batch_policy=policy, auto_reset=True)
    epochs = [one_epoch(iterator) for _ in range(3)]
    for steps in epochs[1:]:
        assert [[ids.tolist() for ids in step] for step in steps] == \
            [[ids.tolist() for ids in step] for step in epochs[0]]
    assert len(epochs[0]) == len(iterator)
    close_all(pipes)


def test_reset_mid_epoch_skips_to_the_next_epoch(one_file):
    (pipe,) = id_pipelines(one_file, 10, 4, pad_last_batch=True)  # each epoch from the data set's start
    iterator = GenericIterator(pipe, ["ids"], reader_name="Reader", last_batch_policy=PARTIAL)
    assert iterator.next()[0]["ids"].ravel().tolist() == [0, 1, 2, 3]
    iterator.reset()
    steps = one_epoch(iterator)
    assert [ids.tolist() for (ids,) in steps] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    pipe.close()


def test_iterator_keeps_raising_stop_iteration_until_reset(one_file):
    (pipe,) = id_pipelines(one_file, 6, 3)
    iterator = GenericIterator(pipe, ["ids"], reader_name="Reader")
    assert len(one_epoch(iterator)) == 2
    for _ in range(2):
        with pytest.raises(StopIteration):
            next(iterator)
    iterator.reset()
    assert len(one_epoch(iterator)) == 2
    pipe.close()


# ---- without a reader: size, or the source's end -----------------------------------------------------
def counting_pipeline(batch_size=4, start=0):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=SEED)
    def pipeline():
        return fn.external_source(source=lambda i: [np.array([start + i * batch_size + k]) for k in range(batch_size)])

    return pipeline()


@pytest.mark.parametrize("policy,lengths", [(PARTIAL, [4, 4, 2]), (FILL, [4, 4, 4]), (DROP, [4, 4])])
def test_size_sets_the_epoch_of_sources_without_epochs(policy, lengths):
    pipe = counting_pipeline()
    iterator = GenericIterator(pipe, ["ids"], size=10, last_batch_policy=policy)
    assert len(iterator) == len(lengths)
    steps = one_epoch(iterator)
    assert [len(ids) for (ids,) in steps] == lengths
    assert np.concatenate([ids for (ids,) in steps]).tolist()[:min(10, sum(lengths))] == \
        list(range(min(10, sum(lengths))))
    pipe.close()


def test_size_split_over_two_pipelines_delivers_every_share():
    pipes = [counting_pipeline(batch_size=2, start=0), counting_pipeline(batch_size=2, start=1000)]
    iterator = GenericIterator(pipes, ["ids"], size=9, last_batch_policy=PARTIAL)  # shares of 4 and 5
    steps = one_epoch(iterator)
    assert len(steps) == len(iterator) == 3
    first = np.concatenate([step[0] for step in steps]).tolist()
    second = np.concatenate([step[1] for step in steps]).tolist()
    assert first == [0, 1, 2, 3] and second == [1000, 1001, 1002, 1003, 1004]
    close_all(pipes)


def test_source_end_ends_the_epoch_without_size():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        return fn.external_source(source=[[np.array([b]), np.array([b])] for b in range(3)])

    pipe = pipeline()
    iterator = GenericIterator(pipe, ["ids"])
    with pytest.raises(TypeError, match="length of an epoch"):
        len(iterator)
    for expected in ([[0, 0], [1, 1], [2, 2]], []):  # an iterable without cycle is gone through once, as in DALI
        assert [ids.tolist() for (ids,) in one_epoch(iterator)] == expected
        iterator.reset()
    pipe.close()


# ---- tensors ---------------------------------------------------------------------------------------------
def image_pipeline(root, names, batch_size=3):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=SEED)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=root, files=names, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs)
        images = fn.resize(images, resize_x=10, resize_y=8)
        return fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), mean=[128.0], std=[32.0]), labels

    return pipeline()


def test_classification_iterator_yields_named_tensors(image_root):
    root, names = image_root
    pipe = image_pipeline(root, names)
    iterator = ClassificationIterator(pipe, reader_name="Reader")
    assert len(iterator) == 2
    steps = list(iterator)
    assert len(steps) == 2
    for step in steps:
        assert isinstance(step, list) and len(step) == 1 and set(step[0]) == {"data", "label"}
        data, label = step[0]["data"], step[0]["label"]
        assert data.shape == (3, 3, 8, 10) and data.dtype == torch.float32 and data.device.type == "cpu"
        assert label.shape == (3, 1) and label.dtype == torch.int32
    assert sorted(torch.cat([step[0]["label"] for step in steps]).ravel().tolist()) == list(range(6))
    pipe.close()


def test_tensors_share_memory_with_the_batches(image_root):
    root, names = image_root
    pipe = image_pipeline(root, names)
    delivered = []
    run = pipe.run
    pipe.run = lambda: delivered.append(run()) or delivered[-1]  # see the batches the iterator gets
    iterator = GenericIterator([pipe], ["images", "labels"], reader_name="Reader")
    step = next(iterator)
    images, labels = delivered[-1]
    assert step[0]["images"].data_ptr() == images.as_array().ctypes.data  # no copy of the images
    assert step[0]["labels"].data_ptr() == labels.as_array().ctypes.data
    assert to_torch(images).data_ptr() == images.as_array().ctypes.data
    pipe.close()


def test_tensors_kept_across_steps_keep_their_values(image_root):
    root, names = image_root
    pipe = image_pipeline(root, names, batch_size=2)
    iterator = GenericIterator(pipe, ["images", "labels"], reader_name="Reader", auto_reset=True)
    kept = [step[0]["images"] for step in iterator]
    copies = [tensor.clone() for tensor in kept]
    for _ in range(3):  # three more epochs through the same buffers
        for _ in iterator:
            pass
    for tensor, copy in zip(kept, copies):
        assert torch.equal(tensor, copy)
    pipe.close()


def test_policy_by_name_and_older_spelling(one_file):
    (pipe,) = id_pipelines(one_file, 5, 2)
    assert [len(ids) for (ids,) in one_epoch(GenericIterator(pipe, ["ids"], last_batch_policy="partial"))] == \
        [2, 2, 1]
    assert [len(ids) for (ids,) in one_epoch(GenericIterator(pipe, ["ids"], fill_last_batch=True))] == [2, 2, 2]
    pipe.close()


def test_iterator_arguments_are_checked(one_file):
    (pipe,) = id_pipelines(one_file, 4, 2)
    with pytest.raises(ValueError, match="repeated names"):
        GenericIterator(pipe, ["ids", "ids"])
    with pytest.raises(ValueError, match="give size or reader_name, not both"):
        GenericIterator(pipe, ["ids"], size=4, reader_name="Reader")
    with pytest.raises(ValueError, match="no operator named 'Other'"):
        GenericIterator(pipe, ["ids"], reader_name="Other")
    with pytest.raises(ValueError, match="at least one pipeline"):
        GenericIterator([], ["ids"])
    with pytest.raises(ValueError, match="1 outputs but output_map names 2"):
        next(GenericIterator(pipe, ["ids", "more"]))
    pipe.close()


def test_two_readers_need_reader_name(one_file):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        _, first = fn.readers.file(files=[one_file] * 4, name="Train")
        _, second = fn.readers.file(files=[one_file] * 6, name="Extra")
        return first, second

    pipe = pipeline()
    with pytest.raises(ValueError, match="2 readers \\(Train, Extra\\); name the one"):
        GenericIterator(pipe, ["a", "b"])
    iterator = GenericIterator(pipe, ["a", "b"], reader_name="Train")
    assert len(iterator) == 2 and len(list(iterator)) == 2
    pipe.close()


def _ragged_pipeline():
    from penstock import fn, pipeline_def

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1)
    def ragged():
        shapes = [(2, 3), (4, 1), (3, 3)]
        data = fn.external_source(source=lambda: [np.full(shape, i + 1, np.float32) for i, shape in enumerate(shapes)],
                                  batch=True)
        return data, fn.external_source(source=lambda: [np.array([i], np.int32) for i in range(3)], batch=True)
    return ragged()


def test_an_output_of_samples_of_different_shapes_comes_as_a_list_of_tensors():
    from penstock.plugin.pytorch import GenericIterator
    pipe = _ragged_pipeline()
    step = next(GenericIterator(pipe, ["data", "label"], size=3))[0]
    assert isinstance(step["data"], list) and [tuple(t.shape) for t in step["data"]] == [(2, 3), (4, 1), (3, 3)]
    assert all(torch.equal(tensor, torch.full(tensor.shape, i + 1.0)) for i, tensor in enumerate(step["data"]))
    assert tuple(step["label"].shape) == (3, 1)  # a dense output stays one tensor
    pipe.close()


def test_an_output_of_samples_of_different_shapes_padded_on_request():
    from penstock.plugin.pytorch import GenericIterator
    pipe = _ragged_pipeline()
    step = next(GenericIterator(pipe, ["data", "label"], size=3, ragged="pad", fill_value=-1))[0]
    padded = step["data"]
    assert tuple(padded.shape) == (3, 4, 3)
    expected = torch.full((3, 4, 3), -1.0)
    for i, (rows, columns) in enumerate([(2, 3), (4, 1), (3, 3)]):
        expected[i, :rows, :columns] = i + 1
    assert torch.equal(padded, expected)
    assert step["data_lengths"].tolist() == [2, 4, 3] and "label_lengths" not in step  # label is dense
    pipe.close()


def test_as_array_of_a_ragged_output_names_the_output_and_the_shapes():
    pipe = _ragged_pipeline()
    data, _ = pipe.run()
    with pytest.raises(ValueError, match=r"output 0 \(external_source.*\): the batch is not dense: its samples have "
                                         r"3 different shapes \(\(2, 3\), \(3, 3\), \(4, 1\)\)"):
        data.as_array()
    pipe.close()
