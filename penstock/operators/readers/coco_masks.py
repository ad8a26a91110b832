"""COCO's masks: run-length strings and counts decoded, polygons filled, and a sample's pixelwise mask
of labels."""
from __future__ import annotations

import numpy as np

from penstock import limits


def rle_from_string(text: str) -> list[int]:
    """The run lengths of COCO's compressed RLE string (six bits a character, five of value and one
    of continuation; from the third run on, each is stored as its difference to the run two before)."""
    counts, position = [], 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            if position == len(text):
                raise ValueError("the run-length string ends inside a run")
            code = ord(text[position]) - 48
            if not 0 <= code < 64 or shift > 60:  # past 64 bits a run is no count, and the value grows without end
                raise ValueError(f"the run-length string has {text[position]!r} at {position}, which is not a run")
            value |= (code & 0x1F) << shift
            more = bool(code & 0x20)
            position, shift = position + 1, shift + 5
            if not more and code & 0x10:
                value |= -1 << shift  # negative: sign-extend
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def check_runs(counts: np.ndarray, height: int, width: int) -> None:
    """Refuses run lengths that are negative or that do not cover exactly height x width pixels
    (checked before the sum, which large runs would overflow)."""
    pixels = height * width
    if len(counts) and (counts.min() < 0 or counts.max() > pixels):
        run = int(counts.min() if counts.min() < 0 else counts.max())
        raise ValueError(f"a run-length mask of {height} x {width} has a run of {run}")
    if int(counts.sum()) != pixels:
        raise ValueError(f"a run-length mask's runs cover {int(counts.sum())} pixels, not {height} x {width}")


def rle_decode(counts, height: int, width: int) -> np.ndarray:
    """A bool [height, width] mask from run lengths over its column-major pixels (zeros first)."""
    counts = np.asarray(counts, np.int64)
    check_runs(counts, height, width)
    flat = np.repeat(np.arange(len(counts)) % 2 == 1, counts)
    return flat.reshape(width, height).T


CROSSINGS_AT_ONCE = 1 << 20  # (edge, row) pairs a polygon's fill computes at once: bounded temporaries


def fill_polygon(layer: np.ndarray, points: np.ndarray) -> None:
    """Sets the pixels of ``layer`` whose centres (x + 0.5, y + 0.5) lie inside the polygon (even-odd
    rule; a centre on a left edge is outside, on a right edge inside: COCO's own sampling). The
    points must be finite; a polygon crossing the rows more than twice per pixel on average is
    refused (a SizeClaimError): it would cost more than the image's pixels."""
    if len(points) < 3:
        return
    height, width = layer.shape
    start = points.astype(np.float64)
    end = np.roll(start, -1, axis=0)
    # the rows an edge may cross, a row of margin each side: the exact test below decides
    low, high = np.minimum(start[:, 1], end[:, 1]), np.maximum(start[:, 1], end[:, 1])
    first_row = np.clip(np.floor(low) - 1, 0, height).astype(np.int64)
    spans = np.clip(np.ceil(high) + 1, 0, height).astype(np.int64) - first_row
    spans = np.maximum(spans, 0)
    top, bottom = int(first_row.min()), int((first_row + spans).max())
    if bottom <= top:
        return
    total = int(spans.sum())
    if total > 2 * (bottom - top + 2) * (width + 1):
        raise limits.SizeClaimError(f"a polygon of {len(points):,} vertices crosses the rows {total:,} times, more "
                                    f"than twice the {(bottom - top) * width:,} pixels it spans")
    # parity per pixel: a crossing toggles every column whose centre lies right of it; a column is
    # inside when an odd number of crossings lie left of its centre
    parity = np.zeros((bottom - top, width + 1), np.uint8)
    ends = np.cumsum(spans)
    for low_pair in range(0, total, CROSSINGS_AT_ONCE):
        pair = np.arange(low_pair, min(low_pair + CROSSINGS_AT_ONCE, total))
        edge = np.searchsorted(ends, pair, side="right")
        row = first_row[edge] + pair - (ends[edge] - spans[edge])
        centre = row + 0.5
        y0, y1 = start[edge, 1], end[edge, 1]
        crosses = (y0 <= centre) != (y1 <= centre)  # each edge counted once per row
        edge, row, centre, y0, y1 = edge[crosses], row[crosses], centre[crosses], y0[crosses], y1[crosses]
        x0 = start[edge, 0]
        x = np.clip(x0 + (centre - y0) / (y1 - y0) * (end[edge, 0] - x0), -1, width + 1)
        column = np.floor(x - 0.5) + 1  # the first column whose centre lies right of x, rounding fixed below
        column -= (column - 0.5) > x
        column += (column + 0.5) <= x
        np.bitwise_xor.at(parity, (row - top, np.clip(column, 0, width).astype(np.int64)), 1)
    np.bitwise_xor.accumulate(parity, axis=1, out=parity)
    layer[top:bottom] |= parity[:, :width]


def pixelwise_mask(polygons: np.ndarray, vertices: np.ndarray, runs: list, labels: np.ndarray,
                   height: int, width: int) -> np.ndarray:
    """int32 [H, W, 1]: each pixel the label of the object covering it (0: none); where objects of
    different labels overlap, the higher label is kept. ``vertices`` in pixels, finite; ``runs``:
    (object number, run lengths) pairs. The caller has checked height x width (limits)."""
    mask = np.zeros((height, width), np.int32)
    shapes: dict = {}
    for number, start, end in polygons:
        shapes.setdefault(int(labels[number]), []).append(("polygon", vertices[start:end]))
    for number, counts in runs:
        shapes.setdefault(int(labels[number]), []).append(("rle", counts))
    for label in sorted(shapes):
        layer = np.zeros((height, width), np.uint8)
        for kind, shape in shapes[label]:
            if kind == "rle":  # decoded one at a time: an image may list many
                layer |= rle_decode(shape, height, width)
            else:
                fill_polygon(layer, shape)
        mask[layer > 0] = label
    return mask[:, :, None]
