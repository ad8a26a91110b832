"""``nvidia.dali.fn``: penstock's functional operators, under the same names."""
import sys

from penstock import fn as _fn

for _name, _value in vars(_fn).items():
    if not _name.startswith("__"):
        setattr(sys.modules[__name__], _name, _value)
for _namespace in ("readers", "decoders", "random"):
    sys.modules[f"{__name__}.{_namespace}"] = getattr(_fn, _namespace)
