"""Separable filter windows applied to images, shared by the filters and RandAugment's steps."""
from __future__ import annotations

from dataclasses import dataclass
import cv2
import numpy as np


# numpy's names of the same rules, for padding on the CPU
_NUMPY_PADS = {"reflect_101": "reflect", "reflect_1001": "symmetric", "wrap": "wrap", "clamp": "edge",
               "constant": "constant"}


@dataclass
class Window:
    """What one sample's filter computes: at each output pixel, over the input pixels under
    ``weights`` placed with its ``anchor`` (row, column of the weights) on the pixel, the weighted
    sum ('sum') or the minimum or maximum over the taps whose weight is not 0. Taps outside the
    image read it by ``border`` (a BORDER_RULES rule; 'constant' reads ``fill``). ``valid``: the
    output holds only the pixels whose window lies inside the image (the anchor is then (0, 0))."""

    weights: np.ndarray
    anchor: tuple[int, int]
    border: str
    fill: float = 0.0
    operation: str = "sum"
    valid: bool = False

    def output_size(self, height: int, width: int, op_name: str) -> tuple[int, int]:
        if not self.valid:
            return height, width
        out_height, out_width = height - self.weights.shape[0] + 1, width - self.weights.shape[1] + 1
        if out_height < 1 or out_width < 1:
            raise ValueError(f"{op_name}: mode 'valid' needs a filter no larger than the image; the filter is "
                             f"{self.weights.shape[0]}x{self.weights.shape[1]}, the image {height}x{width}")
        return out_height, out_width


# ---- the CPU: OpenCV on the padded image -------------------------------------------------------
def apply_window(image: np.ndarray, window: Window, op_name: str) -> np.ndarray:
    """The window over an HWC image: float32 for sums, the image's type for min and max."""
    height, width, channels = image.shape
    out_height, out_width = window.output_size(height, width, op_name)
    source = image.astype(np.float32) if window.operation == "sum" else image
    if not window.valid:
        (top, left), (rows, columns) = window.anchor, window.weights.shape
        pad = ((top, rows - 1 - top), (left, columns - 1 - left), (0, 0))
        mode = _NUMPY_PADS[window.border]
        extra = {"constant_values": np.array(window.fill).astype(source.dtype)} if mode == "constant" else {}
        source = np.pad(source, pad, mode=mode, **extra)
    # OpenCV reads the padded image's inside only: the window anchored at its top-left corner
    if window.operation == "sum":
        result = cv2.filter2D(source, cv2.CV_32F, window.weights, anchor=(0, 0), borderType=cv2.BORDER_CONSTANT)
    else:
        morph = cv2.erode if window.operation == "min" else cv2.dilate
        result = morph(source, (window.weights != 0).astype(np.uint8), anchor=(0, 0),
                       borderType=cv2.BORDER_CONSTANT,
                       borderValue=window.fill if window.border == "constant" else 0)
    return result[:out_height, :out_width].reshape(out_height, out_width, channels)
