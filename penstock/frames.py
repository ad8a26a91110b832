"""Per-frame arguments (DALI's ``fn.per_frame``): an operator given a sequence (its input's layout
starting with F) and an argument whose values are per frame (an argument input whose layout starts
with F) runs frame by frame, frame f with the argument's value f (or its only value), every other
argument and random draw the sample's.

``framewise(impl, frame_args)`` wraps the operator's implementation: the wrapper declares the
operator's outputs for one frame (the F axis taken off its sequence inputs) and puts the F back on
them; on the CPU it runs the operator on each frame of a sample and stacks the results; on the GPU
it runs the operator once over all the frames of the batch and stacks each sample's back.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from penstock.batch import DeferredBatch
from penstock.contract import BatchOperator, OutputSpec, SampleOperator


class PerFrame(tuple):
    """A per-frame argument's values for one sample, one per frame (each converted as the
    argument's schema describes)."""


def framewise(impl, frame_args: frozenset):
    """The operator ``impl`` run frame by frame for the per-frame arguments ``frame_args``."""
    if isinstance(impl, BatchOperator):
        return FramewiseBatch(impl, frame_args)
    if isinstance(impl, SampleOperator):
        return FramewiseSample(impl, frame_args)
    raise ValueError(f"{impl.name}: per-frame arguments ({', '.join(sorted(frame_args))}) are given, and it cannot "
                     "run frame by frame")


class _Framewise:
    def __init__(self, inner, frame_args: frozenset):
        self.inner, self.frame_args = inner, frozenset(frame_args)
        self.schema, self.args, self.context = inner.schema, inner.args, inner.context
        self._sequences: tuple[bool, ...] = ()

    def build_notes(self) -> list[str]:
        return [f"frame by frame: per-frame arguments {', '.join(sorted(self.frame_args))}", *self.inner.build_notes()]

    def declare_outputs(self, inputs):
        first = inputs[0] if inputs else None
        if first is None or not first.layout.startswith("F"):
            raise ValueError(f"{self.name}: per-frame arguments ({', '.join(sorted(self.frame_args))}) need sequences: "
                             f"an input whose layout starts with 'F', got {first.layout if first else 'none'!r}")
        self._sequences = tuple(spec.layout.startswith("F") for spec in inputs)
        frames = tuple(_frame_spec(spec) if sequence else spec for spec, sequence in zip(inputs, self._sequences))
        declared = self.inner.declare_outputs(frames)
        if isinstance(declared, OutputSpec):
            return _sequence_spec(declared)
        return tuple(_sequence_spec(spec) for spec in declared)

    def draw(self, rng, count):
        return self.inner.draw(rng, count)

    def _frame_args(self, args, frame: int, frames: int):
        changes = {}
        for name in self.frame_args:
            values = args[name]
            if not isinstance(values, PerFrame):
                continue
            if len(values) not in (1, frames):
                raise ValueError(f"{self.name}: per-frame argument '{name}' has {len(values)} values for a sequence "
                                 f"of {frames} frames; give one per frame, or one")
            changes[name] = values[frame if len(values) > 1 else 0]
        return args.replace(**changes) if changes else args


class FramewiseSample(_Framewise, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        frames = int(np.shape(inputs[0])[0])
        results = []
        for frame in range(frames):
            frame_inputs = tuple(value[frame] if sequence else value for value, sequence in zip(inputs, self._sequences))
            result = self.inner.run(frame_inputs, self._frame_args(args, frame, frames), sample)
            results.append(result if isinstance(result, tuple) else (result,))
        if not results:
            raise ValueError(f"{self.name}: a sequence of no frames, with per-frame arguments")
        stacked = tuple(np.stack([np.asarray(result[k]) for result in results]) for k in range(len(results[0])))
        return stacked if len(stacked) > 1 else stacked[0]


class FramewiseBatch(_Framewise, BatchOperator):
    lanes = ()

    def open(self, device, run_call) -> None:
        self.inner.open(device, run_call)

    def close(self) -> None:
        self.inner.close()

    def run_batch(self, inputs, args, batch):
        import torch

        columns = [_samples_of(value) for value in inputs]
        owners, frame_numbers = [], []
        for index, sample in enumerate(columns[0]):
            count = int(sample.shape[0])
            if not count:
                raise ValueError(f"{self.name}: a sequence of no frames, with per-frame arguments")
            owners.extend([index] * count)
            frame_numbers.extend(range(count))
        frame_columns = [[column[owner][frame] if sequence else column[owner]
                          for owner, frame in zip(owners, frame_numbers)]
                         for column, sequence in zip(columns, self._sequences)]
        frame_args = [self._frame_args(args[owner], frame, int(columns[0][owner].shape[0]))
                      for owner, frame in zip(owners, frame_numbers)]
        params = batch.params
        frame_batch = dataclasses.replace(
            batch, params=None if params is None else [params[owner] for owner in owners],
            source_infos=[batch.source_infos[owner] for owner in owners] if batch.source_infos else batch.source_infos)
        result = self.inner.run_batch(frame_columns, frame_args, frame_batch)
        outputs = result if isinstance(result, tuple) else (result,)
        stacked = []
        for output in outputs:
            frames = _samples_of(output)
            per_sample, position = [], 0
            for sample in columns[0]:
                count = int(sample.shape[0])
                per_sample.append(torch.stack(list(frames[position:position + count])))
                position += count
            stacked.append(per_sample)
        return tuple(stacked) if isinstance(result, tuple) else stacked[0]


def _samples_of(value) -> list:
    """A batch value's samples as a list (running deferred work)."""
    return list(value.materialize()[0]) if isinstance(value, DeferredBatch) else list(value)


def _frame_spec(spec: OutputSpec) -> OutputSpec:
    return spec.but(layout=spec.layout[1:], ndim=None if spec.ndim is None else spec.ndim - 1,
                    shape=None if spec.shape is None else spec.shape[1:])


def _sequence_spec(spec: OutputSpec) -> OutputSpec:
    return spec.but(layout="F" + spec.layout if spec.layout else "", ndim=None if spec.ndim is None else spec.ndim + 1,
                    shape=None)
