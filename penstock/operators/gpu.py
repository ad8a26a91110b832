"""GPU implementations: 'mixed' decoders (nvJPEG's hardware batches, nvImageCodec) and
``DataNode.gpu()``, and 'gpu' image operators over whole ragged batches.

Image operators do not launch work one by one: each extends the batch's deferred ``ImagePlan``
(window, size, flips, per-channel affine map, type, layout), and the plan runs as one Triton kernel
launch when a result is needed, so crop -> resize -> mirror -> normalize -> cast -> CHW is one pass
over the pixels. Geometry and argument rules are the CPU operators' own functions, shared.

These register when PyTorch sees a CUDA GPU and Triton is installed; the decoders also need
nvImageCodec. ``PENSTOCK_GPU_ON_CPU=1`` (with ``TRITON_INTERPRET=1``) registers them over CPU
tensors instead, which is how the test suite runs the GPU path on machines without a GPU.
"""
from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from penstock import registry, types
from penstock.kernels import cpu_image
from penstock.operators import decoders, geometry
from penstock.operators.base import BatchOperator

GPU_ON_CPU = os.environ.get("PENSTOCK_GPU_ON_CPU") == "1"


def _runtime_problem() -> str | None:
    """Why GPU operators cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not GPU_ON_CPU and not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed (pip install triton)"
    return None


def torch_device(context):
    import torch
    if GPU_ON_CPU:
        return torch.device("cpu")
    device_id = context.device_id if context.device_id not in (None, -1) else 0
    return torch.device("cuda", device_id)


def _plan_of(value):
    from penstock.kernels.image_plan import ImagePlan
    if isinstance(value, ImagePlan):
        return value
    return ImagePlan.of(value)


def _geometry_plan(value):
    """A plan that geometry steps can still be folded into."""
    from penstock.kernels.image_plan import ImagePlan
    plan = _plan_of(value)
    if plan.geometry_final:
        plan = ImagePlan.of(plan.materialize()[0])
    return plan


def _torch_dtype(dtype: types.DALIDataType):
    import torch
    return getattr(torch, np.dtype(dtype.numpy).name)


def _filter_id(interp: types.DALIInterpType) -> int:
    from penstock.kernels import triton_resample as resample
    return {types.INTERP_NN: resample.FILTER_NEAREST, types.INTERP_CUBIC: resample.FILTER_CUBIC,
            types.INTERP_LANCZOS3: resample.FILTER_LANCZOS3}.get(interp, resample.FILTER_LINEAR)


class ToGpu(BatchOperator):
    """CPU samples to the GPU: one copy through pinned staging memory for the whole batch."""

    def __init__(self, args, context):
        super().__init__(args, context)
        self._staging = None

    def run_batch(self, inputs, args, batch):
        from penstock.kernels.pinned import PinnedStaging, upload_arrays
        samples = [np.ascontiguousarray(sample) for sample in inputs[0]]
        if not samples:
            return []
        if self._staging is None:
            self._staging = PinnedStaging()
        if len({(s.shape, s.dtype) for s in samples}) == 1:
            return list(upload_arrays(self._staging, batch.device, [np.stack(samples)])[0])
        return upload_arrays(self._staging, batch.device, samples)


class MixedDecoder(BatchOperator):
    """Decodes on the GPU. The CPU workers parse each header and choose its window (random crop,
    fixed crop, slice: the CPU decoder of the same name decides, so both devices choose the same
    windows for the same seed) and tell which JPEGs the hardware decoders take; the GPU stage then
    decodes the batch, ``hw_decoder_load`` of those on the hardware JPEG engines (one nvJPEG call)
    and the rest through nvImageCodec on CUDA cores."""

    cpu_class = None
    prepares_on_cpu = True
    portable = True  # what prepare() returns is plain data: it can come from a worker process

    def __init__(self, args, context):
        super().__init__(args, context)
        self._windows = self.cpu_class(args, context)
        self._engine = None

    def draw(self, rng, count):
        return self._windows.draw(rng, count)

    @property
    def engines(self) -> list[str]:
        if self._engine is None:
            return ["CPU threads"]
        engines = []
        if self._engine.decoded_on_gpu:
            engines.append("GPU (hardware JPEG engines and CUDA cores)")
        if self._engine.decoded_on_cpu:
            engines.append("CPU (formats the GPU decoders do not take)")
        return engines

    def prepare(self, inputs, args, sample):
        """On a CPU worker (thread or process): an EncodedImage (the data, its size and window); the
        decoded window itself when the GPU is emulated on the CPU."""
        if GPU_ON_CPU:
            return np.asarray(self._windows.run(inputs, args, sample))
        return self.encoded(inputs, args, sample)

    def encoded(self, inputs, args, sample):
        """The EncodedImage of one sample: a JPEG's data, size, window, and whether the hardware
        JPEG decoders take it (from the header). Other formats, which the GPU decoders do not take,
        are decoded here by the CPU decoder of the same name (the same window for the same draws)
        and go to the GPU as pixels: decoded once, and not on the thread that launches the GPU work."""
        from penstock.kernels import image_codecs
        from penstock.kernels.nvimgcodec_decode import EncodedImage
        data = np.asarray(inputs[0])
        if not image_codecs.is_jpeg(data):
            image = np.ascontiguousarray(self._windows.run(inputs, args, sample))
            return EncodedImage((image, None, image.shape[0], image.shape[1], False))
        height, width, hardware = image_codecs.jpeg_header(data)
        return EncodedImage((data, self._clipped_window(height, width, inputs, args, sample), height, width,
                             hardware))

    def _clipped_window(self, height, width, inputs, args, sample):
        window = self._windows.window(height, width, inputs, args, sample)
        if window is not None:
            self._windows._check_window(window, height, width)
            top, left, crop_height, crop_width = window
            top, left = max(top, 0), max(left, 0)
            window = (top, left, min(crop_height, height - top), min(crop_width, width - left))
        return window

    def run_batch(self, inputs, args, batch):
        import torch
        from penstock.kernels.image_plan import ImagePlan
        prepared = inputs[0]
        if GPU_ON_CPU:
            return ImagePlan.of([torch.from_numpy(np.ascontiguousarray(image)) for image in prepared])
        if self._engine is None:
            from penstock.kernels.nvimgcodec_decode import GpuImageDecoder
            self._engine = GpuImageDecoder(batch.device.index or 0, self.context.num_threads,
                                           self.args["output_type"], self.args["hw_decoder_load"],
                                           batch_size_hint=self.context.batch_size)
        def describe(index):  # errors surface when the batch's outputs are made, so they name the operator
            return f"{self.name} on '{batch.source_infos[index]}'" if batch.source_infos else \
                f"{self.name} on sample {index}"

        # the decode runs while the executor finishes the batch before this one; the plan waits
        # for it before its kernel reads the images
        pending = self._engine.submit(prepared, batch.stream, describe)
        return replace(ImagePlan.of(pending.images), pending=pending)

    def output_layout(self, input_layouts):
        return "HWC"

    def close(self):
        if self._engine is not None:  # kept: its counts say which engines decoded
            self._engine.close()


class Resize(BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = _plan_of(inputs[0])
        if plan.resized or plan.geometry_final:
            from penstock.kernels.image_plan import ImagePlan
            plan = ImagePlan.of(plan.materialize()[0])
        first = args[0]
        if not any((first["size"], first["resize_x"], first["resize_y"], first["resize_shorter"],
                    first["resize_longer"])):
            raise ValueError("resize: give resize_x / resize_y, size, resize_shorter or resize_longer")
        sizes = _resized_sizes(plan.sizes, args)
        shrinking = sizes and sizes[0][0] * sizes[0][1] < plan.sizes[0][0] * plan.sizes[0][1]
        interp = (first["min_filter"] if shrinking else first["mag_filter"]) or first["interp_type"]
        plan = plan.with_resize(sizes, _filter_id(interp), first["antialias"])
        if first["dtype"] is not None:
            plan = plan.with_output(dtype=_torch_dtype(first["dtype"]))
        return plan


def _resized_sizes(sizes: list, args: list) -> list:
    """Each sample's size after resize; worked out once per distinct input size when the batch
    shares its arguments, once in all when the output size does not depend on the input."""
    first = args[0] if args else None
    if not all(a is first for a in args):
        return [geometry.resized_shape(size, a) for size, a in zip(sizes, args)]
    if sizes and geometry.fixed_resize_size(first) is not None:
        return [geometry.resized_shape(sizes[0], first)] * len(sizes)
    known: dict = {}
    resized = []
    for size in sizes:
        key = tuple(size)
        if key not in known:
            known[key] = geometry.resized_shape(size, first)
        resized.append(known[key])
    return resized


def _crop_windows(plan, args, op_name: str) -> list:
    """Each sample's crop window; worked out once per distinct (size, arguments): samples share
    argument dictionaries when their per-sample arguments are equal (executor._batch_args)."""
    known: dict = {}
    windows = []
    for (height, width), a in zip(plan.sizes, args):
        key = (height, width, id(a))
        window = known.get(key)
        if window is None:
            placement = geometry.crop_placement(height, width, a)
            if placement is None:
                placement = (0, 0, height, width)
            window = known[key] = cpu_image.fit_window(*placement, height, width, a["out_of_bounds_policy"], op_name)
        windows.append(window)
    return windows


class Crop(BatchOperator):
    def run_batch(self, inputs, args, batch):
        if geometry.crop_size(args[0]) is None:
            raise ValueError("crop: give crop=(height, width), or crop_h and crop_w")
        plan = _geometry_plan(inputs[0])
        plan = plan.with_crop(_crop_windows(plan, args, self.name)).with_fills([a["fill_values"] for a in args])
        if args[0]["dtype"] is not None:
            plan = plan.with_output(dtype=_torch_dtype(args[0]["dtype"]))
        return plan


class Flip(BatchOperator):
    def run_batch(self, inputs, args, batch):
        if any(a["depthwise"] for a in args):
            raise ValueError("flip: 'depthwise' needs volumes (4 dimensions); images have 3")
        return _plan_of(inputs[0]).with_flips([(a["vertical"], a["horizontal"]) for a in args])


class CropMirrorNormalize(BatchOperator):
    def run_batch(self, inputs, args, batch):
        plan = _geometry_plan(inputs[0])
        channels = plan.channels
        if any(geometry.crop_size(a) is not None for a in args):
            plan = plan.with_crop(_crop_windows(plan, args, self.name)).with_fills([a["fill_values"] for a in args])
        plan = plan.with_flips([(0, a["mirror"]) for a in args])
        affine_maps: dict = {}  # (mean, std, scale, shift) -> (multipliers, addends): usually one for the batch
        multipliers, addends = [], []
        for a in args:
            key = (a["mean"], a["std"], a["scale"], a["shift"])
            affine = affine_maps.get(key)
            if affine is None:
                affine = affine_maps[key] = _normalization(a, channels)
            multipliers.append(affine[0])
            addends.append(affine[1])
        first = args[0]
        return plan.with_affine(multipliers, addends).with_output(
            dtype=_torch_dtype(first["dtype"]), chw=first["output_layout"] == "CHW",
            pad_channels=first["pad_output"] and channels == 3)

    def output_layout(self, input_layouts):
        return self.args["output_layout"]


def _normalization(args: dict, channels: int) -> tuple[tuple, tuple]:
    """crop_mirror_normalize's (x - mean) / std * scale + shift as per-channel multipliers and addends."""
    for name in ("mean", "std"):
        if len(args[name]) not in (1, channels):
            raise ValueError(f"crop_mirror_normalize: argument '{name}' has {len(args[name])} values for "
                             f"{channels}-channel images")
    if any(value == 0 for value in args["std"]):
        raise ValueError("crop_mirror_normalize: argument 'std' must not contain 0")
    std = np.broadcast_to(np.asarray(args["std"], np.float64), (channels,))
    mean = np.broadcast_to(np.asarray(args["mean"], np.float64), (channels,))
    return tuple((args["scale"] / std).tolist()), tuple((args["shift"] - mean * args["scale"] / std).tolist())


class Cast(BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        value = inputs[0]
        target = _torch_dtype(args[0]["dtype"])
        from penstock.kernels.image_plan import ImagePlan
        if isinstance(value, ImagePlan) or (value and value[0].dim() == 3 and not value[0].dtype.is_complex):
            plan = _plan_of(value)
            if plan.dtype is None or plan.dtype.is_floating_point or plan.dtype == torch.uint8:
                return plan.with_output(dtype=target)
            value = plan.materialize()[0]
        return [_saturate(sample, target) for sample in value]


def _saturate(tensor, dtype):
    import torch
    if dtype.is_floating_point or dtype == torch.bool:
        return tensor.to(dtype)
    info = torch.iinfo(dtype)
    if tensor.dtype.is_floating_point:
        tensor = torch.round(tensor)
    return tensor.clamp(info.min, info.max).to(dtype)


class Transpose(BatchOperator):
    output_layout = geometry.Transpose.output_layout

    def run_batch(self, inputs, args, batch):
        perm = args[0]["perm"]
        from penstock.kernels.image_plan import ImagePlan
        plan = inputs[0] if isinstance(inputs[0], ImagePlan) else None
        if plan is not None and tuple(perm or ()) == (2, 0, 1) and not plan.chw:
            return plan.with_output(chw=True)
        samples = plan.materialize()[0] if plan is not None else inputs[0]
        perm = perm or tuple(reversed(range(samples[0].dim())))
        return [sample.permute(*perm).contiguous() for sample in samples]


class Normalize(BatchOperator):
    def run_batch(self, inputs, args, batch):
        import torch
        from penstock.kernels.image_plan import ImagePlan
        samples = inputs[0].materialize()[0] if isinstance(inputs[0], ImagePlan) else inputs[0]
        results = []
        for sample, a in zip(samples, args):
            if a["batch"]:
                raise ValueError("normalize: batch=True (statistics over the whole batch) is not supported; "
                                 "compute per-sample statistics (batch=False) or pass mean and stddev")
            if a["axis_names"]:
                raise ValueError("normalize: axis_names needs the input's layout; pass axes=(...) instead")
            data = sample.to(torch.float32)
            axes = tuple(a["axes"]) if a["axes"] is not None else tuple(range(data.dim()))
            mean = torch.tensor(a["mean"], device=data.device) if a["mean"] is not None else \
                data.mean(dim=axes, keepdim=True)
            if a["stddev"] is not None:
                stddev = torch.tensor(a["stddev"], device=data.device)
            else:
                count = int(np.prod([data.shape[axis] for axis in axes]))
                stddev = (((data - mean) ** 2).sum(dim=axes, keepdim=True) / max(count - a["ddof"], 1)).sqrt()
            denominator = (stddev ** 2 + a["epsilon"]).sqrt()
            result = torch.where(denominator == 0, torch.zeros_like(data), (data - mean) / denominator)
            results.append(_saturate(result * a["scale"] + a["shift"], _torch_dtype(a["dtype"])))
        return results


class Rotate(BatchOperator):
    """Rotation by bilinear (or nearest) sampling with torch's grid_sample: one call for the batch
    when every sample has the same input and output size, else one per sample."""

    def run_batch(self, inputs, args, batch):
        import torch
        import torch.nn.functional as functional
        from penstock.kernels.image_plan import ImagePlan
        samples = inputs[0].materialize()[0] if isinstance(inputs[0], ImagePlan) else \
            [s.tensor() if hasattr(s, "tensor") else s for s in inputs[0]]
        thetas, sizes = [], []
        for sample, a in zip(samples, args):
            height, width = sample.shape[:2]
            out_height, out_width = geometry.rotated_size(height, width, a["angle"], a)
            forward = np.vstack([geometry.rotation_matrix(height, width, out_height, out_width, a["angle"]), [0, 0, 1]])
            # affine_grid works in normalized coordinates (align_corners=False): pixel centre x of an
            # image W wide is at (2x + 1) / W - 1; theta maps output coordinates to input ones
            from_output = np.array([[out_width / 2, 0, (out_width - 1) / 2], [0, out_height / 2, (out_height - 1) / 2],
                                    [0, 0, 1]])
            to_input = np.array([[2 / width, 0, 1 / width - 1], [0, 2 / height, 1 / height - 1], [0, 0, 1]])
            thetas.append((to_input @ np.linalg.inv(forward) @ from_output)[:2])
            sizes.append((height, width, out_height, out_width))
        mode = "nearest" if args[0]["interp_type"] is types.INTERP_NN else "bilinear"
        fill = args[0]["fill_value"]
        dtype = _torch_dtype(args[0]["dtype"]) if args[0]["dtype"] else samples[0].dtype

        def rotate(images, theta, size):  # images [N, H, W, C] -> [N, H', W', C]
            planes = images.permute(0, 3, 1, 2).float()
            theta = torch.as_tensor(np.asarray(theta), dtype=torch.float32).to(images.device, non_blocking=True)
            grid = functional.affine_grid(theta, [len(images), 1, size[2], size[3]], align_corners=False)
            ones = torch.ones_like(planes[:, :1])
            sampled = functional.grid_sample(torch.cat([planes, ones], 1), grid, mode=mode, padding_mode="zeros",
                                             align_corners=False)
            coverage = sampled[:, -1:]
            values = sampled[:, :-1] + (1 - coverage) * fill  # outside the input: the fill value
            return _saturate(values.permute(0, 2, 3, 1), dtype)

        if len(set(sizes)) == 1:
            return list(rotate(torch.stack(samples), thetas, sizes[0]))
        return [rotate(sample[None], [theta], size)[0] for sample, theta, size in zip(samples, thetas, sizes)]


class ImageDecoderMixed(MixedDecoder):
    cpu_class = decoders.Image


class ImageRandomCropMixed(MixedDecoder):
    cpu_class = decoders.ImageRandomCrop


class ImageCropMixed(MixedDecoder):
    cpu_class = decoders.ImageCrop


class ImageSliceMixed(MixedDecoder):
    cpu_class = decoders.ImageSlice


GPU_OPERATORS = {"rotate": Rotate, "resize": Resize, "crop": Crop, "flip": Flip, "crop_mirror_normalize": CropMirrorNormalize,
                 "cast": Cast, "transpose": Transpose, "normalize": Normalize}
MIXED_DECODERS = {"decoders.image": ImageDecoderMixed, "decoders.image_random_crop": ImageRandomCropMixed,
                  "decoders.image_crop": ImageCropMixed, "decoders.image_slice": ImageSliceMixed}


def _decoder_problem() -> str | None:
    """Why the mixed decoders cannot run here: what the GPU operators need, and nvImageCodec."""
    problem = _runtime_problem()
    if problem is None and not GPU_ON_CPU:
        try:
            from penstock.kernels.nvimgcodec_decode import library
            library()
        except ImportError as error:
            return str(error)
    return problem


def _register_all() -> None:
    for name, cls in GPU_OPERATORS.items():
        registry.register(name, "gpu", requires=_runtime_problem)(cls)
    registry.register("_to_gpu", "mixed", requires=_runtime_problem)(ToGpu)
    for name, cls in MIXED_DECODERS.items():
        registry.register(name, "mixed", requires=_decoder_problem)(cls)


_register_all()
