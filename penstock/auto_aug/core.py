"""What the automatic augmentation policies are made of: ``augmentation`` (an image operation
with a magnitude range, turned into a per-sample parameter) and ``select`` (each sample goes
through the operation its index names), as in DALI's ``nvidia.dali.auto_aug.core``.

An augmentation is a function ``(data, parameter, **extras)`` written over ``fn`` operators.
Called as ``aug(data, magnitude_bin=..., num_magnitude_bins=..., **extras)``, its parameter is
``mag_to_param(magnitudes[bin] * sign)`` with ``magnitudes = linspace(*mag_range, num_bins)``
and the sign random per sample when ``randomly_negate`` is set. The bin and the sign may differ
per sample (batches of ints): every possible parameter is computed once in numpy, and each sample
picks its row of that table on the CPU.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Sequence

import numpy as np

from penstock import fn, types
from penstock.conditionals import if_expression
from penstock.graph import DataNode


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """One operation of a policy: ``function(data, parameter, **extras)`` and how its magnitude
    becomes the parameter."""

    function: Callable
    mag_range: tuple | None = None
    randomly_negate: bool = False
    mag_to_param: Callable | None = None
    name: str = ""
    kind: str | None = None  # the operation of penstock.operators.image.augment_step it is (None: the user's own)

    def augmentation(self, mag_range=None, randomly_negate=None, mag_to_param=None, name=None) -> "Augmentation":
        """A copy with some of its settings changed (DALI's ``aug.augmentation(...)``)."""
        return dataclasses.replace(
            self, mag_range=self.mag_range if mag_range is None else tuple(mag_range),
            randomly_negate=self.randomly_negate if randomly_negate is None else randomly_negate,
            mag_to_param=self.mag_to_param if mag_to_param is None else mag_to_param,
            name=self.name if name is None else name)

    @property
    def extras(self) -> set[str]:
        """The keyword arguments the function takes besides the data and the parameter."""
        return set(list(inspect.signature(self.function).parameters)[2:])

    def parameters(self, num_magnitude_bins: int) -> np.ndarray:
        """Every parameter the augmentation can get: row ``bin`` for the positive magnitudes, row
        ``num_magnitude_bins + bin`` for the negated ones."""
        if self.mag_range is None:
            return np.zeros((1,), np.float32)
        magnitudes = np.linspace(self.mag_range[0], self.mag_range[1], num_magnitude_bins)
        signed = np.concatenate([magnitudes, -magnitudes])
        convert = self.mag_to_param or (lambda magnitude: magnitude)
        return np.stack([np.asarray(convert(value)) for value in signed])

    def __call__(self, data, *, magnitude_bin=None, num_magnitude_bins=None, sign=None, **extras):
        """Applies the augmentation; ``magnitude_bin`` (an int or a batch of ints) and ``sign``
        (None, or a batch of 0 / 1 where 1 negates the magnitude) choose the parameter."""
        if self.mag_range is None:
            return self.function(data, None, **extras)
        if magnitude_bin is None or num_magnitude_bins is None:
            raise ValueError(f"augmentation {self.name}: give magnitude_bin and num_magnitude_bins")
        table = self.parameters(num_magnitude_bins)
        if not isinstance(magnitude_bin, DataNode) and (sign is None or not self.randomly_negate):
            return self.function(data, _constant_parameter(table[int(magnitude_bin)]), **extras)
        row = magnitude_bin
        if sign is not None and self.randomly_negate:
            row = sign * num_magnitude_bins + row
        return self.function(data, pick_row(table, row), **extras)


def _constant_parameter(value: np.ndarray):
    return value.item() if value.ndim == 0 else value


def pick_row(table: np.ndarray, index) -> DataNode:
    """Each sample's row ``index`` of a numpy ``table`` (computed on the CPU, in the table's dtype)."""
    table = np.asarray(table)
    rows = len(table)
    one_hot = fn.one_hot(fn.cast(index, dtype=types.INT32), num_classes=rows)
    weights = fn.reshape(one_hot, shape=(rows,) + (1,) * (table.ndim - 1)) if table.ndim > 1 else one_hot
    values = fn.reductions.sum(weights * table.astype(np.float32), axes=(0,))
    return fn.cast(values, dtype=table.dtype) if table.dtype != np.float32 else values


def augmentation(function=None, *, mag_range=None, randomly_negate=False, mag_to_param=None, name=None,
                 param_device=None, kind=None):
    """Decorator: makes ``function(data, parameter, **extras)`` an Augmentation (``param_device``
    is accepted from DALI programs: parameters are computed on the CPU)."""
    def wrap(function):
        return Augmentation(function, tuple(mag_range) if mag_range is not None else None, randomly_negate,
                            mag_to_param, name or function.__name__, kind)
    return wrap(function) if function is not None else wrap


def seeded(seed) -> dict:
    """The ``seed`` argument of a random operator, when one is given."""
    return {} if seed is None else {"seed": seed}


def signed_bin(magnitude_bin, random_sign=None, seed=None, shape=None):
    """DALI's ``signed_bin``: the bin and a random sign per sample, as (bin, sign) for augmentations."""
    if random_sign is None:
        random_sign = fn.random.coin_flip(shape=shape or (), dtype=types.INT32, **seeded(seed))
    return magnitude_bin, random_sign


def check_extras(augmentations: Sequence[Augmentation], extras: dict, where: str) -> None:
    known = set().union(*(aug.extras for aug in augmentations)) if augmentations else set()
    unused = sorted(set(extras) - known)
    if unused:
        raise TypeError(f"{where}: no augmentation takes {', '.join(unused)}")


def select(functions: Sequence[Callable], op_index, data, where: str):
    """Each sample through the function ``op_index`` names (a batch of ints; an int applies one
    function to all): the batch is split by halves of the list, so with N functions a sample is
    routed through log2(N) splits, and each function sees only its samples."""
    if not isinstance(op_index, DataNode):
        return functions[int(op_index)](data)
    return _select_range(list(functions), 0, op_index, data, where)


def _select_range(functions: list, first: int, op_index, data, where: str):
    if len(functions) == 1:
        return functions[0](data)
    half = len(functions) // 2
    return if_expression(op_index < first + half,
                         lambda: _select_range(functions[:half], first, op_index, data, where),
                         lambda: _select_range(functions[half:], first + half, op_index, data, where), where)


def applied(aug: Augmentation, **call_args) -> Callable:
    """``data -> aug(data, ...)`` with the call's arguments that ``aug`` takes (the magnitude's
    bin, bins and sign, and the extras its function names)."""
    extras = {name: value for name, value in call_args.items() if name in aug.extras}
    chooses = {name: call_args[name] for name in ("magnitude_bin", "num_magnitude_bins", "sign") if name in call_args}
    return lambda data: aug(data, **chooses, **extras)


def with_probability(function: Callable, probability: float, seed=None) -> Callable:
    """``data -> function(data)`` on a random share ``probability`` of the samples, the others as they are."""
    if probability >= 1.0:
        return function
    if probability <= 0.0:
        return lambda data: data

    def maybe(data):
        chosen = fn.random.coin_flip(probability=probability, dtype=types.BOOL, **seeded(seed))
        return if_expression(chosen, lambda: function(data), lambda: data, "an augmentation's probability")
    return maybe


# ---- a whole step in one operator ----------------------------------------------------------------
def fusable(augmentations: Sequence[Augmentation]) -> bool:
    """Whether every augmentation is one of penstock's own (a kind of augment_step)."""
    return all(aug.kind is not None for aug in augmentations)


def step_table(aug: Augmentation, num_magnitude_bins: int, bins: Sequence[int] | None = None) -> np.ndarray:
    """The parameter rows augment_step reads for ``aug``: row ``bin`` (or ``position`` of ``bins``)
    for the magnitude, ``count + that`` for the negated one (the same again where the augmentation
    is not negated), each padded to augment_step.PARAMETERS values."""
    from penstock.operators.image.augment_step import PARAMETERS
    if aug.mag_range is None:
        return np.zeros((2 * (len(bins) if bins is not None else num_magnitude_bins), PARAMETERS))
    signed = aug.parameters(num_magnitude_bins).reshape(2 * num_magnitude_bins, -1)
    if not aug.randomly_negate:
        signed[num_magnitude_bins:] = signed[:num_magnitude_bins]
    if bins is not None:
        signed = np.concatenate([signed[list(bins)], signed[[num_magnitude_bins + b for b in bins]]])
    rows = np.zeros((len(signed), PARAMETERS))
    rows[:, :signed.shape[1]] = signed
    return rows


def apply_step(data, augmentations: Sequence[Augmentation], tables: Sequence[np.ndarray], op_index, row,
               fill_value=128, interp_type=None):
    """Each sample through ``augmentations[op_index]`` with row ``row`` of its table: one
    augment_step operator for the whole batch."""
    from penstock import registry
    from penstock.graph import invoke
    arguments = {"kinds": [aug.kind for aug in augmentations], "parameters": [table.tolist() for table in tables],
                 "op_index": op_index, "row": row, "fill_value": fill_value,
                 "interp_type": interp_type or types.INTERP_LINEAR}
    return invoke(registry.get_schema("_augment_step"), (data,), arguments)
