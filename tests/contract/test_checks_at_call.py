"""Checks of arguments taken together, made by the schema where the operator is called (for every
device at once), and checks of what operators declare, made when the pipeline is built: both
before any data flows, each naming the operator and the argument."""
import numpy as np
import pytest

from penstock import Pipeline, fn, ops, pipeline_def, types


def define(body):
    """Calls ``body()`` inside a pipeline definition, so that its operator calls are checked."""
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None)
    with pipe:
        return body()


IMAGES = lambda: fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, batch=True)  # noqa: E731


@pytest.mark.parametrize("call, message", [
    (lambda: fn.resize(IMAGES()), "resize: give the output size"),
    (lambda: fn.crop(IMAGES(), crop_h=3), "crop: give crop_w and crop_h together"),
    (lambda: fn.crop(IMAGES(), crop=(2, 2), crop_w=3), "crop: give the window as crop=.* not both"),
    (lambda: fn.crop_mirror_normalize(IMAGES(), mean=[1, 2], std=[1, 2, 3]), "'mean' and 'std' have 2 and 3 values"),
    (lambda: fn.decoders.image_slice(IMAGES(), start=(0, 0), rel_start=(0, 0)), "'rel_start' and 'start' exclude"),
    (lambda: fn.transpose(IMAGES(), perm=(0, 0, 1)), r"transpose: argument 'perm': \(0, 0, 1\) is not a permutation"),
    (lambda: fn.random.uniform(range=(2, 1)), "random.uniform: argument 'range' must be \\[low, high\\) with low < high"),
    (lambda: fn.external_source(source=lambda: [], cycle="sometimes"), "external_source: argument 'cycle'"),
    (lambda: fn.readers.file(), "readers.file: give the files to read"),
    (lambda: fn.normalize(IMAGES(), axes=(0,), axis_names="H"), "normalize: arguments 'axes' and 'axis_names' exclude"),
])
def test_bad_combinations_fail_where_the_operator_is_called(call, message):
    with pytest.raises(ValueError, match=message):
        define(call)


def test_the_object_api_checks_the_arguments_of_construction_and_call_together():
    resize = ops.Resize()  # the size may still come with the call
    define(lambda: resize(IMAGES(), resize_x=8, resize_y=8))
    with pytest.raises(ValueError, match="resize: give the output size"):
        define(lambda: resize(IMAGES()))


def test_a_size_given_per_sample_counts_as_given():
    define(lambda: fn.resize(IMAGES(), resize_shorter=fn.random.uniform(range=(4, 8))))


def test_inputs_an_operator_cannot_take_fail_when_the_pipeline_is_built():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def decode_floats():
        data = fn.external_source(source=lambda: [np.zeros(8, np.float32)] * 2, batch=True, dtype=types.FLOAT)
        return fn.decoders.image(data)

    with pytest.raises(ValueError, match="decoders.image: expects encoded images .* float32"):
        decode_floats().build()

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def resize_vectors():
        data = fn.external_source(source=lambda: [np.zeros(8, np.uint8)] * 2, batch=True, ndim=1)
        return fn.resize(data, resize_x=4, resize_y=4)

    with pytest.raises(ValueError, match="resize: takes samples of 3 or 4 or 5 dimensions .* got 1"):
        resize_vectors().build()


def test_declared_outputs_say_what_the_pipeline_gives_before_it_runs():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def train(root):
        jpegs, labels = fn.readers.file(file_root=root)
        images = fn.decoders.image_random_crop(jpegs)
        images = fn.resize(images, resize_x=16, resize_y=12)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT16, crop=(8, 8)), labels

    import tempfile
    with tempfile.TemporaryDirectory() as root:
        import os
        os.makedirs(f"{root}/a")
        open(f"{root}/a/x.jpg", "wb").close()
        images, labels = train(root).output_specs
    assert (images.dtype, images.ndim, images.layout, images.shape) == (np.dtype(np.float16), 3, "CHW", None)
    assert (labels.dtype, labels.shape) == (np.dtype(np.int32), (1,))


def test_mean_and_std_lengths_are_checked_against_the_declared_channels_at_build(tmp_path):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path), {"a": 2})

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def normalized(output_type, mean):
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        images = fn.decoders.image(jpegs, output_type=output_type)
        return fn.crop_mirror_normalize(fn.resize(images, size=(8, 8)), mean=mean, std=[1.0])
    with pytest.raises(ValueError, match="crop_mirror_normalize: mean, std and fill_values give 3 values per channel for 1 output channels"):
        normalized(types.GRAY, [1.0, 2.0, 3.0]).build()
    with pytest.raises(ValueError, match="mean, std and fill_values give 2 values per channel for 3 output channels"):
        normalized(types.RGB, [1.0, 2.0]).build()
    pipe = normalized(types.GRAY, [1.0])
    assert pipe.run()[0].as_array().shape == (2, 1, 8, 8)
    pipe.close()
