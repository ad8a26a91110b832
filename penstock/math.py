"""Element-wise functions of data nodes (DALI's ``nvidia.dali.math``, with its names and signatures),
per sample, on the device of their input: ``math.sqrt(x)``, ``math.clamp(x, 0, 255)``,
``math.atan2(y, x)``. Types and the cases DALI refuses follow penstock.operators.tensor.arithmetic: the
functions that need fractions (sqrt, exp, floor, ceil, fabs, ...) give float32 for integer inputs;
``abs`` keeps the input's type."""
from __future__ import annotations

from penstock import registry
from penstock.graph import DataNode, invoke
from penstock.operators.tensor.arithmetic import FLOAT_FUNCTIONS


def _unary(op: str):
    def function(input: DataNode) -> DataNode:
        return invoke(registry.get_schema("_arithmetic"), (input,), {"op": op})
    function.__name__ = op
    gives = "float32 for integer inputs" if op in FLOAT_FUNCTIONS else "the input's type"
    function.__doc__ = f"Element-wise {op} of a data node ({gives})."
    return function


def _binary(op: str, left, right) -> DataNode:
    if isinstance(left, DataNode):
        return left._arithmetic(right, op)
    if isinstance(right, DataNode):
        return right._arithmetic(left, op, constant_first=True)
    raise TypeError(f"math.{op}: give at least one data node")


sqrt, rsqrt, cbrt = _unary("sqrt"), _unary("rsqrt"), _unary("cbrt")
exp, log, log2, log10 = _unary("exp"), _unary("log"), _unary("log2"), _unary("log10")
abs = _unary("abs")  # noqa: A001 (DALI's name)
fabs, floor, ceil = _unary("fabs"), _unary("floor"), _unary("ceil")
sin, cos, tan = _unary("sin"), _unary("cos"), _unary("tan")
asin, acos, atan = _unary("asin"), _unary("acos"), _unary("atan")
sinh, cosh, tanh = _unary("sinh"), _unary("cosh"), _unary("tanh")
asinh, acosh, atanh = _unary("asinh"), _unary("acosh"), _unary("atanh")


def min(left, right) -> DataNode:  # noqa: A001 (DALI's name)
    """``left < right ? left : right``, element-wise, in the promoted type."""
    return _binary("min", left, right)


def max(left, right) -> DataNode:  # noqa: A001 (DALI's name)
    """``left > right ? left : right``, element-wise, in the promoted type."""
    return _binary("max", left, right)


def pow(base, exponent) -> DataNode:  # noqa: A001 (DALI's name)
    """``base ** exponent`` in the promoted type (integers: 0 for negative exponents)."""
    return _binary("pow", base, exponent)


def fpow(base, exponent) -> DataNode:
    """``base ** exponent`` as floats: float32 when both are integers, else the promoted type."""
    return _binary("fpow", base, exponent)


def atan2(x, y) -> DataNode:
    """C's ``atan2(x, y)`` (DALI's argument names): the arc tangent of x / y in the quadrant of the
    point; float32 when both are integers."""
    return _binary("atan2", x, y)


def clamp(value, lo, hi) -> DataNode:
    """``value`` limited to [lo, hi], all three converted to the type promoted from them (bounds:
    constants or data nodes): ``lo`` where value < lo, else ``hi`` where it is > hi, so ``hi``
    wherever lo > hi; NaN stays NaN."""
    return invoke(registry.get_schema("_arithmetic"), (value, lo, hi), {"op": "clamp"})


__all__ = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "clamp", "cos", "cosh",
           "exp", "fabs", "floor", "fpow", "log", "log10", "log2", "max", "min", "pow", "rsqrt", "sin", "sinh", "sqrt",
           "tan", "tanh"]
