"""The language DALI programs are written in: operators placed as DALI places them, arguments coerced
as DALI coerces them, the older operator names, and external_source at an iterable's end."""
import numpy as np
import pytest
from conftest import gpu_or_emulated, smooth_image

from penstock import fn, pipeline_def, types
from penstock.compat.dali import fn as dali_fn
from penstock.compat.dali import ops as dali_ops


def _images():
    return [smooth_image(20 + 4 * i, 24, seed=i) for i in range(2)]


def test_an_operator_without_device_follows_its_input_to_the_gpu():
    with gpu_or_emulated():
        @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1)
        def placed():
            images = fn.external_source(source=_images, batch=True)
            on_gpu = fn.resize(images.gpu(), resize_shorter=8)  # no device: the GPU, as its input
            on_cpu = fn.resize(images, resize_shorter=8)
            return on_gpu, on_cpu, fn.crop_mirror_normalize(on_gpu, crop=(8, 8), dtype=types.FLOAT)
        pipe = placed()
        gpu_resized, cpu_resized, normalized = pipe.run()
        assert gpu_resized.device == "gpu" and cpu_resized.device == "cpu" and normalized.device == "gpu"
        on_cpu = gpu_resized.as_cpu()
        for gpu_sample, cpu_sample in zip(map(on_cpu.at, range(2)), map(cpu_resized.at, range(2))):
            assert gpu_sample.shape == cpu_sample.shape
            assert np.abs(gpu_sample.astype(int) - cpu_sample).mean() <= 2.0  # the resize tests' bound
        pipe.close()


def test_an_explicit_device_wins_and_gpu_to_cpu_stays_an_error():
    with gpu_or_emulated():
        @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1)
        def backwards():
            images = fn.external_source(source=_images, batch=True)
            return fn.resize(images.gpu(), resize_shorter=8, device="cpu")
        with pytest.raises(ValueError, match="resize: input 0 .* is on the GPU but the operator runs on device 'cpu'"):
            backwards()


@pytest.mark.parametrize("value, expected", [(False, 0), (True, 1), (np.bool_(True), 1), (np.int64(1), 1),
                                             (1.0, 1), (np.array(0), 0)])
def test_bools_and_numpy_values_where_ints_are_expected(value, expected):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def mirrored():
        images = fn.external_source(source=_images, batch=True)
        return fn.crop_mirror_normalize(images, crop=(8, 8), mirror=value)
    pipe = mirrored()
    (out,) = pipe.run()
    reference = [np.asarray(image[6 + 2 * i:14 + 2 * i, 8:16]).transpose(2, 0, 1).astype(np.float32)
                 for i, image in enumerate(_images())]
    for sample, want in zip(out, reference):
        np.testing.assert_array_equal(sample, want[:, :, ::-1] if expected else want)
    pipe.close()


def test_numbers_of_every_kind_where_floats_are_expected_and_enum_codes():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def coerced():
        images = fn.external_source(source=_images, batch=True)
        resized = fn.resize(images, resize_x=np.int32(8), resize_y=True * 8, interp_type=0)  # 0: INTERP_NN
        return fn.crop_mirror_normalize(resized, mean=np.float32(1), std=[np.float64(2), 2, True * 2],
                                        dtype=types.FLOAT)
    pipe = coerced()
    (out,) = pipe.run()
    assert out.as_array().shape == (2, 3, 8, 8)
    pipe.close()
    with pytest.raises(TypeError, match="resize: argument 'interp_type': expected one of"):
        coerced_bad()


def coerced_bad():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def bad():
        return fn.resize(fn.external_source(source=_images, batch=True), size=(8, 8), interp_type=17)
    return bad()


def test_wrong_kinds_still_fail_at_the_call():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def bad():
        return fn.crop_mirror_normalize(fn.external_source(source=_images, batch=True), crop=(8, 8), mirror="yes")
    with pytest.raises(TypeError, match="crop_mirror_normalize: argument 'mirror': expected an int, got 'yes'"):
        bad()


def test_the_older_operator_names_are_the_current_operators():
    assert dali_fn.image_decoder_random_crop is dali_fn.decoders.image_random_crop
    assert dali_fn.image_decoder is dali_fn.decoders.image
    assert dali_fn.file_reader is dali_fn.readers.file
    assert dali_fn.coin_flip is dali_fn.random.coin_flip and dali_fn.uniform is dali_fn.random.uniform
    assert dali_ops.FileReader is dali_ops.readers.File and dali_ops.nvJPEGDecoderRandomCrop is \
        dali_ops.decoders.ImageRandomCrop
    assert dali_fn.coco_reader is dali_fn.readers.coco and dali_ops.COCOReader is dali_ops.readers.COCO
    assert dali_fn.tfrecord_reader is dali_fn.readers.tfrecord and dali_ops.NumpyReader is dali_ops.readers.Numpy
    assert dali_fn.experimental.decoders.image_random_crop is dali_fn.decoders.image_random_crop
    assert dali_fn.sequence_reader is dali_fn.readers.sequence and dali_fn.mxnet_reader is dali_fn.readers.mxnet
    assert dali_fn.video_reader is dali_fn.readers.video and dali_ops.VideoReaderResize is dali_ops.readers.VideoResize


def test_external_source_drops_a_partial_batch_at_an_iterables_end():
    """batch=False: 10 samples, batch 4: two batches a epoch (len // batch_size), as DALI; batch=True
    batches of any size up to batch_size pass through."""
    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def per_sample():
        return fn.external_source(source=[np.array([i]) for i in range(10)], batch=False, cycle=False)
    pipe = per_sample()
    for expected in ([[0, 1, 2, 3], [4, 5, 6, 7]], []):  # an iterable without cycle is gone through once
        batches = []
        with pytest.raises(StopIteration):
            while True:
                batches.append(pipe.run()[0].as_array().ravel().tolist())
        assert batches == expected
        pipe.reset()
    pipe.close()

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1)
    def whole_batches():
        return fn.external_source(source=[[np.array([0])] * 4, [np.array([1])] * 3], batch=True, cycle=False)
    pipe = whole_batches()
    assert [len(pipe.run()[0]), len(pipe.run()[0])] == [4, 3]
    with pytest.raises(StopIteration):
        pipe.run()
    pipe.close()


def test_describe_says_where_each_operator_runs_and_why():
    with gpu_or_emulated():
        @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=1)
        def placed():
            images = fn.external_source(source=_images, batch=True, name="images")
            resized = fn.resize(images.gpu(), size=(8, 8))
            return fn.crop_mirror_normalize(resized, dtype=types.FLOAT, output_layout="CHW")
        pipe = placed()
        text = pipe.describe()
        pipe.close()
    assert "images on cpu (the default)" in text
    assert "resize#2 on gpu (follows a GPU input)" in text and "crop_mirror_normalize#3 on gpu (follows a GPU input)" in text
    assert "output 0: float32, CHW" in text and "same Triton kernel launch" in text and "stages: producer x 1" in text
