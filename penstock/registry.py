"""The one table of operators: schemas, and their implementations keyed by (operator, device).

Operator modules register a schema once and one implementation class per device they support;
``fn`` and ``ops`` are generated from this table (see ``penstock.fn`` and ``penstock.ops``).
"""
from __future__ import annotations

from penstock.schema import OpSchema, closest

_SCHEMAS: dict[str, OpSchema] = {}
_IMPLEMENTATIONS: dict[tuple[str, str], type] = {}
_UNAVAILABLE: dict[tuple[str, str], str] = {}


def register_schema(schema: OpSchema) -> OpSchema:
    if schema.name in _SCHEMAS:
        raise RuntimeError(f"operator '{schema.name}' is registered twice")
    _SCHEMAS[schema.name] = schema
    return schema


def register(op_name: str, device: str):
    """Class decorator: the implementation of ``op_name`` on ``device``."""
    def decorate(cls):
        key = (op_name, device)
        if key in _IMPLEMENTATIONS:
            raise RuntimeError(f"operator '{op_name}' has two implementations for device '{device}'")
        if op_name not in _SCHEMAS:
            raise RuntimeError(f"operator '{op_name}' has an implementation but no schema")
        _IMPLEMENTATIONS[key] = cls
        cls.schema = _SCHEMAS[op_name]
        return cls
    return decorate


def mark_unavailable(op_name: str, device: str, reason: str) -> None:
    """Records why a device's implementation could not be loaded here (a missing library)."""
    _UNAVAILABLE[(op_name, device)] = reason


def schemas() -> dict[str, OpSchema]:
    return dict(_SCHEMAS)


def get_schema(name: str) -> OpSchema:
    try:
        return _SCHEMAS[name]
    except KeyError:
        raise ValueError(f"unknown operator '{name}'{closest(name, list(_SCHEMAS))}") from None


def devices(op_name: str) -> list[str]:
    return [device for device in ("cpu", "mixed", "gpu") if (op_name, device) in _IMPLEMENTATIONS]


def implementation(op_name: str, device: str) -> type:
    """The implementation class, or a ValueError that says which devices exist and why not this."""
    cls = _IMPLEMENTATIONS.get((op_name, device))
    if cls is not None:
        return cls
    reason = _UNAVAILABLE.get((op_name, device))
    available = devices(op_name)
    message = f"{op_name}: device '{device}' is not supported"
    if reason:
        message = f"{op_name}: device '{device}' is not available here: {reason}"
    raise ValueError(f"{message}; available devices: {', '.join(available) or 'none'}")
