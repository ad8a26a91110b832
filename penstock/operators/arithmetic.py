"""Arithmetic on data nodes: ``images * 0.5 + 1``, ``a // b``, ``labels == 3``, ``-x``: element-wise,
per sample, with broadcasting, and DALI's type promotion (its "Mathematical Expressions" page):

- T with T gives T; a float with any non-float gives the float; two floats, two signed or two
  unsigned integers give the wider; a signed intX with an unsigned uintY gives int(2Y) when
  X <= Y, else intX; bool with another type gives the other type.
- Python constants are int32 (int) or float32 (float) operands, as in DALI; ``types.Constant``
  gives a constant of a chosen type.
- ``/`` divides as floats (float32 for integers), ``//`` rounds down, comparisons give bool;
  ``& | ^`` take integers or bools.

The same function computes every device's result (numpy on the CPU, torch on the GPU), with the
operands first converted to the promoted type.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, registry
from penstock.batch import DeferredBatch
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.schema import Arg, ArgError, OpSchema

BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "eq", "ne", "lt", "le", "gt", "ge",
          "bitand", "bitor", "bitxor", "min", "max", "atan2")
# element-wise functions (penstock.math): integers go in as float32, as in DALI
FLOAT_FUNCTIONS = ("sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
                   "atan", "sinh", "cosh", "tanh")
UNARY = ("neg", "abs", "floor", "ceil", *FLOAT_FUNCTIONS)
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
BITWISE = frozenset({"bitand", "bitor", "bitxor"})


def _check(static: dict, per_sample: frozenset) -> None:
    if static["op"] not in BINARY + UNARY:
        raise ArgError(f"unknown operation {static['op']!r}")


registry.register_schema(OpSchema(
    name="_arithmetic", class_name="_Arithmetic",
    doc="An element-wise operation of data nodes and constants (the Python operators on DataNodes).",
    args=(Arg("op", "str", "add", "The operation."),
          Arg("constant", "any", None, "A constant operand (a number or types.Constant), or None."),
          Arg("constant_first", "bool", False, "Whether the constant is the left operand.")),
    num_inputs=(1, 2), input_names=("left", "right"), checks=(_check,), moves_cpu_inputs=True))


def constant_array(value) -> np.ndarray:
    """A Python constant as DALI types it: int32, float32, or bool; types.Constant keeps its type."""
    if hasattr(value, "dtype") and hasattr(value, "value"):  # types.Constant
        return np.asarray(value.value, dtype=value.dtype)
    if isinstance(value, (bool, np.bool_)):
        return np.asarray(value, np.bool_)
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.ndarray):
        return np.asarray(value, np.int32 if isinstance(value, int) else value.dtype)
    if isinstance(value, (float, np.floating)):
        return np.asarray(value, np.float32 if isinstance(value, float) else value.dtype)
    return np.asarray(value)


def promoted(left: np.dtype, right: np.dtype) -> np.dtype:
    """DALI's result type of a binary operation (module docstring)."""
    left, right = np.dtype(left), np.dtype(right)
    if left == right:
        return left
    if left.kind == "b" or right.kind == "b":
        return right if left.kind == "b" else left
    if left.kind == "f" or right.kind == "f":
        if left.kind == "f" and right.kind == "f":
            return max(left, right, key=lambda dtype: dtype.itemsize)
        return left if left.kind == "f" else right
    if left.kind == right.kind:  # both signed or both unsigned
        return max(left, right, key=lambda dtype: dtype.itemsize)
    signed, unsigned = (left, right) if left.kind == "i" else (right, left)
    if signed.itemsize <= unsigned.itemsize:
        return np.dtype(f"int{min(8 * 2 * unsigned.itemsize, 64)}")
    return signed


def result_type(op: str, operands: list[np.dtype]) -> np.dtype:
    if op in COMPARISONS:
        return np.dtype(np.bool_)
    kind = operands[0] if len(operands) == 1 else promoted(*operands)
    if op in ("truediv", "atan2", *FLOAT_FUNCTIONS) and kind.kind in "biu":
        return np.dtype(np.float32)
    return kind


# the functions' names in numpy and torch, where they differ from penstock's
_NUMPY_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2", "min": "minimum",
                "max": "maximum"}
_TORCH_NAMES = {"min": "minimum", "max": "maximum"}


def _apply(op: str, operands: list, to_type, library):
    """The operation on the operands (numpy arrays or torch tensors) converted to the result type;
    ``library`` is numpy or torch."""
    if op in BITWISE and any(_is_float(value) for value in operands):
        raise TypeError(f"'{op}' takes integers or bools, not floats")
    if op in COMPARISONS:
        common = promoted(*[_dtype(value) for value in operands])
        left, right = (to_type(value, common) for value in operands)
    elif len(operands) == 2:
        target = result_type(op, [_dtype(value) for value in operands])
        left, right = (to_type(value, target) for value in operands)
    else:
        (left,) = operands
        left = to_type(left, result_type(op, [_dtype(left)]))
    names = _NUMPY_NAMES if library is np else _TORCH_NAMES
    if op == "neg":
        return -left
    if op in ("abs", "floor", "ceil") and not _is_float(left):
        return library.abs(left) if op == "abs" else left  # integers are whole already
    if op == "rsqrt":
        return 1 / library.sqrt(left)
    if op == "cbrt":
        return library.sign(left) * library.abs(left) ** (1 / 3) if library is not np else np.cbrt(left)
    if op in ("abs", "floor", "ceil", *FLOAT_FUNCTIONS):
        return getattr(library, names.get(op, op))(left)
    if op in ("min", "max", "atan2"):
        return getattr(library, names.get(op, op))(left, right)
    if op == "floordiv" and _is_float(left):
        return library.floor(left / right)
    return {"add": lambda: left + right, "sub": lambda: left - right, "mul": lambda: left * right,
            "truediv": lambda: left / right, "floordiv": lambda: left // right, "mod": lambda: left % right,
            "pow": lambda: left ** right, "eq": lambda: left == right, "ne": lambda: left != right,
            "lt": lambda: left < right, "le": lambda: left <= right, "gt": lambda: left > right,
            "ge": lambda: left >= right, "bitand": lambda: left & right, "bitor": lambda: left | right,
            "bitxor": lambda: left ^ right}[op]()


def _dtype(value) -> np.dtype:
    if isinstance(value, np.ndarray):
        return value.dtype
    from penstock.types import to_numpy_dtype
    return np.dtype(to_numpy_dtype(value.dtype))


def _is_float(value) -> bool:
    return _dtype(value).kind == "f"


class ArithmeticDeclaration:
    def operand_count(self, inputs: tuple) -> int:
        return len(inputs) + (self.args["constant"] is not None)

    def declare_outputs(self, inputs):
        op = self.args["op"]
        dtypes = [spec.dtype for spec in inputs]
        if self.args["constant"] is not None:
            constant = constant_array(self.args["constant"]).dtype
            dtypes = [constant, *dtypes] if self.args["constant_first"] else [*dtypes, constant]
        dtype = result_type(op, dtypes) if all(d is not None for d in dtypes) else None
        ndims = [spec.ndim for spec in inputs]
        ndim = max(ndims) if all(n is not None for n in ndims) else None
        shapes = [spec.shape for spec in inputs]
        shape = shapes[0] if len(shapes) == 1 and shapes[0] is not None and self.args["constant"] is None \
            or (len(set(shapes)) == 1 and shapes[0] is not None) else None
        layouts = [spec.layout for spec in inputs if spec.layout]
        return OutputSpec(dtype, ndim, layouts[0] if layouts and ndim == len(layouts[0]) else "", shape)

    def operands(self, inputs: tuple, constant) -> list:
        if self.args["constant"] is None:
            return list(inputs)
        return [constant, *inputs] if self.args["constant_first"] else [*inputs, constant]


@registry.register("_arithmetic", "cpu")
class Arithmetic(ArithmeticDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        operands = self.operands(tuple(np.asarray(value) for value in inputs),
                                 constant_array(args["constant"]) if args["constant"] is not None else None)
        try:
            return np.asarray(_apply(args["op"], operands, lambda value, dtype: value.astype(dtype, copy=False), np))
        except ValueError as error:
            if "broadcast" not in str(error):
                raise
            shapes = " and ".join(str(value.shape) for value in operands)
            raise ValueError(f"'{args['op']}' of samples of shapes {shapes}, which do not broadcast, in "
                             f"{self.context.node}") from None


class ElementwiseBatch(DeferredBatch):
    """A chain of element-wise operations planned for a GPU batch: the next arithmetic step extends
    it, anything else materializes it, which runs the whole chain as one Triton kernel launch
    (kernels.triton_elementwise)."""

    def __init__(self, expression, leaves: list[list], shapes: list[tuple], dtype: np.dtype, device):
        self.expression, self.leaves, self.shapes, self.dtype, self.device = expression, leaves, shapes, dtype, device
        self._result = None
        self._samples = None

    def __len__(self) -> int:
        return len(self.shapes)

    # read as a sequence of per-sample tensors by operators that take lists (running the chain)
    def __getitem__(self, index):
        return self.materialize()[0][index]

    def __iter__(self):
        return iter(self.materialize()[0])

    def materialize(self, per_sample: bool = True):
        from penstock.kernels.triton_elementwise import run_elementwise
        if self._result is None:
            self._result = run_elementwise(self.expression, self.leaves, self.shapes, self.dtype, self.device)
            self.leaves = None  # the inputs are not needed any more
        packed = self._result
        dense = None
        if self.shapes and len(set(self.shapes)) == 1:
            dense = packed.buffer[:len(self.shapes) * int(np.prod(self.shapes[0]))].view(len(self.shapes),
                                                                                       *self.shapes[0])
        if (per_sample or dense is None) and self._samples is None:
            self._samples = list(packed)
        return (self._samples if per_sample or dense is None else None), dense


def _broadcast(first: tuple, second: tuple) -> tuple | None:
    """The shape of an element-wise result the kernel computes: equal shapes, or one element
    broadcast over the other (not adding dimensions); None for any other broadcast."""
    if first == second:
        return first
    if int(np.prod(first)) == 1 and len(first) <= len(second):
        return second
    if int(np.prod(second)) == 1 and len(second) <= len(first):
        return first
    return None


def _fused(op: str, operands: list, device):
    """The step as an extension of the batch's element-wise chain, or None when the kernel does not
    compute it (another operation, a broadcast other than a scalar one): ``operands`` are
    ElementwiseBatch, lists of tensors, or a constant's numpy array."""
    from penstock.kernels.triton_elementwise import FUSED
    from penstock.types import to_numpy_dtype
    if op not in FUSED:
        return None
    leaves, parts, count = [], [], None
    for operand in operands:
        if isinstance(operand, np.ndarray):
            if operand.size != 1:
                return None
            parts.append((("const", operand.reshape(()).item(), operand.dtype.name), operand.dtype, None))
            continue
        if isinstance(operand, ElementwiseBatch):
            offset = len(leaves)
            leaves.extend(operand.leaves)
            parts.append((_shift(operand.expression, offset), operand.dtype, operand.shapes))
        else:
            leaves.append(operand)
            parts.append((("leaf", len(leaves) - 1), np.dtype(to_numpy_dtype(operand[0].dtype)) if operand else
                          np.dtype(np.float32), [tuple(sample.shape) for sample in operand]))
        count = len(parts[-1][2])
    dtypes = [dtype for _, dtype, _ in parts]
    if op in BITWISE and any(dtype.kind == "f" for dtype in dtypes):
        return None  # refused with the operator's own message
    shapes = None
    for _, _, operand_shapes in parts:
        if operand_shapes is None:
            continue
        if shapes is None:
            shapes = operand_shapes
            continue
        shapes = [_broadcast(a, b) for a, b in zip(shapes, operand_shapes)]
        if any(shape is None for shape in shapes):
            return None
    if shapes is None or count is None:
        return None
    dtype = result_type(op, dtypes)
    return ElementwiseBatch((op, dtype.name, *[expression for expression, _, _ in parts]), leaves, shapes, dtype,
                            device)


def _shift(expression, offset: int):
    """The expression with its operands renumbered from ``offset``."""
    if expression[0] == "leaf":
        return ("leaf", expression[1] + offset)
    if expression[0] == "const":
        return expression
    return (*expression[:2], *[_shift(child, offset) for child in expression[2:]])


@registry.register("_arithmetic", "gpu", requires=devices.gpu_problem)
class ArithmeticGpu(ArithmeticDeclaration, BatchOperator):
    def build_notes(self):
        from penstock.kernels.triton_elementwise import FUSED
        if self.args["op"] in FUSED:
            return ["element-wise: joins the element-wise steps next to it in one Triton kernel launch per batch "
                    "(operands of the sample's shape, per-sample scalars and scalar constants)"]
        return ["element-wise: its own step (a function the fused kernel does not compute)"]

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.operators.gpu_plan import tensors_of
        from penstock.types import to_torch_dtype
        op = args[0]["op"] if args else self.args["op"]
        operands = [value if isinstance(value, ElementwiseBatch) else tensors_of(value) for value in inputs]
        constant = constant_array(self.args["constant"]) if self.args["constant"] is not None else None
        fused = _fused(op, self.operands(tuple(operands), constant), batch.device)
        if fused is not None:
            return fused
        columns = [tensors_of(value) for value in operands]
        constant = None
        if self.args["constant"] is not None:
            constant = torch.as_tensor(constant_array(self.args["constant"]), device=batch.device)

        def to_type(value, dtype):
            return value.to(to_torch_dtype(np.dtype(dtype)))
        results = []
        for samples in zip(*columns):
            operands = self.operands(samples, constant)
            try:
                results.append(_apply(op, operands, to_type, torch))
            except RuntimeError as error:
                if "must match" not in str(error) and "broadcast" not in str(error):
                    raise
                shapes = " and ".join(str(tuple(value.shape)) for value in operands)
                raise ValueError(f"'{op}' of samples of shapes {shapes}, which do not broadcast, in "
                                 f"{self.context.node}") from None
        return results
