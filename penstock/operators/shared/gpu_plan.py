"""What the GPU image operators share: the batch's deferred ``ImagePlan``.

GPU image operators do not launch work one by one: each extends the batch's plan (window, size,
flips, per-channel affine map, type, layout), and the plan runs as one Triton kernel launch when a
result is needed, so crop -> resize -> mirror -> normalize -> cast -> CHW is one pass over the
pixels. Operators that cannot be folded into the plan materialize it and work on tensors.

PyTorch and the kernels are imported when a GPU operator first runs, not when penstock is imported.
"""
from __future__ import annotations

from penstock import types
from penstock.capabilities import ImagePlanStep, LightOnGpu
from penstock.batch import DeferredBatch, PackedBatch


MAX_PLAN_CHANNELS = 4  # the fused kernel keeps one accumulator per channel, four at most


class ExtendsImagePlan(ImagePlanStep, LightOnGpu):
    """A GPU image operator whose only work is to extend the batch's ImagePlan: light GPU work."""


def plan_of(value):
    """The batch as an ImagePlan: the plan itself, or a new plan over its HWC tensors."""
    from penstock.kernels.image_plan import ImagePlan
    from penstock.runtime.pinned import to_device
    if isinstance(value, ImagePlan):
        return value
    if len(value) and (value[0].dim() != 3 or value[0].shape[2] > MAX_PLAN_CHANNELS):
        raise ValueError(f"GPU image operators take HWC images of 1 to {MAX_PLAN_CHANNELS} channels, got a "
                         f"sample of shape {tuple(value[0].shape)}")
    return ImagePlan.of(value if hasattr(value, "layouts") else [_pixels_contiguous(sample) for sample in value],
                        upload=to_device)


def _pixels_contiguous(sample):
    """The sample itself when its pixels are contiguous (rows may be strided), else a contiguous copy
    (an operator's output may be a permuted view)."""
    _, pixel_stride, channel_stride = sample.stride()
    return sample if channel_stride == 1 and pixel_stride == sample.shape[2] else sample.contiguous()


def geometry_plan(value):
    """A plan that geometry steps (crop, resize) can still be folded into."""
    from penstock.kernels.image_plan import ImagePlan
    plan = plan_of(value)
    if plan.geometry_final:
        plan = ImagePlan.of(plan.materialize()[0], upload=plan.upload)
    return plan


def tensors_of(value) -> list:
    """The batch's samples as tensors, running deferred work first."""
    return value.materialize()[0] if isinstance(value, DeferredBatch) else list(value)


def batch_of(value) -> tuple:
    """(samples, fresh): the batch's samples without a view per sample (a PackedBatch when
    deferred work ran or the batch came packed, else the list of tensors), running deferred work
    first; ``fresh`` when that work wrote them into a new buffer that nothing else reads (an
    operator may then change them in place)."""
    if not isinstance(value, DeferredBatch):
        return value, False
    fresh = not getattr(value, "identity", False)
    samples, dense = value.materialize(per_sample=False)
    return (PackedBatch.of_dense(dense) if dense is not None else samples), fresh


def kernel_filter(interp: types.DALIInterpType) -> int:
    """The resample kernel's filter for an interpolation type (the CPU maps the same types to
    OpenCV's filters in kernels.cpu_image)."""
    from penstock.kernels import triton_resample as resample
    return {types.INTERP_NN: resample.FILTER_NEAREST, types.INTERP_CUBIC: resample.FILTER_CUBIC,
            types.INTERP_LANCZOS3: resample.FILTER_LANCZOS3}.get(interp, resample.FILTER_LINEAR)
