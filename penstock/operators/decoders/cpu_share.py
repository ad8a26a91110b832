"""The CPU workers' share of the JPEGs a mixed decoder takes when cpu_decoder_load is not given, from
a model of what each decoder costs (its numbers: penstock.tuning, measured as BENCHMARKS.md's
"Tuning numbers" says).

nvJPEG's hardware call takes a time per image plus a time per megapixel of the whole image (windows
and whole images alike); the rest of the GPU pipeline keeps up with some time per image, so a share
only pays where the hardware takes ``headroom`` times longer than that. One CPU core decodes a whole
image in ``cpu_to_hardware_time`` times the hardware's time for it (reading the entropy-coded data,
which no DCT scale shortens, is most of it), and a window in that times the share of the image's
rows down to the window's bottom (libjpeg-turbo reads the data that far). Where the engines set the
pipeline's pace (no GPU work but the fused image kernel after the decode:
optimize.let_decoders_share_windows), windows get at least a floor that grows with the spare cores
(least_window_share): what a point of share gains grows with the cores it can spend."""
from __future__ import annotations

import math
from typing import Callable

from penstock.tuning import Tuning

# the automatic share of each image is taken at a fixed, evenly spread point per index
GOLDEN = (math.sqrt(5) - 1) / 2


def least_window_share(spare_cores: int, tuning: Tuning) -> float:
    """The least share of windows the CPU workers decode where the hardware engines set the
    pipeline's pace: more where more cores are spare."""
    return max(0.0, min(tuning.max_window_floor, tuning.window_floor_per_spare_core * spare_cores))


def share_model(tuning: Tuning) -> Callable[..., float]:
    """``automatic_cpu_share`` with ``tuning``'s numbers, read once here: the decoders ask it for
    every JPEG."""
    hardware_us_per_image, hardware_us_per_megapixel = tuning.hardware_us_per_image, tuning.hardware_us_per_megapixel
    headroom, pipeline_us_per_image = tuning.headroom, tuning.pipeline_us_per_image
    cpu_to_hardware_time = tuning.cpu_to_hardware_time
    max_whole_image_share, max_share = tuning.max_whole_image_cpu_share, tuning.max_automatic_cpu_share

    def automatic_cpu_share(pixels: int, spare_cores: int, rows_read: float = 1.0, whole_image: bool = False,
                            window_floor: float = 0.0) -> float:
        """The share of JPEGs of ``pixels`` pixels that the CPU workers decode: enough to bring the
        hardware engines' time per image down to ``headroom`` times the pipeline's (``needed``), no
        more than the spare cores decode in the time the engines take for the rest (``affordable``:
        (1 - f) * hardware = f * cpu / spare). ``rows_read``: the share of the image's rows the CPU
        decoder reads (down to its window's bottom): windows near the top cost the workers less,
        where the engines take the same time for any window. ``whole_image``: decoded without a
        window. ``pixels`` 0: a JPEG the hardware engines do not take (no share). ``window_floor``:
        the least share of a window (least_window_share where the engines set the pipeline's pace)."""
        if spare_cores <= 0:
            return 0.0
        hardware = hardware_us_per_image + hardware_us_per_megapixel * pixels / 1e6
        needed = 1.0 - headroom * pipeline_us_per_image / hardware
        if pixels and not whole_image:
            needed = max(needed, window_floor)
        affordable = spare_cores / (spare_cores + cpu_to_hardware_time * rows_read)
        cap = max_whole_image_share if whole_image else max_share
        return max(0.0, min(needed, affordable, cap))
    return automatic_cpu_share
