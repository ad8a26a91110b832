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
    "reshape src_dims": (lambda x: fn.reshape(x, src_dims=(1, -1, 0)), lambda s: s.reshape(s.shape[1], 1, s.shape[0])),
    "reinterpret uint8": (lambda x: fn.reinterpret(x, dtype=penstock.types.UINT8), lambda s: s.view(np.uint8)),
    "reinterpret int32 flat": (lambda x: fn.reinterpret(x, dtype=penstock.types.INT32, shape=(-1,)),
                               lambda s: s.view(np.int32).reshape(-1)),
    "squeeze": (lambda x: fn.squeeze(fn.expand_dims(x, axes=(0, 3)), axes=(0, 3)), lambda s: s),
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
    (lambda x: fn.reinterpret(x, dtype=penstock.types.FLOAT64),
     r"reinterpret failed.*shape \(2, 3\) and type float32 does not hold a whole number of float64"),
    (lambda x: fn.reshape(x, src_dims=(2, 0)), r"reshape failed.*src_dims \[2, 0\] name dimensions"),
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
        assert total.shape == () and total.dtype == np.uint64 and total == sample.astype(np.uint64).sum()
        np.testing.assert_array_equal(largest, sample.max(axis=0))
        assert largest.dtype == np.uint8 and mean.shape == (sample.shape[0], 1) and mean.dtype == np.float32
        np.testing.assert_allclose(variance, sample.astype(np.float64).var(axis=1), rtol=1e-6)
        np.testing.assert_allclose(rms, np.sqrt(np.mean(sample.astype(np.float64) ** 2, keepdims=True)), rtol=1e-6)
    for cpu_output, gpu_output in zip(cpu, gpu):
        for a, b in zip(cpu_output, gpu_output):
            # torch has no uint64: unsigned sums are int64 on the GPU
            assert (a.dtype, b.dtype) in ((b.dtype, b.dtype), (np.uint64, np.int64)) and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-6)


IMAGES = [np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3), np.arange(5 * 3 * 3, dtype=np.uint8).reshape(5, 3, 3)]


def _both_devices(build, samples=IMAGES, layout="HWC"):
    """The outputs on the CPU and on the GPU (or its emulation), which must agree exactly."""
    results = []
    for device in ("cpu", "gpu"):
        @pipeline_def(batch_size=len(samples), num_threads=2, device_id=0 if device == "gpu" else None, seed=1)
        def pipe():
            data = fn.external_source(source=lambda: samples, batch=True, layout=layout)
            return build(data.gpu() if device == "gpu" else data)
        with gpu_or_emulated() if device == "gpu" else _nothing():
            pipeline = pipe()
            outputs = pipeline.run()
            pipeline.close()
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results.append([[np.asarray(s) for s in (batch.as_cpu() if device == "gpu" else batch)] for batch in outputs])
    for cpu_output, gpu_output in zip(*results):
        for cpu_sample, gpu_sample in zip(cpu_output, gpu_output):
            np.testing.assert_array_equal(cpu_sample, gpu_sample)
    return results[0]


def _nothing():
    import contextlib
    return contextlib.nullcontext()


@pytest.mark.parametrize("build, reference", [
    (lambda x: fn.slice(x, start=(1, 1), end=(3, 4)), lambda s: s[1:4, 1:3]),  # (x, y) = (W, H)
    (lambda x: fn.slice(x, rel_start=(0.5, 0.0), rel_shape=(0.5, 0.5)),  # edges rounded, halves up
     lambda s: s[:int(np.floor(s.shape[0] / 2 + 0.5)), int(np.floor(s.shape[1] / 2 + 0.5)):]),
    (lambda x: fn.slice(x, [1, 0], [2, 2], normalized_anchor=False, normalized_shape=False), lambda s: s[0:2, 1:3]),
    (lambda x: fn.slice(x, start=(1,), shape=(2,), axis_names="H"), lambda s: s[1:3]),
    (lambda x: fn.slice(x, start=(0,), shape=(2,), axes=(2,)), lambda s: s[:, :, 0:2]),
    (lambda x: fn.slice(x, start=(-1, 2), shape=(3, 4), out_of_bounds_policy="trim_to_shape"), lambda s: s[2:6, 0:2]),
    (lambda x: fn.slice(x, start=(-1, 3), shape=(3, 3), out_of_bounds_policy="pad", fill_values=(5, 6, 7)),
     lambda s: _padded(s, 3, -1, 3, 3, (5, 6, 7))),
    # integer anchor and shape inputs are elements whatever normalized_* say; floats are fractions
    (lambda x: fn.slice(x, np.array([1, 0], np.int32), np.array([2, 2], np.int32)), lambda s: s[0:2, 1:3]),
    (lambda x: fn.slice(x, [0.5, 0.25], [0.5, 0.5]),
     lambda s: s[round(s.shape[0] / 4):round(s.shape[0] * 3 / 4), round(s.shape[1] / 2):s.shape[1]]),
    (lambda x: fn.slice(x, [1, 0], [2, 2], dtype=penstock.types.FLOAT), lambda s: s[0:2, 1:3].astype(np.float32)),
    # a padded window in another type: the fill converted as a C++ cast (300 wraps to 44 in uint8)
    (lambda x: fn.slice(fn.cast(x, dtype=penstock.types.FLOAT), [-1, 0], [2, 2], out_of_bounds_policy="pad",
                        fill_values=300, dtype=penstock.types.UINT8),
     lambda s: np.concatenate([np.full((2, 1, 3), 44, np.uint8), s[0:2, 0:1]], axis=1)),
])
def test_slice_as_numpy_on_both_devices(build, reference):
    (got,) = _both_devices(build)
    for sample, output in zip(IMAGES, got):
        np.testing.assert_array_equal(output, reference(sample))


def _padded(sample, y, x, height, width, fill):
    out = np.empty((height, width, sample.shape[2]), sample.dtype)
    out[...] = np.asarray(fill, sample.dtype)
    for row in range(height):
        for column in range(width):
            if 0 <= y + row < sample.shape[0] and 0 <= x + column < sample.shape[1]:
                out[row, column] = sample[y + row, x + column]
    return out


def test_slice_takes_per_sample_anchors_and_refuses_windows_outside_by_default():
    anchors = [np.array([0.0, 0.5], np.float32), np.array([0.5, 0.0], np.float32)]

    def build(x):
        anchor = fn.external_source(source=lambda: anchors, batch=True)
        return fn.slice(x, anchor, [0.5, 0.5])
    (got,) = _both_devices(build)
    assert got[0].shape == (2, 3, 3) and np.array_equal(got[0], IMAGES[0][2:4, 0:3])
    assert np.array_equal(got[1], IMAGES[1][0:3, 2:3])  # round(2.5) = 3 rows, columns [round(1.5), round(3.0))
    with pytest.raises(penstock.PipelineError, match=r"slice failed.*window \[4, 8\) of axis 1, outside the "
                                                     r"sample's extent 6.*out_of_bounds_policy"):
        _run(lambda x: fn.slice(x, start=(4, 0), shape=(4, 1)), samples=IMAGES)


def test_element_extract_gives_one_output_per_index():
    sequences = [np.arange(24, dtype=np.int16).reshape(4, 6), np.arange(12, dtype=np.int16).reshape(2, 6)]
    first, second = _both_devices(lambda x: fn.element_extract(x, element_map=[1, 0]), samples=sequences, layout="FW")
    for sequence, one, zero in zip(sequences, first, second):
        np.testing.assert_array_equal(one, sequence[1])
        np.testing.assert_array_equal(zero, sequence[0])


def test_pad_to_the_batch_or_a_shape_and_permute_batch():
    (padded,) = _both_devices(lambda x: fn.pad(x, axis_names="W", fill_value=300))
    assert [p.shape for p in padded] == [(4, 6, 3), (5, 6, 3)]
    np.testing.assert_array_equal(padded[1][:, 3:], 255)  # 300 saturated to uint8
    (shaped,) = _both_devices(lambda x: fn.pad(x, axes=(0,), shape=(7,), align=(4,)))
    assert [p.shape for p in shaped] == [(8, 6, 3), (8, 3, 3)]
    (kept,) = _both_devices(lambda x: fn.pad(x, axes=(0,), shape=(4,)))  # as DALI: a larger sample keeps its extent
    assert [p.shape for p in kept] == [(4, 6, 3), (5, 3, 3)]
    (same,) = _both_devices(lambda x: fn.pad(x, axes=(0, 1), fill_value=7))  # one shape: the GPU's batch is dense
    assert [p.shape for p in same] == [(5, 6, 3), (5, 6, 3)]
    np.testing.assert_array_equal(same[1][:, 3:], 7)
    fills = [np.array(3, np.float32), np.array(9, np.float32)]
    (filled,) = _both_devices(lambda x: fn.pad(x, axes=(0, 1), fill_value=fn.external_source(
        source=lambda: fills, batch=True)))  # a fill value per sample
    np.testing.assert_array_equal(filled[0][4:], 3)
    np.testing.assert_array_equal(filled[1][:, 3:], 9)
    (permuted,) = _both_devices(lambda x: fn.permute_batch(x, indices=fn.batch_permutation(no_fixed_points=True)))
    assert np.array_equal(permuted[0], IMAGES[1]) and np.array_equal(permuted[1], IMAGES[0])


def test_on_the_cpu_per_sample_operators_take_what_whole_batch_operators_make():
    # as DALI: any order; the per-sample ones then run after the whole-batch ones
    (flipped, converted) = _run(lambda x: (fn.flip(fn.pad(x), horizontal=1),
                                           fn.cast(fn.flip(fn.pad(x), vertical=1, horizontal=0), dtype=np.float32)),
                                samples=IMAGES)
    padded = [np.pad(image, ((0, 5 - image.shape[0]), (0, 6 - image.shape[1]), (0, 0))) for image in IMAGES]
    for pad, flip, cast in zip(padded, flipped, converted):
        np.testing.assert_array_equal(flip, pad[:, ::-1])
        assert cast.dtype == np.float32
        np.testing.assert_array_equal(cast, pad[::-1])


def test_python_values_as_inputs_are_constants():
    vectors = [np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int32)]
    (got,) = _both_devices(lambda x: fn.cat(x, [7, 8]), samples=vectors, layout="")
    for vector, output in zip(vectors, got):
        np.testing.assert_array_equal(output, np.concatenate([vector, np.array([7, 8], np.int32)]))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_fills_convert_as_cast_does_broadcast_numpy_style_and_name_a_bad_fill(device):
    import contextlib
    place = gpu_or_emulated() if device == "gpu" else contextlib.nullcontext()

    def fill(values):  # a fill value on the data's device
        node = fn.constant(fdata=values)
        return node.gpu() if device == "gpu" else node

    images = [np.zeros((2, 3), np.uint8), np.zeros((1, 3), np.uint8)]
    with place:
        saturated = _run(lambda x: fn.full_like(x, fill([-3.0, 2.5, 300.0])), images, device)[0]
        per_sample = _run(lambda x: fn.full(fn.reductions.sum(x), shape=fn.constant(idata=[2, 3])), device=device)[0]
        with pytest.raises(penstock.PipelineError, match=r"full_like.*shape \(2,\) does not broadcast to the shape "
                                                         r"\(2, 3\)"):
            _run(lambda x: fn.full_like(x, fill([1.0, 2.0])), images[:1], device)
    for got, image in zip(saturated, images):
        # halves away from zero on the CPU, to even on the GPU, as in DALI
        np.testing.assert_array_equal(got, np.broadcast_to(np.uint8([0, 3 if device == "cpu" else 2, 255]), image.shape))
    for got, sample in zip(per_sample, RAGGED):  # the shape given per sample, by an operator's output
        np.testing.assert_array_equal(got, np.full((2, 3), sample.sum(), np.float32))


def test_one_hot_axes_and_values_as_numpy_on_both_devices():
    labels = [np.array([[0, 2], [1, 5]], np.int32), np.array([[3, -1]], np.int32)]

    def reference(sample, axis, on, off, dtype):
        out = np.where(np.arange(4)[:, None, None] == sample[None], on, off).astype(dtype)  # classes first
        return np.moveaxis(out, 0, axis)
    outputs = _both_devices(lambda x: (fn.one_hot(x, num_classes=4), fn.one_hot(x, num_classes=4, axis=1),
                                       fn.one_hot(x, num_classes=4, axis=0, dtype=penstock.types.INT8,
                                                  on_value=300, off_value=-2.5)), labels, layout="HW")
    for index, sample in enumerate(labels):
        np.testing.assert_array_equal(outputs[0][index], reference(sample, 2, 1.0, 0.0, np.float32))
        np.testing.assert_array_equal(outputs[1][index], reference(sample, 1, 1.0, 0.0, np.float32))
        np.testing.assert_array_equal(outputs[2][index], reference(sample, 0, 44, -2, np.int8))  # C++ casts


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.uint32, np.int64, np.float32])
def test_reduction_types_as_numpy(dtype):
    sample = (np.arange(12).reshape(3, 4) * 5 % 7).astype(dtype)
    outputs = _both_devices(lambda x: (fn.reductions.sum(x, axis_names="H"), fn.reductions.min(x, axes=(-1,)),
                                       fn.reductions.mean(x, keep_dims=True), fn.reductions.rms(x, axis_names="W")),
                            [sample], layout="HW") if dtype != np.uint32 else None
    if outputs is None:  # torch has no uint32 tensors: the CPU form alone
        outputs = _run(lambda x: (fn.reductions.sum(x, axes=(0,)), fn.reductions.min(x, axes=(-1,)),
                                  fn.reductions.mean(x, keep_dims=True), fn.reductions.rms(x, axes=(1,))), [sample])
    total, low, mean, rms = (output[0] for output in outputs)
    wide = np.float32 if sample.dtype.kind == "f" else np.uint64 if sample.dtype.kind == "u" else np.int64
    np.testing.assert_array_equal(total, sample.sum(axis=0, dtype=wide))
    assert total.dtype == wide and low.dtype == sample.dtype and mean.dtype == rms.dtype == np.float32
    np.testing.assert_array_equal(low, sample.min(axis=1))
    np.testing.assert_allclose(mean, sample.astype(np.float64).mean(keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(rms, np.sqrt((sample.astype(np.float64) ** 2).mean(axis=1)), rtol=1e-6)


def test_layouts_follow_the_operators():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros((2, 3, 1), np.float32)], batch=True, layout="HWC")
        return (fn.copy(data), fn.squeeze(data, axis_names="C"), fn.expand_dims(data, axes=(0,), new_axis_names="F"),
                fn.reshape(data, shape=(3, 2, 1)), fn.reshape(data, [6]), fn.cat(data, data, axis_name="W"),
                fn.stack(data, data, axis=-1, axis_name="N"), fn.reductions.max(data, axis_names="C"))
    pipeline = pipe()
    outputs = pipeline.run()
    pipeline.close()
    assert [batch.layout() for batch in outputs] == ["HWC", "HW", "FHWC", "HWC", "", "HWC", "HWCN", "HW"]
    assert [np.asarray(batch[0]).shape for batch in outputs] == [(2, 3, 1), (2, 3), (1, 2, 3, 1), (3, 2, 1), (6,),
                                                                 (2, 6, 1), (2, 3, 1, 2), (2, 3)]


@pytest.mark.parametrize("build, message", [
    (lambda x: fn.slice(x, start=[0], shape=[1], axes=[6]), r"Axis 6 out of range. Expected range is \[-3, 2\] for "
                                                              r"a 3D input"),
    (lambda x: fn.pad(x, axes=(-4,)), r"Axis -4 out of range. Expected range is \[-3, 2\] for a 3D input"),
    (lambda x: fn.slice(x, start=[-1], shape=[2], axes=[0]), "Slice can't be placed out of bounds with current "
                                                              "policy. Got: the window \\[-1, 1\\) of axis 0"),
])
def test_axes_and_windows_out_of_range_are_refused_in_dalis_words(build, message):
    with pytest.raises(penstock.PipelineError, match=message):
        _run(build, [np.zeros((2, 3, 4), np.uint8)])
