"""external_source: data from Python callables, iterables and feed_input, with its checks, and the
seed blog's ExternalInputIterator pattern end to end."""
from __future__ import annotations

import functools
import os
import random

import numpy as np
import pytest
import torch

from helpers_data import deadline, write_jpeg
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from penstock import Pipeline, fn, ops, pipeline_def, types
from penstock.plugin.pytorch import GenericIterator

SEED = 1234


def source_pipeline(batch_size=3, num_threads=2, **source_args):
    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=SEED)
    def pipeline():
        outputs = fn.external_source(**source_args)
        return tuple(outputs) if isinstance(outputs, list) else outputs  # a list is one output (DALI)

    return pipeline()


def run_epoch(pipe, limit: int = 50) -> list[tuple]:
    """Every batch until StopIteration, as tuples of per-sample lists."""
    batches = []
    with deadline(10):
        for _ in range(limit):
            try:
                outputs = pipe.run()
            except StopIteration:
                return batches
            batches.append(tuple([np.array(sample) for sample in batch] for batch in outputs))
    raise AssertionError(f"no StopIteration within {limit} batches")


def firsts(batches, output: int = 0) -> list:
    return [[int(np.ravel(sample)[0]) for sample in batch[output]] for batch in batches]


# ---- callables ---------------------------------------------------------------------------------------
def test_callable_without_argument_is_called_once_per_batch_in_order():
    counter = iter(range(1000))

    def source():
        start = next(counter) * 3
        return [np.array([start + i], dtype=np.int64) for i in range(3)]

    pipe = source_pipeline(source=source, num_threads=2)
    for iteration in range(5):
        (batch,) = pipe.run()
        assert batch.as_array().ravel().tolist() == [3 * iteration, 3 * iteration + 1, 3 * iteration + 2]
    pipe.close()


def test_callable_with_argument_gets_the_iteration_index():
    calls = []

    def source(iteration):
        calls.append(iteration)
        return np.full((3, 2), iteration, dtype=np.float32)  # one array, the batch first

    pipe = source_pipeline(source=source)
    for iteration in range(4):
        (batch,) = pipe.run()
        np.testing.assert_array_equal(batch.as_array(), np.full((3, 2), iteration, np.float32))
    pipe.close()
    assert calls[:4] == [0, 1, 2, 3]


def test_callable_raising_stop_iteration_ends_the_epoch_and_reset_restarts():
    state = {"next": 0}

    def source():
        if state["next"] == 2:
            raise StopIteration
        state["next"] += 1
        return [np.array([state["next"]])] * 3

    pipe = source_pipeline(source=source)
    assert firsts(run_epoch(pipe)) == [[1] * 3, [2] * 3]
    state["next"] = 0
    pipe.reset()
    assert firsts(run_epoch(pipe)) == [[1] * 3, [2] * 3]
    pipe.close()


def test_indexing_callable_restarts_at_zero_every_epoch():
    """DALI's usual pattern: the callable indexes its data and raises StopIteration past the end."""
    data = [np.full((3, 1), value) for value in (5, 6, 7)]

    def source(iteration):
        if iteration >= len(data):
            raise StopIteration
        return data[iteration]

    pipe = source_pipeline(source=source)
    for _ in range(3):
        assert firsts(run_epoch(pipe)) == [[5] * 3, [6] * 3, [7] * 3]
        pipe.reset()
    pipe.close()


def test_per_sample_callable_sees_its_place_in_each_epoch():
    infos = []

    def source(info):
        if info.idx_in_epoch == 4:
            raise StopIteration
        infos.append((info.epoch_idx, info.iteration, info.idx_in_batch, info.idx_in_epoch))
        return np.array([info.idx_in_epoch], dtype=np.int32)

    pipe = source_pipeline(source=source, batch=False, batch_size=3)
    for _ in range(2):  # as DALI: the sample after the last full batch is dropped with its partial batch
        assert firsts(run_epoch(pipe)) == [[0, 1, 2]]
        pipe.reset()
    pipe.close()
    assert infos == [(epoch, iteration, index % 3, index) for epoch in (0, 1)
                     for index, iteration in zip(range(4), (0, 0, 0, 1))]


def test_per_sample_callable_gets_sample_info():
    infos = []

    def source(info):
        infos.append((info.idx_in_epoch, info.idx_in_batch, info.iteration))
        return np.array([info.idx_in_epoch * 10], dtype=np.int32)

    pipe = source_pipeline(source=source, batch=False, batch_size=3)
    assert pipe.run()[0].as_array().ravel().tolist() == [0, 10, 20]
    assert pipe.run()[0].as_array().ravel().tolist() == [30, 40, 50]
    pipe.close()
    assert infos[:6] == [(0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 0, 1), (4, 1, 1), (5, 2, 1)]


# ---- iterables ---------------------------------------------------------------------------------------
def test_an_iterable_without_cycle_is_gone_through_once():
    """As DALI: its end ends the epoch, and reset() does not start it over."""
    data = [[np.array([10 * b + i]) for i in range(3)] for b in range(4)]
    pipe = source_pipeline(source=data)
    assert firsts(run_epoch(pipe)) == [[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]]
    with pytest.raises(StopIteration):  # asked again before reset: still the end
        pipe.run()
    pipe.reset()
    assert run_epoch(pipe) == []
    pipe.close()


def test_per_sample_iterable_drops_a_short_last_batch():
    """As DALI: the samples after the last full batch end the epoch and are not delivered."""
    pipe = source_pipeline(source=[np.array([i]) for i in range(7)], batch=False, batch_size=3)
    assert firsts(run_epoch(pipe)) == [[0, 1, 2], [3, 4, 5]]
    pipe.close()


def _generator_function(count=3):
    for b in range(count):
        yield [np.array([b, 10 * i], np.int16) for i in range(2)]


@pytest.mark.parametrize("cycle", [None, False, "no"])
def test_a_generator_function_without_cycle_is_called_once(cycle):
    pipe = source_pipeline(source=_generator_function, cycle=cycle, batch_size=2)
    assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1], [2, 2]]
    pipe.reset()
    assert run_epoch(pipe) == []
    pipe.close()


@pytest.mark.parametrize("source", [_generator_function, functools.partial(_generator_function, 3)])
def test_a_generator_function_with_cycle_is_called_at_each_start(source):
    pipe = source_pipeline(source=source, cycle="quiet", batch_size=2)
    assert [int(pipe.run()[0].at(0)[0]) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    pipe.close()
    pipe = source_pipeline(source=source, cycle="raise", batch_size=2)
    for _ in range(2):
        assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1], [2, 2]]
        pipe.reset()
    pipe.close()


def test_an_object_whose_call_is_a_generator_function_is_one():
    class Counter:
        def __call__(self):
            for b in range(2):
                yield [np.full(1, b, np.int32)] * 2
    pipe = source_pipeline(source=Counter(), cycle=True, batch_size=2)
    assert [int(pipe.run()[0].at(0)[0]) for _ in range(5)] == [0, 1, 0, 1, 0]
    pipe.close()


def test_a_generator_object_is_gone_through_once_and_cannot_cycle():
    pipe = source_pipeline(source=_generator_function(), batch_size=2)
    assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1], [2, 2]]
    pipe.close()
    with pytest.raises(TypeError, match="external_source: a generator cannot be cycled through"):
        source_pipeline(source=_generator_function(), cycle=True)


@pytest.mark.parametrize("cycle", ["quiet", True])
def test_cycle_quiet_starts_over_without_a_break(cycle):
    data = [[np.array([b])] * 2 for b in range(3)]
    pipe = source_pipeline(source=data, cycle=cycle, batch_size=2)
    got = [int(pipe.run()[0].at(0)[0]) for _ in range(8)]
    pipe.close()
    assert got == [0, 1, 2, 0, 1, 2, 0, 1]


def test_cycle_raise_ends_each_pass_then_starts_over_after_reset():
    data = [[np.array([b])] * 2 for b in range(3)]
    pipe = source_pipeline(source=data, cycle="raise", batch_size=2)
    assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1], [2, 2]]
    pipe.reset()
    assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1], [2, 2]]
    pipe.close()


def test_bad_cycle_value_is_an_error():
    with pytest.raises(ValueError, match="'cycle' must be None, False or 'no' .* got 'loud'"):
        source_pipeline(source=[[np.zeros(1)]], cycle="loud").build()


@pytest.mark.parametrize("cycle", [False, True, "raise"])
def test_cycle_with_a_callable_is_an_error(cycle):
    with pytest.raises(ValueError, match="external_source: argument 'cycle' is only for a 'source' that is an "
                                         "iterable or a generator function"):
        source_pipeline(source=lambda: [np.zeros(1)], cycle=cycle)


def test_source_that_is_neither_callable_nor_iterable_is_an_error():
    with pytest.raises(TypeError, match="'source' must be a callable, an iterable or a generator function, got int"):
        source_pipeline(source=5).build()


# ---- several outputs ---------------------------------------------------------------------------------
def test_num_outputs_two_with_tuples_of_batches():
    def source(iteration):
        images = [np.full((2, 2, 3), iteration * 3 + i, np.uint8) for i in range(3)]
        labels = np.arange(3, dtype=np.int32)[:, None] + 100 * iteration
        return images, labels

    @pipeline_def(batch_size=3, num_threads=2, device_id=None)
    def pipeline():
        images, labels = fn.external_source(source=source, num_outputs=2, layout=["HWC", "C"])
        return fn.flip(images), labels

    pipe = pipeline()
    for iteration in range(2):
        images, labels = pipe.run()
        assert images.layout() == "HWC" and labels.layout() == "C"
        assert [int(np.asarray(image)[0, 0, 0]) for image in images] == [iteration * 3 + i for i in range(3)]
        assert labels.as_array().ravel().tolist() == [100 * iteration + i for i in range(3)]
    pipe.close()


def test_num_outputs_two_per_sample():
    pipe = source_pipeline(source=lambda info: (np.array([info.idx_in_epoch]), np.array([-info.idx_in_epoch])),
                           batch=False, num_outputs=2, batch_size=2)
    first, second = pipe.run()
    assert first.as_array().ravel().tolist() == [0, 1] and second.as_array().ravel().tolist() == [0, -1]
    pipe.close()


def test_num_outputs_mismatch_is_a_clear_error():
    pipe = source_pipeline(source=lambda: ([np.zeros(1)] * 3,), num_outputs=2)
    with deadline(10), pytest.raises(ValueError, match="num_outputs=2 but the source gave a tuple without items "
                                                       "0 to 1"):
        pipe.run()


def test_outputs_of_different_lengths_are_an_error():
    pipe = source_pipeline(source=lambda: ([np.zeros(1)] * 3, [np.zeros(1)] * 2), num_outputs=2)
    with deadline(10), pytest.raises(ValueError, match=r"different lengths \[2, 3\]"):
        pipe.run()


def test_more_samples_than_batch_size_is_an_error():
    pipe = source_pipeline(source=lambda: [np.zeros(1)] * 4, batch_size=3)
    with deadline(10), pytest.raises(ValueError, match="gave 4 samples, more than the batch_size of 3"):
        pipe.run()


# ---- checks and conversions --------------------------------------------------------------------------
def test_declared_dtype_is_checked():
    pipe = source_pipeline(source=lambda: [np.zeros(2, np.float32)] * 3, dtype=types.UINT8)
    with deadline(10), pytest.raises(TypeError, match="has dtype float32, but dtype=UINT8 was declared"):
        pipe.run()
    pipe = source_pipeline(source=lambda: [np.zeros(2, np.uint8)] * 3, dtype=np.uint8)
    assert pipe.run()[0].dtype == types.UINT8
    pipe.close()


def test_declared_ndim_is_checked():
    pipe = source_pipeline(source=lambda: [np.zeros((2, 2, 1))] * 3, ndim=2)
    with deadline(10), pytest.raises(ValueError, match="has 3 dimensions, but ndim=2 was declared"):
        pipe.run()


def test_bad_dtype_argument_is_an_error_at_the_call():
    with pytest.raises((TypeError, ValueError), match="external_source: argument 'dtype'.*'not a type'"):
        source_pipeline(source=lambda: [], dtype="not a type")


def test_torch_tensors_are_accepted_python_values_and_bytes_refused():
    tensor_batch = torch.arange(12, dtype=torch.int16).reshape(3, 4)
    pipe = source_pipeline(source=lambda: tensor_batch)
    np.testing.assert_array_equal(pipe.run()[0].as_array(), tensor_batch.numpy())
    pipe.close()
    pipe = source_pipeline(source=lambda: [torch.full((2,), i, dtype=torch.float64) for i in range(3)])
    assert pipe.run()[0].as_array().tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]
    pipe.close()
    for sample in (b"\x01\x02", [1, 2], 3, 2.5, True):  # as DALI: a sample needs a shape
        pipe = source_pipeline(source=lambda: [sample] * 3)
        with deadline(10), pytest.raises(TypeError, match=f"sample 0: a value of type {type(sample).__name__} has "
                                                          "no shape and cannot be a sample"):
            pipe.run()
        pipe.close()


def test_unusable_sample_type_is_a_clear_error():
    pipe = source_pipeline(source=lambda: [object()] * 3)
    with deadline(10), pytest.raises(TypeError, match="a value of type object has no shape"):
        pipe.run()


def test_scalar_batch_is_a_clear_error():
    pipe = source_pipeline(source=lambda: np.float32(3.0))
    with deadline(10), pytest.raises(ValueError, match="a batch must be a list of samples or an array"):
        pipe.run()


# ---- the seed blog's ExternalInputIterator pattern ------------------------------------------------------
class ExternalInputIterator:
    """Batches of (encoded JPEG bytes, multi-label uint8 arrays) from a 'name label label ...' file,
    as in the blog post (with a seeded shuffle)."""

    def __init__(self, batch_size, data_file, image_dir):
        self.images_dir = image_dir
        self.batch_size = batch_size
        with open(data_file) as handle:
            self.files = [line.rstrip() for line in handle if line.strip() != ""]
        random.Random(SEED).shuffle(self.files)

    def __iter__(self):
        self.i = 0
        self.n = len(self.files)
        return self

    def __next__(self):
        batch, labels = [], []
        for _ in range(self.batch_size):
            jpeg_filename, *label = self.files[self.i].split(" ")
            with open(os.path.join(self.images_dir, jpeg_filename), "rb") as handle:
                batch.append(np.frombuffer(handle.read(), dtype=np.uint8))
            labels.append(np.array(label, dtype=np.uint8))
            self.i = (self.i + 1) % self.n
        return batch, labels

    next = __next__


class ExternalSourcePipeline(Pipeline):
    def __init__(self, data_iterator, batch_size, num_threads, device_id):
        super().__init__(batch_size, num_threads, device_id, seed=12)
        self.data_iterator = data_iterator
        self.input = ops.ExternalSource()
        self.input_label = ops.ExternalSource()
        self.decode = ops.decoders.Image(device="cpu", output_type=types.RGB)
        self.res = ops.Resize(resize_x=24, resize_y=24, interp_type=types.INTERP_TRIANGULAR)

    def define_graph(self):
        self.jpegs = self.input()
        self.labels = self.input_label()
        images = self.decode(self.jpegs)
        output = self.res(images)
        return output, self.labels

    def iter_setup(self):
        images, labels = self.data_iterator.next()
        self.feed_input(self.jpegs, images)
        self.feed_input(self.labels, labels)


@pytest.fixture
def multilabel_data(tmp_path):
    image_dir = tmp_path / "images"
    lines = []
    for index in range(8):
        name = f"photo_{index}.jpg"
        write_jpeg(str(image_dir / name), 20 + index, 30 - index, seed=index)
        lines.append(f"{name} {index} {index % 2} {7 - index}")
    data_file = tmp_path / "labels.txt"
    data_file.write_text("\n".join(lines) + "\n")
    return str(data_file), str(image_dir)


def test_blog_external_input_iterator_through_generic_iterator(multilabel_data):
    data_file, image_dir = multilabel_data
    eii = ExternalInputIterator(batch_size=4, data_file=data_file, image_dir=image_dir)
    iterator = iter(eii)
    pipe = ExternalSourcePipeline(data_iterator=iterator, batch_size=4, num_threads=2, device_id=None)
    pipe.build()
    expected_labels = np.array([[int(v) for v in line.split(" ")[1:]] for line in eii.files], dtype=np.uint8)

    dali_iter = GenericIterator([pipe], ["images", "labels"], 8)
    assert len(dali_iter) == 2
    with deadline(20):
        for epoch in range(2):
            steps = 0
            for i, it in enumerate(dali_iter):
                batch_data = it[0]
                images, labels = batch_data["images"], batch_data["labels"]
                assert isinstance(images, torch.Tensor) and isinstance(labels, torch.Tensor)
                assert images.shape == (4, 24, 24, 3) and images.dtype == torch.uint8
                assert labels.shape == (4, 3) and labels.dtype == torch.uint8
                np.testing.assert_array_equal(labels.numpy(), expected_labels[4 * i:4 * i + 4])
                steps += 1
            assert steps == 2, f"epoch {epoch}"
            dali_iter.reset()
    pipe.close()


# ---- element types: one per output, named where they differ ------------------------------------------
def named_source(batch_size=3, **source_args):
    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=SEED)
    def pipeline():
        return fn.external_source(name="pixels", **source_args)
    return pipeline()


def test_a_batch_of_mixed_dtypes_is_refused_naming_the_source_the_sample_and_the_dtypes():
    pipe = named_source(source=lambda: [np.zeros(2, np.float32), np.zeros(2, np.float32), np.zeros(2, np.int64)])
    with deadline(10), pytest.raises(TypeError, match=r"external_source 'pixels': the samples of a batch must share "
                                                      r"one dtype, but sample 0 has float32 and sample 2 has int64"):
        pipe.run()
    pipe.close()


def test_numpy_numbers_of_mixed_kinds_are_refused_rather_than_promoted():
    pipe = named_source(source=lambda: [np.int64(1), np.float64(2.5), np.int64(3)])
    with deadline(10), pytest.raises(TypeError, match="sample 0 has int64 and sample 1 has float64"):
        pipe.run()
    pipe.close()


def dtype_per_iteration(iteration):
    return [np.full(2, iteration, np.float32 if iteration < 2 else np.float64)] * 3


@pytest.mark.parametrize("form", ["callable", "generator"])
def test_a_dtype_that_changes_between_iterations_is_refused(form):
    source = dtype_per_iteration if form == "callable" else (dtype_per_iteration(i) for i in range(5))
    pipe = named_source(source=source)
    with deadline(10):
        assert [pipe.run()[0].dtype for _ in range(2)] == [types.FLOAT, types.FLOAT]
        with pytest.raises(TypeError, match=r"external_source 'pixels': batch 2 has dtype float64, but its first "
                                            r"batch had float32"):
            pipe.run()
    pipe.close()


def test_a_declared_dtype_is_what_every_batch_must_have():
    pipe = named_source(source=dtype_per_iteration, dtype=types.FLOAT64)
    with deadline(10), pytest.raises(TypeError, match="external_source 'pixels': sample 0 has dtype float32, "
                                                      "but dtype=FLOAT64 was declared"):
        pipe.run()
    pipe.close()


def test_per_sample_sources_are_checked_across_the_batch():
    pipe = named_source(source=lambda info: np.zeros(2, np.int64 if info.idx_in_batch == 2 else np.uint8),
                        batch=False)
    with deadline(10), pytest.raises(TypeError, match="sample 0 has uint8 and sample 2 has int64"):
        pipe.run()
    pipe.close()
    pipe = named_source(source=lambda info: np.zeros(2, np.uint8 if info.iteration == 0 else np.int16), batch=False)
    with deadline(10):
        pipe.run()
        with pytest.raises(TypeError, match="batch 1 has dtype int16, but its first batch had uint8"):
            pipe.run()
    pipe.close()


def test_each_output_of_a_multi_output_source_keeps_its_own_dtype():
    def source(iteration):
        labels = [np.zeros(1, np.int32)] * 3 if iteration == 0 else [np.zeros(1, np.int64)] * 3
        return [np.zeros(2, np.uint8)] * 3, labels
    pipe = source_pipeline(source=source, num_outputs=2)
    with deadline(10):
        images, labels = pipe.run()
        assert (images.dtype, labels.dtype) == (types.UINT8, types.INT32)
        with pytest.raises(TypeError, match="batch 1 of output 1 has dtype int64, but its first batch had int32"):
            pipe.run()
    pipe.close()
    pipe = source_pipeline(source=lambda: ([np.zeros(2)] * 3, [np.zeros(1, np.int32), np.zeros(1, np.int8)] * 2),
                           num_outputs=2, batch_size=4)
    with deadline(10), pytest.raises(TypeError, match="sample 0 of output 1 has int32 and sample 1 has int8"):
        pipe.run()
    pipe.close()


def test_feed_input_refuses_mixed_and_changing_dtypes_where_it_is_called():
    pipe = named_source()
    pipe.build()
    with pytest.raises(TypeError, match="external_source 'pixels': the samples of a batch must share one dtype, but "
                                        "sample 0 has uint8 and sample 1 has float32"):
        pipe.feed_input("pixels", [np.zeros(2, np.uint8), np.zeros(2, np.float32), np.zeros(2, np.uint8)])
    pipe.feed_input("pixels", np.zeros((3, 2), np.uint8))
    with pytest.raises(TypeError, match="batch 1 has dtype int16, but its first batch had uint8"):
        pipe.feed_input("pixels", np.zeros((3, 2), np.int16))
    pipe.close()


@pytest.mark.parametrize("batch, message", [
    ([np.array([1, "a"], dtype=object)] * 3, r": sample 0 has dtype object, which a pipeline cannot carry"),
    ([np.array(["a", "b"])] * 3, r": sample 0 has dtype <U1, which a pipeline cannot carry"),
    (np.array([np.zeros(2, np.uint8), np.zeros(3, np.uint8), "x"], dtype=object),  # a ragged object batch
     r", output 0, sample 2: a value of type str has no shape"),
])
def test_samples_a_pipeline_cannot_carry_are_refused_at_the_source(batch, message):
    pipe = named_source(source=lambda: batch)
    with deadline(10), pytest.raises(TypeError, match="external_source 'pixels'" + message):
        pipe.run()
    pipe.close()


def test_an_object_array_batch_is_checked_item_by_item():
    def batch_of(*dtypes):
        batch = np.empty(len(dtypes), dtype=object)
        batch[:] = [np.zeros(size + 1, dtype) for size, dtype in enumerate(dtypes)]
        return batch
    pipe = named_source(source=lambda: batch_of(np.uint8, np.uint8, np.uint8))
    with deadline(10):
        (out,) = pipe.run()
    assert out.dtype == types.UINT8 and out.shape() == [(1,), (2,), (3,)]  # a ragged batch
    pipe.close()
    pipe = named_source(source=lambda: batch_of(np.uint8, np.float16, np.uint8))
    with deadline(10), pytest.raises(TypeError, match="sample 0 has uint8 and sample 1 has float16"):
        pipe.run()
    pipe.close()


# ---- the call's forms and arguments, as DALI takes them ----------------------------------------------
def test_source_and_num_outputs_may_be_positional():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipeline():
        return tuple(fn.external_source(lambda: ([np.array(1, np.uint8)] * 2, [np.array([2, 3])] * 2), 2))

    first, second = pipeline().run()
    assert first.as_array().tolist() == [1, 1] and second.as_array().tolist() == [[2, 3], [2, 3]]

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def twice():
        return fn.external_source(lambda: [np.zeros(1)] * 2, source=lambda: [np.zeros(1)] * 2)
    with pytest.raises(TypeError, match="external_source: 'source' given as an input and as an argument"):
        twice()


def test_a_parameter_with_a_default_counts_as_the_iteration_index():
    pipe = source_pipeline(source=lambda i=5: [np.full(1, i, np.int64)] * 3)
    assert [pipe.run()[0].as_array().ravel().tolist() for _ in range(2)] == [[0] * 3, [1] * 3]
    pipe.close()


@pytest.mark.parametrize("source, found", [(lambda a, b: None, "it has 2: a, b"), (lambda *a: None, r"it has \*a"),
                                           (lambda **k: None, r"it has \*\*k"), (lambda *, a=1: None, "it has a")])
def test_callables_taking_more_than_the_info_are_refused_at_the_call(source, found):
    with pytest.raises(TypeError, match=f"external_source: the 'source' callable must take 0 or 1 positional "
                                        f"parameters .*; {found}"):
        source_pipeline(source=source)


def test_batch_info_gives_the_iteration_and_the_epoch():
    infos = []

    def source(info):
        if info.iteration == 2:
            raise StopIteration
        infos.append((info.iteration, info.epoch_idx))
        return np.full((2, 1), info.iteration, np.int32)

    pipe = source_pipeline(source=source, batch_info=True, batch_size=2)
    for _ in range(2):
        assert firsts(run_epoch(pipe)) == [[0, 0], [1, 1]]
        pipe.reset()
    pipe.close()
    assert infos == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_dtype_ndim_and_layout_per_output():
    source = lambda: ([np.zeros((2, 2), np.uint8)] * 2, [np.zeros(3, np.float32)] * 2)  # noqa: E731
    pipe = source_pipeline(source=source, num_outputs=2, batch_size=2, dtype=[types.UINT8, types.FLOAT],
                           ndim=[2, 1], layout=["HW", "X"])
    first, second = pipe.run()
    assert (first.dtype, second.dtype, first.layout(), second.layout()) == (types.UINT8, types.FLOAT, "HW", "X")
    pipe.close()
    # a shorter list leaves the outputs past its end undeclared; one value is every output's
    pipe = source_pipeline(source=source, num_outputs=2, batch_size=2, dtype=[types.UINT8], layout=["HW"])
    first, second = pipe.run()
    assert (second.dtype, first.layout(), second.layout()) == (types.FLOAT, "HW", "")
    pipe.close()
    pipe = source_pipeline(source=source, num_outputs=2, batch_size=2, ndim=[2, 2])
    with deadline(10), pytest.raises(ValueError, match="sample 0 of output 1 has 1 dimensions, but ndim=2"):
        pipe.run()
    pipe = source_pipeline(source=source, num_outputs=2, batch_size=2, dtype=[types.UINT8, types.INT32])
    with deadline(10), pytest.raises(TypeError, match="sample 0 of output 1 has dtype float32, but dtype=INT32"):
        pipe.run()


@pytest.mark.parametrize("name, value", [("dtype", [types.UINT8]), ("ndim", [1]), ("layout", ["HW"])])
def test_lists_per_output_need_num_outputs(name, value):
    with pytest.raises(TypeError, match=f"external_source: argument '{name}' is a list, which is for a source "
                                        "with num_outputs"):
        source_pipeline(source=lambda: [np.zeros(1)], **{name: value})


@pytest.mark.parametrize("arguments, error, message", [
    (dict(source=lambda: [np.zeros(1)], parallel=True), TypeError, "parallel=True the 'source' callable must take"),
    (dict(source=lambda i: [np.zeros(1)], parallel=True, no_copy=False), ValueError, "'no_copy' cannot be False"),
    (dict(source=_generator_function, parallel=True, batch=False), TypeError, "must give batches"),
    (dict(source=[[np.zeros(1)]], parallel=True, batch=False), TypeError, "an iterable must give batches"),
    (dict(source=lambda: [np.zeros(1)], prefetch_queue_depth=2), ValueError, "only for parallel sources"),
    (dict(source=lambda: [np.zeros(1)], repeat_last=True), ValueError, "'repeat_last' is only for sources fed"),
])
def test_arguments_dali_refuses_together(arguments, error, message):
    with pytest.raises(error, match=f"external_source: .*{message}"):
        source_pipeline(**arguments)


def test_parallel_sources_give_what_serial_ones_give():
    source = lambda info: np.array([info.idx_in_epoch], np.int64)  # noqa: E731
    pipe = source_pipeline(source=source, batch=False, parallel=True, prefetch_queue_depth=2, batch_size=2)
    assert [pipe.run()[0].as_array().ravel().tolist() for _ in range(2)] == [[0, 1], [2, 3]]
    pipe.close()


def test_scalar_samples_read_through_numpy_keep_their_values():
    pipe = source_pipeline(source=lambda: [np.array(i, np.int32) for i in range(3)])
    (batch,) = pipe.run()
    samples = [np.asarray(sample) for sample in batch]  # each its own memory, all kept at once
    assert [int(sample) for sample in samples] == [0, 1, 2]
    pipe.close()


def test_batch_info_is_dali_types_batch_info():
    from penstock.compat.dali import types as dali_types
    from penstock.operators.readers.external import BatchInfo
    assert dali_types.BatchInfo is BatchInfo


def test_ops_external_source_takes_source_and_num_outputs_by_position():
    class Positional(Pipeline):
        def __init__(self):
            super().__init__(batch_size=2, num_threads=1, device_id=None)
            self.source = ops.ExternalSource(lambda: ([np.array(1, np.uint8)] * 2, [np.array(2, np.int32)] * 2), 2)

        def define_graph(self):
            return tuple(self.source())

    first, second = Positional().run()
    assert (first.as_array().tolist(), second.as_array().tolist()) == ([1, 1], [2, 2])
    with pytest.raises(TypeError, match="external_source: takes 2 positional argument"):
        ops.ExternalSource(lambda: None, 1, 3)
    with pytest.raises(TypeError, match="external_source: 'source' given by position and as a keyword"):
        ops.ExternalSource(lambda: None, source=lambda: None)


def test_a_layout_must_name_every_dimension():
    pipe = source_pipeline(source=lambda: [np.zeros((2, 2))] * 3, layout="HWC")
    with deadline(10), pytest.raises(ValueError, match="sample 0 has 2 dimensions, which layout 'HWC' cannot describe"):
        pipe.run()
    pipe = source_pipeline(source=lambda: [np.zeros((2, 2))] * 3, layout="HW")
    assert pipe.run()[0].layout() == "HW"
    pipe.close()
