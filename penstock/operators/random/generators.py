"""Random generators (``random.coin_flip``, ``random.uniform``, ``random.normal``, ``random.beta``,
``random.choice``): one value (or array) per sample, usable as a per-sample argument of another
operator. Each sample's shape is ``shape`` (fixed or per sample), or that of the ``shape_like``
input (as in DALI), else a scalar; the distributions' parameters may be given per sample.

The numbers come from the operator's stream for the batch (keyed by seed, operator and
iteration), so they do not depend on threads or prefetching. Where every sample's shape is fixed,
the batch's standard variates (uniform in [0, 1), standard normal) are drawn at once and each
sample maps its own onto its parameters: the GPU forms of coin_flip, uniform and normal take the
same variates, so a seed gives the same values on both devices. Where the shape follows the data,
each sample draws from a stream of its own (keyed by a number drawn from the batch's); on the GPU
that stream is Philox in Triton, the whole batch in one launch (kernels.triton_random; torch's
generator, a sample at a time, for float64 outputs), so the values follow the same distribution,
not the same numbers."""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.capabilities import LightOnCpu
from penstock.columns import ArrayColumn
from penstock.contract import BatchOperator, OutputSpec, SampleContext, SampleOperator, SourceBatch, SourceOperator
from penstock.draws import keyed_stream, random_stream
from penstock.numeric import cast_as_cpp
from penstock.schema import Arg, ArgError, OpSchema

SHAPE_ARG = Arg("shape", "ints", None, "Shape of each sample's values (fixed, or per sample); default a scalar, or "
                "the shape_like input's shape. Not with a shape_like input.", min=0, per_sample=True)
SHAPE_LIKE_DOC = "the samples' shapes give the output's (their data is not read)"
INTEGER_AND_FLOAT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                                                      np.uint64, np.int64, np.float32, np.float64))
OUTPUT_TYPES = {  # as DALI 2.4's CPU operators
    "random.coin_flip": tuple(np.dtype(t) for t in (np.bool_, np.uint8, np.int32)),
    "random.uniform": INTEGER_AND_FLOAT_TYPES, "random.normal": INTEGER_AND_FLOAT_TYPES,
    "random.beta": (np.dtype(np.float32), np.dtype(np.float64)),
}


def _check_dtype(name: str):
    def check(static: dict, per_sample: frozenset) -> None:
        dtype = np.dtype(static.dtype.numpy)
        if dtype not in OUTPUT_TYPES[name]:
            raise ArgError(f"dtype {dtype.name} is not an output type of {name}; it takes "
                           f"{', '.join(t.name for t in OUTPUT_TYPES[name])}")
    return check


def _schema(name, class_name, doc, args, default_dtype, checks=()):
    return registry.register_schema(OpSchema(
        name=name, class_name=class_name, doc=doc, num_inputs=(0, 1), input_names=("shape_like",), is_source=True,
        args=(*args, SHAPE_ARG, Arg("dtype", "dtype", default_dtype, "Element type of the values (integers: the "
                                                                      "values rounded and saturated).")),
        checks=(*checks, _check_dtype(name))))


def _check_range(static: dict, per_sample: frozenset) -> None:
    if "range" not in per_sample:
        low, high = static.get("range")
        if high <= low:
            raise ArgError(f"argument 'range' must be [low, high) with low < high, got {static.range}")
    if static.get("values") is not None and not static.values_:
        raise ArgError("argument 'values' must hold at least one value")
    if "values" in per_sample and "range" in per_sample:
        raise ArgError("arguments 'range' and 'values' exclude each other; give one")


_schema("random.coin_flip", "random.CoinFlip", f"Per-sample 0 or 1, 1 with the given probability ({SHAPE_LIKE_DOC}).",
        (Arg("probability", "float", 0.5, "Chance of a 1 (per sample too).", min=0.0, max=1.0, per_sample=True, scalar=True),),
        types.INT32)
_schema("random.uniform", "random.Uniform", "Per-sample values drawn uniformly from [range[0], range[1]), or from "
        f"the discrete ``values`` ({SHAPE_LIKE_DOC}).",
        (Arg("range", "floats", (-1.0, 1.0), "The interval [low, high) (per sample too).", length=(2,),
             per_sample=True),
         Arg("values", "floats", None, "Discrete values to pick from uniformly, instead of range (per sample too).",
             per_sample=True)),
        types.FLOAT, checks=(_check_range,))
_schema("random.normal", "random.Normal", f"Per-sample values from a normal distribution ({SHAPE_LIKE_DOC}).",
        (Arg("mean", "float", 0.0, "Mean of the distribution (per sample too).", per_sample=True, scalar=True),
         Arg("stddev", "float", 1.0, "Standard deviation (per sample too).", min=0.0, per_sample=True, scalar=True)), types.FLOAT)
def positive_float32(name: str, value) -> float:
    """``value`` where it is a positive float32 (denormals too, as DALI), else a ValueError."""
    with np.errstate(over="ignore"):
        single = np.float32(value)
    if not (single > 0 and np.isfinite(single)):
        raise ValueError(f"The `{name}` must be a positive float32, got {value!r}")
    return float(value)


def _check_beta(static: dict, per_sample: frozenset) -> None:
    for name in ("alpha", "beta"):
        if name not in per_sample:
            try:
                positive_float32(name, static[name])
            except ValueError as error:
                raise ArgError(f"argument '{name}': {error}") from None


_schema("random.beta", "random.Beta", f"Per-sample values from a beta distribution ({SHAPE_LIKE_DOC}).",
        (Arg("alpha", "float", 1.0, "The first shape parameter, a positive float32 (per sample too).", per_sample=True,
             scalar=True),
         Arg("beta", "float", 1.0, "The second shape parameter, a positive float32 (per sample too).", per_sample=True,
             scalar=True)),
        types.FLOAT, checks=(_check_beta,))


def _check_probabilities(static: dict, per_sample: frozenset) -> None:
    p = static.get("p")
    if p is not None and (any(value < 0 for value in p) or abs(sum(p) - 1) > 1e-6):
        raise ArgError(f"argument 'p' must be probabilities that sum to 1, got {p}")


registry.register_schema(OpSchema(
    name="random.choice", class_name="random.Choice", num_inputs=(1, 2), input_names=("input", "shape_like"),
    doc="Per sample, values drawn from its input: a scalar n draws from 0..n-1, an array from its elements along "
        "its outer axis (each draw of shape input.shape[1:]); "
        f"``p`` gives their probabilities (default: equal); a second input's shapes give the output's.",
    args=(Arg("p", "floats", None, "The probability of each value (per sample too).", per_sample=True), SHAPE_ARG),
    checks=(_check_probabilities,)))


class RandomGenerator:
    """What both devices share: the output's shape and type, and the batch's draws."""

    variates = "uniform"  # the standard variates that ``values`` maps onto a sample's parameters
    shape_input = 0  # which input is shape_like
    _shape_like = False  # whether it is given (declare_outputs tells)

    def declare_outputs(self, inputs):
        self._shape_like = len(inputs) > self.shape_input
        given = "shape" not in self.args or self.args.shape is not None
        if self._shape_like and given:
            raise ValueError(f"{self.name}: give the shape as 'shape' or as the shape_like input, not both")
        dtype = self.output_type(inputs)
        if self._shape_like:
            return OutputSpec(dtype, inputs[self.shape_input].ndim, "", inputs[self.shape_input].shape)
        shape = self.fixed_shape()
        return OutputSpec(dtype, len(shape), "", shape) if shape is not None else OutputSpec(dtype)

    def output_type(self, inputs):
        return np.dtype(self.args.dtype.numpy)

    def fixed_shape(self) -> tuple | None:
        """Every sample's shape, where the arguments fix it (None: it follows the data)."""
        if self._shape_like or "shape" not in self.args:
            return None
        return tuple(self.args.shape or ())

    def draw(self, rng, count):
        """The batch's standard variates [count, *shape] where the shape is fixed, else one stream key
        per sample."""
        shape = self.fixed_shape()
        if shape is None:
            return rng.integers(0, 2**63, count, dtype=np.int64)
        return self.batch_variates(rng, (count, *shape))

    def batch_variates(self, rng, shape):
        return rng.random(shape) if self.variates == "uniform" else rng.standard_normal(shape)

    def sample_shape(self, inputs, args) -> tuple:
        if self._shape_like:
            return tuple(inputs[self.shape_input].shape)
        return tuple(args.shape or ())

    def variates_of(self, inputs, args, params):
        """One sample's standard variates (numpy): its row of the batch's, or drawn from its own key."""
        if self.fixed_shape() is not None:
            return np.asarray(params)
        stream, shape = keyed_stream(int(params)), self.sample_shape(inputs, args)
        if self.variates == "normal" and np.dtype(args.dtype.numpy) in _SINGLE_OR_LESS:
            # a shape that follows the data is often large (noise over an audio clip or an image):
            # float32 draws take four fifths of the time and are all a float32 output can hold
            return stream.standard_normal(shape, dtype=np.float32)
        return self.batch_variates(stream, shape)


_SINGLE_OR_LESS = (np.dtype(np.float32), np.dtype(np.float16))


class CpuGenerator(RandomGenerator, LightOnCpu, SampleOperator):
    """Per sample on the workers, where an input or a per-sample argument is given; else a source
    of whole batches (RandomSource: one vectorized draw, no work per sample)."""

    def __new__(cls, args, context):
        per_sample = [arg.name for arg in cls.schema.args if arg.per_sample and arg.name not in args]
        if context.num_inputs == 0 and not per_sample:
            source = object.__new__(cls.Source)
            source.__init__(args, context)  # not a subclass: Python leaves the initialization to us
            return source
        return object.__new__(cls)

    def output_spec(self, inputs, args):
        shape = self.fixed_shape()
        return None if shape is None else (shape, np.dtype(args.dtype.numpy))

    def run(self, inputs, args, sample, out=None):
        values = numeric.saturate(self.values(np, self.variates_of(inputs, args, sample.params), args),
                                  args.dtype.numpy)
        if out is not None:
            out[...] = values
            return out
        return values


class RandomSource(RandomGenerator, SourceOperator):
    """The batch's values at once: the same numbers as the per-sample form, whose draw this is."""

    items_are_values = True
    fits_any_batch = True  # as DALI's generators, it follows the size of the batches other sources give

    def next_batch(self, iteration: int) -> SourceBatch:
        shape = (self.context.batch_size, *self.fixed_shape())
        variates = self.batch_variates(random_stream(self.context.seed, iteration), shape)
        values = numeric.saturate(self.values(np, variates, self.args), self.args.dtype.numpy)
        return SourceBatch(ArrayColumn.full(values))  # each sample's value a view when asked

    def load(self, item, sample: SampleContext) -> tuple:
        return (item,)


class GpuGenerator(RandomGenerator, BatchOperator):
    """The batch's variates uploaded and mapped with torch where the shape is fixed (the CPU form's
    numbers); else drawn for the whole batch in one launch, each sample keyed by its key (float64
    outputs: per sample from torch's generator on the GPU, seeded by the sample's key)."""

    def run_batch(self, inputs, args, batch):
        import torch

        from penstock.operators.shared.gpu_plan import tensors_of
        columns = [tensors_of(value) for value in inputs]
        device = batch.device
        fixed = self.fixed_shape() is not None
        if not fixed and all(np.dtype(a.dtype.numpy) != np.float64 for a in args):
            return self._drawn_at_once(columns, args, batch)
        if fixed:  # uploaded without waiting for the GPU (from pageable memory the copy would)
            from penstock.runtime.pinned import to_device
            variates = to_device(device, [np.ascontiguousarray(batch.params)])[0]
        results = []
        for index, sample_args in enumerate(args):
            if fixed:
                base = variates[index]
            else:
                shape = tuple(columns[self.shape_input][index].shape) if self._shape_like \
                    else tuple(sample_args.shape or ())
                generator = torch.Generator(device=device).manual_seed(int(batch.params[index]))
                make = torch.rand if self.variates == "uniform" else torch.randn
                base = make(shape, generator=generator, device=device, dtype=torch.float64)
            results.append(numeric.saturate_tensor(self.values(torch, base, sample_args),
                                                   types.to_torch_dtype(sample_args.dtype)))
        return results


    def _drawn_at_once(self, columns, args, batch):
        """Shapes that follow the data: the batch's float32 variates in one launch (each sample
        keyed by its own key), mapped once for the whole buffer where the samples share their
        arguments, else sample by sample."""
        import torch

        from penstock.batch import PackedBatch
        from penstock.kernels.triton_random import draw_variates
        from penstock.runtime.pinned import to_device
        shapes = [tuple(columns[self.shape_input][index].shape) if self._shape_like else tuple(a.shape or ())
                  for index, a in enumerate(args)]
        drawn = draw_variates(np.asarray(batch.params, np.int64), shapes, self.variates == "normal", batch.device,
                              upload=to_device)
        if all(a is args[0] for a in args):
            values = numeric.saturate_tensor(self.values(torch, drawn.buffer, args[0]),
                                             types.to_torch_dtype(args[0].dtype))
            return PackedBatch(values, drawn.offsets, drawn.shapes)
        return [numeric.saturate_tensor(self.values(torch, sample, a), types.to_torch_dtype(a.dtype))
                for sample, a in zip(drawn, args)]


def _register(name: str, values, variates: str = "uniform", gpu: bool = False) -> None:
    """The CPU form (and the GPU form) of a generator whose sample is ``values(xp, variates, args)``."""
    members = {"values": staticmethod(values), "variates": variates}
    cpu_name = "".join(word.capitalize() for word in name.split(".")[-1].split("_"))
    cpu = registry.register(name, "cpu")(type(cpu_name, (CpuGenerator,), members))
    cpu.Source = type(cpu_name + "Source", (RandomSource,), {**members, "schema": cpu.schema})
    if gpu:
        registry.register(name, "gpu", requires=devices.gpu_problem)(type(cpu_name + "Gpu", (GpuGenerator,), members))


def _coin_flip(xp, u, args):
    return u < args.probability


def _uniform(xp, u, args):
    if args.values_ is not None:  # the discrete form: u picks one of the values
        values = args.values_
        if xp is np:
            return np.asarray(values, np.float64)[np.minimum((u * len(values)).astype(np.int64), len(values) - 1)]
        table = xp.as_tensor(values, dtype=u.dtype, device=u.device)
        return table[xp.clamp((u * len(values)).long(), max=len(values) - 1)]
    low, high = args.range
    if high <= low:
        raise ValueError(f"random.uniform: argument 'range': {list(args.range)} must be [low, high) with low < high")
    dtype = np.dtype(args.dtype.numpy)
    if dtype.kind in "iu":  # DALI casts the ends to the output type first (C++: truncated, wrapped)
        low, high = (float(cast_as_cpp(np.float64(end), dtype)) for end in (low, high))
    return low + (high - low) * u


def _normal(xp, z, args):
    return args.mean + args.stddev * z


_register("random.coin_flip", _coin_flip, gpu=True)
_register("random.uniform", _uniform, gpu=True)
_register("random.normal", _normal, variates="normal", gpu=True)


class BetaForm:
    """No standard variate maps onto every (alpha, beta): the batch's values are drawn at once where
    the parameters and the shape are fixed, else each sample draws from its own key."""

    def fixed_shape(self):
        if "alpha" not in self.args or "beta" not in self.args:
            return None
        return super().fixed_shape()

    def batch_variates(self, rng, shape):
        return rng.beta(self.args.alpha, self.args.beta, shape)

    def variates_of(self, inputs, args, params):
        if self.fixed_shape() is not None:
            return np.asarray(params)
        alpha, beta = (positive_float32(name, args[name]) for name in ("alpha", "beta"))
        return keyed_stream(int(params)).beta(alpha, beta, self.sample_shape(inputs, args))

    @staticmethod
    def values(xp, variates, args):
        return variates


@registry.register("random.beta", "cpu")
class Beta(BetaForm, CpuGenerator):
    pass


Beta.Source = type("BetaSource", (BetaForm, RandomSource), {"schema": Beta.schema})


@registry.register("random.choice", "cpu")
class Choice(CpuGenerator):
    """Each sample maps its uniform variates onto its input's values through the cumulative
    probabilities."""

    shape_input = 1

    def output_type(self, inputs):
        spec = inputs[0]
        return spec.dtype if spec.dtype is not None and (spec.ndim != 0 or spec.dtype.kind in "iu") else None

    def declare_outputs(self, inputs):
        """Each draw is an element of the input (along its outer axis): the output has the drawn
        shape and the element's axes, and, as DALI, the input's layout where it keeps all its axes
        or all but the outer one."""
        spec, data = super().declare_outputs(inputs), inputs[0]
        data_ndim = data.ndim if data.ndim is not None else len(data.layout) or None
        element_ndim = max(data_ndim - 1, 0) if data_ndim is not None else None
        ndim = spec.ndim + element_ndim if spec.ndim is not None and element_ndim is not None else None
        layout = ""
        if data.layout and ndim is not None:
            layout = data.layout if ndim == data_ndim else data.layout[1:] if ndim == data_ndim - 1 else ""
        return OutputSpec(spec.dtype, ndim, layout)

    def output_spec(self, inputs, args):
        return None

    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        if data.ndim == 0:
            if data.dtype.kind not in "iu" or int(data) < 1:
                raise ValueError(f"a scalar input must be a positive integer n (draws from 0..n-1), got {data!r}")
            values = np.arange(int(data), dtype=data.dtype)
        elif len(data):
            values = data  # its elements along the outer axis
        else:
            raise ValueError(f"the input must be a scalar n or a non-empty array of values, got shape {data.shape}")
        p = args.p
        if p is not None and len(p) != len(values):
            raise ValueError(f"'p' has {len(p)} probabilities for {len(values)} values")
        cumulative = np.cumsum(p if p is not None else np.full(len(values), 1.0 / len(values)))
        u = self.variates_of(inputs, args, sample.params)
        picks = np.minimum(np.searchsorted(cumulative, u * cumulative[-1], side="right"), len(values) - 1)
        return values[picks]
