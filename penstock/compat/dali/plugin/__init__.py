"""``nvidia.dali.plugin``: framework iterators."""
