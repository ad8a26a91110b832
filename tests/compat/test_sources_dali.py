"""The same programs under nvidia.dali and penstock.compat.dali: conditionals (predicates of any
numeric type, the functions the pipeline function calls), external_source's sources and arguments,
and readers given pathlib.Path. Each program gives the same values, dtypes and layouts under both,
or is refused by both."""
from __future__ import annotations

import functools
import importlib
import pathlib

import numpy as np
import pytest

pytest.importorskip("nvidia.dali")

LIBRARIES = ("nvidia.dali", "penstock.compat.dali")


def _modules(library: str):
    return importlib.import_module(library), importlib.import_module(f"{library}.fn"), \
        importlib.import_module(f"{library}.types")


def _run(library: str, define, iterations: int = 2, epochs: int = 1, batch_size: int = 6, **pipeline_args):
    """Per epoch, per iteration, each output's samples as (values, dtype name) and its layout; an
    epoch ends at StopIteration ('end')."""
    dali, fn, types = _modules(library)

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3, **pipeline_args)
    def pipeline():
        outputs = define(fn, types)
        return tuple(outputs) if isinstance(outputs, (list, tuple)) else outputs

    pipe = pipeline()
    pipe.build()
    result = []
    for _ in range(epochs):
        for _ in range(iterations):
            try:
                outputs = pipe.run()
            except StopIteration:
                result.append("end")
                pipe.reset()
                break
            result.append([([np.asarray(sample).tolist() for sample in output],
                            [np.asarray(sample).dtype.name for sample in output], output.layout())
                           for output in outputs])
    return result


def _same_under_both(define, **kwargs):
    expected, got = (_run(library, define, **kwargs) for library in LIBRARIES)
    assert got == expected
    return got


def _refused_by_both(define, **kwargs):
    for library in LIBRARIES:
        with pytest.raises(Exception):
            _run(library, define, **kwargs)


# ---- conditionals ---------------------------------------------------------------------------------
def _values(fn, types):
    return fn.external_source(source=lambda: [np.array(v, np.int32) for v in (0, 1, 2, 3, 4, 7)])


@pytest.mark.parametrize("dtype", ["BOOL", "UINT8", "INT32", "INT64", "FLOAT", "FLOAT16"])
def test_a_scalar_of_any_numeric_type_is_a_predicate(dtype):
    def define(fn, types):
        x = _values(fn, types)
        flag = fn.cast(x - 2, dtype=getattr(types, dtype))
        if flag:
            y = x + 100
        else:
            y = x - 100
        return y, flag
    _same_under_both(define, enable_conditionals=True, iterations=1)


def test_a_non_scalar_predicate_is_refused():
    def define(fn, types):
        x = _values(fn, types)
        if fn.stack(x > 1, x > 2):
            x = x + 1
        return x
    _refused_by_both(define, enable_conditionals=True, iterations=1)


def _times(factor):
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return function(*args, **kwargs) * factor
        return wrapper
    return decorate


@_times(10)
def _decorated(x):
    if x > 2:
        y = x + 1
    else:
        y = x - 1
    return y


class _Shift:
    def __init__(self, by):
        self.by = by

    @_times(2)
    def method(self, x):
        if x > 2:
            x = x + self.by
        return x

    def __call__(self, x):
        if x > 3:
            x = x + 1000
        return x


def _closure(threshold):
    def inner(x):
        if x > threshold:
            x = x * 0
        return x
    return inner


def _shifted(x, by):
    if x > 4:
        x = x + by
    return x


_LAMBDA = lambda x: (not (x > 3)) or (x > 6)  # noqa: E731


def test_called_functions_keep_their_decorators_and_bindings():
    def define(fn, types):
        x = _values(fn, types)

        def nested(value):
            if value < 2:
                value = value + 50
            return value
        return (_decorated(x), _Shift(5).method(x), _Shift(0)(x), _closure(3)(x), _LAMBDA(x), nested(x),
                functools.partial(_shifted, by=7)(x))
    _same_under_both(define, enable_conditionals=True, iterations=1)


# ---- external_source ------------------------------------------------------------------------------
def _generator_function():
    for b in range(3):
        yield [np.array([b, 10 * i], np.int16) for i in range(2)]


@pytest.mark.parametrize("cycle", [None, False, "no", True, "quiet", "raise"])
def test_generator_functions_and_cycle(cycle):
    _same_under_both(lambda fn, types: fn.external_source(source=_generator_function, cycle=cycle),
                     batch_size=2, iterations=4, epochs=2)


@pytest.mark.parametrize("cycle", [None, True, "raise"])
def test_iterables_and_cycle(cycle):
    data = [[np.full(2, b, np.float32)] * 2 for b in range(2)]
    _same_under_both(lambda fn, types: fn.external_source(source=data, cycle=cycle), batch_size=2, iterations=3,
                     epochs=2)


def test_a_generator_object_goes_once():
    _same_under_both(lambda fn, types: fn.external_source(source=_generator_function()), batch_size=2,
                     iterations=4, epochs=2)


def test_callables_with_and_without_info():
    def define(fn, types):
        return (list(fn.external_source(lambda: ([np.array(1, np.uint8)] * 2, [np.array([2, 3])] * 2), 2))
                + [fn.external_source(lambda i=5: np.full((2, 1), i, np.int32)),
                   fn.external_source(lambda info: np.full((2, 1), info.iteration * 10 + info.epoch_idx, np.int32),
                                      batch_info=True),
                   fn.external_source(lambda info: np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration,
                                                             info.epoch_idx], np.int32), batch=False),
                   fn.external_source(lambda info: np.array([info.idx_in_epoch], np.int64), batch=False,
                                      parallel=True)])
    _same_under_both(define, batch_size=2, iterations=3)


@pytest.mark.parametrize("arguments", [dict(dtype=["UINT8", "FLOAT"], ndim=[2, 2], layout=["HW", "XY"]),
                                       dict(dtype=["UINT8"], layout=["HW"]), dict(layout="AB"), dict(ndim=[2])])
def test_dtype_ndim_and_layout_per_output(arguments):
    def source():
        return [np.zeros((2, 2), np.uint8)] * 2, [np.zeros((3, 1), np.float32)] * 2

    def define(fn, types):
        dtypes = {"dtype": [getattr(types, name) for name in arguments["dtype"]]} if "dtype" in arguments else {}
        return list(fn.external_source(source, num_outputs=2, **{**arguments, **dtypes}))
    _same_under_both(define, batch_size=2, iterations=1)


@pytest.mark.parametrize("arguments", [
    dict(source=lambda: [np.zeros(1)] * 2, cycle=False), dict(source=lambda a, b: [np.zeros(1)] * 2),
    dict(source=lambda *a: [np.zeros(1)] * 2), dict(source=5), dict(source=[[np.zeros(1)] * 2], cycle="yes"),
    dict(source=lambda: [np.zeros(1)] * 2, parallel=True), dict(source=lambda: [np.zeros(1)] * 2,
                                                                 prefetch_queue_depth=2),
    dict(source=lambda i: [np.zeros(1)] * 2, parallel=True, no_copy=False),
    dict(source=_generator_function, parallel=True, batch=False), dict(source=lambda: [np.zeros((2, 2))] * 2, ndim=3),
    dict(source=lambda: [np.zeros((2, 2))] * 2, layout="HWC"),
])
def test_what_both_refuse(arguments):
    _refused_by_both(lambda fn, types: fn.external_source(**arguments), batch_size=2, iterations=1)


@pytest.mark.parametrize("sample", [[1, 2], (1, 2), 3, 2.5, True, b"ab", [np.zeros(2)] * 2])
@pytest.mark.parametrize("batch", [True, False])
def test_samples_without_a_shape_are_refused(sample, batch):
    source = (lambda: [sample] * 2) if batch else (lambda info: sample)
    _refused_by_both(lambda fn, types: fn.external_source(source, batch=batch), batch_size=2, iterations=1)


def test_samples_of_one_batch_and_of_later_batches_keep_one_number_of_dimensions():
    _refused_by_both(lambda fn, types: fn.external_source(lambda: [np.zeros(2), np.zeros((2, 2))]), batch_size=2,
                     iterations=1)
    _refused_by_both(lambda fn, types: fn.external_source(lambda i: [np.zeros((2,) * (i + 1), np.uint8)] * 2),
                     batch_size=2, iterations=2)
    _same_under_both(lambda fn, types: fn.external_source(lambda: [np.zeros((1, 2)), np.zeros((3, 0))]),
                     batch_size=2, iterations=2)


@pytest.mark.parametrize("value, num_outputs", [
    ("two batches", 1), ("one batch in a tuple", 1), ("a batch", 1), ("an array batch", 1), ("three batches", 2)])
def test_num_outputs_takes_the_first_items_of_what_the_source_gives(value, num_outputs):
    batch = [np.arange(6, dtype=np.uint8).reshape(2, 3) + i for i in range(2)]
    given = {"two batches": (batch, batch[::-1]), "one batch in a tuple": (batch,), "a batch": batch,
             "an array batch": np.stack(batch), "three batches": (batch, batch[::-1], batch)}[value]
    _same_under_both(lambda fn, types: list(fn.external_source(lambda: given, num_outputs=num_outputs)),
                     batch_size=2, iterations=1)


def test_a_named_source_has_no_num_outputs():
    _refused_by_both(lambda fn, types: list(fn.external_source(lambda: ([np.zeros(1)] * 2,), num_outputs=1,
                                                               name="x")), batch_size=2, iterations=1)


def test_a_generator_cannot_cycle():
    _refused_by_both(lambda fn, types: fn.external_source(source=_generator_function(), cycle=True), batch_size=2)


# ---- readers given pathlib.Path -------------------------------------------------------------------
def test_file_reader_takes_paths(tmp_path):
    from helpers_data import make_class_tree
    make_class_tree(str(tmp_path), {"a": 2, "b": 2}, height=8, width=8)
    (tmp_path / "list.txt").write_text("a/img_000.jpg 0\nb/img_001.jpg 1\n")
    for arguments in (dict(file_root=tmp_path), dict(file_root=tmp_path, file_list=tmp_path / "list.txt"),
                      dict(file_root=tmp_path, files=[pathlib.Path("a/img_001.jpg"), "b/img_000.jpg"]),
                      dict(files=[tmp_path / "a" / "img_000.jpg"])):
        _same_under_both(lambda fn, types: fn.readers.file(**arguments), batch_size=2, iterations=2)
