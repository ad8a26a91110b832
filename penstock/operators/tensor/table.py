"""What the family's per-sample array operators share: their registration from a table of
(function, inputs, arguments, doc), the class that declares their outputs by operator name, and the
argument pieces several tables use."""
from __future__ import annotations

import numpy as np

from penstock.operators.shared.arrays import ArrayDeclaration, register_array_operator
from penstock.schema import Arg, ArgError

# the element types DALI takes for per-sample arguments (argument inputs) and slice's anchor and shape inputs
INT32, FLOAT32 = (np.dtype(np.int32),), (np.dtype(np.float32),)
LAYOUT_ARG = Arg("layout", "str", "", "Layout of the output ('' keeps none).")


def int_type(xp, dtype):
    if xp is np:
        return dtype
    from penstock.types import to_torch_dtype
    return to_torch_dtype(np.dtype(dtype))


def one_axis_form(axes: str, names: str):
    """A check: ``axes`` and ``names`` exclude each other (and one is needed where ``axes`` has no
    default)."""
    def check(static: dict, per_sample: frozenset) -> None:
        if static.get(axes) is not None and static.get(names) is not None:
            raise ArgError(f"arguments '{axes}' and '{names}' exclude each other; give one")
    return check


def axis_names_arg(doc: str) -> Arg:
    return Arg("axis_names", "str", None, doc)


DECLARATIONS = {}  # operator name: its declare_outputs(impl, inputs), given with its table


class TensorDeclaration(ArrayDeclaration):
    function = None

    def declare_outputs(self, inputs):
        if self.name in DECLARATIONS:
            return DECLARATIONS[self.name](self, inputs)
        return super().declare_outputs(inputs)


def register_tensor_operators(operators: dict, declarations: dict, schema_extras: dict) -> None:
    """Registers each ``name: (function of one sample of each input, (min, max) inputs, arguments,
    doc)`` of ``operators`` for both devices, its outputs declared by ``declarations[name]`` (else as
    ArrayDeclaration declares them) and its schema given ``schema_extras[name]``."""
    DECLARATIONS.update(declarations)
    for name, (function, inputs, args, doc) in operators.items():
        register_array_operator(name, function, inputs, args, doc, declaration=TensorDeclaration,
                                **schema_extras.get(name, {}))
