"""``nvidia.dali.ops``: penstock's operator classes under their current DALI names, and the older
names DALI programs still use (FileReader, nvJPEGDecoder, ImageDecoder, ImageDecoderRandomCrop,
CoinFlip, ...), each the same class as its current name."""
import sys

from penstock import ops as _ops
from penstock.compat.dali import deprecated as _deprecated
from penstock.graph import DataNode as _DataNode  # noqa: F401  (DALI programs test outputs against it)


# the operator classes, Compose and the namespaces: not penstock.ops' own imports
_deprecated.mirror(__name__, _ops, lambda name, value: isinstance(value, type) or name == "Compose")
# older names, as DALI kept them (FileReader, nvJPEGDecoder, ...)
_deprecated.install(sys.modules[__name__], _ops, lambda entry: entry[1])
