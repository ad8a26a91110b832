"""``nvidia.dali._conditionals``: DALI's private machinery for `if` in pipeline definitions.
penstock rewrites `if` statements its own way (penstock.conditionals); DALI programs reach it
through the public ``enable_conditionals=True`` and need nothing from here, but may import it."""
from penstock.conditionals import convert  # noqa: F401  (the rewrite of a pipeline definition)
