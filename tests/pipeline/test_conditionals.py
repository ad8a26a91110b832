"""Conditionals (enable_conditionals=True): each sample goes through the branch its predicate chose,
with results equal to running the same Python on that sample alone; a branch runs only on its
samples; the GPU's results equal the CPU's; mistakes name the line."""
import functools
import threading

import numpy as np
import pytest
from conftest import gpu_or_emulated, ragged_images

import penstock
from penstock import fn, pipeline_def, types
from penstock.pipeline import Pipeline

VALUES = [np.array(v, np.int32) for v in (0, 1, 2, 3, 4, 5, 6, 7, 11, -3)]


def _helper(x, flag):
    if flag:
        y = x * 2
    else:
        y = x + 100
    return y


def per_sample_program(x):
    """Written once, run per sample on numpy scalars (the reference) and on batches (the pipeline)."""
    if x % 2 == 0:
        y = x * 10
        if x > 3:
            y = y + 1
    elif x > 4:
        y = x - 1
    else:
        y = -x
    z = _helper(x, x > 5)
    both = (x > 2) and (x < 6)
    either = (x < 1) or (x > 6) or (x == 3)
    negated = not (x > 2)
    chosen = x if x > 4 else x * 0
    return y, z, both, either, negated, chosen


def _outputs(pipe):
    outputs = pipe.run()
    pipe.close()
    return [[np.asarray(sample) for sample in (batch.as_cpu() if batch.device == "gpu" else batch)]
            for batch in outputs]


@pytest.mark.parametrize("worker_processes", [False, True])
def test_each_sample_as_if_run_alone(worker_processes):
    @pipeline_def(enable_conditionals=True, batch_size=len(VALUES), num_threads=2, device_id=None,
                  worker_processes=worker_processes)
    def pipe():
        x = fn.external_source(source=lambda: VALUES, batch=True)
        return per_sample_program(x)

    got = _outputs(pipe())
    for index, value in enumerate(VALUES):
        expected = per_sample_program(value)
        for output, want in zip(got, expected):
            np.testing.assert_array_equal(output[index], np.asarray(want))


def test_a_branch_runs_only_on_its_samples():
    seen = []
    lock = threading.Lock()

    def record(sample):
        with lock:
            seen.append(int(sample))
        return sample

    @pipeline_def(enable_conditionals=True, batch_size=len(VALUES), num_threads=3, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: VALUES, batch=True)
        if x > 3:
            x = fn.python_function(x, function=record)
        return x

    got = _outputs(pipe())
    assert set(seen) == {int(v) for v in VALUES if v > 3}  # (batches run ahead: each may be seen more than once)
    np.testing.assert_array_equal(np.stack(got[0]), np.stack(VALUES))


def _image_pipeline(device: str):
    images = ragged_images(6, seed=3)
    flags = [np.array(flag) for flag in (True, False, False, True, True, False)]

    @pipeline_def(enable_conditionals=True, batch_size=len(images), num_threads=2,
                  device_id=0 if device == "gpu" else None, seed=5)
    def pipe():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        flag = fn.external_source(source=lambda: flags, batch=True)
        data = data.gpu() if device == "gpu" else data
        if flag:
            out = fn.resize(fn.flip(data, horizontal=1), size=(20, 30))
        else:
            out = fn.crop(data, crop=(10, 12))
            out = fn.resize(out, size=(20, 30))
        return fn.crop_mirror_normalize(out, mean=[10.0, 20.0, 30.0], std=[1.0, 1.0, 1.0], dtype=types.FLOAT)
    return pipe(), images, flags


def test_image_branches_on_the_gpu_equal_the_cpu():
    cpu_pipe, images, flags = _image_pipeline("cpu")
    (cpu,) = _outputs(cpu_pipe)
    with gpu_or_emulated():
        gpu_pipe, _, _ = _image_pipeline("gpu")
        (gpu,) = _outputs(gpu_pipe)
    for cpu_sample, gpu_sample in zip(cpu, gpu):
        assert cpu_sample.shape == gpu_sample.shape == (3, 20, 30)
        difference = np.abs(gpu_sample - cpu_sample)  # the linear resize tests' tolerances, in pixel values
        assert difference.max() <= 6 and difference.mean() <= 1.5
    # the two branches made different images: the flipped branch is the CPU's flip of the whole image
    flipped = np.asarray(cpu[0])
    assert not np.allclose(flipped, np.asarray(cpu[1]))


def test_gpu_arithmetic_in_branches_equals_the_cpu():
    def build(device):
        @pipeline_def(enable_conditionals=True, batch_size=len(VALUES), num_threads=1,
                      device_id=0 if device == "gpu" else None)
        def pipe():
            x = fn.external_source(source=lambda: VALUES, batch=True)
            data = x.gpu() if device == "gpu" else x
            if x > 2:
                data = data * 3
                if x > 5:
                    data = data - 100
            else:
                data = -data
            return data
        return pipe()
    (cpu,) = _outputs(build("cpu"))
    with gpu_or_emulated():
        (gpu,) = _outputs(build("gpu"))
    expected = [(v * 3 - 100 if v > 5 else v * 3) if v > 2 else -v for v in VALUES]
    np.testing.assert_array_equal(np.stack(cpu), np.stack(expected))
    np.testing.assert_array_equal(np.stack(gpu), np.stack(expected))


def test_a_branch_no_sample_takes():
    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.float32(i) for i in range(4)], batch=True)
        if x > 100:
            x = fn.math.sqrt(x - 1000)
        return x
    (got,) = _outputs(pipe())
    assert [float(v) for v in got] == [0, 1, 2, 3]


def test_python_conditions_keep_their_python_meaning():
    calls = []

    @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
    def pipe(training):
        x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True)
        if training:
            calls.append("training")
            x = x + 1
        else:
            calls.append("validation")
        return x

    (got,) = _outputs(pipe(True))
    assert calls == ["training"] and [int(v) for v in got] == [2, 3]


def test_pipeline_subclasses_take_the_flag():
    class Branchy(Pipeline):
        def __init__(self):
            super().__init__(batch_size=3, num_threads=1, device_id=None, enable_conditionals=True)
            self.source = penstock.ops.ExternalSource(source=lambda: [np.int32(v) for v in (1, 5, 9)], batch=True)

        def define_graph(self):
            x = self.source()
            if x > 4:
                x = x * 2
            return x

    (got,) = _outputs(Branchy())
    assert [int(v) for v in got] == [1, 10, 18]


def test_without_the_flag_an_if_says_how_to_enable_it():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True)
        if x > 1:
            x = x + 1
        return x
    with pytest.raises(TypeError, match="enable_conditionals=True"):
        pipe()


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32])
def test_any_numeric_scalar_is_a_predicate_true_where_not_zero(dtype):
    kind = np.dtype(dtype).kind
    values = {"b": (0, 1, 0, 1, 0, 1), "u": (0, 1, 2, 0, 255, 7), "i": (0, 1, 2, 0, -1, 7),
              "f": (0, 1, 2, 0, -1, 0.5)}[kind]
    flags = [np.array(v, dtype) for v in values]

    @pipeline_def(enable_conditionals=True, batch_size=len(flags), num_threads=1, device_id=None)
    def pipe():
        flag = fn.external_source(source=lambda: flags, batch=True)
        x = fn.external_source(source=lambda: VALUES[:len(flags)], batch=True)
        if flag:
            x = x + 100
        return x
    (got,) = _outputs(pipe())
    assert [int(v) for v in got] == [int(v) + 100 if f != 0 else int(v) for v, f in zip(VALUES, values)]


def test_coin_flip_is_a_predicate():
    @pipeline_def(enable_conditionals=True, batch_size=16, num_threads=1, device_id=None, seed=7)
    def pipe():
        flip = fn.random.coin_flip()
        zero = fn.cast(flip, dtype=types.INT32) * 0
        if flip:
            taken = zero + 1
        else:
            taken = zero
        return taken, flip
    taken, flip = _outputs(pipe())
    assert [int(v) for v in taken] == [int(v != 0) for v in flip]
    assert flip[0].dtype == np.int32 and {int(v) for v in flip} == {0, 1}


def test_a_non_scalar_predicate_names_the_line():
    @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.zeros(3, np.int32), np.ones(3, np.int32)], batch=True)
        if x > 0:
            x = x + 1
        return x
    line = pipe.__wrapped__.__code__.co_firstlineno + 3
    with pytest.raises(penstock.PipelineError, match=rf"test_conditionals.py:{line} must be a scalar per sample.*"
                                                     r"an array of shape \(3,\)"):
        _outputs(pipe())


def test_a_variable_set_in_one_branch_only_names_it_where_used():
    @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True)
        if x > 1:
            y = x + 1
        return fn.cast(y, dtype=types.FLOAT)
    with pytest.raises(NameError, match=r"variable 'y' is set in only one branch of the conditional at "
                                        r"test_conditionals.py:\d+"):
        pipe()


def test_differing_python_values_and_returns_in_branches_merge_per_sample():
    """As in DALI: Python values that differ between the branches become constant batches merged per
    sample, and returns in branches return what each sample's branch returns."""
    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def differing():
        x = fn.external_source(source=lambda: [np.int32(value) for value in (1, 2, 3, 0)], batch=True)
        if x > 1:
            scale = 2
        else:
            scale = np.int32(3)
        return x * scale

    (scaled,) = differing().run()
    np.testing.assert_array_equal(scaled.as_array(), [3, 4, 6, 0])

    def sign_times_ten(x, depth):
        if depth == 0:
            return x * 10
        if x > 1:
            return sign_times_ten(x, depth - 1) + 1
        return -sign_times_ten(x, depth - 1)

    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def returning():
        x = fn.external_source(source=lambda: [np.int32(value) for value in (1, 2, 3, 0)], batch=True)
        return sign_times_ten(x, 2)

    (out,) = returning().run()
    np.testing.assert_array_equal(out.as_array(), [10, 22, 32, 0])


def test_attributes_set_in_branches_merge_per_sample():
    class Pair:
        first = second = np.int32(0)

    def split(x, pair):
        if x > 0:
            pair.first = -x
        else:
            pair.second = x * 2
        return pair.first, pair.second

    @pipeline_def(enable_conditionals=True, batch_size=4, num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: [np.int32(value) for value in (1, -2, 3, 0)], batch=True)
        return split(x, Pair())

    first, second = pipe().run()
    np.testing.assert_array_equal(first.as_array(), [-1, 0, -3, 0])
    np.testing.assert_array_equal(second.as_array(), [0, -4, 0, 0])


def test_structures_that_differ_and_returns_inside_loops_are_refused_at_the_call():
    @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
    def divergent():
        x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True)
        pair = (x, x)
        if x > 1:
            pair = (x,)
        return pair[0]
    with pytest.raises(ValueError, match="Divergent data found in different branches"):
        divergent()

    @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)
    def looping():
        x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True)
        for _ in range(2):
            if x > 1:
                return x
        return -x
    with pytest.raises(TypeError, match=r"the `if` at test_conditionals.py:\d+ .* contain `return`"):
        looping()


def test_conditions_on_the_gpu_are_refused():
    with gpu_or_emulated():
        @pipeline_def(enable_conditionals=True, batch_size=2, num_threads=1, device_id=0)
        def pipe():
            x = fn.external_source(source=lambda: [np.int32(1), np.int32(2)], batch=True).gpu()
            if x > 1:
                x = x + 1
            return x
        with pytest.raises(TypeError, match="is on the GPU; conditions are CPU batches of scalars"):
            pipe()


# ---- the functions the pipeline function calls ---------------------------------------------------
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


def _tagged(function):  # a decorator that returns the function itself
    function.tag = "tagged"
    return function


@_tagged
@_times(3)
def _twice_decorated(x):
    if x > 4:
        x = x + 1
    return x


class _Scaler:
    def __init__(self, factor):
        self.factor = factor

    @_times(2)
    def method(self, x):
        if x > 2:
            scaled = x * self.factor
        else:
            scaled = x
        return scaled

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


def _counting():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        if x > 1:
            x = x + count
        return x
    return bump


def _limit(x, limit):
    if x > limit:
        x = x - limit
    return x


_LAMBDA = lambda x: (not (x > 3)) or (x > 6)  # noqa: E731
_INNER_LAMBDA = lambda x: (lambda y: y > 2 and y < 6)(x)  # noqa: E731


def _helpers(x, bump):
    """Written once, run on numpy scalars (the reference) and on batches (the pipeline)."""
    def nested(value):
        if value < 2:
            value = value + 50
        return value
    return (_decorated(x), _twice_decorated(x), _Scaler(5).method(x), _Scaler(0)(x), _closure(3)(x),
            _LAMBDA(x), _INNER_LAMBDA(x), nested(x), functools.partial(_limit, limit=4)(x), bump(x), bump(x))


def test_called_functions_keep_their_decorators_closures_and_bindings():
    @pipeline_def(enable_conditionals=True, batch_size=len(VALUES), num_threads=1, device_id=None)
    def pipe():
        x = fn.external_source(source=lambda: VALUES, batch=True)
        return _helpers(x, _counting())

    got = _outputs(pipe())
    assert _twice_decorated.tag == "tagged"
    for index, value in enumerate(VALUES):
        bump = _counting()  # in the pipeline each call of bump ran once, for all the samples
        for output, want in zip(got, _helpers(value, bump)):
            np.testing.assert_array_equal(output[index], np.asarray(want))
