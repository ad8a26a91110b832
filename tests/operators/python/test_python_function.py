"""Python functions as operators: run on the workers in parallel (threads or processes), with a
per-sample random generator that makes results independent of the workers, several outputs, torch
tensors, and errors that carry the user's traceback and the sample's source."""
import threading
import time

import numpy as np
import pytest
import torch
from helpers_data import make_class_tree, no_hang  # noqa: F401

import penstock
from penstock import fn, pipeline_def

FEED = [np.full((2, 3), float(i), np.float32) for i in range(6)]


def _pipeline(function, num_outputs=1, threads=2, processes=False, torch_kind=False, **kwargs):
    operator = fn.torch_python_function if torch_kind else fn.python_function

    @pipeline_def(batch_size=6, num_threads=threads, device_id=None, seed=11, worker_processes=processes)
    def pipe():
        data = fn.external_source(source=lambda: FEED, batch=True)
        return operator(data, function=function, num_outputs=num_outputs, **kwargs)
    return pipe()


def test_two_outputs_and_the_random_generator_are_the_same_on_any_workers():
    def noisy(x, rng):
        return x * 2, x + rng.normal(size=x.shape)
    results = []
    for threads, processes in ((1, False), (2, False), (2, True)):
        pipe = _pipeline(noisy, num_outputs=2, threads=threads, processes=processes)
        doubled, noised = pipe.run()
        results.append(noised.as_array())
        np.testing.assert_array_equal(doubled.as_array(), np.stack(FEED) * 2)
        pipe.close()
    assert all(np.array_equal(results[0], other) for other in results[1:])
    assert not np.array_equal(results[0][0], results[0][1])  # a generator of its own per sample


def test_the_function_runs_on_several_workers_at_once():
    running, most = [0], [0]
    lock = threading.Lock()

    def slow(x):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)  # releases the interpreter lock, as native code would
        with lock:
            running[0] -= 1
        return x
    pipe = _pipeline(slow, threads=3)
    pipe.run()
    pipe.close()
    assert most[0] >= 2


def test_torch_tensors_in_and_out():
    pipe = _pipeline(lambda x: torch.nn.functional.pad(x, (1, 1)) * 3, torch_kind=True, batch_processing=False)
    (out,) = pipe.run()
    expected = np.stack([np.pad(sample, ((0, 0), (1, 1))) * 3 for sample in FEED])
    np.testing.assert_array_equal(out.as_array(), expected)
    pipe.close()


@pytest.mark.parametrize("torch_kind", [False, True])
def test_batch_processing_gives_the_function_the_whole_batch(torch_kind):
    def mix(samples, rng):  # a list of the batch's samples: each mixed with the next one
        assert len(samples) == 6
        weight = rng.uniform()
        return [a * weight + b * (1 - weight) for a, b in zip(samples, samples[1:] + samples[:1])]
    kwargs = {} if torch_kind else {"batch_processing": True}  # torch_python_function's default, as in DALI
    pipe = _pipeline(mix, torch_kind=torch_kind, **kwargs)
    (out,) = pipe.run()
    values = out.as_array()[:, 0, 0]
    weight = values[0]  # 0 * w + 1 * (1 - w) = 1 - w
    np.testing.assert_allclose(values, [i * (1 - weight) + ((i + 1) % 6) * weight for i in range(6)], rtol=1e-5)
    pipe.close()


@pytest.mark.parametrize("batch_processing", [False, True])
def test_torch_functions_on_the_gpu_equal_the_cpu(batch_processing):
    from conftest import gpu_or_emulated

    def scaled(x):
        return [sample * 2 + 1 for sample in x] if batch_processing else x * 2 + 1
    results = []
    for device in ("cpu", "gpu"):
        @pipeline_def(batch_size=6, num_threads=1, device_id=0 if device == "gpu" else None, seed=3)
        def pipe():
            data = fn.external_source(source=lambda: FEED, batch=True)
            data = data.gpu() if device == "gpu" else data
            return fn.torch_python_function(data, function=scaled, batch_processing=batch_processing)
        with gpu_or_emulated() if device == "gpu" else _nothing():
            pipeline = pipe()
            (out,) = pipeline.run()
            results.append(np.stack([np.asarray(s) for s in (out.as_cpu() if device == "gpu" else out)]))
            pipeline.close()
    np.testing.assert_array_equal(results[0], np.stack(FEED) * 2 + 1)
    np.testing.assert_array_equal(results[1], results[0])


def _nothing():
    import contextlib
    return contextlib.nullcontext()


@pytest.mark.parametrize("processes", [False, True])
def test_an_error_in_the_function_names_the_operator_the_file_and_the_users_line(tmp_path, processes):
    make_class_tree(str(tmp_path), {"a": 3})

    def breaks(data):
        if len(data) > 0:
            raise KeyError("no such label")  # the user's line
        return data

    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1, worker_processes=processes)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=str(tmp_path))
        return fn.python_function(jpegs, function=breaks)
    pipeline = pipe()
    with pytest.raises(penstock.PipelineError, match=r"(?s)python_function failed on sample from '.*img_00\d\.jpg': "
                                                     r"KeyError: .*no such label.*raise KeyError"):
        pipeline.run()
    pipeline.close()


def test_wrong_arguments_fail_at_the_call():
    with pytest.raises(ValueError, match="python_function: argument 'function' must be a callable"):
        _pipeline(42)
    pipe = _pipeline(lambda x: (x, x), num_outputs=3)
    with pytest.raises(penstock.PipelineError, match="not 3 outputs"):
        pipe.run()
    pipe.close()


def _is_capsule(value) -> bool:
    return type(value).__name__ == "PyCapsule"


@pytest.mark.parametrize("batch_processing", [False, True])
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_dl_tensor_functions_get_capsules_and_may_return_any_dlpack_value(device, batch_processing):
    """As DALI's dl_tensor_python_function: DLPack capsules in; out, capsules or any object with
    __dlpack__ (a torch tensor here, a numpy array on the CPU)."""
    from conftest import gpu_or_emulated
    seen = []

    def halve_and_count(*inputs):
        if batch_processing:
            seen.extend(_is_capsule(capsule) for column in inputs for capsule in column)
            first, second = ([torch.from_dlpack(capsule) for capsule in column] for column in inputs)
            return [torch.utils.dlpack.to_dlpack(x / 2) for x in first], [y.numel() + 0 * y.reshape(-1)[:1] for y in second]
        seen.extend(_is_capsule(capsule) for capsule in inputs)
        x, y = (torch.from_dlpack(capsule) for capsule in inputs)
        return torch.utils.dlpack.to_dlpack(x / 2), y.numel() + 0 * y.reshape(-1)[:1]

    @pipeline_def(batch_size=6, num_threads=1, device_id=0 if device == "gpu" else None, seed=3)
    def pipe():
        data = fn.external_source(source=lambda: FEED, batch=True)
        data = data.gpu() if device == "gpu" else data
        return fn.dl_tensor_python_function(data, data, function=halve_and_count, num_outputs=2,
                                            batch_processing=batch_processing)
    with gpu_or_emulated() if device == "gpu" else _nothing():
        pipeline = pipe()
        halves, counts = pipeline.run()
        halves = [np.asarray(s) for s in (halves.as_cpu() if device == "gpu" else halves)]
        counts = [np.asarray(s) for s in (counts.as_cpu() if device == "gpu" else counts)]
        pipeline.close()
    for sample, half, count in zip(FEED, halves, counts):
        np.testing.assert_array_equal(half, sample / 2)
        assert count.tolist() == [float(sample.size)]
    assert seen and all(seen)


@pytest.mark.parametrize("batch_processing", [False, True])
def test_no_outputs_runs_for_its_side_effects_and_the_call_returns_an_empty_list(batch_processing):
    seen, returned = [], []

    def record(x):
        seen.append(np.array(x))

    @pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=11, prefetch_queue_depth=1)
    def pipe():
        data = fn.external_source(source=lambda: FEED, batch=True)
        returned.append(fn.python_function(data, function=record, num_outputs=0, batch_processing=batch_processing))
        return data
    pipeline = pipe()
    pipeline.run()
    pipeline.close()
    assert returned == [[]]
    samples = [sample for value in seen for sample in (value if batch_processing else [value])]
    assert len(samples) == len(FEED)
    assert all(np.array_equal(a, b) for a, b in zip(sorted(samples, key=lambda sample: sample.sum()), FEED))


def test_up_to_256_inputs():
    @pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=11)
    def pipe(count):
        data = fn.external_source(source=lambda: FEED, batch=True)
        return fn.python_function(*[data * i for i in range(count)], function=lambda *inputs: sum(inputs))
    pipeline = pipe(256)
    (total,) = pipeline.run()
    pipeline.close()
    np.testing.assert_array_equal(total.as_array(), np.stack(FEED) * sum(range(256)))
    with pytest.raises(TypeError, match="python_function: expected 0 to 256 input"):
        pipe(257)
