"""Conformance cases of the audio operators (io)."""
SPECS = []
