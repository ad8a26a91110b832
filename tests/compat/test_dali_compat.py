"""Programs written for NVIDIA DALI, as in the user's documents, run on penstock.compat.dali with only
their imports changed: the same classes, calls and arguments (the old operator names and the
documents' 'mixed' / 'gpu' devices included), on locally generated data. Without a GPU the 'mixed'
and 'gpu' operators run on the CPU after one GpuFallbackWarning, which these tests expect."""
import contextlib
import os
import warnings

import numpy as np
import pytest
import torch
from helpers_data import make_class_tree

import penstock.compat.dali.ops as ops
import penstock.compat.dali.types as types
from conftest import CUDA
from penstock.compat.dali import fn, pipeline_def
from penstock.compat.dali.pipeline import Pipeline
from penstock.compat.dali.plugin.pytorch import DALIClassificationIterator, DALIGenericIterator

DECODER_DEVICE = "mixed"
GPU_DEVICE = "gpu"


@contextlib.contextmanager
def on_this_machine():
    """Builds pipelines that ask for the GPU: on a machine without one, expects the one warning."""
    from penstock import GpuFallbackWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", GpuFallbackWarning)
        yield
    fallbacks = [w for w in caught if issubclass(w.category, GpuFallbackWarning)]
    assert len(fallbacks) == (0 if CUDA else 1), [str(w.message) for w in caught]


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("flowers")
    make_class_tree(str(root), {"daisy": 5, "rose": 4}, height=48, width=64)
    return str(root)


class HybridTrainPipe(Pipeline):
    def __init__(self, batch_size, data_dir, num_threads=4, device_id=0, crop=224, dali_cpu=False):
        super(HybridTrainPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id)
        self.input = ops.FileReader(file_root=data_dir, random_shuffle=True)
        dali_device = 'cpu' if dali_cpu else 'gpu'
        decoder_device = 'cpu' if dali_cpu else 'mixed'
        device_memory_padding = 211025920 if decoder_device == 'mixed' else 0
        host_memory_padding = 140544512 if decoder_device == 'mixed' else 0
        self.decode = ops.ImageDecoderRandomCrop(device=decoder_device, output_type=types.RGB,
                                                 device_memory_padding=device_memory_padding,
                                                 host_memory_padding=host_memory_padding,
                                                 random_aspect_ratio=[0.8, 1.25],
                                                 random_area=[0.6, 1.0],
                                                 num_attempts=100)
        self.res = ops.Resize(device=dali_device, resize_x=crop, resize_y=crop, interp_type=types.INTERP_TRIANGULAR)
        self.cmnp = ops.CropMirrorNormalize(device=dali_device,
                                            output_dtype=types.FLOAT,
                                            output_layout=types.NCHW,
                                            crop=(crop, crop),
                                            image_type=types.RGB,
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])
        self.coin = ops.CoinFlip(probability=0.5)

    def define_graph(self):
        rng = self.coin()
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images.gpu(), mirror=rng)
        return [output, self.labels]


class HybridValPipe(Pipeline):
    def __init__(self, batch_size, data_dir, num_threads=4, device_id=0, crop=224, size=224):
        super(HybridValPipe, self).__init__(batch_size, num_threads, device_id, seed=12 + device_id)
        self.input = ops.FileReader(file_root=data_dir, random_shuffle=False)
        self.decode = ops.ImageDecoder(device=DECODER_DEVICE, output_type=types.RGB)
        self.res = ops.Resize(device=GPU_DEVICE, resize_shorter=size, interp_type=types.INTERP_TRIANGULAR)
        self.cmnp = ops.CropMirrorNormalize(device=GPU_DEVICE, output_dtype=types.FLOAT, output_layout=types.NCHW,
                                            crop=(crop, crop), image_type=types.RGB,
                                            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                            std=[0.229 * 255, 0.224 * 255, 0.225 * 255])

    def define_graph(self):
        self.jpegs, self.labels = self.input(name="Reader")
        images = self.decode(self.jpegs)
        images = self.res(images)
        output = self.cmnp(images)
        return [output, self.labels]


def test_training_and_validation_pipelines_of_the_note(image_dir):
    with on_this_machine():
        pipe = HybridTrainPipe(batch_size=4, data_dir=image_dir)
        pipe.build()
    num_train = pipe.epoch_size("Reader")
    train_loader = DALIClassificationIterator(pipe, size=num_train)
    seen = 0
    for batch_idx, data in enumerate(train_loader):
        inputs = data[0]["data"]
        labels = data[0]["label"].squeeze().long()
        assert inputs.shape[1:] == (3, 224, 224) and inputs.dtype == torch.float32
        seen += len(labels)
    assert num_train == 9 and seen == 12  # the last batch is filled (DALI's default policy)

    with on_this_machine():
        pipe = HybridValPipe(batch_size=4, data_dir=image_dir)
        pipe.build()
    val_loader = DALIClassificationIterator(pipe, size=pipe.epoch_size("Reader"))
    steps = [data[0]["data"] for data in val_loader]
    assert len(steps) == 3 and steps[0].shape == (4, 3, 224, 224)


def test_external_source_pipeline_of_the_blog(image_dir, tmp_path):
    files = sorted(os.path.relpath(os.path.join(folder, name), image_dir)
                   for folder, _, names in os.walk(image_dir) for name in names)
    data_file = tmp_path / "flower_dummy_data.ssv"
    data_file.write_text("".join(f"{name} {i} {i}\n" for i, name in enumerate(files)))

    class ExternalInputIterator(object):
        def __init__(self, batch_size, data_file, image_dir):
            self.images_dir = image_dir
            self.batch_size = batch_size
            self.data_file = data_file
            with open(self.data_file, 'r') as f:
                self.files = [line.rstrip() for line in f if line != '']

        def __iter__(self):
            self.i = 0
            self.n = len(self.files)
            return self

        def __next__(self):
            batch, labels = [], []
            for _ in range(self.batch_size):
                jpeg_filename, *label = self.files[self.i].split(' ')
                with open(os.path.join(self.images_dir, jpeg_filename), 'rb') as f:
                    batch.append(np.frombuffer(f.read(), dtype=np.uint8))
                labels.append(np.array(label, dtype=np.uint8))
                self.i = (self.i + 1) % self.n
            return (batch, labels)

        next = __next__

    iterator = iter(ExternalInputIterator(batch_size=4, data_file=str(data_file), image_dir=image_dir))

    class ExternalSourcePipeline(Pipeline):
        def __init__(self, data_iterator, batch_size, num_threads, device_id):
            super(ExternalSourcePipeline, self).__init__(batch_size, num_threads, device_id, seed=12)
            self.data_iterator = data_iterator
            self.input = ops.ExternalSource()
            self.input_label = ops.ExternalSource()
            self.decode = ops.nvJPEGDecoder(device=DECODER_DEVICE, output_type=types.RGB)
            self.res = ops.Resize(device=GPU_DEVICE, resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR)

        def define_graph(self):
            self.jpegs = self.input()
            self.labels = self.input_label()
            images = self.decode(self.jpegs)
            output = self.res(images)
            return (output, self.labels)

        def iter_setup(self):
            images, labels = self.data_iterator.next()
            self.feed_input(self.jpegs, images)
            self.feed_input(self.labels, labels)

    with on_this_machine():
        pipe = ExternalSourcePipeline(iterator, batch_size=4, num_threads=2, device_id=0)
        pipe.build()
    dali_iter = DALIGenericIterator([pipe], ['images', 'labels'], 16)
    steps = 0
    for i, it in enumerate(dali_iter):
        batch_data = it[0]
        images, labels = batch_data["images"], batch_data["labels"]
        assert images.shape == (4, 224, 224, 3) and labels.shape == (4, 2) and labels.dtype == torch.uint8
        steps += 1
    assert steps == 4


def test_inference_pipeline_of_the_note(image_dir):
    fn_path = os.path.join(image_dir, "rose", sorted(os.listdir(os.path.join(image_dir, "rose")))[0])

    class MyPipe(Pipeline):
        def __init__(self, fn, batch_size=1, num_threads=1, device_id=0, crop=224, size=224):
            super(MyPipe, self).__init__(batch_size, num_threads, device_id)
            self.fn = fn
            self.input = ops.ExternalSource()
            self.decode = ops.ImageDecoder(device=DECODER_DEVICE, output_type=types.RGB)
            self.res = ops.Resize(device=GPU_DEVICE, resize_shorter=size, interp_type=types.INTERP_NN)
            self.cmnp = ops.CropMirrorNormalize(device=GPU_DEVICE, output_dtype=types.FLOAT, output_layout=types.NCHW,
                                                crop=(crop, crop), image_type=types.RGB,
                                                mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
                                                std=[0.229 * 255, 0.224 * 255, 0.225 * 255])

        def define_graph(self):
            self.jpegs = self.input()
            images = self.decode(self.jpegs)
            images = self.res(images)
            output = self.cmnp(images)
            return output

        def iter_setup(self):
            images = []
            fp = open(self.fn, 'rb')
            images.append(np.frombuffer(fp.read(), dtype=np.uint8))
            fp.close()
            self.feed_input(self.jpegs, images, layout="HWC")

    with on_this_machine():
        pipe = MyPipe(fn_path)
        pipe.build()
    dali_iterator = DALIGenericIterator(pipe, ['images'], 1)
    img = dali_iterator.next()[0]['images']
    assert img.shape == (1, 3, 224, 224)


def test_functional_api_names(image_dir):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=image_dir, name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        return fn.crop(images, crop=(20, 20)), labels

    p = pipe()
    p.build()
    images, labels = p.run()
    assert images.as_array().shape == (2, 20, 20, 3)


@pytest.mark.parametrize("already_batched", [False, True])
def test_streaming_pipeline_of_the_tutorial(already_batched):
    """The streaming tutorial's loader: an iterable of dict samples (a dataset library's stream in
    the tutorial) through external_source -> centre crop -> rotate on the GPU, read through
    DALIGenericIterator by key; per-sample, or batched by the stream with its collation function."""
    from collections import defaultdict

    img_key, label_key, crop_size, rotation, batch_size = "image", "label", 40, 30, 4
    colours = [np.array([i, 10 + i, 20 + i], np.float32) for i in range(8)]
    stream = [{img_key: np.broadcast_to(colour, (50, 60, 3)).copy(), label_key: np.array([i])}
              for i, colour in enumerate(colours)]

    def pre_proc_for_dali(item):
        return [np.array(v, dtype=np.float32) for v in item.values()]

    def collation_fn(items):
        batch = defaultdict(list)
        for item in items:
            for k, v in item.items():
                batch[k].append(v)
        return [np.array(v, dtype=np.float32) for v in batch.values()]

    if already_batched:
        it = (collation_fn(stream[i:i + batch_size]) for i in range(0, len(stream), batch_size))
    else:
        it = map(pre_proc_for_dali, stream)

    @pipeline_def
    def pipeline(it):
        imgs, labels = fn.external_source(source=it, num_outputs=2, device=GPU_DEVICE, dtype=types.FLOAT,
                                          batch=already_batched)
        imgs = fn.crop(imgs, crop=[crop_size, crop_size], crop_pos_x=0.5, crop_pos_y=0.5, device=GPU_DEVICE)
        imgs = fn.rotate(imgs, angle=rotation, device=GPU_DEVICE, fill_value=0, interp_type=types.INTERP_LINEAR,
                         keep_size=True)
        return imgs, labels

    with on_this_machine():
        pipe = pipeline(it=it, batch_size=batch_size, num_threads=2, device_id=0)
        pipe.build()
    dali_it = DALIGenericIterator([pipe], [img_key, label_key])
    pipe_out = next(iter(dali_it))
    imgs, labels = pipe_out[0][img_key], pipe_out[0][label_key]
    assert tuple(imgs.shape) == (batch_size, crop_size, crop_size, 3) and imgs.dtype == torch.float32
    assert labels.flatten().tolist() == [0.0, 1.0, 2.0, 3.0]
    # each image is one colour: the rotated crop keeps it in the middle, and its corners come from
    # outside the crop (fill_value 0)
    imgs = imgs.cpu().numpy()
    np.testing.assert_allclose(imgs[:, crop_size // 2, crop_size // 2], np.stack(colours[:batch_size]), atol=1e-4)
    assert not imgs[:, 0, 0].any() and not imgs[:, -1, -1].any()
    pipe.close()


def test_simple_pipeline_of_the_talk(image_dir):
    """The talk's first pipeline: operators made in __init__ (the old FileReader and nvJPEGDecoder
    names), the graph in define_graph, then build() and run()."""

    class SimplePipeline(Pipeline):
        def __init__(self, batch_size, num_threads, device_id):
            super(SimplePipeline, self).__init__(batch_size, num_threads, device_id)
            self.input = ops.FileReader(file_root=image_dir)
            self.decode = ops.nvJPEGDecoder(device=DECODER_DEVICE, output_type=types.RGB)
            self.resize = ops.Resize(device=GPU_DEVICE, resize_x=224, resize_y=224)

        def define_graph(self):
            jpegs, labels = self.input()
            images = self.decode(jpegs)
            images = self.resize(images)
            return (images, labels)

    with on_this_machine():
        pipe = SimplePipeline(batch_size=3, num_threads=2, device_id=0)
        pipe.build()
    images, labels = pipe.run()
    assert images.as_cpu().as_array().shape == (3, 224, 224, 3)
    assert labels.as_array().ravel().tolist() == [0, 0, 0]  # the first class's files come first
    pipe.close()
