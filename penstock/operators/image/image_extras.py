"""Image operators DALI runs with OpenCV on the CPU, run here with the same OpenCV calls: ``clahe``
(contrast limited adaptive histogram equalization) and ``debayer`` (demosaicing of Bayer sensor
images, also ``experimental.debayer``)."""
from __future__ import annotations

import cv2
import numpy as np

from penstock import registry
from penstock.contract import OutputSpec, SampleOperator
from penstock.schema import REQUIRED, Arg, ArgError, OpSchema

# ---- clahe ------------------------------------------------------------------------------------
registry.register_schema(OpSchema(
    name="clahe", class_name="Clahe", num_inputs=(1, 1), input_names=("input",),
    doc="Contrast limited adaptive histogram equalization of HWC uint8 images of 1 or 3 channels, as OpenCV's "
        "CLAHE: the image is cut into tiles_y x tiles_x tiles, each tile's histogram is clipped at clip_limit "
        "times its mean bin count and equalized, and each pixel's value blends the neighbouring tiles' mappings "
        "bilinearly. RGB images (RGB order) are equalized on the lightness of CIE Lab when luma_only (the "
        "default), else channel by channel.",
    args=(Arg("tiles_x", "int", REQUIRED, "Tiles across the width.", min=1),
          Arg("tiles_y", "int", REQUIRED, "Tiles down the height.", min=1),
          Arg("clip_limit", "float", REQUIRED, "Clip limit of a tile's histogram bins, relative to the mean bin count "
              "(tile area / 256); 1.5 to 4 is usual."),
          Arg("bins", "int", 256, "Histogram bins: accepted for DALI compatibility, the CPU uses 256 (as DALI's CPU "
              "form).", min=1),
          Arg("luma_only", "bool", True, "RGB images: equalize the lightness only (True) or each channel."))))


def _clahe(image: np.ndarray, args: dict) -> np.ndarray:
    equalizer = cv2.createCLAHE(clipLimit=args.clip_limit, tileGridSize=(args.tiles_x, args.tiles_y))
    if image.shape[2] == 1:
        return equalizer.apply(np.ascontiguousarray(image[:, :, 0]))[:, :, None]
    if args.luma_only:
        lab = cv2.cvtColor(image, cv2.COLOR_RGB2Lab)
        lab[:, :, 0] = equalizer.apply(np.ascontiguousarray(lab[:, :, 0]))
        return cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)
    return np.stack([equalizer.apply(np.ascontiguousarray(image[:, :, c])) for c in range(3)], axis=2)


@registry.register("clahe", "cpu")
class Clahe(SampleOperator):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.layout and spec.layout != "HWC" or spec.ndim not in (None, 3):
            raise ValueError(f"{self.name}: expects HWC images, got layout '{spec.layout}' "
                             f"({spec.ndim if spec.ndim is not None else 'unknown'} dimensions)")
        if spec.dtype is not None and spec.dtype != np.uint8:
            raise ValueError(f"{self.name}: expects uint8 images, got {spec.dtype}")
        if spec.known_channels not in (None, 1, 3):
            raise ValueError(f"{self.name}: expects images of 1 or 3 channels, got {spec.known_channels}")
        return spec.but(dtype=np.dtype(np.uint8), ndim=3, layout="HWC")

    def run(self, inputs, args, sample, out=None):
        image = inputs[0]
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (1, 3):
            raise ValueError(f"{self.name}: expected an HWC uint8 image of 1 or 3 channels, got {image.dtype} of shape {image.shape}")
        return _clahe(image, args)


# ---- debayer ----------------------------------------------------------------------------------
# blue_position (y, x) in the 2x2 tile -> OpenCV's pattern name (its names read the tile that starts
# at the second row and column)
PATTERNS = {(0, 0): "BG", (0, 1): "GB", (1, 0): "GR", (1, 1): "RG"}
ALGORITHMS = {"bilinear_ocv": "2RGB", "edgeaware_ocv": "2RGB_EA", "vng_ocv": "2RGB_VNG", "gray_ocv": "2GRAY"}
BAYER_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
BAYER_LAYOUTS = {"HW": "HWC", "HWC": "HWC", "FHW": "FHWC", "FHWC": "FHWC"}


def _algorithm(args: dict) -> str:
    """The CPU's algorithm: 'default' is bilinear interpolation, as in DALI."""
    name = args.algorithm.lower()
    return "bilinear_ocv" if name == "default" else name


def _check_debayer(static: dict, per_sample: frozenset) -> None:
    name = static.algorithm.lower()
    if name == "default_npp":
        raise ArgError("argument 'algorithm': 'default_npp' is an algorithm of DALI's GPU form; the CPU has "
                       f"{', '.join(ALGORITHMS)}")
    if name != "default" and name not in ALGORITHMS:
        raise ArgError(f"argument 'algorithm': expected one of default, {', '.join(ALGORITHMS)}, got "
                       f"{static.algorithm!r}")


registry.register_schema(OpSchema(
    name="debayer", class_name="Debayer", num_inputs=(1, 1), input_names=("input",),
    also_named=(("experimental.debayer", "experimental.Debayer"),),
    doc="Demosaicing: single-channel Bayer sensor images (HW or HWC with one channel; FHW, FHWC for sequences) "
        "of uint8 or uint16 to RGB (HWC, FHWC), with OpenCV's demosaicing. Height and width must be even.",
    args=(Arg("blue_position", "ints", REQUIRED, "Where the blue sensor is in the 2x2 tile, (y, x) (one value: "
              "both): (0, 0) is OpenCV's BG (BGGR), (0, 1) GB (GBRG), (1, 0) GR (GRBG), (1, 1) RG (RGGB).",
              per_sample=True, length=(1, 2), min=0, max=1),
          Arg("algorithm", "str", "default", "The interpolation: 'bilinear_ocv' (the CPU's default), 'edgeaware_ocv', "
              "'vng_ocv' (uint8 only) or 'gray_ocv' (a single-channel grey output); any letter case.")),
    checks=(_check_debayer,)))


def _debayer_frame(frame: np.ndarray, code: int) -> np.ndarray:
    out = cv2.demosaicing(np.ascontiguousarray(frame), code)
    return out if out.ndim == 3 else out[:, :, None]


def _type_problem(dtype, algorithm: str) -> str | None:
    if dtype not in BAYER_TYPES:
        return f"expects uint8 or uint16 images, got {dtype}"
    if algorithm == "vng_ocv" and dtype != np.uint8:
        return f"algorithm 'vng_ocv' takes uint8 images only, got {dtype}"
    return None


@registry.register("debayer", "cpu")
class Debayer(SampleOperator):
    def declare_outputs(self, inputs):
        spec = inputs[0]
        if spec.layout and spec.layout not in BAYER_LAYOUTS or spec.ndim not in (None, len(spec.layout or "HW"),
                                                                                  len(spec.layout or "HWC")):
            raise ValueError(f"{self.name}: expects layout HW, HWC, FHW or FHWC, got '{spec.layout}'"
                             f"{f' ({spec.ndim} dimensions)' if spec.ndim is not None else ''}")
        problem = _type_problem(spec.dtype, _algorithm(self.args)) if spec.dtype is not None else None
        if problem:
            raise TypeError(f"{self.name}: {problem}")
        # without a layout a sample's dimensions decide, as in DALI: HW, or HWC
        self._sequence = spec.layout.startswith("F")
        return OutputSpec(spec.dtype, 4 if self._sequence else 3, "FHWC" if self._sequence else "HWC",
                          channels=1 if _algorithm(self.args) == "gray_ocv" else 3)

    def run(self, inputs, args, sample, out=None):
        image, algorithm = inputs[0], _algorithm(args)
        problem = _type_problem(image.dtype, algorithm)
        if problem:
            raise TypeError(f"{self.name}: {problem}")
        frames = image if self._sequence else image[None]
        if frames.ndim == 4:
            if frames.shape[3] != 1:
                raise ValueError(f"{self.name}: expected single-channel images, got a sample of shape {image.shape} "
                                 "(a sequence needs the layout FHW or FHWC)")
            frames = frames[..., 0]
        if frames.ndim != 3:
            raise ValueError(f"{self.name}: expected single-channel images, got a sample of shape {image.shape}")
        height, width = frames.shape[1:]
        if height % 2 or width % 2:
            raise ValueError(f"{self.name}: the height and width of Bayer images must be even, got {height} x {width}")
        position = tuple(args.blue_position)
        if len(position) == 1 and "blue_position" in self.args:  # one value given for both, not per sample
            position *= 2
        if len(position) != 2:
            raise ValueError(f"{self.name}: argument 'blue_position' needs 2 values, (y, x), got {len(position)}")
        pattern = PATTERNS[position]
        code = getattr(cv2, f"COLOR_Bayer{pattern}{ALGORITHMS[algorithm]}")
        result = np.stack([_debayer_frame(frame, code) for frame in frames])
        return result if self._sequence else result[0]
