"""``pad`` on the GPU: a planned image batch padded as the fused kernel writes it gives exactly the
bits of the plan run first and padded after (both are the same per-pixel arithmetic), and the
padding holds the fill, not more of the image, wherever the plan's output is a crop of a larger
source. Without a GPU in Triton's interpreter over CPU tensors."""
from __future__ import annotations

import numpy as np
import torch

from conftest import CUDA
from penstock import registry
from penstock.batch import PackedBatch
from penstock.kernels.image_plan import ImagePlan
from penstock.kernels.triton_resample import FILTER_LINEAR
from penstock.operators.tensor.batch_ops import _pad, _pad_gpu
from penstock.runtime.pinned import to_device

DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")


def _images(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [torch.from_numpy(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).to(DEVICE) for h, w in shapes]


def _pad_args(count, **kwargs):
    static, _ = registry.get_schema("pad").validate(kwargs)
    return [static] * count


def _both_ways(plan, args):
    folded = _pad_gpu(args, plan)
    assert isinstance(folded, PackedBatch)
    separate = _pad(torch, args, plan.materialize()[0])
    return [sample.cpu().numpy() for sample in folded], [sample.cpu().numpy() for sample in separate]


def test_resize_mirror_normalize_fp16_chw_then_pad_as_mask_rcnn_gives_the_same_bits():
    sources = _images([(13, 17), (9, 22), (20, 8)])
    plan = ImagePlan.of(sources, upload=to_device)
    plan = plan.with_resize([(26, 33), (15, 37), (41, 17)], FILTER_LINEAR, antialias=False)
    plan = plan.with_flips([(False, True), (False, False), (False, True)])
    mean, std = np.array([123.7, 116.3, 103.5]), np.array([58.4, 57.1, 57.4])
    plan = plan.with_color(np.tile(np.diag(1 / std), (3, 1, 1)), np.tile(-mean / std, (3, 1)))
    plan = plan.with_output(dtype=torch.float16, chw=True)
    folded, separate = _both_ways(plan, _pad_args(3, axes=(1, 2), align=32))
    assert [s.shape for s in folded] == [(3, 64, 64)] * 3
    for got, want in zip(folded, separate):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_a_crop_padded_shows_the_fill_beyond_it_not_the_rest_of_its_source():
    sources = _images([(30, 40), (25, 28)], seed=1)
    plan = ImagePlan.of(sources, upload=to_device).with_crop([(3, 5, 10, 12), (0, 0, 7, 9)])
    folded, separate = _both_ways(plan, _pad_args(2, axes=(0, 1), fill_value=7, shape=(16, 16)))
    for got, want, source, (top, left, h, w) in zip(folded, separate, sources, [(3, 5, 10, 12), (0, 0, 7, 9)]):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got[:h, :w], source.cpu().numpy()[top:top + h, left:left + w])
        assert (got[h:] == 7).all() and (got[:, w:] == 7).all()


def test_uint8_rounding_and_a_fill_per_sample_saturated_to_the_type():
    sources = _images([(11, 7), (5, 9)], seed=2)
    plan = ImagePlan.of(sources, upload=to_device).with_resize([(8, 5), (9, 13)], FILTER_LINEAR, antialias=False)
    plan = plan.with_affine([1.7, 0.4], [3.0, -9.0])
    args = [a.replace(fill_value=fill) for a, fill in zip(_pad_args(2, axes=(0, 1)), (300.0, -4.0))]
    folded, separate = _both_ways(plan, args)
    for got, want in zip(folded, separate):
        np.testing.assert_array_equal(got, want)
    assert (folded[0][8:] == 255).all() and (folded[1][:, 13:] == 0).all()


def test_padding_the_channels_of_a_plan_runs_it_first_and_pads_after():
    sources = _images([(6, 5), (4, 8)], seed=3)
    plan = ImagePlan.of(sources, upload=to_device).with_flips([(True, False), (False, True)])
    flipped = [np.asarray(sources[0].cpu())[::-1], np.asarray(sources[1].cpu())[:, ::-1]]

    def expected(fill, channels):
        return [np.pad(s, ((0, 6 - s.shape[0]), (0, 8 - s.shape[1]), (0, channels - 3)), constant_values=fill)
                for s in flipped]

    # every axis padded, the channels staying 3: the plan folds
    for got, want in zip(_pad_gpu(_pad_args(2, fill_value=1), plan), expected(1, 3)):
        np.testing.assert_array_equal(got.cpu().numpy(), want)
    # a fourth channel: the plan runs, then the pad kernel
    for got, want in zip(_pad_gpu(_pad_args(2, shape=(6, 8, 4), fill_value=2), plan), expected(2, 4)):
        np.testing.assert_array_equal(got.cpu().numpy(), want)
