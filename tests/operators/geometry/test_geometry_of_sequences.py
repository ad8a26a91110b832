"""Image operators over FHWC sequences (and resize over volumes and planar images on the GPU, at the
end): each frame is what the operator gives that frame as an HWC
image with the sample's arguments and random draws (exact, on the CPU), and the GPU form gives the
CPU form's frames (within the GPU resampling's tolerance against the CPU's: 1 level of 255 at most,
0.1 on average). A sequence of no frames gives none. DALI's own results are in the conformance tier."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import gpu_or_emulated, run_batches

import penstock
from penstock import fn, types

CALLS = {
    "rotate": lambda x, d: fn.rotate(x, angle=25.0, device=d),
    "warp_affine": lambda x, d: fn.warp_affine(x, matrix=[0.9, 0.1, 1.0, -0.05, 1.1, 2.0], device=d),
    "warp_perspective": lambda x, d: fn.experimental.warp_perspective(
        x, matrix=[1.0, 0.1, 1.0, 0.05, 1.0, 2.0, 0.001, 0.0, 1.0], device=d),
    "random_resized_crop": lambda x, d: fn.random_resized_crop(x, size=(9, 7), device=d),
    # (mirror counts the sequence's layout, frames included, as DALI: the conformance tier checks it)
    "resize_crop_mirror": lambda x, d: fn.resize_crop_mirror(x, size=(14, 12), crop=(9, 7), device=d),
    "crop": lambda x, d: fn.crop(x, crop=(9, 7), crop_pos_x=0.2, device=d),
}


def outputs(call, samples: list, layout: str, device: str = "cpu", out_layout: str | None = None) -> list:
    with gpu_or_emulated():
        (batch,), = run_batches(lambda node: call(node.gpu() if device == "gpu" else node, device), samples,
                                num_threads=1, seed=5, layout=layout, device_id=0 if device == "gpu" else None)
    assert batch.layout() == (out_layout or layout)
    return [np.asarray(sample) for sample in (batch.as_cpu() if device == "gpu" else batch)]


def sequences() -> list:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 255, (frames, height, width, 3), dtype=np.uint8)
            for frames, height, width in ((3, 20, 16), (2, 15, 22), (0, 12, 10))]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_frame_is_the_operator_on_that_frame(name):
    samples = sequences()
    sequenced = outputs(CALLS[name], samples, "FHWC")
    empty_frame_shape = outputs(CALLS[name], [np.zeros(samples[2].shape[1:], np.uint8)], "HWC")[0].shape
    assert sequenced[2].shape == (0, *empty_frame_shape)
    for frame in range(2):
        images = [sample[min(frame, len(sample) - 1)] for sample in samples[:2]]
        alone = outputs(CALLS[name], images, "HWC")
        for index in range(2):
            if frame < len(samples[index]):
                np.testing.assert_array_equal(sequenced[index][frame], alone[index], err_msg=f"{name} frame {frame}")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_gpu_form_gives_the_cpu_frames(name):
    samples = sequences()
    cpu, gpu = outputs(CALLS[name], samples, "FHWC"), outputs(CALLS[name], samples, "FHWC", "gpu")
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert on_cpu.shape == on_gpu.shape and on_cpu.dtype == on_gpu.dtype
        difference = np.abs(on_cpu.astype(np.int64) - on_gpu.astype(np.int64))
        if difference.size:
            assert difference.max() <= 1 and difference.mean() <= 0.1, name


@pytest.mark.parametrize("mirror", [1, 2, 3])
def test_the_gpu_form_mirrors_sequences_as_the_cpu_form(mirror):
    def call(x, device):
        return fn.resize_crop_mirror(x, size=(14, 12), crop=(9, 7), mirror=mirror, device=device)
    samples = sequences()
    for on_cpu, on_gpu in zip(outputs(call, samples, "FHWC"), outputs(call, samples, "FHWC", "gpu")):
        difference = np.abs(on_cpu.astype(np.int64) - on_gpu.astype(np.int64))
        assert on_cpu.shape == on_gpu.shape and (not difference.size or difference.max() <= 1)


def test_a_sequence_layout_an_operator_does_not_take_is_refused_where_called():
    with pytest.raises(ValueError, match=r'rotate: the layout "FCHW" does not match any of the allowed layouts'):
        outputs(CALLS["rotate"], [np.zeros((2, 3, 8, 8), np.uint8)], "FCHW")


@pytest.mark.parametrize("kwargs", [dict(crop=(9, 7), mirror=1, dtype=types.UINT8, pad_output=True),
                                    dict(crop=(2, 9, 7), crop_pos_z=1.0, mean=[10.0, 20, 30], std=[2.0, 3, 4]),
                                    dict(crop=(30, 7), out_of_bounds_policy="pad", fill_values=[1.0, 2, 3])])
def test_crop_mirror_normalize_of_sequences_on_both_devices(kwargs):
    """Each frame of FCHW output is the CHW output of that frame, where the window keeps every frame;
    the GPU form gives the CPU form's values (float32 arithmetic on both: within 1e-5)."""
    def call(x, device, output_layout="FCHW"):
        return fn.crop_mirror_normalize(x, output_layout=output_layout, device=device, **kwargs)
    samples = sequences()[:2]
    cpu, gpu = outputs(call, samples, "FHWC", out_layout="FCHW"), outputs(call, samples, "FHWC", "gpu", "FCHW")
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert on_cpu.shape == on_gpu.shape and on_cpu.dtype == on_gpu.dtype
        np.testing.assert_allclose(on_gpu.astype(np.float64), on_cpu.astype(np.float64), rtol=0, atol=1e-5)
    if "crop_pos_z" not in kwargs:
        for frame in range(2):
            alone = outputs(lambda x, device: call(x, device, "CHW"), [sample[frame] for sample in samples], "HWC",
                            out_layout="CHW")
            for index in range(2):
                np.testing.assert_array_equal(cpu[index][frame], alone[index])


@pytest.mark.parametrize("name, layout, shape, kwargs", [
    ("resize", "FHWC", (3, 10, 12, 3), dict(size=(6, 7))),
    ("resize", "DHWC", (5, 10, 12, 3), dict(size=(3, 6, 7), interp_type=types.INTERP_CUBIC)),
    ("resize", "CDHW", (2, 5, 10, 12), dict(resize_z=8, resize_x=5, mode="stretch")),
    ("resize", "CHW", (3, 10, 12), dict(size=(13, 7), antialias=False)),
    ("resize_crop_mirror", "DHWC", (6, 10, 12, 3), dict(size=(4, 7, 9), crop=(3, 5, 6), crop_pos_z=1.0, mirror=5)),
    ("resize_crop_mirror", "CDHW", (2, 6, 10, 12), dict(resize_z=5, resize_x=8, mode="stretch", crop_d=3, crop_h=4,
                                                       crop_w=4)),
    ("resize_crop_mirror", "FCHW", (3, 3, 10, 12), dict(size=(8, 9), crop=(5, 6), mirror=1)),
    ("resize_crop_mirror", "CHW", (3, 10, 12), dict(size=(8, 9), crop=(5, 6), mirror=3)),
])
def test_resizing_volumes_sequences_and_planes_gives_the_cpu_values_on_the_gpu(name, layout, shape, kwargs):
    samples = [np.random.default_rng(seed).integers(0, 255, shape, dtype=np.uint8) for seed in (1, 2)]

    def call(x, device):
        return getattr(fn, name)(x, device=device, **kwargs)
    for on_cpu, on_gpu in zip(outputs(call, samples, layout), outputs(call, samples, layout, "gpu")):
        np.testing.assert_array_equal(on_gpu, on_cpu)


MATRIX_3D = (0.9, 0.1, 0.0, 1.0, -0.05, 1.1, 0.1, -0.5, 0.02, 0.0, 0.95, 0.7)  # output -> input, (x, y, z) rows


@pytest.mark.parametrize("kwargs", [dict(), dict(fill_value=9.0), dict(interp_type=types.INTERP_NN),
                                    dict(size=(4, 7, 5), dtype=types.FLOAT)])
def test_warp_affine_of_volumes_against_scipy_and_on_both_devices(kwargs):
    """Trilinear sampling against scipy.ndimage.affine_transform (order 1, the edges repeated or the
    fill outside), within 1 level of 255 (float64 against DALI's float32); the GPU form gives the CPU
    form's values."""
    from scipy import ndimage
    samples = [np.random.default_rng(seed).integers(0, 255, (5, 8, 9, 2), dtype=np.uint8) for seed in (1, 2)]

    def call(x, device):
        return fn.warp_affine(x, matrix=MATRIX_3D, device=device, **kwargs)
    cpu, gpu = outputs(call, samples, "DHWC"), outputs(call, samples, "DHWC", "gpu")
    for on_cpu, on_gpu in zip(cpu, gpu):
        np.testing.assert_array_equal(on_gpu, on_cpu)
    if "interp_type" in kwargs:
        return
    matrix = np.reshape(MATRIX_3D, (3, 4))[::-1]  # rows and columns to (z, y, x), the arrays' axes
    linear = np.ascontiguousarray(matrix[:, :3][:, ::-1])
    offset = linear @ np.full(3, 0.5) + matrix[:, 3] - 0.5  # DALI's voxel centres at +0.5
    for sample, got in zip(samples, cpu):
        out_shape = got.shape[:3]
        for channel in range(2):
            want = ndimage.affine_transform(sample[..., channel].astype(np.float64), linear, offset, out_shape,
                                            order=1, mode="grid-constant" if "fill_value" in kwargs else "nearest",
                                            cval=kwargs.get("fill_value", 0.0))
            assert np.abs(got[..., channel].astype(np.float64) - want).max() <= 1.0


@pytest.mark.parametrize("kwargs", [dict(angle=30.0, axis=(0, 0, 1)), dict(angle=-75.0, axis=(1, 1, 0)),
                                    dict(angle=40.0, axis=(0, 1, 0), keep_size=True, fill_value=5.0),
                                    dict(angle=200.0, axis=(1, 2, 3), size=(6, 7, 8), dtype=types.FLOAT)])
def test_rotate_of_volumes_against_scipy_and_on_both_devices(kwargs):
    """A volume turned about its centre: against scipy.ndimage.affine_transform with the same map
    (the centre of the output onto the centre of the input, Rodrigues' rotation), within 1 level of
    255; the GPU form gives the CPU form's values."""
    from scipy import ndimage
    from scipy.spatial.transform import Rotation
    samples = [np.random.default_rng(seed).integers(0, 255, (5, 8, 9, 2), dtype=np.uint8) for seed in (1, 2)]

    def call(x, device):
        return fn.rotate(x, device=device, **kwargs)
    cpu, gpu = outputs(call, samples, "DHWC"), outputs(call, samples, "DHWC", "gpu")
    for on_cpu, on_gpu in zip(cpu, gpu):
        np.testing.assert_array_equal(on_gpu, on_cpu)
    axis = np.asarray(kwargs["axis"], np.float64)
    # output -> input over (x, y, z): a turn by -angle about the axis
    turn = Rotation.from_rotvec(-np.radians(kwargs["angle"]) * axis / np.linalg.norm(axis)).as_matrix()
    linear = turn[::-1, ::-1]  # over the arrays' (z, y, x)
    for sample, got in zip(samples, cpu):
        in_centre, out_centre = np.array(sample.shape[:3]) / 2, np.array(got.shape[:3]) / 2
        offset = in_centre - linear @ out_centre + linear @ np.full(3, 0.5) - 0.5
        for channel in range(2):
            want = ndimage.affine_transform(sample[..., channel].astype(np.float64), linear, offset, got.shape[:3],
                                            order=1, mode="grid-constant" if "fill_value" in kwargs else "nearest",
                                            cval=kwargs.get("fill_value", 0.0))
            assert np.abs(got[..., channel].astype(np.float64) - want).max() <= 1.0


@pytest.mark.parametrize("layout, shapes", [("HWC", [(10, 12, 3), (7, 5, 3)]), ("DHWC", [(4, 10, 12, 3), (3, 7, 5, 3)])])
def test_resize_saves_each_inputs_spatial_shape_on_both_devices(layout, shapes):
    samples = [np.zeros(shape, np.uint8) for shape in shapes]
    size = (6, 7) if layout == "HWC" else (2, 6, 7)
    for device in ("cpu", "gpu"):
        @penstock.pipeline_def(batch_size=2, num_threads=1, device_id=0 if device == "gpu" else None)
        def pipeline():
            node = fn.external_source(source=lambda: samples, batch=True, layout=layout)
            return fn.resize(node.gpu() if device == "gpu" else node, size=size, save_attrs=True, device=device)
        with gpu_or_emulated():
            pipe = pipeline()
            try:
                resized, attrs = pipe.run()
            finally:
                pipe.close()
        attrs = attrs.as_cpu() if device == "gpu" else attrs
        assert [np.asarray(value).tolist() for value in attrs] == [list(shape[:-1]) for shape in shapes], device
