"""nvImageCodec decode throughput by backend configuration, with and without regions of interest, and
the cost of wrapping the results as torch tensors: the ceilings the mixed decoders work against.

usage: python benchmarks/decode_probe.py DATA_DIR [--batch-size 256] [--batches 8]
"""
import argparse
import glob
import time

import numpy as np
import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=8)
    args = parser.parse_args()
    from nvidia import nvimgcodec
    files = sorted(glob.glob(f"{args.data}/*/*.jpg"))[:args.batch_size * args.batches]
    encoded = [np.fromfile(path, np.uint8) for path in files]
    rng = np.random.default_rng(0)
    kinds = nvimgcodec.BackendKind
    configs = {
        "default backends": None,
        "HW only": [nvimgcodec.Backend(kinds.HW_GPU_ONLY)],
        "HW 0.65 + hybrid": [nvimgcodec.Backend(kinds.HW_GPU_ONLY, load_hint=0.65), nvimgcodec.Backend(kinds.HYBRID_CPU_GPU)],
        "HW 0.9 + hybrid": [nvimgcodec.Backend(kinds.HW_GPU_ONLY, load_hint=0.9), nvimgcodec.Backend(kinds.HYBRID_CPU_GPU)],
        "hybrid only": [nvimgcodec.Backend(kinds.HYBRID_CPU_GPU)],
    }
    params = nvimgcodec.DecodeParams(apply_exif_orientation=False, color_spec=nvimgcodec.ColorSpec.SRGB,
                                     sample_format=nvimgcodec.SampleFormat.I_RGB)
    stream = torch.cuda.Stream()
    for name, backends in configs.items():
        try:
            decoder = nvimgcodec.Decoder(max_num_cpu_threads=15, backends=backends) if backends else \
                nvimgcodec.Decoder(max_num_cpu_threads=15)
        except Exception as error:  # a backend this machine lacks
            print(f"{name:20s} unavailable: {error}")
            continue
        for roi in (False, True):
            batches = []
            started = time.perf_counter()
            for b in range(args.batches):
                streams = []
                for data in encoded[b * args.batch_size:(b + 1) * args.batch_size]:
                    code_stream = nvimgcodec.CodeStream(data)
                    if roi:
                        h, w = code_stream.height, code_stream.width
                        ch, cw = int(h * rng.uniform(0.4, 1)), int(w * rng.uniform(0.4, 1))
                        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
                        code_stream = code_stream.get_sub_code_stream(region=nvimgcodec.Region(top, left, top + ch, left + cw))
                    streams.append(code_stream)
                batches.append(streams)
            prepare = time.perf_counter() - started
            decoder.decode(batches[0], params=params, cuda_stream=stream.cuda_stream)  # warm-up
            torch.cuda.synchronize()
            started = time.perf_counter()
            wrap = 0.0
            for streams in batches:
                images = decoder.decode(streams, params=params, cuda_stream=stream.cuda_stream)
                wrap_started = time.perf_counter()
                tensors = [torch.as_tensor(image, device="cuda") for image in images]
                wrap += time.perf_counter() - wrap_started
            torch.cuda.synchronize()
            seconds = time.perf_counter() - started
            count = args.batch_size * args.batches
            print(f"{name:20s} roi={roi!s:5s} {count / seconds:9,.0f} images/s  (wrapping as tensors "
                  f"{wrap / count * 1e6:5.1f} us/image, CodeStream+region {prepare / count * 1e6:5.1f} us/image)",
                  flush=True)


if __name__ == "__main__":
    main()
