"""``nvidia.dali.ops``: penstock's operator classes under their current DALI names, and the older
names DALI programs still use (FileReader, nvJPEGDecoder, ImageDecoder, ImageDecoderRandomCrop,
CoinFlip, ...), each the same class as its current name."""
import sys

from penstock import ops as _ops
from penstock.compat.dali import deprecated

for _name, _value in vars(_ops).items():
    if not _name.startswith("__"):
        setattr(sys.modules[__name__], _name, _value)
for _namespace in ("readers", "decoders", "random"):
    sys.modules[f"{__name__}.{_namespace}"] = getattr(_ops, _namespace)

# older names, as DALI kept them (FileReader, nvJPEGDecoder, ...)
deprecated.install(sys.modules[__name__], _ops, lambda entry: entry[1])
