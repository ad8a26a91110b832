"""Conformance cases of the audio operators (spectral)."""
SPECS = []
