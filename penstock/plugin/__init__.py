"""Framework iterators: ``penstock.plugin.pytorch``."""
