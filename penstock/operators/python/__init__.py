"""Python functions as operators."""
from penstock.operators.python import python_function  # noqa: F401  (registers the family's operators)
