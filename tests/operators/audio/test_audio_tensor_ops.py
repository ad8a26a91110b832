"""normalize, pad, slice and cast on 1-D audio signals (layout "t"), as audio pipelines use them,
against DALI's CPU operators, and their GPU forms (emulated without a GPU) against DALI's CPU
results too: values within 1e-5 (float32 statistics summed in another order), integers exact, the
same types, shapes and layouts, or both libraries refusing. The GPU's cast rounds halves to even as
DALI's GPU does (tests/operators/test_operator_coverage.py), so the floats cast to integers here
have no halves."""
import numpy as np
import pytest
from conftest import CUDA

dali = pytest.importorskip("nvidia.dali")

from dali_compare import run  # noqa: E402

from penstock import devices  # noqa: E402
from penstock.compat.dali import fn as penstock_fn, pipeline_def, types as penstock_types  # noqa: E402

RNG = np.random.default_rng(0)
FLOATS = [(0.3 * RNG.standard_normal(n)).astype(np.float32) for n in (1600, 2500, 4001)]
# louder than int16 holds, with no halves (the GPU rounds them to even, the CPU away from zero)
LOUD = [np.round(40000 * signal) + np.float32(0.25) for signal in FLOATS]
INT16 = [(8000 * RNG.standard_normal(n)).astype(np.int16) for n in (1600, 2500, 4001)]


def _given(fn, values, dtype):
    return fn.external_source(source=lambda: [np.array(v, dtype) for v in values], batch=True)


PROGRAMS = {
    # normalize over the whole signal, per sample or over the batch, with given statistics
    "normalize": (FLOATS, lambda fn, t, x: fn.normalize(x)),
    "normalize axes": (FLOATS, lambda fn, t, x: fn.normalize(x, axes=[0])),
    "normalize axis_names": (FLOATS, lambda fn, t, x: fn.normalize(x, axis_names="t")),
    "normalize batch": (FLOATS, lambda fn, t, x: fn.normalize(x, batch=True)),
    "normalize batch axes": (FLOATS, lambda fn, t, x: fn.normalize(x, axes=[0], batch=True)),
    "normalize mean and stddev": (FLOATS, lambda fn, t, x: fn.normalize(x, mean=0.1, stddev=0.5)),
    "normalize mean, batch stddev": (FLOATS, lambda fn, t, x: fn.normalize(x, mean=0.1, batch=True)),
    "normalize epsilon ddof": (FLOATS, lambda fn, t, x: fn.normalize(x, epsilon=1.0, ddof=1)),
    "normalize int16 to float": (INT16, lambda fn, t, x: fn.normalize(x, dtype=t.FLOAT)),
    "normalize int16 to int16": (INT16, lambda fn, t, x: fn.normalize(x, dtype=t.INT16, scale=1000.0)),
    "normalize to uint8": (FLOATS, lambda fn, t, x: fn.normalize(x, scale=64.0, shift=128.0, dtype=t.UINT8)),
    # pad to the batch's longest signal
    "pad": (FLOATS, lambda fn, t, x: fn.pad(x)),
    "pad fill_value": (FLOATS, lambda fn, t, x: fn.pad(x, fill_value=-1.0)),
    "pad align": (FLOATS, lambda fn, t, x: fn.pad(x, align=16, fill_value=2.0)),
    "pad axis_names align": (FLOATS, lambda fn, t, x: fn.pad(x, axis_names="t", align=[32], fill_value=3.0)),
    "pad int16": (INT16, lambda fn, t, x: fn.pad(x, fill_value=7)),
    "pad shape": (FLOATS, lambda fn, t, x: fn.pad(x, shape=[5000])),
    "pad shape below the longest": (FLOATS, lambda fn, t, x: fn.pad(x, shape=[3000], align=[64])),
    # slice by a window in samples or normalized
    "slice normalized": (FLOATS, lambda fn, t, x: fn.slice(x, rel_start=0.25, rel_shape=0.5)),
    "slice samples": (FLOATS, lambda fn, t, x: fn.slice(x, start=100, shape=500)),
    "slice anchor inputs in samples": (FLOATS, lambda fn, t, x: fn.slice(
        x, _given(fn, [[100]] * 3, np.float32), _given(fn, [[500]] * 3, np.float32), normalized_anchor=False,
        normalized_shape=False)),
    "slice anchor inputs normalized": (FLOATS, lambda fn, t, x: fn.slice(
        x, _given(fn, [[0.1], [0.5], [0.9]], np.float32), _given(fn, [[0.5], [0.25], [0.3]], np.float32))),
    "slice int anchor pad": (FLOATS, lambda fn, t, x: fn.slice(
        x, _given(fn, [[100], [7], [3999]], np.int32), _given(fn, [[500], [1], [10]], np.int32),
        out_of_bounds_policy="pad")),
    "slice pad fill": (FLOATS, lambda fn, t, x: fn.slice(x, start=-100, end=2000, out_of_bounds_policy="pad",
                                                         fill_values=0.5)),
    "slice trim_to_shape": (FLOATS, lambda fn, t, x: fn.slice(x, start=1000, shape=2000,
                                                              out_of_bounds_policy="trim_to_shape")),
    "slice out of bounds": (FLOATS, lambda fn, t, x: fn.slice(x, start=1000, shape=2000)),
    "slice axis_names": (FLOATS, lambda fn, t, x: fn.slice(x, 0.2, 0.3, axis_names="t")),
    "slice int16": (INT16, lambda fn, t, x: fn.slice(x, start=10, shape=100)),
    # cast of audio samples
    "cast int16 to float": (INT16, lambda fn, t, x: fn.cast(x, dtype=t.FLOAT)),
    "cast float to int16": (LOUD, lambda fn, t, x: fn.cast(x, dtype=t.INT16)),
    "cast float to float64": (FLOATS, lambda fn, t, x: fn.cast(x, dtype=t.FLOAT64)),
    "cast int16 to uint8": (INT16, lambda fn, t, x: fn.cast(x, dtype=t.UINT8)),
}


def run_penstock_gpu(build, samples):
    """Per output: (samples, layout) of ``build`` over the batch moved to the (emulated) GPU."""
    @pipeline_def(batch_size=len(samples), num_threads=1, device_id=0, seed=7)
    def pipe():
        return build(penstock_fn, penstock_types, penstock_fn.external_source(source=lambda: samples, batch=True,
                                                                              layout="t").gpu())
    with devices.emulated_gpu(not CUDA):
        try:
            pipeline = pipe()
            pipeline.build()
            outputs = pipeline.run()
        except Exception as error:
            return error
    return [([np.array(batch.as_cpu().at(i)) for i in range(len(batch))], batch.layout() or "") for batch in outputs]


def assert_same(expected, actual, where):
    if isinstance(expected, Exception):
        assert isinstance(actual, Exception), f"{where}: DALI refuses ({expected!r:.200}), penstock gave outputs"
        return
    assert not isinstance(actual, Exception), f"{where}: penstock refuses what DALI accepts: {actual!r}"
    for (want, want_layout), (got, got_layout) in zip(expected, actual):
        assert got_layout == want_layout, where
        for w, g in zip(want, got):
            assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=0,
                                       atol=1e-5 if w.dtype.kind == "f" else 0, err_msg=where)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_one_dimensional_audio_as_dali(name):
    samples, build = PROGRAMS[name]
    expected = run("dali", build, [samples], "t")
    assert_same(expected, run("penstock", build, [samples], "t"), f"{name} on the CPU")
    assert_same(expected, run_penstock_gpu(build, samples), f"{name} on the GPU")
