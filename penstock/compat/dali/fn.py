"""``nvidia.dali.fn``: penstock's functional operators, under the same names, and the older
names DALI programs still use (compat.dali.deprecated)."""
import sys

from penstock import fn as _fn
from penstock.compat.dali import deprecated

for _name, _value in vars(_fn).items():
    if not _name.startswith("__"):
        setattr(sys.modules[__name__], _name, _value)
# every namespace (readers, transforms, experimental.decoders, ...) importable under this module's name
# (each a package to the import system, as DALI's are, however its imports are redirected)
__path__ = []
for _module_name, _module in list(sys.modules.items()):
    if _module_name.startswith(_fn.__name__ + "."):
        sys.modules[__name__ + _module_name[len(_fn.__name__):]] = _module
        _module.__path__ = []

# the older names DALI programs still use (fn.image_decoder_random_crop, fn.file_reader, ...)
deprecated.install(sys.modules[__name__], _fn, lambda entry: entry[0])
