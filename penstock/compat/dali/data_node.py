"""``nvidia.dali.data_node``: DataNode, the symbolic batch operators take and return."""
from penstock.graph import DataNode, newaxis

__all__ = ["DataNode", "newaxis"]
