"""Helpers shared by the generated ``fn`` and ``ops`` surfaces."""
from __future__ import annotations

import inspect
import sys
import types as pytypes

from penstock.schema import REQUIRED, OpSchema


def signature_of(schema: OpSchema, with_inputs: bool = True, with_self: bool = False) -> inspect.Signature:
    parameters = []
    if with_self:
        parameters.append(inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD))
    if with_inputs:
        low, high = schema.num_inputs
        for position, name in enumerate(schema.input_names[:high]):
            default = inspect.Parameter.empty if position < low else None
            parameters.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_ONLY, default=default))
    for arg in schema.unique_args():
        default = inspect.Parameter.empty if arg.default is REQUIRED else arg.default
        parameters.append(inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(parameters)


def make_namespaces(root: pytypes.ModuleType, members: dict) -> None:
    """Puts ``{"readers.file": f}`` at ``root.readers.file``, making importable sub-modules."""
    for dotted, member in members.items():
        *path, leaf = dotted.split(".")
        namespace = root
        for part in path:
            child = getattr(namespace, part, None)
            if child is None:
                child = pytypes.ModuleType(f"{namespace.__name__}.{part}")
                child.__doc__ = f"The '{part}' operators."
                setattr(namespace, part, child)
                sys.modules[child.__name__] = child
            namespace = child
        setattr(namespace, leaf, member)
