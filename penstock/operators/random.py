"""Random generators (``random.coin_flip``, ``random.uniform``, ``random.normal``, ``random.beta``,
``random.choice``): one value (or array of ``shape``) per sample, usable as a per-sample argument of
another operator.

Each batch is drawn from a stream keyed by (seed, operator, iteration), so the values do not
depend on threads or prefetching."""
from __future__ import annotations

import numpy as np

from penstock import registry, types
from penstock.contract import ArrayColumn, OutputSpec, SampleContext, SampleOperator, SourceBatch, SourceOperator, random_stream
from penstock.schema import Arg, ArgError, OpSchema

SHAPE_ARG = Arg("shape", "ints", None, "Shape of each sample's value; default a scalar.", min=0)


def _schema(name, class_name, doc, args, default_dtype, checks=()):
    return registry.register_schema(OpSchema(
        name=name, class_name=class_name, doc=doc, num_inputs=(0, 0), input_names=(), is_source=True,
        args=(*args, SHAPE_ARG, Arg("dtype", "dtype", default_dtype, "Element type of the values.")),
        checks=checks))


def _check_range(static: dict, per_sample: frozenset) -> None:
    low, high = static["range"]
    if high < low:
        raise ArgError(f"argument 'range' must be [low, high] with low <= high, got {static['range']}")
    if static["values"] is not None and not static["values"]:
        raise ArgError("argument 'values' must hold at least one value")


_schema("random.coin_flip", "random.CoinFlip", "Per-sample 0 or 1, 1 with the given probability.",
        (Arg("probability", "float", 0.5, "Chance of a 1.", min=0.0, max=1.0),), types.INT32)
_schema("random.uniform", "random.Uniform", "Per-sample values drawn uniformly from [range[0], range[1]), "
        "or from the discrete ``values``.",
        (Arg("range", "floats", (-1.0, 1.0), "The interval [low, high).", length=(2,)),
         Arg("values", "floats", None, "Discrete values to pick from uniformly, instead of range.")),
        types.FLOAT, checks=(_check_range,))
_schema("random.normal", "random.Normal", "Per-sample values from a normal distribution.",
        (Arg("mean", "float", 0.0, "Mean of the distribution."),
         Arg("stddev", "float", 1.0, "Standard deviation.", min=0.0)), types.FLOAT)


_schema("random.beta", "random.Beta", "Per-sample values from a beta distribution (MixUp's mixing weights).",
        (Arg("alpha", "float", 1.0, "The first shape parameter.", min=1e-30),
         Arg("beta", "float", 1.0, "The second shape parameter.", min=1e-30)), types.FLOAT)


def _check_probabilities(static: dict, per_sample: frozenset) -> None:
    p = static["p"]
    if p is not None and (any(value < 0 for value in p) or abs(sum(p) - 1) > 1e-6):
        raise ArgError(f"argument 'p' must be probabilities that sum to 1, got {p}")


registry.register_schema(OpSchema(
    name="random.choice", class_name="random.Choice", num_inputs=(1, 1), input_names=("input",),
    doc="Per sample, a value drawn from its input: a scalar n draws from 0..n-1, a 1-D array from its "
        "elements; ``p`` gives their probabilities (default: equal).",
    args=(Arg("p", "floats", None, "The probability of each value."), SHAPE_ARG), checks=(_check_probabilities,)))


class RandomSource(SourceOperator):
    items_are_values = True

    def declare_outputs(self, inputs):
        shape = tuple(self.args["shape"] or ())
        return OutputSpec(self.args["dtype"].numpy, len(shape), "", shape)

    def next_batch(self, iteration: int) -> SourceBatch:
        rng = random_stream(self.context.seed, iteration)
        shape = (self.context.batch_size, *(self.args["shape"] or ()))
        values = self.generate(rng, shape).astype(self.args["dtype"].numpy, copy=False)
        return SourceBatch(ArrayColumn.full(values))  # each sample's value a view when asked

    def generate(self, rng: np.random.Generator, shape: tuple) -> np.ndarray:
        raise NotImplementedError

    def load(self, item, sample: SampleContext) -> tuple:
        return (item,)


@registry.register("random.coin_flip", "cpu")
class CoinFlip(RandomSource):
    def generate(self, rng, shape):
        return rng.random(shape) < self.args["probability"]


@registry.register("random.uniform", "cpu")
class Uniform(RandomSource):
    def generate(self, rng, shape):
        if self.args["values"] is not None:
            return np.asarray(self.args["values"])[rng.integers(0, len(self.args["values"]), shape)]
        low, high = self.args["range"]
        return rng.uniform(low, high, shape)


@registry.register("random.normal", "cpu")
class Normal(RandomSource):
    def generate(self, rng, shape):
        return rng.normal(self.args["mean"], self.args["stddev"], shape)


@registry.register("random.beta", "cpu")
class Beta(RandomSource):
    def generate(self, rng, shape):
        return rng.beta(self.args["alpha"], self.args["beta"], shape)


@registry.register("random.choice", "cpu")
class Choice(SampleOperator):
    """The draws are uniform numbers made for the batch beforehand; each sample maps its own onto
    its input's values through the cumulative probabilities."""

    def declare_outputs(self, inputs):
        spec = inputs[0]
        dtype = spec.dtype if spec.dtype is not None and (spec.ndim != 0 or spec.dtype.kind in "iu") else None
        shape = tuple(self.args["shape"] or ())
        return OutputSpec(dtype, len(shape), "", shape)

    def draw(self, rng, count):
        return rng.random((count, int(np.prod(self.args["shape"] or ()))))

    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        if data.ndim == 0:
            if data.dtype.kind not in "iu" or int(data) < 1:
                raise ValueError(f"a scalar input must be a positive integer n (draws from 0..n-1), got {data!r}")
            values = np.arange(int(data), dtype=data.dtype)
        elif data.ndim == 1 and len(data):
            values = data
        else:
            raise ValueError(f"the input must be a scalar n or a non-empty 1-D array of values, got shape {data.shape}")
        p = args["p"]
        if p is not None and len(p) != len(values):
            raise ValueError(f"'p' has {len(p)} probabilities for {len(values)} values")
        cumulative = np.cumsum(p if p is not None else np.full(len(values), 1.0 / len(values)))
        picks = np.minimum(np.searchsorted(cumulative, sample.params * cumulative[-1], side="right"), len(values) - 1)
        return values[picks].reshape(tuple(args["shape"] or ()))
