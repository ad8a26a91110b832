"""The GPU runtime the executor owns: the decode engine and its lanes, the native decode thread, the pinned staging pools, and the build of penstock's C helpers."""
