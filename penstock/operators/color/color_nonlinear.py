"""Colour operators that are not linear maps: ``equalize``, ``lookup_table`` and
``jpeg_compression_distortion``. They do not fold into the GPU's image plan: the GPU runs the
plan first, then works on each sample's tensor (each class says how)."""
from __future__ import annotations

import threading

import cv2
import numpy as np

from penstock import devices, numeric, registry, types
from penstock.batch import hwc_facts
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.operators.color.adjust import ColorOperator, color_layout
from penstock.operators.shared.gpu_plan import batch_of, tensors_of
from penstock.schema import Arg, ArgError, OpSchema

EQUALIZE_LAYOUTS = ("HW", "HWC", "CHW", "FHW", "FHWC", "FCHW")  # DALI's, in its order
JPEG_LAYOUTS = ("HWC", "FHWC")

registry.register_schema(OpSchema(
    name="equalize", class_name="Equalize",
    doc="Histogram equalization of each channel of each uint8 image, as OpenCV's equalizeHist (and DALI): "
        "level v becomes round(255 * (cdf(v) - cdf(lowest level present)) / (pixels - that count)). Takes the "
        "layouts HW, HWC, CHW and their sequences FHW, FHWC, FCHW (each frame on its own).",
    also_named=(("experimental.equalize", "experimental.Equalize"),),
    input_names=("images",)))

registry.register_schema(OpSchema(
    name="lookup_table", class_name="LookupTable",
    doc="Maps integer values through a table: value v becomes values[i] where keys[i] == v (the last such i), "
        "else default_value. Takes integer data of any shape.",
    args=(Arg("keys", "ints", (), "Input values that have an entry (0 to 65535, within the input type).",
              min=0, max=65535),
          Arg("values", "floats", (), "The entry of each key."),
          Arg("default_value", "float", 0.0, "Output of values that are not keys."),
          Arg("dtype", "dtype", types.FLOAT, "Output type (also named output_dtype, DALI's older name).",
              aliases=("output_dtype",))),
    checks=(lambda static, per_sample: _check_keys_and_values(static),),
    input_names=("input",)))

registry.register_schema(OpSchema(
    name="jpeg_compression_distortion", class_name="JpegCompressionDistortion",
    doc="Encodes each uint8 RGB image (HWC, or each frame of FHWC sequences) as JPEG at ``quality`` and decodes it "
        "again: the artifacts of JPEG compression. Encoded with OpenCV (libjpeg-turbo, 4:2:0 chroma subsampling).",
    args=(Arg("quality", "int", 50, "JPEG quality, 1 (worst) to 100; values outside are taken as the nearest end, "
              "as DALI.", per_sample=True),),
    input_names=("images",)))


def _check_keys_and_values(static: dict) -> None:
    keys, values = static.get("keys") or (), static.get("values") or ()
    if len(keys) != len(values):
        raise ArgError(f"arguments 'keys' and 'values' have {len(keys)} and {len(values)} values; give one value "
                       "per key")


def _require_uint8(dtype, op_name: str) -> None:
    if dtype is not None and np.dtype(dtype) != np.uint8:
        raise TypeError(f"{op_name}: takes uint8 images, got {np.dtype(dtype)}")


# ---- equalize ----------------------------------------------------------------------------------
def hwc_frames(xp, sample, layout: str) -> list:
    """The frames of a sample of one of EQUALIZE_LAYOUTS as HWC views (xp: numpy or torch)."""
    frames = sample if layout[0] == "F" else sample[None]
    inner = layout.lstrip("F")
    if inner == "HW":
        frames = frames[..., None]
    elif inner == "CHW":
        frames = xp.moveaxis(frames, 1, -1)
    return list(frames)


def from_hwc_frames(xp, frames: list, layout: str):
    """hwc_frames' inverse: the HWC frames back in a sample of ``layout``."""
    stacked = xp.stack(frames)
    inner = layout.lstrip("F")
    if inner == "HW":
        stacked = stacked[..., 0]
    elif inner == "CHW":
        stacked = xp.moveaxis(stacked, -1, 1)
    return stacked if layout[0] == "F" else stacked[0]


class EqualizeDeclaration:
    def declare_outputs(self, inputs):
        spec = inputs[0]
        _require_uint8(spec.dtype, self.name)
        self._layout = color_layout(spec, EQUALIZE_LAYOUTS, self.name)
        return spec.but(layout=self._layout) if self._layout else spec

    def layout_of(self, sample) -> str:
        layout = self._layout or color_layout(OutputSpec(ndim=sample.ndim), EQUALIZE_LAYOUTS, self.name)
        if sample.ndim != len(layout):
            raise ValueError(f"{self.name}: a sample of shape {tuple(sample.shape)} in the layout '{layout}'")
        return layout


@registry.register("equalize", "cpu")
class Equalize(EqualizeDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        _require_uint8(image.dtype, self.name)
        layout = self.layout_of(image)
        frames = [np.stack([cv2.equalizeHist(np.ascontiguousarray(frame[:, :, channel]))
                            for channel in range(frame.shape[2])], axis=2) for frame in hwc_frames(np, image, layout)]
        return np.ascontiguousarray(from_hwc_frames(np, frames, layout))


@registry.register("equalize", "gpu", requires=devices.gpu_problem)
class EqualizeGpu(EqualizeDeclaration, BatchOperator):
    """OpenCV's equalizeHist on every channel, the batch at once: every histogram in one launch,
    the tables from their cumulative sums (float32, as OpenCV computes them), looked up by the
    image kernel. No copy to the host, no wait for the GPU. Other layouts than HWC go through the
    same launch as a batch of their HWC frames."""

    def run_batch(self, inputs, args, batch):
        import torch
        if self._layout in ("", "HWC"):
            return self.equalized(batch_of(inputs[0])[0])
        samples = tensors_of(inputs[0])
        layouts = [self.layout_of(sample) for sample in samples]
        frames = [hwc_frames(torch, sample, layout) for sample, layout in zip(samples, layouts)]
        results = tensors_of(self.equalized([frame.contiguous() for group in frames for frame in group]))
        outputs, start = [], 0
        for group, layout in zip(frames, layouts):
            outputs.append(from_hwc_frames(torch, results[start:start + len(group)], layout).contiguous())
            start += len(group)
        return outputs

    def equalized(self, samples):
        import torch

        from penstock.kernels.image_plan import ImagePlan
        from penstock.kernels.triton_filters import run_histograms, run_statistic_tables
        from penstock.runtime.pinned import to_device
        if not len(samples):
            return samples
        channels, dtype, device = hwc_facts(samples)
        _require_uint8(types.to_numpy_dtype(dtype), self.name)
        count = len(samples)
        tables = torch.empty((count, channels, 256), dtype=torch.uint8, device=device)
        run_statistic_tables(run_histograms(samples, upload=to_device), ["equalize"] * count, np.zeros(count),
                             np.arange(count), tables, upload=to_device)
        return ImagePlan.of(samples, upload=to_device).with_tables(tables)


# ---- lookup_table -------------------------------------------------------------------------------
def lookup_entries(args: dict) -> np.ndarray:
    """The table over 0..max(keys), default_value where there is no key, in the output type."""
    keys = args.keys_
    table = np.full(max(keys) + 1 if keys else 0, args.default_value, np.float64)
    for key, value in zip(keys, args.values_):  # in order: a repeated key takes its last value
        table[key] = value
    return numeric.saturate(table, args.dtype.numpy)


def check_keys_fit(keys: tuple, dtype, op_name: str) -> None:
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"{op_name}: takes integer inputs, got {dtype}")
    highest = np.iinfo(dtype).max
    outside = [key for key in keys if key > highest]
    if outside:
        raise ValueError(f"{op_name}: argument 'keys': {outside[0]} is outside the input type {dtype} "
                         f"(0 to {highest})")


class LookupDeclaration:
    def declare_outputs(self, inputs):
        if inputs[0].dtype is not None:
            check_keys_fit(self.args.keys_, inputs[0].dtype, self.name)
        return inputs[0].but(dtype=self.args.dtype.numpy)


@registry.register("lookup_table", "cpu")
class LookupTable(LookupDeclaration, SampleOperator):
    def __init__(self, args, context):
        super().__init__(args, context)
        self._table = lookup_entries(args)
        self._default = numeric.saturate(np.array([args.default_value]), args.dtype.numpy)[0]

    def run(self, inputs, args, sample, out=None):
        data = np.asarray(inputs[0])
        check_keys_fit(args.keys_, data.dtype, self.name)
        if not len(self._table):
            return np.full(data.shape, self._default, self._table.dtype)
        inside = (data >= 0) & (data < len(self._table))
        return np.where(inside, self._table[np.clip(data, 0, len(self._table) - 1)], self._default)


@registry.register("lookup_table", "gpu", requires=devices.gpu_problem)
class LookupTableGpu(LookupDeclaration, BatchOperator):
    """Per sample torch operations on the GPU (an indexed gather from the table, kept on the device)."""

    def __init__(self, args, context):
        super().__init__(args, context)
        self._entries = lookup_entries(args)
        self._default = float(numeric.saturate(np.array([args.default_value]), args.dtype.numpy)[0])
        self._tables: dict = {}  # device -> the table there
        self._lock = threading.Lock()

    def _table_on(self, device):
        import torch
        with self._lock:
            table = self._tables.get(device)
            if table is None:
                table = self._tables[device] = torch.from_numpy(self._entries).to(device)
        return table

    def run_batch(self, inputs, args, batch):
        import torch
        results = []
        for sample in tensors_of(inputs[0]):
            check_keys_fit(self.args.keys_, types.to_numpy_dtype(sample.dtype), self.name)
            table = self._table_on(sample.device)
            if not len(table):
                results.append(torch.full(sample.shape, self._default, dtype=table.dtype, device=sample.device))
                continue
            index = sample.long()
            inside = (index >= 0) & (index < len(table))
            default = torch.tensor(self._default, dtype=table.dtype, device=sample.device)
            results.append(torch.where(inside, table[index.clamp(0, len(table) - 1)], default))
        return results


# ---- jpeg_compression_distortion ----------------------------------------------------------------
class JpegDistortionDeclaration(ColorOperator):
    layouts = JPEG_LAYOUTS
    input_types = (types.UINT8,)

    def expected_channels(self):
        return "JPEG encoding (of RGB images, as DALI's)", 3


def distort_jpeg(image: np.ndarray, quality: int, op_name: str) -> np.ndarray:
    """``image`` (uint8 RGB, HWC or FHWC) through a JPEG of ``quality`` and back, frame by frame."""
    if image.ndim == 4:
        return np.stack([distort_jpeg(frame, quality, op_name) for frame in image])
    bgr = np.ascontiguousarray(image[:, :, ::-1])
    quality = min(max(int(quality), 1), 100)
    ok, encoded = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError(f"{op_name}: OpenCV could not encode a {image.shape} image as JPEG")
    return np.ascontiguousarray(cv2.imdecode(encoded, cv2.IMREAD_COLOR)[:, :, ::-1])


@registry.register("jpeg_compression_distortion", "cpu")
class JpegCompressionDistortion(JpegDistortionDeclaration, SampleOperator):
    def run(self, inputs, args, sample, out=None):
        self.check_sample(inputs[0])
        return distort_jpeg(inputs[0], args.quality, self.name)


@registry.register("jpeg_compression_distortion", "gpu", requires=devices.gpu_problem)
class JpegCompressionDistortionGpu(JpegDistortionDeclaration, BatchOperator):
    """Goes through the CPU form sample by sample: each image is copied to the host, encoded and
    decoded by OpenCV on the executor's CPU workers, and copied back (no GPU JPEG encoder here)."""

    def run_batch(self, inputs, args, batch):
        import torch
        samples = tensors_of(inputs[0])
        for sample in samples:
            self.check_sample(sample)
        hosts = [sample.cpu().numpy() for sample in samples]
        results: list = [None] * len(hosts)

        def distort(index: int):
            def call():
                results[index] = distort_jpeg(hosts[index], args[index].quality, self.name)
            return call
        batch.run_on_workers([distort(index) for index in range(len(hosts))])
        return [torch.from_numpy(result).to(sample.device) for result, sample in zip(results, samples)]


__all__ = ["distort_jpeg", "from_hwc_frames", "hwc_frames", "lookup_entries"]
