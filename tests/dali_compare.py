"""The same program under NVIDIA DALI and under penstock.compat.dali, for the tests that compare the
two libraries: its outputs (values, types, shapes, layouts), or that both refuse it."""
import numpy as np


def run(library: str, build, inputs, layout):
    """Per output: (list of per-sample arrays, layout); or the exception the program raised.
    ``inputs``: one batch (a list of samples) per external source, the first with ``layout``;
    ``build(fn, types, *sources)`` gives the outputs."""
    if library == "dali":
        from nvidia.dali import fn, pipeline_def, types
    else:
        from penstock.compat.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=len(inputs[0]) if inputs else 3, num_threads=1, device_id=None, seed=7)
    def pipe():
        # a callable without parameters: one with a parameter (even a default) is given the iteration
        data = [fn.external_source(source=(lambda given: lambda: given)(batch), batch=True,
                                   layout=layout if k == 0 else None) for k, batch in enumerate(inputs)]
        return build(fn, types, *data)
    try:
        pipeline = pipe()
        pipeline.build()
        outputs = pipeline.run()
    except Exception as error:  # DALI raises RuntimeError, ValueError, TypeError or KeyError
        return error
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return [([np.array(batch.at(i)) for i in range(len(batch))], batch.layout() or "") for batch in outputs]


def same(build, inputs, layout=None, rtol=0.0, atol=0.0, values=True) -> None:
    """Both libraries give the same outputs (values within the tolerances where ``values``), or
    both refuse the program."""
    expected, actual = run("dali", build, inputs, layout), run("penstock", build, inputs, layout)
    if isinstance(expected, Exception):
        assert isinstance(actual, Exception), f"DALI refuses ({expected!r:.300}), penstock gave {actual}"
        return
    assert not isinstance(actual, Exception), f"penstock refuses what DALI accepts: {actual!r}"
    assert len(actual) == len(expected)
    for (want, want_layout), (got, got_layout) in zip(expected, actual):
        assert got_layout == want_layout
        for w, g in zip(want, got):
            assert g.dtype == w.dtype and g.shape == w.shape, f"{g.dtype}{g.shape} != {w.dtype}{w.shape}"
            if values:
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
