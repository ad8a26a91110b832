"""``nvidia.dali.fn``: penstock's functional operators, under the same names, and the older
names DALI programs still use (compat.dali.deprecated)."""
import sys

from penstock import fn as _fn
from penstock.compat.dali import deprecated as _deprecated

# only the operators and their namespaces: DALI's fn has no math and no other modules
_deprecated.mirror(__name__, _fn, lambda name, value: hasattr(value, "_schema_name"))
# the older names DALI programs still use (fn.image_decoder_random_crop, fn.file_reader, ...)
_deprecated.install(sys.modules[__name__], _fn, lambda entry: entry[0])
