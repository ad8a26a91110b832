"""Every case of the tier, from the families' specs."""
from conformance import (cases_audio_io, cases_audio_signal, cases_audio_spectral, cases_color, cases_decoders,
                         cases_extras, cases_filters, cases_geometry, cases_noise, cases_readers, cases_segmentation,
                         cases_sequences, cases_sources, cases_tensors, cases_transforms, cases_warps)
from conformance.harness import expand

# the operators others are changing now come last
FAMILIES = (cases_sources, cases_decoders, cases_readers, cases_segmentation, cases_sequences, cases_extras,
            cases_warps, cases_filters, cases_color, cases_noise, cases_transforms, cases_geometry, cases_tensors,
            cases_audio_io, cases_audio_signal, cases_audio_spectral)

CASES = expand([spec for family in FAMILIES for spec in family.SPECS])
