"""``nvidia.dali.pipeline.experimental``: DALI's experimental pipeline_def (debug mode aside) is the
same decorator as pipeline_def here."""
from penstock.pipeline import pipeline_def

__all__ = ["pipeline_def"]
