"""Arithmetic on data nodes: ``images * 0.5 + 1``, ``a // b``, ``labels == 3``, ``-x``, and the
functions of penstock.math: element-wise, per sample, with broadcasting, as DALI computes them (its
"Mathematical Expressions" page and dali/operators/math/expressions):

- Types: T with T gives T; a float with any non-float gives the float; two floats, two signed or two
  unsigned integers give the wider; a signed intX with an unsigned uintY gives int(2Y) when X <= Y
  (capped at int64), else intX; bool with another type gives the other type. Operands are converted
  to that type first. ``/``, ``math.fpow``, ``math.atan2`` and the functions that need fractions
  (sqrt, exp, floor, ceil, fabs, ...) give float32 when every operand is an integer or bool.
  Comparisons give bool; a signed integer compares with an unsigned one by value, not converted.
- Python ints are int32 operands (refused beyond its range), floats float32, bools bool;
  ``types.Constant`` and numpy scalars keep their type; lists and arrays hold int32 or float32 where
  they would hold int64 or float64 (DALI's Constant).
- ``//`` of integers rounds toward zero and ``%`` has the sign of the dividend (C's, not Python's):
  -7 // 2 == -3, -7 % 2 == -1; dividing an integer by zero is an error. With a float operand ``//``
  divides exactly as ``/`` does and ``%`` is C's fmod of the operands as given (computed in double).
  ``**`` of integers gives 0 for negative exponents.
  ``math.min(a, b)`` is ``a < b ? a : b`` and ``math.max(a, b)`` is ``a > b ? a : b`` (so which
  operand is NaN decides the result); ``math.clamp(x, lo, hi)`` gives hi where lo > hi.
- Refused, naming the operation: float16 operands (DALI's arithmetic does not take them), bitwise
  operations with a float operand, and arithmetic whose operands are all bools (except ``*``, a
  logical and; comparisons and bitwise operations take bools).

The same function computes every device's result (numpy on the CPU, torch on the GPU).
"""
from __future__ import annotations

import functools

import numpy as np

from penstock import devices, registry
from penstock.batch import DeferredBatch
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.numeric import promoted
from penstock.schema import Arg, ArgError, OpSchema

BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "fpow", "eq", "ne", "lt", "le", "gt", "ge",
          "bitand", "bitor", "bitxor", "min", "max", "atan2")
# element-wise functions (penstock.math) that give floats: integers go in as float32, as in DALI
FLOAT_FUNCTIONS = ("sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "fabs", "floor", "ceil", "sin", "cos",
                   "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh")
UNARY = ("plus", "neg", "abs", *FLOAT_FUNCTIONS)
TERNARY = ("clamp",)
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
BITWISE = frozenset({"bitand", "bitor", "bitxor"})
INTEGERS_TO_FLOAT = frozenset({"truediv", "fpow", "atan2", *FLOAT_FUNCTIONS})
# the Python operators, for messages; the others are penstock.math's functions
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "bitand": "&", "bitor": "|",
           "bitxor": "^", "neg": "unary -", "plus": "unary +"}


def describe(op: str) -> str:
    return f"'{SYMBOLS[op]}'" if op in SYMBOLS else f"math.{op}"


def _check(static: dict, per_sample: frozenset) -> None:
    if static.op not in BINARY + UNARY + TERNARY:
        raise ArgError(f"unknown operation {static.op!r}")
    if static.constant is not None:  # a constant DALI refuses fails where it is written
        if constant_array(static.constant, static.op).dtype == np.float16:
            check_types(static.op, [np.float16])


registry.register_schema(OpSchema(
    name="_arithmetic", class_name="_Arithmetic",
    doc="An element-wise operation of data nodes and constants (the Python operators on DataNodes and "
        "penstock.math).",
    args=(Arg("op", "str", "add", "The operation."),
          Arg("constant", "any", None, "A constant operand (a number, list, array or types.Constant), or None."),
          Arg("constant_first", "bool", False, "Whether the constant is the left operand.")),
    num_inputs=(1, 3), input_names=("left", "right", "hi"), checks=(_check,), moves_cpu_inputs=True))


def constant_array(value, op: str = "add") -> np.ndarray:
    """A constant operand as DALI types it (module docstring)."""
    if hasattr(value, "dtype") and hasattr(value, "value"):  # types.Constant
        return np.asarray(value.value, dtype=value.dtype)
    if isinstance(value, (bool, np.bool_)):
        return np.asarray(value, np.bool_)
    if isinstance(value, np.float64) and not isinstance(value, np.ndarray):
        # DALI takes Python floats (float32) and types.Constant, not numpy's float64 scalars
        raise TypeError(f"{describe(op)}: a numpy float64 constant ({value!r}) is not an operand; give a Python "
                        f"float (float32) or types.Constant({value!r}, types.FLOAT64)")
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, int):
        info = np.iinfo(np.int32)
        if not info.min <= value <= info.max:
            raise OverflowError(f"{describe(op)}: the constant {value} does not fit int32, the type of Python ints "
                                f"in arithmetic; give types.Constant({value}, types.INT64)")
        return np.asarray(value, np.int32)
    if isinstance(value, float):
        return np.asarray(value, np.float32)
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{describe(op)}: a constant operand is a number, a list or array of numbers, or "
                        f"types.Constant; got {type(value).__name__}")
    if array.ndim > 0 or not isinstance(value, np.ndarray):
        array = array.astype({"int64": np.int32, "float64": np.float32}.get(array.dtype.name, array.dtype))
    return array


def result_type(op: str, operands: list[np.dtype]) -> np.dtype:
    operands = [np.dtype(dtype) for dtype in operands]
    if op in INTEGERS_TO_FLOAT and all(dtype.kind in "biu" for dtype in operands):
        return np.dtype(np.float32)
    if op in COMPARISONS:
        return np.dtype(np.bool_)
    return functools.reduce(promoted, operands)


def check_types(op: str, operands: list[np.dtype]) -> None:
    """Refuses the operand types DALI refuses (module docstring)."""
    operands = [np.dtype(dtype) for dtype in operands]
    if any(dtype == np.float16 for dtype in operands):
        raise TypeError(f"{describe(op)} does not take float16 operands (nor does DALI's arithmetic); cast them "
                        f"to float32 with fn.cast first")
    if op in BITWISE and any(dtype.kind == "f" for dtype in operands):
        raise TypeError(f"{describe(op)} takes integers or bools, not floats")
    if op != "mul" and op not in COMPARISONS | BITWISE and all(dtype.kind == "b" for dtype in operands):
        alone = "a bool" if len(operands) == 1 else "only bools"
        raise TypeError(f"{describe(op)} does not take {alone} (nor does DALI); use the bitwise operators & | ^, "
                        f"or make an operand numeric (fn.cast)")


# the functions' names in numpy and torch, where they differ from penstock's
_NUMPY_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
                "atanh": "arctanh", "atan2": "arctan2", "fabs": "abs"}
_TORCH_NAMES = {"fabs": "abs"}
# a negative signed operand against an unsigned one, by value: (result where it is the left operand, the right)
_NEGATIVE_COMPARED = {"eq": (False, False), "ne": (True, True), "lt": (True, False), "le": (True, False),
                      "gt": (False, True), "ge": (False, True)}


def _apply(op: str, operands: list, to_type, library):
    """The operation on the operands (numpy arrays or torch tensors): ``to_type(value, dtype)``
    converts one, ``library`` is numpy or torch."""
    dtypes = [_dtype(value) for value in operands]
    check_types(op, dtypes)
    if op in COMPARISONS:
        return _compare(op, operands, dtypes, to_type, library)
    target = result_type(op, dtypes)
    values = [to_type(value, target) for value in operands]
    left = values[0]
    right = values[1] if len(values) > 1 else None
    integral = target.kind in "biu"
    names = _NUMPY_NAMES if library is np else _TORCH_NAMES
    if op == "plus":
        return left
    if op == "neg":
        return -left
    if op == "abs":
        return library.abs(left)
    if op == "rsqrt":
        return 1 / library.sqrt(left)
    if op == "cbrt" and library is not np:
        return library.sign(left) * library.abs(left) ** (1 / 3)
    if op in FLOAT_FUNCTIONS:
        return getattr(library, names.get(op, op))(left)
    if op in ("floordiv", "mod") and integral:
        if bool((right == 0).any()):
            raise ZeroDivisionError(f"{describe(op)}: integer division by zero")
        remainder = library.fmod(left, right)  # C's: the sign of the dividend
        if op == "mod":
            return remainder
        return (left - remainder) // right  # exact, so rounding down is rounding toward zero
    if op == "pow" and integral:
        negative = right < 0
        powers = library.pow(left, library.where(negative, 0, right) if library is np else right.clamp(min=0))
        return library.where(negative, library.zeros_like(powers), powers)
    if op == "mod":
        # C++'s fmod of the operands as given: in double where either is not a float32 (exact, so
        # float32 operands give what float32 would)
        wide = [to_type(value, np.float64) for value in operands]
        return to_type(library.fmod(*wide), target)
    if op in ("pow", "fpow"):
        return library.pow(left, right)
    if op == "clamp":
        low = library.where(left < right, right, left)
        return library.where(low > values[2], values[2], low)
    if op == "min":
        return library.where(left < right, left, right)
    if op == "max":
        return library.where(left > right, left, right)
    if op == "atan2":
        return getattr(library, names.get(op, op))(left, right)
    return {"add": lambda: left + right, "sub": lambda: left - right, "mul": lambda: left * right,
            "truediv": lambda: left / right, "floordiv": lambda: left / right,
            "bitand": lambda: left & right,
            "bitor": lambda: left | right, "bitxor": lambda: left ^ right}[op]()


def _compare(op: str, operands: list, dtypes: list, to_type, library):
    left, right = operands
    common = promoted(*dtypes)
    kinds = [dtype.kind for dtype in dtypes]
    unsigned = dtypes[kinds.index("u")] if sorted(kinds) == ["i", "u"] else None
    if unsigned is None or np.iinfo(common).max >= np.iinfo(unsigned).max:
        left, right = (to_type(value, common) for value in operands)
        return _COMPARE[op](left, right)
    # int64 cannot hold every uint64: negatives are decided by sign, the rest compared as uint64
    signed_left = kinds[0] == "i"
    negative = (left if signed_left else right) < 0
    left, right = (to_type(value, unsigned) for value in operands)
    outcome = _NEGATIVE_COMPARED[op][0 if signed_left else 1]
    return library.where(negative, outcome, _COMPARE[op](left, right))


_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}


def _dtype(value) -> np.dtype:
    if isinstance(value, np.ndarray):
        return value.dtype
    from penstock.types import to_numpy_dtype
    return np.dtype(to_numpy_dtype(value.dtype))


class ArithmeticDeclaration:
    def operand_count(self, inputs: tuple) -> int:
        return len(inputs) + (self.args.constant is not None)

    def declare_outputs(self, inputs):
        op = self.args.op
        arity = 1 if op in UNARY else 3 if op in TERNARY else 2
        if self.operand_count(inputs) != arity:
            raise TypeError(f"{describe(op)} takes {arity} operand(s), got {self.operand_count(inputs)}, in "
                            f"{self.context.node}")
        dtypes = [spec.dtype for spec in inputs]
        if self.args.constant is not None:
            constant = constant_array(self.args.constant, op).dtype
            dtypes = [constant, *dtypes] if self.args.constant_first else [*dtypes, constant]
        dtype = None
        if all(d is not None for d in dtypes):
            try:
                check_types(op, dtypes)
            except TypeError as error:
                raise TypeError(f"{error}, in {self.context.node}") from None
            dtype = result_type(op, dtypes)
        ndims = [spec.ndim for spec in inputs]
        ndim = max(ndims) if all(n is not None for n in ndims) else None
        shapes = [spec.shape for spec in inputs]
        shape = shapes[0] if len(shapes) == 1 and shapes[0] is not None and self.args.constant is None \
            or (len(set(shapes)) == 1 and shapes[0] is not None) else None
        # the layout of an operand with the result's dimensions (with unknown dimensions: the longest)
        layouts = sorted((spec.layout for spec in inputs if spec.layout), key=len, reverse=True)
        layout = layouts[0] if layouts and ndim in (None, len(layouts[0])) else ""
        return OutputSpec(dtype, ndim, layout, shape)

    def operands(self, inputs: tuple, constant) -> list:
        if self.args.constant is None:
            return list(inputs)
        return [constant, *inputs] if self.args.constant_first else [*inputs, constant]


@registry.register("_arithmetic", "cpu")
class Arithmetic(ArithmeticDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        op = args.op
        operands = self.operands(tuple(np.asarray(value) for value in inputs),
                                 constant_array(args.constant, op) if args.constant is not None else None)
        try:
            # integers wrap and floats give inf and NaN as DALI's do: numpy's warnings are not errors here
            with np.errstate(all="ignore"):
                return np.asarray(_apply(op, operands, lambda value, dtype: value.astype(dtype, copy=False), np))
        except (TypeError, ZeroDivisionError) as error:
            raise type(error)(f"{error}, in {self.context.node}") from None
        except ValueError as error:
            if "broadcast" not in str(error):
                raise
            shapes = " and ".join(str(value.shape) for value in operands)
            raise ValueError(f"{describe(op)} of samples of shapes {shapes}, which do not broadcast, in "
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
        from penstock.runtime.pinned import to_device
        if self._result is None:
            self._result = run_elementwise(self.expression, self.leaves, self.shapes, self.dtype, self.device,
                                           upload=to_device)
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
    from penstock.types import to_numpy_dtype
    if not _kernel_computes(op):
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
    try:
        check_types(op, dtypes)
    except TypeError:
        return None  # refused with the operation's own message
    if op in COMPARISONS and sorted(dtype.kind for dtype in dtypes) == ["i", "u"] and promoted(*dtypes) == np.int64 \
            and max(dtype.itemsize for dtype in dtypes) == 8:
        return None  # the kernel compares in the common type, which does not hold every uint64
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
    children = [expression for expression, _, _ in parts]
    if op == "clamp":  # hi < max(lo, v) ? hi : ..., every operand converted to the result's type first
        value, low, high = children
        expression = ("min", dtype.name, high, ("max", dtype.name, low, value))
    else:
        expression = (op, dtype.name, *children)
    return ElementwiseBatch(expression, leaves, shapes, dtype, device)


def _kernel_computes(op: str) -> bool:
    """Whether the fused kernel computes the operation as _apply does: not integer // and %, which
    check for division by zero."""
    from penstock.kernels.triton_elementwise import FUSED
    return op == "clamp" or op in FUSED and op not in ("floordiv", "mod")


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
        if _kernel_computes(self.args.op):
            return ["element-wise: joins the element-wise steps next to it in one Triton kernel launch per batch "
                    "(operands of the sample's shape, per-sample scalars and scalar constants)"]
        return ["element-wise: its own step (a function the fused kernel does not compute)"]

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.operators.shared.gpu_plan import tensors_of
        from penstock.types import to_torch_dtype
        op = args[0].op if args else self.args.op
        operands = [value if isinstance(value, ElementwiseBatch) else tensors_of(value) for value in inputs]
        constant = constant_array(self.args.constant, op) if self.args.constant is not None else None
        fused = _fused(op, self.operands(tuple(operands), constant), batch.device)
        if fused is not None:
            return fused
        columns = [tensors_of(value) for value in operands]
        constant = None
        if self.args.constant is not None:
            constant = torch.as_tensor(constant_array(self.args.constant, op), device=batch.device)

        def to_type(value, dtype):
            return value.to(to_torch_dtype(np.dtype(dtype)))
        results = []
        for samples in zip(*columns):
            operands = self.operands(samples, constant)
            try:
                results.append(_apply(op, operands, to_type, torch))
            except (TypeError, ZeroDivisionError) as error:
                raise type(error)(f"{error}, in {self.context.node}") from None
            except RuntimeError as error:
                if "must match" not in str(error) and "broadcast" not in str(error):
                    raise
                shapes = " and ".join(str(tuple(value.shape)) for value in operands)
                raise ValueError(f"{describe(op)} of samples of shapes {shapes}, which do not broadcast, in "
                                 f"{self.context.node}") from None
        return results
