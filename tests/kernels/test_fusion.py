"""The GPU image plan: consecutive steps fused into one kernel launch give what the same steps
give one at a time (each run on its own and its result rounded to the batch's type before the
next), and Pipeline.describe names the steps that fuse.

Tolerances: a chain of steps that only move pixels (crops, flips, nearest rotations) is exact;
chains that resample twice when unfused (a resize, then a bilinear warp) differ by the blur of
the second resampling and the intermediate rounding: within a mean of 0.5 and a maximum of 8 grey
levels on smooth images.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import CUDA, gpu_or_emulated, smooth_image

from penstock import fn, pipeline_def, registry, types
from penstock.contract import BatchContext, BuildContext
from penstock.kernels.image_plan import ImagePlan

DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")


def _step(name: str, **kwargs):
    schema = registry.get_schema(name)
    static, _ = schema.validate({"device": "gpu", **kwargs})
    impl = registry.implementations()[(name, "gpu")](static, BuildContext(batch_size=3, num_threads=1, device_id=0,
                                                                     seed=3))
    return impl, static


def _run_chain(steps, images, fused: bool):
    value = [torch.from_numpy(image).to(DEVICE) for image in images]
    for impl, args in steps:
        value = impl.run_batch([value], [args] * len(images), BatchContext(None, [], None, DEVICE))
        if not fused and isinstance(value, ImagePlan):
            value = value.materialize()[0]
    if isinstance(value, ImagePlan):
        value = value.materialize()[0]
    return [sample.cpu().numpy() for sample in value]


def _images():
    return [smooth_image(30, 40, 3, seed=1), smooth_image(36, 28, 3, seed=2), smooth_image(25, 25, 3, seed=3)]


CHAINS = {
    "moves only": ([("crop", dict(crop=(20, 18), crop_pos_x=0.2)), ("flip", dict(horizontal=1, vertical=1)),
                    ("rotate", dict(angle=90.0, interp_type=types.INTERP_NN, keep_size=True)),
                    ("crop_mirror_normalize", dict(mirror=1, dtype=types.UINT8, output_layout="HWC"))], 0, 0),
    "crop, resize, flip, rotate, warp, normalize": (
        [("crop", dict(crop=(24, 22), crop_pos_y=0.7)), ("resize", dict(size=(30, 26))), ("flip", dict(horizontal=1)),
         ("rotate", dict(angle=17.0, fill_value=40.0)),
         ("warp_affine", dict(matrix=(1.0, 0.15, -1.0, 0.0, 1.0, 0.5), fill_value=200.0)),
         ("crop_mirror_normalize", dict(dtype=types.UINT8, output_layout="HWC"))], 0.5, 8),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_fused_steps_match_the_steps_run_one_at_a_time(chain):
    specs, mean_tolerance, max_tolerance = CHAINS[chain]
    steps = [_step(name, **kwargs) for name, kwargs in specs]
    with gpu_or_emulated():
        fused = _run_chain(steps, _images(), fused=True)
        separate = _run_chain(steps, _images(), fused=False)
    for index, (one, other) in enumerate(zip(fused, separate)):
        assert one.shape == other.shape, f"sample {index}"
        difference = np.abs(one.astype(np.float64) - other.astype(np.float64))
        assert difference.mean() <= mean_tolerance and difference.max() <= max_tolerance, \
            f"{chain}, sample {index}: mean {difference.mean():.2f}, max {difference.max():.0f}"


def test_a_warp_after_a_crop_fills_what_the_crop_cut_away():
    """The crop bounds what the fused warp reads: outside the window is the fill, not the source."""
    image = np.full((20, 20, 1), 100, np.uint8)
    steps = [_step("crop", crop=(10, 10)), _step("warp_affine", matrix=(1.0, 0.0, -5.0, 0.0, 1.0, 0.0), fill_value=0.0)]
    with gpu_or_emulated():
        [fused] = _run_chain(steps, [image], fused=True)
        [separate] = _run_chain(steps, [image], fused=False)
    np.testing.assert_array_equal(fused, separate)
    assert (fused[:, :5] == 0).all() and (fused[:, 6:] == 100).all()


def test_describe_names_the_steps_that_run_as_one_launch():
    images = _images()

    @pipeline_def(batch_size=3, num_threads=1, device_id=0)
    def pipeline():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC").gpu()
        data = fn.random_resized_crop(data, size=(16, 16))
        data = fn.flip(data, horizontal=fn.random.coin_flip())
        data = fn.rotate(data, angle=fn.random.uniform(range=(-10.0, 10.0)), keep_size=True)
        return fn.crop_mirror_normalize(data, dtype=types.FLOAT16)

    with gpu_or_emulated():
        pipe = pipeline()
        try:
            text = pipe.describe()
            [batch] = pipe.run()
            assert len(batch.as_cpu()) == 3
        finally:
            pipe.close()
    assert "one kernel launch per batch: random_resized_crop#2 -> flip#4 -> rotate#6 -> crop_mirror_normalize#7" in text
