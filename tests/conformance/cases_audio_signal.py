"""Conformance cases of the audio operators (signal)."""
SPECS = []
