"""The affine-matrix builders, erase / paste / grid_mask / distortions and batch mixing beyond their
coverage cases: per-sample arguments, composition with an input matrix and with transforms.combine,
matrices feeding a GPU operator, mixup and cutmix against torchvision's definitions with a fixed
lambda, determinism for a seed, and bad input named where the user calls."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from conftest import gpu_or_emulated, noise_image, run_operator

from penstock import PipelineError, fn, pipeline_def, registry
from penstock.operators.image import mixing
from penstock.pipeline import Pipeline


def raises(error_type, *fragments):
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


def identity_batch(count=4):
    return [np.eye(2, 3, dtype=np.float32)] * count


def homogeneous(matrix):
    return np.vstack([np.asarray(matrix, np.float64), [0, 0, 1]])


def rotation(degrees, center=(0.0, 0.0)):
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    cx, cy = center
    return np.array([[c, -s, cx - c * cx + s * cy], [s, c, cy - s * cx - c * cy]])


# ---- the transforms --------------------------------------------------------------------------------
def test_rotation_takes_a_per_sample_angle():
    angles, matrices = run_operator(lambda node: (a := fn.random.uniform(range=(-45.0, 45.0)),
                                                  fn.transforms.rotation(node, angle=a, center=(2.0, 1.0))),
                                    identity_batch(), layout="")
    assert len({float(a) for a in angles}) == len(angles)  # different per sample
    for angle, matrix in zip(angles, matrices):
        assert matrix.shape == (2, 3) and matrix.dtype == np.float32
        np.testing.assert_allclose(matrix, rotation(float(angle), (2.0, 1.0)), atol=1e-6)


@pytest.mark.parametrize("reverse_order", [False, True])
def test_a_transform_combines_with_its_input_matrix(reverse_order):
    given = np.array([[1.0, 0.5, 3.0], [0.25, 2.0, -1.0]], np.float32)
    [matrix] = run_operator(lambda node: fn.transforms.scale(node, scale=(2.0, 3.0), reverse_order=reverse_order),
                            [given], layout="")
    scale = np.diag([2.0, 3.0, 1.0])
    # default: the input's transform applies first, the scale after it
    expected = homogeneous(given) @ scale if reverse_order else scale @ homogeneous(given)
    np.testing.assert_allclose(matrix, expected[:2], rtol=1e-6)


@pytest.mark.parametrize("reverse_order", [False, True])
def test_combine_applies_its_inputs_in_order(reverse_order):
    def build(node):
        first = fn.transforms.translation(node, offset=(1.0, 2.0))
        return fn.transforms.combine(first, fn.transforms.rotation(angle=90.0), fn.transforms.scale(scale=(2.0, 2.0)),
                                     reverse_order=reverse_order)
    [matrix] = run_operator(build, identity_batch(1), layout="")
    translate, turn, scale = homogeneous([[1, 0, 1], [0, 1, 2]]), homogeneous(rotation(90.0)), np.diag([2.0, 2.0, 1.0])
    expected = translate @ turn @ scale if reverse_order else scale @ turn @ translate
    np.testing.assert_allclose(matrix, expected[:2], atol=1e-6)
    point = np.array([1.0, 1.0, 1.0])  # default: translate, then turn, then scale
    if not reverse_order:
        np.testing.assert_allclose(homogeneous(matrix) @ point, scale @ (turn @ (translate @ point)), atol=1e-5)


def test_3d_transforms():
    volumes = [np.eye(3, 4, dtype=np.float32)]  # identity 3D transforms as inputs
    [turn, shear, crop] = run_operator(lambda node: (fn.transforms.rotation(node, angle=90.0, axis=(0.0, 0.0, 2.0)),
                                                     fn.transforms.shear(node, shear=(1, 2, 3, 4, 5, 6)),
                                                     fn.transforms.crop(node, to_end=(2.0, 3.0, 4.0))),
                                       volumes, layout="")
    np.testing.assert_allclose(turn[0], [[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]], atol=1e-6)
    np.testing.assert_allclose(shear[0], [[1, 1, 2, 0], [3, 1, 4, 0], [5, 6, 1, 0]])
    np.testing.assert_allclose(crop[0], np.diag([2.0, 3.0, 4.0, 1.0])[:3])


def test_transform_matrices_feed_a_gpu_warp_as_per_sample_arguments():
    images = [noise_image(12, 14, 3, seed=seed) for seed in range(3)]

    def build(node, device):
        angle = fn.random.uniform(range=(-20.0, 20.0))
        matrix = fn.transforms.rotation(angle=angle, center=(7.0, 6.0))
        return fn.warp_affine(node.gpu() if device == "gpu" else node, matrix=matrix, fill_value=0.0, device=device)
    on_cpu = run_operator(lambda node: build(node, "cpu"), images)
    with gpu_or_emulated():
        on_gpu = _run_on_gpu(build, images)
    for cpu_image, gpu_image in zip(on_cpu, on_gpu):
        assert np.mean(np.abs(cpu_image.astype(float) - gpu_image.astype(float))) < 1.0


def _run_on_gpu(build, images):
    @pipeline_def(batch_size=len(images), num_threads=1, device_id=0, seed=1234)
    def pipeline():
        return build(fn.external_source(source=lambda: images, batch=True, layout="HWC"), "gpu")
    pipe = pipeline()
    try:
        return [np.asarray(sample) for sample in pipe.run()[0].as_cpu()]
    finally:
        pipe.close()


# ---- mixup and cutmix ------------------------------------------------------------------------------
def _batch(count=4, height=6, width=8):
    images = [np.random.default_rng(seed).random((height, width, 3), dtype=np.float32) for seed in range(count)]
    return images, [np.array([index % 3], np.int64) for index in range(count)]


ARGS, _ = registry.get_schema("mixup").validate({"num_classes": 3, "probability": 1.0})


def test_mixup_matches_torchvision_with_a_fixed_lambda():
    images, labels = _batch()
    lam = 0.3
    out_images, out_labels = mixing.mix_batch(np, "mixup", images, labels, ARGS, (0.0, lam, 0.0, 0.0), "mixup")
    batch = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)  # torchvision's NCHW
    one_hot = torch.nn.functional.one_hot(torch.tensor([int(label[0]) for label in labels]), 3).float()
    # torchvision.transforms.v2.MixUp: inpt.roll(1, 0).mul_(1.0 - lam).add_(inpt.mul(lam)), labels alike
    expected = batch.roll(1, 0).mul_(1.0 - lam).add_(batch.mul(lam)).permute(0, 2, 3, 1).numpy()
    expected_labels = one_hot.roll(1, 0).mul_(1.0 - lam).add_(one_hot.mul(lam)).numpy()
    np.testing.assert_allclose(np.stack(out_images), expected, rtol=1e-6)
    np.testing.assert_allclose(np.stack(out_labels), expected_labels, rtol=1e-6)
    _same_as_torchvision("MixUp", images, labels, lam, None, np.stack(out_images), np.stack(out_labels))


def test_cutmix_matches_torchvision_with_a_fixed_lambda_and_box():
    images, labels = _batch(height=10, width=16)
    lam, centre_x, centre_y = 0.6, 0.2, 0.7
    out_images, out_labels = mixing.mix_batch(np, "cutmix", images, labels, ARGS, (0.0, lam, centre_x, centre_y),
                                              "cutmix")
    # torchvision v2 CutMix: r_x = randint(W), r = 0.5 * sqrt(1 - lam), half sides int(r * W), int(r * H)
    r_x, r_y, r = int(centre_x * 16), int(centre_y * 10), 0.5 * math.sqrt(1 - lam)
    x1, y1 = max(r_x - int(r * 16), 0), max(r_y - int(r * 10), 0)
    x2, y2 = min(r_x + int(r * 16), 16), min(r_y + int(r * 10), 10)
    assert mixing.cutmix_box(10, 16, lam, centre_x, centre_y) == (x1, y1, x2, y2)
    batch = np.stack(images)
    expected = batch.copy()
    expected[:, y1:y2, x1:x2] = np.roll(batch, 1, 0)[:, y1:y2, x1:x2]
    lam_adjusted = 1.0 - (x2 - x1) * (y2 - y1) / (16 * 10)
    one_hot = np.eye(3, dtype=np.float32)[[int(label[0]) for label in labels]]
    np.testing.assert_array_equal(np.stack(out_images), expected)
    np.testing.assert_allclose(np.stack(out_labels), np.roll(one_hot, 1, 0) * (1 - lam_adjusted) + one_hot * lam_adjusted,
                               rtol=1e-6)
    _same_as_torchvision("CutMix", images, labels, lam, (r_x, r_y), np.stack(out_images), np.stack(out_labels))


def _same_as_torchvision(name, images, labels, lam, centre, out_images, out_labels):
    """The same batch through torchvision's transform, its Beta draw and box centre fixed (when installed)."""
    v2 = pytest.importorskip("torchvision.transforms.v2")
    transform = getattr(v2, name)(alpha=1.0, num_classes=3)
    transform._dist = type("Fixed", (), {"sample": staticmethod(lambda shape=(): torch.tensor(lam))})()
    batch = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
    ids = torch.tensor([int(label[0]) for label in labels])
    randint = torch.randint
    if centre is not None:
        draws = iter(centre)
        torch.randint = lambda high, size: torch.tensor([next(draws)])
    try:
        mixed, soft = transform(batch, ids)
    finally:
        torch.randint = randint
    np.testing.assert_allclose(out_images, mixed.permute(0, 2, 3, 1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(out_labels, soft.numpy(), rtol=1e-6)


@pytest.mark.parametrize("kind", ["mixup", "cutmix"])
def test_mixed_labels_sum_to_one_and_a_seed_fixes_the_batch(kind):
    images, labels = _batch(count=6)

    def run(seed, threads):
        @pipeline_def(batch_size=6, num_threads=threads, device_id=None, seed=seed)
        def pipeline():
            image_node = fn.external_source(source=lambda: images, batch=True, layout="HWC")
            label_node = fn.external_source(source=lambda: labels, batch=True)
            return getattr(fn, kind)(image_node, label_node, num_classes=3, alpha=0.5)
        pipe = pipeline()
        try:
            return [[np.asarray(sample) for sample in output.as_cpu()] for output in pipe.run()]
        finally:
            pipe.close()
    first, again, other = run(7, 1), run(7, 2), run(8, 1)
    for label in first[1]:
        assert label.dtype == np.float32 and label.shape == (3,) and abs(label.sum() - 1) < 1e-6
    for a, b in zip(first[0] + first[1], again[0] + again[1]):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first[0] + first[1], other[0] + other[1]))


def test_probability_zero_passes_the_batch_with_one_hot_labels():
    images, labels = _batch()
    out_images, out_labels = mixing.mix_batch(np, "mixup", images, labels, ARGS.replace(probability=0.0),
                                              (0.5, 0.3, 0.0, 0.0), "mixup")
    for image, out in zip(images, out_images):
        np.testing.assert_array_equal(image, out)
    np.testing.assert_array_equal(np.stack(out_labels), np.eye(3, dtype=np.float32)[[0, 1, 2, 0]])


# ---- bad input, named where the user calls ---------------------------------------------------------
@pytest.fixture
def images():
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, seed=1)
    with pipe:
        yield fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, layout="HWC")


@pytest.mark.parametrize("call,operator,argument", [
    (lambda x: fn.erase(x, shape=(1.0, 2.0), normalized=True, normalized_shape=True), "erase", "normalized"),
    (lambda x: fn.erase(x, shape=(1.0, 2.0, 3.0), axis_names="HW"), "erase", "shape"),
    (lambda x: fn.erase(x, shape=(1.0, 2.0), anchor=(1.0,)), "erase", "anchor"),
    (lambda x: fn.paste(x, ratio=0.5, fill_value=0), "paste", "ratio"),
    (lambda x: fn.grid_mask(x, tile=0), "grid_mask", "tile"),
    (lambda x: fn.grid_mask(x, ratio=1.5), "grid_mask", "ratio"),
    (lambda x: fn.multi_paste(x, in_ids=[0], shapes=[[-1, 2]]), "multi_paste", "shapes"),
    (lambda x: fn.multi_paste(x, in_ids=[0], in_anchors_rel=[[0.5, 1.5]]), "multi_paste", "in_anchors_rel"),
    (lambda x: fn.multi_paste(x, in_ids=[0], out_anchors=[[0, 0]], out_anchors_rel=[[0, 0]]), "multi_paste",
     "out_anchors"),
    (lambda x: fn.multi_paste(x, in_ids=[0], output_size=[4]), "multi_paste", "output_size"),
    (lambda x: fn.multi_paste(x, in_ids=[0], dtype=np.float64), "multi_paste", "dtype"),
    (lambda x: fn.multi_paste(x, in_ids=[0, 1], out_anchors=[[0, 0]]), "multi_paste", "out_anchors"),
    (lambda x: fn.mixup(x, x, alpha=0.0), "mixup", "alpha"),
    (lambda x: fn.cutmix(x, x, alpha=-1.0), "cutmix", "alpha"),
    (lambda x: fn.mixup(x, x, probability=1.5), "mixup", "probability"),
    (lambda x: fn.cutmix(x, x, probability=-0.1), "cutmix", "probability"),
    (lambda x: fn.transforms.scale(scale=(1.0, 2.0), center=(1.0,)), "transforms.scale", "center"),
    (lambda x: fn.transforms.rotation(angle=10.0, axis=(0.0, 1.0)), "transforms.rotation", "axis"),
    (lambda x: fn.transforms.shear(angles=(95.0, 0.0)), "transforms.shear", "angles"),
    (lambda x: fn.transforms.shear(shear=(1.0, 2.0, 3.0)), "transforms.shear", "shear"),
    (lambda x: fn.transforms.crop(from_start=(1.0, 2.0), to_end=(1.0, 2.0, 3.0)), "transforms.crop", "from_start"),
    (lambda x: fn.water(x, interp_type="INTERP_CUBIC"), "water", "interp_type"),
])
def test_bad_arguments_are_named_at_the_call(images, call, operator, argument):
    with raises(ValueError, operator, f"'{argument}'"):
        call(images)


def test_a_matrix_of_the_wrong_shape_is_refused_naming_the_operator():
    # data of the wrong shape is refused where it arrives (a PipelineError carrying the operator's message)
    with raises((ValueError, PipelineError), "transforms.rotation", "input", "(ndim, ndim + 1)"):
        run_operator(lambda node: fn.transforms.rotation(node, angle=10.0), [np.eye(3, dtype=np.float32)], layout="")
    with raises((ValueError, PipelineError), "transforms.translation", "input", "3D transform"):
        run_operator(lambda node: fn.transforms.translation(node, offset=(1.0, 2.0, 3.0)), identity_batch(1),
                     layout="")
    with raises((ValueError, PipelineError), "transforms.combine", "input 1"):
        run_operator(lambda node: fn.transforms.combine(node, fn.transforms.translation(offset=(1.0, 2.0, 3.0))),
                     identity_batch(1), layout="")


def test_mixing_refuses_class_ids_without_num_classes_and_images_of_different_shapes():
    with raises(ValueError, "mixup", "num_classes"):
        mixing.mix_batch(np, "mixup", *_batch(), ARGS.replace(num_classes=None), (0, 0.5, 0, 0), "mixup")
    images, labels = _batch()
    images[1] = images[1][:5]
    with raises(ValueError, "cutmix", "differ in shape"):
        mixing.mix_batch(np, "cutmix", images, labels, ARGS, (0, 0.5, 0, 0), "cutmix")


# ---- water and sphere: DALI's mask -------------------------------------------------------------------
@pytest.mark.parametrize("operator", [fn.water, fn.sphere])
def test_a_plain_mask_changes_nothing_a_per_sample_one_keeps_its_samples(operator):
    """As DALI, whose displacement filters read the mask only as a per-sample input."""
    samples = [noise_image(12, 10, 3, seed=index) for index in range(3)]

    def build(node):
        masks = fn.external_source(source=lambda: [np.int32(1), np.int32(0), np.int32(1)], batch=True)
        return operator(node), operator(node, mask=0), operator(node, mask=masks)

    distorted, plain_zero, per_sample = run_operator(build, samples)
    for index, (sample, expected) in enumerate(zip(samples, distorted)):
        assert not np.array_equal(expected, sample)
        np.testing.assert_array_equal(plain_zero[index], expected)
        np.testing.assert_array_equal(per_sample[index], sample if index == 1 else expected)


def test_water_takes_uint8_or_float_hwc_images_and_plain_wave_arguments():
    with raises((TypeError, PipelineError), "water", "uint8 or float", "int16"):
        run_operator(lambda node: fn.water(node), [np.zeros((4, 4, 3), np.int16)])
    with raises(ValueError, "sphere", "HWC", "CHW"):
        run_operator(lambda node: fn.sphere(node), [np.zeros((3, 4, 4), np.uint8)], layout="CHW")
    with raises(TypeError, "water", "'ampl_x'", "per-sample"):
        run_operator(lambda node: fn.water(node, ampl_x=fn.random.uniform(range=(1.0, 2.0))),
                     [np.zeros((4, 4, 3), np.uint8)])
