"""The Python API of DALI programs, under NVIDIA DALI and penstock.compat.dali: each program runs
under both libraries and must give the same observations (or both must raise)."""
import importlib

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

from conformance.harness import LIBRARIES  # noqa: E402
from conformance.known_differences import KNOWN_DIFFERENCES  # noqa: E402

UNIFORM = [np.arange(24, dtype=np.uint8).reshape(2, 4, 3) + i for i in range(3)]
RAGGED = [np.arange(6 * (i + 1), dtype=np.float32).reshape(i + 1, 6) for i in range(3)]


def _modules(name):
    return (importlib.import_module(name), importlib.import_module(name + ".fn"),
            importlib.import_module(name + ".types"))


def _run(library, graph, batch_size=3):
    """Builds and runs a pipeline of ``graph(fn, types)`` once; returns its outputs."""
    lib, fn, types = _modules(library)

    @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=7, prefetch_queue_depth=1)
    def pipeline():
        return graph(fn, types)
    pipe = pipeline()
    pipe.build()
    return pipe.run()


def _feed(fn, samples=UNIFORM, layout="HWC"):
    return fn.external_source(source=lambda: samples, batch=True, layout=layout)


def _values(batch):
    """(dtype, layout, per-sample shapes and values) of a TensorList or penstock batch."""
    samples = [np.array(batch.at(i)) for i in range(len(batch))]
    return (str(samples[0].dtype), str(batch.layout() or ""), [s.shape for s in samples], [s.tolist() for s in samples])


def _outputs(outputs):
    return [_values(batch) for batch in outputs]


def _one(library, samples=UNIFORM, layout="HWC"):
    return _run(library, lambda fn, types: _feed(fn, samples, layout))[0]


def _outside_with(library):
    lib, fn, types = _modules(library)
    pipe = lib.pipeline.Pipeline(batch_size=3, num_threads=1, device_id=None)
    with pipe:
        images = _feed(fn)
    flipped = fn.flip(images, horizontal=1)
    pipe.set_outputs(flipped)
    pipe.build()
    return _outputs(pipe.run())


PROGRAMS = {
    "run_returns_tuple": lambda lib: (type(_run(lib, lambda fn, types: _feed(fn))).__name__,
                                      len(_run(lib, lambda fn, types: (_feed(fn), _feed(fn))))),
    "as_array": lambda lib: (np.asarray(_one(lib).as_array()).shape, str(np.asarray(_one(lib).as_array()).dtype),
                             np.asarray(_one(lib).as_array()).tolist()),
    "as_array_ragged": lambda lib: np.asarray(_one(lib, RAGGED, "HW").as_array()).shape,
    "at": lambda lib: [np.array(_one(lib).at(i)).tolist() for i in range(3)],
    "layout": lambda lib: (_one(lib).layout(), _one(lib, RAGGED, "HW").layout()),
    "is_dense_tensor": lambda lib: (_one(lib).is_dense_tensor(), _one(lib, RAGGED, "HW").is_dense_tensor()),
    "as_cpu": lambda lib: _values(_one(lib).as_cpu()),
    "len": lambda lib: len(_one(lib)),
    "index_tensor": lambda lib: [(tuple(_one(lib)[i].shape()), str(_one(lib)[i].layout())) for i in range(3)],
    "index_tensor_values": lambda lib: [np.array(_one(lib)[i]).tolist() for i in range(3)],
    "index_out_of_range": lambda lib: _one(lib)[3],
    "datanode_shape": lambda lib: _outputs(_run(lib, lambda fn, types: _feed(fn, RAGGED, "HW").shape())),
    "datanode_not_iterable": lambda lib: _run(lib, lambda fn, types: list(iter(_feed(fn)))),
    "none_argument_not_supplied": lambda lib: _outputs(_run(
        lib, lambda fn, types: fn.resize(_feed(fn), resize_x=4, resize_y=None))),
    "outside_with": _outside_with,
    "types_constant_output": lambda lib: _outputs(_run(lib, lambda fn, types: types.Constant(5, dtype=types.INT32))),
    "types_constant_arithmetic": lambda lib: _outputs(_run(
        lib, lambda fn, types: _feed(fn) + types.Constant(np.uint8(2)))),
    "python_constant_output": lambda lib: _outputs(_run(lib, lambda fn, types: (_feed(fn), 7))),
    "numpy_constant_output": lambda lib: _outputs(_run(lib, lambda fn, types: np.float32([1.5, 2.5]))),
    "no_reader_random": lambda lib: [(d, layout, shapes) for d, layout, shapes, _ in _outputs(
        _run(lib, lambda fn, types: fn.random.uniform(shape=(2,))))],
    "no_reader_constant": lambda lib: _outputs(_run(lib, lambda fn, types: fn.constant(idata=[1, 2], shape=(2,)))),
    "unary_plus": lambda lib: _outputs(_run(lib, lambda fn, types: +_feed(fn))),
    "unary_minus": lambda lib: _outputs(_run(lib, lambda fn, types: -_feed(fn))),
    # numpy-style indexing of every sample (DALI's hidden tensor_subscript)
    "subscript_index": lambda lib: _outputs(_run(lib, lambda fn, types: (_feed(fn)[1], _feed(fn)[-1, 2]))),
    "subscript_ranges": lambda lib: _outputs(_run(lib, lambda fn, types: (_feed(fn)[:, 1:10], _feed(fn)[::-1, ::2]))),
    "subscript_per_sample": lambda lib: _outputs(_run(lib, lambda fn, types: _feed(fn)[
        :, fn.external_source(source=lambda: [np.array(i, np.int32) for i in (0, 3, -1)], batch=True)])),
    "subscript_newaxis": lambda lib: _outputs(_run(lib, lambda fn, types: (
        _feed(fn)[:, importlib.import_module(lib).newaxis("Z"), 1], _feed(fn)[0, importlib.import_module(lib).newaxis]))),
    "subscript_out_of_range": lambda lib: _run(lib, lambda fn, types: _feed(fn)[5]),
    "subscript_too_many": lambda lib: _run(lib, lambda fn, types: _feed(fn)[0, 0, 0, 0]),
    "subscript_ellipsis": lambda lib: _run(lib, lambda fn, types: _feed(fn)[..., 0]),
    "input_sets": lambda lib: _outputs(_run(lib, lambda fn, types: (
        *fn.flip([_feed(fn), _feed(fn, RAGGED, "HW")], horizontal=1), *fn.cat([_feed(fn)] * 2, _feed(fn), axis=0)))),
    "input_sets_of_one": lambda lib: _outputs(_run(lib, lambda fn, types: fn.flip([_feed(fn)], horizontal=1))),
    "input_sets_of_lengths_that_differ": lambda lib: _run(lib, lambda fn, types: fn.cat(
        [_feed(fn)] * 2, [_feed(fn)] * 3)),
}


def _observe(program, library):
    try:
        return program(library), None
    except Exception as error:  # a refusal of either library is compared as 'raised'
        return None, error


@pytest.mark.parametrize("name", [
    pytest.param(name, id=name, marks=[pytest.mark.xfail(strict=True, reason=KNOWN_DIFFERENCES[f"api[{name}]"])]
                 if f"api[{name}]" in KNOWN_DIFFERENCES else []) for name in PROGRAMS])
def test_api(name):
    (expected, dali_error), (actual, penstock_error) = (_observe(PROGRAMS[name], library) for library in LIBRARIES)
    if dali_error is not None or penstock_error is not None:
        assert dali_error is not None, f"{name}: DALI runs it, penstock raises {penstock_error!r}"
        assert penstock_error is not None, f"{name}: DALI raises {dali_error!r}, penstock runs it"
        return
    assert actual == expected
