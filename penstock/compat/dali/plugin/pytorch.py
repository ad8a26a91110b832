"""``nvidia.dali.plugin.pytorch``: DALIGenericIterator and DALIClassificationIterator are
penstock's PyTorch iterators, with DALI's arguments (including fill_last_batch and size as the third
positional argument)."""
from penstock.plugin.pytorch import ClassificationIterator, GenericIterator, LastBatchPolicy, TvTensors, to_torch


class DALIGenericIterator(GenericIterator):
    """penstock.plugin.pytorch.GenericIterator under DALI's name."""


class DALIClassificationIterator(ClassificationIterator):
    """penstock.plugin.pytorch.ClassificationIterator under DALI's name."""



__all__ = ["DALIClassificationIterator", "DALIGenericIterator", "LastBatchPolicy", "TvTensors", "to_torch"]
