"""Functional operators: ``fn.resize(images, resize_shorter=256)`` and friends, one function per
operator schema in the registry, with the schema's signature and docs."""
from __future__ import annotations

import sys

from penstock import operators  # noqa: F401  (registers every operator)
from penstock.api import make_namespaces, operator_functions
from penstock.graph import invoke


make_namespaces(sys.modules[__name__], operator_functions(__name__, invoke))

from penstock import math  # noqa: E402,F401  (fn.math.sqrt(x) and friends, as nvidia.dali.math)
