"""Where penstock keeps what it makes for itself on this machine."""
from __future__ import annotations

import os


def default_work_dir() -> str:
    """The user's cache folder for penstock's sample data and its built C code:
    $XDG_CACHE_HOME/penstock or ~/.cache/penstock. Not a folder named penstock in the temporary
    folder: scripts run from there would import it as a namespace package instead of penstock."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "penstock")
