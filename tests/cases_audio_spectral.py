"""Operator coverage cases of the audio operators (spectral)."""
CASES = {}
