"""GPU image operators against their CPU twins, on ragged batches.

Without a GPU the Triton kernel runs in Triton's interpreter over CPU tensors (conftest sets
TRITON_INTERPRET=1), so the fused kernel and the plan logic are checked in CI; with a GPU the same
tests run on CUDA tensors. Tolerances: geometry-only steps with nearest sampling are exact; the
resampling filters match Pillow's antialiased filters within 0.75 grey levels on average, and the
CPU resize (OpenCV after a Gaussian prefilter, an approximation of the same filters) within the
stated mean / max differences; normalization matches within float rounding (fp16: one fp16 step).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import CUDA, gpu_or_emulated, smooth_image
from penstock import types
from penstock.contract import BatchContext, BuildContext, OutputSpec, SampleContext
from penstock.operators.geometry.crop_flip_transpose import Crop, CropGpu, Flip, FlipGpu, Transpose, TransposeGpu
from penstock.operators.geometry.resize import Resize, ResizeGpu
from penstock.operators.geometry.rotate import Rotate, RotateGpu
from penstock.operators.image import normalize
from penstock.operators.shared.gpu_plan import kernel_filter
from penstock.schema import REQUIRED

DEVICE = torch.device("cuda") if CUDA else torch.device("cpu")
CONTEXT = BuildContext(batch_size=3, num_threads=1, device_id=0, seed=5)


def _args(op_name: str, **kwargs) -> dict:
    from penstock import registry
    static, _ = registry.get_schema(op_name).validate(kwargs)
    return static


def _run_gpu(cls, op_name, samples, per_sample=None, **kwargs):
    args = _args(op_name, **kwargs)
    per_sample = per_sample or [{}] * len(samples)
    arg_list = [args.replace(**extra) for extra in per_sample]
    impl = cls(args, CONTEXT)
    tensors = [torch.from_numpy(s).to(DEVICE) for s in samples]
    result = impl.run_batch([tensors], arg_list, BatchContext(None, [], None, DEVICE))
    from penstock.kernels.image_plan import ImagePlan
    if isinstance(result, ImagePlan):
        result = result.materialize()[0]
    return [r.cpu().numpy() for r in result]


def _run_cpu(cls, op_name, samples, per_sample=None, **kwargs):
    args = _args(op_name, **kwargs)
    per_sample = per_sample or [{}] * len(samples)
    impl = cls(args, CONTEXT)
    # what building a pipeline tells the operator first: its input is of HWC images
    impl.declare_outputs((OutputSpec(samples[0].dtype, samples[0].ndim, "HWC"[:samples[0].ndim]),))
    args = impl.args
    return [impl.run((s,), args.replace(**extra), SampleContext(i)) for i, (s, extra) in
            enumerate(zip(samples, per_sample))]


def _ragged(seed=0, channels=3):
    return [smooth_image(23, 31, channels, seed), smooth_image(40, 27, channels, seed + 1),
            smooth_image(17, 17, channels, seed + 2)]


def _compare(got, want, mean_tol, max_tol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        assert diff.mean() <= mean_tol and diff.max() <= max_tol, (diff.mean(), diff.max())


@pytest.mark.parametrize("interp, mean_tol, max_tol", [
    (types.INTERP_LINEAR, 1.5, 6), (types.INTERP_TRIANGULAR, 1.5, 6), (types.INTERP_CUBIC, 2.5, 10),
    ])
@pytest.mark.parametrize("size", [(12, 14), (30, 45)])
def test_resize_matches_cpu(interp, mean_tol, max_tol, size):
    samples = _ragged()
    kwargs = dict(resize_y=size[0], resize_x=size[1], interp_type=interp)
    _compare(_run_gpu(ResizeGpu, "resize", samples, **kwargs),
             _run_cpu(Resize, "resize", samples, **kwargs), mean_tol, max_tol)


@pytest.mark.parametrize("size", [(12, 14), (30, 45), (5, 4)])
def test_nearest_resize_picks_the_cpu_pixels(size):
    """Exact, ties included: a sample position on a pixel boundary ((2y + 1) * in / (2 * out) an
    integer: 27 -> 30 rows has such ties, 8 -> 5 too) takes the later pixel on both devices."""
    samples = _ragged() + [smooth_image(8, 6, seed=9)]
    kwargs = dict(resize_y=size[0], resize_x=size[1], interp_type=types.INTERP_NN)
    for got, want in zip(_run_gpu(ResizeGpu, "resize", samples, **kwargs),
                         _run_cpu(Resize, "resize", samples, **kwargs)):
        np.testing.assert_array_equal(got, want)


def test_nearest_indices_take_the_later_pixel_at_ties_as_torch_nearest_exact():
    from penstock import numeric
    for in_size, out_size in ((8, 5), (40, 30), (27, 30), (7, 3), (3, 7), (100, 33), (1, 4), (4, 1)):
        nearest_exact = torch.nn.functional.interpolate(torch.arange(in_size, dtype=torch.float64)[None, None],
                                                        size=out_size, mode="nearest-exact")[0, 0].numpy()
        np.testing.assert_array_equal(numeric.nearest_indices(in_size, out_size), nearest_exact)


def test_resize_shorter_gives_ragged_sizes_like_cpu():
    samples = _ragged()
    got = _run_gpu(ResizeGpu, "resize", samples, resize_shorter=15)
    want = _run_cpu(Resize, "resize", samples, resize_shorter=15)
    assert [g.shape for g in got] == [w.shape for w in want]
    _compare(got, want, 1.0, 6)


@pytest.mark.parametrize("kwargs", [
    dict(resize_x=14, resize_y=11, roi_start=(3, 5), roi_end=(15, 20)),  # a region of interest
    dict(resize_x=-12, resize_y=9),  # a negative size flips the axis
    dict(resize_x=10, resize_y=-13, roi_start=(0.1, 0.2), roi_end=(0.9, 0.7), roi_relative=True),
    dict(resize_shorter=13.4),  # a fractional size keeps its scale (subpixel_scale)
    dict(resize_shorter=13.4, subpixel_scale=False)])
def test_resize_windows_match_cpu(kwargs):
    """The GPU resize samples the window the CPU form samples: its region of interest, flipped by
    a negative size, moved for a fractional size; within the bilinear tolerance of the other
    resize tests, and exact in shape."""
    samples = _ragged()
    kwargs = dict(kwargs, interp_type=types.INTERP_LINEAR)
    got, want = _run_gpu(ResizeGpu, "resize", samples, **kwargs), _run_cpu(Resize, "resize", samples, **kwargs)
    _compare(got, want, 0.5, 3)


def test_crop_is_exact_with_padding():
    samples = _ragged()
    per_sample = [{"crop_pos_x": 0.0, "crop_pos_y": 1.0}, {"crop_pos_x": 0.5, "crop_pos_y": 0.5},
                  {"crop_pos_x": 1.0, "crop_pos_y": 0.0}]
    kwargs = dict(crop=(20, 20), out_of_bounds_policy="pad", fill_values=(7, 8, 9))
    _compare(_run_gpu(CropGpu, "crop", samples, per_sample, **kwargs),
             _run_cpu(Crop, "crop", samples, per_sample, **kwargs), 0, 0)


def test_crop_out_of_bounds_error_names_operator():
    with pytest.raises(ValueError, match="crop"):
        _run_gpu(CropGpu, "crop", _ragged(), crop=(30, 30))


def test_flip_is_exact():
    samples = _ragged()
    per_sample = [{"horizontal": 1, "vertical": 0}, {"horizontal": 0, "vertical": 1},
                  {"horizontal": 1, "vertical": 1}]
    _compare(_run_gpu(FlipGpu, "flip", samples, per_sample), _run_cpu(Flip, "flip", samples, per_sample),
             0, 0)


@pytest.mark.parametrize("dtype, layout, pad", [(types.FLOAT, "CHW", False), (types.FLOAT16, "CHW", False),
                                                (types.FLOAT, "HWC", True), (types.UINT8, "HWC", False)])
def test_crop_mirror_normalize_matches_cpu(dtype, layout, pad):
    samples = _ragged()
    per_sample = [{"mirror": 1}, {"mirror": 0}, {"mirror": 1}]
    kwargs = dict(crop=(16, 15), mean=(120.0, 110.0, 100.0), std=(50.0, 60.0, 70.0), dtype=dtype,
                  output_layout=layout, pad_output=pad, crop_pos_x=0.3, crop_pos_y=0.6)
    got = _run_gpu(normalize.CropMirrorNormalizeGpu, "crop_mirror_normalize", samples, per_sample, **kwargs)
    want = _run_cpu(normalize.CropMirrorNormalize, "crop_mirror_normalize", samples, per_sample, **kwargs)
    tolerance = {types.FLOAT: 1e-5, types.FLOAT16: 2e-3, types.UINT8: 1}[dtype]
    _compare(got, want, tolerance, tolerance)


def test_fused_resize_then_normalize_is_one_plan_matching_cpu():
    samples = _ragged()
    resize_args = _args("resize", resize_x=12, resize_y=10)
    cmn_args = _args("crop_mirror_normalize", mean=(100.0,), std=(50.0,), dtype=types.FLOAT, output_layout="CHW")
    batch = BatchContext(None, [], None, DEVICE)
    tensors = [torch.from_numpy(s).to(DEVICE) for s in samples]
    plan = ResizeGpu(resize_args, CONTEXT).run_batch([tensors], [resize_args] * 3, batch)
    plan = normalize.CropMirrorNormalizeGpu(cmn_args, CONTEXT).run_batch([plan], [cmn_args.replace(mirror=1)] * 3, batch)
    samples_out, dense = plan.materialize()
    assert dense is not None and tuple(dense.shape) == (3, 3, 10, 12)
    cpu_resized = _run_cpu(Resize, "resize", samples, resize_x=12, resize_y=10)
    cpu_out = _run_cpu(normalize.CropMirrorNormalize, "crop_mirror_normalize", cpu_resized,
                       [{"mirror": 1}] * 3, mean=(100.0,), std=(50.0,), dtype=types.FLOAT, output_layout="CHW")
    _compare([s.cpu().numpy() for s in samples_out], cpu_out, 1.5 / 50, 8.0 / 50)


def test_cast_and_transpose_are_exact():
    samples = _ragged()
    _compare(_run_gpu(normalize.CastGpu, "cast", samples, dtype=types.FLOAT),
             _run_cpu(normalize.Cast, "cast", samples, dtype=types.FLOAT), 0, 0)
    _compare(_run_gpu(TransposeGpu, "transpose", samples, perm=(2, 0, 1)),
             _run_cpu(Transpose, "transpose", samples, perm=(2, 0, 1)), 0, 0)


def test_normalize_matches_cpu():
    samples = [s.astype(np.float32) for s in _ragged()]
    _compare(_run_gpu(normalize.NormalizeGpu, "normalize", samples, axes=(0, 1)),
             _run_cpu(normalize.Normalize, "normalize", samples, axes=(0, 1)), 1e-5, 1e-4)


def test_one_and_four_channel_images():
    for channels in (1, 4):
        samples = _ragged(channels=channels)
        _compare(_run_gpu(ResizeGpu, "resize", samples, resize_x=9, resize_y=11),
                 _run_cpu(Resize, "resize", samples, resize_x=9, resize_y=11), 2.0, 8)


def test_required_marker_is_not_leaked():
    assert all(value is not REQUIRED for value in _args("resize", resize_x=3).values())


@pytest.mark.parametrize("interp, pil_filter", [(types.INTERP_LINEAR, "BILINEAR"), (types.INTERP_CUBIC, "BICUBIC"),
                                                (types.INTERP_LANCZOS3, "LANCZOS")])
def test_resize_matches_pillow_antialiased_filters(interp, pil_filter):
    from PIL import Image
    samples = _ragged()
    got = _run_gpu(ResizeGpu, "resize", samples, resize_x=11, resize_y=9, interp_type=interp)
    want = [np.asarray(Image.fromarray(s).resize((11, 9), getattr(Image, pil_filter))) for s in samples]
    _compare(got, want, 0.75, 4)


@pytest.mark.parametrize("kwargs", [dict(angle=30.0), dict(angle=-75.0, keep_size=True, fill_value=9.0),
                                    dict(angle=15.0, interp_type=types.INTERP_NN)])
def test_rotate_matches_cpu(kwargs):
    samples = _ragged()
    got = _run_gpu(RotateGpu, "rotate", samples, **kwargs)
    want = _run_cpu(Rotate, "rotate", samples, **kwargs)
    # interior pixels; bilinear sampling in float32 (GPU) and OpenCV's fixed point (CPU) differ by a level
    for g, w in zip(got, want):
        assert g.shape == w.shape
        inner = (slice(3, -3), slice(3, -3))
        assert np.abs(g[inner].astype(float) - w[inner]).mean() <= 1.0


def test_packed_images_give_the_same_plan_results_as_separate_tensors():
    """A batch decode's images in one buffer (gaps between them) resample as the same images as
    separate tensors: the kernel reads each at its address, row by row."""
    from penstock.kernels.image_plan import ImagePlan
    from penstock.batch import PackedBatch
    from penstock.runtime.pinned import to_device
    samples = _ragged()
    shapes = [s.shape for s in samples]
    offsets, total = [], 0
    for shape in shapes:
        offsets.append(total)
        total += int(np.prod(shape)) + 37  # unaligned gaps
    buffer = torch.zeros(total, dtype=torch.uint8, device=DEVICE)
    for offset, sample in zip(offsets, samples):
        buffer[offset:offset + sample.size] = torch.from_numpy(sample.reshape(-1)).to(DEVICE)
    packed = PackedBatch(buffer, offsets, shapes)
    assert [tuple(image.shape) for image in packed] == [tuple(shape) for shape in shapes]
    separate = [torch.from_numpy(s).to(DEVICE) for s in samples]
    results = []
    for sources in (packed, separate):
        plan = ImagePlan.of(sources, upload=to_device).with_resize([(10, 12)] * 3, kernel_filter(types.INTERP_LINEAR), True)
        results.append(plan.with_flips([(0, 1)] * 3).with_output(dtype=torch.float32).materialize()[1])
    assert torch.equal(results[0], results[1])


def test_a_ragged_gpu_output_keeps_its_packed_buffer_and_reads_as_its_samples():
    """The pipeline's ragged GPU output is the kernel's one buffer (a PackedBatch): shapes and dtype
    are read without a view per sample, and the samples match the CPU pipeline's."""
    from penstock import devices, fn, pipeline_def
    from penstock.batch import PackedBatch

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, seed=1)
    def resized(device):
        data = fn.external_source(source=lambda: _ragged(), batch=True)
        return fn.resize(data.gpu() if device == "gpu" else data, resize_shorter=12, device=device)

    with gpu_or_emulated():
        pipe = resized("gpu")
        (gpu_out,) = pipe.run()
        pipe.close()
    cpu_pipe = resized("cpu")
    (cpu_out,) = cpu_pipe.run()
    cpu_pipe.close()
    assert isinstance(gpu_out._sample_list, PackedBatch)
    assert gpu_out.shape() == cpu_out.shape() == [(12, 16, 3), (18, 12, 3), (12, 12, 3)]
    assert gpu_out.torch_dtype == torch.uint8 and gpu_out.dtype == types.UINT8 and not gpu_out.is_dense_tensor()
    on_cpu = gpu_out.as_cpu()
    _compare([on_cpu.at(i) for i in range(3)], [cpu_out.at(i) for i in range(3)], 1.5, 6)  # the linear resize tests' tolerances
