"""Random generators (``random.coin_flip``, ``random.uniform``, ``random.normal``): one value (or
array of ``shape``) per sample, usable as a per-sample argument of another operator.

Each batch is drawn from a stream keyed by (seed, operator, iteration), so the values do not
depend on threads or prefetching."""
from __future__ import annotations

import numpy as np

from penstock import registry, types
from penstock.operators.base import SampleContext, SourceBatch, SourceOperator
from penstock.schema import Arg, OpSchema

SHAPE_ARG = Arg("shape", "ints", None, "Shape of each sample's value; default a scalar.", min=0)


def _schema(name, class_name, doc, args, default_dtype):
    return registry.register_schema(OpSchema(
        name=name, class_name=class_name, doc=doc, num_inputs=(0, 0), input_names=(), is_source=True,
        args=(*args, SHAPE_ARG, Arg("dtype", "dtype", default_dtype, "Element type of the values."))))


_schema("random.coin_flip", "random.CoinFlip", "Per-sample 0 or 1, 1 with the given probability.",
        (Arg("probability", "float", 0.5, "Chance of a 1.", min=0.0, max=1.0),), types.INT32)
_schema("random.uniform", "random.Uniform", "Per-sample values drawn uniformly from [range[0], range[1]), "
        "or from the discrete ``values``.",
        (Arg("range", "floats", (-1.0, 1.0), "The interval [low, high).", length=(2,)),
         Arg("values", "floats", None, "Discrete values to pick from uniformly, instead of range.")),
        types.FLOAT)
_schema("random.normal", "random.Normal", "Per-sample values from a normal distribution.",
        (Arg("mean", "float", 0.0, "Mean of the distribution."),
         Arg("stddev", "float", 1.0, "Standard deviation.", min=0.0)), types.FLOAT)


class RandomSource(SourceOperator):
    def next_batch(self, iteration: int) -> SourceBatch:
        rng = np.random.Generator(np.random.Philox(key=[self.context.seed & (2**64 - 1), iteration]))
        shape = (self.context.batch_size, *(self.args["shape"] or ()))
        values = self.generate(rng, shape).astype(self.args["dtype"].numpy, copy=False)
        return SourceBatch([values[i, ...] for i in range(len(values))])

    def generate(self, rng: np.random.Generator, shape: tuple) -> np.ndarray:
        raise NotImplementedError

    def load(self, item, sample: SampleContext) -> tuple:
        return (item,)

    def output_layout(self, input_layouts):
        return ""


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
        if high < low:
            raise ValueError(f"random.uniform: range must be [low, high], got {self.args['range']}")
        return rng.uniform(low, high, shape)


@registry.register("random.normal", "cpu")
class Normal(RandomSource):
    def generate(self, rng, shape):
        return rng.normal(self.args["mean"], self.args["stddev"], shape)
