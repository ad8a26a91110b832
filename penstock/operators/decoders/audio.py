"""decoders.audio: audio files decoded on the CPU."""
