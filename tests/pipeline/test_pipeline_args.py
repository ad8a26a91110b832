"""Pipeline arguments are checked where they are written: by Pipeline(...), by @pipeline_def(...)
and by the call of the function it makes, each error naming the argument and the value given."""
import inspect

import numpy as np
import pytest

from penstock import Pipeline, fn, pipeline_def
from penstock.pipeline_args import PIPELINE_ARGUMENTS

WRONG = [
    ("batch_size", 2.7, TypeError, "a positive int"),
    ("batch_size", "4", TypeError, "a positive int"),
    ("batch_size", 0, ValueError, "a positive int"),
    ("batch_size", True, TypeError, "a positive int"),
    ("num_threads", 0, ValueError, "a positive int"),
    ("num_threads", -1, ValueError, "a positive int"),
    ("num_threads", 1.5, TypeError, "a positive int"),
    ("seed", "abc", TypeError, "an int"),
    ("seed", 1.5, TypeError, "an int"),
    ("device_id", "0", TypeError, "an int >= -1, or None"),
    ("device_id", -2, ValueError, "an int >= -1, or None"),
    ("prefetch_queue_depth", 0, ValueError, "a positive int, or a dict"),
    ("prefetch_queue_depth", {"cpu_size": 2, "gpu": 1}, ValueError, "a positive int, or a dict"),
    ("exec_async", "yes", TypeError, "True or False"),
    ("py_start_method", "forkserver", ValueError, "'fork' or 'spawn'"),
    ("worker_processes", "no", TypeError, "True or False, or None"),
    ("timeout", True, TypeError, "a number >= 0, or None"),
    ("output_ndim", -1, ValueError, "an int >= 0, or a list of ints and None"),
    ("on_error", "ignore", ValueError, "'raise' or 'skip'"),
]


@pytest.mark.parametrize("name, value, error, expected", WRONG, ids=[f"{w[0]}={w[1]!r}" for w in WRONG])
def test_a_wrong_pipeline_argument_is_named_with_its_value(name, value, error, expected):
    arguments = {"batch_size": 2, name: value}
    with pytest.raises(error, match=rf"Pipeline: argument '{name}' must be {expected}.*got {value!r}"
                       .replace("(", r"\(").replace(")", r"\)").replace("{", r"\{").replace("}", r"\}")):
        Pipeline(**arguments)


def test_pipeline_def_checks_its_arguments_when_it_decorates():
    with pytest.raises(TypeError, match="pipeline_def: argument 'batch_size' must be a positive int"):
        @pipeline_def(batch_size=2.5)
        def pipe():
            return fn.random.coin_flip()


def test_arguments_given_at_the_call_are_checked_there():
    @pipeline_def(batch_size=2, seed=1)
    def pipe():
        return fn.random.coin_flip()
    with pytest.raises(ValueError, match="'num_threads' must be a positive int"):
        pipe(num_threads=0)


def test_a_missing_batch_size_is_asked_for():
    with pytest.raises(ValueError, match="argument 'batch_size' must be given"):
        Pipeline()


def test_numpy_integers_and_dali_spellings_are_taken():
    pipe = Pipeline(batch_size=np.int64(3), num_threads=np.int32(2), seed=np.uint16(7), device_id=None,
                    prefetch_queue_depth={"cpu_size": 2, "gpu_size": 1}, exec_async=1)
    assert (pipe.batch_size, pipe.num_threads) == (3, 2)
    assert Pipeline(batch_size=1, seed=-1, device_id=None).seed >= 0  # -1: a random seed, as in DALI


def test_the_arguments_schema_describes_the_constructor():
    parameters = inspect.signature(Pipeline.__init__).parameters
    assert [arg.name for arg in PIPELINE_ARGUMENTS] == [name for name in parameters if name != "self"]
    assert all(parameters[arg.name].default == arg.default for arg in PIPELINE_ARGUMENTS)
    assert all(f"{arg.name} (" in Pipeline.__doc__ for arg in PIPELINE_ARGUMENTS)
