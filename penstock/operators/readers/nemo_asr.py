"""readers.nemo_asr: NeMo speech manifests."""
