"""The layouts the family's image operators read: a layout refused as DALI words it, the layout an
input is read in (its own, or the default for its dimensions), the spatial axes of a layout, and
HWC inputs declared."""
from __future__ import annotations

from penstock.contract import OutputSpec
from penstock.operators.shared.images import declare_hwc


def layout_refused(op_name: str, layout: str, accepted: tuple) -> ValueError:
    """The error of an image operator given a layout it does not take (worded as DALI's)."""
    return ValueError(f'{op_name}: the layout "{layout}" does not match any of the allowed layouts '
                      f'({", ".join(accepted)})')


def image_layout(layout: str, ndim: int | None, accepted: tuple, defaults: dict, op_name: str) -> str:
    """The layout an image operator reads its input in: its own, one of ``accepted``, or for none
    the default for its number of dimensions (DALI's); '' while the dimensions are not known."""
    if not layout:
        if ndim is None:
            return ""
        if ndim not in defaults:
            raise ValueError(f"{op_name}: takes samples of {' or '.join(map(str, sorted(defaults)))} dimensions "
                             f"without a layout, got {ndim}")
        return defaults[ndim]
    if layout not in accepted:
        raise layout_refused(op_name, layout, accepted)
    if ndim is not None and ndim != len(layout):
        raise ValueError(f"{op_name}: a sample of {ndim} dimensions in the layout {layout!r}")
    return layout


def spatial_axes(layout: str) -> tuple[int, ...]:
    """The positions of the spatial axes (D, H, W) of ``layout``, outermost first."""
    return tuple(index for index, name in enumerate(layout) if name in "DHW")


def declare_hwc_layout(spec: OutputSpec, op_name: str) -> OutputSpec:
    """``spec`` as an HWC image operator reads it: refuses other declared layouts (DALI reads an input
    without one as HWC and gives its output that layout)."""
    declare_hwc(spec, op_name)
    if spec.layout not in ("", "HWC"):
        raise layout_refused(op_name, spec.layout, ("HWC",))
    return spec.but(layout="HWC")
