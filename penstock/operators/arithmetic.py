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
            raise ValueError(f"'{args['op']}' of samples of shapes {shapes}, which do not broadcast") from None


@registry.register("_arithmetic", "gpu", requires=devices.gpu_problem)
class ArithmeticGpu(ArithmeticDeclaration, BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.operators.gpu_plan import tensors_of
        from penstock.types import to_torch_dtype
        columns = [tensors_of(value) for value in inputs]
        op = args[0]["op"] if args else self.args["op"]
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
                raise ValueError(f"'{op}' of samples of shapes {shapes}, which do not broadcast") from None
        return results
