"""Audio operators (resample)."""
