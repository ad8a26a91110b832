"""A QuartzNet-style speech training input pipeline feeding a tiny model for a few steps.

The pipeline is NeMo's/QuartzNet's feature front end, written with DALI's operator names:
readers.nemo_asr (decode at 16 kHz, mono) -> dither -> pre-emphasis -> spectrogram (20 ms windows,
10 ms steps) -> 64 mel bands -> log -> per-feature normalization -> padded to the batch's longest
clip. The data is made here: speech-like clips (a voiced source of harmonics with a pitch contour,
two formant resonances, syllable-rate loudness and silences around, some noise) of 1-4 s, at 16 and
44.1 kHz, as WAV and FLAC, with a NeMo manifest whose text names each clip's word class (its vowel's
formants and its pitch contour). A tiny 1-D convolutional network learns the word class from the
features; its loss falls.

usage: python examples/speech_features.py [--clips 48] [--steps 30] [--batch-size 8] [--device cpu|gpu]
       [--work-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np

WORDS = ("rise", "fall", "flat", "wave")  # the pitch contour of each word class
SAMPLE_RATES = (16000, 44100)


def speech_like(word: int, seconds: float, rate: int, rng: np.random.Generator) -> np.ndarray:
    """One float32 clip: harmonics of a pitch whose contour depends on the word, shaped by the
    word's two formants and a syllable envelope, between short silences, with a little noise."""
    count = int(seconds * rate)
    t = np.arange(count) / rate
    base = rng.uniform(100, 220)
    shape = {0: 1 + 0.5 * t / seconds, 1: 1.5 - 0.5 * t / seconds, 2: np.ones_like(t),
             3: 1 + 0.15 * np.sin(2 * np.pi * 3 * t)}[word]
    phase = 2 * np.pi * np.cumsum(base * shape) / rate
    formants = [f * rng.uniform(0.9, 1.1) for f in ((300, 2300), (700, 1200), (500, 1800), (800, 1500))[word]]
    voice = np.zeros(count)
    for harmonic in range(1, 30):
        frequency = base * harmonic * shape
        gain = sum(1 / (1 + ((frequency - f) / 120) ** 2) for f in formants) / harmonic ** 0.5
        voice += gain * np.sin(harmonic * phase) * (frequency < rate / 2)
    syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3, 5) * t), 0, None) ** 0.5
    quiet = int(0.15 * rate)
    envelope = np.ones(count)
    envelope[:quiet] = envelope[-quiet:] = 0.0
    clip = voice * syllables * envelope
    clip = 0.5 * clip / max(np.abs(clip).max(), 1e-9) + rng.normal(0, 0.003, count)
    return clip.astype(np.float32)


def make_corpus(folder: str, clips: int, seconds=(1.0, 4.0), seed: int = 0) -> str:
    """Writes ``clips`` speech-like clips (WAV and FLAC, 16 and 44.1 kHz) and their NeMo manifest
    into ``folder``; returns the manifest's path."""
    import soundfile
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    lines = []
    for index in range(clips):
        word, rate = index % len(WORDS), SAMPLE_RATES[index % 3 == 2]
        duration = float(rng.uniform(*seconds))
        path = os.path.join(folder, f"clip_{index:05d}.{'flac' if index % 2 else 'wav'}")
        soundfile.write(path, speech_like(word, duration, rate, rng), rate, subtype="PCM_16")
        lines.append(json.dumps({"audio_filepath": path, "duration": round(duration, 3), "text": WORDS[word]}))
    manifest = os.path.join(folder, "manifest.json")
    with open(manifest, "w") as file:
        file.write("\n".join(lines) + "\n")
    return manifest


def speech_pipeline(api, manifest: str, batch_size: int, threads: int, device: str, device_id=0, seed: int = 1,
                    shuffle: bool = True):
    """QuartzNet's feature pipeline (NeMo's AudioToMelSpectrogramPreprocessor, as DALI users write
    it): features (64 mel bands x frames, padded to the batch) and the transcript's bytes."""
    fn, types = api.fn, api.types
    rate, window, step = 16000, 0.02, 0.01

    @api.pipeline_def(batch_size=batch_size, num_threads=threads, device_id=device_id if device == "gpu" else None,
                      seed=seed)
    def speech():
        audio, text = fn.readers.nemo_asr(manifest_filepaths=[manifest], sample_rate=rate, downmix=True,
                                          read_sample_rate=False, read_text=True, random_shuffle=shuffle,
                                          dtype=types.FLOAT, name="Reader")
        if device == "gpu":
            audio = audio.gpu()
        audio = audio + fn.random.normal(audio) * 1e-5  # dither
        audio = fn.preemphasis_filter(audio, preemph_coeff=0.97)
        power = fn.spectrogram(audio, nfft=512, window_length=int(window * rate), window_step=int(step * rate),
                               center_windows=True, power=2)
        mel = fn.mel_filter_bank(power, sample_rate=rate, nfilter=64)
        log = fn.to_decibels(mel, multiplier=np.log(10), reference=1.0, cutoff_db=np.log(1e-20))  # natural log
        features = fn.normalize(log, axes=[1], epsilon=1e-5)  # each mel band over the clip's frames
        # dense per batch, for the framework: frames to the batch's longest clip, transcripts with zeros
        return fn.pad(features, axes=[1], fill_value=0), fn.pad(text, fill_value=0)

    return speech()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=48)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--work-dir", default=None)
    args = parser.parse_args()

    import torch

    import penstock.compat.dali as api
    from penstock.compat.dali.plugin.pytorch import DALIGenericIterator
    folder = args.work_dir or tempfile.mkdtemp(prefix="speech_")
    manifest = make_corpus(os.path.join(folder, "speech"), args.clips)
    pipe = speech_pipeline(api, manifest, args.batch_size, args.threads, args.device)
    pipe.build()
    loader = DALIGenericIterator(pipe, ["features", "text"], reader_name="Reader", auto_reset=True)
    device = torch.device("cuda" if args.device == "gpu" else "cpu")
    model = torch.nn.Sequential(torch.nn.Conv1d(64, 32, 5, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(32, 32, 5, padding=2, stride=2), torch.nn.ReLU(),
                                torch.nn.AdaptiveMaxPool1d(1), torch.nn.Flatten(), torch.nn.Linear(32, len(WORDS)))
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses, seen, began, step = [], 0, time.perf_counter(), 0
    while step < args.steps:
        for batch in loader:
            features = batch[0]["features"].to(device).float()
            words = [bytes(t.cpu().numpy()[t.cpu().numpy() != 0]).decode() for t in batch[0]["text"]]
            labels = torch.tensor([WORDS.index(word) for word in words], device=device)
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            seen += len(labels)
            step += 1
            if step == 1:
                print(f"features {tuple(features.shape)} (batch, mel bands, frames), {features.dtype}")
            if step >= args.steps:
                break
    elapsed = time.perf_counter() - began
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    print(f"{args.clips} clips, {step} steps on {args.device}: {seen / elapsed:.0f} clips/s, "
          f"loss {first:.3f} -> {last:.3f} over {step} steps")


if __name__ == "__main__":
    main()
