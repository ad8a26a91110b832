"""DALI's affine warp of volumes (DHWC), on numpy arrays and on torch tensors alike (``xp``): each
output voxel's centre (x + 0.5, y + 0.5, z + 0.5) mapped by a 3x4 float32 matrix to input
coordinates (x along W, y along H, z along D; origin at the corner of the first voxel), in DALI's
float32 order (the row's products summed left to right, then the translation), then sampled by the
nearest voxel or trilinearly (DALI's lerps: along x, then y, then z), the outside the fill value or,
without one, the nearest edge voxel."""
from __future__ import annotations

import numpy as np


def affine_volume(xp, volume, matrix, out_shape: tuple, nearest: bool, fill, dtype):
    """``volume`` [D, H, W, C] warped into an output of (depth, height, width) ``out_shape`` and
    ``dtype`` (numpy dtype for numpy, torch dtype for torch). ``matrix``: 3x4 float32 (numpy),
    output centres to input coordinates. ``fill``: None (edges repeated), or one value or one per
    channel, already converted to the output type's values."""
    torch_like = xp is not np
    f32 = xp.float32
    m = np.asarray(matrix, np.float32).reshape(3, 4)
    depth, height, width = out_shape
    device = {"device": volume.device} if torch_like else {}
    grids = [xp.arange(n, dtype=f32, **device) + 0.5 for n in (width, height, depth)]
    x, y, z = grids[0][None, None, :], grids[1][None, :, None], grids[2][:, None, None]
    coords = []
    for row in m:  # (x, y, z) of the source, in DALI's float32 order
        total = (x * float(row[0]) + y * float(row[1])) + z * float(row[2])
        coords.append(total + float(row[3]))
    in_depth, in_height, in_width, channels = volume.shape
    extents = (in_width, in_height, in_depth)
    source = volume.reshape(-1, channels)

    def gather(ix, iy, iz):
        inside = (ix >= 0) & (ix < in_width) & (iy >= 0) & (iy < in_height) & (iz >= 0) & (iz < in_depth)
        cx, cy, cz = (xp.clip(index, 0, extent - 1) for index, extent in zip((ix, iy, iz), extents))
        values = source[((cz * in_height + cy) * in_width + cx).reshape(-1)].reshape(*ix.shape, channels)
        if fill is None:
            return values
        fills = np.broadcast_to(np.asarray(fill, np.float64), (channels,))
        border = xp.asarray(fills.astype(np.float32)) if not torch_like else \
            xp.as_tensor(fills.astype(np.float32), device=volume.device)
        return xp.where(inside[..., None], values.astype(f32) if not torch_like else values.to(f32), border)

    def floor_int(values):
        return xp.floor(values).astype(np.int64) if not torch_like else xp.floor(values).to(xp.int64)

    if nearest:
        result = gather(*(floor_int(c) for c in coords))
        return _converted(xp, result, dtype)
    shifted = [c - 0.5 for c in coords]
    x0, y0, z0 = (floor_int(c) for c in shifted)
    as_f32 = (lambda v: v.astype(np.float32)) if not torch_like else (lambda v: v.to(f32))
    qx, qy, qz = (as_f32(c - as_f32(i)) for c, i in zip(shifted, (x0, y0, z0)))
    px, py = 1 - qx, 1 - qy
    qx, px, qy, py, qz = (v[..., None] for v in (qx, px, qy, py, qz))

    def at(dx, dy, dz):
        return as_f32(gather(x0 + dx, y0 + dy, z0 + dz))
    s00 = at(0, 0, 0) * px + at(1, 0, 0) * qx
    s01 = at(0, 1, 0) * px + at(1, 1, 0) * qx
    s10 = at(0, 0, 1) * px + at(1, 0, 1) * qx
    s11 = at(0, 1, 1) * px + at(1, 1, 1) * qx
    s0 = s00 * py + s01 * qy
    s1 = s10 * py + s11 * qy
    return _converted(xp, s0 + (s1 - s0) * qz, dtype)


def _converted(xp, values, dtype):
    """DALI's ConvertSat: integers to nearest (halves away from zero), saturated."""
    if xp is np:
        dtype = np.dtype(dtype)
        if dtype.kind in "iu" and values.dtype.kind == "f":
            info = np.iinfo(dtype)
            return np.clip(np.trunc(values + np.copysign(np.float32(0.5), values)), info.min, info.max).astype(dtype)
        return np.ascontiguousarray(values.astype(dtype, copy=False))
    if not dtype.is_floating_point and values.is_floating_point():
        info = xp.iinfo(dtype)
        rounded = xp.trunc(values + xp.copysign(xp.full_like(values, 0.5), values))
        return rounded.clamp_(info.min, info.max).to(dtype)
    return values.to(dtype).contiguous()
