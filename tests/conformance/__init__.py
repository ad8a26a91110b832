"""Conformance tier: each shared operator and the Python API run under NVIDIA DALI (the reference)
and under penstock.compat.dali, and must agree. Skipped where nvidia.dali is not installed."""
