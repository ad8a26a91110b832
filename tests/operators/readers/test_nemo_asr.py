"""readers.nemo_asr against soundfile's own reading of the files and the manifest as written:
which entries a manifest keeps (DALI's rules for bad lines and durations), the outputs and their
types, offsets and durations in frames, downmixing, resampling's lengths, text, indices, shards, and
errors that name the manifest or the file. Audio is compared exactly where no resampling happens
(the same libsndfile decode), and within 1e-3 of scipy's polyphase resampling of a smooth tone."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from helpers_data import no_hang  # noqa: F401  (autouse: a test that hangs fails instead)
from helpers_data import read_one_epoch
from penstock import fn, types


def tone(seconds: float, rate: int, channels: int = 1, frequency: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    mono = 0.4 * np.sin(2 * np.pi * frequency * t)
    return np.stack([mono * (1 - 0.3 * c) for c in range(channels)], 1).astype(np.float32)


def write_corpus(folder, entries: list[dict], lines_before: list[str] = ()) -> str:
    """Writes each entry's audio (entry["audio"]: (rate, samples)) and a manifest of the entries
    (with any raw lines put first); returns the manifest's path."""
    lines = list(lines_before)
    for number, entry in enumerate(entries):
        rate, samples = entry.pop("audio")
        path = folder / f"clip_{number}.{entry.pop('format', 'wav')}"
        soundfile.write(path, samples, rate, subtype="PCM_16")
        lines.append(json.dumps({"audio_filepath": str(path), **entry}))
    manifest = folder / "manifest.json"
    manifest.write_text("\n".join(lines) + "\n")
    return str(manifest)


def read_all(manifest, batch_size=2, **reader_args) -> list[tuple]:
    def outputs():
        read = fn.readers.nemo_asr(manifest_filepaths=[manifest], name="Reader", **reader_args)
        return tuple(read) if isinstance(read, (tuple, list)) else (read,)
    return read_one_epoch(outputs, batch_size)


def decoded(path) -> np.ndarray:
    return soundfile.read(path, dtype="float32", always_2d=True)[0]


def test_outputs_are_the_audio_its_files_rate_the_text_and_the_index(tmp_path):
    manifest = write_corpus(tmp_path, [
        {"audio": (16000, tone(0.25, 16000)), "duration": 0.25, "text": "hello world"},
        {"audio": (8000, tone(0.5, 8000, channels=2)), "text": "stéreo"},
        {"audio": (22050, tone(0.1, 22050)), "format": "flac"}])
    read = read_all(manifest, read_idxs=True, downmix=False)
    assert len(read) == 3
    for number, (audio, rate, text, index) in enumerate(read):
        want = decoded(tmp_path / f"clip_{number}.{'flac' if number == 2 else 'wav'}")
        np.testing.assert_array_equal(audio, want)
        assert audio.dtype == np.float32 and rate.dtype == np.float32 and rate.shape == ()
        assert text.dtype == np.uint8 and index.dtype == np.int64 and index.shape == (1,)
        assert int(index[0]) == number
    assert [float(rate) for _, rate, _, _ in read] == [16000.0, 8000.0, 22050.0]
    assert [bytes(text).decode() for _, _, text, _ in read] == ["hello world", "stéreo", ""]


def test_downmix_averages_the_channels_into_one_dimension(tmp_path):
    stereo = tone(0.2, 16000, channels=2)
    manifest = write_corpus(tmp_path, [{"audio": (16000, stereo)}])
    [(audio,)] = read_all(manifest, batch_size=1, read_sample_rate=False, read_text=False)
    assert audio.ndim == 1
    np.testing.assert_allclose(audio, decoded(tmp_path / "clip_0.wav").mean(1), atol=1e-6)


@pytest.mark.parametrize("dtype, scale", [(types.INT16, 32767), (types.INT32, 2147483647)])
def test_integer_output_is_full_scale(tmp_path, dtype, scale):
    manifest = write_corpus(tmp_path, [{"audio": (16000, tone(0.1, 16000))}])
    [(audio,)] = read_all(manifest, batch_size=1, read_sample_rate=False, read_text=False, dtype=dtype)
    assert audio.dtype == np.dtype(dtype.numpy)
    np.testing.assert_allclose(audio / scale, decoded(tmp_path / "clip_0.wav")[:, 0], atol=2 / 32767)


def test_offset_and_duration_choose_whole_frames_limited_to_the_file(tmp_path):
    samples = tone(1.0, 8000)
    manifest = write_corpus(tmp_path, [
        {"audio": (8000, samples), "offset": 0.25, "duration": 0.5},
        {"audio": (8000, samples), "offset": 0.75, "duration": 0.5},  # past the end: to the end
        {"audio": (8000, samples), "offset": 0.1}])
    read = [audio for audio, in read_all(manifest, batch_size=3, read_sample_rate=False, read_text=False)]
    whole = decoded(tmp_path / "clip_0.wav")[:, 0]
    for audio, (start, stop) in zip(read, [(2000, 6000), (6000, 8000), (800, 8000)]):
        np.testing.assert_array_equal(audio, whole[start:stop])


def test_resampling_gives_the_target_rates_length_and_the_tone(tmp_path):
    from scipy.signal import resample_poly
    manifest = write_corpus(tmp_path, [{"audio": (22050, tone(0.5, 22050, frequency=300))}])
    [(audio, rate)] = read_all(manifest, batch_size=1, read_text=False, sample_rate=16000)
    assert len(audio) == int(np.ceil(len(tone(0.5, 22050)) * 16000 / 22050)) and float(rate) == 22050.0
    want = resample_poly(decoded(tmp_path / "clip_0.wav")[:, 0].astype(np.float64), 320, 441)
    inner = slice(200, len(want) - 200)  # the filters' edges differ
    np.testing.assert_allclose(audio[inner], want[inner], atol=1e-3)


def test_entries_kept_follow_dalis_rules(tmp_path, capfd):
    entries = [{"audio": (8000, tone(seconds, 8000)), "duration": seconds} for seconds in (0.1, 0.3, 0.6)]
    entries.append({"audio": (8000, tone(0.2, 8000))})  # no duration: -1 s
    manifest = write_corpus(tmp_path, entries, lines_before=["", "not json", json.dumps({"text": "no path"})])
    read = read_all(manifest, batch_size=1, read_sample_rate=False, read_text=False, read_idxs=True,
                    min_duration=0.2, max_duration=0.5)
    assert [len(audio) for audio, _ in read] == [2400] and [int(index[0]) for _, index in read] == [0]
    assert [len(audio) for audio, in read_all(manifest, batch_size=1, read_sample_rate=False, read_text=False,
                                              max_duration=0.5)] == [800, 2400, 1600]
    assert "Skipping" in capfd.readouterr().err


def test_shards_partition_the_entries(tmp_path):
    manifest = write_corpus(tmp_path, [{"audio": (8000, tone(0.01 * (n + 1), 8000))} for n in range(5)])
    lengths = [sorted(len(audio) for audio, in read_all(manifest, batch_size=1, read_sample_rate=False,
                                                         read_text=False, num_shards=2, shard_id=shard))
               for shard in (0, 1)]
    assert sorted(lengths[0] + lengths[1]) == [80 * (n + 1) for n in range(5)]


def test_errors_name_the_manifest_or_the_file(tmp_path):
    with pytest.raises(ValueError, match="manifest.*missing.json"):
        read_all(str(tmp_path / "missing.json"))
    empty = tmp_path / "empty.json"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no entries"):
        read_all(str(empty))
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt nothing more")
    manifest = tmp_path / "one.json"
    manifest.write_text(json.dumps({"audio_filepath": str(broken)}) + "\n")
    with pytest.raises(Exception, match="broken.wav"):
        read_all(str(manifest), batch_size=1)
    with pytest.raises(Exception, match="dtype"):
        read_all(str(manifest), dtype=types.UINT8)
