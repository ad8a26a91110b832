"""Audio operators (spectral)."""
