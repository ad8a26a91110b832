"""Python functions as operators: ``python_function`` (numpy arrays in and out) and
``torch_python_function`` (torch tensors in and out), per sample.

They run where every per-sample operator runs: on the worker threads, or in the worker processes
(which inherit the function when they are forked), many samples at once, not one after another
on a single thread. A function that takes an ``rng`` keyword gets a numpy Generator of its own per
sample, from the pipeline's seed, the operator and the iteration, so its results do not depend on
which worker runs it.
"""
from __future__ import annotations

import inspect
import traceback

import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.schema import Arg, ArgError, OpSchema

FUNCTION_ARGS = (
    Arg("function", "any", None, "The function: takes one array per input (and ``rng=`` when it has that "
        "keyword), returns one array, or a tuple of num_outputs arrays."),
    Arg("num_outputs", "int", 1, "How many arrays the function returns.", min=0),
    Arg("batch_processing", "bool", False, "Accepted from DALI programs with False only: penstock calls the "
        "function once per sample, on the workers, in parallel."),
    Arg("output_layouts", "any", None, "Layout string of each output (one string, or one per output)."),
)


def _check_function(static: dict, per_sample: frozenset) -> None:
    if not callable(static["function"]):
        raise ArgError(f"argument 'function' must be a callable, got {type(static['function']).__name__}")
    if static["batch_processing"]:
        raise ArgError("batch_processing=True is not supported: penstock calls the function per sample, on "
                       "its worker threads or processes in parallel; write it for one sample")


for _name, _class_name, _kind in (("python_function", "PythonFunction", "numpy arrays"),
                                  ("torch_python_function", "TorchPythonFunction", "torch tensors")):
    registry.register_schema(OpSchema(
        name=_name, class_name=_class_name,
        doc=f"Runs a Python function on each sample ({_kind} in and out) on the pipeline's workers.",
        args=FUNCTION_ARGS, num_inputs=(0, 16), num_outputs=lambda args: args["num_outputs"],
        input_names=tuple(f"input{i}" for i in range(16)), checks=(_check_function,)))


@registry.register("python_function", "cpu")
class PythonFunction(SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        function = args["function"]
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            parameters = {}
        self._takes_rng = "rng" in parameters

    def declare_outputs(self, inputs):
        layouts = self.args["output_layouts"]
        count = self.args["num_outputs"]
        if layouts is None or isinstance(layouts, str):
            layouts = [layouts or ""] * count
        if len(layouts) != count:
            raise ValueError(f"{self.name}: {len(layouts)} output_layouts for {count} outputs")
        return tuple(OutputSpec(layout=layout) for layout in layouts)

    def draw(self, rng, count):
        return rng.integers(0, 2**63, count, dtype=np.int64) if self._takes_rng else None

    def run(self, inputs, args, sample, out=None):
        arguments = self.convert_inputs(inputs)
        keywords = {"rng": np.random.default_rng(int(sample.params))} if self._takes_rng else {}
        try:
            result = args["function"](*arguments, **keywords)
        except Exception as error:  # the user's traceback, also from a worker process
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)[1:])
            raise type(error)(f"{error}\n{trace}") if _rebuildable(error) else error
        return self.outputs_of(result, args["num_outputs"])

    def convert_inputs(self, inputs):
        return inputs

    def outputs_of(self, result, count: int):
        outputs = (result,) if count == 1 else result
        if count == 0:
            return ()
        if not isinstance(outputs, (tuple, list)) or len(outputs) != count:
            raise ValueError(f"the function returned {type(result).__name__}, not {count} outputs (num_outputs)")
        return tuple(self.to_array(output) for output in outputs) if count > 1 else self.to_array(outputs[0])

    def to_array(self, value):
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"the function returned {type(value).__name__}, which is not an array")
        return array


def _rebuildable(error: Exception) -> bool:
    """Whether the error's type takes a single message (most do; some need more arguments)."""
    try:
        type(error)("message")
    except Exception:
        return False
    return True


@registry.register("torch_python_function", "cpu")
class TorchPythonFunction(PythonFunction):
    def convert_inputs(self, inputs):
        import torch
        return [torch.from_numpy(np.ascontiguousarray(value)) for value in inputs]

    def to_array(self, value):
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return super().to_array(value)
