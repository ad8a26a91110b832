"""Bundled sample photographs (public domain / CC0) for examples and tests.

The images are small baseline JPEGs derived from scikit-image's sample data;
see ``ATTRIBUTION.md`` in this directory for authors, sources and licenses.
"""

import os


def sample_photo_paths() -> list[str]:
    """Return the sorted absolute paths of the bundled ``.jpg`` sample photos."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(
        os.path.join(here, name)
        for name in os.listdir(here)
        if name.lower().endswith(".jpg")
    )
