"""DALI programs beyond the seeds, written as DALI's own examples write them and run with only the
imports changed to penstock.compat.dali: the ResNet-50 example's training and validation pipelines
(current names, and the older names its earlier versions used), an arithmetic pipeline, a
conditional augmentation pipeline and a Python-function pipeline; each on the CPU and on the GPU
(emulated where there is none), the GPU's results checked against the CPU's."""
import numpy as np
import pytest
from conftest import gpu_or_emulated, smooth_image
from helpers_data import make_class_tree

from penstock.compat.dali import fn, math, ops, pipeline_def, types
from penstock.compat.dali.pipeline import Pipeline
from penstock.compat.dali.plugin.pytorch import DALIClassificationIterator, LastBatchPolicy

CROP, SIZE = 24, 28
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    make_class_tree(str(root), {"n01": 5, "n02": 4}, height=40, width=52)
    return str(root)


@pipeline_def(exec_async=False, exec_pipelined=False)
def create_dali_pipeline(data_dir, crop, size, shard_id, num_shards, dali_cpu=False, is_training=True):
    """The ResNet-50 example's pipeline, as written for DALI."""
    images, labels = fn.readers.file(file_root=data_dir, shard_id=shard_id, num_shards=num_shards,
                                     random_shuffle=is_training, pad_last_batch=True, name="Reader")
    dali_device = "cpu" if dali_cpu else "gpu"
    decoder_device = "cpu" if dali_cpu else "mixed"
    # the example's memory hints: accepted, and only hints
    device_memory_padding = 211025920 if decoder_device == "mixed" else 0
    host_memory_padding = 140544512 if decoder_device == "mixed" else 0
    preallocate_width_hint = 5980 if decoder_device == "mixed" else 0
    preallocate_height_hint = 6430 if decoder_device == "mixed" else 0
    if is_training:
        images = fn.decoders.image_random_crop(images, device=decoder_device, output_type=types.RGB,
                                               device_memory_padding=device_memory_padding,
                                               host_memory_padding=host_memory_padding,
                                               preallocate_width_hint=preallocate_width_hint,
                                               preallocate_height_hint=preallocate_height_hint,
                                               random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                               num_attempts=100)
        images = fn.resize(images, device=dali_device, resize_x=crop, resize_y=crop,
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = fn.random.coin_flip(probability=0.5)
    else:
        images = fn.decoders.image(images, device=decoder_device, output_type=types.RGB)
        images = fn.resize(images, device=dali_device, size=size, mode="not_smaller",
                           interp_type=types.INTERP_TRIANGULAR)
        mirror = False
    images = fn.crop_mirror_normalize(images.gpu() if not dali_cpu else images, dtype=types.FLOAT,
                                      output_layout="CHW", crop=(crop, crop), mean=MEAN, std=STD, mirror=mirror)
    labels = labels.gpu() if not dali_cpu else labels
    return images, labels


class HybridTrainPipe(Pipeline):
    """The example's earlier form: a Pipeline subclass with the older operator names."""

    def __init__(self, batch_size, num_threads, device_id, data_dir, crop, dali_cpu=False):
        super().__init__(batch_size, num_threads, device_id, seed=12 + device_id)
        self.input = ops.FileReader(file_root=data_dir, shard_id=0, num_shards=1, random_shuffle=True)
        self.decode = ops.ImageDecoderRandomCrop(device="cpu" if dali_cpu else "mixed", output_type=types.RGB,
                                                 random_aspect_ratio=[0.8, 1.25], random_area=[0.1, 1.0],
                                                 num_attempts=100)
        self.res = ops.Resize(device="cpu" if dali_cpu else "gpu", resize_x=crop, resize_y=crop,
                              interp_type=types.INTERP_TRIANGULAR)
        self.cmnp = ops.CropMirrorNormalize(device="cpu" if dali_cpu else "gpu", dtype=types.FLOAT,
                                            output_layout=types.NCHW, crop=(crop, crop), mean=MEAN, std=STD)
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images, mirror=rng)
        return [output, self.labels]


def _epoch(pipe, reader="Reader"):
    iterator = DALIClassificationIterator(pipe, reader_name=reader, last_batch_policy=LastBatchPolicy.PARTIAL,
                                          auto_reset=True)
    images, labels = [], []
    for batch in iterator:
        images.append(batch[0]["data"].cpu().numpy())
        labels.append(batch[0]["label"].cpu().numpy())
    return np.concatenate(images), np.concatenate(labels).ravel()


@pytest.mark.parametrize("dali_cpu", [True, False])
@pytest.mark.parametrize("is_training", [True, False])
def test_the_resnet50_example_runs_an_epoch(data_dir, dali_cpu, is_training):
    with gpu_or_emulated():
        pipe = create_dali_pipeline(batch_size=4, num_threads=2, device_id=0, seed=12, data_dir=data_dir, crop=CROP,
                                    size=SIZE, dali_cpu=dali_cpu, shard_id=0, num_shards=1, is_training=is_training)
        pipe.build()
        images, labels = _epoch(pipe)
        pipe.close()
    assert images.shape == (9, 3, CROP, CROP) and images.dtype == np.float32
    assert sorted(labels.tolist()) == [0] * 5 + [1] * 4  # the epoch, each image once
    assert np.abs(images).max() < 3  # normalized


def test_the_resnet50_validation_pipeline_gives_the_same_images_on_both_devices(data_dir):
    results = []
    for dali_cpu in (True, False):
        with gpu_or_emulated():
            pipe = create_dali_pipeline(batch_size=3, num_threads=2, device_id=0, seed=12, data_dir=data_dir,
                                        crop=CROP, size=SIZE, dali_cpu=dali_cpu, shard_id=0, num_shards=1,
                                        is_training=False)
            pipe.build()
            results.append(_epoch(pipe))
            pipe.close()
    (cpu_images, cpu_labels), (gpu_images, gpu_labels) = results
    np.testing.assert_array_equal(cpu_labels, gpu_labels)
    difference = np.abs(cpu_images - gpu_images) * 255 * 0.226  # back to grey levels
    assert difference.mean() <= 1.5 and difference.max() <= 12  # two JPEG decoders, two resizes


@pytest.mark.parametrize("dali_cpu", [True, False])
def test_the_older_training_pipeline_class(data_dir, dali_cpu):
    with gpu_or_emulated():
        pipe = HybridTrainPipe(batch_size=4, num_threads=2, device_id=0, data_dir=data_dir, crop=CROP,
                               dali_cpu=dali_cpu)
        pipe.build()
        images, labels = _epoch(pipe)
        pipe.close()
    assert images.shape == (9, 3, CROP, CROP) and sorted(labels.tolist()) == [0] * 5 + [1] * 4


VALUES = [np.array([1.0, -2.0, 3.5], np.float32), np.array([0.25, 8.0], np.float32), np.array([-1.0], np.float32)]


def _run_both(define, batch_size=3, **kwargs):
    """The pipeline's outputs on the CPU and on the GPU (its data moved there), as numpy."""
    results = []
    for device in ("cpu", "gpu"):
        @pipeline_def(batch_size=batch_size, num_threads=2, device_id=0, seed=5, **kwargs)
        def pipe():
            return define(device)
        with gpu_or_emulated():
            pipeline = pipe()
            outputs = pipeline.run()
            pipeline.close()
        results.append([[np.asarray(s) for s in (b.as_cpu() if b.device == "gpu" else b)] for b in outputs])
    return results


def test_an_arithmetic_pipeline(tmp_path):
    def define(device):
        data = fn.external_source(source=lambda: VALUES, batch=True, dtype=types.FLOAT)
        scale = fn.random.uniform(range=[1.0, 2.0])
        on = data.gpu() if device == "gpu" else data
        centred = (on - fn.reductions.mean(data)) * scale
        clipped = math.clamp(centred, -1.5, 1.5)
        return clipped, on ** 2 // 3, on > 0, scale
    (cpu, gpu) = _run_both(define)
    for index, sample in enumerate(VALUES):
        scale = cpu[3][index]
        expected = np.clip((sample - np.float32(sample.mean())) * scale, -1.5, 1.5)
        np.testing.assert_allclose(cpu[0][index], expected, rtol=1e-6)
        np.testing.assert_allclose(cpu[1][index], sample ** 2 / np.float32(3), rtol=1e-6)  # float // is / in DALI
        np.testing.assert_array_equal(cpu[2][index], sample > 0)
    for cpu_output, gpu_output in zip(cpu, gpu):
        for cpu_sample, gpu_sample in zip(cpu_output, gpu_output):
            np.testing.assert_allclose(gpu_sample, cpu_sample, rtol=1e-6)


def test_a_conditional_augmentation_pipeline():
    images = [smooth_image(30 + 6 * i, 40, seed=i) for i in range(4)]
    flags = [np.array(flag) for flag in (True, False, True, False)]

    def define(device):
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        augment = fn.external_source(source=lambda: flags, batch=True)
        data = data.gpu() if device == "gpu" else data
        if augment:
            data = fn.rotate(data, angle=90.0, keep_size=False)
            data = fn.resize(data, resize_x=20, resize_y=20)
        else:
            data = fn.resize(data, resize_x=20, resize_y=20)
            data = fn.flip(data, horizontal=1)
        return fn.crop_mirror_normalize(data, dtype=types.FLOAT, mean=[0.0] * 3, std=[1.0] * 3), augment

    (cpu, gpu) = _run_both(define, batch_size=4, enable_conditionals=True)
    for index, image in enumerate(images):
        if flags[index]:
            reference = np.rot90(image)  # 90 degrees counter-clockwise, as DALI's positive angles
        else:
            reference = image
        assert cpu[0][index].shape == (3, 20, 20)
        # the reference branch, by the same resize of the rotated or flipped image
        alone = _alone(reference, flip=not flags[index])
        assert np.abs(cpu[0][index] - alone).max() <= 1e-4
        assert np.abs(gpu[0][index] - cpu[0][index]).mean() <= 1.5  # the linear resize tests' bound


def _alone(image, flip):
    """The sample run by itself through the branch it takes (a pipeline of batch 1, no conditionals)."""
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=5)
    def pipe():
        data = fn.external_source(source=lambda: [np.ascontiguousarray(image)], batch=True, layout="HWC")
        data = fn.resize(data, resize_x=20, resize_y=20)
        if flip:
            data = fn.flip(data, horizontal=1)
        return fn.crop_mirror_normalize(data, dtype=types.FLOAT, mean=[0.0] * 3, std=[1.0] * 3)
    pipeline = pipe()
    (batch,) = pipeline.run()
    pipeline.close()
    return np.asarray(batch[0])


def test_a_python_function_pipeline():
    def jitter(image, rng):
        return np.clip(image.astype(np.int16) + rng.integers(-3, 4, image.shape), 0, 255).astype(np.uint8)

    def define(device):
        data = fn.external_source(source=lambda: [smooth_image(16, 16, seed=i) for i in range(3)], batch=True,
                                  layout="HWC")
        jittered = fn.python_function(data, function=jitter)
        mixed = fn.torch_python_function(jittered.gpu() if device == "gpu" else jittered,
                                         function=lambda batch: [sample.float().mean(dim=2) for sample in batch])
        return jittered, mixed
    (cpu, gpu) = _run_both(define)
    for cpu_sample, gpu_sample in zip(cpu[0], gpu[0]):
        np.testing.assert_array_equal(cpu_sample, gpu_sample)  # the same draws on both
    for jittered, mixed in zip(cpu[0], gpu[1]):
        np.testing.assert_allclose(mixed, jittered.astype(np.float32).mean(axis=2), rtol=1e-6)
