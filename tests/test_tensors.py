"""Tensor manipulation on ragged batches: results as numpy's, the GPU's as the CPU's, and errors that
name the operator and the shapes."""
import numpy as np
import pytest
from conftest import gpu_or_emulated

import penstock
from penstock import fn, pipeline_def

RAGGED = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(12, dtype=np.float32).reshape(4, 3) - 5]


def _run(build, samples=RAGGED, device="cpu"):
    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0 if device == "gpu" else None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: samples, batch=True)
        return build(data.gpu() if device == "gpu" else data)
    pipeline = pipe()
    outputs = pipeline.run()
    pipeline.close()
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return [[np.asarray(s) for s in (batch.as_cpu() if device == "gpu" else batch)] for batch in outputs]


CASES = {
    "shapes": (lambda x: fn.shapes(x), lambda s: np.array(s.shape, np.int64)),
    "reshape rel_shape": (lambda x: fn.reshape(x, rel_shape=(0.5, 2.0)), lambda s: s.reshape(s.shape[0] // 2, 6)),
    "reshape -1": (lambda x: fn.reshape(x, shape=(-1,)), lambda s: s.reshape(-1)),
    "squeeze all": (lambda x: fn.squeeze(fn.expand_dims(x, axes=(0, 3))), lambda s: s),
    "cat": (lambda x: fn.cat(x, x + 1, axis=0), lambda s: np.concatenate([s, s + 1])),
    "stack": (lambda x: fn.stack(x, x * 0, axis=2), lambda s: np.stack([s, s * 0], axis=2)),
    "one_hot of a vector": (lambda x: fn.one_hot(fn.cast(x * 0 + 1, dtype=penstock.types.INT32),
                                                 num_classes=3, on_value=5, off_value=-1),
                            lambda s: np.where(np.arange(3) == 1, 5.0, -1.0).astype(np.float32)[None, None]
                            .repeat(s.shape[0], 0).repeat(s.shape[1], 1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_as_numpy_on_ragged_batches_and_the_gpu_as_the_cpu(name):
    build, reference = CASES[name]
    (cpu,) = _run(build)
    with gpu_or_emulated():
        (gpu,) = _run(build, device="gpu")
    for sample, cpu_out, gpu_out in zip(RAGGED, cpu, gpu):
        expected = reference(sample)
        np.testing.assert_array_equal(cpu_out, expected)
        np.testing.assert_array_equal(gpu_out, expected)
        assert cpu_out.dtype == gpu_out.dtype == expected.dtype


@pytest.mark.parametrize("build, message", [
    (lambda x: fn.reshape(x, shape=(5, 5)), r"reshape failed.*cannot reshape a sample of shape \(2, 3\)"),
    (lambda x: fn.squeeze(x, axes=(1,)), r"squeeze failed.*axis 1 of a sample of shape \(2, 3\) has size 3"),
    (lambda x: fn.one_hot(fn.cast(x, dtype=penstock.types.INT32), num_classes=2),
     r"one_hot failed.*class index outside \[0, 2\)"),
])
def test_errors_name_the_operator_and_the_shapes(build, message):
    with pytest.raises(penstock.PipelineError, match=message):
        _run(build)


def test_reductions_keep_dims_and_types_on_both_devices():
    samples = [np.array([[1, 2, 3], [4, 5, 6]], np.uint8), np.array([[7, 9, 200]], np.uint8)]

    def build(x):
        mean = fn.reductions.mean(x, axes=(1,), keep_dims=True)
        return (fn.reductions.sum(x), fn.reductions.max(x, axes=(0,)), mean,
                fn.reductions.variance(x, mean, axes=(1,)), fn.reductions.rms(x, keep_dims=True))
    cpu = _run(build, samples)
    with gpu_or_emulated():
        gpu = _run(build, samples, device="gpu")
    for sample, (total, largest, mean, variance, rms) in zip(samples, zip(*cpu)):
        assert total.shape == () and total.dtype == np.int64 and total == sample.astype(np.int64).sum()
        np.testing.assert_array_equal(largest, sample.max(axis=0))
        assert largest.dtype == np.uint8 and mean.shape == (sample.shape[0], 1) and mean.dtype == np.float32
        np.testing.assert_allclose(variance, sample.astype(np.float64).var(axis=1), rtol=1e-6)
        np.testing.assert_allclose(rms, np.sqrt(np.mean(sample.astype(np.float64) ** 2, keepdims=True)), rtol=1e-6)
    for cpu_output, gpu_output in zip(cpu, gpu):
        for a, b in zip(cpu_output, gpu_output):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6)
