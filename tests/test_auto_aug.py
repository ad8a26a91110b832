"""penstock.auto_aug: the policies' tables against torchvision's (where torchvision is installed),
each operation against a numpy / OpenCV reference, the per-sample selection, determinism for a
seed, the GPU form against the CPU form, and bad arguments.

Tolerances: pixel-value operations (posterize, solarize, invert, equalize, auto_contrast) exact
(auto_contrast within 1 grey level: float scaling then rounding); whole policies on the GPU
against the CPU within a mean of 1 grey level (bilinear warps and rounding differ by a level at
some pixels; fused colour steps round once).
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest
from conftest import CUDA, smooth_image

from penstock import devices, fn, pipeline_def, types
from penstock.auto_aug import augmentations as a
from penstock.auto_aug import auto_augment, rand_augment, trivial_augment

IMAGES = [smooth_image(20 + 2 * (i % 3), 24, 3, seed=i) for i in range(12)]

TORCHVISION_NAMES = {"Identity": "identity", "ShearX": "shear_x", "ShearY": "shear_y", "TranslateX": "translate_x",
                     "TranslateY": "translate_y", "Rotate": "rotate", "Brightness": "brightness", "Color": "color",
                     "Contrast": "contrast", "Sharpness": "sharpness", "Posterize": "posterize", "Solarize": "solarize",
                     "AutoContrast": "auto_contrast", "Equalize": "equalize", "Invert": "invert"}


def _run(build, device="cpu", images=IMAGES, seed=11, num_threads=1):
    @pipeline_def(batch_size=len(images), num_threads=num_threads, device_id=None if device == "cpu" else 0,
                  seed=seed, enable_conditionals=True)
    def pipeline():
        data = fn.external_source(source=lambda: images, batch=True, layout="HWC")
        shapes = fn.shapes(data)  # on the CPU, as a DALI program gives RandAugment the shapes
        placed = data.gpu() if device == "gpu" else data
        return build(placed, shapes) if build.__code__.co_argcount == 2 else build(placed)

    with devices.emulated_gpu(device == "gpu" and not CUDA):
        pipe = pipeline()
        try:
            return [np.asarray(sample) for sample in pipe.run()[0].as_cpu()]
        finally:
            pipe.close()


def _one(aug, magnitude_bin=None, bins=None, **extras):
    return lambda data: aug(data, magnitude_bin=magnitude_bin, num_magnitude_bins=bins, **extras)


# ---- each operation against its reference --------------------------------------------------------
def test_value_operations_match_numpy_and_opencv():
    image = IMAGES[0]
    [posterized] = _run(_one(a.posterize, 30, 31), images=[image])  # bin 30 of (8, 4): 4 bits
    np.testing.assert_array_equal(posterized, image & 0xF0)
    [solarized] = _run(_one(a.solarize, 15, 31), images=[image])  # threshold 127.5
    np.testing.assert_array_equal(solarized, np.where(image >= 127.5, 255 - image, image))
    [inverted] = _run(_one(a.invert), images=[image])
    np.testing.assert_array_equal(inverted, 255 - image)
    [stretched] = _run(_one(a.auto_contrast), images=[image])
    low, high = image.min((0, 1)).astype(np.float64), image.max((0, 1)).astype(np.float64)
    expected = np.clip(np.rint((image - low) * (255 / (high - low))), 0, 255)
    assert np.abs(stretched.astype(np.float64) - expected).max() <= 1


def test_equalize_matches_opencv():
    pytest.importorskip("penstock.operators.color.adjust")
    image = IMAGES[1]
    [equalized] = _run(_one(a.equalize), images=[image])
    expected = np.stack([cv2.equalizeHist(np.ascontiguousarray(image[:, :, c])) for c in range(3)], axis=2)
    np.testing.assert_array_equal(equalized, expected)


def test_rotate_turns_counter_clockwise_by_the_magnitude_with_the_fill():
    image = np.zeros((21, 31, 3), np.uint8)
    image[10, 20:] = 255  # a ray to the right of the centre
    rotate = a.rotate.augmentation(mag_range=(0, 90), randomly_negate=False)
    [turned] = _run(_one(rotate, 30, 31, fill_value=128, interp_type=None), images=[image])
    assert turned.shape == image.shape  # keep_size, as torchvision's rotate
    assert turned[1:5, 15].min() > 200 and turned[10, 17:25].max() < 100  # the ray now points up
    assert (turned[0, 0] == 128).all()  # the corners come from outside: the fill


# ---- selection -----------------------------------------------------------------------------------
def test_each_sample_draws_its_own_operation_and_every_operation_is_drawn():
    suite = [a.identity, a.invert, a.posterize.augmentation((1, 1))]
    images = [smooth_image(12, 12, 3, seed=i) for i in range(48)]
    outputs = _run(lambda data: rand_augment.apply_rand_augment(suite, data, n=1, m=0, num_magnitude_bins=1),
                   images=images)
    chosen = []
    for image, output in zip(images, outputs):
        candidates = [image, 255 - image, image & 0x80]
        matches = [index for index, candidate in enumerate(candidates) if np.array_equal(candidate, output)]
        assert matches, "a sample matches none of the operations"
        chosen.append(matches[0])
    assert set(chosen) == {0, 1, 2}


def test_policies_are_deterministic_for_a_seed_whatever_the_threads():
    build = lambda data: rand_augment.apply_rand_augment(  # noqa: E731
        [a.rotate, a.posterize, a.solarize, a.invert, a.auto_contrast, a.identity], data, n=2, m=17)
    one = _run(build, seed=5, num_threads=1)
    two = _run(build, seed=5, num_threads=2)
    other = _run(build, seed=6, num_threads=1)
    assert all(np.array_equal(x, y) for x, y in zip(one, two))
    assert not all(np.array_equal(x, y) for x, y in zip(one, other))


FULL_POLICIES = {
    "rand_augment": lambda data: rand_augment.rand_augment(data, n=2, m=9),
    "rand_augment with shape": lambda data, shapes: rand_augment.rand_augment(data, n=2, m=9, shape=shapes),
    "trivial_augment_wide": lambda data: trivial_augment.trivial_augment_wide(data),
    "auto_augment": lambda data: auto_augment.auto_augment(data),
}


@pytest.mark.parametrize("policy", list(FULL_POLICIES))
def test_policies_on_the_gpu_match_the_cpu(policy):
    build = FULL_POLICIES[policy]
    images = IMAGES[:6]
    on_cpu = _run(build, images=images)
    on_gpu = _run(build, device="gpu", images=images)
    for index, (gpu, cpu) in enumerate(zip(on_gpu, on_cpu)):
        assert gpu.shape == cpu.shape and gpu.dtype == cpu.dtype
        difference = np.abs(gpu.astype(np.float64) - cpu.astype(np.float64))
        assert difference.mean() <= 1.0, f"{policy}, sample {index}: mean difference {difference.mean():.2f}"


# ---- the tables against torchvision's -----------------------------------------------------------
def _torchvision_space(transform_class, bins, height=224, width=224):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    space = getattr(v2, transform_class)._AUGMENTATION_SPACE
    return {TORCHVISION_NAMES[name]: (np.asarray(magnitudes(bins, height, width), np.float64), signed)
            for name, (magnitudes, signed) in space.items()}


def _our_space(suite, bins, width=224):
    table = {}
    for aug in suite:
        if aug.mag_range is None:
            table[aug.name] = (None, False)
            continue
        magnitudes = np.linspace(aug.mag_range[0], aug.mag_range[1], bins)
        if aug.name == "posterize":
            magnitudes = np.array([int(round(float(m))) for m in magnitudes], np.float64)
        if aug.name == "solarize":  # torchvision's table is in units of the image's largest value (255)
            magnitudes = magnitudes / 255
        if aug.name.startswith("translate") and aug.mag_range[1] < 1:
            magnitudes = magnitudes * width
        table[aug.name] = (magnitudes, aug.randomly_negate)
    return table


@pytest.mark.parametrize("transform_class, suite, bins", [
    ("RandAugment", rand_augment.get_rand_augment_suite(use_shape=True), 31),
    ("TrivialAugmentWide", trivial_augment.get_trivial_augment_wide_suite(use_shape=False), 31),
])
def test_suites_match_torchvisions_operations_and_magnitudes(transform_class, suite, bins):
    theirs = _torchvision_space(transform_class, bins)
    ours = _our_space(suite, bins)
    assert set(ours) == set(theirs)
    for name, (magnitudes, signed) in theirs.items():
        our_magnitudes, our_signed = ours[name]
        if magnitudes.ndim == 0:  # an operation without magnitude
            assert our_magnitudes is None, name
            continue
        assert our_signed == signed, name
        np.testing.assert_allclose(our_magnitudes, magnitudes, rtol=1e-5, atol=1e-4, err_msg=name)


def test_auto_augment_image_net_policy_matches_torchvisions():
    v2 = pytest.importorskip("torchvision.transforms.v2")
    theirs = v2.AutoAugment(v2.AutoAugmentPolicy.IMAGENET)._policies
    ours = auto_augment.get_image_net_policy().sub_policies
    assert len(ours) == len(theirs)
    for our_sub, their_sub in zip(ours, theirs):
        assert [(aug.name, probability, magnitude_bin) for aug, probability, magnitude_bin in our_sub] == \
            [(TORCHVISION_NAMES[name], probability, magnitude_bin) for name, probability, magnitude_bin in their_sub]
    space = _torchvision_space("AutoAugment", 10)
    for aug in {aug for sub in ours for aug, _, _ in sub}:
        if aug.mag_range is not None:
            np.testing.assert_allclose(_our_space([aug], 10)[aug.name][0], space[aug.name][0], atol=1e-4,
                                       err_msg=aug.name)


# ---- bad arguments -------------------------------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda data: rand_augment.rand_augment(data, n=2, m=31), "m must be an int in"),
    (lambda data: rand_augment.rand_augment(data, n=-1, m=3), "n must be a non-negative int"),
    (lambda data: rand_augment.rand_augment(data, n=1, m=3, excluded=["rotat"]), "not in the suite"),
    (lambda data: auto_augment.auto_augment(data, policy_name="cifar"), "unknown policy"),
    (lambda data: rand_augment.apply_rand_augment([a.identity], data, n=1, m=0, speed=3), "no augmentation takes"),
])
def test_bad_arguments_are_named_where_the_policy_is_called(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        _run(call)


# ---- the fused step against the augmentations run as operators -----------------------------------
def _suite_for_step():
    suite = rand_augment.get_rand_augment_suite(use_shape=False) + [a.invert, a.solarize_add]
    return [aug for aug in suite]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("name", [aug.name for aug in _suite_for_step()])
def test_the_fused_step_matches_each_augmentation_run_on_its_own(name, device):
    """auto_aug runs a policy's step as one operator (augment_step); each operation it applies
    matches the augmentation's own function over fn operators (within a grey level: the contrast
    mean is summed in another order, bilinear sampling rounds once)."""
    from penstock.auto_aug.core import apply_step, step_table
    aug = next(aug for aug in _suite_for_step() if aug.name == name)
    bins, magnitude_bin = 31, 23
    images = IMAGES[:4]
    own = _run(lambda data: aug(data, magnitude_bin=magnitude_bin, num_magnitude_bins=bins,
                                **{k: v for k, v in {"fill_value": 128, "interp_type": None}.items()
                                   if k in aug.extras}), device=device, images=images)
    fused = _run(lambda data: apply_step(data, [aug], [step_table(aug, bins)], 0, magnitude_bin, 128, None),
                 device=device, images=images)
    for index, (mine, theirs) in enumerate(zip(fused, own)):
        difference = np.abs(mine.astype(np.float64) - theirs.astype(np.float64))
        assert difference.max() <= 1 and difference.mean() <= 0.05, \
            f"{name} on {device}, sample {index}: max {difference.max()}, mean {difference.mean():.3f}"


def test_suites_with_augmentations_of_ones_own_run_through_conditionals():
    from penstock.auto_aug.core import augmentation

    @augmentation
    def halve(data, _):
        return fn.cast(data // 2, dtype=types.UINT8)

    images = [smooth_image(12, 12, 3, seed=i) for i in range(32)]
    outputs = _run(lambda data: rand_augment.apply_rand_augment([a.identity, halve], data, n=1, m=0,
                                                                num_magnitude_bins=1), images=images)
    chosen = {int(np.array_equal(output, image // 2)) for image, output in zip(images, outputs)}
    assert chosen == {0, 1}


def test_a_steps_draws_group_the_samples_by_operation_and_row_and_name_bad_rows():
    """The GPU form of a step works per distinct (operation, row) pair: every sample is in the
    draw of its own pair, once; an op_index or row beyond the tables is an error naming it."""
    from penstock.auto_aug.core import step_table
    from penstock.operators.image.augment_step import Steps
    from penstock.schema import Arguments
    chosen = [a.rotate, a.posterize, a.identity]
    steps = Steps(Arguments({"kinds": [aug.name if aug.name in ("rotate", "posterize") else "identity" for aug in chosen],
                             "parameters": [step_table(aug, 31) for aug in chosen]}))
    rng = np.random.default_rng(3)
    op_index = rng.integers(0, 3, 200)
    row = rng.integers(0, 2, 200) * 31 + 9
    row[op_index == 2] = 0
    draws = steps.draws(op_index, row)
    seen = np.concatenate([draw.samples for draw in draws])
    assert sorted(seen.tolist()) == list(range(200))
    for draw in draws:
        assert np.all(op_index[draw.samples] == draw.pair[0]) and np.all(row[draw.samples] == draw.pair[1])
        assert draw.kind == steps.kinds[draw.pair[0]]
        np.testing.assert_array_equal(draw.parameters, steps.tables[draw.pair[0]][draw.pair[1]])
    with pytest.raises(ValueError, match="op_index 3 for 3 operations"):
        steps.draws([0, 3], [0, 0])
    with pytest.raises(ValueError, match=r"parameter row 62 of a table of 62 \(identity\)"):
        steps.draws([2, 2], [0, 62])
