"""Per-frame arguments (fn.per_frame): an operator given a sequence and an argument with one value
per frame runs frame by frame, frame f with value f. Against DALI where it is installed (to the
bit), the GPU form against the CPU form (the operators' own tolerances: 1 level of 255), and the
errors where a per-frame argument does not fit its sequence."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_or_emulated

import penstock
from penstock import fn

RNG = np.random.default_rng(0)
SEQUENCES = [RNG.integers(0, 255, (3, 8, 9, 3), dtype=np.uint8), RNG.integers(0, 255, (2, 8, 9, 3), dtype=np.uint8)]
FACTORS = [np.float32([1.0, 1.5, 0.3]), np.float32([0.5, 1.2])]

CALLS = {  # build(fn, sequences, per-frame values, device)
    "brightness": lambda fn, x, a, d: fn.brightness(x, brightness=fn.per_frame(a), device=d),
    "hue": lambda fn, x, a, d: fn.hue(x, hue=fn.per_frame(a * 30), device=d),
    "rotate": lambda fn, x, a, d: fn.rotate(x, angle=fn.per_frame(a * 20), keep_size=True, device=d),
    "color_twist": lambda fn, x, a, d: fn.color_twist(x, saturation=fn.per_frame(a), brightness=0.9, device=d),
    "gaussian_blur": lambda fn, x, a, d: fn.gaussian_blur(x, sigma=fn.per_frame(a + 0.5), device=d),
}


def outputs(api, build, device="cpu", sequences=SEQUENCES, values=FACTORS):
    @api.pipeline_def(batch_size=len(sequences), num_threads=1, device_id=0 if device == "gpu" else None, seed=3)
    def pipeline():
        data = api.fn.external_source(source=lambda: sequences, batch=True, layout="FHWC")
        given = api.fn.external_source(source=lambda: values, batch=True)
        return build(api.fn, data.gpu() if device == "gpu" else data, given, device)
    pipe = pipeline()
    pipe.build()
    batch, = pipe.run()
    if device == "gpu":
        batch = batch.as_cpu()
    return [np.asarray(batch.at(i)) for i in range(len(sequences))], batch.layout()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_frame_takes_its_value_as_dali(name):
    dali = pytest.importorskip("nvidia.dali")
    import penstock.compat.dali as compat
    want, want_layout = outputs(dali, CALLS[name])
    got, got_layout = outputs(compat, CALLS[name])
    assert got_layout == want_layout == "FHWC"
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_frame_f_is_the_operator_on_frame_f_with_value_f_and_the_gpu_agrees(name):
    cpu, _ = outputs(penstock, CALLS[name])
    for index, sequence in enumerate(SEQUENCES):
        for frame in range(len(sequence)):
            alone, _ = outputs(penstock, lambda fn, x, a, d: CALLS[name](fn, x, a, d), "cpu",
                               [sequence[frame:frame + 1]], [FACTORS[index][frame:frame + 1]])
            np.testing.assert_array_equal(cpu[index][frame], alone[0][0])
    with gpu_or_emulated():
        gpu, layout = outputs(penstock, CALLS[name], "gpu")
    assert layout == "FHWC"
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert on_cpu.shape == on_gpu.shape
        assert np.abs(on_cpu.astype(np.int64) - on_gpu.astype(np.int64)).max() <= 1


def test_one_value_stands_for_every_frame():
    got, _ = outputs(penstock, CALLS["brightness"], values=[np.float32([2.0]), np.float32([0.5])])
    want, _ = outputs(penstock, lambda fn, x, a, d: fn.brightness(x, brightness=fn.reshape(a, shape=[]), device=d),
                      values=[np.float32([2.0]), np.float32([0.5])])
    for expected, actual in zip(want, got):
        np.testing.assert_array_equal(actual, expected)


def test_values_that_do_not_fit_the_frames_are_refused_naming_the_argument():
    with pytest.raises(penstock.PipelineError, match="per-frame argument 'brightness' has 2 values for a sequence "
                                                     "of 3 frames"):
        outputs(penstock, CALLS["brightness"], values=[np.float32([1, 2]), np.float32([1, 2])])


def test_a_per_frame_argument_without_sequences_is_refused_where_called():
    with pytest.raises(ValueError, match="brightness: per-frame arguments \\(brightness\\) need sequences"):
        @penstock.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipeline():
            data = fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)], batch=True, layout="HWC")
            given = fn.external_source(source=lambda: [np.float32([1.0])], batch=True)
            return fn.brightness(data, brightness=fn.per_frame(given))
        pipeline().build()
