"""The one table of operators: schemas, and their implementations keyed by (operator, device).

Operator modules register a schema once and one implementation class per device they support;
``fn`` and ``ops`` are generated from this table (see ``penstock.fn`` and ``penstock.ops``).
"""
from __future__ import annotations

from typing import Callable

from penstock.schema import OpSchema, closest

_SCHEMAS: dict[str, OpSchema] = {}
_IMPLEMENTATIONS: dict[tuple[str, str], type] = {}
# (operator, device) -> a check that returns why it cannot run here, or None. Called when needed,
# not at import (penstock.devices' checks import PyTorch and load CUDA libraries, once each).
_REQUIREMENTS: dict[tuple[str, str], Callable[[], str | None]] = {}


def register_schema(schema: OpSchema) -> OpSchema:
    if schema.name in _SCHEMAS:
        raise RuntimeError(f"operator '{schema.name}' is registered twice")
    _SCHEMAS[schema.name] = schema
    return schema


def register(op_name: str, device: str, requires: Callable[[], str | None] | None = None):
    """Class decorator: the implementation of ``op_name`` on ``device``; ``requires`` says why it
    cannot run on this machine (a missing GPU or library), or None when it can."""
    def decorate(cls):
        key = (op_name, device)
        if key in _IMPLEMENTATIONS:
            raise RuntimeError(f"operator '{op_name}' has two implementations for device '{device}'")
        if op_name not in _SCHEMAS:
            raise RuntimeError(f"operator '{op_name}' has an implementation but no schema")
        _IMPLEMENTATIONS[key] = cls
        if requires is not None:
            _REQUIREMENTS[key] = requires
        cls.schema = _SCHEMAS[op_name]
        return cls
    return decorate


def _problem(op_name: str, device: str) -> str | None:
    """Why the implementation cannot run here, or None."""
    check = _REQUIREMENTS.get((op_name, device))
    return None if check is None else check()


def schemas() -> dict[str, OpSchema]:
    return dict(_SCHEMAS)


def get_schema(name: str) -> OpSchema:
    try:
        return _SCHEMAS[name]
    except KeyError:
        raise ValueError(f"unknown operator '{name}'{closest(name, list(_SCHEMAS))}") from None


def implementations() -> dict[tuple[str, str], type]:
    """Every (operator, device) and its implementation class."""
    return dict(_IMPLEMENTATIONS)


def devices(op_name: str) -> list[str]:
    """The devices the operator has an implementation for, or is composed on (whether or not this
    machine runs it)."""
    composed = _SCHEMAS[op_name].composed_devices if op_name in _SCHEMAS else ()
    return [device for device in ("cpu", "mixed", "gpu") if (op_name, device) in _IMPLEMENTATIONS or device in composed]


def has_implementation(op_name: str, device: str) -> bool:
    return (op_name, device) in _IMPLEMENTATIONS


def available_devices(op_name: str) -> list[str]:
    """The devices the operator runs on here."""
    return [device for device in devices(op_name) if _problem(op_name, device) is None]


def implementation(op_name: str, device: str) -> type:
    """The implementation class, or a ValueError that says which devices exist and why not this."""
    cls = _IMPLEMENTATIONS.get((op_name, device))
    reason = _problem(op_name, device) if cls is not None else None
    if cls is not None and reason is None:
        return cls
    message = f"{op_name}: device '{device}' is not supported"
    if reason:
        message = f"{op_name}: device '{device}' is not available here: {reason}"
    raise ValueError(f"{message}; available devices: {', '.join(available_devices(op_name)) or 'none'}")
