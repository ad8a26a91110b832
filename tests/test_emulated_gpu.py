"""The emulated GPU (CPU tensors, Triton's interpreter) as tests use it: several pipelines at once in
one process, and close() while a batch is on its GPU stage."""
import threading
import time

import numpy as np
import pytest

from conftest import CUDA
from penstock import devices, fn, pipeline_def

pytestmark = pytest.mark.skipif(CUDA, reason="Triton's interpreter is chosen for the whole process at its start")


def _ragged():
    return [np.full((6 + 3 * index, 5 + index, 3), 40 * index, np.uint8) for index in range(2)]


@pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=3, prefetch_queue_depth=1)
def _kernels_pipeline():
    images = fn.external_source(source=_ragged)
    return fn.hue(images.gpu(), hue=30.0), fn.flip(images.gpu(), horizontal=1)


def test_pipelines_on_several_threads_launch_interpreted_kernels_one_at_a_time():
    with devices.emulated_gpu():
        pipes = [_kernels_pipeline() for _ in range(4)]
        for pipe in pipes:
            pipe.build()
    expected = [np.asarray(output.at(0).cpu()) for output in pipes[0].run()]
    results, errors = {}, []

    def run(index, pipe):
        try:
            results[index] = [[np.asarray(output.at(0).cpu()) for output in pipe.run()] for _ in range(10)]
        except Exception as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index, pipe)) for index, pipe in enumerate(pipes[1:])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for pipe in pipes:
        pipe.close()
    assert not errors, errors
    for runs in results.values():
        for outputs in runs:
            for got, want in zip(outputs, expected):
                np.testing.assert_array_equal(got, want)


def test_close_waits_for_the_gpu_stage_to_leave_its_batch():
    import torch

    calls = []

    def slow(batch):
        calls.append(None)
        if len(calls) > 1:
            time.sleep(2.0)  # longer than the executor gives its other threads to stop
        return [sample + 1 for sample in batch]

    @pipeline_def(batch_size=2, num_threads=1, device_id=0, seed=3, prefetch_queue_depth=1)
    def slow_pipeline():
        images = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2)
        return fn.torch_python_function(images.gpu(), function=slow, batch_processing=True)

    with devices.emulated_gpu():
        pipe = slow_pipeline()
        pipe.build()
    before = set(threading.enumerate())
    outputs = pipe.run()  # the next batch is now on the GPU stage, inside the slow function
    assert torch.equal(outputs[0].at(0).cpu(), torch.ones((4, 4, 3), dtype=torch.uint8))
    time.sleep(0.3)
    pipe.close()
    left = [thread.name for thread in threading.enumerate() if thread not in before and thread.is_alive()]
    assert not left, f"threads left running after close(): {left}"


def _add_one_kernel_source():
    import triton
    import triton.language as tl

    @triton.jit
    def add_one_kernel(source, target, size, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(target + offsets, tl.load(source + offsets, mask=offsets < size) + 1, mask=offsets < size)
    return add_one_kernel


def test_interpreted_launches_from_many_threads_take_turns():
    import torch

    from penstock.kernels.triton_launch import launch
    kernel, errors = _add_one_kernel_source(), []
    start = threading.Barrier(4)

    def launches():
        start.wait()
        try:
            for size in range(1, 40):
                source = torch.arange(size, dtype=torch.float32)
                target = torch.empty_like(source)
                launch(kernel, ((size + 7) // 8,), source, target, size, BLOCK=8)
                assert torch.equal(target, source + 1)
        except Exception as error:  # reported below, with the others
            errors.append(error)

    threads = [threading.Thread(target=launches) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:2]
