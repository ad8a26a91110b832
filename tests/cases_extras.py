"""Cases of the sequence operators (penstock.operators.sequences) for the coverage test; the
operators' own tests, against numpy and DALI, are in tests/test_sequences.py.

References: per_frame hands the data on untouched; sequence_rearrange against numpy's indexing of
the first axis (exact).
"""
from __future__ import annotations

import numpy as np
from operator_cases import Case, on_device, ragged_images

from penstock import fn

ORDER = [2, 0, 0, 1]


def _frames(node, device):
    """The fed HWC images marked as sequences of rows (per_frame replaces the layout's first letter)."""
    return fn.per_frame(on_device(node, device), replace=True, device=device)


CASES = {
    "per_frame": Case(ragged_images, _frames, lambda samples, _: samples),
    "sequence_rearrange": Case(ragged_images, lambda node, device: fn.sequence_rearrange(_frames(node, device),
                                                                                         new_order=ORDER),
                               lambda samples, _: [s[ORDER] for s in samples]),
}
