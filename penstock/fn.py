"""Functional operators: ``fn.resize(images, resize_shorter=256)`` and friends, one function per
operator schema in the registry, with the schema's signature and docs."""
from __future__ import annotations

import sys

from penstock import operators  # noqa: F401  (registers every operator)
from penstock import registry
from penstock.api import make_namespaces, signature_of
from penstock.graph import invoke


def _make_function(schema):
    def operator_function(*inputs, **kwargs):
        return invoke(schema, inputs, kwargs)

    short_name = schema.name.rsplit(".", 1)[-1]
    operator_function.__name__ = operator_function.__qualname__ = short_name
    operator_function.__doc__ = schema.docstring(registry.devices(schema.name))
    operator_function.__signature__ = signature_of(schema)
    operator_function.__module__ = __name__
    return operator_function


make_namespaces(sys.modules[__name__], {schema.name: _make_function(schema)
                                        for schema in registry.schemas().values()
                                        if not schema.name.startswith("_")})

from penstock import math  # noqa: E402,F401  (fn.math.sqrt(x) and friends, as nvidia.dali.math)
