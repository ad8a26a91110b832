"""Operator schemas: the one description of each operator's arguments.

A schema lists every argument with its kind, default, allowed values and whether it may be a
per-sample input (a DataNode). ``fn.*`` and ``ops.*`` take their signatures and docs from it, and
``OpSchema.validate`` checks a call where the user made it, naming the operator and the argument.
"""
from __future__ import annotations

import difflib
import keyword
import numbers
import operator
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from penstock import types

REQUIRED = object()


def _is_data_node(value: Any) -> bool:
    return getattr(value, "_is_penstock_data_node", False)


def given(static: dict, per_sample: frozenset, name: str) -> bool:
    """Whether a call gave the argument a value: a per-sample input, or a value that is not None, 0
    or empty (the defaults that mean 'not given')."""
    return name in per_sample or static.get(name) not in (None, 0, 0.0, (), "")


def require_one_of(*groups: tuple[str, ...] | str, what: str):
    """A check: at least one of ``groups`` is given (a group of several names: all of them)."""
    groups = [(group,) if isinstance(group, str) else group for group in groups]

    def check(static: dict, per_sample: frozenset) -> None:
        if not any(all(given(static, per_sample, name) for name in group) for group in groups):
            listed = " or ".join(" and ".join(group) for group in groups)
            raise ArgError(f"give {what}: {listed}")
    return check


def closest(name: str, candidates: Sequence[str]) -> str:
    """A ' (did you mean 'x'?)' hint, or '' when nothing is close."""
    match = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


class ArgError(ValueError):
    """A bad argument value; the schema adds the operator and argument names."""


class ArgTypeError(ArgError, TypeError):
    """An argument value of the wrong type; raised to the user as a TypeError."""


def _as_bool(value):
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise ArgTypeError(f"expected a bool, got {value!r}")


def _as_int(value):
    """An int from an int, a bool (as DALI: mirror=False is 0), a whole float, or their numpy
    scalars and 0-d arrays."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            return int(value)
        raise ArgTypeError(f"expected an int, got {value!r}")
    return int(value)


def _as_float(value):
    """A float from any real number, bools included (as DALI), or a numpy 0-d array."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if not isinstance(value, numbers.Real):
        raise ArgTypeError(f"expected a number, got {value!r}")
    return float(value)


def _as_str(value):
    if isinstance(value, types.TensorLayout):
        return value.value
    if not isinstance(value, str):
        raise ArgTypeError(f"expected a string, got {value!r}")
    return value


def _as_path(value):
    """A file or folder: a string or an os.PathLike (pathlib.Path), as a string."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ArgTypeError(f"expected a path (a string or a pathlib.Path), got {value!r}")
    return value


def _sequence_of(convert):
    def convert_sequence(value):
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            return (convert(value),)
        return tuple(convert(item) for item in value)
    return convert_sequence


def _as_enum(enum_type, prefix=""):
    codes = types.DALI_CODES.get(enum_type, {})

    def convert(value):
        if isinstance(value, enum_type):
            return value
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) in codes:
            return codes[int(value)]
        if isinstance(value, str):
            key = value.upper()
            for candidate in (key, prefix + key):
                if candidate in enum_type.__members__:
                    return enum_type[candidate]
            for member in enum_type:
                if member.value == value.lower() or member.value == value:
                    return member
        allowed = ", ".join(member.name for member in enum_type)
        if not isinstance(value, str):
            raise ArgTypeError(f"expected one of {allowed}, got {value!r}")
        short_names = [member.name[len(prefix):] if member.name.startswith(prefix) else member.name
                       for member in enum_type]
        raise ArgError(f"expected one of {allowed}, got {value!r}{closest(value.upper(), short_names)}")
    return convert


def _as_dtype(value):
    if value is types.DALIDataType.NO_TYPE:  # DALI's "no type given"
        return None
    if isinstance(value, types.DALIDataType):
        return value
    try:
        name = types.to_numpy_dtype(value).name
    except TypeError:
        name = None
    for member in types.DALIDataType:
        if member.value == name:
            return member
    raise ArgTypeError(f"expected a data type such as types.FLOAT or np.uint8, got {value!r}")


def _as_callable_or_iterable(value):
    return value


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "bool": _as_bool,
    "int": _as_int,
    "float": _as_float,
    "str": _as_str,
    "ints": _sequence_of(_as_int),
    "floats": _sequence_of(_as_float),
    "strs": _sequence_of(_as_str),
    "path": _as_path,
    "paths": _sequence_of(_as_path),
    "dtype": _as_dtype,
    "dtypes": _sequence_of(_as_dtype),
    "image_type": _as_enum(types.DALIImageType),
    "interp_type": _as_enum(types.DALIInterpType, prefix="INTERP_"),
    "layout": _as_str,
    "any": _as_callable_or_iterable,
    # a number; given per sample, each sample's array as it is (its shape says how it broadcasts)
    "tensor": _as_float,
}


@dataclass(frozen=True)
class Arg:
    """One argument: ``kind`` is a key of CONVERTERS; ``per_sample`` allows a DataNode."""

    name: str
    kind: str
    default: Any = None
    doc: str = ""
    per_sample: bool = False
    choices: tuple = ()
    min: float | None = None
    max: float | None = None
    length: tuple[int, ...] = ()  # allowed lengths of a sequence value
    aliases: tuple[str, ...] = ()  # older names that mean the same argument
    nullable: bool = False  # None is a value of its own, not 'use the default'
    scalar: bool = False  # a per-sample value must be 0-d (where DALI refuses a one-element array)
    input_types: tuple = ()  # numpy types a per-sample value may have (DALI's argument input types); (): any

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def convert(self, value):
        if isinstance(value, types.Constant) and self.kind != "any":  # DALI's ScalarConstant as a value
            value = value.value
        value = CONVERTERS[self.kind](value)
        items = value if isinstance(value, tuple) else (value,)
        if self.length and len(items) not in self.length:
            raise ArgError(f"expected {' or '.join(map(str, self.length))} values, got {len(items)}")
        for item in items:
            if self.choices and item not in self.choices:
                raise ArgError(f"expected one of {', '.join(map(repr, self.choices))}, got {item!r}"
                               + closest(str(item), [str(c) for c in self.choices]))
            if self.min is not None and item < self.min or self.max is not None and item > self.max:
                low = "-inf" if self.min is None else self.min
                high = "inf" if self.max is None else self.max
                raise ArgError(f"expected a value in [{low}, {high}], got {item!r}")
        return value


class Arguments(dict):
    """An operator's validated arguments: a dict, which is what the graph stores, compares and
    checkpoints, whose every argument also reads as an attribute (``args.max_value``). Each schema
    generates its own subclass (``OpSchema.arguments``) with one typed, documented property per
    argument; operator code reads those, never a string key. An argument named like a dict method
    or a Python keyword reads with a trailing underscore (lookup_table's ``args.keys_``); a value an
    operator adds at build for its own use (``replace(input_layout=...)``) reads as an attribute too."""

    __slots__ = ()

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no argument '{name}'") from None

    def replace(self, **changes) -> "Arguments":
        """A copy with ``changes`` applied (the same type)."""
        return type(self)(self, **changes)


ARGUMENT_TYPES = {"bool": "bool", "int": "int", "float": "float", "str": "str", "ints": "tuple[int, ...]",
                  "floats": "tuple[float, ...]", "strs": "tuple[str, ...]", "dtype": "penstock.types.DALIDataType"}


def attribute_name(name: str) -> str:
    """The attribute an argument reads as on ``Arguments``."""
    return name + "_" if name in _RESERVED_ATTRIBUTES else name


_RESERVED_ATTRIBUTES = set(dir(dict)) | set(keyword.kwlist) | {"replace"}


def arguments_type(class_name: str, args) -> type:
    """The ``Arguments`` subclass of one operator: a property per argument, typed and documented
    from its ``Arg``."""
    namespace = {"__slots__": (), "__annotations__": {}, "__doc__": f"The validated arguments of {class_name}."}
    for arg in args:
        attribute = attribute_name(arg.name)
        namespace[attribute] = property(operator.itemgetter(arg.name), doc=arg.doc)
        namespace["__annotations__"][attribute] = ARGUMENT_TYPES.get(arg.kind, "typing.Any")
    return type(class_name.replace(".", "") + "Arguments", (Arguments,), namespace)


# Arguments every operator takes. Written once here, so that their docs are written once.
COMMON_ARGS = (
    Arg("device", "str", "cpu", "Where the operator runs: 'cpu', 'mixed' (decoders) or 'gpu'.",
        choices=("cpu", "mixed", "gpu")),
    Arg("name", "str", None, "A name for the operator's output, used by epoch_size() and iterators."),
    Arg("seed", "int", -1, "Seed of the operator's random stream; -1 derives it from the pipeline's seed."),
    Arg("preserve", "bool", False, "Accepted for DALI compatibility: every operator is kept."),
    Arg("bytes_per_sample_hint", "any", 0, "Accepted for DALI compatibility: buffers are sized "
        "from the data."),
)


@dataclass
class OpSchema:
    """Everything known about one operator before it runs.

    ``name`` is the ``fn`` path ("decoders.image_random_crop"), ``class_name`` the ``ops`` path
    ("decoders.ImageRandomCrop"), both written literally. ``num_inputs`` is (min, max).
    ``num_outputs`` is an int or a function of the validated arguments (and of the number of
    data inputs given, when ``outputs_follow_inputs``: an optional input passed through to an
    output of its own, as random_bbox_crop's labels).
    """

    name: str
    class_name: str
    doc: str
    args: tuple[Arg, ...] = ()
    num_inputs: tuple[int, int] = (1, 1)
    num_outputs: int | Callable[[dict], int] = 1
    outputs_follow_inputs: bool = False
    input_names: tuple[str, ...] = ("input",)
    is_source: bool = False  # produces whole batches (readers, external sources, random generators)
    # an operator made of others on ``composed_devices`` (where it has no implementation of its
    # own): composed(schema, static, per_sample, add) returns the outputs, where add(name, inputs,
    # static) adds one operator (the video readers on the GPU: frames chosen on the CPU, decoded on
    # the GPU; readers.video_resize: the reader, then resize)
    composed: Callable | None = None
    composed_devices: tuple[str, ...] = ()
    # checks of a call's arguments taken together (a size given, allowed combinations), run where
    # the operator is called, for every device: check(static, per_sample_names) raises ArgError
    checks: tuple[Callable[[dict, frozenset], None], ...] = ()
    # per-sample arguments that may also be given as positional inputs after the data inputs
    # (DALI's fn.slice(data, anchor, shape)), in that order
    # an argument that, given (not None), makes the call return a list of outputs even of one (as
    # DALI's external_source with num_outputs)
    listed_outputs_arg: str | None = None
    argument_inputs: tuple[str, ...] = ()
    # when it runs on the GPU, CPU data inputs are moved there first (arithmetic mixing a GPU batch
    # with a CPU one); other operators refuse CPU inputs on the GPU
    moves_cpu_inputs: bool = False
    # other (fn name, ops class name) pairs of the same operator: DALI's names under
    # ``experimental`` of operators penstock keeps at the top level (and the other way round)
    also_named: tuple[tuple[str, str], ...] = ()
    # the names of the outputs, from the validated arguments, where the call returns them as a dict
    # (readers.tfrecord's features, as in DALI)
    output_names: Callable[[dict], tuple[str, ...]] | None = None
    all_args: dict[str, Arg] = field(init=False, repr=False)
    # the type of this operator's validated arguments (generated from ``args``)
    arguments: type = field(init=False, repr=False)

    def __post_init__(self):
        self.all_args = {}
        for arg in (*COMMON_ARGS, *self.args):
            self.all_args[arg.name] = arg
            for alias in arg.aliases:
                self.all_args[alias] = arg
        self.arguments = arguments_type(self.class_name, self.unique_args())

    def outputs_for(self, static_args: dict, num_inputs: int | None = None) -> int:
        if not callable(self.num_outputs):
            return self.num_outputs
        if self.outputs_follow_inputs:
            return self.num_outputs(static_args, self.num_inputs[0] if num_inputs is None else num_inputs)
        return self.num_outputs(static_args)

    def validate(self, kwargs: dict) -> tuple[dict, dict]:
        """Splits and checks a call's keyword arguments.

        Returns (static, per_sample): converted plain values for every argument (defaults filled
        in) and the DataNode inputs of per-sample arguments. Raises TypeError / ValueError naming
        the operator and the argument.
        """
        static: dict[str, Any] = {}
        per_sample: dict[str, Any] = {}
        for given_name, value in kwargs.items():
            arg = self.all_args.get(given_name)
            if arg is None:
                raise TypeError(f"{self.name}: unknown argument '{given_name}'"
                                f"{closest(given_name, list(self.all_args))}; "
                                f"it takes {', '.join(sorted(a.name for a in self.unique_args()))}")
            if arg.name in static or arg.name in per_sample:
                raise TypeError(f"{self.name}: argument '{arg.name}' given twice (as '{given_name}')")
            if _is_data_node(value):
                if not arg.per_sample:
                    raise TypeError(f"{self.name}: argument '{arg.name}' cannot be a per-sample input "
                                    f"(a DataNode); pass a plain value")
                per_sample[arg.name] = value
                continue
            if value is None:
                # as in DALI, None means 'not given' (the default applies), except where None is a
                # value of its own (nullable: max_pixels=None lifts the limit)
                if arg.nullable:
                    static[arg.name] = None
                continue
            try:
                static[arg.name] = arg.convert(value)
            except ArgError as error:
                error_type = TypeError if isinstance(error, TypeError) else ValueError
                raise error_type(f"{self.name}: argument '{arg.name}': {error}") from None
        for arg in self.unique_args():
            if arg.name in static or arg.name in per_sample:
                continue
            if arg.required:
                raise TypeError(f"{self.name}: missing required argument '{arg.name}'")
            static[arg.name] = arg.default
        return self.arguments(static), per_sample

    def check_call(self, static: dict, per_sample: dict) -> None:
        """Runs the schema's checks of the arguments taken together; raises TypeError / ValueError
        naming the operator."""
        names = frozenset(per_sample)
        static = static if isinstance(static, self.arguments) else self.arguments(static)
        for check in self.checks:
            try:
                check(static, names)
            except ArgError as error:
                error_type = TypeError if isinstance(error, TypeError) else ValueError
                raise error_type(f"{self.name}: {error}") from None

    def unique_args(self) -> list[Arg]:
        seen, result = set(), []
        for arg in self.all_args.values():
            if arg.name not in seen:
                seen.add(arg.name)
                result.append(arg)
        return result

    def docstring(self, devices: Sequence[str]) -> str:
        """The reference doc of the operator, as ``fn`` and ``ops`` show it."""
        lines = [self.doc.strip(), "", devices_line(devices), ""]
        if self.also_named:
            lines += [f"Also fn.{', fn.'.join(name for name, _ in self.also_named)}.", ""]
        lines.append("Arguments:")
        for arg in self.unique_args():
            default = "required" if arg.required else f"default {arg.default!r}"
            extra = ", per-sample input allowed" if arg.per_sample else ""
            alias = f" (also '{', '.join(arg.aliases)}')" if arg.aliases else ""
            lines.append(f"    {arg.name}{alias} ({arg.kind}, {default}{extra}): {arg.doc}")
        return "\n".join(lines)


def devices_line(devices: Sequence[str]) -> str:
    """What the reference says of an operator's devices (the devices it has an implementation for)."""
    needs = " (gpu and mixed need a CUDA GPU; mixed also nvImageCodec)" if set(devices) - {"cpu"} else ""
    return f"Devices: {', '.join(devices)}{needs}."
