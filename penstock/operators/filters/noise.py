"""Noise: ``noise.gaussian``, ``noise.shot`` and ``noise.salt_and_pepper``, as DALI's: the output
has the input's shape and type, the noisy values converted to it by penstock.numeric's rule
(rounded, halves away from zero, and saturated).

Each sample's noise comes from a seed the operator draws for it from the batch's random stream
(``draw``), so a pipeline's seed fixes the noise whatever the thread count. The CPU makes the
sample's noise with numpy from a Philox generator keyed by that seed; the GPU with Triton's Philox
(tl.rand, tl.randn) seeded by it, in one launch per batch (penstock.kernels.triton_filters). The
two devices draw different numbers from the same distributions.
"""
from __future__ import annotations

import numpy as np

from penstock import devices, numeric, registry, types
from penstock.contract import BatchOperator, SampleOperator
from penstock.draws import keyed_stream
from penstock.operators.shared.gpu_plan import tensors_of
from penstock.schema import Arg, OpSchema

registry.register_schema(OpSchema(
    name="noise.gaussian", class_name="noise.Gaussian",
    doc="Adds Gaussian noise (mean, stddev) to every element. Types: 8- to 64-bit integers and float.",
    args=(Arg("mean", "float", 0.0, "Mean of the noise.", per_sample=True, scalar=True),
          Arg("stddev", "float", 1.0, "Standard deviation of the noise (a negative one draws as its absolute "
              "value, as DALI).", per_sample=True, scalar=True)),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="noise.shot", class_name="noise.Shot",
    doc="Shot (Poisson) noise: each element becomes poisson(max(0, x / factor)) * factor. As DALI 2.4 (whose "
        "documentation says otherwise), factor 0, and any factor that is not positive, gives zeros. The GPU draws "
        "means from 64 up from the normal approximation of the Poisson distribution.",
    args=(Arg("factor", "float", 20.0, "What one event adds: the larger, the noisier.", per_sample=True, scalar=True),),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="noise.salt_and_pepper", class_name="noise.SaltAndPepper",
    doc="Sets elements to salt_val or pepper_val with probability ``prob`` (salt with probability "
        "prob * salt_vs_pepper); without per_channel every channel of a pixel is treated alike: the channels "
        "are the layout's 'C' axis, which must be the first or the last (the last where there is no layout), "
        "as in DALI.",
    args=(Arg("prob", "float", 0.05, "Probability of a value being replaced.", per_sample=True, scalar=True,
              min=0.0, max=1.0),
          Arg("salt_vs_pepper", "float", 0.5, "Probability of a replaced value being salt.", per_sample=True,
              scalar=True, min=0.0, max=1.0),
          Arg("salt_val", "float", None, "The salt value; default the type's largest (1.0 for floats).",
              per_sample=True, scalar=True, nullable=True),
          Arg("pepper_val", "float", None, "The pepper value; default the type's smallest (-1.0 for floats).",
              per_sample=True, scalar=True, nullable=True),
          Arg("per_channel", "bool", False, "Each channel of a pixel on its own (then any layout goes).")),
    input_names=("input",)))


# ---- the rules, shared by both devices ----------------------------------------------------------
def noise_parameters(kind: str, args: dict, dtype: np.dtype) -> tuple[float, float, float, float]:
    """The noise kernel's four parameters of one sample (penstock.kernels.triton_filters.noise_kernel)."""
    if kind == "gaussian":
        return args.mean, args.stddev, 0.0, 0.0
    if kind == "shot":
        return args.factor, 0.0, 0.0, 0.0
    integer = np.dtype(dtype).kind in "iu"
    salt = args.salt_val if args.salt_val is not None else (float(np.iinfo(dtype).max) if integer else 1.0)
    pepper = args.pepper_val if args.pepper_val is not None else (float(np.iinfo(dtype).min) if integer else -1.0)
    return args.prob, args.salt_vs_pepper, salt, pepper


def channel_axis(layout: str, ndim: int, op_name: str) -> int:
    """The axis of a sample's channels, as DALI: the layout's 'C', the first or the last axis; the
    last where there is no layout."""
    axis = layout.find("C") if layout else ndim - 1
    if axis not in (0, ndim - 1):
        raise ValueError(f"{op_name}: without per_channel, the channels ('C') must be the first or the last axis "
                         f"of the layout (the last where there is none); got the layout '{layout}'")
    return axis


def noisy_cpu(values: np.ndarray, kind: str, parameters: tuple, seed: int, axis: int | None) -> np.ndarray:
    """The noisy values (float) of one sample, from a generator keyed by its seed; salt and pepper
    alike on every channel of a pixel (the channels on ``axis``), or element by element for None."""
    rng = keyed_stream(int(seed))
    # float32 holds 8- and 16-bit integers exactly; wider ones are computed in float64, as DALI does
    work = np.float64 if values.dtype.kind in "iu" and values.dtype.itemsize >= 4 else np.float32
    values = values.astype(work)
    first, second, salt, pepper = parameters
    if kind == "gaussian":
        # the numbers random.normal(data, mean, stddev) gives with the same seed, added (as DALI): both
        # draw float32 for float32 (random.normal: float32 or float16 output), else float64
        return values + (first + second * rng.standard_normal(values.shape, dtype=work)).astype(work)
    if kind == "shot":
        # DALI's: poisson(x / factor) * factor, which is 0 for a factor of 0
        return np.zeros_like(values) if first == 0 else rng.poisson(np.maximum(values / first, 0.0)) * first
    draw_shape = values.shape if axis is None else tuple(1 if a == axis else n for a, n in enumerate(values.shape))
    uniform = rng.random(draw_shape, np.float32)
    return np.where(uniform < first * second, work(salt), np.where(uniform < first, work(pepper), values))


# DALI's noise kernels' types (gaussian_noise.h, shot_noise.h, salt_and_pepper_noise.h)
NOISE_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                          np.int64, np.float32))


def check_type(dtype, op_name: str) -> None:
    if dtype is not None and np.dtype(dtype) not in NOISE_TYPES:
        raise TypeError(f"{op_name}: takes {', '.join(t.name for t in NOISE_TYPES)} data, got {np.dtype(dtype)}")


class NoiseDeclaration:
    kind = ""

    def declare_outputs(self, inputs):
        check_type(inputs[0].dtype, self.name)
        self._layout = inputs[0].layout
        if self.alike_channels() and self._layout:
            channel_axis(self._layout, len(self._layout), self.name)
        return inputs[0]

    def alike_channels(self) -> bool:
        """Whether every channel of a pixel takes the same draw (salt and pepper without per_channel)."""
        return self.kind == "salt_and_pepper" and not self.args.per_channel

    def axis_of(self, ndim: int) -> int | None:
        """The channels' axis in a sample of ``ndim`` dimensions, None where elements draw on their own."""
        return channel_axis(self._layout, ndim, self.name) if self.alike_channels() and ndim else None

    def draw(self, rng, count):
        # one stream key per sample, drawn as the random generators draw theirs: an operator and
        # random.normal given the same seed draw the same numbers
        return rng.integers(0, 2 ** 63, count, dtype=np.int64)


class Noise(NoiseDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_type(data.dtype, self.name)
        noisy = noisy_cpu(data, self.kind, noise_parameters(self.kind, args, data.dtype), sample.params,
                          self.axis_of(data.ndim))
        return numeric.saturate(noisy, data.dtype)


class NoiseGpu(NoiseDeclaration, BatchOperator):
    """One launch for the batch; the kernel takes channels last, so channel-first samples go to it
    moved (a copy) and come back."""

    def run_batch(self, inputs, args, batch):
        from penstock.kernels import triton_filters
        from penstock.runtime.pinned import to_device
        samples = tensors_of(inputs[0])
        if not samples:
            return []
        dtype = types.to_numpy_dtype(samples[0].dtype)
        check_type(dtype, self.name)
        parameters = np.array([noise_parameters(self.kind, a, dtype) for a in args], np.float32)
        axes = [self.axis_of(sample.dim()) for sample in samples]
        moved = [sample.movedim(0, -1).contiguous() if axis == 0 and sample.dim() > 1 else sample
                 for sample, axis in zip(samples, axes)]
        results = triton_filters.run_noise(moved, self.kind, list(batch.params), parameters,
                                           [1 if axis is None else sample.shape[-1]
                                            for sample, axis in zip(moved, axes)],
                                           not self.alike_channels(), self.name, upload=to_device)
        results = [result.movedim(-1, 0).contiguous() if moved_sample is not sample else result
                   for result, moved_sample, sample in zip(results, moved, samples)]
        if self.kind == "shot":
            for result, row in zip(results, parameters):
                if row[0] == 0:
                    result.zero_()  # DALI's poisson(x / 0) * 0
        return results


for _kind, _class_name in (("gaussian", "Gaussian"), ("shot", "Shot"), ("salt_and_pepper", "SaltAndPepper")):
    registry.register(f"noise.{_kind}", "cpu")(type(f"{_class_name}Noise", (Noise,), {"kind": _kind}))
    registry.register(f"noise.{_kind}", "gpu", requires=devices.gpu_problem)(
        type(f"{_class_name}NoiseGpu", (NoiseGpu,), {"kind": _kind}))


__all__ = ["channel_axis", "noise_parameters", "noisy_cpu"]
