"""``nvidia.dali.math``: element-wise functions of data nodes (penstock.math)."""
from penstock.math import *  # noqa: F401,F403
from penstock.math import __all__  # noqa: F401
