"""Without a usable GPU, a pipeline that asks for 'mixed' and 'gpu' operators runs them on the CPU
after one warning, with the same results as the CPU pipeline; gpu_fallback=False makes it an error."""
import warnings

import numpy as np
import pytest
from conftest import CUDA
from helpers_data import make_class_tree

import penstock
from penstock import fn, pipeline_def, types

pytestmark = pytest.mark.skipif(CUDA, reason="checks the behaviour on a machine without a GPU")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fallback")
    make_class_tree(str(folder), {"a": 3, "b": 3}, height=40, width=52)
    return str(folder)


@pipeline_def(batch_size=3, num_threads=2, seed=5)
def train(root, decoder_device, device):
    jpegs, labels = fn.readers.file(file_root=root, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device=decoder_device)
    images = fn.resize(images.gpu() if device == "gpu" else images, device=device, resize_x=32, resize_y=32)
    images = fn.crop_mirror_normalize(images, device=device, dtype=types.FLOAT, mean=[100.0], std=[50.0],
                                      mirror=fn.random.coin_flip())
    return images, labels


def test_gpu_pipeline_runs_on_the_cpu_after_one_warning(root):
    with pytest.warns(penstock.GpuFallbackWarning, match="gpu_fallback=False") as record:
        fallen_back = train(root, "mixed", "gpu", device_id=0)
    assert len(record) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reference = train(root, "cpu", "cpu", device_id=0)
    for _ in range(2):
        for a, b in zip(fallen_back.run(), reference.run()):
            np.testing.assert_array_equal(a.as_array(), b.as_array())
    fallen_back.close()
    reference.close()


def test_fallback_can_be_an_error(root):
    with pytest.raises(ValueError, match="decoders.image_random_crop: device 'mixed' is not available"):
        train(root, "mixed", "gpu", device_id=0, gpu_fallback=False)
