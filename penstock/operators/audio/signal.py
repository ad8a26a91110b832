"""Audio operators (signal)."""
