"""Element-wise functions of data nodes (DALI's ``nvidia.dali.math``), per sample, on the device of
their input: ``math.sqrt(x)``, ``math.clamp(x, 0, 255)``, ``math.atan2(y, x)``. Integer inputs of
the functions that need fractions (sqrt, exp, sin, ...) are computed as float32, as in DALI."""
from __future__ import annotations

from penstock.graph import DataNode, invoke
from penstock import registry


def _unary(op: str):
    def function(input: DataNode) -> DataNode:
        return invoke(registry.get_schema("_arithmetic"), (input,), {"op": op})
    function.__name__ = op
    function.__doc__ = f"Element-wise {op} of a data node."
    return function


def _binary(op: str):
    def function(left, right) -> DataNode:
        if isinstance(left, DataNode):
            return left._arithmetic(right, op)
        if isinstance(right, DataNode):
            return right._arithmetic(left, op, constant_first=True)
        raise TypeError(f"math.{op}: give at least one data node")
    function.__name__ = op
    function.__doc__ = f"Element-wise {op} of two operands (data nodes or constants)."
    return function


abs = _unary("abs")  # noqa: A001 (DALI's name)
floor, ceil = _unary("floor"), _unary("ceil")
sqrt, rsqrt, cbrt = _unary("sqrt"), _unary("rsqrt"), _unary("cbrt")
exp, log, log2, log10 = _unary("exp"), _unary("log"), _unary("log2"), _unary("log10")
sin, cos, tan = _unary("sin"), _unary("cos"), _unary("tan")
asin, acos, atan = _unary("asin"), _unary("acos"), _unary("atan")
sinh, cosh, tanh = _unary("sinh"), _unary("cosh"), _unary("tanh")
pow = _binary("pow")  # noqa: A001
atan2 = _binary("atan2")
min = _binary("min")  # noqa: A001
max = _binary("max")  # noqa: A001


def clamp(input: DataNode, lo, hi) -> DataNode:
    """``input`` limited to [lo, hi] (bounds: constants or data nodes)."""
    return max(min(input, hi), lo)


__all__ = ["abs", "acos", "asin", "atan", "atan2", "cbrt", "ceil", "clamp", "cos", "cosh", "exp", "floor", "log",
           "log10", "log2", "max", "min", "pow", "rsqrt", "sin", "sinh", "sqrt", "tan", "tanh"]
