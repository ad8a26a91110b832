"""``nvidia.dali.ops``: penstock's operator classes under their current DALI names, and the older
names DALI programs still use (FileReader, nvJPEGDecoder, ImageDecoder, ImageDecoderRandomCrop,
CoinFlip, ...), each the same class as its current name."""
import sys

from penstock import ops as _ops
from penstock.compat.dali import deprecated

for _name, _value in vars(_ops).items():
    if not _name.startswith("__"):
        setattr(sys.modules[__name__], _name, _value)
# every namespace (readers, transforms, experimental.decoders, ...) importable under this module's name
# (each a package to the import system, as DALI's are, however its imports are redirected)
__path__ = []
for _module_name, _module in list(sys.modules.items()):
    if _module_name.startswith(_ops.__name__ + "."):
        sys.modules[__name__ + _module_name[len(_ops.__name__):]] = _module
        _module.__path__ = []

# older names, as DALI kept them (FileReader, nvJPEGDecoder, ...)
deprecated.install(sys.modules[__name__], _ops, lambda entry: entry[1])
