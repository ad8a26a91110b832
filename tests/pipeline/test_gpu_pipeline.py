"""Whole pipelines on the GPU path against the same pipelines on the CPU.

Without a GPU, the GPU path is emulated (mixed decoders decode on the CPU, the Triton kernel runs in
its interpreter) in a subprocess, which checks the executor's GPU stage, the fusion of the image
operators and DataNode.gpu(). With a GPU, the same comparison runs on the GPU's decoders and
kernels. Tolerances, in normalized units (value / std, std about 58 grey levels): mean difference
0.03 (under 2 grey levels: CPU resizing prefilters with a Gaussian, the GPU kernel uses the exact
antialiased filter, and JPEG decoders may differ by a level), 1 grey level for uint8 outputs, and
the same shapes, labels and random choices.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import CUDA, smooth_image

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_data")
    for index in range(10):
        folder = root / f"class_{index % 2}"
        folder.mkdir(exist_ok=True)
        image = smooth_image(30 + 3 * index, 40 - 2 * index, seed=index)
        Image.fromarray(image).save(folder / f"image_{index}.jpg", quality=95)
    return str(root)


def _check(jpeg_folder, environment) -> dict:
    result = subprocess.run([sys.executable, os.path.join(TESTS, "gpu_pipeline_check.py"), jpeg_folder],
                            env={**os.environ, **environment}, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _assert_close(report):
    for name, figures in report.items():
        assert figures["batches"][0] == figures["batches"][1] == 3, name
        assert figures["shapes_equal"] and figures["labels_equal"], name
        limit = 1.0 if name == "moved" else 0.03  # "moved" gives uint8 grey levels, not normalized values
        assert figures["mean"] <= limit, (name, figures)


def test_emulated_gpu_pipelines_match_cpu(jpeg_folder):
    report = _check(jpeg_folder, {"PENSTOCK_GPU_ON_CPU": "1", "TRITON_INTERPRET": "1"})
    _assert_close(report)
    assert report["train"]["gpu_device"] == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_gpu_pipelines_match_cpu(jpeg_folder):
    report = _check(jpeg_folder, {})
    _assert_close(report)
    assert report["train"]["gpu_device"] == "cuda"




@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_decoded_images_of_two_batches_at_most_are_held(tmp_path):
    """A batch's decoded images are freed once the work that reads them is queued: the batch two on,
    on the same stream, decodes into their memory, so two batches' decode buffers are alive at once
    (the one decoding and the one being resized), not three."""
    import torch

    from penstock import fn, pipeline_def
    from penstock.runtime.nvimgcodec_decode import buffer_bytes
    from penstock.tuning import DEFAULT

    for index in range(4):
        (tmp_path / "class_0").mkdir(exist_ok=True)
        Image.fromarray(smooth_image(1200, 1600, seed=index)).save(tmp_path / "class_0" / f"large_{index}.jpg",
                                                                    quality=90)

    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=1)
    def large_photos():
        encoded, _ = fn.readers.file(file_root=str(tmp_path), name="Reader")
        # every image to the GPU's decoders (no CPU share, which the machine's cores would decide)
        return fn.resize(fn.decoders.image(encoded, device="mixed", cpu_decoder_load=0), resize_x=32, resize_y=32)

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    pipe = large_photos()
    for _ in range(10):
        pipe.run()
    torch.cuda.synchronize()
    decode_buffer = buffer_bytes(4 * 1200 * 1600 * 3, DEFAULT.decode_buffer_steps)
    held = torch.cuda.max_memory_allocated() - base  # the outputs (4 x 32 x 32 x 3 bytes) are small beside
    pipe.close()
    assert 2 * decode_buffer <= held < 2.5 * decode_buffer, (held, decode_buffer)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_external_source_on_the_gpu_gives_cuda_batches():
    import torch

    from penstock import fn, pipeline_def

    samples = [(np.full((6, 5, 3), i, np.float32), np.array([i], np.int64)) for i in range(8)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=0)
    def streaming():
        images, labels = fn.external_source(source=iter(samples), num_outputs=2, batch=False, device="gpu")
        return fn.crop(images, device="gpu", crop=(4, 4)), labels

    pipe = streaming()
    images, labels = pipe.run()
    tensor = images.as_tensor()
    assert tensor.device.type == "cuda" and tuple(tensor.shape) == (4, 4, 4, 3)
    assert torch.equal(tensor[:, 0, 0, 0].cpu(), torch.arange(4, dtype=torch.float32))
    pipe.close()


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_external_source_takes_cupy_and_cuda_tensor_samples():
    cupy = pytest.importorskip("cupy")
    import torch

    from penstock import fn, pipeline_def, types

    def samples(make):
        for i in range(4):
            yield [make(np.full((6, 5, 3), i, np.float32)), make(np.array([i], np.float32))]

    for make in (cupy.asarray, lambda array: torch.from_numpy(array).cuda()):
        @pipeline_def(batch_size=4, num_threads=2, device_id=0)
        def streaming():
            images, labels = fn.external_source(source=samples(make), num_outputs=2, batch=False, device="gpu",
                                                dtype=types.FLOAT)
            return fn.crop(images, device="gpu", crop=(4, 4)), labels

        pipe = streaming()
        images, labels = pipe.run()
        assert torch.equal(images.as_tensor()[:, 0, 0, 0].cpu(), torch.arange(4, dtype=torch.float32))
        assert torch.equal(labels.as_tensor().cpu().ravel(), torch.arange(4, dtype=torch.float32))
        pipe.close()


def test_the_host_side_benchmark_runs(jpeg_folder):
    """benchmarks/host_side.py stands in for the GPU inside the pipeline's internals: it must keep
    up with them."""
    result = subprocess.run([sys.executable, os.path.join(TESTS, "..", "benchmarks", "host_side.py"), jpeg_folder,
                             "2", "3", "1", "4"], env={**os.environ, "PENSTOCK_GPU_ON_CPU": "1", "TRITON_INTERPRET": "1"},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "images/s; decoder-bound ceiling 4,000" in result.stdout and "main process total" in result.stdout
