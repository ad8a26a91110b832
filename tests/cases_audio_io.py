"""Operator coverage cases of the audio operators (io)."""
CASES = {}
