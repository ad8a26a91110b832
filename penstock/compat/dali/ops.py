"""``nvidia.dali.ops``: penstock's operator classes under their current DALI names, and the older
names DALI programs still use (FileReader, nvJPEGDecoder, ImageDecoder, ImageDecoderRandomCrop,
CoinFlip, ...), each the same class as its current name."""
import sys

from penstock import ops as _ops
from penstock.compat.dali import deprecated as _deprecated
from penstock.graph import DataNode as _DataNode  # noqa: F401  (DALI programs test outputs against it)


def _export() -> None:
    """The operator classes, Compose and the namespaces: not penstock.ops' own imports."""
    module = sys.modules[__name__]
    for name, value in vars(_ops).items():
        is_namespace = getattr(value, "__name__", "").startswith(_ops.__name__ + ".")
        if isinstance(value, type) or is_namespace or name == "Compose":
            setattr(module, name, value)
    # every namespace (readers, transforms, experimental.decoders, ...) importable under this
    # module's name (each a package to the import system, as DALI's are, however its imports are
    # redirected)
    for module_name, namespace in list(sys.modules.items()):
        if module_name.startswith(_ops.__name__ + "."):
            sys.modules[__name__ + module_name[len(_ops.__name__):]] = namespace
            namespace.__path__ = []


__path__ = []
_export()
# older names, as DALI kept them (FileReader, nvJPEGDecoder, ...)
_deprecated.install(sys.modules[__name__], _ops, lambda entry: entry[1])
