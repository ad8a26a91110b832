"""Defining pipelines (@pipeline_def and Pipeline subclasses with ops objects), building and running
them, the Batch API, and seeded determinism across threads and prefetch depths."""
from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest
import torch

from helpers_data import make_flat_files
from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from penstock import Batch, Pipeline, fn, ops, pipeline_def, types

SEED = 1234
SIZES = [(24, 32), (30, 20), (40, 40)]  # (height, width) cycled over the files: ragged decodes


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    return root, make_flat_files(root, 10, sizes=SIZES)


# ---- @pipeline_def ----------------------------------------------------------------------------------
def test_pipeline_def_takes_decorator_arguments_and_call_overrides(image_root):
    root, names = image_root

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def labels_pipeline(files, first_label=0):
        ids = list(range(first_label, first_label + len(files)))
        _, labels = fn.readers.file(file_root=root, files=files, labels=ids)
        return labels

    pipe = labels_pipeline(names[:6])
    assert (pipe.batch_size, pipe.num_threads, pipe.device_id, pipe.seed) == (2, 1, None, 3)
    (labels,) = pipe.run()
    assert [int(labels.at(i)[0]) for i in range(len(labels))] == [0, 1]
    pipe.close()

    pipe = labels_pipeline(names[:6], first_label=100, batch_size=4, seed=9, num_threads=2, prefetch_queue_depth=3)
    assert (pipe.batch_size, pipe.num_threads, pipe.seed, pipe.prefetch_queue_depth) == (4, 2, 9, 3)
    (labels,) = pipe.run()
    assert [int(label[0]) for label in labels.as_array()] == [100, 101, 102, 103]
    pipe.close()


def test_pipeline_def_signature_shows_function_and_pipeline_arguments():
    @pipeline_def(batch_size=8, device_id=None)
    def my_pipeline(data_dir, shuffle=False):
        return fn.random.coin_flip()

    parameters = inspect.signature(my_pipeline).parameters
    assert list(parameters)[:2] == ["data_dir", "shuffle"]
    assert parameters["batch_size"].default == 8
    assert parameters["device_id"].default is None
    assert parameters["seed"].kind is inspect.Parameter.KEYWORD_ONLY
    assert my_pipeline.__name__ == "my_pipeline"


def test_pipeline_def_function_argument_may_shadow_a_pipeline_argument():
    @pipeline_def(batch_size=3, device_id=None, seed=5)
    def pipeline(seed):
        return fn.random.uniform(seed=seed, range=(0.0, 1.0))

    first, second = pipeline(seed=77), pipeline(seed=77)
    assert first.seed == 5  # the function's own `seed` went to the function, not the pipeline
    np.testing.assert_array_equal(first.run()[0].as_array(), second.run()[0].as_array())
    first.close()
    second.close()


def test_pipeline_def_without_parentheses_and_with_tuple_outputs():
    @pipeline_def
    def pipeline():
        return fn.random.coin_flip(), fn.random.uniform(), fn.random.normal()

    pipe = pipeline(batch_size=2, num_threads=1, device_id=None, seed=SEED)
    outputs = pipe.run()
    assert len(outputs) == 3 and all(isinstance(batch, Batch) and len(batch) == 2 for batch in outputs)
    pipe.close()


def test_outputs_holding_data_nodes_in_lists_are_refused_as_in_dali():
    """A tuple is the outputs; a list is one output, which cannot hold data nodes (a forgotten *)."""
    @pipeline_def
    def listed():
        return [fn.random.coin_flip(), fn.random.uniform()]

    with pytest.raises(TypeError, match="output 0 contains a nested `DataNode`"):
        listed(batch_size=2, num_threads=1, device_id=None).build()
    with Pipeline(batch_size=2, num_threads=1, device_id=None) as pipe:
        pipe.set_outputs(fn.random.coin_flip(), (fn.random.uniform(), fn.random.normal()))
    with pytest.raises(TypeError, match="output 1 contains a nested `DataNode`"):
        pipe.build()  # where DALI checks the outputs


def test_pipeline_def_errors_name_the_problem():
    @pipeline_def(batch_szie=4)  # as in DALI, the decorator takes any name: making a pipeline checks them
    def misspelt():
        return fn.random.coin_flip()

    with pytest.raises(TypeError, match="unknown pipeline argument 'batch_szie'.*did you mean 'batch_size'"):
        misspelt()

    @pipeline_def
    def variadic(**kwargs):
        return fn.random.coin_flip()

    with pytest.raises(TypeError, match=r"variadic keyword argument `\*\*kwargs`.*not allowed"):
        variadic(batch_size=2, device_id=None)

    @pipeline_def(batch_size=2, device_id=None)
    def nothing():
        fn.random.coin_flip()

    with pytest.raises(ValueError, match=r"nothing\(\) returned no outputs"):
        nothing()


def test_pipeline_arguments_are_checked():
    with pytest.raises(ValueError, match="'batch_size' must be a positive int"):
        Pipeline(batch_size=0)
    with pytest.raises(ValueError, match="'prefetch_queue_depth' must be a positive int"):
        Pipeline(batch_size=2, prefetch_queue_depth=0)
    with pytest.raises(NotImplementedError, match="define_graph"):
        Pipeline(batch_size=2, device_id=None).build()


def test_with_block_and_set_outputs():
    pipe = Pipeline(batch_size=3, num_threads=1, device_id=None, seed=SEED)
    with pipe:
        pipe.set_outputs(fn.random.uniform(range=(2.0, 3.0)))
    (values,) = pipe.run()
    assert len(values) == 3 and np.all((values.as_array() >= 2.0) & (values.as_array() < 3.0))
    pipe.close()


def test_cpu_only_pipeline_refuses_gpu_operators(image_root):
    root, names = image_root

    @pipeline_def(batch_size=2, device_id=None)
    def pipeline():
        jpegs, _ = fn.readers.file(file_root=root, files=names)
        return fn.decoders.image(jpegs, device="mixed")

    with pytest.raises(ValueError, match="mixed"):
        pipeline().build()


# ---- Pipeline subclass with ops objects ---------------------------------------------------------------
class ReaderPipeline(Pipeline):
    """The object style: operators made in __init__, wired in define_graph."""

    def __init__(self, root, files, **kwargs):
        super().__init__(**kwargs)
        self.reader = ops.readers.File(file_root=root, files=files, name="Reader")
        self.decode = ops.decoders.Image(output_type=types.RGB)
        self.resize = ops.Resize(resize_x=16, resize_y=12)
        self.normalize = ops.CropMirrorNormalize(mean=[128.0] * 3, std=[64.0] * 3, dtype=types.FLOAT)

    def define_graph(self):
        jpegs, labels = self.reader()
        return self.normalize(self.resize(self.decode(jpegs))), labels


def test_subclass_with_ops_builds_and_runs(image_root):
    root, names = image_root
    pipe = ReaderPipeline(root, names, batch_size=4, num_threads=2, device_id=None, seed=SEED)
    pipe.build()
    assert pipe.epoch_size("Reader") == 10
    images, labels = pipe.run()
    assert images.layout() == "CHW" and images.dtype == types.FLOAT
    assert images.as_array().shape == (4, 3, 12, 16)
    assert [int(label[0]) for label in labels.as_array()] == [0, 1, 2, 3]
    assert [int(label[0]) for label in pipe.run()[1].as_array()] == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="no operator named 'Missing'.*Reader"):
        pipe.epoch_size("Missing")
    pipe.close()


def test_ops_objects_check_arguments_when_made():
    with pytest.raises(ValueError, match="resize: argument 'mode'"):
        ops.Resize(mode="strech")
    with pytest.raises(TypeError, match="given when the operator was made and again"):
        with Pipeline(batch_size=1, device_id=None):
            ops.random.Uniform(range=(0, 1))(range=(0, 2))


class FeedPipeline(Pipeline):
    """The seed blog's style: an ExternalSource fed from iter_setup."""

    def __init__(self, batches, layout=None, **kwargs):
        super().__init__(**kwargs)
        self.source = ops.ExternalSource()
        self.flip = ops.Flip(horizontal=1)
        self.batches = iter(batches)
        self.layout = layout

    def define_graph(self):
        self.data = self.source()
        return self.data, self.flip(self.data)

    def iter_setup(self):
        self.feed_input(self.data, next(self.batches), layout=self.layout)


def hwc_batches(count: int, batch_size: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (batch_size, 4, 5, 3), dtype=np.uint8) for _ in range(count)]


@pytest.mark.parametrize("form", ["list of arrays", "one array", "torch tensor", "list of tensors"])
def test_feed_input_accepts_numpy_and_torch_batches(form):
    batches = hwc_batches(4)
    convert = {"list of arrays": list, "one array": lambda b: b, "torch tensor": torch.from_numpy,
               "list of tensors": lambda b: [torch.from_numpy(sample) for sample in b]}[form]
    pipe = FeedPipeline([convert(batch) for batch in batches], layout="HWC", batch_size=3, num_threads=2,
                        device_id=None, prefetch_queue_depth=2)
    for expected in batches:
        data, flipped = pipe.run()
        assert data.layout() == "HWC" and flipped.layout() == "HWC"  # feed_input's layout, propagated
        np.testing.assert_array_equal(data.as_array(), expected)
        np.testing.assert_array_equal(flipped.as_array(), expected[:, :, ::-1])
    pipe.close()


def test_feed_input_end_stops_the_pipeline_and_reset_starts_over():
    batches = hwc_batches(3)
    pipe = FeedPipeline(batches, batch_size=3, num_threads=1, device_id=None)
    for epoch in range(2):
        seen = []
        with pytest.raises(StopIteration):
            while True:
                seen.append(pipe.run()[0].as_array().copy())
        assert len(seen) == 3, f"epoch {epoch}"
        for got, expected in zip(seen, batches):
            np.testing.assert_array_equal(got, expected)
        with pytest.raises(StopIteration):  # asked again before reset: the end again, not a hang
            pipe.run()
        pipe.batches = iter(batches)
        pipe.reset()
    pipe.close()


class NamedAxesFeedPipeline(FeedPipeline):
    """Axes found by name in a layout that only feed_input gives."""

    def define_graph(self):
        self.data = self.source()
        return fn.slice(self.data, [1, 0], [2, 3], axis_names="WH"), fn.reductions.sum(self.data, axis_names="C")


def test_feed_input_layout_resolves_axis_names():
    batches = hwc_batches(2)
    pipe = NamedAxesFeedPipeline(batches, layout="HWC", batch_size=3, num_threads=1, device_id=None)
    for batch in batches:
        window, channel_sums = pipe.run()
        np.testing.assert_array_equal(window.as_array(), batch[:, 0:3, 1:3])  # anchor and shape (x, y)
        np.testing.assert_array_equal(channel_sums.as_array(), batch.sum(axis=-1, dtype=np.uint64))
        assert window.layout() == "HWC" and channel_sums.layout() == "HW"
    pipe.close()


def test_axis_names_without_any_layout_are_refused_naming_the_operator():
    pipe = NamedAxesFeedPipeline(hwc_batches(1), layout=None, batch_size=3, num_threads=1, device_id=None)
    with pytest.raises(ValueError, match="slice: axis_names 'WH' need the input's layout"):
        pipe.run()
    pipe.close()
    with pytest.raises(ValueError, match="slice: axis_names 'WH' need the input's layout"):
        with Pipeline(batch_size=1, num_threads=1, device_id=None) as pipe:
            source = fn.external_source(lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True)
            pipe.set_outputs(fn.slice(source, [0, 0], [2, 2], axis_names="WH"))
        pipe.build()


def test_feed_input_by_name_and_without_iter_setup():
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        pipe.set_outputs(fn.external_source(name="numbers"))
    with pytest.raises(RuntimeError, match="no data was fed to numbers"):
        pipe.run()  # a clear error instead of waiting forever
    pipe.feed_input("numbers", [np.arange(3), np.arange(3) * 2])
    (numbers,) = pipe.run()
    np.testing.assert_array_equal(numbers.as_array(), [[0, 1, 2], [0, 2, 4]])
    with pytest.raises(TypeError, match="is not an external_source"):
        with pipe:
            pipe.feed_input(fn.random.coin_flip(), [1, 0])
    pipe.close()


# ---- the Batch API -------------------------------------------------------------------------------------
def normalized_pipeline(root, names, batch_size=4, **kwargs):
    @pipeline_def(batch_size=batch_size, device_id=None, **kwargs)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=root, files=names, name="Reader")
        images = fn.decoders.image(jpegs)
        dense = fn.crop_mirror_normalize(fn.resize(images, resize_x=8, resize_y=6), mean=[10.0], std=[2.0])
        return dense, images, labels

    return pipeline()


def test_dense_batch_api_and_zero_copy_exchange(image_root):
    root, names = image_root
    pipe = normalized_pipeline(root, names, num_threads=2, seed=SEED)
    dense, _, _ = pipe.run()
    assert len(dense) == 4 and dense.layout() == "CHW"
    assert dense.shape() == [(3, 6, 8)] * 4
    array = dense.as_array()
    assert array.shape == (4, 3, 6, 8) and array.dtype == np.float32
    assert dense.as_array() is array  # no copy on the second call either
    for index in range(4):
        assert np.shares_memory(dense.at(index), array) and np.shares_memory(dense[index], array)
        np.testing.assert_array_equal(dense.at(index), array[index])
    assert [tuple(sample.shape()) for sample in dense] == dense.shape()
    assert np.shares_memory(np.asarray(dense), array)
    tensor = torch.from_dlpack(dense)
    assert tensor.data_ptr() == array.ctypes.data and tuple(tensor.shape) == array.shape
    from_dlpack = np.from_dlpack(dense)
    assert np.shares_memory(from_dlpack, array)
    np.testing.assert_array_equal(tensor.numpy(), array)
    pipe.close()


def test_ragged_batch_gives_samples_but_no_array(image_root):
    root, names = image_root
    pipe = normalized_pipeline(root, names, num_threads=2, seed=SEED)
    _, images, labels = pipe.run()
    assert images.layout() == "HWC"
    assert images.shape() == [(h, w, 3) for h, w in (SIZES * 2)[:4]]
    assert images.at(1).shape == (30, 20, 3) and images[2].dtype == types.UINT8 and images.at(2).dtype == np.uint8
    with pytest.raises(ValueError, match="not dense.*3 different shapes.*at\\(i\\)"):
        images.as_array()
    with pytest.raises(ValueError, match="not dense"):
        np.asarray(images)
    # uniform samples that were not written into one buffer are stacked on request
    assert labels.as_array().shape == (4, 1) and labels.as_array().dtype == np.int32
    pipe.close()


def test_batch_kept_by_the_user_is_not_overwritten_by_later_runs(image_root):
    root, names = image_root
    pipe = normalized_pipeline(root, names, num_threads=2, seed=SEED, prefetch_queue_depth=1)
    kept = [pipe.run()[0] for _ in range(3)]
    copies = [batch.as_array().copy() for batch in kept]
    for _ in range(6):  # two more epochs through the buffer pool
        pipe.run()
    for batch, copy in zip(kept, copies):
        np.testing.assert_array_equal(batch.as_array(), copy)
    pipe.close()


# ---- determinism ---------------------------------------------------------------------------------------
def augmenting_pipeline(root, names, seed, num_threads, prefetch_queue_depth):
    @pipeline_def(batch_size=4, device_id=None, seed=seed, num_threads=num_threads,
                  prefetch_queue_depth=prefetch_queue_depth)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=root, files=names, random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, random_area=(0.3, 1.0))
        images = fn.resize(images, resize_x=12, resize_y=12)
        images = fn.crop_mirror_normalize(images, crop=(10, 10), crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                                          mirror=fn.random.coin_flip(), mean=[120.0] * 3, std=[60.0] * 3)
        return images, labels

    return pipeline()


def run_iterations(pipe, iterations: int = 7) -> list[tuple[np.ndarray, np.ndarray]]:
    results = [tuple(batch.as_array().copy() for batch in pipe.run()) for _ in range(iterations)]
    pipe.close()
    return results


@pytest.fixture(scope="module")
def reference_run(image_root):
    root, names = image_root
    return run_iterations(augmenting_pipeline(root, names, SEED, num_threads=1, prefetch_queue_depth=1))


@pytest.mark.parametrize("num_threads,prefetch_queue_depth", list(itertools.product((1, 2, 4), (1, 2, 3))))
def test_same_seed_same_outputs_for_any_threads_and_prefetch(image_root, reference_run, num_threads,
                                                             prefetch_queue_depth):
    root, names = image_root
    results = run_iterations(augmenting_pipeline(root, names, SEED, num_threads, prefetch_queue_depth))
    for iteration, (got, expected) in enumerate(zip(results, reference_run)):
        np.testing.assert_array_equal(got[0], expected[0], err_msg=f"images of iteration {iteration}")
        np.testing.assert_array_equal(got[1], expected[1], err_msg=f"labels of iteration {iteration}")


def test_another_seed_gives_other_outputs(image_root, reference_run):
    root, names = image_root
    results = run_iterations(augmenting_pipeline(root, names, SEED + 1, num_threads=2, prefetch_queue_depth=2))
    assert not all(np.array_equal(got[0], expected[0]) for got, expected in zip(results, reference_run))
    assert not all(np.array_equal(got[1], expected[1]) for got, expected in zip(results, reference_run))
    # the augmentations themselves differ, not just the order of the files
    flat_got = sorted(sample.tobytes() for got in results[:5] for sample in got[0][:2])
    flat_expected = sorted(sample.tobytes() for expected in reference_run[:5] for sample in expected[0][:2])
    assert flat_got != flat_expected


def test_augmentations_change_between_epochs(image_root, reference_run):
    """The same file gets a new crop / mirror in the next epoch (random streams advance by iteration)."""
    labels_first_epoch = np.concatenate([labels.ravel() for _, labels in reference_run[:3]])[:10]
    images_first_epoch = np.concatenate([images for images, _ in reference_run[:3]])[:10]
    labels_second_epoch = np.concatenate([labels.ravel() for _, labels in reference_run[3:6]])[:10]
    images_second_epoch = np.concatenate([images for images, _ in reference_run[3:6]])[:10]
    first = {int(label): image for label, image in zip(labels_first_epoch, images_first_epoch)}
    second = {int(label): image for label, image in zip(labels_second_epoch, images_second_epoch)}
    assert sorted(first) == sorted(second) == list(range(10))
    assert any(not np.array_equal(first[label], second[label]) for label in range(10))


def test_packed_batch_of_empty_samples_is_dense():
    """Samples with no elements (no boxes) lie back to back too: the batch is one [N, 0, 4] tensor."""
    from penstock.batch import PackedBatch
    packed = PackedBatch.of_dense(torch.empty((3, 0, 4)))
    assert packed.offsets == [0, 0, 0] and tuple(packed.dense().shape) == (3, 0, 4)
    assert tuple(PackedBatch.of_dense(torch.arange(12).reshape(3, 4)).dense().shape) == (3, 4)


@pytest.mark.parametrize("worker_processes, device", [(False, "cpu"), (True, "cpu"), (False, "gpu")])
def test_a_dropped_pipeline_frees_its_executor_without_the_cyclic_collector(worker_processes, device):
    """Its buffers (shared memory with worker processes) go with the last reference, not at a later
    gc.collect(): a process that makes many small pipelines does not grow."""
    import gc
    import weakref

    from conftest import gpu_or_emulated
    with gpu_or_emulated():
        pipe = Pipeline(batch_size=2, num_threads=2, device_id=None if device == "cpu" else 0, seed=SEED,
                        worker_processes=worker_processes)
        with pipe:
            data = fn.external_source(source=lambda: [np.zeros((8, 8, 3), np.uint8)] * 2, batch=True, layout="HWC")
            pipe.set_outputs(fn.flip(data.gpu() if device == "gpu" else data, horizontal=1))
        pipe.run()
    executor = weakref.ref(pipe._executor)
    gc.disable()
    try:
        del pipe
        assert executor() is None
    finally:
        gc.enable()


def test_output_dtype_and_ndim_are_checked_at_every_run():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        data = fn.external_source(lambda: [np.zeros((2, 3), np.uint8)] * 2, batch=True)
        return data, fn.cast(data, dtype=types.INT32)

    matching = pipe(output_dtype=[types.UINT8, None], output_ndim=2)
    matching.run()
    assert matching.output_dtype() == [types.UINT8, None] and matching.output_ndim() == [2, 2]
    with pytest.raises(RuntimeError, match=r"Data type in the output_idx=1 does not match"):
        pipe(output_dtype=types.UINT8).run()
    with pytest.raises(RuntimeError, match=r"Number of dimensions in the output_idx=0 does not match. Expected: 3"):
        pipe(output_ndim=[3, None]).run()
    with pytest.raises(RuntimeError, match="Lengths of provided output descriptions do not match"):
        pipe(output_dtype=[types.UINT8]).build()
    with pytest.raises(ValueError, match="'output_ndim' must be an int >= 0"):
        pipe(output_ndim=-1)
