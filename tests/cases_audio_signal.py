"""Operator coverage cases of the audio operators (signal)."""
CASES = {}
