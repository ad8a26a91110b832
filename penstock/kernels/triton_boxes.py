"""SSD's matching of boxes to anchors for a whole batch, in two Triton launches (box_encoder's GPU form).

The boxes and labels stay where ``.gpu()`` put them: one flat buffer each, a table gives every
sample's first box, its count and its first label. ``best_anchor_kernel`` finds each box's best
anchor (one program per sample and block of boxes, walking every anchor); ``encode_kernel`` then
gives each anchor the box it overlaps most, a box's own best anchor counting as an overlap of 2,
and writes the encoded box and label (one program per sample and block of anchors, walking the
sample's boxes). Ties go to the later anchor and the later box, as in DALI and the CPU form
(penstock.operators.detection.box_encoder.encode_sample), whose arithmetic this follows operation by operation:
the launches turn floating-point fusion off so that IoUs equal the CPU's and ties and the
criteria threshold fall the same way.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from penstock.kernels.triton_launch import launch

BOXES = 32  # boxes a program holds at once
ANCHORS = 128  # anchors a program holds at once
ANCHOR_ROWS = 9  # left, top, right, bottom, area, centre x, centre y, width, height
NO_MATCH = tl.constexpr(-2.0)  # below any IoU (padding boxes score -1, as in the CPU form)


@triton.jit
def _iou(left, top, right, bottom, anchor_left, anchor_top, anchor_right, anchor_bottom, anchor_area):
    """IoU of boxes [BOXES, 1] with anchors [1, ANCHORS], as box_iou computes it."""
    width = tl.minimum(right, anchor_right) - tl.maximum(left, anchor_left)
    height = tl.minimum(bottom, anchor_bottom) - tl.maximum(top, anchor_top)
    inter = tl.maximum(width, 0.0) * tl.maximum(height, 0.0)
    union = (right - left) * (bottom - top) + anchor_area - inter
    return tl.where(union > 0, inter / tl.where(union > 0, union, 1.0), 0.0)


@triton.jit
def _load_boxes(boxes, first, numbers, valid):
    """The ltrb columns [BOXES, 1] of boxes ``numbers`` of a sample whose first box is element ``first``."""
    place = boxes + first + numbers * 4
    left = tl.load(place, mask=valid, other=0.0)[:, None]
    top = tl.load(place + 1, mask=valid, other=0.0)[:, None]
    right = tl.load(place + 2, mask=valid, other=0.0)[:, None]
    bottom = tl.load(place + 3, mask=valid, other=0.0)[:, None]
    return left, top, right, bottom


@triton.jit
def best_anchor_kernel(
    boxes,  # float32, ltrb boxes back to back
    table,  # int64 [N, 3]: element of the sample's first box, its box count, element of its first label
    anchors,  # float32 [9, M] (ANCHOR_ROWS)
    best_anchors,  # int32 [N, most boxes]: out
    anchor_count, most_boxes,
    BOXES: tl.constexpr, ANCHORS: tl.constexpr, ANCHOR_BLOCKS: tl.constexpr,
):
    chunk = tl.program_id(0)
    sample = tl.program_id(1)
    first = tl.load(table + sample * 3)
    count = tl.load(table + sample * 3 + 1)
    numbers = chunk * BOXES + tl.arange(0, BOXES)
    valid = numbers < count
    left, top, right, bottom = _load_boxes(boxes, first, numbers, valid)
    best = tl.full((BOXES,), NO_MATCH, tl.float32)
    best_index = tl.zeros((BOXES,), tl.int32)
    for anchor_block in range(ANCHOR_BLOCKS):  # loop bounds are constants: the interpreter takes no others
        places = anchor_block * ANCHORS + tl.arange(0, ANCHORS)
        inside = places < anchor_count
        iou = _iou(left, top, right, bottom,
                   tl.load(anchors + places, mask=inside, other=0.0)[None, :],
                   tl.load(anchors + anchor_count + places, mask=inside, other=0.0)[None, :],
                   tl.load(anchors + 2 * anchor_count + places, mask=inside, other=0.0)[None, :],
                   tl.load(anchors + 3 * anchor_count + places, mask=inside, other=0.0)[None, :],
                   tl.load(anchors + 4 * anchor_count + places, mask=inside, other=0.0)[None, :])
        iou = tl.where(inside[None, :], iou, 2 * NO_MATCH)
        block_best = tl.max(iou, axis=1)
        block_index = tl.max(tl.where(iou == block_best[:, None], places[None, :], -1), axis=1)
        later = block_best >= best  # a tie goes to the later anchor
        best = tl.where(later, block_best, best)
        best_index = tl.where(later, block_index, best_index)
    tl.store(best_anchors + sample * most_boxes + numbers, best_index, mask=valid)


@triton.jit
def encode_kernel(
    boxes, labels, table, anchors, best_anchors,
    encoded,  # float32 [N, M, 4]: out
    encoded_labels,  # [N, M] of the labels' type: out
    anchor_count, most_boxes, criteria, scale, mean_x, mean_y, mean_width, mean_height,
    std_x, std_y, std_width, std_height,
    OFFSET: tl.constexpr, BOXES: tl.constexpr, ANCHORS: tl.constexpr, BOX_CHUNKS: tl.constexpr,
):
    block = tl.program_id(0)
    sample = tl.program_id(1)
    first = tl.load(table + sample * 3)
    count = tl.load(table + sample * 3 + 1)
    first_label = tl.load(table + sample * 3 + 2)
    places = block * ANCHORS + tl.arange(0, ANCHORS)
    inside = places < anchor_count
    anchor_left = tl.load(anchors + places, mask=inside, other=0.0)[None, :]
    anchor_top = tl.load(anchors + anchor_count + places, mask=inside, other=0.0)[None, :]
    anchor_right = tl.load(anchors + 2 * anchor_count + places, mask=inside, other=0.0)[None, :]
    anchor_bottom = tl.load(anchors + 3 * anchor_count + places, mask=inside, other=0.0)[None, :]
    anchor_area = tl.load(anchors + 4 * anchor_count + places, mask=inside, other=0.0)[None, :]
    best = tl.full((ANCHORS,), NO_MATCH, tl.float32)
    centre_x = tl.zeros((ANCHORS,), tl.float32)
    centre_y = tl.zeros((ANCHORS,), tl.float32)
    width = tl.zeros((ANCHORS,), tl.float32)
    height = tl.zeros((ANCHORS,), tl.float32)
    label = tl.zeros((ANCHORS,), encoded_labels.dtype.element_ty)
    for chunk in range(BOX_CHUNKS):
        numbers = chunk * BOXES + tl.arange(0, BOXES)
        valid = numbers < count
        left, top, right, bottom = _load_boxes(boxes, first, numbers, valid)
        iou = _iou(left, top, right, bottom, anchor_left, anchor_top, anchor_right, anchor_bottom, anchor_area)
        claimed = tl.load(best_anchors + sample * most_boxes + numbers, mask=valid, other=-1)
        iou = tl.where(claimed[:, None] == places[None, :], 2.0, iou)
        iou = tl.where(valid[:, None], iou, -1.0)
        block_best = tl.max(iou, axis=0)
        taken = tl.max(tl.where(iou == block_best[None, :], numbers[:, None], -1), axis=0)
        picked = numbers[:, None] == taken[None, :]  # [BOXES, ANCHORS]: the box each anchor takes
        later = block_best >= best  # a tie goes to the later box
        best = tl.where(later, block_best, best)
        centre_x = tl.where(later, tl.sum(tl.where(picked, (left + right) * 0.5, 0.0), axis=0), centre_x)
        centre_y = tl.where(later, tl.sum(tl.where(picked, (top + bottom) * 0.5, 0.0), axis=0), centre_y)
        width = tl.where(later, tl.sum(tl.where(picked, right - left, 0.0), axis=0), width)
        height = tl.where(later, tl.sum(tl.where(picked, bottom - top, 0.0), axis=0), height)
        box_labels = tl.load(labels + first_label + numbers, mask=valid, other=0).to(label.dtype)
        label = tl.where(later, tl.sum(tl.where(picked, box_labels[:, None], 0), axis=0).to(label.dtype), label)
    matched = best > criteria
    anchor_x = tl.load(anchors + 5 * anchor_count + places, mask=inside, other=0.0)
    anchor_y = tl.load(anchors + 6 * anchor_count + places, mask=inside, other=0.0)
    anchor_width = tl.load(anchors + 7 * anchor_count + places, mask=inside, other=1.0)
    anchor_height = tl.load(anchors + 8 * anchor_count + places, mask=inside, other=1.0)
    if OFFSET:  # unmatched anchors divide by 1 (a zero-sized anchor would give inf there), then give 0
        scaled_width = tl.where(matched, anchor_width * scale, 1.0)
        scaled_height = tl.where(matched, anchor_height * scale, 1.0)
        x = ((centre_x * scale - anchor_x * scale) / scaled_width - mean_x) / std_x
        y = ((centre_y * scale - anchor_y * scale) / scaled_height - mean_y) / std_y
        w = (tl.log(tl.where(matched, width * scale, 1.0) / scaled_width) - mean_width) / std_width
        h = (tl.log(tl.where(matched, height * scale, 1.0) / scaled_height) - mean_height) / std_height
        x, y, w, h = tl.where(matched, x, 0.0), tl.where(matched, y, 0.0), tl.where(matched, w, 0.0), \
            tl.where(matched, h, 0.0)
    else:
        x, y = tl.where(matched, centre_x, anchor_x), tl.where(matched, centre_y, anchor_y)
        w, h = tl.where(matched, width, anchor_width), tl.where(matched, height, anchor_height)
    out = encoded + (sample * anchor_count + places) * 4
    tl.store(out, x, mask=inside)
    tl.store(out + 1, y, mask=inside)
    tl.store(out + 2, w, mask=inside)
    tl.store(out + 3, h, mask=inside)
    tl.store(encoded_labels + sample * anchor_count + places, tl.where(matched, label, 0), mask=inside)


def anchor_rows(anchors: np.ndarray) -> np.ndarray:
    """float32 [9, M] of ltrb anchors [M, 4]: what the kernels read (ANCHOR_ROWS)."""
    anchors = np.asarray(anchors, np.float32)
    left, top, right, bottom = anchors.T
    return np.ascontiguousarray(np.stack([left, top, right, bottom, (right - left) * (bottom - top),
                                          (left + right) * 0.5, (top + bottom) * 0.5, right - left, bottom - top]))


def encode_batch(boxes: torch.Tensor, labels: torch.Tensor, table: np.ndarray, anchors: torch.Tensor,
                 args: dict, *, upload) -> tuple[torch.Tensor, torch.Tensor]:
    """(encoded float32 [N, M, 4], labels [N, M]) of N samples whose ltrb boxes (float32) and labels
    lie in ``boxes`` and ``labels`` where ``table`` (int64 [N, 3], see best_anchor_kernel) says;
    ``anchors`` is anchor_rows' table on the boxes' device. ``upload(device, arrays)``: the arrays
    as tensors on the device (runtime.pinned.to_device)."""
    size, anchor_count = len(table), anchors.shape[1]
    device = boxes.device
    encoded = torch.empty((size, anchor_count, 4), dtype=torch.float32, device=device)
    encoded_labels = torch.empty((size, anchor_count), dtype=labels.dtype, device=device)
    if size == 0:
        return encoded, encoded_labels
    most = max(int(table[:, 1].max()), 1)
    best_anchors = torch.empty((size, most), dtype=torch.int32, device=device)
    table = upload(device, [np.ascontiguousarray(table, np.int64)])[0]
    exact = {"enable_fp_fusion": False} if device.type == "cuda" else {}
    chunks = triton.cdiv(most, BOXES)
    launch(best_anchor_kernel, (chunks, size), boxes, table, anchors, best_anchors, anchor_count, most, BOXES=BOXES,
                                       ANCHORS=ANCHORS, ANCHOR_BLOCKS=triton.cdiv(anchor_count, ANCHORS), **exact)
    means, stds = args.means, args.stds
    launch(encode_kernel, (triton.cdiv(anchor_count, ANCHORS), size),
        boxes, labels, table, anchors, best_anchors, encoded, encoded_labels, anchor_count, most,
        float(args.criteria), float(args.scale), *map(float, means), *map(float, stds),
        OFFSET=bool(args.offset), BOXES=BOXES, ANCHORS=ANCHORS,
        BOX_CHUNKS=triton.next_power_of_2(chunks), **exact)  # a power of two: few compiled variants
    return encoded, encoded_labels
