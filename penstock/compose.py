"""``Compose``: operator objects (``ops.*``) chained into one callable, as DALI's ``ops.Compose``."""
from __future__ import annotations

from typing import Callable, Sequence


class Composed:
    """Calls its operators one after the other, each on every output of the one before; the first
    gets the call's keyword arguments. A CPU batch going into a GPU operator is copied to the GPU
    first (DALI's rule), other than the inputs that operator takes as per-sample arguments."""

    def __init__(self, operators: Sequence[Callable]):
        self.operators = []
        for operator in operators:
            self.operators += operator.operators if isinstance(operator, Composed) else [operator]

    def __call__(self, *inputs, **kwargs):
        values = list(inputs)
        for operator in self.operators:
            if _device(operator) == "gpu":
                data_inputs = _data_inputs(operator, len(values))
                values = [value.gpu() if index < data_inputs and getattr(value, "device", "gpu") == "cpu" else value
                          for index, value in enumerate(values)]
            outputs = operator(*values, **kwargs)
            kwargs = {}
            values = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        return values[0] if len(values) == 1 else values

    def __repr__(self):
        return f"ops.Compose([{', '.join(map(repr, self.operators))}])"


def _device(operator) -> str:
    return getattr(operator, "_init_kwargs", {}).get("device", "cpu")


def _data_inputs(operator, given: int) -> int:
    """How many of ``given`` inputs are data (the rest are per-sample arguments given by position)."""
    schema = getattr(operator, "schema", None)
    return given if schema is None else min(given, schema.num_inputs[1])


def Compose(operators: Sequence[Callable]):  # noqa: N802  (DALI's name)
    """A callable that runs ``operators[n-1](...operators[1](operators[0](inputs)))``: each operator's
    outputs are the next one's inputs. One operator is returned as it is."""
    if not operators:
        raise ValueError("Compose: give at least one operator")
    return operators[0] if len(operators) == 1 else Composed(operators)
