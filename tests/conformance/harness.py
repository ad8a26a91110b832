"""Runs one operator call under NVIDIA DALI and under penstock.compat.dali and compares the results.

A ``Case`` is one call: the operator's fn path, its data inputs (ragged batches of numpy samples
with a layout), its keyword arguments and its per-sample arguments (one value a sample, fed by
``external_source`` and passed as DataNodes). Each library builds the same pipeline (CPU only,
batch size = number of samples, one thread, one seed) and runs it once; then every output must
agree in dtype, per-sample shape, layout and values (exactly, within a stated tolerance, or, for
random operators, in its statistics). When one library refuses the call (at the call, the build or
the run), the other must refuse it too.

Enum and dtype arguments are written as strings, "types.FLOAT" or "types.INTERP_CUBIC", and
resolved against each library's own ``types`` module; a list or tuple of them is resolved item by
item.

A ``Spec`` expands into cases: its base call, then one case per value of each argument of its grid,
with readable ids ("resize[interp_type=INTERP_CUBIC]").
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

from conformance.known_differences import KNOWN_DIFFERENCES

LIBRARIES = ("nvidia.dali", "penstock.compat.dali")
SEED = 1234


@dataclass(frozen=True)
class Data:
    """One data input: a batch of numpy samples (shapes may differ) and its layout."""

    samples: tuple
    layout: str | None = None

    def __init__(self, samples, layout=None):
        object.__setattr__(self, "samples", tuple(np.asarray(sample) for sample in samples))
        object.__setattr__(self, "layout", layout)


@dataclass(frozen=True)
class PerSample:
    """A per-sample argument: one numpy value for each sample of the batch."""

    values: tuple

    def __init__(self, *values):
        object.__setattr__(self, "values", tuple(np.asarray(value) for value in values))


@dataclass(frozen=True)
class Exact:
    """Values equal (NaNs in the same places)."""

    def check(self, name, dali, penstock):
        Close().check(name, dali, penstock)


@dataclass(frozen=True)
class Close:
    """Values within atol + rtol * |DALI's value| of DALI's (NaNs in the same places)."""

    atol: float = 0.0
    rtol: float = 0.0

    def check(self, name, dali, penstock):
        for index, (expected, actual) in enumerate(zip(dali, penstock)):
            expected, actual = expected.astype(np.float64), actual.astype(np.float64)
            bad = ~np.isclose(actual, expected, atol=self.atol, rtol=self.rtol, equal_nan=True)
            if bad.any():
                worst = np.nanmax(np.abs(actual - expected)[bad]) if not np.isnan(actual[bad]).all() else np.nan
                raise AssertionError(
                    f"{name}: values differ in sample {index} at {bad.sum()} of {bad.size} elements "
                    f"(largest difference {worst:.4g}; tolerance atol={self.atol}, rtol={self.rtol})")


@dataclass(frozen=True)
class Stats:
    """Random outputs: both libraries' values within [low, high], their means and standard
    deviations (over the whole batch) within ``mean_tol`` / ``std_tol`` of each other, their smallest
    and largest values within ``range_tol`` of each other, and, when
    ``independent``, not every sample alike (samples are drawn independently). ``shapes=False``
    compares only the number of dimensions of each sample (random crops)."""

    low: float = -np.inf
    high: float = np.inf
    mean_tol: float = np.inf
    std_tol: float = np.inf
    range_tol: float = np.inf
    independent: bool = True
    shapes: bool = True

    def check(self, name, dali, penstock):
        for library, samples in (("DALI", dali), ("penstock", penstock)):
            values = np.concatenate([np.asarray(sample, np.float64).ravel() for sample in samples])
            if values.size:
                assert values.min() >= self.low and values.max() <= self.high, \
                    f"{name}: {library}'s values span [{values.min()}, {values.max()}], " \
                    f"outside [{self.low}, {self.high}]"
        expected = np.concatenate([np.asarray(s, np.float64).ravel() for s in dali])
        actual = np.concatenate([np.asarray(s, np.float64).ravel() for s in penstock])
        if expected.size and actual.size:
            assert abs(actual.mean() - expected.mean()) <= self.mean_tol, \
                f"{name}: mean {actual.mean()} (DALI {expected.mean()})"
            assert abs(actual.std() - expected.std()) <= self.std_tol, \
                f"{name}: std {actual.std()} (DALI {expected.std()})"
            assert abs(actual.min() - expected.min()) <= self.range_tol and \
                abs(actual.max() - expected.max()) <= self.range_tol, \
                f"{name}: values span [{actual.min()}, {actual.max()}] (DALI [{expected.min()}, {expected.max()}])"
        if self.independent and len(dali) > 1 and not _all_alike(dali):
            assert not _all_alike(penstock), f"{name}: every sample is the same (DALI's differ)"


def _all_alike(samples) -> bool:
    first = np.asarray(samples[0])
    return all(np.asarray(s).shape == first.shape and np.array_equal(s, first) for s in samples[1:])


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    inputs: tuple = ()
    args: dict = field(default_factory=dict)
    compare: Any = Exact()
    batch_size: int | None = None  # only where there is no input to take it from
    refused: bool = False  # DALI itself refuses the call (checked, so that the case stays meaningful)

    @property
    def size(self) -> int:
        for value in list(self.inputs) + list(self.args.values()):
            if isinstance(value, Data):
                return len(value.samples)
            if isinstance(value, PerSample):
                return len(value.values)
        return self.batch_size or 3

    def exercised(self) -> set[str]:
        return set(self.args)


@dataclass
class Spec:
    """A base call and a grid: for each argument (or "@input", the data inputs), the values to try
    one at a time on top of the base call. Values of the "@input" grid and of ``labels`` are dicts
    label -> value; other grid values are labelled by their repr."""

    op: str
    inputs: tuple = ()
    args: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    compare: Any = Exact()
    batch_size: int | None = None
    name: str | None = None  # the id's prefix, where one operator has several specs
    base: bool = True  # whether the base call is a case of its own
    refused: tuple = ()  # labels of grid values DALI refuses

    def cases(self) -> list[Case]:
        prefix = self.name or self.op
        made = []
        if self.base:
            made.append(self._case(f"{prefix}[base]", self.inputs, self.args))
        for argument, values in self.grid.items():
            labelled = values.items() if isinstance(values, dict) else \
                ((label(value), value) for value in values)
            for text, value in labelled:
                case_id = f"{prefix}[{argument.lstrip('@')}={text}]"
                if argument == "@input":
                    inputs, args = value, self.args
                else:
                    inputs, args = self.inputs, {**self.args, argument: value}
                    if value is OMIT:
                        args.pop(argument)
                made.append(self._case(case_id, inputs, args, refused=text in self.refused))
        return made

    def _case(self, case_id, inputs, args, refused=False):
        return Case(case_id, self.op, tuple(inputs), dict(args), self.compare, self.batch_size, refused)


OMIT = type("Omitted", (), {"__repr__": lambda self: "omitted"})()


def label(value) -> str:
    """A short readable label of an argument value, for test ids."""
    if isinstance(value, str):
        return value.split(".", 1)[1] if value.startswith("types.") else value
    if isinstance(value, PerSample):
        return "per_sample"
    if isinstance(value, (list, tuple)):
        return ",".join(label(item) for item in value)
    if isinstance(value, np.ndarray):
        return "array"
    return repr(value)


def expand(specs) -> list[Case]:
    cases = [case for spec in specs for case in spec.cases()]
    seen = set()
    for case in cases:
        assert case.id not in seen, f"two cases are called {case.id}"
        seen.add(case.id)
    return cases


def params(cases):
    """pytest parameters, each case marked xfail where KNOWN_DIFFERENCES lists it."""
    marked = []
    for case in cases:
        reason = KNOWN_DIFFERENCES.get(case.id)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        marked.append(pytest.param(case, id=case.id, marks=marks))
    return marked


# ---- running a case under one library ------------------------------------------------------------
def _library(name):
    return (importlib.import_module(name), importlib.import_module(name + ".fn"),
            importlib.import_module(name + ".types"))


def resolve(value, types):
    """Strings naming a member of ``types`` ("types.FLOAT") become that library's member."""
    if isinstance(value, str) and value.startswith("types."):
        return getattr(types, value[len("types."):])
    if isinstance(value, (list, tuple)):
        return type(value)(resolve(item, types) for item in value)
    return value


def _function(fn, path: str) -> Callable:
    target = fn
    for part in path.split("."):
        target = getattr(target, part)
    return target


def _feed(fn, samples, layout=None):
    batch = list(samples)
    kwargs = {"layout": layout} if layout else {}
    return fn.external_source(source=lambda: batch, batch=True, **kwargs)


@dataclass
class Outcome:
    outputs: list | None = None  # per output: (samples, layout)
    error: BaseException | None = None


def run(case: Case, library_name: str) -> Outcome:
    lib, fn, types = _library(library_name)

    # penstock's worker processes (its default) give the same results as its threads, and forking
    # them for each of a thousand one-batch pipelines would take most of the tier's time
    own = {"worker_processes": False} if library_name.startswith("penstock") else {}

    @lib.pipeline_def(batch_size=case.size, num_threads=1, device_id=None, seed=SEED,
                      prefetch_queue_depth=1, **own)
    def pipeline():
        inputs = [_feed(fn, data.samples, data.layout) for data in case.inputs]
        kwargs = {}
        for name, value in case.args.items():
            if isinstance(value, PerSample):
                kwargs[name] = _feed(fn, value.values)
            elif isinstance(value, Data):
                kwargs[name] = _feed(fn, value.samples, value.layout)
            else:
                kwargs[name] = resolve(value, types)
        result = _function(fn, case.op)(*inputs, **kwargs)
        return tuple(result) if isinstance(result, (list, tuple)) else result

    pipe = None
    try:
        pipe = pipeline()
        pipe.build()
        outputs = pipe.run()
        return Outcome([([np.array(batch.at(i)) for i in range(len(batch))], str(batch.layout() or ""))
                        for batch in outputs])
    except Exception as error:  # any refusal counts: the type is each library's own
        return Outcome(error=error)
    finally:
        del pipe


def check(case: Case) -> None:
    dali, penstock = (run(case, name) for name in LIBRARIES)
    if case.refused:
        assert dali.error is not None, f"{case.id}: DALI accepts the call the case says it refuses"
    if dali.error is not None or penstock.error is not None:
        assert dali.error is not None, f"{case.id}: DALI accepts, penstock refuses: {penstock.error!r}"
        assert penstock.error is not None, \
            f"{case.id}: DALI refuses ({_first_line(dali.error)}), penstock accepts"
        return
    assert len(penstock.outputs) == len(dali.outputs), \
        f"{case.id}: {len(penstock.outputs)} outputs, DALI {len(dali.outputs)}"
    for index, ((expected, expected_layout), (actual, actual_layout)) in \
            enumerate(zip(dali.outputs, penstock.outputs)):
        name = f"{case.id} output {index}"
        assert len(actual) == len(expected), f"{name}: {len(actual)} samples, DALI {len(expected)}"
        assert [a.dtype for a in actual] == [e.dtype for e in expected], \
            f"{name}: dtype {actual[0].dtype if actual else None}, DALI {expected[0].dtype if expected else None}"
        if getattr(case.compare, "shapes", True):
            assert [a.shape for a in actual] == [e.shape for e in expected], \
                f"{name}: shapes {[a.shape for a in actual]}, DALI {[e.shape for e in expected]}"
        else:
            assert [a.ndim for a in actual] == [e.ndim for e in expected], f"{name}: ndim differs"
        assert actual_layout == expected_layout, f"{name}: layout {actual_layout!r}, DALI {expected_layout!r}"
        case.compare.check(name, expected, actual)


def _first_line(error) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"
