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

Inputs and arguments may also be ``Node``s (the output of another operator: a reader's files, a
decoder's images) and ``Later``s (values made when the case runs: files written to the tier's
temporary folder, a fresh iterator for each library). A case may run its pipeline several times
(``iterations``: readers' epochs, shards and padding); the outputs of the runs are compared as one
batch.

``Runner`` runs many cases of one batch size in one pipeline per library: building and starting a
pipeline costs far more than the small operators do. A call that fails at the call leaves the others
running; when a combined pipeline fails to build or run, its cases are split in halves and run
again, down to the one case that fails, so that an error of one case hides no other.
"""
from __future__ import annotations

import importlib
import re
import warnings
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
class Later:
    """A value made when a case runs, anew for each library: files in the tier's temporary folder
    (which exists only while tests run), an iterator a run uses up."""

    make: Callable


@dataclass(frozen=True)
class Node:
    """An input or argument that is the output of another operator (``output``: which of its
    outputs, for operators with several), e.g. a reader's files for a decoder."""

    op: str
    inputs: tuple = ()
    args: dict = field(default_factory=dict)
    output: int | None = None


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    inputs: tuple = ()
    args: dict = field(default_factory=dict)
    compare: Any = Exact()
    batch_size: int | None = None  # only where there is no input to take it from
    refused: bool = False  # DALI itself refuses the call (checked, so that the case stays meaningful)
    iterations: int = 1  # runs of the pipeline, their outputs compared as one batch

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

    def exercised_per_sample(self) -> set[str]:
        """The arguments given one value a sample (as DataNodes)."""
        return {name for name, value in self.args.items() if isinstance(value, (PerSample, Data, Node))}


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
    iterations: int = 1

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
        return Case(case_id, self.op, tuple(inputs), dict(args), self.compare, self.batch_size, refused,
                    self.iterations)


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
    if isinstance(value, (Later, Node)) or callable(value):
        raise ValueError(f"{value!r} has no short label: give the grid's values as a dict label -> value")
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


def _value(value, fn, types):
    """An input or argument as the pipeline takes it: data fed by external_source, another
    operator's output, a value made now, or the value itself (types.* names resolved)."""
    if isinstance(value, Later):
        return _value(value.make(), fn, types)
    if isinstance(value, PerSample):
        return _feed(fn, value.values)
    if isinstance(value, Data):
        return _feed(fn, value.samples, value.layout)
    if isinstance(value, Node):
        result = _call(fn, types, value.op, value.inputs, value.args)
        return result if value.output is None else result[value.output]
    return resolve(value, types)


def _call(fn, types, op, inputs, args):
    return _function(fn, op)(*(_value(data, fn, types) for data in inputs),
                             **{name: _value(value, fn, types) for name, value in args.items()})


def _pipeline_outputs(result) -> tuple:
    return tuple(result) if isinstance(result, (list, tuple)) else (result,)


def run_together(cases, library_name: str) -> dict[str, Outcome]:
    """Outcomes (by case id) of cases of one batch size and number of iterations, run in one
    pipeline; a failed build or run is retried in halves."""
    lib, fn, types = _library(library_name)
    outcomes, placed = {}, []  # placed: (case, first output, number of outputs)

    # penstock's worker processes (its default) give the same results as its threads, and forking
    # them for each pipeline would take most of the tier's time
    own = {"worker_processes": False} if library_name.startswith("penstock") else {}

    @lib.pipeline_def(batch_size=cases[0].size, num_threads=1, device_id=None, seed=SEED,
                      prefetch_queue_depth=1, **own)
    def pipeline():
        outputs = []
        for case in cases:
            try:
                nodes = _pipeline_outputs(_call(fn, types, case.op, case.inputs, case.args))
            except Exception as error:  # refused at the call: the other cases still run
                outcomes[case.id] = Outcome(error=error)
                continue
            placed.append((case, len(outputs), len(nodes)))
            outputs.extend(nodes)
        return tuple(outputs)

    pipe = None
    try:
        # deprecated operators (readers.sequence, fast_resize_crop_mirror) still run: a warning of
        # penstock's must not fail them where warnings are errors (DALI's are printed, never raised)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pipe = pipeline()
            pipe.build()
            runs = [pipe.run() for _ in range(cases[0].iterations)]
    except Exception as error:  # any refusal counts: the type is each library's own
        rest = [case for case, _, _ in placed]  # none when every call was refused
        failed = [case for case in rest if case.op == _failed_operator(error)]
        if not rest:
            return outcomes
        if len(rest) == 1 or len(failed) == 1:
            outcomes[(failed or rest)[0].id] = Outcome(error=error)
            rest = [case for case in rest if case not in (failed or rest)]
            return {**outcomes, **(run_together(rest, library_name) if rest else {})}
        half = len(rest) // 2
        return {**outcomes, **run_together(rest[:half], library_name), **run_together(rest[half:], library_name)}
    finally:
        del pipe
    for case, first, count in placed:
        outcomes[case.id] = Outcome([
            ([np.array(batch.at(i)) for batch in (run[index] for run in runs) for i in range(len(batch))],
             str(runs[-1][index].layout() or "")) for index in range(first, first + count)])
    return outcomes


def _failed_operator(error) -> str | None:
    """The fn path of the operator an error of a pipeline's build or run names: DALI's "Error in
    CPU operator `nvidia.dali.fn.resize`", penstock's "resize failed: ..." or "resize: ..."."""
    text = str(error)
    for pattern in (r"operator `nvidia\.dali\.fn\.([\w.]+)`", r"^([\w.]+)(?: failed|:)"):
        found = re.search(pattern, text)
        if found:
            return found.group(1)
    return None


def run(case: Case, library_name: str) -> Outcome:
    return run_together([case], library_name)[case.id]


class Runner:
    """Runs the cases pytest selected in groups (one pipeline a group and library) when the first
    case of a group is checked, and checks each case against its group's outcomes."""

    GROUP = 48  # cases a pipeline: larger groups gain little and make a failure's halving longer
    # a group holds one case of each operator, so that the operator an error names is its case

    def __init__(self, cases):
        self.cases = list(cases)
        self.selected = None  # case ids pytest selected (all cases until told)
        self.groups = None  # case id -> its group, for groups not run yet
        self.outcomes = {}  # case id -> (DALI's outcome, penstock's outcome), until checked

    def select(self, ids):
        self.selected, self.groups = set(ids), None

    def _make_groups(self):
        self.groups, keyed = {}, {}
        for case in self.cases:
            if self.selected is not None and case.id not in self.selected:
                continue
            # alone: a case one library is known to refuse (its group would fail and run again), a
            # random case (its draws depend on the operators a pipeline holds, and must not change
            # with the cases pytest selects), and get_property (penstock keeps one source_info per
            # batch, a reader's: other readers in the pipeline would change it; docs/dali.md)
            alone = case.refused or "refuses" in KNOWN_DIFFERENCES.get(case.id, "") or \
                isinstance(case.compare, Stats) or case.op == "get_property"
            groups = keyed.setdefault((case.size, case.iterations, case.id if alone else None), [])
            group = next((group for group in groups
                          if len(group) < self.GROUP and all(each.op != case.op for each in group)), None)
            if group is None:
                group = []
                groups.append(group)
            group.append(case)
            self.groups[case.id] = group

    def check(self, case: Case) -> None:
        if case.id not in self.outcomes:
            if self.groups is None:
                self._make_groups()
            group = self.groups.get(case.id, [case])
            results = [run_together(group, name) for name in LIBRARIES]
            for each in group:
                self.groups.pop(each.id, None)
                self.outcomes[each.id] = tuple(result[each.id] for result in results)
        compare(case, *self.outcomes.pop(case.id))


def check(case: Case) -> None:
    compare(case, run(case, LIBRARIES[0]), run(case, LIBRARIES[1]))


def compare(case: Case, dali: Outcome, penstock: Outcome) -> None:
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
