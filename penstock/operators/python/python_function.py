"""Python functions as operators: ``python_function`` (numpy arrays in and out on the CPU, CuPy
arrays on the GPU), ``torch_python_function`` (torch tensors, on the CPU or the GPU) and
``dl_tensor_python_function`` (DLPack capsules in, as DALI gives them; anything DLPack takes out).

Per sample (``batch_processing=False``) they run where every per-sample operator runs: on the
worker threads, or in the worker processes (which inherit the function when they are forked),
many samples at once, not one after another on a single thread. With ``batch_processing=True``
(torch_python_function's default, as in DALI) the function gets each input as a list of the
batch's samples and returns a list per output; on the CPU it is then a whole-batch operator
(contract.WholeBatchOperator). On the GPU the function runs on the GPU stage, on the pipeline's
CUDA stream. A function that takes an ``rng`` keyword gets a numpy Generator of its own per sample
(per batch with batch_processing), from the pipeline's seed, the operator and the iteration, so
its results do not depend on which worker runs it.
"""
from __future__ import annotations

import inspect
import traceback

import numpy as np

from penstock import devices, registry
from penstock.capabilities import RunsUserCode
from penstock.contract import BatchOperator, OutputSpec, SampleOperator, WholeBatchOperator
from penstock.schema import Arg, ArgError, OpSchema

def _function_args(batch_default: bool) -> tuple:
    return (
        Arg("function", "any", None, "The function: takes one array per input (and ``rng=`` when it has that "
            "keyword), returns one array, or a tuple of num_outputs arrays."),
        Arg("num_outputs", "int", 1, "How many arrays the function returns; 0: it runs for its side effects and "
            "the call returns an empty list.", min=0),
        Arg("batch_processing", "bool", batch_default, "Call the function once per batch, with a list of samples "
            "per input, rather than once per sample on the workers in parallel."),
        Arg("output_layouts", "any", None, "Layout string of each output (one string, or one per output)."),
    )


def _check_function(static: dict, per_sample: frozenset) -> None:
    if not callable(static.function):
        raise ArgError(f"argument 'function' must be a callable, got {type(static.function).__name__}")


MAX_INPUTS = 256  # as DALI's python functions

SYNCHRONIZE_STREAM = Arg("synchronize_stream", "bool", True, "On the GPU, wait for the pipeline's CUDA stream "
                         "before calling the function (its work may then go on any stream); else it runs on the "
                         "pipeline's stream.")

for _name, _class_name, _kind, _batch_default, _extra in (
        ("python_function", "PythonFunction", "numpy arrays; CuPy arrays on the GPU", False, ()),
        ("torch_python_function", "TorchPythonFunction", "torch tensors", True, ()),
        ("dl_tensor_python_function", "DLTensorPythonFunction", "DLPack capsules in; anything DLPack takes out",
         True, (SYNCHRONIZE_STREAM,))):
    registry.register_schema(OpSchema(
        name=_name, class_name=_class_name,
        doc=f"Runs a Python function on the data ({_kind} in and out): per sample on the pipeline's workers, "
            "or once per batch with batch_processing=True.",
        args=(*_function_args(_batch_default), *_extra), num_inputs=(0, MAX_INPUTS),
        num_outputs=lambda args: args.num_outputs, input_names=tuple(f"input{i}" for i in range(MAX_INPUTS)),
        checks=(_check_function,)))


class CallsFunction(RunsUserCode):
    """What every form shares: the function's outputs, its rng, its errors with the user's traceback."""

    def __init__(self, args, context):
        super().__init__(args, context)
        function = args.function
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            parameters = {}
        self._takes_rng = "rng" in parameters

    def declare_outputs(self, inputs):
        layouts = self.args.output_layouts
        count = self.args.num_outputs
        if layouts is None or isinstance(layouts, str):
            layouts = [layouts or ""] * count
        if len(layouts) != count:
            raise ValueError(f"{self.name}: {len(layouts)} output_layouts for {count} outputs")
        return tuple(OutputSpec(layout=layout) for layout in layouts)

    def draw(self, rng, count):
        return rng.integers(0, 2**63, count, dtype=np.int64) if self._takes_rng else None

    def call(self, function, arguments, params):
        keywords = {"rng": np.random.default_rng(int(params))} if self._takes_rng else {}
        try:
            return function(*arguments, **keywords)
        except Exception as error:  # the user's traceback, also from a worker process
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)[1:])
            raise type(error)(f"{error}\n{trace}") if _rebuildable(error) else error

    def convert_inputs(self, inputs):
        return inputs

    def batch_outputs(self, result, count: int, size: int):
        """A batch function's result (a list per output; an array whose first axis is the batch)
        as one list of per-sample arrays per output (the list itself for one output)."""
        outputs = (result,) if count == 1 else result
        if not isinstance(outputs, (tuple, list)) or len(outputs) != count:
            raise ValueError(f"the function returned {type(result).__name__}, not {count} outputs (num_outputs)")
        columns = []
        for output in outputs:
            samples = list(output)
            if len(samples) != size:
                raise ValueError(f"the function returned {len(samples)} samples for a batch of {size}")
            columns.append([self.to_array(sample) for sample in samples])
        return tuple(columns) if count > 1 else columns[0]

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


@registry.register("python_function", "cpu")
class PythonFunction(CallsFunction, SampleOperator):
    def __new__(cls, args, context):
        if args.batch_processing and not issubclass(cls, WholeBatchOperator):
            return object.__new__(cls.Batched)  # the same function, called once per batch
        return object.__new__(cls)

    def run(self, inputs, args, sample, out=None):
        return self.outputs_of(self.call(args.function, self.convert_inputs(inputs), sample.params),
                               args.num_outputs)


class BatchedFunction(WholeBatchOperator):
    def run_batch(self, inputs, args, params):
        size = len(args)
        columns = [self.convert_inputs(column) for column in inputs]
        result = self.call(args[0].function, columns, None if params is None else params[0])
        return self.batch_outputs(result, args[0].num_outputs, size) if args[0].num_outputs else ()


class PythonFunctionBatched(PythonFunction, BatchedFunction):
    pass


PythonFunction.Batched = PythonFunctionBatched


def _rebuildable(error: Exception) -> bool:
    """Whether the error's type takes a single message (most do; some need more arguments)."""
    try:
        type(error)("message")
    except Exception:
        return False
    return True


class TorchTensors:
    def convert_inputs(self, inputs):
        import torch
        return [[_tensor(sample) for sample in value] if isinstance(value, list) else _tensor(value)
                for value in inputs]

    def to_array(self, value):
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return super().to_array(value)


def _tensor(array):
    import torch
    array = np.asarray(array)
    return torch.from_numpy(array if array.flags.c_contiguous or array.ndim == 0 else array.copy())


@registry.register("torch_python_function", "cpu")
class TorchPythonFunction(TorchTensors, PythonFunction):
    pass


class TorchPythonFunctionBatched(TorchPythonFunction, BatchedFunction):
    pass


TorchPythonFunction.Batched = TorchPythonFunctionBatched


class DLPackTensors(TorchTensors):
    """dl_tensor_python_function's conversions: each sample given as a DLPack capsule (made through
    torch), each result read from a capsule or from any object with __dlpack__."""

    def convert_inputs(self, inputs):
        from torch.utils.dlpack import to_dlpack
        return [[to_dlpack(sample) for sample in value] if isinstance(value, list) else to_dlpack(value)
                for value in super().convert_inputs(inputs)]

    def to_array(self, value):
        return super().to_array(_from_dlpack(value))


def _from_dlpack(value):
    """A torch tensor from a DLPack capsule or a __dlpack__ object (numpy arrays stay as they are)."""
    if isinstance(value, np.ndarray) or not (type(value).__name__ == "PyCapsule" or hasattr(value, "__dlpack__")):
        return value
    import torch
    return torch.from_dlpack(value)


@registry.register("dl_tensor_python_function", "cpu")
class DLTensorPythonFunction(DLPackTensors, PythonFunction):
    pass


class DLTensorPythonFunctionBatched(DLTensorPythonFunction, BatchedFunction):
    pass


DLTensorPythonFunction.Batched = DLTensorPythonFunctionBatched


class GpuFunction(CallsFunction, BatchOperator):
    """On the GPU stage: the function gets the samples on the GPU (torch tensors, or CuPy arrays for
    python_function), per sample or once per batch, on the pipeline's CUDA stream."""

    def draw(self, rng, count):
        return rng.integers(0, 2**63, count, dtype=np.int64) if self._takes_rng else None

    def run_batch(self, inputs, args, batch):
        from penstock.operators.shared.gpu_plan import tensors_of
        columns = [[self.to_device(sample) for sample in tensors_of(value)] for value in inputs]
        count, size = self.args.num_outputs, len(args)
        if self.args.batch_processing:
            result = self.call(self.args.function, columns, None if batch.params is None else batch.params[0])
            return self.batch_outputs(result, count, size) if count else ()
        results = [self.outputs_of(self.call(sample_args.function, samples, None if batch.params is None
                                             else batch.params[index]), count)
                   for index, (sample_args, samples) in enumerate(zip(args, zip(*columns)))]
        if count == 1:
            return results
        return tuple([result[i] for result in results] for i in range(count))

    def to_device(self, tensor):
        return tensor

    def to_array(self, value):
        import torch
        if isinstance(value, torch.Tensor):
            return value
        if type(value).__module__.startswith("cupy"):
            return torch.from_dlpack(value)
        return torch.as_tensor(np.asarray(value))


@registry.register("torch_python_function", "gpu", requires=devices.gpu_problem)
class TorchPythonFunctionGpu(GpuFunction):
    pass


def _cupy_problem() -> str | None:
    problem = devices.gpu_problem()
    if problem:
        return problem
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "python_function on the GPU hands CuPy arrays to the function, and CuPy is not installed " \
               "(use torch_python_function for torch tensors)"
    return None


@registry.register("python_function", "gpu", requires=_cupy_problem)
class PythonFunctionGpu(GpuFunction):
    def to_device(self, tensor):
        import cupy
        return cupy.from_dlpack(tensor)


@registry.register("dl_tensor_python_function", "gpu", requires=devices.gpu_problem)
class DLTensorPythonFunctionGpu(GpuFunction):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._synchronizes = args.synchronize_stream and not context.emulated_gpu  # an emulated GPU has no stream

    def to_device(self, tensor):
        from torch.utils.dlpack import to_dlpack
        return to_dlpack(tensor)

    def to_array(self, value):
        return super().to_array(_from_dlpack(value))

    def call(self, function, arguments, params):
        if self._synchronizes and devices.gpu_problem() is None:
            import torch
            torch.cuda.current_stream().synchronize()
        return super().call(function, arguments, params)
