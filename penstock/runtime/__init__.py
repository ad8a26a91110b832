"""What keeps state for the GPU work the executor runs, below the operator contract: the GPU decode
engine and its row format, nvJPEG's hardware decoder and the native thread that makes its calls,
nvImageCodec loaded once, the pinned staging pools, OpenCV's process-wide settings, and the build of
penstock's C code (csrc/)."""
