"""Make a speech-like corpus with a NeMo manifest for side_by_side.py's speech cases: clips of 2-20 s
(examples/speech_features.py's synthesis: harmonics with a pitch contour, formants, syllables,
silences and noise) at 16 and 44.1 kHz, as 16-bit WAV and FLAC.

usage: python benchmarks/make_speech.py OUT_DIR [CLIPS] [--shortest 2] [--longest 20] [--seed 0]
Writes OUT_DIR/clip_*.wav|flac and OUT_DIR/manifest.json.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("clips", type=int, nargs="?", default=512)
    parser.add_argument("--shortest", type=float, default=2.0)
    parser.add_argument("--longest", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from speech_features import make_corpus
    manifest = make_corpus(args.out, args.clips, (args.shortest, args.longest), args.seed)
    print(f"{args.clips} clips of {args.shortest:g}-{args.longest:g} s, manifest {manifest}")


if __name__ == "__main__":
    main()
