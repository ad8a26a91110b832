"""``box_encoder``: SSD's matching of a sample's boxes and labels to a set of anchors, on both devices
(the GPU's launches are penstock.kernels.triton_boxes, following encode_sample operation by
operation)."""
from __future__ import annotations

import math

import numpy as np

from penstock import devices, registry
from penstock.contract import BatchOperator, OutputSpec, SampleOperator
from penstock.operators.detection.box_arrays import check_boxes
from penstock.runtime import native
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema


class AnchorTable:
    """The anchors as the CPU encoding reads them, made once per operator: every quantity a
    contiguous [M] array (operations then run over contiguous [..., N, M] or [B, M] arrays, a
    tenth of the time of slicing pairs out of [..., M, 2] ones): the coordinates (left, top,
    right, bottom) and the areas; and the centres and sizes (x, y, width, height) as [M, 4] and
    [4, M]."""

    def __init__(self, anchors: np.ndarray):
        left, top, right, bottom = (np.ascontiguousarray(anchors[:, index]) for index in range(4))
        areas = (right - left) * (bottom - top)
        self.count = len(anchors)
        self.all_positive = bool((areas > 0).all())  # then no union is 0: nothing to guard against
        self.columns, self.areas = (left, top, right, bottom), np.ascontiguousarray(areas, np.float32)
        self.column_table = np.ascontiguousarray(anchors.T, np.float32)  # [4, M]: left, top, right, bottom
        self.centre_extent = np.concatenate(_centre_extent(anchors), axis=1)  # [M, 4]: x, y, width, height
        self.centre_extent_rows = np.ascontiguousarray(self.centre_extent.T)  # [4, M]
        self._scaled: dict[float, np.ndarray] = {}
        self._addresses: dict[float, tuple] = {}
        self._normalizations: dict[tuple, tuple] = {}

    def scaled_table(self, scale: float) -> np.ndarray:
        """The anchors' centres and sizes [4, M] (x, y, width, height), multiplied by ``scale`` in
        float32 (kept per scale)."""
        if scale not in self._scaled:
            self._scaled[scale] = self.centre_extent_rows * scale
        return self._scaled[scale]

    def native_tables(self, scale: float) -> tuple[int, int, int, int]:
        """The addresses of the tables the C encoder reads: the coordinates [4, M], the areas, the
        centres and sizes [M, 4], and those scaled [4, M] (the arrays live as long as the table)."""
        if scale not in self._addresses:
            self._addresses[scale] = (self.column_table.ctypes.data, self.areas.ctypes.data,
                                      self.centre_extent.ctypes.data, self.scaled_table(scale).ctypes.data)
        return self._addresses[scale]

    def native_normalization(self, means, stds) -> tuple[int, int]:
        """The addresses of float32 copies of ``means`` and ``stds``, kept per value."""
        key = (tuple(means), tuple(stds))
        if key not in self._normalizations:
            arrays = (np.ascontiguousarray(means, np.float32), np.ascontiguousarray(stds, np.float32))
            self._normalizations[key] = (arrays, tuple(array.ctypes.data for array in arrays))
        return self._normalizations[key][1]

    def scaled_rows(self, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """scaled_table's centres and sizes, [2, M] each."""
        table = self.scaled_table(scale)
        return table[:2], table[2:]


def box_iou(boxes: np.ndarray, anchors: AnchorTable) -> np.ndarray:
    """IoU [..., N, M] of ltrb boxes [..., N, 4] with the anchors."""
    left, top, right, bottom = (boxes[..., index, None] for index in range(4))  # [..., N, 1]
    anchor_left, anchor_top, anchor_right, anchor_bottom = anchors.columns
    width = np.minimum(right, anchor_right) - np.maximum(left, anchor_left)
    height = np.minimum(bottom, anchor_bottom) - np.maximum(top, anchor_top)
    inter = np.maximum(width, 0.0, out=width) * np.maximum(height, 0.0, out=height)
    union = (right - left) * (bottom - top) + anchors.areas - inter
    if anchors.all_positive:
        return inter / union
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0 * inter)


def _centre_extent(boxes):
    return (boxes[..., :2] + boxes[..., 2:]) * 0.5, boxes[..., 2:] - boxes[..., :2]


def encode_sample_native(encode, boxes: np.ndarray, labels: np.ndarray, anchors: AnchorTable, args) -> tuple:
    """encode_sample in C (runtime.native.box_encode, ``encode``): one pass over the anchors per
    box and one over the boxes per anchor, without the interpreter lock, the same float32
    operations; about ten times the numpy path's speed at SSD300's 8,732 anchors."""
    if len(boxes) == 0:
        return encode_sample(boxes, labels, anchors, args)
    boxes = np.ascontiguousarray(boxes, np.float32)
    encoded = np.empty((anchors.count, 4), np.float32)
    best_box = np.empty(anchors.count, np.int32)
    iou = np.empty((len(boxes) + 1, anchors.count), np.float32)
    encode(boxes.ctypes.data, len(boxes), *anchors.native_tables(args.scale), anchors.count, int(anchors.all_positive),
           args.criteria, int(args.offset), args.scale, *anchors.native_normalization(args.means, args.stds),
           iou.ctypes.data, encoded.ctypes.data, best_box.ctypes.data)
    matched = best_box >= 0
    return encoded, np.where(matched, np.take(labels, np.maximum(best_box, 0)), labels.dtype.type(0))


def encode_sample(boxes: np.ndarray, labels: np.ndarray, anchors: AnchorTable, args) -> tuple:
    """SSD's encoding of one sample: ``boxes`` float32 [N, 4] ltrb, ``labels`` [N]. Returns boxes
    [M, 4] and labels [M]. Each box claims its best anchor; each anchor then takes the box it
    overlaps most when their IoU exceeds criteria (ties to the later box and anchor, DALI's). The
    GPU form (kernels.triton_boxes) follows this operation by operation."""
    if len(boxes) == 0:  # every anchor is background
        fill = np.zeros((anchors.count, 4), np.float32) if args.offset else anchors.centre_extent.copy()
        return fill, np.zeros(anchors.count, labels.dtype)
    iou = box_iou(boxes, anchors)  # [N, M]
    best_anchor = anchors.count - 1 - iou[:, ::-1].argmax(1)  # the last maximum of each box's row
    box_numbers = np.arange(len(boxes), dtype=np.int32)
    iou[box_numbers, best_anchor] = 2.0
    best_iou = iou.max(0)
    # each anchor's box: the last one of its maximum (a reduction along the boxes runs as fast as max)
    best_box = np.where(iou == best_iou, box_numbers[:, None], -1).max(0)
    matched = best_iou > args.criteria
    # quantities in rows [4, M] (x, y, width, height): numpy runs its loops along the anchors
    chosen = np.take(np.concatenate(_centre_extent(boxes), axis=1).T, best_box, axis=1)
    if args.offset:
        scale = args.scale
        anchor_centre, anchor_extent = anchors.scaled_rows(scale)
        means = np.asarray(args.means, np.float32)[:, None]
        stds = np.asarray(args.stds, np.float32)[:, None]
        encoded = np.empty_like(chosen)
        with np.errstate(divide="ignore", invalid="ignore"):  # unmatched anchors' values are replaced below
            encoded[:2] = ((chosen[:2] * scale - anchor_centre) / anchor_extent - means[:2]) / stds[:2]
            encoded[2:] = (np.log((chosen[2:] * scale) / anchor_extent) - means[2:]) / stds[2:]
        encoded = np.where(matched, encoded, np.float32(0.0))
    else:
        encoded = np.where(matched, chosen, anchors.centre_extent_rows)
    encoded = encoded.T.copy()
    return encoded, np.where(matched, np.take(labels, best_box), labels.dtype.type(0))


def _encoder_inputs(xp, boxes, labels):
    boxes = check_boxes(xp, boxes, "box_encoder")
    labels = labels.reshape(-1)
    if labels.shape[0] != boxes.shape[0]:
        raise ValueError(f"box_encoder: {boxes.shape[0]} boxes with {labels.shape[0]} labels")
    return boxes, labels


class EncoderDeclaration:
    def declare_outputs(self, inputs):
        return OutputSpec(np.dtype(np.float32), 2, "", (len(self.args.anchors) // 4, 4)), \
            OutputSpec(inputs[1].dtype, 1, "", (len(self.args.anchors) // 4,))

    def anchors(self) -> np.ndarray:
        """float32 [M, 4]."""
        return np.asarray(self.args.anchors, np.float32).reshape(-1, 4)


def _check_encoder(static: dict, per_sample: frozenset) -> None:
    anchors = static.get("anchors")
    if anchors is not None and (len(anchors) == 0 or len(anchors) % 4):
        raise ArgError(f"argument 'anchors': {len(anchors)} values; it takes 4 (left, top, right, bottom) per anchor")
    for name in ("means", "stds"):
        if static.get(name) is not None and len(static[name]) != 4:
            raise ArgError(f"argument '{name}': {len(static[name])} values; it takes 4 (x, y, w, h)")
    if static.get("stds") is not None and any(value == 0 for value in static.stds):
        raise ArgError("argument 'stds': a standard deviation of 0")


registry.register_schema(OpSchema(
    name="box_encoder", class_name="BoxEncoder",
    doc="SSD's encoding of a sample's ltrb boxes and labels against a set of anchors: each box takes its best "
        "anchor, and each other anchor the box it overlaps most when their IoU exceeds criteria. Outputs the "
        "boxes [anchors, 4] (centre x, y, width, height, or offsets) and labels [anchors] (0: background).",
    args=(Arg("anchors", "floats", REQUIRED, "The anchors (default boxes), 4 values each: left, top, right, bottom."),
          Arg("criteria", "float", 0.5, "An anchor takes the box it overlaps most when their IoU is above this.",
              min=0.0, max=1.0),
          Arg("offset", "bool", False, "Output the matched boxes as offsets from their anchors, normalized by "
              "means and stds (unmatched anchors: zeros); else as centre and size (unmatched: the anchor)."),
          Arg("scale", "float", 1.0, "Boxes and anchors are multiplied by this before the offsets are computed."),
          Arg("means", "floats", (0.0, 0.0, 0.0, 0.0), "Subtracted from the offsets (x, y, w, h)."),
          Arg("stds", "floats", (1.0, 1.0, 1.0, 1.0), "The offsets are divided by these (x, y, w, h).")),
    num_inputs=(2, 2), num_outputs=2, input_names=("boxes", "labels"), checks=(_check_encoder,)))


@registry.register("box_encoder", "cpu")
class BoxEncoder(EncoderDeclaration, SampleOperator):
    _anchor_table = None

    def run(self, inputs, args, sample, out=None):
        boxes, labels = _encoder_inputs(np, *inputs)
        if self._anchor_table is None:  # made once: the argument is a tuple of thousands of numbers
            self._native = native.box_encode()  # (set first: other threads go on once the table is there)
            self._anchor_table = AnchorTable(self.anchors())
        boxes = boxes.astype(np.float32, copy=False)
        if self._native is not None:
            return encode_sample_native(self._native, boxes, labels, self._anchor_table, args)
        return encode_sample(boxes, labels, self._anchor_table, args)


@registry.register("box_encoder", "gpu", requires=devices.gpu_problem)
class BoxEncoderGpu(EncoderDeclaration, BatchOperator):
    """The whole batch in two kernel launches (kernels.triton_boxes), reading the boxes and labels
    where ``.gpu()`` packed them."""

    _anchor_rows = None

    def run_batch(self, inputs, args, batch):
        from penstock.batch import PackedBatch
        from penstock.kernels import triton_boxes
        from penstock.runtime.pinned import to_device
        if not len(inputs[0]):
            return [], []
        boxes, labels, table = _packed_encoder_inputs(inputs[0], inputs[1])
        if self._anchor_rows is None or self._anchor_rows.device != boxes.device:
            self._anchor_rows = to_device(boxes.device, [triton_boxes.anchor_rows(self.anchors())])[0]
        # one set of arguments per batch: box_encoder's are all fixed for the pipeline
        encoded, encoded_labels = triton_boxes.encode_batch(boxes, labels, table, self._anchor_rows, args[0],
                                                            upload=to_device)
        return PackedBatch.of_dense(encoded), PackedBatch.of_dense(encoded_labels)


def _packed_encoder_inputs(boxes, labels):
    """(boxes float32 flat, labels flat, table int64 [N, 3]: each sample's first box element, box
    count and first label element) of a batch's boxes [N, 4] (or a single box [4]) and labels
    ([N] or [N, 1]): the buffers .gpu() packed them in, or the per-sample tensors joined."""
    import torch

    from penstock.batch import PackedBatch
    from penstock.operators.shared.gpu_plan import tensors_of
    if not (isinstance(boxes, PackedBatch) and isinstance(labels, PackedBatch)):
        boxes, labels = (_packed_tensors(torch, tensors_of(value)) for value in (boxes, labels))
    if len(boxes) != len(labels):
        raise ValueError(f"box_encoder: {len(boxes)} samples of boxes with {len(labels)} of labels")
    counts = np.empty(len(boxes), np.int64)
    for index, (shape, label_shape) in enumerate(zip(boxes.shapes, labels.shapes)):
        if len(shape) == 1 and shape[0] == 4:
            shape = (1, 4)
        if len(shape) != 2 or shape[1] != 4:
            raise ValueError(f"box_encoder: takes boxes as a [N, 4] array, got shape {tuple(shape)} (sample {index})")
        if math.prod(label_shape) != shape[0]:
            raise ValueError(f"box_encoder: {shape[0]} boxes with {math.prod(label_shape)} labels (sample {index})")
        counts[index] = shape[0]
    table = np.empty((len(counts), 3), np.int64)
    table[:, 0], table[:, 1], table[:, 2] = boxes.offsets, counts, labels.offsets
    buffer = boxes.buffer if boxes.buffer.dtype == torch.float32 else boxes.buffer.float()
    return buffer, labels.buffer, table


def _packed_tensors(torch, tensors: list):
    """Per-sample tensors of one type as one PackedBatch (joined with one copy)."""
    from penstock.batch import PackedBatch
    sizes = [tensor.numel() for tensor in tensors]
    offsets = np.cumsum([0, *sizes[:-1]]).tolist()
    flat = [tensor.reshape(-1) for tensor in tensors]
    return PackedBatch(torch.cat(flat) if flat else torch.empty(0), offsets, [tuple(t.shape) for t in tensors])
