"""``nvidia.dali.fn``: penstock's functional operators, under the same names, and the older
names DALI programs still use (compat.dali.deprecated)."""
import sys

from penstock import fn as _fn
from penstock.compat.dali import deprecated as _deprecated


def _export() -> None:
    """Only the operators and their namespaces: DALI's fn has no math and no other modules."""
    module = sys.modules[__name__]
    for name, value in vars(_fn).items():
        is_namespace = getattr(value, "__name__", "").startswith(_fn.__name__ + ".")
        if hasattr(value, "_schema_name") or is_namespace:
            setattr(module, name, value)
    # every namespace (readers, transforms, experimental.decoders, ...) importable under this
    # module's name (each a package to the import system, as DALI's are, however its imports are
    # redirected)
    for module_name, namespace in list(sys.modules.items()):
        if module_name.startswith(_fn.__name__ + "."):
            sys.modules[__name__ + module_name[len(_fn.__name__):]] = namespace
            namespace.__path__ = []


__path__ = []
_export()
# the older names DALI programs still use (fn.image_decoder_random_crop, fn.file_reader, ...)
_deprecated.install(sys.modules[__name__], _fn, lambda entry: entry[0])
