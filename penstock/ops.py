"""Operator objects: ``ops.Resize(device="gpu", resize_x=224)`` made once, then called on DataNodes in
``define_graph``. One class per operator schema in the registry, with the schema's docs."""
from __future__ import annotations

import sys

from penstock import operators  # noqa: F401  (registers every operator)
from penstock import registry
from penstock.api import make_namespaces, signature_of
from penstock.graph import invoke


def _make_class(schema):
    def __init__(self, *arguments, **kwargs):
        # a source's arguments that DALI also takes by position (ops.ExternalSource(source, num_outputs))
        names = schema.argument_inputs if schema.num_inputs[1] == 0 else ()
        if len(arguments) > len(names):
            raise TypeError(f"{schema.name}: takes {len(names)} positional argument(s) when made, got {len(arguments)}")
        for name, value in zip(names, arguments):
            if name in kwargs:
                raise TypeError(f"{schema.name}: '{name}' given by position and as a keyword; give it once")
            kwargs[name] = value
        schema.validate(kwargs)  # bad arguments fail here, where the object is made
        self._init_kwargs = kwargs

    def __call__(self, *inputs, **kwargs):
        # None is 'not given' (as in DALI): an argument left None when made may come with the call
        repeated = sorted(name for name in set(kwargs) & set(self._init_kwargs) if self._init_kwargs[name] is not None)
        if repeated:
            raise TypeError(f"{schema.name}: argument '{repeated[0]}' was given when the operator was made "
                            "and again when it was called; give it once")
        return invoke(schema, inputs, {**self._init_kwargs, **kwargs})

    def __repr__(self):
        arguments = ", ".join(f"{k}={v!r}" for k, v in self._init_kwargs.items())
        return f"ops.{schema.class_name}({arguments})"

    short_name = schema.class_name.rsplit(".", 1)[-1]
    cls = type(short_name, (), {"__init__": __init__, "__call__": __call__, "__repr__": __repr__,
                                "__doc__": schema.docstring(registry.devices(schema.name)),
                                "__module__": __name__, "schema": schema})
    cls.__init__.__signature__ = signature_of(schema, with_inputs=False, with_self=True)
    return cls


def _classes() -> dict:
    classes = {}
    for schema in registry.schemas().values():
        if not schema.name.startswith("_"):
            classes[schema.class_name] = _make_class(schema)
            classes.update((class_name, classes[schema.class_name]) for _, class_name in schema.also_named)
    return classes


make_namespaces(sys.modules[__name__], _classes())

from penstock.compose import Compose  # noqa: E402  (operator objects chained, as DALI's ops.Compose)
