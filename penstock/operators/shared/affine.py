"""Affine matrices in homogeneous form, shared by the transforms and RandAugment's steps."""
from __future__ import annotations

import numpy as np


# ---- the rules, shared by every builder ---------------------------------------------------------
def homogeneous(linear: np.ndarray, offset=None) -> np.ndarray:
    """The (n + 1) x (n + 1) map x -> linear @ x + offset."""
    size = linear.shape[0]
    matrix = np.eye(size + 1)
    matrix[:size, :size] = linear
    if offset is not None:
        matrix[:size, size] = offset
    return matrix


# ---- shear --------------------------------------------------------------------------------------
def shear_linear(factors) -> np.ndarray:
    """DALI's shear: 2D (shear_x, shear_y) -> [[1, sx], [sy, 1]]; 3D (xy, xz, yx, yz, zx, zy) -> rows
    [1, xy, xz], [yx, 1, yz], [zx, zy, 1]. Factor 'ab' moves axis a by that much per unit along b."""
    factors = list(factors)
    if len(factors) == 2:
        return np.array([[1.0, factors[0]], [factors[1], 1.0]])
    xy, xz, yx, yz, zx, zy = factors
    return np.array([[1.0, xy, xz], [yx, 1.0, yz], [zx, zy, 1.0]])
