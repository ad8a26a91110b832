"""Sequences (samples of frames: the layout's F axis) through operators written for one image, as
DALI runs them: every frame of a sample alike, with the sample's arguments and random draws. On the
CPU frame by frame (``each_frame``); on the GPU as one batch of all the batch's frames
(``run_on_frames``), so that the frames share the image operators' batched kernels."""
from __future__ import annotations

import dataclasses

import numpy as np


def frame_layout(layout: str) -> str:
    """The layout of one frame of a sample of ``layout`` (the layout itself when it has no F)."""
    return layout.replace("F", "")


def each_frame(run_frame, sample: np.ndarray, layout: str) -> np.ndarray:
    """``run_frame(frame)`` of each frame of a numpy sample of a sequence ``layout``, stacked along
    its frames axis. A sequence of no frames gives none, of the shape one frame would give."""
    axis = layout.index("F")
    frames = np.moveaxis(sample, axis, 0)
    if not len(frames):
        probe = run_frame(np.zeros(frames.shape[1:], sample.dtype))
        return np.moveaxis(np.empty((0, *probe.shape), probe.dtype), 0, axis)
    return np.stack([run_frame(frame) for frame in frames], axis=axis)


def run_on_frames(run_images, samples: list, args, batch, layout: str) -> list:
    """``run_images(frames, frame_args, frame_batch)`` (an image operator's GPU form over a list of
    images) over every frame of ``samples`` (torch tensors of a sequence ``layout``), each frame
    with its sample's arguments and draws; the results stacked back into one tensor per sample. A
    sequence of no frames runs one frame of zeros, to learn the shape of the frames it does not have."""
    import torch

    from penstock.operators.shared.gpu_plan import tensors_of
    axis = layout.index("F")
    frames, owners, counts = [], [], []
    for index, sample in enumerate(samples):
        sample_frames = list(torch.unbind(sample, axis)) if sample.shape[axis] else \
            [torch.zeros(tuple(sample.shape[:axis]) + tuple(sample.shape[axis + 1:]), dtype=sample.dtype,
                         device=sample.device)]
        frames.extend(sample_frames)
        owners.extend([index] * len(sample_frames))
        counts.append(int(sample.shape[axis]))
    params = batch.params
    frame_batch = dataclasses.replace(
        batch, params=None if params is None else [params[owner] for owner in owners],
        source_infos=[batch.source_infos[owner] for owner in owners] if batch.source_infos else batch.source_infos)
    results = tensors_of(run_images(frames, [args[owner] for owner in owners], frame_batch))
    stacked, position = [], 0
    for count in counts:
        taken = results[position:position + max(count, 1)]
        position += max(count, 1)
        stacked.append(torch.stack(taken, axis) if count else torch.stack(taken, axis).narrow(axis, 0, 0))
    return stacked
