"""Arithmetic and penstock.math against DALI itself, over the grid of types DALI's arithmetic takes
(bool, int8..int64, uint8..uint64, float32, float64): every Python operator and every math function,
of two data nodes and of a node with constants (Python int, float, bool, types.Constant of each
type), as one pipeline per operation with an output per combination. Output types, shapes and
values must be DALI's: integers and bools exactly, floats to a few units in the last place (numpy's
and the C library's float functions round differently). Refusals are checked case by case, since
DALI refuses when the pipeline runs and a refusal ends its pipeline."""
import itertools

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

import nvidia.dali.math as dali_math  # noqa: E402
from nvidia.dali import fn as dali_fn, pipeline_def as dali_pipeline_def, types as dali_types  # noqa: E402

import penstock  # noqa: E402
from penstock.compat.dali import fn, math, pipeline_def, types  # noqa: E402

TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float32,
         np.float64]
LIBRARIES = {"dali": (dali_pipeline_def, dali_fn, dali_types, dali_math),
             "penstock": (pipeline_def, fn, types, math)}
OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
             "//": lambda a, b: a // b, "%": lambda a, b: a % b, "**": lambda a, b: a ** b,
             "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
             "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
             "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b}
UNARY = ["sqrt", "rsqrt", "cbrt", "exp", "log", "log2", "log10", "abs", "fabs", "floor", "ceil", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"]
BINARY = ["min", "max", "pow", "fpow", "atan2"]


def values(dtype, shuffled=False, divisor=False) -> np.ndarray:
    """14 values of the type: its extremes, signs, zero, small numbers; NaN and infinity for floats.
    A divisor has no zero; extremes are kept off the dividends' side where -1 could meet the lowest
    integer (DALI's process dies of that division)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        array = np.array([True, False] * 7)
    elif dtype.kind == "f":
        array = np.array([-7.5, 7.5, 0.5, -0.5, 2.0, 3.0, 0.0, -0.0, 100.25, np.nan, -3.0, 1.0, 5.5, np.inf], dtype)
    else:
        info = np.iinfo(dtype)
        wanted = [info.min + 1, info.max, -7, 7, -1, 0, 1, 2, 3, -2, 100, -100, 5, -5] if dtype.kind == "i" else \
            [0, info.max, 7, 1, 2, 3, info.max - 1, 100, 200, 5, 9, 4, 6, 250]
        array = np.array([int(np.clip(v, info.min, info.max)) for v in wanted], dtype=object).astype(dtype)
    if divisor:
        array = np.where(array == 0, np.ones((), dtype), array).astype(dtype)
    return array[np.random.default_rng(3).permutation(len(array))] if shuffled else array


def run(library: str, build, feeds: list) -> list[np.ndarray]:
    """``build(types, math, *nodes)``'s outputs (one sample each) in the library's pipeline."""
    define, functions, constants, math_module = LIBRARIES[library]

    @define(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def pipe():
        nodes = [functions.external_source(source=(lambda feed: lambda: [feed])(feed), batch=True) for feed in feeds]
        outputs = build(constants, math_module, *nodes)
        return tuple(outputs) if isinstance(outputs, (list, tuple)) else outputs
    pipeline = pipe()
    pipeline.build()
    outputs = pipeline.run()
    return [np.array(output[0]) for output in outputs]


def refuses(library: str, build, feeds: list) -> bool:
    try:
        run(library, build, feeds)
    except (RuntimeError, TypeError, ValueError, OverflowError, ZeroDivisionError, penstock.PipelineError):
        return True
    return False


def accepted(op: str, types_: tuple) -> bool:
    """Whether DALI takes the operand types (its refusals are checked in the tests below)."""
    kinds = [np.dtype(t).kind for t in types_]
    if op in ("&", "|", "^") and "f" in kinds:
        return False
    return op in ("*", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^") or kinds != ["b"] * len(kinds)


def assert_same(dali_outputs: list, penstock_outputs: list, labels: list) -> None:
    for expected, got, label in zip(dali_outputs, penstock_outputs, labels, strict=True):
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape), label
        if expected.dtype.kind == "f":
            tolerance = 1e-12 if expected.dtype == np.float64 else 2e-6
            np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance, err_msg=label)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=label)


def compare(build_one, combinations: list, feeds_of) -> None:
    """One pipeline per library: an output per combination, ``build_one(types, math, combination,
    nodes)``, from one input per type of ``feeds_of``."""
    feeds = feeds_of()

    def build(constants, math_module, *nodes):
        by_key = dict(zip(feeds, nodes))
        return [build_one(constants, math_module, combination, by_key) for combination in combinations]
    dali_outputs = run("dali", build, list(feeds.values()))
    penstock_outputs = run("penstock", build, list(feeds.values()))
    assert_same(dali_outputs, penstock_outputs, [str(combination) for combination in combinations])


def _two_node_feeds(divisor: bool):
    feeds = {("left", np.dtype(t).name): values(t) for t in TYPES}
    feeds.update({("right", np.dtype(t).name): values(t, shuffled=True, divisor=divisor) for t in TYPES})
    return feeds


@pytest.mark.parametrize("symbol", list(OPERATORS))
def test_operators_of_two_nodes_as_dali_over_every_type_pair(symbol):
    operator = OPERATORS[symbol]
    pairs = [(np.dtype(a).name, np.dtype(b).name) for a, b in itertools.product(TYPES, TYPES) if accepted(symbol, (a, b))]
    compare(lambda c, m, pair, nodes: operator(nodes[("left", pair[0])], nodes[("right", pair[1])]), pairs,
            lambda: _two_node_feeds(divisor=symbol in ("//", "%")))


CONSTANTS = {"int": lambda t: 3, "negative int": lambda t: -2, "float": lambda t: 2.5, "bool": lambda t: True,
             **{f"Constant {np.dtype(d).name}": (lambda d: lambda t: t.Constant(
                 True if np.dtype(d).kind == "b" else 3, getattr(t, {"bool": "BOOL", "float32": "FLOAT"}.get(
                     np.dtype(d).name, np.dtype(d).name.upper()))))(d)
                for d in (np.bool_, np.int8, np.uint16, np.int64, np.uint64, np.float64)}}


@pytest.mark.parametrize("symbol", list(OPERATORS))
def test_operators_with_constants_on_either_side_as_dali(symbol):
    operator = OPERATORS[symbol]
    constant_types = {"int": np.int32, "negative int": np.int32, "float": np.float32, "bool": np.bool_,
                      **{f"Constant {np.dtype(d).name}": d for d in TYPES}}  # those of CONSTANTS among them
    # DALI compares a float with a negative int constant as if the float were unsigned (-7.5 < -2 is
    # False there); penstock compares values
    cases = [(np.dtype(t).name, name, first) for t in TYPES for name in CONSTANTS for first in (False, True)
             if accepted(symbol, (t, constant_types[name]))
             and not (symbol in ("<", "<=", ">", ">=") and name == "negative int" and np.dtype(t).kind == "f")]

    def build_one(constants, math_module, case, nodes):
        name, constant, first = case[0], CONSTANTS[case[1]](constants), case[2]
        node = nodes[("divisor" if first else "value", name)]
        return operator(constant, node) if first else operator(node, constant)
    compare(build_one, cases, lambda: {**{("value", np.dtype(t).name): values(t) for t in TYPES},
                                      **{("divisor", np.dtype(t).name): values(t, divisor=symbol in ("//", "%"))
                                         for t in TYPES}})


def test_math_functions_of_one_node_as_dali_over_every_type():
    cases = [(name, np.dtype(t).name) for name in UNARY for t in TYPES if accepted(name, (t,)) and name != "rsqrt"]
    cases += [("neg", np.dtype(t).name) for t in TYPES if accepted("neg", (t,))]
    compare(lambda c, m, case, nodes: -nodes[case[1]] if case[0] == "neg" else getattr(m, case[0])(nodes[case[1]]),
            cases, lambda: {np.dtype(t).name: values(t) for t in TYPES})
    # rsqrt apart: DALI's CPU gives NaN for 0 and infinity, penstock IEEE's inf and 0 (as DALI's GPU)
    positive = {np.dtype(t).name: values(t)[(values(t) > 0) & np.isfinite(values(t))] for t in TYPES[1:]}
    compare(lambda c, m, name, nodes: m.rsqrt(nodes[name]), list(positive), lambda: positive)


@pytest.mark.parametrize("name", BINARY)
def test_math_functions_of_two_nodes_as_dali_over_every_type_pair(name):
    pairs = [(np.dtype(a).name, np.dtype(b).name) for a, b in itertools.product(TYPES, TYPES) if accepted(name, (a, b))]
    compare(lambda c, m, pair, nodes: getattr(m, name)(nodes[("left", pair[0])], nodes[("right", pair[1])]), pairs,
            lambda: _two_node_feeds(divisor=False))


def test_clamp_as_dali_with_constant_and_node_bounds_in_either_order():
    bounds = [(0, 5), (5, 1), (-2.5, 3.5), (True, 2), (2, 3.0)]
    cases = [(np.dtype(t).name, lo, hi) for t in TYPES for lo, hi in bounds]
    compare(lambda c, m, case, nodes: m.clamp(nodes[case[0]], case[1], case[2]), cases,
            lambda: {np.dtype(t).name: values(t) for t in TYPES})
    triples = [(np.dtype(v).name, np.dtype(lo).name, np.dtype(hi).name) for v in TYPES
               for lo, hi in [(np.int8, np.uint8), (np.float32, np.int64), (np.uint16, np.float64), (np.bool_, np.int32)]]
    compare(lambda c, m, case, nodes: m.clamp(nodes[("v", case[0])], nodes[("lo", case[1])], nodes[("hi", case[2])]),
            triples, lambda: {**{("v", np.dtype(t).name): values(t) for t in TYPES},
                              **{("lo", np.dtype(t).name): values(t, shuffled=True) for t in TYPES},
                              **{("hi", np.dtype(t).name): values(t)[::-1].copy() for t in TYPES}})


REFUSED = {
    "bool + bool": (lambda t, m, a: a + a, [np.array([True, False])]),
    "bool - bool": (lambda t, m, a: a - a, [np.array([True, False])]),
    "bool / bool": (lambda t, m, a: a / a, [np.array([True, False])]),
    "bool // bool": (lambda t, m, a: a // a, [np.array([True, True])]),
    "bool ** bool": (lambda t, m, a: a ** a, [np.array([True, False])]),
    "-bool": (lambda t, m, a: -a, [np.array([True, False])]),
    "bool + True": (lambda t, m, a: a + True, [np.array([True, False])]),
    "sqrt(bool)": (lambda t, m, a: m.sqrt(a), [np.array([True, False])]),
    "abs(bool)": (lambda t, m, a: m.abs(a), [np.array([True, False])]),
    "min(bool, bool)": (lambda t, m, a: m.min(a, a), [np.array([True, False])]),
    "clamp(bool, False, True)": (lambda t, m, a: m.clamp(a, False, True), [np.array([True, False])]),
    "float16 + float16": (lambda t, m, a: a + a, [np.array([1.5], np.float16)]),
    "float16 == float16": (lambda t, m, a: a == a, [np.array([1.5], np.float16)]),
    "sqrt(float16)": (lambda t, m, a: m.sqrt(a), [np.array([1.5], np.float16)]),
    "float32 * Constant(float16)": (lambda t, m, a: a * t.Constant(0.5, t.FLOAT16), [np.array([1.5], np.float32)]),
    "float32 & int32": (lambda t, m, a: a & 1, [np.array([1.5], np.float32)]),
    "int32 // 0": (lambda t, m, a: a // 0, [np.array([7], np.int32)]),
    "int32 % 0": (lambda t, m, a: a % 0, [np.array([7], np.int32)]),
    "int8 + 2**31": (lambda t, m, a: a + 2 ** 31, [np.array([7], np.int8)]),
}
ALLOWED = {
    "bool * bool": (lambda t, m, a: a * a, [np.array([True, False])]),
    "bool & bool": (lambda t, m, a: a & a, [np.array([True, False])]),
    "bool < bool": (lambda t, m, a: a < a, [np.array([True, False])]),
    "bool + 1": (lambda t, m, a: a + 1, [np.array([True, False])]),
    "float32 // 0": (lambda t, m, a: a // 0, [np.array([7.5], np.float32)]),
    "int32 / 0": (lambda t, m, a: a / 0, [np.array([7, 0], np.int32)]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_dali_refuses_penstock_refuses(case):
    build, feeds = REFUSED[case]
    assert refuses("dali", build, feeds) and refuses("penstock", build, feeds)


@pytest.mark.parametrize("case", list(ALLOWED))
def test_what_dali_allows_penstock_allows_with_its_results(case):
    build, feeds = ALLOWED[case]
    assert_same(run("dali", build, feeds), run("penstock", build, feeds), [case])
