"""Audio operators: resampling, the speech features (spectrogram, power spectrum, mel filter bank,
MFCC, decibels), pre-emphasis and the non-silent region."""
from penstock.operators.audio import resample, signal, spectral  # noqa: F401  (registers the family's operators)
