"""What the video decoders and readers share: DALI's padding of frames asked for past a video's end."""
from __future__ import annotations

# pad_mode's names, DALI's aliases included, and the numpy.pad mode of each (None: shorter sequences)
PAD_MODES = {"none": None, "constant": "constant", "edge": "edge", "repeat": "edge", "reflect_1001": "symmetric",
             "symmetric": "symmetric", "reflect_101": "reflect", "reflect": "reflect"}


def padded_index(index: int, count: int, mode: str) -> int:
    """The frame of a video of ``count`` frames that index ``index`` (past its end) takes."""
    if index < count:
        return index
    if mode == "edge" or count == 1:
        return count - 1
    if mode == "symmetric":  # ... C B A | A B C | C B A ...
        position = index % (2 * count)
        return position if position < count else 2 * count - 1 - position
    position = index % (2 * (count - 1))  # reflect: ... B | A B C | B A ...
    return position if position < count else 2 * (count - 1) - position
