"""Conditionals on the GPU stage: a branch of a conditional is a smaller batch, the samples whose
predicate chose it, kept with their positions in the whole batch (None: every sample). CPU values
reach the stage with MISSING where a sample is on the other branch (executor.samples)."""
from __future__ import annotations

from penstock.columns import BatchColumn
from penstock.contract import MISSING
from penstock.draws import of_samples

Positions = "tuple[int, ...] | None"


def positions_of(column: list) -> tuple | None:
    """The positions of the samples a CPU value holds (None: all of them)."""
    if isinstance(column, BatchColumn):
        return column.positions_without(MISSING)
    if not any(value is MISSING for value in column):
        return None
    return tuple(index for index, value in enumerate(column) if value is not MISSING)


def present(column: list, positions) -> list:
    """A CPU value's samples at ``positions``."""
    return column if positions is None else [column[index] for index in positions]


def take(draws, positions):
    """An operator's random draws (element i for sample i) of the samples at ``positions``."""
    if draws is None or positions is None:
        return draws
    return of_samples(draws, list(positions))


def whole(positions, size: int):
    """``positions`` as they are stored: None when they are every sample of the batch."""
    return None if positions is not None and len(positions) == size else positions


def split(samples: list, predicates: list[bool], positions, size: int) -> tuple:
    """(true samples, their positions, false samples, their positions) of a branch's samples."""
    base = range(size) if positions is None else positions
    chosen = {True: ([], []), False: ([], [])}
    for sample, predicate, position in zip(samples, predicates, base):
        chosen[predicate][0].append(sample)
        chosen[predicate][1].append(position)
    return (chosen[True][0], whole(tuple(chosen[True][1]), size),
            chosen[False][0], whole(tuple(chosen[False][1]), size))


def merge(true_samples: list, true_positions, false_samples: list, positions, size: int) -> list:
    """The samples of both branches in the order of ``positions`` (those of the enclosing branch)."""
    taken = set(range(size) if true_positions is None else true_positions)
    true_samples, false_samples = iter(true_samples), iter(false_samples)
    return [next(true_samples) if position in taken else next(false_samples)
            for position in (range(size) if positions is None else positions)]
