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


def operator_functions(module_name: str, call) -> dict:
    """One function per public operator schema, ``call(schema, inputs, kwargs)`` behind each, with
    the schema's name, signature and docs (``fn`` and ``eager``)."""
    from penstock import registry

    def function_of(schema):
        def operator_function(*inputs, **kwargs):
            return call(schema, inputs, kwargs)

        short_name = schema.name.rsplit(".", 1)[-1]
        operator_function.__name__ = operator_function.__qualname__ = short_name
        operator_function.__doc__ = schema.docstring(registry.devices(schema.name))
        operator_function.__signature__ = signature_of(schema)
        operator_function.__module__ = module_name
        # DALI's name for the operator's schema (readers__File), which DALI programs read
        operator_function._schema_name = schema.class_name.replace(".", "__")
        return operator_function
    functions = {}
    for schema in registry.schemas().values():
        if not schema.name.startswith("_"):
            functions[schema.name] = function_of(schema)
            functions.update((name, functions[schema.name]) for name, _ in schema.also_named)
    return functions


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


IGNORED = "Accepted for DALI compatibility"  # how an argument's doc starts when penstock ignores it


def ignored_arguments_markdown() -> str:
    """The table of arguments penstock accepts from DALI programs and ignores (docs/dali.md), from
    the schemas: each argument whose doc says so, with the operators that take it."""
    from penstock import operators  # noqa: F401  (registers every operator)
    from penstock import registry
    takers: dict[str, list[str]] = {}
    reasons: dict[str, str] = {}
    for name, schema in sorted(registry.schemas().items()):
        for arg in schema.unique_args():
            if arg.doc.startswith(IGNORED) and not name.startswith("_"):
                takers.setdefault(arg.name, []).append(name)
                reason = arg.doc[len(IGNORED):].lstrip(" .;:")
                reasons.setdefault(arg.name, f"ignored: {reason}" if reason else "ignored")
    lines = ["| argument | operators | in penstock |", "|---|---|---|"]
    for arg_name, names in sorted(takers.items()):
        where = "every operator" if len(names) == len([n for n in registry.schemas() if not n.startswith("_")]) \
            else ", ".join(f"`{n}`" for n in names)
        lines.append(f"| `{arg_name}` | {where} | {reasons[arg_name]} |")
    return "\n".join(lines) + "\n"


def reference_markdown() -> str:
    """The operator reference, from the schemas: what ``penstock docs`` prints (docs/operators.md)."""
    from penstock import operators  # noqa: F401  (registers every operator)
    from penstock import registry
    from penstock.schema import COMMON_ARGS, devices_line

    lines = ["# Operators", "", "Generated from the operator schemas by `penstock docs`; every operator also "
             "takes the common arguments listed at the end.", ""]
    common = {arg.name for arg in COMMON_ARGS}
    for name, schema in sorted(registry.schemas().items()):
        if name.startswith("_"):
            continue
        lines += [f"## fn.{name} / ops.{schema.class_name}", "", schema.doc.strip(), ""]
        if schema.also_named:
            lines += ["Also " + ", ".join(f"fn.{alias} / ops.{class_name}" for alias, class_name in schema.also_named)
                      + ".", ""]
        low, high = schema.num_inputs
        inputs = ", ".join(schema.input_names[:high]) or "none"
        lines += [f"Inputs: {inputs} ({low} to {high}). {devices_line(registry.devices(name))}", ""]
        lines += ["| argument | type | default | per-sample | description |", "|---|---|---|---|---|"]
        for arg in schema.unique_args():
            if arg.name in common:
                continue
            default = "required" if arg.required else f"`{arg.default!r}`"
            alias = f" (also `{'`, `'.join(arg.aliases)}`)" if arg.aliases else ""
            lines.append(f"| `{arg.name}`{alias} | {arg.kind} | {default} | {'yes' if arg.per_sample else ''} | "
                         f"{arg.doc} |")
        lines.append("")
    lines += ["## Common arguments", "", "| argument | type | default | description |", "|---|---|---|---|"]
    lines += [f"| `{arg.name}` | {arg.kind} | `{arg.default!r}` | {arg.doc} |" for arg in COMMON_ARGS]
    return "\n".join(lines) + "\n"
